//! Import of a spelunk sidecar's counters (what `spelunk record --emulate` writes): totals,
//! per-core scopes, interval timelines and phase scopes, on hand-written sidecars whose counts
//! are chosen so the arithmetic can be done by hand. Expected values are written out as
//! decimals in the comments, never recomputed with the formulas under test.

use serde_json::json;
use spelunk_perf::sidecar::Sidecar;
use spelunk_pmu::compute::{Selection, StageFilter};
use spelunk_pmu::report::{import_report, ImportOptions, Report, ScopeReport};
use spelunk_pmu::sidecar::{self, SidecarImport};
use spelunk_pmu::{catalog, PmuError};

/// Value columns of the sidecars below.
fn events() -> serde_json::Value {
    json!([
        [17, "CPU_CYCLES"],
        [8, "INST_RETIRED"],
        [36, "STALL_BACKEND"],
        [35, "STALL_FRONTEND"],
        [4, "L1D_CACHE"],
        [3, "L1D_CACHE_REFILL"],
        [4660, "MYSTERY"]
    ])
}

fn snap(tid: u32, cpu: u32, time_ns: u64, reason: &str, v: [u64; 7]) -> serde_json::Value {
    json!({"tid": tid, "cpu": cpu, "time_ns": time_ns, "reason": reason, "values": v})
}

/// Two cores. Thread 100 on CPU0 runs phase "work" from 1000 to 3000 ns; thread 101 on CPU1.
///
/// | column           | CPU0 final | CPU1 final | total | work (3000 - 1000 ns on CPU0) |
/// |------------------|-----------:|-----------:|------:|------------------------------:|
/// | CPU_CYCLES       |       6000 |       4000 | 10000 | 5000 - 1000 = 4000            |
/// | INST_RETIRED     |       4000 |       6000 | 10000 | 2500 -  500 = 2000            |
/// | STALL_BACKEND    |       2300 |        200 |  2500 | 2200 -  200 = 2000            |
/// | STALL_FRONTEND   |        100 |        200 |   300 |   70 -   50 =   20            |
/// | L1D_CACHE        |        900 |       2000 |  2900 |  600 -  100 =  500            |
/// | L1D_CACHE_REFILL |        120 |         20 |   140 |  110 -   10 =  100            |
fn two_cores() -> serde_json::Value {
    json!({
        "schema": "spelunk-sidecar/1",
        "source": "emulator",
        "command": ["./app"],
        "exit_status": 0,
        "config": {"cpu_name": "Neoverse N1", "midr": "0x413fd0c1"},
        "phases": [
            {"name": "work", "pid": 100, "tid": 100, "depth": 1, "start_ns": 1000, "end_ns": 3000}
        ],
        "objects": [],
        "counters": {
            "events": events(),
            "timeline": [
                snap(100, 0, 0, "thread-start", [0; 7]),
                snap(101, 1, 500, "thread-start", [0; 7]),
                snap(100, 0, 1000, "annotation", [1000, 500, 200, 50, 100, 10, 1]),
                snap(100, 0, 2000, "periodic", [3000, 1500, 1200, 60, 400, 90, 2]),
                snap(101, 1, 2500, "periodic", [2000, 3000, 100, 100, 1000, 5, 3]),
                snap(100, 0, 3000, "annotation", [5000, 2500, 2200, 70, 600, 110, 4]),
                snap(101, 1, 3500, "thread-exit", [4000, 6000, 200, 200, 2000, 20, 5]),
                snap(100, 0, 4000, "thread-exit", [6000, 4000, 2300, 100, 900, 120, 6]),
                snap(0, 0, 4000, "final", [6000, 4000, 2300, 100, 900, 120, 6]),
                snap(0, 1, 3500, "final", [4000, 6000, 200, 200, 2000, 20, 5])
            ],
            "totals": {
                "CPU_CYCLES": 10000, "INST_RETIRED": 10000, "STALL_BACKEND": 2500,
                "STALL_FRONTEND": 300, "L1D_CACHE": 2900, "L1D_CACHE_REFILL": 140, "MYSTERY": 11
            }
        },
        "truth": null
    })
}

fn sidecar(v: serde_json::Value) -> Sidecar {
    serde_json::from_value(v).expect("a valid sidecar")
}

