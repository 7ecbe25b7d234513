/* store_forward: a reduction carried through memory, a loop-carried store-to-load dependency.
 *
 * Problem: `accumulate(volatile long *total, const long *v, n)` adds n values into *total, a
 *   shared statistics word declared volatile (as code that other threads or a signal handler
 *   may read often is), so the compiler must load *total, add and store it back on every
 *   iteration: each iteration's load reads the address the previous iteration's store wrote,
 *   and waits for that store's data (store-to-load forwarding, ~4-5 cycles on current cores,
 *   more when forwarding fails) instead of adding in a register (1 cycle). (Without volatile,
 *   GCC -O2 keeps the sum in a register and stores it every iteration: no dependency.)
 * Fix (-DFIXED): accumulate in a local variable and store it once at the end.
 * Advisor class: `store-forwarding` (loads waiting on a recent store to the same address). The
 *   evidence: one load PC and one store PC on the same address in every sample (address delta
 *   0 between consecutive samples of the PC), the load's data source L1 with a total latency
 *   above the L1 hit latency; the input loads unit-stride and L1-resident.
 * What a user sees: a sum over data in L1 running at one element per 5 or so cycles.
 *
 *   store_forward [N] [PASSES]    (defaults 4096 values = 32 KiB, 20,000 passes)
 */
#include "fixes.h"

__attribute__((noinline)) static void accumulate(volatile long *total, const long *v, long n)
{
   long i;
#if defined(FIXED)
   long t = *total;
   for (i = 0; i < n; i++)
      t += v[i];
   *total = t;
#else
   for (i = 0; i < n; i++)
      *total += v[i]; /* advise: store-forwarding */
#endif
}

int main(int argc, char **argv)
{
   long n = fx_arg(argc, argv, 1, 4096), passes = fx_arg(argc, argv, 2, 20000), i, p;
   long *v = aligned_alloc(64, (n + 8) * sizeof *v);
   uint64_t rng = 5;
   double t0;
   if (!v)
      return 1;
   for (i = 0; i < n; i++)
      v[i] = (long)(fx_rand(&rng) & 0xffff);
   v[n] = 0; /* the total sits just after the values, in the same array */
   t0 = fx_now_ms();
   for (p = 0; p < passes; p++)
      accumulate(&v[n], v, n);
   fx_report("store_forward", (uint64_t)v[n], fx_now_ms() - t0);
   return 0;
}
