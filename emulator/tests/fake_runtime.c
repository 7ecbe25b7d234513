/* SPDX-License-Identifier: GPL-2.0-or-later (a Valgrind tool; see LICENSE.md) */
/* A stand-in for a spelunk runtime implementing ABI v1 (include/spelunk.h): prints each call,
 * so test.sh can check that an LD_PRELOADed library receives the header's calls. */
#include <stdio.h>

unsigned spelunk_abi_v1_version(void) { return 1; }
void spelunk_abi_v1_phase_begin(const char *name) { printf("begin %s\n", name); }
void spelunk_abi_v1_phase_end(const char *name) { printf("end %s\n", name ? name : ""); }
void spelunk_abi_v1_object(const char *name, const void *addr, unsigned long long size)
{
   (void)addr;
   printf("object %s %llu\n", name, size);
}
void spelunk_abi_v1_object_free(const void *addr) { printf("free %d\n", addr != 0); }
void spelunk_abi_v1_tag_mapping(const char *name, const void *addr)
{
   printf("tag %s %d\n", name, addr != 0);
}
