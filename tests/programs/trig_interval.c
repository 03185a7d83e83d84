/*
 * Interval-trigger test program.
 *
 * `trig_interval MIB CHUNK`: allocates (and frees at once) MIB MiB in chunks
 * of CHUNK bytes from interval_site. After each MiB, and before it exits, it
 * waits until the shim's dumper has written every dump requested so far (the
 * barrier below), so the dumper keeps pace however loaded the machine is (its
 * queue of pending requests is capped) and the process does not exit while
 * the dumper is still writing (interval dumps requested but not yet written
 * when the process exits are lost by design). It prints what it allocated
 * itself:
 *   allocated bytes=<n> chunks=<n>
 * (stdout is written only at the end, so stdio's buffer is allocated after
 * the measured work).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

void *volatile sink;

NOINLINE void interval_site(size_t size) {
    char *p = malloc(size);
    if (!p) abort();
    p[0] = 1;
    sink = p;
    free(p);
}

/* Counts files whose name ends in ".prof" and contains `tag`, reading the
 * directory with getdents64 into a static buffer: opendir would malloc 32 KiB
 * per call, which the profiler would count. */
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

/* Send the dump signal (`prof_signal:USR1`) and wait for its file (at most
 * 60 s). */
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

/* Wait until every dump requested before this call was written: the dumper
 * serves, in each pass, the signal requests before the interval ones, so the
 * second signal dump is written in a pass that began after the pass that
 * wrote the first, by when every earlier request was served. */
static void dump_barrier(void) {
    signal_dump_round_trip();
    signal_dump_round_trip();
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
