//! `spelunk report` on recordings whose content is known exactly: samples planted at PCs inside
//! named functions of a program compiled here (addresses from `nm`, segments from `readelf`),
//! touching named globals, with chosen latencies and data sources. Every expected figure below
//! is computed by hand from what was planted.

use spelunk_perf::{
    AuxFlags, Mmap2, MmapFileId, RecordingSpec, SpeRecordingWriter, Task, TimeConv,
};
use spelunk_spe::{
    CodeAddress, CpuModel, DataPhysicalAddress, DataVirtualAddress, Event, Events, OpType,
    RecordLayout, SpeRecord, Terminator,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn tool(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("spelunk-report-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn compile(dir: &Path) -> PathBuf {
    let exe = dir.join("objects");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/c/objects.c");
    tool(
        "gcc",
        &[
            "-O2",
            "-g",
            "-fPIE",
            "-pie",
            "-o",
            exe.to_str().unwrap(),
            src.to_str().unwrap(),
        ],
    );
    exe
}

fn nm(exe: &Path) -> HashMap<String, (u64, u64)> {
    tool("nm", &["-S", "--defined-only", exe.to_str().unwrap()])
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4).then(|| {
                (
                    f[3].to_string(),
                    (
                        u64::from_str_radix(f[0], 16).unwrap(),
                        u64::from_str_radix(f[1], 16).unwrap(),
                    ),
                )
            })
        })
        .collect()
}

const BIAS: u64 = 0x5555_5555_4000;
const PID: i32 = 777;

/// MMAP2 records for the program's PT_LOAD segments at BIAS (what the kernel would map).
fn mmaps(exe: &Path) -> Vec<Mmap2> {
    let mut out = Vec::new();
    for line in tool("readelf", &["-lW", exe.to_str().unwrap()]).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.first() != Some(&"LOAD") {
            continue;
        }
        let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
        let (offset, vaddr, filesz) = (hex(f[1]), hex(f[2]), hex(f[4]));
        let exec = f[6..].iter().any(|x| x.contains('E'));
        let start = BIAS + (vaddr & !0xfff);
        let end = BIAS + ((vaddr + filesz + 0xfff) & !0xfff);
        out.push(Mmap2 {
            task: Task::new(PID, PID),
            address: start,
            length: end - start,
            page_offset: offset & !0xfff,
            file_id: MmapFileId::None,
            prot: if exec { 5 } else { 3 },
            flags: 2,
            cpu_mode: 2,
            executable: exec,
            path: exe.to_str().unwrap().to_string(),
        });
    }
    out
}

struct Plant {
    pc: u64,
    op: OpType,
    va: Option<u64>,
    source: Option<u64>,
    issue: u16,
    xlat: u16,
    total: u16,
    events: Events,
}

fn record(p: &Plant, ts: u64) -> SpeRecord {
    SpeRecord {
        pc: Some(CodeAddress::new(p.pc, 0, true)),
        op: Some(p.op),
        events: Some(p.events),
        issue_latency_cycles: Some(p.issue),
        total_latency_cycles: Some(p.total),
        translation_latency_cycles: p.va.map(|_| p.xlat),
        data_va: p.va.map(|v| DataVirtualAddress::new(v, 0)),
        data_pa: p
            .va
            .map(|v| DataPhysicalAddress::new(v & 0xffff_ffff, true, false, 0)),
        data_source: p.source,
        context_el1: Some(PID as u32),
        timestamp: Some(ts),
        terminator: Terminator::Timestamp,
        ..Default::default()
    }
}

/// Writes a recording of `plants` (each (plant, count)), 1 record per microsecond.
fn write(path: &Path, exe: &Path, plants: &[(Plant, u32)]) {
    let tc = TimeConv::from_frequency(1_000_000_000, 0);
    let spec = RecordingSpec {
        midr: CpuModel::NeoverseN1.midr(),
        time_conv: tc,
        workload_pid: PID,
        ..Default::default()
    };
    let mut w = SpeRecordingWriter::create(path, spec).unwrap();
    let task = Task::new(PID, PID);
    w.comm(0, 1_000, task, "objects", true).unwrap();
    for m in mmaps(exe) {
        w.mmap2(0, 1_000, &m).unwrap();
    }
    let mut bytes = Vec::new();
    let mut ts = 1_000_000_000u64;
    for (p, n) in plants {
        for _ in 0..*n {
            ts += 1000;
            record(p, ts).encode(RecordLayout::N1Padded64, &mut bytes);
        }
    }
    w.aux(0, task, ts, AuxFlags(0), &bytes).unwrap();
    w.finish().unwrap();
}

