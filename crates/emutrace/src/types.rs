//! Typed records of a trace. Field meanings and units are those of emulator/FORMAT.md.

use spelunk_spe::SpeRecord;
use std::sync::Arc;

/// The run configuration (CONFIG record): what the emulator claimed and modelled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunConfig {
    pub cache_line_bytes: u32,
    /// MIDR_EL1 claimed (default Neoverse N1 r3p1, 0x413fd0c1).
    pub midr: u64,
    pub cpu_hz: u64,
    /// Frequency of the generic timer whose ticks the timestamps count.
    pub timer_hz: u64,
    /// PMSIRR_EL1.INTERVAL as applied (the requested period rounded down to a multiple of 256).
    pub spe_interval: u32,
    /// Twice the mean actual interval between selected ops ([SPE methodology table 4.3]).
    pub spe_interval_mean_x2: u32,
    /// `format::spe_flags` bits.
    pub spe_flags: u32,
    /// `format::type_filter` bits; 0 records every type.
    pub spe_type_filter: u32,
    pub spe_min_latency: u32,
    /// Width of the SPE latency counters (they saturate at `2^bits - 1`).
    pub spe_counter_bits: u32,
    pub spe_event_filter: u64,
    pub page_shift: u32,
    pub dispatch_width: u32,
    pub rob_size: u32,
    pub ls_issue_queue: u32,
    pub mshrs: u32,
    pub store_buffer: u32,
    pub mispredict_penalty_cycles: u32,
    pub l1d_bytes: u32,
    pub l1d_assoc: u32,
    pub l1d_latency_cycles: u32,
    pub l1i_bytes: u32,
    pub l1i_assoc: u32,
    pub l2_bytes: u32,
    pub l2_assoc: u32,
    pub l2_latency_cycles: u32,
    pub slc_bytes: u32,
    pub slc_assoc: u32,
    pub slc_latency_cycles: u32,
    pub dram_latency_cycles: u32,
    pub peer_latency_cycles: u32,
    pub prefetch_distance_lines: u32,
    pub l1d_tlb_entries: u32,
    pub l1i_tlb_entries: u32,
    pub l2_tlb_entries: u32,
    pub l2_tlb_assoc: u32,
    pub l1_tlb_latency_cycles: u32,
    pub l2_tlb_latency_cycles: u32,
    pub walk_latency_cycles: u32,
    pub bp_history_bits: u32,
    pub bp_table_bits: u32,
    pub btb_entries: u32,
    pub ras_entries: u32,
    pub max_cores: u32,
    pub switch_min_cycles: u32,
    pub switch_max_cycles: u32,
    pub timeline_interval_us: u32,
    pub cpu_name: String,
    pub tool_version: String,
    pub host_arch: String,
    /// The platform preset the run emulated (`--platform`, e.g. `graviton3`): None without
    /// one, and for traces before format 1.3, which do not say.
    pub platform: Option<String>,
    /// The transparent-huge-page policy (`--thp`): None before format 1.4, whose runs had one
    /// page size everywhere (`page_shift`).
    pub thp: Option<ThpPolicy>,
    /// The size (shift) of a transparent huge page; 0 when the base page size has none (and
    /// before format 1.4).
    pub huge_page_shift: u32,
}

/// Which anonymous regions get transparent huge pages (Linux's
/// `/sys/kernel/mm/transparent_hugepage/enabled`; emulator/MODEL.md "Translation").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThpPolicy {
    Never,
    /// Only ranges given `madvise(MADV_HUGEPAGE)`.
    Madvise,
    Always,
    /// A value this reader does not know.
    Other(u32),
}

impl ThpPolicy {
    pub fn from_code(v: u32) -> Self {
        match v {
            0 => Self::Never,
            1 => Self::Madvise,
            2 => Self::Always,
            v => Self::Other(v),
        }
    }
    pub fn name(self) -> String {
        match self {
            Self::Never => "never".into(),
            Self::Madvise => "madvise".into(),
            Self::Always => "always".into(),
            Self::Other(v) => format!("policy {v}"),
        }
    }
}

