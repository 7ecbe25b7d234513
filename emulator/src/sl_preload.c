/* SPDX-License-Identifier: GPL-2.0-or-later (a Valgrind tool; see LICENSE.md) */
/* spelunk emulator: the annotation runtime used under Valgrind.
 *
 * Valgrind preloads vgpreload_spelunk-<platform>.so into the program, so the weak references of
 * include/spelunk.h resolve to these definitions at load time. Each one forwards its arguments
 * to the tool with a client request; the tool timestamps and records them. Built as a
 * freestanding shared object (no libc). */
#include <stddef.h>
#include "spelunk_clreq.h"
/* Prototypes as in include/spelunk.h (ABI v1), defined here with default visibility. */

#define EXPORT __attribute__((visibility("default")))

EXPORT unsigned spelunk_abi_v1_version(void)
{
   return (unsigned)VALGRIND_DO_CLIENT_REQUEST_EXPR(0, SPELUNK_CLREQ_ABI_VERSION, 0, 0, 0, 0, 0);
}

EXPORT void spelunk_abi_v1_phase_begin(const char *name)
{
   VALGRIND_DO_CLIENT_REQUEST_STMT(SPELUNK_CLREQ_PHASE_BEGIN, name, 0, 0, 0, 0);
}

EXPORT void spelunk_abi_v1_phase_end(const char *name)
{
   VALGRIND_DO_CLIENT_REQUEST_STMT(SPELUNK_CLREQ_PHASE_END, name, 0, 0, 0, 0);
}

EXPORT void spelunk_abi_v1_object(const char *name, const void *addr, unsigned long long size)
{
   VALGRIND_DO_CLIENT_REQUEST_STMT(SPELUNK_CLREQ_OBJECT, name, addr, size, 0, 0);
}

EXPORT void spelunk_abi_v1_object_free(const void *addr)
{
   VALGRIND_DO_CLIENT_REQUEST_STMT(SPELUNK_CLREQ_OBJECT_FREE, addr, 0, 0, 0, 0);
}

EXPORT void spelunk_abi_v1_tag_mapping(const char *name, const void *addr)
{
   VALGRIND_DO_CLIENT_REQUEST_STMT(SPELUNK_CLREQ_TAG_MAPPING, name, addr, 0, 0, 0);
}
