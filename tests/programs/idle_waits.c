/* An idle program: its main thread waits in one blocking call, over and
 * over, each wait meant to end MS milliseconds after it began (a sleep of
 * MS, a timer, or a helper process that writes, connects, exits or
 * signals at that moment), and measures on CLOCK_MONOTONIC how long each
 * wait took. With THREADS > 0 it first starts that many more threads,
 * which idle too (in nanosleep, in pthread_cond_wait, in read on a pipe)
 * with every signal blocked.
 *
 * Usage: idle_waits MODE MS THREADS STOPFILE
 * MODE is one of: nanosleep clock_nanosleep poll ppoll select pselect6
 * epoll_wait epoll_pwait epoll_pwait2 (on a timer) epoll_timeout (with
 * epoll_wait's own timeout) futex cond_timedwait read recvmsg
 * accept4 wait4 waitid pause sigsuspend sigtimedwait.
 *
 * Prints "ready" before its first wait; once STOPFILE exists (checked
 * between waits, as is whether its parent still lives) prints
 *   waits N short S over_us MIN MAX eintr E
 * and exits 0: N waits, S of them ended before their MS, MIN and MAX the
 * least and most microseconds a wait ended after its MS, E the calls that
 * failed with EINTR although no signal handler ran (pause and sigsuspend
 * return EINTR after their handler, which is not counted). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t handled;
static long eintr;

static void on_signal(int signal) {
    (void)signal;
    handled = 1;
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static struct timespec span(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000};
    return t;
}

/* A helper process that sleeps until `deadline` (monotonic ns), then does
 * `act` and exits. */
static pid_t helper_at(int64_t deadline, void (*act)(void *), void *argument) {
    pid_t pid = fork();
    if (pid == 0) {
        struct timespec at = {deadline / 1000000000, deadline % 1000000000};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR) {
        }
        if (act) act(argument);
        _exit(0);
    }
    return pid;
}

static void write_byte(void *fd) {
    if (write(*(int *)fd, "x", 1) != 1) _exit(1);
}

static void connect_to(void *path) {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, path, sizeof address.sun_path - 1);
    if (connect(s, (struct sockaddr *)&address, sizeof address) != 0) _exit(1);
}

static void signal_parent(void *unused) {
    (void)unused;
    kill(getppid(), SIGUSR1);
}

static void failed(long result) {
    if (result < 0 && errno == EINTR) eintr++;
}

