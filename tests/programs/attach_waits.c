/* A program that waits: its main thread sleeps in epoll_wait(-1) on its
 * standard input, and counts the real-time signals SIGRTMIN+1 it receives
 * and the times epoll_wait failed with EINTR. Commands, one a line:
 *   count   print "signals S eintr E"
 *   end     exit 0
 * Prints "ready" once its handler is installed. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

static volatile sig_atomic_t signals;

static void on_signal(int signal) {
    (void)signal;
    signals++;
}

int main(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    action.sa_flags = SA_RESTART;
    sigaction(SIGRTMIN + 1, &action, NULL);
    int poll = epoll_create1(0);
    struct epoll_event event = {.events = EPOLLIN, .data.fd = 0};
    epoll_ctl(poll, EPOLL_CTL_ADD, 0, &event);
    long eintr = 0;
    char line[256];
    size_t have = 0;
    puts("ready");
    fflush(stdout);
    for (;;) {
        struct epoll_event ready;
        if (epoll_wait(poll, &ready, 1, -1) < 0) {
            if (errno == EINTR) eintr++;
            continue;
        }
        ssize_t n = read(0, line + have, sizeof line - have - 1);
        if (n <= 0) return 1;
        have += (size_t)n;
        line[have] = 0;
        char *end;
        while ((end = strchr(line, '\n'))) {
            *end = 0;
            if (strcmp(line, "count") == 0) printf("signals %d eintr %ld\n", (int)signals, eintr);
            if (strcmp(line, "end") == 0) return 0;
            fflush(stdout);
            size_t used = (size_t)(end + 1 - line);
            memmove(line, end + 1, have - used + 1);
            have -= used;
        }
    }
}
