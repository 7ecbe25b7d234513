//! One flat row per attributed sample: the values of the sample tables' columns (Python's
//! `Recording.samples()` and `spelunk export --dataset`), computed once here so every table
//! writer only moves them into its own column builders. Names and values follow `spelunk
//! decode`'s tables (docs/decode.md) for the decode columns.

use crate::recording::Recording;
use crate::samples::SampleAttribution;
use spelunk_analysis::objects::ObjectKind;
use spelunk_spe::{Events, OpClass, Operation, SpeSample};
use std::collections::HashMap;

/// The columns of a sample row, in order, with their types (for writers' schemas).
pub const SAMPLE_COLUMNS: &[(&str, SampleColumn)] = &[
    ("time_ns", SampleColumn::U64),
    ("cpu", SampleColumn::U32),
    ("pid", SampleColumn::U32),
    ("tid", SampleColumn::U32),
    ("thread", SampleColumn::Text),
    ("op", SampleColumn::Text),
    ("pc", SampleColumn::U64),
    ("el", SampleColumn::U8),
    ("function", SampleColumn::Text),
    ("function_offset", SampleColumn::U64),
    ("file", SampleColumn::Text),
    ("line", SampleColumn::U32),
    ("dso", SampleColumn::Text),
    ("event", SampleColumn::Text),
    ("event_bits", SampleColumn::U64),
    ("issue_lat", SampleColumn::U16),
    ("total_lat", SampleColumn::U16),
    ("xlat_lat", SampleColumn::U16),
    ("exec_lat", SampleColumn::U16),
    ("vaddr", SampleColumn::U64),
    ("paddr", SampleColumn::U64),
    ("data_source", SampleColumn::Text),
    ("data_source_raw", SampleColumn::U64),
    ("object", SampleColumn::Text),
    ("object_kind", SampleColumn::Text),
    ("object_start", SampleColumn::U64),
    ("allocation_site", SampleColumn::Text),
    ("phase", SampleColumn::Text),
    ("phases", SampleColumn::TextList),
    ("br_tgt", SampleColumn::U64),
    ("context", SampleColumn::U32),
    ("ts", SampleColumn::U64),
];

/// The type of a sample column; every column may be null.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleColumn {
    U64,
    U32,
    U16,
    U8,
    Text,
    /// A list of text values (the open phases, outermost first).
    TextList,
}

/// The values of one sample, in [`SAMPLE_COLUMNS`] order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SampleRow<'a> {
    pub time_ns: Option<u64>,
    pub cpu: Option<u32>,
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub thread: Option<&'a str>,
    /// `LD`/`ST` (ldst), `B` (br), `OTHER` or `RESERVED` (other), as `spelunk decode` writes it.
    pub op: Option<&'static str>,
    pub pc: Option<u64>,
    pub el: Option<u8>,
    pub function: Option<String>,
    pub function_offset: Option<u64>,
    pub file: Option<&'a str>,
    pub line: Option<u32>,
    pub dso: Option<&'a str>,
    /// The event names, `:`-joined (as `spelunk decode`).
    pub event: &'a str,
    pub event_bits: Option<u64>,
    pub issue_lat: Option<u16>,
    pub total_lat: Option<u16>,
    pub xlat_lat: Option<u16>,
    pub exec_lat: Option<u16>,
    pub vaddr: Option<u64>,
    pub paddr: Option<u64>,
    pub data_source: Option<String>,
    pub data_source_raw: Option<u64>,
    pub object: Option<&'a str>,
    pub object_kind: Option<&'static str>,
    pub object_start: Option<u64>,
    pub allocation_site: Option<&'a str>,
    /// The innermost open phase.
    pub phase: Option<&'a str>,
    /// Every open phase, outermost first.
    pub phases: Vec<&'a str>,
    pub br_tgt: Option<u64>,
    pub context: Option<u32>,
    pub ts: Option<u64>,
}

/// Makes the rows of one recording's samples (caching the event names per bits and CPU).
pub struct SampleRows<'r> {
    rec: &'r Recording,
    /// (event bits, CPU) -> the `:`-joined names (CPUs may name implementation-defined bits).
    events: HashMap<(u64, Option<u32>), String>,
}

impl<'r> SampleRows<'r> {
    pub fn new(rec: &'r Recording) -> Self {
        SampleRows {
            rec,
            events: HashMap::new(),
        }
    }

    /// The row of sample `s` attributed as `a`.
    pub fn row<'a>(&'a mut self, s: &SpeSample, a: &'a SampleAttribution) -> SampleRow<'a>
    where
        'r: 'a,
    {
        let r = &s.record;
        let class = r.op.map(|o| o.class());
        let ldst = class == Some(OpClass::LoadStore);
        let code = a.code.as_deref();
        let bits = r.events.map(|e| e.0);
        let interp = &self.rec.interp;
        let event = self
            .events
            .entry((bits.unwrap_or(0), s.cpu))
            .or_insert_with(|| Events(bits.unwrap_or(0)).join(&interp.for_cpu(s.cpu).imp_def, ":"));
        let object = a.object.as_deref();
        SampleRow {
            time_ns: s.time_ns,
            cpu: s.cpu,
            pid: s.pid,
            tid: s.tid,
            thread: s
                .tid
                .and_then(|t| self.rec.ctx.thread_names.get(&t))
                .map(String::as_str),
            op: op_name(r.op.map(|o| o.operation())),
            pc: r.pc.map(|p| p.va()),
            el: r.pc.map(|p| p.el()),
            function: code.map(|c| c.function_name()),
            function_offset: code.and_then(|c| c.function_offset),
            file: code.and_then(|c| c.file.as_deref()),
            line: code.and_then(|c| c.line),
            dso: code.map(|c| &*c.dso),
            event: event.as_str(),
            event_bits: bits,
            issue_lat: r.issue_latency_cycles,
            total_lat: r.total_latency_cycles,
            xlat_lat: r.translation_latency_cycles,
            exec_lat: r.derived_execution_latency(),
            vaddr: r.data_va.filter(|_| ldst).map(|v| v.va()),
            paddr: r.data_pa.filter(|_| ldst).map(|p| p.pa()),
            data_source: a.data_source.map(|d| d.to_string()),
            data_source_raw: r.data_source.filter(|_| ldst),
            object: object.map(|o| &*o.name),
            object_kind: object.map(|o| o.kind.name()),
            object_start: object.map(|o| o.start),
            allocation_site: object
                .filter(|o| o.kind == ObjectKind::Allocation)
                .map(|o| &*o.name),
            phase: a.phases.last().map(|p| &**p),
            phases: a.phases.iter().map(|p| &**p).collect(),
            br_tgt: r
                .branch_target
                .filter(|_| class == Some(OpClass::Branch))
                .map(|t| t.va()),
            context: r.context_tid(),
            ts: r.timestamp,
        }
    }
}

/// `op` as `spelunk decode` writes it: LD/ST (ldst), B (br), OTHER or RESERVED (other).
fn op_name(op: Option<Operation>) -> Option<&'static str> {
    Some(match op? {
        Operation::LoadStore { store: true, .. } => "ST",
        Operation::LoadStore { store: false, .. } => "LD",
        Operation::Branch { .. } => "B",
        Operation::Reserved { .. } => "RESERVED",
        Operation::Other { .. }
        | Operation::SveOther { .. }
        | Operation::SmeOther { .. }
        | Operation::OtherUnknown(_) => "OTHER",
    })
}
