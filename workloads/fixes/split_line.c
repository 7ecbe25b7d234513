/* split_line: 16-byte loads that straddle two cache lines.
 *
 * Problem: a message buffer holds a 56-byte header followed by 64-byte records, each starting
 *   with a 16-byte key (two uint64_t) that the hot loop loads with one 16-byte vector load
 *   (SSE `movdqu` on x86-64, `ldr q` on Arm). The buffer is 64-byte aligned, so every record
 *   starts at byte 56 of a line and every key load crosses into the next line: two line
 *   look-ups per load (and, on x86, a split-load penalty).
 * Fix (-DFIXED): the header padded to 64 bytes, so the records (and their keys) are 64-byte
 *   aligned and each key load reads one line.
 * Advisor class: `split-line` (accesses crossing a cache line). The evidence: the key loads'
 *   samples at line offset 56 with a 16-byte access (offset + size > 64) on every sample (and,
 *   where the core reports it, the alignment event); offset 0 after the fix. The records (32 KiB by default) stay in
 *   L1, so cache misses do not hide the effect.
 * What a user sees: an L1-resident loop slower than its instruction count suggests.
 *
 *   split_line [RECORDS] [PASSES]     (defaults 512 records = 32 KiB, 300,000 passes)
 */
#include <emmintrin.h>
#include <string.h>
#include "fixes.h"

#if defined(FIXED)
#define HEADER 64
#else
#define HEADER 56
#endif
#define RECORD 64

int main(int argc, char **argv)
{
   long n = fx_arg(argc, argv, 1, 512), passes = fx_arg(argc, argv, 2, 300000), i, p;
   unsigned char *msg = aligned_alloc(64, HEADER + n * RECORD + 64);
   const unsigned char *rec;
   __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
   uint64_t out[2], rng = 3;
   double t0;
   if (!msg)
      return 1;
   memset(msg, 0, HEADER);
   rec = msg + HEADER;
   /* hide rec's alignment from the compiler: both variants then use the same instructions (an
    * unaligned load and an add); knowing the fixed variant's alignment, GCC would fold the load
    * into the add, and the comparison would also count the instructions saved */
   __asm__("" : "+r"(rec));
   for (i = 0; i < n * RECORD; i += 8) {
      uint64_t v = fx_rand(&rng);
      memcpy(msg + HEADER + i, &v, 8);
   }
   t0 = fx_now_ms();
   /* four records per iteration into four accumulators: the loop is bound by its loads, not by
    * one add chain, so the cost of a split load shows (n is rounded down to a multiple of 4) */
   for (p = 0; p < passes; p++)
      for (i = 0; i + 4 <= n; i += 4) {
         a0 = _mm_add_epi64(a0, _mm_loadu_si128((const __m128i *)(rec + i * RECORD))); /* advise: split-line */
         a1 = _mm_add_epi64(a1, _mm_loadu_si128((const __m128i *)(rec + (i + 1) * RECORD))); /* advise: split-line */
         a2 = _mm_add_epi64(a2, _mm_loadu_si128((const __m128i *)(rec + (i + 2) * RECORD))); /* advise: split-line */
         a3 = _mm_add_epi64(a3, _mm_loadu_si128((const __m128i *)(rec + (i + 3) * RECORD))); /* advise: split-line */
      }
   a0 = _mm_add_epi64(_mm_add_epi64(a0, a1), _mm_add_epi64(a2, a3));
   _mm_storeu_si128((__m128i *)out, a0);
   fx_report("split_line", out[0] ^ out[1], fx_now_ms() - t0);
   return 0;
}
