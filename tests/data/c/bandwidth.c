/* Test program for `spelunk estimate` (crates/cli/tests/estimate_cli.rs): frd() reads 4-byte
 * ints in an unrolled loop like lmbench's bw_mem frd ([SPE methodology figure 4.10]); mixed() reads
 * 8-byte and 1-byte values. volatile keeps each element a separate scalar load. */
#include <stddef.h>

#define N (1 << 16)
int ints[N];
long longs[N];
char chars[N];

__attribute__((noinline)) int frd(const volatile int *p, size_t n) {
    int sum = 0;
    for (size_t i = 0; i + 4 <= n; i += 4)
        sum += p[i] + p[i + 1] + p[i + 2] + p[i + 3];
    return sum;
}

__attribute__((noinline)) long mixed(const volatile long *q, const volatile char *c, size_t n) {
    long sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += q[i] + c[i];
    return sum;
}

int main(void) {
    return frd(ints, N) + (int)mixed(longs, chars, N);
}
