//! A decoded record placed in its context: the CPU whose buffer held it, the thread that ran,
//! and the perf time it maps to. This is what the decode stage hands to every later stage.

use crate::record::SpeRecord;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpeSample {
    /// CPU whose SPE buffer held the record (`None` for per-thread buffers or raw input).
    pub cpu: Option<u32>,
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    /// Perf clock time in nanoseconds, converted from the record's timestamp via TIME_CONV.
    pub time_ns: Option<u64>,
    pub record: SpeRecord,
}
