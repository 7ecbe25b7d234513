//! Cache-to-cache (c2c) analysis: which cache lines move between cores, who touches which bytes
//! of them, and whether that is false or true sharing — `perf c2c`'s report ([SPE methodology §5]) with
//! a verdict per line.
//!
//! A load whose data source is another core's cache (a peer snoop:
//! [`DataSource::is_peer_snoop`]) shows a line that moved between cores. Lines are ranked by
//! their peer-snoop loads, as `perf c2c report` ranks them ("Cachelines sort on: Peer Snoop").
//! Two passes keep memory bounded: [`LineScan`] finds the lines with peer snoops (and the
//! recording's totals), then [`C2cBuilder`] collects offsets, PCs and threads for those lines
//! only. Columns follow perf c2c's Shared Data Cache Line Table and Shared Cache Line
//! Distribution Pareto ([SPE methodology] figures 5.5 and 5.6); docs/c2c.md defines each.

use crate::agg::OpKind;
use crate::maps::AddressSpaces;
use crate::objects::DataObjects;
use crate::profile::Filter;
use crate::recording::{Recording, RecordingError};
use crate::select::{Selected, Selector};
use crate::symbolize::CodeSymbolizer;
use serde::Serialize;
use spelunk_spe::{DataSource, DecodeStats, Event, SpeSample};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// Schema identifier of `spelunk c2c --json`.
pub const C2C_SCHEMA: &str = "spelunk-c2c/1";

/// perf c2c's per-line (and per-offset, per-PC) counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LineCounts {
    /// Loads and stores with a data address.
    pub records: u64,
    pub loads: u64,
    pub stores: u64,
    /// Loads served by another core's cache in this socket / another socket ("Load Peer").
    pub peer_local: u64,
    pub peer_remote: u64,
    /// Stores by their L1D events: access without refill, refill, neither recorded.
    pub store_l1_hit: u64,
    pub store_l1_miss: u64,
    pub store_na: u64,
    /// Loads by data source, in perf c2c's columns ("Core Load Hit" FB/L1/L2, "LLC Load Hit"
    /// LclHit/LclHitm, "RMT Load Hit" RmtHit/RmtHitm, "Load Dram" Lcl/Rmt). SPE has no
    /// fill-buffer source, so `load_fb` is always 0.
    pub load_fb: u64,
    pub load_l1: u64,
    pub load_l2: u64,
    pub load_lcl_hit: u64,
    pub load_lcl_hitm: u64,
    pub load_rmt_hit: u64,
    pub load_rmt_hitm: u64,
    pub load_dram_lcl: u64,
    pub load_dram_rmt: u64,
    /// Loads whose source is none of the above (unknown, device, no data source).
    pub load_other: u64,
}

impl LineCounts {
    pub fn peer(&self) -> u64 {
        self.peer_local + self.peer_remote
    }

    pub fn add(&mut self, s: &SpeSample, kind: OpKind, source: Option<DataSource>) {
        self.records += 1;
        match kind {
            OpKind::Load => {
                self.loads += 1;
                match source {
                    Some(d) if d.is_peer_snoop() && d.is_remote() => self.peer_remote += 1,
                    Some(d) if d.is_peer_snoop() => self.peer_local += 1,
                    _ => {}
                }
                use DataSource::*;
                match source {
                    Some(L1D) => self.load_l1 += 1,
                    Some(L2) => self.load_l2 += 1,
                    Some(LocalCluster | L3 | SystemCache) => self.load_lcl_hit += 1,
                    Some(
                        L2Hitm | PeerCore | PeerCoreHitm | PeerCluster | PeerClusterHitm | L3Hitm,
                    ) => self.load_lcl_hitm += 1,
                    Some(Remote) => self.load_rmt_hit += 1,
                    Some(RemoteHitm) => self.load_rmt_hitm += 1,
                    Some(Dram) => self.load_dram_lcl += 1,
                    Some(RemoteDram) => self.load_dram_rmt += 1,
                    _ => self.load_other += 1,
                }
            }
            OpKind::Store => {
                self.stores += 1;
                let ev = s.record.events.unwrap_or_default();
                if ev.contains(Event::L1dRefill) {
                    self.store_l1_miss += 1;
                } else if ev.contains(Event::L1dAccess) {
                    self.store_l1_hit += 1;
                } else {
                    self.store_na += 1;
                }
            }
            _ => {}
        }
    }
}

