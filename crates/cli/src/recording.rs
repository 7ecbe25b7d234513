//! The options that select a recording's samples and name its code, shared by the commands that
//! read SPE recordings (report, annotate, estimate, c2c, diff); the filter options mean the
//! same everywhere. Opening and decoding a recording is spelunk_engine::recording.

use anyhow::{bail, Context};
use clap::Args;
use spelunk_analysis::context::RecordingContext;
use spelunk_analysis::kallsyms::KernelSymbols;
use spelunk_analysis::profile::{EventClass, Filter, PhaseFilter};
use spelunk_analysis::symbolize::CodeSymbolizer;
use spelunk_engine::recording::Recording;
use std::path::PathBuf;
use std::sync::Arc;

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

impl SymbolArgs {
    /// The code symbolizer for `rec` (see [`Recording::symbolizer`]), with the kernel symbols
    /// of `--kallsyms` when given.
    pub fn symbolizer(&self, rec: &Recording) -> anyhow::Result<CodeSymbolizer> {
        let kernel = match self.kallsyms.as_deref() {
            Some(path) => {
                // A kallsyms file has a few hundred thousand lines (~10 MB).
                let text = spelunk_fsio::read_to_string_bounded(path, 1 << 30)
                    .with_context(|| format!("--kallsyms {}", path.display()))?;
                let k = KernelSymbols::parse(&text)
                    .with_context(|| format!("--kallsyms {}", path.display()))?;
                Some(Arc::new(k))
            }
            None => None,
        };
        Ok(rec.symbolizer(self.symfs.clone(), kernel))
    }
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
    let (a, b) = pair(s, "--pc-range", crate::common::values::parse_u64)?;
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
