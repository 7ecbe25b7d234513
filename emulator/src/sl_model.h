/* SPDX-License-Identifier: GPL-2.0-or-later (a Valgrind tool; see LICENSE.md) */
/* spelunk emulator: the machine model (caches with coherence, TLBs, prefetcher, branch
 * predictor, a dispatch/issue/retire timing model, the SPE sampler and the PMU counters).
 *
 * This file and sl_model.c use no Valgrind API and no libc beyond what sl_port.h maps, so the
 * same code runs inside the Valgrind tool and in the native unit tests (tests/model_test.c).
 *
 * Units: times are "tq", a fixed-point cycle count with SL_TQ sub-cycles per core cycle (the
 * dispatch of one op takes SL_TQ / dispatch_width tq). Latencies in the configuration are whole
 * cycles. Every number that comes from a paper or manual says where it comes from in
 * sl_model.c:sl_config_default().
 */
#ifndef SL_MODEL_H
#define SL_MODEL_H

#include "sl_port.h"

#define SL_TQ 256u /* tq per cycle */

/* A dependency set (see sl_main.c): one bit per load of a superblock and per tracked guest
 * register. */
typedef unsigned __int128 SlDeps;
#define SL_LINE_SHIFT 6u
/* --no-transfer-range: a core's private copy of a line is the line address XOR (core id + 1)
 * << this (physical addresses stay under 2^48: DRAM from 0x8000000000, page tables from
 * 0x7000000000) */
#define SL_PRIVATE_LINE_SHIFT 42u
#define SL_LINE 64u

/* Most virtual cores a run may have (--cores): bounds the model's core table and the tool's
 * per-core arrays alike. */
#define SL_MAX_CORES 1024u

/* ---- PMU events (architected codes, Arm's N1 PMU event list, ARM-software/data pmu/neoverse-n1.json)
 * and spelunk ground-truth counters (codes >= 0x80000000, never produced by hardware). */
typedef enum {
   SL_C_CPU_CYCLES, SL_C_INST_RETIRED, SL_C_INST_SPEC, SL_C_LD_SPEC, SL_C_ST_SPEC, SL_C_DP_SPEC,
   SL_C_ASE_SPEC, SL_C_VFP_SPEC, SL_C_BR_IMMED_SPEC, SL_C_BR_RETURN_SPEC, SL_C_BR_INDIRECT_SPEC,
   SL_C_BR_RETIRED, SL_C_BR_MIS_PRED_RETIRED, SL_C_MEM_ACCESS, SL_C_MEM_ACCESS_RD,
   SL_C_MEM_ACCESS_WR, SL_C_L1D_CACHE, SL_C_L1D_CACHE_REFILL, SL_C_L1I_CACHE,
   SL_C_L1I_CACHE_REFILL, SL_C_L2D_CACHE, SL_C_L2D_CACHE_REFILL, SL_C_LL_CACHE_RD,
   SL_C_LL_CACHE_MISS_RD, SL_C_BUS_ACCESS, SL_C_BUS_ACCESS_RD, SL_C_BUS_ACCESS_WR, SL_C_L1D_TLB,
   SL_C_L1D_TLB_REFILL, SL_C_DTLB_WALK, SL_C_ITLB_WALK, SL_C_STALL_FRONTEND, SL_C_STALL_BACKEND,
   SL_C_SAMPLE_POP, SL_C_SAMPLE_FEED, SL_C_SAMPLE_FILTRATE, SL_C_SAMPLE_COLLISION,
   SL_C_L1I_TLB, SL_C_L1I_TLB_REFILL, SL_C_L2D_TLB, SL_C_L2D_TLB_REFILL, SL_C_L2D_CACHE_WB,
   /* Neoverse V1/V2/N2 only (SL_EVSET_SLOTS): the events of their telemetry top-down formulas */
   SL_C_BR_MIS_PRED, SL_C_OP_SPEC, SL_C_OP_RETIRED, SL_C_STALL_SLOT, SL_C_STALL_SLOT_BACKEND,
   SL_C_STALL_SLOT_FRONTEND,
   /* ground truth */
   SL_T_LD_OPS_L1D, SL_T_LD_OPS_L2, SL_T_LD_OPS_PEER, SL_T_LD_OPS_SLC, SL_T_LD_OPS_DRAM,
   SL_T_LD_BYTES_L1D, SL_T_LD_BYTES_L2, SL_T_LD_BYTES_PEER, SL_T_LD_BYTES_SLC, SL_T_LD_BYTES_DRAM,
   SL_T_ST_OPS, SL_T_ST_BYTES, SL_T_PREFETCH_LINES, SL_T_LATE_PREFETCH, SL_T_COHERENCE_INVAL,
   SL_T_LD_LATENCY_CYCLES, SL_T_IDLE_TQ,
   SL_NCOUNTERS
} SlCounter;

