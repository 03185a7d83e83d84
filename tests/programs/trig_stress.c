/*
 * Stress test program: dumps under threads and fork.
 *
 * `trig_stress THREADS ITERS FORKS`:
 * - THREADS workers: worker t allocates ITERS blocks in worker_site (sizes
 *   derived from (t, i)), hands each to worker (t+1) % THREADS through a
 *   mutex-protected queue and frees the blocks it receives: every block is
 *   freed by another thread than the one that allocated it.
 * - one more thread calls heapsample_dump(NULL) in a loop (1 ms apart, at
 *   most 300 times) until the workers are done (counting results that are
 *   not 0);
 * - the main thread forks FORKS children while the workers run; each child
 *   allocates 1000 x 48 bytes in child_site (kept), calls
 *   heapsample_dump(NULL) and exits with exit(0) (so it also writes its
 *   final dump). Each child reports `child pid=<pid> dump_rc=<rc>` on
 *   stderr with write(2).
 * At the end it prints its own exact counts, in the format of
 * alloc_sites.c:
 *   site worker_site alloc_objects=.. alloc_bytes=.. live_objects=0 live_bytes=0 exact_alloc=1
 *   program allocations=<its malloc calls> frees=<its free calls> dumps=<n> dump_failures=<n> forks=<n>
 * With ITERS = 0 and FORKS = 0 it is the control run: same threads, no work.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

struct block {
    struct block *next;
    size_t size;
};

struct queue {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct block *head;
};

static int nthreads;
static long iters;
static struct queue *queues;
static unsigned long long *bytes_by_thread;
static int (*dump)(const char *);
static volatile int workers_done;
static long dumps_ok, dump_failures;

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

NOINLINE struct block *worker_site(size_t size) {
    struct block *b = malloc(size);
    if (!b) abort();
    b->next = NULL;
    b->size = size;
    return b;
}

void *kept_in_child[1000];

NOINLINE void child_site(void) {
    for (int i = 0; i < 1000; i++) kept_in_child[i] = malloc(48);
}

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg;
    struct queue *out = &queues[(t + 1) % nthreads], *in = &queues[t];
    long received = 0;
    for (long i = 0; i < iters || received < iters;) {
        if (i < iters) {
            size_t size = sizeof(struct block) + mix((uint64_t)t << 32 | (uint64_t)i) % 1000;
            struct block *b = worker_site(size);
            bytes_by_thread[t] += size;
            pthread_mutex_lock(&out->lock);
            b->next = out->head;
            out->head = b;
            pthread_cond_signal(&out->cond);
            pthread_mutex_unlock(&out->lock);
            i++;
        }
        pthread_mutex_lock(&in->lock);
        while (i >= iters && received < iters && !in->head) pthread_cond_wait(&in->cond, &in->lock);
        struct block *got = in->head;
        in->head = NULL;
        pthread_mutex_unlock(&in->lock);
        while (got) {
            struct block *next = got->next;
            free(got);
            received++;
            got = next;
        }
    }
    return NULL;
}

static void *dumper(void *arg) {
    (void)arg;
    /* Back to back, but bounded: every automatic dump is a new file. */
    while (!workers_done && dumps_ok + dump_failures < 300) {
        if (dump(NULL) == 0)
            dumps_ok++;
        else
            dump_failures++;
        usleep(1000);
    }
    return NULL;
}

static void say(const char *s) {
    ssize_t ignored = write(2, s, strlen(s));
    (void)ignored;
}

int main(int argc, char **argv) {
    nthreads = argc > 1 ? atoi(argv[1]) : 16;
    iters = argc > 2 ? atol(argv[2]) : 5000;
    int nforks = argc > 3 ? atoi(argv[3]) : 4;
    dump = (int (*)(const char *))dlsym(RTLD_DEFAULT, "heapsample_dump");
    if (!dump) {
        printf("api missing\n");
        return 3;
    }
    /* calloc: 2 allocations of the program itself. */
    queues = calloc((size_t)nthreads, sizeof *queues);
    bytes_by_thread = calloc((size_t)nthreads, sizeof *bytes_by_thread);
    long own_allocations = 2;
    for (int t = 0; t < nthreads; t++) {
        pthread_mutex_init(&queues[t].lock, NULL);
        pthread_cond_init(&queues[t].cond, NULL);
    }
    pthread_t threads[256], dump_thread;
    pthread_create(&dump_thread, NULL, dumper, NULL);
    for (int t = 0; t < nthreads; t++)
        pthread_create(&threads[t], NULL, worker, (void *)(intptr_t)t);
    int forks = 0;
    for (int f = 0; f < nforks; f++) {
        usleep(20000);
        pid_t pid = fork();
        if (pid < 0) abort();
        if (pid == 0) {
            child_site();
            int rc = dump(NULL);
            char line[96];
            snprintf(line, sizeof line, "child pid=%d dump_rc=%d\n", (int)getpid(), rc);
            say(line);
            exit(0);
        }
        forks++;
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            say("child failed\n");
            return 1;
        }
    }
    for (int t = 0; t < nthreads; t++) pthread_join(threads[t], NULL);
    workers_done = 1;
    pthread_join(dump_thread, NULL);
    unsigned long long bytes = 0;
    for (int t = 0; t < nthreads; t++) bytes += bytes_by_thread[t];
    long worker_objects = (long)nthreads * iters;
    printf("site worker_site alloc_objects=%ld alloc_bytes=%llu live_objects=0 live_bytes=0 "
           "exact_alloc=1\n",
           worker_objects, bytes);
    printf("program allocations=%ld frees=%ld dumps=%ld dump_failures=%ld forks=%d\n",
           worker_objects + own_allocations, worker_objects, dumps_ok, dump_failures, forks);
    return 0;
}
