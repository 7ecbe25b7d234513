//! Issue 28's contract for `spelunk bench` on a real program pair under the emulator:
//! workloads/bench_walk.c reads a 4 MiB global table in order (one new 64-byte line every 8
//! loads), its strided build (-DSTRIDE=8) a new line at every load, with the same instructions.
//! Compared with the in-order baseline, the strided build must exit 3 naming walk() and the
//! load's line (the source's `// LINE:walk-load` marker, read here) in --json, --github and
//! --junit; the unchanged program against its own baseline exits 0 every time (single-threaded:
//! multi-threaded determinism is issue 29's); the reverse is an improvement (exit 0, listed);
//! --update and --accept rewrite the baseline; a changed emulated core is refused (exit 2) unless
//! --allow-env-change.
//!
//! Needs the emulator (`emulator/test.sh` builds it and runs this with
//! SPELUNK_REQUIRE_EMULATOR=1) and gcc; skipped otherwise.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn setup() -> Option<PathBuf> {
    let arch = if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        "amd64"
    };
    let lib = root().join("emulator/build/lib");
    let built = lib.join(format!("spelunk-{arch}-linux")).exists()
        && Command::new("make")
            .args(["-s", "-C"])
            .arg(root().join("workloads"))
            .args(["build/bench_walk", "build/bench_walk_strided"])
            .status()
            .is_ok_and(|s| s.success());
    if built {
        return Some(lib);
    }
    if std::env::var_os("SPELUNK_REQUIRE_EMULATOR").is_some() {
        panic!("emulator or workloads not built: run emulator/test.sh");
    }
    eprintln!("skipped: emulator not built (run emulator/test.sh)");
    None
}

