//! The advisor's findings as text: the whole advice (`spelunk advise`) and the few lines at the
//! top of `spelunk report`. Every figure comes from the [`Advice`] value (`--json` prints the
//! same); docs/advise.md defines them.

use spelunk_analysis::model::advise::{
    Advice, CheckVerdict, Evidence, Finding, RuledOutKind, Verification,
};
use std::fmt::Write as _;

fn speedup(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0}x")
    } else {
        format!("{x:.2}x")
    }
}

/// "1.20x-1.90x (likely 1.50x)".
pub fn gain_range(f: &Finding) -> String {
    format!(
        "{}-{} (likely {})",
        speedup(f.gain.low_speedup),
        speedup(f.gain.upper_speedup),
        speedup(f.gain.likely_speedup)
    )
}

/// The first `n` findings, one line each, for the top of `spelunk report`.
pub fn top_lines(a: &Advice, n: usize) -> String {
    let mut o = String::new();
    if a.findings.is_empty() {
        let _ = writeln!(
            o,
            "  findings: none raised ({} classes checked; spelunk advise for why)",
            a.ruled_out.len()
        );
        return o;
    }
    let _ = writeln!(
        o,
        "  findings (most cycles at stake first; spelunk advise for evidence and fixes):"
    );
    for (i, f) in a.findings.iter().take(n).enumerate() {
        let _ = writeln!(
            o,
            "    {}. [{}] {} — {:.1} % of cycles; fix: {}; gain {}",
            i + 1,
            f.class,
            f.title,
            100.0 * f.gain.share_of_cycles,
            f.fix.summary,
            gain_range(f)
        );
    }
    if a.findings.len() > n {
        let _ = writeln!(o, "    ... {} more", a.findings.len() - n);
    }
    o
}

fn evidence_line(e: &Evidence) -> String {
    let value = match e.unit.as_str() {
        "share" => format!("{:.1} %", 100.0 * e.value),
        "cycles" => format!("{:.1} cycles", e.value),
        u => format!("{:.1} {u}", e.value),
    };
    let th = e
        .threshold
        .map_or(String::new(), |t| match e.unit.as_str() {
            "share" => format!(" (threshold {:.1} %)", 100.0 * t),
            _ => format!(" (threshold {t})"),
        });
    let ci = e.ci95.map_or(String::new(), |(lo, hi)| {
        format!(", 95 % CI {:.1}-{:.1} %", 100.0 * lo, 100.0 * hi)
    });
    format!("{}: {value}{th} over {} samples{ci}", e.name, e.samples)
}

