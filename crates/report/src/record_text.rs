//! `spelunk record`'s closing summaries: for a hardware recording, samples, AUX bytes and every
//! kind of loss, per CPU, with what to change when something was lost; for `--no-spe`, the
//! timelines' samples, peak resident memory and which counters were counted; for `--emulate`,
//! what was sampled and [NMO paper eq. 1] accuracy.

use crate::timelines_text::{mib, not_counted_lines};
use spelunk_record::flow::Recorded;
use spelunk_record::timeline::TimelineRecording;
use spelunk_record::{EmulatedRecording, HardwareRecording};
use std::fmt::Write;
use std::time::Duration;

/// The summary printed on stderr at the end of `spelunk record` (hardware SPE).
pub fn hardware_summary(r: &HardwareRecording, wall: Duration) -> String {
    let mut o = String::new();
    let t = r.total();
    let status = match &r.exit_status {
        Some(s) => match (s.code(), std::os::unix::process::ExitStatusExt::signal(s)) {
            (Some(c), _) => format!("; the command exited with status {c}"),
            (None, Some(sig)) => format!("; the command was killed by signal {sig}"),
            _ => String::new(),
        },
        None => String::new(),
    };
    let _ = writeln!(
        o,
        "spelunk record: {} SPE records ({:.1} MB of AUX data) from {} on {} CPU(s) in {:.1} s{status}",
        t.records,
        t.aux_bytes as f64 / 1e6,
        r.pmu,
        r.per_cpu.len(),
        wall.as_secs_f64()
    );
    let _ = writeln!(
        o,
        "  {:>5} {:>12} {:>12} {:>11} {:>8} {:>10} {:>13}",
        "CPU", "records", "AUX bytes", "full stops", "partial", "collisions", "lost sideband"
    );
    for (cpu, f) in &r.per_cpu {
        let _ = writeln!(
            o,
            "  {:>5} {:>12} {:>12} {:>11} {:>8} {:>10} {:>13}",
            cpu, f.records, f.aux_bytes, f.truncated, f.partial, f.collisions, f.lost_records
        );
    }
    let mb = t.aux_bytes as f64 / 1e6;
    let _ = writeln!(
        o,
        "spelunk record: the recorder used {:.1} ms of CPU while the command ran {:.1} ms{}",
        r.recorder_cpu_ns as f64 / 1e6,
        r.recorded_ns as f64 / 1e6,
        if mb > 0.0 {
            format!(
                " ({:.1} ms per MB of AUX data)",
                r.recorder_cpu_ns as f64 / 1e6 / mb
            )
        } else {
            String::new()
        }
    );
    if t.truncated > 0 {
        let _ = writeln!(
            o,
            "spelunk record: the AUX buffer filled {} time(s): SPE stopped until spelunk gave the \
             space back, so samples of those moments are missing. Use a larger --aux-pages or a \
             longer --period",
            t.truncated
        );
    }
    if t.partial > 0 {
        let _ = writeln!(
            o,
            "spelunk record: {} AUX piece(s) are flagged PARTIAL: the hardware lost data inside \
             them",
            t.partial
        );
    }
    if t.collisions > 0 {
        let _ = writeln!(
            o,
            "spelunk record: {} AUX piece(s) report sample collisions (an operation was chosen \
             while the previous sample was in flight; it was not recorded). A longer --period \
             makes them rarer",
            t.collisions
        );
    }
    if t.lost_records > 0 {
        let _ = writeln!(
            o,
            "spelunk record: the kernel dropped {} sideband record(s) (PERF_RECORD_LOST): some \
             mappings or thread names may be missing",
            t.lost_records
        );
    }
    if t.bad_bytes > 0 {
        let _ = writeln!(
            o,
            "spelunk record: {} byte(s) of the AUX data did not decode as SPE packets",
            t.bad_bytes
        );
    }
    if t.records == 0 {
        let _ = writeln!(
            o,
            "spelunk record: warning: no operation was sampled (the command ran fewer than \
             --period operations of the selected types, or the filters excluded every one)"
        );
    }
    runtime_lines(&mut o, r.runtime.as_ref());
    let _ = writeln!(
        o,
        "spelunk record: wrote {} and {}",
        r.perf_data.display(),
        r.sidecar.display()
    );
    o
}

