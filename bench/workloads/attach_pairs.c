/* attach_pairs: the malloc/free loop of pairs.c, after an attach made
 * from inside the process (for callgrind, which cannot be attached to
 * from outside): with LIBRARY given, dlopen it and call heapsample_attach
 * with OPTIONS first, which is what `heapsample attach` makes a process
 * do. The attach's own cost cancels out of Ir(2N) - Ir(N).
 *
 *   attach_pairs PAIRS [LIBRARY [OPTIONS]] */
#include <dlfcn.h>

#include "common.h"

static const size_t sizes[8] = { 16, 32, 48, 64, 96, 128, 256, 480 };

int main(int argc, char **argv) {
    long pairs = arg_long(argc, argv, 1, 10000000);
    if (argc > 2) {
        void *library = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
        int (*attach)(const char *, char *, size_t) =
            library ? (int (*)(const char *, char *, size_t))dlsym(library, "heapsample_attach") : NULL;
        char message[512];
        if (!attach || attach(argc > 3 ? argv[3] : "", message, sizeof message) != 0) {
            fprintf(stderr, "attach failed: %s\n", attach ? message : dlerror());
            return 2;
        }
    }
    volatile unsigned char sink = 0;
    for (long i = 0; i < pairs; i++) {
        unsigned char *p = malloc(sizes[i & 7]);
        if (!p) return 1;
        p[0] = (unsigned char)i;
        sink += p[0];
        free(p);
    }
    printf("pairs=%ld\n", pairs);
    return sink == 0xff ? 0 : 0;
}
