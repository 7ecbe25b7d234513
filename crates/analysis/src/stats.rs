//! Exact latency statistics. SPE latencies are 16-bit cycle counts, so a group keeps a count per
//! distinct value (typically a few hundred) and every statistic is exact, not approximated.
//!
//! Percentiles use the nearest-rank definition: the p-th percentile is the smallest value `v`
//! such that at least p % of the samples are ≤ `v` (docs/methodology/statistics.md).

use crate::fasthash::FastMap;
use std::collections::HashMap;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatencyStats {
    counts: FastMap<u16, u64>,
    n: u64,
    sum: u128,
}

impl LatencyStats {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, cycles: u16) {
        *self.counts.entry(cycles).or_default() += 1;
        self.n += 1;
        self.sum += u128::from(cycles);
    }

    pub fn merge(&mut self, o: &LatencyStats) {
        for (v, c) in &o.counts {
            *self.counts.entry(*v).or_default() += c;
        }
        self.n += o.n;
        self.sum += o.sum;
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum as f64 / self.n as f64)
    }

    pub fn min(&self) -> Option<u16> {
        self.counts.keys().min().copied()
    }

    pub fn max(&self) -> Option<u16> {
        self.counts.keys().max().copied()
    }

    /// Sorted (value, count) pairs: the exact histogram.
    pub fn histogram(&self) -> Vec<(u16, u64)> {
        let mut v: Vec<(u16, u64)> = self.counts.iter().map(|(a, b)| (*a, *b)).collect();
        v.sort_unstable();
        v
    }

    /// Nearest-rank percentile, `p` in (0, 100].
    pub fn percentile(&self, p: f64) -> Option<u16> {
        if self.n == 0 || !(p > 0.0 && p <= 100.0) {
            return None;
        }
        let rank = ((p / 100.0) * self.n as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (v, c) in self.histogram() {
            seen += c;
            if seen >= rank {
                return Some(v);
            }
        }
        self.max()
    }

    /// Counts in buckets of `width` cycles: (bucket start, count), ascending, empty buckets omitted.
    pub fn bucketed(&self, width: u16) -> Vec<(u16, u64)> {
        let w = width.max(1);
        let mut b: HashMap<u16, u64> = HashMap::new();
        for (v, c) in &self.counts {
            *b.entry(v / w * w).or_default() += c;
        }
        let mut v: Vec<_> = b.into_iter().collect();
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles_by_hand() {
        let mut s = LatencyStats::new();
        for v in [15u16, 20, 35, 40, 50] {
            s.add(v);
        }
        // Nearest rank: p30 -> rank ceil(1.5)=2 -> 20; p40 -> rank 2 -> 20; p50 -> rank 3 -> 35.
        assert_eq!(s.percentile(30.0), Some(20));
        assert_eq!(s.percentile(40.0), Some(20));
        assert_eq!(s.percentile(50.0), Some(35));
        assert_eq!(s.percentile(100.0), Some(50));
        assert_eq!(s.percentile(1.0), Some(15));
        assert_eq!(s.mean(), Some(32.0));
        assert_eq!((s.min(), s.max(), s.count()), (Some(15), Some(50), 5));
        assert_eq!(s.bucketed(20), vec![(0, 1), (20, 2), (40, 2)]);
        assert_eq!(LatencyStats::new().percentile(50.0), None);
    }
}
