/*
 * Priority inversion: a SCHED_FIFO thread that allocates, sharing one CPU
 * with a thread that writes dumps in a loop.
 *
 * `rt_inversion SECONDS`: pins itself to CPU 0; a dumping thread
 * (SCHED_OTHER) calls heapsample_dump("inv.prof") in a loop; a real-time
 * thread (SCHED_FIFO, priority 10) times malloc(64)+free pairs from
 * several call sites, and every 64 pairs starts a short-lived thread whose
 * first allocations set it up in the profiler (the paths that take the
 * profiler's locks), sleeping 200 µs every 256 pairs so the dumping thread
 * runs (and is preempted while it holds whatever it holds). The short-lived
 * threads inherit SCHED_FIFO and time their first pair. Prints
 *   rt policy=<fifo|none> pairs=<n> max_ns=<n> p999_ns=<n> first_max_ns=<n> dumps=<n>
 * `policy=none` when SCHED_FIFO is not permitted (the timings are then
 * not meaningful for the inversion).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_PAIRS (1u << 22)

static volatile int stop;
static int (*dump_fn)(const char *);
static unsigned dumps;
static uint32_t pair_ns[MAX_PAIRS];

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void pin_to_cpu0(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    sched_setaffinity(0, sizeof set, &set);
}

static void *dumper(void *arg) {
    (void)arg;
    pin_to_cpu0();
    while (!stop) {
        if (dump_fn) {
            dump_fn("inv.prof");
            dumps++;
        } else {
            usleep(1000);
        }
    }
    return NULL;
}

static uint64_t first_max_ns;

static void *short_lived(void *arg) {
    uint64_t t0 = now_ns();
    void *p = malloc(32 + (uintptr_t)arg % 64);
    free(p);
    uint64_t took = now_ns() - t0, seen = __atomic_load_n(&first_max_ns, __ATOMIC_RELAXED);
    while (took > seen &&
           !__atomic_compare_exchange_n(&first_max_ns, &seen, took, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return NULL;
}

__attribute__((noinline)) static void *site_a(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *site_b(size_t n) { return malloc(n + 8); }

struct rt_args {
    double seconds;
    unsigned pairs;
};

static void *rt_thread(void *arg) {
    struct rt_args *args = arg;
    pin_to_cpu0();
    uint64_t end = now_ns() + (uint64_t)(args->seconds * 1e9);
    unsigned n = 0;
    while (n < MAX_PAIRS && now_ns() < end) {
        uint64_t t0 = now_ns();
        void *p = (n & 1) ? site_a(64) : site_b(64);
        free(p);
        uint64_t took = now_ns() - t0;
        pair_ns[n] = (uint32_t)(took > UINT32_MAX ? UINT32_MAX : took);
        n++;
        if (n % 64 == 0) {
            pthread_t t;
            if (pthread_create(&t, NULL, short_lived, (void *)(uintptr_t)n) == 0)
                pthread_detach(t);
        }
        if (n % 256 == 0) {
            struct timespec pause = {0, 200000};
            nanosleep(&pause, NULL);
        }
    }
    args->pairs = n;
    return NULL;
}

static int compare(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    pin_to_cpu0();
    dump_fn = (int (*)(const char *))dlsym(RTLD_DEFAULT, "heapsample_dump");
    pthread_t d, r;
    pthread_create(&d, NULL, dumper, NULL);
    struct rt_args args = {seconds, 0};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
    pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
    struct sched_param param = {.sched_priority = 10};
    pthread_attr_setschedparam(&attr, &param);
    const char *policy = "fifo";
    if (pthread_create(&r, &attr, rt_thread, &args) != 0) {
        policy = "none";
        pthread_create(&r, NULL, rt_thread, &args);
    }
    pthread_join(r, NULL);
    stop = 1;
    pthread_join(d, NULL);
    qsort(pair_ns, args.pairs, sizeof pair_ns[0], compare);
    unsigned n = args.pairs;
    usleep(20000); /* the last short-lived threads */
    printf("rt policy=%s pairs=%u max_ns=%u p999_ns=%u first_max_ns=%llu dumps=%u\n", policy, n,
           n ? pair_ns[n - 1] : 0, n ? pair_ns[n - 1 - n / 1000] : 0,
           (unsigned long long)__atomic_load_n(&first_max_ns, __ATOMIC_RELAXED), dumps);
    return 0;
}
