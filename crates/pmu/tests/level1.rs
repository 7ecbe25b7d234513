//! Level-1 (slot-based) metrics on synthetic counts chosen so the hand arithmetic is exact, the
//! slot width from caps/slots overriding the catalog's, and the level-1 sanity warnings.

use spelunk_pmu::catalog;
use spelunk_pmu::compute::{evaluate, Selection, StageFilter, WarningKind};
use spelunk_pmu::report::cpu_report;
use spelunk_pmu::{EventCount, Measurement};

fn m(pairs: &[(&str, f64)]) -> Measurement {
    Measurement::single(
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), EventCount::counted(*v, Some(1.0))))
            .collect(),
    )
}

#[track_caller]
fn close(a: Option<f64>, b: f64) {
    let a = a.expect("value");
    assert!((a - b).abs() < 1e-9, "{a} != {b}");
}

const V2_COUNTS: &[(&str, f64)] = &[
    ("CPU_CYCLES", 1000.0),
    ("STALL_SLOT_FRONTEND", 1600.0),
    ("STALL_SLOT_BACKEND", 3200.0),
    ("STALL_SLOT", 4800.0),
    ("OP_RETIRED", 2400.0),
    ("OP_SPEC", 3000.0),
    ("BR_MIS_PRED", 10.0),
];

#[test]
fn v2_level1_by_hand() {
    let c = catalog::builtin("neoverse-v2").unwrap();
    let sel = Selection::resolve(&c, StageFilter::One, &[], &[]).unwrap();
    let e = evaluate(&c, &sel, &m(V2_COUNTS), Some(8));
    // FE = 100 * (1600 / (1000 * 8) - 10 / 1000) = 100 * (0.2 - 0.01) = 19
    close(e.metric("frontend_bound").unwrap().value, 19.0);
    // BE = 100 * (3200 / 8000 - 3 * 10 / 1000) = 100 * (0.4 - 0.03) = 37
    close(e.metric("backend_bound").unwrap().value, 37.0);
    // Retiring = 100 * (2400 / 3000) * (1 - 4800 / 8000) = 100 * 0.8 * 0.4 = 32
    close(e.metric("retiring").unwrap().value, 32.0);
    // Bad speculation = 100 * ((1 - 0.8) * 0.4 + 4 * 10 / 1000) = 100 * (0.08 + 0.04) = 12
    close(e.metric("bad_speculation").unwrap().value, 12.0);
    // 19 + 37 + 32 + 12 = 100: no level-1 warning; back end is the bottleneck (37 > 20 and
    // larger than the front end's 19 > 15).
    assert!(e.warnings.is_empty(), "{:?}", e.warnings);
    assert_eq!(e.bottleneck_path, vec!["backend_bound"]);
    assert!(e.metric("frontend_bound").unwrap().flagged);
}

#[test]
fn caps_slots_override_the_catalog_width() {
    let c = catalog::builtin("neoverse-v2").unwrap();
    let cpu = cpu_report(&c, Some(10), None, Vec::new());
    assert_eq!(cpu.slots, Some(10));
    assert_eq!(cpu.slots_source, "pmu caps/slots");
    assert!(cpu.notes[0].contains("assumes 8"), "{:?}", cpu.notes);
    let sel = Selection::resolve(&c, StageFilter::One, &[], &[]).unwrap();
    let e = evaluate(&c, &sel, &m(V2_COUNTS), cpu.slots);
    // FE = 100 * (1600 / 10000 - 0.01) = 15; BE = 100 * (0.32 - 0.03) = 29
    close(e.metric("frontend_bound").unwrap().value, 15.0);
    close(e.metric("backend_bound").unwrap().value, 29.0);
    // No slot width known at all: slot metrics are unavailable, not computed with a guess.
    let e = evaluate(&c, &sel, &m(V2_COUNTS), None);
    assert_eq!(e.metric("backend_bound").unwrap().value, None);
}

