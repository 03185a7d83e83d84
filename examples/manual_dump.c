/* Using heapsample's C API from a program that is not linked against it.
 *
 * The program warms up, takes a baseline profile, runs a phase that leaks,
 * and takes a second profile; `heapdiff --base before.prof after.prof` then
 * shows exactly what the leaky phase added. Without the shim the API is
 * simply absent and the program runs as usual.
 *
 *   gcc -g -O1 -Ishim/include examples/manual_dump.c -o manual_dump
 *   LD_PRELOAD=target/release/libheapsample.so PROF_CONF=lg_prof_sample:12 ./manual_dump
 *   target/release/heapdiff --base before.prof after.prof --format text
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heapsample.h"

typedef int (*dump_fn)(const char *);
typedef int (*set_active_fn)(int);

void *warm[1000];     /* not static: the compiler must keep the allocations */
void *leaked[20000];

__attribute__((noinline)) static void warm_up(void) {
    for (int i = 0; i < 1000; i++)
        warm[i] = malloc(4096);
}

__attribute__((noinline)) static void leaky_phase(void) {
    for (int i = 0; i < 20000; i++) {
        leaked[i] = malloc(200);
        memset(leaked[i], 1, 200);
    }
}

static void report(const char *what, int result) {
    if (result == 0)
        printf("%s: written\n", what);
    else
        printf("%s: failed: %s\n", what, strerror(result));
}

int main(int argc, char **argv) {
    dump_fn dump = (dump_fn)dlsym(RTLD_DEFAULT, "heapsample_dump");
    set_active_fn set_active = (set_active_fn)dlsym(RTLD_DEFAULT, "heapsample_set_active");
    if (!dump || !set_active) {
        printf("not running under libheapsample.so; nothing to dump\n");
        warm_up();
        leaky_phase();
        return 0;
    }
    warm_up();
    report("before.prof", dump("before.prof"));
    leaky_phase();
    report("after.prof", dump("after.prof"));
    report("automatic name", dump(NULL));
    /* An unwritable path returns an errno value; the program goes on. */
    report("/nonexistent/dir/x.prof", dump("/nonexistent/dir/x.prof"));
    printf("sampling was %s\n", set_active(1) ? "on" : "off");
    (void)argc;
    (void)argv;
    return 0;
}
