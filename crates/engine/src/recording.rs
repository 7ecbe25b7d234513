//! An opened SPE recording, the base every front end shares — the `spelunk` commands and the
//! Python bindings: index the perf.data and read its sidecar, plan the decode, interpret each
//! CPU's data sources, rebuild the processes' address spaces; then decode it (serially, or
//! per stream with [`Recording::decode_map`]). The passes that build reports on it are the
//! crate's other modules.
//!
//! Errors are [`RecordingError`]s: each names the file, and their `Display` plus causes (see
//! [`error_line`]) are the messages `spelunk` prints.

use spelunk_analysis::context::RecordingContext;
use spelunk_analysis::kallsyms::KernelSymbols;
use spelunk_analysis::model::Losses;
use spelunk_analysis::names::{FunctionQuery, NameMatch};
use spelunk_analysis::symbolize::CodeSymbolizer;
use spelunk_decode::{
    plan_from_perf, ContainerLosses, DecodeOptions, DecodePlan, PipelineError, SampleMap,
    StreamDesc,
};
/// Whether [`Recording::open`] reads the sidecar (re-exported for front ends).
pub use spelunk_perf::sidecar::SidecarUse;
use spelunk_perf::sidecar::{Sidecar, SidecarError};
use spelunk_perf::{PerfDataFile, PerfError};
use spelunk_spe::{CpuInterpretation, DecodeStats, Interpretation, Midr, SpeSample};
use std::collections::HashSet;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Most files whose symbols [`Recording::while_loading_symbols`] loads ahead.
const MAX_PRELOADED_FILES: usize = 16;

/// Why a recording could not be opened, decoded or reported. `Display` is one line starting
/// with the file; the cause, when there is one, is the error's `source`.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error("{path}: cannot open as an SPE recording")]
    Open {
        path: String,
        #[source]
        source: PerfError,
    },
    /// The recording holds no SPE data (`spelunk decode`'s error; see
    /// [`Recording::require_spe_data`]).
    #[error(transparent)]
    NoSpeData(PerfError),
    /// The recording's sidecar (`FILE.spelunk.json`) exists but cannot be read: never dropped
    /// silently ([`Sidecar::for_recording`]); [`SidecarUse::Ignore`] goes on without it.
    #[error(transparent)]
    Sidecar(SidecarError),
    #[error("{path}: decoding")]
    Decode {
        path: String,
        #[source]
        source: PipelineError<Infallible>,
    },
    /// The report selected no sample (`spelunk report`, `spelunk diff`).
    #[error(
        "{path}: no samples{}; {decoded} records were decoded{damage}",
        matched_filter(filter)
    )]
    NoSamples {
        path: String,
        /// The filter, described (empty: none).
        filter: Vec<String>,
        decoded: u64,
        /// [`Recording::damage_note`]: a recording that gave nothing may be damaged.
        damage: String,
    },
    /// The c2c analysis selected no sample.
    #[error(
        "{path}: no samples matched{}; {decoded} records were decoded{damage}",
        the_filter(filter)
    )]
    NoSamplesMatched {
        path: String,
        filter: Vec<String>,
        decoded: u64,
        damage: String,
    },
    #[error(
        "{path}: none of the {selected} selected samples is a load or store with a data address (record with load_filter=1,store_filter=1){damage}"
    )]
    NoMemorySamples {
        path: String,
        selected: u64,
        damage: String,
    },
    #[error("--line-size {0}: expected a power of two of at least 8")]
    LineSize(u64),
    /// An option's value that selects nothing sensible (an unknown event class, a phase the
    /// recording does not have, a range backwards), said with what to give instead.
    #[error("{0}")]
    Options(String),
    /// An input an option names (`--kallsyms FILE`) that cannot be read; `what` names it.
    #[error("{what}")]
    Input {
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

fn matched_filter(filter: &[String]) -> String {
    if filter.is_empty() {
        String::new()
    } else {
        format!(" matched the filter ({})", filter.join(", "))
    }
}

fn the_filter(filter: &[String]) -> String {
    if filter.is_empty() {
        String::new()
    } else {
        format!(" the filter ({})", filter.join(", "))
    }
}

/// An error and its causes on one line, leaving out a cause whose text the line already holds
/// (library errors often embed their cause in their own message): how `spelunk` prints an
/// error, and the message of the Python bindings' exceptions.
pub fn error_line<'a>(
    chain: impl IntoIterator<Item = &'a (dyn std::error::Error + 'static)>,
) -> String {
    let mut line = String::new();
    for cause in chain {
        let text = cause.to_string();
        if !line.contains(&text) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&text);
        }
    }
    line.replace('\n', " ")
}

