//! Synthetic SPE recordings written as standard perf.data files through spelunk's writer, for
//! tests, benchmarks and the bundled demo. The records come from `spelunk_spe::synth`
//! (deterministic, realistic mix); everything made here is labelled synthetic where it is used.

use spelunk_perf::sidecar::{CounterSnapshot, NamedObject, Phase, Sidecar};
use spelunk_perf::{
    AuxFlags, Mmap2, MmapFileId, PerfError, RecordingSpec, SpeConfig, SpeRecordingWriter, Task,
    TimeConv,
};
use spelunk_spe::synth::{SynthConfig, SynthStream};
use spelunk_spe::{CodeAddress, CpuModel, RecordLayout, SpeRecord};
use std::path::Path;

/// What to generate.
#[derive(Clone, Debug)]
pub struct SynthRecording {
    pub cpus: u32,
    /// Records per CPU.
    pub records_per_cpu: u64,
    pub layout: RecordLayout,
    /// Bytes of SPE data per AUX write (per PERF_RECORD_AUXTRACE).
    pub chunk_bytes: usize,
    pub seed: u64,
    pub sample_period: u64,
    /// Generic timer frequency the SPE timestamps tick at.
    pub timer_hz: u64,
    /// Timer ticks between consecutive records of one CPU (before jitter).
    pub ticks_per_record: u64,
    /// Whether records carry CONTEXT packets (the thread id).
    pub context_packets: bool,
    /// Threads of the process (0: one per CPU, each running on its CPU). Otherwise the records
    /// are dealt round-robin over this many threads, each announced by COMM (and FORK).
    pub threads: u32,
    /// Shared libraries mapped (0: none, every PC in the workload's text). Otherwise one
    /// MMAP2 of [`MAPPING_BYTES`] each, and every user PC falls in one of them.
    pub mappings: u32,
    /// Kernel text symbols (0: no kernel samples). Otherwise one record in
    /// [`KERNEL_SAMPLE_EVERY`] has a kernel PC, spread over this many symbols of
    /// [`SynthRecording::kallsyms`].
    pub kernel_symbols: u32,
    /// Sidecar contents (all 0: no sidecar): phases, named data objects, counter snapshots.
    pub phases: u64,
    pub objects: u64,
    pub counter_snapshots: u64,
}

impl Default for SynthRecording {
    fn default() -> Self {
        SynthRecording {
            cpus: 2,
            records_per_cpu: 10_000,
            layout: RecordLayout::N1Padded64,
            chunk_bytes: 64 * 1024,
            seed: 1,
            sample_period: 1024,
            timer_hz: 1_000_000_000,
            ticks_per_record: 400,
            context_packets: true,
            threads: 0,
            mappings: 0,
            kernel_symbols: 0,
            phases: 0,
            objects: 0,
            counter_snapshots: 0,
        }
    }
}

/// The synthetic workload's process and binary.
pub const SYNTH_PID: i32 = 4242;
pub const SYNTH_BINARY: &str = "/opt/spelunk/synthetic-workload";
/// Where the synthetic shared libraries ([`SynthRecording::mappings`]) are mapped, and how long
/// each mapping is.
pub const MAPPINGS_BASE: u64 = 0x0000_7f00_0000_0000;
pub const MAPPING_BYTES: u64 = 0x1_0000;
/// Where the synthetic kernel's text starts, and the bytes of each of its symbols.
pub const KERNEL_TEXT_BASE: u64 = 0xffff_8000_0801_0000;
pub const KERNEL_SYMBOL_BYTES: u64 = 0x40;
/// With kernel symbols, one record in this many has a kernel PC.
pub const KERNEL_SAMPLE_EVERY: u64 = 4;
/// The counter events of the synthetic sidecar's snapshots (architected codes), and how much
/// each grows per snapshot.
const SNAPSHOT_EVENTS: [(u32, &str, u64); 4] = [
    (0x11, "CPU_CYCLES", 100_000),
    (0x08, "INST_RETIRED", 150_000),
    (0x04, "L1D_CACHE", 50_000),
    (0x03, "L1D_CACHE_REFILL", 2_000),
];

/// A multiplier coprime with every count used here (a prime larger than any of them), so
/// `i * SCATTER % n` visits 0..n in a scattered order.
const SCATTER: u64 = 1_000_000_007;

fn scattered(i: u64, n: u64) -> u64 {
    ((u128::from(i) * u128::from(SCATTER)) % u128::from(n.max(1))) as u64
}

