/*
 * Allocation sites whose object sizes mix, for the estimator tests.
 *
 * Every site is a noinline function. The program counts exactly what each
 * site did and prints, per site, one line
 *
 *   site <function> live_objects=N live_bytes=B alloc_objects=N alloc_bytes=B
 *
 * and two histograms of the sizes behind those numbers (what the tests need
 * to derive the sampling variance of any estimator):
 *
 *   hist <function> live <size>x<count> <size>x<count> ...
 *   hist <function> alloc <size>x<count> ...
 *
 * A realloc counts as the allocation of its new size and the free of the
 * old block (the profiler's accounting).
 *
 * Usage:
 *   estimator_sites sites [scale]
 *       the five mixed-size sites, everything left as it is at exit;
 *   estimator_sites diff <grow_objects> <a.prof> <b.prof>
 *       a steady site and churn, dump A (heapsample_dump, found with dlsym),
 *       more churn and <grow_objects> new live 512-byte objects from
 *       site_grow, dump B; the `site` lines describe what changed between
 *       the two dumps (`delta_` fields) as well as the state at B.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))
#define MAX_SIZES 64

struct histogram {
    size_t size[MAX_SIZES];
    unsigned long count[MAX_SIZES];
    int used;
};

struct site {
    const char *name;
    struct histogram live, alloc;
};

static volatile unsigned long sink;

static void die(const char *what) {
    perror(what);
    exit(2);
}

static void add(struct histogram *h, size_t size, long n) {
    for (int i = 0; i < h->used; i++) {
        if (h->size[i] == size) {
            h->count[i] += n;
            return;
        }
    }
    if (h->used == MAX_SIZES) {
        fprintf(stderr, "too many distinct sizes\n");
        exit(2);
    }
    h->size[h->used] = size;
    h->count[h->used++] = n;
}

static void allocated(struct site *s, size_t size) {
    add(&s->alloc, size, 1);
    add(&s->live, size, 1);
}

static void freed(struct site *s, size_t size) {
    add(&s->live, size, -1);
}

static void *touch(void *p, size_t n) {
    if (!p)
        die("malloc");
    ((unsigned char *)p)[0] = (unsigned char)n;
    sink += ((unsigned char *)p)[0];
    return p;
}

static void **NOINLINE slots(size_t n) {
    void **v = calloc(n, sizeof(void *));
    if (!v)
        die("calloc");
    return v;
}

/* A deterministic generator, so every run allocates the same sizes. */
static uint64_t lcg_state = 0x9e3779b97f4a7c15u;
static uint64_t lcg(void) {
    lcg_state = lcg_state * 6364136223846793005u + 1442695040888963407u;
    return lcg_state >> 33;
}

static struct site small_and_huge = {"site_small_and_huge"};
static struct site size_spread = {"site_size_spread"};
static struct site wide_spread = {"site_wide_spread"};
static struct site churn = {"site_churn"};
static struct site realloc_growth = {"site_realloc_growth"};
static struct site steady = {"site_steady"};
static struct site grow = {"site_grow"};

/* Many small objects and a few huge ones, all kept live. */
static void NOINLINE site_small_and_huge(unsigned scale) {
    size_t n = 20000 * scale;
    void **keep = slots(n + 10);
    for (size_t i = 0; i < n; i++) {
        keep[i] = touch(malloc(100), 100);
        allocated(&small_and_huge, 100);
    }
    for (size_t i = 0; i < 10; i++) {
        keep[n + i] = touch(malloc(1 << 20), 1 << 20);
        allocated(&small_and_huge, 1 << 20);
    }
}

/* `n` objects with sizes drawn from `sizes`, every third freed; a macro
 * so that the allocations are the site function's own. */
#define SPREAD(site, sizes, n)                                                                     \
    do {                                                                                           \
        void **keep = slots(n);                                                                    \
        size_t *kept_size = (size_t *)slots(n);                                                    \
        for (size_t i = 0; i < (n); i++) {                                                         \
            size_t size = (sizes)[lcg() % (sizeof(sizes) / sizeof((sizes)[0]))];                   \
            keep[i] = touch(malloc(size), size);                                                   \
            kept_size[i] = size;                                                                   \
            allocated(site, size);                                                                 \
        }                                                                                          \
        for (size_t i = 0; i < (n); i += 3) {                                                      \
            free(keep[i]);                                                                         \
            freed(site, kept_size[i]);                                                             \
        }                                                                                          \
    } while (0)

