/* A program for the runtime's capacity tests: multi-threaded, it forks and execs, and each of
 * its three process images holds a known amount of touched memory until it ends:
 *   - the program: HEAP_MIB MiB in 64 KiB malloc blocks (below glibc's mmap threshold, so in
 *     the brk heap, "[heap]") and one ANON_MIB MiB malloc block (above it: its own anonymous
 *     mapping), held for HOLD_MS ms while a second thread runs;
 *   - its forked child: CHILD_MIB MiB of heap blocks, then exit(0);
 *   - an exec of this program (argument "child"): CHILD_MIB MiB of heap blocks.
 * Nothing is freed before the end, so the runtime's sample at a clean end sees all of it.
 * Prints known output and exits 5. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HEAP_MIB 16
#define ANON_MIB 32
#define CHILD_MIB 8
#define HOLD_MS 300
#define BLOCK_BYTES (64 << 10)

static void escape(void *p)
{
   __asm__ volatile("" : : "r"(p) : "memory");
}

static void sleep_ms(long ms)
{
   struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
   while (nanosleep(&ts, &ts) != 0) {
   }
}

/* mib MiB of touched heap, in 64 KiB blocks that are never freed. */
static void hold_heap(int mib)
{
   for (int i = 0; i < mib * (1 << 20) / BLOCK_BYTES; i++) {
      char *p = malloc(BLOCK_BYTES);
      memset(p, 1, BLOCK_BYTES);
      escape(p);
   }
}

static volatile int stop;

static void *ticker(void *arg)
{
   (void)arg;
   while (!stop) sleep_ms(5);
   return NULL;
}

int main(int argc, char **argv)
{
   if (argc > 1 && strcmp(argv[1], "child") == 0) {
      hold_heap(CHILD_MIB);
      sleep_ms(HOLD_MS / 2);
      printf("exec child held %d MiB\n", CHILD_MIB);
      return 0;
   }
   pthread_t t;
   pthread_create(&t, NULL, ticker, NULL);
   fflush(stdout);

   pid_t pid = fork();
   if (pid == 0) {
      hold_heap(CHILD_MIB);
      sleep_ms(HOLD_MS / 2);
      exit(0);
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
   printf("exec child exit %d\n", WEXITSTATUS(st));

   hold_heap(HEAP_MIB);
   char *anon = malloc((size_t)ANON_MIB << 20);
   memset(anon, 1, (size_t)ANON_MIB << 20);
   escape(anon);
   sleep_ms(HOLD_MS);
   stop = 1;
   pthread_join(t, NULL);
   printf("held %d MiB heap and %d MiB anon\n", HEAP_MIB, ANON_MIB);
   return 5;
}
