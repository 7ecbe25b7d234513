//! Time to phase: which phases (named with `spelunk_phase_begin/end`, recorded in the sidecar)
//! were open on a sample's thread when it was taken.
//!
//! Phases are per thread and nest: on one thread, phases of the same depth never overlap, so
//! each (thread, depth) is a sorted list of disjoint intervals and a lookup is one binary search
//! per depth. A sample counts for every phase open on its thread at its time (an outer phase
//! includes the samples of the phases nested in it).

use spelunk_perf::sidecar::Phase;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// One phase instance, times in perf nanoseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhaseInstance {
    pub name: Arc<str>,
    pub pid: Option<u32>,
    pub tid: u32,
    pub depth: u16,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Phase instances indexed by thread and depth.
#[derive(Clone, Debug, Default)]
pub struct PhaseIndex {
    /// tid → per depth (ascending), instances sorted by start.
    by_thread: HashMap<u32, Vec<(u16, Vec<PhaseInstance>)>>,
    /// Every instance, in start order.
    all: Vec<PhaseInstance>,
}

impl PhaseIndex {
    pub fn new(phases: &[Phase]) -> PhaseIndex {
        let mut names: HashMap<&str, Arc<str>> = HashMap::new();
        let mut all: Vec<PhaseInstance> = phases
            .iter()
            .filter(|p| p.end_ns >= p.start_ns)
            .map(|p| PhaseInstance {
                name: names
                    .entry(p.name.as_str())
                    .or_insert_with(|| Arc::from(p.name.as_str()))
                    .clone(),
                pid: p.pid,
                tid: p.tid,
                depth: p.depth,
                start_ns: p.start_ns,
                end_ns: p.end_ns,
            })
            .collect();
        all.sort_by_key(|p| (p.start_ns, p.tid, p.depth));
        let mut by_thread: HashMap<u32, Vec<(u16, Vec<PhaseInstance>)>> = HashMap::new();
        for p in &all {
            let levels = by_thread.entry(p.tid).or_default();
            match levels.iter_mut().find(|(d, _)| *d == p.depth) {
                Some((_, v)) => v.push(p.clone()),
                None => levels.push((p.depth, vec![p.clone()])),
            }
        }
        for levels in by_thread.values_mut() {
            levels.sort_by_key(|(d, _)| *d);
        }
        PhaseIndex { by_thread, all }
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// Every instance, in start order.
    pub fn instances(&self) -> &[PhaseInstance] {
        &self.all
    }

    /// The phases open on thread `tid` at `time_ns`, outermost first. Phase ends are
    /// exclusive: a sample at the exact end time belongs to what follows. An iterator, not a
    /// list: this runs for every sample of a recording with phases.
    pub fn open_at(
        &self,
        tid: Option<u32>,
        time_ns: Option<u64>,
    ) -> impl Iterator<Item = &PhaseInstance> + '_ {
        let (levels, t): (&[(u16, Vec<PhaseInstance>)], u64) = match (tid, time_ns) {
            (Some(tid), Some(t)) => (self.by_thread.get(&tid).map_or(&[], |l| l), t),
            _ => (&[], 0),
        };
        levels.iter().filter_map(move |(_, v)| {
            let i = v.partition_point(|p| p.start_ns <= t);
            i.checked_sub(1).map(|i| &v[i]).filter(|p| t < p.end_ns)
        })
    }

    /// Whether a phase named `name` is open on `tid` at `time_ns`.
    pub fn in_phase(&self, name: &str, tid: Option<u32>, time_ns: Option<u64>) -> bool {
        self.open_at(tid, time_ns).any(|p| &*p.name == name)
    }

    /// The distinct phase names, in order of first start.
    pub fn names(&self) -> Vec<Arc<str>> {
        // A set of the names seen: `out.contains` made this quadratic in distinct names.
        let mut seen: HashSet<&str> = HashSet::new();
        let mut out: Vec<Arc<str>> = Vec::new();
        for p in &self.all {
            if seen.insert(&p.name) {
                out.push(p.name.clone());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(name: &str, tid: u32, depth: u16, a: u64, b: u64) -> Phase {
        Phase {
            name: name.into(),
            pid: Some(1),
            tid,
            depth,
            start_ns: a,
            end_ns: b,
        }
    }

    #[test]
    fn nested_phases_per_thread() {
        let idx = PhaseIndex::new(&[
            phase("outer", 7, 1, 0, 100),
            phase("inner", 7, 2, 10, 20),
            phase("inner", 7, 2, 30, 40),
            phase("other", 8, 1, 0, 50),
        ]);
        let names = |tid, t| -> Vec<String> {
            idx.open_at(Some(tid), Some(t))
                .map(|p| p.name.to_string())
                .collect()
        };
        assert_eq!(names(7, 15), ["outer", "inner"]);
        assert_eq!(names(7, 20), ["outer"], "end is exclusive");
        assert_eq!(names(7, 25), ["outer"]);
        assert_eq!(names(7, 30), ["outer", "inner"]);
        assert_eq!(names(7, 100), Vec::<String>::new());
        assert_eq!(names(8, 15), ["other"]);
        assert_eq!(names(9, 15), Vec::<String>::new());
        assert!(idx.in_phase("inner", Some(7), Some(35)));
        assert!(!idx.in_phase("inner", Some(8), Some(35)));
        assert!(idx.open_at(None, Some(1)).next().is_none());
        assert_eq!(idx.names().len(), 3);
    }
}
