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
 *   - the process's memory map at start and at exit (to symbolize allocation sites offline);
 *   - with SPELUNK_TRACK_RSS (or NMO_TRACK_RSS), capacity: its resident memory per NUMA node and
 *     mapping class, from /proc/self/numa_maps (else smaps), sampled by a detached thread.
 * NMO's environment variables (its USAGE) are read with NMO's meanings; the SPE ones are kept
 * in the log header (docs/runtime.md, "NMO's variables"). Nothing is ever written to the
 * program's stdout or stderr: problems with the configuration become note lines in the log.
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
#include <signal.h>
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
/* Capacity (SPELUNK_TRACK_RSS / NMO_TRACK_RSS): a sampler thread reads the process's resident
 * memory every rss_interval_ns. NMO's own tracker samples once a second (fixed), so that is
 * the default here too. */
static int track_rss;
static uint64_t rss_interval_ns = 1000000000u;
/* NMO's SPE settings (NMO_PERIOD, NMO_MODE, NMO_BUFSIZE, NMO_AUXBUFSIZE and their SPELUNK_*
 * names): accepted and written into the log header for `spelunk record` / a runtime that
 * records SPE; 0 / "" = not given. */
static uint64_t spe_period, spe_ring_mib, spe_aux_mib;
static const char *spe_mode = "";
/* Problems with the environment, logged as `N` lines once the log is open (the runtime never
 * writes to the program's stdout/stderr). */
#define MAX_NOTES 8
static const char *note_var[MAX_NOTES], *note_text[MAX_NOTES];
static int notes;

/* The log: a MAP_SHARED mapping of the file, and the next free byte. */
static char *log_map;
static int log_fd = -1;
static size_t log_used;
/* CLOCK_MONOTONIC at the log's start (in its header); lines carry times relative to it. */
static uint64_t log_start_ns;
static size_t log_dropped;
/* Bytes of the file allocated on disk (posix_fallocate, 1 MiB at a time): lines are only ever
 * written below this, so a full disk stops the log (counted as dropped) instead of raising
 * SIGBUS in the program. Only grows, under grow_lock. */
static size_t log_allocated;
static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;

static TLS int in_hook;  /* this thread is inside the runtime: pass allocations through */
static TLS long cached_tid;
/* " TID" in hex, formatted once per thread: every line starts with it. */
static TLS char tid_field[24];
static TLS size_t tid_field_len;

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

static void put_str(struct line *l, const char *s)
{
   for (; *s; s++) put_char(l, *s);
}

/* x's 8 hex digits, most significant first, as 8 ASCII bytes (no loop, no table): each nibble
 * is spread into its own byte, then '0'..'9' / 'a'..'f' are added in all bytes at once. */
static inline void hex8(uint32_t v, char out[8])
{
   uint64_t x = v;
   x = ((x & 0xffff0000u) << 16) | (x & 0xffffu);
   x = ((x & 0x0000ff000000ff00ull) << 8) | (x & 0x000000ff000000ffull);
   x = ((x & 0x00f000f000f000f0ull) << 4) | (x & 0x000f000f000f000full);
   uint64_t above9 = ((x + 0x0606060606060606ull) >> 4) & 0x0101010101010101ull;
   x += 0x3030303030303030ull + above9 * ('a' - '0' - 10);
   x = __builtin_bswap64(x); /* the lowest nibble was in the lowest byte: print it last */
   memcpy(out, &x, 8);
}

static inline void hex16(uint64_t v, char out[16])
{
   hex8((uint32_t)(v >> 32), out);
   hex8((uint32_t)v, out + 8);
}

/* ` HEX` at p (room for 17 bytes needed), no leading zeros; returns the end. The digits are
 * shifted to lead, stored in one go (8 or 16), and only the needed ones kept. */
static inline char *hex_field(char *p, uint64_t v)
{
   int n = (64 - __builtin_clzll(v | 1) + 3) / 4;
   *p++ = ' ';
   if (n <= 8)
      hex8((uint32_t)v << (4 * (8 - n)), p);
   else
      hex16(v << (4 * (16 - n)), p);
   return p + n;
}

/* v in hex, no leading zeros (at least one digit). The value is shifted so its digits lead,
 * all 16 are stored in one go and only the needed ones kept: no loop over digits, one bounds
 * check. */
static void put_digits(struct line *l, uint64_t v)
{
   int n = (64 - __builtin_clzll(v | 1) + 3) / 4;
   if (l->len + 16 >= LINE_MAX_BYTES) return;
   hex16(v << (4 * (16 - n)), l->buf + l->len);
   l->len += (size_t)n;
}

