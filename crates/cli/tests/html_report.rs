//! `spelunk report --html`: the page embeds exactly the report `--json` prints, survives hostile
//! names, takes top-down results, and (with SPELUNK_BROWSER_TEST=1, as `make browser` sets it)
//! shows in headless Chromium the same figures as the JSON, with no request and no console
//! error (tests/browser/check-report.mjs).
//!
//! Recordings with known content: samples planted at PCs inside named functions of
//! tests/data/c/objects.c compiled here, touching its named globals, written with spelunk's
//! perf.data writer (the approach of report_cli.rs).

mod planted;

use spelunk_perf::{
    AuxFlags, Mmap2, MmapFileId, RecordingSpec, SpeRecordingWriter, Task, TimeConv,
};
use spelunk_spe::{
    CodeAddress, CpuModel, DataPhysicalAddress, DataVirtualAddress, Event, Events, OpType,
    RecordLayout, SpeRecord, Terminator,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

/// A thread name that would end the page's data element if it were not escaped.
const HOSTILE_COMM: &str = "</script><!--x";

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

/// The emulator's VALGRIND_LIB directory and the workloads, or None when not built (the
/// emulated page is then left out; SPELUNK_REQUIRE_EMULATOR=1 makes that an error).
fn emulator() -> Option<(PathBuf, PathBuf)> {
    let arch = if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        "amd64"
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let lib = root.join("emulator/build/lib");
    let wl = root.join("workloads/build");
    if lib.join(format!("spelunk-{arch}-linux")).exists()
        && wl.join("stream").exists()
        && wl.join("false_sharing").exists()
    {
        return Some((lib, wl));
    }
    if std::env::var_os("SPELUNK_REQUIRE_EMULATOR").is_some() {
        panic!("emulator or workloads not built: run emulator/test.sh");
    }
    eprintln!("note: emulator not built; the emulated page is left out (run emulator/test.sh)");
    None
}

/// A directory under the cargo target directory (kept, so humans can open the pages).
fn outdir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("html-report")
        .join(name);
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

#[derive(Clone, Copy)]
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

fn record(p: &Plant, tid: i32, ts: u64) -> SpeRecord {
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
        context_el1: Some(tid as u32),
        timestamp: Some(ts),
        terminator: Terminator::Timestamp,
        ..Default::default()
    }
}

/// One CPU's samples: its thread and (plant, time in ns) pairs.
struct CpuSamples {
    cpu: u32,
    tid: i32,
    comm: &'static str,
    samples: Vec<(Plant, u64)>,
}

/// Writes a recording; `lost` PERF_RECORD_LOST records of `lost` each when non-zero.
fn write(path: &Path, exe: &Path, cpus: &[CpuSamples], lost: u64) {
    let tc = TimeConv::from_frequency(1_000_000_000, 0);
    let spec = RecordingSpec {
        midr: CpuModel::NeoverseN1.midr(),
        time_conv: tc,
        workload_pid: PID,
        cpus: cpus.iter().map(|c| c.cpu).collect(),
        nr_cpus_available: cpus.len() as u32,
        nr_cpus_online: cpus.len() as u32,
        ..Default::default()
    };
    let mut w = SpeRecordingWriter::create(path, spec).unwrap();
    w.comm(0, 1_000, Task::new(PID, PID), "objects", true)
        .unwrap();
    for m in mmaps(exe) {
        w.mmap2(0, 1_000, &m).unwrap();
    }
    for c in cpus {
        if c.tid != PID {
            w.comm(c.cpu, 2_000, Task::new(PID, c.tid), c.comm, false)
                .unwrap();
        }
    }
    if lost > 0 {
        w.lost(0, 3_000, lost).unwrap();
    }
    for c in cpus {
        let mut bytes = Vec::new();
        let mut last = 0;
        for (p, ts) in &c.samples {
            record(p, c.tid, *ts).encode(RecordLayout::N1Padded64, &mut bytes);
            last = *ts;
        }
        w.aux(c.cpu, Task::new(PID, c.tid), last, AuxFlags(0), &bytes)
            .unwrap();
    }
    w.finish().unwrap();
}

