// A library for walk_ends' dlopen mode: its constructor allocates
// CTOR_SIZE bytes (set with -DCTOR_SIZE=...) while the program's dlopen,
// which the profiler interposes, is still running.
#include <stdint.h>
#include <stdlib.h>

volatile uintptr_t walk_ends_lib_sink;

__attribute__((noinline)) static void *ctor_alloc(void) {
    void *p = malloc(CTOR_SIZE);
    walk_ends_lib_sink += (uintptr_t)p;
    return p;
}

__attribute__((constructor)) static void at_load(void) { free(ctor_alloc()); }
