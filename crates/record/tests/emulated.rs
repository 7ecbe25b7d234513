//! `spelunk record --emulate`'s library path, end to end: a real program (workloads/stream)
//! runs under the emulator, its trace is converted, and the perf.data and sidecar are checked
//! against two independent readings:
//!
//! - the emulator's own trace, read by spelunk-emutrace (the samples as the tool wrote them,
//!   its phase pairing, its counter totals): every decoded sample equals a trace sample;
//! - Linux perf 6.1: `perf report -D` accepts the file and `perf script` prints exactly the
//!   samples spelunk's decode predicts (the rules of crates/testkit/src/perf61.rs).
//!
//! Hand-known values: stream -i 2 -t 2 opens 2 x (1 init + 4 kernels x 2 iterations) = 18
//! phases; its arrays of 100 000 doubles are 800 000 bytes each.
//!
//! The tool and the workloads must be built (`emulator/test.sh` does both and sets
//! SPELUNK_REQUIRE_EMULATOR=1); otherwise these tests are skipped.

use spelunk_emutrace::{events, Trace};
use spelunk_perf::sidecar::Sidecar;
use spelunk_record::emulator::{self, tool_name, EmulatorInstall, EmulatorOptions};
use spelunk_record::{convert, Conversion};
use spelunk_testkit::decode_all;
use spelunk_testkit::perf61::{parse_script, perf, predict_script, ScriptSample, SCRIPT_FIELDS};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The tool's VALGRIND_LIB directory and the workloads, or None (skip) when not built.
fn setup() -> Option<(EmulatorInstall, PathBuf)> {
    let lib = root().join("emulator/build/lib");
    let wl = root().join("workloads/build");
    if lib.join(tool_name()).exists() && wl.join("stream").exists() {
        return Some((
            EmulatorInstall {
                lib_dir: lib,
                valgrind: PathBuf::from("valgrind"),
            },
            wl,
        ));
    }
    if std::env::var_os("SPELUNK_REQUIRE_EMULATOR").is_some() {
        panic!("emulator or workloads not built: run emulator/test.sh");
    }
    eprintln!("skipped: emulator not built (run emulator/test.sh)");
    None
}

struct Recorded {
    dir: PathBuf,
    trace: PathBuf,
    data: PathBuf,
    conv: Conversion,
}

/// One emulated STREAM run shared by the tests (kept under the target dir for inspection).
fn recorded() -> Option<&'static Recorded> {
    static R: OnceLock<Option<Recorded>> = OnceLock::new();
    R.get_or_init(|| {
        let (install, wl) = setup()?;
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("record-emulated");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let trace = dir.join("stream.emutrace");
        let data = dir.join("stream.data");
        let cmd: Vec<OsString> = [
            wl.join("stream").into_os_string(),
            "-n".into(),
            "100000".into(),
            "-i".into(),
            "2".into(),
            "-t".into(),
            "2".into(),
        ]
        .into();
        let run = emulator::run(&install, &EmulatorOptions::default(), &trace, &cmd).unwrap();
        assert!(
            run.status.success(),
            "{:?} {}",
            run.status,
            run.valgrind_log
        );
        let conv = convert(&trace, &data, &["spelunk".into(), "record".into()]).unwrap();
        assert!(conv.warnings.is_empty(), "{:?}", conv.warnings);
        Some(Recorded {
            dir,
            trace,
            data,
            conv,
        })
    })
    .as_ref()
}

#[test]
fn every_trace_sample_decodes_from_the_perf_data() {
    let Some(r) = recorded() else { return };
    let t = Trace::load(&r.trace).unwrap();
    assert_eq!(t.config.timer_hz, 1_000_000_000, "1 GHz timer: ns = ticks");
    let pid = t.process.as_ref().unwrap().pid;
    assert!(t.samples.len() > 1000, "{} samples", t.samples.len());
    assert_eq!(r.conv.samples, t.samples.len() as u64);

    let mut want: Vec<(u32, u64, u32, String)> = t
        .samples
        .iter()
        .map(|s| {
            (
                u32::from(s.core),
                s.timestamp(),
                s.tid,
                format!("{:?}", s.record),
            )
        })
        .collect();
    let mut got: Vec<(u32, u64, u32, String)> = decode_all(&r.data)
        .iter()
        .map(|s| {
            assert_eq!(s.pid, Some(pid));
            (
                s.cpu.unwrap(),
                s.time_ns.unwrap(),
                s.tid.unwrap(),
                format!("{:?}", s.record),
            )
        })
        .collect();
    want.sort();
    got.sort();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
    // Both threads ran on their own virtual core.
    let cpus: std::collections::BTreeSet<u32> = got.iter().map(|g| g.0).collect();
    assert_eq!(cpus.len(), 2);
}

