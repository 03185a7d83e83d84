/*
 * Allocator contract checks. Prints one `PASS <check>` or `FAIL <check>: why`
 * line per check, and `INFO <what>: <observed>` lines for behaviour that is
 * the allocator's choice (realloc(p, 0), malloc(0)), which must be the same
 * with and without a profiler in between. Exit status: 1 if anything failed.
 * Usage: edge [no-pvalloc]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;

#define CHECK(name, cond, ...)                                  \
    do {                                                        \
        if (cond) {                                             \
            printf("PASS %s\n", name);                          \
        } else {                                                \
            failures++;                                         \
            printf("FAIL %s: ", name);                          \
            printf(__VA_ARGS__);                                \
            printf("\n");                                       \
        }                                                       \
    } while (0)

/* Hide constants from the compiler so it cannot fold the calls. */
static volatile size_t opaque_zero;
static size_t v(size_t x) { return x + opaque_zero; }

static int aligned(const void *p, size_t a) { return ((uintptr_t)p % a) == 0; }

static int all_bytes(const unsigned char *p, size_t n, unsigned char v) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) return 0;
    return 1;
}

static void fill_usable(void *p) {
    if (p) memset(p, 0xa5, malloc_usable_size(p));
}

int main(int argc, char **argv) {
    /* `edge no-pvalloc`: skip pvalloc, which jemalloc does not define (so
     * under LD_PRELOAD=libjemalloc.so.2 glibc's pvalloc hands out memory that
     * jemalloc's malloc_usable_size and free then crash on, shim or not). */
    int skip_pvalloc = argc > 1 && strcmp(argv[1], "no-pvalloc") == 0;
    char name[128];
    void *p;
    int rc, e;

    /* calloc overflow */
    errno = 0;
    p = calloc(v(SIZE_MAX / 2), v(3));
    e = errno;
    CHECK("calloc overflow SIZE_MAX/2 x 3", p == NULL && e == ENOMEM, "p=%p errno=%d", p, e);
    free(p);
    errno = 0;
    p = calloc(v((size_t)1 << 40), v((size_t)1 << 40));
    e = errno;
    CHECK("calloc overflow 2^40 x 2^40", p == NULL && e == ENOMEM, "p=%p errno=%d", p, e);
    free(p);

    /* calloc memory is zeroed even when recycled */
    for (int round = 0; round < 50; round++) {
        void *dirty = malloc(1000);
        fill_usable(dirty);
        free(dirty);
        unsigned char *z = calloc(100, 10);
        if (!z || !all_bytes(z, 1000, 0)) {
            CHECK("calloc zeroes recycled memory", 0, "round %d", round);
            free(z);
            goto calloc_done;
        }
        free(z);
    }
    CHECK("calloc zeroes recycled memory", 1, "%s", "");
calloc_done:;

    /* reallocarray overflow */
    errno = 0;
    p = reallocarray(NULL, v(SIZE_MAX / 2), v(3));
    e = errno;
    CHECK("reallocarray(NULL) overflow", p == NULL && e == ENOMEM, "p=%p errno=%d", p, e);
    {
        char *old = malloc(32);
        strcpy(old, "still here");
        errno = 0;
        void *q = reallocarray(old, v(SIZE_MAX / 4), v(8));
        e = errno;
        CHECK("reallocarray(p) overflow keeps p", q == NULL && e == ENOMEM && strcmp(old, "still here") == 0,
              "q=%p errno=%d", q, e);
        free(q);
        void *keep = old; /* still valid: the failed reallocarray did not free it */
        q = reallocarray(keep, 10, 100);
        CHECK("reallocarray(p) grow", q != NULL && strcmp(q, "still here") == 0 && malloc_usable_size(q) >= 1000,
              "q=%p", q);
        free(q ? q : keep);
    }

    /* huge requests */
    errno = 0;
    p = malloc(v(SIZE_MAX - 4096));
    e = errno;
    CHECK("malloc(SIZE_MAX-4096) fails with ENOMEM", p == NULL && e == ENOMEM, "p=%p errno=%d", p, e);
    free(p);
    p = (void *)1;
    rc = posix_memalign(&p, 64, v(SIZE_MAX - 4096));
    CHECK("posix_memalign huge -> ENOMEM", rc == ENOMEM, "rc=%d", rc);

    /* posix_memalign alignments 8..4096 (and larger), several sizes */
    for (size_t a = 8; a <= 65536; a *= 2) {
        static const size_t sizes[] = {1, 24, 100, 4096, 5000, 100000};
        int ok = 1;
        char why[160] = "";
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            for (int rep = 0; rep < 4; rep++) {
                void *q = NULL;
                rc = posix_memalign(&q, a, sizes[k]);
                if (rc != 0 || !q || !aligned(q, a) || malloc_usable_size(q) < sizes[k]) {
                    ok = 0;
                    snprintf(why, sizeof why, "size %zu: rc=%d p=%p usable=%zu", sizes[k], rc, q,
                             q ? malloc_usable_size(q) : 0);
                }
                fill_usable(q);
                free(q);
            }
        }
        snprintf(name, sizeof name, "posix_memalign alignment %zu", a);
        CHECK(name, ok, "%s", why);
    }
    {
        void *q = (void *)0x1;
        rc = posix_memalign(&q, 24, 100);
        CHECK("posix_memalign non-power-of-two -> EINVAL", rc == EINVAL, "rc=%d", rc);
        rc = posix_memalign(&q, 4, 100);
        CHECK("posix_memalign alignment < sizeof(void*) -> EINVAL", rc == EINVAL, "rc=%d", rc);
    }

    /* aligned_alloc, memalign */
    for (size_t a = 8; a <= 65536; a *= 2) {
        int ok = 1;
        char why[160] = "";
        for (size_t mult = 1; mult <= 3; mult++) {
            size_t size = a * mult;
            void *q = aligned_alloc(a, size);
            if (!q || !aligned(q, a) || malloc_usable_size(q) < size) {
                ok = 0;
                snprintf(why, sizeof why, "aligned_alloc(%zu, %zu)=%p", a, size, q);
            }
            fill_usable(q);
            free(q);
            q = memalign(a, size + 3);
            if (!q || !aligned(q, a) || malloc_usable_size(q) < size + 3) {
                ok = 0;
                snprintf(why, sizeof why, "memalign(%zu, %zu)=%p", a, size + 3, q);
            }
            fill_usable(q);
            free(q);
        }
        snprintf(name, sizeof name, "aligned_alloc and memalign alignment %zu", a);
        CHECK(name, ok, "%s", why);
    }

    /* valloc, pvalloc */
    {
        long page = sysconf(_SC_PAGESIZE);
        void *v = valloc(100);
        CHECK("valloc page aligned", v && aligned(v, (size_t)page) && malloc_usable_size(v) >= 100, "p=%p", v);
        fill_usable(v);
        free(v);
        void *pv = skip_pvalloc ? NULL : pvalloc(100);
        if (!skip_pvalloc) CHECK("pvalloc page aligned and rounded up", pv && aligned(pv, (size_t)page) &&
                  malloc_usable_size(pv) >= (size_t)page,
              "p=%p usable=%zu", pv, pv ? malloc_usable_size(pv) : 0);
        fill_usable(pv);
        free(pv);
    }

    /* realloc grow / shrink / NULL / 0 */
    {
        unsigned char *r = realloc(NULL, 100);
        CHECK("realloc(NULL, 100) allocates", r != NULL && malloc_usable_size(r) >= 100, "p=%p", (void *)r);
        for (int i = 0; i < 100; i++) r[i] = (unsigned char)i;
        int ok = 1;
        size_t sizes[] = {1000, 100000, 4 << 20, 50, 7, 300000, 16};
        size_t valid = 100; /* bytes 0..valid hold i */
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            unsigned char *n = realloc(r, sizes[k]);
            if (!n) {
                ok = 0;
                break;
            }
            r = n;
            if (sizes[k] < valid) valid = sizes[k];
            for (size_t i = 0; i < valid; i++)
                if (r[i] != (unsigned char)i) ok = 0;
            if (malloc_usable_size(r) < sizes[k]) ok = 0;
            for (size_t i = 100; i < sizes[k]; i++) r[i] = 0xcc;
        }
        CHECK("realloc grow and shrink keep contents", ok, "contents or usable size wrong");
        errno = 0;
        void *z = realloc(r, 0);
        printf("INFO realloc(p, 0) returned %s\n", z ? "a pointer" : "NULL");
        free(z);
    }

    /* malloc(0) */
    {
        void *a = malloc(0), *b = malloc(0);
        printf("INFO malloc(0) returned %s\n", a ? "a pointer" : "NULL");
        CHECK("malloc(0) pointers are distinct or NULL", a == NULL || a != b, "a=%p b=%p", a, b);
        free(a);
        free(b);
    }

    /* free(NULL) and errno preserved across free */
    {
        int ok = 1;
        for (int i = 0; i < 2000; i++) {
            void *q = malloc((size_t)(i % 300) + 1);
            errno = EILSEQ;
            free(q);
            if (errno != EILSEQ) ok = 0;
            errno = ERANGE;
            free(NULL);
            if (errno != ERANGE) ok = 0;
        }
        CHECK("free preserves errno", ok, "errno changed");
        void *big = malloc(64 << 20);
        errno = EILSEQ;
        free(big);
        CHECK("free of a large (mmap) block preserves errno", errno == EILSEQ, "errno=%d", errno);
    }

    /* malloc_usable_size */
    {
        int ok = 1;
        for (size_t s = 1; s < 70000; s = s * 3 + 1) {
            void *q = malloc(s);
            if (!q || malloc_usable_size(q) < s) ok = 0;
            fill_usable(q);
            free(q);
        }
        CHECK("malloc_usable_size >= requested", ok, "too small");
        CHECK("malloc_usable_size(NULL) == 0", malloc_usable_size(NULL) == 0, "got %zu",
              malloc_usable_size(NULL));
    }

    /* many live objects then free in reverse order: the profiler's tables */
    {
        enum { N = 20000 };
        static void *keep[N];
        int ok = 1;
        for (int i = 0; i < N; i++) {
            keep[i] = malloc((size_t)(i % 64) + 8);
            if (!keep[i]) ok = 0;
            else memset(keep[i], i & 0xff, (size_t)(i % 64) + 8);
        }
        for (int i = N - 1; i >= 0; i--) {
            if (keep[i] && ((unsigned char *)keep[i])[0] != (i & 0xff)) ok = 0;
            free(keep[i]);
        }
        CHECK("20000 live objects keep their contents", ok, "corrupted");
    }

    printf("%d failures\n", failures);
    return failures != 0;
}
