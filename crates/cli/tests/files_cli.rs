//! No output ever lands on an input, and outputs appear whole or not at all: the cases a new
//! user hit (`report r.data --html r.data`, `record -o prog -- prog`, `decode X-ldst.parquet
//! -o X`) and their variants (a symlink, a hard link, `./` spellings), each refused before any
//! work with the input's bytes unchanged.

use std::path::{Path, PathBuf};
use std::process::Command;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("spelunk-files-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn spelunk(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn raw_spe() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/spe/spe-b1-ts1.data")
}

#[test]
fn an_output_naming_an_input_is_refused_and_the_input_is_untouched() {
    let d = scratch("guard");
    let bytes = std::fs::read(raw_spe()).unwrap();
    std::fs::write(d.join("r.data"), &bytes).unwrap();
    std::os::unix::fs::symlink("r.data", d.join("link.html")).unwrap();
    std::fs::hard_link(d.join("r.data"), d.join("hard.html")).unwrap();
    std::fs::write(d.join("r.data.spelunk.json"), b"{}").unwrap();
    std::fs::write(d.join("prog"), b"#!/bin/sh\n").unwrap();
    std::fs::write(d.join("x-ldst.parquet"), b"PAR1").unwrap();
    let cases: &[&[&str]] = &[
        &["report", "r.data", "--html", "r.data"],
        &["report", "r.data", "--html", "./r.data"],
        &["report", "r.data", "--html", "link.html"],
        &["report", "r.data", "--html", "hard.html"],
        &["report", "r.data", "--html", "r.data.spelunk.json"],
        &["c2c", "r.data", "--html", "r.data"],
        &["record", "--emulate", "-o", "prog", "--", "./prog"],
        &[
            "record",
            "--emulate",
            "-o",
            "r.data",
            "--",
            "./r.data.spelunk.json",
        ],
        &["decode", "x-ldst.parquet", "-o", "x"],
        &[
            "decode",
            "--raw",
            "r.data",
            "-o",
            "r.data-as-prefix",
            "-f",
            "csv",
        ],
        &[
            "topdown",
            "--import",
            "r.data",
            "--cpu",
            "neoverse-n1",
            "-o",
            "r.data",
        ],
    ];
    // The last decode case writes r.data-as-prefix-*.csv, which are not inputs: it must work.
    for args in cases {
        let (ok, err) = spelunk(&d, args);
        let expect_ok = args.contains(&"r.data-as-prefix");
        if expect_ok {
            assert!(ok, "{args:?}: {err}");
        } else {
            assert!(!ok, "{args:?} succeeded");
            assert!(err.contains("refusing to write"), "{args:?}: {err}");
        }
    }
    assert_eq!(std::fs::read(d.join("r.data")).unwrap(), bytes);
    assert_eq!(std::fs::read(d.join("r.data.spelunk.json")).unwrap(), b"{}");
    assert_eq!(std::fs::read(d.join("prog")).unwrap(), b"#!/bin/sh\n");
    assert_eq!(std::fs::read(d.join("x-ldst.parquet")).unwrap(), b"PAR1");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn tables_appear_whole_with_the_usual_mode_and_leave_no_temporary_file() {
    let d = scratch("atomic");
    std::fs::copy(raw_spe(), d.join("b.data")).unwrap();
    let (ok, err) = spelunk(&d, &["decode", "--raw", "b.data", "-o", "t", "-f", "csv"]);
    assert!(ok, "{err}");
    let names: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".part")), "{names:?}");
    assert!(names.contains(&"t-br.csv".to_string()), "{names:?}");
    // The branch record of the vector, under spe-parser's header.
    let br = std::fs::read_to_string(d.join("t-br.csv")).unwrap();
    assert_eq!(br.lines().count(), 2, "{br}");
    use std::os::unix::fs::PermissionsExt;
    let reference = d.join("reference");
    std::fs::File::create(&reference).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&d.join("t-br.csv")), mode(&reference));
    std::fs::remove_dir_all(&d).unwrap();
}

/// Runs spelunk with a deadline: an input that blocks (a FIFO with no writer) or never ends
/// (/dev/zero) must be refused at once, not hang.
fn spelunk_within(dir: &Path, args: &[&str], seconds: u64) -> (bool, String) {
    use std::io::Read;
    let mut child = Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .current_dir(dir)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (st.success(), err);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("spelunk {args:?} still running after {seconds} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn fifos_devices_and_directories_are_refused_at_once() {
    let d = scratch("special");
    let fifo = d.join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let fifo = fifo.to_str().unwrap();
    let dir = d.to_str().unwrap();
    let cases: &[&[&str]] = &[
        &["report", fifo],
        &["report", "/dev/zero"],
        &["report", dir],
        &["decode", fifo, "-o", "x"],
        &["decode", "--raw", "/dev/zero", "-o", "x"],
        &["c2c", fifo],
        &["annotate", "main", fifo],
        &["diff", fifo, "/dev/zero"],
        &["estimate", "latency", fifo],
        &["topdown", "--import", "/dev/zero", "--cpu", "neoverse-n1"],
        &["topdown", "--import", fifo, "--cpu", "neoverse-n1"],
        &["topdown", "--list", "--spec", fifo],
    ];
    for args in cases {
        let (ok, err) = spelunk_within(&d, args, 20);
        assert!(!ok, "{args:?} succeeded");
        assert!(
            err.contains("FIFO") || err.contains("character device") || err.contains("a directory"),
            "{args:?}: {err}"
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}
