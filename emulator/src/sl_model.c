/* SPDX-License-Identifier: GPL-2.0-or-later (a Valgrind tool; see LICENSE.md) */
/* spelunk emulator: machine model. See sl_model.h for the interface and units, and
 * emulator/MODEL.md for the description of every mechanism and its provenance. */
#include "sl_model.h"

/* Event codes: Arm's Neoverse N1 PMU event list (ARM-software/data, pmu/neoverse-n1.json) ("code" fields).
 * Ground-truth counters use 0x80000000 + n: spelunk's own numbering, never a hardware event. */
const SlCounterInfo sl_counter_info[SL_NCOUNTERS] = {
   [SL_C_CPU_CYCLES] = {0x11, "CPU_CYCLES"},
   [SL_C_INST_RETIRED] = {0x08, "INST_RETIRED"},
   [SL_C_INST_SPEC] = {0x1b, "INST_SPEC"},
   [SL_C_LD_SPEC] = {0x70, "LD_SPEC"},
   [SL_C_ST_SPEC] = {0x71, "ST_SPEC"},
   [SL_C_DP_SPEC] = {0x73, "DP_SPEC"},
   [SL_C_ASE_SPEC] = {0x74, "ASE_SPEC"},
   [SL_C_VFP_SPEC] = {0x75, "VFP_SPEC"},
   [SL_C_BR_IMMED_SPEC] = {0x78, "BR_IMMED_SPEC"},
   [SL_C_BR_RETURN_SPEC] = {0x79, "BR_RETURN_SPEC"},
   [SL_C_BR_INDIRECT_SPEC] = {0x7a, "BR_INDIRECT_SPEC"},
   [SL_C_BR_RETIRED] = {0x21, "BR_RETIRED"},
   [SL_C_BR_MIS_PRED_RETIRED] = {0x22, "BR_MIS_PRED_RETIRED"},
   [SL_C_MEM_ACCESS] = {0x13, "MEM_ACCESS"},
   [SL_C_MEM_ACCESS_RD] = {0x66, "MEM_ACCESS_RD"},
   [SL_C_MEM_ACCESS_WR] = {0x67, "MEM_ACCESS_WR"},
   [SL_C_L1D_CACHE] = {0x04, "L1D_CACHE"},
   [SL_C_L1D_CACHE_REFILL] = {0x03, "L1D_CACHE_REFILL"},
   [SL_C_L1I_CACHE] = {0x14, "L1I_CACHE"},
   [SL_C_L1I_CACHE_REFILL] = {0x01, "L1I_CACHE_REFILL"},
   [SL_C_L2D_CACHE] = {0x16, "L2D_CACHE"},
   [SL_C_L2D_CACHE_REFILL] = {0x17, "L2D_CACHE_REFILL"},
   [SL_C_LL_CACHE_RD] = {0x36, "LL_CACHE_RD"},
   [SL_C_LL_CACHE_MISS_RD] = {0x37, "LL_CACHE_MISS_RD"},
   [SL_C_BUS_ACCESS] = {0x19, "BUS_ACCESS"},
   [SL_C_BUS_ACCESS_RD] = {0x60, "BUS_ACCESS_RD"},
   [SL_C_BUS_ACCESS_WR] = {0x61, "BUS_ACCESS_WR"},
   [SL_C_L1D_TLB] = {0x25, "L1D_TLB"},
   [SL_C_L1D_TLB_REFILL] = {0x05, "L1D_TLB_REFILL"},
   [SL_C_DTLB_WALK] = {0x34, "DTLB_WALK"},
   [SL_C_ITLB_WALK] = {0x35, "ITLB_WALK"},
   [SL_C_STALL_FRONTEND] = {0x23, "STALL_FRONTEND"},
   [SL_C_STALL_BACKEND] = {0x24, "STALL_BACKEND"},
   [SL_C_SAMPLE_POP] = {0x4000, "SAMPLE_POP"},
   [SL_C_SAMPLE_FEED] = {0x4001, "SAMPLE_FEED"},
   [SL_C_SAMPLE_FILTRATE] = {0x4002, "SAMPLE_FILTRATE"},
   [SL_C_SAMPLE_COLLISION] = {0x4003, "SAMPLE_COLLISION"},
   [SL_C_L1I_TLB] = {0x26, "L1I_TLB"},
   [SL_C_L1I_TLB_REFILL] = {0x02, "L1I_TLB_REFILL"},
   [SL_C_L2D_TLB] = {0x2f, "L2D_TLB"},
   [SL_C_L2D_TLB_REFILL] = {0x2d, "L2D_TLB_REFILL"},
   [SL_C_L2D_CACHE_WB] = {0x18, "L2D_CACHE_WB"},
   /* Arm's Neoverse V1, V2 and N2 PMU event lists (telemetry specifications, "events" codes) */
   [SL_C_BR_MIS_PRED] = {0x10, "BR_MIS_PRED"},
   [SL_C_OP_SPEC] = {0x3b, "OP_SPEC"},
   [SL_C_OP_RETIRED] = {0x3a, "OP_RETIRED"},
   [SL_C_STALL_SLOT] = {0x3f, "STALL_SLOT"},
   [SL_C_STALL_SLOT_BACKEND] = {0x3d, "STALL_SLOT_BACKEND"},
   [SL_C_STALL_SLOT_FRONTEND] = {0x3e, "STALL_SLOT_FRONTEND"},
   [SL_T_LD_OPS_L1D] = {0x80000000u, "TRUTH_LOAD_OPS_L1D"},
   [SL_T_LD_OPS_L2] = {0x80000001u, "TRUTH_LOAD_OPS_L2"},
   [SL_T_LD_OPS_PEER] = {0x80000002u, "TRUTH_LOAD_OPS_PEER_CORE"},
   [SL_T_LD_OPS_SLC] = {0x80000003u, "TRUTH_LOAD_OPS_SLC"},
   [SL_T_LD_OPS_DRAM] = {0x80000004u, "TRUTH_LOAD_OPS_DRAM"},
   [SL_T_LD_BYTES_L1D] = {0x80000010u, "TRUTH_LOAD_BYTES_L1D"},
   [SL_T_LD_BYTES_L2] = {0x80000011u, "TRUTH_LOAD_BYTES_L2"},
   [SL_T_LD_BYTES_PEER] = {0x80000012u, "TRUTH_LOAD_BYTES_PEER_CORE"},
   [SL_T_LD_BYTES_SLC] = {0x80000013u, "TRUTH_LOAD_BYTES_SLC"},
   [SL_T_LD_BYTES_DRAM] = {0x80000014u, "TRUTH_LOAD_BYTES_DRAM"},
   [SL_T_ST_OPS] = {0x80000020u, "TRUTH_STORE_OPS"},
   [SL_T_ST_BYTES] = {0x80000021u, "TRUTH_STORE_BYTES"},
   [SL_T_PREFETCH_LINES] = {0x80000030u, "TRUTH_PREFETCHED_LINES"},
   [SL_T_LATE_PREFETCH] = {0x80000031u, "TRUTH_LATE_PREFETCH_HITS"},
   [SL_T_COHERENCE_INVAL] = {0x80000040u, "TRUTH_COHERENCE_INVALIDATIONS"},
   [SL_T_LD_LATENCY_CYCLES] = {0x80000050u, "TRUTH_LOAD_LATENCY_CYCLES_SUM"},
   [SL_T_IDLE_TQ] = {0x80000060u, "TRUTH_IDLE_CYCLES"},
};

#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* ------------------------------------------------------------------------------------------ */
/* configuration                                                                              */

void sl_config_default(SlConfig *c)
{
   SL_MEMSET(c, 0, sizeof *c);
   c->cpu_name = "Neoverse N1";
   c->midr = 0x413fd0c1ull;        /* N1 r3p1: implementer 0x41, variant 3, part 0xd0c, rev 1 */
   c->cpu_hz = 2800000000ull;      /* [SPE methodology §4.3]: "our 2.8 GHz platform" */
   c->timer_hz = 1000000000ull;    /* declared generic-timer rate (configurable: --timer-hz) */
   c->dispatch_width = 4;          /* [N1 PMU methodology]: "can fetch up to 4 instructions per cycle", IPC max 4 */
   c->rob_size = 128;              /* [Arm N1 platform white paper]: a 128-entry commit queue */
   /* Derived from [SPE methodology table 4.4]: issue latency / load-to-use latency is 33.2/1.429 = 23.2
    * (L1D), 116.1/5.0 = 23.2 (L2), 836.1/36.6 = 22.8 (SLC): ~23 dependent loads queue between
    * dispatch and issue. */
   c->ls_issue_queue = 23;
   c->mshrs = 24;                  /* calibrated: MODEL.md "Software prefetch" */
   c->store_buffer = 24;           /* assumed: no N1 figure found */
   c->mispredict_penalty = 11;     /* [Arm N1 platform white paper]: the minimum penalty, 11 */
   /* [SPE methodology §4.2.1] and [N1 PMU methodology]: 64 KB 4-way L1D, 1 MB 8-way L2, 32 MB system-level cache */
   c->l1d_size = 64 << 10; c->l1d_assoc = 4;
   c->l1i_size = 64 << 10; c->l1i_assoc = 4;
   c->l2_size = 1 << 20; c->l2_assoc = 8;
   c->slc_size = 32 << 20; c->slc_assoc = 16; /* associativity assumed */
   /* [SPE methodology table 4.4] plateaus at 2.8 GHz: 1.429 ns = 4 cycles, ~5.0 ns = 14, ~36.6 ns = 103,
    * ~101 ns = 283 (load-to-use including the 1-cycle L1 DTLB lookup) */
   c->l1d_lat = 4; c->l2_lat = 14; c->slc_lat = 103; c->dram_lat = 283;
   c->peer_lat = 200;              /* assumed: between SLC and DRAM */
   /* assumed: 8 channels of DDR4-3200 (8 bytes x 3200 MT/s = 25600 MB/s each), the memory of
    * the N1 servers whose figures were found (Graviton2 and Altra, MODEL.md "Platforms") */
   c->dram_channels = 8;
   c->dram_channel_mbps = 25600;
   /* assumed: Arm's optimization guides (Cortex-A57's, as quoted; N1's not reached) list loads
    * that cross a 64-byte line among the accesses that "reduce bandwidth or incur additional
    * latency" without a figure; Cortex-A55's guide gives such splits 1 cycle */
   c->split_penalty = 1;
   /* assumed (no N1 figure found): a load that a store in the store buffer serves gets the
    * data an L1D latency after the store has it; one forwarding cannot serve (it needs bytes
    * of an older store or of the cache too: a partial overlap, a load wider than the store)
    * waits until the store is written to L1D, then replays (its L1D access again) and pays
    * N1's minimum pipeline refill, the 11 cycles of a mispredict */
   c->fwd_lat = 4;
   c->fwd_fail_penalty = 11;
   /* calibrated: bw_mem frd over 64 MB (DRAM) reads ~10.0 GB/s, [SPE methodology table 4.7] measured
    * 9.47 GB/s on N1 */
   c->prefetch_distance = 10;
   /* calibrated: the stride benchmark of [N1 PMU methodology] (stride 7 lines, 4 KB pages, 8 MB
    * SLC) takes ~22 cycles per iteration on N1 (IPC 0.22 at 5.02 instructions per iteration);
    * see MODEL.md "Prefetcher" */
   c->stride_distance = 12;
   c->stride_max_lines = 16;      /* assumed: below the 64-line (4 KB) stride of lat_mem_rd */
   /* 4 KB base pages, the arm64 Linux distributions' (assumed), with transparent huge pages
    * where a program asks for them: madvise, Ubuntu's default since 18.04 (its kernel
    * configuration CONFIG_TRANSPARENT_HUGEPAGE_MADVISE, [Ubuntu THP madvise]); MODEL.md
    * "Translation" */
   c->page_shift = 12;
   c->thp = SL_THP_MADVISE;
   /* fully associative 48-entry L1 ITLB: [Arm N1 platform white paper]; 48-entry fully associative L1
    * DTLB and 1280-entry 5-way L2 TLB: [Cortex-A76 TRM §A5.2] (the core N1 derives from; N1's own TRM
    * was not reached) */
   c->l1dtlb_entries = 48; c->l1itlb_entries = 48;
   c->l2tlb_entries = 1280; c->l2tlb_assoc = 5;
   c->l1tlb_lat = 1;               /* [SPE methodology table 4.4]: xlat 0.357 ns = 1 cycle */
   c->l2tlb_lat = 5;               /* [SPE methodology table 4.4] (-t, P2): xlat 2.143 ns = 6 cycles = 1 + 5 */
   c->walk_lat = 12;               /* assumed; plus the leaf PTE fetch through L2/SLC/DRAM */
   c->bp_hist_bits = 12; c->bp_table_bits = 14; c->btb_entries = 4096; c->ras_entries = 16;
   c->max_cores = 64;
   c->dram_pa_base = 0x8000000000ull; /* [SPE methodology figure 4.7] physical addresses 0x80........ */
   c->pt_pa_base = 0x7000000000ull;
   c->spe_interval = 1024;         /* [SPE methodology §4.2.4]: default = caps/min_interval */
   c->spe_jitter = False;
   c->spe_collisions = True;
   c->spe_ts = True; c->spe_pa = True;
   c->spe_counter_bits = 12;       /* 12-bit saturating counters ([SPE methodology table 4.4] "Saturated") */
   c->spe_late_prefetch = True;    /* N1's IMPLEMENTATION DEFINED event bit 12 ([SPE methodology table 4.5]) */
   c->pmu_events = SL_EVSET_N1;
   c->seed = 0x5e1u;
}

/* ------------------------------------------------------------------------------------------ */
/* core and platform presets: every value and its source in emulator/MODEL.md "Cores and      */
/* platforms"                                                                                 */

typedef struct {
   const HChar *name, *cpu_name;
   ULong midr;
   UInt dispatch_width, rob_size, mispredict_penalty, l2_size, l2_lat, pmu_events;
   Bool spe_late_prefetch;
   UInt l1dtlb_entries, l1itlb_entries, l2tlb_entries, l2tlb_assoc, ras_entries;
} SlCoreModel;

