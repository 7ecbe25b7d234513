//! The cumulative access distribution over the footprint: what fraction of the touched memory
//! receives what fraction of the sampled accesses — the question memory tiering asks (which
//! part of the data must sit in the fast tier, HBM or local DRAM, and which can live in the
//! slow one). [NMO paper §I, §III-A "Memory Region Profiling"] motivates it ("which objects are
//! seldom read throughout the whole execution?", HBM for bandwidth-sensitive data); the paper
//! plots no such curve, so the definition is spelunk's own (docs/report.md, "Access
//! distribution over the footprint").
//!
//! Every selected load and store with a data address counts one access to the fixed-size
//! region (page) holding its address, per process. The regions sorted by accesses, most first,
//! give the curve: after the k hottest regions, k × region size as a fraction of the touched
//! footprint against their accesses as a fraction of all.
//!
//! Memory: one map entry (about 32 bytes with the table's overhead) per distinct (process,
//! region) sampled, so at most one per sampled access and never more than the touched
//! footprint / region size; a 16 GiB footprint sampled in every 4 KiB page needs ~128 MiB.
//! Adding and merging are sums, so each decode worker keeps its own [`RegionCounts`].

use crate::fasthash::FastMap;
use serde::Serialize;
use std::collections::hash_map::Entry;

/// The region size: the base page size of Linux on Arm64 and x86-64 servers (4 KiB). A
/// perf.data does not record the page size, so the report does not follow it (a 64 KiB-page
/// kernel's pages are 16 of these regions).
pub const REGION_BYTES: u64 = 4096;

/// Shares of the accesses whose footprint the report gives ([`Footprint::key_points`]).
pub const ACCESS_PERCENTS: [u32; 4] = [50, 80, 90, 99];

/// Most points of [`Footprint::curve`] besides its origin: enough for a plot, small in JSON.
pub const CURVE_SEGMENTS: u64 = 200;

/// Sampled accesses per (process, region): the order-independent part of the footprint.
///
/// Consecutive accesses to one region (a loop over an array) are counted in `run` and enter
/// the map once per run, so the map (beyond the caches when the footprint is large) is touched
/// once per change of region rather than once per access.
#[derive(Clone, Debug, Default)]
pub struct RegionCounts {
    counts: FastMap<(Option<u32>, u64), u64>,
    /// The region of the latest accesses and how many there were since it changed.
    run: Option<((Option<u32>, u64), u64)>,
}

impl RegionCounts {
    /// One sampled access of process `pid` at virtual address `va`.
    #[inline]
    pub fn add(&mut self, pid: Option<u32>, va: u64) {
        let key = (pid, va / REGION_BYTES);
        match &mut self.run {
            Some((k, n)) if *k == key => *n += 1,
            run => {
                if let Some((k, n)) = run.replace((key, 1)) {
                    *self.counts.entry(k).or_default() += n;
                }
            }
        }
    }

    /// The pending run into the map.
    fn settle(&mut self) {
        if let Some((k, n)) = self.run.take() {
            *self.counts.entry(k).or_default() += n;
        }
    }

    /// Adds the accesses counted by `o`.
    pub fn merge(&mut self, mut o: RegionCounts) {
        self.settle();
        o.settle();
        if self.counts.is_empty() {
            self.counts = o.counts;
            return;
        }
        for (k, n) in o.counts {
            match self.counts.entry(k) {
                Entry::Occupied(mut e) => *e.get_mut() += n,
                Entry::Vacant(e) => {
                    e.insert(n);
                }
            }
        }
    }

    /// The distribution; None when no access was counted (nothing to distribute).
    pub fn finish(mut self) -> Option<Footprint> {
        self.settle();
        let mut counts: Vec<u64> = self.counts.into_values().collect();
        counts.sort_unstable_by(|a, b| b.cmp(a));
        distribution(&counts)
    }
}

