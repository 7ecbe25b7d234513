/* transpose: an out-of-place transpose of an N x N matrix of doubles.
 *
 * Problem: the naive double loop b[j][i] = a[i][j]: reads of `a` are unit-stride, but the
 *   stores to `b` are N * 8 bytes apart (16 KiB at the default size): every store touches a new
 *   line (and a new 4 KiB page), and a line of `b` receives one 8-byte value per visit, so it
 *   is fetched, written once and evicted up to 8 times before it is complete.
 * Fix (-DFIXED): the tiled (blocked) transpose: 32 x 32 tiles (8 KiB of `a` and 8 KiB of `b`, both
 *   in L1), so each line of `b` is filled whole while it stays in the cache.
 * Advisor class: `traversal` (tile). The evidence: the store PC's sample deltas near multiples
 *   of 16 KiB (N * 8), the load PC unit-stride; Neoverse N1 store samples carry no latency or
 *   data source, so the cost shows as latency on the load beside the store (store-buffer
 *   back-pressure), not on the strided store itself.
 * What a user sees: a transpose several times slower than a copy of the same size.
 *
 *   transpose [N] [PASSES]      (defaults N = 2048, 32 MiB per matrix; 2 passes)
 */
#include "fixes.h"

#define TILE 32

int main(int argc, char **argv)
{
   long n = fx_arg(argc, argv, 1, 2048), passes = fx_arg(argc, argv, 2, 2), i, j, p;
   double *a = aligned_alloc(64, n * n * sizeof *a), *b = aligned_alloc(64, n * n * sizeof *b);
   double sum = 0, t0;
   if (!a || !b)
      return 1;
   for (i = 0; i < n * n; i++) {
      a[i] = (double)(i % 1021);
      b[i] = 0;
   }
   t0 = fx_now_ms();
   for (p = 0; p < passes; p++) {
#if defined(FIXED)
      long ii, jj;
      for (ii = 0; ii < n; ii += TILE)
         for (jj = 0; jj < n; jj += TILE)
            for (i = ii; i < ii + TILE && i < n; i++)
               for (j = jj; j < jj + TILE && j < n; j++)
                  b[j * n + i] = a[i * n + j];
#else
      for (i = 0; i < n; i++)
         for (j = 0; j < n; j++)
            b[j * n + i] = a[i * n + j]; /* advise: traversal */
#endif
      a[p] += 1; /* each pass has something new to move */
   }
   for (i = 0; i < n * n; i += 97)
      sum += b[i];
   fx_report("transpose", (uint64_t)sum, fx_now_ms() - t0);
   return 0;
}
