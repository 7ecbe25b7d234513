//! `spelunk diff A B` on planted recordings whose differences are known: samples moved from frd
//! to mixed, frd's loads partly moved to L2, mixed's partly to L1D, and main disappeared; a
//! function whose cost falls 5× while its share rises; a pair that differs only by sampling
//! noise. Every figure below is hand-computed from what was planted, with the cost and noise
//! formulas of docs/diff.md.

mod planted;

use planted::*;
use serde_json::Value;
use spelunk_perf::sidecar::Sidecar;
use std::path::{Path, PathBuf};

/// Operations per sample of the planted recordings: `-c 1024` without jitter is base 1024 + 1
/// (docs/methodology/statistics.md, "Sampling interval").
const INTERVAL: f64 = 1025.0;

/// The planted program and the PCs and data addresses the recordings use.
struct Program {
    dir: Scratch,
    exe: PathBuf,
    /// frd's `DWORD PTR [rdi]` load, mixed's `QWORD PTR [rdi]` load, main.
    ld: u64,
    q: u64,
    main: u64,
    ints: u64,
    longs: u64,
}

fn program(name: &str) -> Program {
    let dir = Scratch::new(name);
    let exe = compile("gcc", "bandwidth.c", &dir.join("bw"), &[]);
    let syms = nm("nm", &exe);
    let find = |func: &str, text: &str| {
        BIAS + objdump_function("objdump", &exe, func)
            .iter()
            .find(|i| i.text.contains(text))
            .unwrap()
            .address
    };
    Program {
        ld: find("frd", "DWORD PTR [rdi]"),
        q: find("mixed", "QWORD PTR [rdi]"),
        main: BIAS + syms["main"].0,
        ints: BIAS + syms["ints"].0,
        longs: BIAS + syms["longs"].0,
        exe,
        dir,
    }
}