/// `spelunk advise`: every finding with its evidence, fix and gain, then what was ruled out.
/// `all`: every finding (else the first 10).
pub fn render(a: &Advice, all: bool) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "spelunk advise: {}", a.file);
    let cpu = a.cpu_model.as_deref().unwrap_or("unknown CPU");
    let _ = writeln!(
        o,
        "  cpu: {cpu}{}; {} samples, {} operations per sample",
        if a.emulated {
            " [emulated by spelunk: figures come from its model]"
        } else {
            ""
        },
        a.totals.samples_selected,
        a.totals.interval_ops
    );
    let _ = writeln!(
        o,
        "  cycles: {:.3e} from {}",
        a.totals.cycles, a.totals.cycles_source
    );
    for n in &a.notes {
        let _ = writeln!(o, "  note: {n}");
    }
    if a.findings.is_empty() {
        let _ = writeln!(o, "\nNo finding raised.");
    }
    let shown = if all { a.findings.len() } else { 10 };
    for (i, f) in a.findings.iter().take(shown).enumerate() {
        let _ = writeln!(o, "\n{}. [{}] {}", i + 1, f.class, f.title);
        let l = &f.location;
        let mut at = Vec::new();
        if let Some(func) = &l.function {
            at.push(format!("function {func}"));
        }
        if let (Some(file), Some(line)) = (&l.file, l.line) {
            at.push(format!("{file}:{line}"));
        }
        if !l.pcs.is_empty() {
            let pcs: Vec<String> = l.pcs.iter().map(|p| format!("{p:#x}")).collect();
            at.push(format!("PC {}", pcs.join(", ")));
        }
        if !at.is_empty() {
            let _ = writeln!(o, "   where: {}", at.join("; "));
        }
        if let Some(obj) = &l.object {
            let size = l
                .object_size_bytes
                .map_or(String::new(), |s| format!(" ({s} bytes)"));
            let _ = writeln!(o, "   data: {obj}{size}");
        }
        if !l.threads.is_empty() {
            let t: Vec<String> = l.threads.iter().map(|t| t.to_string()).collect();
            let _ = writeln!(o, "   threads: {}", t.join(", "));
        }
        let _ = writeln!(o, "   evidence ({}; {}):", f.rule, f.source);
        for e in &f.evidence {
            let _ = writeln!(o, "     - {}", evidence_line(e));
        }
        let _ = writeln!(o, "   fix: {}", f.fix.summary);
        for s in &f.fix.steps {
            let _ = writeln!(o, "     - {s}");
        }
        let _ = writeln!(
            o,
            "   gain: {} — {:.3e} cycles at stake, {:.1} % of the run",
            gain_range(f),
            f.gain.cycles_at_stake,
            100.0 * f.gain.share_of_cycles
        );
        for s in &f.gain.assumptions {
            let _ = writeln!(o, "     - assumes {s}");
        }
    }
    if a.findings.len() > shown {
        let _ = writeln!(
            o,
            "\n... {} more findings (--all)",
            a.findings.len() - shown
        );
    }
    if !a.ruled_out.is_empty() {
        let _ = writeln!(o, "\nRuled out:");
        for r in &a.ruled_out {
            let kind = match r.kind {
                RuledOutKind::NotFound => "not found",
                RuledOutKind::InsufficientEvidence => "insufficient evidence",
            };
            let _ = writeln!(o, "  {:<18} {kind}: {}", r.class.name(), r.reason);
        }
    }
    if let Some(v) = &a.verification {
        o.push_str(&verification(v));
    }
    o
}

/// `spelunk advise --verify`: predicted against re-emulated gain, one row per finding checked.
pub fn verification(v: &Verification) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "
Counterfactual check (--verify): {} run again under the emulator with the \
         recording's options ({}), then with each finding's cause removed",
        v.command.join(" "),
        v.emulator_options.join(" ")
    );
    let recorded = v
        .recorded_cycles
        .map_or(String::new(), |c| format!(" (the recording: {c:.4e})"));
    let _ = writeln!(o, "  baseline: {:.4e} cycles{recorded}", v.baseline_cycles);
    let _ = writeln!(
        o,
        "  {:<3} {:<18} {:<30} {:>12} {:<8} counterfactual",
        "#", "class", "predicted (low-upper, likely)", "re-emulated", "verdict"
    );
    for c in &v.checks {
        let predicted = format!(
            "{}-{} ({})",
            speedup(c.predicted_low),
            speedup(c.predicted_upper),
            speedup(c.predicted_likely)
        );
        let got = c.reemulated_speedup.map_or("-".into(), speedup);
        let verdict = match c.verdict {
            CheckVerdict::Within => "within",
            CheckVerdict::Below => "below",
            CheckVerdict::Above => "above",
            CheckVerdict::NotRun => "not run",
        };
        let what = match (&c.note, c.knobs.is_empty()) {
            (Some(n), true) => n.clone(),
            (Some(n), false) => format!("{}: {n}", c.counterfactual),
            (None, _) => format!("{} [{}]", c.counterfactual, c.knobs.join(" ")),
        };
        let _ = writeln!(
            o,
            "  {:<3} {:<18} {:<30} {:>12} {:<8} {what}",
            c.finding + 1,
            c.class.name(),
            predicted,
            got,
            verdict
        );
    }
    o
}
