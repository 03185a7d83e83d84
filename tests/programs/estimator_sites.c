/*
 * Allocation sites whose object sizes mix, for the estimator tests.
 *
 * Every site is a noinline function with exactly one allocation call, so
 * each site is one call stack and its numbers are that stack's. The
 * program counts exactly what each site did and prints, per site, two
 * histograms of the sizes behind its numbers (what the tests need to derive
 * the sampling variance of any estimator):
 *
 *   hist <function> live <size>x<count> <size>x<count> ...
 *   hist <function> alloc <size>x<count> ...
 *
 * A realloc counts as the allocation of its new size and the free of the
 * old block (the profiler's accounting). The program allocates nothing
 * else (its arrays are static, stdout's buffer too), so the sites add up to
 * the whole profile.
 *
 * Usage:
 *   estimator_sites sites <limit> [new]
 *       every site, everything left as it is at exit. <limit> is the
 *       detection limit of the period the run is profiled with, in bytes
 *       (ln 20 / -ln(1 - 1/R)): two sites allocate half and one and a half
 *       times it. `new` is a later version of the program: one site grows
 *       by a few small objects, one by 8 MiB, one shrinks;
 *   estimator_sites zero <n>
 *       n malloc(0), kept live;
 *   estimator_sites diff <grow_objects> <a.prof> <b.prof>
 *       a steady site and churn, dump A (heapsample_dump, found with dlsym),
 *       more churn and <grow_objects> new live 512-byte objects from
 *       site_grow, dump B; the histograms describe the state at B.
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
static char stdout_buffer[1 << 16];

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
    if (n == 0)
        return p;
    ((unsigned char *)p)[0] = (unsigned char)n;
    sink += ((unsigned char *)p)[0];
    return p;
}

/* A deterministic generator, so every run allocates the same sizes. */
static uint64_t lcg_state = 0x9e3779b97f4a7c15u;
static uint64_t lcg(void) {
    lcg_state = lcg_state * 6364136223846793005u + 1442695040888963407u;
    return lcg_state >> 33;
}

#define SITES 20
static struct site sites[SITES];
static int site_count;

static struct site *site_named(const char *name) {
    for (int i = 0; i < site_count; i++)
        if (strcmp(sites[i].name, name) == 0)
            return &sites[i];
    if (site_count == SITES) {
        fprintf(stderr, "too many sites\n");
        exit(2);
    }
    sites[site_count].name = name;
    return &sites[site_count++];
}

/* Pointers and sizes kept by the sites (static: no allocation of ours). */
#define SLOTS 300000
static void *slot[SLOTS];
static size_t slot_size[SLOTS];
static size_t slots_used;

static size_t take_slots(size_t n) {
    if (slots_used + n > SLOTS) {
        fprintf(stderr, "out of slots\n");
        exit(2);
    }
    slots_used += n;
    return slots_used - n;
}

/* `n` objects of the sizes `size(i)` from one malloc call, every `free_every`-th
 * freed (0: none). A macro, so that the call is the site function's own. */
#define SITE_LOOP(name, n, size_of_i, free_every)                                                  \
    do {                                                                                           \
        struct site *s = site_named(name);                                                         \
        size_t first = take_slots(n);                                                              \
        for (size_t i = 0; i < (n); i++) {                                                         \
            size_t size = (size_of_i);                                                             \
            /* Opaque: the compiler must not split the loop into one malloc                        \
             * call per size (one site, one call stack). */                                        \
            __asm__ volatile("" : "+r"(size));                                                     \
            slot[first + i] = touch(malloc(size), size);                                           \
            slot_size[first + i] = size;                                                           \
            allocated(s, size);                                                                    \
        }                                                                                          \
        for (size_t i = 0; (free_every) && i < (n); i += (free_every)) {                           \
            free(slot[first + i]);                                                                 \
            freed(s, slot_size[first + i]);                                                        \
        }                                                                                          \
    } while (0)

/* Many small objects and a few huge ones, all kept live. */
static void NOINLINE site_small_and_huge(void) {
    SITE_LOOP("site_small_and_huge", 20010, i < 20000 ? 100 : (size_t)1 << 20, 0);
}

