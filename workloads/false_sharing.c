/* false_sharing: the false-sharing example of [SPE methodology §5] ("Using SPE for data sharing
 * analysis", figures 5.2-5.3), written for spelunk from the document's description (not Joe
 * Mario's false_sharing_example.c). A "lock" thread keeps writing the lock0/lock1 fields of
 * two structures while reader threads keep reading reader1..reader4 of the same structures.
 * Without NO_FALSE_SHARING the pad is one long, so the readers' fields share the 64-byte line
 * of the lock fields (offset 0x20 vs 0x0/0x8); with -DNO_FALSE_SHARING the pad is five longs
 * and the reader fields start on the next line.
 *
 *   false_sharing [READERS] [LOOPS]      (default 1 reader, 2,000,000 loops per thread)
 *
 * buf1 and buf2 are registered as objects; each thread's loop is the phase "lock" or "read".
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "spelunk.h"

typedef struct {
   long lock0;
   long lock1;
   long reserved1;
#if defined(NO_FALSE_SHARING)
   long pad[5]; /* lock fields alone on their line */
#else
   long pad[1]; /* readers share the lock fields' line */
#endif
   long reader1;
   long reader2;
   long reader3;
   long reader4;
} __attribute__((aligned(64))) buf_t;

static buf_t buf1, buf2;
static long loops = 2000000;
static long nthreads;
static volatile long ready; /* threads at the start line; they spin until all have arrived */

/* A spinning start line keeps every thread running (no sleep in the kernel), so the threads
 * start their loops together, also under the emulator. */
static void start_line(void)
{
   __atomic_add_fetch(&ready, 1, __ATOMIC_SEQ_CST);
   while (__atomic_load_n(&ready, __ATOMIC_ACQUIRE) < nthreads) {
   }
}

static double now_ms(void)
{
   struct timespec ts;
   clock_gettime(CLOCK_MONOTONIC, &ts);
   return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static void *lock_thread(void *arg)
{
   long i;
   double t0;
   (void)arg;
   start_line();
   t0 = now_ms();
   spelunk_phase_begin("lock");
   for (i = 0; i < loops; i++) {
      __sync_lock_test_and_set(&buf1.lock0, 1);
      buf1.lock0 += 1;
      buf2.lock1 = 1;
   }
   spelunk_phase_end("lock");
   printf("%.0f ms, lock thread\n", now_ms() - t0);
   return NULL;
}

static void *reader_thread(void *arg)
{
   long tix = (long)arg, i;
   volatile long var;
   double t0;
   start_line();
   t0 = now_ms();
   spelunk_phase_begin("read");
   for (i = 0; i < loops; i++) {
      switch (tix % 4) {
      case 0: var = *(volatile long *)&buf1.reader1; var = *(volatile long *)&buf2.reader1; break;
      case 1: var = *(volatile long *)&buf1.reader2; var = *(volatile long *)&buf2.reader2; break;
      case 2: var = *(volatile long *)&buf1.reader3; var = *(volatile long *)&buf2.reader3; break;
      default: var = *(volatile long *)&buf1.reader4; var = *(volatile long *)&buf2.reader4; break;
      }
   }
   (void)var;
   spelunk_phase_end("read");
   printf("%.0f ms, reader thread %ld\n", now_ms() - t0, tix);
   return NULL;
}

int main(int argc, char **argv)
{
   long readers = argc > 1 ? atol(argv[1]) : 1, i;
   pthread_t *t;
   if (argc > 2) loops = atol(argv[2]);
   if (readers < 1 || readers > 64 || loops < 1) {
      fprintf(stderr, "usage: false_sharing [READERS 1-64] [LOOPS]\n");
      return 2;
   }
   spelunk_object("buf1", &buf1, sizeof buf1);
   spelunk_object("buf2", &buf2, sizeof buf2);
   nthreads = readers + 1;
   t = calloc((size_t)readers + 1, sizeof *t);
   pthread_create(&t[0], NULL, lock_thread, NULL);
   for (i = 0; i < readers; i++) pthread_create(&t[i + 1], NULL, reader_thread, (void *)i);
   for (i = 0; i <= readers; i++) pthread_join(t[i], NULL);
   printf("buf_t is %zu bytes; reader1 at offset %zu\n", sizeof(buf_t),
          (size_t)((char *)&buf1.reader1 - (char *)&buf1));
   return 0;
}
