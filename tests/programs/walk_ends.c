// Stacks whose walks the profiler must get exactly right or say why not.
//
//   walk_ends paths N   N allocations at varying depths through two
//                       alternating recursive functions (the path of
//                       allocation i is given by `depth_of` and `pattern_of`,
//                       which the test recomputes), each of a size that
//                       names its path; prints "paths done N".
//   walk_ends jit N     N allocations from a function called by machine code
//                       in an anonymous executable mapping that has no unwind
//                       information and keeps no frame pointer (rbp 0 while it
//                       calls), then N plain ones; prints "jit done N".
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static volatile uintptr_t sink;

// Allocation i: `depth_of(i)` recursive frames below `paths`, the frame at
// level k (0 innermost) being `down_b` if bit (k % 3) of `pattern_of(i)` is
// set, else `down_a`; the size is 1000 + 8 * depth + pattern.
static int depth_of(long i) { return 1 + (int)((i * 7 + i / 5) % 23); }
static int pattern_of(long i) { return (int)((i / 3) % 8); }

__attribute__((noinline)) static void *leaf_alloc(size_t size) {
    void *p = malloc(size);
    sink += (uintptr_t)p;
    return p;
}

__attribute__((noinline)) void *down_a(int level, int pattern, size_t size);
__attribute__((noinline)) void *down_b(int level, int pattern, size_t size);

static void *next(int level, int pattern, size_t size) {
    if (level == 0) return leaf_alloc(size);
    return (pattern >> ((level - 1) % 3)) & 1 ? down_b(level - 1, pattern, size)
                                              : down_a(level - 1, pattern, size);
}

__attribute__((noinline)) void *down_a(int level, int pattern, size_t size) {
    void *p = next(level, pattern, size);
    sink ^= (uintptr_t)level;
    return p;
}

__attribute__((noinline)) void *down_b(int level, int pattern, size_t size) {
    void *p = next(level, pattern, size);
    sink ^= (uintptr_t)level + 1;
    return p;
}

__attribute__((noinline)) static int paths(long n) {
    for (long i = 0; i < n; i++) {
        int depth = depth_of(i), pattern = pattern_of(i);
        // `depth` frames of down_a/down_b: the outermost is level depth - 1.
        size_t size = 1000 + 8 * (size_t)depth + (size_t)pattern;
        void *p = next(depth, pattern, size);
        free(p);
    }
    printf("paths done %ld\n", n);
    return 0;
}

static void *jit_result;

__attribute__((noinline)) static void allocate_under_jit(void) {
    jit_result = leaf_alloc(4096);
}

__attribute__((noinline)) static int jit(long n) {
    // push rbp; xor ebp, ebp; call rdi; pop rbp; ret
    static const unsigned char code[] = {0x55, 0x31, 0xed, 0xff, 0xd7, 0x5d, 0xc3};
    void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    memcpy(page, code, sizeof code);
    void (*stub)(void (*)(void)) = (void (*)(void (*)(void)))page;
    for (long i = 0; i < n; i++) {
        stub(allocate_under_jit);
        free(jit_result);
    }
    for (long i = 0; i < n; i++) free(leaf_alloc(2048));
    printf("jit done %ld\n", n);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: walk_ends paths|jit N\n");
        return 2;
    }
    long n = atol(argv[2]);
    if (!strcmp(argv[1], "paths")) return paths(n);
    if (!strcmp(argv[1], "jit")) return jit(n);
    fprintf(stderr, "unknown mode %s\n", argv[1]);
    return 2;
}
