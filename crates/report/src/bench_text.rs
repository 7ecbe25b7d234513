//! `spelunk bench`'s outputs: the terminal table, JUnit XML (one test case per benchmark ×
//! metric), GitHub Actions workflow-command annotations at the top cause's source line, and a
//! Markdown summary silent about unchanged benchmarks (docs/bench.md, "Outputs").

use crate::html::html_text;
use crate::text_table::Table;
use spelunk_analysis::bench::{
    figure, BenchComparison, BenchStatus, BenchmarkComparison, BenchmarkRun, Metric,
    MetricComparison, MetricStatus, METRICS,
};
use std::fmt::Write as _;
use std::path::Path;

fn value(m: Metric, v: Option<f64>) -> String {
    v.map_or_else(|| "not counted".into(), |v| figure(m, v))
}

fn change(c: &MetricComparison) -> String {
    match (c.delta, c.delta_pct) {
        (Some(_), Some(p)) => format!("{p:+.2}%"),
        (Some(d), None) => format!("{:+}", figure(c.metric, d)),
        _ => String::new(),
    }
}

fn threshold(c: &MetricComparison) -> String {
    format!(
        "{}% / {}",
        c.threshold.pct,
        figure(c.metric, c.threshold.floor)
    )
}

fn status(s: MetricStatus) -> &'static str {
    match s {
        MetricStatus::Unchanged => "ok",
        MetricStatus::Improved => "improved",
        MetricStatus::Regressed => "REGRESSED",
        MetricStatus::NotCounted => "not counted",
    }
}

fn bench_status(b: &BenchmarkComparison) -> &'static str {
    match b.status {
        BenchStatus::Regressed if b.accepted => "regressed (accepted into the baseline)",
        BenchStatus::Regressed => "REGRESSED",
        BenchStatus::Improved => "improved",
        BenchStatus::Unchanged => "within thresholds",
        BenchStatus::Refused => "REFUSED: the environment changed",
        BenchStatus::New => "new (not in the baseline)",
        BenchStatus::Missing => "missing (in the baseline, not run)",
    }
}

/// "L1D refills 53.3 k → 10.3 k (-80.66%)".
fn before_after(m: &MetricComparison) -> String {
    format!(
        "{} {} → {} ({})",
        m.metric.label(),
        value(m.metric, m.baseline),
        value(m.metric, m.new),
        change(m)
    )
}

/// "emulator_core was neoverse-n1, is neoverse-v2", one per changed field.
fn env_reasons(b: &BenchmarkComparison) -> Vec<String> {
    b.environment_changes
        .iter()
        .map(|e| format!("{} was {}, is {}", e.field, e.baseline, e.new))
        .collect()
}

fn env_lines(b: &BenchmarkComparison, out: &mut String) {
    for e in env_reasons(b) {
        let _ = writeln!(out, "  environment: {e}");
    }
}

/// The terminal table of a comparison: per benchmark its metrics, then each regression's
/// explanation and causes (source paths relative to `root` when under it), then the
/// improvements.
pub fn render(c: &BenchComparison, root: &Path) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "baseline {}", c.baseline_file);
    for b in &c.benchmarks {
        let _ = writeln!(out, "\n{}: {}", b.name, bench_status(b));
        env_lines(b, &mut out);
        if b.status == BenchStatus::Refused {
            let _ = writeln!(
                out,
                "  not compared: rerun the baseline in this environment, or pass \
                 --allow-env-change to compare anyway"
            );
            continue;
        }
        if b.metrics.is_empty() {
            continue;
        }
        let mut t = Table::new(&[
            ("metric", true),
            ("baseline", false),
            ("new", false),
            ("change", false),
            ("threshold", false),
            ("status", true),
        ]);
        for m in &b.metrics {
            t.row(vec![
                m.metric.label().into(),
                value(m.metric, m.baseline),
                value(m.metric, m.new),
                change(m),
                threshold(m),
                status(m.status).into(),
            ]);
        }
        let mut table = String::new();
        t.render(&mut table);
        for l in table.lines() {
            let _ = writeln!(out, "  {l}");
        }
        for m in b
            .metrics
            .iter()
            .filter(|m| m.status == MetricStatus::Regressed)
        {
            if let Some(e) = &m.explanation {
                let _ = writeln!(out, "  regression: {e}");
            }
            for k in &m.causes {
                let at = match (&k.file, k.line) {
                    (Some(f), Some(l)) => format!(" at {}:{l}", relative(f, root)),
                    _ => String::new(),
                };
                let _ = writeln!(
                    out,
                    "    {}(){at}: {} → {} (est.; noise ±{}){}",
                    k.function,
                    figure(Metric::Instructions, k.estimate_baseline),
                    figure(Metric::Instructions, k.estimate_new),
                    figure(Metric::Instructions, k.noise),
                    if (k.estimate_new - k.estimate_baseline).abs() < k.noise {
                        " within noise"
                    } else {
                        ""
                    }
                );
            }
        }
        for m in b
            .metrics
            .iter()
            .filter(|m| m.status == MetricStatus::Improved)
        {
            let _ = writeln!(out, "  improvement: {}", before_after(m));
        }
    }
    out
}