/// A line of a process: (pid, line address).
pub type LineKey = (Option<u32>, u64);

fn line_of(va: u64, line_size: u64) -> u64 {
    va & !(line_size - 1)
}

/// Pass 1: the lines with peer-snoop loads, and the recording's totals.
#[derive(Debug)]
pub struct LineScan {
    line_size: u64,
    pub totals: LineCounts,
    pub peer_lines: HashSet<LineKey>,
}

impl LineScan {
    /// `line_size`: a power of two.
    pub fn new(line_size: u64) -> Self {
        LineScan {
            line_size: line_size.max(1).next_power_of_two(),
            totals: LineCounts::default(),
            peer_lines: HashSet::new(),
        }
    }

    pub fn add(&mut self, s: &SpeSample, x: &Selected) {
        if !matches!(x.kind, OpKind::Load | OpKind::Store) {
            return;
        }
        let Some(va) = s.record.data_va.map(|a| a.va()) else {
            return;
        };
        self.totals.add(s, x.kind, x.source);
        if x.source.is_some_and(|d| d.is_peer_snoop()) {
            self.peer_lines.insert((s.pid, line_of(va, self.line_size)));
        }
    }
}

/// Who performed an access: a thread when known, else the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Actor {
    Thread(Option<u32>, u32),
    Cpu(u32),
    Unknown,
}

#[derive(Default)]
struct AccessAcc {
    counts: LineCounts,
    cpus: BTreeSet<u32>,
    actors: BTreeSet<Actor>,
    /// (sum, count) of total latency: remote peer loads, local peer loads, all loads.
    lat_rmt: (u64, u64),
    lat_lcl: (u64, u64),
    lat_load: (u64, u64),
}

#[derive(Default)]
struct OffsetAcc {
    counts: LineCounts,
    pas: HashSet<u64>,
    accesses: HashMap<u64, AccessAcc>,
    /// actor → (loads, stores)
    actors: BTreeMap<Actor, (u64, u64)>,
}

#[derive(Default)]
struct LineAcc {
    counts: LineCounts,
    pas: HashSet<u64>,
    cpus: BTreeSet<u32>,
    offsets: BTreeMap<u64, OffsetAcc>,
}

/// Pass 2: details of the chosen lines.
pub struct C2cBuilder {
    line_size: u64,
    wanted: HashSet<LineKey>,
    lines: HashMap<LineKey, LineAcc>,
}

impl C2cBuilder {
    pub fn new(scan: &LineScan) -> Self {
        C2cBuilder {
            line_size: scan.line_size,
            wanted: scan.peer_lines.clone(),
            lines: HashMap::new(),
        }
    }

    pub fn add(&mut self, s: &SpeSample, x: &Selected) {
        if !matches!(x.kind, OpKind::Load | OpKind::Store) {
            return;
        }
        let Some(va) = s.record.data_va.map(|a| a.va()) else {
            return;
        };
        let key = (s.pid, line_of(va, self.line_size));
        if !self.wanted.contains(&key) {
            return;
        }
        let line = self.lines.entry(key).or_default();
        let pa_line = s.record.data_pa.map(|p| line_of(p.pa(), self.line_size));
        line.counts.add(s, x.kind, x.source);
        if let Some(p) = pa_line {
            line.pas.insert(p);
        }
        if let Some(c) = s.cpu {
            line.cpus.insert(c);
        }
        let off = line.offsets.entry(va - key.1).or_default();
        off.counts.add(s, x.kind, x.source);
        if let Some(p) = s.record.data_pa {
            off.pas.insert(p.pa());
        }
        let actor = match (s.tid, s.cpu) {
            (Some(t), _) => Actor::Thread(s.pid, t),
            (None, Some(c)) => Actor::Cpu(c),
            _ => Actor::Unknown,
        };
        let a = off.actors.entry(actor).or_default();
        match x.kind {
            OpKind::Load => a.0 += 1,
            _ => a.1 += 1,
        }
        let acc = off.accesses.entry(x.pc.unwrap_or(0)).or_default();
        acc.counts.add(s, x.kind, x.source);
        if let Some(c) = s.cpu {
            acc.cpus.insert(c);
        }
        acc.actors.insert(actor);
        if x.kind == OpKind::Load {
            if let Some(t) = s.record.total_latency_cycles {
                let t = u64::from(t);
                let bump = |p: &mut (u64, u64)| {
                    p.0 += t;
                    p.1 += 1;
                };
                bump(&mut acc.lat_load);
                match x.source {
                    Some(d) if d.is_peer_snoop() && d.is_remote() => bump(&mut acc.lat_rmt),
                    Some(d) if d.is_peer_snoop() => bump(&mut acc.lat_lcl),
                    _ => {}
                }
            }
        }
    }

