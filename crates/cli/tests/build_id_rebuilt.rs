//! Issue 26, item 1: a recording read after its program was rebuilt never names samples from
//! the rebuilt file. A small C program is recorded with `spelunk record --emulate`, rebuilt at
//! the same path with its hot function renamed, and reported again: no sample may carry the
//! new name, the program shows as `prog [build-id mismatch]`, and the report says how many
//! samples were left unnamed and how to get the names back. The recording's build-id table is
//! checked with `perf buildid-list` against `readelf -n` (both independent of spelunk).
//!
//! Then item 2: `spelunk archive` made before the rebuild, unpacked elsewhere, gives with
//! `--symfs` a report byte-identical to the one made before the rebuild.
//!
//! Needs cc, readelf, tar and the emulator (`emulator/build.sh`; SPELUNK_REQUIRE_EMULATOR=1 makes its
//! absence a failure); skipped otherwise. perf is optional (its check is skipped without it).

use serde_json::Value;
use spelunk_testkit::{emulator_lib, readelf_build_id};
use std::path::Path;
use std::process::{Command, Output};

fn run(lib: &Path, cache: &Path, args: &[&str]) -> Output {
    run_in(Path::new("."), lib, cache, args)
}

fn run_in(cwd: &Path, lib: &Path, cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .current_dir(cwd)
        .env("SPELUNK_EMULATOR_LIB", lib)
        // No build-id cache of this machine's user takes part.
        .env("XDG_CACHE_HOME", cache)
        .env("HOME", cache)
        .env_remove("COLUMNS")
        .args(args)
        .output()
        .expect("run spelunk")
}

