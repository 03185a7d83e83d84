/*
 * dlopen/dlclose test program.
 *
 * `trig_dl_main LIBA LIBB`: dlopens LIBA, calls liba_alloc(300, 96) and
 * keeps the blocks; dlcloses LIBA and checks it is really unmapped
 * (dlopen RTLD_NOLOAD fails and /proc/self/maps no longer names it); then
 * dlopens LIBB (a library of the same layout, which the loader usually maps
 * at the same address), calls libb_alloc(200, 160), keeps the blocks, and
 * writes heapsample_dump("dl.prof") while LIBB is still loaded. Prints
 *   liba base=0x.. unmapped=<0|1>
 *   libb base=0x.. same_address=<0|1>
 *   dump rc=<n>
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*alloc_fn)(int, size_t, void **);

void *kept_a[300], *kept_b[200];

static unsigned long base_of(void *handle) {
    struct link_map *map = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map) return 0;
    return (unsigned long)map->l_addr;
}

static int in_maps(const char *path) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    char line[4096];
    int found = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, path)) found = 1;
    fclose(f);
    return found;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "heapsample_dump");
    void *a = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!a) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    unsigned long base_a = base_of(a);
    ((alloc_fn)dlsym(a, "liba_alloc"))(300, 96, kept_a);
    dlclose(a);
    int unmapped = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD) == NULL && in_maps(argv[1]) == 0;
    void *b = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!b) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    unsigned long base_b = base_of(b);
    ((alloc_fn)dlsym(b, "libb_alloc"))(200, 160, kept_b);
    int rc = dump ? dump("dl.prof") : -1;
    printf("liba base=0x%lx unmapped=%d\n", base_a, unmapped);
    printf("libb base=0x%lx same_address=%d\n", base_b, base_a == base_b);
    printf("dump rc=%d\n", rc);
    return 0;
}
