//! `spelunk diff A B` on two planted recordings whose differences are known: samples moved from
//! frd to mixed, frd's loads partly moved to L2, mixed's partly to L1D, and main disappeared.
//! Every delta below is hand-computed from what was planted.

mod planted;

use planted::*;
use serde_json::Value;

const DRAM: u64 = 0b1110;
const L2: u64 = 0b1000;

fn row<'a>(rows: &'a Value, key: &str) -> &'a Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key)
        .unwrap_or_else(|| panic!("no row {key} in {rows}"))
}

fn close(v: &Value, want: f64) -> bool {
    v.as_f64().is_some_and(|x| (x - want).abs() < 1e-12)
}

#[test]
fn planted_differences_per_function_line_and_object() {
    let dir = Scratch::new("diff");
    let exe = compile("gcc", "bandwidth.c", &dir.join("bw"), &[]);
    let syms = nm("nm", &exe);
    let frd = objdump_function("objdump", &exe, "frd");
    let ld = BIAS
        + frd
            .iter()
            .find(|i| i.text.contains("DWORD PTR [rdi]"))
            .unwrap()
            .address;
    let mixed = objdump_function("objdump", &exe, "mixed");
    let q = BIAS
        + mixed
            .iter()
            .find(|i| i.text.contains("QWORD PTR [rdi]"))
            .unwrap()
            .address;
    let (ints, longs) = (BIAS + syms["ints"].0, BIAS + syms["longs"].0);
    let main = BIAS + syms["main"].0;
    // A: frd 600 L1D loads (10 cycles), mixed 350 DRAM loads (300 cycles), main 50 others.
    let a = sequence(
        &[
            (Op::load(ld, ints, 0, 10), 600),
            (Op::load(q, longs, DRAM, 300), 350),
            (Op::other(main), 50),
        ],
        1_000_000,
        1000,
    );
    // B: frd 300 L1D (10) + 100 L2 (20); mixed 300 DRAM (300) + 300 L1D (4).
    let b = sequence(
        &[
            (Op::load(ld, ints, 0, 10), 300),
            (Op::load(ld, ints, L2, 20), 100),
            (Op::load(q, longs, DRAM, 300), 300),
            (Op::load(q, longs, 0, 4), 300),
        ],
        1_000_000,
        1000,
    );
    let (pa, pb) = (dir.join("a.data"), dir.join("b.data"));
    write_recording(&pa, &Setup::new(&exe), &a);
    write_recording(&pb, &Setup::new(&exe), &b);
    let (pa, pb) = (pa.to_str().unwrap(), pb.to_str().unwrap());
    let d = spelunk_json(&["diff", pa, pb, "--json"]);
    assert_eq!(d["schema"], "spelunk-diff/1");
    assert_eq!(d["baseline"]["samples_selected"], 1000);
    assert_eq!(d["new"]["samples_selected"], 1000);

    let f = &d["functions"];
    // Sorted by |Δ share|: mixed +0.25, frd −0.20, main −0.05.
    assert_eq!(f[0]["key"], "mixed");
    assert_eq!(f[1]["key"], "frd");
    assert_eq!(f[2]["key"], "main");
    let m = row(f, "mixed");
    assert!(close(&m["share_baseline"], 0.35) && close(&m["share_new"], 0.6));
    assert!(close(&m["delta_share"], 0.25));
    // Mean latency 300 → (300 × 300 + 300 × 4) / 600 = 152; p50 300 → 4 (rank 300 of 600).
    assert!(close(&m["delta_mean"], 152.0 - 300.0));
    assert_eq!(
        (m["delta_p50"].as_i64(), m["delta_p99"].as_i64()),
        (Some(-296), Some(0))
    );
    let dram = m["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source"] == "DRAM")
        .unwrap();
    assert!(close(&dram["share_baseline"], 1.0) && close(&dram["delta"], -0.5));
    let fr = row(f, "frd");
    assert!(close(&fr["delta_share"], -0.2));
    // 10 → (300 × 10 + 100 × 20) / 400 = 12.5; p99 10 → 20.
    assert!(close(&fr["delta_mean"], 2.5));
    assert_eq!(fr["delta_p99"], 10);
    assert_eq!(fr["sources"][0]["source"], "L1D"); // |−0.25| ties L2D's +0.25; name order
    assert!(close(&fr["sources"][0]["delta"], -0.25));
    let mn = row(f, "main");
    assert_eq!(mn["only_in"], "baseline");
    assert_eq!(mn["samples_new"], 0);
    assert_eq!(mn["delta_mean"], Value::Null);

    // Lines: addr2line's line of each load, keyed "function file:line".
    let lines = addr2line("addr2line", &exe, &[ld - BIAS, q - BIAS]);
    let key = |func: &str, (file, line): &(String, u32)| {
        format!("{func} {}:{line}", file.rsplit('/').next().unwrap())
    };
    let l = row(&d["lines"], &key("frd", &lines[0]));
    assert!(close(&l["delta_share"], -0.2));
    let l = row(&d["lines"], &key("mixed", &lines[1]));
    assert!(close(&l["delta_share"], 0.25));
    // Objects: ints 0.6 → 0.4, longs 0.35 → 0.6.
    let o = row(&d["objects"], "longs (global)");
    assert!(close(&o["delta_share"], 0.25));
    let o = row(&d["objects"], "ints (global)");
    assert!(close(&o["delta_share"], -0.2));

    // Text: perf diff's columns plus latency.
    let (ok, text, err) = spelunk(&["diff", pa, pb, "--by", "function"]);
    assert!(ok, "{err}");
    let mixed_row = text.lines().find(|l| l.contains("mixed [bw]")).unwrap();
    for want in [
        "35.00%",
        "60.00%",
        "+25.00%",
        "300.0",
        "152.0",
        "-148.0",
        "300→4",
        "DRAM 100%→50%",
    ] {
        assert!(
            mixed_row.contains(want),
            "missing '{want}' in '{mixed_row}'"
        );
    }
    assert!(text.contains("(only in baseline)"), "{text}");

    // Filters apply to both sides; nothing matched is an error naming the file.
    let d = spelunk_json(&["diff", pa, pb, "--event", "dram", "--json"]);
    assert_eq!(d["functions"].as_array().unwrap().len(), 1);
    let (ok, _, err) = spelunk(&["diff", pa, pb, "--event", "l1d-miss", "--tid", "1"]);
    assert!(!ok && err.contains(pa), "{err}");
}
