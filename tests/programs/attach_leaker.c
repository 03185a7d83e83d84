/* A program to attach to, driven by its standard input, one command a
 * line, each answered with one line:
 *   leak N   leak N blocks of 16 KiB in leak_in_loop(), each with eight
 *            short-lived blocks from churn()
 *   hold N   allocate N blocks of 4 KiB in hold_blocks() and keep them
 *   release  free and reallocate (and free) the held blocks
 *   end      print a checksum and exit 0
 * The output is the same with or without an attach. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEAK_SIZE 16384

static char *held[100000];
static long held_count;

__attribute__((noinline)) static char *leak_in_loop(size_t size, long i) {
    char *p = malloc(size);
    memset(p, (int)(i & 0xff), size);
    return p;
}

__attribute__((noinline)) static unsigned churn(long i) {
    unsigned sum = 0;
    for (int k = 0; k < 8; k++) {
        char *p = malloc(100 + (i * 7 + k * 13) % 4000);
        p[0] = (char)k;
        __asm__ volatile("" : : "r"(p) : "memory"); /* keep the allocation */
        sum += (unsigned char)p[0];
        free(p);
    }
    return sum;
}

__attribute__((noinline)) static void hold_blocks(long n) {
    for (long i = 0; i < n && held_count < 100000; i++) {
        held[held_count] = malloc(4096);
        memset(held[held_count], 5, 4096);
        held_count++;
    }
}

int main(void) {
    unsigned long checksum = 0, leaked = 0;
    char line[128];
    while (fgets(line, sizeof line, stdin)) {
        long n = 0;
        if (sscanf(line, "leak %ld", &n) == 1) {
            for (long i = 0; i < n; i++) {
                char *p = leak_in_loop(LEAK_SIZE, (long)leaked);
                checksum += (unsigned char)p[100] + churn((long)leaked);
                leaked++;
            }
            printf("leaked %lu\n", leaked);
        } else if (sscanf(line, "hold %ld", &n) == 1) {
            hold_blocks(n);
            printf("holding %ld\n", held_count);
        } else if (strncmp(line, "release", 7) == 0) {
            for (long i = 0; i < held_count; i += 2) free(held[i]);
            for (long i = 1; i < held_count; i += 2) {
                held[i] = realloc(held[i], 8192 + (size_t)i);
                checksum += (unsigned char)held[i][10];
                free(held[i]);
            }
            printf("released %ld\n", held_count);
            held_count = 0;
        } else if (strncmp(line, "end", 3) == 0) {
            printf("checksum %lu\n", checksum);
            return 0;
        }
        fflush(stdout);
    }
    return 1;
}
