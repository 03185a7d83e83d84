/*
 * The exact peak of the live heap, with the program's own truth.
 *
 * The program keeps its live heap in usable bytes (malloc_usable_size of
 * every block it holds) and the highest it has been, reading
 * CLOCK_MONOTONIC after every allocation that raises that highest. It grows
 * a working set, frees most of it, makes a short spike of large blocks
 * (mmapped by glibc), frees it, grows a little again and ends with some of
 * its blocks still live. stdout is fully buffered in a static buffer, so the
 * program allocates nothing but its own blocks; and it prints only at the
 * end:
 *
 *   calls allocations=N frees=N bytes=N     its malloc/free calls and bytes requested
 *   live usable=N                           its live heap at the end
 *   peak usable=N at=NS                     its highest and when it was reached
 *   rise usable=N at=NS                     every new highest (in order)
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline, noclone))
#define MAX_BLOCKS 6000
#define MAX_RISES 20000

static char out[4 << 20];
static void *blocks[MAX_BLOCKS];
static uint64_t live, peak, peak_at, allocations, frees, requested;
static uint64_t rise_live[MAX_RISES], rise_at[MAX_RISES];
static int rises;

static uint64_t now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

NOINLINE static void take(int i, size_t size) {
    blocks[i] = malloc(size);
    if (!blocks[i]) {
        perror("malloc");
        exit(2);
    }
    memset(blocks[i], 1, size < 64 ? size : 64);
    allocations++;
    requested += size;
    live += malloc_usable_size(blocks[i]);
    if (live > peak) {
        peak = live;
        peak_at = now();
        if (rises < MAX_RISES) {
            rise_live[rises] = live;
            rise_at[rises++] = peak_at;
        }
    }
}

NOINLINE static void give(int i) {
    if (!blocks[i])
        return;
    live -= malloc_usable_size(blocks[i]);
    free(blocks[i]);
    frees++;
    blocks[i] = NULL;
}

int main(void) {
    setvbuf(stdout, out, _IOFBF, sizeof out);
    unsigned long x = 12345;
    /* A working set of 4000 blocks of 16..4111 bytes, then most of it freed. */
    for (int i = 0; i < 4000; i++) {
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        take(i, 16 + (size_t)(x >> 52));
    }
    for (int i = 0; i < 4000; i++) {
        if (i % 8)
            give(i);
    }
    /* A spike: 24 blocks of 256 KiB (mmapped), freed at once. */
    for (int i = 4000; i < 4024; i++)
        take(i, 256 << 10);
    for (int i = 4000; i < 4024; i++)
        give(i);
    /* Some growth again, below the spike. */
    for (int i = 4100; i < 5100; i++)
        take(i, 1000);
    for (int i = 4100; i < 5100; i += 2)
        give(i);
    printf("calls allocations=%llu frees=%llu bytes=%llu\n", (unsigned long long)allocations,
           (unsigned long long)frees, (unsigned long long)requested);
    printf("live usable=%llu\n", (unsigned long long)live);
    printf("peak usable=%llu at=%llu\n", (unsigned long long)peak, (unsigned long long)peak_at);
    for (int r = 0; r < rises; r++)
        printf("rise usable=%llu at=%llu\n", (unsigned long long)rise_live[r],
               (unsigned long long)rise_at[r]);
    fflush(stdout);
    return 0;
}
