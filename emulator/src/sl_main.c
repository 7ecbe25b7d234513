/* SPDX-License-Identifier: GPL-2.0-or-later (a Valgrind tool; see LICENSE.md) */
/* spelunk emulator: the Valgrind tool.
 *
 * Instrumentation (one dirty call per executed superblock):
 *   - Every guest instruction is cracked into ops: one per memory access, one for a control
 *     transfer, and one for value-producing computation (or one op when the instruction has
 *     none of these). Ops are what SPE samples and what INST_SPEC counts.
 *   - Addresses, guards and indirect targets are stored inline into sl_evbuf[]; at each exit of
 *     the superblock a (guarded) call to sl_flush() replays the superblock's ops in program
 *     order through the model with those values.
 *   - A static data-flow pass over the IR gives each address/condition a dependency mask: the
 *     loads of the same superblock and the guest registers it derives from. Register ready
 *     times are carried across superblocks per thread, so dependent loads (pointer chasing)
 *     serialise and independent ones overlap.
 * See emulator/MODEL.md for the model and emulator/FORMAT.md for the output.
 */
#include "pub_tool_basics.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_mallocfree.h"
#include "pub_tool_machine.h"
#include "pub_tool_options.h"
#include "pub_tool_threadstate.h"
#include "pub_tool_aspacemgr.h"
#include "pub_tool_clientstate.h"
#include "pub_tool_vki.h"
#include "pub_tool_vkiscnums.h"
#include "pub_tool_guest.h"
#include "pub_tool_hashtable.h"
#include "pub_tool_xarray.h"
#include "pub_tool_debuginfo.h"
#include "valgrind.h"

#include "sl_model.h"
#include "sl_trace.h"
#include "spelunk_clreq.h"

#define SL_TOOL_VERSION "0.1.0"

#if defined(VGA_amd64)
#define SL_HOST_ARCH "amd64"
#elif defined(VGA_arm64)
#define SL_HOST_ARCH "arm64"
#else
#error "spelunk supports amd64 and arm64 guests"
#endif

/* ------------------------------------------------------------------------------------------ */
/* options                                                                                    */

static SlConfig cfg;
static const HChar *clo_out = "spelunk.emutrace";
static Long clo_switch_max = 20000, clo_switch_min = 100;
static Long clo_timeline_us = 100;
static Bool clo_model = True; /* debug: --model=no measures the instrumentation alone */
/* heap blocks (--track-allocs, below) */
static Bool clo_track_allocs = True;
static Long clo_alloc_min_bytes = 4096;
static Long clo_alloc_stack_depth = 8;
#define SL_MAX_ALLOC_FRAMES 32

/* "START-END[,START-END...]" (hexadecimal, END exclusive) into lo/hi; False when malformed or
 * more than SL_MAX_KNOB_RANGES. */
static Bool parse_ranges(const HChar *v, Addr *lo, Addr *hi, UInt *n)
{
   HChar *end;
   *n = 0;
   while (*v) {
      if (*n == SL_MAX_KNOB_RANGES) return False;
      lo[*n] = (Addr)VG_(strtoull16)(v, &end);
      if (end == v || *end != '-') return False;
      v = end + 1;
      hi[*n] = (Addr)VG_(strtoull16)(v, &end);
      if (end == v || hi[*n] <= lo[*n] || (*end && *end != ',')) return False;
      (*n)++;
      v = *end ? end + 1 : end;
   }
   return *n > 0;
}

static Bool parse_filter(const HChar *v)
{
   /* "all", or a comma-separated subset of load,store,branch */
   UInt f = 0;
   const HChar *p = v;
   if (VG_(strcmp)(v, "all") == 0 || v[0] == 0) {
      cfg.spe_type_filter = 0;
      return True;
   }
   while (*p) {
      const HChar *e = p;
      Int n;
      while (*e && *e != ',') e++;
      n = (Int)(e - p);
      if (n == 4 && VG_(strncmp)(p, "load", 4) == 0) f |= SL_FILT_LOAD;
      else if (n == 5 && VG_(strncmp)(p, "store", 5) == 0) f |= SL_FILT_STORE;
      else if (n == 6 && VG_(strncmp)(p, "branch", 6) == 0) f |= SL_FILT_BRANCH;
      else return False;
      p = *e ? e + 1 : e;
   }
   cfg.spe_type_filter = f;
   return True;
}

/* Presets (--platform, --cpu-model) are applied after every option was read; the options that
 * set configuration fields override them whatever their order. cfg_explicit marks the bytes of
 * `cfg` an option wrote (found by parsing each option over two fill patterns). */
static const HChar *clo_platform, *clo_cpu_model;
static UChar cfg_explicit[sizeof(SlConfig)];

static Bool parse_option(const HChar *arg);

static Bool sl_process_cmd_line_option(const HChar *arg)
{
   SlConfig saved = cfg;
   UChar *b = (UChar *)&cfg;
   UInt i, fill;
   if (VG_STR_CLO(arg, "--platform", clo_platform)) {
      if (!sl_platform_known(clo_platform))
         VG_(fmsg_bad_option)(arg, "unknown platform; valid: " SL_PLATFORMS "\n");
      return True;
   }
   if (VG_STR_CLO(arg, "--cpu-model", clo_cpu_model)) {
      if (!sl_cpu_model_known(clo_cpu_model))
         VG_(fmsg_bad_option)(arg, "unknown core; valid: " SL_CPU_MODELS "\n");
      return True;
   }
   for (fill = 0; fill < 2; fill++) {
      VG_(memset)(&cfg, fill ? 0xff : 0, sizeof cfg);
      if (!parse_option(arg)) {
         cfg = saved;
         return False;
      }
      for (i = 0; i < sizeof cfg; i++)
         if (b[i] != (fill ? 0xff : 0)) cfg_explicit[i] = 1;
   }
   cfg = saved;
   return parse_option(arg);
}

/* Applies the presets under the explicitly set fields (sl_post_clo_init). */
static void apply_presets(void)
{
   SlConfig preset;
   const HChar *err;
   UChar *p = (UChar *)&preset;
   const UChar *e = (const UChar *)&cfg;
   UInt i;
   if (!clo_platform && !clo_cpu_model) return;
   sl_config_default(&preset);
   err = sl_config_preset(&preset, clo_platform, clo_cpu_model);
   if (err) {
      VG_(fmsg)("spelunk: %s\n", err);
      VG_(exit)(1);
   }
   for (i = 0; i < sizeof preset; i++)
      if (cfg_explicit[i]) p[i] = e[i];
   cfg = preset;
}

static Bool parse_option(const HChar *arg)
{
   const HChar *s;
   Long v;
#define U32OPT(name, field)                                                                 \
   if (VG_INT_CLO(arg, name, v)) {                                                          \
      if (v < 0 || v > 0xffffffffLL) VG_(fmsg_bad_option)(arg, "out of range\n");          \
      cfg.field = (UInt)v;                                                                  \
      return True;                                                                          \
   }
   if (VG_STR_CLO(arg, "--out", clo_out)) return True;
   if (VG_STR_CLO(arg, "--filter", s)) {
      if (!parse_filter(s)) VG_(fmsg_bad_option)(arg, "expected all or load,store,branch\n");
      return True;
   }
   if (VG_BOOL_CLO(arg, "--jitter", cfg.spe_jitter)) return True;
   if (VG_BOOL_CLO(arg, "--model", clo_model)) return True;
   if (VG_BOOL_CLO(arg, "--track-allocs", clo_track_allocs)) return True;
   if (VG_INT_CLO(arg, "--alloc-min-bytes", clo_alloc_min_bytes)) {
      if (clo_alloc_min_bytes < 0) VG_(fmsg_bad_option)(arg, "must be 0 or more\n");
      return True;
   }
   if (VG_INT_CLO(arg, "--alloc-stack-depth", clo_alloc_stack_depth)) {
      if (clo_alloc_stack_depth < 1 || clo_alloc_stack_depth > SL_MAX_ALLOC_FRAMES)
         VG_(fmsg_bad_option)(arg, "must be 1 to 32\n");
      return True;
   }
   if (VG_BOOL_CLO(arg, "--collisions", cfg.spe_collisions)) return True;
   if (VG_BOOL_CLO(arg, "--ts", cfg.spe_ts)) return True;
   if (VG_BOOL_CLO(arg, "--pa", cfg.spe_pa)) return True;
   if (VG_STR_CLO(arg, "--cpu-name", cfg.cpu_name)) return True;
   if (VG_STR_CLO(arg, "--midr", s)) {
      HChar *end;
      cfg.midr = (ULong)VG_(strtoull16)(s, &end);
      if (*end) VG_(fmsg_bad_option)(arg, "expected a hexadecimal MIDR\n");
      return True;
   }
   if (VG_STR_CLO(arg, "--event-filter", s)) {
      HChar *end;
      cfg.spe_event_filter = (ULong)VG_(strtoull16)(s, &end);
      if (*end) VG_(fmsg_bad_option)(arg, "expected a hexadecimal event mask\n");
      return True;
   }
   if (VG_INT_CLO(arg, "--cpu-hz", v)) { cfg.cpu_hz = (ULong)v; return True; }
   if (VG_INT_CLO(arg, "--timer-hz", v)) { cfg.timer_hz = (ULong)v; return True; }
   if (VG_INT_CLO(arg, "--page-size", v)) {
      UInt sh = 0;
      while (sh < 40 && (1LL << sh) < v) sh++;
      if ((1LL << sh) != v) VG_(fmsg_bad_option)(arg, "page size must be a power of two\n");
      cfg.page_shift = sh;
      return True;
   }
   if (VG_STR_CLO(arg, "--l1-pcs", s)) {
      if (!parse_ranges(s, cfg.l1_pc_lo, cfg.l1_pc_hi, &cfg.n_l1_pcs))
         VG_(fmsg_bad_option)(arg, "expected up to 8 hexadecimal START-END ranges, comma-separated\n");
      return True;
   }
   if (VG_STR_CLO(arg, "--huge-range", s)) {
      if (!parse_ranges(s, cfg.huge_lo, cfg.huge_hi, &cfg.n_huge_ranges))
         VG_(fmsg_bad_option)(arg, "expected up to 8 hexadecimal START-END ranges, comma-separated\n");
      return True;
   }
   if (VG_STR_CLO(arg, "--no-transfer-range", s)) {
      if (!parse_ranges(s, cfg.no_transfer_lo, cfg.no_transfer_hi, &cfg.n_no_transfer))
         VG_(fmsg_bad_option)(arg, "expected up to 8 hexadecimal START-END ranges, comma-separated\n");
      return True;
   }
   if (VG_STR_CLO(arg, "--forward-pcs", s)) {
      if (!parse_ranges(s, cfg.forward_pc_lo, cfg.forward_pc_hi, &cfg.n_forward_pcs))
         VG_(fmsg_bad_option)(arg, "expected up to 8 hexadecimal START-END ranges, comma-separated\n");
      return True;
   }
   if (VG_STR_CLO(arg, "--no-split-pcs", s)) {
      if (!parse_ranges(s, cfg.no_split_pc_lo, cfg.no_split_pc_hi, &cfg.n_no_split_pcs))
         VG_(fmsg_bad_option)(arg, "expected up to 8 hexadecimal START-END ranges, comma-separated\n");
      return True;
   }
   if (VG_STR_CLO(arg, "--thp", s)) {
      if (!sl_thp_parse(s, &cfg.thp)) VG_(fmsg_bad_option)(arg, "expected always, madvise or never\n");
      return True;
   }
   if (VG_INT_CLO(arg, "--switch-cycles", clo_switch_max)) return True;
   if (VG_INT_CLO(arg, "--switch-min-cycles", clo_switch_min)) return True;
   if (VG_INT_CLO(arg, "--timeline-us", clo_timeline_us)) return True;
   U32OPT("--period", spe_interval)
   U32OPT("--min-latency", spe_min_latency)
   U32OPT("--counter-bits", spe_counter_bits)
   U32OPT("--l1d-size", l1d_size)
   U32OPT("--l1d-assoc", l1d_assoc)
   U32OPT("--l1d-lat", l1d_lat)
   U32OPT("--l1i-size", l1i_size)
   U32OPT("--l1i-assoc", l1i_assoc)
   U32OPT("--l2-size", l2_size)
   U32OPT("--l2-assoc", l2_assoc)
   U32OPT("--l2-lat", l2_lat)
   U32OPT("--slc-size", slc_size)
   U32OPT("--slc-assoc", slc_assoc)
   U32OPT("--slc-lat", slc_lat)
   U32OPT("--dram-lat", dram_lat)
   U32OPT("--dram-channels", dram_channels)
   U32OPT("--dram-channel-mbps", dram_channel_mbps)
   U32OPT("--peer-lat", peer_lat)
   U32OPT("--split-penalty", split_penalty)
   U32OPT("--fwd-lat", fwd_lat)
   U32OPT("--fwd-fail-penalty", fwd_fail_penalty)
   U32OPT("--prefetch-distance", prefetch_distance)
   U32OPT("--stride-distance", stride_distance)
   U32OPT("--stride-max-lines", stride_max_lines)
   U32OPT("--dtlb-entries", l1dtlb_entries)
   U32OPT("--itlb-entries", l1itlb_entries)
   U32OPT("--stlb-entries", l2tlb_entries)
   U32OPT("--stlb-assoc", l2tlb_assoc)
   U32OPT("--l1tlb-lat", l1tlb_lat)
   U32OPT("--l2tlb-lat", l2tlb_lat)
   U32OPT("--walk-lat", walk_lat)
   U32OPT("--dispatch-width", dispatch_width)
   U32OPT("--rob", rob_size)
   U32OPT("--ls-queue", ls_issue_queue)
   U32OPT("--mshrs", mshrs)
   U32OPT("--store-buffer", store_buffer)
   U32OPT("--mispredict-penalty", mispredict_penalty)
   U32OPT("--cores", max_cores)
   U32OPT("--seed", seed)
#undef U32OPT
   return False;
}

