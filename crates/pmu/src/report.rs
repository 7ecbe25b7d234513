//! The typed result of a `spelunk topdown` run (schema `spelunk-topdown/1` when serialized,
//! documented in docs/topdown.md) and the functions that evaluate counts into it. Rendering it
//! as a terminal tree, CSV or JSON is `spelunk_report::topdown_text`.

use crate::catalog::Catalog;
use crate::compute::{evaluate, Evaluation, Selection};
use crate::counts::{EventCount, Imported, ImportedScope, Measurement};
use crate::schedule::Schedule;
use serde::Serialize;
use std::collections::BTreeMap;

pub const SCHEMA: &str = "spelunk-topdown/1";

/// Where the counts came from.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Source {
    /// `import` or `live`.
    pub kind: String,
    /// File name and format, or the command / target that was counted.
    pub detail: String,
}

/// The CPU a scope was evaluated for.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct CpuReport {
    pub catalog: String,
    pub product: String,
    pub origin: String,
    pub slots: Option<u32>,
    /// `pmu caps/slots`, `catalog`, or `unknown`.
    pub slots_source: String,
    pub counters: Option<Counters>,
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Counters {
    pub programmable: usize,
    pub cycle_counter: bool,
    /// `probed`, `catalog` or `user`.
    pub source: String,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ScheduleReport {
    pub groups: Vec<Vec<String>>,
    pub lower_bound: usize,
    pub proven_optimal: bool,
    pub unschedulable: Vec<String>,
    /// `multiplexed` (all groups at once, kernel time-slices them) or `one run per group`.
    pub mode: String,
}

impl ScheduleReport {
    pub fn new(s: &Schedule, mode: &str) -> Self {
        ScheduleReport {
            groups: s
                .groups
                .iter()
                .map(|g| g.iter().cloned().collect())
                .collect(),
            lower_bound: s.lower_bound,
            proven_optimal: s.proven_optimal,
            unschedulable: s
                .unschedulable
                .iter()
                .map(|(m, n)| format!("{m} (needs {n} counters)"))
                .collect(),
            mode: mode.to_string(),
        }
    }
}

/// Metric values of one interval.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct IntervalReport {
    pub time_s: f64,
    pub metrics: BTreeMap<String, Option<f64>>,
    pub bottleneck: Vec<String>,
    pub warnings: usize,
}

/// A selected metric group and the metrics shown under it.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct GroupSelection {
    pub group: String,
    pub metrics: Vec<String>,
}

/// Everything about one scope (whole run, a CPU, a core type).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ScopeReport {
    pub scope: String,
    pub cpu: CpuReport,
    pub schedule: Option<ScheduleReport>,
    pub groups: Vec<GroupSelection>,
    pub totals: Evaluation,
    pub events: BTreeMap<String, EventCount>,
    pub intervals: Vec<IntervalReport>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Report {
    pub schema: &'static str,
    pub source: Source,
    pub scopes: Vec<ScopeReport>,
    pub notes: Vec<String>,
}

/// Evaluates one scope: totals and each interval.
pub fn scope_report(
    scope: &str,
    catalog: &Catalog,
    cpu: CpuReport,
    selection: &Selection,
    total: &Measurement,
    intervals: &[(f64, Measurement)],
    schedule: Option<ScheduleReport>,
) -> ScopeReport {
    let totals = evaluate(catalog, selection, total, cpu.slots);
    let intervals = intervals
        .iter()
        .map(|(t, m)| {
            let e = evaluate(catalog, selection, m, cpu.slots);
            IntervalReport {
                time_s: *t,
                metrics: e
                    .metrics
                    .iter()
                    .map(|r| (r.name.clone(), r.value))
                    .collect(),
                bottleneck: e.bottleneck_path.clone(),
                warnings: e.warnings.len(),
            }
        })
        .collect();
    ScopeReport {
        scope: scope.to_string(),
        cpu,
        schedule,
        groups: selection
            .groups
            .iter()
            .map(|(g, ms)| GroupSelection {
                group: g.clone(),
                metrics: ms.clone(),
            })
            .collect(),
        events: total.events(),
        totals,
        intervals,
    }
}

