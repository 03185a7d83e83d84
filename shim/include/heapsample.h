/* heapsample: control the heap profiler from the profiled program.
 *
 * These functions are exported by libheapsample.so. A program that is not
 * linked against it (the usual case: the shim is loaded with LD_PRELOAD only
 * when profiling) should look them up at run time, so it also runs without
 * the shim:
 *
 *     #include <dlfcn.h>
 *     int (*dump)(const char *) =
 *         (int (*)(const char *))dlsym(RTLD_DEFAULT, "heapsample_dump");
 *     if (dump)
 *         dump(NULL);
 *
 * (link with -ldl on glibc older than 2.34). A program that always runs
 * under the shim may instead link with -lheapsample and call them directly.
 */
#ifndef HEAPSAMPLE_H
#define HEAPSAMPLE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Write a heap profile now, from the calling thread.
 * path: the file to write, or NULL for the automatic name
 *       <prof_prefix>.<pid>.<seq>.m<mseq>.prof.
 * The file is written to a temporary name and renamed into place.
 * Returns 0, or an errno value: e.g. EACCES or ENOENT for an unwritable
 * path, ENOSPC for a full disk, ENOTSUP when profiling is off (prof:false),
 * EINVAL for NULL with an empty prof_prefix, ECANCELED once the process is
 * exiting (after the exit dump no dump may start). */
int heapsample_dump(const char *path);

/* Turn sampling on (on != 0) or off, like jemalloc's prof.active. Exact
 * counters keep running while sampling is off.
 * Returns the previous setting (1 or 0), or -1 when profiling is off. */
int heapsample_set_active(int on);

/* Forget every sample taken so far: later dumps show only what is sampled
 * from now on. Exact process-wide counters are kept. */
void heapsample_reset(void);

#ifdef __cplusplus
}
#endif

#endif /* HEAPSAMPLE_H */
