//! `spelunk diff` in the terminal: the totals before and after, then per function, source line
//! and data object the change in cost (estimated cycles), ranked by it, with perf diff's share
//! columns and the load latency and data-source changes perf diff lacks; noise rows hidden
//! with their count unless asked for.

use spelunk_analysis::diff::{Change, DiffReport, DiffRow, Verdict};
use std::fmt::Write as _;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tables {
    Functions,
    Lines,
    Objects,
    All,
}

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

fn signed_pct(x: f64) -> String {
    format!("{:+.2}%", 100.0 * x)
}

/// A count or cycle figure with an SI suffix (k, M, G, T) and 3–4 significant digits.
pub fn si(x: f64) -> String {
    let a = x.abs();
    let (v, unit) = if a >= 1e12 {
        (x / 1e12, " T")
    } else if a >= 1e9 {
        (x / 1e9, " G")
    } else if a >= 1e6 {
        (x / 1e6, " M")
    } else if a >= 1e3 {
        (x / 1e3, " k")
    } else {
        return format!("{x:.0}");
    };
    format!("{v:.2}{unit}")
}

/// "5.4× less" (ratio < 1) or "2.0× more" (> 1) with the words given; "" at 1.
fn times(ratio: f64, less: &str, more: &str) -> String {
    if !ratio.is_finite() || (ratio - 1.0).abs() < 0.005 {
        String::new()
    } else if ratio < 1.0 {
        if ratio <= 0.0 {
            return String::new();
        }
        format!("{:.2}× {less}", 1.0 / ratio)
    } else {
        format!("{ratio:.2}× {more}")
    }
}

/// A row's change in cost: "-81% (5.4× less)", "+120% (2.2× more)", "gone", "new".
fn cost_change(r: &DiffRow) -> String {
    match (r.only_in, r.cost_ratio) {
        (Some("baseline"), _) => "gone (-100%)".into(),
        (Some("new"), _) | (_, None) => "new".into(),
        (_, Some(ratio)) => {
            let t = times(ratio, "less", "more");
            let pct = format!("{:+.0}%", 100.0 * (ratio - 1.0));
            if t.is_empty() {
                pct
            } else {
                format!("{pct} ({t})")
            }
        }
    }
}

fn verdict(v: Verdict) -> &'static str {
    match v {
        Verdict::Improved => "improved",
        Verdict::Regressed => "regressed",
        Verdict::Noise => "noise",
    }
}

/// "A → B (ratio: phrase)" of a total, figures formatted by `f`.
fn change(c: &Change, f: impl Fn(f64) -> String, less: &str, more: &str) -> String {
    let mut s = format!("{} → {}", f(c.baseline), f(c.new));
    if let Some(r) = c.ratio {
        let t = times(r, less, more);
        if t.is_empty() {
            let _ = write!(s, " ({r:.3})");
        } else {
            let _ = write!(s, " ({r:.3}: {t})");
        }
    }
    s
}

fn seconds(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.0} µs", ns / 1e3)
    }
}

fn totals(o: &mut String, d: &DiffReport) {
    let t = &d.totals;
    let mut rows: Vec<(String, String)> = Vec::new();
    if let Some(c) = &t.cycles {
        rows.push((
            "cycles (CPU_CYCLES)".into(),
            change(c, si, "faster", "slower"),
        ));
    }
    if let Some(c) = &t.instructions {
        rows.push((
            "instructions (INST_RETIRED)".into(),
            change(c, si, "fewer", "more"),
        ));
    }
    rows.push((
        "duration (first to last sample)".into(),
        change(&t.duration_ns, seconds, "shorter", "longer"),
    ));
    rows.push(("samples".into(), change(&t.samples, si, "fewer", "more")));
    rows.push((
        "operations (est.: samples × interval)".into(),
        change(&t.estimated_ops, si, "fewer", "more"),
    ));
    rows.push((
        "loads (est.: load samples × interval)".into(),
        change(&t.estimated_loads, si, "fewer", "more"),
    ));
    rows.push((
        "Σ load latency (est. cycles)".into(),
        change(&t.load_latency_sum_cycles, si, "less", "more"),
    ));
    if let Some(c) = &t.load_latency_mean_cycles {
        rows.push((
            "mean load latency (cycles)".into(),
            change(c, |x| format!("{x:.1}"), "less", "more"),
        ));
    }
    let noise = t.cost_noise_cycles;
    let delta = (t.cost_cycles.new - t.cost_cycles.baseline).abs();
    rows.push((
        "cost (est. cycles)".into(),
        format!(
            "{}{}",
            change(&t.cost_cycles, si, "less", "more"),
            if delta < noise {
                format!(", within noise (±{})", si(noise))
            } else {
                String::new()
            }
        ),
    ));
    let w = rows
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    let _ = writeln!(o, "\nTotals, A → B (B ÷ A)");
    for (k, v) in rows {
        let pad = " ".repeat(w - k.chars().count());
        let _ = writeln!(o, "  {k}{pad}  {v}");
    }
}

