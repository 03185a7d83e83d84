/* 1,000 (argv[1]) short-lived threads, argv[2] alive at a time, each
 * allocating a few blocks, freeing all but one (kept in a global array and
 * freed by main), and exiting. Prints how many allocations the program made
 * (so the test can compare with the dump) and its memory high-water marks. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "proc_status.h"

#define PER_THREAD 12
static void **kept;
static unsigned long allocations;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((noinline)) static void *thread_alloc_site(size_t n) {
    void *p = malloc(n);
    if (p)
        memset(p, 0xab, n);
    return p;
}

static void *worker(void *arg) {
    long index = (long)arg;
    void *blocks[PER_THREAD];
    unsigned long made = 0;
    for (int i = 0; i < PER_THREAD; i++) {
        blocks[i] = thread_alloc_site(64 + (size_t)((index * 131 + i * 977) % 4000));
        if (blocks[i])
            made++;
    }
    for (int i = 1; i < PER_THREAD; i++)
        free(blocks[i]);
    kept[index] = blocks[0];
    pthread_mutex_lock(&lock);
    allocations += made;
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(int argc, char **argv) {
    long threads = argc > 1 ? atol(argv[1]) : 1000;
    long batch = argc > 2 ? atol(argv[2]) : 50;
    kept = calloc((size_t)threads, sizeof *kept);
    pthread_t *ids = calloc((size_t)batch, sizeof *ids);
    if (!kept || !ids)
        return 1;
    long started = 0, failed = 0;
    while (started < threads) {
        long n = 0;
        for (; n < batch && started + n < threads; n++)
            if (pthread_create(&ids[n], NULL, worker, (void *)(started + n)) != 0) {
                failed++;
                break;
            }
        for (long i = 0; i < n; i++)
            pthread_join(ids[i], NULL);
        started += n;
        if (failed)
            break;
    }
    for (long i = 0; i < started; i++)
        free(kept[i]);
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    printf("threads %ld failed %ld\n", started, failed);
    printf("thread_allocations %lu\n", allocations);
    printf("maxrss_kb %ld\n", usage.ru_maxrss);
    printf("vmhwm_kb %ld\n", status_kb("VmHWM"));
    printf("vmrss_kb %ld\n", status_kb("VmRSS"));
    free(ids);
    free(kept);
    return failed ? 2 : 0;
}
