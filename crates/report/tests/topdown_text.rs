//! The top-down renderings (text, CSV, JSON) of reports imported from the `perf stat -x`
//! fixtures of crates/pmu/tests/data, whose numbers crates/pmu/tests/acceptance.rs checks.

use spelunk_pmu::compute::{Selection, StageFilter};
use spelunk_pmu::report::{import_report, ImportOptions, Report};
use spelunk_report::topdown_text::{render_csv, render_json, render_text};
use std::path::PathBuf;

fn pmu_data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../pmu/tests/data")
        .join(name)
}

/// The report of fixture `perf-stat/FILE` counted on a Neoverse N1, per CPU when `per_scope`.
fn report_of(file: &str, per_scope: bool) -> Report {
    let n1 = spelunk_pmu::catalog::by_name("neoverse-n1")
        .unwrap()
        .catalog;
    let text = std::fs::read_to_string(pmu_data("perf-stat").join(file)).unwrap();
    let counts = spelunk_pmu::import::parse_perf_stat(&text, file, &n1).unwrap();
    let all = Selection::resolve(&n1, StageFilter::All, &[], &[]).unwrap();
    let options = ImportOptions {
        file,
        per_scope,
        per_phase: false,
        slots: None,
        notes: vec![],
    };
    import_report(&counts, &n1, &all, options)
}

#[test]
fn an_interval_run_renders_its_timeline() {
    let r = report_of("synthetic-interval-percpu-multiplexed.csv", true);
    // Text and CSV carry the timeline.
    let text = render_text(&r);
    assert!(text.contains("Timeline"), "{text}");
    let csv = render_csv(&r);
    assert!(
        csv.lines()
            .any(|l| l.starts_with("CPU0,1.0001,1,Cycle_Accounting,backend_stalled_cycles,80,")),
        "{csv}"
    );
}

#[test]
fn text_rendering_marks_the_bottleneck() {
    let r = report_of("seed001-stride-baseline.csv", false);
    let text = render_text(&r);
    let line = text
        .lines()
        .find(|l| l.contains("backend_stalled_cycles"))
        .unwrap();
    assert!(line.contains("83.95"), "{line}");
    assert!(line.contains("<== bottleneck"), "{line}");
    assert!(text.contains("next: DTLB_Effectiveness"), "{text}");
    let bm = text.lines().find(|l| l.contains("branch_mpki")).unwrap();
    assert!(
        bm.contains("n/a") && bm.contains("(BR_MIS_PRED_RETIRED not counted)"),
        "{bm}"
    );
}

/// Golden test of the JSON structure (schema spelunk-topdown/1). Regenerate after an intended
/// change with `UPDATE_GOLDEN=1 cargo test -p spelunk-report --test topdown_text`.
#[test]
fn json_golden_seed001_baseline() {
    let r = report_of("seed001-stride-baseline.csv", false);
    let json = render_json(&r);
    let golden = pmu_data("golden/seed001-stride-baseline.json");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(&golden, &json).unwrap();
    }
    let want = std::fs::read_to_string(&golden).unwrap();
    assert_eq!(
        json, want,
        "JSON output changed; see the test's doc comment"
    );
    // And the parts consumers rely on, independent of the golden file.
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["schema"], "spelunk-topdown/1");
    assert_eq!(v["source"]["kind"], "import");
    let scope = &v["scopes"][0];
    assert_eq!(scope["cpu"]["catalog"], "neoverse-n1");
    assert_eq!(
        scope["totals"]["bottleneck_path"][0],
        "backend_stalled_cycles"
    );
    let ipc = scope["totals"]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "ipc")
        .unwrap();
    assert_eq!(ipc["units"], "per cycle");
    assert!(ipc["value"].as_f64().is_some());
    let bm = scope["totals"]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "branch_mpki")
        .unwrap();
    assert!(bm["value"].is_null());
    assert_eq!(bm["unavailable"]["reason"], "missing_event");
    assert_eq!(scope["events"]["CPU_CYCLES"]["value"], 43809490290.0);
}

/// The HTML page embeds a report computed from a sidecar as the value its `--json` text
/// parses to, so a computed section and a `--topdown FILE` section are the same page.
#[test]
fn a_computed_report_embeds_as_its_json_reads() {
    use spelunk_report::html::Topdown;
    let r = report_of("synthetic-interval-percpu-multiplexed.csv", true);
    let parsed = Topdown::from_json(&render_json(&r), "td.json").unwrap();
    assert_eq!(Topdown::from_report(&r).unwrap(), parsed);
}
