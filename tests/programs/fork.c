/*
 * fork / exec test program.
 *
 * The parent keeps a background thread allocating and freeing while it:
 *   - allocates parent_site's objects (kept live);
 *   - forks 10 children without exec; each allocates in child_site (half
 *     freed), prints its own numbers and calls exit(0) (so atexit handlers,
 *     and a profiler's final dump, run in the child);
 *   - fork+execs /bin/true;
 *   - fork+execs itself (`/proc/self/exe exec-child`), which allocates in
 *     exec_child_site and prints its numbers;
 *   - posix_spawns /bin/true.
 * It waits for every child in order, so stdout is deterministic. The pids go
 * to stderr as `pid parent=<pid>`, `pid fork-child=<pid>`, `pid exec-self=<pid>`,
 * `pid exec-true=<pid>`, `pid spawn-true=<pid>`.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

extern char **environ;
static atomic_int stop;
static void *parent_keep[100];
static void *child_keep[200];

static void *churn(void *arg) {
    (void)arg;
    unsigned long x = 1;
    void *keep[16] = {0};
    while (!atomic_load(&stop)) {
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        unsigned k = (unsigned)(x >> 60);
        free(keep[k]);
        keep[k] = malloc((size_t)(x >> 52) + 1);
        if ((x >> 40) % 64 == 0) usleep(50);
    }
    for (int k = 0; k < 16; k++) free(keep[k]);
    return NULL;
}

NOINLINE void parent_site(void) {
    for (int i = 0; i < 100; i++) {
        parent_keep[i] = malloc(128);
        memset(parent_keep[i], i, 128);
    }
}

NOINLINE unsigned long child_site(int round) {
    unsigned long sum = 0;
    for (int i = 0; i < 200; i++) {
        child_keep[i] = malloc(256);
        memset(child_keep[i], i + round, 256);
        sum += ((unsigned char *)child_keep[i])[7];
    }
    for (int i = 0; i < 200; i += 2) {
        free(child_keep[i]);
        child_keep[i] = NULL;
    }
    return sum;
}

NOINLINE unsigned long exec_child_site(void) {
    unsigned long sum = 0;
    static void *keep[30];
    for (int i = 0; i < 30; i++) {
        keep[i] = malloc(512);
        memset(keep[i], i, 512);
        sum += ((unsigned char *)keep[i])[100];
    }
    return sum;
}

static int wait_for(pid_t pid) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static pid_t fork_exec(char *const argv[]) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "exec-child") == 0) {
        unsigned long sum = exec_child_site();
        printf("exec-child: sum=%lu\n", sum);
        printf("site exec_child_site size=512 alloc_objects=30 alloc_bytes=15360 live_objects=30 "
               "live_bytes=15360 live_usable=unknown exact_alloc=1\n");
        return 0;
    }
    fprintf(stderr, "pid parent=%d\n", (int)getpid());
    pthread_t th;
    if (pthread_create(&th, NULL, churn, NULL) != 0) return 2;
    parent_site();
    unsigned long kept = 0;
    for (int i = 0; i < 100; i++) kept += ((unsigned char *)parent_keep[i])[i];
    printf("parent_site: kept=%lu\n", kept);
    printf("site parent_site size=128 alloc_objects=100 alloc_bytes=12800 live_objects=100 "
           "live_bytes=12800 live_usable=unknown exact_alloc=1\n");
    printf("site child_site size=256 alloc_objects=0 alloc_bytes=0 live_objects=0 live_bytes=0 "
           "live_usable=0 exact_alloc=1\n");
    int failures = 0;
    for (int round = 0; round < 10; round++) {
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) return 2;
        if (pid == 0) {
            unsigned long sum = child_site(round);
            for (int i = 1; i < 200; i += 2) sum += ((unsigned char *)child_keep[i])[3];
            printf("fork-child %d: sum=%lu\n", round, sum);
            printf("child-site size=256 alloc_objects=200 alloc_bytes=51200 live_objects=100 "
                   "live_bytes=25600\n");
            exit(0);
        }
        fprintf(stderr, "pid fork-child=%d\n", (int)pid);
        int rc = wait_for(pid);
        printf("fork-child %d exited %d\n", round, rc);
        failures += rc != 0;
    }
    char *true_argv[] = {"/bin/true", NULL};
    pid_t pid = fork_exec(true_argv);
    fprintf(stderr, "pid exec-true=%d\n", (int)pid);
    int rc = wait_for(pid);
    printf("exec /bin/true exited %d\n", rc);
    failures += rc != 0;

    char *self_argv[] = {"/proc/self/exe", "exec-child", NULL};
    pid = fork_exec(self_argv);
    fprintf(stderr, "pid exec-self=%d\n", (int)pid);
    rc = wait_for(pid);
    printf("exec self exited %d\n", rc);
    failures += rc != 0;

    fflush(stdout);
    if (posix_spawn(&pid, "/bin/true", NULL, NULL, true_argv, environ) != 0) return 2;
    fprintf(stderr, "pid spawn-true=%d\n", (int)pid);
    rc = wait_for(pid);
    printf("posix_spawn /bin/true exited %d\n", rc);
    failures += rc != 0;

    atomic_store(&stop, 1);
    pthread_join(th, NULL);
    printf("parent done, %d failures\n", failures);
    return failures != 0;
}
