//! `spelunk topdown`'s renderings of a top-down [`Report`]: the terminal tree with the
//! bottleneck marked, CSV rows (one per metric, and per interval) and JSON (schema
//! `spelunk-topdown/1`, docs/topdown.md). The report is computed by spelunk-pmu; nothing here
//! evaluates a metric.

use spelunk_pmu::compute::{Evaluation, MetricResult, TreeResult, Warning, WarningKind};
use spelunk_pmu::describe::Direction;
use spelunk_pmu::report::{GroupSelection, Report};
use spelunk_pmu::Stage;
use std::fmt::Write as _;

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
                Direction::Above => ">",
                Direction::Below => "<",
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
        if m.threshold.is_some_and(|t| t.direction == Direction::Below) {
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

fn kind_name(k: WarningKind) -> String {
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
                    Some(Stage::One) => "1",
                    Some(Stage::Two) => "2",
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

/// `spelunk topdown --list`: the catalog's metric groups, their stage, and each metric's formula.
pub fn render_catalog(c: &spelunk_pmu::Catalog) -> String {
    let mut s = format!(
        "{} ({}), {} slots/cycle, from {}\n",
        c.product_name,
        c.id,
        c.num_slots.map(|n| n.to_string()).unwrap_or("?".into()),
        c.origin
    );
    for g in &c.groups {
        let st = match c.stage_of_group(&g.name) {
            Some(spelunk_pmu::Stage::One) => "stage 1",
            Some(spelunk_pmu::Stage::Two) => "stage 2",
            None => "other",
        };
        s += &format!("\n{} [{st}]: {}\n", g.name, g.description);
        for m in &g.metrics {
            if let Some(m) = c.metrics.get(m) {
                s += &format!("  {:<32} {}  [{}]\n", m.name, m.expr, m.units);
            }
        }
    }
    s
}
