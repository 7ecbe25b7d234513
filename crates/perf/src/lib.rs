//! perf.data reading and writing for Arm SPE recordings.
//!
//! spelunk's profile on disk is a standard perf.data, so `perf report`, `perf script` and
//! `perf c2c report` still open it. This crate is the only place that knows the container:
//!
//! - [`PerfDataFile`] ([`reader`]) indexes a perf.data in one pass with bounded memory: attrs
//!   ([`EventAttr`], with the SPE PMU's [`SpeConfig`]), header features
//!   ([`HeaderFeatures`], including the MIDR from HEADER_CPUID), [`TimeConv`], the Arm SPE
//!   metadata ([`SpeAuxtraceInfo`], versions 1 and 2), typed [`Sideband`] records with their
//!   sample_id, and per-buffer [`AuxStream`]s of [`AuxChunk`] locations that
//!   [`PerfDataFile::read_chunk`] reads with positional reads (thread-safe). Problems found
//!   while indexing (truncation, data size 0, malformed or unknown records) are collected with
//!   byte offsets in [`IndexSummary`]; everything before a problem is kept.
//! - [`SpeRecordingWriter`] ([`writer`]) writes a perf.data the way
//!   `perf record -e arm_spe_0/.../ -- CMD` does.
//! - [`auxinfo`], [`timeconv`], [`attr`], [`records`], [`abi`]: the record layouts, each with
//!   its provenance (kernel UAPI `perf_event.h`, tools/perf `perf.data-file-format.txt`, the
//!   arm_spe_pmu driver's sysfs `format`, and perf's observed behaviour; no perf code is copied).
//!
//! Errors are [`PerfError`]: one line naming the file, and for content problems the byte offset
//! and the record, e.g. `perf.data: truncated PERF_RECORD_AUXTRACE at byte 123456: header says
//! 4194304 payload bytes, file ends after 1000`. Nothing panics on file content
//! ([`PerfDataFile::from_bytes`] is the fuzzing entry point and shares the file code path).
//!
//! # Linux perf 6.1 facts and quirks (Debian's `perf`, our oracle; checked by tests/)
//!
//! - **SPE metadata version 2 is silently misread.** perf 6.1 knows only the 2-u64 version-1
//!   AUXTRACE_INFO. Given version 2 it takes `priv[0]` (the version, 2) as the PMU type,
//!   finds no event of type 2 and synthesizes no samples, without an error; `perf report -D`
//!   still dumps the packets. The writer therefore defaults to version 1.
//! - **Decoding needs `sample_id_all` = 1 and AUXTRACE_INFO type 4**; without sample_id_all
//!   perf never decodes the AUX queue (tests/data README).
//! - **TIME_CONV must precede AUXTRACE_INFO.** perf takes the time conversion into its SPE
//!   decoder when it processes AUXTRACE_INFO. With the two records swapped, `perf script`
//!   6.1 prints no sample and dies of SIGFPE (exit status 136, a division by the zero
//!   time_mult it copied), while `perf report -D` still dumps the packets (pinned by a test). The writer writes TIME_CONV first, as `perf record` does. SPE sample
//!   times are `tsc_to_perf_time(TIMESTAMP)`; `perf script --ns` prints exactly that value.
//! - **TIME_CONV has a short (32-byte) and a long (56-byte) layout**; the long one adds
//!   time_cycles, time_mask and the cap_user_time_zero/short bytes.
//! - **HEADER_CPUID on arm64** is `0x%016lx` of MIDR_EL1 with Variant \[23:20\] and Revision
//!   \[3:0\] cleared (e.g. `0x00000000410fd0c0` for any Neoverse N1); perf selects its
//!   Neoverse data-source decoding from it. Only version-2 metadata carries each CPU's full
//!   MIDR.
//! - **HEADER_NRCPUS** is written as (available, online) although the format document lists
//!   them the other way round; perf reads them in the written order.
//! - **AUXTRACE payloads** follow the 48-byte record and are not counted in `header.size`;
//!   perf pads each payload to 8 bytes with zeros and counts the padding in `size`, while the
//!   next record's `offset` advances by the unpadded length. SPE decodes the zeros as PAD.
//! - **HEADER_AUXTRACE** (an index of AUXTRACE records: count, then {file offset,
//!   `header.size`}) makes perf queue all AUX data when it processes AUXTRACE_INFO, so
//!   `perf report -D` dumps every AUX buffer before the sideband records.
//! - **Default `perf script` output is per event category** (`l1d-access`, `tlb-access`,
//!   `memory`, `branch-miss`, ...): one SPE record can give several samples and correctly
//!   predicted branches give none. `--itrace=i1i` gives exactly one `instructions` sample per
//!   record (data address for loads/stores, 0 otherwise). perf prints "Only
//!   instruction-based sampling period is currently supported by Arm SPE." on stderr; it is
//!   harmless. Addresses are sign-extended from bit 55.
//! - **`perf c2c report`** counts SPE loads and stores given a Neoverse CPUID, DATA_SRC in the
//!   SPE event's sample_type, and NUMA_TOPOLOGY; without MEM_TOPOLOGY it warns "No memory
//!   nodes, is CONFIG_MEMORY_HOTPLUG enabled?" and "failed to find node". The writer writes
//!   both (one node, one memory block covering every physical address).
//! - **perf 6.1 writes** `perf_event_attr` of 128 bytes (`PERF_ATTR_SIZE_VER7`), an ID_INDEX
//!   record first in the data section even in file mode, and FINISHED_INIT (type 82) after the
//!   synthesized records. When `perf record` is killed it leaves the header's data size at 0
//!   and no feature sections; the reader then scans records to the end of the file.
//! - **Pipe mode** (`perf record -o -`, header size 16) is rejected with a hint to convert it
//!   with `perf inject`; big-endian files are rejected.
//!
//! linux-perf-event-reader 0.10 asserts (panics) on an MMAP2 build id longer than 20 bytes and
//! linux-perf-data 0.13 allocates whatever a section header says; the reader checks both before
//! handing data over (see [`reader`]).

pub mod abi;
pub mod attr;
pub mod auxinfo;
pub mod buildid;
pub mod bytes;
pub mod counting;
pub mod error;
pub mod reader;
pub mod records;
pub mod ring;
pub mod schema;
pub mod sidecar;
pub mod source;
pub mod spe_pmu;
pub mod timeconv;
pub mod writer;

pub use attr::{EventAttr, SpeConfig};
pub use auxinfo::{AuxInfoError, SpeAuxtraceInfo, SpeCpuMetadata};
pub use buildid::{BuildId, BuildIdEntry};
pub use error::PerfError;
pub use reader::{
    AuxChunk, AuxStream, AuxtraceInfoRecord, HeaderFeatures, IndexSummary, PerfDataFile, Problem,
    ProblemKind, Sideband, SidebandRecord, UnknownRecords,
};
pub use records::{
    AuxFlags, AuxRecord, AuxtraceError, Comm, ContextSwitch, ItraceStart, Lost, LostSamples, Mmap,
    MmapFileId, RecordPos, SampleId, TaskEvent, TaskEventKind,
};
pub use source::{FileSource, MemorySource, ReadAt};
pub use timeconv::{TimeConv, TimeConvLayout};
pub use writer::{
    cpuid_string, Mmap2, RecordingSpec, SpeMetadataLayout, SpeRecordingWriter, Task, WriteSummary,
};