impl RunConfig {
    pub fn jitter(&self) -> bool {
        self.spe_flags & crate::format::spe_flags::JITTER != 0
    }
    pub fn collisions_modelled(&self) -> bool {
        self.spe_flags & crate::format::spe_flags::COLLISIONS != 0
    }
    /// Mean number of ops between selected ops: base + 1 without jitter, base + 128 with
    /// jitter ([SPE methodology table 4.3], ERnd = 0).
    pub fn actual_interval(&self) -> f64 {
        f64::from(self.spe_interval_mean_x2) / 2.0
    }
    pub fn page_bytes(&self) -> u64 {
        1u64.checked_shl(self.page_shift).unwrap_or(0)
    }
    /// The size of a transparent huge page, when the base page size has one.
    pub fn huge_page_bytes(&self) -> Option<u64> {
        (self.huge_page_shift != 0)
            .then(|| 1u64.checked_shl(self.huge_page_shift))
            .flatten()
    }
    /// The pages an emulated run had, for summaries and report headers: "4 KiB pages, THP
    /// madvise (2 MiB)"; "2 MiB pages" for a trace before format 1.4 or when the base page
    /// size has no huge pages.
    pub fn pages_description(&self) -> String {
        let base = format!("{} pages", size_text(self.page_bytes()));
        match (self.thp, self.huge_page_bytes()) {
            (Some(t), Some(h)) => format!("{base}, THP {} ({})", t.name(), size_text(h)),
            _ => base,
        }
    }
    /// Converts generic-timer ticks to nanoseconds.
    pub fn ticks_to_ns(&self, ticks: u64) -> f64 {
        if self.timer_hz == 0 {
            return 0.0;
        }
        ticks as f64 * 1e9 / self.timer_hz as f64
    }
    /// Converts core cycles to nanoseconds.
    pub fn cycles_to_ns(&self, cycles: f64) -> f64 {
        if self.cpu_hz == 0 {
            return 0.0;
        }
        cycles * 1e9 / self.cpu_hz as f64
    }
}

/// "4 KiB", "2 MiB", "512 MiB", "1 GiB" (bytes otherwise).
fn size_text(bytes: u64) -> String {
    for (unit, name) in [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
        if bytes >= unit && bytes % unit == 0 {
            return format!("{} {name}", bytes / unit);
        }
    }
    format!("{bytes} bytes")
}

/// The traced process (PROCESS record).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: u32,
    /// The executable, then its arguments.
    pub argv: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadStart {
    pub pid: u32,
    pub tid: u32,
    /// The creating thread (0 for the main thread).
    pub parent_tid: u32,
    /// The virtual core the thread runs on.
    pub core: u16,
    pub timestamp: u64,
    /// Valgrind's thread number (1 = main thread).
    pub vg_tid: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadName {
    pub tid: u32,
    pub timestamp: u64,
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadExit {
    pub tid: u32,
    pub core: u16,
    pub timestamp: u64,
}

/// A mapping of the process (MMAP record): what perf's MMAP2 records describe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub pid: u32,
    pub tid: u32,
    pub addr: u64,
    pub len: u64,
    pub file_offset: u64,
    pub readable: bool,
    pub writable: bool,
    pub executable: bool,
    /// The file, or `None` for anonymous memory (`[heap]` for brk growth).
    pub path: Option<String>,
    pub timestamp: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unmapping {
    pub addr: u64,
    pub len: u64,
    pub timestamp: u64,
}

/// One counter of the schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterDef {
    /// Architected PMU event code, or a ground-truth code (see [`crate::events`]).
    pub code: u32,
    pub name: String,
}

/// Where a load's data came from, as the emulator knows it (ground truth, equal to the data
/// source it encodes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemoryLevel {
    L1d,
    L2,
    PeerCore,
    Slc,
    Dram,
}