static const SlCoreModel sl_core_models[] = {
   /* today's defaults (sl_config_default) */
   {"neoverse-n1", "Neoverse N1", 0x413fd0c1ull, 4, 128, 11, 1u << 20, 14, SL_EVSET_N1, True,
    48, 48, 1280, 5, 16},
   /* MIDR revision and dispatch slots: Arm's telemetry specification (product_configuration
    * major/minor_revision, num_slots); reorder windows and V1's and N2's mispredict penalties:
    * LLVM's scheduling models (MicroOpBufferSize, MispredictPenalty); V2's L2 load-to-use:
    * Graviton4's pointer chase (4.0 ns x 2.8 GHz = 11.2), also taken for V1, whose L2 Arm gives
    * the same 10-cycle load-to-use as V2's ([Arm V1 Teratec 2021], [Arm HC2023 V2]); V2's
    * penalty: Cortex-X3's from the instruction cache ([AnandTech Cortex-X4]). TLBs (L1 D, L1 I,
    * L2 entries, L2 ways): V2's from [Neoverse V2 TRM] (48, 48, 2048 8-way; 2048 / 8 = 256
    * sets); V1's L1 DTLB 40 ([Arm HC2023 V2]: V2 "increased from 40 to 48") and L2 TLB 2048
    * ([Arm V1 Teratec 2021]: "MMU capacity 1.2K->2K entry"), its L1 ITLB and L2 ways assumed
    * (V2's); N2's assumed (N1's). Return stack: V2's 32 measured ([jiegec V2 review]), the
    * others' assumed (N1's). N2's L2 latency assumed (N1's). */
   {"neoverse-v1", "Neoverse V1", 0x411fd402ull, 8, 256, 11, 1u << 20, 11, SL_EVSET_SLOTS, False,
    40, 48, 2048, 8, 16},
   {"neoverse-v2", "Neoverse V2", 0x410fd4f0ull, 8, 320, 11, 2u << 20, 11, SL_EVSET_SLOTS, False,
    48, 48, 2048, 8, 32},
   {"neoverse-n2", "Neoverse N2", 0x410fd493ull, 5, 160, 10, 1u << 20, 14, SL_EVSET_SLOTS, False,
    48, 48, 1280, 5, 16},
};

typedef struct {
   const HChar *name, *core;
   ULong cpu_hz;
   UInt l2_size, slc_size, slc_assoc, page_shift, slc_lat, dram_lat, max_cores;
   ULong midr; /* 0: the core's */
   UInt thp;   /* SL_THP_* */
   UInt dram_channels, dram_channel_mbps; /* MODEL.md "DRAM bandwidth and queueing" */
} SlPlatform;

static const SlPlatform sl_platforms[] = {
   /* SLC and DRAM latencies in cycles at the platform clock: ns x GHz, rounded; Graviton2's
    * SLC (28.8 ns) and Graviton4's SLC and DRAM (21.2 and 110.0 ns) are pointer-chase
    * measurements, the others N1's 36.6 and 101 ns (assumed). Cobalt 100's 3.4 GHz: [Arm LP
    * Cobalt 100]; N1SDP's 2.6 GHz: [Arm SCP firmware N1SDP] (the cores' initial rate). */
   {"graviton2", "neoverse-n1", 2500000000ull, 1u << 20, 32u << 20, 16, 12, 72, 203, 64, 0, SL_THP_MADVISE, 8, 25600},
   {"graviton3", "neoverse-v1", 2600000000ull, 1u << 20, 32u << 20, 16, 12, 95, 263, 64, 0, SL_THP_MADVISE, 8, 38400},
   {"graviton4", "neoverse-v2", 2800000000ull, 2u << 20, 36u << 20, 18, 12, 59, 308, 96, 0, SL_THP_MADVISE, 12, 44800},
   {"grace", "neoverse-v2", 2600000000ull, 1u << 20, 117u << 20, 117, 16, 95, 263, 72, 0, SL_THP_MADVISE, 32, 16000},
   {"cobalt100", "neoverse-n2", 3400000000ull, 1u << 20, 64u << 20, 16, 12, 124, 343, 128,
    0x6d0fd493ull, SL_THP_MADVISE, 12, 38400},
   {"altra", "neoverse-n1", 3000000000ull, 1u << 20, 32u << 20, 16, 12, 110, 303, 80, 0, SL_THP_MADVISE, 8, 25600},
   /* the stride case study's platform of [N1 PMU methodology]: latencies kept in cycles.
    * THP policies: madvise everywhere, Ubuntu's default ([Ubuntu THP madvise]) and Azure
    * Linux's on arm64 ([Azure Linux THP madvise], for Cobalt 100); assumed for the others.
    * Base pages: 4 KB, 64 KB on Grace (MODEL.md "Platforms") */
   {"n1sdp", "neoverse-n1", 2600000000ull, 1u << 20, 8u << 20, 16, 12, 103, 283, 4, 0, SL_THP_MADVISE, 2, 25600},
};

#define SL_NELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* The entry of a preset table whose first member (its name) is `name`, or NULL. */
static const void *find_named(const void *table, UInt n, ULong size, const HChar *name)
{
   const UChar *e = table;
   UInt i;
   for (i = 0; name && i < n; i++, e += size)
      if (SL_STRCMP(*(const HChar *const *)e, name) == 0) return e;
   return NULL;
}

static const SlCoreModel *find_core(const HChar *name)
{
   return find_named(sl_core_models, SL_NELEMS(sl_core_models), sizeof sl_core_models[0], name);
}

static const SlPlatform *find_platform(const HChar *name)
{
   return find_named(sl_platforms, SL_NELEMS(sl_platforms), sizeof sl_platforms[0], name);
}

Bool sl_cpu_model_known(const HChar *name) { return find_core(name) != NULL; }
Bool sl_platform_known(const HChar *name) { return find_platform(name) != NULL; }

const HChar *sl_config_preset(SlConfig *c, const HChar *platform, const HChar *core)
{
   const SlPlatform *p = NULL;
   const SlCoreModel *m;
   if (platform) {
      p = find_platform(platform);
      if (!p) return "unknown platform; valid: " SL_PLATFORMS;
   }
   if (core) {
      m = find_core(core);
      if (!m) return "unknown core; valid: " SL_CPU_MODELS;
   } else {
      m = find_core(p ? p->core : "neoverse-n1");
   }
   c->cpu_name = m->cpu_name;
   c->platform_name = p ? p->name : NULL;
   c->midr = m->midr;
   c->dispatch_width = m->dispatch_width;
   c->rob_size = m->rob_size;
   c->mispredict_penalty = m->mispredict_penalty;
   c->l2_size = m->l2_size;
   c->l2_lat = m->l2_lat;
   c->pmu_events = m->pmu_events;
   c->spe_late_prefetch = m->spe_late_prefetch;
   c->l1dtlb_entries = m->l1dtlb_entries; c->l1itlb_entries = m->l1itlb_entries;
   c->l2tlb_entries = m->l2tlb_entries; c->l2tlb_assoc = m->l2tlb_assoc;
   c->ras_entries = m->ras_entries;
   if (p) {
      c->cpu_hz = p->cpu_hz;
      c->l2_size = p->l2_size;
      c->slc_size = p->slc_size;
      c->slc_assoc = p->slc_assoc;
      c->page_shift = p->page_shift;
      c->thp = p->thp;
      c->slc_lat = p->slc_lat;
      c->dram_lat = p->dram_lat;
      c->dram_channels = p->dram_channels;
      c->dram_channel_mbps = p->dram_channel_mbps;
      c->max_cores = p->max_cores;
      if (p->midr && !core) c->midr = p->midr;
   }
   return NULL;
}

Bool sl_counter_implemented(const SlConfig *c, UInt i)
{
   if (i >= SL_C_BR_MIS_PRED && i <= SL_C_STALL_SLOT_FRONTEND) return c->pmu_events == SL_EVSET_SLOTS;
   return i < SL_NCOUNTERS;
}

static Bool is_pow2(ULong x) { return x && !(x & (x - 1)); }

const HChar *sl_config_check(SlConfig *c)
{
   if (c->cpu_hz == 0 || c->timer_hz == 0) return "frequencies must be > 0";
   if (c->dispatch_width == 0 || c->dispatch_width > SL_TQ) return "dispatch width out of range";
   if (c->rob_size == 0 || c->ls_issue_queue == 0 || c->mshrs == 0 || c->store_buffer == 0)
      return "pipeline sizes must be > 0";
   if (c->rob_size > (1u << 24)) return "reorder window too large";
   if (!is_pow2(c->l1d_size / SL_LINE / (c->l1d_assoc ? c->l1d_assoc : 1)) || c->l1d_assoc == 0)
      return "L1D sets must be a power of two";
   if (!is_pow2(c->l1i_size / SL_LINE / (c->l1i_assoc ? c->l1i_assoc : 1)) || c->l1i_assoc == 0)
      return "L1I sets must be a power of two";
   if (!is_pow2(c->l2_size / SL_LINE / (c->l2_assoc ? c->l2_assoc : 1)) || c->l2_assoc == 0)
      return "L2 sets must be a power of two";
   if (!is_pow2(c->slc_size / SL_LINE / (c->slc_assoc ? c->slc_assoc : 1)) || c->slc_assoc == 0)
      return "SLC sets must be a power of two";
   if (c->l1d_lat < c->l1tlb_lat + 1) return "L1D latency must exceed the L1 TLB latency";
   if (c->l2_lat < c->l1d_lat || c->slc_lat < c->l2_lat || c->dram_lat < c->slc_lat)
      return "latencies must grow with the level";
   if (c->peer_lat < c->l2_lat) return "peer-core latency must be at least the L2 latency";
   if (c->page_shift < 12 || c->page_shift > 30) return "page size out of range";
   if (c->thp > SL_THP_ALWAYS) return "unknown THP policy";
   /* transparent huge pages are the translation granule's level-2 blocks (a table holds
    * page / 8 descriptors, Arm ARM VMSAv8-64): 2 MB with 4 KB pages, 32 MB with 16 KB, 512 MB
    * with 64 KB; other base page sizes have none */
   c->huge_shift = (c->page_shift == 12 || c->page_shift == 14 || c->page_shift == 16)
                      ? 2 * c->page_shift - 3 : 0;
   if (c->l1dtlb_entries == 0 || c->l1itlb_entries == 0) return "TLB sizes must be > 0";
   if (c->l2tlb_assoc == 0 || !is_pow2(c->l2tlb_entries / c->l2tlb_assoc))
      return "L2 TLB sets must be a power of two";
   if (c->bp_table_bits < 4 || c->bp_table_bits > 24 || c->bp_hist_bits > c->bp_table_bits)
      return "branch predictor size out of range";
   if (!is_pow2(c->btb_entries) || c->ras_entries == 0) return "BTB/RAS sizes out of range";
   if (c->max_cores == 0 || c->max_cores > SL_MAX_CORES) return "core count out of range";
   if (c->spe_interval < 256) return "sampling interval below 256";
   c->spe_interval &= ~255u; /* PMSIRR_EL1.INTERVAL is in units of 256 ([SPE methodology §4.2.4]) */
   if (c->spe_counter_bits < 8 || c->spe_counter_bits > 16) return "counter width out of range";
   return NULL;
}

const HChar *sl_thp_name(UInt thp)
{
   return thp == SL_THP_NEVER ? "never" : thp == SL_THP_ALWAYS ? "always" : "madvise";
}

Bool sl_thp_parse(const HChar *name, UInt *thp)
{
   UInt i;
   for (i = SL_THP_NEVER; i <= SL_THP_ALWAYS; i++)
      if (SL_STRCMP(name, sl_thp_name(i)) == 0) {
         *thp = i;
         return True;
      }
   return False;
}

ULong sl_spe_interval_x2(const SlConfig *c)
{
   /* [SPE methodology table 4.3]: no jitter -> base + 1; jitter with ERnd = 0 -> base + 128 on average. */
   return c->spe_jitter ? 2ull * c->spe_interval + 256 : 2ull * (c->spe_interval + 1);
}

/* ------------------------------------------------------------------------------------------ */
/* small helpers                                                                              */

static inline UInt rng_next(UInt *s)
{
   UInt x = *s;
   x ^= x << 13; x ^= x >> 17; x ^= x << 5;
   *s = x ? x : 0x9e3779b9u;
   return *s;
}

ULong sl_ticks(const SlSystem *s, ULong tq)
{
   ULong cyc = tq / SL_TQ, hz = s->cfg.cpu_hz, th = s->cfg.timer_hz;
   return (cyc / hz) * th + ((cyc % hz) * th) / hz;
}

static inline UShort sat(const SlSystem *s, ULong cycles)
{
   ULong max = (1ull << s->cfg.spe_counter_bits) - 1;
   return (UShort)(cycles > max ? max : cycles);
}

/* ------------------------------------------------------------------------------------------ */
/* caches                                                                                     */

/* 64-byte aligned zeroed memory (never freed), so a set's tags and stamps share few host
 * cache lines. */
static void *calloc_aligned(ULong n, ULong size)
{
   UChar *p = SL_CALLOC(n * size + 64, 1);
   return (void *)(((Addr)p + 63) & ~(Addr)63);
}

/* payload: whether lines carry an SlLine (the SLC's do not) */
static void cache_init(SlCache *c, UInt size, UInt assoc, Bool payload)
{
   UInt lines = size / SL_LINE;
   c->assoc = assoc;
   c->sets = lines / assoc;
   c->set_mask = c->sets - 1;
   c->lines = payload ? calloc_aligned(lines, sizeof(SlLine)) : NULL;
   c->tags = calloc_aligned(lines, sizeof(Addr));
   c->lru = calloc_aligned(lines, sizeof(ULong));
}

/* Set scans. The searches are branch-free (a conditional move per way, one branch at the end)
 * because which way hits or is replaced is data-dependent and mispredicts on the host.
 *
 * Invalid ways (tag 0) have the stamp 0 (calloc, and cache_invalidate clears it) while valid
 * ways have stamps >= 1 (++clock), so the replacement rule "the first invalid way, else the
 * least recently used" is simply "the first way with the smallest stamp". */

/* Way (within the set) holding tag, or -1 (tags in a set are unique). */
static SL_ALWAYS_INLINE Int set_find(const Addr *t, Addr tag, const UInt assoc)
{
   Int hit = -1;
   UInt w;
#pragma GCC unroll 16
   for (w = 0; w < assoc; w++) hit = t[w] == tag ? (Int)w : hit;
   return hit;
}

/* The way to replace: the first one with the smallest stamp. */
static SL_ALWAYS_INLINE UInt set_victim(const ULong *u, const UInt assoc)
{
   UInt w, v = 0;
   ULong m = u[0];
#pragma GCC unroll 16
   for (w = 1; w < assoc; w++) {
      ULong x = u[w];
      Bool lt = x < m;
      v = lt ? w : v;
      m = lt ? x : m;
   }
   return v;
}

