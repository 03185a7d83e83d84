/*
 * A plugin for the dlopen/dlclose loop test, built several times by the
 * test with `gcc -shared -fPIC -DPLUGIN_ID=<n>`. plugin_work() allocates and
 * frees a little, as a PAM or NSS module would per call.
 */
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) unsigned long plugin_work(void) {
    char *p = malloc(64 + PLUGIN_ID);
    if (!p) abort();
    memset(p, PLUGIN_ID, 64);
    unsigned long sum = (unsigned char)p[PLUGIN_ID % 64];
    free(p);
    __asm__ volatile("" ::: "memory");
    return sum;
}
