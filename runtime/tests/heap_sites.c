/* A program for the runtime's tests: three heap arrays of different heat allocated at known
 * lines (the test reads the line numbers from the markers), a freed block whose address is
 * reused, phases and a named object through spelunk.h, two threads, a fork whose child
 * allocates, and an exec of this program (argument "child"). Prints known output, exits 3. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "spelunk.h"

#define N (1 << 16)

/* Keeps the compiler from removing an allocation whose memory it can see is unused. */
static void escape(void *p)
{
   __asm__ volatile("" : : "r"(p) : "memory");
}

static void *worker(void *arg)
{
   size_t bytes = (size_t)(unsigned long)arg;
   char *p = malloc(bytes); /* SITE:thread */
   memset(p, 1, bytes);
   escape(p);
   free(p);
   return NULL;
}

int main(int argc, char **argv)
{
   if (argc > 1 && strcmp(argv[1], "child") == 0) {
      double *c = malloc(3 * N * sizeof *c); /* SITE:exec */
      c[0] = 1;
      escape(c);
      printf("exec child ok\n");
      free(c);
      return 0;
   }
   spelunk_phase_begin("setup");
   double *hot = malloc(N * sizeof *hot);        /* SITE:hot */
   double *warm = calloc(2 * N, sizeof *warm);   /* SITE:warm */
   double *cold = malloc(4 * N * sizeof *cold);  /* SITE:cold */
   spelunk_object("hot_array", hot, N * sizeof *hot);
   spelunk_phase_end("setup");

   spelunk_phase_begin("compute");
   double s = 0;
   for (int r = 0; r < 40; r++)
      for (int i = 0; i < N; i++) s += hot[i];
   for (int r = 0; r < 4; r++)
      for (int i = 0; i < 2 * N; i++) s += warm[i];
   for (int i = 0; i < 4 * N; i += 64) s += cold[i];
   spelunk_phase_end("compute");

   /* A block freed and its address handed out again (below the mmap threshold). */
   char *first = malloc(60000); /* SITE:first */
   first[0] = 1;
   escape(first);
   free(first);
   char *reuse = malloc(60000); /* SITE:reuse */
   reuse[0] = 1;
   escape(reuse);
   printf("reused %d\n", first == reuse);

   pthread_t t[2];
   for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, (void *)(unsigned long)(8192 * (i + 1)));
   for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);

   pid_t pid = fork();
   if (pid == 0) {
      char *f = malloc(5 * 4096); /* SITE:fork */
      f[0] = 1;
      escape(f);
      _exit(7);
   }
   int st = 0;
   waitpid(pid, &st, 0);
   printf("fork child exit %d\n", WEXITSTATUS(st));
   fflush(stdout);

   pid = fork();
   if (pid == 0) {
      execl("/proc/self/exe", argv[0], "child", (char *)NULL);
      _exit(127);
   }
   waitpid(pid, &st, 0);
   printf("sum %.0f\n", s);
   free(cold);
   free(reuse);
   free(warm);
   free(hot);
   return 3;
}