impl MemoryLevel {
    pub fn from_u8(v: u8) -> Option<MemoryLevel> {
        Some(match v {
            0 => MemoryLevel::L1d,
            1 => MemoryLevel::L2,
            2 => MemoryLevel::PeerCore,
            3 => MemoryLevel::Slc,
            4 => MemoryLevel::Dram,
            _ => return None,
        })
    }
    /// Index into the `TRUTH_LOAD_*` arrays of [`crate::events`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One SPE sample (SAMPLE record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    pub tid: u32,
    pub core: u16,
    /// The record as SPE hardware would write it: PC (EL0, non-secure), op type, events,
    /// latencies (saturated at the counter width), VA, PA, data source (loads), branch target
    /// (branches), CONTEXT (`context_el1` = tid) and TIMESTAMP.
    pub record: SpeRecord,
    /// Bytes accessed (loads/stores).
    pub access_size: u8,
    /// Ground truth: the level that served a load.
    pub level: Option<MemoryLevel>,
    /// Ground truth: total latency in cycles, not saturated.
    pub exact_total_latency_cycles: u32,
}

impl Sample {
    /// Timestamp in generic-timer ticks (0 when timestamps were disabled).
    pub fn timestamp(&self) -> u64 {
        self.record.timestamp.unwrap_or(0)
    }
    pub fn is_load(&self) -> bool {
        self.record.op.is_some_and(|o| o.is_load())
    }
    pub fn is_store(&self) -> bool {
        self.record.op.is_some_and(|o| o.is_store())
    }
    pub fn is_branch(&self) -> bool {
        self.record.op.is_some_and(|o| o.is_branch())
    }
    pub fn va(&self) -> Option<u64> {
        self.record.data_va.map(|a| a.va())
    }
    pub fn pc(&self) -> Option<u64> {
        self.record.pc.map(|a| a.va())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnnotationKind {
    PhaseBegin,
    PhaseEnd,
    Object,
    ObjectFree,
    TagMapping,
    Other(u8),
}

impl AnnotationKind {
    pub fn from_u8(v: u8) -> AnnotationKind {
        match v {
            1 => AnnotationKind::PhaseBegin,
            2 => AnnotationKind::PhaseEnd,
            3 => AnnotationKind::Object,
            4 => AnnotationKind::ObjectFree,
            5 => AnnotationKind::TagMapping,
            v => AnnotationKind::Other(v),
        }
    }
}

/// A call of the annotation API (include/spelunk.h), timestamped on the calling thread's core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Annotation {
    pub kind: AnnotationKind,
    /// Phase nesting depth of the thread (after a begin, before an end).
    pub depth: u16,
    pub tid: u32,
    pub core: u16,
    pub timestamp: u64,
    /// Object or mapping start (0 for phases).
    pub addr: u64,
    /// Object or mapping length (0 for phases).
    pub size: u64,
    pub name: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotReason {
    Periodic,
    Annotation,
    ThreadExit,
    Final,
    ThreadStart,
    Other(u8),
}

impl SnapshotReason {
    pub fn from_u8(v: u8) -> SnapshotReason {
        match v {
            0 => SnapshotReason::Periodic,
            1 => SnapshotReason::Annotation,
            2 => SnapshotReason::ThreadExit,
            3 => SnapshotReason::Final,
            4 => SnapshotReason::ThreadStart,
            v => SnapshotReason::Other(v),
        }
    }
}

/// Cumulative counts of one virtual core at one moment (COUNTERS record).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterSnapshot {
    /// The thread running on the core when the snapshot was taken (0 for final snapshots).
    pub tid: u32,
    pub core: u16,
    pub reason: SnapshotReason,
    pub timestamp: u64,
    /// The core's clock in cycles (including idle time).
    pub cycles: u64,
    /// The counter schema the values follow.
    pub schema: Arc<[CounterDef]>,
    pub values: Vec<u64>,
}

impl CounterSnapshot {
    /// The value of a counter by code.
    pub fn get(&self, code: u32) -> Option<u64> {
        self.schema
            .iter()
            .position(|d| d.code == code)
            .and_then(|i| self.values.get(i).copied())
    }
    /// The value of a counter by name (`"MEM_ACCESS"`).
    pub fn get_by_name(&self, name: &str) -> Option<u64> {
        self.schema
            .iter()
            .position(|d| d.name == name)
            .and_then(|i| self.values.get(i).copied())
    }
}

/// Every access the emulator counted to one object or heap block (the counts of OBJECT_TRUTH
/// and BLOCK_TRUTH records).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExactAccesses {
    pub loads: u64,
    pub stores: u64,
    pub load_bytes: u64,
    pub store_bytes: u64,
    /// Accesses that missed L1D.
    pub l1d_misses: u64,
}