typedef struct {
   UInt code;
   const HChar *name;
} SlCounterInfo;

extern const SlCounterInfo sl_counter_info[SL_NCOUNTERS];

/* PMU event sets (SlConfig.pmu_events): which counters a core implements. */
#define SL_EVSET_N1 0u    /* Neoverse N1: every counter before SL_C_BR_MIS_PRED, and the truth */
#define SL_EVSET_SLOTS 1u /* Neoverse V1/V2/N2: N1's and the slot events of top-down */
struct SlConfig_;
Bool sl_counter_implemented(const struct SlConfig_ *cfg, UInt i);

/* ---- Data sources: the common Arm encoding of [SPE methodology table 4.2] (crates/spe datasource.rs). */
#define SL_DS_L1D 0x0u
#define SL_DS_L2 0x8u
#define SL_DS_PEER 0x9u
#define SL_DS_SLC 0xbu
#define SL_DS_DRAM 0xeu

/* Levels used internally and in the ground truth. */
typedef enum { SL_LVL_L1D = 0, SL_LVL_L2, SL_LVL_PEER, SL_LVL_SLC, SL_LVL_DRAM, SL_NLVL } SlLevel;

/* ---- SPE Events packet bits (Arm ARM; crates/spe events.rs). N1 implements bits 0-11 and the
 * IMPLEMENTATION DEFINED bit 12 "late prefetch". */
#define SL_EV_RETIRED (1u << 1)
#define SL_EV_L1D_ACCESS (1u << 2)
#define SL_EV_L1D_REFILL (1u << 3)
#define SL_EV_TLB_ACCESS (1u << 4)
#define SL_EV_TLB_WALK (1u << 5)
#define SL_EV_NOT_TAKEN (1u << 6)
#define SL_EV_MISPRED (1u << 7)
#define SL_EV_LLC_ACCESS (1u << 8)
#define SL_EV_LLC_MISS (1u << 9)
#define SL_EV_ALIGNMENT (1u << 11) /* "Alignment": an unaligned access (set for line-crossing ones) */
#define SL_EV_LATE_PREFETCH (1u << 12)

/* ---- SPE Operation Type packet (Arm ARM; crates/spe op.rs). */
#define SL_OPC_OTHER 0u
#define SL_OPC_LDST 1u
#define SL_OPC_BRANCH 2u
/* load/store subclass byte */
#define SL_LS_ST 0x01u
#define SL_LS_GP 0x00u
#define SL_LS_SIMDFP 0x04u
#define SL_LS_EXT 0x02u /* extended: | AT 0x04 | EXCL 0x08 | AR 0x10 */
#define SL_LS_EXT_AT 0x04u
#define SL_LS_EXT_EXCL 0x08u
#define SL_LS_EXT_AR 0x10u
/* branch subclass byte */
#define SL_BR_COND 0x01u
#define SL_BR_IND 0x02u
#define SL_BR_CALL (1u << 3)
#define SL_BR_RET (2u << 3)
/* other subclass byte */
#define SL_OT_COND 0x01u
#define SL_OT_FP 0x02u
#define SL_OT_SIMD 0x04u

/* SPE type filter bits (PMSFCR_EL1.FT with LD/ST/B). 0 = no type filter. */
#define SL_FILT_LOAD 1u
#define SL_FILT_STORE 2u
#define SL_FILT_BRANCH 4u

