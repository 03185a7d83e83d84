/* A service whose heap grows, for the heapdiff serve tests.
 *
 * Eight rounds; each keeps 16 blocks of 64 KiB in grow_cache() (the leak,
 * 1 MiB a round), churns 4 KiB buffers in churn_buffers() (freed at once)
 * and, in round 0 only, fills a 512 KiB table in steady_table(). A thread
 * named "worker" keeps 256 KiB from worker_alloc(). Run with
 * lg_prof_interval:20 it leaves a dump per MiB allocated.
 * Prints its exact truth: "grow_cache <bytes>" etc.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ROUNDS 8

void *kept[ROUNDS * 16]; /* global: the compiler cannot drop them */
void *table;
void *worker_block;

__attribute__((noinline)) void grow_cache(int round) {
    for (int i = 0; i < 16; i++) {
        kept[round * 16 + i] = malloc(64 * 1024);
        memset(kept[round * 16 + i], 1, 64);
    }
}

__attribute__((noinline)) void churn_buffers(void) {
    for (int i = 0; i < 64; i++) {
        char *p = malloc(4096);
        p[0] = (char)i;
        __asm__ volatile("" : : "r"(p) : "memory");
        free(p);
    }
}

__attribute__((noinline)) void steady_table(void) {
    table = malloc(512 * 1024);
    memset(table, 0, 64);
}

__attribute__((noinline)) void *worker_alloc(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "worker");
    worker_block = malloc(256 * 1024);
    memset(worker_block, 2, 64);
    return NULL;
}

int main(void) {
    pthread_t worker;
    pthread_create(&worker, NULL, worker_alloc, NULL);
    pthread_join(worker, NULL);
    steady_table();
    for (int round = 0; round < ROUNDS; round++) {
        grow_cache(round);
        churn_buffers();
        usleep(30 * 1000); /* lets the dumper thread write the interval dump */
    }
    printf("grow_cache %d\n", ROUNDS * 16 * 64 * 1024);
    printf("steady_table %d\n", 512 * 1024);
    printf("worker_alloc %d\n", 256 * 1024);
    return 0;
}
