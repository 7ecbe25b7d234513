//! What the sidecar adds to `spelunk report`: phases, objects named through the annotation
//! API, and the sampling-quality figures from recorded PMU counts. Planted recordings (samples
//! at known PCs, addresses, threads and times) with a hand-written sidecar, so every expected
//! number below is counted by hand from the plan.
//!
//! The plan (timer 1 GHz, so perf ns = ticks; thread 777 = main, 778 = worker):
//! - main thread: 100 loads in sum_array at ticks 1000..1099 touching a heap buffer at
//!   HEAP..HEAP+800, then 50 stores in fill at ticks 2000..2049 to big_array;
//! - worker: 40 loads in sum_array at ticks 1000..1039, same heap buffer.
//!
//! Phases: main "load" [1000, 1100) with nested "inner" [1050, 1100) at depth 2; main "store"
//! [2000, 2025) (only the first 25 stores); worker "load" [1000, 1020) (its first 20 loads).
//!
//! Objects: "buffer" = HEAP..HEAP+4096 named at tick 0 and freed at tick 1080.

mod planted;

use planted::*;
use spelunk_perf::sidecar::{NamedObject, Phase, Sidecar};
use std::path::Path;
use std::process::{Command, Output};

const HEAP: u64 = 0x7f00_0000_0000;
const WORKER: i32 = PID + 1;

fn spelunk(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .args(args)
        .output()
        .expect("run spelunk")
}

