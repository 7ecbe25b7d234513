//! `spelunk record --overhead` (issue 10): the command runs N times natively and N times
//! recorded, and the slowdown is the ratio of the median times ([NMO paper §VII-A]). The test
//! program counts its own runs in a file; the medians are recomputed here from the run times
//! the sidecar lists, never taken from the figures under test.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn outdir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("record-overhead")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn spelunk(dir: &Path, emulator_lib: Option<&Path>, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_spelunk"));
    c.current_dir(dir).args(args);
    if let Some(lib) = emulator_lib {
        c.env("SPELUNK_EMULATOR_LIB", lib);
    }
    c.output().expect("run spelunk")
}

/// The emulator's tool directory: $SPELUNK_EMULATOR_LIB, else this tree's build.
fn emulator_lib() -> Option<PathBuf> {
    let arch = if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        "amd64"
    };
    let lib = std::env::var_os("SPELUNK_EMULATOR_LIB")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("emulator/build/lib"));
    if lib.join(format!("spelunk-{arch}-linux")).exists() {
        return Some(lib);
    }
    if std::env::var_os("SPELUNK_REQUIRE_EMULATOR").is_some() {
        panic!("emulator not built: run emulator/build.sh");
    }
    eprintln!("skipped: emulator not built (run emulator/build.sh)");
    None
}

/// The middle value, or the mean of the two middle values.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Runs `record --overhead --runs N MODE -- sh -c '<count a run; print "out">'` and checks
/// what every mode must give.
fn check_overhead(
    name: &str,
    mode_args: &[&str],
    mode: &str,
    runs: usize,
    lib: Option<&Path>,
) -> String {
    let dir = outdir(name);
    let runs_s = runs.to_string();
    let mut args = vec!["record", "--overhead", "--runs", &runs_s, "-o", "rec.data"];
    args.extend_from_slice(mode_args);
    args.extend_from_slice(&["--", "sh", "-c", "echo x >> runs.txt; echo out"]);
    let out = spelunk(&dir, lib, &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");

    // 2N runs, and the program's output once: the kept recording's.
    let counted = std::fs::read_to_string(dir.join("runs.txt")).unwrap();
    assert_eq!(counted.lines().count(), 2 * runs, "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");

    let sc: Value =
        serde_json::from_slice(&std::fs::read(dir.join("rec.data.spelunk.json")).unwrap()).unwrap();
    let o = &sc["overhead"];
    assert_eq!(o["mode"], mode);
    assert_eq!(o["runs"], runs as u64);
    let times = |kind: &str, what: &str| -> Vec<f64> {
        let v = o[kind].as_array().unwrap();
        assert_eq!(v.len(), runs);
        v.iter().map(|r| r[what].as_u64().unwrap() as f64).collect()
    };
    let native = median(times("native", "wall_ns"));
    let recorded = median(times("recorded", "wall_ns"));
    assert!(native > 0.0 && recorded > 0.0);
    let slowdown = o["slowdown"].as_f64().unwrap();
    assert!(
        (slowdown - recorded / native).abs() <= 1e-9 * slowdown,
        "slowdown {slowdown} vs {recorded} / {native}"
    );
    assert!((o["time_overhead"].as_f64().unwrap() - (slowdown - 1.0)).abs() < 1e-9);
    let cpu = o["cpu_slowdown"].as_f64();
    let cpu_native = median(times("native", "cpu_ns"));
    let cpu_recorded = median(times("recorded", "cpu_ns"));
    if cpu_native > 0.0 {
        let c = cpu.unwrap();
        assert!((c - cpu_recorded / cpu_native).abs() <= 1e-9 * c);
    } else {
        assert!(cpu.is_none());
    }
    assert!(
        stderr.contains(&format!("slowdown: {slowdown:.2}x wall")),
        "{stderr}"
    );

    // The report carries it (JSON and text).
    let rep = spelunk(&dir, lib, &["report", "rec.data", "--json"]);
    assert!(
        rep.status.success(),
        "{}",
        String::from_utf8_lossy(&rep.stderr)
    );
    let r: Value = serde_json::from_slice(&rep.stdout).unwrap();
    assert_eq!(
        r["recording"]["overhead"]["slowdown"].as_f64(),
        Some(slowdown)
    );
    let text = spelunk(&dir, lib, &["report", "rec.data"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!(
            "overhead ([NMO paper §VII-A]; {runs} run(s) each, {mode}"
        )),
        "{text}"
    );
    stderr.into_owned()
}

#[test]
fn overhead_without_spe_runs_the_command_2n_times() {
    let _ = check_overhead("no-spe", &["--no-spe"], "no SPE", 3, None);
}

#[test]
fn overhead_under_the_emulator_is_a_slowdown() {
    let Some(lib) = emulator_lib() else { return };
    let stderr = check_overhead("emulated", &["--emulate"], "emulated", 2, Some(&lib));
    // The closing summary has [NMO paper eq. 1] accuracy; its figure agrees with its own terms:
    // 1 - |MEM_ACCESS - memory samples x interval| / MEM_ACCESS, recomputed here.
    let line = stderr
        .lines()
        .find(|l| l.starts_with("spelunk record: accuracy ([NMO paper eq. 1]): "))
        .unwrap_or_else(|| panic!("no accuracy line: {stderr}"));
    let nums: Vec<f64> = line
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|t| t.parse().ok())
        .collect();
    // [1 (eq. 1), percent, 1, MEM_ACCESS, memory samples, interval, MEM_ACCESS, estimate]
    let (pct, m, samples, interval) = (nums[1], nums[3], nums[4], nums[5]);
    let want = 100.0 * (1.0 - (m - samples * interval).abs() / m);
    assert!((pct - want).abs() < 0.06, "{line}: {want}");
    let sc: Value = serde_json::from_slice(
        &std::fs::read(outdir_existing("emulated").join("rec.data.spelunk.json")).unwrap(),
    )
    .unwrap();
    // Valgrind runs the program ~100x slower; the median of 2 recorded runs cannot beat native.
    assert!(sc["overhead"]["slowdown"].as_f64().unwrap() > 1.0);
}

fn outdir_existing(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("record-overhead")
        .join(name)
}

#[test]
fn overhead_is_refused_where_nothing_runs_natively() {
    let dir = outdir("refused");
    for args in [
        &["record", "--overhead", "-p", "1"][..],
        &["record", "--overhead", "-a", "--", "true"][..],
        &["record", "--runs", "2", "--no-spe", "--", "true"][..],
    ] {
        let out = spelunk(&dir, None, args);
        assert!(!out.status.success(), "{args:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--overhead") || err.contains("--runs"),
            "{args:?}: {err}"
        );
    }
}