    /// Symbolizes the PCs of the lines (one batch) and assembles the report, lines ranked by
    /// peer-snoop loads; at most `limit` lines.
    pub fn finish(
        self,
        spaces: &AddressSpaces,
        objects: &DataObjects,
        symbolizer: &mut CodeSymbolizer,
        thread_names: &HashMap<u32, String>,
        scan_totals: LineCounts,
        limit: usize,
    ) -> (Vec<C2cLine>, C2cTotals) {
        let total_peer: u64 = self.lines.values().map(|l| l.counts.peer()).sum();
        let mut keys: Vec<&LineKey> = self.lines.keys().collect();
        keys.sort_by(|a, b| {
            let (la, lb) = (&self.lines[*a], &self.lines[*b]);
            lb.counts
                .peer()
                .cmp(&la.counts.peer())
                .then(lb.counts.records.cmp(&la.counts.records))
                .then(a.cmp(b))
        });
        let lines_with_peer = keys.len() as u64;
        keys.truncate(limit);

        // Symbolize every PC of the kept lines in one batch.
        let mut pcs: Vec<(Option<u32>, u64)> = Vec::new();
        for k in &keys {
            for off in self.lines[*k].offsets.values() {
                pcs.extend(off.accesses.keys().map(|pc| (k.0, *pc)));
            }
        }
        pcs.sort_unstable();
        pcs.dedup();
        let mut req = Vec::new();
        let mut req_of = HashMap::new();
        for (pid, pc) in &pcs {
            if let Some(m) = spaces.lookup(*pid, *pc, None) {
                req_of.insert((*pid, *pc), req.len());
                req.push((m.clone(), *pc));
            }
        }
        let locs = symbolizer.symbolize(&req);

        let thread_label = |a: &Actor| -> ThreadRef {
            match a {
                Actor::Thread(pid, tid) => ThreadRef {
                    pid: *pid,
                    tid: Some(*tid),
                    cpu: None,
                    name: thread_names.get(tid).cloned(),
                },
                Actor::Cpu(c) => ThreadRef {
                    pid: None,
                    tid: None,
                    cpu: Some(*c),
                    name: None,
                },
                Actor::Unknown => ThreadRef {
                    pid: None,
                    tid: None,
                    cpu: None,
                    name: None,
                },
            }
        };
        let pct = |n: u64, d: u64| if d == 0 { 0.0 } else { n as f64 / d as f64 };
        let mean = |p: (u64, u64)| (p.1 > 0).then(|| p.0 as f64 / p.1 as f64);

        let mut out = Vec::new();
        for (index, k) in keys.iter().enumerate() {
            let l = &self.lines[*k];
            let verdict = verdict(l);
            let object = l.offsets.keys().next().and_then(|o| {
                objects
                    .resolve(k.0, k.1 + o, None)
                    .map(|obj| obj.name.to_string())
            });
            let mut offsets = Vec::new();
            for (o, oa) in &l.offsets {
                let addr = k.1 + o;
                let obj = objects.resolve(k.0, addr, None).map(|obj| {
                    let d = addr - obj.start;
                    if d == 0 {
                        obj.name.to_string()
                    } else {
                        format!("{}+{d:#x}", obj.name)
                    }
                });
                let mut accesses: Vec<C2cAccess> = oa
                    .accesses
                    .iter()
                    .map(|(pc, acc)| {
                        let loc = req_of.get(&(k.0, *pc)).map(|i| &locs[*i]);
                        C2cAccess {
                            pc: *pc,
                            function: loc.and_then(|l| l.function.as_ref()).map(|f| f.to_string()),
                            function_offset: loc.and_then(|l| l.function_offset),
                            dso: loc.map(|l| l.dso.to_string()),
                            file: loc.and_then(|l| l.file.as_ref()).map(|f| f.to_string()),
                            line: loc.and_then(|l| l.line),
                            peer_remote_pct: pct(acc.counts.peer_remote, l.counts.peer_remote),
                            peer_local_pct: pct(acc.counts.peer_local, l.counts.peer_local),
                            store_l1_hit_pct: pct(acc.counts.store_l1_hit, l.counts.store_l1_hit),
                            store_l1_miss_pct: pct(
                                acc.counts.store_l1_miss,
                                l.counts.store_l1_miss,
                            ),
                            store_na_pct: pct(acc.counts.store_na, l.counts.store_na),
                            mean_cycles_peer_remote: mean(acc.lat_rmt),
                            mean_cycles_peer_local: mean(acc.lat_lcl),
                            mean_cycles_load: mean(acc.lat_load),
                            cpu_count: acc.cpus.len() as u64,
                            threads: acc.actors.iter().map(thread_label).collect(),
                            counts: acc.counts.clone(),
                        }
                    })
                    .collect();
                accesses.sort_by(|a, b| {
                    b.counts
                        .peer()
                        .cmp(&a.counts.peer())
                        .then(b.counts.records.cmp(&a.counts.records))
                        .then(a.pc.cmp(&b.pc))
                });
                offsets.push(C2cOffset {
                    offset: *o,
                    address: addr,
                    object: obj,
                    pa_count: oa.pas.len() as u64,
                    threads: oa
                        .actors
                        .iter()
                        .map(|(a, (ld, st))| ThreadAccesses {
                            thread: thread_label(a),
                            loads: *ld,
                            stores: *st,
                        })
                        .collect(),
                    counts: oa.counts.clone(),
                    accesses,
                });
            }
            out.push(C2cLine {
                index: index as u64,
                pid: k.0,
                address: k.1,
                object,
                pa_count: l.pas.len() as u64,
                cpu_count: l.cpus.len() as u64,
                peer_snoop_share: pct(l.counts.peer(), total_peer),
                verdict: verdict.0,
                verdict_reason: verdict.1,
                counts: l.counts.clone(),
                offsets,
            });
        }
        (
            out,
            C2cTotals {
                counts: scan_totals,
                lines_with_peer_snoops: lines_with_peer,
                peer_snoops_in_lines: total_peer,
            },
        )
    }
}

