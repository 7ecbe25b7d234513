/* false_sharing_counters: threads each increment their own counter, and the counters are
 * neighbours in one structure.
 *
 * Problem: `struct counters { long count[THREADS]; }` -- 8-byte counters side by side, so all of
 *   them share one 64-byte line; each thread's increment (a load and a store through a volatile
 *   pointer, as a statistics counter updated in a loop is) needs the line in its own cache, and
 *   the line moves between the cores on nearly every increment although no data is shared.
 * Fix (-DFIXED): each counter padded and aligned to its own 64-byte line.
 * Advisor class: `false-sharing`. The evidence: loads and stores of one line from two threads at
 *   different offsets (0x0 and 0x8), loads waiting ~45x the L1 latency for the line (some
 *   served by the peer core), store ownership transfers; after the fix each thread's line
 *   stays in its L1.
 * What a user sees: a tight increment loop far slower with two threads than with one; c2c names
 *   the line and the two offsets.
 *
 *   false_sharing_counters [INCREMENTS_PER_THREAD] [THREADS]   (defaults 20,000,000, 2 threads)
 */
#include <pthread.h>
#include "fixes.h"

#define MAX_THREADS 16

#if defined(FIXED)
struct counter {
   long value;
} __attribute__((aligned(64)));
static struct counters {
   struct counter count[MAX_THREADS];
} counters;
#define COUNTER(t) (&counters.count[t].value)
#else
static struct counters {
   long count[MAX_THREADS];
} __attribute__((aligned(64))) counters;
#define COUNTER(t) (&counters.count[t])
#endif

static long increments, nthreads;
static volatile long ready;

static void *worker(void *arg)
{
   long t = (long)arg, i;
   volatile long *c = COUNTER(t);
   __atomic_add_fetch(&ready, 1, __ATOMIC_SEQ_CST);
   while (__atomic_load_n(&ready, __ATOMIC_ACQUIRE) < nthreads) {
   }
   for (i = 0; i < increments; i++)
      *c += 1; /* advise: false-sharing */
   return NULL;
}

int main(int argc, char **argv)
{
   pthread_t th[MAX_THREADS];
   long t;
   uint64_t sum = 0;
   double t0;
   increments = fx_arg(argc, argv, 1, 20000000);
   nthreads = fx_arg(argc, argv, 2, 2);
   if (nthreads > MAX_THREADS)
      nthreads = MAX_THREADS;
   t0 = fx_now_ms();
   for (t = 0; t < nthreads; t++)
      if (pthread_create(&th[t], NULL, worker, (void *)t) != 0)
         return 1;
   for (t = 0; t < nthreads; t++)
      pthread_join(th[t], NULL);
   for (t = 0; t < nthreads; t++)
      sum += *COUNTER(t);
   fx_report("false_sharing_counters", sum, fx_now_ms() - t0);
   return 0;
}
