//! `spelunk diff A B`: did the change make the program faster, and where — the totals before and
//! after, then per function, source line and data object the change in cost (estimated cycles),
//! load latency and data sources, with changes within the sampling error marked as noise.
//! Wiring only: the comparison is spelunk_analysis::diff.

use anyhow::Context;
use clap::{Args, ValueEnum};
use spelunk_analysis::diff::{diff, DiffReport};
use spelunk_analysis::model::Report;
use spelunk_analysis::profile::Filter;
use spelunk_engine::recording::Recording;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::common::{CpuArgs, SidecarArgs};
use crate::recording::{FilterArgs, SymbolArgs};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DiffBy {
    Function,
    Line,
    Object,
    All,
}

/// Compare two recordings (baseline A, new B): did the change make the program faster, and where.
///
/// Leads with the totals before and after (cycles and instructions when the recordings carry
/// PMU counts, as emulated ones do; duration, samples, loads, load latency), then per function,
/// source line and data object the change in cost — estimated cycles at stake: interval × (Σ
/// the sampled loads' latency + 1 per other sample) — with load latency (mean, p50, p99) and
/// data-source mix. This is [perf hot-spot guide]'s `perf diff` workflow — record, change the
/// code, record again, compare — ranked by what the change cost or saved rather than by sample
/// share. Changes within the sampling error are noise: hidden, with their count (--all shows
/// them). Every figure is defined in docs/diff.md.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  spelunk diff perf.data.old perf.data                  # functions, lines and objects
  spelunk diff before.data after.data --by function     # like perf diff
  spelunk diff before.data after.data --event l1d-miss  # where the L1D misses moved
  spelunk diff before.data after.data --json > diff.json")]
pub struct DiffArgs {
    /// Baseline recording
    pub baseline: PathBuf,

    /// New recording
    pub new: PathBuf,

    /// Which tables to print
    #[arg(long, value_enum, default_value = "all")]
    pub by: DiffBy,

    /// Rows per table
    #[arg(long, default_value_t = 20, value_name = "N", allow_negative_numbers = true, value_parser = crate::common::values::rows)]
    pub limit: usize,

    /// Also print the rows whose change is within the sampling error (noise), after the others
    #[arg(long)]
    pub all: bool,

    /// Print the comparison as JSON (schema spelunk-diff/2; every row, noise included)
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub symbols: SymbolArgs,

    #[command(flatten)]
    pub filter: FilterArgs,

    #[command(flatten)]
    pub interp: CpuArgs,

    #[command(flatten)]
    pub sidecar: SidecarArgs,
}

fn open(path: &Path, args: &DiffArgs) -> anyhow::Result<(Recording, Filter)> {
    let rec = args.interp.open(path, &args.sidecar)?;
    let filter = args.filter.filter(&rec.ctx)?;
    Ok((rec, filter))
}

fn report((rec, filter): &(Recording, Filter), args: &DiffArgs) -> anyhow::Result<Report> {
    let mut symbolizer = args.symbols.symbolizer(rec)?;
    Ok(rec.every_row_report(
        filter.clone(),
        args.symbols.symfs.as_ref(),
        &mut symbolizer,
        true,
    )?)
}

/// The two reports are made at the same time; errors are those of making them one after the
/// other (the baseline's first).
pub fn build(args: &DiffArgs) -> anyhow::Result<DiffReport> {
    let baseline = open(&args.baseline, args)?;
    let new = match open(&args.new, args) {
        Ok(new) => new,
        Err(e) => {
            report(&baseline, args)?;
            return Err(e);
        }
    };
    let (a, b) = std::thread::scope(|scope| {
        let b = scope.spawn(|| report(&new, args));
        (report(&baseline, args), b.join())
    });
    let a = a?;
    let b = b.unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
    let counters =
        [&baseline.0, &new.0].map(|r| r.ctx.sidecar.as_ref().map(|s| &s.counters.totals));
    Ok(diff(&a, &b, counters))
}

pub fn run(args: DiffArgs) -> anyhow::Result<ExitCode> {
    let d = build(&args)?;
    if args.json {
        let text = serde_json::to_string_pretty(&d).context("serialising the comparison")?;
        println!("{text}");
    } else {
        let by = match args.by {
            DiffBy::Function => spelunk_report::diff_text::Tables::Functions,
            DiffBy::Line => spelunk_report::diff_text::Tables::Lines,
            DiffBy::Object => spelunk_report::diff_text::Tables::Objects,
            DiffBy::All => spelunk_report::diff_text::Tables::All,
        };
        print!(
            "{}",
            spelunk_report::diff_text::render(&d, by, args.limit, args.all)
        );
    }
    Ok(ExitCode::SUCCESS)
}
