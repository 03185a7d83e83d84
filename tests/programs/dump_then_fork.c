/*
 * A single-threaded parent that writes dumps, then forks: the children must
 * still start their own dump numbering (the fork handlers of a process that
 * never had a second thread take no lock and write only what differs).
 *
 *   dump_then_fork <dumps> <children>
 *
 * The parent allocates, calls heapsample_dump(NULL) <dumps> times (automatic
 * names), then forks <children> children one after another; each allocates
 * 1 MiB in 4 KiB blocks (half kept), calls heapsample_dump(NULL) once and
 * leaves with exit(0). Prints `children=<n>` when every child was reaped
 * with status 0.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int (*dump_fn)(const char *);
static void *volatile keep[256];

static void allocate(void) {
    for (int i = 0; i < 256; i++) {
        void *block = malloc(4096);
        if (i % 2) free(block); else keep[i] = block;
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: dump_then_fork <dumps> <children>\n");
        return 2;
    }
    dump_fn dump = (dump_fn)dlsym(RTLD_DEFAULT, "heapsample_dump");
    if (!dump) {
        fprintf(stderr, "no heapsample_dump\n");
        return 1;
    }
    allocate();
    for (int i = 0; i < atoi(argv[1]); i++) {
        if (dump(NULL) != 0) return 1;
    }
    int children = atoi(argv[2]), reaped = 0;
    for (int i = 0; i < children; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            allocate();
            exit(dump(NULL) == 0 ? 0 : 1);
        }
        int status = 0;
        if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
            WEXITSTATUS(status) == 0)
            reaped++;
    }
    printf("children=%d\n", reaped);
    return reaped == children ? 0 : 1;
}
