//! `spelunk c2c`: cache lines shared between cores, ranked by peer snoops, with offsets, PCs,
//! threads and a false/true-sharing verdict. Wiring only: the analysis is
//! spelunk_analysis::c2c.

use anyhow::Context;
use clap::Args;
use spelunk_analysis::c2c::C2cReport;
use spelunk_engine::report::check_line_size;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::common::{CpuArgs, SidecarArgs};
use crate::recording::{FilterArgs, SymbolArgs};

/// Find cache lines that move between cores (false and true sharing), like `perf c2c report`.
///
/// A load served by another core's cache (a peer snoop in SPE's data source) shows a cache line
/// that moved between cores. Lines are ranked by their peer-snoop loads; for each line the
/// offsets touched, the code addresses, source lines and threads touching each offset, loads
/// vs stores, local vs remote, and a verdict: false sharing (one thread writes an offset that
/// another thread, using other offsets of the line, never touches: pad the data apart), true
/// sharing (threads write and access the same offset: the data itself is shared), or none.
/// The columns are perf c2c's ([SPE methodology §5.2]); every figure is defined in docs/c2c.md.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  spelunk c2c perf.data                      # lines ranked by peer snoops, with verdicts
  spelunk c2c perf.data --limit 5            # the five most shared lines
  spelunk c2c perf.data --line-size 128      # pairs of lines (adjacent-line prefetch)
  spelunk c2c perf.data --tid 4242,4243 --json > c2c.json
  spelunk c2c perf.data --html c2c.html      # the tables as one self-contained page
  spelunk report perf.data --html report.html --c2c   # the same tables in the full report

Record with loads and stores and physical addresses, e.g.
  perf record -e arm_spe_0/ts_enable=1,pa_enable=1,load_filter=1,store_filter=1/ -- ./app")]
pub struct C2cArgs {
    /// perf.data with Arm SPE data
    #[arg(default_value = "perf.data")]
    pub file: PathBuf,

    /// Cache line size in bytes (a power of two)
    #[arg(long, default_value_t = 64, value_name = "BYTES", allow_negative_numbers = true, value_parser = crate::common::values::line_size)]
    pub line_size: u64,

    /// Lines to show
    #[arg(long, default_value_t = 20, value_name = "N", allow_negative_numbers = true, value_parser = crate::common::values::rows)]
    pub limit: usize,

    /// Print the report as JSON (schema spelunk-c2c/1)
    #[arg(long)]
    pub json: bool,

    /// Write the tables as one self-contained HTML page to FILE (opens offline; docs/c2c.md)
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    #[command(flatten)]
    pub symbols: SymbolArgs,

    #[command(flatten)]
    pub filter: FilterArgs,

    #[command(flatten)]
    pub interp: CpuArgs,

    #[command(flatten)]
    pub sidecar: SidecarArgs,
}

pub fn build(args: &C2cArgs) -> anyhow::Result<C2cReport> {
    check_line_size(args.line_size)?;
    let rec = args.interp.open(&args.file, &args.sidecar)?;
    let filter = args.filter.filter(&rec.ctx)?;

    // Pass 1: which lines saw peer snoops.
    let (scan, stats) = rec.c2c_scan(filter, args.line_size)?;

    // Pass 2: details of those lines.
    let objects = rec.ctx.data_objects(args.symbols.symfs.as_ref());
    let mut symbolizer = args.symbols.symbolizer(&rec)?;
    Ok(scan.finish(&rec, &stats, &objects, &mut symbolizer, args.limit)?)
}

pub fn run(args: C2cArgs) -> anyhow::Result<ExitCode> {
    let [data, sidecar] = crate::common::recording_inputs(&args.file);
    crate::common::guard_outputs(&[&data, &sidecar], args.html.as_deref())?;
    let report = build(&args)?;
    if let Some(out) = &args.html {
        let page = spelunk_report::html::render_c2c_html(&report)?;
        spelunk_report::html::write_page(out, &page)?;
        eprintln!(
            "spelunk c2c: wrote {} ({} cache lines; open it in a browser, it needs no network)",
            out.display(),
            report.lines.len()
        );
    }
    if args.json {
        let text = serde_json::to_string_pretty(&report).context("serialising the report")?;
        println!("{text}");
    } else if args.html.is_none() {
        print!("{}", spelunk_report::c2c_text::render(&report));
    }
    Ok(ExitCode::SUCCESS)
}
