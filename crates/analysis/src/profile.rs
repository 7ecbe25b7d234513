//! Building a [`Report`] from samples in one streaming pass.
//!
//! The hot path does no symbolization: samples that pass the [`Filter`] are aggregated by raw
//! (pid, PC), by data object (resolved inline: an interval lookup), by data source, thread and
//! CPU, and a bounded uniform reservoir keeps memory accesses for the address-over-time view.
//! [`ProfileBuilder::finish`] then symbolizes only the unique PCs, in one batch, and rolls them
//! up into functions, source lines, instructions and DSOs.

use crate::agg::{Agg, KeyedAggs, OpKind};
use crate::fasthash::FastMap;
use crate::footprint::RegionCounts;
use crate::maps::AddressSpaces;
use crate::model::*;
use crate::names::base_name;
use crate::objects::{DataObject, DataObjects, ObjectKind};
use crate::phases::{PhaseIndex, PhaseInstance};
use crate::stats::LatencyStats;
use crate::symbolize::{short_name, CodeLocation, CodeSymbolizer, BUILD_ID_MISMATCH};
use spelunk_perf::sidecar::Sidecar;
use spelunk_spe::synth::Rng;
use spelunk_spe::{DataSource, Event, Interpretation, SpeSample};
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// Which samples a report covers (`--event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventClass {
    Load,
    Store,
    Memory,
    Branch,
    L1dAccess,
    L1dMiss,
    LlcAccess,
    LlcMiss,
    TlbAccess,
    TlbWalk,
    BranchMiss,
    Remote,
    /// Loads served by another core's cache (peer-core/cluster/remote snoops).
    PeerSnoop,
    /// Loads served by DRAM (local or remote).
    Dram,
}

impl EventClass {
    pub const ALL: [(&'static str, EventClass); 14] = [
        ("load", EventClass::Load),
        ("store", EventClass::Store),
        ("memory", EventClass::Memory),
        ("branch", EventClass::Branch),
        ("l1d-access", EventClass::L1dAccess),
        ("l1d-miss", EventClass::L1dMiss),
        ("llc-access", EventClass::LlcAccess),
        ("llc-miss", EventClass::LlcMiss),
        ("tlb-access", EventClass::TlbAccess),
        ("tlb-walk", EventClass::TlbWalk),
        ("branch-miss", EventClass::BranchMiss),
        ("remote", EventClass::Remote),
        ("peer", EventClass::PeerSnoop),
        ("dram", EventClass::Dram),
    ];

    pub fn parse(s: &str) -> Option<EventClass> {
        by_name(&Self::ALL, s)
    }

    pub fn name(self) -> &'static str {
        name_of(&Self::ALL, self)
    }

    fn accepts(self, s: &SpeSample, kind: OpKind, ds: Option<DataSource>) -> bool {
        let ev = s.record.events.unwrap_or_default();
        match self {
            EventClass::Load => kind == OpKind::Load,
            EventClass::Store => kind == OpKind::Store,
            EventClass::Memory => matches!(kind, OpKind::Load | OpKind::Store),
            EventClass::Branch => kind == OpKind::Branch,
            EventClass::L1dAccess => ev.contains(Event::L1dAccess),
            EventClass::L1dMiss => ev.contains(Event::L1dRefill),
            EventClass::LlcAccess => ev.contains(Event::LlcAccess),
            EventClass::LlcMiss => ev.contains(Event::LlcMiss),
            EventClass::TlbAccess => ev.contains(Event::TlbAccess),
            EventClass::TlbWalk => ev.contains(Event::TlbWalk),
            EventClass::BranchMiss => ev.contains(Event::Mispredicted),
            EventClass::Remote => {
                ev.contains(Event::RemoteAccess) || ds.is_some_and(|d| d.is_remote())
            }
            EventClass::PeerSnoop => ds.is_some_and(|d| d.is_peer_snoop()),
            EventClass::Dram => matches!(ds, Some(DataSource::Dram | DataSource::RemoteDram)),
        }
    }
}

/// The order of the hotspot tables (`--sort`): the figure's largest value first. Rows without
/// the figure (latency orders: no load with a latency) come last; ties go to the row with more
/// samples, then to the smaller key. The tables keep their first rows after sorting, so
/// `--sort latency` with a limit of 10 keeps the 10 slowest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HotspotSort {
    /// Estimated cycles (load-to-use latency of the loads, one cycle per other operation):
    /// what costs time, not what is frequent.
    #[default]
    Cost,
    Samples,
    Loads,
    Stores,
    /// Mean total load latency.
    Latency,
    /// 99th percentile of the total load latency.
    P99,
    /// Mean derived execution latency of the loads.
    Exec,
    L1dMiss,
    LlcMiss,
    TlbWalk,
    Mispredicts,
    Remote,
}

impl HotspotSort {
    pub const ALL: [(&'static str, HotspotSort); 12] = [
        ("cost", HotspotSort::Cost),
        ("samples", HotspotSort::Samples),
        ("loads", HotspotSort::Loads),
        ("stores", HotspotSort::Stores),
        ("latency", HotspotSort::Latency),
        ("p99", HotspotSort::P99),
        ("exec", HotspotSort::Exec),
        ("l1d-miss", HotspotSort::L1dMiss),
        ("llc-miss", HotspotSort::LlcMiss),
        ("tlb-walk", HotspotSort::TlbWalk),
        ("mispredicts", HotspotSort::Mispredicts),
        ("remote", HotspotSort::Remote),
    ];

    pub fn parse(s: &str) -> Option<HotspotSort> {
        by_name(&Self::ALL, s)
    }

    /// [`Self::parse`], or the message that lists the known orders (`--sort`).
    pub fn parse_or_explain(s: &str) -> Result<HotspotSort, String> {
        Self::parse(s).ok_or_else(|| {
            let known: Vec<&str> = Self::ALL.iter().map(|(n, _)| *n).collect();
            format!("unknown order '{s}'; known: {}", known.join(", "))
        })
    }

    pub fn name(self) -> &'static str {
        name_of(&Self::ALL, self)
    }

