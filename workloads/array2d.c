/* array2d: row- versus column-order traversal of a 2D array, the example of [perf hot-spot guide] (Arm's
 * perf hot-spot tutorial: array_assign traverses by row, compute_squares by column, which
 * causes the L1D/L2 misses the tutorial finds). Written for spelunk from that description.
 *
 *   array2d [ROWS] [--by-row]
 *
 * The array is long[ROWS][64] (default 65536 rows = 32 MB; the tutorial uses 512000). With
 * --by-row compute_squares also walks by row (the tutorial's optimisation). Each function is a
 * phase of its name; the array is the object "array".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "spelunk.h"

#define COL_LINE 64

static long (*array)[COL_LINE];
static long rows = 65536;

static __attribute__((noinline)) void array_assign(void)
{
   long i, j;
   for (i = 0; i < rows; i++)
      for (j = 0; j < COL_LINE; j++) array[i][j] = i + j;
}

static __attribute__((noinline)) void compute_squares_by_column(void)
{
   long i, j;
   for (i = 0; i < COL_LINE; i++)
      for (j = 0; j < rows; j++) array[j][i] = array[j][i] * array[j][i];
}

static __attribute__((noinline)) void compute_squares_by_row(void)
{
   long i, j;
   for (j = 0; j < rows; j++)
      for (i = 0; i < COL_LINE; i++) array[j][i] = array[j][i] * array[j][i];
}

int main(int argc, char **argv)
{
   int by_row = 0, i;
   long sum = 0, j;
   for (i = 1; i < argc; i++) {
      if (!strcmp(argv[i], "--by-row")) by_row = 1;
      else rows = atol(argv[i]);
   }
   if (rows < 1) {
      fprintf(stderr, "usage: array2d [ROWS] [--by-row]\n");
      return 2;
   }
   array = aligned_alloc(64, (size_t)rows * sizeof *array);
   if (!array) { perror("array2d"); return 1; }
   spelunk_object("array", array, (unsigned long long)rows * sizeof *array);
   spelunk_phase_begin("array_assign");
   array_assign();
   spelunk_phase_end("array_assign");
   spelunk_phase_begin("compute_squares");
   if (by_row) compute_squares_by_row();
   else compute_squares_by_column();
   spelunk_phase_end("compute_squares");
   for (j = 0; j < rows; j += 997) sum += array[j][j % COL_LINE];
   printf("checksum %ld\n", sum);
   return 0;
}
