//! `spelunk annotate SYMBOL`: a function's disassembly with exact per-instruction samples, load
//! latency, data sources and branch mispredictions, source lines interleaved. Wiring only: the
//! analysis is spelunk_engine::annotate.

use anyhow::Context;
use clap::Args;
use spelunk_analysis::annotate::AnnotateReport;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::common::{CpuArgs, SidecarArgs};
use crate::recording::{FilterArgs, SymbolArgs};

/// Annotate a function: its instructions with the samples, load latency, data sources and
/// branch mispredictions SPE attributed to each, and the source lines they come from.
///
/// SPE records the PC of the sampled instruction itself, so unlike `perf annotate` on PMU
/// samples there is no skid: a load's latency belongs to that load, a misprediction to that
/// branch ([SPE methodology §3.4.2]). The code is disassembled from the recorded binary (AArch64 and
/// x86-64); source lines come from its DWARF line tables. Every figure is defined in
/// docs/annotate.md.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  spelunk annotate memcpy perf.data                  # every sample in memcpy
  spelunk annotate frd perf.data --event l1d-miss    # where frd's L1D misses are
  spelunk annotate __memcpy_simd --event branch-miss # which branch mispredicts
  spelunk annotate triad perf.data --json > triad.json
  spelunk annotate main perf.data --symfs /srv/sysroot
  spelunk annotate 'walk(long const*, unsigned long)' perf.data   # one C++ overload")]
pub struct AnnotateArgs {
    /// Function to annotate: its name as `spelunk report` shows it, the mangled name, or a
    /// short form without parameters (`walk`, `Grid::sum_every`; overloads are listed to choose)
    pub symbol: String,

    /// perf.data with Arm SPE data
    #[arg(default_value = "perf.data")]
    pub file: PathBuf,

    /// Print the annotation as JSON (schema spelunk-annotate/1)
    #[arg(long)]
    pub json: bool,

    /// Leave out the source lines
    #[arg(long)]
    pub no_source: bool,

    #[command(flatten)]
    pub symbols: SymbolArgs,

    #[command(flatten)]
    pub filter: FilterArgs,

    #[command(flatten)]
    pub interp: CpuArgs,

    #[command(flatten)]
    pub sidecar: SidecarArgs,
}

pub fn build(args: &AnnotateArgs) -> anyhow::Result<AnnotateReport> {
    let rec = args.interp.open(&args.file, &args.sidecar)?;
    let filter = args.filter.filter(&rec.ctx)?;
    let mut symbolizer = args.symbols.symbolizer(&rec)?;
    let mut report = rec.annotate(&args.symbol, filter, &mut symbolizer)?;
    if args.no_source {
        report.sources.clear();
    }
    Ok(report)
}

pub fn run(args: AnnotateArgs) -> anyhow::Result<ExitCode> {
    let report = build(&args)?;
    if args.json {
        let text = serde_json::to_string_pretty(&report).context("serialising the annotation")?;
        println!("{text}");
    } else {
        print!(
            "{}",
            spelunk_report::annotate_text::render(&report, !args.no_source)
        );
    }
    Ok(ExitCode::SUCCESS)
}
