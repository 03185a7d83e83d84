/*
 * A forked child's peak is its own: the parent holds 8 MiB, frees it and
 * forks; the child allocates 256 KiB in 64 blocks and exits (its exit dump
 * with prof_fork_final:all); the parent waits and exits. stdout is fully
 * buffered in a static buffer; each process prints its pid and its own
 * highest live heap of its blocks:
 *
 *   parent pid=N peak=N
 *   child pid=N peak=N
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char out[1 << 16];

int main(void) {
    setvbuf(stdout, out, _IOFBF, sizeof out);
    void *big = malloc(8 << 20);
    memset(big, 1, 4096);
    size_t parent_peak = malloc_usable_size(big);
    free(big);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        void *blocks[64];
        size_t live = 0;
        for (int i = 0; i < 64; i++) {
            blocks[i] = malloc(4096);
            memset(blocks[i], 2, 4096);
            live += malloc_usable_size(blocks[i]);
        }
        printf("child pid=%d peak=%zu\n", (int)getpid(), live);
        for (int i = 0; i < 64; i++)
            free(blocks[i]);
        fflush(stdout);
        return 0;
    }
    int status;
    waitpid(pid, &status, 0);
    printf("parent pid=%d peak=%zu\n", (int)getpid(), parent_peak);
    fflush(stdout);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