/// The footprint holding a share of the sampled accesses: the fewest hottest regions whose
/// accesses reach `access_percent` % of all.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FootprintKeyPoint {
    pub access_percent: u32,
    /// k: the fewest regions, hottest first, with accesses ≥ access_percent % of all.
    pub regions: u64,
    /// k × region_bytes.
    pub bytes: u64,
    /// k / touched regions.
    pub footprint_fraction: f64,
    /// Accesses of those k regions (≥ the share asked for).
    pub accesses: u64,
}

/// One point of the cumulative curve: the k hottest regions.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FootprintCurvePoint {
    /// k.
    pub regions: u64,
    /// k / touched regions.
    pub footprint_fraction: f64,
    /// Accesses of the k hottest regions.
    pub accesses: u64,
    /// accesses / all accesses.
    pub access_fraction: f64,
}

/// The cumulative access distribution over the footprint (docs/report.md).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Footprint {
    /// The region (page) size the addresses are bucketed by.
    pub region_bytes: u64,
    /// Selected loads and stores with a data address.
    pub accesses: u64,
    /// Distinct (process, region) pairs with at least one of them.
    pub regions: u64,
    /// regions × region_bytes: the touched footprint as sampling saw it.
    pub footprint_bytes: u64,
    /// Accesses of the hottest region / all accesses.
    pub hottest_region_fraction: f64,
    /// One per [`ACCESS_PERCENTS`].
    pub key_points: Vec<FootprintKeyPoint>,
    /// From k = 0 to k = regions: every k when there are at most 200 regions, else k =
    /// ⌈i × regions / 200⌉ for i = 0..=200.
    pub curve: Vec<FootprintCurvePoint>,
}