fn report(sc: &Sidecar, interval_ns: Option<u64>, per: bool) -> Result<Report, PmuError> {
    let choice = sidecar::catalog_for(sc, "t.json")?;
    let cat = &choice.catalog;
    let imported = sidecar::import(sc, "t.json", cat, SidecarImport { interval_ns })?;
    let sel = Selection::resolve(
        cat,
        StageFilter::All,
        &[
            "Cycle_Accounting".into(),
            "General".into(),
            "MPKI".into(),
            "Miss_Ratio".into(),
        ],
        &[],
    )?;
    Ok(import_report(
        &imported,
        cat,
        &sel,
        ImportOptions {
            file: "t.json",
            per_scope: per,
            per_phase: per,
            slots: None,
            notes: Vec::new(),
        },
    ))
}

fn scope<'a>(r: &'a Report, name: &str) -> &'a ScopeReport {
    r.scopes
        .iter()
        .find(|s| s.scope == name)
        .unwrap_or_else(|| {
            panic!(
                "no scope {name}: {:?}",
                r.scopes.iter().map(|s| &s.scope).collect::<Vec<_>>()
            )
        })
}

#[track_caller]
fn close(s: &ScopeReport, metric: &str, want: f64) {
    let v = s
        .totals
        .metric(metric)
        .and_then(|m| m.value)
        .unwrap_or_else(|| panic!("{}: {metric} has no value", s.scope));
    assert!(
        (v - want).abs() < 1e-9,
        "{}: {metric} = {v}, want {want}",
        s.scope
    );
}

#[test]
fn totals_by_hand() {
    let r = report(&sidecar(two_cores()), None, false).unwrap();
    assert_eq!(r.scopes.len(), 1);
    let all = &r.scopes[0];
    assert_eq!(all.scope, "all (sum of CPU0, CPU1)");
    // The MIDR 0x413fd0c1 (implementer 0x41, part 0xd0c) is a Neoverse N1: no --cpu needed.
    assert_eq!(all.cpu.catalog, "neoverse-n1");
    assert_eq!(r.source.kind, "import");
    assert_eq!(
        r.source.detail,
        "t.json (spelunk sidecar, emulated Neoverse N1)"
    );
    // IPC = INST_RETIRED / CPU_CYCLES = 10000 / 10000 = 1
    close(all, "ipc", 1.0);
    // back end = 2500 / 10000 * 100 = 25 % (over the 20 % threshold: the bottleneck)
    close(all, "backend_stalled_cycles", 25.0);
    // front end = 300 / 10000 * 100 = 3 %
    close(all, "frontend_stalled_cycles", 3.0);
    // L1D MPKI = 140 / 10000 * 1000 = 14; miss ratio = 140 / 2900 = 0.0482758620689655
    close(all, "l1d_cache_mpki", 14.0);
    close(all, "l1d_cache_miss_ratio", 0.048_275_862_068_965_5);
    assert_eq!(all.totals.bottleneck_path, vec!["backend_stalled_cycles"]);
    // Emulated counts are counted all the time.
    let ipc = all.totals.metric("ipc").unwrap();
    assert_eq!(ipc.running_fraction, Some(1.0));
    // Events the sidecar does not have are missing (n/a), never 0.
    let br = all.totals.metric("branch_mpki").unwrap();
    assert_eq!(br.value, None);
    assert!(br
        .missing_events
        .contains(&"BR_MIS_PRED_RETIRED".to_string()));
    // The unknown column and the emulated origin are said, and the phase is offered.
    let notes = r.notes.join("\n");
    assert!(notes.contains("MYSTERY (0x1234)"), "{notes}");
    assert!(notes.contains("emulated"), "{notes}");
    assert!(
        notes.contains("1 annotated phase(s) (work): --per-phase"),
        "{notes}"
    );
}

