//! `spelunk c2c` on planted recordings with [SPE methodology §5.2]'s false-sharing structure: a lock
//! thread writes buf1.lock0 and buf2.lock1 while a reader thread on another CPU loads
//! buf1.reader1 and buf2.reader1 — in the same cache lines — with peer-core data sources. PCs
//! and data addresses come from `objdump -d` (its `# 40c8 <buf2+0x8>` comments), source lines
//! from addr2line, the threads' names from COMM records; every count is hand-computed below.

mod planted;

use planted::*;
use serde_json::Value;
use std::path::Path;

const PEER: u64 = 0b1001; // Neoverse N1 data source: peer core ([SPE methodology table 4.2])
const L1D: u64 = 0;
const READER: i32 = PID + 1;

/// (pc, data address, objdump text) of each instruction of `func` that objdump annotates with a
/// data symbol (`# 4100 <buf1>`).
fn accesses(exe: &Path, func: &str) -> Vec<(u64, u64, String)> {
    objdump_function("objdump", exe, func)
        .into_iter()
        .filter_map(|i| {
            let (_, comment) = i.text.split_once("# ")?;
            let addr = u64::from_str_radix(comment.split_whitespace().next()?, 16).ok()?;
            Some((i.address, addr, i.text.clone()))
        })
        .collect()
}

fn find<'a>(v: &'a [(u64, u64, String)], what: &str) -> &'a (u64, u64, String) {
    v.iter()
        .find(|a| a.2.contains(what))
        .unwrap_or_else(|| panic!("no access '{what}' in {v:?}"))
}

fn setup(exe: &Path) -> Setup {
    Setup {
        threads: vec![(PID, "lock_th".into()), (READER, "reader_thd".into())],
        cpus: vec![0, 1],
        ..Setup::new(exe)
    }
}

fn line(r: &Value, i: usize) -> &Value {
    &r["lines"][i]
}