/// False sharing: a thread writes an offset that another thread, touching a different offset
/// of the line, never touches. True sharing: a thread writes an offset another thread also
/// reads or writes. The reason names the first case of each found by offset, then writer,
/// then the other thread, in ascending order (the same on every run).
fn verdict(l: &LineAcc) -> (Verdict, String) {
    let mut truly: Option<String> = None;
    let mut falsely: Option<String> = None;
    let touched: BTreeMap<Actor, BTreeSet<u64>> =
        l.offsets.iter().fold(BTreeMap::new(), |mut m, (o, oa)| {
            for a in oa.actors.keys() {
                m.entry(*a).or_default().insert(*o);
            }
            m
        });
    for (o, oa) in &l.offsets {
        for (w, (_, st)) in &oa.actors {
            if *st == 0 || *w == Actor::Unknown {
                continue;
            }
            for (other, offs) in &touched {
                if other == w || *other == Actor::Unknown {
                    continue;
                }
                if offs.contains(o) {
                    truly.get_or_insert_with(|| {
                        format!("offset {o:#x} is written by one thread and accessed by another")
                    });
                } else if !offs.is_empty() {
                    falsely.get_or_insert_with(|| {
                        let only: Vec<String> = offs.iter().map(|o2| format!("{o2:#x}")).collect();
                        format!(
                            "offset {o:#x} is written by one thread while another accesses only {} {}",
                            if only.len() == 1 { "offset" } else { "offsets" },
                            only.join(", ")
                        )
                    });
                }
            }
        }
    }
    match (truly, falsely) {
        (Some(t), Some(f)) => (Verdict::TrueAndFalseSharing, format!("{t}; {f}")),
        (Some(t), None) => (Verdict::TrueSharing, t),
        (None, Some(f)) => (Verdict::FalseSharing, f),
        (None, None) => (
            Verdict::None,
            "no sampled write by one thread to a line another thread accesses".into(),
        ),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    FalseSharing,
    TrueSharing,
    TrueAndFalseSharing,
    None,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::FalseSharing => "false sharing",
            Verdict::TrueSharing => "true sharing",
            Verdict::TrueAndFalseSharing => "true+false sharing",
            Verdict::None => "none",
        }
    }
}

