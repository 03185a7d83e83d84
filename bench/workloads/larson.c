/* larson: producer/consumer churn where threads free each other's blocks.
 *
 *   larson THREADS BLOCKS_PER_THREAD     (THREADS 0 = one per core, min 2)
 *
 * Threads form a ring: thread i allocates mixed-size blocks and hands them to
 * thread i+1 through a single-producer/single-consumer queue; it frees the
 * blocks it receives from thread i-1, i.e. memory allocated by another
 * thread (remote frees, as in the Larson server benchmark).  A thread also
 * keeps a small local pool it churns once per 64 blocks sent.  Queues hold
 * 8 Ki blocks so a briefly descheduled partner does not stall a thread; when
 * nothing can move the thread yields.  The number of allocations is fixed
 * (blocks * (1 + 1/64) per thread) whatever the scheduling.  Exits non-zero
 * if a received block is corrupted. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include "common.h"

#define QCAP 8192
#define LOCAL 256

struct queue {
    _Alignas(64) _Atomic unsigned long head; /* consumer position */
    _Alignas(64) _Atomic unsigned long tail; /* producer position */
    unsigned char *item[QCAP];
};

struct job {
    long blocks, sent, freed;
    unsigned char *next; /* the block waiting to be pushed */
    struct queue *out, *in;
    uint64_t seed;
    int bad;
};

static int push(struct queue *q, unsigned char *p) {
    unsigned long t = atomic_load_explicit(&q->tail, memory_order_relaxed);
    if (t - atomic_load_explicit(&q->head, memory_order_acquire) == QCAP) return 0;
    q->item[t % QCAP] = p;
    atomic_store_explicit(&q->tail, t + 1, memory_order_release);
    return 1;
}

static unsigned char *pop(struct queue *q) {
    unsigned long h = atomic_load_explicit(&q->head, memory_order_relaxed);
    if (h == atomic_load_explicit(&q->tail, memory_order_acquire)) return NULL;
    unsigned char *p = q->item[h % QCAP];
    atomic_store_explicit(&q->head, h + 1, memory_order_release);
    return p;
}

static unsigned char *make_block(uint64_t *s) {
    size_t n = mixed_size(s);
    unsigned char *p = malloc(n);
    if (!p) abort();
    p[0] = 0xa5;
    p[n - 1] = 0x5a;
    return p;
}

static void local_churn(struct job *j, unsigned char **pool) {
    unsigned k = (unsigned)(xorshift(&j->seed) % LOCAL);
    free(pool[k]);
    pool[k] = make_block(&j->seed);
}

static void *worker(void *arg) {
    struct job *j = arg;
    unsigned char *pool[LOCAL] = { 0 };
    j->next = make_block(&j->seed);
    while (j->sent < j->blocks || j->freed < j->blocks) {
        int progress = 0;
        for (int b = 0; b < 64 && j->sent < j->blocks; b++) {
            if (!push(j->out, j->next)) break;
            j->next = make_block(&j->seed);
            if (++j->sent % 64 == 0) local_churn(j, pool);
            progress = 1;
        }
        for (int b = 0; b < 64; b++) {
            unsigned char *p = pop(j->in);
            if (!p) break;
            if (p[0] != 0xa5) j->bad = 1;
            free(p);
            j->freed++;
            progress = 1;
        }
        if (!progress) sched_yield();
    }
    for (unsigned k = 0; k < LOCAL; k++) free(pool[k]);
    free(j->next);
    return NULL;
}

int main(int argc, char **argv) {
    long threads = arg_long(argc, argv, 1, 0);
    long blocks = arg_long(argc, argv, 2, 1000000);
    if (threads < 2) threads = 2;
    if (threads > 64) threads = 64;
    struct queue *q = aligned_alloc(64, sizeof(struct queue) * (size_t)threads);
    struct job jobs[64];
    pthread_t tid[64];
    for (long t = 0; t < threads; t++) {
        atomic_init(&q[t].head, 0);
        atomic_init(&q[t].tail, 0);
    }
    for (long t = 0; t < threads; t++) {
        jobs[t] = (struct job){ .blocks = blocks, .out = &q[(t + 1) % threads], .in = &q[t],
                                .seed = 0x2545f4914f6cdd1dULL * (uint64_t)(t + 1) };
        if (pthread_create(&tid[t], NULL, worker, &jobs[t])) { perror("pthread_create"); return 1; }
    }
    int bad = 0;
    long freed = 0;
    for (long t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        bad |= jobs[t].bad;
        freed += jobs[t].freed;
    }
    free(q);
    printf("threads=%ld blocks=%ld freed=%ld\n", threads, blocks, freed);
    return bad || freed != threads * blocks;
}