fn offset(l: &Value, off: u64) -> &Value {
    l["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["offset"] == off)
        .unwrap_or_else(|| panic!("no offset {off:#x} in {l}"))
}

#[test]
fn false_sharing_is_the_top_line_and_disappears_with_padding() {
    let dir = Scratch::new("c2c");
    let exe = compile("gcc", "sharing.c", &dir.join("sharing"), &[]);
    let syms = nm("nm", &exe);
    let lock = accesses(&exe, "lock_side");
    let read = accesses(&exe, "reader_side");
    let cnt = accesses(&exe, "count");
    let xchg = find(&lock, "xchg");
    let add = find(&lock, "add");
    let lock1 = find(&lock, "<buf2+0x8>");
    let r1 = find(&read, "<buf1+0x20>");
    let r2 = find(&read, "<buf2+0x20>");
    let c_ld = find(&cnt, "rax,QWORD PTR");
    let c_st = find(&cnt, "QWORD PTR [rip+0x");
    let c_st = if c_st.0 == c_ld.0 {
        cnt.iter().rfind(|a| a.2.contains("],rax")).unwrap()
    } else {
        c_st
    };
    let (buf1, buf2, counter) = (syms["buf1"].0, syms["buf2"].0, syms["counter"].0);
    assert_eq!(
        (xchg.1, lock1.1, r1.1, r2.1),
        (buf1, buf2 + 8, buf1 + 0x20, buf2 + 0x20)
    );
    let pc = |a: &(u64, u64, String)| BIAS + a.0;
    let va = |a: &(u64, u64, String)| BIAS + a.1;
    let lock_ops = sequence(
        &[
            (Op::store(pc(xchg), va(xchg)), 200),
            (Op::store(pc(add), va(add)), 100),
            (Op::load(pc(add), va(add), L1D, 4), 100),
            (Op::store(pc(lock1), va(lock1)), 300),
            (Op::load(pc(c_ld), va(c_ld), L1D, 4), 40),
            (Op::store(pc(c_st), va(c_st)), 40),
        ],
        1_000_000,
        10,
    );
    let reader_ops: Vec<(Op, u64)> = sequence(
        &[
            (Op::load(pc(r1), va(r1), PEER, 120), 150),
            (Op::load(pc(r1), va(r1), L1D, 4), 50),
            (Op::load(pc(r2), va(r2), PEER, 120), 250),
            (Op::load(pc(r2), va(r2), L1D, 4), 50),
            (Op::load(pc(c_ld), va(c_ld), PEER, 150), 60),
            (Op::store(pc(c_st), va(c_st)), 60),
        ],
        1_000_005,
        10,
    )
    .into_iter()
    .map(|(o, t)| (o.on(READER, 1), t))
    .collect();
    let mut ops = lock_ops;
    ops.extend(reader_ops);
    ops.sort_by_key(|o| o.1);
    let data = dir.join("fs.data");
    write_recording(&data, &setup(&exe), &ops);
    let path = data.to_str().unwrap();
    let r = spelunk_json(&["c2c", path, "--json"]);

    assert_eq!(r["schema"], "spelunk-c2c/1");
    // 200+100+100+300+40+40 = 780 lock-thread + 150+50+250+50+60+60 = 620 reader samples.
    assert_eq!(r["totals"]["records"], 1400);
    assert_eq!(r["totals"]["peer_local"], 460);
    assert_eq!(r["totals"]["lines_with_peer_snoops"], 3);
    assert_eq!(r["lines"].as_array().unwrap().len(), 3);

    // Line 0: buf2 (250 peer loads of 460).
    let l0 = line(&r, 0);
    assert_eq!(l0["address"], BIAS + buf2);
    assert_eq!(l0["object"], "buf2");
    assert!((l0["peer_snoop_share"].as_f64().unwrap() - 250.0 / 460.0).abs() < 1e-12);
    assert_eq!(
        (
            l0["records"].as_u64(),
            l0["loads"].as_u64(),
            l0["stores"].as_u64(),
            l0["peer_local"].as_u64(),
            l0["peer_remote"].as_u64(),
            l0["load_l1"].as_u64(),
            l0["load_lcl_hitm"].as_u64(),
            l0["store_l1_hit"].as_u64()
        ),
        (
            Some(600),
            Some(300),
            Some(300),
            Some(250),
            Some(0),
            Some(50),
            Some(250),
            Some(300)
        )
    );
    assert_eq!(l0["verdict"], "false_sharing");
    assert_eq!(l0["cpu_count"], 2);
    let w = offset(l0, 8);
    assert_eq!(
        (w["stores"].as_u64(), w["loads"].as_u64()),
        (Some(300), Some(0))
    );
    assert_eq!(w["object"], "buf2+0x8");
    assert_eq!(w["threads"][0]["thread"]["name"], "lock_th");
    let rd = offset(l0, 0x20);
    assert_eq!(rd["object"], "buf2+0x20");
    assert_eq!(
        (rd["loads"].as_u64(), rd["peer_local"].as_u64()),
        (Some(300), Some(250))
    );
    assert_eq!(rd["threads"][0]["thread"]["tid"], READER);
    assert_eq!(rd["threads"][0]["thread"]["name"], "reader_thd");
    let acc = &rd["accesses"][0];
    assert_eq!(acc["pc"], pc(r2));
    assert_eq!(acc["function"], "reader_side");
    assert_eq!(acc["peer_local_pct"], 1.0);
    assert_eq!(acc["mean_cycles_peer_local"], 120.0);
    // (250 × 120 + 50 × 4) / 300
    assert!((acc["mean_cycles_load"].as_f64().unwrap() - 30_200.0 / 300.0).abs() < 1e-12);
    // Source lines are addr2line's.
    let lines = addr2line("addr2line", &exe, &[r2.0, lock1.0, r1.0, c_ld.0]);
    assert_eq!(acc["line"], lines[0].1);
    assert!(lines[0]
        .0
        .ends_with(acc["file"].as_str().unwrap().rsplit('/').next().unwrap()));
    assert_eq!(offset(l0, 8)["accesses"][0]["line"], lines[1].1);

    // Line 1: buf1, also false sharing; line 2: counter, true sharing.
    let l1 = line(&r, 1);
    assert_eq!(l1["address"], BIAS + buf1);
    assert_eq!(l1["peer_local"], 150);
    assert_eq!(l1["verdict"], "false_sharing");
    assert_eq!(offset(l1, 0)["stores"], 300);
    assert_eq!(offset(l1, 0x20)["accesses"][0]["line"], lines[2].1);
    let l2 = line(&r, 2);
    assert_eq!(l2["address"], BIAS + counter);
    assert_eq!(l2["object"], "counter");
    assert_eq!(l2["verdict"], "true_sharing");
    assert_eq!(
        (l2["loads"].as_u64(), l2["stores"].as_u64()),
        (Some(100), Some(100))
    );
    assert_eq!(offset(l2, 0)["threads"].as_array().unwrap().len(), 2);

    // The text has perf c2c's sections and the verdicts.
    let (ok, text, err) = spelunk(&["c2c", path]);
    assert!(ok, "{err}");
    for want in [
        "Shared Data Cache Line Table",
        "Shared Cache Line Distribution Pareto",
        "Cachelines sort on      : Peer Snoop",
        "false sharing",
        "true sharing",
        "54.35%", // 250 / 460
        "0x8 buf2+0x8",
        "reader_side+",
    ] {
        assert!(text.contains(want), "missing '{want}' in:\n{text}");
    }

    // `spelunk report --c2c` computes the same report in its own pass over the same samples:
    // under `c2c` in its JSON, exactly what `spelunk c2c --json` printed (checked above).
    let rep = spelunk_json(&["report", path, "--json", "--c2c"]);
    assert_eq!(rep["c2c"], r);
    assert_eq!(rep["recording"]["samples_selected"], 1400);
    // Its filters and --limit apply to the c2c tables too: the reader thread alone still has
    // its 460 peer loads (150 + 250 + 60), and the limit keeps the top line (buf2).
    let reader = READER.to_string();
    let rep = spelunk_json(&[
        "report", path, "--json", "--c2c", "--tid", &reader, "--limit", "1",
    ]);
    let c = &rep["c2c"];
    assert_eq!(c["filter"][0], format!("tid {READER}"));
    assert_eq!(c["totals"]["records"], 620);
    assert_eq!(c["totals"]["peer_local"], 460);
    assert_eq!(c["totals"]["lines_with_peer_snoops"], 3);
    assert_eq!(c["lines"].as_array().unwrap().len(), 1);
    assert_eq!(c["lines"][0]["address"], BIAS + buf2);
    // Only the reader's accesses: nobody else writes the line, so no sharing is seen.
    assert_eq!(c["lines"][0]["verdict"], "none");
    assert_eq!(
        rep["c2c"],
        spelunk_json(&["c2c", path, "--json", "--tid", &reader, "--limit", "1"])
    );
    // --line-size: 128-byte lines put buf1 (0x40-aligned) and buf2 in the lines nm says.
    let rep = spelunk_json(&["report", path, "--json", "--c2c", "--line-size", "128"]);
    assert_eq!(rep["c2c"]["line_size"], 128);
    assert_eq!(
        rep["c2c"],
        spelunk_json(&["c2c", path, "--json", "--line-size", "128"])
    );
    let mut lines128: Vec<u64> = rep["c2c"]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["address"].as_u64().unwrap())
        .collect();
    lines128.sort_unstable();
    let mut want: Vec<u64> = [buf1, buf2, counter]
        .iter()
        .map(|a| (BIAS + a) & !127)
        .collect();
    want.sort_unstable();
    want.dedup();
    assert_eq!(lines128, want);
    // Stores only: no load, so no peer snoop and no line; 640 lock-thread + 60 reader stores.
    let rep = spelunk_json(&["report", path, "--json", "--c2c", "--event", "store"]);
    assert_eq!(rep["c2c"]["totals"]["records"], 700);
    assert_eq!(rep["c2c"]["lines"].as_array().unwrap().len(), 0);
    // --line-size belongs to --c2c, and is checked before anything is decoded.
    let (ok, _, err) = spelunk(&["report", path, "--line-size", "128"]);
    assert!(!ok && err.contains("--c2c"), "{err}");
    let (ok, _, err) = spelunk(&["report", path, "--c2c", "--line-size", "96"]);
    assert!(!ok && err.contains("power of two"), "{err}");
    // The terminal report ends with the c2c sections.
    let (ok, text, err) = spelunk(&["report", path, "--c2c"]);
    assert!(ok, "{err}");
    let at = text.find("Hotspots by function").unwrap();
    let c2c_at = text.find("Shared Data Cache Line Table").unwrap();
    assert!(at < c2c_at && text.contains("false sharing"), "{text}");

    // `spelunk c2c --html`: a page with the c2c report alone, as --json prints it.
    let html = dir.join("c2c.html");
    let (ok, out, err) = spelunk(&["c2c", path, "--html", html.to_str().unwrap()]);
    assert!(
        ok && out.is_empty() && err.contains("3 cache lines"),
        "{err}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    let open = r#"<script type="application/json" id="spelunk-data">"#;
    let start = page.find(open).unwrap() + open.len();
    let end = start + page[start..].find("</script>").unwrap();
    let back: Value = serde_json::from_str(&page[start..end]).unwrap();
    assert_eq!(back["c2c"], r);
    assert_eq!(back["report"], Value::Null);

    // Padded: the reader fields live on the next line and hit L1D; no line has peer snoops.
    let padded = compile(
        "gcc",
        "sharing.c",
        &dir.join("padded"),
        &["-DNO_FALSE_SHARING"],
    );
    let read = accesses(&padded, "reader_side");
    let lock = accesses(&padded, "lock_side");
    let (r1, r2) = (find(&read, "<buf1+0x40>"), find(&read, "<buf2+0x40>"));
    let lock1 = find(&lock, "<buf2+0x8>");
    let ops = {
        let mut v = sequence(&[(Op::store(pc(lock1), va(lock1)), 300)], 1_000_000, 10);
        v.extend(
            sequence(
                &[
                    (Op::load(pc(r1), va(r1), L1D, 4), 200),
                    (Op::load(pc(r2), va(r2), L1D, 4), 300),
                ],
                1_000_005,
                10,
            )
            .into_iter()
            .map(|(o, t)| (o.on(READER, 1), t)),
        );
        v.sort_by_key(|o| o.1);
        v
    };
    let data = dir.join("padded.data");
    write_recording(&data, &setup(&padded), &ops);
    let r = spelunk_json(&["c2c", data.to_str().unwrap(), "--json"]);
    assert_eq!(r["totals"]["records"], 800);
    assert_eq!(r["totals"]["peer_local"], 0);
    assert_eq!(r["lines"].as_array().unwrap().len(), 0);
    let (ok, text, _) = spelunk(&["c2c", data.to_str().unwrap()]);
    assert!(ok);
    assert!(text.contains("no peer snoops"), "{text}");

    // Filters apply: only the lock thread → its stores, no peer loads.
    let r = spelunk_json(&["c2c", path, "--tid", &PID.to_string(), "--json"]);
    assert_eq!(r["totals"]["peer_local"], 0);
    // Nothing selected: non-zero exit, one line naming the file.
    let (ok, _, err) = spelunk(&["c2c", path, "--tid", "1"]);
    assert!(!ok && err.contains(path), "{err}");
    let (ok, _, err) = spelunk(&["c2c", path, "--line-size", "48"]);
    assert!(!ok && err.contains("power of two"), "{err}");
}
