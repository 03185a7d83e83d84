/*
 * A tiny JIT: generates a stub into an anonymous executable mapping
 * (push rbp; mov rbp, rsp; mov rax, TARGET; call rax; pop rbp; ret) and
 * names it in its own perf map, /tmp/perf-PID.map, as a runtime does.
 *
 *   rt_jit rewrite   stub named `jit_first` allocates 400 blocks; a dump;
 *                    the code freed, new code generated AT THE SAME ADDRESS
 *                    and the map rewritten to name it `jit_second`; 400
 *                    more blocks; a second dump. Prints the address.
 *   rt_jit hostile   the stub's frame pointer chain corrupted: before the
 *                    call, rbp is set to a wild value (an unmapped address,
 *                    then a non-canonical one, then the stack pointer
 *                    itself: a loop), and the target allocates; the
 *                    program must run as without the profiler.
 *
 * Dumps go through the C API (`heapsample_dump`, found with dlsym), so the
 * program runs without the profiler too.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define BLOCKS 400
#define BLOCK_BYTES 65536

static void *kept[3 * BLOCKS];
static int nkept;
static unsigned long checksum;

__attribute__((noinline)) void *allocate_block(size_t bytes) {
    char *block = malloc(bytes);
    if (!block) {
        abort();
    }
    memset(block, (int)(bytes & 0x7f), 64);
    kept[nkept++] = block;
    return block;
}

typedef void *(*stub_fn)(size_t);

/* Writes a stub calling `target` at `code`: a frame-pointer frame, or
 * with `wild`, rbp loaded with `wild_rbp` before the call (a corrupted
 * frame chain; the saved rbp on the stack restores it after). */
static size_t generate(unsigned char *code, void *target, int wild, uint64_t wild_rbp) {
    size_t at = 0;
    code[at++] = 0x55; /* push rbp */
    if (wild) {
        code[at++] = 0x48; /* mov rbp, imm64 */
        code[at++] = 0xbd;
        memcpy(code + at, &wild_rbp, 8);
        at += 8;
    } else {
        code[at++] = 0x48; /* mov rbp, rsp */
        code[at++] = 0x89;
        code[at++] = 0xe5;
    }
    code[at++] = 0x48; /* mov rax, imm64 */
    code[at++] = 0xb8;
    uint64_t address = (uint64_t)(uintptr_t)target;
    memcpy(code + at, &address, 8);
    at += 8;
    code[at++] = 0xff; /* call rax */
    code[at++] = 0xd0;
    code[at++] = 0x5d; /* pop rbp */
    code[at++] = 0xc3; /* ret */
    return at;
}

static void name_in_perf_map(void *code, size_t size, const char *name) {
    char path[64], temp[80];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
    snprintf(temp, sizeof temp, "%s.new", path);
    FILE *map = fopen(temp, "w");
    if (!map) {
        perror("perf map");
        exit(1);
    }
    fprintf(map, "%lx %zx %s\n", (unsigned long)(uintptr_t)code, size, name);
    fclose(map);
    rename(temp, path);
}

static void dump(void) {
    int (*heapsample_dump)(const char *) =
        (int (*)(const char *))dlsym(RTLD_DEFAULT, "heapsample_dump");
    if (heapsample_dump) {
        heapsample_dump(NULL);
    }
}

static unsigned char *executable_page(void *at) {
    unsigned char *page = mmap(at, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                               MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED_NOREPLACE : 0), -1, 0);
    if (page == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    return page;
}

static void rewrite(void) {
    unsigned char *code = executable_page(NULL);
    size_t size = generate(code, (void *)allocate_block, 0, 0);
    name_in_perf_map(code, size, "jit_first");
    for (int i = 0; i < BLOCKS; i++) {
        ((stub_fn)code)(BLOCK_BYTES);
    }
    dump();
    /* The code freed and other code generated at the same address. */
    munmap(code, 4096);
    unsigned char *again = executable_page(code);
    size = generate(again, (void *)allocate_block, 0, 0);
    name_in_perf_map(again, size, "jit_second");
    for (int i = 0; i < BLOCKS; i++) {
        ((stub_fn)again)(BLOCK_BYTES);
    }
    dump();
    printf("code at %p, %d blocks\n", (void *)again, nkept);
}

/* A frame record whose saved rbp is itself: a chain that loops. */
static uint64_t looping[2];

static void hostile(void) {
    unsigned char *code = executable_page(NULL);
    looping[0] = (uint64_t)(uintptr_t)&looping[0];
    looping[1] = (uint64_t)(uintptr_t)code + 1;
    const uint64_t wild[] = {
        0x10,                          /* unmapped, near zero */
        0xdead000000000000ull,         /* not canonical */
        0x7ffffffff000ull,             /* below the top of user space */
        (uint64_t)(uintptr_t)&looping[0], /* a loop */
        (uint64_t)(uintptr_t)code,     /* the code itself */
    };
    size_t kinds = sizeof wild / sizeof wild[0];
    for (size_t k = 0; k < kinds; k++) {
        size_t size = generate(code, (void *)allocate_block, 1, wild[k]);
        name_in_perf_map(code, size, "jit_hostile");
        for (int i = 0; i < BLOCKS / 4; i++) {
            void *block = ((stub_fn)code)(BLOCK_BYTES);
            checksum += ((unsigned char *)block)[0];
        }
    }
    printf("hostile: %d blocks, checksum %lu\n", nkept, checksum);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "rewrite") == 0) {
        rewrite();
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "hostile") == 0) {
        hostile();
        return 0;
    }
    fprintf(stderr, "usage: rt_jit rewrite|hostile\n");
    return 2;
}
