/* SPDX-License-Identifier: GPL-2.0-or-later (a Valgrind tool; see LICENSE.md)
 *
 * Retranslation: the program discards the translations of its own hot function 2000 times
 * (VALGRIND_DISCARD_TRANSLATIONS, as a JIT or a dlclose/dlopen would), so the tool makes and
 * frees a superblock descriptor for each. test.sh checks that the program computes what it
 * computes natively and that the tool freed the descriptors (its -v statistics line). */
#include <stdio.h>
#include <valgrind/valgrind.h>

static volatile long sink;

__attribute__((noinline)) static long work(long n)
{
   long s = 0;
   for (long i = 0; i < n; i++) s += i * 3 + (s >> 3);
   return s;
}

int main(void)
{
   long total = 0;
   for (int round = 0; round < 2000; round++) {
      total += work(500);
      VALGRIND_DISCARD_TRANSLATIONS((void *)work, 4096);
   }
   sink = total;
   printf("total %ld\n", total);
   return 0;
}