static SL_ALWAYS_INLINE Int cache_find_n(const SlCache *c, Addr line, const UInt assoc)
{
   UInt base = (UInt)(line & c->set_mask) * assoc;
   Int w = set_find(&c->tags[base], line + 1, assoc);
   return w < 0 ? -1 : (Int)base + w;
}

/* Index of a line's way, or -1. */
static inline Int cache_find(const SlCache *c, Addr line)
{
   /* the default associativities, unrolled */
   switch (c->assoc) {
   case 4: return cache_find_n(c, line, 4);
   case 8: return cache_find_n(c, line, 8);
   case 16: return cache_find_n(c, line, 16);
   default: return cache_find_n(c, line, c->assoc);
   }
}

/* Makes way i the most recently used of its set. */
static inline void cache_touch(SlCache *c, UInt i) { c->lru[i] = ++c->clock; }

/* Finds a line; a hit becomes the most recently used of its set. */
static inline SlLine *cache_lookup(SlCache *c, Addr line)
{
   Int i = cache_find(c, line);
   if (i < 0) return NULL;
   cache_touch(c, (UInt)i);
   return &c->lines[i];
}

/* Finds a line without changing the replacement order. */
static inline SlLine *cache_peek(SlCache *c, Addr line)
{
   Int i = cache_find(c, line);
   return i < 0 ? NULL : &c->lines[i];
}

/* Inserts a line as the most recently used, replacing an invalid way or the least recently
 * used one; returns its way index. The evicted line's tag (0 when none) and state go to
 * *vtag / *vstate. */
static inline UInt cache_insert_idx(SlCache *c, Addr line, Addr *vtag, UChar *vstate)
{
   UInt base = (UInt)(line & c->set_mask) * c->assoc, v;
   const ULong *u = &c->lru[base];
   SlLine *l;
   switch (c->assoc) {
   case 4: v = base + set_victim(u, 4); break;
   case 8: v = base + set_victim(u, 8); break;
   default: v = base + set_victim(u, c->assoc); break;
   }
   l = &c->lines[v];
   *vtag = c->tags[v];
   *vstate = l->state;
   c->tags[v] = line + 1;
   l->ready = 0;
   l->state = SL_I;
   l->flags = 0;
   c->lru[v] = ++c->clock;
   return v;
}

/* Finds a line's way (-1 when absent) and, when absent, the way an insert would replace (as
 * cache_insert_idx chooses it: the first invalid way, else the least recently used). */
static SL_ALWAYS_INLINE Int find_victim_n(const SlCache *c, Addr line, UInt *victim,
                                           const UInt assoc)
{
   UInt base = (UInt)(line & c->set_mask) * assoc;
   Int w = set_find(&c->tags[base], line + 1, assoc);
   if (w >= 0) return (Int)base + w;
   *victim = base + set_victim(&c->lru[base], assoc);
   return -1;
}

/* Host-cache prefetch of a set's tags and stamps (no effect on the model). */
static inline void cache_prefetch_set(const SlCache *c, Addr line)
{
   UInt base = (UInt)(line & c->set_mask) * c->assoc, k;
   for (k = 0; k < c->assoc; k += 8) {
      SL_PREFETCH(&c->tags[base + k]);
      SL_PREFETCH(&c->lru[base + k]);
   }
}

/* The same for a set's line payloads (l2_access reads the victim's state). */
static inline void cache_prefetch_set_lines(const SlCache *c, Addr line)
{
   UInt base = (UInt)(line & c->set_mask) * c->assoc, k;
   for (k = 0; k < c->assoc; k += 64 / sizeof(SlLine)) SL_PREFETCH(&c->lines[base + k]);
}

static SL_ALWAYS_INLINE Int cache_find_victim(const SlCache *c, Addr line, UInt *victim)
{
   /* the default associativities, unrolled; inlined into the line-fill path (l2_access,
    * slc_insert) rather than called: that path runs for every prefetched line */
   switch (c->assoc) {
   case 8: return find_victim_n(c, line, victim, 8);
   case 16: return find_victim_n(c, line, victim, 16);
   default: return find_victim_n(c, line, victim, c->assoc);
   }
}

/* Puts a line in way v (from cache_find_victim, the set unchanged since) as the most recently
 * used; the evicted line's tag (0 when none) and state go to *vtag / *vstate. */
static inline SlLine *cache_insert_at(SlCache *c, UInt v, Addr line, Addr *vtag, SlLine *victim)
{
   SlLine *l = &c->lines[v];
   *vtag = c->tags[v];
   *victim = *l;
   c->tags[v] = line + 1;
   l->ready = 0;
   l->state = SL_I;
   l->flags = 0;
   c->lru[v] = ++c->clock;
   return l;
}

static inline SlLine *cache_insert(SlCache *c, Addr line)
{
   Addr vt;
   UChar vs;
   return &c->lines[cache_insert_idx(c, line, &vt, &vs)];
}

static inline void cache_invalidate_way(SlCache *c, UInt i)
{
   c->tags[i] = 0;
   c->lru[i] = 0; /* invalid ways have the stamp 0 (see set_victim) */
   c->lines[i].state = SL_I;
   c->lines[i].flags = 0;
}

static inline void cache_invalidate(SlCache *c, Addr line)
{
   Int i = cache_find(c, line);
   if (i >= 0) cache_invalidate_way(c, (UInt)i);
}

/* ------------------------------------------------------------------------------------------ */
/* system and cores                                                                           */

SlSystem *sl_system_new(const SlConfig *cfg, const SlSink *sink)
{
   SlSystem *s = SL_CALLOC(1, sizeof(SlSystem));
   s->cfg = *cfg;
   if (sink) s->sink = *sink;
   s->cores = SL_CALLOC(cfg->max_cores, sizeof(SlCore *));
   cache_init(&s->slc, cfg->slc_size, cfg->slc_assoc, False);
   s->slc_state = SL_CALLOC(cfg->slc_size / SL_LINE, 1);
   s->pt_cap = 1 << 12;
   s->pt_vpn = SL_CALLOC(s->pt_cap, sizeof(Addr));
   s->pt_pfn = SL_CALLOC(s->pt_cap, sizeof(Addr));
   s->next_pa = cfg->dram_pa_base;
   s->rg_cap = 1 << 8;
   s->rg_key = SL_CALLOC(s->rg_cap, sizeof(Addr));
   s->rg_state = SL_CALLOC(s->rg_cap, 1);
   s->disp_tq = SL_TQ / cfg->dispatch_width;
   if (cfg->dram_channels && cfg->dram_channel_mbps) {
      const ULong bytes_per_s = (ULong)cfg->dram_channels * cfg->dram_channel_mbps * 1000000ull;
      s->dram_bkt_tag = SL_CALLOC(SL_DRAM_BUCKETS, sizeof(ULong));
      s->dram_bkt_bytes = SL_CALLOC(SL_DRAM_BUCKETS, sizeof(ULong));
      /* bytes the channels move in a bucket's cycles; one line's time on one channel */
      s->dram_cap_bytes = bytes_per_s / cfg->cpu_hz * SL_DRAM_BUCKET_CYCLES +
                          bytes_per_s % cfg->cpu_hz * SL_DRAM_BUCKET_CYCLES / cfg->cpu_hz;
      s->dram_service_tq = (ULong)SL_LINE * SL_TQ * cfg->cpu_hz /
                           ((ULong)cfg->dram_channel_mbps * 1000000ull);
      if (s->dram_cap_bytes < SL_LINE) s->dram_cap_bytes = SL_LINE;
   }
   return s;
}

/* DRAM bandwidth and queueing (MODEL.md "DRAM bandwidth and queueing"). Time is cut into
 * buckets of SL_DRAM_BUCKET_CYCLES; each holds the bytes the channels can move in it. A line
 * read at t is booked in t's bucket, or when that is full in the first later one with room
 * (it waits for that bucket's start: the bandwidth bound). In its bucket it waits as in an
 * M/D/1 queue at the bucket's utilisation rho before it: service x rho / (2 (1 - rho)),
 * service being one line's time on one channel (lines spread evenly over the channels), at
 * most a bucket's length. Bookings are by time, not by the order the model makes them, so a
 * core whose clock runs ahead fills later buckets, not the others' present ones. */
ULong sl_dram_read(SlSystem *s, ULong t)
{
   const ULong blen = (ULong)SL_DRAM_BUCKET_CYCLES * SL_TQ, k = t / blen;
   ULong j;
   if (!s->dram_bkt_tag) return 0;
   for (j = k; j < k + SL_DRAM_BUCKETS; j++) {
      const UInt i = (UInt)(j & (SL_DRAM_BUCKETS - 1));
      ULong before, wait;
      if (s->dram_bkt_tag[i] != j + 1) {
         /* a later time already holds this slot: t is too old to be accounted (no wait) */
         if (s->dram_bkt_tag[i] > j + 1) return 0;
         s->dram_bkt_tag[i] = j + 1;
         s->dram_bkt_bytes[i] = 0;
      }
      before = s->dram_bkt_bytes[i];
      if (before + SL_LINE > s->dram_cap_bytes) continue;
      s->dram_bkt_bytes[i] = before + SL_LINE;
      wait = s->dram_service_tq * before / (2 * (s->dram_cap_bytes - before));
      return (j == k ? 0 : j * blen - t) + MIN(wait, blen);
   }
   return (ULong)SL_DRAM_BUCKETS * blen;
}

static void tlb_init(SlTlb *t, UInt entries, UInt assoc)
{
   t->assoc = assoc;
   t->sets = entries / assoc;
   t->set_mask = t->sets - 1;
   t->e = SL_CALLOC(entries, sizeof(SlTlbEntry));
}

static ULong next_interval(SlCore *c)
{
   const SlConfig *cfg = &c->sys->cfg;
   ULong iv = (ULong)cfg->spe_interval + 1;
   /* jitter: a pseudo-random 0..254 added at reload (ERnd = 0), mean +127 (+128 with the +1) */
   if (cfg->spe_jitter) iv += rng_next(&c->rng) % 255u;
   return iv;
}

/* The entry last_tlbe points to before the first translation: it translates nothing. */
static SlTlbEntry tlb_none = {0, 0, ~(Addr)0, 0};

SlCore *sl_core(SlSystem *s, UInt id)
{
   SlCore *c;
   const SlConfig *cfg = &s->cfg;
   UInt i;
   SL_ASSERT(id < cfg->max_cores);
   if (s->cores[id]) return s->cores[id];
   c = SL_CALLOC(1, sizeof(SlCore));
   c->sys = s;
   c->id = id;
   cache_init(&c->l1d, cfg->l1d_size, cfg->l1d_assoc, True);
   cache_init(&c->l1i, cfg->l1i_size, cfg->l1i_assoc, True);
   cache_init(&c->l2, cfg->l2_size, cfg->l2_assoc, True);
   tlb_init(&c->dtlb, cfg->l1dtlb_entries, cfg->l1dtlb_entries);
   tlb_init(&c->itlb, cfg->l1itlb_entries, cfg->l1itlb_entries);
   tlb_init(&c->stlb, cfg->l2tlb_entries, cfg->l2tlb_assoc);
   for (i = 1; i <= cfg->rob_size; i <<= 1) {}
   c->rob_mask = i - 1;
   c->rob_due = ~0ull;
   c->rob_size = cfg->rob_size;
   c->rob = SL_CALLOC(i, sizeof(SlRobEnt));
   c->iq = SL_CALLOC(cfg->ls_issue_queue, sizeof(ULong));
   c->mshr = SL_CALLOC(cfg->mshrs, sizeof(ULong));
   c->stb = SL_CALLOC(cfg->store_buffer, sizeof(ULong));
   c->pht = SL_CALLOC(1u << cfg->bp_table_bits, 1);
   SL_MEMSET(c->pht, 1, 1u << cfg->bp_table_bits); /* weakly not-taken */
   c->btb = SL_CALLOC(cfg->btb_entries, sizeof(Addr));
   c->ras = SL_CALLOC(cfg->ras_entries, sizeof(Addr));
   c->rng = cfg->seed * 2654435761u + id * 40503u + 1u;
   c->last_tlbe[0] = c->last_tlbe[1] = &tlb_none;
   for (i = 0; i < 4; i++) c->imemo[i].va_line = ~(Addr)0;
   c->next_sample = next_interval(c);
   s->cores[id] = c;
   if (id + 1 > s->n_cores_alloc) s->n_cores_alloc = id + 1;
   return c;
}

void sl_core_set_active(SlCore *c, Bool active)
{
   if (c->active == active) return;
   c->active = active;
   if (active) c->sys->n_active++; else c->sys->n_active--;
}

void sl_core_rebase_ops(SlCore *c)
{
   ULong p = c->pop, h;
   c->next_sample -= p;
   for (h = c->rob_head; h != c->rob_tail; h++) {
      SlRobEnt *e = &c->rob[h & c->rob_mask];
      e->due = e->due > p ? e->due - p : 0; /* (an entry due already goes at the next op) */
   }
   if (c->rob_head != c->rob_tail) c->rob_due = c->rob[c->rob_head & c->rob_mask].due;
   c->pop = 0;
}

void sl_core_sync_clock(SlCore *c, ULong t)
{
   if (t > c->t) {
      c->c[SL_T_IDLE_TQ] += t - c->t; /* idle time, not counted in CPU_CYCLES */
      c->t = t;
   }
}