    /// The figure this order ranks by; None when the group has none (sorted last).
    fn figure(self, g: &GroupStats) -> Option<f64> {
        let lat = |l: &Option<LatencySummary>, f: fn(&LatencySummary) -> f64| l.as_ref().map(f);
        match self {
            HotspotSort::Cost => Some(g.cost_sampled_cycles),
            HotspotSort::Samples => Some(g.samples as f64),
            HotspotSort::Loads => Some(g.loads as f64),
            HotspotSort::Stores => Some(g.stores as f64),
            HotspotSort::Latency => lat(&g.load_latency, |l| l.mean),
            HotspotSort::P99 => lat(&g.load_latency, |l| f64::from(l.p99)),
            HotspotSort::Exec => lat(&g.load_exec_latency, |l| l.mean),
            HotspotSort::L1dMiss => Some(g.l1d_miss as f64),
            HotspotSort::LlcMiss => Some(g.llc_miss as f64),
            HotspotSort::TlbWalk => Some(g.tlb_walk as f64),
            HotspotSort::Mispredicts => Some(g.mispredicts as f64),
            HotspotSort::Remote => Some(g.remote as f64),
        }
    }

    /// Orders hotspot rows: this figure descending (absent last), then samples descending,
    /// then key ascending.
    pub fn compare(self, a: &Hotspot, b: &Hotspot) -> std::cmp::Ordering {
        let by_figure = match (self.figure(&a.stats), self.figure(&b.stats)) {
            (Some(x), Some(y)) => y.total_cmp(&x),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        };
        by_figure
            .then_with(|| b.stats.samples.cmp(&a.stats.samples))
            .then_with(|| a.key.cmp(&b.key))
    }
}

/// Sample selection. Empty lists select everything.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub pids: Vec<u32>,
    pub tids: Vec<u32>,
    pub cpus: Vec<u32>,
    /// Seconds since the first sample of the recording: [from, to).
    pub time_range_s: Option<(f64, f64)>,
    /// Code addresses [from, to).
    pub pc_range: Option<(u64, u64)>,
    pub event: Option<EventClass>,
    /// Only these (pid, PC) pairs (how `--symbol` is applied after a first pass).
    pub pcs: Option<HashSet<(Option<u32>, u64)>>,
    /// Only samples taken while a phase of this name was open on their thread (`--phase`).
    pub phase: Option<PhaseFilter>,
}

/// `--phase NAME`: the name and the recording's phases.
#[derive(Clone, Debug)]
pub struct PhaseFilter {
    pub name: String,
    pub index: Arc<PhaseIndex>,
}

impl Filter {
    /// Human-readable description, for the report header.
    pub fn describe(&self) -> Vec<String> {
        let mut v = Vec::new();
        let list = |x: &[u32]| {
            x.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        if !self.pids.is_empty() {
            v.push(format!("pid {}", list(&self.pids)));
        }
        if !self.tids.is_empty() {
            v.push(format!("tid {}", list(&self.tids)));
        }
        if !self.cpus.is_empty() {
            v.push(format!("cpu {}", list(&self.cpus)));
        }
        if let Some((a, b)) = self.time_range_s {
            v.push(format!("time {a}s..{b}s"));
        }
        if let Some((a, b)) = self.pc_range {
            v.push(format!("pc {a:#x}..{b:#x}"));
        }
        if let Some(e) = self.event {
            v.push(format!("event {}", e.name()));
        }
        if let Some(p) = &self.phase {
            v.push(format!("phase {}", p.name));
        }
        v
    }

    /// Whether sample `s` (an operation of `kind`, a load served by `ds`, at `pc`) is selected.
    /// `first_time_ns` is the time of the recording's first decoded sample (time ranges are
    /// relative to it).
    pub fn accepts(
        &self,
        s: &SpeSample,
        kind: OpKind,
        ds: Option<DataSource>,
        pc: Option<u64>,
        first_time_ns: Option<u64>,
    ) -> bool {
        let in_list =
            |list: &[u32], v: Option<u32>| list.is_empty() || v.is_some_and(|v| list.contains(&v));
        if !in_list(&self.pids, s.pid) || !in_list(&self.tids, s.tid) || !in_list(&self.cpus, s.cpu)
        {
            return false;
        }
        if let Some((a, b)) = self.time_range_s {
            let (Some(t), Some(t0)) = (s.time_ns, first_time_ns) else {
                return false;
            };
            let rel = t.saturating_sub(t0) as f64 * 1e-9;
            if rel < a || rel >= b {
                return false;
            }
        }
        if let Some((a, b)) = self.pc_range {
            if !pc.is_some_and(|p| a <= p && p < b) {
                return false;
            }
        }
        if let Some(set) = &self.pcs {
            if !pc.is_some_and(|p| set.contains(&(s.pid, p))) {
                return false;
            }
        }
        if let Some(ph) = &self.phase {
            if !ph.index.in_phase(&ph.name, s.tid, s.time_ns) {
                return false;
            }
        }
        self.event.is_none_or(|e| e.accepts(s, kind, ds))
    }
}

/// How big the tables and the timeline get.
#[derive(Clone, Copy, Debug)]
pub struct ReportLimits {
    pub hotspot_rows: usize,
    pub object_rows: usize,
    pub timeline_points: usize,
    /// Bucket width of the latency histograms (cycles).
    pub histogram_bucket: u16,
    /// Phase instances listed for the timeline's bands.
    pub phase_spans: usize,
    /// Objects with an address-over-time view (the first of `objects`; docs/report.md).
    pub object_timelines: usize,
}

impl Default for ReportLimits {
    fn default() -> Self {
        ReportLimits {
            hotspot_rows: 50,
            object_rows: 50,
            timeline_points: 20_000,
            histogram_bucket: 10,
            phase_spans: 5_000,
            object_timelines: crate::object_timelines::DEFAULT_OBJECTS,
        }
    }
}

/// Key of an object aggregate: the object's identity (pointer) within the shared table.
type ObjKey = usize;

/// A memory access offered to the timeline (before objects are numbered).
#[derive(Clone, Copy, Debug)]
pub struct RawPoint {
    time_ns: u64,
    address: u64,
    object: Option<ObjKey>,
    store: bool,
    source: Option<DataSource>,
    total_latency: Option<u16>,
}

/// What the time-ordered part of a profile needs from one sample, once [`ProfileShard::add`]
/// has aggregated it: its time (the report's first time is that of the first timed sample in
/// decode order) and, for a selected memory access with an address and a time, the point
/// offered to the timeline's reservoir (which samples a reservoir keeps depends on their
/// order). Small, as it is what the time-ordered merge of a parallel decode moves.
#[derive(Clone, Copy, Debug)]
pub enum OrderedSample {
    Untimed,
    Timed(u64),
    Point(RawPoint),
}

/// Source-line aggregates: (function, file, line) -> (a location of it, counts).
type LineAggs = HashMap<(String, Option<Arc<str>>, Option<u32>), (Arc<CodeLocation>, Agg)>;

/// The order-independent part of a profile: counts, sums, exact latency distributions and
/// the last time, per PC, object, data source, thread, CPU and phase. Adding a set of samples
/// to one shard or splitting it across shards merged with [`ProfileShard::merge`] gives the
/// same figures, so each decode worker can aggregate its own stream (see
/// [`ProfileBuilder::shard`]). What depends on sample order is [`ProfileBuilder`]'s.
pub struct ProfileShard<'a> {
    interp: &'a Interpretation,
    objects: &'a DataObjects,
    filter: Arc<Filter>,
    phases: Arc<PhaseIndex>,
    /// The recording's first sample time, for `--time-range` (see [`ProfileBuilder::shard`]).
    first_time_ns: Option<u64>,
    last_time_ns: Option<u64>,
    decoded: u64,
    /// Loads and stores among all decoded samples (for eq. 1 accuracy).
    memory_decoded: u64,
    totals: Agg,
    per_pc: KeyedAggs<(Option<u32>, u64)>,
    per_object: FastMap<ObjKey, (Arc<DataObject>, Agg)>,
    per_source: Vec<(DataSource, Agg)>,
    per_thread: FastMap<(Option<u32>, Option<u32>), u64>,
    per_cpu: FastMap<Option<u32>, u64>,
    per_phase: FastMap<Arc<str>, Agg>,
    /// Accesses per page, for the footprint's access distribution.
    regions: RegionCounts,
}

