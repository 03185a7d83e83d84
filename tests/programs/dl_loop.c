/*
 * dlopen/dlclose loops, as plugin hosts, PAM and NSS run them.
 *
 *   dl_loop rounds <n> <dir> <k>   n rounds: open plugin_0..k-1.so of <dir>
 *                                  (all at once), call each, close each
 *   dl_loop single <n> <dir> <k>   n iterations: open one plugin (in turn),
 *                                  call it, close it
 *   dl_loop alternate <n> <dir> <k>  n iterations: open the next plugin (in
 *                                  turn), call it, close the previous one,
 *                                  so plugins reload where a sibling was
 *   dl_loop relative <dir> <out>   chdir(dir), dlopen("./plugin_0.so"),
 *                                  chdir("/"), call it, heapsample_dump(out)
 *
 * The loops print `iterations=<n> seconds=<CPU seconds> rss_kib=<VmRSS> hwm_kib=<VmHWM>
 * quarters=<CPU seconds of each quarter of the iterations, comma-separated>`.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proc_status.h"

typedef unsigned long (*work_fn)(void);

/* CPU time of the process: the machines the tests run on are shared. */
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void *open_plugin(const char *dir, int id) {
    char path[4096];
    snprintf(path, sizeof path, "%s/plugin_%d.so", dir, id);
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        exit(2);
    }
    return handle;
}

static unsigned long call(void *handle) {
    work_fn work = (work_fn)dlsym(handle, "plugin_work");
    if (!work) exit(3);
    return work();
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "relative") == 0) {
        if (chdir(argv[2]) != 0) return 4;
        void *handle = dlopen("./plugin_0.so", RTLD_NOW);
        if (!handle) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 2;
        }
        if (chdir("/") != 0) return 4;
        unsigned long sum = call(handle);
        int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "heapsample_dump");
        int rc = dump ? dump(argv[3]) : -1;
        printf("sum=%lu dump rc=%d\n", sum, rc);
        return 0;
    }
    if (argc != 5) {
        fprintf(stderr, "usage: dl_loop rounds|single|alternate <n> <dir> <k> | relative <dir> <out>\n");
        return 1;
    }
    long n = atol(argv[2]);
    const char *dir = argv[3];
    int k = atoi(argv[4]);
    unsigned long sum = 0;
    long iterations = 0;
    double start = now(), quarter_start = start, quarters[4] = {0};
    int quarter = 0;
    void **handles = calloc(k, sizeof *handles);
    void *previous = NULL;
    for (long i = 0; i < n; i++) {
        if (strcmp(argv[1], "rounds") == 0) {
            for (int j = 0; j < k; j++) handles[j] = open_plugin(dir, j);
            for (int j = 0; j < k; j++) sum += call(handles[j]);
            for (int j = 0; j < k; j++) dlclose(handles[j]);
            iterations += k;
        } else {
            void *handle = open_plugin(dir, (int)(i % k));
            sum += call(handle);
            if (strcmp(argv[1], "alternate") == 0) {
                if (previous) dlclose(previous);
                previous = handle;
            } else {
                dlclose(handle);
            }
            iterations++;
        }
        if (quarter < 4 && (i + 1) * 4 >= n * (quarter + 1)) {
            double t = now();
            quarters[quarter++] = t - quarter_start;
            quarter_start = t;
        }
    }
    if (previous) dlclose(previous);
    free(handles);
    printf("iterations=%ld seconds=%.3f rss_kib=%ld hwm_kib=%ld sum=%lu quarters=%.3f,%.3f,%.3f,%.3f\n",
           iterations, now() - start, status_kb("VmRSS"), status_kb("VmHWM"), sum, quarters[0],
           quarters[1], quarters[2], quarters[3]);
    return 0;
}