typedef struct SlConfig_ {
   /* CPU identity claimed in the trace */
   const HChar *cpu_name;
   const HChar *platform_name; /* the --platform preset's name; NULL without one */
   ULong midr;
   ULong cpu_hz;
   ULong timer_hz;
   /* core pipeline */
   UInt dispatch_width, rob_size, ls_issue_queue, mshrs, store_buffer, mispredict_penalty;
   /* caches: sizes in bytes, latencies are load-to-use cycles including an L1 DTLB hit */
   UInt l1d_size, l1d_assoc, l1d_lat;
   UInt l1i_size, l1i_assoc;
   UInt l2_size, l2_assoc, l2_lat;
   UInt slc_size, slc_assoc, slc_lat;
   UInt dram_lat, peer_lat;
   /* DRAM bandwidth (MODEL.md "DRAM bandwidth and queueing"): channels and each channel's
    * bandwidth in MB/s (10^6 bytes a second); 0 channels: unlimited */
   UInt dram_channels, dram_channel_mbps;
   UInt split_penalty; /* cycles a line-crossing access adds to its latency (MODEL.md "Timing") */
   UInt fwd_lat;       /* store-to-load forwarding: cycles from the store's data to the load's */
   UInt fwd_fail_penalty; /* a load forwarding cannot serve: cycles after the store's write */
   /* counterfactual knobs (emulator/README.md "Counterfactual knobs"): loads whose PC is in
    * [l1_pc_lo[i], l1_pc_hi[i]) complete at the L1D latency; [huge_lo[i], huge_hi[i]) has huge
    * pages whatever the THP policy and the mapping */
#define SL_MAX_KNOB_RANGES 8
   UInt n_l1_pcs, n_huge_ranges;
   Addr l1_pc_lo[SL_MAX_KNOB_RANGES], l1_pc_hi[SL_MAX_KNOB_RANGES];
   Addr huge_lo[SL_MAX_KNOB_RANGES], huge_hi[SL_MAX_KNOB_RANGES];
   /* ... the lines of [no_transfer_lo[i], no_transfer_hi[i]) (data addresses) are private to
    * each core (no invalidation or transfer between cores); loads whose PC is in
    * [forward_pc_lo[i], forward_pc_hi[i]) read what a store in the store buffer wrote at the
    * L1D latency, without waiting for the store; accesses whose PC is in [no_split_pc_lo[i],
    * no_split_pc_hi[i]) are made as if they did not cross a line */
   UInt n_no_transfer, n_forward_pcs, n_no_split_pcs;
   Addr no_transfer_lo[SL_MAX_KNOB_RANGES], no_transfer_hi[SL_MAX_KNOB_RANGES];
   Addr forward_pc_lo[SL_MAX_KNOB_RANGES], forward_pc_hi[SL_MAX_KNOB_RANGES];
   Addr no_split_pc_lo[SL_MAX_KNOB_RANGES], no_split_pc_hi[SL_MAX_KNOB_RANGES];
   UInt prefetch_distance; /* lines ahead; 0 disables the prefetcher */
   UInt stride_distance;   /* strides ahead the stride prefetcher fills L2; 0 disables it */
   UInt stride_max_lines;  /* largest stride (lines) the stride prefetcher follows */
   /* translation (MODEL.md "Translation"): every mapping has base pages of 1 << page_shift
    * bytes; transparent huge pages of 1 << huge_shift bytes (the granule's block size: 2 MB
    * with 4 KB pages, 32 MB with 16 KB, 512 MB with 64 KB; 0 for other base pages, which
    * then hold everywhere) where the THP policy and the mapping allow them */
   UInt page_shift;
   UInt thp;        /* SL_THP_* */
   UInt huge_shift; /* derived by sl_config_check */
   UInt l1dtlb_entries, l1itlb_entries, l2tlb_entries, l2tlb_assoc;
   UInt l1tlb_lat, l2tlb_lat, walk_lat;
   /* branch prediction */
   UInt bp_hist_bits, bp_table_bits, btb_entries, ras_entries;
   /* system */
   UInt max_cores;
   ULong dram_pa_base, pt_pa_base;
   /* SPE */
   UInt spe_interval;   /* PMSIRR_EL1.INTERVAL as applied: a multiple of 256 */
   Bool spe_jitter;     /* PMSIRR_EL1.RND */
   UInt spe_type_filter; /* SL_FILT_* (0 = record every type) */
   UInt spe_min_latency; /* PMSLATFR_EL1.MINLAT; 0 = off */
   ULong spe_event_filter; /* PMSEVFR_EL1; 0 = off */
   Bool spe_collisions;
   Bool spe_ts, spe_pa;
   UInt spe_counter_bits; /* latency counters saturate at (1 << bits) - 1 */
   Bool spe_late_prefetch; /* the IMPLEMENTATION DEFINED "late prefetch" event (bit 12), N1's */
   UInt pmu_events;        /* SL_EVSET_* */
   UInt seed;
} SlConfig;