impl SynthRecording {
    /// The thread that runs on `cpu` (one thread per CPU).
    pub fn tid(&self, cpu: u32) -> i32 {
        SYNTH_PID + cpu as i32
    }

    /// How many threads the process has.
    pub fn thread_count(&self) -> u32 {
        if self.threads == 0 {
            self.cpus
        } else {
            self.threads
        }
    }

    /// The thread of the `index`-th record of `cpu`.
    fn record_tid(&self, cpu: u32, index: u64) -> i32 {
        if self.threads == 0 {
            return self.tid(cpu);
        }
        let k = (index * u64::from(self.cpus) + u64::from(cpu)) % u64::from(self.threads);
        SYNTH_PID + k as i32
    }

    /// The perf-clock span of the records: the first record's time to the last's (about).
    fn time_span_ns(&self) -> (u64, u64) {
        let tc = self.time_conv();
        let end = self.timer_hz + self.records_per_cpu.saturating_mul(self.ticks_per_record);
        (tc.tsc_to_perf_time(self.timer_hz), tc.tsc_to_perf_time(end))
    }

    /// The kallsyms text of the synthetic kernel (`ADDRESS T NAME`, one line per symbol), for
    /// `--kallsyms`; empty without [`SynthRecording::kernel_symbols`].
    pub fn kallsyms(&self) -> String {
        let mut out = String::with_capacity(self.kernel_symbols as usize * 40);
        for i in 0..u64::from(self.kernel_symbols) {
            let a = KERNEL_TEXT_BASE + i * KERNEL_SYMBOL_BYTES;
            out.push_str(&format!("{a:016x} T synth_kernel_fn_{i}\n"));
        }
        out
    }

    /// The sidecar (phases, named objects, counter snapshots), if any was asked for. Phases are
    /// dealt round-robin over the threads and tile each thread's time; objects tile the data
    /// range the loads and stores touch, listed in a scattered address order; snapshots are
    /// evenly spaced, cumulative.
    pub fn sidecar(&self) -> Option<Sidecar> {
        if self.phases == 0 && self.objects == 0 && self.counter_snapshots == 0 {
            return None;
        }
        let mut sc = Sidecar::new("synthetic");
        sc.command = vec!["spelunk-synth".into()];
        let (start_ns, end_ns) = self.time_span_ns();
        let span_ns = (end_ns - start_ns).max(1);
        let threads = u64::from(self.thread_count().max(1));
        let per_thread = self.phases.div_ceil(threads).max(1);
        let slice_ns = (span_ns / per_thread).max(1);
        sc.phases = (0..self.phases)
            .map(|i| {
                let from = start_ns + (i / threads) * slice_ns;
                Phase {
                    name: format!("phase-{i}"),
                    pid: Some(SYNTH_PID as u32),
                    tid: (SYNTH_PID as u64 + i % threads) as u32,
                    depth: 1,
                    start_ns: from,
                    end_ns: from + slice_ns,
                }
            })
            .collect();
        let data = SynthConfig::default();
        let size = (data.data_size / self.objects.max(1)).max(8) & !7;
        sc.objects = (0..self.objects)
            .map(|i| {
                let k = scattered(i, self.objects);
                NamedObject {
                    name: format!("object-{k}"),
                    pid: Some(SYNTH_PID as u32),
                    address: data.data_base + k * size,
                    size,
                    from_ns: 0,
                    until_ns: u64::MAX,
                    kind: "object".into(),
                }
            })
            .collect();
        if let Some(step_ns) = span_ns.checked_div(self.counter_snapshots) {
            let step_ns = step_ns.max(1);
            sc.counters.events = SNAPSHOT_EVENTS
                .iter()
                .map(|&(code, name, _)| (code, name.to_string()))
                .collect();
            sc.counters.timeline = (0..self.counter_snapshots)
                .map(|i| CounterSnapshot {
                    tid: (SYNTH_PID as u64 + i % threads) as u32,
                    cpu: Some((i % u64::from(self.cpus.max(1))) as u32),
                    time_ns: start_ns + i * step_ns,
                    reason: "periodic".into(),
                    values: SNAPSHOT_EVENTS.iter().map(|e| (i + 1) * e.2).collect(),
                    ..Default::default()
                })
                .collect();
            sc.counters.totals = SNAPSHOT_EVENTS
                .iter()
                .map(|&(_, name, step)| (name.to_string(), self.counter_snapshots * step))
                .collect();
        }
        Some(sc)
    }

