/*
 * The walk through generated code, for bench/jit_walk.py: N allocations
 * (64 bytes, freed at once), each made DEPTH calls deep, through
 *   jit     DEPTH stubs generated into an anonymous executable mapping
 *           (push rbp; mov rbp, rsp; mov rax, NEXT; call rax; pop rbp;
 *           ret): no unwind tables, the walk steps by the frame pointer;
 *   native DEPTH compiled functions of the same shape, with CFI.
 * Usage: jit_walk jit|native N
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define DEPTH 8

static unsigned long checksum;

__attribute__((noinline)) void *allocate_and_free(size_t bytes) {
    char *block = malloc(bytes);
    if (!block) {
        abort();
    }
    block[0] = 1;
    checksum += (uintptr_t)block & 0xff;
    free(block);
    return NULL;
}

typedef void *(*call_fn)(size_t);

#define LEVEL(k, next) \
    __attribute__((noinline)) void *level##k(size_t bytes) { \
        void *r = next(bytes); \
        __asm__ volatile("" ::: "memory"); \
        return r; \
    }
LEVEL(7, allocate_and_free)
LEVEL(6, level7)
LEVEL(5, level6)
LEVEL(4, level5)
LEVEL(3, level4)
LEVEL(2, level3)
LEVEL(1, level2)
LEVEL(0, level1)

static size_t stub(unsigned char *code, void *target) {
    size_t at = 0;
    uint64_t address = (uint64_t)(uintptr_t)target;
    code[at++] = 0x55;                                      /* push rbp */
    code[at++] = 0x48; code[at++] = 0x89; code[at++] = 0xe5; /* mov rbp, rsp */
    code[at++] = 0x48; code[at++] = 0xb8;                   /* mov rax, imm64 */
    memcpy(code + at, &address, 8);
    at += 8;
    code[at++] = 0xff; code[at++] = 0xd0;                   /* call rax */
    code[at++] = 0x5d;                                      /* pop rbp */
    code[at++] = 0xc3;                                      /* ret */
    return at;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: jit_walk jit|native N\n");
        return 2;
    }
    long n = atol(argv[2]);
    call_fn entry = level0;
    if (strcmp(argv[1], "jit") == 0) {
        unsigned char *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (code == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        void *next = (void *)allocate_and_free;
        for (int k = DEPTH - 1; k >= 0; k--) {
            unsigned char *at = code + 64 * k;
            stub(at, next);
            next = at;
        }
        entry = (call_fn)code;
    }
    for (long i = 0; i < n; i++) {
        entry(64);
    }
    printf("%lu\n", checksum);
    return 0;
}
