/* Keeps 2,000 blocks of 4 KiB allocated through one function of its own
 * until it exits: the exit dump's stacks name remember_order, which only
 * this executable's own symbols and line tables can name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static char *remember_order(int i) {
    char *block = malloc(4096);
    memset(block, i, 4096);
    return block;
}

int main(void) {
    static char *kept[2000];
    for (int i = 0; i < 2000; i++)
        kept[i] = remember_order(i);
    printf("%d\n", kept[1999][0]);
    return 0;
}
