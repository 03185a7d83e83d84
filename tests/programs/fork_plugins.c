/*
 * Sibling processes that load different objects at the same address after
 * the fork:
 *
 *   fork_plugins dlopen|dlmopen <plugin_a.so> <plugin_b.so>
 *
 * The parent forks one child per plugin, one after the other; each child
 * loads its plugin (with dlopen, or with dlmopen into the base namespace,
 * which no interposed dlopen sees, as glibc's own loads of NSS or iconv
 * modules), prints "fork_plugins: child=<i> pid=<pid>
 * plugin_alloc=<address>" on stderr and allocates 200 blocks through
 * plugin_alloc → leaf_site, then exits.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef void *(*plugin_alloc_fn)(void *(*)(size_t), size_t);

void *volatile escape;

__attribute__((noinline)) void *leaf_site(size_t size) {
    void *block = malloc(size);
    escape = block;
    return block;
}

__attribute__((noinline)) static int child_work(int index, int namespaced, const char *path) {
    void *plugin = namespaced ? dlmopen(LM_ID_BASE, path, RTLD_NOW) : dlopen(path, RTLD_NOW);
    if (!plugin) {
        fprintf(stderr, "fork_plugins: dlopen %s: %s\n", path, dlerror());
        return 1;
    }
    plugin_alloc_fn alloc = (plugin_alloc_fn)dlsym(plugin, "plugin_alloc");
    fprintf(stderr, "fork_plugins: child=%d pid=%d plugin_alloc=%p\n", index, (int)getpid(),
            (void *)alloc);
    for (int i = 0; i < 200; i++) free(alloc(leaf_site, 64 + i));
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4 || (strcmp(argv[1], "dlopen") != 0 && strcmp(argv[1], "dlmopen") != 0)) {
        fprintf(stderr, "usage: fork_plugins dlopen|dlmopen <plugin_a.so> <plugin_b.so>\n");
        return 2;
    }
    int namespaced = strcmp(argv[1], "dlmopen") == 0;
    for (int i = 0; i < 2; i++) {
        pid_t pid = fork();
        if (pid == 0) exit(child_work(i, namespaced, argv[2 + i]));
        int status = 0;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return 1;
    }
    return 0;
}