void sl_core_counters(SlCore *c, ULong out[SL_NCOUNTERS])
{
   UInt i;
   for (i = 0; i < SL_NCOUNTERS; i++) out[i] = c->c[i];
   out[SL_C_MEM_ACCESS] = c->c[SL_C_MEM_ACCESS_RD] + c->c[SL_C_MEM_ACCESS_WR];
   out[SL_C_LD_SPEC] = c->c[SL_C_MEM_ACCESS_RD];
   out[SL_C_ST_SPEC] = c->c[SL_C_MEM_ACCESS_WR];
   /* (plus the second look-ups of line-crossing accesses, counted in c[SL_C_L1D_CACHE]) */
   out[SL_C_L1D_CACHE] = out[SL_C_MEM_ACCESS] + c->c[SL_C_L1D_CACHE];
   out[SL_C_L1D_TLB] = out[SL_C_MEM_ACCESS];
   out[SL_C_L1I_TLB] = c->c[SL_C_L1I_CACHE]; /* every fetched line is translated */
   out[SL_T_ST_OPS] = c->c[SL_C_MEM_ACCESS_WR];
   out[SL_C_CPU_CYCLES] = (c->t - c->c[SL_T_IDLE_TQ]) / SL_TQ;
   out[SL_T_IDLE_TQ] = c->c[SL_T_IDLE_TQ] / SL_TQ;
   out[SL_C_STALL_BACKEND] = c->c[SL_C_STALL_BACKEND] / SL_TQ;
   out[SL_C_STALL_FRONTEND] = c->c[SL_C_STALL_FRONTEND] / SL_TQ;
   out[SL_C_SAMPLE_POP] = c->pop;
   out[SL_C_INST_SPEC] = c->pop;
   out[SL_C_BUS_ACCESS] = c->c[SL_C_BUS_ACCESS_RD] + c->c[SL_C_BUS_ACCESS_WR];
   {
      /* Slots (MODEL.md "PMU events per core"): every op takes one of dispatch_width slots per
       * cycle; a stall cycle loses them all. Nothing runs on a wrong path, so every op
       * retires and a misprediction is counted once. */
      const ULong w = c->sys->cfg.dispatch_width, slots = w * out[SL_C_CPU_CYCLES];
      out[SL_C_BR_MIS_PRED] = c->c[SL_C_BR_MIS_PRED_RETIRED];
      out[SL_C_OP_SPEC] = c->pop;
      out[SL_C_OP_RETIRED] = c->pop;
      out[SL_C_STALL_SLOT_BACKEND] = w * c->c[SL_C_STALL_BACKEND] / SL_TQ;
      out[SL_C_STALL_SLOT_FRONTEND] = w * c->c[SL_C_STALL_FRONTEND] / SL_TQ;
      out[SL_C_STALL_SLOT] = slots > c->pop ? slots - c->pop : 0;
   }
}

/* ------------------------------------------------------------------------------------------ */
/* page table and TLBs                                                                        */

static Addr pt_lookup(SlSystem *s, Addr tag, UInt sh)
{
   ULong mask = s->pt_cap - 1, i = (tag * 0x9e3779b97f4a7c15ull) >> 20;
   for (;; i++) {
      i &= mask;
      if (s->pt_vpn[i] == tag) return s->pt_pfn[i];
      if (s->pt_vpn[i] == 0) break;
   }
   if ((s->pt_used + 1) * 2 > s->pt_cap) {
      /* grow and rehash */
      ULong oc = s->pt_cap, j;
      Addr *ov = s->pt_vpn, *op = s->pt_pfn;
      s->pt_cap *= 2;
      s->pt_vpn = SL_CALLOC(s->pt_cap, sizeof(Addr));
      s->pt_pfn = SL_CALLOC(s->pt_cap, sizeof(Addr));
      s->pt_used = 0;
      for (j = 0; j < oc; j++) {
         if (ov[j]) {
            ULong k = (ov[j] * 0x9e3779b97f4a7c15ull) >> 20;
            for (;; k++) {
               k &= s->pt_cap - 1;
               if (s->pt_vpn[k] == 0) break;
            }
            s->pt_vpn[k] = ov[j];
            s->pt_pfn[k] = op[j];
            s->pt_used++;
         }
      }
      SL_FREE(ov);
      SL_FREE(op);
      return pt_lookup(s, tag, sh);
   }
   /* first touch: physical memory is handed out in order from the DRAM base, each page
    * aligned to its size (with one page size, frame after frame) */
   s->next_pa = (s->next_pa + (1ull << sh) - 1) & ~((1ull << sh) - 1);
   s->pt_vpn[i] = tag;
   s->pt_pfn[i] = s->next_pa;
   s->next_pa += 1ull << sh;
   s->pt_used++;
   return s->pt_pfn[i];
}

/* ---- page sizes: transparent huge pages (MODEL.md "Translation") */

#define SL_RG_BASE 1u  /* the region has base pages */
#define SL_RG_HUGE 2u  /* the region is one huge page */
#define SL_RG_FRESH 3u /* mapped anew since its pages were used: decided again, as if unused */

/* Whether page tag has a frame (was used). */
static Bool pt_has(const SlSystem *s, Addr tag)
{
   ULong mask = s->pt_cap - 1, i = (tag * 0x9e3779b97f4a7c15ull) >> 20;
   for (;; i++) {
      i &= mask;
      if (s->pt_vpn[i] == tag) return True;
      if (s->pt_vpn[i] == 0) return False;
   }
}

struct SlAdvice {
   Addr start, end; /* [start, end) */
   UInt advice;     /* SL_MADV_* */
};

/* The slot of region r (+1 as the key) in the region table, or of the empty slot where it
 * goes. */
static ULong rg_slot(const SlSystem *s, Addr key)
{
   ULong mask = s->rg_cap - 1, i = (key * 0x9e3779b97f4a7c15ull) >> 24;
   for (;; i++) {
      i &= mask;
      if (s->rg_key[i] == key || s->rg_key[i] == 0) return i;
   }
}

static void rg_set(SlSystem *s, Addr key, UChar st)
{
   ULong i;
   if ((s->rg_used + 1) * 2 > s->rg_cap) {
      ULong oc = s->rg_cap, j;
      Addr *ok = s->rg_key;
      UChar *os = s->rg_state;
      s->rg_cap *= 2;
      s->rg_key = SL_CALLOC(s->rg_cap, sizeof(Addr));
      s->rg_state = SL_CALLOC(s->rg_cap, 1);
      for (j = 0; j < oc; j++)
         if (ok[j]) {
            ULong k = rg_slot(s, ok[j]);
            s->rg_key[k] = ok[j];
            s->rg_state[k] = os[j];
         }
      SL_FREE(ok);
      SL_FREE(os);
   }
   i = rg_slot(s, key);
   if (s->rg_key[i] == 0) s->rg_used++;
   s->rg_key[i] = key;
   s->rg_state[i] = st;
}

/* Whether region [a, a + len) may have a huge page: THP's policy, the madvise calls that
 * covered it (a later call overrides an earlier one; MADV_NOHUGEPAGE on any part of it
 * keeps it on base pages, as the kernel splits the mapping there) and the mapping (anonymous,
 * covering the whole region). */
static Bool rg_eligible(SlSystem *s, Addr a, ULong len)
{
   const SlConfig *cfg = &s->cfg;
   Addr end = a + len;
   UInt st = 0, i;
   for (i = 0; i < cfg->n_huge_ranges; i++)
      if (cfg->huge_lo[i] <= a && end <= cfg->huge_hi[i]) return True; /* (the knob) */
   for (i = 0; i < s->n_adv; i++) {
      const struct SlAdvice *v = &s->adv[i];
      if (v->end <= a || v->start >= end) continue;
      if (v->advice == SL_MADV_NOHUGEPAGE) st = SL_MADV_NOHUGEPAGE;
      else if (v->start <= a && v->end >= end) st = v->advice;
   }
   if (st == SL_MADV_NOHUGEPAGE) return False;
   if (cfg->thp == SL_THP_NEVER || (cfg->thp == SL_THP_MADVISE && st != SL_MADV_HUGEPAGE))
      return False;
   return s->anon_fn ? s->anon_fn(s->anon_ctx, a, len) : True;
}

UInt sl_page_shift_of(SlSystem *s, Addr va)
{
   const SlConfig *cfg = &s->cfg;
   UInt hs = cfg->huge_shift;
   Addr key;
   ULong i;
   UChar st;
   if (hs == 0 || ((cfg->thp == SL_THP_NEVER || (cfg->thp == SL_THP_MADVISE && !s->n_adv_huge)) &&
                   cfg->n_huge_ranges == 0))
      return cfg->page_shift; /* (no region can have a huge page) */
   key = (va >> hs) + 1;
   if (key == s->rg_memo) return s->rg_memo_shift;
   i = rg_slot(s, key);
   st = s->rg_key[i] == key ? s->rg_state[i] : 0;
   if (st == 0 || st == SL_RG_FRESH) {
      /* the first use decides, as the kernel's page fault does: a region with base pages in
       * use already keeps them (those used before a madvise: khugepaged's later collapse is
       * not modelled) */
      Addr a = (key - 1) << hs, p;
      Bool huge = rg_eligible(s, a, 1ull << hs);
      for (p = a; huge && st == 0 && p < a + (1ull << hs); p += 1ull << cfg->page_shift)
         if (pt_has(s, p | 1u)) huge = False;
      st = huge ? SL_RG_HUGE : SL_RG_BASE;
      rg_set(s, key, st);
   }
   s->rg_memo = key;
   s->rg_memo_shift = st == SL_RG_HUGE ? hs : cfg->page_shift;
   return s->rg_memo_shift;
}

void sl_madvise(SlSystem *s, Addr a, ULong len, UInt advice)
{
   if ((advice != SL_MADV_HUGEPAGE && advice != SL_MADV_NOHUGEPAGE) || len == 0) return;
   if (s->n_adv == s->cap_adv) {
      struct SlAdvice *n;
      s->cap_adv = s->cap_adv ? 2 * s->cap_adv : 16;
      n = SL_CALLOC(s->cap_adv, sizeof *n);
      if (s->n_adv) SL_MEMMOVE(n, s->adv, s->n_adv * sizeof *n);
      if (s->adv) SL_FREE(s->adv);
      s->adv = n;
   }
   s->adv[s->n_adv].start = a;
   s->adv[s->n_adv].end = a + len;
   s->adv[s->n_adv].advice = advice;
   s->n_adv++;
   if (advice == SL_MADV_HUGEPAGE) s->n_adv_huge++;
}

static void tlb_flush(SlTlb *t)
{
   SL_MEMSET(t->e, 0, (ULong)t->sets * t->assoc * sizeof(SlTlbEntry));
}

void sl_unmap(SlSystem *s, Addr a, ULong len)
{
   UInt hs = s->cfg.huge_shift, i, j;
   Addr end = a + len, r;
   Bool huge = False;
   if (len == 0) return;
   /* the advice of the ranges inside it goes with the mapping */
   for (i = j = 0; i < s->n_adv; i++) {
      if (s->adv[i].start >= a && s->adv[i].end <= end) {
         if (s->adv[i].advice == SL_MADV_HUGEPAGE) s->n_adv_huge--;
         continue;
      }
      s->adv[j++] = s->adv[i];
   }
   s->n_adv = j;
   s->rg_memo = 0;
   if (hs == 0 || (s->cfg.thp == SL_THP_NEVER && s->cfg.n_huge_ranges == 0)) return;
   /* its regions are decided again at their next use, their earlier pages forgotten; a huge
    * page there is gone from every TLB (the kernel's shootdown) */
   if (((end - 1) >> hs) - (a >> hs) < s->rg_cap) {
      for (r = a >> hs; r <= (end - 1) >> hs; r++) {
         ULong k = rg_slot(s, r + 1);
         if (s->rg_key[k] == r + 1 && s->rg_state[k] == SL_RG_HUGE) huge = True;
         rg_set(s, r + 1, SL_RG_FRESH);
      }
   } else {
      /* (a range of more regions than the table holds: the regions in the table) */
      ULong k;
      for (k = 0; k < s->rg_cap; k++) {
         r = s->rg_key[k] - 1;
         if (s->rg_key[k] == 0 || r < a >> hs || r > (end - 1) >> hs) continue;
         if (s->rg_state[k] == SL_RG_HUGE) huge = True;
         s->rg_state[k] = SL_RG_FRESH;
      }
   }
   if (!huge) return;
   for (i = 0; i < s->n_cores_alloc; i++) {
      SlCore *c = s->cores[i];
      if (!c) continue;
      tlb_flush(&c->dtlb);
      tlb_flush(&c->itlb);
      tlb_flush(&c->stlb);
   }
}

/* The page holding va: its size (shift) and tag (virtual address | 1). */
static inline Addr page_tag(SlSystem *s, Addr va, UInt *sh)
{
   *sh = sl_page_shift_of(s, va);
   return (va & ~((1ull << *sh) - 1)) | 1u;
}

Addr sl_translate_pa(SlSystem *s, Addr va)
{
   UInt sh;
   Addr tag = page_tag(s, va, &sh);
   return pt_lookup(s, tag, sh) | (va & ((1ull << sh) - 1));
}

/* The utlb memo slot of an address (its base page's). */
static inline UInt utlb_slot(const SlConfig *cfg, Addr va)
{
   return (UInt)(va >> cfg->page_shift) & (SL_UTLB - 1);
}

/* Set-associative TLB with true LRU (fully associative when sets == 1), indexed by the page
 * number idx (va >> page shift) of the page whose tag is looked up. Recent hits are
 * remembered so a fully associative lookup rarely scans. */
static inline SlTlbEntry *tlb_lookup(SlTlb *t, Addr tag, Addr idx)
{
   UInt base = (UInt)(idx & t->set_mask) * t->assoc, w;
   for (w = 0; w < 4; w++) {
      SlTlbEntry *e = &t->e[t->hint[w]];
      if (e->tag == tag) {
         UInt hi = t->hint[w];
         e->lru = ++t->clock;
         /* make it the newest hint */
         t->hint[w] = t->hint[(t->hint_pos - 1) & 3];
         t->hint[(t->hint_pos - 1) & 3] = hi;
         return e;
      }
   }
   for (w = 0; w < t->assoc; w++) {
      SlTlbEntry *e = &t->e[base + w];
      if (e->tag == tag) {
         e->lru = ++t->clock;
         t->hint[t->hint_pos++ & 3] = base + w;
         return e;
      }
   }
   return NULL;
}

static inline SlTlbEntry *tlb_insert(SlTlb *t, Addr tag, Addr idx, Addr pa, Addr mask)
{
   UInt base = (UInt)(idx & t->set_mask) * t->assoc, w, v = base;
   for (w = 0; w < t->assoc; w++) {
      SlTlbEntry *e = &t->e[base + w];
      if (e->tag == 0) { v = base + w; break; }
      if (e->lru < t->e[v].lru) v = base + w;
   }
   t->e[v].tag = tag;
   t->e[v].pa = pa;
   t->e[v].mask = mask;
   t->e[v].lru = ++t->clock;
   t->hint[t->hint_pos++ & 3] = v;
   return &t->e[v];
}

/* ------------------------------------------------------------------------------------------ */
/* coherence and the hierarchy beyond L1                                                      */

static const UInt lvl_ds[SL_NLVL] = {SL_DS_L1D, SL_DS_L2, SL_DS_PEER, SL_DS_SLC, SL_DS_DRAM};

static inline UInt lvl_latency(const SlConfig *cfg, SlLevel l)
{
   switch (l) {
   case SL_LVL_L1D: return cfg->l1d_lat;
   case SL_LVL_L2: return cfg->l2_lat;
   case SL_LVL_PEER: return cfg->peer_lat;
   case SL_LVL_SLC: return cfg->slc_lat;
   default: return cfg->dram_lat;
   }
}