impl<'a> ProfileShard<'a> {
    /// A shard with nothing added yet.
    fn empty(
        interp: &'a Interpretation,
        objects: &'a DataObjects,
        filter: Arc<Filter>,
        phases: Arc<PhaseIndex>,
        first_time_ns: Option<u64>,
    ) -> Self {
        ProfileShard {
            interp,
            objects,
            filter,
            phases,
            first_time_ns,
            last_time_ns: None,
            decoded: 0,
            memory_decoded: 0,
            totals: Agg::default(),
            per_pc: KeyedAggs::default(),
            per_object: FastMap::default(),
            per_source: Vec::new(),
            per_thread: FastMap::default(),
            per_cpu: FastMap::default(),
            per_phase: FastMap::default(),
            regions: RegionCounts::default(),
        }
    }

    /// Aggregates one decoded sample; returns what the time-ordered part needs of it.
    pub fn add(&mut self, s: &SpeSample) -> OrderedSample {
        self.decoded += 1;
        let timed = match s.time_ns {
            Some(t) => {
                self.last_time_ns = Some(self.last_time_ns.map_or(t, |l| l.max(t)));
                OrderedSample::Timed(t)
            }
            None => OrderedSample::Untimed,
        };
        let r = &s.record;
        let kind = OpKind::of(r);
        let ds = match kind {
            OpKind::Load => self
                .interp
                .for_cpu(s.cpu)
                .data_source
                .resolve(r.data_source, r.events)
                .map(|(d, _)| d),
            _ => None,
        };
        let pc = r.pc.map(|p| p.va());
        if matches!(kind, OpKind::Load | OpKind::Store) {
            self.memory_decoded += 1;
        }
        if !self.filter.accepts(s, kind, ds, pc, self.first_time_ns) {
            return timed;
        }
        self.totals.add(r, kind, ds);
        if !self.phases.is_empty() {
            for p in self.phases.open_at(s.tid, s.time_ns) {
                match self.per_phase.get_mut(&p.name) {
                    Some(a) => a.add(r, kind, ds),
                    None => {
                        let mut a = Agg::default();
                        a.add(r, kind, ds);
                        self.per_phase.insert(p.name.clone(), a);
                    }
                }
            }
        }
        if let Some(pc) = pc {
            self.per_pc.entry((s.pid, pc)).add(r, kind, ds);
        }
        if let Some(d) = ds {
            match self.per_source.iter_mut().find(|(x, _)| *x == d) {
                Some((_, a)) => a.add(r, kind, ds),
                None => {
                    let mut a = Agg::with_components();
                    a.add(r, kind, ds);
                    self.per_source.push((d, a));
                }
            }
        }
        *self.per_thread.entry((s.pid, s.tid)).or_default() += 1;
        *self.per_cpu.entry(s.cpu).or_default() += 1;
        if matches!(kind, OpKind::Load | OpKind::Store) {
            if let Some(va) = r.data_va.map(|a| a.va()) {
                self.regions.add(s.pid, va);
                let obj = self.objects.resolve(s.pid, va, s.time_ns);
                let key = obj.map(|o| Arc::as_ptr(o) as usize);
                if let (Some(o), Some(k)) = (obj, key) {
                    self.per_object
                        .entry(k)
                        .or_insert_with(|| (o.clone(), Agg::default()))
                        .1
                        .add(r, kind, ds);
                }
                if let Some(t) = s.time_ns {
                    return OrderedSample::Point(RawPoint {
                        time_ns: t,
                        address: va,
                        object: key,
                        store: kind == OpKind::Store,
                        source: ds,
                        total_latency: r.total_latency_cycles,
                    });
                }
            }
        }
        timed
    }

