//! The per-group accumulator shared by every aggregation (a PC, a function, an object, a data
//! source, a thread...). Exact: counts and exact latency distributions (see [`LatencyStats`]).

use crate::fasthash::FastMap;
use crate::stats::LatencyStats;
use spelunk_spe::{DataSource, Event, SpeRecord};
use std::hash::Hash;

/// What an operation other than a load with a latency costs in the cost figures (cycles): a
/// Neoverse N1 dispatches up to 4 operations a cycle ([N1 PMU methodology] §2, the pipeline's
/// dispatch width; emulator/MODEL.md), so an operation that does not wait costs a quarter.
pub const OTHER_OP_CYCLES: f64 = 0.25;

/// What kind of operation a record sampled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    Load,
    Store,
    Branch,
    Other,
}

impl OpKind {
    pub fn of(r: &SpeRecord) -> OpKind {
        match r.op {
            Some(op) if op.is_load() => OpKind::Load,
            Some(op) if op.is_store() => OpKind::Store,
            Some(op) if op.is_branch() => OpKind::Branch,
            _ => OpKind::Other,
        }
    }
}

/// Counts and latency distributions of a group of samples.
#[derive(Clone, Debug, Default)]
pub struct Agg {
    pub samples: u64,
    pub loads: u64,
    pub stores: u64,
    pub branches: u64,
    pub other: u64,
    /// Branches with the MISPRED event.
    pub mispredicts: u64,
    /// Records with the L1D-REFILL, LLC-REFILL, TLB-REFILL (walk) and REMOTE-ACCESS events.
    pub l1d_miss: u64,
    pub llc_miss: u64,
    pub tlb_walk: u64,
    pub remote: u64,
    /// Loads: the sum of their load-to-use latency (total − issue: the cycles the load itself
    /// took once its operands were ready; docs/report.md, "cost"), and the count of loads with
    /// a total latency that it sums.
    pub load_to_use_sum: u64,
    /// Σ load-to-use² (cycles²), for the sampling error of a cost (`spelunk diff`).
    pub load_to_use_sumsq: u128,
    /// Loads: total latency and derived execution latency (cycles), exact distributions.
    pub load_total: LatencyStats,
    pub load_exec: LatencyStats,
    /// Loads: issue and translation latency, kept only by aggregates made with
    /// [`Agg::with_components`] (the per-data-source rows show them; hotspots do not, and
    /// skipping them halves the cost of a load).
    pub load_issue: LatencyStats,
    pub load_xlat: LatencyStats,
    pub components: bool,
    /// Loads per data source (few entries; searched linearly).
    pub sources: Vec<(DataSource, u64)>,
}

impl Agg {
    /// The group's cost in sampled cycles (docs/report.md, "cost"): the load-to-use latency of
    /// its sampled loads, plus [`OTHER_OP_CYCLES`] for every other sampled operation. Samples
    /// are taken one in N operations, so N × this estimates the cycles the group's operations
    /// took (latencies overlap: an upper bound where loads miss in parallel).
    pub fn cost_sampled_cycles(&self) -> f64 {
        let timed_loads = self.load_total.count();
        self.load_to_use_sum as f64
            + OTHER_OP_CYCLES * (self.samples - timed_loads.min(self.samples)) as f64
    }

    /// An aggregate that also keeps issue and translation latency distributions.
    pub fn with_components() -> Agg {
        Agg {
            components: true,
            ..Agg::default()
        }
    }

