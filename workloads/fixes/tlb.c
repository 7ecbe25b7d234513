/* tlb: a dependent walk over a large region that touches one cache line per 4 KiB page.
 *
 * Problem: a 64 MiB anonymous mapping (2 MiB-aligned) holds one 64-byte node per 4 KiB page
 *   (16,384 nodes, 1 MiB of data: it fits the caches); the walk follows the nodes in a random
 *   order, each address taken from the previous node. With 4 KiB pages (the kernel's THP mode
 *   "madvise", which this machine and most distributions use, gives a plain mapping 4 KiB
 *   pages) every step needs a translation the TLBs do not hold (16,384 pages against 1,280
 *   L2 TLB entries on Neoverse N1, ~2,000 on the x86 test machine): a page-table walk on the
 *   critical path of every load.
 * Fix (-DFIXED): madvise(MADV_HUGEPAGE) on the 2 MiB-aligned mapping before it is touched: 32
 *   huge pages, which the TLBs hold, so the walks disappear.
 * Advisor class: `tlb`. The evidence: the walk's load with a translation latency well above the
 *   L1 TLB hit, the TLB-walk event on most of its samples (with 4 KiB pages), random address
 *   deltas over the whole region with one line touched per page; the allocation (mmap in main)
 *   is the object to back with 32 huge pages.
 * What a user sees: a pointer chase whose data fits in the caches but runs at a fraction of the
 *   cache's speed. stderr also says how much of the region the kernel backed with huge pages.
 *
 *   tlb [STEPS] [REGION_MIB]      (defaults 2,000,000 steps over 64 MiB)
 */
#include <string.h>
#include <sys/mman.h>
#include "fixes.h"

#define PAGE 4096L
#define HUGE (2L << 20)

static long anon_huge_kib(void)
{
   char line[256];
   long kib = 0, v;
   FILE *f = fopen("/proc/self/smaps_rollup", "r");
   if (!f)
      return -1;
   while (fgets(line, sizeof line, f))
      if (sscanf(line, "AnonHugePages: %ld kB", &v) == 1)
         kib = v;
   fclose(f);
   return kib;
}

int main(int argc, char **argv)
{
   long steps = fx_arg(argc, argv, 1, 2000000), mib = fx_arg(argc, argv, 2, 64), i;
   long size = mib << 20, pages = size / PAGE;
   uint64_t rng = 7, sum = 0;
   char *raw, *base;
   long *order;
   void **p;
   double t0;
   raw = mmap(NULL, size + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
   if (raw == MAP_FAILED)
      return 1;
   base = (char *)(((uintptr_t)raw + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
#if defined(FIXED)
   if (madvise(base, size, MADV_HUGEPAGE) != 0)
      perror("madvise(MADV_HUGEPAGE)");
#endif
   /* a random cyclic order of the pages (Sattolo's algorithm): one cycle through all of them */
   order = malloc(pages * sizeof *order);
   if (!order)
      return 1;
   for (i = 0; i < pages; i++)
      order[i] = i;
   for (i = pages - 1; i > 0; i--) {
      long j = (long)(fx_rand(&rng) % (uint64_t)i), t = order[i];
      order[i] = order[j];
      order[j] = t;
   }
   /* node of page k: at line (k / 32) % 64 of the page. With 4 KiB or 2 MiB pages alike the
    * nodes then spread evenly over the sets of a physically indexed cache (2048 sets of 64 B:
    * address bits 6-16, of which bits 12-16 come from k % 32 and bits 6-11 from the line) */
#define NODE(k) ((void **)(base + (k) * PAGE + (((k) >> 5) % 64) * 64))
   for (i = 0; i < pages; i++)
      *NODE(order[i]) = NODE(order[(i + 1) % pages]);
   free(order);
   p = NODE(0);
   t0 = fx_now_ms();
   for (i = 0; i < steps; i++) {
      p = (void **)*p; /* advise: tlb */
      sum += (uintptr_t)p & 0xfff;
   }
   fx_report("tlb", sum, fx_now_ms() - t0);
   fprintf(stderr, "tlb: %ld of %ld MiB backed by huge pages\n", anon_huge_kib() / 1024, mib);
   return 0;
}