    /// Merges shards (of the same builder) into one, pairwise in parallel: log2(n) rounds
    /// instead of n merges one after another, which on a machine with many CPUs (a shard per
    /// CPU) would undo much of what aggregating in parallel gained. The result does not depend
    /// on the order (sums; the report sorts what it lists).
    pub fn merge_all(mut shards: Vec<ProfileShard<'a>>) -> Option<ProfileShard<'a>> {
        while shards.len() > 1 {
            let odd = if shards.len() % 2 == 1 {
                shards.pop()
            } else {
                None
            };
            let mut pairs = Vec::with_capacity(shards.len() / 2);
            let mut it = shards.into_iter();
            while let (Some(a), Some(b)) = (it.next(), it.next()) {
                pairs.push((a, b));
            }
            shards = std::thread::scope(|scope| {
                let merging: Vec<_> = pairs
                    .into_iter()
                    .map(|(mut a, b)| {
                        scope.spawn(move || {
                            a.merge(b);
                            a
                        })
                    })
                    .collect();
                merging
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                    .collect()
            });
            shards.extend(odd);
        }
        shards.pop()
    }

    /// Adds the samples aggregated by `o` (a shard of the same builder) to this shard.
    pub fn merge(&mut self, o: ProfileShard<'_>) {
        fn merge_map<K: std::hash::Hash + Eq, V>(
            into: &mut FastMap<K, V>,
            from: FastMap<K, V>,
            merge: impl Fn(&mut V, V),
        ) {
            for (k, v) in from {
                match into.entry(k) {
                    Entry::Occupied(mut e) => merge(e.get_mut(), v),
                    Entry::Vacant(e) => {
                        e.insert(v);
                    }
                }
            }
        }
        self.decoded += o.decoded;
        self.memory_decoded += o.memory_decoded;
        self.last_time_ns = self.last_time_ns.max(o.last_time_ns);
        self.totals.merge(&o.totals);
        self.per_pc.merge(o.per_pc);
        merge_map(&mut self.per_object, o.per_object, |a, b| a.1.merge(&b.1));
        for (d, b) in o.per_source {
            match self.per_source.iter_mut().find(|(x, _)| *x == d) {
                Some((_, a)) => a.merge(&b),
                None => self.per_source.push((d, b)),
            }
        }
        merge_map(&mut self.per_thread, o.per_thread, |a, b| *a += b);
        merge_map(&mut self.per_cpu, o.per_cpu, |a, b| *a += b);
        merge_map(&mut self.per_phase, o.per_phase, |a, b| a.merge(&b));
        self.regions.merge(o.regions);
    }
}

/// Accumulates samples (pass 1); see the module docs.
///
/// Serially, [`ProfileBuilder::add`] takes every sample in time order. In parallel, each
/// decode worker aggregates its stream into a [`ProfileBuilder::shard`], the time-ordered
/// merge hands each sample's [`OrderedSample`] to [`ProfileBuilder::add_ordered`], and the
/// shards are merged in with [`ProfileBuilder::merge`]: the report is the same.
pub struct ProfileBuilder<'a> {
    filter: Arc<Filter>,
    limits: ReportLimits,
    first_time_ns: Option<u64>,
    /// The order-independent aggregates (all samples, or the shards merged in).
    acc: ProfileShard<'a>,
    timeline: Vec<RawPoint>,
    timeline_population: u64,
    rng: Rng,
    phases: Arc<PhaseIndex>,
    hotspot_sort: HotspotSort,
}

impl<'a> ProfileBuilder<'a> {
    pub fn new(
        interp: &'a Interpretation,
        objects: &'a DataObjects,
        filter: Filter,
        limits: ReportLimits,
    ) -> Self {
        let filter = Arc::new(filter);
        let phases = Arc::new(PhaseIndex::default());
        ProfileBuilder {
            filter: filter.clone(),
            limits,
            first_time_ns: None,
            acc: ProfileShard::empty(interp, objects, filter, phases.clone(), None),
            timeline: Vec::new(),
            timeline_population: 0,
            rng: Rng::new(0x5e1c),
            phases,
            hotspot_sort: HotspotSort::default(),
        }
    }

    /// Orders the hotspot tables by `sort` (before they are cut to their row limit).
    pub fn with_hotspot_sort(mut self, sort: HotspotSort) -> Self {
        self.hotspot_sort = sort;
        self
    }

    /// Attributes samples to the phases open on their thread (see [`crate::phases`]).
    pub fn with_phases(mut self, phases: Arc<PhaseIndex>) -> Self {
        self.acc.phases = phases.clone();
        self.phases = phases;
        self
    }

    /// Whether the filter needs the recording's first sample time (a time range is relative
    /// to it): then shards need [`ProfileBuilder::set_first_time`] first.
    pub fn needs_first_time(&self) -> bool {
        self.filter.time_range_s.is_some()
    }

    /// Sets the time of the recording's first timed sample in decode order, known before the
    /// decode (shards filter by time range with it). It must be the time the decode then
    /// hands first (checked in [`ProfileBuilder::add_ordered`]).
    pub fn set_first_time(&mut self, t: Option<u64>) {
        self.acc.first_time_ns = t;
    }

