/*
 * heapdiff views test program: an allocation wrapper heapdiff does not know
 * (xmalloc), two sizes, a layer to hide, and two named threads.
 * Everything stays live. Exact truth (bytes, through xmalloc):
 *   worker-a: small_site, 1000 x 100 B = 100000 B  (size class 64-128 B)
 *   worker-b: hidden_layer -> big_site, 100 x 5000 B = 500000 B (4-8 KiB)
 * With an argument (`names_views later`), a later moment: small_site keeps
 * 2000 blocks (grew to 200000 B), big_site 10 (shrank to 50000 B).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#define NOINLINE __attribute__((noinline, noclone))

static void *keep[2100];
static int small_count = 1000, big_count = 100;

NOINLINE void *xmalloc(size_t n) {
    void *p = malloc(n);
    if (!p) abort();
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

NOINLINE void small_site(void) {
    for (int i = 0; i < small_count; i++) keep[i] = xmalloc(100);
}

NOINLINE void big_site(void) {
    for (int i = 0; i < big_count; i++) keep[2000 + i] = xmalloc(5000);
}

NOINLINE void hidden_layer(void) {
    big_site();
    __asm__ volatile("" : : : "memory");
}

static void *worker_a(void *arg) {
    (void)arg;
    prctl(PR_SET_NAME, "worker-a");
    small_site();
    return NULL;
}

static void *worker_b(void *arg) {
    (void)arg;
    prctl(PR_SET_NAME, "worker-b");
    hidden_layer();
    return NULL;
}

int main(int argc, char **argv) {
    (void)argv;
    if (argc > 1) {
        small_count = 2000;
        big_count = 10;
    }
    pthread_t a, b;
    pthread_create(&a, NULL, worker_a, NULL);
    pthread_join(a, NULL);
    pthread_create(&b, NULL, worker_b, NULL);
    pthread_join(b, NULL);
    printf("small %d big %d\n", small_count * 100, big_count * 5000);
    return 0;
}