    /// Moves the record's PC into a shared library or the kernel, as the options ask.
    fn place_pc(&self, r: &mut SpeRecord, cpu: u32, index: u64) {
        let Some(pc) = r.pc else { return };
        let global = index * u64::from(self.cpus) + u64::from(cpu);
        if self.kernel_symbols > 0 && global % KERNEL_SAMPLE_EVERY == 0 {
            let sym = scattered(global / KERNEL_SAMPLE_EVERY, u64::from(self.kernel_symbols));
            let va = KERNEL_TEXT_BASE + sym * KERNEL_SYMBOL_BYTES + (pc.va() & 0x3c);
            r.pc = Some(CodeAddress::new(va, 1, true));
        } else if self.mappings > 0 {
            let lib = scattered(global, u64::from(self.mappings));
            let va = MAPPINGS_BASE + lib * MAPPING_BYTES + (pc.va() & (MAPPING_BYTES - 4));
            r.pc = Some(CodeAddress::new(va, 0, true));
        }
    }

    fn stream_config(&self, cpu: u32) -> SynthConfig {
        SynthConfig {
            seed: self.seed.wrapping_mul(1000).wrapping_add(u64::from(cpu)),
            ticks_per_record: self.ticks_per_record,
            first_timestamp: self.timer_hz, // 1 s after the timer's zero
            context: self.context_packets.then(|| self.tid(cpu) as u32),
            ..SynthConfig::default()
        }
    }

    /// The records of `cpu`, exactly as written (for tests that check decodes against them).
    pub fn records(&self, cpu: u32) -> impl Iterator<Item = SpeRecord> + '_ {
        SynthStream::new(self.stream_config(cpu))
            .take(self.records_per_cpu as usize)
            .zip(0u64..)
            .map(move |(mut r, i)| {
                if self.threads != 0 && self.context_packets {
                    r.context_el1 = Some(self.record_tid(cpu, i) as u32);
                }
                self.place_pc(&mut r, cpu, i);
                r
            })
    }

    pub fn time_conv(&self) -> TimeConv {
        TimeConv::from_frequency(self.timer_hz, 0)
    }

    /// Writes the recording to `path`, and its sidecar next to it when there is one.
    pub fn write(&self, path: &Path) -> Result<spelunk_perf::WriteSummary, PerfError> {
        let tc = self.time_conv();
        let spec = RecordingSpec {
            spe: SpeConfig {
                ts_enable: true,
                pa_enable: true,
                jitter: true,
                load_filter: true,
                store_filter: true,
                branch_filter: true,
                ..Default::default()
            },
            sample_period: self.sample_period,
            cpus: (0..self.cpus).collect(),
            nr_cpus_available: self.cpus,
            nr_cpus_online: self.cpus,
            midr: CpuModel::NeoverseN1.midr(),
            time_conv: tc,
            workload_pid: SYNTH_PID,
            hostname: "synthetic".into(),
            cpu_desc: "synthetic Neoverse N1 recording (spelunk-testkit)".into(),
            cmdline: vec!["spelunk-synth".into()],
            ..RecordingSpec::default()
        };
        let mut w = SpeRecordingWriter::create(path, spec)?;
        let t0 = tc.tsc_to_perf_time(self.timer_hz) - 1000;
        let text = SynthConfig::default();
        let main = Task::new(SYNTH_PID, SYNTH_PID);
        for k in self.cpus..self.thread_count() {
            let task = Task::new(SYNTH_PID, SYNTH_PID + k as i32);
            let cpu = k % self.cpus.max(1);
            w.fork(cpu, t0, task, main)?;
            w.comm(cpu, t0, task, "synthetic", false)?;
        }
        // Executable mappings, all alike but for these.
        let text_map = |task, address, length, page_offset, cpu_mode, path| Mmap2 {
            task,
            address,
            length,
            page_offset,
            file_id: MmapFileId::None,
            prot: 5,
            flags: 2,
            cpu_mode,
            executable: true,
            path,
        };
        if self.kernel_symbols > 0 {
            // The kernel's text, as perf records it (pid -1, every process).
            let length = u64::from(self.kernel_symbols) * KERNEL_SYMBOL_BYTES;
            let kernel = "[kernel.kallsyms]_text".to_string();
            let m = text_map(
                Task::new(-1, 0),
                KERNEL_TEXT_BASE,
                length,
                KERNEL_TEXT_BASE,
                1,
                kernel,
            );
            w.mmap2(0, t0, &m)?;
        }
        for lib in 0..u64::from(self.mappings) {
            let path = format!("/opt/spelunk/synthetic-lib-{lib}.so");
            let m = text_map(
                main,
                MAPPINGS_BASE + lib * MAPPING_BYTES,
                MAPPING_BYTES,
                0,
                2,
                path,
            );
            w.mmap2(0, t0, &m)?;
        }
        for cpu in 0..self.cpus {
            let task = Task::new(SYNTH_PID, self.tid(cpu));
            w.comm(cpu, t0, task, "synthetic", cpu == 0)?;
            let m = text_map(
                task,
                text.text_base,
                text.text_size,
                0,
                2,
                SYNTH_BINARY.into(),
            );
            w.mmap2(cpu, t0, &m)?;
            w.itrace_start(cpu, t0, task)?;
        }
        let mut streams: Vec<_> = (0..self.cpus).map(|c| self.records(c).peekable()).collect();
        let mut buf = Vec::with_capacity(self.chunk_bytes + 128);
        // Round-robin: each CPU writes a chunk in turn, like perf draining per-CPU AUX buffers.
        loop {
            let mut wrote = false;
            for cpu in 0..self.cpus {
                let s = &mut streams[cpu as usize];
                buf.clear();
                let mut last_ts = None;
                while buf.len() < self.chunk_bytes {
                    let Some(r) = s.next() else { break };
                    last_ts = r.timestamp.or(last_ts);
                    r.encode(self.layout, &mut buf);
                }
                if buf.is_empty() {
                    continue;
                }
                let time = tc.tsc_to_perf_time(last_ts.unwrap_or(self.timer_hz));
                w.aux(
                    cpu,
                    Task::new(SYNTH_PID, self.tid(cpu)),
                    time,
                    AuxFlags(0),
                    &buf,
                )?;
                wrote = true;
            }
            if !wrote {
                break;
            }
            w.finish_round()?;
        }
        let summary = w.finish()?;
        if let Some(sc) = self.sidecar() {
            let side = Sidecar::path_for(path);
            sc.write(&side).map_err(|e| PerfError::Io {
                path: side.display().to_string(),
                action: "write the sidecar".into(),
                source: std::io::Error::other(e.to_string()),
            })?;
        }
        Ok(summary)
    }
}

