//! Event counts as measured: per counter group, with how long each counter actually counted.
//!
//! A metric is evaluated from the counts of the group its events were scheduled in, so a ratio
//! such as `L1D_CACHE_REFILL / L1D_CACHE` never mixes two time slices of a multiplexed run.
//! [`Imported`] holds such counts per scope, interval and phase, as the importers read them.

use serde::Serialize;
use std::collections::BTreeMap;

/// Whether an event produced a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CountStatus {
    Counted,
    /// Opened but never scheduled on a counter (perf's `<not counted>`).
    NotCounted,
    /// The PMU does not implement it (perf's `<not supported>`).
    NotSupported,
}

/// One event's count.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct EventCount {
    /// Count, already scaled to the whole enabled time when it was multiplexed.
    pub value: Option<f64>,
    pub status: CountStatus,
    /// time_running / time_enabled (1.0: counted all the time; None: unknown).
    pub running_fraction: Option<f64>,
    /// Enabled time in ns (or 1.0 when unknown); weights fractions when counts are summed.
    #[serde(skip)]
    pub weight: f64,
}

impl EventCount {
    pub fn counted(value: f64, running_fraction: Option<f64>) -> Self {
        EventCount {
            value: Some(value),
            status: CountStatus::Counted,
            running_fraction,
            weight: 1.0,
        }
    }

    pub fn missing(status: CountStatus) -> Self {
        EventCount {
            value: None,
            status,
            running_fraction: Some(0.0),
            weight: 1.0,
        }
    }

    /// Count from raw kernel numbers: scaled by enabled/running as perf does.
    pub fn from_raw(raw: u64, time_enabled_ns: u64, time_running_ns: u64) -> Self {
        if time_running_ns == 0 {
            return EventCount {
                weight: time_enabled_ns.max(1) as f64,
                ..EventCount::missing(CountStatus::NotCounted)
            };
        }
        let fraction = time_running_ns as f64 / time_enabled_ns.max(time_running_ns) as f64;
        EventCount {
            value: Some(raw as f64 / fraction),
            status: CountStatus::Counted,
            running_fraction: Some(fraction),
            weight: time_enabled_ns.max(1) as f64,
        }
    }

    /// Sum of two counts of the same event (two CPUs, two intervals).
    pub fn add(&self, other: &EventCount) -> EventCount {
        let value = match (self.value, other.value) {
            (Some(a), Some(b)) => Some(a + b),
            (Some(a), None) | (None, Some(a)) => Some(a),
            (None, None) => None,
        };
        let status = if value.is_some() {
            CountStatus::Counted
        } else if self.status == CountStatus::NotSupported
            || other.status == CountStatus::NotSupported
        {
            CountStatus::NotSupported
        } else {
            CountStatus::NotCounted
        };
        let w = self.weight + other.weight;
        let running_fraction = match (self.running_fraction, other.running_fraction) {
            (Some(a), Some(b)) => Some((a * self.weight + b * other.weight) / w),
            _ => None,
        };
        EventCount {
            value,
            status,
            running_fraction,
            weight: w,
        }
    }
}

/// Counts of one scope (a CPU, a core type, the whole run) over one time span.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measurement {
    /// Counter groups; each maps event name -> count.
    pub groups: Vec<BTreeMap<String, EventCount>>,
    /// Metric -> index of the group its events were counted in. Metrics not listed read
    /// each event from the first group that has it.
    pub metric_group: BTreeMap<String, usize>,
}

impl Measurement {
    /// A measurement with one group (e.g. an imported `perf stat` run).
    pub fn single(events: BTreeMap<String, EventCount>) -> Self {
        Measurement {
            groups: vec![events],
            metric_group: BTreeMap::new(),
        }
    }

    /// The count of `event` as seen by `metric`.
    pub fn get(&self, metric: &str, event: &str) -> Option<&EventCount> {
        if let Some(&g) = self.metric_group.get(metric) {
            if let Some(c) = self.groups.get(g).and_then(|g| g.get(event)) {
                return Some(c);
            }
        }
        self.first(event)
    }

    /// The first count of `event` in any group (counted ones preferred).
    pub fn first(&self, event: &str) -> Option<&EventCount> {
        self.groups
            .iter()
            .filter_map(|g| g.get(event))
            .find(|c| c.value.is_some())
            .or_else(|| self.groups.iter().find_map(|g| g.get(event)))
    }

