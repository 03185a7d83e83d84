/* A thread-per-task program: argv[1] short threads, argv[2] alive at a time,
 * each running the same task (argv[3] blocks of argv[4] bytes allocated at
 * one site and freed) and exiting, so every thread samples identical stacks.
 * Prints what the tasks allocated (the truth the dump's estimate is checked
 * against) and the process's memory high-water mark. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc_status.h"

static long blocks_per_task;
static size_t block_size;

__attribute__((noinline)) static void *task_alloc_site(size_t n) {
    void *p = malloc(n);
    if (p)
        memset(p, 0x5a, 64);
    return p;
}

static void *task(void *arg) {
    (void)arg;
    for (long i = 0; i < blocks_per_task; i++) {
        void *p = task_alloc_site(block_size);
        if (!p)
            abort();
        free(p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: thread_per_task THREADS ALIVE BLOCKS SIZE\n");
        return 1;
    }
    long threads = atol(argv[1]), alive = atol(argv[2]);
    blocks_per_task = atol(argv[3]);
    block_size = (size_t)atol(argv[4]);
    pthread_t *ids = calloc((size_t)alive, sizeof *ids);
    if (!ids)
        return 1;
    long started = 0;
    while (started < threads) {
        long n = 0;
        for (; n < alive && started + n < threads; n++)
            if (pthread_create(&ids[n], NULL, task, NULL) != 0) {
                fprintf(stderr, "pthread_create failed after %ld threads\n", started + n);
                return 2;
            }
        for (long i = 0; i < n; i++)
            pthread_join(ids[i], NULL);
        started += n;
    }
    free(ids);
    printf("threads %ld\n", started);
    printf("task_bytes %lu\n", (unsigned long)started * blocks_per_task * block_size);
    printf("vmhwm_kb %ld\n", status_kb("VmHWM"));
    return 0;
}
