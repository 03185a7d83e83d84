// A C++ service for the viewer tests: a slow leak, a transient peak, two
// instantiations of one template, a deep call chain and two threads that
// share a name. Dumps are written by the program itself (heapsample_dump,
// found with dlsym) at the end of every round and at the top of the peak,
// so the series is the same on every run.
//
// ROUNDS rounds; in each:
// - Registry<Session>::add keeps 40 sessions of 4 KiB (the leak, 160 KiB a
//   round);
// - churn() allocates and frees small buffers (no live memory);
// - in round PEAK_ROUND, build_report() holds 24 MiB, dumps, frees it
//   (the peak);
// Before the first round Cache<int>::fill and Cache<double>::fill keep
// tables of 512 KiB and 1 MiB (two instantiations of one template),
// descend() keeps 256 KiB at the end of a 120-frame chain, and two threads
// named "pool" keep 256 KiB and 512 KiB from pool_work() (blocks this
// large are sampled on every run at lg_prof_sample:14).
// Prints its truth: "leak <bytes per round> rounds <n> peak <bytes>".
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define NOINLINE __attribute__((noinline))

static const int ROUNDS = 10;
static const int PEAK_ROUND = 4;

typedef int (*dump_fn)(const char *);
static dump_fn dump;

struct Session {
    char state[4096];
};

template <typename T>
struct Registry {
    std::vector<T *> items;
    NOINLINE void add(int n) {
        for (int i = 0; i < n; i++) {
            T *item = new T;
            memset(item, 1, 64);
            items.push_back(item);
        }
    }
};

template <typename T>
struct Cache {
    T *table = nullptr;
    NOINLINE void fill(size_t bytes) {
        table = static_cast<T *>(malloc(bytes));
        memset(table, 0, 64);
    }
};

static Registry<Session> &registry = *new Registry<Session>;
static Cache<int> ints;
static Cache<double> doubles;
void *volatile deep_block;
void *volatile pool_blocks[2];

NOINLINE void churn() {
    for (int i = 0; i < 256; i++) {
        char *p = static_cast<char *>(malloc(2048));
        p[0] = static_cast<char>(i);
        __asm__ volatile("" : : "r"(p) : "memory");
        free(p);
    }
}

NOINLINE void build_report() {
    std::vector<char *> blocks;
    for (int i = 0; i < 24; i++) {
        blocks.push_back(static_cast<char *>(malloc(1 << 20)));
        memset(blocks.back(), 2, 64);
    }
    if (dump) dump(nullptr);
    usleep(20 * 1000);
    for (char *b : blocks) free(b);
}

NOINLINE int descend(int depth) {
    if (depth == 0) {
        deep_block = malloc(256 * 1024);
        return 1;
    }
    int r = descend(depth - 1);
    __asm__ volatile("" : "+r"(r));
    return r + 1;
}

NOINLINE void *pool_work(void *arg) {
    long index = reinterpret_cast<long>(arg);
    pthread_setname_np(pthread_self(), "pool");
    pool_blocks[index] = malloc(index == 0 ? 256 * 1024 : 512 * 1024);
    return nullptr;
}

int main() {
    dump = reinterpret_cast<dump_fn>(dlsym(RTLD_DEFAULT, "heapsample_dump"));
    ints.fill(512 * 1024);
    doubles.fill(1024 * 1024);
    descend(120);
    pthread_t threads[2];
    for (long i = 0; i < 2; i++) pthread_create(&threads[i], nullptr, pool_work, reinterpret_cast<void *>(i));
    for (auto &t : threads) pthread_join(t, nullptr);
    for (int round = 0; round < ROUNDS; round++) {
        registry.add(40);
        churn();
        if (round == PEAK_ROUND) build_report();
        usleep(10 * 1000);
        if (dump) dump(nullptr);
    }
    std::printf("leak %d rounds %d peak %d\n", 40 * 4096, ROUNDS, 24 << 20);
    return 0;
}
