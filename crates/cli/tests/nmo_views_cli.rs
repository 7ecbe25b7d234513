//! NMO's memory-region views in `spelunk report` (text, `--json`, `--html`) on planted
//! recordings whose accesses are known exactly: the cumulative access distribution over the
//! footprint (accesses planted in four pages with chosen counts) and address over time per
//! data object (a sweep through `big_array` of tests/data/c/objects.c, whose address comes
//! from `nm`). Every expected figure is computed by hand from what was planted.

mod planted;

use planted::*;
use serde_json::Value;

/// Far from the program's mappings: no data object.
const HEAP: u64 = 0x7f00_0000_0000;
const PAGE: u64 = 4096;

fn report(data: &std::path::Path, extra: &[&str]) -> Value {
    let mut args = vec!["report", data.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    spelunk_json(&args)
}

/// (access percent, pages, bytes, accesses) of each key point.
fn key_points(f: &Value) -> Vec<(u64, u64, u64, u64)> {
    f["key_points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            let n = |x: &str| k[x].as_u64().unwrap();
            (n("access_percent"), n("regions"), n("bytes"), n("accesses"))
        })
        .collect()
}

/// Page 0: 50 loads and 10 stores (two addresses in it); page 1: 25 loads; page 2: 10
/// stores; page 3: 5 loads; and 20 branches and 5 other operations, without an address.
fn four_pages(exe: &std::path::Path, data: &std::path::Path) {
    let pc = BIAS + nm("nm", exe)["sum_array"].0;
    let ops = sequence(
        &[
            (Op::load(pc, HEAP + 8, 0, 10), 50),
            (Op::store(pc + 4, HEAP + PAGE - 8), 10),
            (Op::load(pc, HEAP + PAGE, 0, 10), 25),
            (Op::store(pc + 4, HEAP + 7 * PAGE + 100), 10),
            (Op::load(pc, HEAP + 9 * PAGE + 4095, 0xe, 300), 5),
            (Op::branch(pc + 8, false), 20),
            (Op::other(pc + 12), 5),
        ],
        1000,
        1000,
    );
    write_recording(data, &Setup::new(exe), &ops);
}

