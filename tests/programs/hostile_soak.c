/* Soak: argv[2] threads churn random-sized blocks for argv[1] seconds while
 * the main thread samples its own VmRSS every 250 ms and prints it. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop;
static atomic_long total_ops;

__attribute__((noinline)) static void *soak_site(size_t n) {
    void *p = malloc(n);
    if (p)
        memset(p, 1, n < 256 ? n : 256);
    return p;
}

static void *churner(void *arg) {
    unsigned long x = 0x9E3779B97F4A7C15UL * ((unsigned long)(long)arg + 1);
    void *slots[512] = {0};
    long ops = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (int i = 0; i < 1000; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            int s = (int)(x % 512);
            free(slots[s]);
            slots[s] = soak_site(16 + (size_t)((x >> 20) % 16384));
            ops++;
        }
    }
    for (int s = 0; s < 512; s++)
        free(slots[s]);
    atomic_fetch_add(&total_ops, ops);
    return NULL;
}

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            v = strtol(line + 6, NULL, 10);
    fclose(f);
    return v;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 10;
    int threads = argc > 2 ? atoi(argv[2]) : 16;
    pthread_t ids[256];
    if (threads > 256)
        threads = 256;
    for (long i = 0; i < threads; i++)
        pthread_create(&ids[i], NULL, churner, (void *)i);
    int samples = (int)(seconds * 4);
    for (int i = 0; i < samples; i++) {
        struct timespec ts = {0, 250000000};
        nanosleep(&ts, NULL);
        fprintf(stderr, "rss_kb %d %ld\n", i, rss_kb());
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < threads; i++)
        pthread_join(ids[i], NULL);
    printf("soak done threads %d\n", threads);
    fprintf(stderr, "ops %ld\n", atomic_load(&total_ops));
    return 0;
}
