//! `spelunk advise` on recordings shaped as a hardware one (no emulator sidecar: no counters,
//! no configured latencies): findings or "insufficient evidence" with the reason, never an
//! error; every class of the vocabulary accounted for, each once; the report's first lines and
//! `spelunk advise --json` from one model. (The fixes suite under the emulator checks what the
//! findings say: advise_suite.rs.)

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The documented vocabulary (docs/advise.md, "Classes and rules").
const CLASSES: [&str; 14] = [
    "false-sharing",
    "true-sharing",
    "tlb",
    "traversal",
    "layout",
    "split-line",
    "store-forwarding",
    "prefetch",
    "bandwidth",
    "remote-memory",
    "branch-mispredict",
    "heap-churn",
    "front-end",
    "core",
];

fn recording(name: &str, records: u64) -> PathBuf {
    let d = std::env::temp_dir().join(format!("spelunk-advise-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let data = d.join("rec.data");
    spelunk_testkit::SynthRecording {
        cpus: 2,
        records_per_cpu: records,
        ..Default::default()
    }
    .write(&data)
    .unwrap();
    data
}

fn spelunk(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn advise_json(data: &Path) -> Value {
    let (ok, out, err) = spelunk(&["advise", data.to_str().unwrap(), "--json"]);
    assert!(ok, "{err}");
    serde_json::from_str(&out).unwrap()
}

/// Every class appears once: raised, or ruled out with a reason.
fn every_class_once(a: &Value) {
    let mut seen = Vec::new();
    for f in a["findings"].as_array().unwrap() {
        seen.push(f["class"].as_str().unwrap().to_string());
    }
    for r in a["ruled_out"].as_array().unwrap() {
        assert!(!r["reason"].as_str().unwrap().is_empty(), "{r}");
        seen.push(r["class"].as_str().unwrap().to_string());
    }
    let raised: BTreeSet<_> = a["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["class"].as_str().unwrap())
        .collect();
    for c in CLASSES {
        assert!(seen.iter().any(|s| s == c), "class {c} missing: {a:#}");
        if !raised.contains(c) {
            assert_eq!(seen.iter().filter(|s| *s == c).count(), 1, "{c}");
        }
    }
}

#[test]
fn a_hardware_shaped_recording_gives_findings_or_reasons() {
    let data = recording("hw", 3000);
    let a = advise_json(&data);
    assert_eq!(a["schema"], "spelunk-advise/1.1");
    assert_eq!(a["emulated"], false);
    // No counters: the run's cycles are the sampled cost × the interval, and it says so.
    assert!(
        a["totals"]["cycles_source"]
            .as_str()
            .unwrap()
            .contains("no cycle counter"),
        "{a:#}"
    );
    every_class_once(&a);
    // Findings are ranked by cycles at stake, largest first; each has a fix and a range.
    let f = a["findings"].as_array().unwrap();
    for w in f.windows(2) {
        assert!(
            w[0]["gain"]["cycles_at_stake"].as_f64() >= w[1]["gain"]["cycles_at_stake"].as_f64()
        );
    }
    for x in f {
        let g = &x["gain"];
        assert!(g["low_speedup"].as_f64() <= g["likely_speedup"].as_f64());
        assert!(g["likely_speedup"].as_f64() <= g["upper_speedup"].as_f64());
        assert!(!x["fix"]["summary"].as_str().unwrap().is_empty());
        assert!(!x["source"].as_str().unwrap().is_empty());
    }
    // The report leads with the same findings (its `advice` is advise's output).
    let (ok, out, err) = spelunk(&["report", data.to_str().unwrap(), "--json"]);
    assert!(ok, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["advice"]["findings"], a["findings"]);
    assert_eq!(r["hotspot_sort"], "cost");
    let (ok, text, err) = spelunk(&["report", data.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(
        text.contains("findings (most cycles at stake first")
            || text.contains("findings: none raised"),
        "{text}"
    );
}

#[test]
fn too_few_samples_is_insufficient_evidence() {
    let data = recording("few", 20);
    let a = advise_json(&data);
    every_class_once(&a);
    assert!(a["findings"].as_array().unwrap().is_empty(), "{a:#}");
    assert!(a["ruled_out"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["kind"] == "insufficient-evidence"
            && r["reason"].as_str().unwrap().contains("too few")));
}

#[test]
fn a_recording_without_samples_is_insufficient_evidence() {
    let data = recording("none", 0);
    let a = advise_json(&data);
    every_class_once(&a);
    assert!(a["findings"].as_array().unwrap().is_empty());
    assert!(a["ruled_out"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["kind"] == "insufficient-evidence"));
}

#[test]
fn advise_html_is_one_offline_page_with_the_findings() {
    let data = recording("html", 3000);
    let page = data.with_file_name("advice.html");
    let (ok, _, err) = spelunk(&[
        "advise",
        data.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("spelunk-advise/1") && html.contains("\"advice\":{"));
    assert!(html.contains("default-src 'none'"));
}

/// The real-hardware SPE buffers in tests/data/spe (raw: no perf.data around them) give advice,
/// never an error: one record is insufficient evidence, said with the reason; read as raw
/// without `--raw` too, and with it.
#[test]
fn a_raw_hardware_buffer_gives_insufficient_evidence_not_an_error() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/spe");
    for name in ["spe-b1-ts0.data", "spe-b1-ts1.data"] {
        let f = dir.join(name);
        for extra in [&[][..], &["--raw"][..]] {
            let mut args = vec!["advise", f.to_str().unwrap(), "--json"];
            args.extend_from_slice(extra);
            let (ok, out, err) = spelunk(&args);
            assert!(ok, "{name} {extra:?}: {err}");
            let a: Value = serde_json::from_str(&out).unwrap();
            assert_eq!(a["findings"].as_array().unwrap().len(), 0, "{a:#}");
            every_class_once(&a);
            let r = a["ruled_out"][0]["reason"].as_str().unwrap();
            // The buffer holds one branch record (its README).
            assert!(r.contains("1 samples selected"), "{r}");
            assert!(
                a["notes"].to_string().contains("raw SPE buffer"),
                "{}",
                a["notes"]
            );
        }
    }
    // 300 copies of one buffer: enough samples for the rules to run over its branch records.
    let bytes = std::fs::read(dir.join("spe-b1-ts1.data")).unwrap();
    let tmp = std::env::temp_dir().join(format!("spelunk-advise-raw-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let many = tmp.join("many.raw");
    std::fs::write(&many, bytes.repeat(300)).unwrap();
    let (ok, out, err) = spelunk(&["advise", many.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("300 samples"), "{out}");
    assert!(out.contains("raw SPE buffer"), "{out}");
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// `--verify` re-runs the program under the emulator: a hardware recording has nothing to
/// re-run, which is said, with a non-zero exit.
#[test]
fn verify_refuses_a_hardware_recording() {
    let data = recording("verify", 2000);
    let (ok, out, err) = spelunk(&["advise", data.to_str().unwrap(), "--verify"]);
    assert!(!ok, "{out}");
    assert!(
        err.contains("was recorded on hardware: record it with --emulate"),
        "{err}"
    );
}