/* The SLC keeps tags, LRU stamps and a state per line (s->slc_state; its lines carry no
 * other payload). Allocates a line in way v (from cache_find_victim) with state st. */
static inline void slc_fill(SlSystem *s, UInt v, Addr line, UChar st)
{
   s->slc.tags[v] = line + 1;
   s->slc.lru[v] = ++s->slc.clock;
   s->slc_state[v] = st;
}

/* A dirty line written back to the SLC. */
static void slc_insert(SlSystem *s, Addr line)
{
   UInt v = 0;
   Int i = cache_find_victim(&s->slc, line, &v);
   if (i >= 0) {
      cache_touch(&s->slc, (UInt)i);
      s->slc_state[i] = SL_M;
   } else {
      slc_fill(s, v, line, SL_M);
   }
}

/* Removes a line from a core's private caches (L2 is inclusive of L1D and L1I). */
static inline void private_invalidate(SlCore *d, Addr line)
{
   cache_invalidate(&d->l1d, line);
   cache_invalidate(&d->l1i, line);
   cache_invalidate(&d->l2, line);
}

static inline void private_set_state(SlCore *d, Addr line, UChar st)
{
   SlLine *l = cache_peek(&d->l1d, line);
   if (l) l->state = st;
   l = cache_peek(&d->l2, line);
   if (l) l->state = st;
}

/* Snoops every other core that has caches. `unique`: the requester wants ownership (store),
 * so other copies are invalidated; otherwise modified/exclusive copies are downgraded to shared
 * (a modified line is written back to the SLC). Returns True when another core supplies the
 * data (the "peer core" data source); *shared tells whether copies remain. */
static Bool snoop_others(SlCore *c, Addr line, Bool unique, Bool *shared)
{
   SlSystem *s = c->sys;
   Bool supplied = False, any = False;
   UInt i;
   *shared = False;
   if (s->n_cores_alloc < 2) return False;
   for (i = 0; i < s->n_cores_alloc; i++) {
      SlCore *d = s->cores[i];
      SlLine *l;
      if (!d || d == c) continue;
      l = cache_peek(&d->l2, line);
      if (!l) continue;
      any = True;
      if (l->state == SL_M) supplied = True;
      if (unique) {
         private_invalidate(d, line);
         c->c[SL_T_COHERENCE_INVAL]++;
      } else if (l->state != SL_S) {
         if (l->state == SL_M) slc_insert(s, line); /* the dirty data is written back */
         private_set_state(d, line, SL_S);
      }
      d->coherence_events++;
   }
   if (any) {
      c->coherence_events++;
      s->coherence_events++;
   }
   if (any && !unique) *shared = True;
   /* a modified copy is always forwarded by its owner; a clean copy only when the SLC does not
    * hold the line (otherwise the SLC serves it) */
   if (any && !supplied && cache_find(&s->slc, line) < 0) supplied = True;
   return supplied;
}

/* Upgrade of a shared line held by c (a store hit on S): invalidate every other copy. Returns
 * the cycles ownership takes: the invalidation's round trip to the other holders, taken as the
 * peer-core latency (the same snoop, without data), when another core held a copy; else 0. */
static inline UInt upgrade(SlCore *c, Addr line)
{
   Bool shared;
   ULong inval = c->c[SL_T_COHERENCE_INVAL];
   (void)snoop_others(c, line, True, &shared);
   return c->c[SL_T_COHERENCE_INVAL] != inval ? c->sys->cfg.peer_lat : 0;
}

/* Brings a line into c's L2 from outside (or finds it there). Returns the level that supplied
 * it; *ready is when the data is available given the request leaves L1 at time t (tq).
 * l2_prefetch: the request is the L2 prefetcher's own, not a transaction from L1, so neither
 * L2D_CACHE nor L2D_CACHE_REFILL counts it: the Neoverse N1, N2 and V2 TRMs' event
 * descriptions (Arm's PMU event data, ARM-software/data pmu/neoverse-n1.json, neoverse-n2.json,
 * neoverse-v2.json) count "any transaction from L1 which looks up in the L2 cache" and "any
 * cacheable transaction from L1 which causes data to be read from outside the core" (V1
 * assumed the same). LL_CACHE_RD ("any cacheable read transaction which returns a data source
 * of interconnect cache") and the bus beats count it. The refill it made is counted at the
 * first request from L1 for the line if the line has not arrived by then (below). */
static SlLevel l2_access(SlCore *c, Addr line, Bool store, Bool count_ll, Bool l2_prefetch,
                         ULong t, ULong *ready, UInt *ev, SlLine **l2out)
{
   SlSystem *s = c->sys;
   const SlConfig *cfg = &s->cfg;
   SlLine *l;
   Addr vtag;
   SlLevel lvl;
   Bool shared = False;
   UInt v2 = 0, vs = 0, slc_way = 0;
   ULong dram_wait = 0;
   Int i2;
   SlLine vl;
   if (!l2_prefetch) c->c[SL_C_L2D_CACHE]++;
   /* on a miss, nothing below changes this core's L2 before the insert: the victim found now
    * is the one to replace */
   i2 = cache_find_victim(&c->l2, line, &v2);
   if (i2 >= 0) {
      /* when a line present in L2 reaches L1 */
      const ULong hit = t + (ULong)(cfg->l2_lat - cfg->l1tlb_lat) * SL_TQ;
      ULong own = t;
      cache_touch(&c->l2, (UInt)i2);
      l = &c->l2.lines[i2];
      if (store && l->state == SL_S) own = t + (ULong)upgrade(c, line) * SL_TQ;
      if (store) l->state = SL_M;
      if (l2out) *l2out = l;
      /* the first request from L1 for a line the L2 prefetcher requested: if the line has not
       * arrived, it is not in L2 yet, and the request is the refill the prefetch stands in for
       * (MODEL.md "Caches and coherence"); each line read from outside counts at most once */
      if (SL_UNLIKELY(l->flags & SL_LF_L2_PREFETCH) && !l2_prefetch) {
         l->flags &= (UChar)~SL_LF_L2_PREFETCH;
         if (l->ready > hit) c->c[SL_C_L2D_CACHE_REFILL]++;
      }
      *ready = MAX(hit, l->ready);
      *ready = MAX(*ready, own);
      return SL_LVL_L2;
   }
   /* host-cache prefetches of what the SLC steps below read (no effect on the model) */
   if (c->l2.tags[v2] && c->l2.lines[v2].state == SL_M) {
      UInt h = c->l2.lines[v2].slc_way;
      SL_PREFETCH(&s->slc.tags[h]);
      SL_PREFETCH(&s->slc.lru[h]);
      SL_PREFETCH(&s->slc_state[h]);
   }
   cache_prefetch_set(&s->slc, line);
   if (!l2_prefetch) c->c[SL_C_L2D_CACHE_REFILL]++;
   c->c[SL_C_BUS_ACCESS_RD] += SL_LINE / 32; /* 32-byte beats (assumed bus width) */
   if (s->n_cores_alloc > 1 && snoop_others(c, line, store, &shared)) {
      lvl = SL_LVL_PEER;
      if (count_ll) { c->c[SL_C_LL_CACHE_RD]++; c->c[SL_C_LL_CACHE_MISS_RD]++; }
   } else {
      Int is;
      if (count_ll) c->c[SL_C_LL_CACHE_RD]++;
      is = cache_find_victim(&s->slc, line, &vs);
      if (is >= 0) {
         cache_touch(&s->slc, (UInt)is);
         lvl = SL_LVL_SLC;
      } else {
         lvl = SL_LVL_DRAM;
         if (count_ll) c->c[SL_C_LL_CACHE_MISS_RD]++;
         slc_fill(s, vs, line, SL_E);
         dram_wait = sl_dram_read(s, t);
      }
      slc_way = is >= 0 ? (UInt)is : vs;
   }
   /* [SPE methodology table 4.5]: N1 records LLC-ACCESS and LLC-REFILL for every access served beyond
    * the core's L2 (SLC hits included); the data source tells the levels apart. */
   *ev |= SL_EV_LLC_ACCESS | SL_EV_LLC_MISS;
   *ready = t + (ULong)(lvl_latency(cfg, lvl) - cfg->l1tlb_lat) * SL_TQ + dram_wait;
   l = cache_insert_at(&c->l2, v2, line, &vtag, &vl);
   l->state = store ? SL_M : (shared ? SL_S : SL_E);
   l->ready = *ready;
   if (l2_prefetch) l->flags = SL_LF_L2_PREFETCH;
   l->slc_way = slc_way;
   if (l2out) *l2out = l;
   if (vtag) {
      Addr vline = vtag - 1;
      /* inclusive L2: evicting a line removes it from L1D/L1I */
      if (SL_LIKELY(c->l1d.sets * c->l1d.assoc <= 0x10000)) {
         /* every L1D fill records its way in the L2 line and the line cannot leave L2
          * without leaving L1D: if the line is in L1D, it is in that way */
         if (c->l1d.tags[vl.l1_way] == vtag) cache_invalidate_way(&c->l1d, vl.l1_way);
      } else {
         cache_invalidate(&c->l1d, vline);
      }
      if (vl.flags & SL_LF_IN_L1I) cache_invalidate(&c->l1i, vline);
      if (vl.state == SL_M) {
         c->c[SL_C_L2D_CACHE_WB]++;
         c->c[SL_C_BUS_ACCESS_WR] += SL_LINE / 32;
         if (s->slc.tags[vl.slc_way] == vline + 1) {
            /* still in the SLC way it was filled from (what slc_insert would find) */
            cache_touch(&s->slc, vl.slc_way);
            s->slc_state[vl.slc_way] = SL_M;
         } else {
            slc_insert(s, vline);
         }
      }
   }
   return lvl;
}

/* Translation: returns the physical address; adds the translation latency (cycles) and events. */
static Addr translate(SlCore *c, Addr va, Bool instr, ULong t, UInt *xlat, UInt *ev)
{
   SlSystem *s = c->sys;
   const SlConfig *cfg = &s->cfg;
   SlTlb *l1 = instr ? &c->itlb : &c->dtlb;
   SlTlbEntry *e = c->last_tlbe[instr];
   UInt sh;
   Addr tag, idx;
   *xlat = cfg->l1tlb_lat;
   /* (L1I_TLB, the instruction-side look-ups, is derived from L1I_CACHE: every fetched line
    * is translated; see sl_core_counters) */
   if (sl_tlbe_maps(e, va)) {
      /* same page as the previous access of this side: an L1 TLB hit */
      e->lru = ++l1->clock;
      return e->pa | (va & e->mask);
   }
   e = c->utlb[instr][utlb_slot(cfg, va)];
   if (e && sl_tlbe_maps(e, va)) {
      /* a recently used page still in the L1 TLB: a hit */
      e->lru = ++l1->clock;
      c->last_tlbe[instr] = e;
      return e->pa | (va & e->mask);
   }
   tag = page_tag(s, va, &sh);
   idx = va >> sh;
   e = tlb_lookup(l1, tag, idx);
   if (!e) {
      SlTlbEntry *e2;
      Addr pa;
      c->c[instr ? SL_C_L1I_TLB_REFILL : SL_C_L1D_TLB_REFILL]++;
      c->c[SL_C_L2D_TLB]++;
      *xlat += cfg->l2tlb_lat;
      e2 = tlb_lookup(&c->stlb, tag, idx);
      if (e2) {
         pa = e2->pa;
      } else {
         ULong ready;
         UInt pev = 0;
         SlLevel pl;
         Addr pte_line;
         c->c[SL_C_L2D_TLB_REFILL]++;
         c->c[instr ? SL_C_ITLB_WALK : SL_C_DTLB_WALK]++;
         *ev |= SL_EV_TLB_WALK;
         pa = pt_lookup(s, tag, sh);
         /* the leaf descriptor is fetched through L2 (8-byte descriptors, 8 per line); a huge
          * page's block descriptors are in a table of their own */
         pte_line = (cfg->pt_pa_base + (sh == cfg->page_shift ? 0 : 1ull << 40) + idx * 8) >>
                    SL_LINE_SHIFT;
         pl = l2_access(c, pte_line, False, False, False, t, &ready, &pev, NULL);
         *xlat += cfg->walk_lat + lvl_latency(cfg, pl);
         tlb_insert(&c->stlb, tag, idx, pa, (1ull << sh) - 1);
      }
      e = tlb_insert(l1, tag, idx, pa, (1ull << sh) - 1);
   }
   c->last_tlbe[instr] = e;
   c->utlb[instr][utlb_slot(cfg, va)] = e;
   return e->pa | (va & e->mask);
}

/* ------------------------------------------------------------------------------------------ */
/* prefetcher: per-core stream detector on 4 KB regions, prefetching into L1D                 */

/* The l1_recent slot of a line. */
static inline UInt l1_memo_slot(Addr line) { return (UInt)line & (SL_L1_MEMO - 1); }

/* Another core holds the line (hardware prefetchers do not steal lines other cores hold). */
static inline Bool held_by_others(SlCore *c, Addr line)
{
   UInt i;
   if (c->sys->n_cores_alloc < 2) return False;
   for (i = 0; i < c->sys->n_cores_alloc; i++) {
      SlCore *d = c->sys->cores[i];
      if (d && d != c && cache_peek(&d->l2, line)) return True;
   }
   return False;
}

/* Fills L1D (and L2) with a line read at time t through l2_access; the fill is marked
 * prefetched. Returns the level that supplied it. */
static SL_ALWAYS_INLINE SlLevel l1_prefetch_fill(SlCore *c, Addr line, ULong t, ULong *ready,
                                                 UInt *ev)
{
   SlLine *l, *l2;
   SlLevel lvl = l2_access(c, line, False, True, False, t, ready, ev, &l2);
   l = cache_insert(&c->l1d, line);
   l->state = l2->state;
   l->ready = *ready;
   l->l2_way = (UInt)(l2 - c->l2.lines);
   l2->l1_way = (UShort)(l - c->l1d.lines);
   l->flags = SL_LF_PREFETCHED;
   c->c[SL_T_PREFETCH_LINES]++;
   /* the demand access that finds it needs no set search */
   c->l1_recent[l1_memo_slot(line)] = (UInt)(l - c->l1d.lines);
   return lvl;
}

/* (prefetch_line and prefetch_train are inlined into their callers, l1_first_use and l1_miss:
 * one call fewer per prefetched line) */
