//! A perf.data recording as a [`DecodePlan`]: its AUX streams, TIME_CONV and the thread
//! timeline from its sideband, plus everything the container says was lost.

use crate::pipeline::{AuxChunkDesc, AuxSource, DecodePlan, StreamDesc};
use crate::threads::{SwitchIn, ThreadTimeline};
use spelunk_perf::PerfDataFile;
use std::sync::Arc;

impl AuxSource for PerfDataFile {
    fn read_at(&self, file_offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        PerfDataFile::read_at(self, file_offset, buf)
    }
    fn name(&self) -> String {
        self.path().to_string()
    }
}

/// Losses the container reports (as opposed to what the SPE decoder finds in the bytes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerLosses {
    /// PERF_RECORD_AUX records flagged truncated (the AUX buffer filled; SPE data was lost).
    pub aux_truncated: u64,
    /// ... flagged partial (the last record of the region is incomplete).
    pub aux_partial: u64,
    /// ... flagged collision (SPE dropped samples that collided).
    pub aux_collision: u64,
    /// ... flagged overwrite (snapshot mode: older data was overwritten).
    pub aux_overwrite: u64,
    /// PERF_RECORD_LOST events and the records they say were lost.
    pub lost_events: u64,
    pub lost_records: u64,
    /// PERF_RECORD_LOST_SAMPLES: samples the kernel dropped.
    pub lost_samples: u64,
    /// PERF_RECORD_AUXTRACE_ERROR records.
    pub auxtrace_errors: u64,
    /// AUX chunks cut off by the end of the file.
    pub cut_off_chunks: u64,
    /// Problems found while indexing the file, each naming a byte offset.
    pub problems: Vec<String>,
}

impl ContainerLosses {
    pub fn any(&self) -> bool {
        self.aux_truncated
            + self.aux_partial
            + self.aux_collision
            + self.lost_events
            + self.lost_samples
            + self.auxtrace_errors
            + self.cut_off_chunks
            > 0
            || !self.problems.is_empty()
    }
}

fn u32_of(v: Option<i32>) -> Option<u32> {
    v.and_then(|x| u32::try_from(x).ok())
}

/// Builds the plan for decoding `file` and collects what its container says was lost.
pub fn plan_from_perf(file: &PerfDataFile) -> (DecodePlan, ContainerLosses) {
    let mut threads = ThreadTimeline::new();
    let sb = &file.sideband;
    for c in &sb.comms {
        if let (Some(pid), Some(tid)) = (u32_of(Some(c.pid)), u32_of(Some(c.tid))) {
            threads.thread(pid, tid);
        }
    }
    for t in &sb.tasks {
        if let (Some(pid), Some(tid)) = (u32_of(Some(t.pid)), u32_of(Some(t.tid))) {
            threads.thread(pid, tid);
        }
    }
    for s in &sb.switches {
        let (Some(cpu), Some(time_ns)) = (s.sample.cpu, s.sample.time_ns) else {
            continue;
        };
        // Switch-in: the sample_id names the task now running. CPU-wide switch-out: the record
        // names the next task (next_prev_pid/tid).
        let task = if s.out {
            (u32_of(s.other_pid), u32_of(s.other_tid))
        } else {
            (u32_of(s.sample.pid), u32_of(s.sample.tid))
        };
        if let (Some(pid), Some(tid)) = task {
            threads.switch_in(SwitchIn {
                cpu,
                time_ns,
                pid,
                tid,
            });
        }
    }
    for it in &sb.itrace_starts {
        let (Some(cpu), Some(time_ns)) = (it.sample.cpu, it.sample.time_ns) else {
            continue;
        };
        if let (Some(pid), Some(tid)) = (u32_of(Some(it.pid)), u32_of(Some(it.tid))) {
            threads.switch_in(SwitchIn {
                cpu,
                time_ns,
                pid,
                tid,
            });
        }
    }
    threads.finish();

    let mut losses = ContainerLosses::default();
    let streams = file
        .aux_streams
        .iter()
        .map(|s| StreamDesc {
            cpu: s.cpu,
            tid: s.tid,
            pid: s.tid.and_then(|t| threads.pid_of(t)),
            chunks: s
                .chunks
                .iter()
                .map(|c| {
                    losses.cut_off_chunks += u64::from(c.cut_off);
                    AuxChunkDesc {
                        file_offset: c.file_offset,
                        size: c.size,
                        contiguous: !c.decoder_reset,
                    }
                })
                .collect(),
        })
        .collect();
    for a in &sb.aux {
        losses.aux_truncated += u64::from(a.flags.truncated());
        losses.aux_partial += u64::from(a.flags.partial());
        losses.aux_collision += u64::from(a.flags.collision());
        losses.aux_overwrite += u64::from(a.flags.overwrite());
    }
    losses.lost_events = sb.lost.len() as u64;
    losses.lost_records = sb.lost.iter().map(|l| l.lost).sum();
    losses.lost_samples = sb.lost_samples.iter().map(|l| l.lost).sum();
    losses.auxtrace_errors = sb.auxtrace_errors.len() as u64;
    losses.problems = file
        .summary
        .problems
        .iter()
        .map(|p| format!("{}: {}", file.path(), p.message))
        .collect();
    if file.summary.problem_count > file.summary.problems.len() as u64 {
        losses.problems.push(format!(
            "{}: ... and {} more problems",
            file.path(),
            file.summary.problem_count - file.summary.problems.len() as u64
        ));
    }

    let time_conv = file
        .time_conv
        .map(|tc| Arc::new(move |ticks| tc.tsc_to_perf_time(ticks)) as crate::TimeConvFn);
    (
        DecodePlan {
            streams,
            time_conv,
            threads,
        },
        losses,
    )
}
