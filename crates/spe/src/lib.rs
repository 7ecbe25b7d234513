//! Arm Statistical Profiling Extension (SPE): packets to and from bytes, records, and the
//! per-CPU tables needed to interpret them. No I/O and no dependencies, so the decoder can be
//! fuzzed, benchmarked and reused anywhere (perf.data reading lives in `spelunk-perf`).
//!
//! The layers:
//! - [`packet`]: one packet <-> bytes ([`decode_packet`], [`Packet::encode`]), resynchronising
//!   [`PacketReader`].
//! - [`record`]: packets grouped into [`SpeRecord`]s by a streaming [`RecordDecoder`] that
//!   counts everything it skips ([`DecodeStats`]); record encoders for test data and emulators.
//! - [`op`], [`events`], [`address`]: typed views of packet payloads.
//! - [`datasource`], [`midr`]: CPU-specific interpretation chosen by MIDR.
//!
//! Provenance of every encoding is stated in the module that implements it.

pub mod address;
pub mod datasource;
pub mod events;
pub mod interp;
pub mod midr;
pub mod op;
pub mod packet;
pub mod record;
pub mod sample;
pub mod synth;
mod text;

pub use address::{canonical_va, CodeAddress, DataPhysicalAddress, DataVirtualAddress};
pub use datasource::{DataSource, DataSourceEncoding, DataSourceOrigin};
pub use events::{Event, Events, ImpDefEventNames};
pub use interp::{CpuInterpretation, Interpretation};
pub use midr::{CpuModel, Midr};
pub use op::{CallReturn, LoadStoreKind, OpClass, OpType, Operation};
pub use packet::{decode_packet, Packet, PacketError, PacketReader, PayloadSize};
pub use record::{
    counter_saturated, decode_records, DecodeIssue, DecodeStats, RecordDecoder, RecordLayout,
    SpeRecord, SpeTable, Terminator,
};
pub use sample::SpeSample;
