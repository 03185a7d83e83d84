/*
 * High-water trigger test program.
 *
 * `trig_highwater BLOCK T1 T2 ...`: keeps a stack of live blocks of BLOCK
 * bytes (allocated in highwater_site, one byte written per page) and moves
 * the number of live blocks to each target in turn: allocating blocks
 * (1 ms pause after each, so the shim's dumper keeps pace) or freeing the
 * most recent ones. At each target it waits 300 ms, counts the `.u<n>.prof`
 * files in the working directory (read with getdents64 into a static
 * buffer, without malloc) and prints
 *   checkpoint index=<i> blocks=<live blocks> live_bytes=<requested bytes> u_files=<n>
 * It prints only observations; the test decides.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static int count_dumps(const char *tag) {
    static char buf[1 << 16];
    int fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int n = 0;
    for (;;) {
        long got = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (got <= 0) break;
        for (long off = 0; off < got;) {
            struct linux_dirent64 {
                unsigned long long d_ino;
                long long d_off;
                unsigned short d_reclen;
                unsigned char d_type;
                char d_name[];
            } *e = (void *)(buf + off);
            size_t len = strlen(e->d_name);
            if (len > 5 && strcmp(e->d_name + len - 5, ".prof") == 0 && strstr(e->d_name, tag))
                n++;
            off += e->d_reclen;
        }
    }
    close(fd);
    return n;
}

#define MAX_BLOCKS 4096
static char *blocks[MAX_BLOCKS];

NOINLINE char *highwater_site(size_t size) {
    char *p = malloc(size);
    if (!p) abort();
    for (size_t i = 0; i < size; i += 4096) p[i] = 1;
    return p;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: trig_highwater BLOCK T1 T2 ...\n");
        return 2;
    }
    size_t block = (size_t)atol(argv[1]);
    long live = 0;
    /* Results are kept and printed at the end: no stdio allocation while the
     * heap is being measured. */
    static char out[1 << 16];
    size_t used = 0;
    for (int t = 2; t < argc; t++) {
        long target = atol(argv[t]);
        if (target < 0 || target > MAX_BLOCKS) return 2;
        while (live < target) {
            blocks[live++] = highwater_site(block);
            usleep(1000);
        }
        while (live > target) free(blocks[--live]);
        usleep(300000);
        used += snprintf(out + used, sizeof out - used,
                         "checkpoint index=%d blocks=%ld live_bytes=%llu u_files=%d\n", t - 2,
                         live, (unsigned long long)live * block, count_dumps(".u"));
    }
    fputs(out, stdout);
    while (live > 0) free(blocks[--live]);
    return 0;
}
