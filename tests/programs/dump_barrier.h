/*
 * Helpers of the trigger test programs (included, not compiled alone).
 *
 * count_dumps(tag): the files in the working directory whose name ends in
 * ".prof" and contains `tag`, read with getdents64 into a static buffer
 * (opendir would malloc 32 KiB per call, which the profiler would count).
 *
 * dump_barrier(): waits until the shim's dumper has written every dump
 * requested before the call, however loaded the machine is. It needs
 * `prof_signal:USR1`: it sends the dump signal and waits for the `.s` file,
 * twice. The dumper serves, in each pass, the signal requests before the
 * interval and high-water ones, so the second signal dump is written in a
 * pass that began after the pass that wrote the first: by then every request
 * made before the first signal was served. Neither allocates.
 */
#ifndef DUMP_BARRIER_H
#define DUMP_BARRIER_H

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

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

static void dump_barrier(void) {
    signal_dump_round_trip();
    signal_dump_round_trip();
}

#endif
