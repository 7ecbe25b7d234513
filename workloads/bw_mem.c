/* bw_mem: sequential read bandwidth after LMbench's "bw_mem SIZE frd" as used in [SPE methodology]
 * §4.4 (figure 4.10: 4-byte loads, 128 per 512-byte block, summed). Written for spelunk, not
 * LMbench's code.
 *
 *   bw_mem [-r REPETITIONS] SIZE[k|m]      (default 1 repetition of frd over SIZE bytes)
 *
 * The buffer is written once (untimed), then read REPETITIONS times inside the phase "frd".
 * Prints "SIZE_MB MB/s" as LMbench does (wall clock: meaningful natively). Built with
 * -fno-tree-vectorize so every load reads 4 bytes, as LMbench's frd does on Arm.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "spelunk.h"

#define D(i) sum += p[i];
#define D8(i) D(i) D(i + 1) D(i + 2) D(i + 3) D(i + 4) D(i + 5) D(i + 6) D(i + 7)
#define D64(i) D8(i) D8(i + 8) D8(i + 16) D8(i + 24) D8(i + 32) D8(i + 40) D8(i + 48) D8(i + 56)

static __attribute__((noinline)) int frd(const int *p, const int *end)
{
   int sum = 0;
   while (p + 128 <= end) {
      D64(0) D64(64)
      p += 128;
   }
   return sum;
}

int main(int argc, char **argv)
{
   size_t size = 0;
   int reps = 1, i, sum = 0;
   int *buf;
   struct timespec t0, t1;
   double dt;
   for (i = 1; i < argc; i++) {
      if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
      else {
         char *end;
         double v = strtod(argv[i], &end);
         if (*end == 'k' || *end == 'K') v *= 1024;
         else if (*end == 'm' || *end == 'M') v *= 1024 * 1024;
         size = (size_t)v;
      }
   }
   if (size < 512 || reps < 1) {
      fprintf(stderr, "usage: bw_mem [-r REPETITIONS] SIZE[k|m]  (SIZE >= 512)\n");
      return 2;
   }
   size &= ~(size_t)511;
   buf = aligned_alloc(4096, size);
   if (!buf) { perror("bw_mem"); return 1; }
   for (i = 0; i < (int)(size / sizeof(int)); i++) buf[i] = i;
   spelunk_object("buffer", buf, size);
   spelunk_phase_begin("frd");
   clock_gettime(CLOCK_MONOTONIC, &t0);
   for (i = 0; i < reps; i++) {
      /* frd is pure: without this barrier the compiler calls it once for all repetitions */
      __asm__ __volatile__("" ::: "memory");
      sum += frd(buf, buf + size / sizeof(int));
   }
   clock_gettime(CLOCK_MONOTONIC, &t1);
   spelunk_phase_end("frd");
   dt = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
   printf("%.2f %.2f\n", size / 1e6, (double)size * reps / dt / 1e6);
   return sum == 42 ? 3 : 0;
}