/// The summary printed on stderr at the end of `spelunk record --no-spe`.
pub fn timelines_summary(r: &TimelineRecording, wall: Duration) -> String {
    let mut o = String::new();
    let sc = &r.sidecar;
    let status = match (
        r.exit_status.code(),
        std::os::unix::process::ExitStatusExt::signal(&r.exit_status),
    ) {
        (Some(c), _) => format!("the command exited with status {c}"),
        (None, Some(sig)) => format!("the command was killed by signal {sig}"),
        _ => "the command ended".into(),
    };
    let samples = r.capacity().map_or(0, |c| c.samples.len());
    let _ = writeln!(
        o,
        "spelunk record: {samples} sample(s), one every {} ms, over {:.2} s; {status}",
        r.interval_ns as f64 / 1e6,
        wall.as_secs_f64()
    );
    if let Some(cap) = r.capacity() {
        let p = cap.peak_per_class();
        let _ = writeln!(
            o,
            "  peak resident memory of the process tree ({}), each class at its own peak: heap \
             {}, anon {}, file {}, stack {}",
            cap.source,
            mib(p.heap_bytes),
            mib(p.anon_bytes),
            mib(p.file_bytes),
            mib(p.stack_bytes)
        );
        if let Some(s) = cap.peak_sample() {
            let nodes: Vec<String> = s
                .nodes
                .iter()
                .map(|n| match n.node {
                    Some(id) => format!("node {id} {}", mib(n.total_bytes())),
                    None => format!("node unknown {}", mib(n.total_bytes())),
                })
                .collect();
            let _ = writeln!(
                o,
                "  largest total {} at {:.3} s ({} process(es); {})",
                mib(s.all_nodes().total_bytes()),
                s.time_ns.saturating_sub(r.start_ns) as f64 / 1e9,
                s.processes,
                nodes.join(", ")
            );
        }
    }
    let c = &sc.counters;
    if !c.events.is_empty() {
        let names: Vec<&str> = c.events.iter().map(|(_, n)| n.as_str()).collect();
        let setup = ["counters_pmu", "counters_scope", "counters_grouping"]
            .iter()
            .filter_map(|k| sc.config.get(*k).and_then(|v| v.as_str()))
            .collect::<Vec<_>>()
            .join("; ");
        let _ = writeln!(o, "  counted ({setup}): {}", names.join(", "));
        if let Some(fin) = c.timeline.iter().rev().find(|s| s.reason == "final") {
            let mux: Vec<String> = names
                .iter()
                .zip(fin.time_enabled_ns.iter().zip(&fin.time_running_ns))
                .filter(|(_, (en, run))| run < en)
                .map(|(n, (en, run))| {
                    format!("{n} ({:.0}% of the time)", 100.0 * *run as f64 / *en as f64)
                })
                .collect();
            if !mux.is_empty() {
                let _ = writeln!(
                    o,
                    "  multiplexed (counted part of the time; the report scales them): {}",
                    mux.join(", ")
                );
            }
        }
    }
    for line in not_counted_lines(&c.not_counted) {
        let _ = writeln!(o, "  {line}");
    }
    let _ = writeln!(
        o,
        "spelunk record: wrote {} (no perf.data); `spelunk report {}` shows the timelines",
        r.sidecar_path.display(),
        r.sidecar_path.display()
    );
    runtime_lines(&mut o, r.runtime.as_ref());
    o
}