/// Exact access counts of an annotated object over the whole run (OBJECT_TRUTH record).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectTruth {
    pub addr: u64,
    pub size: u64,
    pub accesses: ExactAccesses,
    pub name: String,
}

/// How a heap block was allocated (ALLOC record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocKind {
    Malloc,
    Calloc,
    Realloc,
    /// posix_memalign, aligned_alloc, memalign, valloc, pvalloc.
    Aligned,
    /// The program's own anonymous mmap.
    Mmap,
    Other(u8),
}

impl AllocKind {
    pub fn from_u8(v: u8) -> AllocKind {
        match v {
            1 => AllocKind::Malloc,
            2 => AllocKind::Calloc,
            3 => AllocKind::Realloc,
            4 => AllocKind::Aligned,
            5 => AllocKind::Mmap,
            o => AllocKind::Other(o),
        }
    }

    /// The name the sidecar uses (the runtime's names).
    pub fn name(self) -> &'static str {
        match self {
            AllocKind::Malloc => "malloc",
            AllocKind::Calloc => "calloc",
            AllocKind::Realloc => "realloc",
            AllocKind::Aligned => "aligned",
            AllocKind::Mmap => "mmap",
            AllocKind::Other(_) => "other",
        }
    }
}

/// A heap block the program allocated (ALLOC record, version 1.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alloc {
    pub kind: AllocKind,
    pub core: u16,
    pub tid: u32,
    pub timestamp: u64,
    /// Numbers the blocks of a trace from 1; FREE and BLOCK_TRUTH refer to it.
    pub id: u64,
    pub addr: u64,
    pub size: u64,
    /// Return addresses (the address after each call instruction), innermost first; the
    /// allocator wrapper's own frame is removed, so the first is the allocating call's, which
    /// may be inside the C library (e.g. stdio allocating its buffer).
    pub stack: Vec<u64>,
}

/// How a heap block ended (FREE record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreeKind {
    Free,
    Realloc,
    Munmap,
    /// Allocated again while the emulator still had it live.
    Superseded,
    Other(u8),
}

/// The end of a heap block (FREE record, version 1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Free {
    pub kind: FreeKind,
    pub core: u16,
    pub tid: u32,
    pub timestamp: u64,
    pub id: u64,
    pub addr: u64,
}

/// Exact accesses to one heap block over its life (BLOCK_TRUTH record, version 1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockTruth {
    pub id: u64,
    pub addr: u64,
    pub size: u64,
    pub accesses: ExactAccesses,
}

/// The last record of a complete trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndInfo {
    /// The status the program passed to exit_group (valid when `exit_status_known()`).
    pub exit_status: u32,
    /// Bit 0: the exit status was observed (a program killed by a signal has none).
    pub flags: u32,
    pub samples_written: u64,
    /// The largest core clock at the end, in generic-timer ticks.
    pub end_timestamp: u64,
}

impl EndInfo {
    pub fn exit_status_known(&self) -> bool {
        self.flags & 1 != 0
    }
}

/// One record of a trace.
#[derive(Clone, Debug, PartialEq)]
pub enum Record {
    Config(Box<RunConfig>),
    Process(ProcessInfo),
    ThreadStart(ThreadStart),
    ThreadName(ThreadName),
    ThreadExit(ThreadExit),
    Mmap(Mapping),
    Munmap(Unmapping),
    CounterSchema(Arc<[CounterDef]>),
    Sample(Sample),
    Annotation(Annotation),
    Counters(CounterSnapshot),
    ObjectTruth(ObjectTruth),
    End(EndInfo),
    Alloc(Alloc),
    Free(Free),
    BlockTruth(BlockTruth),
    /// A record type this reader does not know (skipped by its length).
    Unknown {
        record_type: u16,
        offset: u64,
        payload_len: u32,
    },
}
