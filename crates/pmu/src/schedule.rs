//! Counter scheduling: pack each metric's events into one counter group within the PMU's budget,
//! using as few groups as possible (fewer groups = more time counted per event when the kernel
//! multiplexes them).
//!
//! Every metric gets a group holding all of its events, so its ratio is computed from counts
//! taken over the same time slices. `CPU_CYCLES` rides on the dedicated cycle counter when the
//! PMU has one free, so it does not use a programmable counter.
//!
//! Minimality: the problem (bin packing with shared items) is NP-hard in general. The scheduler
//! first removes metrics whose events are a subset of another metric's (they ride along), then
//! runs an exact branch-and-bound search when at most [`EXACT_LIMIT`] distinct event sets remain
//! and the search finishes within [`NODE_BUDGET`] steps; the result is then `proven_optimal`.
//! Otherwise it keeps the best-fit-decreasing packing, documented bound: never more groups than
//! distinct maximal event sets, never fewer than [`Schedule::lower_bound`].

use std::collections::{BTreeMap, BTreeSet};

/// Distinct maximal event sets up to which the exact search is tried.
pub const EXACT_LIMIT: usize = 16;
/// Search steps after which the exact search gives up (keeping the best packing found).
pub const NODE_BUDGET: usize = 200_000;

pub const CYCLES_EVENT: &str = "CPU_CYCLES";

/// What one counter group may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Programmable counters available to one group.
    pub programmable: usize,
    /// CPU_CYCLES can use the dedicated cycle counter.
    pub cycle_counter: bool,
}

impl Budget {
    /// Counters an event set needs.
    pub fn cost(&self, events: &BTreeSet<String>) -> usize {
        events.len() - usize::from(self.cycle_counter && events.contains(CYCLES_EVENT))
    }
    pub fn fits(&self, events: &BTreeSet<String>) -> bool {
        self.cost(events) <= self.programmable
    }
}

/// The result of scheduling.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// Event sets, one per counter group.
    pub groups: Vec<BTreeSet<String>>,
    /// Metric -> index into `groups`.
    pub metric_group: BTreeMap<String, usize>,
    /// Metrics needing more counters than one group has: they cannot be measured consistently.
    pub unschedulable: Vec<(String, usize)>,
    /// No schedule can use fewer groups than this.
    pub lower_bound: usize,
    /// The exact search finished: `groups.len()` is the minimum.
    pub proven_optimal: bool,
}

/// Schedules `metrics` (name, events) into groups.
pub fn schedule(metrics: &[(String, BTreeSet<String>)], budget: Budget) -> Schedule {
    let mut unschedulable = Vec::new();
    let mut sets: Vec<BTreeSet<String>> = Vec::new();
    for (name, evs) in metrics {
        if evs.is_empty() {
            continue;
        }
        if !budget.fits(evs) {
            unschedulable.push((name.clone(), budget.cost(evs)));
            continue;
        }
        if !sets.contains(evs) {
            sets.push(evs.clone());
        }
    }
    // Keep maximal sets only: a subset rides in its superset's group.
    let maximal: Vec<BTreeSet<String>> = sets
        .iter()
        .filter(|s| !sets.iter().any(|o| o != *s && s.is_subset(o)))
        .cloned()
        .collect();
    let mut order: Vec<usize> = (0..maximal.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(budget.cost(&maximal[i])), i));
    let sorted: Vec<&BTreeSet<String>> = order.iter().map(|&i| &maximal[i]).collect();

    let lower_bound = lower_bound(&sorted, budget);
    let mut best = best_fit(&sorted, budget);
    let mut proven = best.len() <= lower_bound;
    if !proven && sorted.len() <= EXACT_LIMIT {
        let mut search = Search {
            sets: &sorted,
            budget,
            best: best.clone(),
            nodes: 0,
            lower_bound,
        };
        let mut cur = Vec::new();
        search.run(0, &mut cur);
        proven = search.nodes < NODE_BUDGET;
        best = search.best;
    }
    let groups: Vec<BTreeSet<String>> = best;
    let mut metric_group = BTreeMap::new();
    for (name, evs) in metrics {
        if evs.is_empty() || !budget.fits(evs) {
            continue;
        }
        if let Some(g) = groups.iter().position(|g| evs.is_subset(g)) {
            metric_group.insert(name.clone(), g);
        }
    }
    Schedule {
        groups,
        metric_group,
        unschedulable,
        lower_bound,
        proven_optimal: proven,
    }
}