static void sl_print_usage(void)
{
   VG_(printf)(
      "    --out=<file>               trace file; %%p expands to the pid [spelunk.emutrace]\n"
      "    --period=<ops>             SPE sampling interval, rounded down to a multiple of 256 [1024]\n"
      "    --jitter=yes|no            random perturbation of the interval (PMSIRR.RND) [no]\n"
      "    --filter=all|load,store,branch  SPE operation-type filter [all]\n"
      "    --min-latency=<cycles>     SPE minimum total-latency filter [0 = off]\n"
      "    --event-filter=<hexmask>   SPE events filter (PMSEVFR) [0 = off]\n"
      "    --collisions=yes|no        model sample collisions [yes]\n"
      "    --ts=yes|no --pa=yes|no    timestamps / physical addresses in samples [yes]\n"
      "    --cpu-model=<name>         emulated core: " SL_CPU_MODELS " [neoverse-n1]\n"
      "    --platform=<name>          system preset (core, clock, L2, SLC, page size, DRAM latency,\n"
      "                               cores): " SL_PLATFORMS "\n"
      "                               (options that set a parameter override the presets,\n"
      "                               whatever their order; emulator/MODEL.md)\n"
      "    --cpu-hz=<hz> --timer-hz=<hz>  core clock [2800000000], generic timer [1000000000]\n"
      "    --midr=<hex> --cpu-name=<s>    CPU identity claimed [0x413fd0c1 Neoverse N1]\n"
      "    --page-size=<bytes>        base page size of every mapping [4096; 65536 on grace]\n"
      "    --thp=always|madvise|never transparent huge pages (the granule's 2 MB blocks with\n"
      "                               4 KB pages): anonymous regions, advised ones, none [madvise]\n"
      "    --l1-pcs=<lo>-<hi>[,...]   counterfactual: loads of these PCs (hex, end exclusive)\n"
      "                               complete at the L1D latency\n"
      "    --huge-range=<lo>-<hi>[,...]  counterfactual: huge pages in these address ranges\n"
      "                               whatever the THP policy and the mapping\n"
      "    --no-transfer-range=<lo>-<hi>[,...]  counterfactual: each core its own copy of these\n"
      "                               lines (no ownership transfers between cores)\n"
      "    --forward-pcs=<lo>-<hi>[,...]  counterfactual: loads of these PCs take a pending\n"
      "                               store's data at the L1D latency, without waiting for it\n"
      "    --no-split-pcs=<lo>-<hi>[,...]  counterfactual: accesses of these PCs do not split\n"
      "    --timeline-us=<us>         virtual time between counter snapshots [100, 0 = off]\n"
      "    --cores=<n>                virtual cores, 1-1024 (threads beyond share cores) [64]\n"
      "    --track-allocs=yes|no      log heap blocks with their stacks and exact accesses [yes]\n"
      "    --alloc-min-bytes=<n>      smallest block logged (malloc family, anonymous mmap) [4096]\n"
      "    --alloc-stack-depth=<n>    frames kept per block, 1-32 [8]\n"
      "    --switch-cycles=<n> --switch-min-cycles=<n>  thread interleaving quantum [20000, 100]\n"
      "    model geometry and latencies: --l1d-size --l1d-assoc --l1d-lat --l1i-size --l1i-assoc\n"
      "      --l2-size --l2-assoc --l2-lat --slc-size --slc-assoc --slc-lat --dram-lat --peer-lat\n"
      "      --dram-channels --dram-channel-mbps (DRAM bandwidth: channels, MB/s each; 0 = unlimited)\n"
      "      --split-penalty --fwd-lat --fwd-fail-penalty\n"
      "      --prefetch-distance --stride-distance --stride-max-lines --dtlb-entries\n"
      "      --itlb-entries --stlb-entries --stlb-assoc\n"
      "      --l1tlb-lat --l2tlb-lat --walk-lat --dispatch-width --rob --ls-queue --mshrs\n"
      "      --store-buffer --mispredict-penalty --counter-bits --seed\n");
}

static void sl_print_debug_usage(void)
{
   VG_(printf)("    --model=no                 skip the model (measures the instrumentation alone)\n");
}

/* ------------------------------------------------------------------------------------------ */
/* global state                                                                               */

static SlSystem *sys;
static SlTrace trace;
static Bool trace_enabled;

#define SL_MAX_THREADS 1024
#define SL_NSLOTS 40    /* shadowed guest-state words */
#define SL_NLDSLOTS 88  /* loads per superblock tracked as dependency sources (bits 0-87 of an
                          * SlDeps; bits 88-127 are the SL_NSLOTS guest-state words) */
#define SL_RDY_ZERO (SL_NLDSLOTS + SL_NSLOTS) /* a source that is always ready */

typedef struct {
   Bool live;
   Int os_tid;
   UInt core;
   ThreadId parent;
   UInt depth;          /* phase nesting */
   ULong slice_start;   /* core time at the start of the scheduling slice */
   ULong quantum;       /* tq */
   Bool blocked;        /* in a system call that may block */
   /* ready times (tq) of the dependency sources: [0, SL_NLDSLOTS) the loads of the superblock
    * being replayed, then the SL_NSLOTS guest-state words (carried across superblocks) */
   ULong rdy[SL_NLDSLOTS + SL_NSLOTS + 1]; /* + SL_RDY_ZERO, always 0 */
   Bool announced;
   HChar name[16];      /* as the kernel's comm: inherited at creation, set by PR_SET_NAME */
   UInt in_alloc;       /* inside a wrapped allocator call (its mmaps are not blocks) */
   ULong realloc_id;    /* the block a realloc in progress started from (0: none) */
} SlThread;

static SlThread threads[SL_MAX_THREADS];
static SlThread *cur;
static ThreadId cur_tid;
static SlCore *cur_core;
static UInt n_live;
static UInt core_owner[SL_MAX_CORES]; /* live threads per core */
static ULong next_snapshot[SL_MAX_CORES];
static ULong timeline_tq;
static Int main_pid;
static ULong samples_written;
static ULong stat_yields, stat_slices, stat_switches, stat_os_yields;
static Bool yield_pending; /* a forced yield has not been followed by another thread yet */
static UInt handover_retries; /* consecutive yields repeated because the lock came straight back */
static ULong stat_retries;
static ThreadId last_slice_tid;
static ULong events_total, last_event_slice;

/* written by instrumented code, read by sl_flush */
#define SL_MAXSLOTS 1024
static ULong sl_evbuf[SL_MAXSLOTS];

/* ------------------------------------------------------------------------------------------ */
/* guest-state shadow slots                                                                   */

#define SL_GS_BASE 16 /* first tracked guest-state offset */
#if defined(VGA_amd64)
#define SL_SP_OFF offsetof(VexGuestAMD64State, guest_RSP)
#define SL_IP_OFF offsetof(VexGuestAMD64State, guest_RIP)
#define SL_CCOP_OFF offsetof(VexGuestAMD64State, guest_CC_OP)
#else
#define SL_SP_OFF offsetof(VexGuestARM64State, guest_XSP)
#define SL_IP_OFF offsetof(VexGuestARM64State, guest_PC)
#define SL_CCOP_OFF offsetof(VexGuestARM64State, guest_CC_OP)
#endif

static inline Int off2slot(Int off)
{
   Int s;
   if (off < SL_GS_BASE) return -1;
   s = (off - SL_GS_BASE) / 8;
   if (s >= SL_NSLOTS) return -1;
   if (off >= (Int)SL_IP_OFF && off < (Int)SL_IP_OFF + 8) return -1;
   return s;
}

/* ------------------------------------------------------------------------------------------ */
/* superblock descriptors                                                                     */

enum { IT_ALU = 1, IT_LOAD, IT_STORE, IT_BCOND, IT_BEND, IT_PREFETCH };

/* A dependency set as the replay reads it: n sources (SlThread.rdy indices), the first two
 * inline (SL_RDY_ZERO or repeated when fewer), more in SlSbDesc.deps[off, off + n). */
typedef struct {
   UChar n, s0, s1;
   UShort off;
} SlSrc;

typedef struct {
   UChar kind;
   UChar sub;       /* load/store subclass byte, SlBranchKind for branches, SlPrefetchTarget
                     * for prefetches */
   UChar inverted;  /* IT_BCOND: the exit is taken when the branch is NOT taken */
   Char ldslot;     /* IT_LOAD: dependency-source slot, -1 if none */
   UShort slot;     /* sl_evbuf slot (address / guard / target); 0xffff = static */
   UShort size;     /* access size; IT_ALU: number of ops */
   UInt alu;        /* IT_ALU: first SlAluOp */
   UShort counts[3]; /* IT_ALU: DP, ASE, VFP ops among them */
   SlSrc src;       /* deps as sources, for the replay */
   UChar obj_hint;  /* loads/stores: the annotated object hit last (a hint, validated) */
   UInt blk_hint;   /* loads/stores: the heap block slot hit last (a hint, validated) */
   SlDeps deps;     /* address / condition / target dependencies (bit i: SlThread.rdy[i]) */
   SlDeps ddeps;    /* IT_STORE: the stored data's dependencies (store-to-load forwarding) */
   SlSrc dsrc;      /* ddeps as sources */
   Addr pc, target, fallthrough;
   SlMemMemo memo;  /* loads/stores: where the replay found the line last (see sl_model.h) */
} SlItem;

typedef struct {
   UShort last_item;   /* items [0, last_item) are processed */
   UShort n_insns;
   UShort n_lines;
   UShort wb_first, wb_n;
   UShort wb_nz;       /* direct exits: the writebacks [wb_nz, wb_n) have no sources (their
                        * words become ready at 0) */
   Bool wb_direct;     /* the writebacks are ordered so each can be stored as it is computed
                        * (none reads a word written before it); else two passes */
} SlExit;

typedef struct {
   UChar slot;
   SlSrc src;
   SlDeps deps;
} SlWriteback;

/* A writeback as the replay applies it: rdy[dst] = max(rdy[s0], rdy[s1]) when its source
 * list has at most two members (s0/s1 as in SlSrc), else from SlWriteback.src (many). */
typedef struct {
   UChar dst, s0, s1, many;
} SlWbRun;

/* One per translation: what sl_flush replays. Registered in sb_descs under the translation's
 * closure->nraddr (the VgHashNode header must come first), and freed when Valgrind discards
 * the translation (sl_discard_superblock), so retranslation (code unloaded and loaded again,
 * a full translation table) does not leak them. */
typedef struct SlSbDesc {
   struct SlSbDesc *next; /* VgHashNode */
   UWord key;             /* closure->nraddr */
   Bool pinned;           /* another live translation had the same key: never freed */
   Addr base;
   UInt n_items, n_exits, n_alu, n_wb, n_lines, n_deps;
   SlItem *items;
   SlExit *exits;
   SlAluOp *alu;
   SlWriteback *wb;
   SlWbRun *wbr;    /* the writebacks in replay form (same indices as wb) */
   Addr *lines;
   UChar *deps;     /* dependency lists of the items and writebacks (SlThread.rdy indices) */
   SlIRun irun;     /* where its code lines were found last (sl_flush) */
} SlSbDesc;

static VgHashTable *sb_descs;
static ULong stat_sb_made, stat_sb_freed;

static void sb_free(SlSbDesc *d)
{
   VG_(free)(d->items);
   VG_(free)(d->exits);
   VG_(free)(d->alu);
   VG_(free)(d->wb);
   VG_(free)(d->wbr);
   VG_(free)(d->lines);
   VG_(free)(d->deps);
   VG_(free)(d);
}

/* Records d as the descriptor of the translation of nraddr. Valgrind discards each
 * translation exactly once, by that key (pub_tool_tooliface.h); should two live translations
 * share a key, neither is ever freed (a bounded leak, never a use after free). */
static void sb_register(SlSbDesc *d, Addr nraddr)
{
   SlSbDesc *same = VG_(HT_lookup)(sb_descs, (UWord)nraddr);
   d->key = (UWord)nraddr;
   if (same) same->pinned = d->pinned = True;
   VG_(HT_add_node)(sb_descs, d);
   stat_sb_made++;
}

static void sl_discard_superblock(Addr orig_addr, VexGuestExtents vge)
{
   SlSbDesc *d = VG_(HT_remove)(sb_descs, (UWord)orig_addr);
   (void)vge;
   if (!d || d->pinned) return;
   SL_ASSERT(d->key == (UWord)orig_addr);
   sb_free(d);
   stat_sb_freed++;
}

/* Latest ready time of a dependency set (0 when empty). */
static inline ULong deps_ready(SlDeps m, const ULong *rdy)
{
   ULong r = 0, lo = (ULong)m, hi = (ULong)(m >> 64);
   while (lo) {
      ULong v = rdy[__builtin_ctzll(lo)];
      if (v > r) r = v;
      lo &= lo - 1;
   }
   while (hi) {
      ULong v = rdy[64 + __builtin_ctzll(hi)];
      if (v > r) r = v;
      hi &= hi - 1;
   }
   return r;
}

/* The same from the source form. */
static inline ULong src_ready(const SlSrc *s, const UChar *pool, const ULong *rdy)
{
   ULong r, v;
   UInt i;
   if (SL_LIKELY(s->n <= 2)) {
      r = rdy[s->s0];
      v = rdy[s->s1];
      return v > r ? v : r;
   }
   r = 0;
   for (i = 0; i < s->n; i++) {
      v = rdy[pool[s->off + i]];
      if (v > r) r = v;
   }
   return r;
}

static UInt deps_count(SlDeps m)
{
   return (UInt)__builtin_popcountll((ULong)m) + (UInt)__builtin_popcountll((ULong)(m >> 64));
}

/* The source form of m; members beyond two are appended to d->deps. */
static SlSrc deps_src(SlSbDesc *d, SlDeps m)
{
   SlSrc r;
   UInt b, k = 0;
   r.n = (UChar)deps_count(m);
   r.s0 = r.s1 = SL_RDY_ZERO;
   r.off = (UShort)d->n_deps;
   for (; m; m &= m - 1) {
      b = (ULong)m ? (UInt)__builtin_ctzll((ULong)m) : 64 + (UInt)__builtin_ctzll((ULong)(m >> 64));
      if (k == 0) r.s0 = r.s1 = (UChar)b;
      else if (k == 1) r.s1 = (UChar)b;
      if (r.n > 2) d->deps[d->n_deps++] = (UChar)b;
      k++;
   }
   return r;
}

/* Orders an exit's writebacks so that every one that reads a guest-state word comes before
 * the one that overwrites it; marks the exit direct when such an order exists. */
static void order_writebacks(SlExit *x, SlWriteback *wb)
{
   SlWriteback tmp[SL_NSLOTS];
   Bool done[SL_NSLOTS];
   UInt n = x->wb_n, out = 0, i, j;
   for (i = 0; i < n; i++) done[i] = False;
   while (out < n) {
      Bool progress = False;
      for (i = 0; i < n; i++) {
         Bool read_by_other = False;
         if (done[i]) continue;
         for (j = 0; j < n; j++) {
            if (j != i && !done[j] && ((wb[j].deps >> (SL_NLDSLOTS + wb[i].slot)) & 1)) {
               read_by_other = True;
               break;
            }
         }
         if (read_by_other) continue;
         tmp[out++] = wb[i];
         done[i] = True;
         progress = True;
      }
      if (!progress) {
         x->wb_direct = False; /* a cycle: compute all, then store */
         return;
      }
   }
   /* those without sources last (they read no word, so the order stays valid), stored
    * without computing a maximum */
   out = 0;
   for (i = 0; i < n; i++)
      if (tmp[i].deps) wb[out++] = tmp[i];
   x->wb_nz = (UShort)out;
   for (i = 0; i < n; i++)
      if (!tmp[i].deps) wb[out++] = tmp[i];
   x->wb_direct = True;
}

