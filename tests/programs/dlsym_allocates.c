/*
 * A preloaded interposer of dlsym that allocates on every call, as some
 * tracing and sandboxing libraries do. Preloaded after the shim, it makes
 * the shim's own look-ups of the next allocator allocate while they run, so
 * those allocations are served from the shim's bootstrap arena.
 *
 * The wrapper allocates, frees, then jumps (not calls) to the real dlsym,
 * so that dlsym still sees its original caller's return address, which is
 * what RTLD_NEXT is relative to (with CFI, so stacks captured inside it
 * unwind). At exit it prints how many of its blocks
 * lay inside libheapsample.so (the arena is in the shim's .bss):
 *   dlsym_allocates: arena_blocks=<n>
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

__attribute__((visibility("hidden"))) void *real_dlsym;
static int arena_blocks;

static int inside_shim(void *pointer) {
    Dl_info info;
    return dladdr(pointer, &info) && info.dli_fname && strstr(info.dli_fname, "libheapsample.so");
}

void dlsym_allocates_prepare(void) {
    if (!real_dlsym) real_dlsym = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!real_dlsym) real_dlsym = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    char *scratch = malloc(48);
    if (scratch) {
        memset(scratch, 1, 48);
        arena_blocks += inside_shim(scratch);
    }
    free(scratch);
}

__attribute__((destructor)) static void report(void) {
    fprintf(stderr, "dlsym_allocates: arena_blocks=%d\n", arena_blocks);
}

__attribute__((naked)) void *dlsym(void *handle, const char *name) {
    __asm__(
        "push %rdi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "push %rsi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "sub $8, %rsp\n"
        ".cfi_adjust_cfa_offset 8\n"
        "call dlsym_allocates_prepare@PLT\n"
        "add $8, %rsp\n"
        ".cfi_adjust_cfa_offset -8\n"
        "pop %rsi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "pop %rdi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "jmp *real_dlsym(%rip)\n");
}
