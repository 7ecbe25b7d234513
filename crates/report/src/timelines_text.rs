//! The timelines (resident memory and PMU counters over time, [`Timelines`]) as a terminal
//! table: one row per sample time, resident memory per mapping class (and per NUMA node when
//! there are several), and the rates derived from the counters, with their formulas named
//! below the table. Every number comes from the report value `--json` prints.

use crate::text_table::Table;
use spelunk_analysis::model::{CapacityPoint, CounterInterval, NotCounted, Timelines};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Bytes in MiB (2^20), one decimal.
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

fn mib_cell(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1u64 << 20) as f64)
}

/// "not counted: A, B: reason" lines, one per distinct reason.
pub fn not_counted_lines(not_counted: &[NotCounted]) -> Vec<String> {
    let mut by_reason: Vec<(&str, Vec<&str>)> = Vec::new();
    for n in not_counted {
        match by_reason.iter_mut().find(|(r, _)| *r == n.reason) {
            Some((_, names)) => names.push(&n.name),
            None => by_reason.push((&n.reason, vec![&n.name])),
        }
    }
    by_reason
        .into_iter()
        .map(|(r, names)| format!("not counted: {}: {r}", names.join(", ")))
        .collect()
}

/// A rate in its unit, scaled for reading: bytes/s as MB/s (10^6), beats/s as M/s.
fn rate_cell(unit: &str, v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if unit == "bytes/s" => format!("{:.1}", v / 1e6),
        Some(v) if unit == "beats/s" => format!("{:.2}", v / 1e6),
        Some(v) => format!("{v:.2}"),
    }
}

fn rate_header(name: &str, unit: &str) -> String {
    let short = match name {
        "llc_read_miss_bytes_per_s" => "LLC-miss rd",
        "l2_refill_bytes_per_s" => "L2 refill",
        "bus_access_beats_per_s" => "bus beats",
        "ipc" => "IPC",
        other => other,
    };
    match unit {
        "bytes/s" => format!("{short} MB/s"),
        "beats/s" => format!("{short} M/s"),
        _ => short.to_string(),
    }
}

/// Row indices to print: all when they fit in `rows`, else evenly spaced ones plus `keep`.
fn pick(n: usize, rows: usize, keep: Option<usize>) -> Vec<usize> {
    if n <= rows.max(2) {
        return (0..n).collect();
    }
    let rows = rows.max(2);
    let mut v: Vec<usize> = (0..rows).map(|k| k * (n - 1) / (rows - 1)).collect();
    v.extend(keep);
    v.sort_unstable();
    v.dedup();
    v
}

