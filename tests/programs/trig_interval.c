/*
 * Interval-trigger test program.
 *
 * `trig_interval MIB CHUNK`: allocates (and frees at once) MIB MiB in chunks
 * of CHUNK bytes from interval_site, sleeping 5 ms after each MiB so the
 * shim's background dumper keeps pace (its queue of pending requests is
 * capped). Then it waits until the number of `*.i<n>.prof` files in the
 * working directory has not changed for 300 ms (at most 10 s; the directory is read without malloc), so the
 * process does not exit while the dumper is still writing: interval dumps
 * that are requested but not yet written when the process exits are lost by
 * design. It prints what it allocated itself:
 *   allocated bytes=<n> chunks=<n>
 * (stdout is written only at the end, so stdio's buffer is allocated after
 * the measured work).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
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
        usleep(5000);
    }
    double start = now(), stable_since = now();
    int last = count_dumps(".i");
    while (now() - start < 10.0 && now() - stable_since < 0.3) {
        usleep(20000);
        int n = count_dumps(".i");
        if (n != last) {
            last = n;
            stable_since = now();
        }
    }
    printf("allocated bytes=%llu chunks=%llu\n", total, chunks);
    return 0;
}