pub mod perf61;

/// Every sample of a perf.data through spelunk's decode pipeline (reader, plan, parallel
/// per-CPU decode, time conversion), asserting that nothing was lost: for tests that compare
/// the whole decode with an oracle.
pub fn decode_all(path: &Path) -> Vec<spelunk_spe::SpeSample> {
    use spelunk_decode::{decode, plan_from_perf, DecodeOptions};
    let file = spelunk_perf::PerfDataFile::open_spe(path).unwrap();
    let (plan, losses) = plan_from_perf(&file);
    assert!(!losses.any(), "{}: {losses:?}", path.display());
    let mut out = Vec::new();
    let outcome = decode(&file, &plan, &DecodeOptions::default(), |s| {
        out.push(*s);
        Ok::<(), std::io::Error>(())
    })
    .unwrap();
    assert!(
        !outcome.stats.has_losses(),
        "{}: {:?}",
        path.display(),
        outcome.stats
    );
    out
}

/// The build-id `readelf -n` prints for the ELF file `path` (binutils, independent of
/// spelunk's own reader), lower-case hex.
pub fn readelf_build_id(path: &Path) -> String {
    let out = std::process::Command::new("readelf")
        .arg("-n")
        .arg(path)
        .output()
        .expect("run readelf");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Build ID:")
                .map(|s| s.trim().to_string())
        })
        .expect("readelf prints a build ID")
}

/// The emulator's Valgrind library directory (`emulator/build/lib`) when the emulator is built
/// for this machine and `compiler` runs; `None` (the test skips, saying so) otherwise, or a
/// panic when SPELUNK_REQUIRE_EMULATOR is set.
pub fn emulator_lib(compiler: &str) -> Option<std::path::PathBuf> {
    let arch = if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        "amd64"
    };
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../emulator/build/lib");
    let have = std::process::Command::new(compiler)
        .arg("--version")
        .output()
        .is_ok();
    if lib.join(format!("spelunk-{arch}-linux")).exists() && have {
        return Some(lib);
    }
    if std::env::var_os("SPELUNK_REQUIRE_EMULATOR").is_some() {
        panic!("emulator not built or {compiler} missing: run emulator/build.sh");
    }
    eprintln!("skipped: emulator not built or {compiler} missing (run emulator/build.sh)");
    None
}
