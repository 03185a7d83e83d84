/* Calls both plugins of names_plugin.c (linked, not dlopened). */
#include <stdio.h>
void plugin_a_run(void);
void plugin_b_run(void);
int main(void) {
    plugin_a_run();
    plugin_b_run();
    printf("a 2048000 b 4096000\n");
    return 0;
}
