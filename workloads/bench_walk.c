/* bench_walk: the program pair of `spelunk bench`'s tests (crates/cli/tests/bench_cli.rs;
 * docs/bench.md). walk() makes the same number of loads over a global table of 4 MiB in both
 * builds; bench_walk reads it in order (8-byte stride: one new 64-byte line every 8 loads),
 * bench_walk_strided (-DSTRIDE=8) jumps a line at every load, so each load needs a new line:
 * the same instructions, several times the L1D refills. Usage: bench_walk [ACCESSES]
 * (default 1048576). Written for this project. */
#include <stdio.h>
#include <stdlib.h>

#ifndef STRIDE
#define STRIDE 1
#endif

#define TABLE_LONGS (1u << 19) /* 4 MiB of longs: past a Neoverse N1's 1 MiB L2 */

long table[TABLE_LONGS];

__attribute__((noinline)) static long walk(unsigned long accesses)
{
    long sum = 0;
    for (unsigned long k = 0; k < accesses; k++)
        sum += table[(k * STRIDE) & (TABLE_LONGS - 1)]; // LINE:walk-load
    return sum;
}

__attribute__((noinline)) static void fill(void)
{
    for (unsigned long i = 0; i < TABLE_LONGS; i++)
        table[i] = (long)(i ^ (i >> 3));
}

int main(int argc, char **argv)
{
    unsigned long accesses = argc > 1 ? strtoul(argv[1], NULL, 0) : 1ul << 20;
    fill();
    printf("%ld\n", walk(accesses));
    return 0;
}
