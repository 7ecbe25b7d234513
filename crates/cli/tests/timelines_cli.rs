//! `spelunk record --no-spe` and `spelunk report` of its sidecar, on this machine: a C program
//! (tests/data/c/touch_heap.c) that writes every byte of 64 MiB it allocated must show at least
//! 64 MiB of heap/anon memory at its peak; on x86-64 there is no Arm PMU, so every default
//! counter is "not counted" (never 0). The report's text and JSON must show the sidecar's own
//! figures, and on a sidecar written here with known counts, hand-computed bandwidths.

mod planted;

use planted::*;
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const MIB: u64 = 1 << 20;
const DEFAULT_EVENTS: [&str; 7] = [
    "CPU_CYCLES",
    "INST_RETIRED",
    "MEM_ACCESS",
    "L1D_CACHE_REFILL",
    "L2D_CACHE_REFILL",
    "LL_CACHE_MISS_RD",
    "BUS_ACCESS",
];

fn spelunk(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run spelunk")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// Sum of the four class fields of one node entry.
fn node_total(n: &Value) -> u64 {
    ["heap_bytes", "anon_bytes", "file_bytes", "stack_bytes"]
        .iter()
        .map(|k| n[k].as_u64().unwrap())
        .sum()
}

#[test]
fn no_spe_records_capacity_and_the_report_shows_the_sidecar_figures() {
    if !have("gcc") {
        eprintln!("skipped: no gcc");
        return;
    }
    let dir = Scratch::new("timelines-touch");
    compile("gcc", "touch_heap.c", &dir.join("touch_heap"), &[]);
    let o = spelunk(
        &[
            "record",
            "--no-spe",
            "--capacity-interval",
            "20",
            "-o",
            "run.data",
            "--",
            "./touch_heap",
            "64",
        ],
        &dir.0,
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "the program's status: {err}");
    assert_eq!(text(&o.stdout), "touched 64 MiB\n", "stdout passes through");
    assert!(
        !dir.join("run.data").exists(),
        "--no-spe writes no perf.data"
    );
    let sc = read_json(&dir.join("run.data.spelunk.json"));
    assert_eq!(sc["config"]["timeline_clock"], "CLOCK_MONOTONIC");
    assert_eq!(sc["exit_status"], 3);
    let cap = &sc["capacity"];
    assert_eq!(cap["interval_ns"], 20_000_000);
    let samples = cap["samples"].as_array().unwrap();
    // 300 ms of sleep at 20 ms: about 15 samples; a loaded 2-core VM may take fewer.
    assert!(samples.len() >= 5, "{} samples: {err}", samples.len());
    let peak_heap_anon = samples
        .iter()
        .map(|s| {
            s["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n["heap_bytes"].as_u64().unwrap() + n["anon_bytes"].as_u64().unwrap())
                .sum::<u64>()
        })
        .max()
        .unwrap();
    assert!(
        peak_heap_anon >= 64 * MIB,
        "peak heap+anon {peak_heap_anon} bytes < 64 MiB"
    );

    // Counters: every default event is either counted or listed as not counted, once.
    let counters = &sc["counters"];
    let counted: Vec<&str> = counters["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e[1].as_str().unwrap())
        .collect();
    let not_counted: Vec<&str> = counters["not_counted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    let mut all: Vec<&str> = counted.iter().chain(&not_counted).copied().collect();
    all.sort_unstable();
    let mut want = DEFAULT_EVENTS.to_vec();
    want.sort_unstable();
    assert_eq!(all, want);
    if cfg!(target_arch = "x86_64") {
        assert!(counted.is_empty(), "no Arm PMU on x86-64: {counted:?}");
        assert_eq!(not_counted, DEFAULT_EVENTS);
        for n in counters["not_counted"].as_array().unwrap() {
            assert!(
                n["reason"].as_str().unwrap().contains("no Arm core PMU"),
                "{n}"
            );
        }
        assert_eq!(counters["timeline"], json!([]), "nothing recorded as 0");
        assert_eq!(counters["totals"], json!({}));
        assert!(err.contains("not counted: CPU_CYCLES"), "{err}");
    }
    assert!(
        err.contains("anon 64.0 MiB") || err.contains("heap 64.0 MiB"),
        "{err}"
    );

    // The report, by the perf.data name (it does not exist) and by the sidecar's name.
    let o = spelunk(&["report", "run.data", "--json"], &dir.0);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let t = &r["timelines"];
    assert_eq!(t["spe"], false);
    let origin = sc["config"]["timeline_start_ns"].as_u64().unwrap();
    assert_eq!(t["origin_ns"], origin);
    let points = t["capacity"]["points"].as_array().unwrap();
    assert_eq!(points.len(), samples.len());
    let mut peak = 0;
    for (p, s) in points.iter().zip(samples) {
        let total: u64 = s["nodes"].as_array().unwrap().iter().map(node_total).sum();
        peak = peak.max(total);
        assert_eq!(p["all_nodes"]["total_bytes"], total);
        assert_eq!(p["t_ns"], s["time_ns"].as_u64().unwrap() - origin);
        assert_eq!(p["processes"], s["processes"]);
    }
    assert_eq!(t["capacity"]["peak"]["total_bytes"], peak);
    assert_eq!(t["counters"]["not_counted"], counters["not_counted"]);

    let o = spelunk(
        &["report", "run.data.spelunk.json", "--limit", "1000"],
        &dir.0,
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("timelines only"), "{out}");
    // Every sample is a row: its time (s, 3 decimals) and total (MiB, 1 decimal).
    for s in samples {
        let total: u64 = s["nodes"].as_array().unwrap().iter().map(node_total).sum();
        let t_s = format!(
            "{:.3}",
            (s["time_ns"].as_u64().unwrap() - origin) as f64 / 1e9
        );
        let mib = format!("{:.1}", total as f64 / MIB as f64);
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with(&t_s) && l.trim_end().ends_with(&mib)),
            "no row {t_s} .. {mib} in\n{out}"
        );
    }
    if cfg!(target_arch = "x86_64") {
        assert!(
            out.contains("not counted: CPU_CYCLES, INST_RETIRED"),
            "{out}"
        );
    }
    let o = spelunk(&["report", "run.data", "--html", "run.html"], &dir.0);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let page = std::fs::read_to_string(dir.join("run.html")).unwrap();
    assert!(
        page.contains(r#""timelines":{"#),
        "the page embeds the timelines"
    );
}

/// A sidecar with known counts: 2 NUMA nodes, 64-byte lines, LL_CACHE_MISS_RD multiplexed in
/// the second interval, BUS_ACCESS not counted.
fn known_sidecar() -> Value {
    json!({
        "schema": "spelunk-sidecar/1",
        "source": "timelines",
        "command": ["./app"],
        "exit_status": 0,
        "config": {
            "timeline_clock": "CLOCK_MONOTONIC",
            "timeline_start_ns": 5_000_000_000u64,
            "cache_line_bytes": 64,
            "counters_pmu": "armv8_pmuv3_0",
            "counters_scope": "user",
            "counters_grouping": "one group"
        },
        "phases": [], "objects": [],
        "counters": {
            "events": [[17, "CPU_CYCLES"], [8, "INST_RETIRED"], [55, "LL_CACHE_MISS_RD"]],
            "timeline": [
                {"tid": 0, "cpu": null, "time_ns": 5_100_000_000u64, "reason": "periodic",
                 "values": [1_000_000, 500_000, 15_625],
                 "time_enabled_ns": [100_000_000, 100_000_000, 100_000_000],
                 "time_running_ns": [100_000_000, 100_000_000, 100_000_000]},
                {"tid": 0, "cpu": null, "time_ns": 5_200_000_000u64, "reason": "final",
                 "values": [3_000_000, 2_000_000, 31_250],
                 "time_enabled_ns": [200_000_000, 200_000_000, 200_000_000],
                 "time_running_ns": [200_000_000, 200_000_000, 125_000_000]}
            ],
            "totals": {"CPU_CYCLES": 3_000_000, "INST_RETIRED": 2_000_000, "LL_CACHE_MISS_RD": 31_250},
            "not_counted": [{"code": 25, "name": "BUS_ACCESS", "reason": "not in armv8_pmuv3_0's sysfs events/"}]
        },
        "truth": null,
        "capacity": {
            "source": "numa_maps",
            "interval_ns": 100_000_000,
            "samples": [
                {"time_ns": 5_100_000_000u64, "processes": 1, "nodes": [
                    {"node": 0, "heap_bytes": 1_048_576, "anon_bytes": 0, "file_bytes": 2_097_152, "stack_bytes": 0}]},
                {"time_ns": 5_200_000_000u64, "processes": 2, "nodes": [
                    {"node": 0, "heap_bytes": 1_048_576, "anon_bytes": 0, "file_bytes": 2_097_152, "stack_bytes": 0},
                    {"node": 1, "heap_bytes": 0, "anon_bytes": 8_388_608, "file_bytes": 0, "stack_bytes": 131_072}]}
            ]
        }
    })
}

#[test]
fn report_of_a_known_sidecar_has_hand_computed_bandwidth_nodes_and_not_counted() {
    let dir = Scratch::new("timelines-known");
    let path = dir.join("app.data.spelunk.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&known_sidecar()).unwrap()).unwrap();
    let o = spelunk(&["report", "app.data", "--json"], &dir.0);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = &r["timelines"]["counters"];
    let names: Vec<&str> = c["derived"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["llc_read_miss_bytes_per_s", "ipc"]);
    // Interval 1 (0.1 s): 15 625 misses x 64 B = 1 000 000 B -> 10 000 000 B/s; IPC 0.5.
    // Interval 2: 15 625 misses counted in 25 of 100 enabled ms -> 62 500 estimated ->
    // 4 000 000 B in 0.1 s = 40 000 000 B/s; IPC 1 500 000 / 2 000 000 = 0.75.
    let iv = c["intervals"].as_array().unwrap();
    assert_eq!(iv[0]["rates"], json!([10_000_000.0, 0.5]));
    assert_eq!(iv[0]["scaled"], json!([false, false, false]));
    assert_eq!(iv[1]["rates"], json!([40_000_000.0, 0.75]));
    assert_eq!(iv[1]["counts"][2], 62_500.0);
    assert_eq!(iv[1]["scaled"], json!([false, false, true]));
    assert_eq!(c["events"][2]["running_fraction"], 0.625);
    let cap = &r["timelines"]["capacity"];
    assert_eq!(cap["nodes"], json!([0, 1]));
    assert_eq!(
        cap["points"][1]["nodes"][1]["total_bytes"],
        8_388_608 + 131_072
    );
    assert_eq!(cap["peak"]["anon_bytes"], 8_388_608);

    let o = spelunk(&["report", "app.data"], &dir.0);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    // Two nodes: a column each. Row at 0.200 s: heap 1.0, anon 8.0, file 2.0, stack 0.1,
    // total 11.1 MiB; node0 3.0, node1 8.1; LLC-miss 40.0 MB/s (scaled: ~), IPC 0.75.
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("0.200"))
        .unwrap_or_else(|| panic!("{out}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells,
        ["0.200*", "2", "1.0", "8.0", "2.0", "0.1", "11.1", "3.0", "8.1", "40.0~", "0.75"]
    );
    let first = out
        .lines()
        .find(|l| l.trim_start().starts_with("0.100"))
        .unwrap();
    assert!(first.trim_end().ends_with("10.0  0.50"), "{first}");
    assert!(
        out.contains("node0 MiB") && out.contains("node1 MiB"),
        "{out}"
    );
    assert!(
        out.contains("LLC-miss rd MB/s = ΔLL_CACHE_MISS_RD × 64 B / Δt"),
        "{out}"
    );
    assert!(
        out.contains("LL_CACHE_MISS_RD (counted 62% of the time)"),
        "{out}"
    );
    assert!(
        out.contains("not counted: BUS_ACCESS: not in armv8_pmuv3_0's sysfs events/"),
        "{out}"
    );
}

#[test]
fn stdin_and_a_signal_exit_pass_through() {
    let dir = Scratch::new("timelines-signal");
    let mut child = Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .args([
            "record",
            "--no-spe",
            "--",
            "sh",
            "-c",
            "read x; echo got:$x; kill -TERM $$",
        ])
        .current_dir(&dir.0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(text(&o.stdout), "got:hello\n");
    assert_eq!(o.status.code(), Some(128 + 15), "{}", text(&o.stderr));
    let sc = read_json(&dir.join("perf.data.spelunk.json"));
    assert_eq!(sc["exit_status"], 128 + 15);
}

#[test]
fn clear_errors_around_no_spe() {
    let dir = Scratch::new("timelines-errors");
    // An existing perf.data is kept as old.data.old (a pair with its sidecar, perf record's
    // convention), so the new sidecar never sits next to a recording it does not describe.
    std::fs::write(dir.join("old.data"), b"x").unwrap();
    let o = spelunk(
        &["record", "--no-spe", "-o", "old.data", "--", "true"],
        &dir.0,
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("kept the previous recording as old.data.old"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(std::fs::read(dir.join("old.data.old")).unwrap(), b"x");
    assert!(!dir.join("old.data").exists());
    assert!(dir.join("old.data.spelunk.json").exists());
    // Options of other modes.
    let o = spelunk(&["record", "--no-spe", "--emulate", "--", "true"], &dir.0);
    assert!(!o.status.success());
    let o = spelunk(
        &["record", "--capacity-interval", "20", "--", "true"],
        &dir.0,
    );
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("--no-spe"), "{}", text(&o.stderr));
    let o = spelunk(
        &[
            "record",
            "--no-spe",
            "--capacity-interval",
            "0",
            "--",
            "true",
        ],
        &dir.0,
    );
    assert!(
        text(&o.stderr).contains("from 1 to 86400000"),
        "{}",
        text(&o.stderr)
    );
    // A missing perf.data names the sidecar form.
    let o = spelunk(&["report", "gone.data"], &dir.0);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("--no-spe") && err.contains("gone.data.spelunk.json"),
        "{err}"
    );
    // A sidecar without timelines is not a recording by itself.
    std::fs::write(
        dir.join("emu.data.spelunk.json"),
        br#"{"schema": "spelunk-sidecar/1", "source": "emulator"}"#,
    )
    .unwrap();
    let o = spelunk(&["report", "emu.data.spelunk.json"], &dir.0);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("no timelines"),
        "{}",
        text(&o.stderr)
    );
}

/// The runtime run alone (`LD_PRELOAD=libspelunk.so SPELUNK_ENABLE=1 SPELUNK_OUTPUT=BASE`) leaves
/// only its logs; `spelunk report BASE` reads them (and leaves them): capacity summed over the
/// processes alive at each time and phases, on the logs' clock from the first process's start.
/// The logs are written here by hand (docs/runtime.md "Log format"), so every figure below is
/// read off them.
#[test]
fn the_runtimes_logs_alone_give_capacity_and_phases() {
    let dir = std::env::temp_dir().join(format!("spelunk-rt-logs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // parent 0xc8 starts at 1000 ns; child 0xc9 at 1100 ns; times are hex offsets from the
    // header's; R lines: node, heap, anon, file, stack bytes (hex)
    let parent = "spelunk-rt/2 c8 64 3e8 1000 clock=monotonic rss_interval_ns=64\n\
B c8 10 work\n\
R c8 100 n 0 1000 0 0 0\n\
E c8 200 work\n\
R c8 300 n 0 3000 0 0 0\n\
Z c8 301 0\n";
    let child = "spelunk-rt/2 c9 c8 44c 1000 clock=monotonic rss_interval_ns=64\n\
R c9 64 n 0 0 2000 0 0\n\
R c9 400 n 0 0 2000 0 0\n\
Z c9 401 0\n";
    std::fs::write(dir.join("run.rt.c8.0"), parent).unwrap();
    std::fs::write(dir.join("run.rt.c9.0"), child).unwrap();
    let o = spelunk(&["report", "run", "--json"], &dir);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let t = &r["timelines"];
    assert_eq!(t["clock"], "CLOCK_MONOTONIC");
    assert_eq!(t["origin_ns"], 1000);
    let points: Vec<(u64, u64, u64)> = t["capacity"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["t_ns"].as_u64().unwrap(),
                p["processes"].as_u64().unwrap(),
                node_total(&p["all_nodes"]),
            )
        })
        .collect();
    // child 0x2000 at 1200 and 2124; parent 0x1000 at 1256 and 0x3000 at 1768, then ends
    assert_eq!(
        points,
        vec![
            (200, 1, 0x2000),
            (256, 2, 0x1000 + 0x2000),
            (768, 2, 0x3000 + 0x2000),
            (1124, 1, 0x2000)
        ]
    );
    let phases = t["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 1);
    assert_eq!(
        (phases[0]["start_ns"].as_u64(), phases[0]["end_ns"].as_u64()),
        (Some(16), Some(512))
    );
    // the logs are the user's: left as they were
    assert_eq!(
        std::fs::read_to_string(dir.join("run.rt.c8.0")).unwrap(),
        parent
    );
    assert!(dir.join("run.rt.c9.0").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `spelunk advise` on a recording of timelines alone: no SPE samples, so every class is
/// "insufficient evidence" with the reason, and the command succeeds (issue 24: never an error).
#[test]
fn advise_on_timelines_alone_is_insufficient_evidence_not_an_error() {
    let dir = Scratch::new("timelines-advise");
    let path = dir.join("app.data.spelunk.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&known_sidecar()).unwrap()).unwrap();
    for file in ["app.data", "app.data.spelunk.json"] {
        let o = spelunk(&["advise", file, "--json"], &dir.0);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let a: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(a["schema"], "spelunk-advise/1.1");
        assert_eq!(a["findings"].as_array().unwrap().len(), 0);
        let ruled = a["ruled_out"].as_array().unwrap();
        assert_eq!(ruled.len(), 14, "every class of the vocabulary");
        assert!(ruled.iter().all(|r| r["kind"] == "insufficient-evidence"
            && r["reason"].as_str().unwrap().contains("no SPE samples")));
        let t = spelunk(&["advise", file], &dir.0);
        assert!(
            text(&t.stdout).contains("No finding raised."),
            "{}",
            text(&t.stdout)
        );
    }
}
