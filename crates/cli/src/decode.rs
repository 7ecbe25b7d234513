//! `spelunk decode`: an SPE recording to typed Parquet/CSV tables, the fast replacement for Arm's
//! spe-parser. Wiring only: decoding lives in spelunk-spe/spelunk-perf/spelunk-decode, the flow
//! into tables and its summary in spelunk-report (`decode_tables`).

use clap::{Args, ValueEnum};
use spelunk_report::decode_tables::{default_prefix, render_decoded, DecodeInput, DecodeRequest};
use spelunk_report::{SpeTableWriter, TableCompression, TableFormat};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::common::CpuArgs;
use crate::progress::Progress;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Format {
    Parquet,
    Csv,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Compression {
    /// LZ4 (LZ4_RAW): faster and smaller than Snappy on SPE tables; read by pyarrow, polars, DuckDB
    Lz4,
    /// Snappy, for older Parquet readers
    Snappy,
    /// No compression (fastest to write, about 2.5x larger)
    None,
}

/// Decode an SPE recording into three typed tables: PREFIX-ldst, PREFIX-br, PREFIX-other.
///
/// The tables mirror Arm spe-parser's (same file names and column names) but are typed:
/// addresses are unsigned 64-bit integers (virtual addresses sign-extended from bit 55),
/// events are a bitmask plus names, absent fields are null. spelunk adds pid, tid, time_ns
/// (perf clock) and exec_lat (derived execution latency). Columns: docs/decode.md.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  spelunk decode perf.data                  # perf-ldst.parquet, perf-br.parquet, perf-other.parquet
  spelunk decode perf.data -f csv -o run1   # run1-ldst.csv, ...
  spelunk decode --raw --raw-cpu 0 spe.data     # a raw SPE buffer (e.g. WindowsPerf `wperf record`)
  python3 -c \"import pandas as pd; print(pd.read_parquet('perf-ldst.parquet').head())\"

A summary of what was decoded, and of everything skipped or lost, is printed at the end.")]
pub struct DecodeArgs {
    /// perf.data recorded with `perf record -e arm_spe_0//` (or a raw SPE buffer with --raw)
    pub file: PathBuf,

    /// Output prefix [default: FILE without its .data extension]
    #[arg(short, long, value_name = "PREFIX")]
    pub output: Option<PathBuf>,

    /// Output format (`-t` is accepted for spe-parser users)
    #[arg(short, long, short_alias = 't', value_enum, default_value = "parquet")]
    pub format: Format,

    /// Parquet page compression
    #[arg(long, value_enum, default_value = "lz4")]
    pub compression: Compression,

    /// FILE is a raw SPE byte buffer, not a perf.data file
    #[arg(long)]
    pub raw: bool,

    /// With --raw: the CPU the buffer was recorded on (printed in the cpu column)
    #[arg(long = "raw-cpu", alias = "cpu", value_name = "N", requires = "raw", allow_negative_numbers = true, value_parser = crate::common::values::id)]
    pub cpu: Option<u32>,

    #[command(flatten)]
    pub interp: CpuArgs,

    /// Do not print the summary
    #[arg(short, long)]
    pub quiet: bool,

    /// Never show a progress bar
    #[arg(long)]
    pub no_progress: bool,
}

pub fn run(args: DecodeArgs) -> anyhow::Result<ExitCode> {
    let req = DecodeRequest {
        prefix: (args.output.clone()).unwrap_or_else(|| default_prefix(&args.file)),
        file: args.file.clone(),
        raw: args.raw,
        raw_cpu: args.cpu,
        format: match args.format {
            Format::Parquet => TableFormat::Parquet,
            Format::Csv => TableFormat::Csv,
        },
        compression: match args.compression {
            Compression::Snappy => TableCompression::Snappy,
            Compression::Lz4 => TableCompression::Lz4,
            Compression::None => TableCompression::None,
        },
        cpu_model: args.interp.cpu_model.clone(),
        midr: args.interp.midr.clone(),
    };
    let [data, sidecar] = crate::common::recording_inputs(&args.file);
    let tables = SpeTableWriter::paths(&req.prefix, req.format);
    crate::common::guard_outputs(&[&data, &sidecar], tables.iter().map(PathBuf::as_path))?;
    let input = DecodeInput::open(&req)?;
    let progress = Progress::bytes(input.bytes(), "decoding", args.no_progress);
    let decoded = input.decode(&req, &|n| progress.set(n));
    progress.finish();
    let decoded = decoded?;
    if !args.quiet {
        print!("{}", render_decoded(&decoded, &args.file));
    }
    match decoded.incomplete {
        Some(e) => Err(e.into()),
        None => Ok(ExitCode::SUCCESS),
    }
}