    /// An empty shard with this builder's filter and phases, for one decode worker. With a time
    /// range in the filter, the first time must have been set ([`Self::needs_first_time`], [`Self::set_first_time`]).
    pub fn shard(&self) -> ProfileShard<'a> {
        let a = &self.acc;
        ProfileShard::empty(
            a.interp,
            a.objects,
            a.filter.clone(),
            a.phases.clone(),
            a.first_time_ns,
        )
    }

    /// Merges a shard (made by [`Self::shard`]) of this builder: in any order, they are sums.
    pub fn merge(&mut self, shard: ProfileShard<'a>) {
        if self.acc.decoded == 0 {
            // Nothing added here yet: the shard, made with the same filter, phases and first
            // time, becomes the aggregates as it is (merging it into empty tables would copy
            // every per-PC aggregate, a measurable part of the report's time).
            self.acc = shard;
        } else {
            self.acc.merge(shard);
        }
    }

    /// Adds one decoded sample (samples arrive in time order).
    pub fn add(&mut self, s: &SpeSample) {
        if let Some(t) = s.time_ns {
            // The time range filter is relative to the first sample, this one included.
            self.acc.first_time_ns.get_or_insert(t);
        }
        let o = self.acc.add(s);
        self.add_ordered(&o);
    }

    /// The time-ordered part of one sample (samples arrive in time order): the first time and
    /// the timeline's reservoir.
    pub fn add_ordered(&mut self, o: &OrderedSample) {
        let point = match *o {
            OrderedSample::Untimed => return,
            OrderedSample::Timed(t) => {
                self.note_time(t);
                return;
            }
            OrderedSample::Point(p) => {
                self.note_time(p.time_ns);
                p
            }
        };
        // Reservoir sampling (algorithm R): a uniform sample of the population.
        self.timeline_population += 1;
        if self.timeline.len() < self.limits.timeline_points {
            self.timeline.push(point);
        } else {
            let j = self.rng.below(self.timeline_population);
            if (j as usize) < self.timeline.len() {
                self.timeline[j as usize] = point;
            }
        }
    }

    fn note_time(&mut self, t: u64) {
        if self.first_time_ns.is_none() {
            self.first_time_ns = Some(t);
            // Shards filtered time ranges with the first time given before the decode: it
            // must be this one (checked once per report).
            assert_eq!(
                self.acc.first_time_ns.unwrap_or(t),
                t,
                "the first time given to the shards is not the decode's first"
            );
        }
    }

    /// The unique PCs seen so far (for `--symbol`: symbolize, then filter in a second pass).
    pub fn pcs(&self) -> impl Iterator<Item = (Option<u32>, u64)> + '_ {
        self.acc.per_pc.iter().map(|(k, _)| *k)
    }

    /// Symbolizes the unique PCs and assembles the report.
    pub fn finish(
        self,
        spaces: &AddressSpaces,
        symbolizer: &mut CodeSymbolizer,
        thread_names: &HashMap<u32, String>,
        mut recording: RecordingInfo,
        sidecar: Option<&Sidecar>,
    ) -> Report {
        let selected = self.acc.totals.samples;
        let total_cost = self.acc.totals.cost_sampled_cycles();
        let group = |a: &Agg| group_stats(a, selected, total_cost);
        let (phases, phase_spans) = self.phase_rows(self.first_time_ns.unwrap_or(0), &group);
        // Symbolize every unique PC in one batch, in key order: the rows made from them (e.g. the location kept for a source line
        // seen at several PCs, the order of equal rows) then do not depend on the order the
        // samples were aggregated in.
        let mut pcs: Vec<((Option<u32>, u64), &Agg)> =
            self.acc.per_pc.iter().map(|(k, a)| (*k, a)).collect();
        pcs.sort_unstable_by_key(|(k, _)| *k);
        let keys: Vec<(Option<u32>, u64)> = pcs.iter().map(|(k, _)| *k).collect();
        let locations = symbolizer.symbolize_pcs(spaces, &keys);
        let loc_of = |i: usize| locations[i].clone();

        let mut functions: HashMap<(Arc<str>, String), Agg> = HashMap::new();
        let mut lines: LineAggs = HashMap::new();
        let mut dsos: HashMap<Arc<str>, Agg> = HashMap::new();
        let mut instructions: Vec<Hotspot> = Vec::new();
        let mut mismatched: BTreeMap<Arc<str>, u64> = BTreeMap::new();
        for (i, (key, agg)) in pcs.iter().enumerate() {
            let loc = loc_of(i);
            if loc.build_id_mismatch {
                *mismatched.entry(loc.dso.clone()).or_default() += agg.samples;
            }
            let fname = loc.function_name();
            // A function's `.cold`/`.part.N` pieces count as the function (names.rs).
            functions
                .entry((loc.dso.clone(), base_name(&fname).to_string()))
                .or_default()
                .merge(agg);
            lines
                .entry((base_name(&fname).to_string(), loc.file.clone(), loc.line))
                .or_insert_with(|| (loc.clone(), Agg::default()))
                .1
                .merge(agg);
            dsos.entry(loc.dso.clone()).or_default().merge(agg);
            instructions.push(Hotspot {
                key: match loc.function_offset {
                    Some(o) => format!("{fname}+{o:#x}"),
                    None => format!("{:#x}", key.1),
                },
                dso: Some(loc.dso.to_string()),
                function: loc.function.as_ref().map(|f| f.to_string()),
                file: loc.file.as_ref().map(|f| f.to_string()),
                line: loc.line,
                address: Some(key.1),
                function_offset: loc.function_offset,
                stats: group(agg),
            });
        }
        // Sorted first, then cut: `--sort latency` keeps the slowest rows.
        let n = self.limits.hotspot_rows;
        let order = self.hotspot_sort;
        let top = |mut v: Vec<Hotspot>| {
            v.sort_by(|a, b| order.compare(a, b));
            v.truncate(n);
            v
        };
        let hotspots = Hotspots {
            functions: top(functions
                .iter()
                .map(|((dso, f), a)| Hotspot {
                    key: f.clone(),
                    dso: Some(dso.to_string()),
                    function: Some(f.clone()),
                    file: None,
                    line: None,
                    address: None,
                    function_offset: None,
                    stats: group(a),
                })
                .collect()),
            lines: top(lines
                .iter()
                .map(|((f, file, line), (loc, a))| Hotspot {
                    key: match (file, line) {
                        (Some(file), Some(line)) => format!("{}:{line}", short_name(file)),
                        _ => format!("{f} (no line info)"),
                    },
                    dso: Some(loc.dso.to_string()),
                    function: Some(f.clone()),
                    file: file.as_ref().map(|x| x.to_string()),
                    line: *line,
                    address: None,
                    function_offset: None,
                    stats: group(a),
                })
                .collect()),
            instructions: top(instructions),
            dsos: top(dsos
                .iter()
                .map(|(d, a)| Hotspot {
                    key: d.to_string(),
                    dso: Some(d.to_string()),
                    function: None,
                    file: None,
                    line: None,
                    address: None,
                    function_offset: None,
                    stats: group(a),
                })
                .collect()),
        };

        // Data sources, ordered nearest first.
        let mut per_source = self.acc.per_source;
        per_source.sort_by_key(|(d, _)| *d);
        let sourced: u64 = per_source.iter().map(|(_, a)| a.loads).sum();
        let data_sources = per_source
            .iter()
            .map(|(d, a)| DataSourceRow {
                source: d.to_string(),
                loads: a.loads,
                share: ratio(a.loads, sourced),
                total: summary(&a.load_total),
                issue: summary(&a.load_issue),
                translation: summary(&a.load_xlat),
                execution: summary(&a.load_exec),
                total_histogram: Histogram {
                    bucket_cycles: self.limits.histogram_bucket,
                    buckets: a.load_total.bucketed(self.limits.histogram_bucket),
                },
            })
            .collect();

        // Objects, most sampled first; remember each object's row for the timeline.
        let mut objs: Vec<(ObjKey, &(Arc<DataObject>, Agg))> =
            self.acc.per_object.iter().map(|(k, v)| (*k, v)).collect();
        // Ties beyond the name (objects of the same name in several processes) go by address
        // and identity, not by the order of a map the parallel aggregation merged into.
        objs.sort_by(|a, b| {
            b.1 .1
                .samples
                .cmp(&a.1 .1.samples)
                .then_with(|| a.1 .0.name.cmp(&b.1 .0.name))
                .then_with(|| a.1 .0.start.cmp(&b.1 .0.start))
                .then_with(|| a.0.cmp(&b.0))
        });
        objs.truncate(self.limits.object_rows);
        let object_index: HashMap<ObjKey, usize> =
            objs.iter().enumerate().map(|(i, (k, _))| (*k, i)).collect();
        let objects = objs
            .iter()
            .map(|(_, (o, a))| ObjectRow {
                name: o.name.to_string(),
                kind: o.kind.name().to_string(),
                dso: o.dso.as_ref().map(|d| d.to_string()),
                start: o.start,
                size: o.size(),
                stats: group(a),
            })
            .collect();

        let allocation_sites = allocation_site_rows(
            self.acc.objects,
            self.acc.per_object.values(),
            self.limits.object_rows,
            &group,
        );

        let mut threads: Vec<ThreadRow> = self
            .acc
            .per_thread
            .iter()
            .map(|((pid, tid), n)| ThreadRow {
                pid: *pid,
                tid: *tid,
                name: tid.and_then(|t| thread_names.get(&t)).cloned(),
                samples: *n,
                share: ratio(*n, selected),
            })
            .collect();
        threads.sort_by(|a, b| {
            b.samples
                .cmp(&a.samples)
                .then_with(|| a.tid.cmp(&b.tid))
                .then_with(|| a.pid.cmp(&b.pid))
        });
        let mut cpus: Vec<CpuRow> = self
            .acc
            .per_cpu
            .iter()
            .map(|(c, n)| CpuRow {
                cpu: *c,
                samples: *n,
            })
            .collect();
        cpus.sort_by_key(|c| c.cpu);

        let t0 = self.first_time_ns.unwrap_or(0);
        let mut points: Vec<TimelinePoint> = self
            .timeline
            .iter()
            .map(|p| TimelinePoint {
                t_ns: p.time_ns.saturating_sub(t0),
                address: p.address,
                object: p.object.and_then(|k| object_index.get(&k).copied()),
                store: p.store,
                source: p.source.map(|d| d.to_string()),
                total_latency: p.total_latency,
            })
            .collect();
        points.sort_by_key(|p| p.t_ns);

        recording.sampling_quality = sidecar.and_then(|sc| {
            sampling_quality(
                sc,
                self.acc.decoded,
                self.acc.memory_decoded,
                recording.sampling.as_ref(),
            )
        });
        recording.overhead = sidecar.and_then(|sc| sc.overhead.clone());
        recording.samples_decoded = self.acc.decoded;
        recording.samples_selected = selected;
        recording.first_time_ns = self.first_time_ns;
        recording.duration_ns = match (self.first_time_ns, self.acc.last_time_ns) {
            (Some(a), Some(b)) => b - a,
            _ => 0,
        };
        recording.missing_files = symbolizer.missing_files().map(String::from).collect();
        recording.unreadable_files = symbolizer
            .unreadable_files()
            .map(|(path, reason)| crate::model::UnreadableFile {
                path: path.to_string(),
                reason: reason.to_string(),
            })
            .collect();
        recording.mismatched_files = mismatched
            .into_iter()
            .map(|(dso, samples)| crate::model::MismatchedFile {
                path: dso
                    .strip_suffix(BUILD_ID_MISMATCH)
                    .unwrap_or(&dso)
                    .trim_end()
                    .to_string(),
                samples,
            })
            .collect();
        Report {
            schema: SCHEMA,
            recording,
            filter: self.filter.describe(),
            hotspot_sort: self.hotspot_sort.name(),
            totals: group(&self.acc.totals),
            hotspots,
            data_sources,
            objects,
            allocation_sites,
            threads,
            cpus,
            phases,
            phase_spans,
            timeline: Timeline {
                population: self.timeline_population,
                points,
            },
            c2c: None,
            timelines: sidecar.and_then(|sc| crate::timelines::from_sidecar(sc, true)),
            compute: sidecar.and_then(spelunk_pmu::intensity::from_sidecar),
            footprint: self.acc.regions.finish(),
            object_timelines: Vec::new(),
            advice: None,
        }
    }
}

