/*
 * Interval-trigger test program.
 *
 * `trig_interval MIB CHUNK`: allocates (and frees at once) MIB MiB in chunks
 * of CHUNK bytes from interval_site. After each MiB, and before it exits, it
 * waits until the shim's dumper has written every dump requested so far (the
 * barrier below), so the dumper keeps pace however loaded the machine is (its
 * queue of pending requests is capped) and the process does not exit while
 * the dumper is still writing (interval dumps requested but not yet written
 * when the process exits are lost by design; the barrier, dump_barrier.h,
 * needs `prof_signal:USR1`). It prints what it allocated itself:
 *   allocated bytes=<n> chunks=<n>
 * (stdout is written only at the end, so stdio's buffer is allocated after
 * the measured work).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dump_barrier.h"

#define NOINLINE __attribute__((noinline, noclone))

void *volatile sink;

NOINLINE void interval_site(size_t size) {
    char *p = malloc(size);
    if (!p) abort();
    p[0] = 1;
    sink = p;
    free(p);
}

int main(int argc, char **argv) {
    long mib = argc > 1 ? atol(argv[1]) : 24;
    size_t chunk = argc > 2 ? (size_t)atol(argv[2]) : 4096;
    unsigned long long total = 0, chunks = 0;
    for (long m = 0; m < mib; m++) {
        for (size_t done = 0; done + chunk <= (1u << 20); done += chunk) {
            interval_site(chunk);
            total += chunk;
            chunks++;
        }
        dump_barrier();
    }
    printf("allocated bytes=%llu chunks=%llu\n", total, chunks);
    return 0;
}
