/* tables_mapped BLOCKS BYTES [fork]
 *
 * Allocates BLOCKS blocks of BYTES bytes (kept until exit), then prints
 * "rule cache: mapped" or "rule cache: not mapped": whether the profiler's
 * shared unwind rule cache, one of the tables it makes at its first sample,
 * is among this process's mappings. With `fork`, it then forks a child that
 * allocates BLOCKS more blocks and prints "child pid=<pid> rule cache: ..."
 * and exits normally (its exit dump); the parent waits for it and prints
 * "parent rule cache: ...". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void *volatile escape;

static void allocate(long blocks, long bytes) {
    for (long i = 0; i < blocks; i++) {
        char *block = malloc(bytes);
        memset(block, 1, bytes);
        escape = block;
    }
}

static const char *rule_cache(void) {
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4096];
    int mapped = 0;
    while (maps && fgets(line, sizeof line, maps))
        mapped |= strstr(line, "heapsample-shared") != NULL;
    if (maps) fclose(maps);
    return mapped ? "mapped" : "not mapped";
}

int main(int argc, char **argv) {
    long blocks = argc > 1 ? atol(argv[1]) : 0;
    long bytes = argc > 2 ? atol(argv[2]) : 64;
    int forks = argc > 3 && strcmp(argv[3], "fork") == 0;
    allocate(blocks, bytes);
    if (!forks) {
        printf("rule cache: %s\n", rule_cache());
        return 0;
    }
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) return 2;
    if (child == 0) {
        allocate(blocks, bytes);
        printf("child pid=%d rule cache: %s\n", (int)getpid(), rule_cache());
        return 0;
    }
    int status;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 3;
    printf("parent rule cache: %s\n", rule_cache());
    return 0;
}
