/* serve_stacks: one live allocation at each of 2^DEPTH distinct call
 * stacks, for the viewer's scale benchmark (bench/serve_scale.py) and
 * heapdiff's memory benchmark (bench/heapdiff_memory.py).
 *
 *   serve_stacks [DEPTH [LEAVES]]   (default 16: 65,536 stacks; LEAVES:
 *                                    only the first LEAVES of them)
 *
 * Binary recursion through two functions: the path of calls to left() and
 * right() spells the leaf's number in binary, so every leaf is reached by
 * its own stack; each leaf keeps a block of 16-4,111 bytes. Run it at
 * lg_prof_sample:0 so every stack is in the dump. */
#include "common.h"

static void *volatile kept[1 << 20];
static long leaves;
static long max_leaves = 1L << 20;

__attribute__((noinline)) static void descend(int depth, int left_to_go, long path);

__attribute__((noinline)) static void left(int depth, int to_go, long path) {
    descend(depth, to_go, path << 1);
    __asm__ volatile("" ::: "memory"); /* not a tail call: the frame stays */
}

__attribute__((noinline)) static void right(int depth, int to_go, long path) {
    descend(depth, to_go, (path << 1) | 1);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void descend(int depth, int to_go, long path) {
    if (to_go == 0) {
        if (leaves >= max_leaves) return;
        kept[leaves++ & ((1 << 20) - 1)] = malloc(16 + (size_t)(path * 2654435761u % 4096));
        return;
    }
    left(depth + 1, to_go - 1, path);
    right(depth + 1, to_go - 1, path);
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
    long depth = arg_long(argc, argv, 1, 16);
    if (depth < 1 || depth > 20) return 2;
    max_leaves = arg_long(argc, argv, 2, 1L << depth);
    descend(0, (int)depth, 0);
    printf("leaves=%ld\n", leaves);
    return 0;
}
