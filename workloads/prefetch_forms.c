/* prefetch_forms: software prefetch instructions in each addressing form the emulator decodes
 * (emulator/MODEL.md "Software prefetch"), each followed by a load of the line it prefetched.
 * Written for spelunk's emulator tests.
 *
 *   prefetch_forms [PAGES] [--no-prefetch]
 *
 * For each of PAGES (default 512) blocks of 8 pages of a heap buffer, and a 4 KB-aligned
 * global buffer, it prefetches FORMS lines 4 lines apart (so neither hardware prefetcher
 * follows them) with the forms below, then loads each of them. When every prefetch address is
 * right, the loads find their lines in L1D (in flight): no L1D refill. --no-prefetch runs the
 * same loads without the prefetches. The loop is the phase "forms".
 *
 * x86-64: base + disp8, base + disp32, base + index*8 (SIB), an extended base register
 * (REX.B) + index (REX.X), RIP-relative, prefetchw, prefetcht1/t2 (into L2: the load then
 * refills L1D from L2 without missing it, so those lines are loaded from L2, not counted here).
 * arm64: PRFM (immediate), PRFM (register, LSL #3), PRFM (register, SXTW), PRFUM (negative
 * offset), PRFM PST (for store), PRFM PLDL2 (into L2).
 */
#include <stdio.h>
#include <stdlib.h>
#include "spelunk.h"

#define PAGE 4096
#define BLOCK (8 * PAGE)
#define FORMS 6 /* prefetched for L1D and loaded per block */

static char global_buf[PAGE] __attribute__((aligned(PAGE)));

int main(int argc, char **argv)
{
   long pages = argc > 1 ? atol(argv[1]) : 512;
   int prefetch = !(argc > 2 && argv[2][0] == '-');
   char *buf;
   long i;
   unsigned long sum = 0;
   if (pages < 1) {
      fprintf(stderr, "usage: prefetch_forms [PAGES] [--no-prefetch]\n");
      return 2;
   }
   buf = aligned_alloc(PAGE, (size_t)pages * BLOCK);
   if (!buf) return 2;
   for (i = 0; i < pages * BLOCK; i += PAGE) buf[i] = 1; /* map every page */
   global_buf[0] = 1;
   spelunk_phase_begin("forms");
   for (i = 0; i < pages; i++) {
      char *p = buf + i * BLOCK;
      /* the lines loaded: 1, 5, 9, 13 (p), 17 (of p + 4 KB), and line 21 of global_buf */
      volatile char *q = (volatile char *)p;
      long idx = 5 * 64 / 8; /* index register for the scaled forms */
      if (prefetch) {
#if defined(__x86_64__)
         __asm__ __volatile__("prefetcht0 64(%0)" ::"r"(p));                   /* disp8 */
         __asm__ __volatile__("prefetchnta (%0,%1,8)" ::"r"(p), "r"(idx));      /* SIB */
         __asm__ __volatile__("prefetchw 0x240(%0)" ::"r"(p));                  /* disp32 */
         {
            register char *b13 __asm__("r13") = p;
            register long x14 __asm__("r14") = 13 * 64;
            __asm__ __volatile__("prefetcht0 (%0,%1)" ::"r"(b13), "r"(x14));    /* REX.B/X */
         }
         __asm__ __volatile__("prefetcht0 0x1440(%0)" ::"r"(p));                /* 4 KB on */
         if (i == 0) __asm__ __volatile__("prefetcht0 global_buf+1344(%rip)"); /* RIP */
         __asm__ __volatile__("prefetcht1 0x1800(%0)" ::"r"(p));                /* L2 */
#elif defined(__aarch64__)
         __asm__ __volatile__("prfm pldl1keep, [%0, #64]" ::"r"(p));            /* imm */
         __asm__ __volatile__("prfm pldl1strm, [%0, %1, lsl #3]" ::"r"(p), "r"(idx));
         __asm__ __volatile__("prfm pstl1keep, [%0, #576]" ::"r"(p));           /* PST */
         __asm__ __volatile__("prfm pldl1keep, [%0, %w1, sxtw]" ::"r"(p), "r"(13 * 64));
         __asm__ __volatile__("prfum pldl1keep, [%0, #-8]" ::"r"(p + 0x1448));  /* PRFUM */
         if (i == 0) __asm__ __volatile__("prfm pldl1keep, [%0, #1344]" ::"r"(global_buf));
         __asm__ __volatile__("prfm pldl2keep, [%0, #2048]" ::"r"(p + 0x1000));  /* L2 */
#endif
      }
      sum += q[64] + q[5 * 64] + q[9 * 64] + q[13 * 64] + q[0x1440];
      if (i == 0) sum += ((volatile char *)global_buf)[1344];
   }
   spelunk_phase_end("forms");
   printf("%lu\n", sum);
   return 0;
}
