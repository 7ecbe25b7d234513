//! `spelunk estimate` in the terminal: the inputs and each step of the arithmetic, laid out as
//! [SPE methodology §4.2.4 and §4.4.2] lay them out, so a reader can redo the calculation by hand.

use spelunk_analysis::estimate::{EstimateKind, EstimateReport};
use std::fmt::Write as _;

/// `1741662720` → `1,741,662,720`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A float with `prec` decimals and thousands separators in its integer part.
fn thousands_f(x: f64, prec: usize) -> String {
    let s = format!("{x:.prec$}");
    let (int, frac) = s.split_once('.').unwrap_or((&s, ""));
    let (sign, digits) = int.strip_prefix('-').map_or(("", int), |d| ("-", d));
    let grouped = digits
        .parse::<u64>()
        .map(thousands)
        .unwrap_or_else(|_| digits.into());
    if frac.is_empty() {
        format!("{sign}{grouped}")
    } else {
        format!("{sign}{grouped}.{frac}")
    }
}

/// Seconds with nine decimals ([SPE methodology §4.4.2]'s "0.183341080 second").
fn seconds(ns: f64) -> String {
    format!("{:.9}", ns * 1e-9)
}

pub fn render(r: &EstimateReport) -> String {
    let mut o = String::new();
    let title = match r.kind {
        EstimateKind::Latency => "Derived latency (an estimate; [SPE methodology §4.2.4])",
        EstimateKind::Bandwidth => "Memory bandwidth (an estimate; [SPE methodology §4.4.2])",
    };
    let _ = writeln!(o, "{title}");
    let _ = writeln!(o, "  recording    {}", r.file);
    if !r.selection.is_empty() {
        let _ = writeln!(o, "  selection    {}", r.selection.join(", "));
    }
    let _ = writeln!(
        o,
        "  counted      {} ({} samples: {} loads, {} stores){}",
        r.counted.name(),
        thousands(r.samples),
        thousands(r.loads),
        thousands(r.stores),
        if r.not_counted > 0 {
            format!(
                "; {} other selected samples not counted",
                thousands(r.not_counted)
            )
        } else {
            String::new()
        }
    );

    let _ = writeln!(o, "\nSampling interval");
    let iv = &r.interval;
    if iv.overridden {
        let _ = writeln!(o, "  interval     {} (--interval)", iv.interval);
    } else {
        let req = iv
            .requested_period
            .map_or("not recorded".into(), |p| p.to_string());
        let min = iv
            .min_interval
            .map_or(String::new(), |m| format!(", min_interval {m}"));
        let _ = writeln!(o, "  requested    perf record -c {req}{min}");
        if let Some(b) = iv.base_interval {
            let _ = writeln!(
                o,
                "  base         {b} (step 01: rounded down to a multiple of 256)"
            );
            let jitter = iv.jitter.unwrap_or(false);
            let add = iv.interval.saturating_sub(b);
            let why = match (jitter, iv.ernd) {
                (false, _) => "jitter=0 → base + 1".to_string(),
                (true, Some(e)) => format!(
                    "jitter=1, caps/ernd={}{} → base + {add}",
                    u8::from(e),
                    if iv.ernd_assumed { " (assumed)" } else { "" }
                ),
                (true, None) => format!("jitter=1 → base + {add}"),
            };
            let _ = writeln!(
                o,
                "  actual       {b} + {add} = {} (step 02, table 4.3: {why})",
                iv.interval
            );
        }
    }

    let _ = writeln!(o, "\nTime");
    let _ = writeln!(
        o,
        "  timer        {} Hz, {} ns per tick (from {})",
        thousands_f(r.timer.frequency_hz, 0),
        trim_float(r.timer.ns_per_tick),
        r.timer.from
    );
    let _ = writeln!(
        o,
        "  span         {} - {} = {} ticks (last - first sampled operation)",
        r.last_tick, r.first_tick, r.elapsed_ticks
    );
    let _ = writeln!(
        o,
        "  elapsed      {} × {} = {} ns = {} s",
        r.elapsed_ticks,
        trim_float(r.timer.ns_per_tick),
        thousands_f(r.elapsed_ns, 0),
        seconds(r.elapsed_ns)
    );

    let _ = writeln!(o, "\nEstimate");
    match r.kind {
        EstimateKind::Latency => {
            let _ = writeln!(
                o,
                "  operations   {} × {} = {} (samples × interval)",
                thousands(r.samples),
                r.interval.interval,
                thousands(r.estimated_operations)
            );
            if let Some(l) = r.derived_latency_ns {
                let _ = writeln!(
                    o,
                    "  latency      {} ns / {} = {:.4} ns per operation (estimate)",
                    thousands_f(r.elapsed_ns, 0),
                    thousands(r.estimated_operations),
                    l
                );
            }
            if let (Some(c), Some(g)) = (r.derived_latency_cycles, r.cpu_ghz) {
                let _ = writeln!(o, "               × {g} GHz = {c:.2} cycles (estimate)");
            }
        }
        EstimateKind::Bandwidth => {
            if let Some(b) = &r.bytes_per_op {
                match b.uniform {
                    Some(u) => {
                        let _ = writeln!(
                            o,
                            "  bytes/op     {u} (from {})",
                            if b.from == "instructions" {
                                "the sampled instructions' access size"
                            } else {
                                b.from.as_str()
                            }
                        );
                    }
                    None => {
                        let _ = writeln!(
                            o,
                            "  bytes/op     varies: Σ samples × bytes = {} over the instructions below",
                            thousands(b.sample_bytes)
                        );
                    }
                }
                if let Some(total) = r.estimated_bytes {
                    let label = match (r.loads, r.stores) {
                        (_, 0) => "read size",
                        (0, _) => "write size",
                        _ => "bytes moved",
                    };
                    match b.uniform {
                        Some(u) => {
                            let _ = writeln!(
                                o,
                                "  {label:<12} {} × {} × {u} = {} bytes",
                                thousands(r.samples),
                                r.interval.interval,
                                thousands(total)
                            );
                        }
                        None => {
                            let _ = writeln!(
                                o,
                                "  {label:<12} {} × {} = {} bytes",
                                thousands(b.sample_bytes),
                                r.interval.interval,
                                thousands(total)
                            );
                        }
                    }
                    if let Some(bw) = r.bandwidth_bytes_per_s {
                        let _ = writeln!(
                            o,
                            "  bandwidth    {} / {} = {:.2} MB/s (estimate; MB = 10^6 bytes)",
                            thousands(total),
                            seconds(r.elapsed_ns),
                            bw / 1e6
                        );
                    }
                }
                if b.uniform.is_none() || b.instructions.len() > 1 {
                    let _ = writeln!(o, "\n  instruction          bytes    samples  text");
                    for i in b.instructions.iter().take(20) {
                        let _ = writeln!(
                            o,
                            "  {:#018x}  {:>5}  {:>9}  {}",
                            i.address,
                            i.bytes,
                            thousands(i.samples),
                            i.text
                        );
                    }
                }
            }
        }
    }
    let _ = writeln!(
        o,
        "\nSPE samples one operation per interval, so these are statistical estimates; they hold\nfor regular, repetitive code ([SPE methodology §4.5])."
    );
    for n in &r.notes {
        let _ = writeln!(o, "note: {n}");
    }
    if let Some(b) = crate::text::losses_block(&r.losses, "", "") {
        o.push_str(&b);
    }
    o
}

fn trim_float(x: f64) -> String {
    let s = format!("{x:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping() {
        assert_eq!(thousands(1_741_662_720), "1,741,662,720");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands_f(183_341_080.0, 0), "183,341,080");
        assert_eq!(thousands_f(25e6, 0), "25,000,000");
        assert_eq!(trim_float(40.0), "40");
        assert_eq!(seconds(183_341_080.0), "0.183341080");
    }
}