#[test]
fn per_core_and_phase_scopes_by_hand() {
    let r = report(&sidecar(two_cores()), None, true).unwrap();
    let names: Vec<&str> = r.scopes.iter().map(|s| s.scope.as_str()).collect();
    assert_eq!(
        names,
        ["all (sum of CPU0, CPU1)", "CPU0", "CPU1", "phase work"]
    );
    let c0 = scope(&r, "CPU0");
    // CPU0: IPC = 4000 / 6000 = 0.666...; back end = 2300 / 6000 * 100 = 38.333... %
    close(c0, "ipc", 0.666_666_666_666_666_6);
    close(c0, "backend_stalled_cycles", 38.333_333_333_333_33);
    let c1 = scope(&r, "CPU1");
    // CPU1: IPC = 6000 / 4000 = 1.5; back end = 200 / 4000 * 100 = 5 %; no bottleneck
    close(c1, "ipc", 1.5);
    close(c1, "backend_stalled_cycles", 5.0);
    assert!(c1.totals.bottleneck_path.is_empty());
    let w = scope(&r, "phase work");
    // work = end snapshot - begin snapshot on CPU0:
    // IPC = 2000 / 4000 = 0.5; back end = 2000 / 4000 * 100 = 50 %; front end = 20 / 4000 *
    // 100 = 0.5 %; L1D MPKI = 100 / 2000 * 1000 = 50; L1D miss ratio = 100 / 500 = 0.2
    close(w, "ipc", 0.5);
    close(w, "backend_stalled_cycles", 50.0);
    close(w, "frontend_stalled_cycles", 0.5);
    close(w, "l1d_cache_mpki", 50.0);
    close(w, "l1d_cache_miss_ratio", 0.2);
    assert!(
        w.cpu
            .notes
            .iter()
            .any(|n| n.contains("1 instance(s) on 1 thread(s), 2.0 µs")),
        "{:?}",
        w.cpu.notes
    );
}

#[test]
fn intervals_by_hand() {
    // -I of 2000 ns over a run ending at 4000 ns: boundaries 2000 and 4000. Each core's count
    // at a boundary is its latest snapshot at or before it:
    //   CPU0 at 2000: the periodic one (3000 cycles, 1500 inst, 1200 back-end); at 4000: final
    //   CPU1 at 2000: thread start (all 0);                                    at 4000: final
    // interval 1: cycles 3000 + 0 = 3000, inst 1500 -> IPC 0.5, back end 1200 / 3000 = 40 %
    // interval 2: cycles (6000 - 3000) + 4000 = 7000, inst (4000 - 1500) + 6000 = 8500
    //   -> IPC 8500 / 7000 = 1.2142857142857142, back end (1100 + 200) / 7000 = 18.571428... %
    let r = report(&sidecar(two_cores()), Some(2000), true).unwrap();
    let all = &r.scopes[0];
    let t: Vec<f64> = all.intervals.iter().map(|i| i.time_s).collect();
    assert_eq!(t, [2000e-9, 4000e-9]);
    let v = |k: usize, m: &str| all.intervals[k].metrics[m].expect("value");
    assert!((v(0, "ipc") - 0.5).abs() < 1e-12);
    assert!((v(0, "backend_stalled_cycles") - 40.0).abs() < 1e-9);
    assert!((v(1, "ipc") - 1.214_285_714_285_714_2).abs() < 1e-12);
    assert!((v(1, "backend_stalled_cycles") - 18.571_428_571_428_57).abs() < 1e-9);
    assert_eq!(all.intervals[0].bottleneck, vec!["backend_stalled_cycles"]);
    assert!(all.intervals[1].bottleneck.is_empty());
    // CPU1 has no snapshot in the first interval: nothing counted, so 0/0 = n/a, not 0.
    let c1 = scope(&r, "CPU1");
    assert_eq!(c1.intervals[0].metrics["ipc"], None);
    // An interval longer than the run gives one interval equal to the totals.
    let r = report(&sidecar(two_cores()), Some(1_000_000), false).unwrap();
    assert_eq!(r.scopes[0].intervals.len(), 1);
    assert_eq!(r.scopes[0].intervals[0].time_s, 4000e-9);
    assert!((r.scopes[0].intervals[0].metrics["ipc"].unwrap() - 1.0).abs() < 1e-12);
}