/// A thread (or, without thread ids, a CPU).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ThreadRef {
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub cpu: Option<u32>,
    pub name: Option<String>,
}

impl ThreadRef {
    pub fn label(&self) -> String {
        match (self.tid, self.cpu, &self.name) {
            (Some(t), _, Some(n)) => format!("{t}:{n}"),
            (Some(t), _, None) => t.to_string(),
            (None, Some(c), _) => format!("cpu{c}"),
            _ => "?".into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ThreadAccesses {
    pub thread: ThreadRef,
    pub loads: u64,
    pub stores: u64,
}

/// One code address touching one offset (a row of perf c2c's Pareto table).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct C2cAccess {
    pub pc: u64,
    pub function: Option<String>,
    pub function_offset: Option<u64>,
    pub dso: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// This PC's share of the line's remote / local peer-snoop loads ("Peer Snoop Rmt/Lcl").
    pub peer_remote_pct: f64,
    pub peer_local_pct: f64,
    /// This PC's share of the line's stores by L1D outcome ("Store Refs").
    pub store_l1_hit_pct: f64,
    pub store_l1_miss_pct: f64,
    pub store_na_pct: f64,
    /// Mean total latency (cycles) of its remote-peer, local-peer and all loads ("cycles").
    pub mean_cycles_peer_remote: Option<f64>,
    pub mean_cycles_peer_local: Option<f64>,
    pub mean_cycles_load: Option<f64>,
    pub cpu_count: u64,
    pub threads: Vec<ThreadRef>,
    #[serde(flatten)]
    pub counts: LineCounts,
}

/// One offset within a line.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct C2cOffset {
    pub offset: u64,
    pub address: u64,
    /// The data object at the address (`buf2+0x20`).
    pub object: Option<String>,
    /// Distinct physical addresses seen.
    pub pa_count: u64,
    pub threads: Vec<ThreadAccesses>,
    #[serde(flatten)]
    pub counts: LineCounts,
    pub accesses: Vec<C2cAccess>,
}

/// One cache line (a row of perf c2c's Shared Data Cache Line Table).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct C2cLine {
    pub index: u64,
    pub pid: Option<u32>,
    pub address: u64,
    /// The data object holding the line's first accessed offset.
    pub object: Option<String>,
    /// Distinct physical lines seen for this virtual line.
    pub pa_count: u64,
    pub cpu_count: u64,
    /// The line's peer-snoop loads ÷ those of all lines ("Peer Snoop").
    pub peer_snoop_share: f64,
    pub verdict: Verdict,
    pub verdict_reason: String,
    #[serde(flatten)]
    pub counts: LineCounts,
    pub offsets: Vec<C2cOffset>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct C2cTotals {
    /// Over every selected load and store with a data address.
    #[serde(flatten)]
    pub counts: LineCounts,
    pub lines_with_peer_snoops: u64,
    pub peer_snoops_in_lines: u64,
}

/// The whole c2c report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct C2cReport {
    pub schema: &'static str,
    pub file: String,
    pub line_size: u64,
    pub samples_decoded: u64,
    pub samples_selected: u64,
    pub filter: Vec<String>,
    pub totals: C2cTotals,
    pub lines: Vec<C2cLine>,
    pub losses: crate::model::Losses,
}

