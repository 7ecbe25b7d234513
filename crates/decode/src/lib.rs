//! The decode stage: turns a recording's per-CPU SPE byte streams into [`SpeSample`]s — records
//! with their CPU, perf time and thread — in time order, in parallel and in bounded memory.
//!
//! The stage is independent of the container: it reads through the [`AuxSource`] trait and a
//! [`DecodePlan`] (streams, timestamp conversion, thread timeline) that the perf.data reader (or
//! an emulator trace, or a test) provides.
//!
//! [`SpeSample`]: spelunk_spe::SpeSample

pub mod perf;
pub mod pipeline;
pub mod threads;

pub use perf::{plan_from_perf, ContainerLosses};
pub use pipeline::{
    decode, decode_map, first_time_ns, helpers_per_stream, map_helpers, AuxChunkDesc, AuxSource,
    DecodeOptions, DecodeOutcome, DecodePlan, PipelineError, SampleContext, SampleMap, StreamDesc,
    StreamOutcome, TimeConvFn, MAX_HELPERS_PER_STREAM,
};
pub use threads::{SwitchIn, ThreadTimeline};
