//! Scheduler properties: every metric's events share one group, no group exceeds the counter
//! budget, and the number of groups is minimal whenever the scheduler claims it is (checked
//! against an independent brute force), never below the lower bound, never above one group per
//! distinct event set.

use proptest::prelude::*;
use spelunk_pmu::schedule::{schedule, Budget};
use std::collections::BTreeSet;

const NAMES: [&str; 9] = [
    "CPU_CYCLES",
    "INST_RETIRED",
    "A",
    "B",
    "C",
    "D",
    "E",
    "F",
    "G",
];

fn metrics() -> impl Strategy<Value = Vec<(String, BTreeSet<String>)>> {
    prop::collection::vec(prop::collection::btree_set(0usize..NAMES.len(), 1..5), 1..8).prop_map(
        |sets| {
            sets.into_iter()
                .enumerate()
                .map(|(i, s)| {
                    (
                        format!("m{i}"),
                        s.into_iter().map(|j| NAMES[j].to_string()).collect(),
                    )
                })
                .collect()
        },
    )
}

/// Minimum groups by trying every assignment of metrics to groups (independent of the
/// scheduler's search).
fn brute_force(ms: &[BTreeSet<String>], b: Budget) -> usize {
    let n = ms.len();
    for k in 1..=n {
        let mut assign = vec![0usize; n];
        loop {
            let mut groups = vec![BTreeSet::new(); k];
            for (m, &g) in ms.iter().zip(&assign) {
                groups[g].extend(m.iter().cloned());
            }
            if groups.iter().all(|g| b.fits(g)) {
                return k;
            }
            let mut i = 0;
            loop {
                if i == n {
                    break;
                }
                assign[i] += 1;
                if assign[i] < k {
                    break;
                }
                assign[i] = 0;
                i += 1;
            }
            if i == n {
                break;
            }
        }
    }
    n
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn schedule_properties(ms in metrics(), programmable in 1usize..6, cycle_counter in any::<bool>()) {
        let b = Budget { programmable, cycle_counter };
        let s = schedule(&ms, b);
        for g in &s.groups {
            prop_assert!(b.fits(g), "group over budget: {:?}", g);
        }
        let schedulable: Vec<BTreeSet<String>> =
            ms.iter().filter(|(_, e)| b.fits(e)).map(|(_, e)| e.clone()).collect();
        for (name, evs) in &ms {
            if b.fits(evs) {
                let g = s.metric_group.get(name);
                prop_assert!(g.is_some(), "{} unassigned", name);
                prop_assert!(evs.is_subset(&s.groups[*g.unwrap()]));
            } else {
                prop_assert!(s.unschedulable.iter().any(|(n, _)| n == name));
            }
        }
        prop_assert!(s.groups.len() >= s.lower_bound);
        let distinct: BTreeSet<&BTreeSet<String>> = schedulable.iter().collect();
        prop_assert!(s.groups.len() <= distinct.len());
        // With at most 8 metrics the exact search always finishes: the result is minimal.
        prop_assert!(s.proven_optimal);
        prop_assert_eq!(s.groups.len(), brute_force(&schedulable, b));
    }
}
