/* libfailing.so: an allocator between the shim and glibc that fails on
 * purpose. Preloaded after the shim (LD_PRELOAD="libheapsample.so
 * libfailing.so"), so it is the shim's "next" allocator. It forwards to
 * glibc's __libc_* entry points, but once armed returns NULL with errno
 * ENOMEM on every FAILING_EVERY-th call (counted over malloc, calloc,
 * realloc with a size, memalign, aligned_alloc, posix_memalign, valloc,
 * pvalloc).
 *
 * Arming: FAILING_START=N in the environment arms it after N calls (from
 * process start: every caller, the shim's own allocations included), or the
 * program calls failing_arm(every) / failing_disarm() found with dlsym. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

static atomic_long calls, failures;
static atomic_long every = 0;
static atomic_long start_after = -1; /* -1: not read from the environment yet */

static long parse(const char *s, long fallback) {
    if (!s || !*s)
        return fallback;
    long v = 0;
    for (; *s >= '0' && *s <= '9'; s++)
        v = v * 10 + (*s - '0');
    return v;
}

static int fail_now(void) {
    long start = atomic_load(&start_after);
    if (start == -1) {
        /* getenv does not allocate. */
        start = parse(getenv("FAILING_START"), -2);
        long e = parse(getenv("FAILING_EVERY"), 7);
        if (start >= 0)
            atomic_store(&every, e ? e : 7);
        atomic_store(&start_after, start);
    }
    long n = atomic_fetch_add(&calls, 1) + 1;
    long e = atomic_load(&every);
    if (e <= 0 || (start >= 0 && n <= start))
        return 0;
    if (n % e != 0)
        return 0;
    atomic_fetch_add(&failures, 1);
    errno = ENOMEM;
    return 1;
}

void failing_arm(long e) {
    if (atomic_load(&start_after) == -1)
        atomic_store(&start_after, -2);
    atomic_store(&every, e);
}
void failing_disarm(void) { atomic_store(&every, 0); }
long failing_failures(void) { return atomic_load(&failures); }

void *malloc(size_t n) { return fail_now() ? NULL : __libc_malloc(n); }
void *calloc(size_t a, size_t b) { return fail_now() ? NULL : __libc_calloc(a, b); }
void *realloc(void *p, size_t n) {
    if (p && n == 0)
        return __libc_realloc(p, n);
    return fail_now() ? NULL : __libc_realloc(p, n);
}
void free(void *p) { __libc_free(p); }
void *memalign(size_t a, size_t n) { return fail_now() ? NULL : __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { return fail_now() ? NULL : __libc_memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n) {
    if (a < sizeof(void *) || (a & (a - 1)))
        return EINVAL;
    int saved = errno;
    if (fail_now()) {
        errno = saved;
        return ENOMEM;
    }
    void *p = __libc_memalign(a, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}
void *valloc(size_t n) { return fail_now() ? NULL : __libc_valloc(n); }
void *pvalloc(size_t n) { return fail_now() ? NULL : __libc_pvalloc(n); }