/* One wait of `ms` milliseconds in `mode`. */
static void wait_once(const char *mode, long ms, int64_t start) {
    struct timespec relative = span(ms);
    int64_t deadline = start + (int64_t)ms * 1000000;
    if (!strcmp(mode, "nanosleep")) {
        failed(nanosleep(&relative, NULL));
    } else if (!strcmp(mode, "clock_nanosleep")) {
        int error = clock_nanosleep(CLOCK_MONOTONIC, 0, &relative, NULL);
        if (error == EINTR) eintr++;
    } else if (!strcmp(mode, "poll")) {
        failed(poll(NULL, 0, (int)ms));
    } else if (!strcmp(mode, "ppoll")) {
        failed(ppoll(NULL, 0, &relative, NULL));
    } else if (!strcmp(mode, "select")) {
        struct timeval t = {ms / 1000, (ms % 1000) * 1000};
        failed(select(0, NULL, NULL, NULL, &t));
    } else if (!strcmp(mode, "pselect6")) {
        failed(pselect(0, NULL, NULL, NULL, &relative, NULL));
    } else if (!strcmp(mode, "epoll_timeout")) {
        /* epoll_wait's own timeout (the kernel keeps no deadline for it). */
        int set = epoll_create1(0);
        struct epoll_event ready;
        failed(epoll_wait(set, &ready, 1, (int)ms));
        close(set);
    } else if (!strncmp(mode, "epoll", 5)) {
        int timer = timerfd_create(CLOCK_MONOTONIC, 0);
        struct itimerspec when = {.it_value = {deadline / 1000000000, deadline % 1000000000}};
        timerfd_settime(timer, TFD_TIMER_ABSTIME, &when, NULL);
        int set = epoll_create1(0);
        struct epoll_event event = {.events = EPOLLIN}, ready;
        epoll_ctl(set, EPOLL_CTL_ADD, timer, &event);
        int n;
        do {
            if (!strcmp(mode, "epoll_wait")) n = epoll_wait(set, &ready, 1, -1);
            else if (!strcmp(mode, "epoll_pwait")) n = epoll_pwait(set, &ready, 1, -1, NULL);
            else n = epoll_pwait2(set, &ready, 1, NULL, NULL);
            failed(n);
        } while (n < 0 && errno == EINTR);
        close(set);
        close(timer);
    } else if (!strcmp(mode, "futex")) {
        static uint32_t word;
        long r = syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &relative, NULL, 0);
        if (r == 0) eintr++; /* nothing wakes it: only a timeout is right */
        else failed(r);
    } else if (!strcmp(mode, "cond_timedwait")) {
        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        static pthread_cond_t never;
        static int inited;
        if (!inited) {
            pthread_condattr_t attributes;
            pthread_condattr_init(&attributes);
            pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
            pthread_cond_init(&never, &attributes);
            inited = 1;
        }
        struct timespec at = {deadline / 1000000000, deadline % 1000000000};
        pthread_mutex_lock(&lock);
        while (pthread_cond_timedwait(&never, &lock, &at) != ETIMEDOUT) {
        }
        pthread_mutex_unlock(&lock);
    } else if (!strcmp(mode, "read") || !strcmp(mode, "recvmsg")) {
        int ends[2];
        if (!strcmp(mode, "read")) {
            if (pipe(ends) != 0) exit(2);
        } else if (socketpair(AF_UNIX, SOCK_STREAM, 0, ends) != 0) {
            exit(2);
        }
        pid_t pid = helper_at(deadline, write_byte, &ends[1]);
        char byte;
        if (!strcmp(mode, "read")) {
            failed(read(ends[0], &byte, 1));
        } else {
            struct iovec v = {&byte, 1};
            struct msghdr message = {.msg_iov = &v, .msg_iovlen = 1};
            failed(recvmsg(ends[0], &message, 0));
        }
        close(ends[0]);
        close(ends[1]);
        waitpid(pid, NULL, 0);
    } else if (!strcmp(mode, "accept4")) {
        char path[108];
        snprintf(path, sizeof path, "/tmp/idle_waits.%d.sock", (int)getpid());
        unlink(path);
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un address = {.sun_family = AF_UNIX};
        strncpy(address.sun_path, path, sizeof address.sun_path - 1);
        if (bind(s, (struct sockaddr *)&address, sizeof address) != 0 || listen(s, 1) != 0) exit(2);
        pid_t pid = helper_at(deadline, connect_to, path);
        int c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
        failed(c);
        if (c >= 0) close(c);
        close(s);
        unlink(path);
        waitpid(pid, NULL, 0);
    } else if (!strcmp(mode, "wait4")) {
        pid_t pid = helper_at(deadline, NULL, NULL);
        failed(wait4(pid, NULL, 0, NULL));
    } else if (!strcmp(mode, "waitid")) {
        pid_t pid = helper_at(deadline, NULL, NULL);
        siginfo_t info;
        failed(waitid(P_PID, (id_t)pid, &info, WEXITED));
    } else if (!strcmp(mode, "pause") || !strcmp(mode, "sigsuspend")) {
        sigset_t usr1, old;
        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        sigprocmask(SIG_BLOCK, &usr1, &old);
        handled = 0;
        pid_t pid = helper_at(deadline, signal_parent, NULL);
        if (!strcmp(mode, "pause")) {
            sigprocmask(SIG_SETMASK, &old, NULL);
            while (!handled) {
                if (pause() < 0 && errno == EINTR && !handled) eintr++;
            }
        } else {
            while (!handled) {
                if (sigsuspend(&old) < 0 && errno == EINTR && !handled) eintr++;
            }
            sigprocmask(SIG_SETMASK, &old, NULL);
        }
        waitpid(pid, NULL, 0);
    } else if (!strcmp(mode, "sigtimedwait")) {
        sigset_t usr1;
        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        sigprocmask(SIG_BLOCK, &usr1, NULL);
        pid_t pid = helper_at(deadline, signal_parent, NULL);
        failed(sigwaitinfo(&usr1, NULL));
        waitpid(pid, NULL, 0);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        exit(2);
    }
}

static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_never = PTHREAD_COND_INITIALIZER;
static int idle_pipe[2];

static void *idle_thread(void *kind) {
    switch ((int)(intptr_t)kind % 3) {
    case 0:
        for (;;) {
            struct timespec t = span(37);
            nanosleep(&t, NULL);
        }
    case 1:
        pthread_mutex_lock(&idle_lock);
        for (;;) pthread_cond_wait(&idle_never, &idle_lock);
    default: {
        char byte;
        for (;;) {
            if (read(idle_pipe[0], &byte, 1) <= 0) return NULL;
        }
    }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: idle_waits MODE MS THREADS STOPFILE\n");
        return 2;
    }
    const char *mode = argv[1];
    long ms = atol(argv[2]);
    int threads = atoi(argv[3]);
    const char *stop = argv[4];
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    sigaction(SIGUSR1, &action, NULL);
    if (pipe(idle_pipe) != 0) return 2;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (int i = 0; i < threads; i++) {
        pthread_t thread;
        pthread_create(&thread, NULL, idle_thread, (void *)(intptr_t)i);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    puts("ready");
    fflush(stdout);
    long waits = 0, shorter = 0;
    int64_t over_min = INT64_MAX, over_max = 0;
    pid_t parent = getppid();
    /* Until told to stop, or orphaned (its test ended without telling). */
    while (access(stop, F_OK) != 0 && getppid() == parent) {
        int64_t start = now_ns();
        wait_once(mode, ms, start);
        int64_t over = now_ns() - start - (int64_t)ms * 1000000;
        waits++;
        if (over < 0) shorter++;
        if (over < over_min) over_min = over;
        if (over > over_max) over_max = over;
    }
    printf("waits %ld short %ld over_us %lld %lld eintr %ld\n", waits, shorter,
           (long long)(over_min / 1000), (long long)(over_max / 1000), eintr);
    fflush(stdout);
    return 0;
}