struct Ops {
    ld: OpType,
    st: OpType,
    br: OpType,
    l1: Events,
    l2: Events,
    dram: Events,
}

fn ops() -> Ops {
    let l1 = Events(0)
        .with(Event::Retired)
        .with(Event::L1dAccess)
        .with(Event::TlbAccess);
    let l2 = l1.with(Event::L1dRefill);
    Ops {
        ld: OpType::new(1, 0x00),
        st: OpType::new(1, 0x01),
        br: OpType::new(2, 0x01),
        l1,
        l2,
        dram: l2.with(Event::LlcAccess).with(Event::LlcMiss),
    }
}

/// The recording of report_cli.rs (1050 samples, figures known by hand) on one CPU, plus a
/// second thread with a hostile name on CPU 1 (20 loads) and one PERF_RECORD_LOST.
fn planted_small(exe: &Path, data: &Path) {
    let s = nm(exe);
    let o = ops();
    let at = |name: &str, off: u64| BIAS + s[name].0 + off;
    let plant = |pc, op, va, source, issue, xlat, total, events| Plant {
        pc,
        op,
        va,
        source,
        issue,
        xlat,
        total,
        events,
    };
    let groups = [
        (
            plant(
                at("sum_array", 8),
                o.ld,
                Some(at("big_array", 800)),
                Some(0),
                4,
                1,
                10,
                o.l1,
            ),
            600,
        ),
        (
            plant(
                at("fill", 12),
                o.st,
                Some(at("big_array", 16)),
                None,
                3,
                1,
                6,
                o.l1,
            ),
            300,
        ),
        (
            plant(
                at("uses_inline", 4),
                o.ld,
                Some(at("small_table", 8)),
                Some(0b1110),
                20,
                1,
                300,
                o.dram,
            ),
            100,
        ),
        (
            plant(
                at("main", 4),
                o.br,
                None,
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
                o.br,
                None,
                None,
                2,
                0,
                3,
                Events(0).with(Event::Retired).with(Event::Mispredicted),
            ),
            10,
        ),
    ];
    let mut ts = 1_000_000_000u64;
    let mut cpu0 = Vec::new();
    for (p, n) in groups {
        for _ in 0..n {
            ts += 1000;
            cpu0.push((p, ts));
        }
    }
    let l2 = plant(
        at("sum_array", 8),
        o.ld,
        Some(at("small_table", 0)),
        Some(0b1000),
        4,
        1,
        25,
        o.l2,
    );
    let cpu1 = (0..20u64)
        .map(|i| (l2, 1_000_000_000 + 500 + i * 50_000))
        .collect();
    write(
        data,
        exe,
        &[
            CpuSamples {
                cpu: 0,
                tid: PID,
                comm: "objects",
                samples: cpu0,
            },
            CpuSamples {
                cpu: 1,
                tid: PID + 1,
                comm: HOSTILE_COMM,
                samples: cpu1,
            },
        ],
        1,
    );
}

