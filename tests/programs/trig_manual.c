/*
 * Manual dump C API test program (heapsample_dump / set_active / reset),
 * found with dlsym(RTLD_DEFAULT) as shim/include/heapsample.h advises.
 *
 * `trig_manual full` (run at lg_prof_sample:0), in order:
 *   phase_a: 1000 x malloc(100), kept          -> dump(NULL), dump("explicit.prof")
 *   dump("/nonexistent/dir/x.prof"); dump("ro/x.prof") into a mode 0555 dir;
 *   dump("explicit.prof/x.prof") (a file as directory); a 305-byte file name
 *   set_active(0); phase_b: 500 x malloc(200)  -> dump("inactive.prof")
 *   set_active(1); phase_c: 300 x malloc(300)  -> dump("active.prof")
 *   reset()                                    -> dump("reset.prof")
 *   phase_d: 200 x malloc(400)                 -> dump("reset2.prof")
 * then prints `rc <what>=<value>` for every call and `euid=<n>`. Nothing is
 * printed before the end (stdio's buffer would be a sampled allocation).
 *
 * `trig_manual rc`: prints `rc auto=<dump(NULL)> explicit=<dump("x.prof")>
 * set_active=<set_active(1)>` (for prof:false and an empty prof_prefix).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../shim/include/heapsample.h"

#define NOINLINE __attribute__((noinline, noclone))

typedef int (*dump_fn)(const char *);
typedef int (*set_active_fn)(int);
typedef void (*reset_fn)(void);

void *kept[4][1000];

NOINLINE void phase_a(void) { for (int i = 0; i < 1000; i++) kept[0][i] = malloc(100); }
NOINLINE void phase_b(void) { for (int i = 0; i < 500; i++) kept[1][i] = malloc(200); }
NOINLINE void phase_c(void) { for (int i = 0; i < 300; i++) kept[2][i] = malloc(300); }
NOINLINE void phase_d(void) { for (int i = 0; i < 200; i++) kept[3][i] = malloc(400); }

int main(int argc, char **argv) {
    dump_fn dump = (dump_fn)dlsym(RTLD_DEFAULT, "heapsample_dump");
    set_active_fn set_active = (set_active_fn)dlsym(RTLD_DEFAULT, "heapsample_set_active");
    reset_fn reset = (reset_fn)dlsym(RTLD_DEFAULT, "heapsample_reset");
    if (!dump || !set_active || !reset) {
        printf("api missing\n");
        return 3;
    }
    if (argc > 1 && strcmp(argv[1], "rc") == 0) {
        int a = dump(NULL), e = dump("x.prof"), s = set_active(1);
        printf("rc auto=%d explicit=%d set_active=%d\n", a, e, s);
        return 0;
    }
    mkdir("ro", 0555);
    chmod("ro", 0555);
    phase_a();
    int auto_rc = dump(NULL);
    int explicit_rc = dump("explicit.prof");
    int missing_rc = dump("/nonexistent/dir/x.prof");
    int ro_rc = dump("ro/x.prof");
    int notdir_rc = dump("explicit.prof/x.prof");
    static char long_name[400];
    memset(long_name, 'n', 300);
    strcpy(long_name + 300, ".prof");
    int toolong_rc = dump(long_name);
    int was_on = set_active(0);
    phase_b();
    int inactive_rc = dump("inactive.prof");
    int was_off = set_active(1);
    phase_c();
    int active_rc = dump("active.prof");
    reset();
    int reset_rc = dump("reset.prof");
    phase_d();
    int reset2_rc = dump("reset2.prof");
    printf("rc auto=%d explicit=%d missing=%d ro=%d notdir=%d toolong=%d was_on=%d inactive=%d was_off=%d "
           "active=%d reset=%d reset2=%d\n",
           auto_rc, explicit_rc, missing_rc, ro_rc, notdir_rc, toolong_rc, was_on, inactive_rc, was_off, active_rc,
           reset_rc, reset2_rc);
    printf("euid=%d\n", (int)geteuid());
    return 0;
}
