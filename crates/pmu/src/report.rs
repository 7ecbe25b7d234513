//! The typed result of a `spelunk topdown` run and its renderings: a terminal tree, CSV rows and
//! JSON (schema `spelunk-topdown/1`, documented in docs/topdown.md).

use crate::catalog::Catalog;
use crate::compute::{evaluate, Evaluation, MetricResult, Selection, TreeResult, Warning};
use crate::counts::{EventCount, Measurement};
use crate::import::Imported;
use crate::schedule::Schedule;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

pub const SCHEMA: &str = "spelunk-topdown/1";

/// Where the counts came from.
#[derive(Clone, Debug, Serialize)]
pub struct Source {
    /// `import` or `live`.
    pub kind: String,
    /// File name and format, or the command / target that was counted.
    pub detail: String,
}

/// The CPU a scope was evaluated for.
#[derive(Clone, Debug, Serialize)]
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

#[derive(Clone, Debug, Serialize)]
pub struct Counters {
    pub programmable: usize,
    pub cycle_counter: bool,
    /// `probed`, `catalog` or `user`.
    pub source: String,
}

#[derive(Clone, Debug, Serialize)]
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
#[derive(Clone, Debug, Serialize)]
pub struct IntervalReport {
    pub time_s: f64,
    pub metrics: BTreeMap<String, Option<f64>>,
    pub bottleneck: Vec<String>,
    pub warnings: usize,
}

/// A selected metric group and the metrics shown under it.
#[derive(Clone, Debug, Serialize)]
pub struct GroupSelection {
    pub group: String,
    pub metrics: Vec<String>,
}

/// Everything about one scope (whole run, a CPU, a core type).
#[derive(Clone, Debug, Serialize)]
pub struct ScopeReport {
    pub scope: String,
    pub cpu: CpuReport,
    pub schedule: Option<ScheduleReport>,
    pub groups: Vec<GroupSelection>,
    pub totals: Evaluation,
    pub events: BTreeMap<String, EventCount>,
    pub intervals: Vec<IntervalReport>,
}

