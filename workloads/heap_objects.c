/* heap_objects: an unannotated program whose data lives in heap blocks of different heat, for
 * "data objects by allocation site" (the NMO paper's question of which data structure is
 * slow, answered without touching the source).
 *
 *   heap_objects [PASSES]
 *
 * Three 512 KiB arrays from three malloc calls are read PASSES (default 32), PASSES/4 and
 * PASSES/32 times: hot, warm, cold. Then a 64 KiB block is read twice and freed, and a second
 * 64 KiB block (from another line; glibc hands out the same address again) is read
 * 3 * PASSES / 4 times: samples at that address belong to the first block while it lives and to
 * the second after, so reuse shows whether attribution follows block lifetimes. Prints the
 * sum and whether the address was reused.
 */
#include <stdio.h>
#include <stdlib.h>

#define ARRAY_BYTES (512 * 1024)
#define SMALL_BYTES (64 * 1024)

static __attribute__((noinline)) double read_passes(const double *a, size_t bytes, long passes)
{
   double s = 0;
   size_t n = bytes / sizeof *a, i;
   long p;
   for (p = 0; p < passes; p++)
      for (i = 0; i < n; i++) s += a[i];
   return s;
}

static __attribute__((noinline)) void fill(double *a, size_t bytes)
{
   size_t n = bytes / sizeof *a, i;
   for (i = 0; i < n; i++) a[i] = (double)(i & 7);
}

int main(int argc, char **argv)
{
   long passes = argc > 1 ? atol(argv[1]) : 32;
   double sum = 0;
   void *first_addr;
   double *hot, *warm, *cold, *first, *second;
   if (passes < 32) passes = 32;
   hot = malloc(ARRAY_BYTES);
   warm = malloc(ARRAY_BYTES);
   cold = malloc(ARRAY_BYTES);
   if (!hot || !warm || !cold) return 1;
   fill(hot, ARRAY_BYTES);
   fill(warm, ARRAY_BYTES);
   fill(cold, ARRAY_BYTES);
   sum += read_passes(hot, ARRAY_BYTES, passes);
   sum += read_passes(warm, ARRAY_BYTES, passes / 4);
   sum += read_passes(cold, ARRAY_BYTES, passes / 32);

   first = malloc(SMALL_BYTES);
   if (!first) return 1;
   fill(first, SMALL_BYTES);
   sum += read_passes(first, SMALL_BYTES, 2);
   first_addr = first;
   free(first);
   second = malloc(SMALL_BYTES);
   if (!second) return 1;
   fill(second, SMALL_BYTES);
   sum += read_passes(second, SMALL_BYTES, 3 * passes / 4);

   printf("sum %.0f\nreuse: %s\n", sum, (void *)second == first_addr ? "yes" : "no");
   free(second);
   free(cold);
   free(warm);
   free(hot);
   return 0;
}