/// What `--save` wrote: per benchmark its metrics.
pub fn saved(path: &Path, runs: &[BenchmarkRun]) -> String {
    let mut out = format!("wrote the baseline {}\n", path.display());
    for r in runs {
        let _ = writeln!(
            out,
            "\n{} ({}; exit {})",
            r.name, r.environment.emulator_core, r.exit_code
        );
        let mut t = Table::new(&[("metric", true), ("value", false)]);
        for m in METRICS {
            t.row(vec![
                m.label().into(),
                value(m, r.metrics.get(&m).copied().flatten()),
            ]);
        }
        let mut table = String::new();
        t.render(&mut table);
        for l in table.lines() {
            let _ = writeln!(out, "  {l}");
        }
    }
    out
}

/// JUnit XML: a test suite per benchmark, a test case per metric (`classname` the benchmark,
/// `name` the metric); a regression is a `<failure>`, a refused environment an `<error>`, a
/// metric not counted `<skipped>` (the common JUnit XML schema's elements).
pub fn junit(c: &BenchComparison) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let count = |f: &dyn Fn(&BenchmarkComparison, &MetricComparison) -> bool| {
        c.benchmarks
            .iter()
            .flat_map(|b| b.metrics.iter().map(move |m| (b, m)))
            .filter(|(b, m)| f(b, m))
            .count()
    };
    let failed = |b: &BenchmarkComparison, m: &MetricComparison| {
        m.status == MetricStatus::Regressed && b.status != BenchStatus::Refused && !b.accepted
    };
    let errored = |b: &BenchmarkComparison, _: &MetricComparison| b.status == BenchStatus::Refused;
    let skipped = |b: &BenchmarkComparison, m: &MetricComparison| {
        m.status == MetricStatus::NotCounted && b.status != BenchStatus::Refused
    };
    let _ = writeln!(
        out,
        "<testsuites name=\"spelunk bench\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
        count(&|_, _| true),
        count(&failed),
        count(&errored),
        count(&skipped)
    );
    for b in &c.benchmarks {
        let n = |f: &dyn Fn(&BenchmarkComparison, &MetricComparison) -> bool| {
            b.metrics.iter().filter(|m| f(b, m)).count()
        };
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
            html_text(&b.name),
            b.metrics.len(),
            n(&failed),
            n(&errored),
            n(&skipped)
        );
        for m in &b.metrics {
            let _ = write!(
                out,
                "    <testcase classname=\"{}\" name=\"{}\"",
                html_text(&b.name),
                m.metric.name()
            );
            let body = if errored(b, m) {
                let why = env_reasons(b);
                Some(format!(
                    "<error message=\"the environment changed: {}\"/>",
                    html_text(&why.join("; "))
                ))
            } else if failed(b, m) {
                let msg = m.explanation.clone().unwrap_or_default();
                Some(format!(
                    "<failure message=\"{}\" type=\"regression\">{}</failure>",
                    html_text(&msg),
                    html_text(&causes_text(m))
                ))
            } else if skipped(b, m) {
                Some("<skipped message=\"not counted\"/>".into())
            } else {
                None
            };
            match body {
                Some(x) => {
                    let _ = writeln!(out, ">\n      {x}\n    </testcase>");
                }
                None => {
                    let _ = writeln!(out, "/>");
                }
            }
        }
        let _ = writeln!(out, "  </testsuite>");
    }
    out.push_str("</testsuites>\n");
    out
}

