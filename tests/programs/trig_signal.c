/*
 * Signal trigger test program.
 *
 * `trig_signal MODE`: prints `ready pid=<pid>` and then reads standard input
 * until end of file (the test sends signals meanwhile), allocating 64 bytes
 * per byte read in signal_site; then prints `handler_calls=<n>` (how often
 * its own SIGUSR2 handler ran, 0 if it has none) and exits. Its handler also
 * writes a `handled` line each time it runs, so the test can wait for each
 * signal to be taken before it sends the next (a signal sent while the same
 * one is still pending is merged into it).
 *   plain    no handler of its own
 *   ctor     installs its own SIGUSR2 handler in a constructor (before main,
 *            after the constructors of preloaded libraries)
 *   preinit  installs it from .preinit_array (before any library
 *            constructor, the shim's included)
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile sig_atomic_t handler_calls;
static int want_handler;

static void on_usr2(int sig) {
    (void)sig;
    handler_calls++;
    (void)!write(1, "handled\n", 8);
}

static void install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr2;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, NULL);
}

/* The mode comes from argv, which a constructor and a preinit function
 * receive too (glibc passes argc, argv, envp). */
static int mode_is(int argc, char **argv, const char *mode) {
    return argc > 1 && strcmp(argv[1], mode) == 0;
}

__attribute__((constructor)) static void ctor(int argc, char **argv, char **envp) {
    (void)envp;
    if (mode_is(argc, argv, "ctor")) {
        install();
        want_handler = 1;
    }
}

static void preinit(int argc, char **argv, char **envp) {
    (void)envp;
    if (mode_is(argc, argv, "preinit")) {
        install();
        want_handler = 1;
    }
}
__attribute__((section(".preinit_array"), used)) static void (*preinit_entry)(int, char **, char **) = preinit;

void *volatile sink;

NOINLINE void signal_site(void) { sink = malloc(64); }

int main(void) {
    printf("ready pid=%d handler=%d\n", (int)getpid(), want_handler);
    fflush(stdout);
    char buf[256];
    for (;;) {
        ssize_t n = read(0, buf, sizeof buf);
        if (n == 0) break;
        if (n < 0) continue; /* EINTR */
        for (ssize_t i = 0; i < n; i++) signal_site();
    }
    printf("handler_calls=%d\n", (int)handler_calls);
    return 0;
}
