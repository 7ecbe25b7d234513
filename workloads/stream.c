/* stream: STREAM-style kernels (copy, scale, add, triad) after John McCalpin's STREAM
 * benchmark, annotated as in [NMO paper] (NMO, figure 4): the arrays a, b, c are registered as
 * objects and each kernel is a phase ("triad" is the one NMO tags), per thread. Written for
 * spelunk, not STREAM's code.
 *
 *   stream [-n ELEMENTS] [-i ITERATIONS] [-t THREADS]
 *
 * Defaults: 2,000,000 doubles per array (16 MB each), 5 iterations, 1 thread. Threads split
 * the arrays into contiguous chunks (as OpenMP static scheduling does) and meet at a barrier
 * between kernels. Prints the best rate per kernel in MB/s (wall clock: meaningful natively).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "spelunk.h"

static double *a, *b, *c;
static size_t n = 2000000;
static int iters = 5, nthreads = 1;
static pthread_barrier_t barrier;
static double best[4] = {1e30, 1e30, 1e30, 1e30};
static const char *kernel_name[4] = {"copy", "scale", "add", "triad"};
static const double bytes_per_elem[4] = {16, 16, 24, 24};

static double now_s(void)
{
   struct timespec ts;
   clock_gettime(CLOCK_MONOTONIC, &ts);
   return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *worker(void *arg)
{
   long id = (long)arg;
   size_t lo = n * id / nthreads, hi = n * (id + 1) / nthreads, j;
   const double scalar = 3.0;
   int it, k;
   spelunk_phase_begin("init");
   for (j = lo; j < hi; j++) {
      a[j] = 1.0;
      b[j] = 2.0;
      c[j] = 0.0;
   }
   spelunk_phase_end("init");
   for (it = 0; it < iters; it++) {
      for (k = 0; k < 4; k++) {
         double t0 = 0;
         pthread_barrier_wait(&barrier);
         if (id == 0) t0 = now_s();
         spelunk_phase_begin(kernel_name[k]);
         switch (k) {
         case 0: for (j = lo; j < hi; j++) c[j] = a[j]; break;
         case 1: for (j = lo; j < hi; j++) b[j] = scalar * c[j]; break;
         case 2: for (j = lo; j < hi; j++) c[j] = a[j] + b[j]; break;
         case 3: for (j = lo; j < hi; j++) a[j] = b[j] + scalar * c[j]; break;
         }
         spelunk_phase_end(kernel_name[k]);
         pthread_barrier_wait(&barrier);
         if (id == 0 && it > 0) {
            double dt = now_s() - t0;
            if (dt < best[k]) best[k] = dt;
         }
      }
   }
   return NULL;
}

int main(int argc, char **argv)
{
   pthread_t *tids;
   long i;
   int k;
   for (i = 1; i < argc; i++) {
      if (!strcmp(argv[i], "-n") && i + 1 < argc) n = strtoull(argv[++i], NULL, 0);
      else if (!strcmp(argv[i], "-i") && i + 1 < argc) iters = atoi(argv[++i]);
      else if (!strcmp(argv[i], "-t") && i + 1 < argc) nthreads = atoi(argv[++i]);
      else {
         fprintf(stderr, "usage: stream [-n ELEMENTS] [-i ITERATIONS] [-t THREADS]\n");
         return 2;
      }
   }
   if (nthreads < 1 || iters < 1 || n < (size_t)nthreads) {
      fprintf(stderr, "stream: bad arguments\n");
      return 2;
   }
   a = aligned_alloc(64, (n * sizeof(double) + 63) & ~(size_t)63);
   b = aligned_alloc(64, (n * sizeof(double) + 63) & ~(size_t)63);
   c = aligned_alloc(64, (n * sizeof(double) + 63) & ~(size_t)63);
   if (!a || !b || !c) { perror("stream"); return 1; }
   spelunk_object("a", a, n * sizeof(double));
   spelunk_object("b", b, n * sizeof(double));
   spelunk_object("c", c, n * sizeof(double));
   pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
   tids = calloc((size_t)nthreads, sizeof *tids);
   for (i = 1; i < nthreads; i++) pthread_create(&tids[i], NULL, worker, (void *)i);
   worker((void *)0);
   for (i = 1; i < nthreads; i++) pthread_join(tids[i], NULL);
   printf("Function    Best Rate MB/s\n");
   for (k = 0; k < 4; k++)
      printf("%-10s %12.1f\n", kernel_name[k],
             iters > 1 ? bytes_per_elem[k] * (double)n / best[k] * 1e-6 : 0.0);
   /* validate like STREAM does: every element follows the same recurrence */
   {
      double ea = 1.0, eb = 2.0, ec = 0.0, err = 0;
      size_t j;
      int it;
      for (it = 0; it < iters; it++) { ec = ea; eb = 3.0 * ec; ec = ea + eb; ea = eb + 3.0 * ec; }
      for (j = 0; j < n; j += n / 16 + 1) err += (a[j] - ea) * (a[j] - ea);
      if (err > 1e-6) { printf("validation failed\n"); return 1; }
      printf("Solution Validates\n");
   }
   return 0;
}