void sl_config_default(SlConfig *cfg);

/* THP policies (/sys/kernel/mm/transparent_hugepage/enabled) */
#define SL_THP_NEVER 0u
#define SL_THP_MADVISE 1u
#define SL_THP_ALWAYS 2u
/* The policy's name ("never", "madvise", "always"); sl_thp_parse returns False for others. */
const HChar *sl_thp_name(UInt thp);
Bool sl_thp_parse(const HChar *name, UInt *thp);

/* Presets (emulator/MODEL.md "Cores and platforms"). A core preset sets the core's parameters
 * (dispatch width, reorder window, mispredict penalty, L2 size and latency, TLBs, return
 * stack, MIDR, name, PMU events, SPE events; L1 sizes and latency stay N1's); a platform
 * preset sets its core, then clock, L2 size, SLC, page size, SLC and DRAM latencies, core count
 * and (when it has its own) MIDR. `core` (may be NULL) replaces the platform's core. Returns
 * NULL, or a message naming the valid presets. */
const HChar *sl_config_preset(SlConfig *cfg, const HChar *platform, const HChar *core);
Bool sl_cpu_model_known(const HChar *name);
Bool sl_platform_known(const HChar *name);
#define SL_CPU_MODELS "neoverse-n1, neoverse-v1, neoverse-v2, neoverse-n2"
#define SL_PLATFORMS "graviton2, graviton3, graviton4, grace, cobalt100, altra, n1sdp"
/* Checks and normalises a configuration; returns NULL or a message for the user. */
const HChar *sl_config_check(SlConfig *cfg);

/* ---- one SPE sample as the model produces it */
typedef struct {
   UInt core;
   UChar op_class, op_subclass, access_size, level; /* level: SlLevel, 0xff when none */
   UShort total_lat, issue_lat, xlat_lat, data_source; /* SPE-visible (saturated) */
   UInt events;
   UInt flags; /* SL_SF_* */
   ULong pc, va, pa, target;
   ULong ts;   /* generic timer ticks */
   ULong exact_total_cycles; /* unsaturated, ground truth */
} SlSample;

#define SL_SF_VA 1u
#define SL_SF_PA 2u
#define SL_SF_TARGET 4u
#define SL_SF_DS 8u
#define SL_SF_XLAT 16u
#define SL_SF_TS 32u

typedef struct {
   void (*sample)(void *ctx, const SlSample *s);
   void *ctx;
} SlSink;

/* ---- caches */
typedef struct {
   ULong ready;   /* tq at which the fill completes */
   UChar state;   /* SL_I/S/E/M */
   UChar flags;   /* SL_LF_* */
   UShort l1_way; /* L2 lines: the L1D way the line was last filled into (while the line is
                   * in L1D, it is in that way: see l2_access) */
   union {
      UInt slc_way; /* L2 lines: the SLC way the line was found in or allocated to when it was
                     * filled (a hint for the write-back, validated by tag) */
      UInt l2_way;  /* L1D lines: the L2 way holding the line (a hint, validated by tag) */
   };
} SlLine;

#define SL_I 0
#define SL_S 1
#define SL_E 2
#define SL_M 3
#define SL_LF_PREFETCHED 1u /* L1D: brought by the prefetcher, not used yet */
#define SL_LF_IN_L1I 2u     /* L2: was filled into L1I (only such lines can be in L1I) */
#define SL_LF_L2_PREFETCH 4u /* L2: requested by the L2 (stride) prefetcher, no request from L1
                              * for it yet */

typedef struct {
   SlLine *lines; /* sets * assoc (NULL for the SLC) */
   Addr *tags;    /* physical line address (pa >> 6) + 1 of each way; 0 = invalid */
   ULong *lru;    /* last use of each way (cache clock): true LRU, the smallest valid one in a
                   * set is replaced */
   UInt sets, assoc, set_mask;
   ULong clock;
} SlCache;

/* A TLB entry: one page of any size. */
typedef struct {
   Addr tag;  /* the page's virtual address | 1; 0 = invalid */
   Addr pa;   /* the page's physical address */
   Addr mask; /* the page's size - 1 */
   ULong lru;
} SlTlbEntry;

