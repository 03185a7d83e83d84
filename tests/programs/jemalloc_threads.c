/*
 * One allocation site called by eight threads, each with its own object
 * size (24 B to 250 KiB), so that the site's one call stack has threads of
 * very different average sizes: what jemalloc's per-thread lines and its
 * `t*` line differ on. Every third object is freed. And 20,000 live 8-byte
 * objects from tiny_site (at lg_prof_sample:0 jemalloc writes their count
 * divided by 1 - exp(-8)). Prints the exact truth of both sites:
 *
 *   truth SITE inuse_objects=N inuse_space=B alloc_objects=N alloc_space=B
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))
#define THREADS 8

static const size_t sizes[THREADS] = {24, 100, 700, 3000, 9000, 20000, 70000, 250000};
static const int counts[THREADS] = {4000, 2000, 600, 200, 80, 40, 12, 4};
static void *kept[THREADS][4000];

NOINLINE void *shared_site(size_t n) {
    void *p = malloc(n);
    if (!p)
        abort();
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

#define TINY 20000
static void *tiny[TINY];

NOINLINE void tiny_site(void) {
    for (int i = 0; i < TINY; i++) {
        tiny[i] = malloc(8);
        if (!tiny[i])
            abort();
    }
}

NOINLINE void *worker(void *arg) {
    long t = (long)arg;
    for (int i = 0; i < counts[t]; i++)
        kept[t][i] = shared_site(sizes[t]);
    for (int i = 0; i < counts[t]; i += 3)
        free(kept[t][i]);
    return NULL;
}

int main(void) {
    pthread_t threads[THREADS];
    unsigned long inuse_objects = 0, inuse_space = 0, alloc_objects = 0, alloc_space = 0;
    for (long t = 0; t < THREADS; t++) {
        if (pthread_create(&threads[t], NULL, worker, (void *)t) != 0)
            abort();
        /* One thread at a time: the threads' lines stay apart. */
        pthread_join(threads[t], NULL);
        unsigned long freed = (counts[t] + 2) / 3;
        alloc_objects += counts[t];
        alloc_space += counts[t] * sizes[t];
        inuse_objects += counts[t] - freed;
        inuse_space += (counts[t] - freed) * sizes[t];
    }
    tiny_site();
    printf("truth shared_site inuse_objects=%lu inuse_space=%lu alloc_objects=%lu alloc_space=%lu\n",
           inuse_objects, inuse_space, alloc_objects, alloc_space);
    printf("truth tiny_site inuse_objects=%d inuse_space=%d alloc_objects=%d alloc_space=%d\n", TINY,
           8 * TINY, TINY, 8 * TINY);
    return 0;
}