/// Writes a recording of `ops` named `name`, with a sidecar of counter totals when given.
fn write(p: &Program, name: &str, ops: &[(Op, u32)], counters: &[(&str, u64)]) -> String {
    let path = p.dir.join(name);
    write_recording(&path, &Setup::new(&p.exe), &sequence(ops, 1_000_000, 1000));
    if !counters.is_empty() {
        let mut sc = Sidecar::new("emulator");
        for (k, v) in counters {
            sc.counters.totals.insert(k.to_string(), *v);
        }
        sc.write(&Sidecar::path_for(Path::new(&path))).unwrap();
    }
    path.to_str().unwrap().to_string()
}

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
    let p = program("diff");
    let Program {
        ld,
        q,
        main,
        ints,
        longs,
        ..
    } = p;
    let exe = p.exe.clone();
    // A: frd 600 L1D loads (10 cycles load-to-use: 12 total − 2 issue), mixed 350 DRAM loads
    // (300), main 50 others.
    let a = sequence(
        &[
            (Op::load(ld, ints, 0, 12), 600),
            (Op::load(q, longs, DRAM, 302), 350),
            (Op::other(main), 50),
        ],
        1_000_000,
        1000,
    );
    // B: frd 300 L1D (10) + 100 L2 (20); mixed 300 DRAM (300) + 300 L1D (4).
    let b = sequence(
        &[
            (Op::load(ld, ints, 0, 12), 300),
            (Op::load(ld, ints, L2, 22), 100),
            (Op::load(q, longs, DRAM, 302), 300),
            (Op::load(q, longs, 0, 6), 300),
        ],
        1_000_000,
        1000,
    );
    let (pa, pb) = (p.dir.join("a.data"), p.dir.join("b.data"));
    write_recording(&pa, &Setup::new(&exe), &a);
    write_recording(&pb, &Setup::new(&exe), &b);
    let (pa, pb) = (pa.to_str().unwrap(), pb.to_str().unwrap());
    let d = spelunk_json(&["diff", pa, pb, "--json"]);
    assert_eq!(d["schema"], "spelunk-diff/2");
    assert_eq!(d["baseline"]["samples_selected"], 1000);
    assert_eq!(d["new"]["samples_selected"], 1000);
    assert_eq!(d["baseline"]["interval"], 1025);

    let f = &d["functions"];
    // Cost in sampled cycles (× INTERVAL): frd 600 × 10 = 6000 → 300 × 10 + 100 × 20 = 5000;
    // mixed 350 × 300 = 105000 → 300 × 300 + 300 × 4 = 91200; main 50 × ¼ → 0.
    // Noise thresholds 2√Σw²: frd 2√(600·10² + 300·10² + 100·20²) = 2√130000 ≈ 721 < 1000:
    // improved; main 2√50 ≈ 14 < 50: improved; mixed 2√(350·300² + 300·300² + 300·4²) ≈ 15298
    // > 13800: noise, so last although its change is the largest.
    let keys: Vec<(&str, &str)> = f
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["key"].as_str().unwrap(), r["verdict"].as_str().unwrap()))
        .collect();
    assert_eq!(
        keys,
        [
            ("frd", "improved"),
            ("main", "improved"),
            ("mixed", "noise")
        ]
    );
    let m = row(f, "mixed");
    assert!(close(&m["cost_baseline_cycles"], 105_000.0 * INTERVAL));
    assert!(close(&m["cost_new_cycles"], 91_200.0 * INTERVAL));
    let noise = 2.0 * INTERVAL * (650.0f64 * 90_000.0 + 300.0 * 16.0).sqrt();
    assert!((m["noise_cycles"].as_f64().unwrap() - noise).abs() < 1e-3);
    assert!(close(&m["share_baseline"], 0.35) && close(&m["share_new"], 0.6));
    assert!(close(&m["delta_share"], 0.25));
    // Mean total latency 302 → (300 × 302 + 300 × 6) / 600 = 154; p50 302 → 6 (rank 300 of 600).
    assert!(close(&m["delta_mean"], 154.0 - 302.0));
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
    assert!(close(&fr["delta_cost_cycles"], -1000.0 * INTERVAL));
    assert!(close(&fr["cost_ratio"], 5.0 / 6.0));
    // 10 → (300 × 10 + 100 × 20) / 400 = 12.5; p99 10 → 20.
    assert!(close(&fr["delta_mean"], 2.5));
    assert_eq!(fr["delta_p99"], 10);
    assert_eq!(fr["sources"][0]["source"], "L1D"); // |−0.25| ties L2D's +0.25; name order
    assert!(close(&fr["sources"][0]["delta"], -0.25));
    let mn = row(f, "main");
    assert_eq!(mn["only_in"], "baseline");
    assert_eq!(mn["samples_new"], 0);
    assert_eq!(mn["delta_mean"], Value::Null);
    assert!(close(&mn["cost_baseline_cycles"], 12.5 * INTERVAL));
    // Totals: cost 105000 + 6000 + 50 × ¼ = 111012.5 → 96200 sampled cycles (loads weigh
    // their load-to-use, total − the planted issue of 2; others a quarter cycle); loads 950 →
    // 1000 samples.
    let t = &d["totals"];
    assert!(close(&t["cost_cycles"]["baseline"], 111_012.5 * INTERVAL));
    assert!(close(&t["cost_cycles"]["new"], 96_200.0 * INTERVAL));
    assert!(close(&t["estimated_loads"]["new"], 1000.0 * INTERVAL));
    assert_eq!(t["cycles"], Value::Null); // no sidecar

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

    // Text: the noise row is hidden, with its count, unless --all.
    let (ok, text, err) = spelunk(&["diff", pa, pb, "--by", "function"]);
    assert!(ok, "{err}");
    assert!(!text.contains("mixed [bw]"), "{text}");
    assert!(
        text.contains("1 row within noise (--all to show)"),
        "{text}"
    );
    let (ok, text, err) = spelunk(&["diff", pa, pb, "--by", "function", "--all"]);
    assert!(ok, "{err}");
    let mixed_row = text.lines().find(|l| l.contains("mixed [bw]")).unwrap();
    for want in [
        "noise",
        "-13%",
        "350→600",
        "35.00%→60.00%",
        "+25.00%",
        "302.0",
        "154.0",
        "-148.0",
        "302→6",
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

/// mixed's loads go from DRAM (300 cycles) to L2 (60): its cost falls 5× while the rest of the
/// program shrinks too, so its share *rises* (0.2 → 0.33). The diff's first row must be mixed,
/// improved, 5× less; the totals lead with the counters' cycles.
#[test]
fn a_fixed_function_reads_as_improved_though_its_share_rose() {
    let p = program("diff-fixed");
    let a = write(
        &p,
        "a.data",
        &[
            (Op::load(p.q, p.longs, DRAM, 302), 400),
            (Op::load(p.ld, p.ints, 0, 12), 600),
            (Op::other(p.main), 1000),
        ],
        &[("CPU_CYCLES", 5_400_000), ("INST_RETIRED", 2_000_000)],
    );
    let b = write(
        &p,
        "b.data",
        &[
            (Op::load(p.q, p.longs, L2, 62), 400),
            (Op::load(p.ld, p.ints, 0, 12), 600),
            (Op::other(p.main), 200),
        ],
        &[("CPU_CYCLES", 1_000_000), ("INST_RETIRED", 2_000_000)],
    );
    let d = spelunk_json(&["diff", &a, &b, "--json"]);
    let first = &d["functions"][0];
    assert_eq!(first["key"], "mixed");
    assert_eq!(first["verdict"], "improved");
    // Share 400/2000 → 400/1200: up, as perf diff would show it.
    assert!(close(&first["share_baseline"], 0.2));
    assert!((first["share_new"].as_f64().unwrap() - 400.0 / 1200.0).abs() < 1e-12);
    // Cost 400 × 300 → 400 × 60 sampled cycles: 1/5.
    let (ca, cb) = (400.0 * 300.0 * INTERVAL, 400.0 * 60.0 * INTERVAL);
    assert!(close(&first["cost_baseline_cycles"], ca));
    assert!(close(&first["cost_new_cycles"], cb));
    assert!((first["cost_ratio"].as_f64().unwrap() - cb / ca).abs() < 1e-12);
    // frd did not change: noise (Δ 0); main 1000 → 200 others: improved.
    assert_eq!(row(&d["functions"], "frd")["verdict"], "noise");
    assert_eq!(row(&d["functions"], "main")["verdict"], "improved");
    assert!((d["totals"]["cycles"]["ratio"].as_f64().unwrap() - 1.0 / 5.4).abs() < 1e-12);
    assert!(close(&d["totals"]["instructions"]["ratio"], 1.0));

    let (ok, text, err) = spelunk(&["diff", &a, &b]);
    assert!(ok, "{err}");
    // The totals come first, and say the run got faster.
    let cycles = text.find("cycles (CPU_CYCLES)").unwrap();
    assert!(cycles < text.find("Functions").unwrap(), "{text}");
    let line = text[cycles..].lines().next().unwrap();
    assert!(
        line.contains("5.40 M → 1.00 M") && line.contains("5.40× faster"),
        "{line}"
    );
    let functions = &text[text.find("Functions").unwrap()..];
    let row = functions.lines().nth(2).unwrap();
    assert!(row.contains("mixed [bw]"), "{functions}");
    for want in ["-80% (5.00× less)", "improved"] {
        assert!(row.contains(want), "missing '{want}' in '{row}'");
    }
}

/// Two recordings that differ by what sampling alone gives: 400 → 410 loads of 300 cycles
/// (Δ 3000 against 2√(810 · 300²) ≈ 17076 sampled cycles), 1000 → 1030 others (Δ 30 against
/// 2√2030 ≈ 90), frd unchanged. Every row is noise, and the text hides them with their count.
#[test]
fn a_pair_differing_by_sampling_noise_is_noise() {
    let p = program("diff-noise");
    let a = write(
        &p,
        "a.data",
        &[
            (Op::load(p.q, p.longs, DRAM, 302), 400),
            (Op::load(p.ld, p.ints, 0, 12), 600),
            (Op::other(p.main), 1000),
        ],
        &[],
    );
    let b = write(
        &p,
        "b.data",
        &[
            (Op::load(p.q, p.longs, DRAM, 302), 410),
            (Op::load(p.ld, p.ints, 0, 12), 600),
            (Op::other(p.main), 1030),
        ],
        &[],
    );
    let d = spelunk_json(&["diff", &a, &b, "--json"]);
    for r in d["functions"].as_array().unwrap() {
        assert_eq!(r["verdict"], "noise", "{r}");
    }
    let m = row(&d["functions"], "mixed");
    assert!(close(&m["delta_cost_cycles"], 3000.0 * INTERVAL));
    let noise = 2.0 * INTERVAL * (810.0f64 * 90_000.0).sqrt();
    assert!((m["noise_cycles"].as_f64().unwrap() - noise).abs() < 1e-3);
    let t = &d["totals"];
    let delta =
        t["cost_cycles"]["new"].as_f64().unwrap() - t["cost_cycles"]["baseline"].as_f64().unwrap();
    assert!(delta.abs() < t["cost_noise_cycles"].as_f64().unwrap());
    let (ok, text, err) = spelunk(&["diff", &a, &b, "--by", "function"]);
    assert!(ok, "{err}");
    assert!(
        text.contains("3 rows within noise (--all to show)"),
        "{text}"
    );
    assert!(text.contains("within noise (±"), "{text}");
}
