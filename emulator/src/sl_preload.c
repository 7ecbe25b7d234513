/* SPDX-License-Identifier: GPL-2.0-or-later (a Valgrind tool; see LICENSE.md) */
/* spelunk emulator: the annotation runtime and allocator wrappers used under Valgrind.
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

/* ------------------------------------------------------------------------------------------ */
/* Allocator wrappers (Valgrind function wrapping, valgrind.h's public macros): each call of
 * glibc's allocator is passed on unchanged, bracketed by two client requests so the tool can
 * log the block with the caller's stack. The program keeps glibc's allocator and thus the
 * addresses, reuse and layout it has natively; the tool only observes. Calls inside libc that
 * reach the same functions (strdup, C++ operator new through libstdc++) are wrapped too, since
 * Valgrind redirects the function's address. */

#define SL_LIBC libcZdsoZa /* soname libc.so* (Z-encoded) */
#define WRAP(fn) I_WRAP_SONAME_FNNAME_ZU(SL_LIBC, fn)
#define ENTER(kind, ptr)                                                                   \
   VALGRIND_DO_CLIENT_REQUEST_STMT(SPELUNK_CLREQ_ALLOC_ENTER, (kind), (ptr), 0, 0, 0)
#define DONE(kind, res, size)                                                              \
   VALGRIND_DO_CLIENT_REQUEST_STMT(SPELUNK_CLREQ_ALLOC_DONE, (kind), (res), (size), 0, 0)

EXPORT void *WRAP(malloc)(size_t n);
EXPORT void *WRAP(malloc)(size_t n)
{
   OrigFn fn;
   void *r;
   VALGRIND_GET_ORIG_FN(fn);
   ENTER(SL_CALL_MALLOC, 0);
   CALL_FN_W_W(r, fn, n);
   DONE(SL_CALL_MALLOC, r, n);
   return r;
}

EXPORT void *WRAP(calloc)(size_t n, size_t size);
EXPORT void *WRAP(calloc)(size_t n, size_t size)
{
   OrigFn fn;
   void *r;
   VALGRIND_GET_ORIG_FN(fn);
   ENTER(SL_CALL_CALLOC, 0);
   CALL_FN_W_WW(r, fn, n, size);
   /* a non-NULL result means n * size did not overflow */
   DONE(SL_CALL_CALLOC, r, r ? n * size : 0);
   return r;
}

EXPORT void *WRAP(realloc)(void *p, size_t n);
EXPORT void *WRAP(realloc)(void *p, size_t n)
{
   OrigFn fn;
   void *r;
   VALGRIND_GET_ORIG_FN(fn);
   ENTER(SL_CALL_REALLOC, p);
   CALL_FN_W_WW(r, fn, p, n);
   DONE(SL_CALL_REALLOC, r, n);
   return r;
}

EXPORT void WRAP(free)(void *p);
EXPORT void WRAP(free)(void *p)
{
   OrigFn fn;
   VALGRIND_GET_ORIG_FN(fn);
   ENTER(SL_CALL_FREE, p);
   CALL_FN_v_W(fn, p);
   DONE(SL_CALL_FREE, 0, 0);
}

EXPORT int WRAP(posix_memalign)(void **out, size_t align, size_t n);
EXPORT int WRAP(posix_memalign)(void **out, size_t align, size_t n)
{
   OrigFn fn;
   long rc;
   VALGRIND_GET_ORIG_FN(fn);
   ENTER(SL_CALL_ALIGNED, 0);
   CALL_FN_W_WWW(rc, fn, out, align, n);
   DONE(SL_CALL_ALIGNED, rc == 0 ? *out : 0, n);
   return (int)rc;
}

#define WRAP_ALIGNED(name)                                                                 \
   EXPORT void *WRAP(name)(size_t align, size_t n);                                        \
   EXPORT void *WRAP(name)(size_t align, size_t n)                                         \
   {                                                                                       \
      OrigFn fn;                                                                           \
      void *r;                                                                             \
      VALGRIND_GET_ORIG_FN(fn);                                                            \
      ENTER(SL_CALL_ALIGNED, 0);                                                           \
      CALL_FN_W_WW(r, fn, align, n);                                                       \
      DONE(SL_CALL_ALIGNED, r, n);                                                         \
      return r;                                                                            \
   }
WRAP_ALIGNED(aligned_alloc)
WRAP_ALIGNED(memalign)

#define WRAP_PAGE_ALIGNED(name)                                                            \
   EXPORT void *WRAP(name)(size_t n);                                                      \
   EXPORT void *WRAP(name)(size_t n)                                                       \
   {                                                                                       \
      OrigFn fn;                                                                           \
      void *r;                                                                             \
      VALGRIND_GET_ORIG_FN(fn);                                                            \
      ENTER(SL_CALL_ALIGNED, 0);                                                           \
      CALL_FN_W_W(r, fn, n);                                                               \
      DONE(SL_CALL_ALIGNED, r, n);                                                         \
      return r;                                                                            \
   }
WRAP_PAGE_ALIGNED(valloc)
WRAP_PAGE_ALIGNED(pvalloc)
