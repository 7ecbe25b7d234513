/* heap_churn: a hot loop that allocates, uses and frees a large zeroed scratch table every iteration.
 *
 * Problem: each "request" counts the distinct values among its 64 keys with an open-addressing
 *   hash table of 8,192 slots (64 KiB) that it allocates zeroed (calloc: what
 *   `std::vector<uint64_t> table(n)` or `new T[n]()` does) and frees at the end. glibc serves
 *   the block from the top of its heap each time (64 KiB is under its mmap threshold) and
 *   calloc clears all 64 KiB every time although a request touches at most 64 slots: the
 *   allocator and the clearing, not the work, take the time.
 * Fix (-DFIXED): one table allocated before the loop and reused; each request clears only the
 *   slots it used (it remembers them), so the table is zero again for the next request.
 * Advisor class: `heap-churn` (short-lived blocks from one allocation site). The evidence: one
 *   allocation site (calloc in main) with as many 64 KiB allocations as requests, each freed
 *   within its iteration (lifetime far shorter than the run); stores inside memset (called by
 *   calloc) covering the whole block on every request, the same addresses each time.
 * What a user sees: most samples in calloc/memset instead of the hashing.
 * Under the emulator on x86-64, glibc's memset for blocks this size is `rep stosb`, which
 *   Valgrind runs one byte at a time: each calloc is then 64 Ki store ops, far more than an Arm
 *   memset (16-byte stores or DC ZVA) executes, so the emulated gain overstates the native one;
 *   pass fewer REQUESTS under the emulator to keep the run short.
 *
 *   heap_churn [REQUESTS] [TABLE_SLOTS]     (defaults 10,000 requests, 8,192 slots = 64 KiB)
 */
#include "fixes.h"

#define KEYS 64

/* counts the distinct keys of request r in the zeroed table of `slots` slots (a power of two);
 * returns the count and leaves the used slots' positions in used[] */
static long request(uint64_t *table, long slots, uint64_t r, long *used)
{
   uint64_t rng = r * 0x9E3779B97F4A7C15ULL + 1;
   long k, distinct = 0;
   for (k = 0; k < KEYS; k++) {
      uint64_t key = (fx_rand(&rng) % 200) + 1; /* 200 possible values: repeats happen */
      long h = (long)((key * 0x9E3779B97F4A7C15ULL) >> 40) & (slots - 1);
      while (table[h] != 0 && table[h] != key)
         h = (h + 1) & (slots - 1);
      if (table[h] == 0) {
         table[h] = key;
         used[distinct++] = h;
      }
   }
   return distinct;
}

int main(int argc, char **argv)
{
   long requests = fx_arg(argc, argv, 1, 10000), slots = fx_arg(argc, argv, 2, 8192), r, k;
   long used[KEYS];
   uint64_t sum = 0;
   double t0;
   if (slots & (slots - 1))
      slots = 8192;
   t0 = fx_now_ms();
#if defined(FIXED)
   uint64_t *table = calloc(slots, sizeof *table);
   if (!table)
      return 1;
   for (r = 0; r < requests; r++) {
      long d = request(table, slots, (uint64_t)r, used);
      sum += (uint64_t)d;
      for (k = 0; k < d; k++)
         table[used[k]] = 0;
   }
   free(table);
#else
   for (r = 0; r < requests; r++) {
      uint64_t *table = calloc(slots, sizeof *table); /* advise: heap-churn */
      if (!table)
         return 1;
      sum += (uint64_t)request(table, slots, (uint64_t)r, used);
      free(table);
   }
#endif
   (void)k;
   fx_report("heap_churn", sum, fx_now_ms() - t0);
   return 0;
}
