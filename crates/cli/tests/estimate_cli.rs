//! `spelunk estimate` end to end on planted recordings. The headline test rebuilds [SPE methodology]
//! §4.4.2's worked example as a recording: 377965 load samples in a frd() whose loads are
//! 4-byte (objdump says DWORD PTR), first and last timestamps 27685587232500 and
//! 27685591816027 on a 25 MHz timer (40 ns per tick, TIME_CONV), `-c 1024` with jitter on a
//! Neoverse N1 → interval 1152 → 1,741,662,720 bytes over 0.183341080 s = 9499.58 MB/s.

mod planted;

use planted::*;

const T0: u64 = 27_685_587_232_500;
const T1: u64 = 27_685_591_816_027;
const SAMPLES: u64 = 377_965;

fn bytes_of(objdump_text: &str) -> u64 {
    for (w, n) in [
        ("BYTE PTR", 1),
        ("WORD PTR", 2),
        ("DWORD PTR", 4),
        ("QWORD PTR", 8),
    ] {
        if objdump_text.contains(&format!(" {w}")) || objdump_text.contains(&format!(",{w}")) {
            return n;
        }
    }
    panic!("no memory operand size in '{objdump_text}'")
}

#[test]
fn seed_000_bandwidth_worked_example_end_to_end() {
    let dir = Scratch::new("estimate-paper");
    let exe = compile("gcc", "bandwidth.c", &dir.join("bw"), &[]);
    let syms = nm("nm", &exe);
    let (frd, frd_size) = syms["frd"];
    // The loop's loads, from objdump: every instruction reading a DWORD.
    let loads: Vec<u64> = objdump_function("objdump", &exe, "frd")
        .into_iter()
        .filter(|i| i.text.starts_with("mov") && i.text.contains("DWORD PTR [rdi"))
        .map(|i| {
            assert_eq!(bytes_of(&i.text), 4);
            i.address
        })
        .collect();
    assert_eq!(loads.len(), 4, "frd's unrolled loop has four 4-byte loads");
    let ints = BIAS + syms["ints"].0;
    let mut ops = Vec::with_capacity(SAMPLES as usize + 10);
    for i in 0..SAMPLES {
        let tick = T0 + (T1 - T0) * i / (SAMPLES - 1);
        let pc = BIAS + loads[(i % 4) as usize];
        ops.push((Op::load(pc, ints + 4 * (i % 4096), 0, 9), tick));
    }
    // Samples elsewhere (main, after frd) must not count.
    for k in 0..10 {
        ops.push((Op::other(BIAS + syms["main"].0), T1 + 100 + k));
    }
    let data = dir.join("bw.data");
    let setup = Setup {
        timer_hz: 25_000_000,
        sample_period: 1024,
        jitter: true,
        ..Setup::new(&exe)
    };
    write_recording(&data, &setup, &ops);
    let path = data.to_str().unwrap();

    let r = spelunk_json(&["estimate", "bandwidth", path, "--symbol", "frd", "--json"]);
    assert_eq!(r["schema"], "spelunk-estimate/1");
    assert_eq!(r["samples"], SAMPLES);
    assert_eq!(r["loads"], SAMPLES);
    assert_eq!(r["interval"]["base_interval"], 1024);
    assert_eq!(r["interval"]["interval"], 1152);
    assert_eq!(r["interval"]["ernd_assumed"], true);
    assert_eq!(r["timer"]["frequency_hz"], 25e6);
    assert_eq!(r["timer"]["ns_per_tick"], 40.0);
    assert_eq!(r["first_tick"], T0);
    assert_eq!(r["last_tick"], T1);
    assert_eq!(r["elapsed_ticks"], 4_583_527);
    assert_eq!(r["elapsed_ns"], 183_341_080.0);
    assert_eq!(r["bytes_per_op"]["from"], "instructions");
    assert_eq!(r["bytes_per_op"]["uniform"], 4);
    assert_eq!(r["estimated_bytes"], 1_741_662_720u64);
    let bw = r["bandwidth_bytes_per_s"].as_f64().unwrap();
    assert_eq!(format!("{:.2}", bw / 1e6), "9499.58");

    // The same region by PC range and an explicit size give the same figure.
    let range = format!("{:#x},{:#x}", BIAS + frd, BIAS + frd + frd_size);
    let r2 = spelunk_json(&[
        "estimate",
        "bandwidth",
        path,
        "--pc-range",
        &range,
        "--bytes-per-op",
        "4",
        "--json",
    ]);
    assert_eq!(r2["estimated_bytes"], 1_741_662_720u64);
    assert_eq!(r2["bandwidth_bytes_per_s"], r["bandwidth_bytes_per_s"]);

    // The text shows [SPE methodology]'s steps.
    let (ok, text, err) = spelunk(&["estimate", "bandwidth", path, "--symbol", "frd"]);
    assert!(ok, "{err}");
    for want in [
        "1024 + 128 = 1152",
        "27685591816027 - 27685587232500 = 4583527 ticks",
        "4583527 × 40 = 183,341,080 ns = 0.183341080 s",
        "377,965 × 1152 × 4 = 1,741,662,720 bytes",
        "1,741,662,720 / 0.183341080 = 9499.58 MB/s (estimate",
    ] {
        assert!(text.contains(want), "missing '{want}' in:\n{text}");
    }

    // Derived latency (§4.2.4) over the same loads: 183341080 ns / (377965 × 1152).
    let r = spelunk_json(&[
        "estimate",
        "latency",
        path,
        "--symbol",
        "frd",
        "--cpu-ghz",
        "2.8",
        "--json",
    ]);
    assert_eq!(r["estimated_operations"], 435_415_680u64);
    let l = r["derived_latency_ns"].as_f64().unwrap();
    assert!((l - 183_341_080.0 / 435_415_680.0).abs() < 1e-15);
    assert!((r["derived_latency_cycles"].as_f64().unwrap() - l * 2.8).abs() < 1e-12);
    // ernd 1 (table 4.3): base + 1.
    let r = spelunk_json(&[
        "estimate", "latency", path, "--symbol", "frd", "--ernd", "1", "--json",
    ]);
    assert_eq!(r["interval"]["interval"], 1025);
}

