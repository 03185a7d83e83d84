/* Programs that end, fork and juggle descriptors and signals in ways that a
 * preloaded profiler must survive. argv[1] selects the scenario; each prints
 * what it observed so the test can check it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;
static const char *self;
typedef int (*dump_fn)(const char *);

static dump_fn find_dump(void) { return (dump_fn)dlsym(RTLD_DEFAULT, "heapsample_dump"); }

__attribute__((noinline)) static void *churn_site(size_t n) {
    void *p = malloc(n);
    if (p)
        memset(p, 1, n < 64 ? n : 64);
    return p;
}

static void churn(int rounds) {
    void *slots[64] = {0};
    for (int i = 0; i < rounds; i++) {
        int s = (i * 7) % 64;
        free(slots[s]);
        slots[s] = churn_site(16 + (size_t)((i * 37) % 5000));
    }
    for (int s = 0; s < 64; s++)
        free(slots[s]);
}

/* ---- exit while other threads allocate and dump ---- */
static atomic_long manual_ok, manual_failed;
static void *racer(void *arg) {
    dump_fn dump = find_dump();
    long index = (long)arg;
    for (unsigned long i = 0;; i++) {
        void *p = churn_site(32 + (i * (index + 3)) % 3000);
        free(p);
        if (dump && i % 2000 == (unsigned long)index * 100) {
            if (dump(NULL) == 0)
                atomic_fetch_add(&manual_ok, 1);
            else
                atomic_fetch_add(&manual_failed, 1);
        }
    }
    return NULL;
}

