/* Costs of spelunk's LD_PRELOAD runtime, per call (scripts/bench-runtime.sh runs this with and
 * without the runtime): a clock read, an annotation pair, malloc/free pairs below and above the
 * logging threshold. Prints "name ns_per_call" lines. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "spelunk.h"

static double now_s(void)
{
   struct timespec ts;
   clock_gettime(CLOCK_MONOTONIC, &ts);
   return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void *volatile sink;

int main(int argc, char **argv)
{
   long n = argc > 1 ? atol(argv[1]) : 1000000;
   /* One CLOCK_MONOTONIC read, the floor of a timestamped call, measured in the same run (on
    * a loaded machine it moves with the rest). */
   struct timespec ts;
   double t0 = now_s();
   for (long i = 0; i < n; i++) clock_gettime(CLOCK_MONOTONIC, &ts);
   double t1 = now_s();
   printf("clock_gettime %.1f\n", (t1 - t0) * 1e9 / (double)n);

   t0 = now_s();
   for (long i = 0; i < n; i++) {
      spelunk_phase_begin("bench");
      spelunk_phase_end("bench");
   }
   t1 = now_s();
   printf("phase_begin_end_pair %.1f\n", (t1 - t0) * 1e9 / (double)n);

   t0 = now_s();
   for (long i = 0; i < n; i++) {
      sink = malloc(64);
      free(sink);
   }
   t1 = now_s();
   printf("malloc_free_64B %.1f\n", (t1 - t0) * 1e9 / (double)n);

   long m = n / 10 > 0 ? n / 10 : 1;
   t0 = now_s();
   for (long i = 0; i < m; i++) {
      sink = malloc(65536);
      free(sink);
   }
   t1 = now_s();
   printf("malloc_free_64KiB %.1f\n", (t1 - t0) * 1e9 / (double)m);
   return 0;
}
