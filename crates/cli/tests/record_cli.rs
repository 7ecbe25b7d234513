//! `spelunk record`: the command's contract with its user. The program's output and exit
//! status pass through; without hardware SPE the command says what to do and fails; a missing
//! emulator is a clear error. (Conversion correctness: crates/record/tests/emulated.rs.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn spelunk(args: &[&str], lib: Option<&Path>, dir: &Path) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_spelunk"));
    c.args(args).current_dir(dir);
    if let Some(lib) = lib {
        c.env("SPELUNK_EMULATOR_LIB", lib);
    }
    c.output().expect("run spelunk")
}

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("record-cli")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The emulator's VALGRIND_LIB directory and the workloads, or None (skip) when not built.
fn emulator() -> Option<(PathBuf, PathBuf)> {
    let arch = if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        "amd64"
    };
    let lib = root().join("emulator/build/lib");
    let wl = root().join("workloads/build");
    if lib.join(format!("spelunk-{arch}-linux")).exists() && wl.join("stream").exists() {
        return Some((lib, wl));
    }
    if std::env::var_os("SPELUNK_REQUIRE_EMULATOR").is_some() {
        panic!("emulator or workloads not built: run emulator/test.sh");
    }
    eprintln!("skipped: emulator not built (run emulator/test.sh)");
    None
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn without_emulate_it_explains_and_fails() {
    let dir = scratch("no-emulate");
    let o = spelunk(&["record", "--", "true"], None, &dir);
    assert!(!o.status.success());
    let err = stderr(&o);
    // No SPE PMU here (x86 CI) or no hardware recorder yet (Arm metal): either way, --emulate.
    assert!(err.contains("--emulate"), "{err}");
    assert!(!dir.join("perf.data").exists());
}

#[test]
fn a_missing_emulator_is_a_clear_error() {
    let dir = scratch("missing");
    let o = spelunk(
        &["record", "--emulate", "--", "true"],
        Some(Path::new("/nonexistent/spelunk-emulator")),
        &dir,
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("emulator/build.sh"), "{err}");
    assert!(err.contains("/nonexistent/spelunk-emulator"), "{err}");
}

