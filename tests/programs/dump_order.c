/*
 * Background dumps while the dumper is busy: the order of what they show.
 * Run at lg_prof_sample:0 with prof_signal:USR1; first it keeps 2^BITS
 * distinct stacks live, so that every dump takes a while to write.
 *
 *   dump_order interval BITS MIB
 *       then allocates (and frees at once) MIB MiB in 4 KiB chunks as fast
 *       as it can, crossing interval boundaries faster than dumps are
 *       written, then stops allocating and waits until the dumper has
 *       written every dump requested (dump_barrier.h).
 *   dump_order highwater BITS ROUNDS
 *       then keeps 16 MiB live and, ROUNDS times: asks for a signal dump
 *       (the dumper is busy writing it for a while), meanwhile raises the
 *       live heap to a new high (one block of 32 MiB times the round,
 *       requesting a high-water dump) and frees it at once, so the heap has
 *       fallen back by the time that dump can be written; then waits for
 *       the dumper.
 * Prints "done" at the end; the test reads the dumps.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump_barrier.h"

#define NOINLINE __attribute__((noinline, noclone))

NOINLINE static void *leaf(size_t n) {
    void *p = malloc(n);
    if (p) memset(p, 1, n < 64 ? n : 64);
    __asm__ volatile("" ::: "memory");
    return p;
}

/* A distinct call path (so a distinct stack) for each value of `path`. */
NOINLINE static void *zero(unsigned path, int bits);
NOINLINE static void *one(unsigned path, int bits);
NOINLINE static void *walk(unsigned path, int bits) {
    void *p = bits == 0 ? leaf(16) : (path & 1) ? one(path >> 1, bits - 1) : zero(path >> 1, bits - 1);
    __asm__ volatile("" ::: "memory");
    return p;
}
NOINLINE static void *zero(unsigned path, int bits) {
    void *p = walk(path, bits);
    __asm__ volatile("" ::: "memory");
    return p;
}
NOINLINE static void *one(unsigned path, int bits) {
    void *p = walk(path, bits);
    __asm__ volatile("" ::: "memory");
    return p;
}

NOINLINE static void burst_site(size_t n) {
    void *p = malloc(n);
    if (!p) abort();
    __asm__ volatile("" ::: "memory");
    free(p);
}

NOINLINE static void *base_site(size_t n) {
    void *p = malloc(n);
    if (!p) abort();
    return p;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: dump_order interval|highwater BITS N\n");
        return 1;
    }
    int bits = atoi(argv[2]);
    long n = atol(argv[3]);
    for (unsigned path = 0; path < (1u << bits); path++)
        if (!walk(path, bits)) return 2; /* kept live on purpose */
    if (strcmp(argv[1], "interval") == 0) {
        for (long i = 0; i < n * 256; i++) burst_site(4096);
    } else {
        void *base = base_site(16 << 20);
        dump_barrier();
        for (long round = 1; round <= n; round++) {
            if (kill(getpid(), SIGUSR1) != 0) return 3;
            burst_site((size_t)round * (32 << 20));
            dump_barrier();
        }
        free(base);
    }
    dump_barrier();
    printf("done\n");
    return 0;
}
