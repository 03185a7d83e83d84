/*
 * Generated code whose unwind information appears later, for the walk's
 * cache of "no unwind information here" (tests/tests/runtime_jit.rs).
 *
 *   rt_jit_cfi register   a stub generated into an anonymous executable
 *       page, keeping no frame pointer (push rbp; xor ebp, ebp; call
 *       target; pop rbp; ret), named `jit_cfi` in the perf map, allocates
 *       BLOCKS blocks called from `before_registering`; then its CFI is
 *       registered with `__register_frame` and it allocates BLOCKS more
 *       from `after_registering`; then the CFI is deregistered and it
 *       allocates BLOCKS more from `after_deregistering`.
 *   rt_jit_cfi reload PLUGIN   PLUGIN's `plugin_call` page is copied, the
 *       module unloaded and the copy run at the same address as generated
 *       code without unwind information (BLOCKS blocks from `during_copy`);
 *       the copy unmapped, the module loaded again at the same address
 *       (tried up to 8 times) and called BLOCKS times from `after_reload`.
 *       Prints "same address" once it landed there.
 *   rt_jit_cfi threads   THREADS threads allocate through a stub whose CFI
 *       is registered; once each has allocated, the main thread registers
 *       and deregisters another section ROUNDS times, and after each
 *       registration takes a libgcc backtrace from generated code without
 *       unwind information (libgcc's first lookup after a registration mallocs while holding
 *       its object mutex: a sample there must not ask libgcc again).
 *   rt_jit_cfi handler   the same from a signal handler (a signal frame,
 *       which the profiler's walk hands to libgcc, on the stack).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <unwind.h>

#define BLOCKS 300
#define BLOCK_BYTES 4096
#define THREADS 4
#define ROUNDS 300

extern void __register_frame(void *begin);
extern void __deregister_frame(void *begin);
struct dwarf_eh_bases {
    void *tbase, *dbase, *func;
};
extern const void *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases);

/* Whether libgcc itself knows an FDE for `pc` (the program's registration
 * reached it). */
static const char *libgcc_knows(void *pc) {
    struct dwarf_eh_bases bases;
    return _Unwind_Find_FDE(pc, &bases) ? "yes" : "no";
}

static unsigned long checksum;

__attribute__((noinline)) void *allocate_block(size_t bytes) {
    char *block = malloc(bytes);
    if (!block) {
        abort();
    }
    block[0] = (char)bytes;
    checksum += (unsigned char)block[0];
    free(block);
    return NULL;
}

typedef void *(*stub_fn)(size_t);

static unsigned char *executable_page(void *at) {
    unsigned char *page = mmap(at, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                               MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED_NOREPLACE : 0), -1, 0);
    if (page == MAP_FAILED || (at && page != at)) {
        perror("mmap");
        exit(1);
    }
    return page;
}

/* push rbp; xor ebp, ebp (no frame chain); mov rax, TARGET; call rax;
 * pop rbp; ret: 17 bytes, the call's return address at offset 15. With
 * `keep_chain`, `mov rbp, rsp` instead of the xor (a frame-pointer frame). */
#define STUB_BYTES 17
static void generate(unsigned char *code, void *target, int keep_chain) {
    size_t at = 0;
    uint64_t address = (uint64_t)(uintptr_t)target;
    code[at++] = 0x55;
    if (keep_chain) {
        code[at++] = 0x48; code[at++] = 0x89; code[at++] = 0xe5;
    } else {
        code[at++] = 0x31; code[at++] = 0xed; code[at++] = 0x90;
    }
    code[at++] = 0x48; code[at++] = 0xb8;
    memcpy(code + at, &address, 8);
    at += 8;
    code[at++] = 0xff; code[at++] = 0xd0;
    code[at++] = 0x5d;
    code[at++] = 0xc3;
}

/* An .eh_frame section (augmentation "": absolute addresses) with one FDE
 * for the stub at `code`: CFA = rsp + 16 and rbp at CFA - 16 from offset 1,
 * CFA = rsp + 8 from offset 16 (after `pop rbp`). */