fn outdir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("bench-cli")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs spelunk from the repository root (so annotations' paths are relative to it).
fn bench(lib: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .current_dir(root())
        .env("SPELUNK_EMULATOR_LIB", lib)
        .env_remove("COLUMNS")
        .arg("bench")
        .args(args)
        .output()
        .expect("run spelunk")
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn said(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const PLAIN: &str = "workloads/build/bench_walk";
const STRIDED: &str = "workloads/build/bench_walk_strided";

fn save(lib: &Path, baseline: &Path, program: &str) {
    let o = bench(lib, &["--save", baseline.to_str().unwrap(), "--", program]);
    assert_eq!(code(&o), 0, "{}", said(&o));
}

/// The line of the `// LINE:walk-load` marker in bench_walk.c.
fn walk_load_line() -> u32 {
    let src = std::fs::read_to_string(root().join("workloads/bench_walk.c")).unwrap();
    src.lines()
        .position(|l| l.contains("// LINE:walk-load"))
        .unwrap() as u32
        + 1
}

fn metric<'a>(benchmark: &'a Value, name: &str) -> &'a Value {
    benchmark["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == name)
        .unwrap_or_else(|| panic!("no metric {name}"))
}

#[test]
fn a_larger_stride_is_a_regression_named_at_its_function_and_line() {
    let Some(lib) = setup() else { return };
    let dir = outdir("regression");
    let base = dir.join("base.json");
    save(&lib, &base, PLAIN);
    let line = walk_load_line();
    let junit = dir.join("junit.xml");
    let o = bench(
        &lib,
        &[
            "--compare",
            base.to_str().unwrap(),
            "--json",
            "--junit",
            junit.to_str().unwrap(),
            "--",
            STRIDED,
        ],
    );
    assert_eq!(code(&o), 3, "{}", said(&o));
    let c: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(c["schema"], "spelunk-bench-compare/1");
    let b = &c["benchmarks"][0];
    // the command-line benchmark takes the baseline's only name
    assert_eq!(b["name"], "bench_walk");
    assert_eq!(b["status"], "regressed");
    let l1 = metric(b, "l1d_refills");
    assert_eq!(l1["status"], "regressed");
    // a line per load against a line per 8 loads: several times the refills
    assert!(
        l1["new"].as_f64().unwrap() > 2.0 * l1["baseline"].as_f64().unwrap(),
        "{l1}"
    );
    let top = &l1["causes"][0];
    assert_eq!(top["function"], "walk", "{l1}");
    assert_eq!(top["line"], line, "{l1}");
    assert!(top["file"].as_str().unwrap().ends_with("bench_walk.c"));
    let why = l1["explanation"].as_str().unwrap();
    assert!(
        why.starts_with("L1D refills +") && why.contains(&format!("walk() at bench_walk.c:{line}")),
        "{why}"
    );
    // the same instructions in both builds
    assert_eq!(metric(b, "instructions")["status"], "unchanged");

    // JUnit: one test case per metric, the regression a failure naming the line
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<testcase ").count(), 10, "{xml}");
    let case = xml
        .split("<testcase ")
        .find(|c| c.contains("name=\"l1d_refills\""))
        .unwrap();
    assert!(
        case.contains("<failure ") && case.contains(&format!("walk() at bench_walk.c:{line}")),
        "{case}"
    );
    assert!(xml.contains("classname=\"bench_walk\""));
    // well-formed XML, by an independent parser when there is one
    if let Ok(st) = Command::new("python3")
        .args(["-c", "import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); assert r.tag == 'testsuites'"])
        .arg(&junit)
        .status()
    {
        assert!(st.success(), "python's XML parser rejects {xml}");
    }

    // GitHub annotations at the line, the path relative to the repository root
    let o = bench(
        &lib,
        &[
            "--compare",
            base.to_str().unwrap(),
            "--github",
            "--",
            STRIDED,
        ],
    );
    assert_eq!(code(&o), 3, "{}", said(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let want = format!("::error file=workloads/bench_walk.c,line={line},title=spelunk bench bench_walk%3A L1D refills::L1D refills +");
    assert!(out.lines().any(|l| l.starts_with(&want)), "{out}");
}

#[test]
fn the_unchanged_program_passes_against_its_own_baseline_every_time() {
    let Some(lib) = setup() else { return };
    let dir = outdir("unchanged");
    let base = dir.join("base.json");
    save(&lib, &base, PLAIN);
    let md = dir.join("summary.md");
    for run in 0..5 {
        let o = bench(
            &lib,
            &[
                "--compare",
                base.to_str().unwrap(),
                "--json",
                "--markdown",
                md.to_str().unwrap(),
                "--",
                PLAIN,
            ],
        );
        assert_eq!(code(&o), 0, "run {run}: {}", said(&o));
        let c: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(c["benchmarks"][0]["status"], "unchanged", "run {run}");
        // silent about unchanged benchmarks
        let summary = std::fs::read_to_string(&md).unwrap();
        assert!(!summary.contains("bench_walk"), "{summary}");
    }
}

#[test]
fn an_improvement_passes_and_is_listed_and_update_and_accept_rewrite_the_baseline() {
    let Some(lib) = setup() else { return };
    let dir = outdir("improvement");
    let base = dir.join("base.json");
    let o = bench(
        &lib,
        &[
            "--save",
            base.to_str().unwrap(),
            "--name",
            "walk",
            "--",
            STRIDED,
        ],
    );
    assert_eq!(code(&o), 0, "{}", said(&o));
    let o = bench(&lib, &["--compare", base.to_str().unwrap(), "--", PLAIN]);
    assert_eq!(code(&o), 0, "{}", said(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("walk: improved"), "{text}");
    assert!(text.contains("improvement: L1D refills"), "{text}");

    // --update: the baseline becomes the in-order run; the strided one now regresses
    let o = bench(
        &lib,
        &["--compare", base.to_str().unwrap(), "--update", "--", PLAIN],
    );
    assert_eq!(code(&o), 0, "{}", said(&o));
    let o = bench(&lib, &["--compare", base.to_str().unwrap(), "--", STRIDED]);
    assert_eq!(code(&o), 3, "{}", said(&o));

    // --accept NAME: an intended regression passes and becomes the baseline
    let o = bench(
        &lib,
        &[
            "--compare",
            base.to_str().unwrap(),
            "--accept",
            "walk",
            "--",
            STRIDED,
        ],
    );
    assert_eq!(code(&o), 0, "{}", said(&o));
    let o = bench(&lib, &["--compare", base.to_str().unwrap(), "--", STRIDED]);
    assert_eq!(code(&o), 0, "{}", said(&o));
}

#[test]
fn a_changed_environment_is_refused_unless_allowed() {
    let Some(lib) = setup() else { return };
    let dir = outdir("environment");
    let base = dir.join("base.json");
    save(&lib, &base, PLAIN);
    let args = |extra: &[&'static str]| {
        let mut a = vec!["--compare", base.to_str().unwrap()];
        a.extend_from_slice(extra);
        a.extend_from_slice(&["--cpu-model", "neoverse-v2", "--github", "--", PLAIN]);
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let run = |a: Vec<String>| bench(&lib, &a.iter().map(String::as_str).collect::<Vec<_>>());
    let o = run(args(&[]));
    assert_eq!(code(&o), 2, "{}", said(&o));
    let out = said(&o);
    assert!(
        out.contains("emulator_core was neoverse-n1, is neoverse-v2"),
        "{out}"
    );
    assert!(out.contains("::error title=spelunk bench bench_walk%3A environment changed::"));
    let o = run(args(&["--allow-env-change"]));
    assert_ne!(code(&o), 2, "{}", said(&o));
}

#[test]
fn a_benchmark_that_fails_is_an_error_not_a_baseline() {
    let Some(lib) = setup() else { return };
    let dir = outdir("failing");
    let base = dir.join("base.json");
    let o = bench(&lib, &["--save", base.to_str().unwrap(), "--", "false"]);
    assert_eq!(code(&o), 2, "{}", said(&o));
    assert!(
        said(&o).contains("false exited with status 1"),
        "{}",
        said(&o)
    );
    assert!(!base.exists());
}
