/*
 * Exact counts per stack and thread across thread exits and a dump taken
 * while threads allocate (run at lg_prof_sample:0).
 *
 * 16 threads; thread t allocates along two stacks, each block's size
 * naming its thread:
 *   kept_site:  KEPT(t)  = 500 + 7t  blocks of 24 + t bytes, kept to the end;
 *   churn_site: CHURN(t) = 3000 + 11t blocks of 48 + t bytes, each freed at once.
 * Threads 0-7 do both and exit (joined) before the middle dump. Threads
 * 8-15 do kept_site, meet main at a barrier, then do churn_site while main
 * calls heapsample_dump(NULL), and exit after it. The final dump at exit
 * follows. Prints `dump rc=<rc>` and nothing before the end.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))
#define THREADS 16
#define EARLY 8
#define KEPT(t) (500 + 7 * (t))
#define CHURN(t) (3000 + 11 * (t))

typedef int (*dump_fn)(const char *);

static pthread_barrier_t ready;
/* Not static: the compiler may not drop stores no one here reads. */
void *kept[THREADS][KEPT(THREADS)];

NOINLINE void kept_site(int t) {
    for (int i = 0; i < KEPT(t); i++)
        kept[t][i] = malloc(24 + t);
}

NOINLINE void churn_site(int t) {
    for (int i = 0; i < CHURN(t); i++) {
        void *p = malloc(48 + t);
        __asm__ volatile("" : : "r"(p) : "memory");
        free(p);
    }
}

static void *thread_main(void *arg) {
    int t = (int)(intptr_t)arg;
    kept_site(t);
    if (t >= EARLY)
        pthread_barrier_wait(&ready);
    churn_site(t);
    return NULL;
}

int main(void) {
    dump_fn dump = (dump_fn)dlsym(RTLD_DEFAULT, "heapsample_dump");
    if (!dump) {
        printf("api missing\n");
        return 3;
    }
    pthread_t threads[THREADS];
    pthread_barrier_init(&ready, NULL, THREADS - EARLY + 1);
    for (int t = 0; t < EARLY; t++)
        pthread_create(&threads[t], NULL, thread_main, (void *)(intptr_t)t);
    for (int t = 0; t < EARLY; t++)
        pthread_join(threads[t], NULL);
    for (int t = EARLY; t < THREADS; t++)
        pthread_create(&threads[t], NULL, thread_main, (void *)(intptr_t)t);
    pthread_barrier_wait(&ready);
    int rc = dump(NULL);
    for (int t = EARLY; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    printf("dump rc=%d\n", rc);
    return 0;
}