#[test]
fn phases_ending_and_beginning_at_the_same_time_nested_and_left_open() {
    // Thread 7 on CPU2: "a" from 100 to 200, "b" from 200 to 300 (the end of a and the begin of
    // b share a time stamp: the first snapshot there is a's end, the second b's begin), "a"
    // again from 300 to 400 with a recursive "a" inside (310-320, depth 2) that must not be
    // counted twice, and "tail" begun at 400 and never ended (counted to the thread's exit).
    let mut v = two_cores();
    v["phases"] = json!([
        {"name": "a", "pid": 7, "tid": 7, "depth": 1, "start_ns": 100, "end_ns": 200},
        {"name": "b", "pid": 7, "tid": 7, "depth": 1, "start_ns": 200, "end_ns": 300},
        {"name": "a", "pid": 7, "tid": 7, "depth": 1, "start_ns": 300, "end_ns": 400},
        {"name": "a", "pid": 7, "tid": 7, "depth": 2, "start_ns": 310, "end_ns": 320},
        {"name": "tail", "pid": 7, "tid": 7, "depth": 1, "start_ns": 400, "end_ns": 900}
    ]);
    let tl = v["counters"]["timeline"].as_array_mut().unwrap();
    for s in [
        snap(7, 2, 0, "thread-start", [0; 7]),
        snap(7, 2, 100, "annotation", [100, 10, 0, 0, 0, 0, 0]),
        snap(7, 2, 200, "annotation", [300, 110, 0, 0, 0, 0, 0]), // end a
        snap(7, 2, 200, "annotation", [303, 111, 0, 0, 0, 0, 0]), // begin b
        snap(7, 2, 300, "annotation", [703, 311, 0, 0, 0, 0, 0]), // end b
        snap(7, 2, 300, "annotation", [706, 312, 0, 0, 0, 0, 0]), // begin a
        snap(7, 2, 310, "annotation", [730, 320, 0, 0, 0, 0, 0]), // begin a (nested)
        snap(7, 2, 320, "annotation", [760, 330, 0, 0, 0, 0, 0]), // end a (nested)
        snap(7, 2, 400, "annotation", [806, 362, 0, 0, 0, 0, 0]), // end a
        snap(7, 2, 400, "annotation", [810, 363, 0, 0, 0, 0, 0]), // begin tail
        snap(7, 2, 600, "thread-exit", [1010, 463, 0, 0, 0, 0, 0]),
        snap(0, 2, 900, "final", [1010, 463, 0, 0, 0, 0, 0]),
    ] {
        tl.push(s);
    }
    let t = v["counters"]["totals"].as_object_mut().unwrap();
    t["CPU_CYCLES"] = json!(11010);
    t["INST_RETIRED"] = json!(10463);
    let r = report(&sidecar(v), None, true).unwrap();
    // a: (300 - 100) + (806 - 706) = 300 cycles, (110 - 10) + (362 - 312) = 150 inst: IPC 0.5
    close(scope(&r, "phase a"), "ipc", 0.5);
    let a = scope(&r, "phase a");
    assert!(
        a.cpu
            .notes
            .iter()
            .any(|n| n.contains("2 instance(s)") && n.contains("1 nested")),
        "{:?}",
        a.cpu.notes
    );
    // b: 703 - 303 = 400 cycles, 311 - 111 = 200 inst: IPC 0.5 (with the snapshots swapped it
    // would be 400 / 201 or 403 / 200)
    close(scope(&r, "phase b"), "ipc", 0.5);
    // tail: to the thread's exit: 1010 - 810 = 200 cycles, 463 - 363 = 100 inst: IPC 0.5
    let tail = scope(&r, "phase tail");
    close(tail, "ipc", 0.5);
    assert!(
        tail.cpu.notes.iter().any(|n| n.contains("still open")),
        "{:?}",
        tail.cpu.notes
    );
    // CPU2 is a scope of its own: 463 / 1010 = 0.4584158415841584
    close(scope(&r, "CPU2"), "ipc", 0.458_415_841_584_158_4);
}

#[test]
fn totals_without_a_timeline() {
    // A minimal sidecar: totals only. One scope; no intervals can be made from it.
    let v = json!({
        "schema": "spelunk-sidecar/1",
        "config": {"midr": "0x410fd4f0"},
        "counters": {"events": [], "timeline": [],
                     "totals": {"CPU_CYCLES": 800, "INST_RETIRED": 1000}}
    });
    let sc = sidecar(v);
    // MIDR part 0xd4f: Neoverse V2.
    assert_eq!(
        sidecar::catalog_for(&sc, "t").unwrap().catalog.id,
        "neoverse-v2"
    );
    let r = report(&sc, None, true).unwrap();
    // IPC = 1000 / 800 = 1.25
    close(&r.scopes[0], "ipc", 1.25);
    assert_eq!(r.scopes[0].scope, "all");
    assert_eq!(r.source.detail, "t.json (spelunk sidecar)");
    let e = report(&sc, Some(1000), false).unwrap_err().to_string();
    assert!(e.contains("t.json") && e.contains("no timeline"), "{e}");
}

