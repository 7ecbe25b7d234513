/* Written against NMO's documented API (its USAGE: kernel tagging, memory address tagging);
 * our own test code, built unchanged against include/nmo.h and linked with -lnmo. */
#include <stdio.h>
#include <stdlib.h>
#include <nmo.h>

int main(void)
{
   size_t n = 1 << 16;
   double *vertices = malloc(n * sizeof *vertices);
   nmo_tag_addr("vertices", vertices, vertices + n);
   nmo_tag_from_maps("heap", "[heap]");
   nmo_start("my_kernel");
   double s = 0;
   for (size_t i = 0; i < n; i++) s += vertices[i] = (double)i;
   nmo_stop();
   printf("%.0f\n", s);
   free(vertices);
   return 0;
}
