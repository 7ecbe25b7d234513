//! `spelunk export FILE --dataset DIR`: a recording appended to a Hive-partitioned Parquet
//! dataset. Wiring only: the dataset writer is spelunk_report::dataset.

use clap::Args;
use spelunk_report::dataset::{self, Partition};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::common::{CpuArgs, SidecarArgs};
use crate::progress::Progress;
use crate::recording::SymbolArgs;

/// Append a recording to a Parquet dataset of many recordings (hosts, runs), for DuckDB,
/// Spark, pyarrow or polars.
///
/// Every sample becomes a row, symbolized and attributed (function, source line, DSO, data
/// object and allocation site, phases, thread, data source, latencies, time): the columns of
/// the Python API's `Recording.samples()`, so queries need neither the binaries nor spelunk.
/// The dataset is Hive-partitioned by host and run (`DIR/host=H/run=R/samples.parquet`); a
/// partition appears whole or not at all, and an existing one is never written over. Layout,
/// columns and queries: docs/dataset.md.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  spelunk export perf.data --dataset fleet/                        # host: the recording's, run: perf
  spelunk export perf.data --dataset fleet/ --host graviton-7 --run nightly-0412
  duckdb -c \"SELECT function, count(*) FROM read_parquet('fleet/*/*/samples.parquet',
            hive_partitioning=true) GROUP BY 1 ORDER BY 2 DESC LIMIT 10\"")]
pub struct ExportArgs {
    /// perf.data with Arm SPE data
    #[arg(default_value = "perf.data")]
    pub file: PathBuf,

    /// The dataset directory (created when missing)
    #[arg(long, value_name = "DIR")]
    pub dataset: PathBuf,

    /// Host partition [default: the host the recording was made on, from its header]
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,

    /// Run partition [default: FILE's name without .data]
    #[arg(long, value_name = "NAME")]
    pub run: Option<String>,

    #[command(flatten)]
    pub symbols: SymbolArgs,

    #[command(flatten)]
    pub interp: CpuArgs,

    #[command(flatten)]
    pub sidecar: SidecarArgs,

    /// Do not print what was written
    #[arg(short, long)]
    pub quiet: bool,

    /// Never show a progress bar
    #[arg(long)]
    pub no_progress: bool,
}

pub fn run(args: ExportArgs) -> anyhow::Result<ExitCode> {
    let rec = args.interp.open(&args.file, &args.sidecar)?;
    let part = Partition::for_recording(&rec, &args.file, args.host.clone(), args.run.clone())?;
    let objects = rec.ctx.data_objects(args.symbols.symfs.as_ref());
    let mut symbolizer = args.symbols.symbolizer(&rec)?;
    let progress = Progress::count("exporting", "samples", args.no_progress);
    let out = dataset::export(
        &rec,
        &objects,
        &mut symbolizer,
        &args.dataset,
        &part,
        &args.file.display().to_string(),
        &|n| progress.set(n),
    );
    progress.finish();
    let out = out?;
    if !args.quiet {
        println!("wrote {} ({} samples)", out.partition.display(), out.rows);
    }
    Ok(ExitCode::SUCCESS)
}
