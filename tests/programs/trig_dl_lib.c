/*
 * Shared library for the dlclose test, built twice by the test with
 * `gcc -shared -fPIC -DALLOC_FN=liba_alloc` / `-DALLOC_FN=libb_alloc`.
 * ALLOC_FN(n, size, out) allocates n blocks of `size` bytes from the
 * library's own code and hands them to the caller, which keeps them.
 */
#include <stdlib.h>

__attribute__((noinline)) void ALLOC_FN(int n, size_t size, void **out) {
    for (int i = 0; i < n; i++) {
        out[i] = malloc(size);
        if (!out[i]) abort();
    }
    __asm__ volatile("" ::: "memory"); /* no tail call, frame stays */
}