/// `e` and its sources, for [`error_line`].
pub fn error_chain<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |e| e.source())
}

/// The data-source interpretation of every CPU of `file`: `midr` for all of them when given
/// (`--cpu-model`, `--midr`), else each CPU's recorded MIDR.
pub fn interpretation(
    file: &PerfDataFile,
    streams: &[StreamDesc],
    midr: Option<Midr>,
) -> Interpretation {
    match midr {
        Some(m) => Interpretation::uniform(Some(m)),
        None => {
            let mut i = Interpretation::uniform(file.features.midr());
            for cpu in streams.iter().filter_map(|s| s.cpu) {
                i.set_cpu(cpu, CpuInterpretation::for_midr(file.cpu_midr(cpu)));
            }
            i
        }
    }
}

/// An opened recording, ready to decode.
pub struct Recording {
    pub file: PerfDataFile,
    pub plan: DecodePlan,
    /// What the container says was lost (see [`Recording::losses`]).
    container: ContainerLosses,
    pub interp: Interpretation,
    pub ctx: RecordingContext,
    /// How the decodes run (helper threads per stream; the defaults otherwise).
    pub decode_options: DecodeOptions,
}

impl Recording {
    /// Opens `path` (a perf.data with Arm SPE data), interpreting data sources for `midr` when
    /// given, else for each CPU's recorded MIDR, with its sidecar as `sidecar` says (one that
    /// cannot be read is an error unless [`SidecarUse::Ignore`]; what reading it dropped is in
    /// `ctx.problems`).
    pub fn open(
        path: &Path,
        midr: Option<Midr>,
        sidecar: SidecarUse,
    ) -> Result<Recording, RecordingError> {
        let file = PerfDataFile::open_spe(path).map_err(|source| RecordingError::Open {
            path: path.display().to_string(),
            source,
        })?;
        let (sidecar, problems) =
            Sidecar::for_recording(path, sidecar).map_err(RecordingError::Sidecar)?;
        let (plan, container) = plan_from_perf(&file);
        let interp = interpretation(&file, &plan.streams, midr);
        let ctx = RecordingContext::from_perf(&file, sidecar, problems);
        Ok(Recording {
            file,
            plan,
            container,
            interp,
            ctx,
            decode_options: DecodeOptions::default(),
        })
    }

    pub fn path(&self) -> &str {
        self.file.path()
    }

    /// The bytes of SPE data in the recording; an error when there are none (SPE never wrote
    /// a buffer: decoding it would give nothing).
    pub fn require_spe_data(&self) -> Result<u64, RecordingError> {
        self.file
            .require_spe_data()
            .map_err(RecordingError::NoSpeData)
    }

    fn decode_error(&self, source: PipelineError<Infallible>) -> RecordingError {
        RecordingError::Decode {
            path: self.file.path().to_string(),
            source,
        }
    }

    /// Decodes every sample in time order, feeding each to `f`.
    pub fn decode(&self, mut f: impl FnMut(&SpeSample)) -> Result<DecodeStats, RecordingError> {
        let outcome = spelunk_decode::decode(&self.file, &self.plan, &self.decode_options, |s| {
            f(s);
            Ok::<(), Infallible>(())
        });
        match outcome {
            Ok(o) => Ok(o.stats),
            Err(PipelineError::Sink(never)) => match never {},
            Err(e) => Err(self.decode_error(e)),
        }
    }

    /// Decodes every sample, each stream's worker first mapping its samples with its own
    /// `maps[i]` (in parallel); `f` gets the items in the time order [`Recording::decode`]
    /// gives the samples.
    pub fn decode_map<M: SampleMap>(
        &self,
        maps: &mut [M],
        mut f: impl FnMut(&M::Item),
    ) -> Result<DecodeStats, RecordingError> {
        let outcome = spelunk_decode::decode_map(
            &self.file,
            &self.plan,
            &self.decode_options,
            maps,
            |item| {
                f(item);
                Ok::<(), Infallible>(())
            },
        );
        match outcome {
            Ok(o) => Ok(o.stats),
            Err(PipelineError::Sink(never)) => match never {},
            Err(e) => Err(self.decode_error(e)),
        }
    }