/// One row per allocation site: every block of the site (from the runtime's log) and the
/// samples that fell in any of them while it was live. Most sampled first, then by site.
fn allocation_site_rows<'o>(
    objects: &DataObjects,
    per_object: impl Iterator<Item = &'o (Arc<DataObject>, Agg)>,
    limit: usize,
    group: &dyn Fn(&Agg) -> GroupStats,
) -> Vec<AllocationSiteRow> {
    let sites = &objects.sites;
    if sites.is_empty() {
        return Vec::new();
    }
    let mut per_site: HashMap<&str, Agg> = HashMap::new();
    for (o, a) in per_object {
        if o.kind == ObjectKind::Allocation {
            per_site.entry(&o.name).or_default().merge(a);
        }
    }
    let empty = Agg::default();
    let mut rows: Vec<AllocationSiteRow> = sites
        .iter()
        .map(|(site, b)| AllocationSiteRow {
            site: site.to_string(),
            blocks: b.blocks,
            bytes: b.bytes,
            mean_lifetime_ns: (b.freed_blocks > 0).then(|| b.freed_lifetime_ns / b.freed_blocks),
            stats: group(per_site.get(&**site).unwrap_or(&empty)),
        })
        .collect();
    rows.sort_by(|a, b| {
        b.stats
            .samples
            .cmp(&a.stats.samples)
            .then_with(|| a.site.cmp(&b.site))
    });
    rows.truncate(limit);
    rows
}