/// A larger recording for the timeline: 2 threads x 30 000 samples over 60 ms, in three
/// stretches (fill stores sweeping big_array, sum_array loads sweeping it again with L2 and DRAM
/// misses, uses_inline loads of small_table from DRAM); latencies from a fixed LCG.
fn planted_large(exe: &Path, data: &Path) {
    let s = nm(exe);
    let o = ops();
    let at = |name: &str, off: u64| BIAS + s[name].0 + off;
    let big_size = s["big_array"].1;
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move |n: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    let per_cpu = 30_000u64;
    let mut cpus = Vec::new();
    for cpu in 0..2u32 {
        let mut samples = Vec::with_capacity(per_cpu as usize);
        for i in 0..per_cpu {
            let ts = 1_000_000_000 + i * 2_000 + u64::from(cpu) * 1_000;
            let third = i * 3 / per_cpu;
            let sweep = (i * 8 * 7) % big_size;
            let p = match third {
                0 => Plant {
                    pc: at("fill", 12),
                    op: o.st,
                    va: Some(at("big_array", sweep & !7)),
                    source: None,
                    issue: 3,
                    xlat: 1,
                    total: 6 + rnd(4) as u16,
                    events: o.l1,
                },
                1 => {
                    let r = rnd(100);
                    let (source, events, total) = if r < 70 {
                        (0, o.l1, 8 + rnd(6) as u16)
                    } else if r < 92 {
                        (0b1000, o.l2, 20 + rnd(30) as u16)
                    } else {
                        (0b1110, o.dram, 180 + rnd(200) as u16)
                    };
                    Plant {
                        pc: at("sum_array", 8 + 4 * (i % 3)),
                        op: o.ld,
                        va: Some(at("big_array", sweep & !7)),
                        source: Some(source),
                        issue: 4,
                        xlat: 1,
                        total,
                        events,
                    }
                }
                _ => Plant {
                    pc: at("uses_inline", 4),
                    op: o.ld,
                    va: Some(at("small_table", 8 * rnd(16))),
                    source: Some(0b1110),
                    issue: 20,
                    xlat: 1,
                    total: 250 + rnd(150) as u16,
                    events: o.dram,
                },
            };
            samples.push((p, ts));
        }
        cpus.push(CpuSamples {
            cpu,
            tid: PID + cpu as i32,
            comm: "worker",
            samples,
        });
    }
    write(data, exe, &cpus, 0);
}

/// A thread name that would be an element (and a request) if it were parsed as markup.
const HOSTILE_READER: &str = "<img src=x>";

/// (pc, data address) of the instruction of `func` whose `objdump -d` text contains `what`
/// (objdump comments a RIP-relative access with its target: `# 40c8 <buf2+0x8>`).
fn access(exe: &Path, func: &str, what: &str) -> (u64, u64) {
    planted::objdump_function("objdump", exe, func)
        .into_iter()
        .filter(|i| i.text.contains(what))
        .find_map(|i| {
            let (_, comment) = i.text.split_once("# ")?;
            let addr = u64::from_str_radix(comment.split_whitespace().next()?, 16).ok()?;
            Some((i.address, addr))
        })
        .unwrap_or_else(|| panic!("no access '{what}' in {func}"))
}

/// tests/data/c/sharing.c's false sharing (the recording of c2c_cli.rs, whose counts that test
/// checks by hand): a lock thread stores to buf1+0 and buf2+8 while a reader thread (with a
/// hostile name) loads buf1+0x20 and buf2+0x20 from a peer core; both update `counter`.
fn planted_false_sharing(dir: &Path, data: &Path) {
    use planted::{sequence, write_recording, Op, Setup};
    let exe = planted::compile("gcc", "sharing.c", &dir.join("sharing"), &[]);
    let (peer, l1d) = (0b1001, 0);
    let reader = planted::PID + 1;
    let at = |(pc, va): (u64, u64)| (planted::BIAS + pc, planted::BIAS + va);
    let xchg = at(access(&exe, "lock_side", "xchg"));
    let lock1 = at(access(&exe, "lock_side", "<buf2+0x8>"));
    let r1 = at(access(&exe, "reader_side", "<buf1+0x20>"));
    let r2 = at(access(&exe, "reader_side", "<buf2+0x20>"));
    let cnt = at(access(&exe, "count", "<counter>"));
    let mut ops = sequence(
        &[
            (Op::store(xchg.0, xchg.1), 200),
            (Op::store(lock1.0, lock1.1), 300),
            (Op::load(cnt.0, cnt.1, l1d, 4), 40),
            (Op::store(cnt.0, cnt.1), 40),
        ],
        1_000_000,
        10,
    );
    ops.extend(
        sequence(
            &[
                (Op::load(r1.0, r1.1, peer, 120), 150),
                (Op::load(r1.0, r1.1, l1d, 4), 50),
                (Op::load(r2.0, r2.1, peer, 130), 250),
                (Op::load(r2.0, r2.1, l1d, 5), 50),
                (Op::load(cnt.0, cnt.1, peer, 150), 60),
                (Op::store(cnt.0, cnt.1), 60),
            ],
            1_000_005,
            10,
        )
        .into_iter()
        .map(|(o, t)| (o.on(reader, 1), t)),
    );
    ops.sort_by_key(|o| o.1);
    let setup = Setup {
        threads: vec![
            (planted::PID, "lock_th".into()),
            (reader, HOSTILE_READER.into()),
        ],
        cpus: vec![0, 1],
        ..Setup::new(&exe)
    };
    write_recording(data, &setup, &ops);
}