fn table(o: &mut String, title: &str, rows: &[DiffRow], limit: usize, all: bool) {
    let _ = writeln!(o, "\n{title}");
    let noise = rows.iter().filter(|r| r.verdict == Verdict::Noise).count();
    let shown: Vec<&DiffRow> = rows
        .iter()
        .filter(|r| all || r.verdict != Verdict::Noise)
        .collect();
    let header = [
        "Cost A",
        "Cost B",
        "Cost change",
        "Verdict",
        "Samples A→B",
        "Share A→B",
        "Δ share",
        "ld lat A",
        "ld lat B",
        "Δ mean",
        "p50 A→B",
        "p99 A→B",
        "source change",
        "Key",
    ];
    let mut cells: Vec<Vec<String>> = Vec::new();
    for r in shown.iter().take(limit) {
        let lat = |l: &Option<spelunk_analysis::model::LatencySummary>| {
            l.as_ref()
                .map_or("-".to_string(), |l| format!("{:.1}", l.mean))
        };
        let p = |f: fn(&spelunk_analysis::model::LatencySummary) -> u16| match (
            &r.latency_baseline,
            &r.latency_new,
        ) {
            (Some(a), Some(b)) => format!("{}→{}", f(a), f(b)),
            (Some(a), None) => format!("{}→-", f(a)),
            (None, Some(b)) => format!("-→{}", f(b)),
            _ => "-".into(),
        };
        let src = r
            .sources
            .first()
            .filter(|s| s.delta.abs() > 0.0)
            .map_or(String::new(), |s| {
                format!(
                    "{} {:.0}%→{:.0}%",
                    s.source,
                    100.0 * s.share_baseline,
                    100.0 * s.share_new
                )
            });
        let key = match (&r.dso, r.only_in) {
            (Some(d), Some(w)) => format!("{} [{d}] (only in {w})", r.key),
            (Some(d), None) => format!("{} [{d}]", r.key),
            (None, Some(w)) => format!("{} (only in {w})", r.key),
            (None, None) => r.key.clone(),
        };
        cells.push(vec![
            si(r.cost_baseline_cycles),
            si(r.cost_new_cycles),
            cost_change(r),
            verdict(r.verdict).to_string(),
            format!("{}→{}", r.samples_baseline, r.samples_new),
            format!("{}→{}", pct(r.share_baseline), pct(r.share_new)),
            signed_pct(r.delta_share),
            lat(&r.latency_baseline),
            lat(&r.latency_new),
            r.delta_mean.map_or("-".into(), |d| format!("{d:+.1}")),
            p(|l| l.p50),
            p(|l| l.p99),
            src,
            key,
        ]);
    }
    let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for c in &cells {
        for (i, x) in c.iter().enumerate() {
            w[i] = w[i].max(x.chars().count());
        }
    }
    let mut line = |c: Vec<&str>| {
        let mut s = String::from(" ");
        for (i, x) in c.iter().enumerate() {
            let pad = " ".repeat(w[i].saturating_sub(x.chars().count()));
            s.push(' ');
            if i == 3 || i >= 12 {
                s.push_str(x);
                s.push_str(&pad);
            } else {
                s.push_str(&pad);
                s.push_str(x);
            }
        }
        let _ = writeln!(o, "{}", s.trim_end());
    };
    line(header.to_vec());
    for c in &cells {
        line(c.iter().map(|x| x.as_str()).collect());
    }
    if shown.len() > limit {
        let _ = writeln!(o, "  ... {} more rows (--limit)", shown.len() - limit);
    }
    if noise > 0 && !all {
        let _ = writeln!(
            o,
            "  {noise} row{} within noise (--all to show)",
            if noise == 1 { "" } else { "s" }
        );
    }
}

/// The advisor's findings that the change removed, brought or left (`spelunk advise`).
fn findings(o: &mut String, d: &DiffReport) {
    let Some(f) = &d.findings else { return };
    if f.is_empty() {
        let _ = writeln!(o, "Findings (spelunk advise): none in A or B");
        return;
    }
    let _ = writeln!(
        o,
        "Findings (spelunk advise; cost = estimated cycles at stake):"
    );
    for c in f {
        let cost = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3e}"));
        let _ = writeln!(
            o,
            "  {:<11}  {:<17}  {}  (A {}, B {})",
            c.status,
            c.class,
            c.location,
            cost(c.cost_baseline_cycles),
            cost(c.cost_new_cycles)
        );
    }
}

pub fn render(d: &DiffReport, tables: Tables, limit: usize, all: bool) -> String {
    let mut o = String::new();
    let interval = |i: Option<u64>| {
        i.map_or("interval unknown".to_string(), |i| {
            format!("1 sample per {i} operations")
        })
    };
    let _ = writeln!(
        o,
        "Baseline (A): {} ({} samples selected, {})\nNew      (B): {} ({} samples selected, {})",
        d.baseline.file,
        d.baseline.samples_selected,
        interval(d.baseline.interval),
        d.new.file,
        d.new.samples_selected,
        interval(d.new.interval)
    );
    for (side, s) in [("A", &d.baseline), ("B", &d.new)] {
        if let Some(b) = crate::text::losses_block(&s.losses, &format!(" in {side}"), "") {
            o.push_str(&b);
        }
    }
    if !d.filter.is_empty() {
        let _ = writeln!(o, "Filter: {}", d.filter.join(", "));
    }
    totals(&mut o, d);
    findings(&mut o, d);
    for n in &d.notes {
        let _ = writeln!(o, "Note: {n}");
    }
    let _ = writeln!(
        o,
        "\nCost = estimated cycles at stake: interval × (Σ sampled loads' load-to-use latency + ¼ per other sample). \
         Rows ranked by |cost B − cost A|; noise = a change within 2 standard errors of sampling (docs/diff.md). \
         Shares are of each recording's selected samples; latency = loads' total latency in cycles."
    );
    if matches!(tables, Tables::Functions | Tables::All) {
        table(&mut o, "Functions", &d.functions, limit, all);
    }
    if matches!(tables, Tables::Lines | Tables::All) {
        table(&mut o, "Source lines", &d.lines, limit, all);
    }
    if matches!(tables, Tables::Objects | Tables::All) {
        table(&mut o, "Data objects", &d.objects, limit, all);
    }
    o
}
