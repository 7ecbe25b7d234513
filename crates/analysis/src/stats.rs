//! Exact latency statistics. SPE latencies are 16-bit cycle counts, so a group keeps a count per
//! distinct value (typically a few hundred) and every statistic is exact, not approximated.
//!
//! Percentiles use the nearest-rank definition: the p-th percentile is the smallest value `v`
//! such that at least p % of the samples are ≤ `v` (docs/methodology/statistics.md).

/// Bits of a table word holding the count; the value (a u16) is in the bits above.
const COUNT_BITS: u32 = 48;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;

/// An exact latency distribution: a count per distinct value.
///
/// The counts are kept in a small open-addressing table (linear probing, at most 3/4 full) of
/// packed words, `value << 48 | count`; a count is at least 1, so 0 marks an empty slot. Why
/// not a `HashMap<u16, u64>`: every load sample updates two of these (its group's and its PC's)
/// and a report holds one or two per sampled PC per decode worker, so one 8-byte word per value
/// (a HashMap entry takes 16 bytes and a control byte) and a probe without hashing machinery
/// make the report faster and smaller. A count is limited to 2^48 - 1 per value and group
/// (10^14 samples: far beyond any recording).
///
/// The count and the sum are not kept beside the table but computed from it (Σ count,
/// Σ value × count, exactly): a sample then updates one word, and a group is 24 bytes.
#[derive(Clone, Debug, Default)]
pub struct LatencyStats {
    slots: Box<[u64]>,
    /// Occupied slots (distinct values).
    distinct: usize,
}

/// Table size of a distribution's first value (grows by doubling).
const FIRST_SLOTS: usize = 8;

/// The home slot of `value` in a table of `mask + 1` slots (a power of two): a multiplicative
/// hash, as latencies are small, clustered integers.
#[inline]
fn home(value: u16, mask: usize) -> usize {
    ((u64::from(value).wrapping_mul(0x9e37_79b9_7f4a_7c15)) >> 32) as usize & mask
}

impl PartialEq for LatencyStats {
    /// Equal distributions (whatever order their values were added in).
    fn eq(&self, o: &Self) -> bool {
        self.histogram() == o.histogram()
    }
}

impl LatencyStats {
    pub fn new() -> Self {
        Self::default()
    }

    #[inline]
    pub fn add(&mut self, cycles: u16) {
        self.add_count(cycles, 1);
    }

    /// Adds `count` (> 0) to the count of `value`.
    #[inline]
    fn add_count(&mut self, value: u16, count: u64) {
        if self.slots.is_empty() {
            self.slots = vec![0; FIRST_SLOTS].into_boxed_slice();
        }
        let mask = self.slots.len() - 1;
        let mut i = home(value, mask);
        loop {
            let w = self.slots[i];
            if w == 0 {
                self.slots[i] = u64::from(value) << COUNT_BITS | count;
                self.distinct += 1;
                if self.distinct * 4 > self.slots.len() * 3 {
                    self.grow();
                }
                return;
            }
            if (w >> COUNT_BITS) as u16 == value {
                debug_assert!((w & COUNT_MASK) + count <= COUNT_MASK, "count overflow");
                self.slots[i] = w + count;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Doubles the table.
    fn grow(&mut self) {
        let size = self.slots.len() * 2;
        let old = std::mem::replace(&mut self.slots, vec![0; size].into_boxed_slice());
        let mask = self.slots.len() - 1;
        for &w in old.iter().filter(|w| **w != 0) {
            let mut i = home((w >> COUNT_BITS) as u16, mask);
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = w;
        }
    }

    /// The (value, count) pairs, in table order.
    fn entries(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.slots
            .iter()
            .filter(|w| **w != 0)
            .map(|w| ((w >> COUNT_BITS) as u16, w & COUNT_MASK))
    }

    pub fn merge(&mut self, o: &LatencyStats) {
        for (v, c) in o.entries() {
            self.add_count(v, c);
        }
    }

    pub fn count(&self) -> u64 {
        self.entries().map(|(_, c)| c).sum()
    }

    pub fn mean(&self) -> Option<f64> {
        let n = self.count();
        (n > 0).then(|| self.sum() as f64 / n as f64)
    }

    /// Σ latency (cycles), exact.
    pub fn sum(&self) -> u128 {
        self.entries()
            .map(|(v, c)| u128::from(v) * u128::from(c))
            .sum()
    }

    /// Σ latency² (cycles²), exact: with [`LatencyStats::sum`], the sampling error of a sum of
    /// latencies (docs/methodology/statistics.md, "Cost and its sampling error").
    pub fn sum_squares(&self) -> u128 {
        self.entries()
            .map(|(v, c)| u128::from(v) * u128::from(v) * u128::from(c))
            .sum()
    }

    pub fn min(&self) -> Option<u16> {
        self.entries().map(|(v, _)| v).min()
    }

    pub fn max(&self) -> Option<u16> {
        self.entries().map(|(v, _)| v).max()
    }

    /// Sorted (value, count) pairs: the exact histogram.
    pub fn histogram(&self) -> Vec<(u16, u64)> {
        let mut v: Vec<(u16, u64)> = self.entries().collect();
        v.sort_unstable();
        v
    }

    /// Nearest-rank percentile, `p` in (0, 100].
    pub fn percentile(&self, p: f64) -> Option<u16> {
        let n = self.count();
        if n == 0 || !(p > 0.0 && p <= 100.0) {
            return None;
        }
        let rank = ((p / 100.0) * n as f64).ceil().max(1.0) as u64;
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
        let mut out: Vec<(u16, u64)> = Vec::new();
        for (v, c) in self.histogram() {
            let b = v / w * w;
            match out.last_mut() {
                Some((last, n)) if *last == b => *n += c,
                _ => out.push((b, c)),
            }
        }
        out
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
        // 15 + 20 + 35 + 40 + 50; 225 + 400 + 1225 + 1600 + 2500.
        assert_eq!((s.sum(), s.sum_squares()), (160, 5950));
        assert_eq!((s.min(), s.max(), s.count()), (Some(15), Some(50), 5));
        assert_eq!(s.bucketed(20), vec![(0, 1), (20, 2), (40, 2)]);
        assert_eq!(LatencyStats::new().percentile(50.0), None);
    }

    /// The packed table against a plain map: every value of u16 (0 and 65535 included),
    /// repeated and in two orders, split into merged parts.
    #[test]
    fn table_counts_like_a_map() {
        let values: Vec<u16> = (0..200_000u32)
            .map(|i| match i % 7 {
                0 => 0,
                1 => u16::MAX,
                _ => (i.wrapping_mul(2_654_435_761) >> 7) as u16 % 3000,
            })
            .chain(0..=u16::MAX)
            .collect();
        let mut want: std::collections::BTreeMap<u16, u64> = Default::default();
        let mut whole = LatencyStats::new();
        let (mut a, mut b) = (LatencyStats::new(), LatencyStats::new());
        for (i, v) in values.iter().enumerate() {
            *want.entry(*v).or_default() += 1;
            whole.add(*v);
            if i % 3 == 0 {
                a.add(*v)
            } else {
                b.add(*v)
            }
        }
        let mut reversed = LatencyStats::new();
        for v in values.iter().rev() {
            reversed.add(*v);
        }
        a.merge(&b);
        let want: Vec<(u16, u64)> = want.into_iter().collect();
        assert_eq!(whole.histogram(), want);
        assert_eq!(whole, a);
        assert_eq!(whole, reversed);
        assert_eq!(whole.count(), values.len() as u64);
        assert_eq!((whole.min(), whole.max()), (Some(0), Some(u16::MAX)));
    }
}
