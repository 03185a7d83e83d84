/*
 * Four allocation sites with different lives, for the time views (lifetimes,
 * temporary allocations, the age of live memory, leak/cache/start-up):
 *
 *   site_startup    a table allocated at start-up and kept to the end;
 *   site_temporary  short-lived temporaries, freed right after their use;
 *   site_cache      a bounded cache: entries inserted every tick, the oldest
 *                   evicted once it is full (fills, then plateaus);
 *   site_leak       a slow leak: a few objects every tick, never freed.
 *
 * Every site is a noinline function. The program reads CLOCK_MONOTONIC at
 * each allocation and free (the profiler's clock) and prints its truth:
 *
 *   clock start=NS end=NS                 the program's first and last reads
 *   phase <name> begin=NS end=NS          when each phase ran
 *   tick <i> begin=NS end=NS              when each tick's allocations ran
 *   freed <site> <bucket> <objects> <bytes> <ambiguous>
 *       the freed objects of a site whose lifetime fell in the lifetime
 *       bucket (bucket 0: under 1 µs, k: [2^(k-1), 2^k) µs, 35: 2^34 µs
 *       and more); <ambiguous> of them lived within 5 % of a bucket edge,
 *       where the profiler's own clock reads may put them in the next one;
 *   live <site> <birth_ns> <size>         one line per object live at exit,
 *       born at <birth_ns> on CLOCK_MONOTONIC;
 *   sizes <site> <size>x<count> ...       sizes of everything a site
 *       allocated (the sampling variance of any estimate follows from them).
 *
 * Phases are separated by pauses of at least 5 ms, so a time range that
 * starts and ends inside a pause selects whole phases whatever the clock
 * reads of the profiler.
 *
 * Usage: time_sites [ticks] [tick_us]   (default 40 ticks of 2800 µs: cache entries
 * live about 11.5 ms, inside the lifetime bucket [8.2, 16.4) ms)
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline, noclone))
#define BUCKETS 36
#define MAX_SIZES 16
#define STARTUP_OBJECTS 256
#define STARTUP_SIZE 4096
#define TEMPORARIES_PER_TICK 200
#define CACHE_CAPACITY 96
#define CACHE_INSERTS_PER_TICK 24
#define CACHE_SIZE 1024
#define LEAKS_PER_TICK 6
#define LEAK_SIZE 2048
#define MAX_TICKS 4096

struct site {
    const char *name;
    unsigned long freed_objects[BUCKETS], freed_bytes[BUCKETS], ambiguous[BUCKETS];
    size_t size[MAX_SIZES];
    unsigned long count[MAX_SIZES];
    int sizes;
};

struct object {
    void *pointer;
    size_t size;
    uint64_t birth;
};

static struct site startup = {.name = "site_startup"}, temporary = {.name = "site_temporary"},
                   cache = {.name = "site_cache"}, leak = {.name = "site_leak"};
static volatile unsigned long sink;

static uint64_t now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void pause_us(long us) {
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&t, &t) != 0) {
    }
}

static int bucket_of(uint64_t ns) {
    uint64_t us = ns / 1000;
    int bits = 0;
    while (us) {
        bits++;
        us >>= 1;
    }
    return bits < BUCKETS ? bits : BUCKETS - 1;
}

/* Within 5 % of the edge of its bucket (or of the 1 µs edge). */
static int near_edge(uint64_t ns) {
    int b = bucket_of(ns);
    uint64_t low = b == 0 ? 0 : 1000ull << (b - 1);
    uint64_t high = b >= BUCKETS - 1 ? UINT64_MAX : 1000ull << b;
    return (b > 0 && ns < low + low / 20) || (high != UINT64_MAX && ns + high / 20 >= high);
}

static void allocated(struct site *s, size_t size) {
    for (int i = 0; i < s->sizes; i++) {
        if (s->size[i] == size) {
            s->count[i]++;
            return;
        }
    }
    if (s->sizes == MAX_SIZES) {
        fprintf(stderr, "too many sizes\n");
        exit(2);
    }
    s->size[s->sizes] = size;
    s->count[s->sizes++] = 1;
}

static struct object make(struct site *s, size_t size) {
    struct object o;
    o.birth = now();
    o.pointer = malloc(size);
    if (!o.pointer) {
        perror("malloc");
        exit(2);
    }
    memset(o.pointer, 0x5a, size);
    o.size = size;
    allocated(s, size);
    return o;
}