static SL_ALWAYS_INLINE void prefetch_line(SlCore *c, Addr line, ULong t)
{
   ULong ready;
   UInt ev = 0;
   if (cache_peek(&c->l1d, line)) return;
   if (held_by_others(c, line)) return;
   (void)l1_prefetch_fill(c, line, t, &ready, &ev);
}

static SL_ALWAYS_INLINE void prefetch_train(SlCore *c, Addr line, ULong t)
{
   const SlConfig *cfg = &c->sys->cfg;
   Addr page = (line >> 6) + 1;
   SlStream *st = NULL, *lru = &c->streams[0];
   Long d, lo, hi, end;
   UInt i;
   if (!cfg->prefetch_distance) return;
   c->stream_clock++;
   /* a bounded table of SL_NSTREAMS streams, fully associative, one per 4 KB region (MODEL.md
    * "Prefetcher"); the last hit is checked first. A new region replaces the least recently
    * used stream that is not confirmed (confidence below 2), or confirmed but idle for
    * SL_STREAM_IDLE trainings; only when there is none, the least recently used of all */
   st = &c->streams[c->last_stream];
   if (st->page != page) {
      SlStream *weak = NULL;
      st = NULL;
      for (i = 0; i < SL_NSTREAMS; i++) {
         SlStream *e = &c->streams[i];
         if (e->page == page) {
            st = e;
            break;
         }
         if (e->lru < lru->lru) lru = e;
         if ((e->conf < 2 || c->stream_clock - e->lru > SL_STREAM_IDLE) &&
             (!weak || e->lru < weak->lru))
            weak = e;
      }
      if (st) c->last_stream = i;
      else if (weak) lru = weak;
   }
   if (!st) {
      st = lru;
      c->last_stream = (UInt)(st - c->streams);
      st->page = page;
      st->last = (Long)line;
      st->next = (Long)line + 1;
      st->dir = 0;
      st->conf = 0;
      st->lru = c->stream_clock;
      return;
   }
   st->lru = c->stream_clock;
   d = (Long)line - st->last;
   if (d == 0) return;
   if (d == 1 || d == -1) {
      if (st->dir == d) {
         if (st->conf < 3) st->conf++;
      } else {
         st->dir = (Int)d;
         st->conf = 1;
         st->next = (Long)line + d;
      }
   } else {
      st->dir = 0;
      st->conf = 0;
   }
   st->last = (Long)line;
   if (st->conf < 2) return;
   lo = (Long)((page - 1) << 6);
   hi = lo + 63;
   end = (Long)line + st->dir * (Long)cfg->prefetch_distance;
   end = MAX(lo, MIN(hi, end));
   if ((st->dir > 0 && st->next <= (Long)line) || (st->dir < 0 && st->next >= (Long)line))
      st->next = (Long)line + st->dir;
   while ((st->dir > 0 && st->next <= end) || (st->dir < 0 && st->next >= end)) {
      prefetch_line(c, (Addr)st->next, t);
      st->next += st->dir;
   }
   /* host-cache prefetch of the sets the stream's next line will use (no effect on the
    * model) */
   cache_prefetch_set(&c->l2, (Addr)st->next);
   cache_prefetch_set_lines(&c->l2, (Addr)st->next);
   cache_prefetch_set(&c->sys->slc, (Addr)st->next);
}

/* The physical line of a prefetch to virtual address va, translated through the TLBs at *t (a
 * miss walks, as for a load); *t moves past the translation. */
static Addr prefetch_translate(SlCore *c, Addr va, ULong *t)
{
   UInt xlat, ev = 0;
   Addr pa = translate(c, va, False, *t, &xlat, &ev);
   *t += (ULong)xlat * SL_TQ;
   return pa >> SL_LINE_SHIFT;
}

/* A line brought into L2 only, by the stride prefetcher or a prefetch instruction for L2. */
static void prefetch_l2(SlCore *c, Addr line, ULong t, Bool hardware)
{
   SlLine *l2;
   ULong ready;
   UInt ev = 0;
   if (cache_peek(&c->l2, line)) return;
   if (hardware && held_by_others(c, line)) return;
   (void)l2_access(c, line, False, True, hardware, t, &ready, &ev, &l2);
   c->c[SL_T_PREFETCH_LINES]++;
}

/* The stride prefetcher (MODEL.md "Prefetcher"): a table of loads by PC that follows a constant
 * stride of 2 to stride_max_lines virtual lines (unit strides are the stream prefetcher's).
 * Trained by the demand loads that miss L1D and the first uses of prefetched lines; after two
 * equal strides it keeps the lines up to stride_distance strides ahead in L2, translating them
 * (so it crosses pages). fill_l1 (a demand miss while no other demand miss is in flight): it
 * also brings the next stride's line into L1D. */
static SL_NOINLINE void stride_train(SlCore *c, Addr pc, Addr va, ULong t, Bool fill_l1)
{
   const SlConfig *cfg = &c->sys->cfg;
   const Long vline = (Long)(va >> SL_LINE_SHIFT);
   SlStride *e;
   Long d, s, end;
   if (!cfg->stride_distance) return;
   e = &c->strides[(pc ^ (pc >> 7)) & (SL_NSTRIDES - 1)];
   if (e->pc != pc + 1) {
      e->pc = pc + 1;
      e->last = vline;
      e->stride = 0;
      e->conf = 0;
      return;
   }
   d = vline - e->last;
   if (d == 0) return;
   e->last = vline;
   if (d != e->stride) {
      e->stride = d;
      e->conf = 1;
      e->next = vline + d;
      return;
   }
   if (e->conf < 3) e->conf++;
   s = d < 0 ? -d : d;
   if (s < 2 || s > (Long)cfg->stride_max_lines) return;
   end = vline + d * (Long)cfg->stride_distance;
   if ((d > 0 && e->next <= vline) || (d < 0 && e->next >= vline)) e->next = vline + d;
   while ((d > 0 && e->next <= end) || (d < 0 && e->next >= end)) {
      ULong tp = t;
      Addr line = prefetch_translate(c, (Addr)e->next << SL_LINE_SHIFT, &tp);
      prefetch_l2(c, line, tp, True);
      e->next += d;
      if (!((d > 0 && e->next <= end) || (d < 0 && e->next >= end))) {
         /* host-cache prefetch of the sets the next training's line will use, guessing it
          * on the same page (no effect on the model) */
         cache_prefetch_set(&c->l2, line + (Addr)d);
         cache_prefetch_set_lines(&c->l2, line + (Addr)d);
         cache_prefetch_set(&c->sys->slc, line + (Addr)d);
      }
   }
   if (fill_l1) {
      ULong tp = t;
      Addr line = prefetch_translate(c, (Addr)(vline + d) << SL_LINE_SHIFT, &tp);
      prefetch_line(c, line, tp);
   }
}

/* ------------------------------------------------------------------------------------------ */
/* dispatch / issue / retire                                                                  */

static inline Bool spe_select(SlCore *c)
{
   if (c->pop != c->next_sample) return False;
   c->c[SL_C_SAMPLE_FEED]++;
   c->next_sample += next_interval(c);
   return True;
}

/* Applies the ROB constraint for op n: it dispatches no earlier than the retirement of the
 * newest tracked op with index <= n - rob_size. */
/* Retires the oldest entry; returns its retirement time. */
static inline ULong rob_pop(SlCore *c)
{
   ULong r = c->rob[c->rob_head & c->rob_mask].retire;
   c->rob_head++;
   c->rob_due = c->rob_head != c->rob_tail ? c->rob[c->rob_head & c->rob_mask].due : ~0ull;
   return r;
}

static inline ULong rob_constraint(SlCore *c, ULong n)
{
   ULong cons = 0;
   while (c->rob_due <= n) {
      ULong r = rob_pop(c); /* (not inside MAX: evaluated once) */
      cons = MAX(cons, r);
   }
   return cons;
}

/* The oldest tracked op holds back op n. */
static inline Bool rob_due(const SlCore *c, ULong n)
{
   return c->rob_due <= n;
}

static inline void rob_push(SlCore *c, ULong idx, ULong retire)
{
   SlRobEnt *e;
   /* Retirement is in order, so an op retires at MAX(its completion, last_retire). When that
    * is last_retire, its entry would hold op idx + rob_size back until last_retire, which the
    * entry of the op that set last_retire (held in the ring before it, so applied at an
    * earlier or the same op) already imposes; dispatch times never decrease, so the entry
    * could never change anything: it is not made. (In STREAM three ops in four are such.) */
   if (retire <= c->last_retire) return;
   e = &c->rob[c->rob_tail & c->rob_mask];
   c->last_retire = retire;
   e->due = idx + c->rob_size;
   e->retire = retire;
   if (c->rob_head == c->rob_tail) c->rob_due = e->due;
   c->rob_tail++;
}

static inline void stall_backend(SlCore *c, ULong *D, ULong cons)
{
   if (cons > *D) {
      c->c[SL_C_STALL_BACKEND] += cons - *D;
      *D = cons;
   }
}

/* Emits a selected op unless it collides with the previous one or is filtered out. */
static void spe_record(SlCore *c, SlSample *smp, ULong D, ULong C, Bool is_load, Bool is_store,
                       Bool is_branch)
{
   SlSystem *s = c->sys;
   const SlConfig *cfg = &s->cfg;
   ULong total = (C - D + SL_TQ - 1) / SL_TQ;
   if (cfg->spe_collisions && c->inflight_until > D) {
      c->c[SL_C_SAMPLE_COLLISION]++;
      return;
   }
   c->inflight_until = C;
   if (cfg->spe_type_filter) {
      Bool pass = ((cfg->spe_type_filter & SL_FILT_LOAD) && is_load) ||
                  ((cfg->spe_type_filter & SL_FILT_STORE) && is_store) ||
                  ((cfg->spe_type_filter & SL_FILT_BRANCH) && is_branch);
      if (!pass) return;
   }
   if (cfg->spe_event_filter && (smp->events & cfg->spe_event_filter) != cfg->spe_event_filter)
      return;
   smp->total_lat = sat(s, total);
   if (cfg->spe_min_latency && smp->total_lat < cfg->spe_min_latency) return;
   c->c[SL_C_SAMPLE_FILTRATE]++;
   smp->core = c->id;
   smp->exact_total_cycles = total;
   if (cfg->spe_ts) {
      smp->ts = sl_ticks(s, D);
      smp->flags |= SL_SF_TS;
   }
   if (!cfg->spe_pa) smp->flags &= ~SL_SF_PA;
   if (s->sink.sample) s->sink.sample(s->sink.ctx, smp);
}

/* Non-memory ops dispatched back to back (subject to the ROB constraint): op i dispatches
 * after the tracked ops up to i - rob_size retired. */
static SL_ALWAYS_INLINE void alu_batch(SlCore *c, UInt k)
{
   const ULong dt = c->sys->disp_tq;
   ULong i = c->pop + 1, last = c->pop + k, t = c->t;
   while (c->rob_due <= last) {
      ULong jf = c->rob_due; /* the first op the oldest entry holds back */
      if (jf > i) {
         t += (jf - i) * dt;
         i = jf;
      }
      stall_backend(c, &t, rob_pop(c));
   }
   c->t = t + (last + 1 - i) * dt;
   c->pop = last;
}

/* n ALU ops of which one or more is selected for sampling, or dispatched under the ROB
 * constraint (the op counters are already counted). */
static SL_NOINLINE void alu_slow(SlCore *c, UInt n, const SlAluOp *info)
{
   UInt done = 0;
   while (done < n) {
      ULong until = c->next_sample - c->pop - 1; /* ops before the next selected op */
      if (until >= n - done) {
         alu_batch(c, n - done);
         return;
      }
      alu_batch(c, (UInt)until);
      done += (UInt)until;
      /* the selected op itself */
      {
         ULong D, I, C;
         SlSample smp;
         const SlAluOp *op = info ? &info[done] : NULL;
         alu_batch(c, 1);
         D = c->t - c->sys->disp_tq;
         (void)spe_select(c);
         I = D;
         if (op && op->deps && c->sys->ready_fn)
            I = MAX(D, c->sys->ready_fn(c->sys->ready_ctx, op->deps));
         C = I + SL_TQ;
         SL_MEMSET(&smp, 0, sizeof smp);
         smp.op_class = SL_OPC_OTHER;
         smp.op_subclass = op ? op->subclass : 0;
         smp.pc = op ? op->pc : 0;
         smp.events = SL_EV_RETIRED;
         smp.level = 0xff;
         smp.issue_lat = sat(c->sys, (I - D) / SL_TQ);
         spe_record(c, &smp, D, C, False, False, False);
         done++;
      }
   }
}

/* n ALU ops (sl_alu; inlined into the tool's per-superblock replay). */
static SL_ALWAYS_INLINE void alu_op(SlCore *c, UInt n, const SlAluOp *info, const UShort *counts)
{
   UInt j;
   if (n == 0) return;
   if (counts) {
      c->c[SL_C_DP_SPEC] += counts[0];
      c->c[SL_C_ASE_SPEC] += counts[1];
      c->c[SL_C_VFP_SPEC] += counts[2];
   } else if (info) {
      for (j = 0; j < n; j++) c->c[info[j].counter]++;
   } else {
      c->c[SL_C_DP_SPEC] += n;
   }
   if (SL_LIKELY(c->next_sample - c->pop - 1 >= n)) alu_batch(c, n); /* none selected */
   else alu_slow(c, n, info);
}

void sl_alu(SlCore *c, UInt n, const SlAluOp *info, const UShort *counts)
{
   alu_op(c, n, info, counts);
}

/* The rarer parts of a memory op, out of line so the common path (an L1 TLB and L1D hit)
 * stays short. */

/* First demand use of a prefetched line: late-prefetch event, prefetcher training. Returns
 * the events to add. */
static SL_NOINLINE UInt l1_first_use(SlCore *c, SlLine *l, Addr line, Bool store, Addr pc,
                                     Addr va, ULong I, ULong l1ready)
{
   UInt ev = 0;
   l->flags &= ~SL_LF_PREFETCHED;
   if (l->ready > l1ready) {
      ev = SL_EV_LATE_PREFETCH;
      c->c[SL_T_LATE_PREFETCH]++;
   }
   prefetch_train(c, line, I);
   if (!store) stride_train(c, pc, va, I, False);
   return ev;
}

/* A store (or an atomic's load) to a line held without ownership; returns the cycles the
 * ownership takes (upgrade). */
