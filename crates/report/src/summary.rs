//! The summary `spelunk decode` prints: what was decoded, per table and CPU, the time span, the
//! operation and data-source mix, and everything that was skipped or lost.

use spelunk_decode::ContainerLosses;
use spelunk_decode::SampleContext;
use spelunk_spe::Interpretation;
use spelunk_spe::{DataSource, DecodeStats, Event, SpeRecord, SpeSample, SpeTable};
use std::fmt::Write as _;

/// Accumulates a summary over a stream of samples.
#[derive(Clone, Debug, Default)]
pub struct DecodeSummary {
    pub samples: u64,
    /// Records per table: ldst, br, other.
    pub by_table: [u64; 3],
    /// Records per CPU (index = CPU number), and records without a CPU.
    pub by_cpu: Vec<u64>,
    pub no_cpu: u64,
    pub loads: u64,
    pub stores: u64,
    pub branches: u64,
    pub mispredicted_branches: u64,
    /// Loads per data source (a handful of entries; searched linearly).
    pub load_sources: Vec<(DataSource, u64)>,
    pub first_time_ns: Option<u64>,
    pub last_time_ns: Option<u64>,
    pub first_ts: Option<u64>,
    pub last_ts: Option<u64>,
    pub with_tid: u64,
    pub decode: DecodeStats,
    pub container: ContainerLosses,
}

/// CPUs numbered at or above this are counted as `no_cpu` (a corrupt CPU number must not make
/// the summary allocate gigabytes).
const MAX_CPU_SLOTS: usize = 1 << 16;

impl DecodeSummary {
    pub fn add(&mut self, s: &SpeSample, interp: &Interpretation) {
        let c = SampleContext {
            cpu: s.cpu,
            pid: s.pid,
            tid: s.tid,
            time_ns: s.time_ns,
        };
        self.add_record(&s.record, &c, interp)
    }

    /// [`DecodeSummary::add`] for a record and its context (no sample needs to be built).
    #[inline]
    pub fn add_record(&mut self, r: &SpeRecord, s: &SampleContext, interp: &Interpretation) {
        self.samples += 1;
        self.by_table[SpeTable::of_record(r).index()] += 1;
        match s
            .cpu
            .and_then(|c| usize::try_from(c).ok())
            .filter(|c| *c < MAX_CPU_SLOTS)
        {
            Some(c) => {
                if self.by_cpu.len() <= c {
                    self.by_cpu.resize(c + 1, 0);
                }
                self.by_cpu[c] += 1;
            }
            None => self.no_cpu += 1,
        }
        if let Some(op) = r.op {
            if op.is_load() {
                self.loads += 1;
                if let Some((ds, _)) = interp
                    .for_cpu(s.cpu)
                    .data_source
                    .resolve(r.data_source, r.events)
                {
                    match self.load_sources.iter_mut().find(|(d, _)| *d == ds) {
                        Some((_, n)) => *n += 1,
                        None => self.load_sources.push((ds, 1)),
                    }
                }
            } else if op.is_store() {
                self.stores += 1;
            } else if op.is_branch() {
                self.branches += 1;
                if r.events.is_some_and(|e| e.contains(Event::Mispredicted)) {
                    self.mispredicted_branches += 1;
                }
            }
        }
        if let Some(t) = s.time_ns {
            self.first_time_ns = Some(self.first_time_ns.map_or(t, |f| f.min(t)));
            self.last_time_ns = Some(self.last_time_ns.map_or(t, |l| l.max(t)));
        }
        if let Some(t) = r.timestamp {
            self.first_ts = Some(self.first_ts.map_or(t, |f| f.min(t)));
            self.last_ts = Some(self.last_ts.map_or(t, |l| l.max(t)));
        }
        if s.tid.is_some() {
            self.with_tid += 1;
        }
    }

