/* A small "server" with a memory leak, for the heapsample demo.
 *
 * Each request parses a header (short-lived buffers), renders a response
 * (freed after sending), and stores the response in a cache that is never
 * evicted: the leak. A session table grows and shrinks. Run it under the
 * shim and open the flamegraph: cache_store() dominates the live heap.
 *
 *   LD_PRELOAD=target/release/libheapsample.so PROF_CONF=prof_leak:true ./leaky_cache
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUESTS 200000

struct entry {
    struct entry *next;
    char *body;
};

static struct entry *cache[1024];
static void *sessions[4096];

__attribute__((noinline)) static char *parse_header(int request) {
    char *header = malloc(256);
    snprintf(header, 256, "GET /item/%d HTTP/1.1", request);
    return header;
}

__attribute__((noinline)) static char *render_response(const char *header, size_t size) {
    char *body = malloc(size);
    memset(body, 'x', size);
    memcpy(body, header, strlen(header));
    return body;
}

__attribute__((noinline)) static void cache_store(int request, const char *body, size_t size) {
    struct entry *e = malloc(sizeof *e);
    e->body = malloc(size);
    memcpy(e->body, body, size);
    e->next = cache[request % 1024];
    cache[request % 1024] = e; /* never evicted: the leak */
}

__attribute__((noinline)) static void touch_session(int request) {
    int slot = (request * 7919) % 4096;
    free(sessions[slot]);
    sessions[slot] = calloc(1, 512 + (request % 8) * 64);
}

__attribute__((noinline)) static void handle_request(int request) {
    char *header = parse_header(request);
    size_t size = 1024 + (size_t)(request % 16) * 256;
    char *body = render_response(header, size);
    if (request % 10 == 0)
        cache_store(request, body, size);
    touch_session(request);
    free(body);
    free(header);
}

int main(void) {
    for (int request = 0; request < REQUESTS; request++)
        handle_request(request);
    size_t cached = 0;
    for (int i = 0; i < 1024; i++)
        for (struct entry *e = cache[i]; e; e = e->next)
            cached++;
    printf("served %d requests, %zu responses cached\n", REQUESTS, cached);
    return 0;
}
