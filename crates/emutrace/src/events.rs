//! Counter codes that appear in a trace's counter schema.
//!
//! PMU events use their architected codes (Arm ARM common events, as listed in
//! Arm's Neoverse N1 PMU event list (ARM-software/data, `pmu/neoverse-n1.json`)). Ground-truth counters,
//! which no hardware produces, use codes from [`TRUTH_BASE`] up. A trace carries its own schema
//! (code and name of every counter), so readers never depend on this list; it exists so code
//! can name the counters it asks for.

pub const CPU_CYCLES: u32 = 0x11;
pub const INST_RETIRED: u32 = 0x08;
pub const INST_SPEC: u32 = 0x1b;
pub const LD_SPEC: u32 = 0x70;
pub const ST_SPEC: u32 = 0x71;
pub const DP_SPEC: u32 = 0x73;
pub const ASE_SPEC: u32 = 0x74;
pub const VFP_SPEC: u32 = 0x75;
pub const BR_IMMED_SPEC: u32 = 0x78;
pub const BR_RETURN_SPEC: u32 = 0x79;
pub const BR_INDIRECT_SPEC: u32 = 0x7a;
pub const BR_RETIRED: u32 = 0x21;
pub const BR_MIS_PRED_RETIRED: u32 = 0x22;
pub const MEM_ACCESS: u32 = 0x13;
pub const MEM_ACCESS_RD: u32 = 0x66;
pub const MEM_ACCESS_WR: u32 = 0x67;
pub const L1D_CACHE: u32 = 0x04;
pub const L1D_CACHE_REFILL: u32 = 0x03;
pub const L1I_CACHE: u32 = 0x14;
pub const L1I_CACHE_REFILL: u32 = 0x01;
pub const L2D_CACHE: u32 = 0x16;
pub const L2D_CACHE_REFILL: u32 = 0x17;
pub const LL_CACHE_RD: u32 = 0x36;
pub const LL_CACHE_MISS_RD: u32 = 0x37;
pub const BUS_ACCESS: u32 = 0x19;
pub const BUS_ACCESS_RD: u32 = 0x60;
pub const BUS_ACCESS_WR: u32 = 0x61;
pub const L1D_TLB: u32 = 0x25;
pub const L1D_TLB_REFILL: u32 = 0x05;
pub const DTLB_WALK: u32 = 0x34;
pub const ITLB_WALK: u32 = 0x35;
pub const STALL_FRONTEND: u32 = 0x23;
pub const STALL_BACKEND: u32 = 0x24;
pub const SAMPLE_POP: u32 = 0x4000;
pub const SAMPLE_FEED: u32 = 0x4001;
pub const SAMPLE_FILTRATE: u32 = 0x4002;
pub const SAMPLE_COLLISION: u32 = 0x4003;
pub const L1I_TLB: u32 = 0x26;
pub const L1I_TLB_REFILL: u32 = 0x02;
pub const L2D_TLB: u32 = 0x2f;
pub const L2D_TLB_REFILL: u32 = 0x2d;
pub const L2D_CACHE_WB: u32 = 0x18;
// Neoverse V1, V2 and N2 only (their telemetry specifications' top-down events): the emulator
// counts them for those cores (emulator/MODEL.md "PMU events per core").
pub const BR_MIS_PRED: u32 = 0x10;
pub const OP_RETIRED: u32 = 0x3a;
pub const OP_SPEC: u32 = 0x3b;
pub const STALL_SLOT_BACKEND: u32 = 0x3d;
pub const STALL_SLOT_FRONTEND: u32 = 0x3e;
pub const STALL_SLOT: u32 = 0x3f;

/// First ground-truth code.
pub const TRUTH_BASE: u32 = 0x8000_0000;
/// Load operations served by each level (L1D, L2, peer core, SLC, DRAM).
pub const TRUTH_LOAD_OPS: [u32; 5] = [
    0x8000_0000,
    0x8000_0001,
    0x8000_0002,
    0x8000_0003,
    0x8000_0004,
];
/// Bytes loaded from each level (L1D, L2, peer core, SLC, DRAM).
pub const TRUTH_LOAD_BYTES: [u32; 5] = [
    0x8000_0010,
    0x8000_0011,
    0x8000_0012,
    0x8000_0013,
    0x8000_0014,
];
pub const TRUTH_STORE_OPS: u32 = 0x8000_0020;
pub const TRUTH_STORE_BYTES: u32 = 0x8000_0021;
pub const TRUTH_PREFETCHED_LINES: u32 = 0x8000_0030;
pub const TRUTH_LATE_PREFETCH_HITS: u32 = 0x8000_0031;
pub const TRUTH_COHERENCE_INVALIDATIONS: u32 = 0x8000_0040;
pub const TRUTH_LOAD_LATENCY_CYCLES_SUM: u32 = 0x8000_0050;
pub const TRUTH_IDLE_CYCLES: u32 = 0x8000_0060;

/// True for spelunk's ground-truth counters (never hardware events).
pub fn is_truth(code: u32) -> bool {
    code >= TRUTH_BASE
}