#[test]
fn bad_options_are_refused_before_running_anything() {
    let dir = scratch("bad-options");
    let o = spelunk(
        &["record", "--emulate", "-c", "100", "--", "true"],
        None,
        &dir,
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("multiples of 256"), "{}", stderr(&o));
    let o = spelunk(
        &["record", "--emulate", "--filter", "load,jump", "--", "true"],
        None,
        &dir,
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--filter jump"), "{}", stderr(&o));
}

#[test]
fn program_output_and_exit_status_pass_through() {
    let Some((lib, wl)) = emulator() else { return };
    let dir = scratch("passthrough");
    let stream = wl.join("stream");
    // A run that works: its stdout arrives, spelunk exits 0, both files exist.
    let o = spelunk(
        &[
            "record",
            "--emulate",
            "-o",
            "ok.data",
            "--",
            stream.to_str().unwrap(),
            "-n",
            "20000",
            "-i",
            "1",
        ],
        Some(&lib),
        &dir,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("Solution Validates"));
    assert!(stderr(&o).contains("wrote ok.data"), "{}", stderr(&o));
    assert!(dir.join("ok.data").exists());
    assert!(dir.join("ok.data.spelunk.json").exists());
    assert!(!dir.join("ok.data.emutrace").exists(), "trace removed");

    // A program that fails: its usage message on stderr, its status (2) as spelunk's.
    let o = spelunk(
        &[
            "record",
            "--emulate",
            "-o",
            "bad.data",
            "--keep-trace",
            "--",
            stream.to_str().unwrap(),
            "--no-such-option",
        ],
        Some(&lib),
        &dir,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("usage: stream"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("exited with status 2"),
        "{}",
        stderr(&o)
    );
    assert!(dir.join("bad.data").exists());
    assert!(dir.join("bad.data.emutrace").exists(), "--keep-trace");
}

#[test]
fn a_platform_chooses_the_emulated_core_and_is_for_emulate_only() {
    let dir = scratch("platform");
    let o = spelunk(
        &["record", "--platform", "graviton4", "--", "true"],
        None,
        &dir,
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("apply to --emulate only"),
        "{}",
        stderr(&o)
    );
    let Some((lib, wl)) = emulator() else { return };
    let prog = wl.join("lat_mem_rd");
    // a short pointer chase under the emulated `machine`, recorded to `out`
    let record = |machine: [&str; 2], out: &str| {
        let mut args = vec!["record", "--emulate"];
        args.extend(machine);
        args.extend(["-o", out, "--", prog.to_str().unwrap(), "-n", "1000", "16k"]);
        spelunk(&args, Some(&lib), &dir)
    };
    let o = record(["--platform", "graviton4"], "g4.data");
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("under the emulated Neoverse V2 (platform graviton4)"),
        "{err}"
    );
    // the summary states the pages: Graviton4's 4 KiB base pages and THP madvise, 2 MiB huge
    // pages (emulator/MODEL.md "Translation")
    assert!(
        err.contains("spelunk record: emulated 4 KiB pages, THP madvise (2 MiB)"),
        "{err}"
    );
    // the recording claims the emulated core: Neoverse V2 r0p0 ([telemetry specification])
    let sidecar = std::fs::read_to_string(dir.join("g4.data.spelunk.json")).unwrap();
    assert!(sidecar.contains("0x410fd4f0"), "{sidecar}");
    // ... and names the platform: in the sidecar, the perf.data's CPU description and the report
    let sidecar: serde_json::Value = serde_json::from_str(&sidecar).unwrap();
    assert_eq!(sidecar["config"]["platform"], "graviton4");
    assert_eq!(sidecar["config"]["thp"], "madvise");
    assert_eq!(sidecar["config"]["page_bytes"], 4096);
    assert_eq!(sidecar["config"]["huge_page_bytes"], 2 << 20);
    let f = spelunk_perf::PerfDataFile::open(dir.join("g4.data")).unwrap();
    assert_eq!(
        f.features.cpu_desc.as_deref(),
        Some("Neoverse V2 (emulated by spelunk, platform graviton4)")
    );
    let o = spelunk(&["report", "g4.data"], None, &dir);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        out.contains("[emulated by spelunk, platform graviton4: figures come from its model"),
        "{out}"
    );
    assert!(
        out.contains("not hardware; 4 KiB pages, THP madvise (2 MiB)]"),
        "{out}"
    );
    let o = spelunk(&["report", "g4.data", "--json"], None, &dir);
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["recording"]["emulated_platform"], "graviton4");
    // a core without a platform names no platform
    let o = record(["--cpu-model", "neoverse-v1"], "v1.data");
    assert!(o.status.success(), "{}", stderr(&o));
    let f = spelunk_perf::PerfDataFile::open(dir.join("v1.data")).unwrap();
    assert_eq!(
        f.features.cpu_desc.as_deref(),
        Some("Neoverse V1 (emulated by spelunk)")
    );
    let o = spelunk(&["report", "v1.data", "--json"], None, &dir);
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["recording"]["emulated"], true);
    assert!(r["recording"].get("emulated_platform").is_none(), "{r}");
    let o = spelunk(
        &[
            "record",
            "--emulate",
            "--platform",
            "graviton9",
            "--",
            "true",
        ],
        Some(&lib),
        &dir,
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("graviton2, graviton3, graviton4, grace, cobalt100, altra, n1sdp"),
        "{}",
        stderr(&o)
    );
}

/// `--emulator-opt` may not choose the core or platform behind spelunk's back (its progress
/// line and check would name another core than the tool models), nor claim another CPU
/// identity; the refusal names spelunk's own flag and comes before anything runs (the program
/// does not exist, the emulator is not looked for).
#[test]
fn emulator_opts_choosing_the_cpu_are_refused_before_the_run() {
    let dir = scratch("machine-opts");
    let nowhere = dir.join("no-emulator-here");
    for (opt, expected) in [
        (
            "--cpu-model=neoverse-v2",
            "--emulator-opt=--cpu-model=neoverse-v2: choose the emulated core with spelunk's \
             own --cpu-model neoverse-v2 instead",
        ),
        (
            "--platform=graviton3",
            "--emulator-opt=--platform=graviton3: choose the emulated platform with spelunk's \
             own --platform graviton3 instead",
        ),
        (
            "--midr=0x410fd4f0",
            "--emulator-opt=--midr=0x410fd4f0: the recording would claim a CPU other than the \
             one the emulator models",
        ),
        (
            "--cpu-name=Neoverse V2",
            "--emulator-opt=--cpu-name=Neoverse V2: the recording would claim a CPU other than \
             the one the emulator models",
        ),
    ] {
        let emulator_opt = format!("--emulator-opt={opt}");
        for args in [
            vec!["record", "--emulate", "-o", "out.data"],
            vec!["topdown", "--emulate"],
        ] {
            let mut args = args.clone();
            args.extend([emulator_opt.as_str(), "--", "./no-such-program"]);
            let o = spelunk(&args, Some(&nowhere), &dir);
            let err = stderr(&o);
            assert!(!o.status.success(), "{args:?}: {err}");
            assert!(err.contains(expected), "{args:?}: {err}");
            assert!(
                !err.contains("no such file"),
                "{args:?}: refused first: {err}"
            );
            assert!(!err.contains("running"), "{args:?}: nothing runs: {err}");
        }
    }
    assert!(!dir.join("out.data").exists());
}
