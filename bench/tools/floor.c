/* floor.so: the smallest useful malloc interposer, the physical floor of any
 * LD_PRELOAD profiler.
 *
 * malloc and free are each one load of the next allocator's address, a test
 * and a jump to it (mov/test/jmp), the least any preload that forwards to a
 * runtime-resolved allocator can do.  The address is looked up with
 * dlsym(RTLD_NEXT) in the constructor; calls made before it (or if the lookup
 * fails) go to glibc's __libc_* entry points.  The other allocation functions
 * forward to __libc_* as alloccount.c does.  Nothing is counted. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);
extern void __libc_free(void *);

__attribute__((visibility("hidden"))) void *(*floor_next_malloc)(size_t);
__attribute__((visibility("hidden"))) void (*floor_next_free)(void *);

__attribute__((constructor)) static void floor_init(void) {
    floor_next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    floor_next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
}

__asm__(
    ".text\n"
    ".globl malloc\n"
    ".type malloc, @function\n"
    "malloc:\n"
    "    mov floor_next_malloc(%rip), %rax\n"
    "    test %rax, %rax\n"
    "    jz 1f\n"
    "    jmp *%rax\n"
    "1:  jmp __libc_malloc@PLT\n"
    ".size malloc, .-malloc\n"
    ".globl free\n"
    ".type free, @function\n"
    "free:\n"
    "    mov floor_next_free(%rip), %rax\n"
    "    test %rax, %rax\n"
    "    jz 2f\n"
    "    jmp *%rax\n"
    "2:  jmp __libc_free@PLT\n"
    ".size free, .-free\n");

void *calloc(size_t a, size_t b) { return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
void *valloc(size_t n) { return __libc_valloc(n); }
void *pvalloc(size_t n) { return __libc_pvalloc(n); }
void *memalign(size_t a, size_t n) { return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { return __libc_memalign(a, n); }

int posix_memalign(void **out, size_t a, size_t n) {
    if (a % sizeof(void *) != 0 || (a & (a - 1)) != 0) return EINVAL;
    void *p = __libc_memalign(a, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