    pub fn add(&mut self, r: &SpeRecord, kind: OpKind, source: Option<DataSource>) {
        self.samples += 1;
        let ev = r.events.unwrap_or_default();
        match kind {
            OpKind::Load => {
                self.loads += 1;
                if let Some(t) = r.total_latency_cycles {
                    self.load_total.add(t);
                    let issue = r.issue_latency_cycles.unwrap_or(0).min(t);
                    let to_use = u64::from(t - issue);
                    self.load_to_use_sum += to_use;
                    self.load_to_use_sumsq += u128::from(to_use * to_use);
                }
                if let Some(e) = r.derived_execution_latency() {
                    self.load_exec.add(e);
                }
                if self.components {
                    if let Some(i) = r.issue_latency_cycles {
                        self.load_issue.add(i);
                    }
                    if let Some(x) = r.translation_latency_cycles {
                        self.load_xlat.add(x);
                    }
                }
                if let Some(ds) = source {
                    self.add_source(ds, 1);
                }
            }
            OpKind::Store => self.stores += 1,
            OpKind::Branch => {
                self.branches += 1;
                if ev.contains(Event::Mispredicted) {
                    self.mispredicts += 1;
                }
            }
            OpKind::Other => self.other += 1,
        }
        self.l1d_miss += u64::from(ev.contains(Event::L1dRefill));
        self.llc_miss += u64::from(ev.contains(Event::LlcMiss));
        self.tlb_walk += u64::from(ev.contains(Event::TlbWalk));
        self.remote += u64::from(ev.contains(Event::RemoteAccess));
    }

    fn add_source(&mut self, ds: DataSource, n: u64) {
        match self.sources.iter_mut().find(|(d, _)| *d == ds) {
            Some((_, c)) => *c += n,
            None => self.sources.push((ds, n)),
        }
    }

    pub fn merge(&mut self, o: &Agg) {
        self.samples += o.samples;
        self.loads += o.loads;
        self.stores += o.stores;
        self.branches += o.branches;
        self.other += o.other;
        self.mispredicts += o.mispredicts;
        self.l1d_miss += o.l1d_miss;
        self.llc_miss += o.llc_miss;
        self.tlb_walk += o.tlb_walk;
        self.remote += o.remote;
        self.load_to_use_sum += o.load_to_use_sum;
        self.load_to_use_sumsq += o.load_to_use_sumsq;
        self.load_total.merge(&o.load_total);
        self.load_exec.merge(&o.load_exec);
        self.load_issue.merge(&o.load_issue);
        self.load_xlat.merge(&o.load_xlat);
        for (d, n) in &o.sources {
            self.add_source(*d, *n);
        }
    }
}

/// Aggregates by key: the aggregates in a vector, the map from key to position beside it.
/// Why not a map of aggregates: an [`Agg`] is a few hundred bytes, so a map holding them
/// inline is tens of MB for a recording's unique PCs and every lookup misses the cache; the
/// map of positions is a tenth of that.
#[derive(Clone, Debug)]
pub struct KeyedAggs<K> {
    index: FastMap<K, usize>,
    aggs: Vec<(K, Agg)>,
}

impl<K> Default for KeyedAggs<K> {
    fn default() -> Self {
        KeyedAggs {
            index: FastMap::default(),
            aggs: Vec::new(),
        }
    }
}

impl<K: Copy + Eq + Hash> KeyedAggs<K> {
    /// The aggregate of `key` (a new empty one if it had none).
    #[inline]
    pub fn entry(&mut self, key: K) -> &mut Agg {
        let aggs = &mut self.aggs;
        let i = *self.index.entry(key).or_insert_with(|| {
            aggs.push((key, Agg::default()));
            aggs.len() - 1
        });
        &mut aggs[i].1
    }

    pub fn get(&self, key: &K) -> Option<&Agg> {
        self.index.get(key).map(|i| &self.aggs[*i].1)
    }

    /// Adds every aggregate of `o` to this one's of the same key.
    pub fn merge(&mut self, o: KeyedAggs<K>) {
        for (k, a) in o.aggs {
            match self.index.get(&k) {
                Some(i) => self.aggs[*i].1.merge(&a),
                None => {
                    self.index.insert(k, self.aggs.len());
                    self.aggs.push((k, a));
                }
            }
        }
    }

    /// The keys and their aggregates, in order of first appearance.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &Agg)> + '_ {
        self.aggs.iter().map(|(k, a)| (k, a))
    }

    pub fn len(&self) -> usize {
        self.aggs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.aggs.is_empty()
    }
}