fn json_report(data: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["report", data.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let out = spelunk(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn phase(name: &str, tid: i32, depth: u16, a: u64, b: u64) -> Phase {
    Phase {
        name: name.into(),
        pid: Some(PID as u32),
        tid: tid as u32,
        depth,
        start_ns: a,
        end_ns: b,
    }
}

/// Writes the planted recording; returns (perf.data path, big_array address).
fn plant(dir: &Scratch) -> (std::path::PathBuf, u64) {
    let exe = compile("gcc", "objects.c", &dir.join("objects"), &[]);
    let syms = nm("nm", &exe);
    let sum = BIAS + syms["sum_array"].0 + 4;
    let fill = BIAS + syms["fill"].0 + 4;
    let big = BIAS + syms["big_array"].0;
    let mut ops = Vec::new();
    for i in 0..100u64 {
        ops.push((Op::load(sum, HEAP + 8 * i, 0, 4), 1000 + i));
    }
    for i in 0..40u64 {
        ops.push((Op::load(sum, HEAP + 8 * i, 8, 14).on(WORKER, 1), 1000 + i));
    }
    for i in 0..50u64 {
        ops.push((Op::store(fill, big + 8 * i), 2000 + i));
    }
    ops.sort_by_key(|(_, t)| *t);
    let data = dir.join("planted.data");
    let setup = Setup {
        threads: vec![(PID, "main".into()), (WORKER, "worker".into())],
        cpus: vec![0, 1],
        ..Setup::new(&exe)
    };
    write_recording(&data, &setup, &ops);
    (data, big)
}

fn sidecar() -> Sidecar {
    let mut sc = Sidecar::new("emulator");
    sc.phases = vec![
        phase("load", PID, 1, 1000, 1100),
        phase("inner", PID, 2, 1050, 1100),
        phase("load", WORKER, 1, 1000, 1020),
        phase("store", PID, 1, 2000, 2025),
    ];
    sc.objects = vec![NamedObject {
        name: "buffer".into(),
        pid: Some(PID as u32),
        address: HEAP,
        size: 4096,
        from_ns: 0,
        until_ns: 1080,
        kind: "object".into(),
    }];
    for (k, v) in [
        ("SAMPLE_POP", 1_000_000u64),
        ("SAMPLE_FEED", 1000),
        ("SAMPLE_FILTRATE", 900),
        ("SAMPLE_COLLISION", 10),
        ("MEM_ACCESS", 200_000),
    ] {
        sc.counters.totals.insert(k.into(), v);
    }
    sc
}

fn phase_row<'a>(r: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    r["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no phase {name}"))
}

#[test]
fn phases_objects_and_sampling_quality_from_the_sidecar() {
    let dir = Scratch::new("sidecar-report");
    let (data, _) = plant(&dir);
    sidecar().write(&Sidecar::path_for(&data)).unwrap();
    let r = json_report(&data, &[]);
    assert_eq!(r["recording"]["samples_selected"], 190);
    assert_eq!(
        r["recording"]["emulated"], true,
        "the sidecar's source is the emulator"
    );

    // "load": main's 100 loads + worker's first 20 = 120, over 2 instances on 2 threads.
    let load = phase_row(&r, "load");
    assert_eq!(load["samples"], 120);
    assert_eq!(load["loads"], 120);
    assert_eq!(load["instances"], 2);
    assert_eq!(load["threads"], 2);
    assert_eq!(load["duration_ns"], 100 + 20);
    // First sample at tick 1000: the phase starts there and ends at 1100.
    assert_eq!(load["start_ns"], 0);
    assert_eq!(load["end_ns"], 100);
    // Worker loads are L2 (data source 8): 20 of the phase's 120 loads.
    assert_eq!(load["sources"][1]["loads"], 20);
    // "inner": main's loads at ticks 1050..1099 = 50 (also counted in "load").
    assert_eq!(phase_row(&r, "inner")["samples"], 50);
    // "store": stores at 2000..2024 = 25.
    let store = phase_row(&r, "store");
    assert_eq!(store["samples"], 25);
    assert_eq!(store["stores"], 25);
    // Rows sorted by samples; one span per instance for the timeline.
    let names: Vec<&str> = r["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["load", "inner", "store"]);
    assert_eq!(r["phase_spans"].as_array().unwrap().len(), 4);

    // "buffer" until tick 1080: main's loads at 1000..1079 (80) + all 40 worker loads.
    let buffer = r["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "buffer")
        .expect("annotated object");
    assert_eq!(buffer["kind"], "annotated");
    assert_eq!(buffer["size"], 4096);
    assert_eq!(buffer["loads"], 80 + 40);
    let big = r["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "big_array")
        .unwrap();
    assert_eq!(big["stores"], 50);

    // [SPE methodology table 2.2] and [NMO paper eq. 1]: interval -c 1024 without jitter = 1025;
    // memory samples 140 loads + 50 stores = 190; 190 x 1025 = 194750;
    // accuracy = 1 - |200000 - 194750| / 200000 = 0.97375.
    let q = &r["recording"]["sampling_quality"];
    assert_eq!(q["sampling_ratio"], 0.001);
    assert_eq!(q["filter_ratio"], 0.9);
    assert_eq!(q["collision_ratio"], 0.00001);
    assert_eq!(q["memory_samples"], 190);
    assert_eq!(q["interval"], 1025);
    assert_eq!(q["estimated_mem_access"], 194_750);
    assert!((q["accuracy"].as_f64().unwrap() - 0.97375).abs() < 1e-12);
    // The sampler claims 900 records; the file holds 190.
    assert!(q["notes"][0]
        .as_str()
        .unwrap()
        .contains("wrote 900 records"));

    // --phase selects the samples taken inside the phase, on its thread.
    let only = json_report(&data, &["--phase", "load"]);
    assert_eq!(only["recording"]["samples_selected"], 120);
    assert_eq!(only["filter"][0], "phase load");
    let only = json_report(&data, &["--phase", "store", "--event", "store"]);
    assert_eq!(only["recording"]["samples_selected"], 25);

    // The terminal report shows the phases and the accuracy line.
    let out = spelunk(&["report", data.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Phases"), "{text}");
    assert!(
        text.contains("accuracy ([NMO paper eq. 1]): 97.4%"),
        "{text}"
    );
}

#[test]
fn phase_errors_name_what_exists() {
    let dir = Scratch::new("sidecar-errors");
    let (data, _) = plant(&dir);
    // No sidecar: --phase cannot work, and says why.
    let out = spelunk(&["report", data.to_str().unwrap(), "--phase", "load"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no sidecar"));
    sidecar().write(&Sidecar::path_for(&data)).unwrap();
    let out = spelunk(&["report", data.to_str().unwrap(), "--phase", "nope"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("load, inner, store"), "{err}");
    // The other commands take --phase too.
    let out = spelunk(&["c2c", data.to_str().unwrap(), "--phase", "nope"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such phase"));
}

/// A damaged sidecar is never dropped silently: every command that reads it refuses, naming
/// the sidecar and the way on; with --ignore-sidecar the recording is analysed without it, a
/// warning says so and the losses list it.
#[test]
fn a_damaged_sidecar_is_an_error_or_ignored_loudly() {
    let dir = Scratch::new("sidecar-damaged");
    let (data, _) = plant(&dir);
    let side = Sidecar::path_for(&data);
    std::fs::write(&side, b"{ not json").unwrap();
    let path = data.to_str().unwrap();
    for cmd in [
        vec!["report", path],
        vec!["c2c", path],
        vec!["estimate", "latency", path],
        vec!["annotate", "main", path],
        vec!["diff", path, path],
    ] {
        let out = spelunk(&cmd);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{cmd:?}");
        assert!(err.contains(&*side.to_string_lossy()), "{cmd:?}: {err}");
        assert!(err.contains("not a spelunk sidecar"), "{cmd:?}: {err}");
        assert!(err.contains("--ignore-sidecar"), "{cmd:?}: {err}");
    }
    let out = spelunk(&["report", path, "--json", "--ignore-sidecar"]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning") && err.contains("sidecar not used"),
        "{err}"
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["recording"]["samples_selected"], 190);
    let problems = r["recording"]["losses"]["problems"].as_array().unwrap();
    assert!(
        problems
            .iter()
            .any(|p| p.as_str().unwrap().contains("sidecar not used")),
        "{problems:?}"
    );
    assert!(r["phases"].as_array().unwrap().is_empty());
    assert_eq!(r["recording"]["emulated"], false);
    assert!(r["recording"]["sampling_quality"].is_null());
    // The text report shows the same line in its LOSSES block.
    let out = spelunk(&["report", path, "--ignore-sidecar"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("LOSSES") && text.contains("sidecar not used"),
        "{text}"
    );
}
