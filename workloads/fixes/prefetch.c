/* prefetch: an irregular gather, sum += mix(data[idx[i]]), with idx random over a large array.
 *
 * Problem: `data` (128 MiB of uint64_t by default, 4x the 32 MiB system cache of the emulated
 *   Neoverse N1 platforms) is read at random indices; `idx` is read sequentially, so the address
 *   of every gather is known long before it is needed, but neither hardware prefetcher can
 *   predict it (no stride). Each load misses to DRAM; the loop overlaps only as many misses as
 *   the out-of-order window holds, and the per-element hash (mix, ~12 operations) keeps few
 *   iterations in that window (without it, a large x86 window already overlaps the misses and
 *   the prefetch gains nothing on the test machine).
 * Fix (-DFIXED): `__builtin_prefetch(&data[idx[i + D]])` (a prefetch for L1 of the element D
 *   iterations ahead). D = ceil(L / T): L the miss latency, T the time of one iteration of the
 *   prefetched loop, itself at least L / M with M miss registers (the fills in flight). For
 *   Neoverse N1 (the emulator's figures: L = 283 cycles of DRAM, M = 24, ~20 operations per
 *   iteration at 4 per cycle = 5 cycles) T = max(5, 283 / 24 = 11.8) and D = 283 / 11.8 = 24;
 *   the default 32 leaves a margin for translation (argv[3] sets it). On the x86 test machine
 *   the prefetched loop takes ~27 ns per iteration at ~100-200 ns of latency: D >= 8 suffices
 *   and 16..64 measure the same.
 * Advisor class: `prefetch` (irregular misses a prefetch ahead can hide). The evidence: the
 *   gather load with DRAM (or SLC) as data source on most samples, total latency near the
 *   memory latency, addresses with no dominant delta (random), while the index load beside it
 *   is unit-stride and hits; the distance from the measured latency and cycles per iteration.
 * What a user sees: a loop of a handful of instructions dominated by one load's latency.
 *
 *   prefetch [GATHERS] [DATA_MIB] [DISTANCE]   (defaults 4,000,000 gathers over 128 MiB, D = 32)
 */
#include "fixes.h"

/* a 64-bit finaliser (the MurmurHash3 fmix64 constants): the per-element work of the loop --
 * ~12 operations that keep the out-of-order window from running far ahead by itself */
static inline uint64_t mix(uint64_t x)
{
   x ^= x >> 33;
   x *= 0xff51afd7ed558ccdULL;
   x ^= x >> 33;
   x *= 0xc4ceb9fe1a85ec53ULL;
   x ^= x >> 33;
   return x;
}

int main(int argc, char **argv)
{
   long gathers = fx_arg(argc, argv, 1, 4000000), mib = fx_arg(argc, argv, 2, 128);
   long dist = fx_arg(argc, argv, 3, 32), i;
   long n = (mib << 20) / 8;
   uint64_t *data = aligned_alloc(4096, n * sizeof *data), sum = 0, rng = 11;
   uint32_t *idx = malloc((gathers + dist) * sizeof *idx);
   double t0;
   if (!data || !idx)
      return 1;
   /* one write per 4 KiB page makes every page real (the kernel zeroes the rest) at a small
    * set-up cost, natively and under the emulator */
   for (i = 0; i < n; i += 512)
      data[i] = (uint64_t)i;
   for (i = 0; i < gathers + dist; i++)
      idx[i] = (uint32_t)(fx_rand(&rng) % (uint64_t)n);
   t0 = fx_now_ms();
   for (i = 0; i < gathers; i++) {
#if defined(FIXED)
      __builtin_prefetch(&data[idx[i + dist]]);
#endif
      sum += mix(data[idx[i]] + (uint64_t)i); /* advise: prefetch */
   }
   (void)dist;
   fx_report("prefetch", sum, fx_now_ms() - t0);
   return 0;
}
