/* A C program leaking through the C library under two of its own
 * functions, for the program-frame tests: remember_line keeps the buffer
 * getline(3) allocates, intern_name a strdup(3) copy. 120 ticks, 2 ms
 * apart, so the leak's births spread over the run; nothing is freed. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static char *lines[4096];
static char *names[4096];
static int kept_lines, kept_names;

NOINLINE static void remember_line(FILE *input) {
    char *line = NULL;
    size_t capacity = 0;
    if (getline(&line, &capacity, input) > 0)
        lines[kept_lines++] = line;
    else
        free(line);
}

NOINLINE static void intern_name(int i) {
    char name[256];
    snprintf(name, sizeof name, "%0200d", i);
    names[kept_names++] = strdup(name);
}

int main(void) {
    static char text[1 << 16];
    for (size_t i = 0; i + 1 < sizeof text; i++)
        text[i] = (i % 150 == 149) ? '\n' : 'a' + i % 26;
    FILE *input = fmemopen(text, strlen(text), "r");
    for (int tick = 0; tick < 120; tick++) {
        remember_line(input);
        intern_name(tick);
        usleep(2000);
    }
    size_t bytes = 0;
    for (int i = 0; i < kept_names; i++) bytes += strlen(names[i]) + strlen(lines[i]);
    printf("lines %d names %d bytes %zu\n", kept_lines, kept_names, bytes);
    return 0;
}
