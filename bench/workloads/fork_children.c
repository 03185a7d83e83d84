/*
 * Fork-heavy workload: a parent forks <n> short-lived children one after
 * another, as fork-per-connection servers and shell scripts do.
 *
 *   fork_children <n> <child_bytes> [exit|_exit] [child_ms] [grandchild|-] [block_bytes] [keep]
 *   fork_children <n> 0 exec PROGRAM [ARGS...]
 *
 * Each child allocates <child_bytes> bytes in blocks of <block_bytes>
 * (default 4 KiB), each freed at once, or with "keep" all kept, written
 * and then freed (a request that uses that much memory), sleeps <child_ms> milliseconds (default 0), with
 * "grandchild" forks and reaps a child of its own that leaves at once with
 * _exit(0), then leaves with exit(0) (atexit handlers and a profiler's exit
 * dump run) or _exit(0). With "exec", each child instead executes PROGRAM,
 * with LD_PRELOAD and PROF_CONF taken from EXEC_PRELOAD and EXEC_PROF_CONF
 * (so that only the executed program runs under a preload). Prints the
 * medians, in microseconds, of the parent's fork() call (fork_us) and of a
 * child's whole life seen from the parent, fork to waitpid (child_us), the
 * whole loop (loop_us), a child's mean CPU time (child_cpu_us: user and
 * system, which a loaded machine disturbs less than wall time), and the page faults (minor and major) per fork of
 * the parent during the loop (parent_faults) and of a child over its life
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

/* CPU time (user + system) in microseconds. */
static double cpu_us(int who) {
    struct rusage usage;
    getrusage(who, &usage);
    return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6 + usage.ru_utime.tv_usec +
           usage.ru_stime.tv_usec;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* In the child: run argv[0] with the preload of EXEC_PRELOAD/EXEC_PROF_CONF. */
static void exec_program(char **argv) {
    const char *preload = getenv("EXEC_PRELOAD"), *conf = getenv("EXEC_PROF_CONF");
    if (preload) setenv("LD_PRELOAD", preload, 1);
    if (conf) setenv("PROF_CONF", conf, 1);
    execv(argv[0], argv);
    _exit(127);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr,
                "usage: fork_children <n> <child_bytes> [exit|_exit] [child_ms] [grandchild|-] "
                "[block_bytes]\n       fork_children <n> 0 exec PROGRAM [ARGS...]\n");
        return 1;
    }
    int n = atoi(argv[1]);
    long bytes = atol(argv[2]);
    int quick = argc > 3 && strcmp(argv[3], "_exit") == 0;
    char **program = argc > 4 && strcmp(argv[3], "exec") == 0 ? argv + 4 : NULL;
    long child_ms = argc > 4 && !program ? atol(argv[4]) : 0;
    int grandchild = argc > 5 && !program && strcmp(argv[5], "grandchild") == 0;
    long block = argc > 6 && !program ? atol(argv[6]) : 4096;
    if (block <= 0) block = 4096;
    int keep = argc > 7 && !program && strcmp(argv[7], "keep") == 0;
    char **kept = keep ? calloc(bytes / block + 1, sizeof *kept) : NULL;
    double *forks = calloc(n, sizeof *forks), *lives = calloc(n, sizeof *lives);
    /* The parent has a heap of its own, as a server would. */
    for (int i = 0; i < 2000; i++) {
        escape = malloc(4096);
        free(escape);
    }
    double parent_faults = faults(RUSAGE_SELF), child_faults = faults(RUSAGE_CHILDREN);
    double child_cpu = cpu_us(RUSAGE_CHILDREN);
    double loop_start = now_us();
    for (int i = 0; i < n; i++) {
        double start = now_us();
        pid_t pid = fork();
        if (pid == 0) {
            if (program) exec_program(program);
            long blocks = 0;
            for (long done = 0; done < bytes; done += block) {
                escape = malloc(block);
                if (!keep) {
                    free(escape);
                    continue;
                }
                kept[blocks++] = escape;
                for (long at = 0; at < block; at += 4096) kept[blocks - 1][at] = 1;
            }
            for (long i = 0; i < blocks; i++) free(kept[i]);
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
    double loop_us = now_us() - loop_start;
    child_cpu = (cpu_us(RUSAGE_CHILDREN) - child_cpu) / n;
    parent_faults = (faults(RUSAGE_SELF) - parent_faults) / n;
    child_faults = (faults(RUSAGE_CHILDREN) - child_faults) / n;
    qsort(forks, n, sizeof *forks, compare);
    qsort(lives, n, sizeof *lives, compare);
    printf("fork_us=%.1f child_us=%.1f loop_us=%.0f child_cpu_us=%.1f parent_faults=%.1f "
           "child_faults=%.1f\n",
           forks[n / 2], lives[n / 2], loop_us, child_cpu, parent_faults, child_faults);
    return 0;
}
