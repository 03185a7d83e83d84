/* file_create: what creating one small file costs in a directory, the file
 * system's share of an exit dump.
 *
 *   file_create <n>
 *
 * In the working directory, <n> times: create a temporary name with
 * O_CREAT | O_EXCL, lock it, write 849 bytes (the exit dump of a process
 * that sampled nothing), rename it to a new final name with
 * RENAME_NOREPLACE and close it, as an exit dump does. Prints the median
 * wall time of the creation (create_us) and of the rest (write_rename_us)
 * and the system CPU time per file (cpu_us). The files are left in place. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double cpu_us(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6 + usage.ru_utime.tv_usec +
           usage.ru_stime.tv_usec;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 0;
    if (n <= 0) {
        fprintf(stderr, "usage: file_create <n>\n");
        return 2;
    }
    double *create = malloc(n * sizeof *create), *rest = malloc(n * sizeof *rest);
    char body[849];
    memset(body, 1, sizeof body);
    double cpu_before = cpu_us();
    for (int i = 0; i < n; i++) {
        char final_name[64];
        snprintf(final_name, sizeof final_name, "file_create.%d.prof", i);
        double t0 = now_us();
        int fd = open("file_create.tmp.0", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                      0600);
        double t1 = now_us();
        if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0 ||
            write(fd, body, sizeof body) != (ssize_t)sizeof body ||
            renameat2(AT_FDCWD, "file_create.tmp.0", AT_FDCWD, final_name, RENAME_NOREPLACE) != 0) {
            perror("file_create");
            return 1;
        }
        close(fd);
        create[i] = t1 - t0;
        rest[i] = now_us() - t1;
    }
    double cpu = (cpu_us() - cpu_before) / n;
    qsort(create, n, sizeof *create, by_value);
    qsort(rest, n, sizeof *rest, by_value);
    printf("create_us=%.1f write_rename_us=%.1f cpu_us=%.1f\n", create[n / 2], rest[n / 2], cpu);
    return 0;
}
