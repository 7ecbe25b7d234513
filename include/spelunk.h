/* spelunk.h -- annotate phases and data objects for spelunk.
 *
 * Header-only, C99/C++11, no dependency. Include it and call:
 *
 *     spelunk_object("a", a, n * sizeof a[0]);   // name a data object (address range)
 *     spelunk_tag_mapping("arena", ptr);         // name the whole mapping containing ptr
 *     spelunk_phase_begin("triad");              // phases nest, per thread
 *     ...
 *     spelunk_phase_end("triad");
 *
 * Cost when no spelunk runtime is loaded: each call tests one pointer that the dynamic linker
 * resolved to NULL at load time -- one load and one always-not-taken branch, nothing else
 * (the approach of NVTX). When a runtime is loaded (the emulator's Valgrind preload library,
 * or the hardware LD_PRELOAD runtime), the same pointers resolve to its definitions.
 *
 * ---------------------------------------------------------------------------------------------
 * ABI, version 1 (stable). A runtime defines any subset of these C symbols with default
 * visibility; the header references them weakly:
 *
 *   unsigned spelunk_abi_v1_version(void);            returns 1 (the ABI it implements)
 *   void spelunk_abi_v1_phase_begin(const char *name);
 *   void spelunk_abi_v1_phase_end(const char *name);   name may be NULL (closes the innermost)
 *   void spelunk_abi_v1_object(const char *name, const void *addr, unsigned long long size);
 *   void spelunk_abi_v1_object_free(const void *addr); addr as given to _object
 *   void spelunk_abi_v1_tag_mapping(const char *name, const void *addr);
 *
 * Rules: strings are NUL-terminated UTF-8 and are copied during the call (runtimes keep at
 * least 255 bytes); calls may come from any thread and are recorded with that thread's id and
 * a timestamp; phases nest per thread; nothing is returned to the program. Later versions add
 * spelunk_abi_v2_* symbols next to these; v1 symbols are never changed or removed.
 *
 * The weak references must stay dynamic symbols so the dynamic linker can bind them: true for
 * position-independent executables and shared libraries (the default of current GCC and Clang
 * on Linux) and, with GNU ld, for -no-pie executables too. A static executable keeps the
 * annotations as no-ops. Define SPELUNK_DISABLE to compile every annotation out.
 * ---------------------------------------------------------------------------------------------
 */
#ifndef SPELUNK_H
#define SPELUNK_H

#define SPELUNK_ABI_VERSION 1

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SPELUNK_DISABLE) || !(defined(__GNUC__) || defined(__clang__))

static inline int spelunk_runtime_loaded(void) { return 0; }
static inline void spelunk_phase_begin(const char *name) { (void)name; }
static inline void spelunk_phase_end(const char *name) { (void)name; }
static inline void spelunk_object(const char *name, const void *addr, unsigned long long size)
{
   (void)name; (void)addr; (void)size;
}
static inline void spelunk_object_free(const void *addr) { (void)addr; }
static inline void spelunk_tag_mapping(const char *name, const void *addr)
{
   (void)name; (void)addr;
}

#else

/* The addresses are only recorded, never read through: tell GCC (11+), so that naming a
   freshly allocated, not yet written buffer is no -Wmaybe-uninitialized warning. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#define SPELUNK_ADDR_ONLY(n) __attribute__((access(none, n)))
#else
#define SPELUNK_ADDR_ONLY(n)
#endif
extern unsigned spelunk_abi_v1_version(void) __attribute__((weak));
extern void spelunk_abi_v1_phase_begin(const char *name) __attribute__((weak));
extern void spelunk_abi_v1_phase_end(const char *name) __attribute__((weak));
extern void spelunk_abi_v1_object(const char *name, const void *addr,
                                  unsigned long long size) __attribute__((weak))
    SPELUNK_ADDR_ONLY(2);
extern void spelunk_abi_v1_object_free(const void *addr) __attribute__((weak))
    SPELUNK_ADDR_ONLY(1);
extern void spelunk_abi_v1_tag_mapping(const char *name, const void *addr)
    __attribute__((weak)) SPELUNK_ADDR_ONLY(2);

/* 1 when a spelunk runtime implementing ABI v1 is loaded. */
static inline int spelunk_runtime_loaded(void)
{
   return spelunk_abi_v1_version != 0 && spelunk_abi_v1_version() >= 1;
}

/* Opens a phase on the calling thread. Phases nest. */
static inline void spelunk_phase_begin(const char *name)
{
   if (__builtin_expect(spelunk_abi_v1_phase_begin != 0, 0)) spelunk_abi_v1_phase_begin(name);
}

/* Closes the innermost phase of the calling thread (name is recorded to check pairing). */
static inline void spelunk_phase_end(const char *name)
{
   if (__builtin_expect(spelunk_abi_v1_phase_end != 0, 0)) spelunk_abi_v1_phase_end(name);
}

/* Names the data object occupying [addr, addr + size). */
static inline void spelunk_object(const char *name, const void *addr, unsigned long long size)
{
   if (__builtin_expect(spelunk_abi_v1_object != 0, 0)) spelunk_abi_v1_object(name, addr, size);
}

/* The object registered at addr is gone (freed). */
static inline void spelunk_object_free(const void *addr)
{
   if (__builtin_expect(spelunk_abi_v1_object_free != 0, 0)) spelunk_abi_v1_object_free(addr);
}

/* Names the whole memory mapping that contains addr (as NMO's tag-from-maps). */
static inline void spelunk_tag_mapping(const char *name, const void *addr)
{
   if (__builtin_expect(spelunk_abi_v1_tag_mapping != 0, 0))
      spelunk_abi_v1_tag_mapping(name, addr);
}

#endif

#ifdef __cplusplus
} /* extern "C" */

namespace spelunk {
/* RAII phase: `spelunk::Phase p("solve");` */
class Phase {
 public:
   explicit Phase(const char *name) : name_(name) { spelunk_phase_begin(name_); }
   ~Phase() { spelunk_phase_end(name_); }
   Phase(const Phase &) = delete;
   Phase &operator=(const Phase &) = delete;

 private:
   const char *name_;
};
} /* namespace spelunk */
#endif

#endif /* SPELUNK_H */