static int exit_race(int threads, int millis) {
    for (long i = 0; i < threads; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, racer, (void *)i) != 0)
            return 1;
        pthread_detach(t);
    }
    struct timespec ts = {millis / 1000, (millis % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    printf("exiting with threads running\n");
    fflush(stdout);
    exit(0);
}

/* ---- _exit ---- */
static int underscore_exit(void) {
    dump_fn dump = find_dump();
    churn(5000);
    void *leak = churn_site(100000);
    (void)leak;
    int rc = dump ? dump(NULL) : -1;
    printf("manual dump %d\n", rc);
    fflush(stdout);
    _exit(3);
}

/* ---- children ---- */
static int child(void) {
    churn(3000);
    void *leak = churn_site(77777);
    (void)leak;
    printf("child done\n");
    return 7;
}

static int wait_status(pid_t pid) {
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int do_vfork(void) {
    churn(2000);
    char *args[] = {(char *)self, "child", NULL};
    pid_t pid = vfork();
    if (pid == 0) {
        execve(self, args, environ);
        _exit(126);
    }
    printf("vfork child status %d\n", wait_status(pid));
    /* A vfork child whose exec fails. */
    char *bad[] = {"/nonexistent/program", NULL};
    pid = vfork();
    if (pid == 0) {
        execve(bad[0], bad, environ);
        _exit(127);
    }
    printf("vfork failed-exec status %d\n", wait_status(pid));
    churn(2000);
    return 0;
}

static int do_spawn(void) {
    churn(2000);
    char *args[] = {(char *)self, "child", NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, self, NULL, NULL, args, environ);
    if (rc != 0) {
        printf("posix_spawn failed %d\n", rc);
        return 1;
    }
    printf("spawn child status %d\n", wait_status(pid));
    char *sh[] = {"/bin/sh", "-c", "exit 5", NULL};
    rc = posix_spawn(&pid, "/bin/sh", NULL, NULL, sh, environ);
    printf("spawn sh status %d\n", rc == 0 ? wait_status(pid) : -rc);
    churn(2000);
    return 0;
}

/* ---- descriptors ---- */
static int write_file_fd(int fd, const char *text) {
    size_t n = strlen(text);
    return write(fd, text, n) == (ssize_t)n ? 0 : -1;
}

/* Close every descriptor, then open three files (they get 0, 1 and 2),
 * write a known line to each, allocate, dump manually to a missing
 * directory (an error the profiler may want to report), and exit. */
static int close_fds(const char *bad_dump_path) {
    struct rlimit limit;
    getrlimit(RLIMIT_NOFILE, &limit);
    long max = limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur > 65536 ? 65536 : (long)limit.rlim_cur;
    for (long fd = 0; fd < max; fd++)
        close((int)fd);
    int fds[3];
    const char *names[3] = {"file0.txt", "file1.txt", "file2.txt"};
    for (int i = 0; i < 3; i++) {
        fds[i] = open(names[i], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fds[i] != i)
            return 10 + i;
        if (write_file_fd(fds[i], "program line\n") != 0)
            return 20 + i;
    }
    churn(20000);
    dump_fn dump = find_dump();
    int rc = dump ? dump(bad_dump_path) : -1;
    churn(20000);
    char line[64];
    snprintf(line, sizeof line, "dump rc %d\n", rc);
    write_file_fd(fds[0], line);
    return 0;
}

/* dup2 /dev/null over 0, 1, 2 and 3..199, then open a file (fd 200 or
 * more), allocate, and exit. */
static int dup2_null(void) {
    int null = open("/dev/null", O_RDWR);
    if (null < 0)
        return 1;
    for (int fd = 0; fd < 200; fd++)
        if (fd != null && dup2(null, fd) != fd)
            return 2;
    int out = open("after.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0)
        return 3;
    write_file_fd(out, "program line\n");
    churn(30000);
    dump_fn dump = find_dump();
    int rc = dump ? dump(NULL) : -1;
    char line[64];
    snprintf(line, sizeof line, "dump rc %d fd %d\n", rc, out);
    write_file_fd(out, line);
    return 0;
}

/* ---- SIGUSR2 ---- */
static volatile sig_atomic_t usr2_seen;
static void on_usr2(int sig) {
    (void)sig;
    usr2_seen++;
}

static int own_usr2(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_usr2;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGUSR2, &action, NULL) != 0)
        return 1;
    for (int i = 0; i < 5; i++) {
        churn(2000);
        raise(SIGUSR2);
    }
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
    printf("usr2 handled %d\n", (int)usr2_seen);
    return 0;
}

static int usr2_ignored_then_exec(void) {
    signal(SIGUSR2, SIG_IGN);
    char *args[] = {(char *)self, "usr2-ignored", NULL};
    execve(self, args, environ);
    return 126;
}

static int usr2_ignored(void) {
    struct sigaction current;
    sigaction(SIGUSR2, NULL, &current);
    printf("usr2 ignored at start %d\n", current.sa_handler == SIG_IGN);
    churn(3000);
    raise(SIGUSR2);
    sigaction(SIGUSR2, NULL, &current);
    printf("usr2 ignored at end %d\n", current.sa_handler == SIG_IGN);
    return 0;
}

int main(int argc, char **argv) {
    self = argv[0];
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "exit-race"))
        return exit_race(argc > 2 ? atoi(argv[2]) : 4, argc > 3 ? atoi(argv[3]) : 100);
    if (!strcmp(mode, "_exit"))
        return underscore_exit();
    if (!strcmp(mode, "child"))
        return child();
    if (!strcmp(mode, "vfork"))
        return do_vfork();
    if (!strcmp(mode, "spawn"))
        return do_spawn();
    if (!strcmp(mode, "close-fds"))
        return close_fds(argc > 2 ? argv[2] : "missing-dir/x.prof");
    if (!strcmp(mode, "dup2-null"))
        return dup2_null();
    if (!strcmp(mode, "own-usr2"))
        return own_usr2();
    if (!strcmp(mode, "usr2-ign-exec"))
        return usr2_ignored_then_exec();
    if (!strcmp(mode, "usr2-ignored"))
        return usr2_ignored();
    fprintf(stderr, "unknown mode %s\n", mode);
    return 99;
}