    /// Runs `pass` (a decode of the samples) on another thread while this one loads the
    /// recorded programs' symbols into `symbolizer` ([`CodeSymbolizer::preload`]), which the
    /// pass's PCs are symbolized with after it: loading DWARF is the largest fixed cost of a
    /// report or an annotation, and the PCs that need it are known only when the pass is over.
    /// (The symbolizer stays on this thread: blazesym's is not Send.)
    pub fn while_loading_symbols<T: Send>(
        &self,
        symbolizer: &mut CodeSymbolizer,
        pass: impl FnOnce() -> T + Send,
    ) -> T {
        let stop = AtomicBool::new(false);
        let mut files = self.ctx.spaces.executable_files();
        // The programs first, then their libraries: a system-wide recording maps hundreds of
        // files, most without a sample, whose loading would take CPU from the decode.
        files.truncate(MAX_PRELOADED_FILES);
        std::thread::scope(|scope| {
            let pass = scope.spawn(|| {
                let out = pass();
                stop.store(true, Ordering::Relaxed);
                out
            });
            symbolizer.preload(&files, &stop);
            pass.join()
        })
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }

    /// Helper threads each stream's worker gets in [`Recording::decode_map`] (for maps that
    /// fork; see `spelunk_decode::helpers_per_stream`).
    pub fn map_helpers(&self) -> usize {
        spelunk_decode::helpers_per_stream(&self.plan, &self.decode_options)
    }

    /// The time of the first timed sample [`Recording::decode`] gives (what `--time-range` is
    /// relative to), without decoding the whole recording.
    pub fn first_time_ns(&self) -> Result<Option<u64>, RecordingError> {
        spelunk_decode::first_time_ns(&self.file, &self.plan, &self.decode_options)
            .map_err(|e| self.decode_error(e))
    }

    /// For errors that found nothing to show: `; the recording is damaged: ...` when it is
    /// (cut short, a record cut off or malformed), else its first problem (a feature section
    /// cut off, a sidecar's dropped entries), else "". Damage is never left unsaid because
    /// the command failed for another reason.
    pub fn damage_note(&self) -> String {
        let note = damage_note(&self.file);
        if !note.is_empty() {
            return note;
        }
        let mut problems = self.container.problems.iter().chain(&self.ctx.problems);
        match problems.next() {
            Some(first) => {
                let more = problems.count();
                format!(
                    "; the recording has problems: {first}{}",
                    if more > 0 {
                        format!(" (and {more} more: see `spelunk report`)")
                    } else {
                        String::new()
                    }
                )
            }
            None => String::new(),
        }
    }

    /// Everything lost on the way, the same for every command: the decoder's and the
    /// container's losses, the container's problems (a cut file, with its byte offsets) and
    /// the sidecar's.
    pub fn losses(&self, stats: &DecodeStats) -> Losses {
        let c = &self.container;
        let mut problems = c.problems.clone();
        problems.extend(self.ctx.problems.iter().cloned());
        Losses {
            undecodable_bytes: stats.bad_bytes,
            dropped_records: stats.dropped_records,
            incomplete_records: stats.incomplete_records,
            truncated_packets: stats.truncated_packets,
            aux_truncated: c.aux_truncated,
            aux_partial: c.aux_partial,
            aux_collision: c.aux_collision,
            lost_events: c.lost_events,
            lost_records: c.lost_records,
            problems,
        }
    }