/// The CPU description for a catalog, with the slot width in force: the PMU's `caps/slots`
/// when known, else the catalog's.
pub fn cpu_report(
    catalog: &Catalog,
    pmu_slots: Option<u32>,
    counters: Option<Counters>,
    mut notes: Vec<String>,
) -> CpuReport {
    let (slots, slots_source) = match (pmu_slots, catalog.num_slots) {
        (Some(p), Some(c)) if p != c => {
            notes.push(format!(
                "the PMU reports {p} slots per cycle, the {} specification assumes {c}; using {p}",
                catalog.id
            ));
            (Some(p), "pmu caps/slots")
        }
        (Some(p), _) => (Some(p), "pmu caps/slots"),
        (None, Some(c)) => (Some(c), "catalog"),
        (None, None) => (None, "unknown"),
    };
    CpuReport {
        catalog: catalog.id.clone(),
        product: catalog.product_name.clone(),
        origin: catalog.origin.clone(),
        slots,
        slots_source: slots_source.to_string(),
        counters,
        notes,
    }
}

/// Options for a report built from an import.
pub struct ImportOptions<'a> {
    pub file: &'a str,
    /// Also report each CPU/core/socket scope of the input.
    pub per_scope: bool,
    /// Also report each annotated phase (sidecars).
    pub per_phase: bool,
    pub slots: Option<u32>,
    pub notes: Vec<String>,
}

/// A report from imported counts (`perf stat -x` output or a sidecar): one scope summed over
/// every scope of the input, plus each input scope (CPU, core, socket) when `per_scope`, plus
/// each phase when `per_phase`.
pub fn import_report(
    imported: &Imported,
    catalog: &Catalog,
    selection: &Selection,
    opts: ImportOptions<'_>,
) -> Report {
    let cpu = cpu_report(catalog, opts.slots, None, opts.notes);
    let mut scopes = Vec::new();
    let named: Vec<_> = imported.scopes.iter().filter(|s| s.id.is_some()).collect();
    let mut sum_total = Measurement::default();
    let mut sum_intervals: Vec<(f64, Measurement)> = Vec::new();
    // Interval by time, so the sum is linear in the intervals, however many.
    let mut at: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    for s in &imported.scopes {
        sum_total = sum_total.add(&s.total);
        for (t, m) in &s.intervals {
            match at.get(&t.to_bits()) {
                Some(&i) => sum_intervals[i].1 = sum_intervals[i].1.add(m),
                None => {
                    at.insert(t.to_bits(), sum_intervals.len());
                    sum_intervals.push((*t, m.clone()));
                }
            }
        }
    }
    sum_intervals.sort_by(|a, b| a.0.total_cmp(&b.0));
    let all_name = if named.is_empty() {
        "all".to_string()
    } else {
        let ids: Vec<&str> = named.iter().filter_map(|s| s.id.as_deref()).collect();
        // Named in full up to a screenful; a file of thousands of scopes gets a count.
        if ids.len() <= 16 {
            format!("all (sum of {})", ids.join(", "))
        } else {
            format!(
                "all (sum of {} scopes: {}, ..., {})",
                ids.len(),
                ids[..8].join(", "),
                ids[ids.len() - 1]
            )
        }
    };
    scopes.push(scope_report(
        &all_name,
        catalog,
        cpu.clone(),
        selection,
        &sum_total,
        &sum_intervals,
        None,
    ));
    let extra = |s: &ImportedScope| {
        let mut c = cpu.clone();
        c.notes.extend(s.notes.iter().cloned());
        scope_report(
            s.id.as_deref().unwrap_or("?"),
            catalog,
            c,
            selection,
            &s.total,
            &s.intervals,
            None,
        )
    };
    if opts.per_scope {
        scopes.extend(named.into_iter().map(extra));
    }
    let mut notes = imported.notes.clone();
    if opts.per_phase {
        scopes.extend(imported.phases.iter().map(extra));
    } else if !imported.phases.is_empty() {
        let names: Vec<&str> = imported
            .phases
            .iter()
            .filter_map(|p| p.id.as_deref())
            .map(|id| id.strip_prefix("phase ").unwrap_or(id))
            .collect();
        notes.push(format!(
            "{} annotated phase(s) ({}): --per-phase reports each",
            names.len(),
            names.join(", ")
        ));
    }
    let format = if imported.format.is_empty() {
        format!("perf stat -x{}", imported.separator)
    } else {
        imported.format.clone()
    };
    Report {
        schema: SCHEMA,
        source: Source {
            kind: "import".into(),
            detail: format!("{} ({format})", opts.file),
        },
        scopes,
        notes,
    }
}
