// A library for walk_ends' dlopen mode: its constructor allocates
// CTOR_SIZE bytes, and its destructor CTOR_SIZE + 1000 bytes (set with
// -DCTOR_SIZE=...), each twice from one call site, while the program's
// dlopen or dlclose, which the profiler interposes, is still running.
#include <stdint.h>
#include <stdlib.h>

volatile uintptr_t walk_ends_lib_sink;

__attribute__((noinline)) static void *lib_alloc(size_t size) {
    void *p = malloc(size);
    walk_ends_lib_sink += (uintptr_t)p;
    return p;
}

__attribute__((constructor)) static void at_load(void) {
    for (int i = 0; i < 2; i++) free(lib_alloc(CTOR_SIZE));
}

__attribute__((destructor)) static void at_unload(void) {
    for (int i = 0; i < 2; i++) free(lib_alloc(CTOR_SIZE + 1000));
}