#[derive(Clone, Debug, Serialize)]
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
    let extra = |s: &crate::import::ImportedScope| {
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

// --- rendering --------------------------------------------------------------------------------

/// A value with a precision suited to its unit.
pub fn format_value(v: f64, units: &str) -> String {
    let a = v.abs();
    if units.starts_with("percent") {
        format!("{v:.2}")
    } else if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else if a == 0.0 {
        "0".to_string()
    } else if a >= 0.001 {
        format!("{v:.4}")
    } else {
        format!("{v:.2e}")
    }
}

fn short_units(u: &str) -> String {
    match u {
        "percent of cycles" => "% cycles".into(),
        "percent of slots" => "% slots".into(),
        "percent of operations" => "% ops".into(),
        _ => u.to_string(),
    }
}

fn threshold_text(m: &MetricResult) -> String {
    match m.threshold {
        Some(t) => {
            let op = match t.direction {
                crate::describe::Direction::Above => ">",
                crate::describe::Direction::Below => "<",
            };
            format!("{op}{}", format_value(t.value, &m.units))
        }
        None => String::new(),
    }
}

fn value_text(m: &MetricResult) -> String {
    match (m.value, &m.unavailable) {
        (Some(v), _) => format_value(v, &m.units),
        (None, _) => "n/a".into(),
    }
}

fn marks(m: &MetricResult) -> String {
    let mut s = String::new();
    if let Some(u) = &m.unavailable {
        s.push_str(&format!("  ({u})"));
    }
    if m.bottleneck {
        s.push_str("  <== bottleneck");
    } else if m.flagged {
        s.push_str("  <- high");
        if m.threshold
            .is_some_and(|t| t.direction == crate::describe::Direction::Below)
        {
            s = "  <- low".into();
        }
    }
    if m.low_confidence {
        s.push_str(&format!(
            "  [counted {:.0} % of the time]",
            m.running_fraction.unwrap_or(0.0) * 100.0
        ));
    } else if m.running_fraction.is_some_and(|f| f < 0.999) {
        s.push_str(&format!(
            "  [scaled, counted {:.0} %]",
            m.running_fraction.unwrap_or(0.0) * 100.0
        ));
    }
    s
}

fn tree_lines(out: &mut String, t: &TreeResult, metrics: &Evaluation, depth: usize) {
    let Some(m) = metrics.metric(&t.metric) else {
        return;
    };
    let indent = "  ".repeat(depth + 1);
    let name_w = 34usize.saturating_sub(indent.len());
    let _ = writeln!(
        out,
        "{indent}{:<name_w$} {:>12} {:<9} {:>7}{}",
        m.name,
        value_text(m),
        short_units(&m.units),
        threshold_text(m),
        marks(m)
    );
    for c in &t.children {
        tree_lines(out, c, metrics, depth + 1);
    }
    if m.bottleneck && !t.next_groups.is_empty() && t.children.iter().all(|c| !c.bottleneck) {
        let _ = writeln!(out, "{indent}  next: {}", t.next_groups.join(", "));
    }
}

/// The terminal rendering: per scope, stage 1 as a tree with the bottleneck marked, then the
/// other selected groups, then the interval timeline and the warnings.
pub fn render_text(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "spelunk topdown: {} {}",
        r.source.kind, r.source.detail
    );
    for s in &r.scopes {
        let c = &s.cpu;
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "== {} == {} [{}], {} slots/cycle ({}){}",
            s.scope,
            c.product,
            c.catalog,
            c.slots.map(|v| v.to_string()).unwrap_or("?".into()),
            c.slots_source,
            c.counters
                .as_ref()
                .map(|k| format!(
                    ", {} counters{} ({})",
                    k.programmable,
                    if k.cycle_counter {
                        " + cycle counter"
                    } else {
                        ""
                    },
                    k.source
                ))
                .unwrap_or_default()
        );
        for n in &c.notes {
            let _ = writeln!(out, "   note: {n}");
        }
        if let Some(sch) = &s.schedule {
            let _ = writeln!(
                out,
                "   {} counter group(s), {}{}",
                sch.groups.len(),
                sch.mode,
                if sch.proven_optimal {
                    " (minimal)".to_string()
                } else {
                    format!(" (at least {} needed)", sch.lower_bound)
                }
            );
        }
        let e = &s.totals;
        let tree_metrics: Vec<&str> = {
            let mut v = Vec::new();
            fn walk<'a>(t: &'a TreeResult, v: &mut Vec<&'a str>) {
                v.push(&t.metric);
                t.children.iter().for_each(|c| walk(c, v));
            }
            e.tree.iter().for_each(|t| walk(t, &mut v));
            v
        };
        if !e.tree.is_empty() {
            let _ = writeln!(out, "\nStage 1 (decision tree)");
            for t in &e.tree {
                tree_lines(&mut out, t, e, 0);
            }
            match e.bottleneck_path.last() {
                Some(b) => {
                    let _ = writeln!(out, "  bottleneck: {}", e.bottleneck_path.join(" > "));
                    let _ = b;
                }
                None => {
                    let _ = writeln!(out, "  no stage-1 share is over its threshold");
                }
            }
        }
        let mut header_done = false;
        for GroupSelection {
            group: g,
            metrics: ms,
        } in &s.groups
        {
            let rest: Vec<&MetricResult> = ms
                .iter()
                .filter(|m| !tree_metrics.contains(&m.as_str()))
                .filter_map(|m| e.metric(m))
                .collect();
            if rest.is_empty() {
                continue;
            }
            if !header_done {
                let _ = writeln!(out, "\nStage 2 and other groups");
                header_done = true;
            }
            let _ = writeln!(out, "  {g}");
            for m in rest {
                let _ = writeln!(
                    out,
                    "    {:<30} {:>12} {:<16} {:>7}{}",
                    m.name,
                    value_text(m),
                    short_units(&m.units),
                    threshold_text(m),
                    marks(m)
                );
            }
        }
        if !s.intervals.is_empty() {
            let names: Vec<&str> = if e.tree.is_empty() {
                e.metrics.iter().take(6).map(|m| m.name.as_str()).collect()
            } else {
                e.tree.iter().map(|t| t.metric.as_str()).collect()
            };
            // Enough decimals to tell the intervals apart (emulated runs last milliseconds).
            let step = s
                .intervals
                .windows(2)
                .map(|w| w[1].time_s - w[0].time_s)
                .filter(|d| *d > 0.0)
                .fold(f64::INFINITY, f64::min);
            let decimals = if step.is_finite() && step < 0.01 {
                ((-step.log10()).ceil() as usize + 1).min(9)
            } else {
                3
            };
            let width = decimals + 7;
            let _ = writeln!(out, "\nTimeline");
            let _ = write!(out, "  {:>width$}", "time_s");
            for n in &names {
                let _ = write!(out, " {:>24}", n);
            }
            let _ = writeln!(out, "  bottleneck");
            for iv in &s.intervals {
                let _ = write!(out, "  {:>width$.decimals$}", iv.time_s);
                for n in &names {
                    let v = iv.metrics.get(*n).copied().flatten();
                    let units = e.metric(n).map(|m| m.units.as_str()).unwrap_or("");
                    let txt = v.map(|v| format_value(v, units)).unwrap_or("n/a".into());
                    let _ = write!(out, " {txt:>24}");
                }
                let _ = writeln!(
                    out,
                    "  {}",
                    iv.bottleneck.last().map(String::as_str).unwrap_or("-")
                );
            }
        }
        if !e.warnings.is_empty() {
            let _ = writeln!(out, "\nWarnings");
            for Warning { kind, message } in &e.warnings {
                let _ = writeln!(out, "  [{}] {message}", kind_name(*kind));
            }
        }
    }
    if !r.notes.is_empty() {
        let _ = writeln!(out, "\nNotes");
        for n in &r.notes {
            let _ = writeln!(out, "  {n}");
        }
    }
    out
}