/* Whether entry e translates va (an invalid entry translates nothing). */
static inline Bool sl_tlbe_maps(const SlTlbEntry *e, Addr va)
{
   return e->tag == ((va & ~e->mask) | 1u);
}

typedef struct {
   SlTlbEntry *e; /* sets * assoc; true LRU by use stamps */
   UInt sets, assoc, set_mask; /* sets is a power of two */
   ULong clock;
   UInt hint[4], hint_pos; /* indices of recent hits, checked before a scan */
} SlTlb;

typedef struct {
   Addr page;  /* 4 KB region number + 1 */
   Long last;  /* last line */
   Long next;  /* next line to prefetch */
   Int dir, conf;
   ULong lru;
} SlStream;

#define SL_NSTREAMS 16
/* trainings after which an unused confirmed stream may be replaced like an unconfirmed one */
#define SL_STREAM_IDLE (4 * SL_NSTREAMS)

/* A stride prefetcher entry: the load at pc, in virtual lines. */
typedef struct {
   Addr pc;     /* +1; 0 = free */
   Long last;   /* last virtual line */
   Long stride; /* lines */
   Long next;   /* next virtual line to prefetch into L2 */
   Int conf;
} SlStride;

#define SL_NSTRIDES 16

/* A store that may still be in the store buffer, for store-to-load forwarding: filed under
 * each 8-byte chunk it writes (SlCore.fwd, direct-mapped by chunk address; the youngest store
 * of a chunk replaces the older one). */
typedef struct {
   Addr va;          /* first byte; 0 = none */
   UInt size;
   ULong data_ready; /* its data is there (tq) */
   ULong written;    /* it has left the store buffer: written to L1D (tq) */
} SlFwd;

#define SL_NFWD 64u

typedef struct {
   ULong due;    /* the first op it holds back: its index + rob_size */
   ULong retire; /* its retirement (tq) */
} SlRobEnt;

typedef struct {
   Addr va_line, line; /* virtual line (~0 = none), physical line */
   UInt way;           /* L1I way */
} SlIMemo;

typedef struct SlCore SlCore;
typedef struct SlSystem SlSystem;

struct SlCore {
   SlSystem *sys;
   UInt id;
   Bool active;
   SlCache l1d, l1i, l2;
   /* ways of recently used or prefetched L1D lines, by the low bits of the line address (the
    * default L1D's set index): a look-up shortcut, validated by tag */
#define SL_L1_MEMO 256u
   UInt l1_recent[SL_L1_MEMO];
   /* recently fetched code lines, by virtual line (validated by tag): the L1I way and the
    * physical line */
   SlIMemo imemo[4];
   SlTlb dtlb, itlb, stlb;
   SlTlbEntry *last_tlbe[2];  /* the L1 TLB entry of the previous data [0] / instruction [1]
                               * access (never NULL; validated by sl_tlbe_maps) */
   /* recently used L1 TLB entries by page (validated by vpn): a lookup shortcut only, the
    * entries' LRU stamps are updated as for any hit. Direct-mapped by the low bits of the
    * base-page number (a huge page fills the slots of the base pages used in it), so the pages of arrays walked side by side (up to SL_UTLB pages apart) do
    * not evict each other's memo. */
#define SL_UTLB 32u
   SlTlbEntry *utlb[2][SL_UTLB];
   /* timing */
   ULong t;         /* dispatch time of the next op (tq) */
   ULong last_retire;
   ULong pop;       /* ops dispatched (SAMPLE_POP) */
   /* issue queue, store buffer and miss registers: rings of the times of the last memory ops,
    * stores and demand misses (0 until written: no constraint) */
   UInt iq_pos, stb_pos, mshr_pos;
   /* tracked ops in flight (memory ops, late-resolving branches), oldest first: a ring of a
    * power-of-two size above rob_size with free-running head/tail counts (at most rob_size
    * entries are live: op n retires the entries of ops <= n - rob_size) */
   SlRobEnt *rob; ULong rob_head, rob_tail; UInt rob_mask;
   ULong rob_due;   /* .due of the oldest entry, ~0 when none */
   ULong rob_size;
   ULong *iq, *mshr, *stb;
   /* branch prediction */
   UChar *pht; UInt ghist; Addr *btb; Addr *ras; UInt ras_top;
   /* prefetcher */
   SlStream streams[SL_NSTREAMS]; ULong stream_clock; UInt last_stream;
   SlStride strides[SL_NSTRIDES];
   /* stores for store-to-load forwarding */
   SlFwd fwd[SL_NFWD];
   /* SPE */
   ULong next_sample;   /* population index of the next selected op */
   ULong inflight_until; /* completion (tq) of the last recorded sampled op */
   UInt rng;
   /* coherence activity seen during the current scheduling slice */
   UInt coherence_events;
   ULong c[SL_NCOUNTERS];
};