fn spelunk(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .args(args)
        .output()
        .unwrap()
}

/// Runs `spelunk report DATA --html HTML --json [extra]`; returns the JSON it printed, parsed
/// and as text (serde_json's parser may be 1 ulp off, so files for the browser test get the
/// text exactly as printed).
fn report_html_text(data: &Path, html: &Path, extra: &[&str]) -> (serde_json::Value, Vec<u8>) {
    let mut args = vec![
        "report",
        data.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = spelunk(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (serde_json::from_slice(&out.stdout).unwrap(), out.stdout)
}

fn report_html(data: &Path, html: &Path, extra: &[&str]) -> serde_json::Value {
    report_html_text(data, html, extra).0
}

/// The JSON embedded in the page.
fn embedded(page: &str) -> serde_json::Value {
    let open = r#"<script type="application/json" id="spelunk-data">"#;
    let start = page.find(open).expect("data element") + open.len();
    let end = start
        + page[start..]
            .find("</script>")
            .expect("end of data element");
    serde_json::from_str(&page[start..end]).unwrap()
}

/// An emulated recording's page computes top-down from the sidecar's counts by itself; it must
/// embed what `spelunk topdown --import DATA --per-phase --json` prints. Returns that file.
fn sidecar_topdown(data: &Path, html: &Path, out_json: PathBuf) -> PathBuf {
    let out = Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .args(["topdown", "--import"])
        .arg(data)
        .args(["--per-phase", "--json", "-o"])
        .arg(&out_json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(html).unwrap();
    let want: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out_json).unwrap()).unwrap();
    assert_eq!(embedded(&page)["topdown"], want);
    out_json
}

fn topdown_golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../pmu/tests/data/golden/seed001-stride-baseline.json")
}

#[test]
fn html_page_embeds_exactly_the_json_report_and_escapes_hostile_names() {
    let dir = outdir("embed");
    let exe = compile(&dir);
    // The recording's own name is hostile too (it is the page title; a file name has no '/').
    let data = dir.join("planted<b>&'\"<!--.data");
    planted_small(&exe, &data);
    let html = dir.join("report.html");
    let json = report_html(&data, &html, &[]);
    let page = std::fs::read_to_string(&html).unwrap();

    // Known content (hand-computed as in report_cli.rs, plus the hostile thread on CPU 1).
    assert_eq!(json["recording"]["samples_selected"], 1070);
    let sum_array = json["hotspots"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["key"] == "sum_array")
        .unwrap();
    assert_eq!(sum_array["samples"], 620);
    assert_eq!(json["recording"]["losses"]["lost_events"], 1);
    let threads = json["threads"].as_array().unwrap();
    assert!(
        threads.iter().any(|t| t["name"] == HOSTILE_COMM),
        "{threads:?}"
    );

    // The page carries the very report --json printed.
    let back = embedded(&page);
    assert_eq!(back["report"], json);
    assert_eq!(back["topdown"], serde_json::Value::Null);
    // Only our three script elements end; no comment starts; the title is escaped text.
    assert_eq!(page.to_ascii_lowercase().matches("</script").count(), 3);
    assert!(!page.contains("<!--"));
    assert!(page.contains("planted&lt;b&gt;&amp;&#39;&quot;&lt;!--.data</title>"));
    // Nothing refers to another resource: no src/href attributes, no url(), CSP forbids fetches.
    let lower = page.to_ascii_lowercase();
    for bad in [
        " src=",
        " href=\"http",
        "url(",
        "@import",
        "<link",
        "<iframe",
        "<img",
    ] {
        assert!(!lower.contains(bad), "page contains {bad}");
    }
    assert!(page.contains("content=\"default-src 'none'"));
}

