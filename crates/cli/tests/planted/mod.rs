//! Recordings whose content is known exactly, for the annotate, estimate, c2c and diff tests:
//! a C program compiled here (truth from nm, readelf, objdump and addr2line), mapped at a fixed
//! bias by MMAP2 records, and SPE records planted at chosen PCs, data addresses, latencies,
//! data sources, threads and CPUs, written through spelunk's perf.data writer.
#![allow(dead_code)]

use spelunk_perf::{
    AuxFlags, Mmap2, MmapFileId, RecordingSpec, SpeConfig, SpeRecordingWriter, Task, TimeConv,
};
use spelunk_spe::{
    CodeAddress, CpuModel, DataPhysicalAddress, DataVirtualAddress, Event, Events, OpType,
    RecordLayout, SpeRecord, Terminator,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const BIAS: u64 = 0x5555_5555_4000;
pub const PID: i32 = 777;

pub fn tool(cmd: &str, args: &[&str]) -> String {
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

pub fn have(cmd: &str) -> bool {
    Command::new(cmd)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("spelunk-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
    pub fn join(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::env::var_os("SPELUNK_KEEP_TEST_FILES").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Compiles tests/data/c/`src` with `cc -O2 -g -fPIE -pie` and `extra` flags.
pub fn compile(cc: &str, src: &str, out: &Path, extra: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/c")
        .join(src);
    let mut args = vec!["-O2", "-g", "-fPIE", "-pie", "-o", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.push(src.to_str().unwrap());
    tool(cc, &args);
    out.to_path_buf()
}

/// `nm -S`: symbol → (address, size).
pub fn nm(nm: &str, exe: &Path) -> HashMap<String, (u64, u64)> {
    tool(nm, &["-S", "--defined-only", exe.to_str().unwrap()])
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

/// One instruction of `objdump -d` output: address, mnemonic and operands as objdump prints.
#[derive(Clone, Debug)]
pub struct ObjdumpInsn {
    pub address: u64,
    pub text: String,
}

/// The instructions of `function` as `objdump -d` lists them (Intel syntax on x86-64).
pub fn objdump_function(objdump: &str, exe: &Path, function: &str) -> Vec<ObjdumpInsn> {
    let mut args = vec!["-d", "--no-show-raw-insn", "-w"];
    if !objdump.contains("aarch64") {
        args.push("-Mintel");
    }
    args.push(exe.to_str().unwrap());
    let text = tool(objdump, &args);
    let header = format!("<{function}>:");
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.ends_with(&header) {
            inside = true;
            continue;
        }
        if inside {
            if line.trim().is_empty() {
                break;
            }
            let Some((addr, rest)) = line.split_once(':') else {
                continue;
            };
            let Ok(address) = u64::from_str_radix(addr.trim(), 16) else {
                continue;
            };
            out.push(ObjdumpInsn {
                address,
                text: rest.trim().to_string(),
            });
        }
    }
    assert!(!out.is_empty(), "objdump lists no {function}");
    out
}

/// `addr2line -e exe ADDR...`: file:line per address (the innermost location, as blazesym).
pub fn addr2line(tool_name: &str, exe: &Path, addrs: &[u64]) -> Vec<(String, u32)> {
    let mut args = vec!["-e".to_string(), exe.to_str().unwrap().to_string()];
    args.extend(addrs.iter().map(|a| format!("{a:#x}")));
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    tool(tool_name, &args)
        .lines()
        .map(|l| {
            // "path/file.c:12 (discriminator 3)" or "??:0"
            let l = l.split(" (").next().unwrap_or(l);
            let (f, n) = l.rsplit_once(':').unwrap();
            (f.to_string(), n.parse().unwrap_or(0))
        })
        .collect()
}

/// MMAP2 records for the program's PT_LOAD segments at BIAS (what the kernel would map).
pub fn mmaps(exe: &Path, pid: i32) -> Vec<Mmap2> {
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
            task: Task::new(pid, pid),
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

pub fn load() -> OpType {
    OpType::new(1, 0x00)
}
pub fn store() -> OpType {
    OpType::new(1, 0x01)
}
pub fn cond_branch() -> OpType {
    OpType::new(2, 0x01)
}
pub fn l1_events() -> Events {
    Events(0)
        .with(Event::Retired)
        .with(Event::L1dAccess)
        .with(Event::TlbAccess)
}
/// Events of a load that missed L1D (served further out).
pub fn miss_events() -> Events {
    l1_events().with(Event::L1dRefill)
}

/// A planted operation.
#[derive(Clone, Copy, Debug)]
pub struct Op {
    pub pc: u64,
    pub op: OpType,
    pub va: Option<u64>,
    /// Data Source packet value (N1 encoding: 0 L1D, 8 L2, 9 peer core, 0xb SLC, 0xd remote,
    /// 0xe DRAM).
    pub source: Option<u64>,
    pub issue: u16,
    pub total: u16,
    pub events: Events,
    pub tid: i32,
    pub cpu: u32,
}

impl Op {
    pub fn load(pc: u64, va: u64, source: u64, total: u16) -> Op {
        Op {
            pc,
            op: load(),
            va: Some(va),
            source: Some(source),
            issue: 2,
            total,
            events: if source == 0 {
                l1_events()
            } else {
                miss_events()
            },
            tid: PID,
            cpu: 0,
        }
    }
    pub fn store(pc: u64, va: u64) -> Op {
        Op {
            pc,
            op: store(),
            va: Some(va),
            source: None,
            issue: 2,
            total: 5,
            events: l1_events(),
            tid: PID,
            cpu: 0,
        }
    }
    pub fn other(pc: u64) -> Op {
        Op {
            pc,
            op: OpType::new(0, 0),
            va: None,
            source: None,
            issue: 1,
            total: 2,
            events: Events(0).with(Event::Retired),
            tid: PID,
            cpu: 0,
        }
    }
    pub fn branch(pc: u64, mispredicted: bool) -> Op {
        let mut ev = Events(0).with(Event::Retired);
        if mispredicted {
            ev = ev.with(Event::Mispredicted);
        }
        Op {
            pc,
            op: cond_branch(),
            va: None,
            source: None,
            issue: 1,
            total: 2,
            events: ev,
            tid: PID,
            cpu: 0,
        }
    }
    pub fn on(mut self, tid: i32, cpu: u32) -> Op {
        self.tid = tid;
        self.cpu = cpu;
        self
    }

    pub fn record(&self, tick: u64) -> SpeRecord {
        SpeRecord {
            pc: Some(CodeAddress::new(self.pc, 0, true)),
            op: Some(self.op),
            events: Some(self.events),
            issue_latency_cycles: Some(self.issue),
            total_latency_cycles: Some(self.total),
            translation_latency_cycles: self.va.map(|_| 1),
            data_va: self.va.map(|v| DataVirtualAddress::new(v, 0)),
            data_pa: self
                .va
                .map(|v| DataPhysicalAddress::new(v & 0xffff_ffff, true, false, 0)),
            data_source: self.source,
            context_el1: Some(self.tid as u32),
            timestamp: Some(tick),
            terminator: Terminator::Timestamp,
            ..Default::default()
        }
    }
}

/// How a planted recording is configured.
#[derive(Clone, Debug)]
pub struct Setup {
    pub exe: PathBuf,
    /// Threads (tid, name); the first is the process's main thread (tid = PID).
    pub threads: Vec<(i32, String)>,
    pub cpus: Vec<u32>,
    pub timer_hz: u64,
    pub sample_period: u64,
    pub jitter: bool,
}

impl Setup {
    pub fn new(exe: &Path) -> Setup {
        Setup {
            exe: exe.to_path_buf(),
            threads: vec![(PID, "planted".into())],
            cpus: vec![0],
            timer_hz: 1_000_000_000,
            sample_period: 1024,
            jitter: false,
        }
    }
}

/// Writes `ops` (each with its timer tick, in time order) to `path`.
pub fn write_recording(path: &Path, setup: &Setup, ops: &[(Op, u64)]) {
    let tc = TimeConv::from_frequency(setup.timer_hz, 0);
    let spec = RecordingSpec {
        midr: CpuModel::NeoverseN1.midr(),
        time_conv: tc,
        workload_pid: PID,
        cpus: setup.cpus.clone(),
        nr_cpus_available: setup.cpus.len() as u32,
        nr_cpus_online: setup.cpus.len() as u32,
        sample_period: setup.sample_period,
        spe: SpeConfig {
            ts_enable: true,
            pa_enable: true,
            jitter: setup.jitter,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut w = SpeRecordingWriter::create(path, spec).unwrap();
    let first_ns = ops
        .first()
        .map(|(_, t)| tc.tsc_to_perf_time(*t))
        .unwrap_or(1_000_000);
    let early = first_ns.saturating_sub(1000);
    for (tid, name) in &setup.threads {
        w.comm(
            setup.cpus[0],
            early,
            Task::new(PID, *tid),
            name,
            *tid == PID,
        )
        .unwrap();
    }
    for m in mmaps(&setup.exe, PID) {
        w.mmap2(setup.cpus[0], early, &m).unwrap();
    }
    // Per CPU, in chunks of 4096 records.
    for cpu in &setup.cpus {
        let mine: Vec<&(Op, u64)> = ops.iter().filter(|(o, _)| o.cpu == *cpu).collect();
        for chunk in mine.chunks(4096) {
            let mut bytes = Vec::with_capacity(chunk.len() * 64);
            for (op, tick) in chunk {
                op.record(*tick)
                    .encode(RecordLayout::N1Padded64, &mut bytes);
            }
            let (last_op, last_tick) = chunk[chunk.len() - 1];
            w.aux(
                *cpu,
                Task::new(PID, last_op.tid),
                tc.tsc_to_perf_time(*last_tick),
                AuxFlags(0),
                &bytes,
            )
            .unwrap();
        }
    }
    w.finish().unwrap();
}

/// `ops`, each repeated `n` times, one tick apart from `start`.
pub fn sequence(ops: &[(Op, u32)], start: u64, step: u64) -> Vec<(Op, u64)> {
    let mut out = Vec::new();
    let mut t = start;
    for (op, n) in ops {
        for _ in 0..*n {
            out.push((*op, t));
            t += step;
        }
    }
    out
}

/// Runs spelunk with `args`; (exit success, stdout, stderr).
pub fn spelunk(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs spelunk expecting success and JSON on stdout.
pub fn spelunk_json(args: &[&str]) -> serde_json::Value {
    let (ok, out, err) = spelunk(args);
    assert!(ok, "spelunk {args:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}
