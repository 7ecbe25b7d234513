//! perf.data reading and writing for Arm SPE recordings (work in progress).

pub mod abi;
pub mod attr;
pub mod auxinfo;
pub mod error;
pub mod records;
pub mod source;
pub mod timeconv;
pub mod writer;

pub use attr::{EventAttr, SpeConfig};
pub use auxinfo::{AuxInfoError, SpeAuxtraceInfo, SpeCpuMetadata};
pub use error::PerfError;
pub use records::*;
pub use timeconv::{TimeConv, TimeConvLayout};
pub use writer::{Mmap2, RecordingSpec, SpeMetadataLayout, SpeRecordingWriter, Task, WriteSummary};
pub mod reader;
pub use reader::{
    AuxChunk, AuxStream, AuxtraceInfoRecord, HeaderFeatures, IndexSummary, PerfDataFile, Problem,
    ProblemKind, Sideband, UnknownRecords,
};
