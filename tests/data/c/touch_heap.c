/* Test program for `spelunk record --no-spe` (crates/cli/tests/timelines_cli.rs): allocates
 * MIB mebibytes with malloc, writes every byte (so every page is resident), prints one line,
 * sleeps 300 ms with the memory held, and exits with status 3 (to check that the status passes
 * through). Usage: touch_heap MIB */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 64;
    volatile char *p = malloc(mib << 20);
    if (!p)
        return 2;
    memset((char *)p, 1, mib << 20);
    printf("touched %zu MiB\n", mib);
    fflush(stdout);
    struct timespec t = {0, 300 * 1000 * 1000};
    while (nanosleep(&t, &t) != 0)
        ;
    return p[(mib << 20) - 1] == 1 ? 3 : 4;
}