#[test]
fn damaged_or_incomplete_sidecars_are_refused_with_the_file_named() {
    let err = |v: serde_json::Value| {
        let sc = sidecar(v);
        let cat = catalog::builtin("neoverse-n1").unwrap();
        sidecar::import(&sc, "bad.json", &cat, SidecarImport::default())
            .unwrap_err()
            .to_string()
    };
    // No final snapshot: the run did not finish; partial counts are not reported as a run.
    let mut v = two_cores();
    let tl = v["counters"]["timeline"].as_array_mut().unwrap();
    tl.retain(|s| s["reason"] != "final");
    let e = err(v);
    assert!(
        e.starts_with("bad.json") && e.contains("did not finish"),
        "{e}"
    );
    // Totals that are not the sum of the finals.
    let mut v = two_cores();
    v["counters"]["totals"]["INST_RETIRED"] = json!(9999);
    let e = err(v);
    assert!(e.contains("INST_RETIRED") && e.contains("10000"), "{e}");
    // A snapshot with the wrong number of values.
    let mut v = two_cores();
    v["counters"]["timeline"][3]["values"] = json!([1, 2]);
    let e = err(v);
    assert!(e.contains("timeline[3]"), "{e}");
    // A counter that goes backwards between interval boundaries.
    let mut v = two_cores();
    v["counters"]["timeline"][3]["values"] = json!([9000, 1500, 1200, 60, 400, 90, 2]);
    let sc = sidecar(v);
    let cat = catalog::builtin("neoverse-n1").unwrap();
    let e = sidecar::import(
        &sc,
        "bad.json",
        &cat,
        SidecarImport {
            interval_ns: Some(2000),
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("CPU0") && e.contains("decreases"), "{e}");
    // No counters at all.
    let e = err(json!({"schema": "spelunk-sidecar/1", "config": {"midr": "0x413fd0c1"}}));
    assert!(e.contains("no PMU counters"), "{e}");
    // No MIDR: the CPU must be named.
    let sc = sidecar(json!({"schema": "spelunk-sidecar/1"}));
    let e = sidecar::catalog_for(&sc, "bad.json")
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad.json") && e.contains("--cpu"), "{e}");
}

/// A `spelunk record --no-spe` sidecar: one process-wide "core" (cpu null), raw counts with
/// enabled/running times. L1D_CACHE_REFILL ran 50 of 100 ms in the first interval and 25 of
/// 100 ms in the second; the others all the time.
///
/// | column           | at 100 ms (raw) | final, 200 ms (raw) | total (scaled)          | interval 2 (scaled)     |
/// |------------------|----------------:|--------------------:|------------------------:|------------------------:|
/// | CPU_CYCLES       |            1000 |                3000 | 3000                    | 2000                    |
/// | L1D_CACHE_REFILL |              40 |                  60 | 60 x 200 / 75 = 160     | 20 x 100 / 25 = 80      |
#[test]
fn hardware_counters_are_scaled_by_their_running_time() {
    let sc = sidecar(json!({
        "schema": "spelunk-sidecar/1",
        "source": "timelines",
        "command": ["./app"],
        "config": {"midr": "0x413fd0c1", "timeline_clock": "CLOCK_MONOTONIC"},
        "counters": {
            "events": [[17, "CPU_CYCLES"], [3, "L1D_CACHE_REFILL"]],
            "timeline": [
                {"tid": 0, "cpu": null, "time_ns": 100, "reason": "periodic", "values": [1000, 40],
                 "time_enabled_ns": [100, 100], "time_running_ns": [100, 50]},
                {"tid": 0, "cpu": null, "time_ns": 200, "reason": "final", "values": [3000, 60],
                 "time_enabled_ns": [200, 200], "time_running_ns": [200, 75]}
            ],
            "totals": {"CPU_CYCLES": 3000, "L1D_CACHE_REFILL": 60}
        }
    }));
    let choice = sidecar::catalog_for(&sc, "t.json").unwrap();
    let imp = sidecar::import(
        &sc,
        "t.json",
        &choice.catalog,
        SidecarImport {
            interval_ns: Some(100),
        },
    )
    .unwrap();
    let s = &imp.scopes[0];
    let refill = s.total.first("L1D_CACHE_REFILL").unwrap();
    assert_eq!(refill.value, Some(160.0));
    assert_eq!(refill.running_fraction, Some(0.375));
    let cycles = s.total.first("CPU_CYCLES").unwrap();
    assert_eq!(
        (cycles.value, cycles.running_fraction),
        (Some(3000.0), Some(1.0))
    );
    let second = &s.intervals[1].1;
    assert_eq!(second.first("L1D_CACHE_REFILL").unwrap().value, Some(80.0));
    assert_eq!(second.first("CPU_CYCLES").unwrap().value, Some(2000.0));
}
