/* SPDX-License-Identifier: GPL-2.0-or-later (a Valgrind tool; see LICENSE.md) */
/* spelunk emulator: the few types and runtime functions the model needs, mapped either to the
 * Valgrind tool API (the default) or to libc (SL_NATIVE, for the native unit tests). */
#ifndef SL_PORT_H
#define SL_PORT_H

#ifdef SL_NATIVE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
typedef uint8_t UChar;
typedef int8_t Char;
typedef char HChar;
typedef uint16_t UShort;
typedef uint32_t UInt;
typedef int32_t Int;
typedef uint64_t ULong;
typedef int64_t Long;
typedef uintptr_t Addr;
typedef unsigned char Bool;
#define True 1
#define False 0
#define SL_CALLOC(n, sz) calloc((n), (sz))
#define SL_FREE(p) free(p)
#define SL_MEMSET(p, v, n) memset((p), (v), (n))
#define SL_MEMMOVE(d, s, n) memmove((d), (s), (n))
#define SL_STRCMP(a, b) strcmp((a), (b))
#define SL_ASSERT(c) do { if (!(c)) abort(); } while (0)
#else
#include "pub_tool_basics.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_mallocfree.h"
#define SL_CALLOC(n, sz) VG_(calloc)("spelunk.model", (n), (sz))
#define SL_FREE(p) VG_(free)(p)
#define SL_MEMSET(p, v, n) VG_(memset)((p), (v), (n))
#define SL_MEMMOVE(d, s, n) VG_(memmove)((d), (s), (n))
#define SL_STRCMP(a, b) VG_(strcmp)((a), (b))
#define SL_ASSERT(c) tl_assert(c)
#endif

/* branch hints and inlining control for the per-op paths */
#define SL_LIKELY(x) __builtin_expect(!!(x), 1)
#define SL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define SL_NOINLINE __attribute__((noinline))
#define SL_ALWAYS_INLINE inline __attribute__((always_inline))
#define SL_PREFETCH(p) __builtin_prefetch((p), 1, 3) /* host cache only: never changes results */

#endif