/* Prepares a descriptor's dependency sets for the replay. */
static void sb_finalize(SlSbDesc *d)
{
   UInt n = 0, j;
   for (j = 0; j < d->n_exits; j++) order_writebacks(&d->exits[j], &d->wb[d->exits[j].wb_first]);
   for (j = 0; j < d->n_items; j++) n += deps_count(d->items[j].deps) + deps_count(d->items[j].ddeps);
   for (j = 0; j < d->n_wb; j++) n += deps_count(d->wb[j].deps);
   if (n > 0xffff) VG_(tool_panic)("spelunk: superblock too large (dependencies)");
   d->deps = VG_(malloc)("spelunk.sbdesc", n + 1);
   d->n_deps = 0;
   for (j = 0; j < d->n_items; j++) {
      d->items[j].src = deps_src(d, d->items[j].deps);
      d->items[j].dsrc = deps_src(d, d->items[j].ddeps);
   }
   for (j = 0; j < d->n_wb; j++) d->wb[j].src = deps_src(d, d->wb[j].deps);
   d->wbr = VG_(malloc)("spelunk.sbdesc", (d->n_wb + 1) * sizeof(SlWbRun));
   for (j = 0; j < d->n_wb; j++) {
      d->wbr[j].dst = (UChar)(SL_NLDSLOTS + d->wb[j].slot);
      d->wbr[j].s0 = d->wb[j].src.s0;
      d->wbr[j].s1 = d->wb[j].src.s1;
      d->wbr[j].many = d->wb[j].src.n > 2;
   }
   /* every dependency list was stored, and each exit's items and writebacks are in range */
   SL_ASSERT(d->n_deps <= n);
   for (j = 0; j < d->n_exits; j++) {
      SL_ASSERT(d->exits[j].last_item <= d->n_items);
      SL_ASSERT((UInt)d->exits[j].wb_first + d->exits[j].wb_n <= d->n_wb);
   }
}

