/* alloccount.so: an LD_PRELOAD shim that only counts allocation calls.
 *
 * The harness runs each workload once under it to report allocations per
 * second.  Every allocating entry point is forwarded to glibc's __libc_*
 * functions (posix_memalign/aligned_alloc through __libc_memalign), so it
 * needs no dlsym bootstrap.  At exit each process appends one line
 *   pid=<pid> allocs=<n> frees=<n>
 * to $ALLOCCOUNT_FILE (O_APPEND, so gcc's cc1/as children add their own).
 * Counting uses relaxed atomics: it perturbs timing, which is why it runs in
 * a separate, untimed pass. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);
extern void __libc_free(void *);

static unsigned long long n_alloc, n_free;

#define COUNT(c) __atomic_fetch_add(&(c), 1, __ATOMIC_RELAXED)

void *malloc(size_t n) { COUNT(n_alloc); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { COUNT(n_alloc); return __libc_calloc(a, b); }
void *valloc(size_t n) { COUNT(n_alloc); return __libc_valloc(n); }
void *pvalloc(size_t n) { COUNT(n_alloc); return __libc_pvalloc(n); }
void *memalign(size_t a, size_t n) { COUNT(n_alloc); return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { COUNT(n_alloc); return __libc_memalign(a, n); }

void free(void *p) {
    if (p) COUNT(n_free);
    __libc_free(p);
}

void *realloc(void *p, size_t n) {
    if (p && n == 0) { COUNT(n_free); return __libc_realloc(p, n); }
    if (!p) COUNT(n_alloc); else { COUNT(n_alloc); COUNT(n_free); }
    return __libc_realloc(p, n);
}

int posix_memalign(void **out, size_t a, size_t n) {
    COUNT(n_alloc);
    void *p = __libc_memalign(a, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

__attribute__((destructor)) static void report(void) {
    const char *path = getenv("ALLOCCOUNT_FILE");
    if (!path) return;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return;
    char line[128];
    int len = snprintf(line, sizeof line, "pid=%d allocs=%llu frees=%llu\n", (int)getpid(),
                       __atomic_load_n(&n_alloc, __ATOMIC_RELAXED),
                       __atomic_load_n(&n_free, __ATOMIC_RELAXED));
    if (write(fd, line, (size_t)len) < 0) { /* nothing to do */ }
    close(fd);
}