/// max(ceil(distinct programmable events / budget), size of a greedy set of pairwise
/// incompatible event sets). Both are valid lower bounds.
fn lower_bound(sets: &[&BTreeSet<String>], budget: Budget) -> usize {
    if sets.is_empty() {
        return 0;
    }
    let all: BTreeSet<String> = sets.iter().flat_map(|s| s.iter().cloned()).collect();
    let by_count = budget
        .cost(&all)
        .div_ceil(budget.programmable.max(1))
        .max(1);
    let mut clique: Vec<&BTreeSet<String>> = Vec::new();
    for s in sets {
        if clique.iter().all(|c| {
            let u: BTreeSet<String> = c.union(s).cloned().collect();
            !budget.fits(&u)
        }) {
            clique.push(s);
        }
    }
    by_count.max(clique.len())
}

fn best_fit(sets: &[&BTreeSet<String>], budget: Budget) -> Vec<BTreeSet<String>> {
    let mut groups: Vec<BTreeSet<String>> = Vec::new();
    for s in sets {
        let mut best: Option<(usize, usize)> = None; // (added cost, index)
        for (i, g) in groups.iter().enumerate() {
            let u: BTreeSet<String> = g.union(s).cloned().collect();
            if budget.fits(&u) {
                let added = budget.cost(&u) - budget.cost(g);
                if best.is_none_or(|(a, _)| added < a) {
                    best = Some((added, i));
                }
            }
        }
        match best {
            Some((_, i)) => groups[i].extend(s.iter().cloned()),
            None => groups.push((*s).clone()),
        }
    }
    groups
}

struct Search<'a> {
    sets: &'a [&'a BTreeSet<String>],
    budget: Budget,
    best: Vec<BTreeSet<String>>,
    nodes: usize,
    lower_bound: usize,
}

impl Search<'_> {
    fn run(&mut self, i: usize, cur: &mut Vec<BTreeSet<String>>) {
        self.nodes += 1;
        if self.nodes >= NODE_BUDGET || self.best.len() <= self.lower_bound {
            return;
        }
        if cur.len() >= self.best.len() {
            return;
        }
        if i == self.sets.len() {
            self.best = cur.clone();
            return;
        }
        let s = self.sets[i];
        for g in 0..cur.len() {
            let u: BTreeSet<String> = cur[g].union(s).cloned().collect();
            if self.budget.fits(&u) {
                let saved = std::mem::replace(&mut cur[g], u);
                self.run(i + 1, cur);
                cur[g] = saved;
            }
        }
        cur.push(s.clone());
        self.run(i + 1, cur);
        cur.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(xs: &[&str]) -> BTreeSet<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn n1_cycle_accounting_and_mpki() {
        let b = Budget {
            programmable: 6,
            cycle_counter: true,
        };
        let ms = vec![
            ("fe".to_string(), set(&["CPU_CYCLES", "STALL_FRONTEND"])),
            ("be".to_string(), set(&["CPU_CYCLES", "STALL_BACKEND"])),
            ("ipc".to_string(), set(&["CPU_CYCLES", "INST_RETIRED"])),
            (
                "l1d".to_string(),
                set(&["INST_RETIRED", "L1D_CACHE_REFILL"]),
            ),
        ];
        let s = schedule(&ms, b);
        assert_eq!(s.groups.len(), 1);
        assert!(s.proven_optimal);
        assert_eq!(s.metric_group.len(), 4);
    }

    #[test]
    fn oversized_metric_is_reported() {
        let b = Budget {
            programmable: 1,
            cycle_counter: false,
        };
        let s = schedule(&[("m".to_string(), set(&["A", "B"]))], b);
        assert!(s.groups.is_empty());
        assert_eq!(s.unschedulable, vec![("m".to_string(), 2)]);
    }
}
