//! The one error type of this crate. Every variant names the file; those about content also name
//! the byte offset and the record (or section) involved, so a message alone locates the problem.

use std::io;

/// An error reading or writing a perf.data file. `Display` is one line starting with the path.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    /// The operating system refused a read, write, open or seek.
    #[error("{path}: cannot {action}: {source}")]
    Io {
        path: String,
        /// What was being done, e.g. "open", "read 48 bytes at byte 4096".
        action: String,
        #[source]
        source: io::Error,
    },
    /// The file does not start with a perf.data magic.
    #[error("{path}: not a perf.data file: {what}")]
    NotPerfData {
        path: String,
        /// What the first bytes look like instead.
        what: String,
    },
    /// A pipe-mode perf.data (`perf record -o -`), which has no seekable index.
    #[error(
        "{path}: pipe-mode perf.data (written by `perf record -o -`) is not supported; \
         convert it with `perf inject -i {path} -o file.data`"
    )]
    PipeMode { path: String },
    /// A perf.data written by a big-endian machine.
    #[error("{path}: big-endian perf.data (magic \"2ELIFREP\") is not supported; spelunk reads little-endian recordings (arm64, x86-64)")]
    BigEndian { path: String },
    /// A structure that extends past the end of the file or of its section.
    #[error("{path}: truncated {what} at byte {offset}: {detail}")]
    Truncated {
        path: String,
        offset: u64,
        /// The record or section, e.g. `PERF_RECORD_AUXTRACE`, `file header`.
        what: String,
        detail: String,
    },
    /// A structure whose fields are inconsistent.
    #[error("{path}: malformed {what} at byte {offset}: {detail}")]
    Malformed {
        path: String,
        offset: u64,
        what: String,
        detail: String,
    },
    /// A valid perf.data without Arm SPE data.
    #[error(
        "{path}: contains no Arm SPE data ({detail}): record with `perf record -e arm_spe_0//`"
    )]
    NoSpeData { path: String, detail: String },
    /// A damaged perf.data (cut short, a record cut off or malformed) in which no Arm SPE
    /// metadata was found before the damage: the damage, not the recording, is the likely
    /// reason.
    #[error("{path}: damaged before any Arm SPE data: {detail}")]
    DamagedBeforeSpe {
        path: String,
        offset: u64,
        /// The damage, e.g. `the data section ends at byte 13744 but the file ends at 408 (the
        /// file was cut)`.
        detail: String,
    },
    /// Arm SPE metadata but not one byte of SPE data (no AUX buffer was written).
    #[error(
        "{path}: the recording has Arm SPE metadata but no SPE data (no AUX buffers were written; \
         was the workload too short, or did SPE not start?)"
    )]
    NoAuxData { path: String },
    /// Arm SPE metadata, no SPE data, and damage (a cut or malformed record) before any: the
    /// damage is the likely reason the data is missing.
    #[error("{path}: the recording is damaged before its SPE data: {detail}")]
    DamagedBeforeSpeData {
        path: String,
        offset: u64,
        detail: String,
    },
    /// A perf.data with AUX area data of another tracer.
    #[error(
        "{path}: contains {kind} data (PERF_RECORD_AUXTRACE_INFO type {auxtrace_type} at byte {offset}), \
         not Arm SPE (type 4): record with `perf record -e arm_spe_0//`"
    )]
    OtherAuxtrace {
        path: String,
        offset: u64,
        kind: String,
        auxtrace_type: u32,
    },
    /// Arm SPE metadata in a layout this crate does not know.
    #[error("{path}: unsupported Arm SPE metadata in PERF_RECORD_AUXTRACE_INFO at byte {offset}: {source}")]
    SpeMetadata {
        path: String,
        offset: u64,
        #[source]
        source: crate::auxinfo::AuxInfoError,
    },
    /// A value the writer cannot represent.
    #[error("{path}: cannot write {what}: {detail}")]
    Unwritable {
        path: String,
        what: String,
        detail: String,
    },
}

impl PerfError {
    /// The byte offset the error refers to, when it refers to one.
    pub fn offset(&self) -> Option<u64> {
        match self {
            PerfError::Truncated { offset, .. }
            | PerfError::Malformed { offset, .. }
            | PerfError::OtherAuxtrace { offset, .. }
            | PerfError::DamagedBeforeSpe { offset, .. }
            | PerfError::DamagedBeforeSpeData { offset, .. }
            | PerfError::SpeMetadata { offset, .. } => Some(*offset),
            _ => None,
        }
    }
}