fn report_json(path: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["report", path.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let out = Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn row<'a>(rows: &'a serde_json::Value, key: &str) -> &'a serde_json::Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key || r["name"] == key)
        .unwrap_or_else(|| panic!("no row {key} in {rows}"))
}

#[test]
fn planted_samples_land_in_their_functions_objects_and_sources() {
    let dir = scratch("planted");
    let exe = compile(&dir);
    let s = nm(&exe);
    let ld = OpType::new(1, 0x00);
    let st = OpType::new(1, 0x01);
    let br = OpType::new(2, 0x01);
    let l1 = Events(0)
        .with(Event::Retired)
        .with(Event::L1dAccess)
        .with(Event::TlbAccess);
    let dram = l1
        .with(Event::L1dRefill)
        .with(Event::LlcAccess)
        .with(Event::LlcMiss);
    let at = |name: &str, off: u64| BIAS + s[name].0 + off;
    let plants = vec![
        // 600 L1D loads in sum_array from big_array: total 10 = issue 4 + xlat 1 + exec 5.
        (
            Plant {
                pc: at("sum_array", 8),
                op: ld,
                va: Some(at("big_array", 800)),
                source: Some(0),
                issue: 4,
                xlat: 1,
                total: 10,
                events: l1,
            },
            600,
        ),
        // 300 stores in fill to big_array.
        (
            Plant {
                pc: at("fill", 12),
                op: st,
                va: Some(at("big_array", 16)),
                source: None,
                issue: 3,
                xlat: 1,
                total: 6,
                events: l1,
            },
            300,
        ),
        // 100 DRAM loads in uses_inline from small_table: total 300 = 20 + 1 + 279.
        (
            Plant {
                pc: at("uses_inline", 4),
                op: ld,
                va: Some(at("small_table", 8)),
                source: Some(0b1110),
                issue: 20,
                xlat: 1,
                total: 300,
                events: dram,
            },
            100,
        ),
        // 50 conditional branches in main, 10 of them mispredicted.
        (
            Plant {
                pc: at("main", 4),
                op: br,
                va: None,
                source: None,
                issue: 2,
                xlat: 0,
                total: 3,
                events: Events(0).with(Event::Retired),
            },
            40,
        ),
        (
            Plant {
                pc: at("main", 4),
                op: br,
                va: None,
                source: None,
                issue: 2,
                xlat: 0,
                total: 3,
                events: Events(0).with(Event::Retired).with(Event::Mispredicted),
            },
            10,
        ),
    ];
    let data = dir.join("planted.data");
    write(&data, &exe, &plants);
    let r = report_json(&data, &[]);

    assert_eq!(r["schema"], "spelunk-report/1");
    assert_eq!(r["recording"]["samples_decoded"], 1050);
    assert_eq!(r["recording"]["samples_selected"], 1050);
    // 1050 records 1 us apart: first to last is 1049 us.
    assert_eq!(r["recording"]["duration_ns"], 1_049_000);
    let t = &r["totals"];
    assert_eq!(
        (
            t["loads"].as_u64(),
            t["stores"].as_u64(),
            t["branches"].as_u64(),
            t["mispredicts"].as_u64()
        ),
        (Some(700), Some(300), Some(50), Some(10))
    );

    let f = &r["hotspots"]["functions"];
    let sum = row(f, "sum_array");
    assert_eq!(sum["samples"], 600);
    assert!((sum["share"].as_f64().unwrap() - 600.0 / 1050.0).abs() < 1e-12);
    assert_eq!(sum["load_latency"]["mean"], 10.0);
    assert_eq!(sum["load_latency"]["p99"], 10);
    assert_eq!(sum["load_exec_latency"]["mean"], 5.0);
    assert_eq!(sum["sources"][0]["source"], "L1D");
    assert_eq!(row(f, "fill")["stores"], 300);
    let ui = row(f, "uses_inline");
    assert_eq!(ui["load_latency"]["mean"], 300.0);
    assert_eq!(ui["load_exec_latency"]["mean"], 279.0);
    assert_eq!(ui["llc_miss"], 100);
    assert_eq!(row(f, "main")["mispredicts"], 10);
    // Ordered by cost (the default): uses_inline's 100 loads of 300 − 20 (issue) cycles weigh
    // 28 000 sampled cycles, sum_array's 600 of 10 − 4 weigh 3 600, though it has 6× the samples.
    assert_eq!(f[0]["key"], "uses_inline");
    assert_eq!(f[0]["cost_sampled_cycles"], 28_000.0);
    assert_eq!(sum["cost_sampled_cycles"], 3_600.0);

    let o = &r["objects"];
    let big = row(o, "big_array");
    assert_eq!(
        (
            big["samples"].as_u64(),
            big["loads"].as_u64(),
            big["stores"].as_u64()
        ),
        (Some(900), Some(600), Some(300))
    );
    assert_eq!(big["kind"], "global");
    assert_eq!(big["size"], s["big_array"].1);
    let small = row(o, "small_table");
    assert_eq!(small["loads"], 100);
    assert_eq!(small["sources"][0]["source"], "DRAM");

    let ds = r["data_sources"].as_array().unwrap();
    assert_eq!(ds.len(), 2);
    assert_eq!(
        (ds[0]["source"].as_str(), ds[0]["loads"].as_u64()),
        (Some("L1D"), Some(600))
    );
    assert!((ds[0]["share"].as_f64().unwrap() - 600.0 / 700.0).abs() < 1e-12);
    assert_eq!(ds[1]["execution"]["mean"], 279.0);

    // Filters: only L1D misses leaves the 100 DRAM loads; a symbol keeps its samples only.
    let r2 = report_json(&data, &["--event", "l1d-miss"]);
    assert_eq!(r2["recording"]["samples_selected"], 100);
    assert_eq!(r2["hotspots"]["functions"][0]["key"], "uses_inline");
    let r3 = report_json(&data, &["--symbol", "fill"]);
    assert_eq!(r3["recording"]["samples_selected"], 300);
    // The timeline is a sample of memory accesses with their objects.
    let tl = &r["timeline"];
    assert_eq!(tl["population"], 1000);
    assert_eq!(tl["points"].as_array().unwrap().len(), 1000);
    if std::env::var_os("SPELUNK_KEEP_TEST_FILES").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The key column of a hotspot table.
fn keys(rows: &serde_json::Value) -> Vec<&str> {
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect()
}

/// `--sort`: every order on a recording planted so that the eleven orders of the four functions
/// all differ. Per function (hand-computed from the plants below):
///
/// | function    | samples | loads | stores | ld lat mean      | p99 | exec mean       | L1D | LLC | TLB | mispred | remote |
/// |-------------|---------|-------|--------|------------------|-----|-----------------|-----|-----|-----|---------|--------|
/// | sum_array   | 420     | 420   | 0      | 7600/420 = 18.10 | 180 | 4920/420 = 11.71| 20  | 0   | 20  | 0       | 0      |
/// | fill        | 335     | 5     | 330    | 200              | 200 | 189             | 35  | 35  | 0   | 0       | 5      |
/// | uses_inline | 100     | 100   | 0      | 150              | 150 | 129             | 100 | 100 | 100 | 0       | 0      |
/// | main        | 52      | 2     | 0      | 400              | 400 | 9               | 2   | 2   | 0   | 10      | 2      |
///
/// (sum_array's p99: nearest rank ⌈0.99 × 420⌉ = 416 of 400 tens and 20 × 180 is 180.)
#[test]
fn sort_orders_every_hotspot_table_and_the_limit_cuts_after_sorting() {
    let dir = scratch("sort");
    let exe = compile(&dir);
    let s = nm(&exe);
    let at = |name: &str, off: u64| {
        assert!(off < s[name].1, "{name}+{off} is outside {name}");
        BIAS + s[name].0 + off
    };
    let ld = OpType::new(1, 0x00);
    let st = OpType::new(1, 0x01);
    let br = OpType::new(2, 0x01);
    let l1 = Events(0)
        .with(Event::Retired)
        .with(Event::L1dAccess)
        .with(Event::TlbAccess);
    let refill = l1.with(Event::L1dRefill);
    let llc_miss = refill.with(Event::LlcAccess).with(Event::LlcMiss);
    let plant = |pc, op, source, issue, xlat, total, events| Plant {
        pc,
        op,
        va: (op != br).then(|| at("big_array", 64)),
        source,
        issue,
        xlat,
        total,
        events,
    };
    let plants = vec![
        // sum_array+8: 400 L1D loads (total 10 = 4 + 1 + exec 5).
        (plant(at("sum_array", 8), ld, Some(0), 4, 1, 10, l1), 400),
        // sum_array+12: 20 L2 loads that walked the TLB (total 180 = 4 + 30 + exec 146).
        (
            plant(
                at("sum_array", 12),
                ld,
                Some(0b1000),
                4,
                30,
                180,
                refill.with(Event::TlbWalk),
            ),
            20,
        ),
        // fill+12: 300 stores hitting L1D, 30 missing the LLC.
        (plant(at("fill", 12), st, None, 3, 1, 6, l1), 300),
        (plant(at("fill", 12), st, None, 3, 1, 6, llc_miss), 30),
        // fill+16: 5 loads from another socket (total 200 = 10 + 1 + exec 189).
        (
            plant(
                at("fill", 16),
                ld,
                Some(0b1101),
                10,
                1,
                200,
                llc_miss.with(Event::RemoteAccess),
            ),
            5,
        ),
        // uses_inline+4: 100 DRAM loads that walked the TLB (total 150 = 20 + 1 + exec 129).
        (
            plant(
                at("uses_inline", 4),
                ld,
                Some(0b1110),
                20,
                1,
                150,
                llc_miss.with(Event::TlbWalk),
            ),
            100,
        ),
        // main+4: 50 branches, 10 mispredicted; main+8: 2 remote DRAM loads (400 = 390 + 1 + 9).
        (
            plant(
                at("main", 4),
                br,
                None,
                2,
                0,
                3,
                Events(0).with(Event::Retired),
            ),
            40,
        ),
        (
            plant(
                at("main", 4),
                br,
                None,
                2,
                0,
                3,
                Events(0).with(Event::Retired).with(Event::Mispredicted),
            ),
            10,
        ),
        (
            plant(
                at("main", 8),
                ld,
                Some(0b1110),
                390,
                1,
                400,
                llc_miss.with(Event::RemoteAccess),
            ),
            2,
        ),
    ];
    let data = dir.join("sort.data");
    write(&data, &exe, &plants);

    let (sa, fi, ui, ma) = ("sum_array", "fill", "uses_inline", "main");
    let expected = [
        ("samples", [sa, fi, ui, ma]),
        ("loads", [sa, ui, fi, ma]),
        ("stores", [fi, sa, ui, ma]), // ties at 0 by samples
        ("latency", [ma, fi, ui, sa]),
        ("p99", [ma, fi, sa, ui]),
        ("exec", [fi, ui, sa, ma]),
        ("l1d-miss", [ui, fi, sa, ma]),
        ("llc-miss", [ui, fi, ma, sa]),
        ("tlb-walk", [ui, sa, fi, ma]),
        ("mispredicts", [ma, sa, fi, ui]),
        ("remote", [fi, ma, sa, ui]),
    ];
    for (order, want) in expected {
        let r = report_json(&data, &["--sort", order]);
        assert_eq!(r["hotspot_sort"], order);
        assert_eq!(keys(&r["hotspots"]["functions"]), want, "--sort {order}");
    }
    // The figures behind those orders, as planted.
    let r = report_json(&data, &["--sort", "latency"]);
    let f = &r["hotspots"]["functions"];
    let sum = row(f, sa);
    assert!((sum["load_latency"]["mean"].as_f64().unwrap() - 7600.0 / 420.0).abs() < 1e-12);
    assert_eq!(sum["load_latency"]["p99"], 180);
    assert!((sum["load_exec_latency"]["mean"].as_f64().unwrap() - 4920.0 / 420.0).abs() < 1e-12);
    assert_eq!(
        (sum["l1d_miss"].as_u64(), sum["tlb_walk"].as_u64()),
        (Some(20), Some(20))
    );
    let fl = row(f, fi);
    assert_eq!(
        (
            fl["samples"].as_u64(),
            fl["stores"].as_u64(),
            fl["llc_miss"].as_u64(),
            fl["remote"].as_u64()
        ),
        (Some(335), Some(330), Some(35), Some(5))
    );
    assert_eq!(row(f, ma)["mispredicts"], 10);

    // Instructions, by latency: rows without loads (fill+0xc's stores, main+0x4's branches) go
    // last, the larger first.
    assert_eq!(
        keys(&r["hotspots"]["instructions"]),
        [
            "main+0x8",
            "fill+0x10",
            "sum_array+0xc",
            "uses_inline+0x4",
            "sum_array+0x8",
            "fill+0xc",
            "main+0x4"
        ]
    );
    let r = report_json(&data, &["--sort", "tlb-walk"]);
    assert_eq!(
        keys(&r["hotspots"]["instructions"]),
        [
            "uses_inline+0x4", // 100 walks
            "sum_array+0xc",   // 20
            "sum_array+0x8",   // 0 walks, 400 samples
            "fill+0xc",        // 330
            "main+0x4",        // 50
            "fill+0x10",       // 5
            "main+0x8",        // 2
        ]
    );
    // Every table follows the order: source lines and DSOs by non-increasing mean latency.
    let r = report_json(&data, &["--sort", "latency"]);
    for table in ["lines", "dsos"] {
        let means: Vec<f64> = r["hotspots"][table]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["load_latency"]["mean"].as_f64().unwrap_or(-1.0))
            .collect();
        assert!(means.windows(2).all(|w| w[0] >= w[1]), "{table}: {means:?}");
    }

    // The limit cuts after sorting: the two slowest functions and instructions, in the JSON
    // and in the terminal.
    let r = report_json(&data, &["--sort", "latency", "--limit", "2"]);
    assert_eq!(keys(&r["hotspots"]["functions"]), [ma, fi]);
    assert_eq!(
        keys(&r["hotspots"]["instructions"]),
        ["main+0x8", "fill+0x10"]
    );
    let out = Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .args([
            "report",
            data.to_str().unwrap(),
            "--sort",
            "latency",
            "--limit",
            "2",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Hotspots by function"))
        .skip(2)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(table.len(), 2, "{text}");
    assert!(
        table[0].contains(" 400.0 ") && table[0].contains(" main "),
        "{text}"
    );
    assert!(
        table[1].contains(" 200.0 ") && table[1].contains(" fill "),
        "{text}"
    );

    // A name that is not an order: the error lists the orders.
    let out = Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .args(["report", data.to_str().unwrap(), "--sort", "speed"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown order 'speed'") && err.contains("mispredicts"),
        "{err}"
    );
    if std::env::var_os("SPELUNK_KEEP_TEST_FILES").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// `spelunk report --json | head -1`: when the reader of standard output goes away, spelunk
/// dies quietly of SIGPIPE, as cat and grep do, instead of panicking in println!.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let dir = scratch("closed-pipe");
    let data = dir.join("big.data");
    spelunk_testkit::SynthRecording {
        cpus: 2,
        records_per_cpu: 20_000,
        ..Default::default()
    }
    .write(&data)
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .args([
            "report",
            data.to_str().unwrap(),
            "--json",
            "--limit",
            "100000",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 1];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // stdout is dropped (closed) here, long before spelunk wrote its megabytes of JSON.
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(first[0], b'{');
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?} {err}",
        out.status
    );
    std::fs::remove_dir_all(&dir).ok();
}