fn causes_text(m: &MetricComparison) -> String {
    let mut s = format!(
        "{}: {} → {} (threshold {}% / {})\n",
        m.metric.label(),
        value(m.metric, m.baseline),
        value(m.metric, m.new),
        m.threshold.pct,
        figure(m.metric, m.threshold.floor)
    );
    for k in &m.causes {
        let at = match (&k.file, k.line) {
            (Some(f), Some(l)) => format!(" at {f}:{l}"),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "{}(){at}: {} → {} (estimated from samples)",
            k.function,
            figure(Metric::Instructions, k.estimate_baseline),
            figure(Metric::Instructions, k.estimate_new)
        );
    }
    s
}

/// `file` relative to `root` when it is under it (else as given).
fn relative(file: &str, root: &Path) -> String {
    let p = Path::new(file);
    p.strip_prefix(root)
        .map(|r| r.display().to_string())
        .unwrap_or_else(|_| file.to_string())
}

/// A workflow command's data: `%`, CR and LF escaped (GitHub Actions' workflow-command syntax).
fn gh_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A workflow command's property value: also `:` and `,`.
fn gh_property(s: &str) -> String {
    gh_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// GitHub Actions annotations: an `::error` per regression at its top cause's source line
/// (the path relative to `root`, the repository root), an `::error` per benchmark refused for
/// its environment, a `::notice` per improvement.
pub fn github(c: &BenchComparison, root: &Path) -> String {
    let mut out = String::new();
    for b in &c.benchmarks {
        if b.status == BenchStatus::Refused {
            let why = env_reasons(b);
            let _ = writeln!(
                out,
                "::error title={}::{}",
                gh_property(&format!("spelunk bench {}: environment changed", b.name)),
                gh_data(&why.join("; "))
            );
            continue;
        }
        for m in &b.metrics {
            let title = gh_property(&format!("spelunk bench {}: {}", b.name, m.metric.label()));
            match m.status {
                MetricStatus::Regressed if !b.accepted => {
                    let at = m
                        .causes
                        .first()
                        .and_then(|k| Some((k.file.as_deref()?, k.line?)))
                        .map(|(f, l)| format!("file={},line={l},", gh_property(&relative(f, root))))
                        .unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "::error {at}title={title}::{}",
                        gh_data(m.explanation.as_deref().unwrap_or_default())
                    );
                }
                MetricStatus::Improved => {
                    let _ = writeln!(out, "::notice title={title}::{}", gh_data(&before_after(m)));
                }
                _ => {}
            }
        }
    }
    out
}

/// A Markdown summary for `$GITHUB_STEP_SUMMARY` or a PR comment: one line for the whole, then
/// only the benchmarks that changed.
pub fn markdown(c: &BenchComparison) -> String {
    let changed: Vec<&BenchmarkComparison> = c
        .benchmarks
        .iter()
        .filter(|b| b.status != BenchStatus::Unchanged)
        .collect();
    let mut out = String::from("### spelunk bench\n\n");
    if changed.is_empty() {
        let _ = writeln!(
            out,
            "All {} benchmarks within their thresholds.",
            c.benchmarks.len()
        );
        return out;
    }
    let _ = writeln!(
        out,
        "{} of {} benchmarks changed.\n",
        changed.len(),
        c.benchmarks.len()
    );
    for b in changed {
        let _ = writeln!(out, "#### {}: {}\n", b.name, bench_status(b));
        for e in &b.environment_changes {
            let _ = writeln!(
                out,
                "- environment: `{}` was {}, is {}",
                e.field, e.baseline, e.new
            );
        }
        let moved: Vec<&MetricComparison> = b
            .metrics
            .iter()
            .filter(|m| matches!(m.status, MetricStatus::Regressed | MetricStatus::Improved))
            .collect();
        if !moved.is_empty() && b.status != BenchStatus::Refused {
            out.push_str("| metric | baseline | new | change | |\n|---|---:|---:|---:|---|\n");
            for m in &moved {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} |",
                    m.metric.label(),
                    value(m.metric, m.baseline),
                    value(m.metric, m.new),
                    change(m),
                    status(m.status)
                );
            }
            out.push('\n');
            for m in moved.iter().filter(|m| m.status == MetricStatus::Regressed) {
                if let Some(e) = &m.explanation {
                    let _ = writeln!(out, "- {e}");
                }
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workflow_command_values_are_escaped() {
        assert_eq!(gh_data("50% a\nb"), "50%25 a%0Ab");
        assert_eq!(gh_property("a:b,c"), "a%3Ab%2Cc");
        assert_eq!(relative("/r/src/a.c", Path::new("/r")), "src/a.c");
        assert_eq!(relative("src/a.c", Path::new("/r")), "src/a.c");
    }
}
