/* A program with its allocator linked in: it defines malloc, free, calloc
 * and realloc itself (a bump allocator over one static arena). It echoes
 * each line of its input and exits at "end". */
#include <stdio.h>
#include <string.h>

static char arena[64 << 20];
static size_t used;

void *malloc(size_t size) {
    size_t start = (used + 15) & ~(size_t)15;
    if (start + size + 16 > sizeof arena) return NULL;
    used = start + size + 16;
    *(size_t *)(arena + start) = size;
    return arena + start + 16;
}
void free(void *p) { (void)p; }
void *calloc(size_t n, size_t size) {
    void *p = malloc(n * size);
    if (p) memset(p, 0, n * size);
    return p;
}
void *realloc(void *old, size_t size) {
    void *p = malloc(size);
    if (p && old) memcpy(p, old, *(size_t *)((char *)old - 16) < size ? *(size_t *)((char *)old - 16) : size);
    return p;
}

int main(void) {
    char line[128];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "end", 3) == 0) return 0;
        fputs(line, stdout);
        fflush(stdout);
    }
    return 1;
}
