//! `spelunk decode` as a user runs it: outputs, summary, and one-line errors with a non-zero
//! exit for each kind of bad input (issue 2, item 9).

use spelunk_perf::writer::SpeMetadataLayout;
use spelunk_perf::{PerfDataFile, RecordingSpec};
use spelunk_testkit::SynthRecording;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn spelunk(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .args(args)
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("spelunk-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The error is one line on stderr, naming the file.
fn assert_one_line_error(r: &Run, file: &Path, needle: &str) {
    assert_ne!(r.code, 0, "expected failure, got success:\n{}", r.stdout);
    let lines: Vec<&str> = r.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "error is not one line:\n{}", r.stderr);
    assert!(lines[0].starts_with("spelunk: error: "), "{}", lines[0]);
    assert!(
        lines[0].contains(s(file)),
        "error does not name the file: {}",
        lines[0]
    );
    assert!(
        lines[0].contains(needle),
        "error lacks '{needle}': {}",
        lines[0]
    );
}

#[test]
fn decodes_a_recording_into_three_tables_with_every_record() {
    let d = scratch("ok");
    let data = d.join("perf.data");
    let spec = SynthRecording {
        cpus: 2,
        records_per_cpu: 3000,
        ..Default::default()
    };
    spec.write(&data).unwrap();
    let r = spelunk(&["decode", s(&data), "-o", s(&d.join("out")), "-f", "csv"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("SPE records decoded: 6000"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("nothing lost"), "{}", r.stdout);
    // Rows per table equal the records of each class the generator wrote.
    let (mut ldst, mut br, mut other) = (0, 0, 0);
    for cpu in 0..2 {
        for rec in spec.records(cpu) {
            let op = rec.op.unwrap();
            if op.is_load() || op.is_store() {
                ldst += 1;
            } else if op.is_branch() {
                br += 1;
            } else {
                other += 1;
            }
        }
    }
    for (suffix, want) in [("ldst", ldst), ("br", br), ("other", other)] {
        let text = std::fs::read_to_string(d.join(format!("out-{suffix}.csv"))).unwrap();
        assert_eq!(text.lines().count() - 1, want, "{suffix}");
    }
}

#[test]
fn default_prefix_is_the_input_name_without_data() {
    let d = scratch("prefix");
    let data = d.join("run7.data");
    SynthRecording {
        cpus: 1,
        records_per_cpu: 100,
        ..Default::default()
    }
    .write(&data)
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .args(["decode", "run7.data", "-q"])
        .current_dir(&d)
        .output()
        .unwrap();
    assert!(out.status.success());
    for t in ["ldst", "br", "other"] {
        assert!(d.join(format!("run7-{t}.parquet")).exists(), "{t}");
    }
}

#[test]
fn not_a_perf_data_file() {
    let d = scratch("text");
    let f = d.join("notes.txt");
    std::fs::write(&f, "hello, this is not a recording\n").unwrap();
    assert_one_line_error(
        &spelunk(&["decode", s(&f), "-o", s(&d.join("o"))]),
        &f,
        "not a perf.data file",
    );
    let empty = d.join("empty.data");
    std::fs::write(&empty, b"").unwrap();
    assert_one_line_error(
        &spelunk(&["decode", s(&empty), "-o", s(&d.join("o"))]),
        &empty,
        "",
    );
    let missing = d.join("missing.data");
    assert_one_line_error(
        &spelunk(&["decode", s(&missing), "-o", s(&d.join("o"))]),
        &missing,
        "",
    );
}

#[test]
fn a_raw_buffer_is_pointed_at_raw_and_the_reverse() {
    let d = scratch("raw");
    let raw = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/spe/spe-b1-ts1.data");
    assert_one_line_error(
        &spelunk(&["decode", s(&raw), "-o", s(&d.join("o"))]),
        &raw,
        "--raw",
    );
    let data = d.join("perf.data");
    SynthRecording {
        cpus: 1,
        records_per_cpu: 10,
        ..Default::default()
    }
    .write(&data)
    .unwrap();
    assert_one_line_error(
        &spelunk(&["decode", "--raw", s(&data), "-o", s(&d.join("o"))]),
        &data,
        "drop --raw",
    );
    // And --raw works on the real buffer.
    let r = spelunk(&[
        "decode",
        "--raw",
        "--cpu",
        "0",
        s(&raw),
        "-o",
        s(&d.join("r")),
        "-f",
        "csv",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("SPE records decoded: 1"));
}

#[test]
fn a_perf_data_without_spe() {
    let d = scratch("nospe");
    let f = d.join("cpuclock.data");
    let st = Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-o", s(&f), "--", "true"])
        .status()
        .expect("perf is needed (make test installs it)");
    assert!(st.success());
    assert_one_line_error(
        &spelunk(&["decode", s(&f), "-o", s(&d.join("o"))]),
        &f,
        "contains no Arm SPE data",
    );
}

#[test]
fn a_truncated_recording_keeps_its_tables_and_fails() {
    let d = scratch("trunc");
    let data = d.join("perf.data");
    SynthRecording {
        cpus: 2,
        records_per_cpu: 5000,
        ..Default::default()
    }
    .write(&data)
    .unwrap();
    let bytes = std::fs::read(&data).unwrap();
    let cut = d.join("cut.data");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let r = spelunk(&["decode", s(&cut), "-o", s(&d.join("o")), "-f", "csv"]);
    assert_ne!(r.code, 0);
    assert!(r.stdout.contains("LOSSES"), "{}", r.stdout);
    assert!(
        r.stderr.contains("damaged recording") && r.stderr.contains(s(&cut)),
        "{}",
        r.stderr
    );
    // Roughly half the records were recovered and written.
    let text = std::fs::read_to_string(d.join("o-ldst.csv")).unwrap();
    let rows = text.lines().count() - 1;
    assert!(rows > 2000 && rows < 6000, "{rows}");
}

#[test]
fn an_unknown_spe_metadata_version_is_named() {
    let d = scratch("version");
    let data = d.join("v2.data");
    let spec = SynthRecording {
        cpus: 1,
        records_per_cpu: 10,
        ..Default::default()
    };
    // Write a version-2 recording, then patch its version field to 9.
    let path = d.join("tmp.data");
    spec.write(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let mut w = spelunk_perf::SpeRecordingWriter::create(
        &data,
        RecordingSpec {
            metadata: SpeMetadataLayout::V2,
            ..RecordingSpec::default()
        },
    )
    .unwrap();
    w.aux(
        0,
        spelunk_perf::Task::new(1, 1),
        1000,
        spelunk_perf::AuxFlags(0),
        &[0x01],
    )
    .unwrap();
    w.finish().unwrap();
    let f = PerfDataFile::open(&data).unwrap();
    let rec = f.auxtrace_info.as_ref().unwrap().offset;
    let mut bytes = std::fs::read(&data).unwrap();
    // Record header (8) + type and reserved (8), then priv[0] = the header version.
    let at = rec as usize + 16;
    assert_eq!(u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()), 2);
    bytes[at..at + 8].copy_from_slice(&9u64.to_le_bytes());
    std::fs::write(&data, &bytes).unwrap();
    assert_one_line_error(
        &spelunk(&["decode", s(&data), "-o", s(&d.join("o"))]),
        &data,
        "9",
    );
}
