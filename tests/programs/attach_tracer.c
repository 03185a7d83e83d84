/* Traces another process (PTRACE_SEIZE, which does not stop it), prints
 * "tracing", and keeps tracing until its input ends.
 * Usage: attach_tracer PID */
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>

int main(int argc, char **argv) {
    if (argc != 2 || ptrace(PTRACE_SEIZE, atoi(argv[1]), 0, 0) != 0) {
        perror("PTRACE_SEIZE");
        return 1;
    }
    puts("tracing");
    fflush(stdout);
    while (getchar() != EOF) {
    }
    return 0;
}
