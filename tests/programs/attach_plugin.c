/* A library loaded after an attach: plugin_leak() leaks COUNT blocks of
 * SIZE bytes (a plugin's allocations must be profiled once it loads). */
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) void plugin_leak(int count, size_t size) {
    for (int i = 0; i < count; i++) {
        char *p = malloc(size);
        if (!p) abort();
        memset(p, 7, size);
        __asm__ volatile("" : : "r"(p) : "memory");
    }
}