fn kind_name(k: crate::compute::WarningKind) -> String {
    serde_json::to_value(k)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One row per scope, interval (empty = whole run), group and metric.
pub fn render_csv(r: &Report) -> String {
    let mut out = String::from(
        "scope,time_s,stage,group,metric,value,units,unavailable,threshold,flagged,bottleneck,running_fraction,low_confidence\n",
    );
    for s in &r.scopes {
        for GroupSelection {
            group: g,
            metrics: ms,
        } in &s.groups
        {
            for name in ms {
                let Some(m) = s.totals.metric(name) else {
                    continue;
                };
                let stage = match m.stage {
                    Some(crate::catalog::Stage::One) => "1",
                    Some(crate::catalog::Stage::Two) => "2",
                    None => "",
                };
                let _ = writeln!(
                    out,
                    "{},,{stage},{},{},{},{},{},{},{},{},{},{}",
                    csv_field(&s.scope),
                    csv_field(g),
                    m.name,
                    m.value.map(|v| v.to_string()).unwrap_or_default(),
                    csv_field(&m.units),
                    csv_field(
                        &m.unavailable
                            .as_ref()
                            .map(|u| u.to_string())
                            .unwrap_or_default()
                    ),
                    csv_field(&threshold_text(m)),
                    m.flagged,
                    m.bottleneck,
                    m.running_fraction
                        .map(|v| v.to_string())
                        .unwrap_or_default(),
                    m.low_confidence
                );
                for iv in &s.intervals {
                    let v = iv.metrics.get(name).copied().flatten();
                    let _ = writeln!(
                        out,
                        "{},{},{stage},{},{},{},{},,,,{},,",
                        csv_field(&s.scope),
                        iv.time_s,
                        csv_field(g),
                        m.name,
                        v.map(|v| v.to_string()).unwrap_or_default(),
                        csv_field(&m.units),
                        iv.bottleneck.contains(name)
                    );
                }
            }
        }
    }
    out
}

/// Pretty-printed JSON of the whole report.
pub fn render_json(r: &Report) -> String {
    // Serializing plain data structures cannot fail; fall back to an error object anyway.
    serde_json::to_string_pretty(r)
        .unwrap_or_else(|e| format!("{{\"error\": \"cannot serialize report: {e}\"}}"))
}
