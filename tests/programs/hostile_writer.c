/* Scenarios for the safety of the files the profiler writes. argv[1]
 * selects one; each prints what it observed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int (*dump_fn)(const char *);

__attribute__((noinline)) static void *writer_site(size_t n) {
    void *p = malloc(n);
    if (p)
        memset(p, 2, n);
    return p;
}

/* Many distinct stacks make a bigger dump. */
__attribute__((noinline)) static void spread(int depth, int fan) {
    if (depth == 0) {
        void *p = writer_site(1000);
        (void)p; /* leaked on purpose: live samples */
        return;
    }
    for (int i = 0; i < fan; i++) {
        if (i == 0)
            spread(depth - 1, fan);
        else if (i == 1)
            spread(depth - 1, fan);
        else
            spread(depth - 1, fan);
    }
}

static void allocate(void) {
    for (int i = 0; i < 2000; i++)
        free(writer_site(64 + (size_t)i));
    spread(5, 3);
}

static int plant(const char *link, const char *target) {
    unlink(link);
    if (symlink(target, link) != 0) {
        printf("symlink %s failed: %s\n", link, strerror(errno));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    dump_fn dump = (dump_fn)dlsym(RTLD_DEFAULT, "heapsample_dump");
    if (!strcmp(mode, "plain")) {
        allocate();
        return 0;
    }
    if (!strcmp(mode, "umask0")) {
        umask(0);
        allocate();
        printf("manual dump %d\n", dump ? dump("manual.prof") : -1);
        return 0;
    }
    if (!strcmp(mode, "plant")) {
        /* argv[2]: victim file for the temporary names, argv[3]: victim for
         * the final names, argv[4]: a path that must not come to exist. */
        char name[256];
        int pid = (int)getpid();
        snprintf(name, sizeof name, "heapsample.%d.0.m0.prof.tmp.%d", pid, pid);
        /* The first automatic dump is manual here (seq 0), the explicit one seq 1, the exit dump seq 2. */
        if (plant(name, argv[2]))
            return 1;
        snprintf(name, sizeof name, "heapsample.%d.0.m0.prof", pid);
        if (plant(name, argv[3]))
            return 1;
        snprintf(name, sizeof name, "heapsample.%d.2.f.prof.tmp.%d", pid, pid);
        if (plant(name, argv[4]))
            return 1;
        snprintf(name, sizeof name, "heapsample.%d.2.f.prof", pid);
        if (plant(name, argv[3]))
            return 1;
        snprintf(name, sizeof name, "explicit.prof.tmp.%d", pid);
        if (plant(name, argv[2]))
            return 1;
        if (plant("explicit.prof", argv[3]))
            return 1;
        allocate();
        int automatic = dump ? dump(NULL) : -1;
        int explicit_ = dump ? dump("explicit.prof") : -1;
        printf("automatic %d explicit %d\n", automatic, explicit_);
        return 0;
    }
    if (!strcmp(mode, "retry")) {
        /* argv[2]: a filler file filling the disk; removed between dumps. */
        allocate();
        int first = dump ? dump(NULL) : -1;
        int second = dump ? dump(NULL) : -1;
        unlink(argv[2]);
        int third = dump ? dump(NULL) : -1;
        printf("first %s second %s third %s\n", first ? strerror(first) : "ok",
               second ? strerror(second) : "ok", third ? strerror(third) : "ok");
        return 0;
    }
    if (!strcmp(mode, "secure")) {
        allocate();
        printf("at_secure %lu shim_loaded %d\n", getauxval(AT_SECURE), dump != NULL);
        printf("dump %d\n", dump ? dump("secure-manual.prof") : -1);
        return 0;
    }
    return 99;
}
