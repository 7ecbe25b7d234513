//! `spelunk diff` in the terminal: perf diff's Baseline / Delta columns per function, source
//! line and data object, with the load latency and data-source changes perf diff lacks.

use spelunk_analysis::diff::{DiffReport, DiffRow};
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

fn table(o: &mut String, title: &str, rows: &[DiffRow], limit: usize) {
    let _ = writeln!(o, "\n{title}");
    let header = [
        "Baseline",
        "New",
        "Delta Abs",
        "ld lat A",
        "ld lat B",
        "Δ mean",
        "p50 A→B",
        "p99 A→B",
        "source change",
        "Key",
    ];
    let mut cells: Vec<Vec<String>> = Vec::new();
    for r in rows.iter().take(limit) {
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
            pct(r.share_baseline),
            pct(r.share_new),
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
            if i >= 8 {
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
    if rows.len() > limit {
        let _ = writeln!(o, "  ... {} more rows (--limit)", rows.len() - limit);
    }
}

pub fn render(d: &DiffReport, tables: Tables, limit: usize) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Baseline (A): {} ({} samples selected)\nNew      (B): {} ({} samples selected)",
        d.baseline.file, d.baseline.samples_selected, d.new.file, d.new.samples_selected
    );
    for (side, s) in [("A", &d.baseline), ("B", &d.new)] {
        if let Some(b) = crate::text::losses_block(&s.losses, &format!(" in {side}"), "") {
            o.push_str(&b);
        }
    }
    if !d.filter.is_empty() {
        let _ = writeln!(o, "Filter: {}", d.filter.join(", "));
    }
    let _ = writeln!(
        o,
        "Shares are of each recording's selected samples; Delta Abs = B − A; latency = loads' total latency in cycles."
    );
    if matches!(tables, Tables::Functions | Tables::All) {
        table(&mut o, "Functions", &d.functions, limit);
    }
    if matches!(tables, Tables::Lines | Tables::All) {
        table(&mut o, "Source lines", &d.lines, limit);
    }
    if matches!(tables, Tables::Objects | Tables::All) {
        table(&mut o, "Data objects", &d.objects, limit);
    }
    o
}