static size_t eh_frame_for(unsigned char *out, uint64_t code) {
    static const unsigned char cie[] = {
        0, 0, 0, 0,       /* CIE id */
        1, 0,             /* version 1, augmentation "" */
        1, 0x78, 16,      /* code align 1, data align -8, return address r16 */
        0x0c, 7, 8,       /* DW_CFA_def_cfa rsp, 8 */
        0x90, 1,          /* DW_CFA_offset r16, cfa-8 */
        0, 0,             /* DW_CFA_nop: 16 bytes */
    };
    static const unsigned char program[] = {
        0x41, 0x0e, 16, 0x86, 2, /* loc 1: cfa rsp+16, rbp at cfa-16 */
        0x4f, 0x0e, 8, 0xc6,     /* loc 16: cfa rsp+8, rbp restored */
        0, 0, 0,                 /* DW_CFA_nop: 4 + 4 + 16 + 12 = 36 */
    };
    size_t at = 0;
    uint32_t length = sizeof cie;
    memcpy(out + at, &length, 4);
    memcpy(out + at + 4, cie, sizeof cie);
    at += 4 + sizeof cie;
    length = 4 + 16 + sizeof program;
    uint32_t cie_pointer = (uint32_t)(at + 4);
    uint64_t range = STUB_BYTES;
    memcpy(out + at, &length, 4);
    memcpy(out + at + 4, &cie_pointer, 4);
    memcpy(out + at + 8, &code, 8);
    memcpy(out + at + 16, &range, 8);
    memcpy(out + at + 24, program, sizeof program);
    at += 4 + length;
    memset(out + at, 0, 4);
    return at + 4;
}

static void name_in_perf_map(void *code, const char *name) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
    FILE *map = fopen(path, "w");
    if (!map) {
        perror("perf map");
        exit(1);
    }
    fprintf(map, "%lx %x %s\n", (unsigned long)(uintptr_t)code, STUB_BYTES, name);
    fclose(map);
}

__attribute__((noinline)) void before_registering(stub_fn stub) {
    for (int i = 0; i < BLOCKS; i++) {
        stub(BLOCK_BYTES);
    }
}

__attribute__((noinline)) void after_registering(stub_fn stub) {
    for (int i = 0; i < BLOCKS; i++) {
        stub(BLOCK_BYTES);
    }
}

__attribute__((noinline)) void after_deregistering(stub_fn stub) {
    for (int i = 0; i < BLOCKS; i++) {
        stub(BLOCK_BYTES);
    }
}

static void registering(void) {
    unsigned char *code = executable_page(NULL);
    generate(code, (void *)allocate_block, 0);
    name_in_perf_map(code, "jit_cfi");
    static unsigned char eh_frame[128];
    eh_frame_for(eh_frame, (uint64_t)(uintptr_t)code);
    before_registering((stub_fn)code);
    __register_frame(eh_frame);
    printf("libgcc knows the stub: %s\n", libgcc_knows(code + 5));
    after_registering((stub_fn)code);
    __deregister_frame(eh_frame);
    printf("libgcc knows the stub: %s\n", libgcc_knows(code + 5));
    after_deregistering((stub_fn)code);
}

typedef void *(*plugin_fn)(void *(*)(size_t), size_t);

__attribute__((noinline)) void during_copy(plugin_fn call) {
    for (int i = 0; i < BLOCKS; i++) {
        call(allocate_block, BLOCK_BYTES);
    }
}

__attribute__((noinline)) void after_reload(plugin_fn call) {
    for (int i = 0; i < BLOCKS; i++) {
        call(allocate_block, BLOCK_BYTES);
    }
}

