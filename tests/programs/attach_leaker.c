/* A program to attach to: leaks 16 KiB per iteration in leak_in_loop()
 * and churns short-lived blocks in churn(), ITERATIONS times, one
 * iteration per millisecond; prints "ready" once it runs and a checksum
 * at its end (the same with or without an attach).
 * Usage: attach_leaker ITERATIONS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

__attribute__((noinline)) static char *leak_in_loop(size_t size, int i) {
    char *p = malloc(size);
    memset(p, i & 0xff, size);
    return p;
}

__attribute__((noinline)) static unsigned churn(int i) {
    unsigned sum = 0;
    for (int k = 0; k < 8; k++) {
        char *p = malloc(100 + (i * 7 + k * 13) % 4000);
        p[0] = (char)k;
        sum += (unsigned char)p[0];
        free(p);
    }
    return sum;
}

int main(int argc, char **argv) {
    long iterations = argc > 1 ? atol(argv[1]) : 3000;
    unsigned long checksum = 0;
    printf("ready\n");
    fflush(stdout);
    for (long i = 0; i < iterations; i++) {
        char *leaked = leak_in_loop(16384, (int)i);
        checksum += (unsigned char)leaked[100] + churn((int)i);
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    printf("checksum %lu\n", checksum);
    return 0;
}
