//! `spelunk annotate` on planted recordings: samples at instruction addresses taken from
//! `objdump -d`, with chosen latencies, data sources and mispredictions. The listing must have
//! objdump's instruction addresses, each instruction's source line must be addr2line's, and
//! every share, mean and percentile below is computed by hand from what was planted.

mod planted;

use planted::*;
use serde_json::Value;
use std::path::Path;

const DRAM: u64 = 0b1110;
const L2: u64 = 0b1000;

fn insn(r: &Value, addr: u64) -> &Value {
    r["instructions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["address"] == addr)
        .unwrap_or_else(|| panic!("no instruction at {addr:#x}"))
}

/// Checks the listing against objdump and addr2line for `function` of `exe`.
fn same_as_binutils(r: &Value, exe: &Path, prefix: &str, function: &str) {
    let objdump = objdump_function(&format!("{prefix}objdump"), exe, function);
    let listed: Vec<u64> = r["instructions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["address"].as_u64().unwrap())
        .collect();
    let want: Vec<u64> = objdump.iter().map(|i| i.address).collect();
    // objdump lists the alignment padding after the symbol's end too; the symbol's size bounds ours.
    assert_eq!(
        &want[..listed.len()],
        &listed[..],
        "instruction addresses differ from objdump"
    );
    let lines = addr2line(&format!("{prefix}addr2line"), exe, &listed);
    for (i, (file, line)) in r["instructions"].as_array().unwrap().iter().zip(&lines) {
        if *line == 0 {
            assert_eq!(i["line"], Value::Null, "{i}");
            continue;
        }
        assert_eq!(i["line"], *line, "line of {}", i["address"]);
        let ours = i["file"].as_str().unwrap();
        assert_eq!(
            ours.rsplit('/').next(),
            file.rsplit('/').next(),
            "file of {}",
            i["address"]
        );
    }
}

#[test]
fn planted_samples_per_instruction_with_lines_from_addr2line() {
    let dir = Scratch::new("annotate");
    let exe = compile("gcc", "bandwidth.c", &dir.join("bw"), &[]);
    let syms = nm("nm", &exe);
    let insns = objdump_function("objdump", &exe, "frd");
    let ld = insns
        .iter()
        .find(|i| i.text.contains("DWORD PTR [rdi]"))
        .unwrap()
        .address;
    let ld2 = insns
        .iter()
        .find(|i| i.text.contains("DWORD PTR [rdi+0x4]"))
        .unwrap()
        .address;
    let jne = insns
        .iter()
        .find(|i| i.text.starts_with("jne"))
        .unwrap()
        .address;
    let add = insns
        .iter()
        .find(|i| i.text.starts_with("add    edx"))
        .unwrap()
        .address;
    let mixed = syms["mixed"].0;
    let ints = BIAS + syms["ints"].0;
    let mut ops = sequence(
        &[
            (Op::load(BIAS + ld, ints, 0, 10), 600),
            (Op::load(BIAS + ld, ints, DRAM, 300), 200),
            (Op::load(BIAS + ld2, ints + 4, L2, 20), 100),
            (Op::branch(BIAS + jne, false), 60),
            (Op::branch(BIAS + jne, true), 20),
            (Op::other(BIAS + add), 20),
            (Op::other(BIAS + mixed), 50),
        ],
        1_000_000,
        1000,
    );
    ops.sort_by_key(|o| o.1);
    let data = dir.join("annotate.data");
    write_recording(&data, &Setup::new(&exe), &ops);
    let path = data.to_str().unwrap();
    let r = spelunk_json(&["annotate", "frd", path, "--json"]);
    assert_eq!(r["schema"], "spelunk-annotate/1");
    assert_eq!(r["function"], "frd");
    assert_eq!(r["start"], syms["frd"].0);
    assert_eq!(r["size"], syms["frd"].1);
    assert_eq!(r["samples"], 1000);
    assert_eq!(r["selected"], 1050);
    assert!((r["share_of_selected"].as_f64().unwrap() - 1000.0 / 1050.0).abs() < 1e-12);
    assert_eq!(r["unplaced_samples"], 0);
    same_as_binutils(&r, &exe, "", "frd");

    // The hot load: 800 of 1000 samples; latency (600 × 10 + 200 × 300) / 800 = 82.5,
    // p50 = 10 (rank 400), p99 = 300 (rank 792 > 600); sources L1D 600, DRAM 200.
    let a = insn(&r, ld);
    assert_eq!(a["samples"], 800);
    assert_eq!(a["share"], 0.8);
    assert_eq!(a["load_latency"]["mean"], 82.5);
    assert_eq!(a["load_latency"]["p50"], 10);
    assert_eq!(a["load_latency"]["p99"], 300);
    assert_eq!(a["sources"][0]["source"], "L1D");
    assert_eq!(a["sources"][0]["loads"], 600);
    assert_eq!(a["sources"][1]["source"], "DRAM");
    assert_eq!(a["access_bytes"], 4);
    let b = insn(&r, ld2);
    assert_eq!(
        (b["share"].as_f64(), b["load_latency"]["mean"].as_f64()),
        (Some(0.1), Some(20.0))
    );
    assert_eq!(b["sources"][0]["source"], "L2D");
    let j = insn(&r, jne);
    assert_eq!(j["branch"], true);
    assert_eq!(
        (j["branches"].as_u64(), j["mispredicts"].as_u64()),
        (Some(80), Some(20))
    );
    assert_eq!(j["share"], 0.08);
    assert_eq!(j["target_label"], "frd+0x20");
    assert_eq!(insn(&r, add)["share"], 0.02);
    // Every other instruction has no samples.
    let total: u64 = r["instructions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["samples"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 1000);

    // The text: percent per instruction, mispredictions, the source interleaved.
    let (ok, text, err) = spelunk(&["annotate", "frd", path]);
    assert!(ok, "{err}");
    let row = text
        .lines()
        .find(|l| l.contains(&format!("{ld:x}: mov eax, dword [rdi]")))
        .unwrap_or_else(|| panic!("no row for the load in:\n{text}"));
    assert!(row.trim_start().starts_with("80.00"), "{row}");
    assert!(
        row.contains("82.5") && row.contains("L1D 75% DRAM 25%"),
        "{row}"
    );
    assert!(text.contains("20/80 25%"), "{text}");
    assert!(text.contains("bandwidth.c:14"), "{text}");
    assert!(
        text.contains(&format!("jnz {:x} <frd+0x20>", syms["frd"].0 + 0x20)),
        "{text}"
    );

    // Filters: only DRAM loads → the hot load has all 200 of them.
    let r = spelunk_json(&["annotate", "frd", path, "--event", "dram", "--json"]);
    assert_eq!(
        (r["samples"].as_u64(), insn(&r, ld)["share"].as_f64()),
        (Some(200), Some(1.0))
    );
    // Nothing matched: non-zero exit, one line naming the file.
    let (ok, _, err) = spelunk(&["annotate", "nope", path]);
    assert!(!ok && err.contains(path) && err.contains("'nope'"), "{err}");
    assert_eq!(err.trim().lines().count(), 1);
}

#[test]
fn aarch64_listing_matches_binutils() {
    if !have("aarch64-linux-gnu-gcc") || !have("aarch64-linux-gnu-objdump") {
        eprintln!("skipped: no aarch64-linux-gnu-gcc/objdump (scripts/ensure-deps.sh cross)");
        return;
    }
    let dir = Scratch::new("annotate-a64");
    let exe = compile(
        "aarch64-linux-gnu-gcc",
        "bandwidth.c",
        &dir.join("bwa"),
        &[],
    );
    let syms = nm("aarch64-linux-gnu-nm", &exe);
    let insns = objdump_function("aarch64-linux-gnu-objdump", &exe, "frd");
    let ld = insns
        .iter()
        .find(|i| i.text.starts_with("ldr\tw"))
        .unwrap()
        .address;
    let bne = insns
        .iter()
        .find(|i| i.text.starts_with("b.ne"))
        .unwrap()
        .address;
    let ops = sequence(
        &[
            (Op::load(BIAS + ld, BIAS + syms["ints"].0, 0, 7), 30),
            (Op::branch(BIAS + bne, true), 10),
        ],
        1_000_000,
        1000,
    );
    let data = dir.join("a64.data");
    write_recording(&data, &Setup::new(&exe), &ops);
    let r = spelunk_json(&["annotate", "frd", data.to_str().unwrap(), "--json"]);
    assert_eq!(r["arch"], "aarch64");
    same_as_binutils(&r, &exe, "aarch64-linux-gnu-", "frd");
    assert_eq!(insn(&r, ld)["share"], 0.75);
    assert_eq!(insn(&r, ld)["text"], "ldr w1, [x2]");
    assert_eq!(insn(&r, bne)["mispredicts"], 10);
}