static SL_NOINLINE UInt l1_store_own(SlCore *c, SlLine *l, Addr line)
{
   SlLine *l2;
   UInt own_cycles = l->state == SL_S ? upgrade(c, line) : 0;
   /* private_set_state(c, line, SL_M) with the L1D line at hand and its L2 way remembered */
   l->state = SL_M;
   l2 = c->l2.tags[l->l2_way] == line + 1 ? &c->l2.lines[l->l2_way] : cache_peek(&c->l2, line);
   if (l2) l2->state = SL_M;
   return own_cycles;
}

/* An L1D miss: the line comes from L2 or beyond; returns its L1D way. */
static SL_NOINLINE UInt l1_miss(SlCore *c, Addr line, Bool store, Addr pc, Addr va, ULong I,
                                ULong Imem, ULong *ready, UInt *ev, SlLevel *lvl)
{
   const SlConfig *cfg = &c->sys->cfg;
   SlLine *l, *l2;
   Addr vtag;
   UChar vstate;
   UInt li;
   *ev |= SL_EV_L1D_REFILL;
   c->c[SL_C_L1D_CACHE_REFILL]++;
   if (!store) {
      /* a demand miss waits for a free miss-status register */
      Imem = MAX(Imem, c->mshr[c->mshr_pos]);
   }
   *lvl = l2_access(c, line, store, !store, False, Imem, ready, ev, &l2);
   li = cache_insert_idx(&c->l1d, line, &vtag, &vstate);
   l = &c->l1d.lines[li];
   l->state = l2->state;
   l->ready = *ready;
   l->l2_way = (UInt)(l2 - c->l2.lines);
   l2->l1_way = (UShort)li;
   if (!store) {
      c->mshr[c->mshr_pos] = *ready;
      if (++c->mshr_pos == cfg->mshrs) c->mshr_pos = 0;
   }
   prefetch_train(c, line, I);
   if (!store) {
      /* the L1D fill only when the previous demand miss is complete (see stride_train) */
      UInt prev = (c->mshr_pos + 2 * cfg->mshrs - 2) % cfg->mshrs;
      stride_train(c, pc, va, I, c->mshr[prev] <= I);
   }
   return li;
}

/* The SPE record of a selected memory op. */
static SL_NOINLINE void mem_sample(SlCore *c, const SlMemOp *m, Addr pa, UInt xlat, UInt ev,
                                   SlLevel lvl, ULong D, ULong I, ULong C)
{
   SlSystem *s = c->sys;
   SlSample smp;
   SL_MEMSET(&smp, 0, sizeof smp);
   smp.op_class = SL_OPC_LDST;
   smp.op_subclass = (UChar)(m->subclass | (m->store ? SL_LS_ST : 0));
   smp.pc = m->pc;
   smp.va = m->va;
   smp.pa = pa;
   smp.access_size = (UChar)MIN(m->size, 255u);
   smp.flags = SL_SF_VA | SL_SF_PA | SL_SF_XLAT;
   smp.xlat_lat = sat(s, xlat);
   smp.issue_lat = sat(s, (I - D) / SL_TQ);
   if (m->store) {
      /* N1 store records carry no L1D events and no data source ([SPE methodology figure 2.4]) */
      smp.events = ev & ~(SL_EV_L1D_ACCESS | SL_EV_L1D_REFILL | SL_EV_LLC_ACCESS |
                          SL_EV_LLC_MISS | SL_EV_LATE_PREFETCH);
      smp.level = 0xff;
   } else {
      smp.events = ev | SL_EV_L1D_ACCESS;
      smp.data_source = (UShort)lvl_ds[lvl];
      smp.flags |= SL_SF_DS;
      smp.level = (UChar)lvl;
   }
   spe_record(c, &smp, D, C, !m->store, m->store, False);
}

/* The second line of an access that crosses a 64-byte line (MODEL.md "Timing"): its own
 * translation (it may be on the next page), L1D look-up and fill on a miss, and half a cycle
 * of dispatch (the access is made twice); returns when that line's part is there, plus the split
 * penalty; *lvl gets the level that supplied it. */
static SL_NOINLINE ULong line_split(SlCore *c, const SlMemOp *m, ULong I, SlLevel *lvl,
                                    UInt *ev)
{
   const SlConfig *cfg = &c->sys->cfg;
   Addr va2 = (m->va | (SL_LINE - 1)) + 1, line2;
   ULong Imem2, l1ready2, ready;
   UInt xlat;
   Int f;
   line2 = translate(c, va2, False, I, &xlat, ev) >> SL_LINE_SHIFT;
   Imem2 = I + (ULong)xlat * SL_TQ;
   l1ready2 = Imem2 + (ULong)(cfg->l1d_lat - cfg->l1tlb_lat) * SL_TQ;
   c->c[SL_C_L1D_CACHE]++; /* the second look-up (sl_core_counters adds it) */
   /* the second access takes a load/store pipe cycle: half a cycle of dispatch (N1's two
    * load/store pipes, assumed; the guides count a split as two accesses' bandwidth) */
   c->t += SL_TQ / 2;
   f = cache_find(&c->l1d, line2);
   if (f >= 0) {
      SlLine *l = &c->l1d.lines[f];
      cache_touch(&c->l1d, (UInt)f);
      ready = MAX(l1ready2, l->ready);
      if (SL_UNLIKELY(l->flags & SL_LF_PREFETCHED))
         *ev |= l1_first_use(c, l, line2, m->store, m->pc, va2, I, l1ready2);
      if (m->store && l->state != SL_M)
         ready = MAX(ready, Imem2 + (ULong)l1_store_own(c, l, line2) * SL_TQ);
      *lvl = SL_LVL_L1D;
   } else {
      (void)l1_miss(c, line2, m->store, m->pc, va2, I, Imem2, &ready, ev, lvl);
   }
   return ready + (ULong)cfg->split_penalty * SL_TQ;
}

/* Store-to-load forwarding (MODEL.md "Timing"): the slot of an 8-byte chunk. */
static inline UInt fwd_slot(Addr a) { return (UInt)(a >> 3) & (SL_NFWD - 1); }

/* Files a store under the chunks it writes. */
static SL_ALWAYS_INLINE void fwd_file(SlCore *c, Addr va, UInt size, ULong data_ready, ULong written)
{
   Addr a, last = (va + (size ? size : 1) - 1) >> 3;
   UInt n = 0;
   for (a = va >> 3; a <= last && n < SL_NFWD; a++, n++) {
      SlFwd *f = &c->fwd[(UInt)a & (SL_NFWD - 1)];
      f->va = va;
      f->size = size;
      f->data_ready = data_ready;
      f->written = written;
   }
}

/* A load issued at I whose bytes [va, va + size) a store not yet written (filed in slot f)
 * overlaps: returns when its value is there instead of `ready`. */
static SL_NOINLINE ULong fwd_load(SlCore *c, const SlFwd *f, Addr va, UInt size, ULong l1ready,
                                  ULong ready)
{
   const SlConfig *cfg = &c->sys->cfg;
   if (f->va <= va && va + size <= f->va + f->size) /* forwarded */
      return MAX(l1ready, f->data_ready + (ULong)cfg->fwd_lat * SL_TQ);
   /* it needs other bytes too: after the store's write, the load again and the replay */
   return MAX(ready, f->written + (ULong)(cfg->l1d_lat + cfg->fwd_fail_penalty) * SL_TQ);
}

/* Whether a is in one of the n ranges [lo[i], hi[i]) (the counterfactual knobs). */
static inline Bool in_ranges(const Addr *lo, const Addr *hi, UInt n, Addr a)
{
   UInt k;
   for (k = 0; k < n; k++)
      if (a >= lo[k] && a < hi[k]) return True;
   return False;
}

/* The knob --forward-pcs: a load of these PCs takes a store's bytes at the L1D latency (the
 * value as if kept in a register), neither waiting for the store's data nor replaying. */
static inline Bool forwarded_free(const SlConfig *cfg, Addr pc)
{
   return cfg->n_forward_pcs &&
          in_ranges(cfg->forward_pc_lo, cfg->forward_pc_hi, cfg->n_forward_pcs, pc);
}

/* Dispatches memory op *n (the next op): after the op rob_size earlier retired, the memory op
 * ls_issue_queue earlier issued and (stores) the store store_buffer earlier drained. Returns the
 * dispatch time; *sel: selected for sampling; *pos: its issue-queue slot. */
static SL_ALWAYS_INLINE ULong mem_dispatch(SlCore *c, Bool store, ULong *n, Bool *sel, UInt *pos)
{
   ULong D = c->t;
   *n = c->pop + 1;
   c->pop = *n;
   *sel = SL_UNLIKELY(*n == c->next_sample) && spe_select(c);
   if (rob_due(c, *n)) stall_backend(c, &D, rob_constraint(c, *n));
   *pos = c->iq_pos;
   stall_backend(c, &D, c->iq[*pos]);
   if (store) stall_backend(c, &D, c->stb[c->stb_pos]);
   c->t = D + c->sys->disp_tq;
   return D;
}

/* One memory op (sl_mem; inlined into the tool's per-superblock replay); memo (may be NULL):
 * the instruction's SlMemMemo. */
static SL_ALWAYS_INLINE ULong mem_op(SlCore *c, const SlMemOp *m, SlLevel *lvl_out,
                                     SlMemMemo *memo)
{
   const SlConfig *cfg = &c->sys->cfg;
   const Bool store = m->store;
   const Addr va = m->va;
   const UInt Q = cfg->ls_issue_queue;
   ULong n, D, I, Imem, l1ready, C, ready, retire;
   UInt xlat, ev = SL_EV_RETIRED | SL_EV_TLB_ACCESS, rh, li, pos;
   Bool sel;
   Addr pa, line;
   SlLevel lvl = SL_LVL_L1D;
   SlTlbEntry *te;
   SlLine *l;

   D = mem_dispatch(c, store, &n, &sel, &pos);

   /* issue when the address operands are ready; translate. A page whose L1 TLB entry is
    * remembered in utlb is a hit (translate() checks the same first). */
   I = MAX(D, m->addr_ready);
   c->iq[pos] = I;
   c->iq_pos = pos + 1 == Q ? 0 : pos + 1;
   Imem = I + (ULong)cfg->l1tlb_lat * SL_TQ;
   l1ready = Imem + (ULong)(cfg->l1d_lat - cfg->l1tlb_lat) * SL_TQ;
   if (memo && SL_LIKELY(memo->core == c && memo->vline == va >> SL_LINE_SHIFT &&
                         sl_tlbe_maps(memo->te, va) &&
                         c->l1d.tags[memo->way] == memo->line + 1)) {
      /* the line this instruction accessed last, through the same L1 TLB entry and L1D way:
       * the hits below, as the look-ups would find them */
      te = memo->te;
      te->lru = ++c->dtlb.clock;
      xlat = cfg->l1tlb_lat;
      pa = te->pa | (va & te->mask);
      line = memo->line;
      li = memo->way;
      c->c[store ? SL_C_MEM_ACCESS_WR : SL_C_MEM_ACCESS_RD]++;
      memo = NULL; /* (it stays as it is) */
      goto l1_hit;
   }
   te = c->utlb[0][utlb_slot(cfg, va)];
   if (SL_LIKELY(te && sl_tlbe_maps(te, va))) {
      /* (last_tlbe, translate()'s own shortcut, is validated there: not updated) */
      te->lru = ++c->dtlb.clock;
      xlat = cfg->l1tlb_lat;
      pa = te->pa | (va & te->mask);
   } else {
      /* the rare paths get copies of the locals they update, so the locals' addresses do not
       * escape and they stay in registers */
      UInt x2, e2 = ev;
      pa = translate(c, va, False, I, &x2, &e2);
      xlat = x2;
      ev = e2;
      te = NULL; /* (no memo this time) */
   }
   line = pa >> SL_LINE_SHIFT;
   if (SL_UNLIKELY(cfg->n_no_transfer) &&
       in_ranges(cfg->no_transfer_lo, cfg->no_transfer_hi, cfg->n_no_transfer, va)) {
      /* the knob: each core's own copy of the line (a line address no other core uses, above
       * every physical address the model hands out), as if the data were padded apart */
      line ^= (Addr)(c->id + 1) << SL_PRIVATE_LINE_SHIFT;
   }

   /* MEM_ACCESS, LD/ST_SPEC, L1D_CACHE, L1D_TLB and TRUTH_STORE_OPS follow from these two
    * (sl_core_counters) */
   c->c[store ? SL_C_MEM_ACCESS_WR : SL_C_MEM_ACCESS_RD]++;
   Imem = I + (ULong)xlat * SL_TQ;
   l1ready = Imem + (ULong)(cfg->l1d_lat - cfg->l1tlb_lat) * SL_TQ;

   rh = l1_memo_slot(line);
   li = c->l1_recent[rh];
   if (c->l1d.tags[li] != line + 1) {
      Int f = cache_find(&c->l1d, line);
      li = f < 0 ? ~0u : (UInt)f;
   }
   if (SL_LIKELY(li != ~0u)) {
   l1_hit:
      cache_touch(&c->l1d, li);
      l = &c->l1d.lines[li];
      ready = MAX(l1ready, l->ready);
      if (SL_UNLIKELY(l->flags & SL_LF_PREFETCHED))
         ev |= l1_first_use(c, l, line, store, m->pc, va, I, l1ready);
      if (store && SL_UNLIKELY(l->state != SL_M)) {
         ULong own = Imem + (ULong)l1_store_own(c, l, line) * SL_TQ;
         ready = MAX(ready, own);
      }
   } else {
      ULong r2;
      UInt e2 = ev;
      SlLevel lv2;
      li = l1_miss(c, line, store, m->pc, va, I, Imem, &r2, &e2, &lv2);
      ready = r2;
      ev = e2;
      lvl = lv2;
   }
   if (SL_UNLIKELY(!store && (m->subclass & SL_LS_EXT) &&
                   (m->subclass & (SL_LS_EXT_AT | SL_LS_EXT_EXCL)))) {
      /* an atomic read-modify-write or a load-exclusive reads for ownership (the invalidation
       * travels with the read: one round trip); what follows on the line waits for it */
      l = &c->l1d.lines[li];
      if (l->state != SL_M) {
         ULong own = Imem + (ULong)l1_store_own(c, l, line) * SL_TQ;
         if (own > ready) ready = l->ready = own;
      }
   }
   c->l1_recent[l1_memo_slot(line)] = li; /* validated by tag on use */
   if (memo) {
      /* (the entry that translated it: the next use validates it, as the miss path may have
       * replaced it since) */
      memo->core = te ? c : NULL;
      memo->vline = va >> SL_LINE_SHIFT;
      memo->line = line;
      memo->te = te;
      memo->way = li;
   }

   if (SL_UNLIKELY((va & (SL_LINE - 1)) + m->size > SL_LINE) &&
       !(cfg->n_no_split_pcs &&
         in_ranges(cfg->no_split_pc_lo, cfg->no_split_pc_hi, cfg->n_no_split_pcs, m->pc))) {
      /* it crosses a line: the second line too (the op completes when both are there) */
      SlLevel lv2 = SL_LVL_L1D;
      UInt e2 = ev | SL_EV_ALIGNMENT;
      ULong r2 = line_split(c, m, I, &lv2, &e2);
      ev = e2;
      if (r2 > ready) ready = r2;
      if (lv2 > lvl) lvl = lv2; /* (the farther level supplied the op) */
   }
   if (SL_UNLIKELY(cfg->n_l1_pcs) && !store &&
       in_ranges(cfg->l1_pc_lo, cfg->l1_pc_hi, cfg->n_l1_pcs, m->pc)) {
      /* the knob: this load's data as if in L1D */
      ready = l1ready;
      lvl = SL_LVL_L1D;
   }
   if (!store) {
      /* a store still in the store buffer with some of its bytes (youngest per chunk) */
      const SlFwd *f = &c->fwd[fwd_slot(va)];
      const Addr end = va + m->size;
      if (SL_UNLIKELY(f->written > I && f->va < end && va < f->va + f->size)) {
         if (!forwarded_free(cfg, m->pc)) ready = fwd_load(c, f, va, m->size, l1ready, ready);
      } else if (SL_UNLIKELY(((va ^ (end - 1)) >> 3) != 0)) {
         f = &c->fwd[fwd_slot(end - 1)];
         if (SL_UNLIKELY(f->written > I && f->va < end && va < f->va + f->size) &&
             !forwarded_free(cfg, m->pc))
            ready = fwd_load(c, f, va, m->size, l1ready, ready);
      }
   }
   if (store) {
      /* stores retire from the store buffer; the line fill drains in the background */
      C = I + (ULong)(xlat + 1) * SL_TQ;
      pos = c->stb_pos;
      c->stb[pos] = MAX(C, ready);
      /* written to L1D once retired, its line there and its data ready */
      fwd_file(c, va, m->size, MAX(m->data_ready, I), MAX(c->stb[pos], m->data_ready + SL_TQ));
      c->stb_pos = pos + 1 == cfg->store_buffer ? 0 : pos + 1;
      retire = C;
      c->c[SL_T_ST_BYTES] += m->size;
   } else {
      C = ready;
      retire = C;
      c->c[SL_T_LD_OPS_L1D + lvl]++;
      c->c[SL_T_LD_BYTES_L1D + lvl] += m->size;
      c->c[SL_T_LD_LATENCY_CYCLES] += (C - I) / SL_TQ;
   }
   rob_push(c, n, retire);
   if (lvl_out) *lvl_out = lvl;
   if (SL_UNLIKELY(sel)) {
      SlMemOp mc = *m; /* (a copy: the caller's op does not escape) */
      mem_sample(c, &mc, pa, xlat, ev, lvl, D, I, C);
   }
   return C;
}