/// The distribution of accesses per region, `counts` sorted most first.
fn distribution(counts: &[u64]) -> Option<Footprint> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let n = counts.len() as u64;
    let mut cumulative = Vec::with_capacity(counts.len() + 1);
    cumulative.push(0u64);
    for c in counts {
        cumulative.push(cumulative[cumulative.len() - 1] + c);
    }
    let fraction = |a: u64, b: u64| a as f64 / b as f64;
    let key_points = ACCESS_PERCENTS
        .iter()
        .map(|&p| {
            // The first k with cumulative[k] × 100 ≥ p × total, in integers (exact).
            let target = u128::from(p) * u128::from(total);
            let k = cumulative.partition_point(|&c| u128::from(c) * 100 < target) as u64;
            FootprintKeyPoint {
                access_percent: p,
                regions: k,
                bytes: k * REGION_BYTES,
                footprint_fraction: fraction(k, n),
                accesses: cumulative[k as usize],
            }
        })
        .collect();
    let ks: Vec<u64> = if n <= CURVE_SEGMENTS {
        (0..=n).collect()
    } else {
        (0..=CURVE_SEGMENTS)
            .map(|i| (i * n).div_ceil(CURVE_SEGMENTS))
            .collect()
    };
    let curve = ks
        .into_iter()
        .map(|k| FootprintCurvePoint {
            regions: k,
            footprint_fraction: fraction(k, n),
            accesses: cumulative[k as usize],
            access_fraction: fraction(cumulative[k as usize], total),
        })
        .collect();
    Some(Footprint {
        region_bytes: REGION_BYTES,
        accesses: total,
        regions: n,
        footprint_bytes: n * REGION_BYTES,
        hottest_region_fraction: fraction(counts[0], total),
        key_points,
        curve,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(list: &[(Option<u32>, u64, u64)]) -> RegionCounts {
        let mut r = RegionCounts::default();
        for &(pid, va, n) in list {
            for _ in 0..n {
                r.add(pid, va);
            }
        }
        r
    }

    /// Accesses in runs (a loop over one page, then the next) and interleaved page by page
    /// give the same counts, and a run still pending when shards merge is not lost.
    #[test]
    fn runs_and_interleaving_count_alike() {
        let runs = counts(&[
            (Some(1), 0x1000, 5),
            (Some(1), 0x2000, 3),
            (Some(2), 0x1000, 2),
        ]);
        let mut mixed = RegionCounts::default();
        for _ in 0..3 {
            mixed.add(Some(1), 0x1000);
            mixed.add(Some(1), 0x2fff);
        }
        mixed.add(Some(1), 0x1800);
        mixed.add(Some(1), 0x1001);
        let mut other = RegionCounts::default();
        other.add(Some(2), 0x1000);
        other.add(Some(2), 0x1000);
        mixed.merge(other);
        assert_eq!(runs.finish(), mixed.finish());
        // 5 of 10 accesses in the hottest page
        let f = counts(&[
            (Some(1), 0x1000, 5),
            (Some(1), 0x2000, 3),
            (Some(2), 0x1000, 2),
        ])
        .finish()
        .unwrap();
        assert_eq!(f.key_points[0].regions, 1);
    }

    /// Four pages with 60, 25, 10 and 5 accesses: 50 % in the first page, 80 % in two
    /// (85), 90 % in three (95), 99 % in all four (100).
    #[test]
    fn key_points_of_four_pages() {
        let r = counts(&[
            (Some(1), 0x1_0000 + 5, 30),
            (Some(1), 0x1_0000 + 4000, 30), // same page
            (Some(1), 0x2_0000, 25),
            (Some(2), 0x2_0000, 10), // same address, other process: another region
            (Some(1), 0x9_0fff, 5),
        ]);
        let f = r.finish().unwrap();
        assert_eq!((f.accesses, f.regions, f.footprint_bytes), (100, 4, 16384));
        assert_eq!(f.hottest_region_fraction, 0.6);
        let k: Vec<(u32, u64, u64, u64)> = f
            .key_points
            .iter()
            .map(|p| (p.access_percent, p.regions, p.bytes, p.accesses))
            .collect();
        assert_eq!(
            k,
            vec![
                (50, 1, 4096, 60),
                (80, 2, 8192, 85),
                (90, 3, 12288, 95),
                (99, 4, 16384, 100)
            ]
        );
        assert_eq!(f.key_points[1].footprint_fraction, 0.5);
        let curve: Vec<(u64, u64)> = f.curve.iter().map(|p| (p.regions, p.accesses)).collect();
        assert_eq!(curve, vec![(0, 0), (1, 60), (2, 85), (3, 95), (4, 100)]);
        assert_eq!(f.curve[2].access_fraction, 0.85);
        assert_eq!(f.curve[2].footprint_fraction, 0.5);
    }

    /// A share reached exactly counts (≥): two equal pages hold 50 % in one page.
    #[test]
    fn an_exact_share_is_reached() {
        let f = counts(&[(None, 0, 1), (None, 4096, 1)]).finish().unwrap();
        assert_eq!(f.key_points[0].regions, 1);
        assert_eq!(f.key_points[3].regions, 2);
    }

    /// 1000 pages with one access each: the curve keeps k = 0, 5, 10, ..., 1000 (201 points)
    /// and is the diagonal.
    #[test]
    fn the_curve_of_many_regions_is_downsampled() {
        let mut r = RegionCounts::default();
        for page in 0..1000u64 {
            r.add(Some(7), page * REGION_BYTES);
        }
        let f = r.finish().unwrap();
        assert_eq!(f.curve.len(), 201);
        assert!(f
            .curve
            .iter()
            .enumerate()
            .all(|(i, p)| p.regions == 5 * i as u64 && p.accesses == p.regions));
        // 99 % of 1000 accesses: 990 pages.
        assert_eq!(f.key_points[3].regions, 990);
    }

    /// Merging splits of the same accesses gives the same distribution.
    #[test]
    fn merging_is_adding() {
        let mut a = counts(&[(Some(1), 0, 3), (Some(1), 8192, 1)]);
        a.merge(counts(&[(Some(1), 0, 2), (Some(1), 1 << 20, 4)]));
        let whole = counts(&[(Some(1), 0, 5), (Some(1), 8192, 1), (Some(1), 1 << 20, 4)]);
        assert_eq!(a.finish(), whole.finish());
    }

    #[test]
    fn no_access_no_distribution() {
        assert_eq!(RegionCounts::default().finish(), None);
    }
}
