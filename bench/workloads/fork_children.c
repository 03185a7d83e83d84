/*
 * Fork-heavy workload: a parent forks <n> short-lived children one after
 * another, as fork-per-connection servers and shell scripts do.
 *
 *   fork_children <n> <child_bytes> [exit|_exit] [child_ms] [grandchild]
 *
 * Each child allocates <child_bytes> bytes in 4 KiB blocks (freed), sleeps
 * <child_ms> milliseconds (default 0), with "grandchild" forks and reaps a
 * child of its own that leaves at once with _exit(0), then leaves with
 * exit(0) (atexit handlers and a profiler's exit dump run) or _exit(0). Prints the medians, in microseconds, of the parent's fork()
 * call (fork_us) and of a child's whole life seen from the parent, fork to
 * waitpid (child_us), and the page faults (minor and major) per fork of the
 * parent during the loop (parent_faults) and of a child over its life
 * (child_faults): the copy-on-write and first-touch faults a profiler adds
 * are most of what it costs a short child.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* Seen by the compiler as escaping, so malloc/free pairs are not elided. */
void *volatile escape;

static double faults(int who) {
    struct rusage usage;
    getrusage(who, &usage);
    return (double)usage.ru_minflt + usage.ru_majflt;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr,
                "usage: fork_children <n> <child_bytes> [exit|_exit] [child_ms] [grandchild]\n");
        return 1;
    }
    int n = atoi(argv[1]);
    long bytes = atol(argv[2]);
    int quick = argc > 3 && strcmp(argv[3], "_exit") == 0;
    long child_ms = argc > 4 ? atol(argv[4]) : 0;
    int grandchild = argc > 5 && strcmp(argv[5], "grandchild") == 0;
    double *forks = calloc(n, sizeof *forks), *lives = calloc(n, sizeof *lives);
    /* The parent has a heap of its own, as a server would. */
    for (int i = 0; i < 2000; i++) {
        escape = malloc(4096);
        free(escape);
    }
    double parent_faults = faults(RUSAGE_SELF), child_faults = faults(RUSAGE_CHILDREN);
    for (int i = 0; i < n; i++) {
        double start = now_us();
        pid_t pid = fork();
        if (pid == 0) {
            for (long done = 0; done < bytes; done += 4096) {
                escape = malloc(4096);
                free(escape);
            }
            if (child_ms > 0) usleep(child_ms * 1000);
            if (grandchild) {
                pid_t own = fork();
                if (own == 0) _exit(0);
                waitpid(own, NULL, 0);
            }
            if (quick) _exit(0);
            exit(0);
        }
        forks[i] = now_us() - start;
        waitpid(pid, NULL, 0);
        lives[i] = now_us() - start;
    }
    parent_faults = (faults(RUSAGE_SELF) - parent_faults) / n;
    child_faults = (faults(RUSAGE_CHILDREN) - child_faults) / n;
    qsort(forks, n, sizeof *forks, compare);
    qsort(lives, n, sizeof *lives, compare);
    printf("fork_us=%.1f child_us=%.1f parent_faults=%.1f child_faults=%.1f\n", forks[n / 2],
           lives[n / 2], parent_faults, child_faults);
    return 0;
}
