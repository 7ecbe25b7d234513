//! `spelunk topdown` as a command, without the emulator: importing a sidecar (by its own path
//! or by its perf.data's), the report file, and honest errors (no PMU here, no emulator, a
//! perf.data without a sidecar). Values are hand arithmetic on the counts written below.
//! (Emulated end-to-end runs: topdown_emulated.rs.)

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn spelunk(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_spelunk"));
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run spelunk")
}

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("topdown-cli")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn metric(report: &Value, scope: &str, name: &str) -> Option<f64> {
    let s = report["scopes"]
        .as_array()
        .expect("scopes")
        .iter()
        .find(|s| s["scope"] == scope)
        .unwrap_or_else(|| panic!("no scope {scope} in {report}"));
    let m = s["totals"]["metrics"]
        .as_array()
        .expect("metrics")
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no metric {name}"));
    m["value"].as_f64()
}

/// One core, one phase. Counts:
///   whole run (final): CPU_CYCLES 4000, INST_RETIRED 3000, STALL_BACKEND 1000,
///     STALL_FRONTEND 200, L2D_CACHE 600, L2D_CACHE_REFILL 150
///   phase "hot" (3000 - 1000 ns): cycles 2800 - 800 = 2000, inst 1900 - 400 = 1500,
///     back end 900 - 100 = 800
fn small_sidecar() -> Value {
    let ev = json!([
        [17, "CPU_CYCLES"],
        [8, "INST_RETIRED"],
        [36, "STALL_BACKEND"],
        [35, "STALL_FRONTEND"],
        [22, "L2D_CACHE"],
        [23, "L2D_CACHE_REFILL"]
    ]);
    let s = |t: u64, r: &str, tid: u32, v: [u64; 6]| json!({"tid": tid, "cpu": 0, "time_ns": t, "reason": r, "values": v});
    json!({
        "schema": "spelunk-sidecar/1",
        "source": "emulator",
        "command": ["./app"],
        "exit_status": 0,
        "config": {"cpu_name": "Neoverse N1", "midr": "0x413fd0c1"},
        "phases": [{"name": "hot", "pid": 9, "tid": 9, "depth": 1, "start_ns": 1000, "end_ns": 3000}],
        "objects": [],
        "counters": {
            "events": ev,
            "timeline": [
                s(0, "thread-start", 9, [0, 0, 0, 0, 0, 0]),
                s(1000, "annotation", 9, [800, 400, 100, 10, 50, 5]),
                s(3000, "annotation", 9, [2800, 1900, 900, 20, 400, 100]),
                s(4000, "thread-exit", 9, [4000, 3000, 1000, 200, 600, 150]),
                s(4000, "final", 0, [4000, 3000, 1000, 200, 600, 150])
            ],
            "totals": {"CPU_CYCLES": 4000, "INST_RETIRED": 3000, "STALL_BACKEND": 1000,
                       "STALL_FRONTEND": 200, "L2D_CACHE": 600, "L2D_CACHE_REFILL": 150}
        }
    })
}

#[track_caller]
fn close(v: Option<f64>, want: f64) {
    let v = v.expect("a value");
    assert!((v - want).abs() < 1e-9, "{v} != {want}");
}

