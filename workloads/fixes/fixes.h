/* fixes.h -- the little every program of the fixes suite shares: a monotonic clock, a
 * deterministic pseudo-random generator (xorshift64*, so runs are repeatable and set-up costs
 * few operations under the emulator), argv parsing with a default, and the line every program
 * prints to stderr: its name, whether it is the fixed variant, a checksum (so the compiler
 * keeps the work) and the time of the measured kernel.
 */
#ifndef FIXES_H
#define FIXES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(FIXED)
#define VARIANT "fixed"
#else
#define VARIANT "problem"
#endif

static inline double fx_now_ms(void)
{
   struct timespec ts;
   clock_gettime(CLOCK_MONOTONIC, &ts);
   return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static inline uint64_t fx_rand(uint64_t *state)
{
   uint64_t x = *state;
   x ^= x >> 12;
   x ^= x << 25;
   x ^= x >> 27;
   *state = x;
   return x * 0x2545F4914F6CDD1DULL;
}

static inline long fx_arg(int argc, char **argv, int i, long dflt)
{
   long v = argc > i ? atol(argv[i]) : dflt;
   return v > 0 ? v : dflt;
}

static inline void fx_report(const char *name, uint64_t checksum, double kernel_ms)
{
   fprintf(stderr, "%s (%s): checksum %llu kernel_ms %.3f\n", name, VARIANT,
           (unsigned long long)checksum, kernel_ms);
}

#endif
