/* Shared helpers for the C workloads: a tiny PRNG, a clock, argument parsing. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t xorshift(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static inline long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline long long cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* argv[i] as a positive integer, or dflt when absent; 0 means "one per core". */
static inline long arg_long(int argc, char **argv, int i, long dflt) {
    if (argc <= i) return dflt;
    long v = strtol(argv[i], NULL, 10);
    if (v == 0) v = sysconf(_SC_NPROCESSORS_ONLN);
    return v > 0 ? v : dflt;
}

/* Mixed sizes 16 B - 64 KiB: 90 % 16-256 B, 9 % 256 B-4 KiB, 1 % 4-64 KiB
 * (mean about 650 B, so a 512 KiB sampling period samples ~1 in 800). */
static inline size_t mixed_size(uint64_t *s) {
    uint64_t r = xorshift(s);
    unsigned bucket = (unsigned)(r % 100);
    r >>= 8;
    if (bucket < 90) return 16 + r % 241;
    if (bucket < 99) return 256 + r % (4096 - 256 + 1);
    return 4096 + r % (65536 - 4096 + 1);
}
#endif
