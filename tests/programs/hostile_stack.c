/* Stacks and control flow a profiler's unwinder must survive: recursion far
 * deeper than prof_bt_max, handlers on an alternate signal stack that
 * allocate, longjmp out of nested allocating frames, and a SIGALRM timer
 * whose handler allocates while the main thread allocates too. */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static void *keep[4096];
static int kept;

__attribute__((noinline)) static void *bottom_site(size_t n) {
    void *p = malloc(n);
    if (p)
        memset(p, 7, 8);
    return p;
}

/* ---- deep recursion ---- */
static long deep_allocs;
__attribute__((noinline)) static long recurse(long depth, long allocs) {
    volatile char pad[32];
    pad[0] = (char)depth;
    if (depth == 0) {
        for (long i = 0; i < allocs; i++) {
            void *p = bottom_site(100 + (size_t)(i % 50));
            if (p)
                deep_allocs++;
            free(p);
        }
        return pad[0];
    }
    long r = recurse(depth - 1, allocs);
    return r + pad[0];
}

/* ---- sigaltstack ---- */
static volatile sig_atomic_t alt_allocs, alt_on_altstack;
static char *alt_base;
static size_t alt_size;
static void on_usr1(int sig) {
    (void)sig;
    char here;
    if (&here >= alt_base && &here < alt_base + alt_size)
        alt_on_altstack++;
    /* Legal here: raise() is called synchronously from main, never from
     * inside malloc, so the handler does not interrupt an allocator. */
    for (int i = 0; i < 8; i++) {
        void *p = bottom_site(64 + (size_t)i * 100);
        if (p)
            alt_allocs++;
        free(p);
    }
}

static int altstack(int raises) {
    alt_size = 64 * 1024;
    alt_base = malloc(alt_size);
    stack_t ss = {.ss_sp = alt_base, .ss_size = alt_size, .ss_flags = 0};
    if (!alt_base || sigaltstack(&ss, NULL) != 0)
        return 1;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_usr1;
    action.sa_flags = SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGUSR1, &action, NULL);
    for (int i = 0; i < raises; i++)
        raise(SIGUSR1);
    printf("altstack handled %d allocs %d\n", (int)alt_on_altstack, (int)alt_allocs);
    return 0;
}

/* ---- longjmp ---- */
static jmp_buf escape;
static long jumps;
__attribute__((noinline)) static void nested(int depth, int jump_at) {
    void *p = bottom_site(200 + (size_t)depth);
    if (p && kept < 4096)
        keep[kept++] = p; /* stays reachable across the longjmp */
    if (depth >= jump_at || depth > 1000)
        longjmp(escape, 1);
    nested(depth + 1, jump_at);
}

static int do_longjmp(int rounds) {
    for (volatile int r = 0; r < rounds; r++) {
        if (setjmp(escape) == 0)
            nested(0, 5 + r % 40);
        else
            jumps++;
        while (kept > 0)
            free(keep[--kept]);
    }
    printf("longjmp jumps %ld\n", jumps);
    return 0;
}

/* ---- SIGALRM ---- */
static volatile sig_atomic_t main_safe;
static atomic_long alarm_allocs, alarms;
static void on_alarm(int sig) {
    (void)sig;
    int saved = errno;
    alarms++;
    /* Allocate only while main is in its known-safe (non-allocating) spin,
     * so the handler never interrupts malloc: legal use, but it stresses
     * the profiler's reentrancy and per-thread state from a handler. */
    if (main_safe) {
        for (int i = 0; i < 4; i++) {
            void *p = bottom_site(500 + (size_t)i * 1000);
            if (p)
                alarm_allocs++;
            free(p);
        }
    }
    errno = saved;
}

static int alarm_storm(int millis) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_alarm;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGALRM, &action, NULL);
    struct itimerval timer = {{0, 500}, {0, 500}};
    setitimer(ITIMER_REAL, &timer, NULL);
    struct timeval start, now;
    gettimeofday(&start, NULL);
    long main_allocs = 0;
    for (;;) {
        for (int i = 0; i < 200; i++) {
            void *p = bottom_site(32 + (size_t)(i * 13 % 2000));
            if (p)
                main_allocs++;
            free(p);
        }
        main_safe = 1;
        for (volatile int spin = 0; spin < 20000; spin++) {
        }
        main_safe = 0;
        gettimeofday(&now, NULL);
        if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_usec - start.tv_usec) / 1000 > millis)
            break;
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("alarm main_allocs_positive %d handler_allocs_positive %d\n", main_allocs > 0,
           atomic_load(&alarm_allocs) > 0);
    fprintf(stderr, "alarms %ld handler_allocs %ld\n", atomic_load(&alarms), atomic_load(&alarm_allocs));
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "deep")) {
        long depth = argc > 2 ? atol(argv[2]) : 10000;
        long allocs = argc > 3 ? atol(argv[3]) : 100;
        recurse(depth, allocs);
        printf("deep depth %ld allocs %ld\n", depth, deep_allocs);
        return 0;
    }
    if (!strcmp(mode, "altstack"))
        return altstack(argc > 2 ? atoi(argv[2]) : 500);
    if (!strcmp(mode, "longjmp"))
        return do_longjmp(argc > 2 ? atoi(argv[2]) : 500);
    if (!strcmp(mode, "alarm"))
        return alarm_storm(argc > 2 ? atoi(argv[2]) : 1000);
    return 99;
}
