/* A static aarch64 workload whose retired-instruction count is known by hand:
 * the loop body is `subs x0, x0, #1; b.ne 1b`, 2 instructions per iteration,
 * so LOOPS iterations retire 2 * LOOPS instructions plus a small fixed start-up
 * and exit cost (well under 0.1 % of the total for LOOPS = 50,000,000). */
#define LOOPS 50000000UL
int main(void) {
  unsigned long n = LOOPS;
  __asm__ volatile("1: subs %0, %0, #1\n\tb.ne 1b\n" : "+r"(n) : : "cc");
  return 0;
}
