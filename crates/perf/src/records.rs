//! Typed sideband records: what the kernel (or perf, for pre-existing tasks) wrote next to the
//! AUX data, with the sample_id fields (pid/tid/time/cpu) that place them.
//!
//! Layouts: kernel UAPI perf_event.h `enum perf_event_type` comments and
//! tools/lib/perf/include/perf/event.h. pids and tids are `i32` like the kernel's `pid_t`;
//! perf writes -1 in synthesized records for "none".

use crate::abi::aux_flag;

/// The `struct sample_id` trailer of a non-SAMPLE record (present when the event has
/// `sample_id_all`). Fields the event's `sample_type` does not request are `None`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SampleId {
    pub pid: Option<i32>,
    pub tid: Option<i32>,
    /// Perf clock time in nanoseconds.
    pub time_ns: Option<u64>,
    /// The event id (IDENTIFIER or ID), which names the attr the record belongs to.
    pub id: Option<u64>,
    pub stream_id: Option<u64>,
    pub cpu: Option<u32>,
}

/// Where a record was found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RecordPos {
    /// File offset of the record's `perf_event_header`.
    pub offset: u64,
    /// Index into [`crate::PerfDataFile::attrs`] of the event the record belongs to.
    pub attr_index: usize,
}

/// `PERF_RECORD_COMM`: a thread's name (set at exec or by prctl).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comm {
    pub pos: RecordPos,
    pub sample: SampleId,
    pub pid: i32,
    pub tid: i32,
    pub name: String,
    /// The name changed because of exec (`PERF_RECORD_MISC_COMM_EXEC`).
    pub exec: bool,
}

/// How an MMAP2 record identifies the mapped file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MmapFileId {
    /// MMAP (version 1) records carry no file id.
    None,
    /// Device and inode numbers.
    Inode {
        maj: u32,
        min: u32,
        ino: u64,
        ino_generation: u64,
    },
    /// The ELF build id (`PERF_RECORD_MISC_MMAP_BUILD_ID`), at most 20 bytes.
    BuildId(Vec<u8>),
}

/// `PERF_RECORD_MMAP` or `PERF_RECORD_MMAP2`: a mapping of a file (or anonymous memory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mmap {
    pub pos: RecordPos,
    pub sample: SampleId,
    /// True for MMAP2 records.
    pub mmap2: bool,
    pub pid: i32,
    pub tid: i32,
    pub address: u64,
    pub length: u64,
    pub page_offset: u64,
    pub file_id: MmapFileId,
    /// `PROT_*` bits (MMAP2 only).
    pub prot: Option<u32>,
    /// `MAP_*` bits (MMAP2 only).
    pub flags: Option<u32>,
    /// `PERF_RECORD_MISC_CPUMODE_MASK` bits of the header (1 kernel, 2 user, ...).
    pub cpu_mode: u16,
    /// False for data mappings (`PERF_RECORD_MISC_MMAP_DATA`).
    pub executable: bool,
    pub path: String,
}

/// Fork or exit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskEventKind {
    Fork,
    Exit,
}

/// `PERF_RECORD_FORK` / `PERF_RECORD_EXIT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TaskEvent {
    pub pos: RecordPos,
    pub sample: SampleId,
    pub kind: TaskEventKind,
    pub pid: i32,
    pub ppid: i32,
    pub tid: i32,
    pub ptid: i32,
    /// The record's own `time` field (perf clock ns).
    pub time_ns: u64,
}

/// `PERF_RECORD_SWITCH` (per-thread) or `PERF_RECORD_SWITCH_CPU_WIDE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ContextSwitch {
    pub pos: RecordPos,
    pub sample: SampleId,
    /// Switch-out record (`PERF_RECORD_MISC_SWITCH_OUT`); otherwise switch-in.
    pub out: bool,
    /// Switch-out while still runnable (`PERF_RECORD_MISC_SWITCH_OUT_PREEMPT`).
    pub preempted: bool,
    /// CPU-wide records only: the next task (on switch-out) or previous task (on switch-in).
    pub other_pid: Option<i32>,
    pub other_tid: Option<i32>,
}

/// `PERF_RECORD_ITRACE_START`: the AUX tracer started for a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ItraceStart {
    pub pos: RecordPos,
    pub sample: SampleId,
    pub pid: i32,
    pub tid: i32,
}

/// `PERF_RECORD_LOST`: the kernel dropped records of the ring buffer (not AUX data).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Lost {
    pub pos: RecordPos,
    pub sample: SampleId,
    pub id: u64,
    pub lost: u64,
}

/// `PERF_RECORD_LOST_SAMPLES`: samples the kernel dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LostSamples {
    pub pos: RecordPos,
    pub sample: SampleId,
    pub lost: u64,
}

/// `PERF_AUX_FLAG_*` of a `PERF_RECORD_AUX`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AuxFlags(pub u64);

impl AuxFlags {
    /// `PERF_AUX_FLAG_TRUNCATED` (0x1): the buffer filled and data after this was lost.
    pub fn truncated(self) -> bool {
        self.0 & aux_flag::TRUNCATED != 0
    }
    /// `PERF_AUX_FLAG_OVERWRITE` (0x2): snapshot (overwrite) mode.
    pub fn overwrite(self) -> bool {
        self.0 & aux_flag::OVERWRITE != 0
    }
    /// `PERF_AUX_FLAG_PARTIAL` (0x4): for SPE, the last record of the region is incomplete.
    pub fn partial(self) -> bool {
        self.0 & aux_flag::PARTIAL != 0
    }
    /// `PERF_AUX_FLAG_COLLISION` (0x8): for SPE, samples collided and were dropped.
    pub fn collision(self) -> bool {
        self.0 & aux_flag::COLLISION != 0
    }
    /// The PMU-specific format byte (bits 8-15).
    pub fn pmu_format_type(self) -> u8 {
        ((self.0 & aux_flag::PMU_FORMAT_TYPE_MASK) >> 8) as u8
    }
    /// True when any flag says data is missing or damaged (truncated, partial, collision).
    pub fn has_loss(self) -> bool {
        self.truncated() || self.partial() || self.collision()
    }
}

/// `PERF_RECORD_AUX`: the kernel wrote `aux_size` bytes at `aux_offset` of a CPU's AUX buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AuxRecord {
    pub pos: RecordPos,
    pub sample: SampleId,
    pub aux_offset: u64,
    pub aux_size: u64,
    pub flags: AuxFlags,
}

/// `PERF_RECORD_AUXTRACE_ERROR`: perf (or a decoder) reported a trace error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuxtraceError {
    pub offset: u64,
    pub error_type: u32,
    pub code: u32,
    pub cpu: u32,
    pub pid: u32,
    pub tid: u32,
    pub ip: u64,
    pub message: String,
}