ULong sl_mem(SlCore *c, const SlMemOp *m, SlLevel *lvl_out)
{
   return mem_op(c, m, lvl_out, NULL);
}

void sl_prefetch(SlCore *c, const SlMemOp *m, SlPrefetchTarget target)
{
   const SlConfig *cfg = &c->sys->cfg;
   ULong n, D, I, Imem, C, ready;
   UInt xlat, ev = SL_EV_RETIRED | SL_EV_TLB_ACCESS, pos;
   Bool sel;
   Addr pa, line;
   SlLevel lvl = SL_LVL_L1D;
   Int f;

   /* dispatched and issued as a load (reorder window, issue queue) */
   D = mem_dispatch(c, False, &n, &sel, &pos);
   I = MAX(D, m->addr_ready);
   pa = translate(c, m->va, False, I, &xlat, &ev);
   line = pa >> SL_LINE_SHIFT;
   /* LD_SPEC and L1D_CACHE count it ([N1 PMU methodology] tables 8 and 9: both double with one
    * PRFM per iteration); L1D_CACHE_REFILL does not (table 9: refills fall by 69 %) */
   c->c[SL_C_MEM_ACCESS_RD]++;
   Imem = I + (ULong)xlat * SL_TQ;
   f = target == SL_PF_NONE ? -1 : cache_find(&c->l1d, line);
   if (f >= 0) {
      cache_touch(&c->l1d, (UInt)f);
   } else if (target == SL_PF_L1) {
      /* the fill holds a miss register until the line arrives; the op leaves the issue queue
       * when it has one */
      Imem = MAX(Imem, c->mshr[c->mshr_pos]);
      lvl = l1_prefetch_fill(c, line, Imem, &ready, &ev);
      c->mshr[c->mshr_pos] = ready;
      if (++c->mshr_pos == cfg->mshrs) c->mshr_pos = 0;
   } else if (target == SL_PF_L2) {
      prefetch_l2(c, line, Imem, False);
      lvl = SL_LVL_L2;
   }
   c->iq[pos] = Imem;
   c->iq_pos = pos + 1 == cfg->ls_issue_queue ? 0 : pos + 1;
   /* it retires once issued: nothing waits for its data */
   C = Imem + SL_TQ;
   rob_push(c, n, C);
   if (SL_UNLIKELY(sel)) {
      SlMemOp mc = *m;
      mc.store = False;
      mem_sample(c, &mc, pa, xlat, ev, lvl, D, I, C);
   }
}

static SL_NOINLINE void branch_sample(SlCore *c, const SlBranch *b, UChar sub, Bool mis, ULong D,
                                      ULong R)
{
   SlSample smp;
   SL_MEMSET(&smp, 0, sizeof smp);
   smp.op_class = SL_OPC_BRANCH;
   smp.op_subclass = sub;
   smp.pc = b->pc;
   smp.target = b->target;
   smp.flags = SL_SF_TARGET;
   smp.events = SL_EV_RETIRED | (mis ? SL_EV_MISPRED : 0) |
                ((b->kind == SL_B_COND && !b->taken) ? SL_EV_NOT_TAKEN : 0);
   smp.level = 0xff;
   smp.issue_lat = sat(c->sys, (R - SL_TQ - D) / SL_TQ);
   spe_record(c, &smp, D, R, False, False, True);
}

/* One branch (sl_branch; inlined into the tool's per-superblock replay). */
static SL_ALWAYS_INLINE void branch_op(SlCore *c, const SlBranch *b)
{
   SlSystem *s = c->sys;
   const SlConfig *cfg = &s->cfg;
   ULong n, D, R;
   Bool sel, mis = False;
   UChar sub = 0;

   n = ++c->pop;
   sel = SL_UNLIKELY(n == c->next_sample) && spe_select(c);
   D = c->t;
   if (rob_due(c, n)) stall_backend(c, &D, rob_constraint(c, n));
   c->t = D + s->disp_tq;
   c->c[SL_C_BR_RETIRED]++;

   switch (b->kind) {
   case SL_B_COND: {
      UInt mask = (1u << cfg->bp_table_bits) - 1;
      UInt h = (UInt)(b->pc ^ (b->pc >> 13) ^ (b->pc >> 27));
      UInt idx = (h ^ (c->ghist << (cfg->bp_table_bits - cfg->bp_hist_bits))) & mask;
      UChar ctr = c->pht[idx];
      Bool pred = ctr >= 2;
      if (b->taken && ctr < 3) c->pht[idx] = ctr + 1;
      if (!b->taken && ctr > 0) c->pht[idx] = ctr - 1;
      c->ghist = ((c->ghist << 1) | (b->taken ? 1u : 0u)) & ((1u << cfg->bp_hist_bits) - 1);
      mis = pred != b->taken;
      sub = SL_BR_COND;
      c->c[SL_C_BR_IMMED_SPEC]++;
      break;
   }
   case SL_B_DIRECT:
      c->c[SL_C_BR_IMMED_SPEC]++;
      break;
   case SL_B_CALL:
   case SL_B_INDCALL:
      c->ras[c->ras_top % cfg->ras_entries] = b->fallthrough;
      c->ras_top++;
      sub = SL_BR_CALL;
      if (b->kind == SL_B_CALL) {
         c->c[SL_C_BR_IMMED_SPEC]++;
         break;
      }
      /* indirect call: predicted by the BTB */
      /* FALLTHROUGH */
   case SL_B_INDIRECT: {
      UInt idx = (UInt)((b->pc ^ (b->pc >> 12)) & (cfg->btb_entries - 1));
      mis = c->btb[idx] != b->target;
      c->btb[idx] = b->target;
      sub |= SL_BR_IND;
      c->c[SL_C_BR_INDIRECT_SPEC]++;
      break;
   }
   case SL_B_RET: {
      Addr pred = 0;
      if (c->ras_top > 0) {
         c->ras_top--;
         pred = c->ras[c->ras_top % cfg->ras_entries];
      }
      mis = pred != b->target;
      sub = SL_BR_RET | SL_BR_IND;
      c->c[SL_C_BR_RETURN_SPEC]++;
      break;
   }
   }

   R = MAX(D, b->ready) + SL_TQ; /* resolved one cycle after its operands are ready */
   if (R > D + SL_TQ) rob_push(c, n, R);
   if (mis) {
      ULong t2 = R + (ULong)cfg->mispredict_penalty * SL_TQ;
      c->c[SL_C_BR_MIS_PRED_RETIRED]++;
      if (t2 > c->t) {
         c->c[SL_C_STALL_FRONTEND] += t2 - c->t;
         c->t = t2;
      }
   }
   if (SL_UNLIKELY(sel)) branch_sample(c, b, sub, mis, D, R);
}

void sl_branch(SlCore *c, const SlBranch *b)
{
   branch_op(c, b);
}

static SL_NOINLINE void ifetch_slow(SlCore *c, Addr va)
{
   SlSystem *s = c->sys;
   const SlConfig *cfg = &s->cfg;
   UInt xlat, ev = 0;
   Addr pa, line;
   ULong stall = 0;
   SlIMemo *im;
   c->c[SL_C_L1I_CACHE]++;
   im = &c->imemo[(va >> SL_LINE_SHIFT) & 3];
   if ((va >> SL_LINE_SHIFT) == im->va_line && c->l1i.tags[im->way] == im->line + 1 &&
       sl_tlbe_maps(c->last_tlbe[1], va)) {
      /* a line fetched recently, still in L1I, on the page translated last: hit */
      cache_touch(&c->l1i, im->way);
      c->last_tlbe[1]->lru = ++c->itlb.clock;
      return;
   }
   pa = translate(c, va, True, c->t, &xlat, &ev);
   if (xlat > cfg->l1tlb_lat) stall += (ULong)(xlat - cfg->l1tlb_lat) * SL_TQ;
   line = pa >> SL_LINE_SHIFT;
   {
      Int il = cache_find(&c->l1i, line);
      if (il >= 0) {
         cache_touch(&c->l1i, (UInt)il);
      } else {
         ULong ready;
         Addr vtag;
         UChar vstate;
         UInt lev = 0;
         SlLine *l2;
         c->c[SL_C_L1I_CACHE_REFILL]++;
         (void)l2_access(c, line, False, False, False, c->t + stall, &ready, &lev, &l2);
         l2->flags |= SL_LF_IN_L1I;
         il = (Int)cache_insert_idx(&c->l1i, line, &vtag, &vstate);
         c->l1i.lines[il].state = SL_S;
         stall = MAX(stall, ready - c->t);
      }
      im->way = (UInt)il;
      im->line = line;
      im->va_line = va >> SL_LINE_SHIFT;
   }
   if (stall) {
      c->c[SL_C_STALL_FRONTEND] += stall;
      c->t += stall;
   }
}

void sl_ifetch(SlCore *c, Addr va)
{
   ifetch_slow(c, va);
}

/* Instruction fetch (sl_ifetch) with the common case inline: a line fetched recently, still in
 * L1I, on the page translated last (ifetch_slow checks the same first). */
static SL_ALWAYS_INLINE void ifetch_op(SlCore *c, Addr va)
{
   SlIMemo *im = &c->imemo[(va >> SL_LINE_SHIFT) & 3];
   if (SL_LIKELY((va >> SL_LINE_SHIFT) == im->va_line && c->l1i.tags[im->way] == im->line + 1 &&
                 sl_tlbe_maps(c->last_tlbe[1], va))) {
      c->c[SL_C_L1I_CACHE]++;
      cache_touch(&c->l1i, im->way);
      c->last_tlbe[1]->lru = ++c->itlb.clock;
      return;
   }
   ifetch_slow(c, va);
}

/* Instruction fetch of the n lines va[0..n) in order (sl_ifetch each), through the run memo r
 * (see SlIRun). */
static SL_ALWAYS_INLINE void ifetch_run(SlCore *c, const Addr *va, UInt n, SlIRun *r)
{
   UInt i = 0;
   if (SL_LIKELY(r->core == c && n <= r->n && r->te == c->last_tlbe[1] &&
                 r->te->tag == r->tag)) {
      /* what ifetch_op's hit does for each line still in its way (the L1 ITLB entry's stamp
       * is set once: it ends as the last of the i stamps the hits would give it) */
      for (; i < n; i++) {
         UInt w = r->way[i];
         if (SL_UNLIKELY(c->l1i.tags[w] != r->line[i] + 1)) break;
         cache_touch(&c->l1i, w);
      }
      if (SL_LIKELY(i)) {
         c->itlb.clock += i;
         c->last_tlbe[1]->lru = c->itlb.clock;
         c->c[SL_C_L1I_CACHE] += i;
      }
      if (SL_LIKELY(i == n)) return;
   }
   for (; i < n; i++) ifetch_op(c, va[i]);
   /* remember where the lines are: all on the page translated last, each in the way its
    * per-line memo (imemo) records */
   r->core = NULL;
   if (n == 0 || n > SL_IRUN_MAX || !sl_tlbe_maps(c->last_tlbe[1], va[0]) ||
       !sl_tlbe_maps(c->last_tlbe[1], va[n - 1]))
      return;
   for (i = 0; i < n; i++) {
      const SlIMemo *im = &c->imemo[(va[i] >> SL_LINE_SHIFT) & 3];
      if (im->va_line != va[i] >> SL_LINE_SHIFT || c->l1i.tags[im->way] != im->line + 1) return;
      r->way[i] = im->way;
      r->line[i] = im->line;
   }
   r->core = c;
   r->te = c->last_tlbe[1];
   r->tag = c->last_tlbe[1]->tag;
   r->n = n;
}
