/*
 * How long an allocating thread stalls while dumps are written.
 *
 * `trig_pause STACKS DUMPS` (run at lg_prof_sample:0): first creates STACKS
 * distinct allocation stacks (recursion 16 levels deep through one of two
 * call sites per level, chosen by the bits of the stack's index; the blocks
 * stay live). Then a timing thread times every malloc(64)+free pair with
 * CLOCK_MONOTONIC while another thread writes DUMPS dumps to "pause.prof"
 * (5 ms apart), flagging when a dump is in progress. Prints
 *   stacks created=<n>
 *   pause window=during_dump pairs=<n> max_ns=<n> p999_ns=<n> p99_ns=<n> p50_ns=<n>
 *   pause window=between_dumps pairs=... (same fields)
 *   dump count=<n> failures=<n> max_ms=<f> mean_ms=<f>
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))
#define DEPTH 16
#define MAX_PAIRS (4u << 20)

NOINLINE void *rec_a(int depth, unsigned pattern);
NOINLINE void *rec_b(int depth, unsigned pattern);

NOINLINE void *rec(int depth, unsigned pattern) {
    void *p;
    if (depth == 0)
        p = malloc(16);
    else if (pattern & 1)
        p = rec_a(depth - 1, pattern >> 1);
    else
        p = rec_b(depth - 1, pattern >> 1);
    __asm__ volatile("" ::: "memory");
    return p;
}
NOINLINE void *rec_a(int depth, unsigned pattern) {
    void *p = rec(depth, pattern);
    __asm__ volatile("" ::: "memory");
    return p;
}
NOINLINE void *rec_b(int depth, unsigned pattern) {
    void *p = rec(depth, pattern);
    __asm__ volatile("" ::: "memory");
    return p;
}

static int (*dump)(const char *);
static volatile int dumping, stop;
static uint32_t *during, *between;
static size_t n_during, n_between;
static int ndumps, dump_failures;
static double dump_max_ms, dump_sum_ms;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void *volatile sink;

NOINLINE void timed_pair(void) {
    void *p = malloc(64);
    sink = p;
    free(p);
}

static void *timer(void *arg) {
    (void)arg;
    while (!stop) {
        int flag = dumping;
        uint64_t t0 = now_ns();
        timed_pair();
        uint64_t dt = now_ns() - t0;
        flag |= dumping;
        uint32_t v = dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt;
        if (flag && n_during < MAX_PAIRS)
            during[n_during++] = v;
        else if (!flag && n_between < MAX_PAIRS)
            between[n_between++] = v;
    }
    return NULL;
}

static void *dumper(void *arg) {
    (void)arg;
    usleep(20000);
    for (int i = 0; i < ndumps; i++) {
        dumping = 1;
        uint64_t t0 = now_ns();
        if (dump("pause.prof") != 0) dump_failures++;
        double ms = (now_ns() - t0) / 1e6;
        dumping = 0;
        dump_sum_ms += ms;
        if (ms > dump_max_ms) dump_max_ms = ms;
        usleep(5000);
    }
    stop = 1;
    return NULL;
}

static int cmp(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void report(const char *window, uint32_t *v, size_t n) {
    if (n == 0) {
        printf("pause window=%s pairs=0\n", window);
        return;
    }
    qsort(v, n, sizeof *v, cmp);
    printf("pause window=%s pairs=%zu max_ns=%u p999_ns=%u p99_ns=%u p50_ns=%u\n", window, n,
           v[n - 1], v[(size_t)(n * 0.999)], v[(size_t)(n * 0.99)], v[n / 2]);
}

int main(int argc, char **argv) {
    unsigned stacks = argc > 1 ? (unsigned)atoi(argv[1]) : 10000;
    ndumps = argc > 2 ? atoi(argv[2]) : 10;
    dump = (int (*)(const char *))dlsym(RTLD_DEFAULT, "heapsample_dump");
    if (!dump) return 3;
    void **kept = calloc(stacks, sizeof *kept);
    for (unsigned i = 0; i < stacks; i++) kept[i] = rec(DEPTH, i);
    /* mmap-backed (large) buffers, allocated before the timing starts. */
    during = malloc(MAX_PAIRS * sizeof *during);
    between = malloc(MAX_PAIRS * sizeof *between);
    memset(during, 0, MAX_PAIRS * sizeof *during);
    memset(between, 0, MAX_PAIRS * sizeof *between);
    pthread_t t1, t2;
    pthread_create(&t1, NULL, timer, NULL);
    pthread_create(&t2, NULL, dumper, NULL);
    pthread_join(t2, NULL);
    pthread_join(t1, NULL);
    printf("stacks created=%u\n", stacks);
    report("during_dump", during, n_during);
    report("between_dumps", between, n_between);
    printf("dump count=%d failures=%d max_ms=%.3f mean_ms=%.3f\n", ndumps, dump_failures,
           dump_max_ms, ndumps ? dump_sum_ms / ndumps : 0.0);
    return 0;
}
