//! Opening an SPE recording and selecting its samples, for the commands that stream samples
//! themselves (annotate, estimate, c2c, diff). The steps are the ones `spelunk report` takes:
//! index the perf.data, plan the decode, interpret each CPU's data sources, rebuild the
//! processes' address spaces; the filter options mean the same as report's.

use anyhow::{bail, Context};
use clap::Args;
use spelunk_analysis::context::RecordingContext;
use spelunk_analysis::kallsyms::KernelSymbols;
use spelunk_analysis::model::Losses;
use spelunk_analysis::profile::{EventClass, Filter, PhaseFilter};
use spelunk_analysis::symbolize::CodeSymbolizer;
use spelunk_decode::{
    plan_from_perf, ContainerLosses, DecodeOptions, DecodePlan, PipelineError, SampleMap,
};
use spelunk_perf::PerfDataFile;
use spelunk_spe::{DecodeStats, Interpretation, SpeSample};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::{CpuArgs, SidecarArgs};

/// Where the recorded binaries and the kernel's symbols are (the same for every command that
/// names code).
#[derive(Args, Debug, Clone, Default)]
pub struct SymbolArgs {
    /// Look for the recorded binaries under this directory (like perf --symfs)
    #[arg(long, value_name = "DIR")]
    pub symfs: Option<PathBuf>,

    /// Name kernel PCs from this kallsyms file of the recorded kernel [default: /proc/kallsyms
    /// when the recording was made on this machine's running kernel]
    #[arg(long, value_name = "FILE")]
    pub kallsyms: Option<PathBuf>,
}

/// Sample filters (the same as `spelunk report`'s).
#[derive(Args, Debug, Clone, Default)]
pub struct FilterArgs {
    /// Only samples of this event class (load, store, memory, branch, l1d-miss, llc-miss,
    /// tlb-walk, branch-miss, remote, peer, dram, ...)
    #[arg(long, value_name = "CLASS")]
    pub event: Option<String>,

    /// Only these processes (comma-separated)
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true, value_parser = crate::common::values::id)]
    pub pid: Vec<u32>,

    /// Only these threads (comma-separated)
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true, value_parser = crate::common::values::id)]
    pub tid: Vec<u32>,

    /// Only samples from these CPUs (comma-separated)
    #[arg(
        long = "cpus",
        alias = "cpu",
        value_delimiter = ',',
        value_name = "CPUS",
        allow_negative_numbers = true, value_parser = crate::common::values::id
    )]
    pub cpus: Vec<u32>,

    /// Only samples in [FROM,TO) seconds since the first sample (e.g. 0.5,1.25)
    #[arg(long, value_name = "FROM,TO")]
    pub time_range: Option<String>,

    /// Only samples taken while this phase (spelunk_phase_begin/end, from the sidecar) was open
    /// on their thread
    #[arg(long, value_name = "NAME")]
    pub phase: Option<String>,
}

/// A number in decimal or 0x-hex.
pub fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim().replace('_', "");
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// `FROM,TO` parsed with `parse`.
pub fn pair<T>(s: &str, what: &str, parse: impl Fn(&str) -> Option<T>) -> anyhow::Result<(T, T)> {
    let Some((a, b)) = s.split_once(',') else {
        bail!("{what} '{s}': expected FROM,TO")
    };
    match (parse(a), parse(b)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => bail!("{what} '{s}': expected two numbers FROM,TO"),
    }
}

/// A `--time-range FROM,TO` value: seconds since the first sample, finite, 0 <= FROM < TO.
pub fn time_range(s: &str) -> anyhow::Result<(f64, f64)> {
    let finite = |x: &str| x.trim().parse::<f64>().ok().filter(|v| v.is_finite());
    match pair(s, "--time-range", finite) {
        Ok((a, b)) if 0.0 <= a && a < b => Ok((a, b)),
        _ => bail!(
            "--time-range '{s}': expected FROM,TO in seconds since the first sample, two finite \
             numbers with 0 <= FROM < TO"
        ),
    }
}

/// A `--pc-range FROM,TO` value.
pub fn pc_range(s: &str) -> anyhow::Result<(u64, u64)> {
    let (a, b) = pair(s, "--pc-range", parse_u64)?;
    if a >= b {
        bail!("--pc-range '{s}': FROM must be below TO");
    }
    Ok((a, b))
}

impl FilterArgs {
    /// The filter, with `--phase` checked against the recording's phases.
    pub fn filter(&self, ctx: &RecordingContext) -> anyhow::Result<Filter> {
        let event = match &self.event {
            Some(e) => Some(EventClass::parse(e).ok_or_else(|| {
                let known: Vec<&str> = EventClass::ALL.iter().map(|(n, _)| *n).collect();
                anyhow::anyhow!("unknown event class '{e}'; known: {}", known.join(", "))
            })?),
            None => None,
        };
        Ok(Filter {
            pids: self.pid.clone(),
            tids: self.tid.clone(),
            cpus: self.cpus.clone(),
            time_range_s: self.time_range.as_deref().map(time_range).transpose()?,
            pc_range: None,
            event,
            pcs: None,
            phase: self
                .phase
                .as_deref()
                .map(|name| phase_filter(ctx, name))
                .transpose()?,
        })
    }
}

