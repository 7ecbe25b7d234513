//! The options that select a recording's samples and name its code, shared by the commands that
//! read SPE recordings (report, annotate, estimate, c2c, diff); the filter options mean the
//! same everywhere. Their parsing and checks are spelunk_engine::select, opening and decoding a
//! recording spelunk_engine::recording.

use clap::Args;
use spelunk_analysis::context::RecordingContext;
use spelunk_analysis::profile::Filter;
use spelunk_analysis::symbolize::CodeSymbolizer;
use spelunk_engine::recording::{Recording, RecordingError};
use spelunk_engine::select::{SampleSelection, SymbolOptions};
use std::path::PathBuf;

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
    /// The code symbolizer for `rec`, with the kernel symbols of `--kallsyms` when given.
    pub fn symbolizer(&self, rec: &Recording) -> Result<CodeSymbolizer, RecordingError> {
        SymbolOptions {
            symfs: self.symfs.clone(),
            kallsyms: self.kallsyms.clone(),
        }
        .symbolizer(rec)
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

impl FilterArgs {
    /// The filters as given, with `--pc-range` where the command has it.
    pub fn selection(&self, pc_range: Option<&String>) -> SampleSelection {
        SampleSelection {
            event: self.event.clone(),
            pids: self.pid.clone(),
            tids: self.tid.clone(),
            cpus: self.cpus.clone(),
            time_range: self.time_range.clone(),
            phase: self.phase.clone(),
            pc_range: pc_range.cloned(),
        }
    }

    /// The filter, with `--phase` checked against the recording's phases.
    pub fn filter(&self, ctx: &RecordingContext) -> Result<Filter, RecordingError> {
        self.selection(None).filter(ctx)
    }
}
