//! The advisor's pass over the samples: per sampled PC, what its operations cost and how their
//! addresses move. Fed the selected samples in time order (by its own decode or riding on the
//! report's), bounded: a few hundred bytes per unique PC, nothing per sample.
//!
//! Address pattern: SPE samples one operation in N, so two consecutive samples of one PC on
//! one thread are m executions apart, m unknown. Their address delta is m × stride for a
//! strided walk; the gcd of two consecutive deltas is the stride unless both m share a
//! factor (61 % of pairs of random integers are coprime), and a wrap (the next row or column)
//! gives a delta off the stride. [`AddressPattern::stride_bytes`] takes the largest gcd that
//! divides most of the votes, so wraps and common factors are outvoted; the deltas' sign says
//! whether the walk is regular (one direction) or scattered.

use crate::agg::OpKind;
use crate::fasthash::FastMap;
use crate::select::Selected;
use spelunk_spe::{DataSource, Event, SpeSample};

/// A PC of a process.
pub type PcKey = (Option<u32>, u64);

/// How a PC's sampled data addresses move (module doc).
#[derive(Clone, Debug, Default)]
pub struct AddressPattern {
    /// Per thread: the last sampled address and the last delta.
    last: Vec<(Option<u32>, u64, Option<i64>)>,
    pub deltas: u64,
    /// Deltas of 0 (the same address again).
    pub zero_deltas: u64,
    pub positive_deltas: u64,
    /// gcd of two consecutive non-zero deltas -> votes (at most [`MAX_VOTES`] values).
    votes: Vec<(u64, u64)>,
    /// The same with each delta rounded to a multiple of 64 bytes: the row of a 2-D walk
    /// whose column moves a few elements between samples (see [`AddressPattern::row_bytes`]).
    row_votes: Vec<(u64, u64)>,
    /// Byte offsets within a 64-byte line the samples touched (bit i: offset i).
    pub line_offsets: u64,
    pub min_address: Option<u64>,
    pub max_address: Option<u64>,
    /// Addresses modulo a candidate stride are counted at the end (see
    /// [`AddressPattern::offsets_mod`]): a bounded sample of the addresses for that, the first
    /// [`MAX_ADDRESSES`] in time order, with their times (ns; 0 when untimed).
    pub sample_addresses: Vec<u64>,
    pub sample_times_ns: Vec<u64>,
}

const MAX_VOTES: usize = 24;
/// The slowest load-to-use counted as an L1 hit when measuring the L1 latency.
pub const L1_HIT_MAX_CYCLES: u64 = 20;
const MAX_ADDRESSES: usize = 512;

fn vote(votes: &mut Vec<(u64, u64)>, g: u64) {
    match votes.iter().position(|(v, _)| *v == g) {
        Some(i) => votes[i].1 += 1,
        None if votes.len() < MAX_VOTES => votes.push((g, 1)),
        None => {}
    }
}

