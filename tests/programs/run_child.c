/* A command for `heapsample run`: prints its LD_PRELOAD, leaks KIB
 * kibibytes in 64 KiB blocks from leak_here(), lives MS milliseconds, then
 * exits with CODE (or kills itself with signal -CODE when CODE < 0).
 * Usage: run_child KIB MS CODE */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

__attribute__((noinline)) static void *leak_here(size_t bytes) {
    void *p = malloc(bytes);
    memset(p, 1, bytes);
    return p;
}

int main(int argc, char **argv) {
    if (argc != 4) return 2;
    long kib = atol(argv[1]), ms = atol(argv[2]), code = atol(argv[3]);
    const char *preload = getenv("LD_PRELOAD");
    printf("LD_PRELOAD=%s\n", preload ? preload : "");
    for (long i = 0; i < kib / 64; i++) leak_here(64 * 1024);
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
    fflush(stdout);
    if (code < 0) raise((int)-code);
    return (int)code;
}
