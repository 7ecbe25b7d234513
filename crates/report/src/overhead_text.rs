//! What recording cost the program (`spelunk record --overhead`), as `record`'s closing summary
//! prints it and as the report's sampling-quality block shows it: median wall and CPU times of
//! the native and the recorded runs, their range, and the slowdown ([NMO paper §VII-A]).

use spelunk_analysis::model::{Overhead, TimeSpread};
use std::fmt::Write;

fn time(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.1} us", ns / 1e3)
    }
}

fn spread(s: &TimeSpread) -> String {
    format!(
        "{} ({} to {})",
        time(s.median_ns),
        time(s.min_ns as f64),
        time(s.max_ns as f64)
    )
}

fn ratio(x: Option<f64>) -> String {
    x.map_or("not available (a native median of 0)".into(), |v| {
        format!("{v:.2}x")
    })
}

/// The overhead lines, each starting with `indent`.
pub fn lines(o: &Overhead, indent: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{indent}overhead ([NMO paper §VII-A]; {} run(s) each, {} recording; median (min to max)):",
        o.runs, o.mode
    );
    let _ = writeln!(
        s,
        "{indent}  native:   wall {}, CPU {}",
        spread(&o.native_wall),
        spread(&o.native_cpu)
    );
    let _ = writeln!(
        s,
        "{indent}  recorded: wall {}, CPU {}",
        spread(&o.recorded_wall),
        spread(&o.recorded_cpu)
    );
    let overhead = o.time_overhead.map_or(String::new(), |t| {
        format!(" (time overhead {:+.1}%)", 100.0 * t)
    });
    let _ = writeln!(
        s,
        "{indent}  slowdown: {} wall{overhead}, {} CPU",
        ratio(o.slowdown),
        ratio(o.cpu_slowdown)
    );
    s
}

/// `spelunk record --overhead`'s closing lines (stderr).
pub fn record_summary(o: &Overhead) -> String {
    let mut s = String::from("spelunk record: ");
    s.push_str(lines(o, "").trim_start());
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use spelunk_analysis::model::TimedRun;

    #[test]
    fn the_summary_names_medians_ranges_and_the_slowdown() {
        let run = |w, c| TimedRun {
            wall_ns: w,
            cpu_ns: c,
        };
        let o = Overhead::of(
            "emulated",
            vec![run(2_000_000, 1_000_000), run(4_000_000, 3_000_000)],
            vec![run(200_000_000, 100_000_000), run(400_000_000, 300_000_000)],
        );
        let s = record_summary(&o);
        assert!(
            s.starts_with("spelunk record: overhead ([NMO paper §VII-A]; 2 run(s) each, emulated")
        );
        assert!(
            s.contains("native:   wall 3.000 ms (2.000 ms to 4.000 ms), CPU 2.000 ms"),
            "{s}"
        );
        assert!(
            s.contains("slowdown: 100.00x wall (time overhead +9900.0%), 100.00x CPU"),
            "{s}"
        );
    }
}
