/* bandwidth: three streaming passes over arrays much larger than the caches, that one pass can do.
 *
 * Problem: b[i] = 2 a[i]; then c[i] = b[i] + a[i]; then sum += c[i] -- three loops, each
 *   streaming its arrays from memory: a is read twice, b written and read back, c written and
 *   read back: 8 array-sized transfers (writes count twice: the line is read for ownership,
 *   then written back). Each loop runs at the memory's bandwidth; a prefetch cannot help.
 * Fix (-DFIXED): the three loops fused into one: a read once, b and c written once: 5 transfers,
 *   8/5 = 1.6x less traffic.
 * Advisor class: `bandwidth` (streaming at the memory's bandwidth: reduce traffic, fuse loops,
 *   non-temporal stores). The evidence: several loops, each unit-stride (address delta = element
 *   size), every PC's lines served by DRAM or prefetched (late-prefetch hits, L2/LLC refills),
 *   the same arrays (objects) read by more than one loop.
 * What a user sees: simple loops, each at the machine's streaming bandwidth, adding up.
 *
 *   bandwidth [ELEMENTS] [PASSES]     (defaults 4,194,304 doubles = 32 MiB per array; 3 passes)
 */
#include "fixes.h"

int main(int argc, char **argv)
{
   long n = fx_arg(argc, argv, 1, 4194304), passes = fx_arg(argc, argv, 2, 3), i, p;
   double *a = aligned_alloc(64, n * sizeof *a), *b = aligned_alloc(64, n * sizeof *b);
   double *c = aligned_alloc(64, n * sizeof *c), sum = 0, t0;
   if (!a || !b || !c)
      return 1;
   for (i = 0; i < n; i++)
      a[i] = (double)(i & 1023);
   t0 = fx_now_ms();
   for (p = 0; p < passes; p++) {
#if defined(FIXED)
      for (i = 0; i < n; i++) {
         b[i] = 2 * a[i];
         c[i] = b[i] + a[i];
         sum += c[i];
      }
#else
      for (i = 0; i < n; i++)
         b[i] = 2 * a[i]; /* advise: bandwidth */
      for (i = 0; i < n; i++)
         c[i] = b[i] + a[i]; /* advise: bandwidth */
      for (i = 0; i < n; i++)
         sum += c[i]; /* advise: bandwidth */
#endif
   }
   fx_report("bandwidth", (uint64_t)sum + (uint64_t)b[n / 2] + (uint64_t)c[n - 1], fx_now_ms() - t0);
   return 0;
}
