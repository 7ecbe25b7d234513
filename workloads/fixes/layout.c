/* layout: an array of 128-byte structures whose hot loop reads two of their fields.
 *
 * Problem: `struct particle` holds 16 fields (position, velocity, force, mass, charge, an id,
 *   a name...); the hot loop (the kinetic-energy-like sum of mass * vx * vx) reads only `mass`
 *   and `vx`, 16 of the 128 bytes, so every iteration brings in a whole 64-byte line of which
 *   it uses 16 bytes: 4x the traffic it needs (8x counting the line pairs of 128 bytes).
 * Fix (-DFIXED): hot/cold split -- the two hot fields live in their own 16-byte array
 *   (`struct hot`), the rest in a cold array the hot loop never touches: 4 elements per line.
 * Advisor class: `layout` (bytes fetched per byte used: pack, split hot/cold fields). The
 *   evidence: two load PCs of one line of code walking with an address stride of 128 bytes (the
 *   gcd of the deltas between samples), each at one offset within its line (0x20 and 0x28 of
 *   the structure: 16 of 128 bytes used), nearly every sample on a new line.
 * What a user sees: the loop's two loads on top of the profile, missing L1 (and L2) on nearly
 *   every sample; after the fix, a quarter of the line fetches and a shorter run.
 *
 *   layout [ELEMENTS] [PASSES]      (defaults 262144 structures = 32 MiB, 32 passes)
 */
#include "fixes.h"

struct particle {
   double x, y, z;    /* 0x00 */
   double pad0;       /* 0x18 */
   double mass;       /* 0x20 (hot) */
   double vx, vy, vz; /* vx at 0x28 (hot) */
   double fx, fy, fz; /* 0x40 */
   double charge;     /* 0x58 */
   long id;           /* 0x60 */
   char name[24];     /* 0x68 .. 0x80 */
} __attribute__((aligned(64)));

struct hot {
   double mass, vx;
};

int main(int argc, char **argv)
{
   long n = fx_arg(argc, argv, 1, 262144), passes = fx_arg(argc, argv, 2, 32), i, p;
   uint64_t rng = 42;
   double sum = 0, t0;
#if defined(FIXED)
   struct hot *h = aligned_alloc(64, n * sizeof *h);
   struct particle *cold = aligned_alloc(64, n * sizeof *cold); /* keeps the cold fields */
   if (!h || !cold)
      return 1;
   for (i = 0; i < n; i++) {
      h[i].mass = 1.0 + (fx_rand(&rng) & 7);
      h[i].vx = (double)(fx_rand(&rng) & 1023) / 64;
      cold[i].id = i;
   }
   t0 = fx_now_ms();
   for (p = 0; p < passes; p++)
      for (i = 0; i < n; i++)
         sum += h[i].mass * h[i].vx * h[i].vx;
#else
   struct particle *a = aligned_alloc(64, n * sizeof *a);
   if (!a)
      return 1;
   for (i = 0; i < n; i++) {
      a[i].mass = 1.0 + (fx_rand(&rng) & 7);
      a[i].vx = (double)(fx_rand(&rng) & 1023) / 64;
      a[i].id = i;
   }
   t0 = fx_now_ms();
   for (p = 0; p < passes; p++)
      for (i = 0; i < n; i++)
         sum += a[i].mass * a[i].vx * a[i].vx; /* advise: layout */
#endif
   fx_report("layout", (uint64_t)sum, fx_now_ms() - t0);
   return 0;
}