#[test]
fn perf_reads_the_emulated_recording_as_spelunk_does() {
    let Some(r) = recorded() else { return };
    let data = r.data.to_str().unwrap();
    let (out, err, ok) = perf(&["report", "-D", "-i", data]);
    assert!(ok, "perf report -D failed: {err}");
    let aux = out
        .lines()
        .filter(|l| l.contains("PERF_RECORD_AUXTRACE size:"))
        .count();
    assert!(
        aux >= 2,
        "expected AUXTRACE buffers of both CPUs, saw {aux}"
    );

    let mut want: Vec<ScriptSample> = decode_all(&r.data)
        .iter()
        .flat_map(predict_script)
        .collect();
    let (out, err, ok) = perf(&["script", "-i", data, "-F", SCRIPT_FIELDS, "--ns"]);
    assert!(ok, "perf script failed: {err}");
    let mut got = parse_script(&out);
    want.sort();
    got.sort();
    assert_eq!(got.len(), want.len(), "perf script sample count");
    assert!(got == want, "perf script disagrees with spelunk's decode");
}

#[test]
fn sidecar_carries_phases_objects_counters_and_truth() {
    let Some(r) = recorded() else { return };
    let t = Trace::load(&r.trace).unwrap();
    let sc = Sidecar::find(&r.data).unwrap().expect("sidecar written");
    assert_eq!(sc.source, "emulator");
    assert_eq!(sc.exit_status, Some(0));
    assert!(sc.command[0].ends_with("stream"));

    // 2 threads x (init + 4 kernels x 2 iterations).
    assert_eq!(sc.phases.len(), 18);
    let mut names: Vec<&str> = sc.phases.iter().map(|p| p.name.as_str()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names, ["add", "copy", "init", "scale", "triad"]);
    let mut ours: Vec<(u32, u64, u64, String)> = sc
        .phases
        .iter()
        .map(|p| (p.tid, p.start_ns, p.end_ns, p.name.clone()))
        .collect();
    let mut theirs: Vec<(u32, u64, u64, String)> = t
        .phases()
        .iter()
        .map(|p| (p.tid, p.begin, p.end, p.name.clone()))
        .collect();
    ours.sort();
    theirs.sort();
    assert_eq!(ours, theirs);
    assert!(sc.phases.iter().all(|p| p.start_ns < p.end_ns));

    let mut objs: Vec<(&str, u64)> = sc
        .objects
        .iter()
        .map(|o| (o.name.as_str(), o.size))
        .collect();
    objs.sort();
    assert_eq!(objs, [("a", 800_000), ("b", 800_000), ("c", 800_000)]);
    for o in &sc.objects {
        assert_eq!(Some(o.address), t.object(&o.name).map(|a| a.addr));
        assert_eq!(o.until_ns, u64::MAX, "stream never frees its arrays");
    }

    // Counter totals are the sums of the final snapshots, as the trace reader computes them.
    for (code, name) in [
        (events::INST_RETIRED, "INST_RETIRED"),
        (events::MEM_ACCESS, "MEM_ACCESS"),
        (events::CPU_CYCLES, "CPU_CYCLES"),
    ] {
        assert_eq!(sc.counters.totals.get(name), Some(&t.total(code)), "{name}");
        assert!(t.total(code) > 0);
    }
    assert_eq!(sc.counters.timeline.len(), t.counters.len());
    assert!(sc
        .counters
        .events
        .iter()
        .all(|(code, _)| !events::is_truth(*code)));
    let truth = sc.truth.as_ref().unwrap();
    assert_eq!(truth.objects.len(), t.objects.len());
    assert_eq!(
        truth.totals.get("SAMPLES_WRITTEN"),
        Some(&(t.samples.len() as u64))
    );
    assert!(truth.totals.keys().any(|k| k.starts_with("TRUTH_")));
}

#[test]
fn a_truncated_trace_keeps_what_was_written() {
    let Some(r) = recorded() else { return };
    let full = std::fs::read(&r.trace).unwrap();
    let cut = r.dir.join("cut.emutrace");
    std::fs::write(&cut, &full[..full.len() / 2 + 13]).unwrap();
    let data = r.dir.join("cut.data");
    let conv = convert(&cut, &data, &[]).unwrap();
    assert!(!conv.complete);
    assert!(
        conv.warnings.iter().any(|w| w.contains("cut.emutrace")),
        "{:?}",
        conv.warnings
    );
    assert!(conv.samples > 0 && conv.samples < r.conv.samples);
    assert_eq!(decode_all(&data).len() as u64, conv.samples);
}

#[test]
fn a_file_that_is_not_a_trace_is_refused_by_name() {
    let Some(r) = recorded() else { return };
    let bogus = r.dir.join("bogus.emutrace");
    std::fs::write(&bogus, b"this is not an emulator trace at all").unwrap();
    let err = convert(&bogus, &r.dir.join("bogus.data"), &[]).unwrap_err();
    assert!(err.to_string().contains("bogus.emutrace"), "{err}");
}
