//! The report's "Compute and prefetch" section (NMO's perp and pf modes) from a sidecar's counter
//! totals: synthetic recordings with hand-chosen counts, so every expected figure below is
//! worked out by hand from the counts and the event definitions in docs/report.md.

use serde_json::Value;
use spelunk_perf::sidecar::Sidecar;
use std::path::{Path, PathBuf};
use std::process::Command;

fn dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("compute-prefetch")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A synthetic recording with a sidecar from `midr` and `totals` (no sidecar when `None`).
fn recording(name: &str, sidecar: Option<(&str, &[(&str, u64)])>) -> PathBuf {
    let data = dir(name).join("rec.data");
    spelunk_testkit::SynthRecording {
        cpus: 1,
        records_per_cpu: 200,
        ..Default::default()
    }
    .write(&data)
    .unwrap();
    if let Some((midr, totals)) = sidecar {
        let mut sc = Sidecar::new("emulator");
        sc.config.insert("midr".into(), midr.into());
        sc.config.insert("cache_line_bytes".into(), 64.into());
        for (k, v) in totals {
            sc.counters.totals.insert(k.to_string(), *v);
        }
        sc.write(&Sidecar::path_for(&data)).unwrap();
    }
    data
}

fn report(data: &Path, json: bool) -> (Value, String) {
    let mut args = vec!["report", data.to_str().unwrap()];
    if json {
        args.push("--json");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let v = if json {
        serde_json::from_str(&text).unwrap()
    } else {
        Value::Null
    };
    (v, text)
}

#[test]
fn v1_intensity_from_operation_counts() {
    // Neoverse V1 (part 0xd40): 256-bit SVE, so FP_SCALE_OPS_SPEC counts twice.
    let data = recording(
        "v1",
        Some((
            "0x411fd402",
            &[
                ("FP_FIXED_OPS_SPEC", 3000),
                ("FP_SCALE_OPS_SPEC", 1000),
                ("CPU_CYCLES", 10_000),
                ("LL_CACHE_MISS_RD", 50),
                ("L2D_CACHE_REFILL", 100),
            ],
        )),
    );
    let (r, _) = report(&data, true);
    let c = &r["compute"];
    assert_eq!(c["core"], "Neoverse V1");
    let i = &c["intensity"];
    // 3000 + 1000 x 256/128 = 5000 FLOPs; 5000 / 10000 cycles.
    assert_eq!(i["flops"].as_f64(), Some(5000.0));
    assert_eq!(i["flops_per_cycle"].as_f64(), Some(0.5));
    // Memory reads: 50 x 64 = 3200 B -> 1.5625 FLOPs/B; beyond L2: 100 x 64 = 6400 B -> 0.78125.
    assert_eq!(i["traffic"][0]["bytes"], 3200);
    assert_eq!(i["traffic"][0]["flops_per_byte"].as_f64(), Some(1.5625));
    assert_eq!(i["traffic"][1]["bytes"], 6400);
    assert_eq!(i["traffic"][1]["flops_per_byte"].as_f64(), Some(0.78125));
    assert!(i["ridge_flops_per_byte"].is_null());
    // V1 counts no use of prefetched lines: not available, naming the events.
    assert!(c["prefetch"]["accuracy"].is_null());
    let why = c["prefetch"]["not_available"][0].as_str().unwrap();
    assert!(
        why.contains(
            "L1D_CACHE_HIT_RD_FHWPRF, L1D_CACHE_REFILL_HWPRF not implemented on Neoverse V1"
        ),
        "{why}"
    );

    let (_, text) = report(&data, false);
    assert!(
        text.contains("Compute and prefetch (from the counter totals of Neoverse V1; 64 B lines)")
    );
    assert!(text.contains("FLOPs: 5000 = FP_FIXED_OPS_SPEC + FP_SCALE_OPS_SPEC x 256/128"));
    assert!(text.contains(
        "intensity against memory reads: 3200 B = LL_CACHE_MISS_RD x 64 B: 1.5625 FLOPs/B"
    ));
}

#[test]
fn n1_flops_not_available() {
    // Neoverse N1 (part 0xd0c) has no FP operation events; these counts have no FP events at all.
    let data = recording(
        "n1",
        Some((
            "0x413fd0c1",
            &[("CPU_CYCLES", 1000), ("LL_CACHE_MISS_RD", 10)],
        )),
    );
    let (r, _) = report(&data, true);
    let na: Vec<&str> = r["compute"]["intensity"]["not_available"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        na,
        [
            "FLOPs: FP_FIXED_OPS_SPEC, FP_SCALE_OPS_SPEC not implemented on Neoverse N1",
            "FP and SIMD instructions: VFP_SPEC, ASE_SPEC not counted in this recording",
            "traffic beyond L2: L2D_CACHE_REFILL not counted in this recording",
        ]
    );
    assert!(r["compute"]["intensity"]["flops"].is_null());
    assert_eq!(r["compute"]["intensity"]["traffic"][0]["bytes"], 640);
    let (_, text) = report(&data, false);
    assert!(!text.contains("FLOPs/B"), "{text}");
    assert!(text.contains(
        "  not available: FLOPs: FP_FIXED_OPS_SPEC, FP_SCALE_OPS_SPEC not implemented on Neoverse N1"
    ));
}

#[test]
fn no_counters_no_section() {
    let data = recording("none", None);
    let (r, _) = report(&data, true);
    assert!(r.get("compute").is_none());
    let (_, text) = report(&data, false);
    assert!(!text.contains("Compute and prefetch"));
}
