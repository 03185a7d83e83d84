/* runit: run one command and report its wall time, CPU time and peak RSS.
 *
 *   runit -o RESULT [-e NAME=VALUE]... -- /abs/path/prog args...
 *
 * The harness (Python, tens of MiB) starts this tiny program, which forks the
 * workload itself, so the workload's ru_maxrss is not inflated by the harness's
 * address space (Linux carries the pre-exec mm's high-water mark into
 * ru_maxrss).  The -e variables (e.g. LD_PRELOAD) are set only in the child, so
 * the preload never loads into this runner.  RESULT gets one line:
 *   wall_ns=<n> utime_us=<n> stime_us=<n> maxrss_kb=<n> status=<wait status>
 * CPU time and peak RSS come from wait4() and include the workload's own
 * waited-for children (e.g. cc1 under gcc). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long tv_us(struct timeval tv) {
    return (long long)tv.tv_sec * 1000000LL + tv.tv_usec;
}

int main(int argc, char **argv) {
    const char *out = NULL;
    int i = 1;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--")) { i++; break; }
        if (!strcmp(argv[i], "-o") && i + 1 < argc) { out = argv[++i]; continue; }
        if (!strcmp(argv[i], "-e") && i + 1 < argc) { putenv(argv[++i]); continue; }
        fprintf(stderr, "runit: bad argument %s\n", argv[i]);
        return 2;
    }
    if (!out || i >= argc) {
        fprintf(stderr, "usage: runit -o RESULT [-e N=V]... -- prog args...\n");
        return 2;
    }
    FILE *f = fopen(out, "w");
    if (!f) { perror(out); return 2; }
    long long t0 = now_ns();
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 2; }
    if (pid == 0) {
        execv(argv[i], &argv[i]);
        fprintf(stderr, "runit: exec %s: %s\n", argv[i], strerror(errno));
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) { perror("wait4"); return 2; }
    }
    long long wall = now_ns() - t0;
    fprintf(f, "wall_ns=%lld utime_us=%lld stime_us=%lld maxrss_kb=%ld status=%d\n",
            wall, tv_us(ru.ru_utime), tv_us(ru.ru_stime), ru.ru_maxrss, status);
    fclose(f);
    return 0;
}
