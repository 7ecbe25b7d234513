/* libspelunk.so -- spelunk's LD_PRELOAD runtime (issue "The NMO runtime").
 *
 * Loaded into an unmodified program (LD_PRELOAD=libspelunk.so SPELUNK_ENABLE=1 ./app, or by
 * `spelunk record`), it records, with the calling thread and a CLOCK_MONOTONIC timestamp:
 *   - the annotation calls of include/spelunk.h (ABI v1: phases, objects, tagged mappings) and of
 *     NMO's API (nmo_start/nmo_stop/nmo_tag_addr/nmo_tag_from_maps, see include/nmo.h);
 *   - heap blocks by allocation site: malloc, calloc, realloc, free, posix_memalign,
 *     aligned_alloc, memalign, valloc, pvalloc, mmap, munmap. Blocks of at least
 *     SPELUNK_ALLOC_MIN_BYTES (default 4096) are logged with a few return addresses of the
 *     allocating call, unwound by glibc's backtrace() (libgcc's unwinder); smaller blocks pass
 *     straight through;
 *   - the process's memory map at start and at exit (to symbolize allocation sites offline).
 *
 * Everything goes to a per-process log file, docs/runtime.md "Log format": one text line per
 * event, written into a MAP_SHARED mapping of the file. The page cache owns what was written,
 * so nothing recorded before an _exit(), abort(), fatal signal or SIGKILL is lost. Space in the
 * mapping is reserved with a lock-free compare-and-swap, so threads never wait on each other;
 * when the log is full, events are counted as dropped (the count is in the trailer line).
 *
 * Why C and hand-written: an allocator interposer must not allocate, lock or recurse into the
 * allocator it replaces; a C file with a thread-local guard is the smallest thing that does
 * that. The real allocator is glibc's, reached through its exported __libc_* entry points
 * (no dlsym bootstrap needed); mmap/munmap are reached through dlsym(RTLD_NEXT).
 *
 * Licence: MIT OR Apache-2.0, as the Rust crates. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define TLS __thread __attribute__((tls_model("initial-exec")))

/* glibc's own allocator entry points (exported since glibc 2.0). */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern size_t malloc_usable_size(void *);

#define MAX_FRAMES 16
#define LINE_MAX_BYTES 1024
#define NAME_MAX_BYTES 255

/* Configuration, read once by the constructor (and again in a forked child's log). */
static int rt_enabled;
static size_t alloc_min_bytes = 4096;
static int stack_depth = 6;
static size_t log_capacity = (size_t)1 << 30; /* address space reserved for the log */
#define LOG_CHUNK_BYTES ((size_t)1 << 20)
static char out_base[4096] = "spelunk";

/* The log: a MAP_SHARED mapping of the file, and the next free byte. */
static char *log_map;
static int log_fd = -1;
static size_t log_used;
static size_t log_dropped;
/* Bytes of the file allocated on disk (posix_fallocate, 1 MiB at a time): lines are only ever
 * written below this, so a full disk stops the log (counted as dropped) instead of raising
 * SIGBUS in the program. Only grows, under grow_lock. */
static size_t log_allocated;
static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;

static TLS int in_hook;  /* this thread is inside the runtime: pass allocations through */
static TLS long cached_tid;

static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static int (*real_munmap)(void *, size_t);

static long my_tid(void)
{
   if (!cached_tid) cached_tid = syscall(SYS_gettid);
   return cached_tid;
}

