/*
 * Signal dumps in forked children (pre-fork servers: gunicorn, uwsgi,
 * Python multiprocessing, redis's BGSAVE child), and a check that the
 * profiler added no thread.
 *
 *   signal_fork <prefix> <children>
 *       forks <children> workers, each allocating in worker_site; even ones
 *       wait in a sleep loop (blocked in a system call), odd ones spin in
 *       their own code. The parent sends each SIGUSR2 and waits up to 10 s
 *       for <prefix>.<child pid>.*.s0.prof, prints
 *       "worker <i> signal_dump=<0|1>", then kills it. The parent then
 *       signals itself and prints "parent signal_dump=<0|1>".
 *   signal_fork threads
 *       prints "threads=<n>" (from /proc/self/status) before any dump.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

__attribute__((noinline)) static void worker_site(void) {
    for (int i = 0; i < 64; i++) {
        char *p = malloc(4096);
        memset(p, i, 4096);
        sink += (unsigned char)p[100];
    }
}

static int has_dump(const char *prefix, pid_t pid) {
    const char *slash = strrchr(prefix, '/');
    char dir[4096], start[512];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - prefix) : 1, slash ? prefix : ".");
    snprintf(start, sizeof start, "%s.%d.", slash ? slash + 1 : prefix, (int)pid);
    DIR *d = opendir(dir);
    int found = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strncmp(e->d_name, start, strlen(start)) == 0 && strstr(e->d_name, ".s0.prof") &&
            !strstr(e->d_name, ".tmp."))
            found = 1;
    if (d) closedir(d);
    return found;
}

static int wait_for_dump(const char *prefix, pid_t pid) {
    for (int i = 0; i < 1000; i++) {
        if (has_dump(prefix, pid)) return 1;
        usleep(10000);
    }
    return 0;
}

static int threads(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "Threads:", 8) == 0) n = atoi(line + 8);
    if (f) fclose(f);
    return n;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "threads") == 0) {
        worker_site();
        printf("threads=%d\n", threads());
        return 0;
    }
    if (argc != 3) return 1;
    const char *prefix = argv[1];
    int children = atoi(argv[2]);
    worker_site();
    int failures = 0;
    for (int i = 0; i < children; i++) {
        int ready[2];
        if (pipe(ready) != 0) return 2;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            worker_site();
            if (write(ready[1], "r", 1) != 1) _exit(3);
            if (i % 2 == 0)
                for (;;) usleep(100000);
            for (;;) sink = sink * 6364136223846793005UL + 1;
        }
        char c;
        if (read(ready[0], &c, 1) != 1) return 2;
        close(ready[0]);
        close(ready[1]);
        kill(pid, SIGUSR2);
        int dumped = wait_for_dump(prefix, pid);
        printf("worker %d signal_dump=%d\n", i, dumped);
        failures += !dumped;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    kill(getpid(), SIGUSR2);
    int dumped = wait_for_dump(prefix, getpid());
    printf("parent signal_dump=%d\n", dumped);
    return failures + !dumped;
}