/// What the preloaded runtime added, or that the command did not load it.
fn runtime_lines(o: &mut String, runtime: Option<&spelunk_record::runtime_log::MergeSummary>) {
    let Some(m) = runtime else {
        return;
    };
    if m.logs == 0 {
        let _ = writeln!(
            o,
            "spelunk record: the command did not load the runtime (a statically linked program \
             ignores LD_PRELOAD): no include/spelunk.h phases or heap blocks"
        );
    } else {
        let _ = writeln!(
            o,
            "spelunk record: the runtime logged {} phase(s), {} named object(s) and {} heap \
             block(s) from {} process(es)",
            m.phases, m.objects, m.allocations, m.logs
        );
    }
    for p in &m.problems {
        let _ = writeln!(o, "spelunk record: runtime: {p}");
    }
}

/// The summary printed on stderr at the end of `spelunk record --emulate`: warnings of the
/// conversion, what was recorded, the files, the sampling quality, and a warning when nothing
/// was sampled. `period` is the requested interval (`-c`).
pub fn emulated_summary(rec: &EmulatedRecording, keep_trace: bool, period: u64) -> String {
    let conv = &rec.conversion;
    let mut o = String::new();
    for w in &conv.warnings {
        let _ = writeln!(o, "spelunk record: warning: {w}");
    }
    let size = std::fs::metadata(&conv.perf_data)
        .map(|m| m.len())
        .unwrap_or(0);
    let _ = writeln!(
        o,
        "spelunk record: {} samples from {} thread(s) on {} CPU(s), {} phase(s), {} named \
         object(s); program ran {:.1} s (wall, emulated), exited with {}",
        conv.samples,
        conv.threads,
        conv.samples_per_cpu.len(),
        conv.phases,
        conv.objects,
        rec.wall.as_secs_f64(),
        rec.exit
    );
    if !conv.pages.is_empty() {
        let _ = writeln!(o, "spelunk record: emulated {}", conv.pages);
    }
    let _ = writeln!(
        o,
        "spelunk record: wrote {} ({:.1} MB) and {}{}",
        conv.perf_data.display(),
        size as f64 / 1e6,
        conv.sidecar.display(),
        if keep_trace {
            format!(", kept {}", rec.trace.display())
        } else {
            String::new()
        }
    );
    o += &emulated_accuracy(conv, period);
    if conv.samples == 0 {
        let _ = writeln!(
            o,
            "spelunk record: warning: no operation was sampled (the program ran fewer than \
             --period {period} operations of the selected types, or the filters excluded every one)"
        );
    }
    o
}

/// The sampling-quality lines of a fresh emulated recording ([NMO paper eq. 1] accuracy with
/// the emulator's mean interval, as `spelunk report` shows them), or nothing when its sidecar
/// cannot be read back or has no counts.
fn emulated_accuracy(conv: &spelunk_record::Conversion, period: u64) -> String {
    let Ok(sc) = spelunk_perf::sidecar::Sidecar::read(&conv.sidecar) else {
        return String::new();
    };
    let sampling = spelunk_analysis::model::Sampling {
        requested_period: Some(period),
        min_interval: None,
        base_interval: None,
        jitter: conv.jitter,
        effective_interval: Some(conv.mean_interval.round() as u64),
        note: None,
    };
    spelunk_analysis::profile::sampling_quality(
        &sc,
        conv.samples,
        conv.memory_samples,
        Some(&sampling),
    )
    .map(|q| crate::text::sampling_quality_lines(&q, "spelunk record: "))
    .unwrap_or_default()
}

/// The closing summary of any recording `spelunk record` made (`keep_trace` and `period` as
/// asked, for the emulated one).
pub fn summary(rec: &Recorded, keep_trace: bool, period: u64) -> String {
    match rec {
        Recorded::Emulated(r) => emulated_summary(r, keep_trace, period),
        Recorded::Hardware { recording, wall } => hardware_summary(recording, *wall),
        Recorded::Timelines { recording, wall } => timelines_summary(recording, *wall),
    }
}
