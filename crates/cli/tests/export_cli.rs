//! `spelunk export --dataset`: recordings appended to a Hive-partitioned Parquet dataset. The
//! files are read back with the parquet crate's own reader (not spelunk's writer); row counts
//! are the synthetic recordings' record counts, and per-function counts are `spelunk report`'s.

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use spelunk_testkit::SynthRecording;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("spelunk-export-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn spelunk(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every row's (dso, function), counted, and the number of rows.
fn functions(file: &Path) -> (HashMap<(String, String), u64>, u64) {
    let reader = SerializedFileReader::new(std::fs::File::open(file).unwrap()).unwrap();
    let mut out = HashMap::new();
    let mut rows = 0;
    for row in reader.get_row_iter(None).unwrap() {
        let row = row.unwrap();
        rows += 1;
        let mut dso = None;
        let mut function = None;
        for (name, v) in row.get_column_iter() {
            match (name.as_str(), v) {
                ("dso", Field::Str(s)) => dso = Some(s.clone()),
                ("function", Field::Str(s)) => function = Some(s.clone()),
                _ => {}
            }
        }
        if let (Some(d), Some(f)) = (dso, function) {
            *out.entry((d, f)).or_default() += 1;
        }
    }
    (out, rows)
}

#[test]
fn recordings_append_as_partitions_that_match_the_report_and_are_never_overwritten() {
    let dir = scratch("append");
    let a = dir.join("a.data");
    let b = dir.join("b.data");
    // three shared libraries: samples spread over several (dso, function) groups
    let synth = |cpus, records_per_cpu, seed| SynthRecording {
        cpus,
        records_per_cpu,
        seed,
        mappings: 3,
        ..Default::default()
    };
    synth(2, 3000, 1).write(&a).unwrap();
    synth(1, 2000, 2).write(&b).unwrap();
    let ds = dir.join("fleet");
    let ds_s = ds.to_str().unwrap();

    // host from the recording's header ("synthetic"), run from the file name
    let o = spelunk(&["export", a.to_str().unwrap(), "--dataset", ds_s, "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = spelunk(&[
        "export",
        b.to_str().unwrap(),
        "--dataset",
        ds_s,
        "--host",
        "graviton 7/b",
        "--run",
        "nightly",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("2000 samples"));

    let marker: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ds.join("_spelunk_dataset.json")).unwrap()).unwrap();
    assert_eq!(marker["format"], "spelunk-dataset");
    assert_eq!(marker["version"], 1);
    let pa = ds.join("host=synthetic/run=a");
    let pb = ds.join("host=graviton%207%2Fb/run=nightly");
    let (fa, rows_a) = functions(&pa.join("samples.parquet"));
    let (_, rows_b) = functions(&pb.join("samples.parquet"));
    // one row per record the generator wrote
    assert_eq!((rows_a, rows_b), (2 * 3000, 2000));
    let run: serde_json::Value =
        serde_json::from_slice(&std::fs::read(pb.join("_run.json")).unwrap()).unwrap();
    assert_eq!(run["host"], "graviton 7/b");
    assert_eq!(run["samples"], 2000);
    // a whole recording lost nothing
    assert_eq!(run["losses"]["incomplete_records"], 0);
    assert_eq!(run["losses"]["problems"], serde_json::json!([]));

    // grouped by function, the rows give the report's hotspots
    let o = spelunk(&["report", a.to_str().unwrap(), "--json", "--limit", "100000"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let hot = r["hotspots"]["functions"].as_array().unwrap();
    assert_eq!(hot.len(), fa.len());
    assert!(fa.len() >= 3, "{fa:?}");
    for h in hot {
        let key = (
            h["dso"].as_str().unwrap().to_string(),
            h["function"].as_str().unwrap().to_string(),
        );
        assert_eq!(
            fa.get(&key),
            h["samples"].as_u64().as_ref(),
            "{key:?} in {fa:?}"
        );
    }

    // appending the same partition again is refused, and the partition is untouched
    let before = std::fs::read(pa.join("samples.parquet")).unwrap();
    let o = spelunk(&[
        "export",
        b.to_str().unwrap(),
        "--dataset",
        ds_s,
        "--run",
        "a",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("never written over"), "{}", stderr(&o));
    assert_eq!(std::fs::read(pa.join("samples.parquet")).unwrap(), before);
    // nothing half-written is left behind
    let names: Vec<String> = std::fs::read_dir(&ds)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.starts_with(".staging")),
        "{names:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_directory_that_is_not_a_dataset_and_bad_input_are_refused() {
    let dir = scratch("refuse");
    let a = dir.join("a.data");
    SynthRecording {
        records_per_cpu: 100,
        ..Default::default()
    }
    .write(&a)
    .unwrap();
    // a directory holding other files does not become a dataset
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "mine").unwrap();
    let o = spelunk(&[
        "export",
        a.to_str().unwrap(),
        "--dataset",
        other.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("notes.txt"), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(&other).unwrap().count(), 1);
    // a dataset of another version is not added to
    let v9 = dir.join("v9");
    std::fs::create_dir_all(&v9).unwrap();
    std::fs::write(
        v9.join("_spelunk_dataset.json"),
        r#"{"format":"spelunk-dataset","version":9}"#,
    )
    .unwrap();
    let o = spelunk(&[
        "export",
        a.to_str().unwrap(),
        "--dataset",
        v9.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("version 1"), "{}", stderr(&o));
    // a file that is not a recording: an error naming it, and no partition
    let junk = dir.join("junk.data");
    std::fs::write(&junk, b"not a perf.data file at all").unwrap();
    let ds = dir.join("ds");
    let o = spelunk(&[
        "export",
        junk.to_str().unwrap(),
        "--dataset",
        ds.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("junk.data"), "{}", stderr(&o));
    assert!(!ds.join("host=synthetic").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