impl ProfileBuilder<'_> {
    /// One row per phase name (most samples first) and the instances for the timeline.
    fn phase_rows(
        &self,
        t0: u64,
        group: &dyn Fn(&Agg) -> GroupStats,
    ) -> (Vec<PhaseRow>, Vec<PhaseSpan>) {
        let empty = Agg::default();
        let mut rows: Vec<PhaseRow> = Vec::new();
        // Instances by name in one pass (filtering them for each name was quadratic in
        // distinct phase names).
        let mut by_name: HashMap<&str, Vec<&PhaseInstance>> = HashMap::new();
        for p in self.phases.instances() {
            by_name.entry(&*p.name).or_default().push(p);
        }
        for name in self.phases.names() {
            let inst = by_name.remove(&*name).unwrap_or_default();
            let mut tids: Vec<u32> = inst.iter().map(|p| p.tid).collect();
            tids.sort_unstable();
            tids.dedup();
            rows.push(PhaseRow {
                name: name.to_string(),
                instances: inst.len() as u64,
                threads: tids.len() as u64,
                duration_ns: inst.iter().map(|p| p.end_ns - p.start_ns).sum(),
                start_ns: inst
                    .iter()
                    .map(|p| p.start_ns.saturating_sub(t0))
                    .min()
                    .unwrap_or(0),
                end_ns: inst
                    .iter()
                    .map(|p| p.end_ns.saturating_sub(t0))
                    .max()
                    .unwrap_or(0),
                stats: group(self.acc.per_phase.get(&name).unwrap_or(&empty)),
            });
        }
        rows.sort_by(|a, b| {
            b.stats
                .samples
                .cmp(&a.stats.samples)
                .then_with(|| a.start_ns.cmp(&b.start_ns))
        });
        let spans = self
            .phases
            .instances()
            .iter()
            .take(self.limits.phase_spans)
            .map(|p| PhaseSpan {
                name: p.name.to_string(),
                tid: p.tid,
                depth: p.depth,
                start_ns: p.start_ns.saturating_sub(t0),
                end_ns: p.end_ns.saturating_sub(t0),
            })
            .collect();
        (rows, spans)
    }
}

/// [SPE methodology table 2.2] ratios and [NMO paper eq. 1] accuracy from the sidecar's counter totals;
/// None when it has none of the counts.
pub fn sampling_quality(
    sc: &Sidecar,
    decoded: u64,
    memory_samples: u64,
    sampling: Option<&Sampling>,
) -> Option<SamplingQuality> {
    let total = |n: &str| sc.counters.totals.get(n).copied();
    let pop = total("SAMPLE_POP");
    let feed = total("SAMPLE_FEED");
    let filtrate = total("SAMPLE_FILTRATE");
    let collision = total("SAMPLE_COLLISION");
    let mem = total("MEM_ACCESS");
    if [pop, feed, filtrate, collision, mem]
        .iter()
        .all(|v| v.is_none())
    {
        return None;
    }
    let div = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) if b > 0 => Some(a as f64 / b as f64),
        _ => None,
    };
    let interval = sampling.and_then(|s| s.effective_interval);
    let estimated = interval.map(|i| memory_samples * i);
    let accuracy = match (mem, estimated) {
        (Some(m), Some(e)) if m > 0 => Some(1.0 - (m as f64 - e as f64).abs() / m as f64),
        _ => None,
    };
    let mut notes = Vec::new();
    if let (Some(f), true) = (filtrate, decoded > 0) {
        if f != decoded {
            notes.push(format!(
                "the sampler wrote {f} records (SAMPLE_FILTRATE), the perf.data holds {decoded}"
            ));
        }
    }
    if accuracy.is_some_and(|a| a < 0.95) && sampling.is_some_and(|s| !s.jitter) {
        notes.push(
            "accuracy below 95% without jitter: a fixed interval can alias with loop lengths \
             (record with jitter, spelunk record's default)"
                .into(),
        );
    }
    Some(SamplingQuality {
        counts_from: sc.source.clone(),
        sample_pop: pop,
        sample_feed: feed,
        sample_filtrate: filtrate,
        sample_collision: collision,
        sampling_ratio: div(feed, pop),
        filter_ratio: div(filtrate, feed),
        collision_ratio: div(collision, pop),
        samples_decoded: decoded,
        mem_access: mem,
        memory_samples,
        interval,
        estimated_mem_access: estimated,
        accuracy,
        notes,
    })
}