/* A spread of sizes from 512 B to 64 KiB (powers of two). */
static void NOINLINE site_size_spread(unsigned scale) {
    static const size_t sizes[] = {512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
    SPREAD(&size_spread, sizes, 4000 * scale);
}

/* A wide spread, 16 B to 64 KiB (log-spaced): at a long period its small
 * sizes are expected to be sampled less than once per run. */
static void NOINLINE site_wide_spread(unsigned scale) {
    static const size_t sizes[] = {16,   24,   40,   64,    100,   160,   256,   400,
                                   640,  1000, 1600, 2560,  4000,  6400,  10000, 16000,
                                   25000, 40000, 65536};
    SPREAD(&wide_spread, sizes, 4000 * scale);
}

/* Churn of two very different sizes: 32 B and 256 KiB, freed at once. */
static void NOINLINE site_churn(unsigned scale, unsigned rounds) {
    for (size_t i = 0; i < (size_t)rounds * scale; i++) {
        free(touch(malloc(32), 32));
        allocated(&churn, 32);
        freed(&churn, 32);
        if (i % 160 == 0) {
            free(touch(malloc(256 << 10), 256 << 10));
            allocated(&churn, 256 << 10);
            freed(&churn, 256 << 10);
        }
    }
}

/* Buffers grown by realloc from 1 KiB to 64 KiB, the final ones kept. */
static void NOINLINE site_realloc_growth(unsigned scale) {
    size_t n = 300 * scale;
    void **keep = slots(n);
    for (size_t i = 0; i < n; i++) {
        size_t size = 1024;
        void *p = touch(malloc(size), size);
        allocated(&realloc_growth, size);
        while (size < (64 << 10)) {
            size_t bigger = size * 2;
            p = touch(realloc(p, bigger), bigger);
            freed(&realloc_growth, size);
            allocated(&realloc_growth, bigger);
            size = bigger;
        }
        keep[i] = p;
    }
}

/* Live objects of mixed sizes that do not change between the two dumps. */
static void NOINLINE site_steady(void) {
    void **keep = slots(4000);
    for (size_t i = 0; i < 4000; i++) {
        size_t size = (i % 10 == 0) ? 20000 : 200;
        keep[i] = touch(malloc(size), size);
        allocated(&steady, size);
    }
}

/* New live objects between the two dumps. */
static void NOINLINE site_grow(unsigned long objects) {
    void **keep = slots(objects + 1);
    for (size_t i = 0; i < objects; i++) {
        keep[i] = touch(malloc(512), 512);
        allocated(&grow, 512);
    }
}

static unsigned long objects_of(const struct histogram *h) {
    unsigned long n = 0;
    for (int i = 0; i < h->used; i++)
        n += h->count[i];
    return n;
}

static unsigned long bytes_of(const struct histogram *h) {
    unsigned long n = 0;
    for (int i = 0; i < h->used; i++)
        n += h->count[i] * h->size[i];
    return n;
}

static void print_histogram(const struct site *s, const char *which, const struct histogram *h) {
    printf("hist %s %s", s->name, which);
    for (int i = 0; i < h->used; i++)
        if (h->count[i])
            printf(" %zux%lu", h->size[i], h->count[i]);
    printf("\n");
}

static void report(const struct site *s) {
    printf("site %s live_objects=%lu live_bytes=%lu alloc_objects=%lu alloc_bytes=%lu\n", s->name,
           objects_of(&s->live), bytes_of(&s->live), objects_of(&s->alloc), bytes_of(&s->alloc));
    print_histogram(s, "live", &s->live);
    print_histogram(s, "alloc", &s->alloc);
}

static void dump_to(const char *path) {
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "heapsample_dump");
    if (!dump) {
        fprintf(stderr, "heapsample_dump not found: run under the shim\n");
        exit(3);
    }
    int error = dump(path);
    if (error) {
        fprintf(stderr, "heapsample_dump(%s): %s\n", path, strerror(error));
        exit(3);
    }
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "sites") == 0) {
        unsigned scale = argc > 2 ? (unsigned)atoi(argv[2]) : 1;
        site_small_and_huge(scale);
        site_size_spread(scale);
        site_wide_spread(scale);
        site_churn(scale, 200000);
        site_realloc_growth(scale);
        report(&small_and_huge);
        report(&size_spread);
        report(&wide_spread);
        report(&churn);
        report(&realloc_growth);
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "diff") == 0) {
        unsigned long grow_objects = strtoul(argv[2], NULL, 10);
        site_steady();
        site_churn(1, 50000);
        dump_to(argv[3]);
        site_churn(1, 50000);
        site_grow(grow_objects);
        dump_to(argv[4]);
        report(&steady);
        report(&grow);
        report(&churn);
        return 0;
    }
    fprintf(stderr, "usage: %s sites [scale] | diff <grow_objects> <a.prof> <b.prof>\n", argv[0]);
    return 2;
}
