/*
 * Known allocation sites for the heapsample end-to-end tests.
 *
 * Every site is a noinline function that allocates a fixed number of objects
 * of one fixed size with one allocation function, frees some of them, and
 * keeps the rest live until exit. The program counts what it did itself and
 * prints one line per site on stdout:
 *
 *   site <function> size=<bytes per object> alloc_objects=N alloc_bytes=B
 *        live_objects=L live_bytes=LB exact_alloc=0|1
 *
 * (all on one line), and on stderr `usable <function> U`: the sum of
 * malloc_usable_size over its live objects (not for alloc_site_in_atexit; on
 * stderr because glibc's usable sizes depend on the heap layout, which a
 * profiler changes). `live_*` are the numbers at the moment the dump is
 * written, i.e. after every atexit handler has run: alloc_site_atexit's
 * objects are freed by an atexit handler, alloc_site_in_atexit allocates
 * inside one. `exact_alloc=0` means the cumulative numbers depend on how a
 * profiler accounts realloc and only the live numbers are defined.
 *
 * Usage: alloc_sites [multiplier]   (object counts are multiplied by it)
 * The runtime addresses of the site functions go to stderr as
 * `addr <function> 0x...` (stderr, so that stdout is identical across runs
 * of a PIE build).
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

struct site {
    const char *name;
    void *fn;
    size_t size;
    unsigned long alloc_objects, alloc_bytes;
    void **ptrs; /* live pointers (NULL once freed) */
    size_t count;
    int exact_alloc;
    int freed_at_exit; /* its live objects are freed by an atexit handler */
};

static volatile unsigned long sink;

static void touch(void *p, size_t n) {
    memset(p, (int)(n & 0xff), n < 64 ? n : 64);
    sink += ((unsigned char *)p)[0];
}

static void **slots(size_t n) {
    void **v = calloc(n ? n : 1, sizeof(void *));
    if (!v) {
        perror("calloc");
        exit(2);
    }
    return v;
}

static void record(struct site *s, void *p, size_t i) {
    if (!p) {
        fprintf(stderr, "%s: allocation failed\n", s->name);
        exit(2);
    }
    touch(p, s->size);
    s->ptrs[i] = p;
    s->alloc_objects++;
    s->alloc_bytes += s->size;
}

NOINLINE void free_some(struct site *s, size_t every) {
    for (size_t i = 0; i < s->count; i += every) {
        free(s->ptrs[i]);
        s->ptrs[i] = NULL;
    }
}

NOINLINE void alloc_site_malloc(struct site *s) {
    for (size_t i = 0; i < s->count; i++) record(s, malloc(s->size), i);
}

NOINLINE void alloc_site_malloc_half_freed(struct site *s) {
    for (size_t i = 0; i < s->count; i++) record(s, malloc(s->size), i);
}

NOINLINE void alloc_site_calloc(struct site *s) {
    for (size_t i = 0; i < s->count; i++) record(s, calloc(10, s->size / 10), i);
}

NOINLINE void alloc_site_posix_memalign(struct site *s) {
    for (size_t i = 0; i < s->count; i++) {
        void *p = NULL;
        if (posix_memalign(&p, 64, s->size) != 0) p = NULL;
        record(s, p, i);
    }
}

NOINLINE void alloc_site_aligned_alloc(struct site *s) {
    for (size_t i = 0; i < s->count; i++) record(s, aligned_alloc(128, s->size), i);
}

NOINLINE void alloc_site_memalign(struct site *s) {
    for (size_t i = 0; i < s->count; i++) record(s, memalign(32, s->size), i);
}

NOINLINE void alloc_site_realloc_null(struct site *s) {
    for (size_t i = 0; i < s->count; i++) record(s, realloc(NULL, s->size), i);
}

NOINLINE void alloc_site_big(struct site *s) {
    for (size_t i = 0; i < s->count; i++) record(s, malloc(s->size), i);
}

/* strdup allocates inside libc: the innermost frame is in libc, the innermost
 * frame of this program is this function. */
NOINLINE void alloc_site_strdup(struct site *s) {
    static const char text[] = "0123456789abcdef0123456789abcde"; /* 31 chars */
    for (size_t i = 0; i < s->count; i++) record(s, strdup(text), i);
}

NOINLINE void alloc_site_deep(struct site *s) {
    for (size_t i = 0; i < s->count; i++) record(s, malloc(s->size), i);
}

/* 20 frames of recursion between main and alloc_site_deep. */
NOINLINE void recurse(struct site *s, int depth) {
    if (depth == 0)
        alloc_site_deep(s);
    else
        recurse(s, depth - 1);
    sink += (unsigned long)depth; /* not a tail call */
}

/* malloc(16), grown by realloc to 64 KiB (moves), then freed: nothing of it
 * may stay live. */
NOINLINE void alloc_site_realloc_moved_freed(struct site *s) {
    for (size_t i = 0; i < s->count; i++) {
        char *p = malloc(16);
        if (!p) exit(2);
        touch(p, 16);
        char *q = realloc(p, s->size);
        if (!q) exit(2);
        touch(q, s->size);
        free(q);
        s->alloc_objects += 2;
        s->alloc_bytes += 16 + s->size;
    }
}

NOINLINE void alloc_site_atexit(struct site *s) {
    for (size_t i = 0; i < s->count; i++) record(s, malloc(s->size), i);
}

