/* A program that checks every allocation, run over an allocator that fails
 * (libfailing.so) or under an address-space limit. Prints what it saw. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

typedef int (*dump_fn)(const char *);

__attribute__((noinline)) static void *oom_site(size_t n) { return malloc(n); }

static int failing(long rounds) {
    void (*arm)(long) = (void (*)(long))dlsym(RTLD_DEFAULT, "failing_arm");
    void (*disarm)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "failing_disarm");
    long (*failures)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "failing_failures");
    if (!arm || !disarm || !failures) {
        printf("libfailing not loaded\n");
        return 1;
    }
    long nulls = 0, enomem = 0, bad_errno = 0, realloc_kept = 0, realloc_lost = 0, ok = 0;
    long memalign_fail = 0;
    void *slots[128] = {0};
    arm(7);
    for (long i = 0; i < rounds; i++) {
        int s = (int)(i % 128);
        errno = 0;
        void *p;
        switch (i % 4) {
        case 0:
            p = oom_site(24 + (size_t)(i % 900));
            break;
        case 1:
            p = calloc(3, 40 + (size_t)(i % 300));
            break;
        case 2:
            if (slots[s]) {
                memset(slots[s], 0x5a, 24);
                void *q = realloc(slots[s], 2000 + (size_t)(i % 5000));
                if (!q) {
                    /* The old block must be intact and still ours. */
                    const unsigned char *old = slots[s];
                    int intact = 1;
                    for (int k = 0; k < 24; k++)
                        intact &= old[k] == 0x5a;
                    if (intact)
                        realloc_kept++;
                    else
                        realloc_lost++;
                    nulls++;
                    if (errno == ENOMEM)
                        enomem++;
                    else
                        bad_errno++;
                    continue;
                }
                slots[s] = q;
                ok++;
                continue;
            }
            p = oom_site(10);
            break;
        default: {
            void *q = NULL;
            int rc = posix_memalign(&q, 64, 100 + (size_t)(i % 700));
            if (rc != 0) {
                memalign_fail++;
                if (rc != ENOMEM)
                    bad_errno++;
                continue;
            }
            p = q;
        }
        }
        if (!p) {
            nulls++;
            if (errno == ENOMEM)
                enomem++;
            else
                bad_errno++;
            continue;
        }
        ok++;
        free(slots[s]);
        slots[s] = p;
    }
    dump_fn dump = (dump_fn)dlsym(RTLD_DEFAULT, "heapsample_dump");
    int armed_dump = dump ? dump(NULL) : -1;
    disarm();
    int disarmed_dump = dump ? dump(NULL) : -1;
    arm(7); /* exit (and the exit dump) with the allocator failing again */
    for (int s = 0; s < 128; s++)
        free(slots[s]);
    printf("ok %ld nulls %ld enomem %ld bad_errno %ld realloc_kept %ld realloc_lost %ld "
           "memalign_fail %ld\n",
           ok, nulls, enomem, bad_errno, realloc_kept, realloc_lost, memalign_fail);
    printf("lib_failures %ld\n", failures());
    printf("armed_dump %d disarmed_dump %d\n", armed_dump, disarmed_dump);
    fflush(stdout);
    return 0;
}

/* Allocate until refused, from process start (FAILING_START in the env). */
static int checked(long rounds) {
    long nulls = 0, bad = 0, ok = 0;
    void *slots[64] = {0};
    for (long i = 0; i < rounds; i++) {
        errno = 0;
        void *p = oom_site(32 + (size_t)(i % 2000));
        if (!p) {
            nulls++;
            if (errno != ENOMEM)
                bad++;
            continue;
        }
        ok++;
        free(slots[i % 64]);
        slots[i % 64] = p;
    }
    for (int s = 0; s < 64; s++)
        free(slots[s]);
    printf("ok %ld nulls %ld bad_errno %ld\n", ok, nulls, bad);
    return 0;
}

/* Under an address-space limit: huge requests fail with ENOMEM, ordinary
 * ones keep working. With argv[2] set, the limit is set here (after the
 * profiler started); otherwise it was set by the parent (prlimit). */
static int limited(const char *set_limit_mb) {
    if (set_limit_mb) {
        struct rlimit limit;
        long mb = atol(set_limit_mb);
        /* current size plus the given headroom */
        FILE *f = fopen("/proc/self/statm", "r");
        unsigned long pages = 0;
        if (!f || fscanf(f, "%lu", &pages) != 1)
            return 2;
        fclose(f);
        limit.rlim_cur = limit.rlim_max = pages * 4096UL + (unsigned long)mb * 1048576UL;
        if (setrlimit(RLIMIT_AS, &limit) != 0)
            return 3;
    }
    size_t sizes[] = {(size_t)1 << 40, (size_t)1 << 33, (size_t)3 << 30, (size_t)1 << 30};
    int refused = 0, bad = 0;
    for (int i = 0; i < 4; i++) {
        errno = 0;
        void *p = oom_site(sizes[i]);
        if (p)
            free(p);
        else if (errno == ENOMEM)
            refused++;
        else
            bad++;
        errno = 0;
        p = calloc(sizes[i] / 16, 16);
        if (p)
            free(p);
        else if (errno == ENOMEM)
            refused++;
        else
            bad++;
    }
    long ok = 0;
    void *slots[256] = {0};
    for (long i = 0; i < 200000; i++) {
        void *p = oom_site(16 + (size_t)(i % 3000));
        if (p) {
            ok++;
            free(slots[i % 256]);
            slots[i % 256] = p;
        }
    }
    for (int s = 0; s < 256; s++)
        free(slots[s]);
    dump_fn dump = (dump_fn)dlsym(RTLD_DEFAULT, "heapsample_dump");
    printf("refused %d bad_errno %d small_ok %ld\n", refused, bad, ok);
    fprintf(stderr, "dump %d\n", dump ? dump(NULL) : -1);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "failing"))
        return failing(argc > 2 ? atol(argv[2]) : 20000);
    if (!strcmp(mode, "checked"))
        return checked(argc > 2 ? atol(argv[2]) : 20000);
    if (!strcmp(mode, "limited"))
        return limited(argc > 2 ? argv[2] : NULL);
    return 99;
}