static void reload(const char *plugin) {
    for (int attempt = 1; attempt <= 8; attempt++) {
        void *module = dlopen(plugin, RTLD_NOW);
        if (!module) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            exit(1);
        }
        plugin_fn call = (plugin_fn)dlsym(module, "plugin_call");
        unsigned char *page = (unsigned char *)((uintptr_t)call & ~(uintptr_t)4095);
        static unsigned char copy[4096];
        memcpy(copy, page, sizeof copy);
        dlclose(module);
        memcpy(executable_page(page), copy, sizeof copy);
        during_copy(call);
        munmap(page, 4096);
        module = dlopen(plugin, RTLD_NOW);
        if (!module) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            exit(1);
        }
        plugin_fn again = (plugin_fn)dlsym(module, "plugin_call");
        if (again == call) {
            after_reload(again);
            printf("same address after %d attempts, checksum %lu\n", attempt, checksum);
            return;
        }
        dlclose(module);
    }
    printf("never at the same address\n");
    exit(3);
}

static atomic_int stop, allocating_workers;

static void *allocating(void *stub) {
    ((stub_fn)stub)(64);
    atomic_fetch_add(&allocating_workers, 1);
    while (!atomic_load(&stop)) {
        ((stub_fn)stub)(64);
    }
    return NULL;
}

static _Unwind_Reason_Code count_frame(struct _Unwind_Context *context, void *frames) {
    (void)context;
    ++*(int *)frames;
    return _URC_NO_REASON;
}

__attribute__((noinline)) void *libgcc_backtrace(size_t bytes) {
    int frames = 0;
    _Unwind_Backtrace(count_frame, &frames);
    checksum += (unsigned long)frames + bytes;
    return NULL;
}

static void threads(void) {
    unsigned char *code = executable_page(NULL);
    generate(code, (void *)allocate_block, 0);
    generate(code + 64, (void *)libgcc_backtrace, 1);
    name_in_perf_map(code, "jit_cfi");
    static unsigned char stub_cfi[128], other_cfi[128];
    eh_frame_for(stub_cfi, (uint64_t)(uintptr_t)code);
    __register_frame(stub_cfi);
    pthread_t workers[THREADS];
    for (int t = 0; t < THREADS; t++) {
        pthread_create(&workers[t], NULL, allocating, code);
    }
    /* The rounds run while every worker allocates (on a loaded machine the
     * workers might otherwise not start before the rounds end). */
    while (atomic_load(&allocating_workers) < THREADS) {
        sched_yield();
    }
    for (int round = 0; round < ROUNDS; round++) {
        /* Each round's section describes a page of its own. */
        eh_frame_for(other_cfi, 0x100000000000ull + (uint64_t)round * 4096);
        __register_frame(other_cfi);
        ((stub_fn)(code + 64))(0);
        __deregister_frame(other_cfi);
    }
    atomic_store(&stop, 1);
    for (int t = 0; t < THREADS; t++) {
        pthread_join(workers[t], NULL);
    }
    __deregister_frame(stub_cfi);
    printf("threads: %d rounds\n", ROUNDS);
}

static void backtrace_in_handler(int signal) {
    (void)signal;
    libgcc_backtrace(0);
}

/* A libgcc backtrace from a signal handler after each registration: the
 * walk of the malloc libgcc makes under its mutex meets the signal frame,
 * which it cannot step itself. */
static void in_handler(void) {
    static unsigned char cfi[128];
    signal(SIGUSR1, backtrace_in_handler);
    for (int round = 0; round < ROUNDS; round++) {
        eh_frame_for(cfi, 0x100000000000ull + (uint64_t)round * 4096);
        __register_frame(cfi);
        raise(SIGUSR1);
        __deregister_frame(cfi);
    }
    printf("in a handler: %d rounds\n", ROUNDS);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "handler") == 0) {
        in_handler();
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "register") == 0) {
        registering();
        return 0;
    }
    if (argc > 2 && strcmp(argv[1], "reload") == 0) {
        reload(argv[2]);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "threads") == 0) {
        threads();
        return 0;
    }
    fprintf(stderr, "usage: rt_jit_cfi register|reload PLUGIN|threads\n");
    return 2;
}
