/* mixed: malloc/free microbenchmark with mixed sizes 16 B - 64 KiB.
 *
 *   mixed THREADS OPS_PER_THREAD      (THREADS 0 = one per core)
 *
 * Each thread keeps 4096 live slots; every operation frees a random slot (if
 * occupied) and refills it with a block of a mixed size whose first and last
 * bytes it writes.  Threads share nothing but the allocator.  Prints a
 * checksum so the work cannot be optimised away; exits non-zero on a
 * corrupted block. */
#include <pthread.h>
#include <string.h>
#include "common.h"

#define SLOTS 4096

struct job { long ops; uint64_t seed; uint64_t sum; int bad; };

static void *worker(void *arg) {
    struct job *j = arg;
    static __thread unsigned char *slot[SLOTS];
    static __thread size_t len[SLOTS];
    uint64_t s = j->seed;
    for (long i = 0; i < j->ops; i++) {
        unsigned k = (unsigned)(xorshift(&s) % SLOTS);
        if (slot[k]) {
            if (slot[k][0] != (unsigned char)len[k] || slot[k][len[k] - 1] != 0x5a) j->bad = 1;
            j->sum += len[k];
            free(slot[k]);
        }
        size_t n = mixed_size(&s);
        unsigned char *p = malloc(n);
        if (!p) { j->bad = 1; break; }
        p[0] = (unsigned char)n;
        p[n - 1] = 0x5a;
        slot[k] = p;
        len[k] = n;
    }
    for (unsigned k = 0; k < SLOTS; k++) free(slot[k]);
    return NULL;
}

int main(int argc, char **argv) {
    long threads = arg_long(argc, argv, 1, 1);
    long ops = arg_long(argc, argv, 2, 1000000);
    pthread_t tid[256];
    struct job jobs[256];
    if (threads > 256) threads = 256;
    for (long t = 0; t < threads; t++) {
        jobs[t] = (struct job){ .ops = ops, .seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(t + 1) };
        if (pthread_create(&tid[t], NULL, worker, &jobs[t])) { perror("pthread_create"); return 1; }
    }
    uint64_t sum = 0;
    int bad = 0;
    for (long t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        sum += jobs[t].sum;
        bad |= jobs[t].bad;
    }
    printf("threads=%ld ops=%ld checksum=%llu\n", threads, ops, (unsigned long long)sum);
    return bad;
}
