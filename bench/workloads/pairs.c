/* pairs: the tightest malloc/free loop, for nanoseconds per pair.
 *
 *   pairs PAIRS
 *
 * Allocates and immediately frees a block, cycling through 8 small sizes
 * (16-480 B, mean 140 B); each block's first byte is written so the pair
 * cannot be elided (build with -fno-builtin too).  Prints the loop's own
 * time, which excludes process start-up and exit: ns_per_pair= is thread CPU
 * time (robust on a shared machine: time spent descheduled is not counted),
 * wall_ns_per_pair= is CLOCK_MONOTONIC. */
#include "common.h"

static const size_t sizes[8] = { 16, 32, 48, 64, 96, 128, 256, 480 };

int main(int argc, char **argv) {
    long pairs = arg_long(argc, argv, 1, 10000000);
    volatile unsigned char sink = 0;
    long long c0 = cpu_ns(), t0 = now_ns();
    for (long i = 0; i < pairs; i++) {
        unsigned char *p = malloc(sizes[i & 7]);
        if (!p) return 1;
        p[0] = (unsigned char)i;
        sink += p[0];
        free(p);
    }
    long long c1 = cpu_ns(), t1 = now_ns();
    printf("pairs=%ld ns_per_pair=%.3f wall_ns_per_pair=%.3f\n", pairs,
           (double)(c1 - c0) / (double)pairs, (double)(t1 - t0) / (double)pairs);
    return sink == 0xff ? 0 : 0;
}
