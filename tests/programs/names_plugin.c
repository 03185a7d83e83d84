/*
 * A plugin for heapdiff's module-qualification test, built twice as
 * libplugin_a.so and libplugin_b.so with -DPLUGIN_ENTRY=... -DCOUNT=...:
 * both define a (static) plugin_alloc, which keeps COUNT blocks of 2048 B.
 */
#include <stdlib.h>

static void *keep[COUNT];

__attribute__((noinline, noclone)) static void *plugin_alloc(size_t n) {
    void *p = malloc(n);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

void PLUGIN_ENTRY(void) {
    for (int i = 0; i < COUNT; i++) keep[i] = plugin_alloc(2048);
}
