/* Allocates <blocks> blocks of <bytes> bytes (kept until exit), then prints
 * "rule cache: mapped" or "rule cache: not mapped": whether the profiler's
 * shared unwind rule cache, one of the tables it makes at its first sample,
 * is among this process's mappings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *volatile escape;

int main(int argc, char **argv) {
    long blocks = argc > 1 ? atol(argv[1]) : 0;
    long bytes = argc > 2 ? atol(argv[2]) : 64;
    for (long i = 0; i < blocks; i++) {
        char *block = malloc(bytes);
        memset(block, 1, bytes);
        escape = block;
    }
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4096];
    int mapped = 0;
    while (maps && fgets(line, sizeof line, maps))
        mapped |= strstr(line, "heapsample-shared") != NULL;
    printf("rule cache: %s\n", mapped ? "mapped" : "not mapped");
    return 0;
}
