/*
 * Multi-threaded allocation test program.
 *
 * `threads [nthreads [blocks]]` (default 8 threads, 20000 blocks each):
 * thread t allocates `blocks` blocks in thread_alloc_site (sizes and contents
 * derived from (t, i)), hands each to thread (t+1) % n through a
 * mutex-protected queue, and frees the blocks it receives from thread
 * (t-1) % n (every 7th one is first grown with realloc in
 * thread_realloc_site, by the receiving thread). Nothing stays live. It prints
 * a checksum of everything received, which does not depend on scheduling,
 * and the site counts in the format of alloc_sites.c.
 *
 * `threads busy-exit`: starts 4 detached threads that allocate, reallocate
 * and free forever, then returns from main while they run (a profiler's dump
 * at exit must cope with them).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline, noclone))

struct block {
    struct block *next;
    size_t size;
    uint64_t value;
};

struct queue {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct block *head, *tail;
};

static int nthreads = 8;
static long nblocks = 20000;
static struct queue *queues;
static uint64_t *checksums;
static long *received;

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static size_t block_size(int t, long i) {
    return sizeof(struct block) + (size_t)(mix((uint64_t)t << 32 | (uint64_t)i) % 2000);
}

NOINLINE struct block *thread_alloc_site(int t, long i) {
    size_t size = block_size(t, i);
    struct block *b = malloc(size);
    if (!b) abort();
    b->next = NULL;
    b->size = size;
    b->value = mix((uint64_t)i * 1315423911u + (uint64_t)t);
    memset(b + 1, (int)(b->value & 0xff), size - sizeof *b);
    return b;
}

NOINLINE struct block *thread_realloc_site(struct block *b) {
    size_t grown = b->size * 2 + 4096;
    struct block *n = realloc(b, grown);
    if (!n) abort();
    memset((char *)n + n->size, 0x5a, grown - n->size);
    n->size = grown;
    return n;
}

static void push(struct queue *q, struct block *b) {
    pthread_mutex_lock(&q->lock);
    if (q->tail)
        q->tail->next = b;
    else
        q->head = b;
    q->tail = b;
    pthread_cond_signal(&q->cond);
    pthread_mutex_unlock(&q->lock);
}

static struct block *pop(struct queue *q, int wait) {
    pthread_mutex_lock(&q->lock);
    while (wait && !q->head) pthread_cond_wait(&q->cond, &q->lock);
    struct block *b = q->head;
    if (b) {
        q->head = b->next;
        if (!q->head) q->tail = NULL;
    }
    pthread_mutex_unlock(&q->lock);
    return b;
}

static void consume(int t, struct block *b) {
    const unsigned char *bytes = (const unsigned char *)(b + 1);
    size_t payload = b->size - sizeof *b;
    uint64_t sum = b->value;
    for (size_t k = 0; k < payload; k += 97) sum += bytes[k];
    if (b->value % 7 == 0) b = thread_realloc_site(b);
    checksums[t] += mix(sum);
    received[t]++;
    free(b);
}

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg;
    struct queue *out = &queues[(t + 1) % nthreads];
    struct queue *in = &queues[t];
    for (long i = 0; i < nblocks; i++) {
        push(out, thread_alloc_site(t, i));
        struct block *b;
        while ((b = pop(in, 0))) consume(t, b);
    }
    while (received[t] < nblocks) consume(t, pop(in, 1));
    return NULL;
}

static void *busy(void *arg) {
    uint64_t x = (uint64_t)(intptr_t)arg;
    void *keep[64] = {0};
    for (;;) {
        x = mix(x + 1);
        unsigned k = (unsigned)(x % 64);
        if (keep[k] && (x & 1)) {
            void *n = realloc(keep[k], (size_t)(x % 5000) + 1);
            if (n) keep[k] = n;
        } else {
            free(keep[k]);
            keep[k] = malloc((size_t)(x % 3000) + 1);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "busy-exit") == 0) {
        for (int i = 0; i < 4; i++) {
            pthread_t th;
            if (pthread_create(&th, NULL, busy, (void *)(intptr_t)(i + 1)) != 0) return 2;
            pthread_detach(th);
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        printf("busy-exit: exiting with 4 threads still allocating\n");
        fflush(stdout);
        return 0;
    }
    if (argc > 1) nthreads = atoi(argv[1]);
    if (argc > 2) nblocks = atol(argv[2]);
    if (nthreads < 1 || nblocks < 1) return 2;
    queues = calloc((size_t)nthreads, sizeof *queues);
    checksums = calloc((size_t)nthreads, sizeof *checksums);
    received = calloc((size_t)nthreads, sizeof *received);
    pthread_t *threads = calloc((size_t)nthreads, sizeof *threads);
    if (!queues || !checksums || !received || !threads) return 2;
    for (int t = 0; t < nthreads; t++) {
        pthread_mutex_init(&queues[t].lock, NULL);
        pthread_cond_init(&queues[t].cond, NULL);
    }
    for (int t = 0; t < nthreads; t++)
        if (pthread_create(&threads[t], NULL, worker, (void *)(intptr_t)t) != 0) return 2;
    uint64_t total = 0;
    long count = 0;
    for (int t = 0; t < nthreads; t++) {
        pthread_join(threads[t], NULL);
        total += checksums[t];
        count += received[t];
    }
    /* the program's own exact numbers for its two sites */
    unsigned long alloc_bytes = 0, realloc_objects = 0, realloc_bytes = 0;
    for (int t = 0; t < nthreads; t++)
        for (long i = 0; i < nblocks; i++) {
            size_t size = block_size(t, i);
            alloc_bytes += size;
            if (mix((uint64_t)i * 1315423911u + (uint64_t)t) % 7 == 0) {
                realloc_objects++;
                realloc_bytes += size * 2 + 4096;
            }
        }
    printf("threads=%d blocks=%ld received=%ld checksum=%016llx\n", nthreads, nblocks, count,
           (unsigned long long)total);
    printf("site thread_alloc_site size=0 alloc_objects=%lu alloc_bytes=%lu live_objects=0 live_bytes=0 "
           "live_usable=0 exact_alloc=1\n",
           (unsigned long)nthreads * (unsigned long)nblocks, alloc_bytes);
    printf("site thread_realloc_site size=0 alloc_objects=%lu alloc_bytes=%lu live_objects=0 live_bytes=0 "
           "live_usable=0 exact_alloc=0\n",
           realloc_objects, realloc_bytes);
    return count == (long)nthreads * nblocks ? 0 : 1;
}
