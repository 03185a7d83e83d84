/* A single-threaded program whose thread waits in read() on its standard
 * input, either inside a signal handler or after handlers ran and
 * returned. Usage: attach_handler MODE
 *   handler  SIGUSR1's handler prints "in handler" and waits for a line
 *            there; once it returns, main prints "returned" and waits for
 *            a line again, then exits 0.
 *   in_wait, in_wait_eintr
 *            as handler, but the signal (SIGALRM, from a timer) interrupts
 *            main waiting in read() on a pipe nothing writes to, with
 *            SA_RESTART (the read is to restart) or without (it is to fail
 *            with EINTR); the handler writes a byte into the pipe before
 *            it returns; main then prints "returned restarted" (the read
 *            restarted and read it) or "returned eintr", and waits for a
 *            line.
 *   stale    handlers run and return on a deep stack, leaving their signal
 *            frames (and the trampoline's address in them) behind; then a
 *            function whose large uninitialised buffer spans those stale
 *            frames prints "waiting" (with how many stale copies of the
 *            trampoline's address lie above its stack pointer) and waits
 *            for a line, then exits 0. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <errno.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static void wait_line(void) {
    char line[64];
    size_t have = 0;
    while (have < sizeof line && read(0, line + have, 1) == 1) {
        if (line[have++] == '\n') return;
    }
}

static volatile sig_atomic_t handled;
static uintptr_t trampoline;

static int wake_fd = -1;

static void waiting_handler(int signal) {
    (void)signal;
    puts("in handler");
    fflush(stdout);
    wait_line();
    /* A restarted read finds this byte. */
    if (wake_fd >= 0 && write(wake_fd, "x", 1) != 1) _exit(3);
}

static void returning_handler(int signal, siginfo_t *info, void *context) {
    (void)signal;
    (void)info;
    (void)context;
    /* The return address of this handler is the trampoline. */
    trampoline = (uintptr_t)__builtin_return_address(0);
    handled++;
}

/* Raise the signal with `depth` KiB of stack in use below this frame. */
static __attribute__((noinline)) void raise_deep(int depth) {
    volatile char pad[1024];
    pad[0] = (char)depth;
    if (depth > 0) {
        raise_deep(depth - 1);
    } else {
        raise(SIGUSR1);
    }
    __asm__ volatile("" ::"r"(pad) : "memory");
}

/* Wait with a large uninitialised buffer over the stale frames. */
static __attribute__((noinline)) void wait_over_stale(void) {
    uintptr_t buffer[2048];
    __asm__ volatile("" ::"r"(buffer) : "memory");
    int stale = 0;
    for (size_t i = 0; i < sizeof buffer / sizeof *buffer; i++) stale += buffer[i] == trampoline;
    printf("waiting %d\n", stale);
    fflush(stdout);
    wait_line();
    __asm__ volatile("" ::"r"(buffer) : "memory");
}

int main(int argc, char **argv) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    if (argc > 1 && !strncmp(argv[1], "in_wait", 7)) {
        action.sa_handler = waiting_handler;
        action.sa_flags = strcmp(argv[1], "in_wait") ? 0 : SA_RESTART;
        sigaction(SIGALRM, &action, NULL);
        int never[2];
        if (pipe(never) != 0) return 2;
        wake_fd = never[1];
        struct itimerval once = {.it_value = {0, 20000}};
        setitimer(ITIMER_REAL, &once, NULL);
        char byte;
        ssize_t n = read(never[0], &byte, 1);
        printf("returned %s\n", n == 1 ? "restarted" : n < 0 && errno == EINTR ? "eintr" : "?");
        fflush(stdout);
        wait_line();
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "handler")) {
        action.sa_handler = waiting_handler;
        sigaction(SIGUSR1, &action, NULL);
        raise(SIGUSR1);
        puts("returned");
        fflush(stdout);
        wait_line();
        return 0;
    }
    action.sa_sigaction = returning_handler;
    action.sa_flags = SA_SIGINFO;
    sigaction(SIGUSR1, &action, NULL);
    for (int depth = 1; depth <= 12; depth++) raise_deep(depth);
    wait_over_stale();
    return 0;
}
