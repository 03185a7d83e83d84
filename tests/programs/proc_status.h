/*
 * Helper of the test programs (included, not compiled alone).
 *
 * status_kb(key): the value in kB of a `<key>:` line of /proc/self/status
 * (VmRSS, VmHWM, ...), or -1.
 */
#ifndef PROC_STATUS_H
#define PROC_STATUS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long value = -1;
    size_t n = strlen(key);
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':')
            value = strtol(line + n + 1, NULL, 10);
    fclose(f);
    return value;
}

#endif
