/* branch_mispredict: a filter whose branch depends on random data.
 *
 * Problem: copy the bytes >= 128 of a random buffer to an output (stream compaction):
 *   `if (v >= 128) out[k++] = v;` -- taken half the time at random, so the predictor is wrong
 *   on about half the iterations, each costing a pipeline refill (~11 cycles on Neoverse N1,
 *   ~15-20 on the x86 test machine). The compiler keeps the branch (the store is conditional).
 * Fix (-DFIXED): branchless: always store, advance the output index by the comparison's result
 *   (`out[k] = v; k += v >= 128;`).
 * Advisor class: `branch-mispredict`. The evidence: the conditional branch's samples with the
 *   mispredicted event on ~50 % of them; memory latency of the loop's load at the L1 level
 *   (the buffer, 1 MiB, is streamed and prefetched); after the fix no mispredicted branch in
 *   the loop.
 * What a user sees: a simple filter loop whose time depends on the data's order (sorted data
 *   would be fast).
 *
 *   branch_mispredict [BYTES] [PASSES]    (defaults 1 MiB, 20 passes)
 */
#include "fixes.h"

int main(int argc, char **argv)
{
   long n = fx_arg(argc, argv, 1, 1L << 20), passes = fx_arg(argc, argv, 2, 20), i, p, k = 0;
   unsigned char *in = malloc(n), *out = malloc(n + 1);
   uint64_t rng = 9, sum = 0;
   double t0;
   if (!in || !out)
      return 1;
   for (i = 0; i < n; i += 8) {
      uint64_t r = fx_rand(&rng);
      for (p = 0; p < 8 && i + p < n; p++)
         in[i + p] = (unsigned char)(r >> (8 * p));
   }
   t0 = fx_now_ms();
   for (p = 0; p < passes; p++) {
      k = 0;
      for (i = 0; i < n; i++) {
         unsigned char v = in[i];
#if defined(FIXED)
         out[k] = v;
         k += v >= 128;
#else
         if (v >= 128) /* advise: branch-mispredict */
            out[k++] = v;
#endif
      }
      sum += (uint64_t)k + out[k / 2];
   }
   fx_report("branch_mispredict", sum, fx_now_ms() - t0);
   return 0;
}
