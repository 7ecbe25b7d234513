/* stride_benchmark: the DynamoRIO stride benchmark of [N1 PMU methodology] (Neoverse N1 PMU methodology,
 * case study: figure 15, "a pointer chasing benchmark that accesses values in a 16MB array,
 * with array position being determined by the pointer being chased"). Written for spelunk in
 * C from that description: every byte of the array holds 7, and each iteration moves the
 * position forward by (loaded value) cache lines, so each load depends on the previous one
 * and visits every seventh line.
 *
 *   stride_benchmark [ITERATIONS] [PREFETCH_DISTANCE]
 *
 * Defaults: 10,000,000 iterations ([N1 PMU methodology] runs 2,000,000,000), no software prefetch. A
 * non-zero PREFETCH_DISTANCE adds [N1 PMU methodology]'s optimisation, __builtin_prefetch of the line
 * DIST * 7 lines ahead. The loop is the phase "stride"; the array is the object "buffer".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "spelunk.h"

#define LINE 64
#define STRIDE 7
#define ARRAY_SIZE (16u * 1024 * 1024)

int main(int argc, char **argv)
{
   long iterations = argc > 1 ? atol(argv[1]) : 10000000L;
   long dist = argc > 2 ? atol(argv[2]) : 0, loop;
   unsigned char *buffer = malloc(ARRAY_SIZE);
   unsigned position = 0;
   if (!buffer || iterations < 1 || dist < 0) {
      fprintf(stderr, "usage: stride_benchmark [ITERATIONS] [PREFETCH_DISTANCE]\n");
      return 2;
   }
   memset(buffer, STRIDE, ARRAY_SIZE);
   spelunk_object("buffer", buffer, ARRAY_SIZE);
   __asm__ __volatile__("" ::: "memory");
   spelunk_phase_begin("stride");
   if (dist) {
      const unsigned ahead = (unsigned)(dist * STRIDE * LINE);
      for (loop = 0; loop < iterations; ++loop) {
         __builtin_prefetch(&buffer[(position + ahead) & (ARRAY_SIZE - 1)], 0, 0);
         position += buffer[position] * LINE;
         position &= ARRAY_SIZE - 1;
      }
   } else {
      for (loop = 0; loop < iterations; ++loop) {
         position += buffer[position] * LINE;
         position &= ARRAY_SIZE - 1;
      }
   }
   spelunk_phase_end("stride");
   __asm__ __volatile__("" ::: "memory");
   fprintf(stderr, "Value = %u\n", position);
   return 0;
}