#[test]
fn topdown_results_are_embedded_and_checked() {
    let dir = outdir("topdown");
    let exe = compile(&dir);
    let data = dir.join("planted.data");
    planted_small(&exe, &data);
    let html = dir.join("report.html");
    let golden = topdown_golden();
    let json = report_html(&data, &html, &["--topdown", golden.to_str().unwrap()]);
    let page = std::fs::read_to_string(&html).unwrap();
    let back = embedded(&page);
    assert_eq!(back["report"], json);
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&golden).unwrap()).unwrap();
    assert_eq!(back["topdown"], expected);

    // Wrong inputs: a report instead of top-down results; --topdown without --html.
    let not_topdown = dir.join("report.json");
    std::fs::write(&not_topdown, serde_json::to_string(&json).unwrap()).unwrap();
    let out = spelunk(&[
        "report",
        data.to_str().unwrap(),
        "--html",
        dir.join("x.html").to_str().unwrap(),
        "--topdown",
        not_topdown.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not top-down results: schema is 'spelunk-report/1'"),
        "{err}"
    );
    assert!(!dir.join("x.html").exists());
    let out = spelunk(&[
        "report",
        data.to_str().unwrap(),
        "--topdown",
        golden.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--html"));
    let out = spelunk(&[
        "report",
        data.to_str().unwrap(),
        "--html",
        dir.join("y.html").to_str().unwrap(),
        "--topdown",
        dir.join("missing.json").to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("reading top-down results"));
}

/// The page in headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core from
/// tests/browser). Runs when SPELUNK_BROWSER_TEST=1 (`make browser`, part of `make test`).
#[test]
fn html_report_in_headless_chromium() {
    if std::env::var_os("SPELUNK_BROWSER_TEST").is_none() {
        eprintln!("skipped: set SPELUNK_BROWSER_TEST=1 (make browser) to run the browser test");
        return;
    }
    let started = Instant::now();
    let dir = outdir("browser");
    let exe = compile(&dir);

    let small = dir.join("planted<b>&'\"<!--.data");
    planted_small(&exe, &small);
    let small_html = dir.join("planted.html");
    let small_json = dir.join("planted.json");
    let golden = topdown_golden();
    // Hotspots by latency; --c2c on a recording without peer snoops (the section says so).
    let (_, text) = report_html_text(
        &small,
        &small_html,
        &[
            "--topdown",
            golden.to_str().unwrap(),
            "--sort",
            "latency",
            "--c2c",
        ],
    );
    std::fs::write(&small_json, text).unwrap();

    // A planted false-sharing recording: its report with --c2c, and the c2c page alone.
    let fs = dir.join("false<sharing>.data");
    planted_false_sharing(&dir, &fs);
    let fs_html = dir.join("false-sharing.html");
    let fs_json = dir.join("false-sharing.json");
    let (j, text) = report_html_text(&fs, &fs_html, &["--c2c"]);
    // Hand counts (as c2c_cli.rs): buf2 has 250 of the 460 peer loads; buf1 150; counter 60.
    assert_eq!(j["c2c"]["totals"]["peer_local"], 460);
    let lines = j["c2c"]["lines"].as_array().unwrap();
    assert_eq!(
        lines
            .iter()
            .map(|l| l["object"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["buf2", "buf1", "counter"]
    );
    assert_eq!(
        lines
            .iter()
            .map(|l| l["verdict"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["false_sharing", "false_sharing", "true_sharing"]
    );
    std::fs::write(&fs_json, text).unwrap();
    // The same tables alone: `spelunk c2c --html`.
    let c2c_html = dir.join("c2c-only.html");
    let c2c_json = dir.join("c2c-only.json");
    let out = spelunk(&[
        "c2c",
        fs.to_str().unwrap(),
        "--html",
        c2c_html.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(c, j["c2c"]);
    std::fs::write(&c2c_json, &out.stdout).unwrap();

    let large = dir.join("large.data");
    planted_large(&exe, &large);
    let large_html = dir.join("large.html");
    let large_json = dir.join("large.json");
    let (j, text) = report_html_text(&large, &large_html, &[]);
    assert_eq!(j["recording"]["samples_selected"], 60_000);
    assert_eq!(j["timeline"]["population"], 60_000);
    assert_eq!(j["timeline"]["points"].as_array().unwrap().len(), 20_000);
    std::fs::write(&large_json, text).unwrap();

    // A recording of a real program under the emulator (phases, annotated objects, PMU counts
    // in the sidecar), when the emulator is built (make test builds it before this test).
    let mut pages = Vec::new();
    if let Some((lib, wl)) = emulator() {
        let data = dir.join("stream.data");
        let out = Command::new(env!("CARGO_BIN_EXE_spelunk"))
            .env("SPELUNK_EMULATOR_LIB", &lib)
            .args(["record", "--emulate", "--jitter", "-o"])
            .arg(&data)
            .arg("--")
            .arg(wl.join("stream"))
            .args(["-n", "100000", "-i", "2", "-t", "2"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let html = dir.join("stream.html");
        let json = dir.join("stream.json");
        let (j, text) = report_html_text(&data, &html, &[]);
        assert_eq!(j["phases"].as_array().unwrap().len(), 5, "init + 4 kernels");
        assert!(j["recording"]["sampling_quality"]["accuracy"].is_number());
        std::fs::write(&json, text).unwrap();
        let td = sidecar_topdown(&data, &html, dir.join("stream-topdown.json"));
        pages.push(serde_json::json!({
            "name": "emulated-stream",
            "html": html, "json": json, "topdown": td,
            "screenshot": dir.join("stream.png"),
        }));

        // workloads/false_sharing under the emulator: its c2c tables in the report.
        let data = dir.join("false_sharing.data");
        let out = Command::new(env!("CARGO_BIN_EXE_spelunk"))
            .env("SPELUNK_EMULATOR_LIB", &lib)
            .args(["record", "--emulate", "--no-jitter", "-o"])
            .arg(&data)
            .arg("--")
            .arg(wl.join("false_sharing"))
            .args(["1", "300000"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let html = dir.join("emulated-false-sharing.html");
        let json = dir.join("emulated-false-sharing.json");
        let (j, text) = report_html_text(&data, &html, &["--c2c"]);
        let top = &j["c2c"]["lines"][0];
        assert_eq!(top["verdict"], "false_sharing", "{top}");
        assert!(["buf1", "buf2"].contains(&top["object"].as_str().unwrap()));
        std::fs::write(&json, text).unwrap();
        let td = sidecar_topdown(&data, &html, dir.join("false-sharing-topdown.json"));
        pages.push(serde_json::json!({
            "name": "emulated-false-sharing",
            "html": html, "json": json, "topdown": td,
            "screenshot": dir.join("emulated-false-sharing.png"),
        }));
    }
    let mut manifest = serde_json::json!({
        "pages": [
            {
                "name": "planted",
                "html": small_html, "json": small_json, "topdown": golden,
                "screenshot": dir.join("planted.png"),
                "hostile_thread_name": HOSTILE_COMM,
            },
            {
                "name": "false-sharing",
                "html": fs_html, "json": fs_json, "topdown": null,
                "screenshot": dir.join("false-sharing.png"),
                "hostile_thread_name": HOSTILE_READER,
            },
            {
                "name": "c2c-only",
                "html": c2c_html, "json": c2c_json, "topdown": null,
                "screenshot": dir.join("c2c-only.png"),
                "hostile_thread_name": HOSTILE_READER,
            },
            {
                "name": "large",
                "html": large_html, "json": large_json, "topdown": null,
                "screenshot": dir.join("large.png"),
                "with_phases": true,
            },
        ]
    });
    manifest["pages"].as_array_mut().unwrap().extend(pages);
    let manifest_path = dir.join("manifest.json");
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/browser/check-report.mjs");
    let out = Command::new("node")
        .arg(&script)
        .arg(&manifest_path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run node (scripts/ensure-deps.sh browser): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        out.status.success(),
        "browser checks failed:\n{stdout}\n{stderr}"
    );
    println!(
        "browser test: {:.1} s in all; screenshots in {}",
        started.elapsed().as_secs_f64(),
        dir.display()
    );
}
