//! Synthetic SPE recordings written as standard perf.data files through spelunk's writer, for
//! tests, benchmarks and the bundled demo. The records come from `spelunk_spe::synth`
//! (deterministic, realistic mix); everything made here is labelled synthetic where it is used.

use spelunk_perf::{
    AuxFlags, Mmap2, MmapFileId, PerfError, RecordingSpec, SpeConfig, SpeRecordingWriter, Task,
    TimeConv,
};
use spelunk_spe::synth::{SynthConfig, SynthStream};
use spelunk_spe::{CpuModel, RecordLayout, SpeRecord};
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
        }
    }
}

/// The synthetic workload's process and binary.
pub const SYNTH_PID: i32 = 4242;
pub const SYNTH_BINARY: &str = "/opt/spelunk/synthetic-workload";

impl SynthRecording {
    /// The thread that runs on `cpu` (one thread per CPU).
    pub fn tid(&self, cpu: u32) -> i32 {
        SYNTH_PID + cpu as i32
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
    pub fn records(&self, cpu: u32) -> impl Iterator<Item = SpeRecord> {
        SynthStream::new(self.stream_config(cpu)).take(self.records_per_cpu as usize)
    }

    pub fn time_conv(&self) -> TimeConv {
        TimeConv::from_frequency(self.timer_hz, 0)
    }

    /// Writes the recording to `path`.
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
        for cpu in 0..self.cpus {
            let task = Task::new(SYNTH_PID, self.tid(cpu));
            w.comm(cpu, t0, task, "synthetic", cpu == 0)?;
            w.mmap2(
                cpu,
                t0,
                &Mmap2 {
                    task,
                    address: text.text_base,
                    length: text.text_size,
                    page_offset: 0,
                    file_id: MmapFileId::None,
                    prot: 5,
                    flags: 2,
                    cpu_mode: 2,
                    executable: true,
                    path: SYNTH_BINARY.into(),
                },
            )?;
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
        w.finish()
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