static ULong alu_ready(void *ctx, SlDeps deps)
{
   (void)ctx;
   return cur ? deps_ready(deps, cur->rdy) : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* output helpers                                                                             */

static UInt sl_strnlen(const HChar *s, UInt max)
{
   UInt n = 0;
   while (n < max && s[n]) n++;
   return n;
}

/* Copies a NUL-terminated string from client memory, checking every page is readable. */
static UInt copy_client_str(Addr a, HChar *out, UInt max)
{
   UInt n = 0;
   if (!a) { out[0] = 0; return 0; }
   while (n + 1 < max) {
      Addr p = a + n;
      if (n == 0 || (p & 4095) == 0) {
         if (!VG_(am_is_valid_for_client)(p, 1, VKI_PROT_READ)) break;
      }
      out[n] = *(const HChar *)p;
      if (!out[n]) break;
      n++;
   }
   out[n] = 0;
   return n;
}

static void emit_sample(void *ctx, const SlSample *s)
{
   (void)ctx;
   if (!trace_enabled) return;
   if (!cfg.spe_late_prefetch && (s->events & SL_EV_LATE_PREFETCH)) {
      /* bit 12 is N1's IMPLEMENTATION DEFINED "late prefetch"; other cores do not define it */
      SlSample t = *s;
      t.events &= ~SL_EV_LATE_PREFETCH;
      slt_sample(&trace, cur ? (UInt)cur->os_tid : 0, &t);
   } else {
      slt_sample(&trace, cur ? (UInt)cur->os_tid : 0, s);
   }
   samples_written++;
}

static ULong core_ticks(SlCore *c) { return sl_ticks(sys, c->t); }

static void emit_counters(SlThread *th, SlCore *c, UChar reason)
{
   ULong v[SL_NCOUNTERS];
   if (!trace_enabled) return;
   sl_core_counters(c, v);
   slt_counters(&trace, &cfg, th ? (UInt)th->os_tid : 0, c->id, reason, core_ticks(c),
                sl_cycles(c->t), v);
}

static void emit_mapping(Addr start, SizeT len, Bool r, Bool w, Bool x, ULong off,
                         const HChar *path)
{
   UInt n = path ? sl_strnlen(path, 4096) : 0;
   if (!trace_enabled) return;
   slt_begin(&trace, SLT_MMAP);
   slt_u32(&trace, (UInt)main_pid);
   slt_u32(&trace, cur ? (UInt)cur->os_tid : (UInt)main_pid);
   slt_u64(&trace, start);
   slt_u64(&trace, len);
   slt_u64(&trace, off);
   slt_u32(&trace, (r ? 1u : 0u) | (w ? 2u : 0u) | (x ? 4u : 0u));
   slt_u32(&trace, path ? 1u : 0u);
   slt_u64(&trace, cur_core ? core_ticks(cur_core) : 0);
   slt_bytes(&trace, path ? path : "", n);
   slt_end(&trace);
}

static void emit_segment_at(Addr a, SizeT len, Bool r, Bool w, Bool x)
{
   NSegment const *seg = VG_(am_find_nsegment)(a);
   const HChar *path = NULL;
   ULong off = 0;
   if (seg && seg->kind == SkFileC) {
      path = VG_(am_get_filename)(seg);
      off = (ULong)seg->offset + (a - seg->start);
   }
   emit_mapping(a, len, r, w, x, off, path);
}

static void emit_thread_name(SlThread *th, const HChar *name)
{
   UInt n = sl_strnlen(name, 64);
   if (!trace_enabled) return;
   slt_begin(&trace, SLT_THREAD_NAME);
   slt_u32(&trace, (UInt)th->os_tid);
   slt_u32(&trace, 0);
   slt_u64(&trace, core_ticks(sl_core(sys, th->core)));
   slt_bytes(&trace, name, n);
   slt_end(&trace);
}

static void emit_thread_start(SlThread *th, ThreadId tid)
{
   SlCore *c = sl_core(sys, th->core);
   if (!trace_enabled) return;
   slt_begin(&trace, SLT_THREAD_START);
   slt_u32(&trace, (UInt)main_pid);
   slt_u32(&trace, (UInt)th->os_tid);
   slt_u32(&trace, th->parent ? (UInt)threads[th->parent].os_tid : 0);
   slt_u16(&trace, (UShort)th->core);
   slt_u16(&trace, 0);
   slt_u64(&trace, core_ticks(c));
   slt_u32(&trace, tid);
   slt_u32(&trace, 0);
   slt_end(&trace);
   emit_thread_name(th, th->name);
   emit_counters(th, c, SLR_THREAD_START);
}


/* ------------------------------------------------------------------------------------------ */
/* threads and cores                                                                          */

static UInt pick_core(void)
{
   UInt i;
   for (i = 0; i < cfg.max_cores; i++)
      if (core_owner[i] == 0) return i;
   /* more threads than cores: share the least loaded core */
   {
      UInt best = 0;
      for (i = 1; i < cfg.max_cores; i++)
         if (core_owner[i] < core_owner[best]) best = i;
      return best;
   }
}

static void thread_create(ThreadId tid, ThreadId parent)
{
   SlThread *th;
   SlCore *c;
   if (tid >= SL_MAX_THREADS) VG_(tool_panic)("spelunk: too many threads");
   th = &threads[tid];
   VG_(memset)(th, 0, sizeof *th);
   th->live = True;
   th->parent = parent;
   th->core = pick_core();
   th->quantum = (ULong)clo_switch_max * SL_TQ;
   if (parent && parent < SL_MAX_THREADS && threads[parent].live) {
      VG_(memcpy)(th->name, threads[parent].name, sizeof th->name);
   } else {
      /* the main thread is named after the executable's file name (15 bytes, as comm) */
      const HChar *exe = VG_(args_the_exename), *b = exe;
      for (; exe && *exe; exe++)
         if (*exe == '/') b = exe + 1;
      VG_(strncpy)(th->name, b ? b : "", sizeof th->name - 1);
   }
   core_owner[th->core]++;
   n_live++;
   c = sl_core(sys, th->core);
   sl_core_set_active(c, True);
   /* a new thread starts at its creator's time */
   if (parent && threads[parent].live) sl_core_sync_clock(c, sl_core(sys, threads[parent].core)->t);
   if (next_snapshot[th->core] == 0) next_snapshot[th->core] = c->t + timeline_tq;
}

static void sl_pre_thread_ll_create(ThreadId parent, ThreadId child)
{
   thread_create(child, parent);
}

static void sl_pre_thread_ll_exit(ThreadId tid)
{
   SlThread *th = &threads[tid];
   SlCore *c;
   if (tid >= SL_MAX_THREADS || !th->live) return;
   c = sl_core(sys, th->core);
   emit_counters(th, c, SLR_THREAD_EXIT);
   if (trace_enabled) {
      slt_begin(&trace, SLT_THREAD_EXIT);
      slt_u32(&trace, (UInt)th->os_tid);
      slt_u16(&trace, (UShort)th->core);
      slt_u16(&trace, 0);
      slt_u64(&trace, core_ticks(c));
      slt_end(&trace);
   }
   th->live = False;
   core_owner[th->core]--;
   if (core_owner[th->core] == 0) sl_core_set_active(c, False);
   n_live--;
   if (cur == th) { cur = NULL; cur_core = NULL; }
}

static Bool laggard_waiting(const SlThread *me, ULong t);

static void sl_start_client_code(ThreadId tid, ULong blocks_done)
{
   SlThread *th;
   (void)blocks_done;
   if (tid >= SL_MAX_THREADS) return;
   th = &threads[tid];
   if (!th->live) thread_create(tid, 0);
   cur = th;
   cur_tid = tid;
   cur_core = sl_core(sys, th->core);
   if (!th->announced) {
      th->os_tid = VG_(gettid)();
      th->announced = True;
      emit_thread_start(th, tid);
   }
   /* A forced yield gave the lock straight back to this thread while another running thread
    * is behind it (that thread was not queued for the lock yet, e.g. preempted by the host):
    * no new slice, so the thread yields again after one superblock (Valgrind runs at least
    * one) and the host's scheduling hardly changes the interleaving in virtual time. Bounded,
    * in case the other thread is held elsewhere. */
   if (tid == last_slice_tid && yield_pending && handover_retries < 1000 &&
       laggard_waiting(th, cur_core->t)) {
      handover_retries++;
      stat_retries++;
      return;
   }
   handover_retries = 0;
   /* Adaptive interleaving, decided when another thread ran in between (a thread also
    * re-enters client code after translations and client requests): while cores exchange
    * lines, threads switch every --switch-min-cycles; once no line has moved for 64 slices the
    * quantum doubles each slice up to --switch-cycles. */
   if (tid != last_slice_tid || cur_core->t - th->slice_start >= th->quantum) {
      /* a line moved between cores during the last 64 slices: interleave finely */
      if (sys->coherence_events != events_total) {
         events_total = sys->coherence_events;
         last_event_slice = stat_slices;
      }
      if (stat_slices - last_event_slice < 64) {
         th->quantum = (ULong)clo_switch_min * SL_TQ;
      } else if (th->quantum < (ULong)clo_switch_max * SL_TQ) {
         th->quantum *= 2;
         if (th->quantum > (ULong)clo_switch_max * SL_TQ) th->quantum = (ULong)clo_switch_max * SL_TQ;
      }
      if (tid != last_slice_tid) {
         stat_switches++;
         yield_pending = False;
      }
      th->slice_start = cur_core->t;
      last_slice_tid = tid;
      stat_slices++;
   }
}

static void sl_stop_client_code(ThreadId tid, ULong blocks_done)
{
   (void)tid;
   (void)blocks_done;
   cur = NULL;
   cur_core = NULL;
}

/* Valgrind's raw system call (coregrind, not in the tool headers; signature of
 * pub_core_syscall.h). Used only for sched_yield below. */
extern SysRes VG_(do_syscall)(UWord sysno, RegWord a1, RegWord a2, RegWord a3, RegWord a4,
                              RegWord a5, RegWord a6, RegWord a7, RegWord a8);


/* Ends the current scheduling slice at the next superblock boundary. If the previous forced
 * yield gave the lock straight back to this thread, the thread that should run next was not
 * queued for Valgrind's lock (typically preempted by the OS on a busy machine): let the OS run
 * it first, so that it queues and the hand-over happens. */
static void force_yield(void)
{
   UInt zero = 0;
   stat_yields++;
   if (yield_pending) {
      (void)VG_(do_syscall)(__NR_sched_yield, 0, 0, 0, 0, 0, 0, 0, 0);
      stat_os_yields++;
   }
   yield_pending = True;
   VG_(set_shadow_regs_area)(cur_tid, 0, offsetof(VexGuestArchState, host_EvC_COUNTER),
                             sizeof zero, (const UChar *)&zero);
}

/* True when every other running thread's core is ahead of time t: the caller is the laggard
 * and keeps running so the virtual clocks stay together. Threads in blocking system calls are
 * not counted (they resume at the latest clock); with no other running thread, False. */
static Bool behind_others(const SlThread *me, ULong t)
{
   UInt i, others = 0;
   for (i = 1; i < SL_MAX_THREADS; i++) {
      const SlThread *o = &threads[i];
      if (o == me || !o->live || o->blocked) continue;
      if (sl_core(sys, o->core)->t < t) return False;
      others++;
   }
   return others > 0;
}

/* True when another running thread's core is behind time t (it should run first). */
static Bool laggard_waiting(const SlThread *me, ULong t)
{
   UInt i;
   for (i = 1; i < SL_MAX_THREADS; i++) {
      const SlThread *o = &threads[i];
      if (o != me && o->live && !o->blocked && sl_core(sys, o->core)->t < t) return True;
   }
   return False;
}

static ULong max_live_clock(void)
{
   ULong m = 0;
   UInt i;
   for (i = 1; i < SL_MAX_THREADS; i++) {
      if (threads[i].live && !threads[i].blocked) {
         ULong t = sl_core(sys, threads[i].core)->t;
         if (t > m) m = t;
      }
   }
   return m;
}

/* ------------------------------------------------------------------------------------------ */
/* annotated objects (ground truth per object)                                                */

typedef struct {
   Addr start, end;
   Addr live_len;   /* end - start while registered, 0 once freed: a is in the live object
                     * iff a - start < live_len */
   ULong loads, stores, load_bytes, store_bytes, l1d_misses;
   HChar name[64];
   Bool freed;
} SlObject;

#define SL_MAX_OBJECTS 256
static SlObject objects[SL_MAX_OBJECTS];
static Bool warned_objects_full;
static UInt n_objects;
static Addr obj_lo = ~(Addr)0, obj_hi;

static UInt obj_last;        /* the object hit last: searches start there */
static Bool objects_disjoint; /* no two live objects overlap: an address is in at most one */

static void objects_update_disjoint(void)
{
   UInt i, j;
   objects_disjoint = True;
   for (i = 0; i < n_objects; i++) {
      if (objects[i].freed) continue;
      for (j = i + 1; j < n_objects; j++) {
         if (objects[j].freed) continue;
         if (objects[i].start < objects[j].end && objects[j].start < objects[i].end) {
            objects_disjoint = False;
            return;
         }
      }
   }
}

static inline void object_count(SlObject *o, UInt size, Bool store, SlLevel lvl)
{
   if (store) { o->stores++; o->store_bytes += size; }
   else { o->loads++; o->load_bytes += size; }
   if (lvl != SL_LVL_L1D) o->l1d_misses++;
}

/* Counts an access to the first live object containing a, searching from the object hit last;
 * returns its index (n_objects when none). */
static UInt object_account(Addr a, UInt size, Bool store, SlLevel lvl)
{
   UInt i, k;
   SlObject *o;
   o = &objects[obj_last];
   if (a - o->start < o->live_len) {
      object_count(o, size, store, lvl);
      return obj_last;
   }
   for (k = 1, i = obj_last + 1; k < n_objects; k++, i++) {
      if (i >= n_objects) i = 0;
      o = &objects[i];
      if (a - o->start < o->live_len) {
         obj_last = i;
         object_count(o, size, store, lvl);
         return i;
      }
   }
   return n_objects;
}

/* The same for a memory op of the replay: when objects are disjoint, an address in the object
 * this op hit last is in no other. (Objects beyond n_objects have live_len 0.) */
static SL_ALWAYS_INLINE void object_account_op(SlItem *it, Addr a, UInt size, Bool store,
                                               SlLevel lvl)
{
   UInt h = it->obj_hint;
   SlObject *o = &objects[h];
   if (objects_disjoint && a - o->start < o->live_len) {
      obj_last = h;
      object_count(o, size, store, lvl);
      return;
   }
   if (a < obj_lo || a >= obj_hi) return;
   h = object_account(a, size, store, lvl);
   if (h < n_objects) it->obj_hint = (UChar)h;
}


/* ------------------------------------------------------------------------------------------ */
/* heap blocks (allocation tracking, with ground truth per block)                             */

/* Blocks of at least clo_alloc_min_bytes from the wrapped allocator calls (sl_preload.c) and
 * the program's own anonymous mmaps. Each is logged (ALLOC, FREE) with its stack, and while it
 * lives every access to it is counted exactly; the counts are written (BLOCK_TRUTH) when it
 * ends. Live blocks do not overlap (the allocator's own mmaps are not blocks); an address
 * allocated again while a block starts there ends that block first. */

typedef struct {
   Addr start;
   Addr live_len;   /* size while live, 0 when the slot is free: a is in it iff a - start < live_len */
   ULong id;        /* ALLOC record number, from 1 */
   ULong size;
   ULong loads, stores, load_bytes, store_bytes, l1d_misses;
} SlBlock;

static SlBlock *blk;        /* slots; a slot's index never changes while its block lives */
static UInt blk_cap, blk_used; /* slots allocated, slots ever handed out */
static UInt *blk_free;      /* free slots (a stack) */
static UInt n_blk_free;
static UInt *blk_sorted;    /* live slots by start address */
static UInt n_blk_live;
static Addr blk_lo = ~(Addr)0, blk_hi; /* covers every live block (not shrunk on free) */
static ULong blk_next_id = 1;
static ULong stat_blocks, stat_block_frees;

/* The position in blk_sorted of the first live block starting above a. */
static UInt blk_upper(Addr a)
{
   UInt lo = 0, hi = n_blk_live;
   while (lo < hi) {
      UInt mid = lo + (hi - lo) / 2;
      if (blk[blk_sorted[mid]].start <= a) lo = mid + 1;
      else hi = mid;
   }
   return lo;
}

/* The slot of the live block containing a, or blk_cap when none. */
static UInt blk_find(Addr a)
{
   UInt p = blk_upper(a), s;
   if (p == 0) return blk_cap;
   s = blk_sorted[p - 1];
   return a - blk[s].start < blk[s].live_len ? s : blk_cap;
}

static inline void block_count(SlBlock *b, UInt size, Bool store, SlLevel lvl)
{
   if (store) { b->stores++; b->store_bytes += size; }
   else { b->loads++; b->load_bytes += size; }
   if (lvl != SL_LVL_L1D) b->l1d_misses++;
}

/* Counts a memory op of the replay against the live block containing its address. */
static SL_ALWAYS_INLINE void block_account_op(SlItem *it, Addr a, UInt size, Bool store,
                                              SlLevel lvl)
{
   UInt h = it->blk_hint;
   if (h < blk_cap && a - blk[h].start < blk[h].live_len) {
      block_count(&blk[h], size, store, lvl);
      return;
   }
   if (a < blk_lo || a >= blk_hi) return;
   h = blk_find(a);
   if (h < blk_cap) {
      it->blk_hint = h;
      block_count(&blk[h], size, store, lvl);
   }
}

static void emit_block_truth(const SlBlock *b)
{
   if (!trace_enabled) return;
   slt_begin(&trace, SLT_BLOCK_TRUTH);
   slt_u64(&trace, b->id);
   slt_u64(&trace, b->start);
   slt_u64(&trace, b->size);
   slt_u64(&trace, b->loads);
   slt_u64(&trace, b->stores);
   slt_u64(&trace, b->load_bytes);
   slt_u64(&trace, b->store_bytes);
   slt_u64(&trace, b->l1d_misses);
   slt_end(&trace);
}

/* True when code address ip is in the C library or the dynamic loader: an mmap called from
 * there is theirs (the loader's segments and allocations, thread stacks), not the program's,
 * as for the LD_PRELOAD runtime, which sees only the program's own calls of mmap. */
static Bool in_system_library(Addr ip)
{
   const HChar *obj, *base;
   UInt i;
   static const HChar *const libs[] = {"libc.so", "libc-", "ld-linux", "ld.so", "ld64.so",
                                       "libpthread"};
   if (!VG_(get_objname)(VG_(current_DiEpoch)(), ip, &obj) || !obj) return False;
   base = VG_(strrchr)(obj, '/');
   base = base ? base + 1 : obj;
   for (i = 0; i < sizeof libs / sizeof libs[0]; i++)
      if (VG_(strncmp)(base, libs[i], VG_(strlen)(libs[i])) == 0) return True;
   return False;
}

/* Ends the live block in slot s: FREE (how), then its truth. */
static void block_end(UInt s, UChar how)
{
   SlBlock *b = &blk[s];
   UInt p;
   SL_ASSERT(s < blk_cap && b->live_len);
   if (trace_enabled) {
      slt_begin(&trace, SLT_FREE);
      slt_u8(&trace, how);
      slt_u8(&trace, 0);
      slt_u16(&trace, cur_core ? (UShort)cur_core->id : 0);
      slt_u32(&trace, cur ? (UInt)cur->os_tid : 0);
      slt_u64(&trace, cur_core ? core_ticks(cur_core) : 0);
      slt_u64(&trace, b->id);
      slt_u64(&trace, b->start);
      slt_end(&trace);
   }
   emit_block_truth(b);
   p = blk_upper(b->start);
   SL_ASSERT(p > 0 && blk_sorted[p - 1] == s);
   VG_(memmove)(&blk_sorted[p - 1], &blk_sorted[p], (n_blk_live - p) * sizeof(UInt));
   n_blk_live--;
   if (n_blk_live == 0) { blk_lo = ~(Addr)0; blk_hi = 0; }
   b->live_len = 0;
   blk_free[n_blk_free++] = s;
   stat_block_frees++;
}

/* The slot of the live block with this id, or blk_cap. */
static UInt blk_by_id(ULong id)
{
   UInt i;
   for (i = 0; i < n_blk_live; i++)
      if (blk[blk_sorted[i]].id == id) return blk_sorted[i];
   return blk_cap;
}

static void blk_grow(void)
{
   UInt cap = blk_cap ? blk_cap * 2 : 256, i;
   blk = VG_(realloc)("spelunk.blocks", blk, cap * sizeof(SlBlock));
   blk_free = VG_(realloc)("spelunk.blocks", blk_free, cap * sizeof(UInt));
   blk_sorted = VG_(realloc)("spelunk.blocks", blk_sorted, cap * sizeof(UInt));
   for (i = blk_cap; i < cap; i++) VG_(memset)(&blk[i], 0, sizeof blk[i]);
   blk_cap = cap;
}

/* A new block [a, a + size) allocated by kind (SL_ALLOC_*) on thread tid; frames_skip drops the
 * innermost frames of its stack (the wrapper's own). */
static void block_begin(ThreadId tid, UChar kind, Addr a, ULong size, UInt frames_skip)
{
   Addr ips[SL_MAX_ALLOC_FRAMES + 2];
   UInt n, i, s, p;
   SlBlock *b;
   SlThread *th;
   SlCore *c;
   if (!clo_track_allocs || a == 0 || size == 0 || size < (ULong)clo_alloc_min_bytes) return;
   if (a + size < a) return;
   n = VG_(get_StackTrace)(tid, ips, (UInt)clo_alloc_stack_depth + frames_skip, NULL, NULL, 0);
   if (n < frames_skip) frames_skip = n;
   /* ips[0] is the system call in libc's mmap, ips[1] its caller */
   if (kind == SL_ALLOC_MMAP && n > 1 && in_system_library(ips[1] - 1)) return;
   s = blk_find(a);
   if (s < blk_cap && blk[s].start == a) block_end(s, SL_FREE_SUPERSEDED);
   if (n_blk_free == 0) {
      if (blk_used == blk_cap) blk_grow();
      blk_free[n_blk_free++] = blk_used++;
   }
   s = blk_free[--n_blk_free];
   b = &blk[s];
   VG_(memset)(b, 0, sizeof *b);
   b->start = a;
   b->size = size;
   b->live_len = size;
   b->id = blk_next_id++;
   p = blk_upper(a);
   VG_(memmove)(&blk_sorted[p + 1], &blk_sorted[p], (n_blk_live - p) * sizeof(UInt));
   blk_sorted[p] = s;
   n_blk_live++;
   if (a < blk_lo) blk_lo = a;
   if (a + size > blk_hi) blk_hi = a + size;
   stat_blocks++;
   if (!trace_enabled) return;
   th = tid < SL_MAX_THREADS && threads[tid].live ? &threads[tid] : NULL;
   c = th ? sl_core(sys, th->core) : NULL;
   slt_begin(&trace, SLT_ALLOC);
   slt_u8(&trace, kind);
   slt_u8(&trace, (UChar)(n - frames_skip));
   slt_u16(&trace, c ? (UShort)c->id : 0);
   slt_u32(&trace, th ? (UInt)th->os_tid : 0);
   slt_u64(&trace, c ? core_ticks(c) : 0);
   slt_u64(&trace, b->id);
   slt_u64(&trace, a);
   slt_u64(&trace, size);
   /* VG_(get_StackTrace) gives the pc, then the last byte of each call instruction: written
    * as return addresses (+1), the convention of the runtime's logs */
   for (i = frames_skip; i < n; i++) slt_u64(&trace, (ULong)ips[i] + 1);
   slt_end(&trace);
}

/* Ends the live block starting exactly at a, if any. */
static void block_free_at(Addr a, UChar how)
{
   UInt s;
   if (a == 0 || n_blk_live == 0) return;
   s = blk_find(a);
   if (s < blk_cap && blk[s].start == a) block_end(s, how);
}

/* munmap of [a, a + len): ends the blocks that start inside it. */
static void blocks_unmap(Addr a, SizeT len)
{
   UInt p;
   while (n_blk_live) {
      p = blk_upper(a + len - 1);
      if (p == 0) return;
      if (blk[blk_sorted[p - 1]].start < a) return;
      block_end(blk_sorted[p - 1], SL_FREE_MUNMAP);
   }
}

static void blocks_finish(void)
{
   UInt i;
   for (i = 0; i < n_blk_live; i++) emit_block_truth(&blk[blk_sorted[i]]);
}

/* A forked child's trace lists the blocks it allocates itself: the parent's are forgotten. */
static void blocks_forget(void)
{
   UInt i;
   for (i = 0; i < n_blk_live; i++) {
      blk[blk_sorted[i]].live_len = 0;
      blk_free[n_blk_free++] = blk_sorted[i];
   }
   n_blk_live = 0;
   blk_lo = ~(Addr)0;
   blk_hi = 0;
}

static void alloc_enter(ThreadId tid, SlThread *th, UWord kind, Addr ptr)
{
   UInt s;
   (void)tid;
   th->in_alloc++;
   if (kind == SL_CALL_FREE) {
      /* before the allocator can hand the address out again */
      block_free_at(ptr, SL_FREE_FREE);
   } else if (kind == SL_CALL_REALLOC) {
      s = ptr ? blk_find(ptr) : blk_cap;
      th->realloc_id = s < blk_cap && blk[s].start == ptr ? blk[s].id : 0;
   }
}

static void alloc_done(ThreadId tid, SlThread *th, UWord kind, Addr res, ULong size)
{
   if (th->in_alloc) th->in_alloc--;
   switch (kind) {
   case SL_CALL_MALLOC: block_begin(tid, SL_ALLOC_MALLOC, res, size, 1); break;
   case SL_CALL_CALLOC: block_begin(tid, SL_ALLOC_CALLOC, res, size, 1); break;
   case SL_CALL_ALIGNED: block_begin(tid, SL_ALLOC_ALIGNED, res, size, 1); break;
   case SL_CALL_REALLOC:
      /* realloc(p, n) freed p when it returned a block, or when n is 0 */
      if (th->realloc_id && (res || size == 0)) {
         UInt s = blk_by_id(th->realloc_id);
         if (s < blk_cap) block_end(s, SL_FREE_REALLOC);
      }
      th->realloc_id = 0;
      block_begin(tid, SL_ALLOC_REALLOC, res, size, 1);
      break;
   default:
      break;
   }
}

/* ------------------------------------------------------------------------------------------ */
/* the per-superblock replay                                                                  */

/* One memory op of the replay. */
static SL_ALWAYS_INLINE void replay_mem(SlCore *c, SlItem *it, const UChar *dl, ULong *rdy,
                                        const Bool store)
{
   SlMemOp m;
   SlLevel lvl;
   ULong C;
   Addr a = (Addr)sl_evbuf[it->slot];
   if (a == 0) { /* guarded access not performed: still an op */
      alu_op(c, 1, NULL, NULL);
      if (it->ldslot >= 0) rdy[(UInt)it->ldslot] = c->t;
      return;
   }
   m.pc = it->pc;
   m.va = a;
   m.size = it->size;
   m.store = store;
   m.subclass = it->sub;
   m.addr_ready = src_ready(&it->src, dl, rdy);
   m.data_ready = store ? src_ready(&it->dsrc, dl, rdy) : 0;
   C = mem_op(c, &m, &lvl, &it->memo);
   if (it->ldslot >= 0) rdy[(UInt)it->ldslot] = C;
   if (n_objects) object_account_op(it, a, it->size, store, lvl);
   if (n_blk_live) block_account_op(it, a, it->size, store, lvl);
}

static VG_REGPARM(2) void sl_flush(SlSbDesc *d, UWord k)
{
   const SlExit *x;
   SlItem *it, *end;
   const UChar *dl = d->deps;
   SlThread *th = cur;
   SlCore *c = cur_core;
   ULong *rdy;
   if (!th || !c || !clo_model) return;
   SL_ASSERT(k < d->n_exits);
   x = &d->exits[k];
   rdy = th->rdy;
   ifetch_run(c, d->lines, x->n_lines, &d->irun);
   for (it = d->items, end = d->items + x->last_item; it < end; it++) {
      switch (it->kind) {
      case IT_ALU:
         alu_op(c, it->size, &d->alu[it->alu], it->counts);
         break;
      case IT_LOAD:
         replay_mem(c, it, dl, rdy, False);
         break;
      case IT_STORE:
         replay_mem(c, it, dl, rdy, True);
         break;
      case IT_PREFETCH: {
         SlMemOp m;
         m.pc = it->pc;
         m.va = (Addr)sl_evbuf[it->slot];
         m.size = it->size;
         m.store = False;
         m.subclass = SL_LS_GP;
         m.addr_ready = src_ready(&it->src, dl, rdy);
         m.data_ready = 0;
         sl_prefetch(c, &m, (SlPrefetchTarget)it->sub);
         break;
      }
      case IT_BCOND:
      case IT_BEND: {
         SlBranch b;
         b.pc = it->pc;
         b.fallthrough = it->fallthrough;
         b.kind = (SlBranchKind)it->sub;
         b.ready = src_ready(&it->src, dl, rdy);
         if (it->kind == IT_BCOND) {
            b.taken = ((sl_evbuf[it->slot] & 1) != 0) != (it->inverted != 0);
            b.target = it->target;
         } else {
            b.taken = True;
            b.target = it->slot == 0xffff ? it->target : (Addr)sl_evbuf[it->slot];
         }
         branch_op(c, &b);
         break;
      }
      default:
         break;
      }
   }
   sl_retire_insns(c, x->n_insns);
   if (x->wb_n) {
      /* new ready times of the guest-state words written, all from the old ones */
      const SlWriteback *wb = &d->wb[x->wb_first];
      const SlWbRun *r = &d->wbr[x->wb_first];
      UInt j, n = x->wb_n;
      if (x->wb_direct) {
         for (j = 0; j < x->wb_nz; j++) {
            ULong a = rdy[r[j].s0], b = rdy[r[j].s1];
            if (SL_UNLIKELY(r[j].many)) a = b = src_ready(&wb[j].src, dl, rdy);
            rdy[r[j].dst] = a > b ? a : b;
         }
         for (; j < n; j++) rdy[r[j].dst] = 0;
      } else {
         ULong nv[SL_NSLOTS];
         for (j = 0; j < x->wb_n; j++) nv[j] = src_ready(&wb[j].src, dl, rdy);
         for (j = 0; j < x->wb_n; j++) rdy[SL_NLDSLOTS + wb[j].slot] = nv[j];
      }
   }
   if (timeline_tq && c->t >= next_snapshot[c->id]) {
      emit_counters(th, c, SLR_PERIODIC);
      while (next_snapshot[c->id] <= c->t) next_snapshot[c->id] += timeline_tq;
   }
   if (n_live > 1 && c->t - th->slice_start >= th->quantum && !behind_others(th, c->t))
      force_yield();
}

/* ------------------------------------------------------------------------------------------ */
/* instrumentation                                                                            */

typedef struct {
   /* output under construction */
   SlItem items[2048];
   SlExit exits[64];
   SlAluOp alu[1024];
   SlWriteback wb[64 * SL_NSLOTS];
   Addr lines[128];
   UInt n_items, n_exits, n_alu, n_wb, n_lines, n_slots, n_ldslots, n_insns;
   /* data flow */
   SlDeps *tmask;
   UChar *tarith; /* bit0: value computed by arithmetic; bits1-2: 1 DP, 2 VFP, 3 ASE */
   SlDeps regmask[SL_NSLOTS];
   /* current instruction */
   Addr pc;
   UInt len;
   UInt n_mem;
   Bool compute, alu_done, is_last;
   UChar klass; /* 0 DP, 1 VFP, 2 ASE */
   SlDeps out_deps;
} SlInstr;

static SlInstr ins; /* instrumentation runs under the big lock: one at a time */

static UInt new_slot(void)
{
   if (ins.n_slots >= SL_MAXSLOTS) VG_(tool_panic)("spelunk: superblock too large");
   return ins.n_slots++;
}

static SlItem *new_item(UChar kind)
{
   SlItem *it;
   if (ins.n_items >= sizeof ins.items / sizeof ins.items[0])
      VG_(tool_panic)("spelunk: superblock too large (items)");
   it = &ins.items[ins.n_items++];
   VG_(memset)(it, 0, sizeof *it);
   it->kind = kind;
   it->pc = ins.pc;
   it->slot = 0xffff;
   it->ldslot = -1;
   return it;
}

static void store_slot(IRSB *sb, UInt slot, IRExpr *atom)
{
   addStmtToIRSB(sb, IRStmt_Store(Iend_LE, mkIRExpr_HWord((HWord)&sl_evbuf[slot]), atom));
}

static SlDeps atom_mask(IRExpr *a)
{
   if (a && a->tag == Iex_RdTmp) return ins.tmask[a->Iex.RdTmp.tmp];
   return 0;
}

static Bool atom_arith(IRExpr *a)
{
   return a && a->tag == Iex_RdTmp && (ins.tarith[a->Iex.RdTmp.tmp] & 1);
}

static UChar atom_class(IRExpr *a)
{
   if (a && a->tag == Iex_RdTmp) return (UChar)(ins.tarith[a->Iex.RdTmp.tmp] >> 1);
   return 0;
}

static UChar type_class(IRType ty)
{
   switch (ty) {
   case Ity_F16: case Ity_F32: case Ity_F64: case Ity_F128: case Ity_D32: case Ity_D64:
   case Ity_D128:
      return 2; /* VFP */
   case Ity_V128: case Ity_V256:
      return 3; /* ASE */
   default:
      return 1; /* DP */
   }
}

/* Binops that only move data (vector/word assembly), not computation. */
static Bool binop_is_glue(IROp op)
{
   switch (op) {
   case Iop_64HLtoV128: case Iop_V128HLtoV256: case Iop_32HLto64: case Iop_64HLto128:
   case Iop_16HLto32: case Iop_8HLto16: case Iop_SetV128lo32: case Iop_SetV128lo64:
      return True;
   default:
      return False;
   }
}

/* Scalar FP operations on the low lane of a vector register (SSE "sd"/"ss" forms). */
static Bool op_is_scalar_lane(IROp op)
{
   switch (op) {
   case Iop_Add32F0x4: case Iop_Sub32F0x4: case Iop_Mul32F0x4: case Iop_Div32F0x4:
   case Iop_Max32F0x4: case Iop_Min32F0x4: case Iop_Sqrt32F0x4:
   case Iop_Add64F0x2: case Iop_Sub64F0x2: case Iop_Mul64F0x2: case Iop_Div64F0x2:
   case Iop_Max64F0x2: case Iop_Min64F0x2: case Iop_Sqrt64F0x2:
   case Iop_CmpEQ32F0x4: case Iop_CmpLT32F0x4: case Iop_CmpLE32F0x4: case Iop_CmpUN32F0x4:
   case Iop_CmpEQ64F0x2: case Iop_CmpLT64F0x2: case Iop_CmpLE64F0x2: case Iop_CmpUN64F0x2:
      return True;
   default:
      return False;
   }
}

static void note_compute(UChar klass)
{
   ins.compute = True;
   if (klass > ins.klass) ins.klass = klass;
}

/* Adds the current instruction's computation op (once). */
static void emit_instr_alu(void)
{
   SlItem *last = ins.n_items ? &ins.items[ins.n_items - 1] : NULL;
   SlAluOp *op;
   if (ins.alu_done) return;
   ins.alu_done = True;
   if (ins.n_alu >= sizeof ins.alu / sizeof ins.alu[0])
      VG_(tool_panic)("spelunk: superblock too large (alu)");
   op = &ins.alu[ins.n_alu];
   op->pc = ins.pc;
   op->deps = ins.out_deps;
   switch (ins.klass) {
   case 2: op->counter = SL_C_VFP_SPEC; op->subclass = SL_OT_FP; break;
   case 3: op->counter = SL_C_ASE_SPEC; op->subclass = SL_OT_SIMD; break;
   default: op->counter = SL_C_DP_SPEC; op->subclass = 0; break;
   }
   if (!(last && last->kind == IT_ALU && last->alu + last->size == ins.n_alu)) {
      last = new_item(IT_ALU);
      last->alu = ins.n_alu;
      last->size = 0;
   }
   last->size++;
   last->counts[op->counter == SL_C_DP_SPEC ? 0 : op->counter == SL_C_ASE_SPEC ? 1 : 2]++;
   ins.n_alu++;
}

static void end_instr(void)
{
   if (!ins.pc) return;
   if (ins.compute || ins.n_mem == 0) emit_instr_alu();
}

static void add_exit_record(void)
{
   SlExit *x;
   UInt s;
   if (ins.n_exits >= sizeof ins.exits / sizeof ins.exits[0])
      VG_(tool_panic)("spelunk: superblock too large (exits)");
   x = &ins.exits[ins.n_exits++];
   x->last_item = (UShort)ins.n_items;
   x->n_insns = (UShort)ins.n_insns;
   x->n_lines = (UShort)ins.n_lines;
   x->wb_first = (UShort)ins.n_wb;
   x->wb_n = 0;
   for (s = 0; s < SL_NSLOTS; s++) {
      SlDeps own = (SlDeps)1 << (SL_NLDSLOTS + s);
      if (ins.regmask[s] != own) {
         ins.wb[ins.n_wb].slot = (UChar)s;
         ins.wb[ins.n_wb].deps = ins.regmask[s];
         ins.n_wb++;
         x->wb_n++;
      }
   }
}

static void add_mem(IRSB *sbOut, IRExpr *addr, IRExpr *guard, UInt size, Bool store,
                    UChar sub, IRTemp result)
{
   SlItem *it = new_item(store ? IT_STORE : IT_LOAD);
   UInt slot = new_slot();
   it->slot = (UShort)slot;
   it->size = (UShort)(size > 0xffff ? 0xffff : size);
   it->sub = sub;
   it->deps = atom_mask(addr) | (guard ? atom_mask(guard) : 0);
   if (guard) {
      IRTemp t = newIRTemp(sbOut->tyenv, Ity_I64);
      addStmtToIRSB(sbOut, IRStmt_WrTmp(t, IRExpr_ITE(guard, addr, mkIRExpr_HWord(0))));
      store_slot(sbOut, slot, IRExpr_RdTmp(t));
   } else {
      store_slot(sbOut, slot, addr);
   }
   ins.n_mem++;
   if (!store && result != IRTemp_INVALID) {
      if (ins.n_ldslots < SL_NLDSLOTS) {
         it->ldslot = (Char)ins.n_ldslots++;
         ins.tmask[result] = (SlDeps)1 << it->ldslot;
      } else {
         ins.tmask[result] = 0;
      }
      ins.tarith[result] = 0;
   }
}

static UChar ls_subclass(IRType ty)
{
   switch (ty) {
   case Ity_F16: case Ity_F32: case Ity_F64: case Ity_F128: case Ity_V128: case Ity_V256:
   case Ity_D32: case Ity_D64: case Ity_D128:
      return SL_LS_SIMDFP;
   default:
      return SL_LS_GP;
   }
}

/* Dependency mask and arithmetic flag of an expression (flat IR: operands are atoms). */
static void expr_flow(IRTypeEnv *tyenv, IRExpr *e, SlDeps *mask, UChar *arith)
{
   UChar cls;
   *mask = 0;
   *arith = 0;
   switch (e->tag) {
   case Iex_Get: {
      Int s = off2slot(e->Iex.Get.offset);
      if (s >= 0) *mask = ins.regmask[s];
      break;
   }
   case Iex_RdTmp:
      *mask = ins.tmask[e->Iex.RdTmp.tmp];
      *arith = ins.tarith[e->Iex.RdTmp.tmp];
      break;
   case Iex_Unop: {
      IRType ty = typeOfIRExpr(tyenv, e);
      *mask = atom_mask(e->Iex.Unop.arg);
      *arith = atom_arith(e->Iex.Unop.arg) ? ins.tarith[e->Iex.Unop.arg->Iex.RdTmp.tmp] : 0;
      if (ty == Ity_F32 || ty == Ity_F64) *arith = 1 | (2 << 1);
      break;
   }
   case Iex_Binop: {
      IRType ty = typeOfIRExpr(tyenv, e);
      *mask = atom_mask(e->Iex.Binop.arg1) | atom_mask(e->Iex.Binop.arg2);
      if (binop_is_glue(e->Iex.Binop.op)) {
         cls = atom_class(e->Iex.Binop.arg1);
         if (atom_class(e->Iex.Binop.arg2) > cls) cls = atom_class(e->Iex.Binop.arg2);
         if (atom_arith(e->Iex.Binop.arg1) || atom_arith(e->Iex.Binop.arg2))
            *arith = (UChar)(1 | (cls << 1));
      } else {
         cls = op_is_scalar_lane(e->Iex.Binop.op) ? 2 : type_class(ty);
         *arith = (UChar)(1 | (cls << 1));
      }
      break;
   }
   case Iex_Triop: {
      IRTriop *t = e->Iex.Triop.details;
      IRType ty = typeOfIRExpr(tyenv, e);
      *mask = atom_mask(t->arg1) | atom_mask(t->arg2) | atom_mask(t->arg3);
      cls = op_is_scalar_lane(t->op) ? 2 : type_class(ty);
      *arith = (UChar)(1 | (cls << 1));
      break;
   }
   case Iex_Qop: {
      IRQop *q = e->Iex.Qop.details;
      IRType ty = typeOfIRExpr(tyenv, e);
      *mask = atom_mask(q->arg1) | atom_mask(q->arg2) | atom_mask(q->arg3) | atom_mask(q->arg4);
      *arith = (UChar)(1 | (type_class(ty) << 1));
      break;
   }
   case Iex_ITE:
      *mask = atom_mask(e->Iex.ITE.cond) | atom_mask(e->Iex.ITE.iftrue) |
              atom_mask(e->Iex.ITE.iffalse);
      if (atom_arith(e->Iex.ITE.iftrue) || atom_arith(e->Iex.ITE.iffalse))
         *arith = (UChar)(1 | (type_class(typeOfIRExpr(tyenv, e)) << 1));
      break;
   case Iex_CCall: {
      Int i;
      for (i = 0; e->Iex.CCall.args[i]; i++) *mask |= atom_mask(e->Iex.CCall.args[i]);
      *arith = 1 | (1 << 1);
      break;
   }
   default:
      break;
   }
}

static void note_value_write(IRExpr *data)
{
   if (atom_arith(data)) note_compute(atom_class(data));
   ins.out_deps |= atom_mask(data);
}

/* ---- software prefetch instructions. VEX translates x86 prefetch* and Arm PRFM/PRFUM to no
 * IR at all, so they are found by reading the guest bytes at each instruction mark. */

static ULong stat_pf_insns, stat_pf_unknown;

/* A decoded prefetch address: base + extend(index) << shift + disp, registers as guest-state
 * offsets (-1: none). */
typedef struct {
   Int base, index;
   UChar ext; /* index extension: 0 64-bit, 1 zero-extended 32-bit, 2 sign-extended 32-bit */
   UChar shift;
   Long disp;
   SlPrefetchTarget target;
} SlPfAddr;

#define SL_PF_NOT 0   /* not a prefetch instruction */
#define SL_PF_OK 1    /* decoded */
#define SL_PF_UNSUP 2 /* a prefetch whose addressing is not supported: counted, not modelled */

#if defined(VGA_amd64)
static const Int amd64_gpr[16] = {
   offsetof(VexGuestAMD64State, guest_RAX), offsetof(VexGuestAMD64State, guest_RCX),
   offsetof(VexGuestAMD64State, guest_RDX), offsetof(VexGuestAMD64State, guest_RBX),
   offsetof(VexGuestAMD64State, guest_RSP), offsetof(VexGuestAMD64State, guest_RBP),
   offsetof(VexGuestAMD64State, guest_RSI), offsetof(VexGuestAMD64State, guest_RDI),
   offsetof(VexGuestAMD64State, guest_R8),  offsetof(VexGuestAMD64State, guest_R9),
   offsetof(VexGuestAMD64State, guest_R10), offsetof(VexGuestAMD64State, guest_R11),
   offsetof(VexGuestAMD64State, guest_R12), offsetof(VexGuestAMD64State, guest_R13),
   offsetof(VexGuestAMD64State, guest_R14), offsetof(VexGuestAMD64State, guest_R15)};

/* prefetcht0/t1/t2/nta (0F 18 /1 /2 /3 /0) and prefetch/prefetchw/prefetchwt1 (0F 0D /r),
 * memory operands only (Intel SDM vol. 2, PREFETCHh and PREFETCHW; ModRM/SIB addressing, §2.1
 * and §2.2.1.6 for RIP-relative). */
static UInt decode_prefetch(Addr pc, UInt len, SlPfAddr *o)
{
   const UChar *p = (const UChar *)pc;
   UInt i = 0, rex = 0, mod, reg, rm, op;
   Bool seg = False, asz = False;
   if (len < 3 || len > 15) return SL_PF_NOT;
   for (; i < len; i++) {
      UChar b = p[i];
      if (b == 0x64 || b == 0x65) seg = True;
      else if (b == 0x67) asz = True;
      else if (!(b == 0x66 || b == 0xf2 || b == 0xf3 || b == 0x2e || b == 0x3e || b == 0x26 ||
                 b == 0x36))
         break;
   }
   if (i < len && (p[i] & 0xf0) == 0x40) rex = p[i++];
   if (i + 3 > len || p[i] != 0x0f || (p[i + 1] != 0x18 && p[i + 1] != 0x0d)) return SL_PF_NOT;
   op = p[i + 1];
   i += 2;
   mod = p[i] >> 6;
   reg = (p[i] >> 3) & 7;
   rm = p[i] & 7;
   i++;
   if (mod == 3) return SL_PF_NOT;              /* register forms: reserved NOPs */
   if (op == 0x18 && reg > 3) return SL_PF_NOT; /* 0F 18 /4-/7: hint NOPs */
   /* t0, and nta (N1 has no non-temporal fill), into L1D; t1 and t2 (there is no L3 in the
    * core) into L2; the 0F 0D forms are prefetches for writing into L1D */
   o->target = op == 0x0d || reg <= 1 ? SL_PF_L1 : SL_PF_L2;
   o->base = o->index = -1;
   o->ext = 0;
   o->shift = 0;
   o->disp = 0;
   if (rm == 4) {
      UInt sib, idx, base;
      if (i >= len) return SL_PF_UNSUP;
      sib = p[i++];
      idx = ((sib >> 3) & 7) | ((rex & 2) << 2);
      base = (sib & 7) | ((rex & 1) << 3);
      o->shift = (UChar)(sib >> 6);
      if (idx != 4) o->index = amd64_gpr[idx];
      if ((sib & 7) == 5 && mod == 0) {
         if (i + 4 > len) return SL_PF_UNSUP;
         o->disp = (Int)(p[i] | p[i + 1] << 8 | p[i + 2] << 16 | (UInt)p[i + 3] << 24);
         i += 4;
      } else {
         o->base = amd64_gpr[base];
      }
   } else if (rm == 5 && mod == 0) {
      /* RIP-relative: from the end of the instruction */
      if (i + 4 > len) return SL_PF_UNSUP;
      o->disp = (Int)(p[i] | p[i + 1] << 8 | p[i + 2] << 16 | (UInt)p[i + 3] << 24);
      o->disp += (Long)(pc + len);
      i += 4;
   } else {
      o->base = amd64_gpr[rm | ((rex & 1) << 3)];
   }
   if (mod == 1) {
      if (i + 1 > len) return SL_PF_UNSUP;
      o->disp += (Char)p[i];
      i += 1;
   } else if (mod == 2) {
      if (i + 4 > len) return SL_PF_UNSUP;
      o->disp += (Int)(p[i] | p[i + 1] << 8 | p[i + 2] << 16 | (UInt)p[i + 3] << 24);
      i += 4;
   }
   /* fs/gs segments and 32-bit addressing are not modelled; the length must be the mark's */
   if (seg || asz || i != len) return SL_PF_UNSUP;
   return SL_PF_OK;
}
#else
static Int arm64_x(UInt r) /* X0-X30, 31 = SP */
{
   return r == 31 ? (Int)offsetof(VexGuestARM64State, guest_XSP)
                  : (Int)offsetof(VexGuestARM64State, guest_X0) + 8 * (Int)r;
}

/* PRFM (immediate, literal, register) and PRFUM (Arm ARM C6.2, "PRFM" and "PRFUM"): the prfop
 * in Rt is type (bits 4:3: PLD, PLI, PST), target (2:1: L1, L2, L3) and policy (0: KEEP/STRM). */
static UInt decode_prefetch(Addr pc, UInt len, SlPfAddr *o)
{
   UInt w, rt, rn, type, tgt;
   if (len != 4) return SL_PF_NOT;
   w = *(const UInt *)pc;
   rt = w & 31;
   rn = (w >> 5) & 31;
   o->base = o->index = -1;
   o->ext = 0;
   o->shift = 0;
   o->disp = 0;
   if ((w & 0xffc00000u) == 0xf9800000u) { /* PRFM (immediate): [Xn|SP, #imm12 * 8] */
      o->base = arm64_x(rn);
      o->disp = (Long)((w >> 10) & 0xfff) * 8;
   } else if ((w & 0xff000000u) == 0xd8000000u) { /* PRFM (literal): pc + imm19 * 4 */
      Long imm19 = (Long)((w >> 5) & 0x7ffff);
      if (imm19 & 0x40000) imm19 -= 0x80000;
      o->disp = (Long)pc + imm19 * 4;
   } else if ((w & 0xffe00c00u) == 0xf8a00800u) { /* PRFM (register) */
      UInt rm = (w >> 16) & 31, option = (w >> 13) & 7;
      o->base = arm64_x(rn);
      if (option != 2 && option != 3 && option != 6 && option != 7) return SL_PF_UNSUP;
      /* Rm = 31 is XZR here: no index */
      if (rm != 31) o->index = (Int)offsetof(VexGuestARM64State, guest_X0) + 8 * (Int)rm;
      o->ext = option == 2 ? 1 : option == 6 ? 2 : 0;
      o->shift = (w >> 12) & 1 ? 3 : 0;
   } else if ((w & 0xffe00c00u) == 0xf8800000u) { /* PRFUM: [Xn|SP, #simm9] */
      Long imm9 = (Long)((w >> 12) & 0x1ff);
      if (imm9 & 0x100) imm9 -= 0x200;
      o->base = arm64_x(rn);
      o->disp = imm9;
   } else {
      return SL_PF_NOT;
   }
   type = (rt >> 3) & 3;
   tgt = (rt >> 1) & 3;
   /* PLI (instructions) and unallocated prfops fill nothing; PST is modelled as a read; L3 (the
    * core has none) and the SLC target go to L2 */
   o->target = type == 1 || type == 3 ? SL_PF_NONE : tgt == 0 ? SL_PF_L1 : SL_PF_L2;
   return SL_PF_OK;
}
#endif

/* The current value of a guest register (its guest-state word, which every instruction
 * before updates: see the register-update precision set in sl_pre_clo_init) as an IR atom;
 * adds its dependency set to *deps. */
static IRExpr *guest_reg(IRSB *sb, Int off, SlDeps *deps)
{
   Int s = off2slot(off);
   IRTemp t;
   if (s < 0) return NULL;
   *deps |= ins.regmask[s];
   t = newIRTemp(sb->tyenv, Ity_I64);
   addStmtToIRSB(sb, IRStmt_WrTmp(t, IRExpr_Get(off, Ity_I64)));
   return IRExpr_RdTmp(t);
}

static IRExpr *ir_op(IRSB *sb, IRExpr *e)
{
   IRTemp t = newIRTemp(sb->tyenv, typeOfIRExpr(sb->tyenv, e));
   addStmtToIRSB(sb, IRStmt_WrTmp(t, e));
   return IRExpr_RdTmp(t);
}

/* At an instruction mark: when the instruction is a prefetch, adds its op (IT_PREFETCH) with
 * the effective address computed from the guest registers. */
static void add_prefetch(IRSB *sb, Addr pc, UInt len)
{
   SlPfAddr a;
   SlDeps deps = 0;
   IRExpr *addr = mkIRExpr_HWord((HWord)0), *r;
   SlItem *it;
   UInt slot, k = decode_prefetch(pc, len, &a);
   if (k == SL_PF_NOT) return;
   stat_pf_insns++;
   if (k == SL_PF_OK && a.base >= 0) {
      r = guest_reg(sb, a.base, &deps);
      if (r) addr = r;
      else k = SL_PF_UNSUP;
   }
   if (k == SL_PF_OK && a.index >= 0) {
      r = guest_reg(sb, a.index, &deps);
      if (!r) {
         k = SL_PF_UNSUP;
      } else {
         if (a.ext) {
            r = ir_op(sb, IRExpr_Unop(Iop_64to32, r));
            r = ir_op(sb, IRExpr_Unop(a.ext == 1 ? Iop_32Uto64 : Iop_32Sto64, r));
         }
         if (a.shift) r = ir_op(sb, IRExpr_Binop(Iop_Shl64, r, IRExpr_Const(IRConst_U8(a.shift))));
         addr = ir_op(sb, IRExpr_Binop(Iop_Add64, addr, r));
      }
   }
   if (k != SL_PF_OK) {
      stat_pf_unknown++;
      return;
   }
   if (a.disp) addr = ir_op(sb, IRExpr_Binop(Iop_Add64, addr, mkIRExpr_HWord((HWord)a.disp)));
   it = new_item(IT_PREFETCH);
   slot = new_slot();
   it->slot = (UShort)slot;
   it->size = SL_LINE;
   it->sub = (UChar)a.target;
   it->deps = deps;
   store_slot(sb, slot, addr);
   ins.n_mem++;
}

static void start_instr(Addr pc, UInt len)
{
   Addr l, first, lastl;
   end_instr();
   ins.pc = pc;
   ins.len = len;
   ins.n_mem = 0;
   ins.compute = False;
   ins.alu_done = False;
   ins.klass = 0;
   ins.out_deps = 0;
   ins.n_insns++;
   first = pc >> 6;
   lastl = (pc + (len ? len - 1 : 0)) >> 6;
   for (l = first; l <= lastl; l++) {
      if (ins.n_lines && ins.lines[ins.n_lines - 1] == (l << 6)) continue;
      if (ins.n_lines < sizeof ins.lines / sizeof ins.lines[0]) ins.lines[ins.n_lines++] = l << 6;
   }
}

static IRSB *sl_instrument(VgCallbackClosure *closure, IRSB *sbIn, const VexGuestLayout *layout,
                           const VexGuestExtents *vge, const VexArchInfo *archinfo_host,
                           IRType gWordTy, IRType hWordTy)
{
   IRSB *sbOut;
   Int i, last_imark = -1;
   Addr last_pc = 0;
   UInt last_len = 0;
   Int bcond_item = -1;
   SlSbDesc *d = VG_(calloc)("spelunk.sbdesc", 1, sizeof(SlSbDesc));
   (void)layout; (void)archinfo_host;

   if (gWordTy != Ity_I64 || hWordTy != Ity_I64) VG_(tool_panic)("spelunk: 64-bit guests only");

   /* reset the builder (the arrays are filled up to their counts) */
   ins.n_items = ins.n_exits = ins.n_alu = ins.n_wb = ins.n_lines = 0;
   ins.n_slots = ins.n_ldslots = ins.n_insns = 0;
   ins.n_mem = 0;
   ins.compute = ins.alu_done = ins.is_last = False;
   ins.klass = 0;
   ins.out_deps = 0;
   ins.pc = 0;
   ins.tmask = VG_(calloc)("spelunk.tmask", sbIn->tyenv->types_used + 64, sizeof(SlDeps));
   ins.tarith = VG_(calloc)("spelunk.tarith", sbIn->tyenv->types_used + 64, 1);
   for (i = 0; i < SL_NSLOTS; i++) ins.regmask[i] = (SlDeps)1 << (SL_NLDSLOTS + i);

   for (i = 0; i < sbIn->stmts_used; i++) {
      if (sbIn->stmts[i]->tag == Ist_IMark) {
         last_imark = i;
         last_pc = (Addr)sbIn->stmts[i]->Ist.IMark.addr;
         last_len = sbIn->stmts[i]->Ist.IMark.len;
      }
   }

   sbOut = deepCopyIRSBExceptStmts(sbIn);
   i = 0;
   while (i < sbIn->stmts_used && sbIn->stmts[i]->tag != Ist_IMark) {
      addStmtToIRSB(sbOut, sbIn->stmts[i]);
      i++;
   }

   for (; i < sbIn->stmts_used; i++) {
      IRStmt *st = sbIn->stmts[i];
      if (!st || st->tag == Ist_NoOp) continue;
      switch (st->tag) {
      case Ist_IMark:
         start_instr((Addr)st->Ist.IMark.addr, st->Ist.IMark.len);
         ins.is_last = (i == last_imark);
         addStmtToIRSB(sbOut, st);
         add_prefetch(sbOut, (Addr)st->Ist.IMark.addr, st->Ist.IMark.len);
         break;
      case Ist_WrTmp: {
         IRExpr *e = st->Ist.WrTmp.data;
         IRTemp t = st->Ist.WrTmp.tmp;
         if (e->tag == Iex_Load) {
            IRType ty = e->Iex.Load.ty;
            addStmtToIRSB(sbOut, st);
            add_mem(sbOut, e->Iex.Load.addr, NULL, sizeofIRType(ty), False, ls_subclass(ty), t);
         } else {
            SlDeps m;
            UChar a;
            expr_flow(sbIn->tyenv, e, &m, &a);
            ins.tmask[t] = m;
            ins.tarith[t] = a;
            addStmtToIRSB(sbOut, st);
         }
         break;
      }
      case Ist_Put: {
         Int off = st->Ist.Put.offset;
         IRExpr *data = st->Ist.Put.data;
         Int s = off2slot(off);
         if (s >= 0) {
            if (sizeofIRType(typeOfIRExpr(sbIn->tyenv, data)) >= 8)
               ins.regmask[s] = atom_mask(data);
            else
               ins.regmask[s] |= atom_mask(data);
         }
         if (off == (Int)SL_CCOP_OFF) {
            note_compute(1);
         } else if (!(off >= (Int)SL_SP_OFF && off < (Int)SL_SP_OFF + 8) &&
                    !(off >= (Int)SL_IP_OFF && off < (Int)SL_IP_OFF + 8)) {
            note_value_write(data);
         }
         addStmtToIRSB(sbOut, st);
         break;
      }
      case Ist_PutI:
         note_value_write(st->Ist.PutI.details->data);
         addStmtToIRSB(sbOut, st);
         break;
      case Ist_Store: {
         IRExpr *data = st->Ist.Store.data;
         IRType ty = typeOfIRExpr(sbIn->tyenv, data);
         note_value_write(data);
         add_mem(sbOut, st->Ist.Store.addr, NULL, sizeofIRType(ty), True, ls_subclass(ty),
                 IRTemp_INVALID);
         ins.items[ins.n_items - 1].ddeps = atom_mask(data);
         addStmtToIRSB(sbOut, st);
         break;
      }
      case Ist_StoreG: {
         IRStoreG *sg = st->Ist.StoreG.details;
         IRType ty = typeOfIRExpr(sbIn->tyenv, sg->data);
         note_value_write(sg->data);
         add_mem(sbOut, sg->addr, sg->guard, sizeofIRType(ty), True, ls_subclass(ty),
                 IRTemp_INVALID);
         ins.items[ins.n_items - 1].ddeps = atom_mask(sg->data);
         addStmtToIRSB(sbOut, st);
         break;
      }
      case Ist_LoadG: {
         IRLoadG *lg = st->Ist.LoadG.details;
         IRType ty = Ity_INVALID, tyw = Ity_INVALID;
         typeOfIRLoadGOp(lg->cvt, &tyw, &ty);
         addStmtToIRSB(sbOut, st);
         add_mem(sbOut, lg->addr, lg->guard, sizeofIRType(ty), False, ls_subclass(ty), lg->dst);
         ins.tmask[lg->dst] |= atom_mask(lg->alt);
         break;
      }
      case Ist_CAS: {
         IRCAS *cas = st->Ist.CAS.details;
         IRType ty = typeOfIRExpr(sbIn->tyenv, cas->dataLo);
         UInt sz = sizeofIRType(ty) * (cas->dataHi ? 2 : 1);
         addStmtToIRSB(sbOut, st);
         add_mem(sbOut, cas->addr, NULL, sz, False, SL_LS_EXT | SL_LS_EXT_AT, cas->oldLo);
         add_mem(sbOut, cas->addr, NULL, sz, True, SL_LS_EXT | SL_LS_EXT_AT, IRTemp_INVALID);
         if (cas->oldHi != IRTemp_INVALID) ins.tmask[cas->oldHi] = ins.tmask[cas->oldLo];
         break;
      }
      case Ist_LLSC: {
         IRExpr *sd = st->Ist.LLSC.storedata;
         addStmtToIRSB(sbOut, st);
         if (sd == NULL) {
            IRType ty = typeOfIRTemp(sbIn->tyenv, st->Ist.LLSC.result);
            add_mem(sbOut, st->Ist.LLSC.addr, NULL, sizeofIRType(ty), False,
                    SL_LS_EXT | SL_LS_EXT_EXCL, st->Ist.LLSC.result);
         } else {
            IRType ty = typeOfIRExpr(sbIn->tyenv, sd);
            add_mem(sbOut, st->Ist.LLSC.addr, NULL, sizeofIRType(ty), True,
                    SL_LS_EXT | SL_LS_EXT_EXCL, IRTemp_INVALID);
            ins.tmask[st->Ist.LLSC.result] = 0;
         }
         break;
      }
      case Ist_Dirty: {
         IRDirty *dd = st->Ist.Dirty.details;
         addStmtToIRSB(sbOut, st);
         if (dd->tmp != IRTemp_INVALID) {
            ins.tmask[dd->tmp] = 0;
            ins.tarith[dd->tmp] = 1 | (1 << 1);
         }
         if (dd->mFx != Ifx_None && dd->mAddr) {
            if (dd->mFx == Ifx_Read || dd->mFx == Ifx_Modify)
               add_mem(sbOut, dd->mAddr, dd->guard && !(dd->guard->tag == Iex_Const) ? dd->guard
                                                                                      : NULL,
                       dd->mSize, False, SL_LS_GP, IRTemp_INVALID);
            if (dd->mFx == Ifx_Write || dd->mFx == Ifx_Modify)
               add_mem(sbOut, dd->mAddr, dd->guard && !(dd->guard->tag == Iex_Const) ? dd->guard
                                                                                      : NULL,
                       dd->mSize, True, SL_LS_GP, IRTemp_INVALID);
         }
         note_compute(1);
         break;
      }
      case Ist_Exit: {
         Addr dst = (Addr)st->Ist.Exit.dst->Ico.U64;
         Bool branch = st->Ist.Exit.jk == Ijk_Boring && ins.is_last &&
                       dst != ins.pc &&
                       !(sbIn->next->tag == Iex_Const && (Addr)sbIn->next->Iex.Const.con->Ico.U64 == ins.pc);
         if (ins.compute) emit_instr_alu();
         if (branch) {
            SlItem *it;
            UInt slot = new_slot();
            IRTemp t = newIRTemp(sbOut->tyenv, Ity_I64);
            if (ins.n_mem == 0 && !ins.compute) ins.alu_done = True; /* the branch is the op */
            it = new_item(IT_BCOND);
            it->sub = SL_B_COND;
            it->slot = (UShort)slot;
            it->deps = atom_mask(st->Ist.Exit.guard);
            it->fallthrough = ins.pc + ins.len;
            it->inverted = dst == ins.pc + ins.len;
            it->target = dst;
            bcond_item = (Int)(it - ins.items);
            addStmtToIRSB(sbOut, IRStmt_WrTmp(t, IRExpr_Unop(Iop_1Uto64, st->Ist.Exit.guard)));
            store_slot(sbOut, slot, IRExpr_RdTmp(t));
         } else if (ins.n_mem == 0 && !ins.compute) {
            emit_instr_alu();
         }
         add_exit_record();
         {
            IRDirty *di = unsafeIRDirty_0_N(
               2, "sl_flush", VG_(fnptr_to_fnentry)(&sl_flush),
               mkIRExprVec_2(mkIRExpr_HWord((HWord)d), mkIRExpr_HWord((HWord)(ins.n_exits - 1))));
            di->guard = deepCopyIRExpr(st->Ist.Exit.guard);
            di->mFx = Ifx_Read;
            di->mAddr = mkIRExpr_HWord((HWord)sl_evbuf);
            di->mSize = (Int)sizeof sl_evbuf;
            addStmtToIRSB(sbOut, IRStmt_Dirty(di));
         }
         addStmtToIRSB(sbOut, st);
         break;
      }
      case Ist_AbiHint:
      case Ist_MBE:
      default:
         addStmtToIRSB(sbOut, st);
         break;
      }
   }

   /* the superblock's end */
   {
      IRJumpKind jk = sbIn->jumpkind;
      IRExpr *next = sbIn->next;
      Bool cnst = next->tag == Iex_Const;
      Addr nx = cnst ? (Addr)next->Iex.Const.con->Ico.U64 : 0;
      Addr ft = last_pc + last_len;
      Int kind = -1;
      if (bcond_item >= 0) {
         SlItem *b = &ins.items[bcond_item];
         if (b->inverted) b->target = cnst ? nx : 0;
      } else if (jk == Ijk_Call) {
         kind = cnst ? SL_B_CALL : SL_B_INDCALL;
      } else if (jk == Ijk_Ret) {
         kind = SL_B_RET;
      } else if (jk == Ijk_Boring) {
         if (!cnst) kind = SL_B_INDIRECT;
         else if (nx != ft && nx != last_pc) kind = SL_B_DIRECT;
      }
      if (kind >= 0 && ins.pc) {
         SlItem *it;
         if (ins.compute) emit_instr_alu();
         else if (ins.n_mem == 0) ins.alu_done = True; /* the branch is the op */
         it = new_item(IT_BEND);
         it->sub = (UChar)kind;
         it->fallthrough = ft;
         if (cnst) {
            it->target = nx;
         } else {
            UInt slot = new_slot();
            it->slot = (UShort)slot;
            it->deps = atom_mask(next);
            store_slot(sbOut, slot, next);
         }
      }
      end_instr();
      add_exit_record();
   }

   d->base = vge->base[0];
   d->n_items = ins.n_items;
   d->n_exits = ins.n_exits;
   d->n_alu = ins.n_alu;
   d->n_wb = ins.n_wb;
   d->n_lines = ins.n_lines;
   d->items = VG_(malloc)("spelunk.sbdesc", (ins.n_items + 1) * sizeof(SlItem));
   VG_(memcpy)(d->items, ins.items, ins.n_items * sizeof(SlItem));
   d->exits = VG_(malloc)("spelunk.sbdesc", ins.n_exits * sizeof(SlExit));
   VG_(memcpy)(d->exits, ins.exits, ins.n_exits * sizeof(SlExit));
   d->alu = VG_(malloc)("spelunk.sbdesc", (ins.n_alu + 1) * sizeof(SlAluOp));
   VG_(memcpy)(d->alu, ins.alu, ins.n_alu * sizeof(SlAluOp));
   d->wb = VG_(malloc)("spelunk.sbdesc", (ins.n_wb + 1) * sizeof(SlWriteback));
   VG_(memcpy)(d->wb, ins.wb, ins.n_wb * sizeof(SlWriteback));
   d->lines = VG_(malloc)("spelunk.sbdesc", (ins.n_lines + 1) * sizeof(Addr));
   VG_(memcpy)(d->lines, ins.lines, ins.n_lines * sizeof(Addr));
   sb_finalize(d);
   sb_register(d, closure->nraddr);

   {
      IRDirty *di = unsafeIRDirty_0_N(
         2, "sl_flush", VG_(fnptr_to_fnentry)(&sl_flush),
         mkIRExprVec_2(mkIRExpr_HWord((HWord)d), mkIRExpr_HWord((HWord)(ins.n_exits - 1))));
      di->mFx = Ifx_Read;
      di->mAddr = mkIRExpr_HWord((HWord)sl_evbuf);
      di->mSize = (Int)sizeof sl_evbuf;
      addStmtToIRSB(sbOut, IRStmt_Dirty(di));
   }
   VG_(free)(ins.tmask);
   VG_(free)(ins.tarith);
   return sbOut;
}

/* ------------------------------------------------------------------------------------------ */
/* client requests (the annotation ABI; see include/spelunk.h)                                */

static void emit_annotation(UChar kind, UInt depth, Addr addr, ULong size, const HChar *name)
{
   UInt n = name ? sl_strnlen(name, 255) : 0;
   SlCore *c = cur_core;
   if (!trace_enabled || !cur || !c) return;
   slt_begin(&trace, SLT_ANNOTATION);
   slt_u8(&trace, kind);
   slt_u8(&trace, 0);
   slt_u16(&trace, (UShort)depth);
   slt_u32(&trace, (UInt)cur->os_tid);
   slt_u16(&trace, (UShort)c->id);
   slt_u16(&trace, 0);
   slt_u32(&trace, 0);
   slt_u64(&trace, core_ticks(c));
   slt_u64(&trace, addr);
   slt_u64(&trace, size);
   slt_bytes(&trace, name ? name : "", n);
   slt_end(&trace);
}

static Bool sl_handle_client_request(ThreadId tid, UWord *arg, UWord *ret)
{
   HChar name[256];
   if (!VG_IS_TOOL_USERREQ('S', 'L', arg[0])) return False;
   if (tid < SL_MAX_THREADS && (!cur || cur_tid != tid)) {
      if (!threads[tid].live) thread_create(tid, 0);
      cur = &threads[tid];
      cur_tid = tid;
      cur_core = sl_core(sys, cur->core);
   }
   *ret = 0;
   switch (arg[0]) {
   case SPELUNK_CLREQ_ABI_VERSION:
      *ret = SPELUNK_ABI_VERSION_VALUE;
      break;
   case SPELUNK_CLREQ_PHASE_BEGIN:
      copy_client_str(arg[1], name, sizeof name);
      cur->depth++;
      emit_annotation(SLA_PHASE_BEGIN, cur->depth, 0, 0, name);
      emit_counters(cur, cur_core, SLR_ANNOTATION);
      break;
   case SPELUNK_CLREQ_PHASE_END:
      copy_client_str(arg[1], name, sizeof name);
      emit_annotation(SLA_PHASE_END, cur->depth, 0, 0, name);
      emit_counters(cur, cur_core, SLR_ANNOTATION);
      if (cur->depth) cur->depth--;
      break;
   case SPELUNK_CLREQ_OBJECT: {
      Addr a = arg[2];
      ULong sz = arg[3];
      copy_client_str(arg[1], name, sizeof name);
      emit_annotation(SLA_OBJECT, cur->depth, a, sz, name);
      if (n_objects < SL_MAX_OBJECTS && sz) {
         SlObject *o = &objects[n_objects++];
         VG_(memset)(o, 0, sizeof *o);
         o->start = a;
         o->end = a + sz;
         o->live_len = o->end > o->start ? o->end - o->start : 0;
         VG_(strncpy)(o->name, name, sizeof o->name - 1);
         if (a < obj_lo) obj_lo = a;
         if (a + sz > obj_hi) obj_hi = a + sz;
         objects_update_disjoint();
      } else if (sz && !warned_objects_full) {
         /* the annotation is in the trace; only its exact counts are not kept */
         warned_objects_full = True;
         VG_(umsg)("spelunk: more than %u objects registered: exact accesses (OBJECT_TRUTH) are "
                   "kept for the first %u only\n", SL_MAX_OBJECTS, SL_MAX_OBJECTS);
      }
      break;
   }
   case SPELUNK_CLREQ_OBJECT_FREE: {
      UInt i;
      emit_annotation(SLA_OBJECT_FREE, cur->depth, arg[1], 0, NULL);
      for (i = 0; i < n_objects; i++)
         if (objects[i].start == arg[1]) {
            objects[i].freed = True;
            objects[i].live_len = 0;
         }
      objects_update_disjoint();
      break;
   }
   case SPELUNK_CLREQ_TAG_MAPPING: {
      NSegment const *seg = VG_(am_find_nsegment)(arg[2]);
      copy_client_str(arg[1], name, sizeof name);
      if (seg && seg->kind != SkFree)
         emit_annotation(SLA_TAG_MAPPING, cur->depth, seg->start, seg->end + 1 - seg->start,
                         name);
      else
         emit_annotation(SLA_TAG_MAPPING, cur->depth, arg[2], 0, name);
      break;
   }
   case SPELUNK_CLREQ_ALLOC_ENTER:
      alloc_enter(tid, cur, arg[1], arg[2]);
      break;
   case SPELUNK_CLREQ_ALLOC_DONE:
      alloc_done(tid, cur, arg[1], arg[2], arg[3]);
      break;
   default:
      return False;
   }
   return True;
}

/* ------------------------------------------------------------------------------------------ */
/* memory map and syscalls                                                                    */

static void sl_new_mem_mmap(Addr a, SizeT len, Bool rr, Bool ww, Bool xx, ULong di_handle)
{
   (void)di_handle;
   if (sys) sl_unmap(sys, a, len); /* a new mapping: its page sizes are decided anew */
   emit_segment_at(a, len, rr, ww, xx);
}

/* Whether [a, a + len) lies in the client's private anonymous mappings (transparent huge
 * pages apply to those only; shared memory's own policy, shmem_enabled, is "never" by
 * default): the model's SlSystem.anon_fn. */
static Bool anon_range(void *ctx, Addr a, ULong len)
{
   Addr end = a + len;
   (void)ctx;
   while (a < end) {
      NSegment const *seg = VG_(am_find_nsegment)(a);
      if (!seg || seg->kind != SkAnonC) return False;
      a = seg->end + 1;
   }
   return True;
}

static void sl_new_mem_brk(Addr a, SizeT len, ThreadId tid)
{
   (void)tid;
   emit_mapping(a, len, True, True, False, 0, "[heap]");
}

static void sl_die_mem_munmap(Addr a, SizeT len)
{
   if (sys) sl_unmap(sys, a, len);
   if (n_blk_live && len) blocks_unmap(a, len);
   if (!trace_enabled) return;
   slt_begin(&trace, SLT_MUNMAP);
   slt_u64(&trace, a);
   slt_u64(&trace, len);
   slt_u64(&trace, cur_core ? core_ticks(cur_core) : 0);
   slt_end(&trace);
}

static Addr seg_starts[4096];

static void emit_initial_mappings(void)
{
   Addr *starts = seg_starts;
   Int n = VG_(am_get_segment_starts)(SkFileC | SkAnonC | SkShmC, starts, 4096), i;
   for (i = 0; i < n && i < 4096; i++) {
      NSegment const *seg = VG_(am_find_nsegment)(starts[i]);
      if (!seg) continue;
      emit_segment_at(seg->start, seg->end + 1 - seg->start, seg->hasR, seg->hasW, seg->hasX);
   }
}

static UInt exit_status;
static Bool exit_seen;

static Bool may_block(UInt syscallno)
{
   switch (syscallno) {
   case __NR_futex: case __NR_wait4: case __NR_waitid: case __NR_nanosleep:
   case __NR_clock_nanosleep: case __NR_ppoll: case __NR_pselect6: case __NR_epoll_pwait:
   case __NR_read: case __NR_recvfrom: case __NR_recvmsg: case __NR_accept4:
#if defined(VGA_amd64)
   case __NR_poll: case __NR_select: case __NR_epoll_wait: case __NR_pause: case __NR_accept:
#endif
      return True;
   default:
      return False;
   }
}

static void sl_pre_syscall(ThreadId tid, UInt syscallno, UWord *args, UInt nArgs)
{
   (void)nArgs;
   if (tid < SL_MAX_THREADS && may_block(syscallno)) threads[tid].blocked = True;
   if (syscallno == __NR_execve) sl_trace_flush(&trace);
   if (syscallno == __NR_exit_group) {
      exit_status = (UInt)(args[0] & 0xff);
      exit_seen = True;
   }
}

static void sl_post_syscall(ThreadId tid, UInt syscallno, UWord *args, UInt nArgs, SysRes res)
{
   SlThread *th;
   (void)nArgs;
   if (tid >= SL_MAX_THREADS) return;
   th = &threads[tid];
   if (!th->live) return;
   if (th->blocked) {
      /* it may have slept: it resumes no earlier than the latest clock of the running threads */
      th->blocked = False;
      if (n_live > 1 && syscallno != __NR_read && syscallno != __NR_recvfrom &&
          syscallno != __NR_recvmsg)
         sl_core_sync_clock(sl_core(sys, th->core), max_live_clock());
   }
   switch (syscallno) {
   case __NR_mmap:
      /* the program's own anonymous mappings (the allocator's are inside its blocks) */
      if (!sr_isError(res) && !th->in_alloc && (args[3] & VKI_MAP_ANONYMOUS))
         block_begin(tid, SL_ALLOC_MMAP, sr_Res(res), args[1], 0);
      break;
   case __NR_madvise:
      /* MADV_HUGEPAGE / MADV_NOHUGEPAGE for the emulated THP policy; the host's answer does
       * not matter (a host kernel without THP refuses them with EINVAL) unless the range is
       * not mapped */
      if (sys && (!sr_isError(res) || sr_Err(res) == VKI_EINVAL))
         sl_madvise(sys, args[0], args[1], (UInt)args[2]);
      break;
   case __NR_prctl:
      if (args[0] == 15 /* PR_SET_NAME */) {
         copy_client_str(args[1], th->name, sizeof th->name);
         emit_thread_name(th, th->name);
      }
      break;
   default:
      break;
   }
}

/* ------------------------------------------------------------------------------------------ */
/* start and finish                                                                           */

static void emit_process(void)
{
   Int i;
   UInt argc = 1 + (UInt)VG_(sizeXA)(VG_(args_for_client));
   if (!trace_enabled) return;
   slt_begin(&trace, SLT_PROCESS);
   slt_u32(&trace, (UInt)main_pid);
   slt_u32(&trace, argc);
   slt_bytes(&trace, VG_(args_the_exename), sl_strnlen(VG_(args_the_exename), 4096) + 1);
   for (i = 0; i < VG_(sizeXA)(VG_(args_for_client)); i++) {
      HChar *a = *(HChar **)VG_(indexXA)(VG_(args_for_client), i);
      slt_bytes(&trace, a, sl_strnlen(a, 65536) + 1);
   }
   slt_end(&trace);
}

static void open_trace(const HChar *path)
{
   SysRes r = VG_(open)(path, VKI_O_CREAT | VKI_O_TRUNC | VKI_O_WRONLY, 0644);
   if (sr_isError(r)) {
      VG_(fmsg)("spelunk: cannot open trace file '%s' for writing\n", path);
      VG_(exit)(1);
   }
   sl_trace_init(&trace, (Int)sr_Res(r));
   trace_enabled = True;
   slt_file_header(&trace);
   slt_config(&trace, &cfg, (UInt)clo_switch_min, (UInt)clo_switch_max, (ULong)clo_timeline_us * 1000,
              SL_TOOL_VERSION, SL_HOST_ARCH);
   slt_counter_schema(&trace, &cfg);
   emit_process();
}

static HChar child_path[4200];

static void sl_atfork_pre(ThreadId tid) { (void)tid; sl_trace_flush(&trace); }
static void sl_atfork_parent(ThreadId tid) { (void)tid; }
static void sl_atfork_child(ThreadId tid)
{
   /* the child writes its own trace next to the parent's */
   SlThread *th;
   if (trace.fd >= 0) VG_(close)(trace.fd);
   main_pid = VG_(getpid)();
   {
      /* the new process's counters start at zero (its caches keep the parent's contents) */
      UInt i;
      for (i = 0; i < sys->n_cores_alloc; i++) {
         SlCore *c = sys->cores[i];
         if (!c) continue;
         VG_(memset)(c->c, 0, sizeof c->c);
         c->c[SL_T_IDLE_TQ] = c->t;
         sl_core_rebase_ops(c);
      }
   }
   blocks_forget();
   VG_(snprintf)(child_path, sizeof child_path, "%s.%d", clo_out, main_pid);
   open_trace(child_path);
   emit_initial_mappings();
   if (tid < SL_MAX_THREADS && threads[tid].live) {
      th = &threads[tid];
      th->os_tid = VG_(gettid)();
      emit_thread_start(th, tid);
   }
}

static void sl_post_clo_init(void)
{
   const HChar *err;
   if (clo_switch_min < 1) clo_switch_min = 1;
   if (clo_switch_max < clo_switch_min) clo_switch_max = clo_switch_min;
   apply_presets();
   err = sl_config_check(&cfg);
   if (err) {
      VG_(fmsg)("spelunk: bad configuration: %s\n", err);
      VG_(exit)(1);
   }
   {
      SlSink sink = {emit_sample, NULL};
      sys = sl_system_new(&cfg, &sink);
      sys->ready_fn = alu_ready;
      sys->anon_fn = anon_range;
   }
   timeline_tq = (ULong)clo_timeline_us * (cfg.cpu_hz / 1000000ull) * SL_TQ;
   main_pid = VG_(getpid)();
   /* %p (pid), %q{VAR} and %n expand as in Valgrind's --log-file */
   clo_out = VG_(expand_file_name)("--out", clo_out);
   open_trace(clo_out);
   emit_initial_mappings();
   VG_(atfork)(sl_atfork_pre, sl_atfork_parent, sl_atfork_child);
}

static void sl_fini(Int exitcode)
{
   UInt i;
   ULong tmax = 0;
   if (!sys) return;
   for (i = 1; i < SL_MAX_THREADS; i++) {
      if (threads[i].live) sl_pre_thread_ll_exit((ThreadId)i);
   }
   for (i = 0; i < sys->n_cores_alloc; i++) {
      SlCore *c = sys->cores[i];
      if (!c) continue;
      emit_counters(NULL, c, SLR_FINAL);
      if (c->t > tmax) tmax = c->t;
   }
   if (trace_enabled) {
      for (i = 0; i < n_objects; i++) {
         SlObject *o = &objects[i];
         slt_begin(&trace, SLT_OBJECT_TRUTH);
         slt_u64(&trace, o->start);
         slt_u64(&trace, o->end - o->start);
         slt_u64(&trace, o->loads);
         slt_u64(&trace, o->stores);
         slt_u64(&trace, o->load_bytes);
         slt_u64(&trace, o->store_bytes);
         slt_u64(&trace, o->l1d_misses);
         slt_bytes(&trace, o->name, sl_strnlen(o->name, sizeof o->name));
         slt_end(&trace);
      }
      blocks_finish();
      slt_begin(&trace, SLT_END);
      (void)exitcode; /* Valgrind passes 0 here; the status comes from exit_group */
      slt_u32(&trace, exit_status);
      slt_u32(&trace, exit_seen ? 1u : 0u);
      slt_u64(&trace, samples_written);
      slt_u64(&trace, sl_ticks(sys, tmax));
      slt_end(&trace);
      sl_trace_flush(&trace);
      if (trace.failed) VG_(fmsg)("spelunk: writing the trace file '%s' failed\n", clo_out);
      if (VG_(clo_verbosity) > 1)
         VG_(umsg)("spelunk: %llu samples, %llu bytes written to %s; %llu scheduling slices, "
                   "%llu thread switches, %llu forced yields (%llu with sched_yield, %llu "
                   "repeated); %llu translations instrumented, %llu discarded; %llu heap blocks, "
                   "%llu ended; %llu prefetch instructions translated, %llu with unrecognised "
                   "addressing (not modelled)\n",
                   samples_written, trace.written, clo_out, stat_slices, stat_switches, stat_yields,
                   stat_os_yields, stat_retries, stat_sb_made, stat_sb_freed, stat_blocks,
                   stat_block_frees, stat_pf_insns, stat_pf_unknown);
      else if (stat_pf_unknown)
         VG_(umsg)("spelunk: %llu of %llu prefetch instructions translated have addressing the "
                   "model does not read (fs/gs segments, 32-bit addresses): they count as other "
                   "ops\n",
                   stat_pf_unknown, stat_pf_insns);
      VG_(close)(trace.fd);
   }
}

static void sl_pre_clo_init(void)
{
   VG_(details_name)("spelunk");
   VG_(details_version)(SL_TOOL_VERSION);
   VG_(details_description)("emulated Arm SPE and PMU for memory-centric profiling");
   VG_(details_copyright_author)("spelunk authors");
   VG_(details_bug_reports_to)("https://example.invalid/spelunk");
   VG_(details_avg_translation_sizeB)(600);

   VG_(basic_tool_funcs)(sl_post_clo_init, sl_instrument, sl_fini);
   VG_(needs_command_line_options)(sl_process_cmd_line_option, sl_print_usage,
                                   sl_print_debug_usage);
   VG_(needs_client_requests)(sl_handle_client_request);
   VG_(needs_superblock_discards)(sl_discard_superblock);
   VG_(needs_syscall_wrapper)(sl_pre_syscall, sl_post_syscall);
   VG_(track_pre_thread_ll_create)(sl_pre_thread_ll_create);
   VG_(track_pre_thread_ll_exit)(sl_pre_thread_ll_exit);
   VG_(track_start_client_code)(sl_start_client_code);
   VG_(track_stop_client_code)(sl_stop_client_code);
   VG_(track_new_mem_mmap)(sl_new_mem_mmap);
   VG_(track_new_mem_brk)(sl_new_mem_brk);
   VG_(track_die_mem_munmap)(sl_die_mem_munmap);

   /* one guest basic block per superblock: branches end superblocks, so every control transfer
    * is visible to the model; no IR loop unrolling */
   VG_(clo_vex_control).guest_chase = False;
   VG_(clo_vex_control).iropt_unroll_thresh = 0;
   /* every instruction's register writes reach the guest state before the next one: VEX
    * translates prefetch instructions to no IR, so add_prefetch reads their address registers
    * from the guest state, where the optimiser would otherwise drop a write that a later
    * instruction overwrites (a few per cent on STREAM) */
   VG_(clo_vex_control).iropt_register_updates_default = VexRegUpdAllregsAtEachInsn;

   sl_config_default(&cfg);
   trace.fd = -1;
   sb_descs = VG_(HT_construct)("spelunk.sbdescs");
}

VG_DETERMINE_INTERFACE_VERSION(sl_pre_clo_init)
