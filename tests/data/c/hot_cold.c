/* Test program for the footprint's access distribution (crates/cli/tests/nmo_views_emulated.rs):
 * a 64 KiB hot array (16 pages of 4 KiB) read 15 times and a 960 KiB cold array (240 pages)
 * read once, in main, one element per load. From the source: the hot array's 16 pages of the
 * 256 (6.25 % of the footprint) receive 15 x 8192 of the 2 x 122880 loads: 50 %; the cold
 * array is read in one ascending sweep, after the hot array. */
#include <stdio.h>

#define HOT (64 * 1024 / 8)
#define COLD (960 * 1024 / 8)
double hot[HOT] __attribute__((aligned(4096)));
double cold[COLD] __attribute__((aligned(4096)));

int main(void) {
    double s = 0;
    for (int r = 0; r < 15; r++)
        for (int i = 0; i < HOT; i++)
            s += hot[i];
    for (int i = 0; i < COLD; i++)
        s += cold[i];
    printf("%f\n", s);
    return 0;
}
