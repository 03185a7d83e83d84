/*
 * A plugin for fork_plugins.c, built twice with different PAD: the two
 * builds have the same code layout (the frame size is a 32-bit immediate in
 * both) but different unwind rules at the same offsets, so a rule cached for
 * one is wrong for the other.
 */
#include <stddef.h>

void *plugin_alloc(void *(*callback)(size_t), size_t size) {
    volatile char pad[PAD];
    pad[0] = 1;
    void *block = callback(size);
    pad[PAD - 1] = (char)(size_t)block;
    return block;
}