fn ok(lib: &Path, cache: &Path, args: &[&str]) -> Vec<u8> {
    let out = run(lib, cache, args);
    assert!(
        out.status.success(),
        "spelunk {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The program: one hot function, `name`, reading a global table.
fn source(name: &str) -> String {
    format!(
        "static long table[1 << 16];\n\
         __attribute__((noinline)) long {name}(const long *t, long n) {{\n\
           long s = 0;\n\
           for (long r = 0; r < 300; r++)\n\
             for (long i = 0; i < n; i += 8) s += t[i];\n\
           return s;\n\
         }}\n\
         int main(void) {{\n\
           for (long i = 0; i < (1 << 16); i++) table[i] = i;\n\
           return {name}(table, 1 << 16) == 42;\n\
         }}\n"
    )
}

fn build(dir: &Path, exe: &Path, name: &str) {
    let src = dir.join("prog.c");
    std::fs::write(&src, source(name)).unwrap();
    let st = Command::new("cc")
        .args(["-O1", "-g", "-Wl,--build-id", "-o"])
        .arg(exe)
        .arg(&src)
        .status()
        .expect("cc");
    assert!(st.success());
}

fn function_rows(r: &Value) -> Vec<(String, String)> {
    r["hotspots"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["key"].as_str().unwrap().to_string(),
                h["dso"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn a_rebuilt_program_is_never_named_from_the_new_file() {
    let Some(lib) = emulator_lib("cc") else {
        return;
    };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("build-id-rebuilt");
    let _ = std::fs::remove_dir_all(&dir);
    let cache = dir.join("home");
    std::fs::create_dir_all(&cache).unwrap();
    let exe = dir.join("prog");
    build(&dir, &exe, "walk_old");
    let data = dir.join("prog.data");
    let data_s = data.to_str().unwrap();
    let exe_s = exe.to_str().unwrap();
    ok(
        &lib,
        &cache,
        &[
            "record",
            "--emulate",
            "--archive",
            "-o",
            data_s,
            "--",
            exe_s,
        ],
    );
    let recorded_id = readelf_build_id(&exe);
    // record --archive packed the program under its build-id.
    let listed = Command::new("tar")
        .arg("tf")
        .arg(dir.join("prog.data.tar"))
        .output()
        .expect("tar");
    let member = format!(".build-id/{}/{}", &recorded_id[..2], &recorded_id[2..]);
    assert!(
        String::from_utf8_lossy(&listed.stdout)
            .lines()
            .any(|l| l == member),
        "{member} not in the archive: {listed:?}"
    );
    std::fs::remove_file(dir.join("prog.data.tar")).unwrap();

    // perf reads our build-id table.
    if let Ok(out) = Command::new("perf")
        .args(["buildid-list", "-i", data_s])
        .output()
    {
        let listed = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            listed
                .lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == [&recorded_id, exe_s]),
            "perf buildid-list does not list {recorded_id} {exe_s}: {listed}"
        );
    }

    let before: Value =
        serde_json::from_slice(&ok(&lib, &cache, &["report", data_s, "--json"])).unwrap();
    let rows = function_rows(&before);
    assert!(
        rows.iter().any(|(f, d)| f == "walk_old" && d == exe_s),
        "{rows:?}"
    );
    assert!(before["recording"].get("mismatched_files").is_none());
    let walk_samples: u64 = before["hotspots"]["dsos"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["key"] == exe_s)
        .map(|h| h["samples"].as_u64().unwrap())
        .sum();
    assert!(walk_samples > 0);

    // The text report, and an archive, before the rebuild.
    let report_before = run_in(&dir, &lib, &cache, &["report", "prog.data"]);
    assert!(report_before.status.success());
    let archived = String::from_utf8(ok(&lib, &cache, &["archive", data_s])).unwrap();
    assert!(archived.contains(&recorded_id), "{archived}");

    // Rebuilt with the function renamed: a new build-id at the recorded path.
    build(&dir, &exe, "walk_new");
    assert_ne!(readelf_build_id(&exe), recorded_id);
    let after: Value =
        serde_json::from_slice(&ok(&lib, &cache, &["report", data_s, "--json"])).unwrap();
    let rows = function_rows(&after);
    assert!(
        !rows
            .iter()
            .any(|(f, _)| f.contains("walk_new") || f == "main"),
        "names from the rebuilt file: {rows:?}"
    );
    let stale = format!("{exe_s} [build-id mismatch]");
    assert!(rows.iter().any(|(_, d)| *d == stale), "{rows:?}");
    let mismatched = &after["recording"]["mismatched_files"];
    assert_eq!(mismatched[0]["path"], exe_s, "{mismatched}");
    assert_eq!(mismatched[0]["samples"].as_u64(), Some(walk_samples));
    // Lines and objects are not taken from the wrong file either.
    for h in after["hotspots"]["lines"].as_array().unwrap() {
        assert!(
            !h["file"].as_str().is_some_and(|f| f.ends_with("prog.c")),
            "a line from the rebuilt file: {h}"
        );
    }
    let text = String::from_utf8(ok(&lib, &cache, &["report", data_s])).unwrap();
    let note = text
        .lines()
        .find(|l| l.contains("build-id mismatch,"))
        .unwrap_or_else(|| panic!("no mismatch note:\n{text}"));
    assert!(
        note.contains(&format!("{walk_samples} samples not named"))
            && note.contains("spelunk archive")
            && note.contains("--symfs"),
        "{note}"
    );
    assert!(text.contains("prog [build-id mismatch]"), "{text}");
    // The archive, unpacked elsewhere, names the recorded functions again, byte for byte.
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let st = Command::new("tar")
        .arg("xf")
        .arg(dir.join("prog.data.tar"))
        .arg("-C")
        .arg(&elsewhere)
        .status()
        .expect("tar");
    assert!(st.success());
    let report_archived = run_in(
        &elsewhere,
        &lib,
        &cache,
        &["report", "prog.data", "--symfs", "."],
    );
    assert!(report_archived.status.success());
    assert_eq!(
        String::from_utf8_lossy(&report_archived.stdout),
        String::from_utf8_lossy(&report_before.stdout)
    );
    assert_eq!(report_archived.stdout, report_before.stdout);

    // annotate finds nothing under either name rather than the new file's code.
    for name in ["walk_new", "walk_old"] {
        let out = run(&lib, &cache, &["annotate", name, data_s]);
        assert!(!out.status.success(), "annotate {name} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("build-id mismatch") && err.contains(exe_s),
            "annotate {name}: {err}"
        );
    }
}