/// `--phase NAME` against the recording's phases: a name it does not have is an error that
/// lists the names it has.
pub fn phase_filter(ctx: &RecordingContext, name: &str) -> anyhow::Result<PhaseFilter> {
    if ctx.sidecar.is_none() {
        bail!(
            "--phase {name}: this recording has no sidecar (FILE.spelunk.json), so no phases; \
             phases are recorded by `spelunk record` from spelunk_phase_begin/end calls"
        );
    }
    let names = ctx.phases.names();
    if !names.iter().any(|n| &**n == name) {
        let known: Vec<&str> = names.iter().map(|n| &**n).collect();
        bail!(
            "--phase {name}: no such phase; the recording has {}",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        );
    }
    Ok(PhaseFilter {
        name: name.to_string(),
        index: ctx.phases.clone(),
    })
}

/// An opened recording, ready to decode.
pub struct Recording {
    pub file: PerfDataFile,
    pub plan: DecodePlan,
    /// What the container says was lost (see [`Recording::losses`]).
    container: ContainerLosses,
    pub interp: Interpretation,
    pub ctx: RecordingContext,
}

impl Recording {
    /// Opens `path` and its sidecar (an unreadable sidecar is an error, unless
    /// `--ignore-sidecar`).
    pub fn open(path: &Path, cpu: &CpuArgs, sidecar: &SidecarArgs) -> anyhow::Result<Recording> {
        let file = PerfDataFile::open_spe(path)
            .with_context(|| format!("{}: cannot open as an SPE recording", path.display()))?;
        let (sidecar, problems) = crate::common::recording_sidecar(path, sidecar)?;
        let (plan, container) = plan_from_perf(&file);
        let interp = cpu.interpretation(&file, &plan.streams)?;
        let ctx = RecordingContext::from_perf(&file, sidecar, problems);
        Ok(Recording {
            file,
            plan,
            container,
            interp,
            ctx,
        })
    }

    pub fn path(&self) -> &str {
        self.file.path()
    }

    /// Decodes every sample in time order, feeding each to `f`.
    pub fn decode(&self, mut f: impl FnMut(&SpeSample)) -> anyhow::Result<DecodeStats> {
        let outcome =
            spelunk_decode::decode(&self.file, &self.plan, &DecodeOptions::default(), |s| {
                f(s);
                Ok::<(), std::convert::Infallible>(())
            });
        match outcome {
            Ok(o) => Ok(o.stats),
            Err(PipelineError::Sink(never)) => match never {},
            Err(e) => Err(e).with_context(|| format!("{}: decoding", self.file.path())),
        }
    }

    /// Decodes every sample, each stream's worker first mapping its samples with its own
    /// `maps[i]` (in parallel); `f` gets the items in the time order [`Recording::decode`]
    /// gives the samples.
    pub fn decode_map<M: SampleMap>(
        &self,
        maps: &mut [M],
        mut f: impl FnMut(&M::Item),
    ) -> anyhow::Result<DecodeStats> {
        let outcome = spelunk_decode::decode_map(
            &self.file,
            &self.plan,
            &DecodeOptions::default(),
            maps,
            |item| {
                f(item);
                Ok::<(), std::convert::Infallible>(())
            },
        );
        match outcome {
            Ok(o) => Ok(o.stats),
            Err(PipelineError::Sink(never)) => match never {},
            Err(e) => Err(e).with_context(|| format!("{}: decoding", self.file.path())),
        }
    }

    /// The time of the first timed sample [`Recording::decode`] gives (what `--time-range` is
    /// relative to), without decoding the whole recording.
    pub fn first_time_ns(&self) -> anyhow::Result<Option<u64>> {
        spelunk_decode::first_time_ns(&self.file, &self.plan, &DecodeOptions::default())
            .with_context(|| format!("{}: decoding", self.file.path()))
    }

    /// For errors that found nothing to show: `; the recording is damaged: ...` when it is
    /// (cut short, a record cut off or malformed), else its first problem (a feature section
    /// cut off, a sidecar's dropped entries), else "". Damage is never left unsaid because
    /// the command failed for another reason.
    pub fn damage_note(&self) -> String {
        let note = crate::common::damage_note(&self.file);
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
    /// `kallsyms` when given, else from this machine's /proc/kallsyms when the recording was
    /// made on this machine's running kernel (same hostname and kernel release in the header)
    /// and the file shows addresses; otherwise kernel PCs stay `[kernel.kallsyms]`.
    pub fn symbolizer(&self, args: &SymbolArgs) -> anyhow::Result<CodeSymbolizer> {
        let sym = CodeSymbolizer::new(args.symfs.clone());
        if let Some(path) = args.kallsyms.as_deref() {
            // A kallsyms file has a few hundred thousand lines (~10 MB).
            let text = spelunk_fsio::read_to_string_bounded(path, 1 << 30)
                .with_context(|| format!("--kallsyms {}", path.display()))?;
            let k = KernelSymbols::parse(&text)
                .with_context(|| format!("--kallsyms {}", path.display()))?;
            return Ok(sym.with_kernel_symbols(Arc::new(k)));
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
            if let Some(k) = here("/proc/kallsyms").and_then(|t| KernelSymbols::parse(&t).ok()) {
                return Ok(sym.with_kernel_symbols(Arc::new(k)));
            }
        }
        Ok(sym)
    }

    /// The (pid, PC) pairs of `pcs` that symbolize to a function named `name`.
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
        requests
            .iter()
            .zip(locs)
            .filter(|(_, l)| l.function.as_deref() == Some(name))
            .map(|((k, _), _)| *k)
            .collect()
    }
}
