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
 *
 * The barrier needs `prof_signal:USR1`: it sends the dump signal and waits
 * for the `.s` file, twice. The dumper serves, in each pass, the signal
 * requests and then the high-water ones, so the second signal dump is written
 * in a pass that began after the pass that wrote the first: by then every
 * request made before the first signal was served.
 * It prints only observations; the test decides.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static int count_dumps(const char *tag) {
    static char buf[1 << 16];
    int fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int n = 0;
    for (;;) {
        long got = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (got <= 0) break;
        for (long off = 0; off < got;) {
            struct linux_dirent64 {
                unsigned long long d_ino;
                long long d_off;
                unsigned short d_reclen;
                unsigned char d_type;
                char d_name[];
            } *e = (void *)(buf + off);
            size_t len = strlen(e->d_name);
            if (len > 5 && strcmp(e->d_name + len - 5, ".prof") == 0 && strstr(e->d_name, tag))
                n++;
            off += e->d_reclen;
        }
    }
    close(fd);
    return n;
}

/* Send the dump signal and wait for its file (at most 60 s). */
static void signal_dump_round_trip(void) {
    int before = count_dumps(".s");
    if (kill(getpid(), SIGUSR1) != 0) abort();
    for (int waited = 0; count_dumps(".s") <= before; waited++) {
        if (waited > 120000) {
            fputs("barrier: no signal dump within 60 s\n", stderr);
            exit(3);
        }
        usleep(500);
    }
}

/* Wait until every dump requested before this call was written. */
static void dump_barrier(void) {
    signal_dump_round_trip();
    signal_dump_round_trip();
}

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
