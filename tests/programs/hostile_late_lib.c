/* liblate.so: preloaded after the shim, its constructor runs before the
 * shim's, so the atexit handler it registers runs after the shim's exit
 * dump. That handler allocates and frees, as a library's cleanup might. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void late_cleanup(void) {
    void *blocks[256];
    unsigned long made = 0;
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 256; i++) {
            blocks[i] = malloc(16 + (size_t)i * 40);
            if (blocks[i]) {
                memset(blocks[i], 3, 16);
                made++;
            }
        }
        for (int i = 0; i < 256; i++)
            blocks[i] = realloc(blocks[i], 8);
        for (int i = 0; i < 256; i++)
            free(blocks[i]);
    }
    char line[80];
    int n = snprintf(line, sizeof line, "late atexit made %lu allocations\n", made);
    if (write(1, line, (size_t)n) < 0)
        _exit(9);
}

__attribute__((constructor)) static void late_init(void) { atexit(late_cleanup); }