/* ` HEX`: a field. */
static void put_hex(struct line *l, uint64_t v)
{
   if (l->len + 1 + 16 >= LINE_MAX_BYTES) return;
   l->len = (size_t)(hex_field(l->buf + l->len, v) - l->buf);
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

/* Starts a line: kind, thread, time. The thread field is formatted once per thread (a forked
 * child's thread formats its own: cached_tid is reset), the time in one store of 16 digits. */
static void begin(struct line *l, char kind)
{
   if (__builtin_expect(!cached_tid, 0)) {
      struct line t;
      t.len = 0;
      put_hex(&t, (uint64_t)my_tid());
      memcpy(tid_field, t.buf, t.len);
      tid_field_len = t.len;
   }
   char *p = l->buf;
   *p++ = kind;
   memcpy(p, tid_field, 16); /* fixed size: one copy; only tid_field_len bytes count */
   p += tid_field_len;
   /* since the log's start (its header): fewer digits than the time since boot */
   p = hex_field(p, now_ns() - log_start_ns);
   l->len = (size_t)(p - l->buf);
}

/* Writes zeros into the file over [from, to): the page cache then holds the pages, so the
 * populate below maps them instead of faulting each through the filesystem's page_mkwrite
 * path (on ext4 that halves the kernel's share of a logged line). */
static int zero_fill(size_t from, size_t to)
{
   static const char zeros[1 << 14];
   while (from < to) {
      size_t n = to - from > sizeof zeros ? sizeof zeros : to - from;
      ssize_t w = pwrite(log_fd, zeros, n, (off_t)from);
      if (w <= 0) return -1;
      from += (size_t)w;
   }
   return 0;
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
      if (want < end || posix_fallocate(log_fd, 0, (off_t)want) != 0 ||
          zero_fill(have, want) != 0) {
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

/* memcpy for a line: the usual 16..64 bytes as fixed-size 16-byte copies (inlined; the last
 * overlaps the one before), never writing past dst[len) (the next bytes are another line's). */
static inline void copy_line(char *dst, const char *src, size_t len)
{
   if (len < 16 || len > 64) {
      memcpy(dst, src, len);
      return;
   }
   for (size_t at = 0; at + 16 < len; at += 16) memcpy(dst + at, src + at, 16);
   memcpy(dst + len - 16, src + len - 16, 16);
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
   copy_line(map + at, l->buf, l->len);
}

/* Calls fn(line, ctx) for each line of a /proc file, read with raw syscalls (no allocation);
 * a line longer than the buffer is cut. 0 when the file cannot be opened. */
static int each_line(const char *path, void (*fn)(char *line, void *ctx), void *ctx)
{
   int fd = open(path, O_RDONLY | O_CLOEXEC);
   if (fd < 0) return 0;
   char buf[4096], line[4200];
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
         fn(line, ctx);
      }
   }
   close(fd);
   return 1;
}

/* Appends /proc/self/maps to the log as `m` lines. */
static void emit_map_line(char *text, void *ctx)
{
   struct line *l = ctx;
   l->len = 0;
   put_char(l, 'm');
   put_char(l, ' ');
   put_str(l, text);
   emit(l);
}

static void dump_maps(void)
{
   struct line l;
   each_line("/proc/self/maps", emit_map_line, &l);
}

static const char *env2(const char *a, const char *b, const char **which)
{
   const char *v = getenv(a);
   if (which) *which = a;
   if (v && *v) return v;
   if (which) *which = b;
   return b ? getenv(b) : NULL;
}

static int truthy(const char *v)
{
   return v && *v && strcmp(v, "0") != 0 && strcasecmp(v, "no") != 0 &&
          strcasecmp(v, "off") != 0 && strcasecmp(v, "false") != 0;
}

/* A switch that is ours (truthy) or NMO's (NMO's USAGE: "defined" turns it on, whatever the
 * value, as NMO's starter tests only getenv() != NULL). */
static int switch_on(const char *ours, const char *nmos)
{
   const char *v = getenv(ours);
   if (v && *v) return truthy(v);
   return getenv(nmos) != NULL;
}

static void note(const char *var, const char *text)
{
   if (notes < MAX_NOTES) {
      note_var[notes] = var;
      note_text[notes++] = text;
   }
}

/* A whole decimal (or 0x hex) number; 0 when v is not one (and a note names var). */
static int number(const char *var, const char *v, uint64_t *out)
{
   char *end = NULL;
   errno = 0;
   unsigned long long n = strtoull(v, &end, 0);
   if (errno || end == v || *end || *v == '-') {
      note(var, "is not a whole number: ignored");
      return 0;
   }
   *out = n;
   return 1;
}

/* NMO's buffer sizes: MiB per thread, rounded down to a power of two; NMO takes what does not
 * parse (or 0) as 1 MiB, which is what is recorded here too, with a note. */
static uint64_t buffer_mib(const char *var, const char *v)
{
   uint64_t n = 0;
   if (!number(var, v, &n) || n == 0) {
      if (n == 0) note(var, "is 0: taken as 1 MiB, as NMO does");
      return 1;
   }
   return (uint64_t)1 << (63 - __builtin_clzll(n));
}

/* This process's name (/proc/self/comm) equals `target` (NMO_TARGET: only that program of a
 * launcher's tree is profiled). Read with raw syscalls: no allocation. */
static int comm_is(const char *target)
{
   char comm[64];
   int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
   if (fd < 0) return 0;
   ssize_t n = read(fd, comm, sizeof comm - 1);
   close(fd);
   if (n <= 0) return 0;
   if (comm[n - 1] == '\n') n--;
   comm[n] = 0;
   return strcmp(comm, target) == 0;
}

static void read_config(void)
{
   notes = 0;
   rt_enabled = switch_on("SPELUNK_ENABLE", "NMO_ENABLE");
   const char *v, *var;
   if ((v = env2("SPELUNK_TARGET", "NMO_TARGET", NULL)) && *v && !comm_is(v)) rt_enabled = 0;
   if ((v = env2("SPELUNK_OUTPUT", "NMO_NAME", &var)) && *v) {
      if (strlen(v) < sizeof out_base - 64)
         strcpy(out_base, v);
      else
         note(var, "is too long a path: the logs go to ./spelunk.rt.*");
   }
   uint64_t n;
   if ((v = getenv("SPELUNK_ALLOC_MIN_BYTES")) && *v && number("SPELUNK_ALLOC_MIN_BYTES", v, &n))
      alloc_min_bytes = n;
   if ((v = getenv("SPELUNK_ALLOC_STACK_DEPTH")) && *v) {
      long d = strtol(v, NULL, 0);
      stack_depth = d < 0 ? 0 : d > MAX_FRAMES - 2 ? MAX_FRAMES - 2 : (int)d;
   }
   if ((v = getenv("SPELUNK_LOG_MB")) && *v && number("SPELUNK_LOG_MB", v, &n)) {
      if (n >= 1 && n <= (1u << 20))
         log_capacity = (size_t)n << 20;
      else
         note("SPELUNK_LOG_MB", "is outside 1..1048576: the default 1024 is used");
   }
   track_rss = switch_on("SPELUNK_TRACK_RSS", "NMO_TRACK_RSS");
   if ((v = getenv("SPELUNK_RSS_INTERVAL_MS")) && *v && number("SPELUNK_RSS_INTERVAL_MS", v, &n)) {
      if (n >= 1 && n <= 3600000)
         rss_interval_ns = n * 1000000u;
      else
         note("SPELUNK_RSS_INTERVAL_MS", "is outside 1..3600000: the default 1000 is used");
   }
   if ((v = env2("SPELUNK_SPE_PERIOD", "NMO_PERIOD", &var)) && *v) number(var, v, &spe_period);
   if ((v = env2("SPELUNK_SPE_MODE", "NMO_MODE", &var)) && *v) {
      if (strcmp(v, "perp") == 0 || strcmp(v, "noperp") == 0 || strcmp(v, "pf") == 0)
         spe_mode = v;
      else
         note(var, "is not one of NMO's modes (perp, noperp, pf): ignored");
   }
   if ((v = env2("SPELUNK_SPE_RING_MIB", "NMO_BUFSIZE", &var)) && *v)
      spe_ring_mib = buffer_mib(var, v);
   if ((v = env2("SPELUNK_SPE_AUX_MIB", "NMO_AUXBUFSIZE", &var)) && *v)
      spe_aux_mib = buffer_mib(var, v);
}

/* ` key=HEX` in the header. */
static void put_setting(struct line *l, const char *key, uint64_t v)
{
   put_char(l, ' ');
   put_str(l, key);
   put_char(l, '=');
   put_digits(l, v);
}

/* A note about the configuration or the runtime itself: `N TID T VARIABLE TEXT`. */
static void log_note(const char *var, const char *text)
{
   struct line l;
   begin(&l, 'N');
   put_char(&l, ' ');
   put_str(&l, var);
   put_char(&l, ' ');
   put_str(&l, text);
   emit(&l);
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
   put_str(&l, "spelunk-rt/2");
   put_hex(&l, (uint64_t)pid);
   put_hex(&l, (uint64_t)getppid());
   log_start_ns = now_ns();
   put_hex(&l, log_start_ns);
   put_hex(&l, alloc_min_bytes);
   put_str(&l, " clock=monotonic");
   if (track_rss) put_setting(&l, "rss_interval_ns", rss_interval_ns);
   if (spe_period) put_setting(&l, "spe_period", spe_period);
   if (*spe_mode) {
      put_str(&l, " spe_mode=");
      put_str(&l, spe_mode);
   }
   if (spe_ring_mib) put_setting(&l, "spe_ring_mib", spe_ring_mib);
   if (spe_aux_mib) put_setting(&l, "spe_aux_mib", spe_aux_mib);
   emit(&l);
   for (int i = 0; i < notes; i++) log_note(note_var[i], note_text[i]);
   dump_maps();
}

/* ---- capacity: resident memory by node and class (SPELUNK_TRACK_RSS) -------------------- */

/* The classes of the sidecar's NodeResident, in its order. */
enum { CLASS_HEAP, CLASS_ANON, CLASS_FILE, CLASS_STACK, CLASSES };
#define MAX_NODES 64
#define MAX_NODES_PER_LINE 10

struct resident {
   uint64_t bytes[MAX_NODES][CLASSES]; /* numa_maps: per node; smaps: all in [0] */
   int cls;                            /* smaps: the class of the mapping being read */
};

static uint64_t parse_dec(const char **s)
{
   uint64_t v = 0;
   while (**s >= '0' && **s <= '9') v = v * 10 + (uint64_t)(*(*s)++ - '0');
   return v;
}

static int starts(const char *s, const char *prefix)
{
   return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A numa_maps line (proc(5)): `ADDR POLICY [file=PATH | heap | stack] ... [N<node>=<pages>
 * ...] kernelpagesize_kB=K`; fields are found by their names (the policy may hold spaces).
 * The same classes as the recorder's sampler (crates/record/src/timeline.rs). */
static void add_numa_line(char *line, void *ctx)
{
   struct resident *r = ctx;
   int cls = CLASS_ANON, nn = 0;
   uint32_t node[MAX_NODES];
   uint64_t pages[MAX_NODES], page_kib = 0;
   for (char *f = strchr(line, ' '); f; f = strchr(f, ' ')) {
      f++;
      if (starts(f, "file="))
         cls = starts(f + 5, "/anon_hugepage") ? CLASS_ANON : CLASS_FILE;
      else if (starts(f, "heap ") || strcmp(f, "heap") == 0)
         cls = CLASS_HEAP;
      else if (starts(f, "stack ") || strcmp(f, "stack") == 0)
         cls = CLASS_STACK;
      else if (starts(f, "kernelpagesize_kB=")) {
         const char *p = f + 18;
         page_kib = parse_dec(&p);
      } else if (f[0] == 'N' && f[1] >= '0' && f[1] <= '9' && nn < MAX_NODES) {
         const char *p = f + 1;
         uint64_t n = parse_dec(&p);
         if (*p++ != '=' || n >= MAX_NODES) continue;
         node[nn] = (uint32_t)n;
         pages[nn++] = parse_dec(&p);
      }
   }
   for (int i = 0; i < nn; i++) r->bytes[node[i]][cls] += pages[i] * page_kib * 1024;
}

/* An smaps line: a mapping's header (`START-END PERMS OFFSET DEV INODE [PATHNAME]`, starting
 * with a lower-case hex digit) sets the class; its `Rss:` line (kB) adds to it. */
static void add_smaps_line(char *line, void *ctx)
{
   struct resident *r = ctx;
   char c = line[0];
   if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) {
      const char *p = line;
      for (int f = 0; f < 5 && *p; f++) {
         while (*p == ' ') p++;
         while (*p && *p != ' ') p++;
      }
      while (*p == ' ') p++;
      r->cls = !*p                                                 ? CLASS_ANON
               : strcmp(p, "[heap]") == 0                          ? CLASS_HEAP
               : strcmp(p, "[stack]") == 0 || starts(p, "[stack:") ? CLASS_STACK
               : *p == '[' || starts(p, "/anon_hugepage")          ? CLASS_ANON
                                                                   : CLASS_FILE;
   } else if (starts(line, "Rss:")) {
      const char *p = line + 4;
      while (*p == ' ') p++;
      r->bytes[0][r->cls] += parse_dec(&p) * 1024;
   }
}

/* One capacity sample: `R TID T n NODE HEAP ANON FILE STACK...` (per NUMA node with memory,
 * from /proc/self/numa_maps) or `R TID T s - HEAP ANON FILE STACK` (a kernel without NUMA
 * support has no numa_maps: /proc/self/smaps, node unknown). */
static void rss_sample(void)
{
   struct resident r;
   memset(&r, 0, sizeof r);
   int numa = each_line("/proc/self/numa_maps", add_numa_line, &r);
   if (!numa) {
      r.cls = CLASS_ANON;
      if (!each_line("/proc/self/smaps", add_smaps_line, &r)) return;
   }
   struct line l;
   begin(&l, 'R');
   put_str(&l, numa ? " n" : " s");
   for (int n = 0, groups = 0; n < (numa ? MAX_NODES : 1) && groups < MAX_NODES_PER_LINE; n++) {
      uint64_t *b = r.bytes[n];
      if (numa && !(b[0] | b[1] | b[2] | b[3])) continue;
      groups++;
      if (numa)
         put_hex(&l, (uint64_t)n);
      else
         put_str(&l, " -");
      for (int c = 0; c < CLASSES; c++) put_hex(&l, b[c]);
   }
   emit(&l);
}

/* The sampler: every rss_interval_ns on CLOCK_MONOTONIC (a sample that overran skips the
 * missed ticks), until the process ends; never joined. */
static void *rss_thread(void *arg)
{
   (void)arg;
   in_hook = 1; /* anything it allocates passes through unlogged */
   uint64_t next = now_ns();
   for (;;) {
      next += rss_interval_ns;
      uint64_t now = now_ns();
      if (next <= now) next = now + rss_interval_ns;
      struct timespec ts = {(time_t)(next / 1000000000u), (long)(next % 1000000000u)};
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
      }
      rss_sample();
   }
   return NULL;
}

