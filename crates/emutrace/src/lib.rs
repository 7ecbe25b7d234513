//! Reader for the trace file written by spelunk's SPE/PMU emulator (the Valgrind tool in
//! `emulator/`). The byte layouts are specified in `emulator/FORMAT.md`; this crate follows that
//! document and nothing else.
//!
//! - [`TraceReader`] streams a trace record by record into typed [`Record`]s with constant
//!   memory: samples come out as [`spelunk_spe::SpeRecord`]s (inside [`Sample`]) ready to be
//!   encoded with `RecordLayout::N1Padded64` into AUX data, plus the emulator's ground truth.
//! - [`Trace`] loads a whole (small) trace into memory and pairs phases with their counter
//!   snapshots, for tests and reports.
//! - [`events`] names the PMU event codes and the emulator's ground-truth counter codes.
//!
//! Errors are [`TraceError`]s naming the file and the byte offset. Nothing here panics on file
//! content; unknown record types are returned as [`Record::Unknown`] and skipped by length.

pub mod error;
pub mod events;
pub mod format;
mod parse;
pub mod reader;
pub mod trace;
pub mod types;

pub use error::{TraceError, TraceErrorKind};
pub use reader::TraceReader;
pub use trace::{PhaseSpan, Trace};
pub use types::{
    Alloc, AllocKind, Annotation, AnnotationKind, BlockTruth, CounterDef, CounterSnapshot, EndInfo,
    ExactAccesses, Free, FreeKind, Mapping, MemoryLevel, ObjectTruth, ProcessInfo, Record,
    RunConfig, Sample, SnapshotReason, ThpPolicy, ThreadExit, ThreadName, ThreadStart, Unmapping,
};
