/*
 * High-water trigger test program.
 *
 * `trig_highwater BLOCK PACE T1 T2 ...`: keeps a stack of live blocks of
 * BLOCK bytes (allocated in highwater_site, one byte written per page) and
 * moves the number of live blocks to each target in turn: allocating blocks
 * or freeing the most recent ones. At each target it waits until the shim's
 * dumper has written every dump requested so far (the barrier below), counts
 * the `.u<n>.prof` files in the working directory (read with getdents64 into
 * a static buffer, without malloc) and prints
 *   checkpoint index=<i> blocks=<live blocks> live_bytes=<requested bytes> u_files=<n>
 * PACE is `sync` (the barrier after every block too: the dumper keeps pace
 * however loaded the machine is) or `free` (no pause between blocks: the
 * dumper falls behind as it may).
 * The barrier (dump_barrier.h) needs `prof_signal:USR1`.
 * It prints only observations; the test decides.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dump_barrier.h"

#define NOINLINE __attribute__((noinline, noclone))

#define MAX_BLOCKS 4096
static char *blocks[MAX_BLOCKS];

NOINLINE char *highwater_site(size_t size) {
    char *p = malloc(size);
    if (!p) abort();
    for (size_t i = 0; i < size; i += 4096) p[i] = 1;
    return p;
}

int main(int argc, char **argv) {
    if (argc < 4 || (strcmp(argv[2], "sync") != 0 && strcmp(argv[2], "free") != 0)) {
        fprintf(stderr, "usage: trig_highwater BLOCK sync|free T1 T2 ...\n");
        return 2;
    }
    size_t block = (size_t)atol(argv[1]);
    int paced = strcmp(argv[2], "sync") == 0;
    long live = 0;
    /* Results are kept and printed at the end: no stdio allocation while the
     * heap is being measured. */
    static char out[1 << 16];
    size_t used = 0;
    for (int t = 3; t < argc; t++) {
        long target = atol(argv[t]);
        if (target < 0 || target > MAX_BLOCKS) return 2;
        while (live < target) {
            blocks[live++] = highwater_site(block);
            if (paced) dump_barrier();
        }
        while (live > target) free(blocks[--live]);
        dump_barrier();
        used += snprintf(out + used, sizeof out - used,
                         "checkpoint index=%d blocks=%ld live_bytes=%llu u_files=%d\n", t - 3,
                         live, (unsigned long long)live * block, count_dumps(".u"));
    }
    fputs(out, stdout);
    while (live > 0) free(blocks[--live]);
    return 0;
}