struct SlSystem {
   SlConfig cfg;
   SlSink sink;
   SlCore **cores;
   UInt n_cores_alloc;
   UInt n_active;
   SlCache slc;
   UChar *slc_state; /* per SLC line: SL_E, or SL_M once dirty data was written back */
   /* page table: page (virtual address | 1) -> its physical address, open addressing;
    * physical memory is handed out from next_pa, each page aligned to its size */
   Addr *pt_vpn; Addr *pt_pfn; ULong pt_cap, pt_used, next_pa;
   /* page sizes per region of 1 << huge_shift bytes: decided at the first translation in the
    * region (SL_RG_*), by region number + 1, open addressing */
   Addr *rg_key; UChar *rg_state; ULong rg_cap, rg_used;
   Addr rg_memo; UInt rg_memo_shift; /* the last region looked up (+1) and its page shift */
   /* madvise(MADV_HUGEPAGE / MADV_NOHUGEPAGE) ranges in call order */
   struct SlAdvice *adv; UInt n_adv, cap_adv, n_adv_huge;
   /* whether [a, a + len) lies in anonymous private mappings (THP applies only to those);
    * NULL: every range does */
   Bool (*anon_fn)(void *ctx, Addr a, ULong len);
   void *anon_ctx;
   ULong disp_tq; /* tq per dispatched op */
   ULong coherence_events; /* snoops that found the line in another core */
   /* DRAM bandwidth: bytes read per time bucket of SL_DRAM_BUCKET_CYCLES, a ring of
    * SL_DRAM_BUCKETS (tag: bucket number + 1); a bucket's capacity and one line's service time
    * on one channel (tq) */
   ULong *dram_bkt_tag; ULong *dram_bkt_bytes; ULong dram_cap_bytes, dram_service_tq;
   /* resolves an SlAluOp dependency mask to a ready time (tq); NULL = always ready */
   ULong (*ready_fn)(void *ctx, SlDeps deps);
   void *ready_ctx;
};

SlSystem *sl_system_new(const SlConfig *cfg, const SlSink *sink);
SlCore *sl_core(SlSystem *s, UInt id); /* allocates on first use */
/* A line read from DRAM at time t (tq): books its bytes on the channels and returns how long
 * (tq) it waits for them beyond the unloaded DRAM latency (MODEL.md "DRAM bandwidth and
 * queueing"). */
ULong sl_dram_read(SlSystem *s, ULong t);
#define SL_DRAM_BUCKET_CYCLES 256
#define SL_DRAM_BUCKETS 256
void sl_core_set_active(SlCore *c, Bool active);

/* ---- ops. Each call dispatches ops in program order on one core. */

/* A run of n non-memory, non-branch ops. `info` describes each op for sampling (NULL: plain
 * integer ops); `counts` (may be NULL) gives how many of them are DP, ASE and VFP ops. */
typedef struct {
   Addr pc;
   UChar subclass; /* SL_OT_* */
   UChar counter;  /* SL_C_DP_SPEC / ASE / VFP */
   SlDeps deps;    /* dependency set, resolved through SlSystem.ready_fn when sampled */
} SlAluOp;
void sl_alu(SlCore *c, UInt n, const SlAluOp *info, const UShort *counts);

typedef struct {
   Addr pc, va;
   UInt size;
   Bool store;
   UChar subclass;      /* SL_LS_* byte without the store bit */
   ULong addr_ready;    /* tq when the address operands are ready (0 = now) */
   ULong data_ready;    /* stores: tq when the data to store is ready (0 = now) */
} SlMemOp;
/* Returns the time (tq) the loaded value is available (loads) or the store retired; *lvl (may
 * be NULL) receives the level that supplied the line. */
ULong sl_mem(SlCore *c, const SlMemOp *m, SlLevel *lvl);