/// The timelines section (`rows`: at most this many table rows, evenly spaced, plus the peak).
pub fn render(t: &Timelines, rows: usize) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "\nTimelines (the process tree over time; t since the command's start, {})",
        t.clock
    );
    let cap = t.capacity.as_ref();
    let ctr = t.counters.as_ref();
    let multi_node = cap.is_some_and(|c| c.nodes.len() > 1);

    // One row per instant: a capacity sample and/or the counter interval ending then.
    let mut at: BTreeMap<u64, (Option<&CapacityPoint>, Option<&CounterInterval>)> = BTreeMap::new();
    for p in cap.iter().flat_map(|c| &c.points) {
        at.entry(p.t_ns).or_default().0 = Some(p);
    }
    for iv in ctr.iter().flat_map(|c| &c.intervals) {
        at.entry(iv.end_ns).or_default().1 = Some(iv);
    }
    let derived = ctr.map(|c| c.derived.as_slice()).unwrap_or(&[]);
    let mut header: Vec<String> = vec!["t (s)".into(), "procs".into()];
    if cap.is_some() {
        header.extend(["heap", "anon", "file", "stack", "total MiB"].map(String::from));
        if multi_node {
            for n in cap.iter().flat_map(|c| &c.nodes) {
                header.push(match n {
                    Some(id) => format!("node{id} MiB"),
                    None => "node? MiB".into(),
                });
            }
        }
    }
    for d in derived {
        header.push(rate_header(&d.name, &d.unit));
    }
    let peak_t = cap.and_then(|c| c.peak_t_ns);
    let times: Vec<u64> = at.keys().copied().collect();
    let keep = peak_t.and_then(|p| times.iter().position(|t| *t == p));
    let chosen = pick(times.len(), rows, keep);
    let mut table = Table::numeric(header);
    for &i in &chosen {
        let t_ns = times[i];
        let (p, iv) = at[&t_ns];
        let mark = if Some(t_ns) == peak_t { "*" } else { "" };
        let mut r = vec![format!("{:.3}{mark}", t_ns as f64 / 1e9)];
        r.push(p.map_or("-".into(), |p| p.processes.to_string()));
        if cap.is_some() {
            match p {
                Some(p) => {
                    let a = &p.all_nodes;
                    for b in [
                        a.heap_bytes,
                        a.anon_bytes,
                        a.file_bytes,
                        a.stack_bytes,
                        a.total_bytes,
                    ] {
                        r.push(mib_cell(b));
                    }
                    if multi_node {
                        r.extend(p.nodes.iter().map(|n| mib_cell(n.total_bytes)));
                    }
                }
                None => {
                    let cols = 5 + if multi_node {
                        cap.map_or(0, |c| c.nodes.len())
                    } else {
                        0
                    };
                    r.extend(std::iter::repeat_n("-".to_string(), cols));
                }
            }
        }
        for (k, d) in derived.iter().enumerate() {
            let v = iv.and_then(|iv| iv.rates.get(k).copied().flatten());
            // An estimate when an event it is computed from was multiplexed then.
            let estimate = iv.is_some_and(|iv| {
                ctr.iter()
                    .flat_map(|c| c.events.iter().zip(&iv.scaled))
                    .any(|(e, scaled)| *scaled && d.events.contains(&e.name))
            });
            let star = if estimate && v.is_some() { "~" } else { "" };
            r.push(format!("{}{star}", rate_cell(&d.unit, v)));
        }
        table.row(r);
    }
    table.render(&mut o);
    if chosen.len() < times.len() {
        let _ = writeln!(
            o,
            "  ({} of {} rows, evenly spaced; --json has them all)",
            chosen.len(),
            times.len()
        );
    }
    if let Some(c) = cap {
        let _ = writeln!(
            o,
            "  resident memory: from /proc/PID/{} of every process of the tree, every {} ms; \
             * marks the largest total ({}); peaks per class: heap {}, anon {}, file {}, stack {}",
            c.source,
            c.interval_ns as f64 / 1e6,
            mib(c.peak.total_bytes),
            mib(c.peak.heap_bytes),
            mib(c.peak.anon_bytes),
            mib(c.peak.file_bytes),
            mib(c.peak.stack_bytes),
        );
        for n in &c.notes {
            let _ = writeln!(o, "    note: {n}");
        }
    }
    match ctr {
        Some(c) => {
            if !c.events.is_empty() {
                let names: Vec<String> = c
                    .events
                    .iter()
                    .map(|e| match e.running_fraction {
                        Some(f) if f < 1.0 => {
                            format!("{} (counted {:.0}% of the time)", e.name, 100.0 * f)
                        }
                        _ => e.name.clone(),
                    })
                    .collect();
                let setup: Vec<&str> = [&c.pmu, &c.scope, &c.grouping]
                    .into_iter()
                    .filter_map(|s| s.as_deref())
                    .collect();
                let _ = writeln!(o, "  counters ({}): {}", setup.join("; "), names.join(", "));
            }
            for d in &c.derived {
                let _ = writeln!(
                    o,
                    "  {} = {} [{}]: {}",
                    rate_header(&d.name, &d.unit),
                    d.formula,
                    d.unit,
                    d.source
                );
            }
            if c.intervals.iter().any(|iv| iv.scaled.contains(&true)) {
                let _ = writeln!(
                    o,
                    "  ~: an event of the rate was multiplexed in that interval; its count is \
                     scaled by time enabled / time running (an estimate)"
                );
            }
            if c.derived.is_empty() && !c.events.is_empty() {
                let _ = writeln!(
                    o,
                    "  no bandwidth: it needs LL_CACHE_MISS_RD, L2D_CACHE_REFILL or BUS_ACCESS"
                );
            }
            for line in not_counted_lines(&c.not_counted) {
                let _ = writeln!(o, "  {line}");
            }
            for n in &c.notes {
                let _ = writeln!(o, "    note: {n}");
            }
        }
        None => {
            let _ = writeln!(o, "  counters: none recorded");
        }
    }
    o
}

/// The report of a recording that is timelines only (`spelunk record --no-spe`).
pub fn render_only(file: &str, t: &Timelines, rows: usize) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "spelunk report: {file}");
    let status = match t.exit_status {
        Some(s) if s > 128 => format!("exited with {s} (signal {})", s - 128),
        Some(s) => format!("exited with status {s}"),
        None => "exit status unknown".into(),
    };
    let _ = writeln!(
        o,
        "  timelines only (recorded with --no-spe: no SPE samples); command: {}; {status}",
        t.command.join(" ")
    );
    o.push_str(&render(t, rows));
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_evenly_and_keeps_the_peak() {
        assert_eq!(pick(3, 20, Some(1)), vec![0, 1, 2]);
        assert_eq!(pick(101, 5, Some(37)), vec![0, 25, 37, 50, 75, 100]);
    }

    #[test]
    fn not_counted_grouped_by_reason() {
        let n = |name: &str, reason: &str| NotCounted {
            code: 0,
            name: name.into(),
            reason: reason.into(),
        };
        let lines = not_counted_lines(&[n("A", "x"), n("B", "y"), n("C", "x")]);
        assert_eq!(lines, ["not counted: A, C: x", "not counted: B: y"]);
    }

    #[test]
    fn mib_has_one_decimal() {
        assert_eq!(mib(64 << 20), "64.0 MiB");
        assert_eq!(mib(3 << 19), "1.5 MiB");
    }
}
