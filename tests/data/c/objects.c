/* Test program for symbolization and data-object tests (crates/analysis/tests): functions with
 * known names, an inlined helper, and globals in .bss, .data and .rodata. Compiled by the tests
 * with gcc -O2 -g; nm, readelf and addr2line give the expected answers. */
#include <stdlib.h>

#define N 4096
double big_array[N];                       /* .bss */
double small_table[16] = {1.0, 2.0};       /* .data */
const char message[] = "spelunk-objects";  /* .rodata */

__attribute__((noinline)) double sum_array(const double *a, int n) {
    double s = 0;
    for (int i = 0; i < n; i++)
        s += a[i];
    return s;
}

__attribute__((noinline)) void fill(double *a, int n) {
    for (int i = 0; i < n; i++)
        a[i] = i * 0.5;
}

static inline int helper(int x) { return x * 3 + 1; }

__attribute__((noinline)) int uses_inline(int x) { return helper(x) + helper(x + 7); }

int main(int argc, char **argv) {
    (void)argv;
    fill(big_array, N);
    small_table[argc & 15] = sum_array(big_array, N);
    return uses_inline(argc) + message[0];
}