fn ratio(n: u64, d: u64) -> f64 {
    if d == 0 {
        0.0
    } else {
        n as f64 / d as f64
    }
}

/// Exact summary of a latency distribution, or None when it is empty.
pub fn summary(s: &LatencyStats) -> Option<LatencySummary> {
    Some(LatencySummary {
        count: s.count(),
        mean: s.mean()?,
        min: s.min()?,
        p50: s.percentile(50.0)?,
        p90: s.percentile(90.0)?,
        p99: s.percentile(99.0)?,
        max: s.max()?,
    })
}

/// A group's row values; `selected` is the report's sample count (for `share`).
pub fn group_stats(a: &Agg, selected: u64, total_cost: f64) -> GroupStats {
    let mut sources: Vec<SourceCount> = a
        .sources
        .iter()
        .map(|(d, n)| SourceCount {
            source: d.to_string(),
            loads: *n,
        })
        .collect();
    sources.sort_by(|x, y| y.loads.cmp(&x.loads).then_with(|| x.source.cmp(&y.source)));
    GroupStats {
        samples: a.samples,
        share: ratio(a.samples, selected),
        cost_sampled_cycles: a.cost_sampled_cycles(),
        cost_share: if total_cost > 0.0 {
            a.cost_sampled_cycles() / total_cost
        } else {
            0.0
        },
        loads: a.loads,
        stores: a.stores,
        branches: a.branches,
        other: a.other,
        mispredicts: a.mispredicts,
        l1d_miss: a.l1d_miss,
        llc_miss: a.llc_miss,
        tlb_walk: a.tlb_walk,
        remote: a.remote,
        load_latency: summary(&a.load_total),
        load_exec_latency: summary(&a.load_exec),
        sources,
        // The cost's weights: load-to-use, as the report's cost (docs/report.md, "cost").
        load_latency_moments: crate::model::LatencyMoments {
            sum_cycles: u128::from(a.load_to_use_sum),
            sum_squares: a.load_to_use_sumsq,
        },
    }
}

/// The value named `s` (case-insensitive, trimmed) in a table of command-line names.
fn by_name<T: Copy>(table: &[(&'static str, T)], s: &str) -> Option<T> {
    table
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(s.trim()))
        .map(|(_, v)| *v)
}

/// The command-line name of `v` in such a table ("?" when absent).
fn name_of<T: PartialEq>(table: &[(&'static str, T)], v: T) -> &'static str {
    table.iter().find(|(_, t)| *t == v).map_or("?", |(n, _)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use spelunk_spe::synth::{SynthConfig, SynthStream};

    /// Samples of three CPUs merged in time order; some have no time.
    fn samples() -> Vec<SpeSample> {
        let mut v = Vec::new();
        for cpu in 0..3u32 {
            let cfg = SynthConfig {
                seed: u64::from(cpu) + 1,
                text_size: 4096,
                context: Some(100 + cpu),
                ..SynthConfig::default()
            };
            for (i, r) in SynthStream::new(cfg).take(20_000).enumerate() {
                v.push(SpeSample {
                    cpu: Some(cpu),
                    pid: Some(7),
                    tid: Some(100 + cpu),
                    time_ns: r.timestamp.filter(|_| i % 97 != 5).map(|t| t * 40),
                    record: r,
                });
            }
        }
        v.sort_by_key(|s| s.time_ns.unwrap_or(0));
        v
    }

    fn json(b: ProfileBuilder) -> String {
        let mut spaces = AddressSpaces::default();
        spaces.finish();
        let r = b.finish(
            &spaces,
            &mut CodeSymbolizer::new(None),
            &HashMap::new(),
            RecordingInfo::default(),
            None,
        );
        serde_json::to_string_pretty(&r).unwrap()
    }

    /// Aggregating each CPU's samples in its own shard, with the time-ordered part fed in
    /// order, gives the report of feeding every sample to one builder, timeline included.
    #[test]
    fn shards_merged_give_the_serial_report() {
        let interp = Interpretation::uniform(None);
        let objects = DataObjects::default();
        let limits = ReportLimits {
            timeline_points: 700,
            ..Default::default()
        };
        let samples = samples();
        let times: Vec<u64> = samples.iter().filter_map(|s| s.time_ns).collect();
        let span_s = (times[times.len() - 1] - times[0]) as f64 * 1e-9;
        let filters = [
            Filter::default(),
            Filter {
                time_range_s: Some((span_s * 0.25, span_s * 0.6)),
                ..Default::default()
            },
            Filter {
                event: Some(EventClass::Load),
                tids: vec![100, 102],
                ..Default::default()
            },
        ];
        for filter in filters {
            let mut serial = ProfileBuilder::new(&interp, &objects, filter.clone(), limits);
            for s in &samples {
                serial.add(s);
            }
            let mut parallel = ProfileBuilder::new(&interp, &objects, filter, limits);
            if parallel.needs_first_time() {
                parallel.set_first_time(Some(times[0]));
            }
            let mut shards: Vec<_> = (0..3).map(|_| parallel.shard()).collect();
            for s in &samples {
                let o = shards[s.cpu.unwrap() as usize].add(s);
                parallel.add_ordered(&o);
            }
            parallel.merge(ProfileShard::merge_all(shards).unwrap());
            let selected = serial.acc.totals.samples;
            assert!(selected > 1000 && selected < samples.len() as u64 || selected == 60_000);
            assert!(serial.timeline_population > 700);
            assert_eq!(json(serial), json(parallel));
        }
    }
}
