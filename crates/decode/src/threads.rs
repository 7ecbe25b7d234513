//! Which thread ran where and when: built from scheduling sideband (context switches,
//! ITRACE_START) and process bookkeeping (COMM/FORK), queried per (cpu, time).

use std::collections::HashMap;

/// A thread starting to run on a CPU at a perf time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchIn {
    pub cpu: u32,
    pub time_ns: u64,
    pub pid: u32,
    pub tid: u32,
}

/// Per-CPU "who runs from when" plus tid → pid.
#[derive(Clone, Debug, Default)]
pub struct ThreadTimeline {
    per_cpu: HashMap<u32, Vec<(u64, u32, u32)>>,
    tid_to_pid: HashMap<u32, u32>,
}

impl ThreadTimeline {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `tid` (of `pid`) runs on `cpu` from `time_ns`. Call in any order; call
    /// [`ThreadTimeline::finish`] before querying.
    pub fn switch_in(&mut self, s: SwitchIn) {
        self.per_cpu
            .entry(s.cpu)
            .or_default()
            .push((s.time_ns, s.pid, s.tid));
        self.tid_to_pid.entry(s.tid).or_insert(s.pid);
    }

    /// Records that `tid` belongs to `pid` (COMM, FORK records).
    pub fn thread(&mut self, pid: u32, tid: u32) {
        self.tid_to_pid.insert(tid, pid);
    }

    /// Sorts the timelines (stable, so equal times keep insertion order).
    pub fn finish(&mut self) {
        for v in self.per_cpu.values_mut() {
            v.sort_by_key(|e| e.0);
        }
    }

    /// The (pid, tid) running on `cpu` at `time_ns`: the last switch-in at or before that time.
    pub fn running(&self, cpu: u32, time_ns: u64) -> Option<(u32, u32)> {
        let v = self.per_cpu.get(&cpu)?;
        let i = v.partition_point(|e| e.0 <= time_ns);
        if i == 0 {
            return None;
        }
        let (_, pid, tid) = v[i - 1];
        Some((pid, tid))
    }

    /// [`ThreadTimeline::running`] together with the time range `[lo, hi)` over which the
    /// answer stays the same (for callers that cache it).
    pub fn running_span(&self, cpu: u32, time_ns: u64) -> (Option<(u32, u32)>, u64, u64) {
        let Some(v) = self.per_cpu.get(&cpu) else {
            return (None, 0, u64::MAX);
        };
        let i = v.partition_point(|e| e.0 <= time_ns);
        let lo = if i == 0 { 0 } else { v[i - 1].0 };
        let hi = v.get(i).map_or(u64::MAX, |e| e.0);
        let r = if i == 0 {
            None
        } else {
            let (_, pid, tid) = v[i - 1];
            Some((pid, tid))
        };
        (r, lo, hi)
    }

    pub fn pid_of(&self, tid: u32) -> Option<u32> {
        self.tid_to_pid.get(&tid).copied()
    }

    pub fn is_empty(&self) -> bool {
        self.per_cpu.is_empty() && self.tid_to_pid.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_switch_in_wins() {
        let mut t = ThreadTimeline::new();
        t.switch_in(SwitchIn {
            cpu: 1,
            time_ns: 200,
            pid: 10,
            tid: 11,
        });
        t.switch_in(SwitchIn {
            cpu: 1,
            time_ns: 100,
            pid: 10,
            tid: 10,
        });
        t.switch_in(SwitchIn {
            cpu: 2,
            time_ns: 50,
            pid: 20,
            tid: 20,
        });
        t.thread(30, 31);
        t.finish();
        assert_eq!(t.running(1, 99), None);
        assert_eq!(t.running(1, 100), Some((10, 10)));
        assert_eq!(t.running(1, 199), Some((10, 10)));
        assert_eq!(t.running(1, 200), Some((10, 11)));
        assert_eq!(t.running(1, u64::MAX), Some((10, 11)));
        assert_eq!(t.running(2, 60), Some((20, 20)));
        assert_eq!(t.running(3, 60), None);
        assert_eq!(t.pid_of(31), Some(30));
        assert_eq!(t.pid_of(11), Some(10));
    }
}
