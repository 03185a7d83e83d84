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
//   walk_ends jumps N   as paths, but each allocation is made at a stack
//                       pointer shifted by an amount that varies with i,
//                       and its leaf leaves the recursion by longjmp instead
//                       of returning (the old frames stay below the stack
//                       pointer); prints "jumps done N".
//   walk_ends threads N N threads one after another (each joined before the
//                       next starts, so glibc hands the next one the same
//                       stack), alternately running thread_a and thread_b,
//                       each making 20 allocations of paths' allocations
//                       i = 20 t .. 20 t + 19 below its function; prints
//                       "threads done N".
//   walk_ends dlopen N LIB_A LIB_B
//                       N rounds 20 frames deep, each loading and unloading
//                       LIB_A or LIB_B in turn (their constructors and
//                       destructors allocate while dlopen and dlclose run;
//                       the profiler's dlclose leaves a frame of its own
//                       between the program's) and then allocating 1000
//                       bytes through leaf_alloc at the same depth; prints
//                       "dlopen done N".
#include <alloca.h>
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
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

// Where `leaf_alloc` jumps to after allocating, when set (jumps mode).
static jmp_buf *jump_back;
static void *jumped_result;

__attribute__((noinline)) static void *leaf_alloc(size_t size) {
    void *p = malloc(size);
    sink += (uintptr_t)p;
    if (jump_back) {
        jumped_result = p;
        longjmp(*jump_back, 1);
    }
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

// Allocation i of paths, left by longjmp from its leaf.
__attribute__((noinline)) static void jump_from(long i) {
    int depth = depth_of(i), pattern = pattern_of(i);
    size_t size = 1000 + 8 * (size_t)depth + (size_t)pattern;
    jmp_buf here;
    if (setjmp(here) == 0) {
        jump_back = &here;
        next(depth, pattern, size);
        abort();  // the leaf jumps back
    }
    jump_back = NULL;
    free(jumped_result);
}

// Calls jump_from(i) with the stack pointer lowered by `shift` bytes.
__attribute__((noinline)) static void shifted(long i, size_t shift) {
    volatile char *pad = alloca(shift + 1);
    pad[0] = (char)i;
    jump_from(i);
    sink += (uintptr_t)pad[0];
}

__attribute__((noinline)) static int jumps(long n) {
    for (long i = 0; i < n; i++) shifted(i, 16 * (size_t)((i * 5) % 11));
    printf("jumps done %ld\n", n);
    return 0;
}

// Thread t's allocations: paths' i = 20 t .. 20 t + 19.
__attribute__((noinline)) static void run_paths(long t) {
    for (long i = 20 * t; i < 20 * t + 20; i++) {
        int depth = depth_of(i), pattern = pattern_of(i);
        size_t size = 1000 + 8 * (size_t)depth + (size_t)pattern;
        free(next(depth, pattern, size));
    }
}

__attribute__((noinline)) static void *thread_a(void *t) {
    run_paths((long)(intptr_t)t);
    sink ^= 1;
    return NULL;
}

__attribute__((noinline)) static void *thread_b(void *t) {
    run_paths((long)(intptr_t)t);
    sink ^= 2;
    return NULL;
}

static int threads(long n) {
    for (long t = 0; t < n; t++) {
        pthread_t thread;
        void *(*body)(void *) = t % 2 ? thread_b : thread_a;
        if (pthread_create(&thread, NULL, body, (void *)(intptr_t)t) != 0 ||
            pthread_join(thread, NULL) != 0) {
            fprintf(stderr, "pthread failed\n");
            return 1;
        }
    }
    printf("threads done %ld\n", n);
    return 0;
}

static const char *libraries[2];

// Round i of dlopen mode, under `depth` more frames of down_a.
__attribute__((noinline)) void *load_round(int depth, long i);

static void *load_next(int depth, long i) {
    if (depth > 0) return load_round(depth - 1, i);
    void *library = dlopen(libraries[i % 2], RTLD_NOW | RTLD_LOCAL);
    if (!library || dlclose(library) != 0) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        exit(1);
    }
    return leaf_alloc(1000);
}

__attribute__((noinline)) void *load_round(int depth, long i) {
    void *p = load_next(depth, i);
    sink ^= (uintptr_t)depth;
    return p;
}

__attribute__((noinline)) static int load_libraries(long n) {
    for (long i = 0; i < n; i++) free(load_next(20, i));
    printf("dlopen done %ld\n", n);
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
    if (argc == 5 && !strcmp(argv[1], "dlopen")) {
        libraries[0] = argv[3];
        libraries[1] = argv[4];
        return load_libraries(atol(argv[2]));
    }
    if (argc != 3) {
        fprintf(stderr, "usage: walk_ends paths|jit|jumps|threads N | dlopen N LIB_A LIB_B\n");
        return 2;
    }
    long n = atol(argv[2]);
    if (!strcmp(argv[1], "paths")) return paths(n);
    if (!strcmp(argv[1], "jit")) return jit(n);
    if (!strcmp(argv[1], "jumps")) return jumps(n);
    if (!strcmp(argv[1], "threads")) return threads(n);
    fprintf(stderr, "unknown mode %s\n", argv[1]);
    return 2;
}
