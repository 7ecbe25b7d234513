//! "Data objects by allocation site" in `spelunk report`: a planted recording of a compiled
//! program (tests/data/c/alloc_sites.c) with a sidecar listing its heap blocks the way the
//! LD_PRELOAD runtime logs them (address, size, lifetime, return addresses). The expected
//! sites come from objdump (the call instructions) and addr2line (their lines); the expected
//! counts are the planted ones. One address is freed and handed out again: samples in each
//! lifetime belong to the block live then.

mod planted;

use planted::*;
use spelunk_perf::sidecar::{Allocation, Sidecar};

/// The return address after the call to `callee` in `function`, and the call's line.
fn call_site(exe: &std::path::Path, function: &str, callee: &str) -> (u64, u32) {
    let insns = objdump_function("objdump", exe, function);
    let i = insns
        .iter()
        .position(|x| {
            x.text.contains(&format!("<{callee}@plt>")) || x.text.contains(&format!("<{callee}>"))
        })
        .unwrap_or_else(|| panic!("no call to {callee} in {function}: {insns:?}"));
    let ret = insns[i + 1].address;
    let line = addr2line("addr2line", exe, &[insns[i].address])[0].1;
    (ret, line)
}

#[test]
fn heap_blocks_are_reported_by_allocation_site_with_reuse_attributed_by_time() {
    if !have("gcc") || !have("objdump") || !have("addr2line") {
        eprintln!("skipped: gcc, objdump or addr2line missing");
        return;
    }
    let dir = Scratch::new("alloc-sites");
    let exe = compile("gcc", "alloc_sites.c", &dir.join("alloc_sites"), &[]);
    let sites = [
        ("make_hot", "malloc"),
        ("make_warm", "calloc"),
        ("make_cold", "malloc"),
        ("make_first", "malloc"),
        ("make_reuse", "malloc"),
    ];
    let calls: Vec<(u64, u32)> = sites.iter().map(|(f, c)| call_site(&exe, f, c)).collect();
    let pc = BIAS + objdump_function("objdump", &exe, "main")[0].address;

    // Blocks: (address, size, from_ns, until_ns); the fourth and fifth share an address.
    let t = 2_000_000u64;
    let blocks = [
        (0x7f00_0000_0000u64, 0x10000u64, t, u64::MAX),
        (0x7f00_0010_0000, 0x20000, t, u64::MAX),
        (0x7f00_0020_0000, 0x40000, t, u64::MAX),
        (0x7f00_0030_0000, 0x1000, t, t + 500_000),
        (0x7f00_0030_0000, 0x1000, t + 500_000, u64::MAX),
    ];
    let mut sc = Sidecar::new("runtime");
    for (i, (addr, size, from, until)) in blocks.iter().enumerate() {
        sc.allocations.push(Allocation {
            pid: PID as u32,
            tid: PID as u32,
            address: *addr,
            size: *size,
            from_ns: *from,
            until_ns: *until,
            kind: if i == 1 { "calloc" } else { "malloc" }.into(),
            // The allocating call's return address, then main's (as the runtime logs them).
            stack: vec![BIAS + calls[i].0, pc + 4],
        });
    }
    // Samples: 300 in the hot block, 100 warm, 30 cold, 20 in the first block's lifetime and
    // 10 in the reused block's, one tick (= 1 ns) apart.
    let mut ops = Vec::new();
    let mut tick = t + 1000;
    for (block, n) in [(0usize, 300u32), (1, 100), (2, 30), (3, 20)] {
        for k in 0..n {
            let va = blocks[block].0 + (u64::from(k) * 64) % blocks[block].1;
            ops.push((Op::load(pc, va, 0, 10), tick));
            tick += 1;
        }
    }
    for k in 0..10u64 {
        ops.push((Op::load(pc, blocks[4].0 + k * 64, 0, 10), t + 600_000 + k));
    }
    let data = dir.join("perf.data");
    write_recording(&data, &Setup::new(&exe), &ops);
    sc.write(&Sidecar::path_for(&data)).unwrap();

    let r = spelunk_json(&["report", data.to_str().unwrap(), "--json"]);
    let rows = r["allocation_sites"].as_array().expect("allocation_sites");
    let got: Vec<(String, u64, u64, u64)> = rows
        .iter()
        .map(|x| {
            (
                x["site"].as_str().unwrap().to_string(),
                x["samples"].as_u64().unwrap(),
                x["blocks"].as_u64().unwrap(),
                x["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, u64, u64, u64)> = [(0, 300), (1, 100), (2, 30), (3, 20), (4, 10)]
        .iter()
        .map(|&(i, n)| {
            (
                format!("alloc_sites.c:{} ({})", calls[i].1, sites[i].0),
                n,
                1,
                blocks[i].1,
            )
        })
        .collect();
    assert_eq!(got, want);
    // The freed block's lifetime; blocks never freed have none.
    assert_eq!(rows[3]["mean_lifetime_ns"], 500_000);
    assert!(rows[0]["mean_lifetime_ns"].is_null());
    // The same rows in the text report, under their heading.
    let (ok, text, err) = spelunk(&["report", data.to_str().unwrap()]);
    assert!(ok, "{err}");
    let section = text
        .split("Data objects by allocation site")
        .nth(1)
        .expect("allocation-site section");
    assert!(section.contains(&want[0].0), "{section}");
}