    /// The code symbolizer for this recording: binaries under `symfs`, kernel PCs named from
    /// `kernel` when given (the recorded kernel's kallsyms), else from this machine's
    /// /proc/kallsyms when the recording was made on this machine's running kernel (same
    /// hostname and kernel release in the header) and the file shows addresses; otherwise
    /// kernel PCs stay `[kernel.kallsyms]`.
    pub fn symbolizer(
        &self,
        symfs: Option<PathBuf>,
        kernel: Option<Arc<KernelSymbols>>,
    ) -> CodeSymbolizer {
        let sym = CodeSymbolizer::new(symfs);
        if let Some(k) = kernel {
            return sym.with_kernel_symbols(k);
        }
        let f = &self.file.features;
        let here = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_string())
        };
        let same_kernel = f.hostname.is_some()
            && f.hostname == here("/proc/sys/kernel/hostname")
            && f.os_release.is_some()
            && f.os_release == here("/proc/sys/kernel/osrelease");
        if same_kernel {
            // read only if a kernel PC needs a name
            return sym.with_kernel_symbols_from(PathBuf::from("/proc/kallsyms"));
        }
        sym
    }

    /// The (pid, PC) pairs of `pcs` that symbolize to a function `name` names: its full
    /// (demangled), short or mangled name ([`FunctionQuery`]; a short name takes in every
    /// overload, and a function's `.cold`/`.part` pieces belong to it; a name that is some
    /// sampled function's full name keeps that function only).
    pub fn pcs_in_function(
        &self,
        symbolizer: &mut CodeSymbolizer,
        pcs: impl IntoIterator<Item = (Option<u32>, u64)>,
        name: &str,
    ) -> HashSet<(Option<u32>, u64)> {
        let requests: Vec<_> = pcs
            .into_iter()
            .filter_map(|(pid, pc)| {
                self.ctx
                    .spaces
                    .lookup(pid, pc, None)
                    .map(|m| ((pid, pc), (m.clone(), pc)))
            })
            .collect();
        let locs =
            symbolizer.symbolize(&requests.iter().map(|(_, r)| r.clone()).collect::<Vec<_>>());
        let query = FunctionQuery::new(name);
        let matched: Vec<((Option<u32>, u64), NameMatch)> = requests
            .iter()
            .zip(locs)
            .filter_map(|((k, _), l)| Some((*k, query.matches(l.function.as_deref()?)?)))
            .collect();
        // A function's full name means that function only, not those it is the short form of.
        let full = matched.iter().any(|(_, how)| *how == NameMatch::Full);
        matched
            .into_iter()
            .filter(|(_, how)| !full || *how == NameMatch::Full)
            .map(|(k, _)| k)
            .collect()
    }
}

/// Why a recording that gave nothing may have given nothing: `; the recording is damaged:
/// ...` when it is (cut short, a record cut off or malformed), else nothing. For the
/// "no samples" errors, so a cut file is never reported as merely empty.
pub fn damage_note(file: &PerfDataFile) -> String {
    file.damage_note()
}

#[cfg(test)]
mod tests {
    use super::*;
    use spelunk_testkit::SynthRecording;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("spelunk-recording-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn line(e: &RecordingError) -> String {
        error_line(error_chain(e))
    }

    /// The messages front ends show: the file, what failed, and the cause once.
    #[test]
    fn open_errors_name_the_file_and_the_cause() {
        let dir = scratch("open");
        let missing = dir.join("missing.data");
        let e = Recording::open(&missing, None, SidecarUse::Read)
            .err()
            .unwrap();
        let m = missing.display();
        assert_eq!(
            line(&e),
            format!("{m}: cannot open as an SPE recording: {m}: cannot open: No such file or directory (os error 2)")
        );
        let text = dir.join("text.txt");
        std::fs::write(&text, "hello\n").unwrap();
        let e = Recording::open(&text, None, SidecarUse::Read)
            .err()
            .unwrap();
        assert!(
            line(&e).starts_with(&format!(
                "{}: cannot open as an SPE recording: {}: not a perf.data file",
                text.display(),
                text.display()
            )),
            "{}",
            line(&e)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A recording SPE never wrote to opens, but says it holds no SPE data (reported, it
    /// selects no sample: the report module's tests).
    #[test]
    fn a_recording_without_spe_data_says_so() {
        let dir = scratch("empty");
        let path = dir.join("empty.data");
        SynthRecording {
            records_per_cpu: 0,
            ..Default::default()
        }
        .write(&path)
        .unwrap();
        let rec = Recording::open(&path, None, SidecarUse::Read).unwrap();
        let e = rec.require_spe_data().unwrap_err();
        assert_eq!(
            line(&e),
            format!(
                "{}: the recording has Arm SPE metadata but no SPE data (no AUX buffers were \
                 written; was the workload too short, or did SPE not start?)",
                path.display()
            )
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn error_line_leaves_out_causes_already_said() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer: {0}")]
        struct Embeds(#[source] std::io::Error);
        let e = Embeds(std::io::Error::other("inner\ncause"));
        assert_eq!(error_line(error_chain(&e)), "outer: inner cause");
        assert_eq!(
            line(&RecordingError::LineSize(12)),
            "--line-size 12: expected a power of two of at least 8"
        );
    }
}