#[test]
fn footprint_of_four_pages_with_known_counts() {
    let dir = Scratch::new("nmoviews-footprint");
    let exe = compile("gcc", "objects.c", &dir.join("objects"), &[]);
    let data = dir.join("pages.data");
    four_pages(&exe, &data);

    // All 100 accesses: 60, 25, 10, 5 per page. 50 % (50) in 1 page, 80 % (80) in 2 (85),
    // 90 % (90) in 3 (95), 99 % (99) in 4 (100).
    let r = report(&data, &[]);
    let f = &r["footprint"];
    assert_eq!(f["region_bytes"], 4096);
    assert_eq!(f["accesses"], 100);
    assert_eq!(f["regions"], 4);
    assert_eq!(f["footprint_bytes"], 4 * 4096);
    assert_eq!(f["hottest_region_fraction"], 0.6);
    assert_eq!(
        key_points(f),
        vec![
            (50, 1, 4096, 60),
            (80, 2, 8192, 85),
            (90, 3, 12288, 95),
            (99, 4, 16384, 100)
        ]
    );
    let curve: Vec<(u64, f64, u64, f64)> = f["curve"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["regions"].as_u64().unwrap(),
                p["footprint_fraction"].as_f64().unwrap(),
                p["accesses"].as_u64().unwrap(),
                p["access_fraction"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        curve,
        vec![
            (0, 0.0, 0, 0.0),
            (1, 0.25, 60, 0.6),
            (2, 0.5, 85, 0.85),
            (3, 0.75, 95, 0.95),
            (4, 1.0, 100, 1.0)
        ]
    );
    // No access falls in an object: no per-object view.
    assert!(r.get("object_timelines").is_none());

    // Loads only (the filter applies): 50, 25, 5 = 80 in three pages. 50 % (40) in 1 page,
    // 80 % (64) in 2 (75), 90 % (72) in 2 (75), 99 % (79.2) in 3 (80).
    let loads = report(&data, &["--event", "load"]);
    let f = &loads["footprint"];
    assert_eq!(
        (f["accesses"].as_u64(), f["regions"].as_u64()),
        (Some(80), Some(3))
    );
    assert_eq!(
        key_points(f),
        vec![
            (50, 1, 4096, 50),
            (80, 2, 8192, 75),
            (90, 2, 8192, 75),
            (99, 3, 12288, 80)
        ]
    );

    // Branches alone have no address: no distribution, and the text says nothing of one.
    let br = report(&data, &["--event", "branch"]);
    assert!(br.get("footprint").is_none(), "{}", br["footprint"]);

    let (ok, text, err) = spelunk(&["report", data.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(
        text.contains(
            "Access distribution over the footprint (4.0 KiB pages per process, hottest first: \
             100 sampled accesses in 4 pages = 16.0 KiB)"
        ),
        "{text}"
    );
    let row = |pct: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(pct))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_else(|| panic!("no row {pct} in {text}"))
    };
    assert_eq!(row("80%"), ["80%", "2", "8.0", "KiB", "50.0%"]);
    assert_eq!(row("99%"), ["99%", "4", "16.0", "KiB", "100.0%"]);
    assert!(
        text.contains("hottest page: 60.0% of the accesses"),
        "{text}"
    );
}

/// 64 loads sweep big_array (offset 512 × i at 1000 + 1000 × i ns), then 8 stores walk
/// small_table (offset 16 × j), then 4 loads read message[0..4]; 1 tick = 1 ns.
fn sweep(exe: &std::path::Path, data: &std::path::Path) {
    let s = nm("nm", exe);
    let at = |name: &str, off: u64| BIAS + s[name].0 + off;
    let pc = at("sum_array", 8);
    let mut ops = Vec::new();
    let mut t = 1000;
    for i in 0..64 {
        ops.push((Op::load(pc, at("big_array", 512 * i), 0, 10), t));
        t += 1000;
    }
    for j in 0..8 {
        ops.push((Op::store(pc + 4, at("small_table", 16 * j)), t));
        t += 1000;
    }
    for k in 0..4 {
        ops.push((Op::load(pc, at("message", k), 0, 10), t));
        t += 1000;
    }
    write_recording(data, &Setup::new(exe), &ops);
}

#[test]
fn address_over_time_per_object_is_the_offset_sweep() {
    let dir = Scratch::new("nmoviews-objects");
    let exe = compile("gcc", "objects.c", &dir.join("objects"), &[]);
    let sizes = nm("nm", &exe);
    let data = dir.join("sweep.data");
    sweep(&exe, &data);

    let r = report(&data, &[]);
    let v = r["object_timelines"].as_array().unwrap();
    let names: Vec<&str> = v.iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["big_array", "small_table", "message"]);
    let big = &v[0];
    assert_eq!(big["object"], 0);
    assert_eq!(big["size_bytes"], sizes["big_array"].1);
    assert_eq!(big["samples"], 64);
    let pts: Vec<(u64, u64, bool)> = big["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["t_ns"].as_u64().unwrap(),
                p["offset_bytes"].as_u64().unwrap(),
                p["store"].as_bool().unwrap(),
            )
        })
        .collect();
    // Times are since the first sample (the first load).
    let want: Vec<(u64, u64, bool)> = (0..64).map(|i| (1000 * i, 512 * i, false)).collect();
    assert_eq!(pts, want);
    assert_eq!(
        (big["first_t_ns"].as_u64(), big["last_t_ns"].as_u64()),
        (Some(0), Some(63_000))
    );
    assert_eq!(
        (
            big["min_offset_bytes"].as_u64(),
            big["max_offset_bytes"].as_u64()
        ),
        (Some(0), Some(63 * 512))
    );
    let table = &v[1];
    assert_eq!(table["points"].as_array().unwrap().len(), 8);
    assert!(table["points"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["store"] == true));
    assert_eq!(
        (table["first_t_ns"].as_u64(), table["last_t_ns"].as_u64()),
        (Some(64_000), Some(71_000))
    );
    assert_eq!(table["max_offset_bytes"], 7 * 16);
    assert_eq!(v[2]["max_offset_bytes"], 3);

    // --limit 2 lists two objects, so two views.
    let two = report(&data, &["--limit", "2"]);
    assert_eq!(two["object_timelines"].as_array().unwrap().len(), 2);

    let (ok, text, err) = spelunk(&["report", data.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(
        text.contains(
            "Address over time per data object (the timeline's uniform sample of 76 accesses"
        ),
        "{text}"
    );
    let line = text
        .lines()
        .find(|l| l.ends_with(" big_array"))
        .unwrap_or_else(|| panic!("no big_array row in {text}"));
    let cells: Vec<&str> = line.split_whitespace().collect();
    let size = sizes["big_array"].1.to_string();
    assert_eq!(
        cells,
        [
            "64",
            "64",
            "0.0",
            "us",
            "63.0",
            "us",
            "0x0..0x7e00",
            &size,
            "big_array"
        ]
    );

    // The page embeds the same views.
    let html = dir.join("sweep.html");
    let (ok, _, err) = spelunk(&[
        "report",
        data.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let page = std::fs::read_to_string(&html).unwrap();
    let open = r#"<script type="application/json" id="spelunk-data">"#;
    let start = page.find(open).unwrap() + open.len();
    let end = start + page[start..].find("</script>").unwrap();
    let embedded: Value = serde_json::from_str(&page[start..end]).unwrap();
    assert_eq!(
        embedded["report"]["object_timelines"],
        r["object_timelines"]
    );
    assert_eq!(embedded["report"]["footprint"], r["footprint"]);
}
