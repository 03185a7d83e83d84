/* attach_stall: a thread allocating in a loop that measures its own worst
 * gap, for the stall an attach, dump or detach causes.
 *
 *   attach_stall SECONDS WINDOW_MS
 *
 * The main thread allocates and frees mixed sizes (keeping a ring of 1024
 * live blocks) and reads CLOCK_MONOTONIC after each allocation; per window
 * of WINDOW_MS it keeps the longest gap between two reads. Prints "ready"
 * at its start and, at its end, one line per window:
 * "window START_NS MAX_GAP_NS" (CLOCK_MONOTONIC, comparable with the
 * harness's own clock). */
#include "common.h"

#define RING 1024
#define MAX_WINDOWS 100000

static long long window_start[MAX_WINDOWS], window_gap[MAX_WINDOWS];

int main(int argc, char **argv) {
    long seconds = arg_long(argc, argv, 1, 4);
    long window_ms = arg_long(argc, argv, 2, 10);
    static unsigned char *ring[RING];
    uint64_t seed = 88172645463325252ULL;
    printf("ready\n");
    fflush(stdout);
    long long start = now_ns(), end = start + seconds * 1000000000LL;
    long long window = window_ms * 1000000LL, previous = start, current_start = start, gap = 0;
    long windows = 0;
    for (unsigned long i = 0;; i++) {
        size_t slot = i % RING;
        free(ring[slot]);
        ring[slot] = malloc(mixed_size(&seed));
        if (!ring[slot]) return 1;
        ring[slot][0] = (unsigned char)i;
        long long now = now_ns();
        if (now - previous > gap) gap = now - previous;
        previous = now;
        if (now - current_start >= window) {
            if (windows < MAX_WINDOWS) {
                window_start[windows] = current_start;
                window_gap[windows] = gap;
                windows++;
            }
            current_start = now;
            gap = 0;
        }
        if (now >= end) break;
    }
    for (long w = 0; w < windows; w++) printf("window %lld %lld\n", window_start[w], window_gap[w]);
    return 0;
}