#[test]
fn n2_r0p2_correction_can_go_negative_and_is_reported() {
    let c = catalog::builtin("neoverse-n2-r0p2").unwrap();
    let sel = Selection::resolve(&c, StageFilter::One, &[], &[]).unwrap();
    let counts = m(&[
        ("CPU_CYCLES", 1000.0),
        ("STALL_SLOT_FRONTEND", 500.0),
        ("STALL_SLOT_BACKEND", 2000.0),
        ("STALL_SLOT", 2500.0),
        ("OP_RETIRED", 900.0),
        ("OP_SPEC", 1000.0),
        ("BR_MIS_PRED", 10.0),
    ]);
    let e = evaluate(&c, &sel, &counts, Some(5));
    // FE = 100 * ((500 - 1000) / 5000 - 10 / 1000) = 100 * (-0.1 - 0.01) = -11
    close(e.metric("frontend_bound").unwrap().value, -11.0);
    assert!(e
        .warnings
        .iter()
        .any(|w| w.kind == WarningKind::NegativeLevel1 && w.message.contains("frontend_bound")));
    // The r0p3 formula has no correction: FE = 100 * (500 / 5000 - 0.01) = 9.
    let c3 = catalog::builtin("neoverse-n2-r0p3").unwrap();
    let e3 = evaluate(&c3, &sel, &counts, Some(5));
    close(e3.metric("frontend_bound").unwrap().value, 9.0);
}

#[test]
fn inconsistent_counts_trigger_level1_sum_mpki_and_refill_warnings() {
    let c = catalog::builtin("neoverse-v2").unwrap();
    let sel = Selection::resolve(&c, StageFilter::One, &[], &[]).unwrap();
    let mut counts: Vec<(&str, f64)> = V2_COUNTS.to_vec();
    counts[3] = ("STALL_SLOT", 0.0); // STALL_SLOT from another run: the shares no longer add up
    let e = evaluate(&c, &sel, &m(&counts), Some(8));
    assert!(e.warnings.iter().any(|w| w.kind == WarningKind::Level1Sum));

    let n1 = catalog::builtin("neoverse-n1").unwrap();
    let sel = Selection::resolve(&n1, StageFilter::All, &[], &[]).unwrap();
    let e = evaluate(
        &n1,
        &sel,
        &m(&[
            ("INST_RETIRED", 1000.0),
            ("L1D_CACHE", 800.0),
            ("L1D_CACHE_REFILL", 950.0), // 950 MPKI and more refills than accesses
        ]),
        Some(5),
    );
    assert!(e
        .warnings
        .iter()
        .any(|w| w.kind == WarningKind::MpkiNearThousand));
    assert!(e
        .warnings
        .iter()
        .any(|w| w.kind == WarningKind::RefillsExceedAccesses
            && w.message.contains("l1d_cache_miss_ratio")));
}

#[test]
fn node_selection_walks_the_tree() {
    let c = catalog::builtin("neoverse-v3").unwrap();
    let sel = Selection::resolve(&c, StageFilter::All, &[], &["backend_bound".into()]).unwrap();
    let ms = sel.metrics();
    for m in [
        "backend_bound",
        "backend_mem_bound",
        "backend_cache_l1d_bound",
        "dtlb_mpki",
    ] {
        assert!(ms.contains(&m.to_string()), "{m} missing from {ms:?}");
    }
    assert!(!ms.contains(&"frontend_bound".to_string()));
    assert!(Selection::resolve(&c, StageFilter::All, &["nope".into()], &[]).is_err());
}

#[test]
fn user_spec_files_load_at_run_time() {
    // The trimmed N1 file stands in for a file a user passes with --spec.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/data/telemetry/neoverse-n1.json"
    );
    let json = std::fs::read_to_string(path).unwrap();
    let c = spelunk_pmu::Catalog::from_spec_json(&json, "mine", path, false).unwrap();
    assert_eq!(c.events["STALL_BACKEND"], 0x24);
    assert_eq!(c.stage1, vec!["Cycle_Accounting"]);
    assert!(c.warnings.is_empty());
}