#[test]
fn mixed_access_sizes_and_errors() {
    let dir = Scratch::new("estimate-mixed");
    let exe = compile("gcc", "bandwidth.c", &dir.join("bw"), &[]);
    let syms = nm("nm", &exe);
    let insns = objdump_function("objdump", &exe, "mixed");
    let q = insns
        .iter()
        .find(|i| i.text.contains("QWORD PTR [rdi]"))
        .unwrap();
    let b = insns
        .iter()
        .find(|i| i.text.contains("BYTE PTR [rsi]"))
        .unwrap();
    assert_eq!((bytes_of(&q.text), bytes_of(&b.text)), (8, 1));
    let longs = BIAS + syms["longs"].0;
    let chars = BIAS + syms["chars"].0;
    // 1 GHz timer, -c 4096 without jitter → interval 4097 (table 4.3: base + 1).
    let mut ops = sequence(
        &[
            (Op::load(BIAS + q.address, longs, 0, 8), 300),
            (Op::load(BIAS + b.address, chars, 0, 8), 100),
            (Op::store(BIAS + syms["frd"].0, longs), 7),
        ],
        1_000_000,
        1000,
    );
    ops.sort_by_key(|o| o.1);
    let data = dir.join("mixed.data");
    let setup = Setup {
        sample_period: 4096,
        ..Setup::new(&exe)
    };
    write_recording(&data, &setup, &ops);
    let path = data.to_str().unwrap();
    let r = spelunk_json(&["estimate", "bandwidth", path, "--symbol", "mixed", "--json"]);
    assert_eq!(r["interval"]["interval"], 4097);
    assert_eq!(r["bytes_per_op"]["uniform"], serde_json::Value::Null);
    // Σ samples × bytes = 300 × 8 + 100 × 1 = 2500; × 4097 = 10,242,500 bytes.
    assert_eq!(r["bytes_per_op"]["sample_bytes"], 2500);
    assert_eq!(r["estimated_bytes"], 10_242_500);
    // 400 samples 1000 ticks (1 µs) apart: 399 µs.
    assert_eq!(r["elapsed_ns"], 399_000.0);
    let bw = r["bandwidth_bytes_per_s"].as_f64().unwrap();
    assert!((bw - 10_242_500.0 / 399e-6).abs() / bw < 1e-12);

    // Nothing matched: non-zero exit, one line naming the file.
    let (ok, _, err) = spelunk(&["estimate", "latency", path, "--symbol", "nope"]);
    assert!(!ok);
    assert!(err.contains(path) && err.contains("'nope'"), "{err}");
    assert_eq!(err.trim().lines().count(), 1);
    let (ok, _, err) = spelunk(&[
        "estimate", "latency", path, "--symbol", "mixed", "--ops", "store",
    ]);
    assert!(!ok);
    assert!(
        err.contains("none of the 400 selected samples are stores"),
        "{err}"
    );
    // A store in frd at its first instruction (not a memory instruction): size unknown.
    let (ok, _, err) = spelunk(&["estimate", "bandwidth", path, "--symbol", "frd"]);
    assert!(!ok);
    assert!(err.contains("--bytes-per-op"), "{err}");
}

#[test]
fn aarch64_load_size_from_the_encoding() {
    if !have("aarch64-linux-gnu-gcc") || !have("aarch64-linux-gnu-objdump") {
        eprintln!("skipped: no aarch64-linux-gnu-gcc/objdump (scripts/ensure-deps.sh cross)");
        return;
    }
    let dir = Scratch::new("estimate-a64");
    let exe = compile(
        "aarch64-linux-gnu-gcc",
        "bandwidth.c",
        &dir.join("bwa"),
        &[],
    );
    let syms = nm("aarch64-linux-gnu-nm", &exe);
    // ldr/ldur of a W register: 4 bytes (Arm ARM, LDR (immediate) 32-bit variant).
    let loads: Vec<u64> = objdump_function("aarch64-linux-gnu-objdump", &exe, "frd")
        .into_iter()
        .filter(|i| i.text.starts_with("ldr\tw") || i.text.starts_with("ldur\tw"))
        .map(|i| i.address)
        .collect();
    assert_eq!(loads.len(), 4);
    let ints = BIAS + syms["ints"].0;
    let ops: Vec<(Op, u64)> = (0..1000u64)
        .map(|i| {
            (
                Op::load(BIAS + loads[(i % 4) as usize], ints, 0, 9),
                5000 + i * 10,
            )
        })
        .collect();
    let data = dir.join("a64.data");
    let setup = Setup {
        timer_hz: 25_000_000,
        jitter: true,
        ..Setup::new(&exe)
    };
    write_recording(&data, &setup, &ops);
    let r = spelunk_json(&[
        "estimate",
        "bandwidth",
        data.to_str().unwrap(),
        "--symbol",
        "frd",
        "--json",
    ]);
    assert_eq!(r["bytes_per_op"]["uniform"], 4);
    // 1000 × 1152 × 4 bytes over 999 × 10 ticks × 40 ns.
    assert_eq!(r["estimated_bytes"], 4_608_000);
    assert_eq!(r["elapsed_ns"], 399_600.0);
}
