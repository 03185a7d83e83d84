/*
 * Samples of exited threads.
 *
 * `trig_thread_exit THREADS PER_THREAD`: each thread allocates PER_THREAD
 * blocks of 40 bytes in exiting_thread_site, links them into a global list
 * (kept live), and exits. A pthread key destructor of the program also
 * allocates from exit_destructor_site while the thread is already exiting:
 * one block in each destructor round (glibc runs up to 4 rounds; the
 * destructor re-arms itself), so some of these allocations happen after
 * other keys' destructors (the profiler's own thread-exit flush among them)
 * have run. All threads are joined; then heapsample_dump("threads.prof")
 * and the site counts in the format of alloc_sites.c.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))
#define ROUNDS 4

struct node {
    struct node *next;
    char pad[24];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct node *live_list;
static pthread_key_t key;
static long per_thread;

static void keep(struct node *n) {
    pthread_mutex_lock(&lock);
    n->next = live_list;
    live_list = n;
    pthread_mutex_unlock(&lock);
}

NOINLINE struct node *exiting_thread_site(void) { return malloc(sizeof(struct node)); }
NOINLINE struct node *exit_destructor_site(void) { return malloc(sizeof(struct node)); }

static void destructor(void *value) {
    uintptr_t round = (uintptr_t)value;
    keep(exit_destructor_site());
    if (round < ROUNDS) pthread_setspecific(key, (void *)(round + 1));
}

static void *thread_main(void *arg) {
    (void)arg;
    for (long i = 0; i < per_thread; i++) keep(exiting_thread_site());
    pthread_setspecific(key, (void *)(uintptr_t)1);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 8;
    per_thread = argc > 2 ? atol(argv[2]) : 1000;
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "heapsample_dump");
    pthread_key_create(&key, destructor);
    for (int t = 0; t < threads; t++) {
        pthread_t th;
        pthread_create(&th, NULL, thread_main, NULL);
        pthread_join(th, NULL);
    }
    int rc = dump ? dump("threads.prof") : -1;
    long n = (long)threads * per_thread, d = (long)threads * ROUNDS;
    size_t s = sizeof(struct node);
    printf("site exiting_thread_site alloc_objects=%ld alloc_bytes=%lu live_objects=%ld "
           "live_bytes=%lu exact_alloc=1\n",
           n, n * s, n, n * s);
    printf("site exit_destructor_site alloc_objects=%ld alloc_bytes=%lu live_objects=%ld "
           "live_bytes=%lu exact_alloc=1\n",
           d, d * s, d, d * s);
    printf("dump rc=%d\n", rc);
    return 0;
}
