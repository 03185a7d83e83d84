/*
 * Grows its heap in 1 MiB blocks (touched) to <high> MiB, shrinks it to
 * <low> MiB, grows it to <high> MiB again, and exits; a short pause after
 * each MiB lets a rate-limited watcher see each stage.
 *
 *   memory_hog <high_mib> <low_mib>
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *blocks[4096];

__attribute__((noinline)) static void grow_to(int *count, int target) {
    while (*count < target) {
        blocks[*count] = malloc(1 << 20);
        if (!blocks[*count]) exit(2);
        memset(blocks[*count], 1, 1 << 20);
        (*count)++;
        usleep(3000);
    }
}

static void shrink_to(int *count, int target) {
    while (*count > target) {
        free(blocks[--*count]);
        usleep(3000);
    }
}

int main(int argc, char **argv) {
    if (argc != 3) return 1;
    int high = atoi(argv[1]), low = atoi(argv[2]), count = 0;
    grow_to(&count, high);
    printf("first peak\n");
    fflush(stdout);
    shrink_to(&count, low);
    usleep(50000);
    grow_to(&count, high);
    printf("second peak\n");
    shrink_to(&count, 0);
    return 0;
}