static void release(struct site *s, struct object *o) {
    free(o->pointer);
    uint64_t lifetime = now() - o->birth;
    int b = bucket_of(lifetime);
    s->freed_objects[b]++;
    s->freed_bytes[b] += o->size;
    s->ambiguous[b] += near_edge(lifetime);
    o->pointer = NULL;
}

static struct object table[STARTUP_OBJECTS];
static struct object ring[CACHE_CAPACITY];
static struct object leaked[MAX_TICKS * LEAKS_PER_TICK];
static int ring_next, ring_used, leaked_used;

NOINLINE static void site_startup(void) {
    for (int i = 0; i < STARTUP_OBJECTS; i++)
        table[i] = make(&startup, STARTUP_SIZE);
}

NOINLINE static void site_temporary(int tick) {
    for (int i = 0; i < TEMPORARIES_PER_TICK; i++) {
        struct object o = make(&temporary, 64 + 64 * ((size_t)(i + tick) % 8));
        sink += ((unsigned char *)o.pointer)[o.size - 1];
        release(&temporary, &o);
    }
}

NOINLINE static void site_cache(void) {
    for (int i = 0; i < CACHE_INSERTS_PER_TICK; i++) {
        if (ring_used == CACHE_CAPACITY)
            release(&cache, &ring[ring_next]);
        else
            ring_used++;
        ring[ring_next] = make(&cache, CACHE_SIZE);
        ring_next = (ring_next + 1) % CACHE_CAPACITY;
    }
}

NOINLINE static void site_leak(void) {
    for (int i = 0; i < LEAKS_PER_TICK; i++)
        leaked[leaked_used++] = make(&leak, LEAK_SIZE);
}

static void print_site(const struct site *s) {
    for (int b = 0; b < BUCKETS; b++) {
        if (s->freed_objects[b])
            printf("freed %s %d %lu %lu %lu\n", s->name, b, s->freed_objects[b], s->freed_bytes[b],
                   s->ambiguous[b]);
    }
    printf("sizes %s", s->name);
    for (int i = 0; i < s->sizes; i++)
        printf(" %zux%lu", s->size[i], s->count[i]);
    printf("\n");
}

static void print_live(const struct site *s, const struct object *objects, int n) {
    for (int i = 0; i < n; i++) {
        if (objects[i].pointer)
            printf("live %s %llu %zu\n", s->name, (unsigned long long)objects[i].birth,
                   objects[i].size);
    }
}

int main(int argc, char **argv) {
    int ticks = argc > 1 ? atoi(argv[1]) : 40;
    long tick_us = argc > 2 ? atol(argv[2]) : 2800;
    if (ticks < 1 || ticks > MAX_TICKS || tick_us < 0) {
        fprintf(stderr, "usage: time_sites [ticks 1..%d] [tick_us]\n", MAX_TICKS);
        return 2;
    }
    uint64_t start = now();
    pause_us(5000);
    uint64_t begin = now();
    site_startup();
    uint64_t end = now();
    printf("phase startup begin=%llu end=%llu\n", (unsigned long long)begin,
           (unsigned long long)end);
    pause_us(5000);
    begin = now();
    static uint64_t tick_begin[MAX_TICKS], tick_end[MAX_TICKS];
    for (int tick = 0; tick < ticks; tick++) {
        tick_begin[tick] = now();
        site_temporary(tick);
        site_cache();
        site_leak();
        tick_end[tick] = now();
        pause_us(tick_us);
    }
    end = now();
    for (int tick = 0; tick < ticks; tick++)
        printf("tick %d begin=%llu end=%llu\n", tick, (unsigned long long)tick_begin[tick],
               (unsigned long long)tick_end[tick]);
    printf("phase ticks begin=%llu end=%llu\n", (unsigned long long)begin,
           (unsigned long long)end);
    pause_us(5000);
    print_site(&startup);
    print_site(&temporary);
    print_site(&cache);
    print_site(&leak);
    print_live(&startup, table, STARTUP_OBJECTS);
    print_live(&cache, ring, CACHE_CAPACITY);
    print_live(&leak, leaked, leaked_used);
    printf("clock start=%llu end=%llu\n", (unsigned long long)start, (unsigned long long)now());
    fflush(stdout);
    return 0;
}