/// The c2c analysis of one recording, shared by `spelunk c2c` and `spelunk report --c2c`: pass 1
/// ([`C2cScan::add`]) is fed every decoded sample — by its own decode, or by the report's, so
/// the report pays one pass less — and [`C2cScan::finish`] runs pass 2 over the lines with peer
/// snoops (if any) and assembles the report. The filter is applied exactly as the report's.
pub struct C2cScan<'a> {
    sel: Selector<'a>,
    scan: LineScan,
    line_size: u64,
}

impl<'a> C2cScan<'a> {
    /// `line_size` must have passed [`crate::recording::check_line_size`].
    pub fn new(rec: &'a Recording, filter: Filter, line_size: u64) -> Self {
        C2cScan {
            sel: Selector::new(&rec.interp, filter),
            scan: LineScan::new(line_size),
            line_size,
        }
    }

    /// Pass 1: one decoded sample (in time order).
    pub fn add(&mut self, s: &SpeSample) {
        if let Some(x) = self.sel.select(s) {
            self.scan.add(s, &x);
        }
    }

    /// Samples offered to and selected by pass 1.
    pub fn decoded(&self) -> u64 {
        self.sel.decoded
    }
    pub fn selected(&self) -> u64 {
        self.sel.selected
    }
    /// Selected loads and stores with a data address.
    pub fn records(&self) -> u64 {
        self.scan.totals.records
    }

    /// Pass 2 (a decode of `rec`, skipped when no line had a peer snoop) and the report, at
    /// most `limit` lines; `stats` are pass 1's decode statistics (for the losses).
    pub fn finish(
        self,
        rec: &Recording,
        stats: &DecodeStats,
        objects: &DataObjects,
        symbolizer: &mut CodeSymbolizer,
        limit: usize,
    ) -> Result<C2cReport, RecordingError> {
        let filter = self.sel.filter.clone();
        let described = filter.describe();
        let mut builder = C2cBuilder::new(&self.scan);
        if !self.scan.peer_lines.is_empty() {
            let mut sel2 = Selector::new(&rec.interp, filter);
            rec.decode(|s| {
                if let Some(x) = sel2.select(s) {
                    builder.add(s, &x);
                }
            })?;
        }
        let (lines, totals) = builder.finish(
            &rec.ctx.spaces,
            objects,
            symbolizer,
            &rec.ctx.thread_names,
            self.scan.totals.clone(),
            limit,
        );
        Ok(C2cReport {
            schema: C2C_SCHEMA,
            file: rec.path().to_string(),
            line_size: self.line_size,
            samples_decoded: self.sel.decoded,
            samples_selected: self.sel.selected,
            filter: described,
            totals,
            lines,
            losses: rec.losses(stats),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line where thread 1 writes offset 0x10, thread 3 reads 0x8 and thread 2 reads 0x20
    /// and 0x28: false sharing, and the reason names the first other thread by id (2), with
    /// every offset it touches, on every run (the actors were once kept in a hash map, so the
    /// offset named changed from run to run).
    #[test]
    fn false_sharing_reason_is_the_same_on_every_run() {
        let line = || {
            let mut l = LineAcc::default();
            for (off, tid, loads, stores) in [
                (0x10u64, 1u32, 0u64, 5u64),
                (0x8, 3, 4, 0),
                (0x20, 2, 6, 0),
                (0x28, 2, 1, 0),
            ] {
                l.offsets
                    .entry(off)
                    .or_default()
                    .actors
                    .insert(Actor::Thread(Some(7), tid), (loads, stores));
            }
            l
        };
        for _ in 0..50 {
            let (v, why) = verdict(&line());
            assert_eq!(v, Verdict::FalseSharing);
            assert_eq!(
                why,
                "offset 0x10 is written by one thread while another accesses only offsets 0x20, 0x28"
            );
        }
        // Thread 2 also writes 0x8, which thread 3 reads: true sharing too.
        let mut l = line();
        l.offsets
            .get_mut(&0x8)
            .unwrap()
            .actors
            .insert(Actor::Thread(Some(7), 2), (0, 1));
        let (v, why) = verdict(&l);
        assert_eq!(v, Verdict::TrueAndFalseSharing);
        assert!(
            why.starts_with("offset 0x8 is written by one thread and accessed by another; "),
            "{why}"
        );
    }
}