/* A spread of sizes from 512 B to 64 KiB (powers of two), every third freed. */
static void NOINLINE site_size_spread(void) {
    static const size_t sizes[] = {512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
    SITE_LOOP("site_size_spread", 4000, sizes[lcg() % 8], 3);
}

/* A wide spread, 16 B to 64 KiB (log-spaced): at a long period its small
 * sizes are expected to be sampled less than once per run. */
static void NOINLINE site_wide_spread(void) {
    static const size_t sizes[] = {16,   24,   40,   64,    100,   160,   256,   400,
                                   640,  1000, 1600, 2560,  4000,  6400,  10000, 16000,
                                   25000, 40000, 65536};
    SITE_LOOP("site_wide_spread", 4000, sizes[lcg() % 19], 3);
}

/* Churn of two very different sizes, 32 B and 256 KiB, freed at once. */
static void NOINLINE site_churn(unsigned rounds) {
    struct site *s = site_named("site_churn");
    for (size_t i = 0; i < rounds; i++) {
        size_t size = i % 161 == 0 ? (size_t)256 << 10 : 32;
        free(touch(malloc(size), size));
        allocated(s, size);
        freed(s, size);
    }
}

/* One realloc step of a buffer, from `old_size` bytes allocated by `owner`
 * to `size`: its own call stack. */
static void *NOINLINE realloc_step(void *p, struct site *owner, size_t old_size, size_t size) {
    p = touch(realloc(p, size), size);
    freed(owner, old_size);
    allocated(site_named("realloc_step"), size);
    return p;
}

/* Buffers of 1 KiB grown by realloc to 64 KiB (in realloc_step). */
static void NOINLINE site_realloc_growth(void) {
    struct site *s = site_named("site_realloc_growth");
    struct site *steps = site_named("realloc_step");
    size_t first = take_slots(300);
    for (size_t i = 0; i < 300; i++) {
        void *p = touch(malloc(1024), 1024);
        allocated(s, 1024);
        struct site *owner = s;
        for (size_t size = 1024; size < (64 << 10); size *= 2) {
            p = realloc_step(p, owner, size, size * 2);
            owner = steps;
        }
        slot[first + i] = p;
    }
}

/* A few small objects: under one expected sample per run at lg 14. */
static void NOINLINE site_rare(void) {
    SITE_LOOP("site_rare", 80, 64, 0);
}

/* About two and a half expected samples at lg 14 (40 KiB, under the
 * detection limit). */
static void NOINLINE site_few(void) {
    SITE_LOOP("site_few", 40, 1024, 0);
}

/* Three huge objects and many tiny ones that are sampled less than once:
 * an object count the samples cannot know. */
static void NOINLINE site_tiny_among_huge(void) {
    SITE_LOOP("site_tiny_among_huge", 103, i < 3 ? (size_t)1 << 20 : 16, 0);
}

/* `n` empty requests, kept: no bytes, only objects. */
static void NOINLINE site_zero_bytes(size_t n) {
    SITE_LOOP("site_zero_bytes", n, 0, 0);
}

/* Four buffers grown by realloc from 24 B to 24 MiB (chain_step): live
 * objects so large that every one is sampled, after weights of smaller
 * ones were added and subtracted on the same stack. */
static void *NOINLINE chain_step(void *p, size_t old_size, size_t size) {
    struct site *s = site_named("chain_step");
    p = touch(realloc(p, size), size);
    if (old_size)
        freed(s, old_size);
    allocated(s, size);
    return p;
}

static void NOINLINE site_realloc_chain(void) {
    size_t first = take_slots(4);
    for (size_t i = 0; i < 4; i++) {
        void *p = NULL;
        size_t old_size = 0;
        /* One call of chain_step (one stack), from realloc(NULL, 24) on. */
        for (size_t size = 24; old_size < ((size_t)20 << 20); size *= 2) {
            p = chain_step(p, old_size, size);
            old_size = size;
        }
        slot[first + i] = p;
    }
}

/* 64-byte objects adding up to `fraction` of the detection limit. */
#define LIMIT_SITE(name, fraction)                                                                 \
    static void NOINLINE name(double limit) {                                                      \
        size_t n = (size_t)((fraction)*limit / 64.0);                                              \
        SITE_LOOP(#name, n, 64, 0);                                                                \
    }
LIMIT_SITE(site_under_limit, 0.5)
LIMIT_SITE(site_over_limit, 1.5)

/* Sites that differ in the new version. */
static void NOINLINE site_grow_rare(int new_version) {
    SITE_LOOP("site_grow_rare", new_version ? 40 : 0, 64, 0);
}

static void NOINLINE site_grow_big(int new_version) {
    SITE_LOOP("site_grow_big", new_version ? 3000 : 1000, 4096, 0);
}

static void NOINLINE site_shrink(int new_version) {
    SITE_LOOP("site_shrink", new_version ? 500 : 2000, 512, 0);
}

/* Live objects of mixed sizes that do not change between the two dumps. */
static void NOINLINE site_steady(void) {
    SITE_LOOP("site_steady", 4000, i % 10 == 0 ? 20000 : 200, 0);
}

/* New live objects between the two dumps. */
static void NOINLINE site_grow(unsigned long objects) {
    SITE_LOOP("site_grow", objects, 512, 0);
}

static void print_histogram(const struct site *s, const char *which, const struct histogram *h) {
    printf("hist %s %s", s->name, which);
    for (int i = 0; i < h->used; i++)
        if (h->count[i])
            printf(" %zux%lu", h->size[i], h->count[i]);
    printf("\n");
}

static void report(void) {
    for (int i = 0; i < site_count; i++) {
        print_histogram(&sites[i], "live", &sites[i].live);
        print_histogram(&sites[i], "alloc", &sites[i].alloc);
    }
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
    setvbuf(stdout, stdout_buffer, _IOFBF, sizeof stdout_buffer);
    if (argc >= 3 && strcmp(argv[1], "sites") == 0) {
        double limit = strtod(argv[2], NULL);
        int new_version = argc > 3 && strcmp(argv[3], "new") == 0;
        site_small_and_huge();
        site_size_spread();
        site_wide_spread();
        site_churn(201250);
        site_realloc_growth();
        site_rare();
        site_few();
        site_tiny_among_huge();
        site_realloc_chain();
        site_under_limit(limit);
        site_over_limit(limit);
        site_grow_rare(new_version);
        site_grow_big(new_version);
        site_shrink(new_version);
        report();
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "zero") == 0) {
        site_zero_bytes(strtoul(argv[2], NULL, 10));
        report();
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "diff") == 0) {
        unsigned long grow_objects = strtoul(argv[2], NULL, 10);
        site_steady();
        site_churn(50000);
        dump_to(argv[3]);
        site_churn(50000);
        site_grow(grow_objects);
        dump_to(argv[4]);
        report();
        return 0;
    }
    fprintf(stderr,
            "usage: %s sites <limit> [new] | zero <n> | diff <grow_objects> <a.prof> <b.prof>\n",
            argv[0]);
    return 2;
}