/* Takes the first sample now (so every image has one from before its own allocations) and
 * starts the sampler thread of this process (at start, and in a forked child, which has no
 * copy of its parent's). It is created with every signal blocked, so no signal the program
 * expects is ever delivered to it, and detached: exit does not wait for it. */
static void start_sampler(void)
{
   if (!track_rss || !log_map) return;
   rss_sample();
   pthread_attr_t attr;
   if (pthread_attr_init(&attr) != 0) return;
   pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
   pthread_attr_setstacksize(&attr, (size_t)256 << 10);
   sigset_t all, old;
   sigfillset(&all);
   pthread_sigmask(SIG_SETMASK, &all, &old);
   pthread_t t;
   int err = pthread_create(&t, &attr, rss_thread, NULL);
   pthread_sigmask(SIG_SETMASK, &old, NULL);
   pthread_attr_destroy(&attr);
   if (err != 0)
      log_note("SPELUNK_TRACK_RSS", "the sampler thread could not be started: no capacity");
}

/* Ends the log: the memory map again and a trailer with the drop count. The mapping stays
 * (other threads may still be writing while exit handlers run) and the file keeps its
 * allocated size; the zero bytes after the last line are not part of the log. */
static void close_log(void)
{
   if (!log_map) return;
   in_hook++;
   if (track_rss) rss_sample(); /* the last sample, at the clean end */
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
   /* Another thread of the parent may have held the lock at the fork: the child's is fresh. */
   pthread_mutex_init(&grow_lock, NULL);
   open_log();
   start_sampler();
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
      start_sampler();
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
struct tag_query {
   const char *name, *path;
   uint64_t addr;
};

static void tag_if_match(char *line, void *ctx)
{
   const struct tag_query *q = ctx;
   const char *s = line;
   uint64_t start = parse_hex(&s);
   if (*s++ != '-') return;
   uint64_t end = parse_hex(&s);
   /* the path is the sixth field */
   const char *p = s;
   for (int f = 0; f < 4 && *p; f++) {
      while (*p == ' ') p++;
      while (*p && *p != ' ') p++;
   }
   while (*p == ' ') p++;
   int hit = q->path ? strcmp(p, q->path) == 0 : (q->addr >= start && q->addr < end);
   if (hit) log_range(q->name, start, end);
}

static void tag_maps(const char *name, uint64_t addr, const char *path)
{
   struct tag_query q = {name, path, addr};
   each_line("/proc/self/maps", tag_if_match, &q);
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
