/* lat_mem_rd: memory read latency by pointer chasing, after LMbench's lat_mem_rd as used in
 * [SPE methodology §4.2] ("Arm Neoverse N1: SPE memory access analysis", LMbench lat_mem_rd -P 1
 * <size> 4096, figures 4.3-4.7, table 4.4). Written for spelunk, not LMbench's code.
 *
 *   lat_mem_rd [-t] [-s STRIDE] [-n LOADS] SIZE[k|m]...
 *
 * For each SIZE a chain of pointers STRIDE bytes apart (default 4096) is built through a buffer
 * of that size, walked once to warm the caches, then walked for LOADS dependent loads
 * (default 1M) inside the phase "chase" (include/spelunk.h). Each pointer is the address of
 * the next, so every load depends on the previous one: the time per load is the load-to-use
 * latency of the level the buffer fits in. LOADS is rounded down to a multiple of 128. -t visits the pages in random order (LMbench -t,
 * stressing the TLB). Prints "SIZE_MB NS_PER_LOAD" as LMbench does (wall clock: meaningful
 * only natively). The buffer is registered as the object "chain".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "spelunk.h"

static size_t parse_size(const char *s)
{
   char *end;
   double v = strtod(s, &end);
   if (*end == 'k' || *end == 'K') v *= 1024;
   else if (*end == 'm' || *end == 'M') v *= 1024 * 1024;
   else if (*end == 'g' || *end == 'G') v *= 1024.0 * 1024 * 1024;
   return (size_t)v;
}

static double now_ns(void)
{
   struct timespec ts;
   clock_gettime(CLOCK_MONOTONIC, &ts);
   return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* 128 dependent loads per iteration (LMbench unrolls benchmark_loads 100 times): the loop
 * overhead is under 2% of the operations */
#define HOP p = (void **)*p;
#define HOP16 HOP HOP HOP HOP HOP HOP HOP HOP HOP HOP HOP HOP HOP HOP HOP HOP
#define HOP128 HOP16 HOP16 HOP16 HOP16 HOP16 HOP16 HOP16 HOP16

static __attribute__((noinline)) void **chase(void **p, uint64_t iters)
{
   while (iters--) {
      HOP128
   }
   return p;
}

int main(int argc, char **argv)
{
   size_t stride = 4096;
   uint64_t loads = 1u << 20;
   int tlb = 0, i, any = 0;
   for (i = 1; i < argc; i++) {
      if (!strcmp(argv[i], "-t")) tlb = 1;
      else if (!strcmp(argv[i], "-s") && i + 1 < argc) stride = parse_size(argv[++i]);
      else if (!strcmp(argv[i], "-n") && i + 1 < argc) loads = strtoull(argv[++i], NULL, 0);
      else {
         size_t size = parse_size(argv[i]), n, k;
         char *buf;
         size_t *order;
         void **p;
         double t0, t1;
         any = 1;
         if (stride < sizeof(void *) || size < stride) {
            fprintf(stderr, "lat_mem_rd: size %zu must be at least the stride %zu\n", size, stride);
            return 2;
         }
         n = size / stride;
         buf = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
         order = malloc(n * sizeof *order);
         if (!buf || !order) { perror("lat_mem_rd"); return 1; }
         for (k = 0; k < n; k++) order[k] = k;
         if (tlb) { /* random visiting order (Fisher-Yates with a fixed LCG seed) */
            uint64_t x = 88172645463325252ull;
            for (k = n - 1; k > 0; k--) {
               size_t j;
               x ^= x << 13; x ^= x >> 7; x ^= x << 17;
               j = (size_t)(x % (k + 1));
               size_t tmp = order[k]; order[k] = order[j]; order[j] = tmp;
            }
         }
         for (k = 0; k < n; k++)
            *(void **)(buf + order[k] * stride) = buf + order[(k + 1) % n] * stride;
         spelunk_object("chain", buf, size);
         p = (void **)(buf + order[0] * stride);
         p = chase(p, (n + 127) / 128); /* warm-up pass */
         spelunk_phase_begin("chase");
         t0 = now_ns();
         p = chase(p, loads / 128);
         t1 = now_ns();
         spelunk_phase_end("chase");
         printf("%.5f %.3f\n", size / (1024.0 * 1024.0), (t1 - t0) / (double)(loads / 128 * 128));
         if (p == NULL) printf("unreachable\n");
         spelunk_object_free(buf);
         free(order);
         free(buf);
      }
   }
   if (!any) {
      fprintf(stderr, "usage: lat_mem_rd [-t] [-s STRIDE] [-n LOADS] SIZE[k|m]...\n");
      return 2;
   }
   return 0;
}
