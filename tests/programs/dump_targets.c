/*
 * Where dumps go, and what they cost the rest of the program.
 *
 *   dump_targets explicit <path>      heapsample_dump(path); prints rc=<errno>
 *   dump_targets leak <n>             keeps n small blocks live (leak summary)
 *   dump_targets big <bits> <dumps>   2^bits distinct live stacks (run at
 *                                     lg_prof_sample:0), then <dumps>
 *                                     automatic dumps; prints "stacks ready"
 *                                     and "dump <i> rc=<rc>" as it goes
 *   dump_targets forklat <bits> <forks> <path>
 *                                     2^bits stacks; <forks> fork()s timed
 *                                     alone, then as many while another
 *                                     thread dumps to <path> in a loop;
 *                                     prints the latencies' median and max
 *                                     (microseconds) and the dumps' median
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef int (*dump_fn)(const char *);
static dump_fn dump;

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

__attribute__((noinline)) static void *leaf(size_t n) {
    void *p = malloc(n);
    if (p) memset(p, 1, n);
    __asm__ volatile("" ::: "memory");
    return p;
}

/* A distinct call path (so a distinct stack) for each value of `path`. */
__attribute__((noinline)) static void *zero(unsigned path, int bits);
__attribute__((noinline)) static void *one(unsigned path, int bits);
__attribute__((noinline)) static void *walk(unsigned path, int bits) {
    void *p = bits == 0 ? leaf(16) : (path & 1) ? one(path >> 1, bits - 1) : zero(path >> 1, bits - 1);
    __asm__ volatile("" ::: "memory");
    return p;
}
__attribute__((noinline)) static void *zero(unsigned path, int bits) {
    void *p = walk(path, bits);
    __asm__ volatile("" ::: "memory");
    return p;
}
__attribute__((noinline)) static void *one(unsigned path, int bits) {
    void *p = walk(path, bits);
    __asm__ volatile("" ::: "memory");
    return p;
}

static void make_stacks(int bits) {
    for (unsigned path = 0; path < (1u << bits); path++)
        if (!walk(path, bits)) exit(2); /* kept live on purpose */
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void summary(const char *what, double *v, int n) {
    qsort(v, n, sizeof *v, compare);
    printf("%s median_us=%.1f max_us=%.1f\n", what, v[n / 2], v[n - 1]);
}

static double fork_once(void) {
    double start = now_us();
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    double took = now_us() - start;
    waitpid(pid, NULL, 0);
    return took;
}

static atomic_int stop, dumping;
static const char *loop_path;
static double dump_times[100000];
static int dump_count;

static void *dump_loop(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        double start = now_us();
        atomic_store(&dumping, 1);
        dump(loop_path);
        if (dump_count < 100000) dump_times[dump_count++] = now_us() - start;
    }
    return NULL;
}

int main(int argc, char **argv) {
    dump = (dump_fn)dlsym(RTLD_DEFAULT, "heapsample_dump");
    if (argc == 3 && strcmp(argv[1], "explicit") == 0) {
        printf("rc=%d\n", dump ? dump(argv[2]) : -1);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "leak") == 0) {
        for (int i = 0; i < atoi(argv[2]); i++) leaf(64);
        printf("leaked\n");
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "big") == 0) {
        make_stacks(atoi(argv[2]));
        printf("stacks ready\n");
        fflush(stdout);
        for (int i = 0; i < atoi(argv[3]); i++) {
            int rc = dump ? dump(NULL) : -1;
            printf("dump %d rc=%d\n", i, rc);
            fflush(stdout);
        }
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "forklat") == 0) {
        make_stacks(atoi(argv[2]));
        int forks = atoi(argv[3]);
        loop_path = argv[4];
        double *alone = calloc(forks, sizeof *alone), *during = calloc(forks, sizeof *during);
        for (int i = 0; i < forks; i++) alone[i] = fork_once();
        pthread_t thread;
        if (!dump || pthread_create(&thread, NULL, dump_loop, NULL) != 0) return 3;
        while (!atomic_load(&dumping)) usleep(100);
        for (int i = 0; i < forks; i++) {
            during[i] = fork_once();
            usleep(2000);
        }
        atomic_store(&stop, 1);
        pthread_join(thread, NULL);
        summary("alone", alone, forks);
        summary("during", during, forks);
        summary("dumps", dump_times, dump_count);
        printf("dumps=%d\n", dump_count);
        return 0;
    }
    fprintf(stderr, "usage: see the comment at the top\n");
    return 1;
}
