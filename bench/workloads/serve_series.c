/* serve_series: a process that writes many dumps, for the viewer's scale
 * benchmark (bench/serve_scale.py): the dump list and the timeline of a
 * long series.
 *
 *   serve_series [DUMPS]        (default 2000)
 *
 * Each step keeps a few more blocks (a slow leak), churns some, and asks
 * the profiler for a dump (heapsample_dump, found with dlsym). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include "common.h"

static void *volatile kept[1 << 16];

__attribute__((noinline)) static void leak_a_little(long step) {
    kept[step & 0xffff] = malloc(256 + (size_t)(step % 64) * 16);
}

__attribute__((noinline)) static void churn(long step) {
    for (int i = 0; i < 8; i++) {
        char *p = malloc(64 + (size_t)((step + i) % 32) * 32);
        if (p) p[0] = (char)i;
        __asm__ volatile("" : : "r"(p) : "memory");
        free(p);
    }
}

int main(int argc, char **argv) {
    long dumps = arg_long(argc, argv, 1, 2000);
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "heapsample_dump");
    if (!dump) {
        fprintf(stderr, "serve_series: run it under the heapsample shim\n");
        return 2;
    }
    for (long step = 0; step < dumps; step++) {
        leak_a_little(step);
        churn(step);
        if (dump(NULL) != 0) return 1;
    }
    printf("dumps=%ld\n", dumps);
    return 0;
}
