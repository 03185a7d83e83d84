/* `first_samples <threads> <blocks> <bytes>`: starts the threads, lines
 * them up on a barrier, then each allocates <blocks> blocks of <bytes>
 * bytes and keeps them, so that their first samples (at a sparse period the
 * process's first, which make the profiler's tables) come at the same
 * moment. Prints the number of blocks kept. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_barrier_t start;
static long blocks, bytes;
static void **kept[64];

static void *worker(void *arg) {
    long t = (long)arg;
    void **mine = kept[t];
    pthread_barrier_wait(&start);
    for (long i = 0; i < blocks; i++) {
        mine[i] = malloc(bytes);
        memset(mine[i], (int)t, bytes);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 8;
    blocks = argc > 2 ? atol(argv[2]) : 1000;
    bytes = argc > 3 ? atol(argv[3]) : 64;
    if (threads > 64) threads = 64;
    static void *storage[64][4096];
    if (blocks > 4096) blocks = 4096;
    pthread_t ids[64];
    pthread_barrier_init(&start, NULL, threads);
    for (long t = 0; t < threads; t++) {
        kept[t] = storage[t];
        pthread_create(&ids[t], NULL, worker, (void *)t);
    }
    for (int t = 0; t < threads; t++) pthread_join(ids[t], NULL);
    printf("kept %ld\n", threads * blocks);
    return 0;
}