NOINLINE void alloc_site_in_atexit(struct site *s) {
    for (size_t i = 0; i < s->count; i++) record(s, malloc(s->size), i);
}

static struct site sites[] = {
    {"alloc_site_malloc", (void *)alloc_site_malloc, 64, 0, 0, 0, 1000, 1, 0},
    {"alloc_site_malloc_half_freed", (void *)alloc_site_malloc_half_freed, 1000, 0, 0, 0, 500, 1, 0},
    {"alloc_site_calloc", (void *)alloc_site_calloc, 160, 0, 0, 0, 300, 1, 0},
    {"alloc_site_posix_memalign", (void *)alloc_site_posix_memalign, 256, 0, 0, 0, 200, 1, 0},
    {"alloc_site_aligned_alloc", (void *)alloc_site_aligned_alloc, 384, 0, 0, 0, 100, 1, 0},
    {"alloc_site_memalign", (void *)alloc_site_memalign, 96, 0, 0, 0, 100, 1, 0},
    {"alloc_site_realloc_null", (void *)alloc_site_realloc_null, 200, 0, 0, 0, 100, 1, 0},
    {"alloc_site_big", (void *)alloc_site_big, 1 << 20, 0, 0, 0, 3, 1, 0},
    {"alloc_site_strdup", (void *)alloc_site_strdup, 32, 0, 0, 0, 100, 1, 0},
    {"alloc_site_deep", (void *)alloc_site_deep, 48, 0, 0, 0, 50, 1, 0},
    {"alloc_site_realloc_moved_freed", (void *)alloc_site_realloc_moved_freed, 65536, 0, 0, 0, 20, 0, 0},
    {"alloc_site_atexit", (void *)alloc_site_atexit, 80, 0, 0, 0, 70, 1, 1},
    {"alloc_site_in_atexit", (void *)alloc_site_in_atexit, 88, 0, 0, 0, 50, 1, 0},
};
enum {
    S_MALLOC, S_HALF, S_CALLOC, S_POSIX, S_ALIGNED, S_MEMALIGN, S_REALLOC_NULL, S_BIG,
    S_STRDUP, S_DEEP, S_REALLOC_MOVED, S_ATEXIT, S_IN_ATEXIT, S_COUNT
};

static void at_exit_handler(void) {
    free_some(&sites[S_ATEXIT], 1);
    alloc_site_in_atexit(&sites[S_IN_ATEXIT]);
}

int main(int argc, char **argv) {
    unsigned long mult = argc > 1 ? strtoul(argv[1], NULL, 10) : 1;
    if (mult == 0) mult = 1;
    for (int i = 0; i < S_COUNT; i++) {
        if (i != S_BIG) sites[i].count *= mult;
        sites[i].ptrs = slots(sites[i].count);
        fprintf(stderr, "addr %s %p\n", sites[i].name, sites[i].fn);
    }
    fprintf(stderr, "addr %s %p\n", "recurse", (void *)recurse);
    fprintf(stderr, "addr %s %p\n", "main", (void *)main);

    alloc_site_malloc(&sites[S_MALLOC]);
    alloc_site_malloc_half_freed(&sites[S_HALF]);
    free_some(&sites[S_HALF], 2);
    alloc_site_calloc(&sites[S_CALLOC]);
    free_some(&sites[S_CALLOC], 1);
    alloc_site_posix_memalign(&sites[S_POSIX]);
    alloc_site_aligned_alloc(&sites[S_ALIGNED]);
    free_some(&sites[S_ALIGNED], 2);
    alloc_site_memalign(&sites[S_MEMALIGN]);
    alloc_site_realloc_null(&sites[S_REALLOC_NULL]);
    alloc_site_big(&sites[S_BIG]);
    alloc_site_strdup(&sites[S_STRDUP]);
    recurse(&sites[S_DEEP], 20);
    alloc_site_realloc_moved_freed(&sites[S_REALLOC_MOVED]);
    alloc_site_atexit(&sites[S_ATEXIT]);
    atexit(at_exit_handler);

    for (int i = 0; i < S_COUNT; i++) {
        struct site *s = &sites[i];
        unsigned long live = 0, usable = 0;
        if (i == S_IN_ATEXIT) {
            /* allocated later, inside the atexit handler; none freed */
            live = s->count; /* allocated later, in the atexit handler */
        } else if (!s->freed_at_exit && i != S_REALLOC_MOVED) {
            for (size_t j = 0; j < s->count; j++) {
                if (s->ptrs[j]) {
                    live++;
                    usable += malloc_usable_size(s->ptrs[j]);
                }
            }
        }
        unsigned long alloc_objects = i == S_IN_ATEXIT ? s->count : s->alloc_objects;
        printf("site %s size=%zu alloc_objects=%lu alloc_bytes=%lu live_objects=%lu live_bytes=%lu "
               "exact_alloc=%d\n",
               s->name, s->size, alloc_objects, i == S_IN_ATEXIT ? alloc_objects * s->size : s->alloc_bytes,
               live, live * s->size,
               s->exact_alloc);
        /* glibc's usable sizes depend on the heap layout, which a profiler
         * changes: stderr, so stdout stays comparable. */
        if (i != S_IN_ATEXIT) fprintf(stderr, "usable %s %lu\n", s->name, usable);
    }
    fflush(stdout);
    return 0;
}