/* What one memory instruction of the replay found last (the tool keeps one per instruction):
 * on which core, its virtual line, the physical line, the L1 DTLB entry that translated it and
 * the L1D way that held it. When the next access of the instruction is to the same virtual line
 * while that entry still maps the page and that way still holds the line, the access is an L1
 * TLB hit and an L1D hit in those places, found without the look-ups (sl_mem would find the
 * same ones: a page and a line are in at most one entry/way). A shortcut only: it is validated
 * on every use and changes no result. */
typedef struct {
   SlCore *core; /* NULL: empty */
   Addr vline, line;
   SlTlbEntry *te;
   UInt way;
} SlMemMemo;

/* A software prefetch instruction (x86 prefetch*, Arm PRFM/PRFUM): one load op that starts a
 * line fill into the requested level and retires without waiting for the data. */
typedef enum { SL_PF_L1, SL_PF_L2, SL_PF_NONE } SlPrefetchTarget;
void sl_prefetch(SlCore *c, const SlMemOp *m, SlPrefetchTarget target);

typedef enum { SL_B_COND, SL_B_DIRECT, SL_B_CALL, SL_B_INDIRECT, SL_B_INDCALL, SL_B_RET } SlBranchKind;
typedef struct {
   Addr pc, target, fallthrough;
   SlBranchKind kind;
   Bool taken;
   ULong ready; /* condition / target operands ready (tq) */
} SlBranch;
void sl_branch(SlCore *c, const SlBranch *b);

/* Instruction fetch of one 64-byte code line (called per executed superblock line). */
void sl_ifetch(SlCore *c, Addr va);

/* A memo for a run of code lines fetched together (a superblock's): on which core, the code
 * page, and each line's L1I way and physical line. While that core's last translated code page
 * is the run's page and each line is still in its way, fetching the run changes the model
 * exactly as sl_ifetch per line would (an L1 ITLB hit and an L1I hit per line), without the
 * per-line look-ups. A shortcut only: it is validated on every use. */
#define SL_IRUN_MAX 4
typedef struct {
   SlCore *core; /* NULL: empty */
   const SlTlbEntry *te; /* the code page's L1 ITLB entry, and its tag then */
   Addr tag;
   UInt n;
   UInt way[SL_IRUN_MAX];
   Addr line[SL_IRUN_MAX];
} SlIRun;

/* Counts retired instructions (guest instructions). */
static inline void sl_retire_insns(SlCore *c, UInt n) { c->c[SL_C_INST_RETIRED] += n; }

/* Restarts a core's op count at 0 (a forked child's SAMPLE_POP counts its own ops), moving
 * everything indexed by it (the next selected op, the reorder-window entries' release points)
 * along, so the pipeline carries on as it was. */
void sl_core_rebase_ops(SlCore *c);

/* Moves a core's clock forward (idle time: not counted as CPU_CYCLES). */
void sl_core_sync_clock(SlCore *c, ULong t);

/* The current time of a core in generic-timer ticks. */
ULong sl_ticks(const SlSystem *s, ULong tq);
static inline ULong sl_cycles(ULong tq) { return tq / SL_TQ; }

/* Finalises CPU_CYCLES (active time) into the counter array. */
void sl_core_counters(SlCore *c, ULong out[SL_NCOUNTERS]);

/* Translation as the trace records it (used by the tool for annotations). */
Addr sl_translate_pa(SlSystem *s, Addr va);

/* The OS's view of the address space, for transparent huge pages (MODEL.md "Translation"):
 * madvise(a, len, advice) succeeded (SL_MADV_HUGEPAGE, SL_MADV_NOHUGEPAGE; other advice is
 * ignored), and [a, a + len) was unmapped or mapped anew (its regions' page sizes are decided
 * again at their next use, its advice dropped). */
#define SL_MADV_HUGEPAGE 14u   /* Linux's MADV_HUGEPAGE */
#define SL_MADV_NOHUGEPAGE 15u /* Linux's MADV_NOHUGEPAGE */
void sl_madvise(SlSystem *s, Addr a, ULong len, UInt advice);
void sl_unmap(SlSystem *s, Addr a, ULong len);
/* The page size (shift) that va has or will have at its first use. */
UInt sl_page_shift_of(SlSystem *s, Addr va);

/* Actual average sampling interval per [SPE methodology table 4.3] (x2 to keep halves exact). */
ULong sl_spe_interval_x2(const SlConfig *cfg);

#endif
