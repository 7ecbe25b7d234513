/* interchange: a row-major matrix summed column by column.
 *
 * Problem: `a` is ROWS x COLS doubles stored row by row (C order); the reduction's outer loop
 *   runs over columns and its inner loop over rows, so consecutive loads are COLS * 8 bytes
 *   apart (16 KiB at the default size: a new line and a new 4 KiB page every load) and each
 *   line is fetched once per column it holds (8 times) unless it survives in the cache for the
 *   8 columns -- a column's lines (2048 x 64 B = 128 KiB) do not fit in a 64 KiB L1.
 * Fix (-DFIXED): loop interchange -- rows outside, columns inside: unit stride, every line
 *   used whole, the hardware stream prefetcher follows.
 * Advisor class: `traversal` (strided or column-order access: interchange or tile). The
 *   evidence: one load PC whose consecutive samples differ by multiples of a large stride (COLS
 *   * 8 bytes = 16 KiB, give or take the few elements the walk moved between columns), L1
 *   refills on nearly every sample; the fix is the loop order, read from the stride.
 * What a user sees: a simple sum running several times slower than memory bandwidth allows.
 *
 *   interchange [N] [PASSES]      (defaults N = 2048: a 2048 x 2048 matrix, 32 MiB; 3 passes)
 */
#include "fixes.h"

int main(int argc, char **argv)
{
   long n = fx_arg(argc, argv, 1, 2048), passes = fx_arg(argc, argv, 2, 3), i, j, p;
   double *a = aligned_alloc(64, n * n * sizeof *a), sum = 0, t0;
   if (!a)
      return 1;
   for (i = 0; i < n * n; i++)
      a[i] = (double)(i & 255);
   t0 = fx_now_ms();
   for (p = 0; p < passes; p++) {
#if defined(FIXED)
      for (i = 0; i < n; i++)
         for (j = 0; j < n; j++)
            sum += a[i * n + j];
#else
      for (j = 0; j < n; j++)
         for (i = 0; i < n; i++)
            sum += a[i * n + j]; /* advise: traversal */
#endif
   }
   fx_report("interchange", (uint64_t)sum, fx_now_ms() - t0);
   return 0;
}
