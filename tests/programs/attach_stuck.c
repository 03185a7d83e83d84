/* A program no attach can find a safe point in: its two threads each hold
 * one stdio lock and wait for the other's, inside the C library, forever.
 * With SECONDS > 0 an alarm ends it then (the process exits during the
 * attach). Prints "stuck" first. Usage: attach_stuck SECONDS */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_barrier_t both_locked;

static void *other(void *unused) {
    (void)unused;
    flockfile(stderr);
    pthread_barrier_wait(&both_locked);
    flockfile(stdin);
    return NULL;
}

int main(int argc, char **argv) {
    int seconds = argc > 1 ? atoi(argv[1]) : 0;
    pthread_barrier_init(&both_locked, NULL, 2);
    puts("stuck");
    fflush(stdout);
    pthread_t thread;
    flockfile(stdin);
    pthread_create(&thread, NULL, other, NULL);
    pthread_barrier_wait(&both_locked);
    if (seconds > 0) alarm((unsigned)seconds);
    flockfile(stderr);
    return 0;
}