#[test]
fn import_of_a_sidecar_by_its_path_or_its_perf_data() {
    let dir = scratch("import");
    let data = dir.join("app.data");
    let side = dir.join("app.data.spelunk.json");
    std::fs::write(&side, small_sidecar().to_string()).unwrap();
    // A perf.data as far as the format check goes (its content is not read by topdown).
    std::fs::write(&data, b"PERFILE2\0\0\0\0").unwrap();
    for input in [&side, &data] {
        let o = spelunk(
            &[
                "topdown",
                "--import",
                input.to_str().unwrap(),
                "--per-phase",
                "--json",
            ],
            &[],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let r: Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
        assert_eq!(r["schema"], "spelunk-topdown/1");
        assert_eq!(r["scopes"][0]["cpu"]["catalog"], "neoverse-n1");
        let all = "all (sum of CPU0)";
        // IPC = 3000 / 4000 = 0.75; back end = 1000 / 4000 * 100 = 25 %; front end = 200 /
        // 4000 * 100 = 5 %; L2 MPKI = 150 / 3000 * 1000 = 50; L2 miss ratio = 150 / 600 = 0.25
        close(metric(&r, all, "ipc"), 0.75);
        close(metric(&r, all, "backend_stalled_cycles"), 25.0);
        close(metric(&r, all, "frontend_stalled_cycles"), 5.0);
        close(metric(&r, all, "l2_cache_mpki"), 50.0);
        close(metric(&r, all, "l2_cache_miss_ratio"), 0.25);
        // Missing from the sidecar: n/a, not 0.
        assert_eq!(metric(&r, all, "l1d_cache_mpki"), None);
        // Phase hot: IPC = 1500 / 2000 = 0.75; back end = 800 / 2000 * 100 = 40 %
        close(metric(&r, "phase hot", "ipc"), 0.75);
        close(metric(&r, "phase hot", "backend_stalled_cycles"), 40.0);
        assert_eq!(
            r["scopes"][1]["totals"]["bottleneck_path"],
            json!(["backend_stalled_cycles"])
        );
    }
}

#[test]
fn report_file_text_and_timeline() {
    let dir = scratch("text");
    let side = dir.join("s.spelunk.json");
    std::fs::write(&side, small_sidecar().to_string()).unwrap();
    let out = dir.join("report.txt");
    let o = spelunk(
        &[
            "topdown",
            "--import",
            side.to_str().unwrap(),
            "--stage",
            "1",
            "-I",
            "0.002",
            "-o",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stdout.is_empty(), "the report went to the file");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        text.contains("backend_stalled_cycles") && text.contains("<== bottleneck"),
        "{text}"
    );
    // -I 0.002 ms = 2000 ns: boundaries at 2 and 4 µs, printed so they can be told apart.
    assert!(
        text.contains("0.0000020") && text.contains("0.0000040"),
        "{text}"
    );
    assert!(text.contains("--per-phase reports each"), "{text}");
    assert!(text.contains("emulated"), "{text}");
}

#[test]
fn a_perf_data_without_sidecar_and_bad_inputs_fail_with_the_file_named() {
    let dir = scratch("bad");
    let data = dir.join("plain.data");
    std::fs::write(&data, b"PERFILE2\0\0\0\0").unwrap();
    let o = spelunk(&["topdown", "--import", data.to_str().unwrap()], &[]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("plain.data.spelunk.json"), "{err}");
    assert!(err.contains("spelunk record --emulate"), "{err}");

    let side = dir.join("broken.spelunk.json");
    std::fs::write(
        &side,
        b"{\"schema\": \"spelunk-sidecar/1\", \"counters\": 7}",
    )
    .unwrap();
    let o = spelunk(&["topdown", "--import", side.to_str().unwrap()], &[]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("broken.spelunk.json"), "{}", stderr(&o));

    // perf stat output still needs --cpu, and has no phases.
    let csv = dir.join("counts.csv");
    std::fs::write(&csv, "100,,r8,1000,100.00,,\n200,,r11,1000,100.00,,\n").unwrap();
    let o = spelunk(&["topdown", "--import", csv.to_str().unwrap()], &[]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--cpu"), "{}", stderr(&o));
    let o = spelunk(
        &[
            "topdown",
            "--import",
            csv.to_str().unwrap(),
            "--cpu",
            "neoverse-n1",
            "--per-phase",
        ],
        &[],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no phases"), "{}", stderr(&o));
    let o = spelunk(
        &[
            "topdown",
            "--import",
            csv.to_str().unwrap(),
            "--cpu",
            "neoverse-n1",
            "--json",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    // IPC = 100 / 200 = 0.5
    close(metric(&r, "all", "ipc"), 0.5);
    assert_eq!(
        r["source"]["detail"],
        format!("{} (perf stat -x,)", csv.display())
    );
}

#[test]
fn emulate_without_the_emulator_is_a_clear_error() {
    let o = spelunk(
        &["topdown", "--emulate", "--", "true"],
        &[("SPELUNK_EMULATOR_LIB", "/nonexistent/spelunk-emulator")],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("emulator/build.sh"), "{err}");
    assert!(err.contains("/nonexistent/spelunk-emulator"), "{err}");
    // --emulate counts one run with every event: options of live counting do not apply.
    let o = spelunk(
        &["topdown", "--emulate", "--no-multiplex", "--", "true"],
        &[],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--no-multiplex"), "{}", stderr(&o));
    let o = spelunk(&["topdown", "--emulate"], &[]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("after `--`"), "{}", stderr(&o));
}

/// Our CI machines are x86 virtual machines: no Arm PMU. The live path must say so and point
/// at what works here.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_live_run_without_a_pmu_points_at_emulate_and_import() {
    let o = spelunk(&["topdown", "--", "true"], &[]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("`spelunk topdown --emulate -- CMD`"), "{err}");
    assert!(err.contains("--import"), "{err}");
    assert!(!err.contains("not available"), "{err}");
}
