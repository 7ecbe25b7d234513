//! `spelunk annotate` in the terminal: perf annotate's layout (percent, address, instruction)
//! with SPE's exact columns — samples, load latency, data sources, mispredictions — and the
//! source lines interleaved where they change.

use spelunk_analysis::annotate::{AnnotateReport, AnnotatedInstruction};
use spelunk_analysis::model::GroupStats;
use std::fmt::Write as _;

fn sources(g: &GroupStats) -> String {
    let total: u64 = g.sources.iter().map(|s| s.loads).sum();
    if total == 0 {
        return String::new();
    }
    g.sources
        .iter()
        .take(3)
        .map(|s| format!("{} {:.0}%", s.source, 100.0 * s.loads as f64 / total as f64))
        .collect::<Vec<_>>()
        .join(" ")
}

fn short(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The disassembler's relative branch operand (`$+0x2b`) as the absolute target, as objdump
/// prints it.
fn absolute_target(text: &str, target: Option<u64>) -> String {
    let Some(t) = target else {
        return text.to_string();
    };
    text.split(' ')
        .map(|tok| {
            let (core, comma) = tok.strip_suffix(',').map_or((tok, ""), |c| (c, ","));
            if core.starts_with("$+") || core.starts_with("$-") {
                format!("{t:x}{comma}")
            } else {
                tok.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn render(r: &AnnotateReport, with_source: bool) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} in {} ({}), {:#x}..{:#x} ({} bytes)",
        r.function,
        r.dso,
        r.arch,
        r.start,
        r.start + r.size,
        r.size
    );
    let _ = writeln!(
        o,
        "{} samples in the function = {:.2}% of {} selected{}; percent: of the function's samples",
        r.samples,
        100.0 * r.share_of_selected,
        r.selected,
        if r.filter.is_empty() {
            String::new()
        } else {
            format!(" ({})", r.filter.join(", "))
        }
    );
    let t = &r.totals;
    if let Some(l) = &t.load_latency {
        let _ = writeln!(
            o,
            "loads {}: total latency mean {:.1} cycles, p50 {}, p99 {}; sources {}",
            t.loads,
            l.mean,
            l.p50,
            l.p99,
            sources(t)
        );
    }
    if t.branches > 0 {
        let _ = writeln!(
            o,
            "branches {}: {} mispredicted ({:.2}%)",
            t.branches,
            t.mispredicts,
            100.0 * t.mispredicts as f64 / t.branches as f64
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{:>7} {:>8} {:>6} {:>7} {:>5} {:<22} {:>14} | {:>10}  instruction",
        "percent", "samples", "loads", "ld lat", "p99", "sources", "mispredicted", "address"
    );
    instructions(&mut o, r, &r.instructions, with_source);
    for p in &r.parts {
        let _ = writeln!(
            o,
            "\npart {}: {:#x}..{:#x} ({} bytes), {} samples = {:.2}% of the function's",
            p.function,
            p.start,
            p.start + p.size,
            p.size,
            p.samples,
            if r.samples == 0 {
                0.0
            } else {
                100.0 * p.samples as f64 / r.samples as f64
            }
        );
        instructions(&mut o, r, &p.instructions, with_source);
    }
    for n in &r.notes {
        let _ = writeln!(o, "note: {n}");
    }
    if let Some(b) = crate::text::losses_block(&r.losses, "", "") {
        o.push_str(&b);
    }
    o
}

/// The instruction lines of one piece of the function, source lines interleaved.
fn instructions(
    o: &mut String,
    r: &AnnotateReport,
    insns: &[AnnotatedInstruction],
    with_source: bool,
) {
    let mut last: Option<(Option<&str>, Option<u32>)> = None;
    for i in insns {
        let here = (i.file.as_deref(), i.line);
        if with_source && last != Some(here) {
            if let (Some(f), Some(n)) = here {
                let text = r
                    .sources
                    .get(f)
                    .and_then(|lines| lines.get((n as usize).wrapping_sub(1)))
                    .map(|s| s.trim())
                    .unwrap_or("");
                let _ = writeln!(o, "{:>74} : {}:{n}  {text}", "", short(f));
            }
        }
        last = Some(here);
        let s = &i.stats;
        let (lat, p99) = match &s.load_latency {
            Some(l) => (format!("{:.1}", l.mean), l.p99.to_string()),
            None => (String::new(), String::new()),
        };
        let mis = if i.branch && s.branches > 0 {
            format!(
                "{}/{} {:.0}%",
                s.mispredicts,
                s.branches,
                100.0 * s.mispredicts as f64 / s.branches as f64
            )
        } else {
            String::new()
        };
        let pct = if s.samples > 0 {
            format!("{:.2}", 100.0 * s.share)
        } else {
            "0.00".into()
        };
        let target = i
            .target_label
            .as_ref()
            .map(|l| format!(" <{l}>"))
            .unwrap_or_default();
        let text = absolute_target(&i.text, i.branch_target);
        let _ = writeln!(
            o,
            "{:>7} {:>8} {:>6} {:>7} {:>5} {:<22} {:>14} | {:>10x}: {}{target}",
            pct,
            if s.samples > 0 {
                s.samples.to_string()
            } else {
                String::new()
            },
            if s.loads > 0 {
                s.loads.to_string()
            } else {
                String::new()
            },
            lat,
            p99,
            sources(s),
            mis,
            i.address,
            text
        );
    }
}
