/* SPDX-License-Identifier: GPL-2.0-or-later (a Valgrind tool; see LICENSE.md) */
/* spelunk emulator: Valgrind client-request codes of the annotation ABI (include/spelunk.h).
 * The preload library (sl_preload.c) implements the ABI symbols with these requests; the tool
 * (sl_main.c) handles them. Arguments are listed per request. */
#ifndef SPELUNK_CLREQ_H
#define SPELUNK_CLREQ_H

#include "valgrind.h"

#define SPELUNK_ABI_VERSION_VALUE 1

enum {
   /* -> ABI version */
   SPELUNK_CLREQ_ABI_VERSION = VG_USERREQ_TOOL_BASE('S', 'L'),
   /* (const char *name) */
   SPELUNK_CLREQ_PHASE_BEGIN,
   /* (const char *name or NULL) */
   SPELUNK_CLREQ_PHASE_END,
   /* (const char *name, const void *addr, size_t size) */
   SPELUNK_CLREQ_OBJECT,
   /* (const void *addr) */
   SPELUNK_CLREQ_OBJECT_FREE,
   /* (const char *name, const void *addr_in_mapping) */
   SPELUNK_CLREQ_TAG_MAPPING,
   /* Allocator calls, from the wrappers of sl_preload.c: ENTER before the call is passed to
    * the allocator, DONE after it returned (never nested within one thread).
    * ENTER (SlAllocCall kind, void *ptr: the block freed or reallocated, else NULL) */
   SPELUNK_CLREQ_ALLOC_ENTER,
   /* DONE (SlAllocCall kind, void *result, size_t size: the bytes asked for) */
   SPELUNK_CLREQ_ALLOC_DONE,
};

/* The allocator call of an ALLOC_ENTER / ALLOC_DONE pair. */
enum {
   SL_CALL_MALLOC = 1,
   SL_CALL_CALLOC = 2,
   SL_CALL_REALLOC = 3,
   SL_CALL_ALIGNED = 4, /* posix_memalign, aligned_alloc, memalign, valloc, pvalloc */
   SL_CALL_FREE = 6,
};

#endif
