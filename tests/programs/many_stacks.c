/* many_stacks: one live allocation at each of 2^DEPTH distinct call stacks
 * (heapdiff's memory on a large dump: tests/tests/heapdiff_memory.rs).
 *
 *   many_stacks DEPTH
 *
 * Binary recursion through two functions: the path of calls to left() and
 * right() spells the leaf's number in binary, so every leaf is reached by
 * its own stack of about 2·DEPTH + 4 frames; each leaf keeps a block of
 * 16-4,111 bytes. Run it at lg_prof_sample:0 so every stack is in the
 * dump. */
#include <stdio.h>
#include <stdlib.h>

static void *volatile kept[1 << 20];
static long leaves;

__attribute__((noinline)) static void descend(int to_go, long path);

__attribute__((noinline)) static void left(int to_go, long path) {
    descend(to_go, path << 1);
    __asm__ volatile("" ::: "memory"); /* not a tail call: the frame stays */
}

__attribute__((noinline)) static void right(int to_go, long path) {
    descend(to_go, (path << 1) | 1);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void descend(int to_go, long path) {
    if (to_go == 0) {
        kept[leaves++ & ((1 << 20) - 1)] = malloc(16 + (size_t)(path * 2654435761u % 4096));
        return;
    }
    left(to_go - 1, path);
    right(to_go - 1, path);
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
    int depth = argc > 1 ? atoi(argv[1]) : 0;
    if (depth < 1 || depth > 20) return 2;
    descend(depth, 0);
    printf("leaves=%ld\n", leaves);
    return 0;
}
