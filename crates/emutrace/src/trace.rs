//! A whole trace in memory, for tests and small recordings, with phases paired up.

use crate::error::{TraceError, TraceErrorKind};
use crate::reader::TraceReader;
use crate::types::*;
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

/// Every record of a trace, grouped by kind, in file order. `config` is always the trace's
/// CONFIG record (`Trace::from_reader` refuses traces without one).
#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub config: RunConfig,
    pub process: Option<ProcessInfo>,
    pub threads: Vec<ThreadStart>,
    pub thread_names: Vec<ThreadName>,
    pub thread_exits: Vec<ThreadExit>,
    pub mappings: Vec<Mapping>,
    pub unmappings: Vec<Unmapping>,
    pub schema: Option<Arc<[CounterDef]>>,
    pub samples: Vec<Sample>,
    pub annotations: Vec<Annotation>,
    pub counters: Vec<CounterSnapshot>,
    pub objects: Vec<ObjectTruth>,
    pub end: Option<EndInfo>,
    /// Heap blocks (version 1.1): allocations, their ends, and exact accesses per block.
    pub allocs: Vec<Alloc>,
    pub frees: Vec<Free>,
    pub blocks: Vec<BlockTruth>,
    /// Records of types this reader does not know, as (type, offset).
    pub unknown: Vec<(u16, u64)>,
}

/// One phase instance: a begin/end pair of one thread, with the counter snapshots the emulator
/// took of that thread's core at both ends.
#[derive(Clone, Debug)]
pub struct PhaseSpan {
    pub name: String,
    pub tid: u32,
    pub core: u16,
    /// Nesting depth (1 = outermost).
    pub depth: u16,
    pub begin: u64,
    pub end: u64,
    pub begin_counters: Option<CounterSnapshot>,
    pub end_counters: Option<CounterSnapshot>,
}

impl PhaseSpan {
    /// Counter change over the phase (end minus begin), if both snapshots exist.
    pub fn delta(&self, code: u32) -> Option<u64> {
        let b = self.begin_counters.as_ref()?.get(code)?;
        let e = self.end_counters.as_ref()?.get(code)?;
        e.checked_sub(b)
    }
    /// Duration in generic-timer ticks.
    pub fn ticks(&self) -> u64 {
        self.end.saturating_sub(self.begin)
    }
    /// True when a timestamp falls inside the phase.
    pub fn contains(&self, ts: u64) -> bool {
        ts >= self.begin && ts <= self.end
    }
}

impl Trace {
    /// Reads a whole trace file.
    pub fn load(path: impl AsRef<Path>) -> Result<Trace, TraceError> {
        Trace::from_reader(TraceReader::open(path)?)
    }

    /// Reads every record of a reader. A trace without CONFIG is an error; a trace without END
    /// (the emulator did not finish) loads with `end == None`.
    pub fn from_reader<R: Read>(mut r: TraceReader<R>) -> Result<Trace, TraceError> {
        let mut t = Trace::default();
        let mut have_config = false;
        while let Some(rec) = r.next_record()? {
            match rec {
                Record::Config(c) => {
                    t.config = *c;
                    have_config = true;
                }
                Record::Process(p) => t.process = Some(p),
                Record::ThreadStart(x) => t.threads.push(x),
                Record::ThreadName(x) => t.thread_names.push(x),
                Record::ThreadExit(x) => t.thread_exits.push(x),
                Record::Mmap(x) => t.mappings.push(x),
                Record::Munmap(x) => t.unmappings.push(x),
                Record::CounterSchema(s) => t.schema = Some(s),
                Record::Sample(s) => t.samples.push(s),
                Record::Annotation(a) => t.annotations.push(a),
                Record::Counters(c) => t.counters.push(c),
                Record::ObjectTruth(o) => t.objects.push(o),
                Record::End(e) => t.end = Some(e),
                Record::Alloc(a) => t.allocs.push(a),
                Record::Free(f) => t.frees.push(f),
                Record::BlockTruth(b) => t.blocks.push(b),
                Record::Unknown {
                    record_type,
                    offset,
                    ..
                } => t.unknown.push((record_type, offset)),
            }
        }
        if !have_config {
            return Err(TraceError {
                file: r.name().to_string(),
                offset: 0,
                kind: TraceErrorKind::Malformed {
                    record: "CONFIG",
                    detail: "the trace has no CONFIG record".into(),
                },
            });
        }
        Ok(t)
    }

    /// Phase instances in begin order. An END without a matching BEGIN is ignored; a BEGIN
    /// never closed is dropped.
    pub fn phases(&self) -> Vec<PhaseSpan> {
        let mut open: HashMap<u32, Vec<PhaseSpan>> = HashMap::new();
        let mut done = Vec::new();
        for a in &self.annotations {
            match a.kind {
                AnnotationKind::PhaseBegin => open.entry(a.tid).or_default().push(PhaseSpan {
                    name: a.name.clone(),
                    tid: a.tid,
                    core: a.core,
                    depth: a.depth,
                    begin: a.timestamp,
                    end: a.timestamp,
                    begin_counters: self.snapshot_at(a),
                    end_counters: None,
                }),
                AnnotationKind::PhaseEnd => {
                    if let Some(mut p) = open.get_mut(&a.tid).and_then(|v| v.pop()) {
                        p.end = a.timestamp;
                        p.end_counters = self.snapshot_at(a);
                        done.push(p);
                    }
                }
                _ => {}
            }
        }
        done.sort_by_key(|p| (p.begin, p.tid));
        done
    }

    /// Phase instances with a given name.
    pub fn phases_named(&self, name: &str) -> Vec<PhaseSpan> {
        self.phases()
            .into_iter()
            .filter(|p| p.name == name)
            .collect()
    }

    /// The snapshot the emulator takes right after a phase annotation: same thread, core and
    /// timestamp, reason Annotation.
    fn snapshot_at(&self, a: &Annotation) -> Option<CounterSnapshot> {
        self.counters
            .iter()
            .find(|c| {
                c.reason == SnapshotReason::Annotation
                    && c.tid == a.tid
                    && c.core == a.core
                    && c.timestamp == a.timestamp
            })
            .cloned()
    }

    /// A counter summed over the final snapshot of every core.
    pub fn total(&self, code: u32) -> u64 {
        self.counters
            .iter()
            .filter(|c| c.reason == SnapshotReason::Final)
            .filter_map(|c| c.get(code))
            .sum()
    }

    /// The annotated object with this name (the last registration wins).
    pub fn object(&self, name: &str) -> Option<&Annotation> {
        self.annotations
            .iter()
            .rev()
            .find(|a| a.kind == AnnotationKind::Object && a.name == name)
    }

    /// Samples whose timestamp falls in a phase and that ran on the phase's thread.
    pub fn samples_in<'a>(&'a self, p: &'a PhaseSpan) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples
            .iter()
            .filter(move |s| s.tid == p.tid && p.contains(s.timestamp()))
    }
}
