/* stencil_vertical: a vertical (y-direction) 5-tap filter over an image, y as the inner loop.
 *
 * Problem: out[y][x] = (in[y-2][x] + 2 in[y-1][x] + 3 in[y][x] + 2 in[y+1][x] + in[y+2][x]) / 9
 *   over a WIDTH x HEIGHT float image stored row by row; the loops run x outside, y inside, so
 *   the five loads and the store of consecutive iterations are one row (WIDTH * 4 bytes, 16 KiB
 *   by default) apart: each touches a new line, and a column's lines (HEIGHT x 64 B = 128 KiB)
 *   do not stay in a 64 KiB L1 for the next 15 columns of the same lines.
 * Fix (-DFIXED): y outside, x inside (the same arithmetic, loops interchanged): unit stride for
 *   the five input rows and the output row, lines used whole.
 * Advisor class: `traversal`. The evidence: six memory PCs of one loop whose sample deltas are
 *   near multiples of the row stride (WIDTH * 4 bytes), the taps' loads WIDTH * 4 bytes apart
 *   from each other, L1 refills on the leading tap's samples; the fix is the loop order.
 * What a user sees: a blur that is slow in one direction only.
 *
 *   stencil_vertical [WIDTH] [HEIGHT] [PASSES]   (defaults 4096 x 2048 floats, 32 MiB each; 1 pass)
 */
#include "fixes.h"

int main(int argc, char **argv)
{
   long w = fx_arg(argc, argv, 1, 4096), h = fx_arg(argc, argv, 2, 2048);
   long passes = fx_arg(argc, argv, 3, 1), x, y, p;
   float *in = aligned_alloc(64, w * h * sizeof *in), *out = aligned_alloc(64, w * h * sizeof *out);
   double sum = 0, t0;
   if (!in || !out)
      return 1;
   for (x = 0; x < w * h; x++) {
      in[x] = (float)(x & 1023);
      out[x] = 0;
   }
   t0 = fx_now_ms();
   for (p = 0; p < passes; p++) {
#if defined(FIXED)
      for (y = 2; y < h - 2; y++)
         for (x = 0; x < w; x++)
#else
      for (x = 0; x < w; x++)
         for (y = 2; y < h - 2; y++)
#endif
            out[y * w + x] = (in[(y - 2) * w + x] + 2 * in[(y - 1) * w + x] + 3 * in[y * w + x] + /* advise: traversal */
                              2 * in[(y + 1) * w + x] + in[(y + 2) * w + x]) * /* advise: traversal */
                             (1.0f / 9); /* advise: traversal */
   }
   for (x = 0; x < w * h; x += 61)
      sum += out[x];
   fx_report("stencil_vertical", (uint64_t)sum, fx_now_ms() - t0);
   return 0;
}
