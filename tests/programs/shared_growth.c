/*
 * Two dumps of one process through the C API with known in-use changes
 * between them, for the test of same-process changes.
 *
 * Before dump A (`a.prof`, written by heapsample_dump in this thread, so it
 * is complete when the call returns):
 *   site_steady    2048 x 1 KiB, kept to the end (unchanged);
 *   site_turnover  1024 x 2 KiB (all freed and replaced between the dumps:
 *                  unchanged in size, no object shared);
 *   site_growth     512 x 1 KiB (256 x 1 KiB more between the dumps:
 *                  +256 KiB);
 *   site_shrink     600 x 2 KiB (300 freed between the dumps: -600 KiB).
 * Then dump B (`b.prof`), and `change <site> <bytes> <objects>` for each
 * site, printed after the dumps (stdio's buffer is an allocation). Nothing
 * else allocates between the dumps. Each site is one function with one
 * allocation call.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

typedef int (*dump_fn)(const char *);

enum { STEADY = 2048, TURNOVER = 1024, GROWTH = 512, GROWN = 256, SHRINK = 600, SHRUNK = 300 };

static void *steady[STEADY], *turnover[TURNOVER], *growth[GROWTH + GROWN], *shrink[SHRINK];

static void touch(void *p, size_t size) {
    if (!p) abort();
    ((volatile char *)p)[size - 1] = 1;
}

NOINLINE void site_steady(void) {
    for (int i = 0; i < STEADY; i++) touch(steady[i] = malloc(1024), 1024);
}

NOINLINE void site_turnover(void) {
    for (int i = 0; i < TURNOVER; i++) touch(turnover[i] = malloc(2048), 2048);
}

NOINLINE void site_growth(int from, int to) {
    for (int i = from; i < to; i++) touch(growth[i] = malloc(1024), 1024);
}

NOINLINE void site_shrink(void) {
    for (int i = 0; i < SHRINK; i++) touch(shrink[i] = malloc(2048), 2048);
}

int main(void) {
    dump_fn dump = (dump_fn)dlsym(RTLD_DEFAULT, "heapsample_dump");
    if (!dump) return 3;
    site_steady();
    site_turnover();
    site_growth(0, GROWTH);
    site_shrink();
    if (dump("a.prof") != 0) return 4;
    for (int i = 0; i < TURNOVER; i++) free(turnover[i]);
    site_turnover();
    site_growth(GROWTH, GROWTH + GROWN);
    for (int i = 0; i < SHRUNK; i++) free(shrink[i]);
    if (dump("b.prof") != 0) return 5;
    printf("change site_steady 0 0\n");
    printf("change site_turnover 0 0\n");
    printf("change site_growth %d %d\n", GROWN * 1024, GROWN);
    printf("change site_shrink %d %d\n", -SHRUNK * 2048, -SHRUNK);
    return 0;
}