    /// Adds the counts of a summary of other samples (e.g. another stream's); `decode` and
    /// `container` are left alone.
    pub fn merge(&mut self, o: &DecodeSummary) {
        self.samples += o.samples;
        for (a, b) in self.by_table.iter_mut().zip(o.by_table) {
            *a += b;
        }
        if self.by_cpu.len() < o.by_cpu.len() {
            self.by_cpu.resize(o.by_cpu.len(), 0);
        }
        for (a, b) in self.by_cpu.iter_mut().zip(&o.by_cpu) {
            *a += b;
        }
        self.no_cpu += o.no_cpu;
        self.loads += o.loads;
        self.stores += o.stores;
        self.branches += o.branches;
        self.mispredicted_branches += o.mispredicted_branches;
        for &(ds, n) in &o.load_sources {
            match self.load_sources.iter_mut().find(|(d, _)| *d == ds) {
                Some((_, m)) => *m += n,
                None => self.load_sources.push((ds, n)),
            }
        }
        let min = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        let max = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        };
        self.first_time_ns = min(self.first_time_ns, o.first_time_ns);
        self.last_time_ns = max(self.last_time_ns, o.last_time_ns);
        self.first_ts = min(self.first_ts, o.first_ts);
        self.last_ts = max(self.last_ts, o.last_ts);
        self.with_tid += o.with_tid;
    }

    /// Plain-text rendering for the terminal.
    pub fn render_text(&self) -> String {
        let mut o = String::new();
        let pct = |n: u64, d: u64| {
            if d == 0 {
                0.0
            } else {
                100.0 * n as f64 / d as f64
            }
        };
        let _ = writeln!(o, "SPE records decoded: {}", self.samples);
        for (t, n) in ["ldst", "br", "other"].iter().zip(self.by_table) {
            if n == 0 {
                continue;
            }
            let _ = writeln!(o, "  {:<6} {:>12}  ({:5.1}%)", t, n, pct(n, self.samples));
        }
        let _ = writeln!(
            o,
            "operations: {} loads, {} stores, {} branches ({} mispredicted, {:.2}%)",
            self.loads,
            self.stores,
            self.branches,
            self.mispredicted_branches,
            pct(self.mispredicted_branches, self.branches)
        );
        if !self.load_sources.is_empty() {
            let total: u64 = self.load_sources.iter().map(|(_, n)| n).sum();
            let mut v: Vec<_> = self.load_sources.iter().map(|(d, n)| (d, n)).collect();
            v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            let parts: Vec<String> = v
                .iter()
                .map(|(d, n)| format!("{} {:.1}%", d, pct(**n, total)))
                .collect();
            let _ = writeln!(o, "load data sources: {}", parts.join(", "));
        }
        if self.by_cpu.iter().any(|n| *n > 0) {
            let mut parts: Vec<String> = self
                .by_cpu
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(c, n)| format!("cpu{c}: {n}"))
                .collect();
            if self.no_cpu > 0 {
                parts.push(format!("no cpu: {}", self.no_cpu));
            }
            let _ = writeln!(o, "per CPU: {}", parts.join(", "));
        }
        match (self.first_time_ns, self.last_time_ns) {
            (Some(a), Some(b)) => {
                let _ = writeln!(
                    o,
                    "time span: {:.6} s (perf time {a} .. {b} ns)",
                    (b - a) as f64 / 1e9
                );
            }
            _ => match (self.first_ts, self.last_ts) {
                (Some(a), Some(b)) => {
                    let _ = writeln!(
                        o,
                        "timestamps: {a} .. {b} (timer ticks; no TIME_CONV to convert them)"
                    );
                }
                _ => {
                    let _ = writeln!(o, "timestamps: none (recorded without ts_enable)");
                }
            },
        }
        if self.samples > 0 {
            let _ = writeln!(
                o,
                "thread known for {:.1}% of records",
                pct(self.with_tid, self.samples)
            );
        }
        let d = &self.decode;
        let _ = writeln!(
            o,
            "bytes decoded: {} ({} packets, {} padding)",
            d.bytes, d.packets, d.pad_packets
        );
        let c = &self.container;
        let lost = d.has_losses() || d.unterminated_records > 0 || c.any();
        if lost {
            let _ = writeln!(o, "LOSSES:");
            let mut line = |n: u64, what: &str| {
                if n > 0 {
                    let _ = writeln!(o, "  {n} {what}");
                }
            };
            line(
                d.bad_bytes,
                "undecodable bytes skipped (decoder resynchronised)",
            );
            line(
                d.dropped_records,
                "partial records dropped at undecodable bytes",
            );
            line(
                d.unterminated_records,
                "records without END/TIMESTAMP (kept)",
            );
            line(
                d.incomplete_records,
                "incomplete records at buffer gaps or end of data",
            );
            line(
                d.truncated_packets,
                "packets cut off at buffer gaps or end of data",
            );
            line(
                c.aux_truncated,
                "AUX buffers flagged truncated (SPE data lost: buffer full)",
            );
            line(c.aux_partial, "AUX buffers flagged partial");
            line(
                c.aux_collision,
                "AUX buffers flagged collision (samples lost to SPE collisions)",
            );
            line(c.lost_events, "PERF_RECORD_LOST events");
            line(c.lost_records, "records reported lost by PERF_RECORD_LOST");
            line(
                c.lost_samples,
                "samples reported lost by PERF_RECORD_LOST_SAMPLES",
            );
            line(c.auxtrace_errors, "PERF_RECORD_AUXTRACE_ERROR records");
            line(
                c.cut_off_chunks,
                "AUX buffers cut off by the end of the file",
            );
            for p in &c.problems {
                let _ = writeln!(o, "  {p}");
            }
        } else {
            let _ = writeln!(o, "nothing lost: every byte decoded, no AUX loss flags");
        }
        if c.aux_overwrite > 0 {
            let _ = writeln!(
                o,
                "note: {} AUX buffers in snapshot (overwrite) mode",
                c.aux_overwrite
            );
        }
        if d.unknown_index_packets > 0 {
            let _ = writeln!(
                o,
                "note: {} address/counter packets with unnamed indexes",
                d.unknown_index_packets
            );
        }
        o
    }
}