/// The largest value dividing at least `quorum` of the votes.
fn largest_supported(votes: &[(u64, u64)], quorum: f64) -> Option<u64> {
    let total: u64 = votes.iter().map(|(_, n)| n).sum();
    if total == 0 {
        return None;
    }
    let mut candidates: Vec<u64> = votes.iter().map(|(g, _)| *g).filter(|g| *g > 0).collect();
    candidates.sort_unstable_by(|a, b| b.cmp(a));
    candidates.into_iter().find(|&g| {
        let support: u64 = votes
            .iter()
            .filter(|(v, _)| v % g == 0)
            .map(|(_, n)| n)
            .sum();
        support as f64 >= quorum * total as f64
    })
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl AddressPattern {
    fn add(&mut self, tid: Option<u32>, va: u64, time_ns: Option<u64>) {
        self.line_offsets |= 1u64 << (va & 63);
        self.min_address = Some(self.min_address.map_or(va, |m| m.min(va)));
        self.max_address = Some(self.max_address.map_or(va, |m| m.max(va)));
        if self.sample_addresses.len() < MAX_ADDRESSES {
            self.sample_addresses.push(va);
            self.sample_times_ns.push(time_ns.unwrap_or(0));
        }
        let slot = match self.last.iter().position(|(t, _, _)| *t == tid) {
            Some(i) => i,
            None => {
                if self.last.len() >= 64 {
                    return;
                }
                self.last.push((tid, va, None));
                return;
            }
        };
        let (_, prev, prev_delta) = self.last[slot];
        let delta = va.wrapping_sub(prev) as i64;
        self.deltas += 1;
        if delta == 0 {
            self.zero_deltas += 1;
            self.last[slot].1 = va;
            return;
        }
        if delta > 0 {
            self.positive_deltas += 1;
        }
        if let Some(p) = prev_delta {
            vote(&mut self.votes, gcd(p.unsigned_abs(), delta.unsigned_abs()));
            let round = |d: i64| (d.unsigned_abs() + 32) / 64 * 64;
            let g = gcd(round(p), round(delta));
            if g > 0 {
                vote(&mut self.row_votes, g);
            }
        }
        self.last[slot] = (tid, va, Some(delta));
    }

    /// Votes cast (pairs of consecutive non-zero deltas).
    pub fn votes(&self) -> u64 {
        self.votes.iter().map(|(_, n)| n).sum()
    }

    /// The stride in bytes: the largest gcd that divides at least `quorum` of the votes
    /// (None without votes).
    pub fn stride_bytes(&self, quorum: f64) -> Option<u64> {
        largest_supported(&self.votes, quorum)
    }

    /// The row of a 2-D walk (a column walk, a vertical stencil, a transposed store): the
    /// largest row length R of at least 1 KiB such that the deltas are, within 64 bytes,
    /// multiples of R (quorum of the rounded gcd votes) and consecutive samples stay in the
    /// same column: (address mod R) moves by at most 64 bytes between them in `continuity`
    /// of the pairs. A scattered access passes neither.
    pub fn row_bytes(&self, quorum: f64, continuity: f64) -> Option<u64> {
        let r = largest_supported(&self.row_votes, quorum).filter(|r| *r >= 1024)?;
        let a = &self.sample_addresses;
        if a.len() < 8 {
            return None;
        }
        let near = a
            .windows(2)
            .filter(|w| {
                let d = (w[1] % r).abs_diff(w[0] % r);
                d.min(r - d) <= 64
            })
            .count();
        (near as f64 >= continuity * (a.len() - 1) as f64).then_some(r)
    }

    /// Share of the non-zero deltas in the dominant direction (1: every step one way; about
    /// 0.5: scattered).
    pub fn direction_share(&self) -> Option<f64> {
        let nonzero = self.deltas - self.zero_deltas;
        (nonzero > 0).then(|| {
            let pos = self.positive_deltas as f64 / nonzero as f64;
            pos.max(1.0 - pos)
        })
    }

    /// Mostly ascending (true) or descending.
    pub fn ascending(&self) -> bool {
        2 * self.positive_deltas >= self.deltas - self.zero_deltas
    }

    /// Distinct values of (address mod `stride`) rounded down to `granule` bytes, among the
    /// kept addresses: how much of each stride the PC touches over the run.
    pub fn offsets_mod(&self, stride: u64, granule: u64) -> usize {
        if stride == 0 || granule == 0 {
            return 0;
        }
        let mut v: Vec<u64> = self
            .sample_addresses
            .iter()
            .map(|a| (a % stride) / granule)
            .collect();
        v.sort_unstable();
        v.dedup();
        v.len()
    }

    /// Where this (store) access was at `time_ns`: its address linearly interpolated between
    /// the kept samples around that time (None outside their span or without times).
    pub fn address_at(&self, time_ns: u64) -> Option<f64> {
        let t = &self.sample_times_ns;
        let i = t.partition_point(|x| *x <= time_ns);
        if i == 0 || i >= t.len() || t[i - 1] == 0 {
            return None;
        }
        let (t0, t1) = (t[i - 1], t[i]);
        let (a0, a1) = (
            self.sample_addresses[i - 1] as f64,
            self.sample_addresses[i] as f64,
        );
        if t1 == t0 {
            return Some(a0);
        }
        Some(a0 + (a1 - a0) * (time_ns - t0) as f64 / (t1 - t0) as f64)
    }

    /// Distinct byte offsets within a 64-byte line touched.
    pub fn line_offset_count(&self) -> u32 {
        self.line_offsets.count_ones()
    }
}

/// Loads per data source, with their load-to-use cycles.
#[derive(Clone, Copy, Debug)]
pub struct SourceCost {
    pub source: DataSource,
    pub loads: u64,
    pub load_to_use_sum: u64,
}

/// What one PC's sampled operations did.
#[derive(Clone, Debug, Default)]
pub struct PcAccess {
    pub samples: u64,
    pub loads: u64,
    pub stores: u64,
    pub branches: u64,
    pub mispredicts: u64,
    /// Loads and stores with these events.
    pub l1d_refill: u64,
    pub llc_miss: u64,
    pub tlb_walk: u64,
    pub misaligned: u64,
    pub remote: u64,
    /// Loads with a total latency, and sums of their latencies (cycles).
    pub timed_loads: u64,
    pub load_total_sum: u64,
    pub load_to_use_sum: u64,
    pub load_translation_sum: u64,
    /// Load-to-use of the misaligned loads, and of the loads with a TLB walk.
    pub misaligned_load_to_use_sum: u64,
    pub misaligned_timed_loads: u64,
    pub walk_translation_sum: u64,
    pub walk_timed_loads: u64,
    /// Load-to-use of the loads with a TLB walk.
    pub walk_load_to_use_sum: u64,
    pub sources: Vec<SourceCost>,
    /// Time attributed to this PC's samples: each sample is charged the time to its thread's
    /// next sample (capped), ns.
    pub time_ns: u64,
    pub pattern: AddressPattern,
    /// Threads sampled here (at most [`MAX_THREADS`]; [`PcAccess::threads`]): held inline,
    /// as the per-sample check would otherwise miss the cache on a heap block of its own.
    thread_ids: [u32; MAX_THREADS],
    thread_count: u8,
    /// The first sampled data address and its time (to resolve the data object).
    pub first_access: Option<(u64, Option<u64>)>,
    /// Times of the first and last sample (ns).
    pub first_time_ns: Option<u64>,
    pub last_time_ns: Option<u64>,
}

/// The threads a PC keeps.
const MAX_THREADS: usize = 16;

impl PcAccess {
    /// The threads sampled here (the first [`MAX_THREADS`]).
    pub fn threads(&self) -> &[u32] {
        &self.thread_ids[..usize::from(self.thread_count)]
    }

    fn add_thread(&mut self, tid: u32) {
        let n = usize::from(self.thread_count);
        if n < MAX_THREADS && !self.thread_ids[..n].contains(&tid) {
            self.thread_ids[n] = tid;
            self.thread_count += 1;
        }
    }

    pub fn mean_load_to_use(&self) -> Option<f64> {
        (self.timed_loads > 0).then(|| self.load_to_use_sum as f64 / self.timed_loads as f64)
    }

    /// Loads from `f`'s sources.
    pub fn loads_from(&self, f: impl Fn(DataSource) -> bool) -> (u64, u64) {
        self.sources
            .iter()
            .filter(|s| f(s.source))
            .fold((0, 0), |(n, c), s| (n + s.loads, c + s.load_to_use_sum))
    }

    pub fn memory_samples(&self) -> u64 {
        self.loads + self.stores
    }

    /// Share of this PC's sampled time span that `o`'s span covers (1 without times).
    pub fn time_overlap(&self, o: &PcAccess) -> f64 {
        match (
            self.first_time_ns,
            self.last_time_ns,
            o.first_time_ns,
            o.last_time_ns,
        ) {
            (Some(a), Some(b), Some(c), Some(d)) => {
                if b <= a {
                    return f64::from(u8::from(c <= a && a <= d));
                }
                b.min(d).saturating_sub(a.max(c)) as f64 / (b - a) as f64
            }
            _ => 1.0,
        }
    }
}

/// Recording-wide figures of the pass.
#[derive(Clone, Debug, Default)]
pub struct ScanTotals {
    pub samples: u64,
    pub loads: u64,
    pub stores: u64,
    pub timed_loads: u64,
    /// Sampled cost (sum of [`crate::agg::Agg::cost_sampled_cycles`]'s terms).
    pub cost_sampled_cycles: f64,
    /// Sum of the attributed times, and how many gaps were capped.
    pub time_ns: u64,
    pub capped_gaps: u64,
    /// L1D-served loads under [`L1_HIT_MAX_CYCLES`]: their count and load-to-use sum (the
    /// recording's L1 hit latency; a slower L1-served load waited for a fill in flight).
    pub l1_loads: u64,
    pub l1_load_to_use_sum: u64,
}

/// The pass: per PC, [`PcAccess`].
pub struct AccessScan {
    pub per_pc: FastMap<PcKey, PcAccess>,
    /// Per thread: the last sample's time and PC.
    last_by_thread: FastMap<(Option<u32>, Option<u32>), (u64, PcKey)>,
    /// Longest gap charged to one sample (ns): longer ones are the thread not running.
    gap_cap_ns: u64,
    pub totals: ScanTotals,
}

impl AccessScan {
    /// `gap_cap_ns`: the longest time between two samples of a thread charged to the first
    /// (the interval's operations at a DRAM miss each, say; longer gaps are sleeps).
    pub fn new(gap_cap_ns: u64) -> Self {
        AccessScan {
            per_pc: FastMap::default(),
            last_by_thread: FastMap::default(),
            gap_cap_ns: gap_cap_ns.max(1),
            totals: ScanTotals::default(),
        }
    }

    /// One selected sample (in time order).
    pub fn add(&mut self, s: &SpeSample, x: &Selected) {
        let Some(pc) = x.pc else { return };
        let key = (s.pid, pc);
        let r = &s.record;
        let ev = r.events.unwrap_or_default();
        self.totals.samples += 1;
        if let Some(t) = s.time_ns {
            if let Some((t0, prev)) = self.last_by_thread.insert((s.pid, s.tid), (t, key)) {
                let mut gap = t.saturating_sub(t0);
                if gap > self.gap_cap_ns {
                    gap = self.gap_cap_ns;
                    self.totals.capped_gaps += 1;
                }
                self.totals.time_ns += gap;
                if let Some(p) = self.per_pc.get_mut(&prev) {
                    p.time_ns += gap;
                }
            }
        }
        let p = self.per_pc.entry(key).or_default();
        p.samples += 1;
        if let Some(t) = s.time_ns {
            p.first_time_ns.get_or_insert(t);
            p.last_time_ns = Some(t);
        }
        if let Some(tid) = s.tid {
            p.add_thread(tid);
        }
        let mut cost = crate::agg::OTHER_OP_CYCLES;
        match x.kind {
            OpKind::Load | OpKind::Store => {
                if x.kind == OpKind::Load {
                    p.loads += 1;
                    self.totals.loads += 1;
                } else {
                    p.stores += 1;
                    self.totals.stores += 1;
                }
                p.l1d_refill += u64::from(ev.contains(Event::L1dRefill));
                p.llc_miss += u64::from(ev.contains(Event::LlcMiss));
                let walk = ev.contains(Event::TlbWalk);
                p.tlb_walk += u64::from(walk);
                let misaligned = ev.contains(Event::Alignment);
                p.misaligned += u64::from(misaligned);
                p.remote += u64::from(ev.contains(Event::RemoteAccess));
                if let Some(va) = r.data_va.map(|a| a.va()) {
                    p.pattern.add(s.tid, va, s.time_ns);
                    if p.first_access.is_none() {
                        p.first_access = Some((va, s.time_ns));
                    }
                }
                if x.kind == OpKind::Load {
                    if let Some(total) = r.total_latency_cycles {
                        let issue = r.issue_latency_cycles.unwrap_or(0).min(total);
                        let to_use = u64::from(total - issue);
                        cost = to_use as f64;
                        p.timed_loads += 1;
                        self.totals.timed_loads += 1;
                        p.load_total_sum += u64::from(total);
                        p.load_to_use_sum += to_use;
                        let xlat = u64::from(r.translation_latency_cycles.unwrap_or(0));
                        p.load_translation_sum += xlat;
                        if misaligned {
                            p.misaligned_timed_loads += 1;
                            p.misaligned_load_to_use_sum += to_use;
                        }
                        if walk {
                            p.walk_timed_loads += 1;
                            p.walk_translation_sum += xlat;
                            p.walk_load_to_use_sum += to_use;
                        }
                        if let Some(src) = x.source {
                            if src == DataSource::L1D && to_use < L1_HIT_MAX_CYCLES {
                                self.totals.l1_loads += 1;
                                self.totals.l1_load_to_use_sum += to_use;
                            }
                            match p.sources.iter_mut().find(|c| c.source == src) {
                                Some(c) => {
                                    c.loads += 1;
                                    c.load_to_use_sum += to_use;
                                }
                                None => p.sources.push(SourceCost {
                                    source: src,
                                    loads: 1,
                                    load_to_use_sum: to_use,
                                }),
                            }
                        }
                    }
                }
            }
            OpKind::Branch => {
                p.branches += 1;
                p.mispredicts += u64::from(ev.contains(Event::Mispredicted));
            }
            OpKind::Other => {}
        }
        self.totals.cost_sampled_cycles += cost;
    }

    /// The recording's L1 hit load-to-use latency (the mean of its L1-served loads under
    /// [`L1_HIT_MAX_CYCLES`]), when it has 10 or more.
    pub fn l1_latency_cycles(&self) -> Option<f64> {
        (self.totals.l1_loads >= 10)
            .then(|| self.totals.l1_load_to_use_sum as f64 / self.totals.l1_loads as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(addrs: &[u64]) -> AddressPattern {
        let mut p = AddressPattern::default();
        for a in addrs {
            p.add(Some(1), *a, None);
        }
        p
    }

    /// A column walk of an 8 KiB-row matrix sampled every m rows (m varying), with a wrap to
    /// the next column after every 6th sample: the stride is the row, the walk one-way.
    #[test]
    fn a_sampled_column_walk_gives_the_row_stride() {
        let row = 8192u64;
        let ms = [3u64, 5, 4, 7, 2, 9, 5, 3, 8, 6, 5, 7];
        let mut addrs = Vec::new();
        let (mut i, mut col) = (0u64, 0u64);
        for k in 0..200 {
            if k % 6 == 5 {
                col += 1;
                i = 0;
            } else {
                i += ms[k % ms.len()];
            }
            addrs.push(0x10_0000 + i * row + col * 8);
        }
        let p = walk(&addrs);
        assert_eq!(p.stride_bytes(0.5), Some(row));
        assert!(p.direction_share().unwrap() > 0.75);
        // Every 8-byte column of a row is touched over the run: many offsets mod the row.
        assert!(p.offsets_mod(row, 8) >= 30);
    }

    /// A column walk whose column is shorter than the gap between two samples of the PC
    /// (most deltas wrap to another column): the row comes from the rounded votes, and the
    /// samples stay within 64 bytes of the same column offset.
    #[test]
    fn a_column_walk_sampled_across_columns_gives_the_row() {
        let (rows, row) = (2048u64, 16384u64);
        let mut x = 7u64;
        let mut pos = 0u64; // iteration index: column-major
        let addrs: Vec<u64> = (0..300)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                pos += 900 + (x >> 33) % 600;
                let (j, i) = (pos / rows, pos % rows);
                0x7000_0000 + i * row + (j % 2048) * 8
            })
            .collect();
        let p = walk(&addrs);
        assert_eq!(p.row_bytes(0.5, 0.6), Some(row));
    }

    /// Scattered 8-byte loads: the gcd is the element, the direction a coin.
    #[test]
    fn scattered_loads_have_no_direction() {
        let mut x = 12345u64;
        let addrs: Vec<u64> = (0..400)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                0x4000_0000 + ((x >> 20) % (1 << 24)) * 8
            })
            .collect();
        let p = walk(&addrs);
        assert_eq!(p.stride_bytes(0.5), Some(8));
        assert!(p.direction_share().unwrap() < 0.6);
        assert_eq!(p.row_bytes(0.5, 0.6), None);
    }

    /// One field of 64-byte records: stride 64, one offset mod the stride.
    #[test]
    fn one_field_of_records_touches_one_offset() {
        let ms = [2u64, 3, 5, 7, 4];
        let mut i = 0;
        let addrs: Vec<u64> = (0..100)
            .map(|k| {
                i += ms[k % 5];
                0x1000 + i * 64 + 16
            })
            .collect();
        let p = walk(&addrs);
        assert_eq!(p.stride_bytes(0.5), Some(64));
        assert_eq!(p.offsets_mod(64, 8), 1);
        assert_eq!(p.line_offset_count(), 1);
    }
}
