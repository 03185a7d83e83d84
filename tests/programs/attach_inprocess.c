/* Loads libheapsample.so late, as `heapsample attach` does, and calls its
 * entry points itself: blocks allocated before the attach are freed and
 * reallocated after it, a function leaks, a plugin loaded after the attach
 * leaks, a dump is written, the profiler detaches, and the program goes on.
 * Usage: attach_inprocess LIBRARY PLUGIN OPTIONS */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*attach_fn)(const char *, char *, size_t);
typedef int (*message_fn)(char *, size_t);
typedef void (*leak_fn)(int, size_t);

#define BEFORE 200

__attribute__((noinline)) static void *allocate_before(size_t size) {
    void *p = malloc(size);
    memset(p, 1, size);
    return p;
}

__attribute__((noinline)) static void leak_after(int count, size_t size) {
    for (int i = 0; i < count; i++) {
        char *p = malloc(size);
        memset(p, 2, size);
        __asm__ volatile("" : : "r"(p) : "memory");
    }
}

static void *need(void *handle, const char *name) {
    void *f = dlsym(handle, name);
    if (!f) {
        printf("missing %s: %s\n", name, dlerror());
        exit(3);
    }
    return f;
}

int main(int argc, char **argv) {
    if (argc != 4) return 2;
    void *before[BEFORE];
    for (int i = 0; i < BEFORE; i++) before[i] = allocate_before(1000 + 100 * i);
    if (dlsym(RTLD_DEFAULT, "heapsample_attach")) {
        puts("the profiler is loaded already");
        return 4;
    }
    void *library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        printf("dlopen: %s\n", dlerror());
        return 3;
    }
    char message[4096];
    int status = ((attach_fn)need(library, "heapsample_attach"))(argv[3], message, sizeof message);
    printf("attach %d\n", status);
    fprintf(stderr, "attach: %s\n", message);
    if (status != 0) return 5;
    /* Blocks of before the attach: half freed, half reallocated (moved) and
     * then freed. */
    for (int i = 0; i < BEFORE / 2; i++) free(before[i]);
    for (int i = BEFORE / 2; i < BEFORE; i++) {
        before[i] = realloc(before[i], 100000 + i);
        memset(before[i], 3, 100000 + i);
    }
    for (int i = BEFORE / 2; i < BEFORE; i++) free(before[i]);
    leak_after(64, 65536);
    void *plugin = dlopen(argv[2], RTLD_NOW);
    if (!plugin) {
        printf("plugin: %s\n", dlerror());
        return 3;
    }
    ((leak_fn)need(plugin, "plugin_leak"))(32, 65536);
    status = ((message_fn)need(library, "heapsample_dump_named"))(message, sizeof message);
    printf("dump %d\n", status);
    fprintf(stderr, "dump: %s\n", message);
    status = ((message_fn)need(library, "heapsample_detach"))(message, sizeof message);
    printf("detach %d\n", status);
    fprintf(stderr, "detach: %s\n", message);
    leak_after(16, 65536); /* not profiled */
    ((message_fn)need(library, "heapsample_status"))(message, sizeof message);
    fprintf(stderr, "%s", message);
    puts("done");
    return 0;
}