static uint64_t now_ns(void)
{
   struct timespec ts;
   clock_gettime(CLOCK_MONOTONIC, &ts);
   return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A line under construction (on the caller's stack). */
struct line {
   char buf[LINE_MAX_BYTES];
   size_t len;
};

static void put_char(struct line *l, char c)
{
   if (l->len < LINE_MAX_BYTES - 1) l->buf[l->len++] = c;
}

static void put_hex(struct line *l, uint64_t v)
{
   /* Digits needed (at least one), then written from the last; one bounds check. */
   int n = (64 - __builtin_clzll(v | 1) + 3) / 4;
   if (l->len + 1 + (size_t)n >= LINE_MAX_BYTES) return;
   char *p = l->buf + l->len;
   *p = ' ';
   for (int i = n; i > 0; i--) {
      p[i] = "0123456789abcdef"[v & 15];
      v >>= 4;
   }
   l->len += 1 + (size_t)n;
}

/* A name: at most NAME_MAX_BYTES bytes, control characters (newline included) as '?'. */
static void put_name(struct line *l, const char *s)
{
   put_char(l, ' ');
   if (!s) return;
   size_t room = LINE_MAX_BYTES - 1 - l->len;
   if (room > NAME_MAX_BYTES) room = NAME_MAX_BYTES;
   char *p = l->buf + l->len;
   size_t i = 0;
   for (; i < room && s[i]; i++) {
      unsigned char c = (unsigned char)s[i];
      p[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
   }
   l->len += i;
}

/* Starts a line: kind, thread, time. */
static void begin(struct line *l, char kind)
{
   l->len = 0;
   put_char(l, kind);
   put_hex(l, (uint64_t)my_tid());
   put_hex(l, now_ns());
}

/* Makes sure the file is allocated up to `end` bytes; 0 when it cannot be (log full). */
static int ensure_allocated(size_t end)
{
   if (end <= __atomic_load_n(&log_allocated, __ATOMIC_ACQUIRE)) return 1;
   int ok = 1;
   pthread_mutex_lock(&grow_lock);
   size_t have = __atomic_load_n(&log_allocated, __ATOMIC_RELAXED);
   if (end > have) {
      size_t want = (end + LOG_CHUNK_BYTES - 1) / LOG_CHUNK_BYTES * LOG_CHUNK_BYTES;
      if (want > log_capacity) want = log_capacity;
      if (want < end || posix_fallocate(log_fd, 0, (off_t)want) != 0) {
         ok = 0;
      } else {
#ifdef MADV_POPULATE_WRITE
         /* Fault the new chunk's pages in now, one call, rather than one fault per page
          * inside later annotation calls (Linux 5.14+; harmless where unsupported). */
         madvise(log_map + have, want - have, MADV_POPULATE_WRITE);
#endif
         __atomic_store_n(&log_allocated, want, __ATOMIC_RELEASE);
      }
   }
   pthread_mutex_unlock(&grow_lock);
   return ok;
}

/* Copies a finished line into the log (lock-free reservation). */
static void emit(struct line *l)
{
   char *map = __atomic_load_n(&log_map, __ATOMIC_ACQUIRE);
   if (!map) return;
   l->buf[l->len++] = '\n';
   size_t at = __atomic_load_n(&log_used, __ATOMIC_RELAXED);
   for (;;) {
      if (at + l->len > log_capacity) {
         __atomic_fetch_add(&log_dropped, 1, __ATOMIC_RELAXED);
         return;
      }
      if (__atomic_compare_exchange_n(&log_used, &at, at + l->len, 0, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED))
         break;
   }
   if (!ensure_allocated(at + l->len)) {
      __atomic_fetch_add(&log_dropped, 1, __ATOMIC_RELAXED);
      return; /* the reserved bytes stay zero: readers skip them */
   }
   memcpy(map + at, l->buf, l->len);
}

/* Appends /proc/self/maps to the log as `m` lines (read with raw syscalls: no allocation). */
static void dump_maps(void)
{
   int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
   if (fd < 0) return;
   char buf[4096];
   struct line l;
   l.len = 0;
   put_char(&l, 'm');
   put_char(&l, ' ');
   ssize_t n;
   while ((n = read(fd, buf, sizeof buf)) > 0) {
      for (ssize_t i = 0; i < n; i++) {
         if (buf[i] == '\n') {
            emit(&l);
            l.len = 0;
            put_char(&l, 'm');
            put_char(&l, ' ');
         } else {
            put_char(&l, buf[i]);
         }
      }
   }
   close(fd);
}

static const char *env2(const char *a, const char *b)
{
   const char *v = getenv(a);
   return v && *v ? v : (b ? getenv(b) : NULL);
}

static int truthy(const char *v)
{
   return v && *v && strcmp(v, "0") != 0 && strcasecmp(v, "no") != 0 &&
          strcasecmp(v, "off") != 0 && strcasecmp(v, "false") != 0;
}

static void read_config(void)
{
   rt_enabled = truthy(env2("SPELUNK_ENABLE", "NMO_ENABLE"));
   const char *v;
   if ((v = env2("SPELUNK_OUTPUT", "NMO_NAME")) && *v && strlen(v) < sizeof out_base - 64)
      strcpy(out_base, v);
   if ((v = getenv("SPELUNK_ALLOC_MIN_BYTES")) && *v) alloc_min_bytes = strtoull(v, NULL, 0);
   if ((v = getenv("SPELUNK_ALLOC_STACK_DEPTH")) && *v) {
      long d = strtol(v, NULL, 0);
      stack_depth = d < 0 ? 0 : d > MAX_FRAMES - 2 ? MAX_FRAMES - 2 : (int)d;
   }
   if ((v = getenv("SPELUNK_LOG_MB")) && *v) {
      unsigned long long mb = strtoull(v, NULL, 0);
      if (mb >= 1 && mb <= (1u << 20)) log_capacity = (size_t)mb << 20;
   }
}

/* Opens OUT.rt.PID.N (the first N not taken: exec keeps the pid) and maps it. */
static void open_log(void)
{
   char path[4200];
   int fd = -1;
   pid_t pid = getpid();
   for (int n = 0; n < 1000 && fd < 0; n++) {
      char *p = stpcpy(path, out_base);
      p = stpcpy(p, ".rt.");
      struct line num;
      num.len = 0;
      put_hex(&num, (uint64_t)pid);
      memcpy(p, num.buf + 1, num.len - 1);
      p += num.len - 1;
      *p++ = '.';
      num.len = 0;
      put_hex(&num, (uint64_t)n);
      memcpy(p, num.buf + 1, num.len - 1);
      p[num.len - 1] = 0;
      fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0 && errno != EEXIST) break;
   }
   if (fd < 0) return;
   /* The whole capacity is mapped over a file that grows 1 MiB at a time (ensure_allocated);
    * nothing is ever written past what is allocated. */
   void *m = real_mmap ? real_mmap(NULL, log_capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                       : mmap(NULL, log_capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
   if (m == MAP_FAILED) {
      close(fd);
      return;
   }
   log_fd = fd;
   log_used = 0;
   log_dropped = 0;
   log_allocated = 0;
   __atomic_store_n(&log_map, (char *)m, __ATOMIC_RELEASE);
   struct line l;
   l.len = 0;
   const char *hdr = "spelunk-rt/1";
   for (const char *c = hdr; *c; c++) put_char(&l, *c);
   put_hex(&l, (uint64_t)pid);
   put_hex(&l, (uint64_t)getppid());
   put_hex(&l, now_ns());
   put_hex(&l, alloc_min_bytes);
   emit(&l);
   dump_maps();
}

/* Ends the log: the memory map again and a trailer with the drop count. The mapping stays
 * (other threads may still be writing while exit handlers run) and the file keeps its
 * allocated size; the zero bytes after the last line are not part of the log. */
static void close_log(void)
{
   if (!log_map) return;
   in_hook++;
   dump_maps();
   struct line l;
   begin(&l, 'Z');
   put_hex(&l, __atomic_load_n(&log_dropped, __ATOMIC_RELAXED));
   emit(&l);
   in_hook--;
}

static void after_fork_child(void)
{
   /* The child has its own pid and only the forking thread; its log is its own file. */
   cached_tid = 0;
   if (!rt_enabled || !log_map) return;
   in_hook++;
   __atomic_store_n(&log_map, NULL, __ATOMIC_RELEASE); /* the parent's, left mapped, unused */
   if (log_fd >= 0) close(log_fd);
   log_fd = -1;
   open_log();
   in_hook--;
}

__attribute__((constructor)) static void rt_init(void)
{
   in_hook++;
   real_mmap = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
   real_munmap = (int (*)(void *, size_t))dlsym(RTLD_NEXT, "munmap");
   read_config();
   if (rt_enabled) {
      void *warm[2];
      backtrace(warm, 2); /* loads libgcc's unwinder now, not inside the first malloc */
      pthread_atfork(NULL, NULL, after_fork_child);
      open_log();
   }
   in_hook--;
}

__attribute__((destructor)) static void rt_fini(void)
{
   close_log();
}

/* ---- allocation sites ------------------------------------------------------------------ */

/* kind: m malloc, c calloc, r realloc, a aligned, p mmap. */
__attribute__((noinline)) static void log_alloc(char kind, void *p, size_t size)
{
   void *frames[MAX_FRAMES];
   in_hook++;
   /* frames[0] is this function, frames[1] the interposed allocator, then the caller. */
   int n = stack_depth ? backtrace(frames, stack_depth + 2) : 0;
   struct line l;
   begin(&l, 'A');
   put_hex(&l, (uint64_t)(uintptr_t)p);
   put_hex(&l, size);
   put_char(&l, ' ');
   put_char(&l, kind);
   for (int i = 2; i < n; i++) put_hex(&l, (uint64_t)(uintptr_t)frames[i]);
   emit(&l);
   in_hook--;
}

static void log_release(char kind, void *p, size_t size)
{
   struct line l;
   begin(&l, kind);
   put_hex(&l, (uint64_t)(uintptr_t)p);
   put_hex(&l, size);
   emit(&l);
}

static inline int tracking(void)
{
   return __builtin_expect(log_map != NULL, 0) && !in_hook;
}

EXPORT void *malloc(size_t size)
{
   void *p = __libc_malloc(size);
   if (tracking() && p && size >= alloc_min_bytes) log_alloc('m', p, size);
   return p;
}

EXPORT void *calloc(size_t n, size_t size)
{
   void *p = __libc_calloc(n, size);
   size_t total = n * size; /* calloc succeeded, so this did not overflow */
   if (tracking() && p && total >= alloc_min_bytes) log_alloc('c', p, total);
   return p;
}

/* A block that may have been logged: its usable size reaches the threshold. A free of an
 * unlogged block that passes this test is harmless (readers ignore unknown addresses). */
static inline int maybe_logged(void *p)
{
   return p && malloc_usable_size(p) >= alloc_min_bytes;
}

EXPORT void free(void *p)
{
   if (tracking() && maybe_logged(p)) log_release('X', p, 0);
   __libc_free(p);
}

EXPORT void *realloc(void *old, size_t size)
{
   int was = tracking() && maybe_logged(old);
   void *p = __libc_realloc(old, size);
   if (!tracking()) return p;
   if (was && (p || size == 0)) log_release('X', old, 0);
   if (p && size >= alloc_min_bytes) log_alloc('r', p, size);
   return p;
}

EXPORT void *memalign(size_t align, size_t size)
{
   void *p = __libc_memalign(align, size);
   if (tracking() && p && size >= alloc_min_bytes) log_alloc('a', p, size);
   return p;
}

EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
   if (align < sizeof(void *) || (align & (align - 1)) != 0) return EINVAL;
   void *p = __libc_memalign(align, size);
   if (!p) return ENOMEM;
   *out = p;
   if (tracking() && size >= alloc_min_bytes) log_alloc('a', p, size);
   return 0;
}

EXPORT void *aligned_alloc(size_t align, size_t size)
{
   void *p = __libc_memalign(align, size);
   if (tracking() && p && size >= alloc_min_bytes) log_alloc('a', p, size);
   return p;
}

EXPORT void *valloc(size_t size)
{
   void *p = __libc_memalign((size_t)sysconf(_SC_PAGESIZE), size);
   if (tracking() && p && size >= alloc_min_bytes) log_alloc('a', p, size);
   return p;
}

EXPORT void *pvalloc(size_t size)
{
   size_t page = (size_t)sysconf(_SC_PAGESIZE);
   size_t rounded = (size + page - 1) & ~(page - 1);
   void *p = __libc_memalign(page, rounded ? rounded : page);
   if (tracking() && p && rounded >= alloc_min_bytes) log_alloc('a', p, rounded);
   return p;
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
   if (!real_mmap) {
      real_mmap = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
      if (!real_mmap) {
         errno = ENOSYS;
         return MAP_FAILED;
      }
   }
   void *p = real_mmap(addr, len, prot, flags, fd, off);
   if (tracking() && p != MAP_FAILED && (flags & MAP_ANONYMOUS) && len >= alloc_min_bytes)
      log_alloc('p', p, len);
   return p;
}

EXPORT int munmap(void *addr, size_t len)
{
   if (!real_munmap) {
      real_munmap = (int (*)(void *, size_t))dlsym(RTLD_NEXT, "munmap");
      if (!real_munmap) {
         errno = ENOSYS;
         return -1;
      }
   }
   int r = real_munmap(addr, len);
   if (r == 0 && tracking() && len >= alloc_min_bytes) log_release('U', addr, len);
   return r;
}

/* ---- include/spelunk.h, ABI v1 ------------------------------------------------------ */

EXPORT unsigned spelunk_abi_v1_version(void)
{
   return 1;
}

static void log_named(char kind, const char *name)
{
   if (!log_map) return;
   in_hook++;
   struct line l;
   begin(&l, kind);
   put_name(&l, name);
   emit(&l);
   in_hook--;
}

EXPORT void spelunk_abi_v1_phase_begin(const char *name)
{
   log_named('B', name);
}

EXPORT void spelunk_abi_v1_phase_end(const char *name)
{
   log_named('E', name);
}

EXPORT void spelunk_abi_v1_object(const char *name, const void *addr, unsigned long long size)
{
   if (!log_map) return;
   in_hook++;
   struct line l;
   begin(&l, 'O');
   put_hex(&l, (uint64_t)(uintptr_t)addr);
   put_hex(&l, size);
   put_name(&l, name);
   emit(&l);
   in_hook--;
}

EXPORT void spelunk_abi_v1_object_free(const void *addr)
{
   if (!log_map) return;
   in_hook++;
   struct line l;
   begin(&l, 'F');
   put_hex(&l, (uint64_t)(uintptr_t)addr);
   emit(&l);
   in_hook--;
}

/* A tagged range [start, end) (kind 'G'): the mapping containing addr, read from maps. */
static void log_range(const char *name, uint64_t start, uint64_t end)
{
   struct line l;
   begin(&l, 'G');
   put_hex(&l, start);
   put_hex(&l, end);
   put_name(&l, name);
   emit(&l);
}

static uint64_t parse_hex(const char **s)
{
   uint64_t v = 0;
   for (;;) {
      char c = **s;
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) return v;
      v = v << 4 | (uint64_t)d;
      (*s)++;
   }
}

/* Finds the mappings of /proc/self/maps matching (by address, or by path/pseudo-name) and logs
 * each as a tagged range. */
static void tag_maps(const char *name, uint64_t addr, const char *path)
{
   int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
   if (fd < 0) return;
   char buf[8192], line[4200];
   size_t ll = 0;
   ssize_t n;
   while ((n = read(fd, buf, sizeof buf)) > 0) {
      for (ssize_t i = 0; i < n; i++) {
         if (buf[i] != '\n') {
            if (ll < sizeof line - 1) line[ll++] = buf[i];
            continue;
         }
         line[ll] = 0;
         ll = 0;
         const char *s = line;
         uint64_t start = parse_hex(&s);
         if (*s++ != '-') continue;
         uint64_t end = parse_hex(&s);
         /* the path is the sixth field */
         const char *p = s;
         for (int f = 0; f < 4 && *p; f++) {
            while (*p == ' ') p++;
            while (*p && *p != ' ') p++;
         }
         while (*p == ' ') p++;
         int hit = path ? strcmp(p, path) == 0 : (addr >= start && addr < end);
         if (hit) log_range(name, start, end);
      }
   }
   close(fd);
}

EXPORT void spelunk_abi_v1_tag_mapping(const char *name, const void *addr)
{
   if (!log_map) return;
   in_hook++;
   tag_maps(name, (uint64_t)(uintptr_t)addr, NULL);
   in_hook--;
}

/* ---- NMO's API (include/nmo.h): the calls of NMO's USAGE, mapped to the above ---------- */

EXPORT void nmo_start(const char *tag)
{
   spelunk_abi_v1_phase_begin(tag);
}

EXPORT void nmo_stop(void)
{
   spelunk_abi_v1_phase_end(NULL);
}

EXPORT void nmo_tag_addr(const char *tag, void *start, void *end)
{
   if (!log_map) return;
   in_hook++;
   uint64_t s = (uint64_t)(uintptr_t)start, e = (uint64_t)(uintptr_t)end;
   log_range(tag, s, e > s ? e : s);
   in_hook--;
}

EXPORT void nmo_tag_from_maps(const char *tag, const char *file)
{
   if (!log_map || !file) return;
   in_hook++;
   tag_maps(tag, 0, file);
   in_hook--;
}