    /// Sum of two measurements with the same group layout (groups are matched by index).
    pub fn add(&self, other: &Measurement) -> Measurement {
        let n = self.groups.len().max(other.groups.len());
        let mut groups = Vec::with_capacity(n);
        for i in 0..n {
            let mut g = self.groups.get(i).cloned().unwrap_or_default();
            if let Some(o) = other.groups.get(i) {
                for (name, c) in o {
                    let merged = match g.get(name) {
                        Some(mine) => mine.add(c),
                        None => c.clone(),
                    };
                    g.insert(name.clone(), merged);
                }
            }
            groups.push(g);
        }
        let mut metric_group = self.metric_group.clone();
        for (k, v) in &other.metric_group {
            metric_group.entry(k.clone()).or_insert(*v);
        }
        Measurement {
            groups,
            metric_group,
        }
    }

    /// Every event name with its first count, sorted by name.
    pub fn events(&self) -> BTreeMap<String, EventCount> {
        let mut out = BTreeMap::new();
        for g in &self.groups {
            for name in g.keys() {
                if !out.contains_key(name) {
                    if let Some(c) = self.first(name) {
                        out.insert(name.clone(), c.clone());
                    }
                }
            }
        }
        out
    }
}

/// Counts of an import, per scope and interval: what both importers produce (`perf stat -x`
/// output in `import`, a spelunk sidecar in `sidecar`), so neither depends on the other.
#[derive(Clone, Debug, Default)]
pub struct Imported {
    pub separator: char,
    /// What was read, for the report's source line: `perf stat -x,`, `spelunk sidecar, ...`.
    pub format: String,
    /// Scopes in order of first appearance: `None` = perf's aggregate, `Some("CPU3")` etc.
    pub scopes: Vec<ImportedScope>,
    /// Annotated phases (sidecars only), one scope per phase name (`phase triad`).
    pub phases: Vec<ImportedScope>,
    /// Notes about names that were mapped, ignored lines, duplicates.
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, Default)]
pub struct ImportedScope {
    pub id: Option<String>,
    /// Whole-run counts (the sum of the intervals when the input is an interval run).
    pub total: Measurement,
    /// (interval end time in seconds, counts of that interval); empty without `-I`.
    pub intervals: Vec<(f64, Measurement)>,
    /// What the report should say about this scope (e.g. a phase's instances).
    pub notes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_and_sums() {
        let c = EventCount::from_raw(1000, 200, 50);
        assert_eq!(c.value, Some(4000.0));
        assert_eq!(c.running_fraction, Some(0.25));
        let n = EventCount::from_raw(0, 200, 0);
        assert_eq!(n.status, CountStatus::NotCounted);
        assert_eq!(n.value, None);
        let s = c.add(&EventCount::from_raw(1000, 200, 200));
        assert_eq!(s.value, Some(5000.0));
        assert_eq!(s.running_fraction, Some(0.625));
    }
}

/// One counter reading as the counting layer delivers it (cumulative or a delta).
#[derive(Clone, Debug, PartialEq)]
pub struct RawReading {
    pub group: usize,
    pub event: String,
    pub value: u64,
    pub time_enabled_ns: u64,
    pub time_running_ns: u64,
    pub unsupported: bool,
}

impl Measurement {
    /// Builds a measurement from raw readings (several CPUs of one group are summed), scaling
    /// multiplexed counts by enabled/running as perf does.
    pub fn from_raw(
        n_groups: usize,
        readings: &[RawReading],
        metric_group: BTreeMap<String, usize>,
    ) -> Measurement {
        let mut groups: Vec<BTreeMap<String, EventCount>> = vec![BTreeMap::new(); n_groups];
        for r in readings {
            let Some(g) = groups.get_mut(r.group) else {
                continue;
            };
            let c = if r.unsupported {
                EventCount::missing(CountStatus::NotSupported)
            } else {
                EventCount::from_raw(r.value, r.time_enabled_ns, r.time_running_ns)
            };
            let merged = match g.get(&r.event) {
                Some(prev) => prev.add(&c),
                None => c,
            };
            g.insert(r.event.clone(), merged);
        }
        Measurement {
            groups,
            metric_group,
        }
    }
}

/// `later - earlier` for cumulative readings in the same order (an interval's delta).
pub fn delta(later: &[RawReading], earlier: &[RawReading]) -> Vec<RawReading> {
    later
        .iter()
        .zip(earlier.iter().chain(std::iter::repeat(&RawReading {
            group: 0,
            event: String::new(),
            value: 0,
            time_enabled_ns: 0,
            time_running_ns: 0,
            unsupported: false,
        })))
        .map(|(l, e)| RawReading {
            value: l.value.saturating_sub(e.value),
            time_enabled_ns: l.time_enabled_ns.saturating_sub(e.time_enabled_ns),
            time_running_ns: l.time_running_ns.saturating_sub(e.time_running_ns),
            ..l.clone()
        })
        .collect()
}
