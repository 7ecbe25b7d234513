//! Shared helpers: a deterministic synthetic SPE recording written with the writer, the values
//! it was built from (the expectations), and running Linux perf.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use spelunk_perf::*;
use spelunk_spe::synth::{SynthConfig, SynthStream};
use spelunk_spe::{RecordLayout, SpeRecord};

/// A scratch directory removed when dropped.
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh scratch directory under the system temp dir.
pub fn scratch_dir(tag: &str) -> Scratch {
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "spelunk-perf-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create scratch dir");
    Scratch(d)
}

/// Runs `perf` with `args`; fails the test with a clear message when perf is missing.
pub fn perf(args: &[&str]) -> (String, String, bool) {
    let out = Command::new("perf")
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "these tests need Linux perf (Debian package linux-perf, installed by \
             `make test` / scripts/ensure-deps.sh): cannot run `perf`: {e}"
            )
        });
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

/// One AUX write as the test performed it.
#[derive(Clone, Debug)]
pub struct WrittenChunk {
    pub cpu: u32,
    pub aux_offset: u64,
    pub bytes: Vec<u8>,
    pub records: Vec<SpeRecord>,
    pub flags: AuxFlags,
    pub time_ns: u64,
}

pub struct Recording {
    pub path: PathBuf,
    pub spec: RecordingSpec,
    pub chunks: Vec<WrittenChunk>,
    pub task: Task,
    pub t0: u64,
    pub text_base: u64,
}

pub const PID: i32 = 4242;

/// Writes a 2-CPU recording (CPUs 0 and 3, so AUXTRACE idx differs from cpu) with a 25 MHz
/// timer whose tick 0 is perf time 2 s, three AUX chunks per CPU, and the usual sideband.
/// `flags` gives each chunk's AUX flags (by position per CPU); `extra_sideband` adds fork/
/// switch-out/lost records.
pub fn write_recording(
    dir: &Path,
    name: &str,
    metadata: SpeMetadataLayout,
    flags: &[AuxFlags],
    extra_sideband: bool,
) -> Recording {
    let path = dir.join(name);
    let tc = TimeConv::from_frequency(25_000_000, 2_000_000_000);
    let spec = RecordingSpec {
        cpus: vec![0, 3],
        nr_cpus_available: 4,
        nr_cpus_online: 4,
        metadata,
        workload_pid: PID,
        time_conv: tc,
        hostname: "test-host".into(),
        os_release: "6.1.0-test".into(),
        cpu_desc: "Neoverse N1".into(),
        cmdline: vec![
            "spelunk".into(),
            "record".into(),
            "--".into(),
            "bench".into(),
        ],
        total_mem_kb: 1 << 20,
        ..Default::default()
    };
    let task = Task::new(PID, PID);
    let t0 = 3_000_000_000u64;
    let text_base = 0x0000_aaaa_d000_0000u64;
    let mut w = SpeRecordingWriter::create(&path, spec.clone()).expect("create");
    w.comm(0, t0, task, "bench", true).unwrap();
    w.mmap2(
        0,
        t0 + 100,
        &Mmap2 {
            task,
            address: text_base,
            length: 0x4_0000,
            page_offset: 0,
            file_id: MmapFileId::BuildId((1..=20).collect()),
            prot: 5,
            flags: 2,
            cpu_mode: 2,
            executable: true,
            path: "/usr/bin/bench".into(),
        },
    )
    .unwrap();
    if extra_sideband {
        w.fork(3, t0 + 150, Task::new(PID, PID + 1), task).unwrap();
        w.mmap2(
            3,
            t0 + 160,
            &Mmap2 {
                task,
                address: 0xffff_8000_0000,
                length: 0x1000_0000,
                page_offset: 0x2000,
                file_id: MmapFileId::Inode {
                    maj: 254,
                    min: 1,
                    ino: 123456,
                    ino_generation: 7,
                },
                prot: 3,
                flags: 1,
                cpu_mode: 2,
                executable: false,
                path: "/dev/shm/data".into(),
            },
        )
        .unwrap();
    }
    for cpu in [0u32, 3] {
        w.switch(cpu, t0 + 200, false, false, task, Task::new(0, 0))
            .unwrap();
        w.itrace_start(cpu, t0 + 300, task).unwrap();
    }
    let mut chunks = Vec::new();
    for (cpu, seed) in [(0u32, 11u64), (3, 12)] {
        let cfg = SynthConfig {
            seed,
            first_timestamp: tc.perf_time_to_tsc(t0 + 1_000),
            text_base,
            context: Some(PID as u32),
            ..Default::default()
        };
        let recs: Vec<SpeRecord> = SynthStream::new(cfg).take(300).collect();
        let mut aux_offset = 0u64;
        for (i, part) in recs.chunks(100).enumerate() {
            let mut bytes = Vec::new();
            // Mix both layouts: N1-style 64-byte records and compact ones.
            let layout = if i == 1 {
                RecordLayout::Compact
            } else {
                RecordLayout::N1Padded64
            };
            for r in part {
                r.encode(layout, &mut bytes);
            }
            let last_ts = part.last().and_then(|r| r.timestamp).unwrap();
            let time_ns = tc.tsc_to_perf_time(last_ts) + 1;
            let f = flags.get(i).copied().unwrap_or_default();
            w.aux(cpu, task, time_ns, f, &bytes).unwrap();
            chunks.push(WrittenChunk {
                cpu,
                aux_offset,
                records: part.to_vec(),
                bytes: bytes.clone(),
                flags: f,
                time_ns,
            });
            aux_offset += bytes.len() as u64;
        }
    }
    if extra_sideband {
        w.switch(0, t0 + 50_000_000, true, true, task, Task::new(7, 8))
            .unwrap();
        w.lost(3, t0 + 50_000_100, 5).unwrap();
        w.lost_samples(3, t0 + 50_000_200, 9).unwrap();
        w.finish_round().unwrap();
    }
    w.exit(0, t0 + 100_000_000, task, task).unwrap();
    w.finish().expect("finish");
    Recording {
        path,
        spec,
        chunks,
        task,
        t0,
        text_base,
    }
}

/// Formats perf time `ns` the way `perf script --ns` prints it (`s.nnnnnnnnn`).
pub fn perf_time(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}
