/* Five allocation sites, one per function, for the allocation-site report tests
 * (crates/cli/tests/alloc_sites_cli.rs): the call sites' lines come from objdump and addr2line. */
#include <stdlib.h>

void *volatile keep[8];

__attribute__((noinline)) void make_hot(unsigned long n) { keep[0] = malloc(n); }
__attribute__((noinline)) void make_warm(unsigned long n) { keep[1] = calloc(n, 1); }
__attribute__((noinline)) void make_cold(unsigned long n) { keep[2] = malloc(n); }
__attribute__((noinline)) void make_first(unsigned long n) { keep[3] = malloc(n); }
__attribute__((noinline)) void make_reuse(unsigned long n) { keep[4] = malloc(n); }

int main(int argc, char **argv)
{
   (void)argv;
   unsigned long n = 4096ul * (unsigned long)argc;
   make_hot(n);
   make_warm(n);
   make_cold(n);
   make_first(n);
   free(keep[3]);
   make_reuse(n);
   return 0;
}
