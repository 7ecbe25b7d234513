//! `spelunk decode`: an SPE recording to typed Parquet/CSV tables, the fast replacement for Arm's
//! spe-parser. Wiring only: decoding lives in spelunk-spe/spelunk-perf, writing in spelunk-report.

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use spelunk_decode::{plan_from_perf, DecodeOptions, PipelineError};
use spelunk_perf::PerfDataFile;
use spelunk_report::spe_tables::SpeRowMap;
use spelunk_report::{
    DecodeSummary, Interpretation, SpeTableWriter, TableCompression, TableFormat,
};
use spelunk_spe::{RecordDecoder, SpeSample};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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

fn compression(args: &DecodeArgs) -> TableCompression {
    match args.compression {
        Compression::Snappy => TableCompression::Snappy,
        Compression::Lz4 => TableCompression::Lz4,
        Compression::None => TableCompression::None,
    }
}

fn default_prefix(file: &Path) -> PathBuf {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "spe".into());
    let stem = name.strip_suffix(".data").unwrap_or(&name);
    PathBuf::from(if stem.is_empty() { "spe" } else { stem })
}

pub fn run(args: DecodeArgs) -> anyhow::Result<ExitCode> {
    let format = match args.format {
        Format::Parquet => TableFormat::Parquet,
        Format::Csv => TableFormat::Csv,
    };
    let prefix = args
        .output
        .clone()
        .unwrap_or_else(|| default_prefix(&args.file));
    let [data, sidecar] = crate::common::recording_inputs(&args.file);
    let tables = spelunk_report::spe_tables::SpeTableWriter::paths(&prefix, format);
    crate::common::guard_outputs(
        &[&data, &sidecar],
        &tables.iter().map(|p| p.as_path()).collect::<Vec<_>>(),
    )?;
    if args.raw {
        decode_raw(&args, &prefix, format)
    } else {
        decode_perf(&args, &prefix, format)
    }
}

/// Samples between progress-bar updates (the bar reads an atomic byte counter).
const PROGRESS_EVERY: u64 = 1 << 16;

fn decode_perf(args: &DecodeArgs, prefix: &Path, format: TableFormat) -> anyhow::Result<ExitCode> {
    let file = PerfDataFile::open_spe(&args.file)?;
    let (plan, losses) = plan_from_perf(&file);
    let total_bytes = file.require_spe_data()?;
    let interp = args.interp.interpretation(&file, &plan.streams)?;
    let mut writer = SpeTableWriter::create(prefix, format, compression(args), interp.clone())?;
    let progress = Progress::bytes(total_bytes, "decoding", args.no_progress);
    let done_bytes = Arc::new(AtomicU64::new(0));
    let opts = DecodeOptions {
        progress: Some(done_bytes.clone()),
        ..Default::default()
    };
    // Per-record work (rows, summary counts) runs in the decode workers, one map per stream;
    // the merge only moves compact rows into the tables.
    let mut maps: Vec<SpeRowMap> = plan
        .streams
        .iter()
        .map(|_| SpeRowMap::new(interp.clone()))
        .collect();
    let mut n = 0u64;
    let result = spelunk_decode::decode_map(&file, &plan, &opts, &mut maps, |row| {
        n += 1;
        if n % PROGRESS_EVERY == 0 {
            progress.set(done_bytes.load(Ordering::Relaxed));
        }
        writer.push(row)
    });
    progress.finish();
    let mut summary = DecodeSummary {
        container: losses,
        ..Default::default()
    };
    for m in &maps {
        summary.merge(&m.summary);
    }
    // Whatever happens, keep what was decoded: close the tables first.
    let outputs = writer.finish()?;
    let outcome = match result {
        Ok(o) => o,
        Err(PipelineError::Sink(e)) => return Err(e.into()),
        Err(e) => {
            report(args, &summary, &outputs, &[], &args.file);
            return Err(anyhow::Error::new(e).context(
                "decoding stopped; the tables hold the records decoded before the error",
            ));
        }
    };
    summary.decode = outcome.stats;
    if summary.samples == 0 {
        for (p, _) in &outputs {
            let _ = std::fs::remove_file(p);
        }
        let first = outcome.issues.first().map(|i| {
            format!(
                "; first undecodable byte at offset {}: {}",
                i.offset, i.error
            )
        });
        bail!(
            "{}: {} bytes of SPE data held no complete record{}{}",
            file.path(),
            total_bytes,
            first.unwrap_or_default(),
            spelunk_engine::recording::damage_note(&file)
        );
    }
    report(args, &summary, &outputs, &outcome.issues, &args.file);
    // A damaged file still gets its tables, but the exit status says it was damaged.
    if let Some(p) = file.damage() {
        bail!(
            "{}: damaged recording ({}); the tables hold everything decoded before the damage",
            file.path(),
            p.message
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads chunks of this size from raw buffers (bounded memory whatever the file size).
const RAW_CHUNK: usize = 4 << 20;

fn decode_raw(args: &DecodeArgs, prefix: &Path, format: TableFormat) -> anyhow::Result<ExitCode> {
    let path = &args.file;
    spelunk_fsio::regular_file(path).with_context(|| format!("{}: cannot open", path.display()))?;
    let mut file =
        std::fs::File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len >= 8 {
        let mut magic = [0u8; 8];
        file.read_exact(&mut magic)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        if &magic == b"PERFILE2" || &magic == b"2ELIFREP" {
            bail!(
                "{}: this is a perf.data file, not a raw SPE buffer; drop --raw",
                path.display()
            );
        }
        file = std::fs::File::open(path)
            .with_context(|| format!("{}: cannot open", path.display()))?;
    }
    let interp = Interpretation::uniform(args.interp.midr_override()?);
    let mut writer = SpeTableWriter::create(prefix, format, compression(args), interp.clone())?;
    let mut summary = DecodeSummary::default();
    let mut decoder = RecordDecoder::new();
    let progress = Progress::bytes(len, "decoding", args.no_progress);
    let mut buf = vec![0u8; RAW_CHUNK];
    let mut records = Vec::new();
    let mut offset = 0u64;
    loop {
        let n = read_full(&mut file, &mut buf)
            .with_context(|| format!("{}: read failed at byte {offset}", path.display()))?;
        if n == 0 {
            break;
        }
        records.clear();
        decoder.feed(&buf[..n], offset, &mut records);
        for r in &records {
            let s = SpeSample {
                cpu: args.cpu,
                record: *r,
                ..Default::default()
            };
            summary.add(&s, &interp);
            writer.write(&s)?;
        }
        offset += n as u64;
        progress.set(offset);
    }
    decoder.finish();
    progress.finish();
    summary.decode = *decoder.stats();
    let outputs = writer.finish()?;
    if summary.samples == 0 {
        for (p, _) in &outputs {
            let _ = std::fs::remove_file(p);
        }
        let first = decoder.issues().first().map(|i| {
            format!(
                "; first undecodable byte at offset {}: {}",
                i.offset, i.error
            )
        });
        bail!(
            "{}: no SPE records found in {} bytes{} — is this really a raw SPE buffer?",
            path.display(),
            len,
            first.unwrap_or_default()
        );
    }
    report(args, &summary, &outputs, decoder.issues(), path);
    Ok(ExitCode::SUCCESS)
}

fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

fn report(
    args: &DecodeArgs,
    summary: &DecodeSummary,
    outputs: &[(PathBuf, u64)],
    issues: &[spelunk_spe::DecodeIssue],
    input: &Path,
) {
    if args.quiet {
        return;
    }
    print!("{}", summary.render_text());
    for i in issues.iter().take(5) {
        println!("  {}: byte {}: {}", input.display(), i.offset, i.error);
    }
    println!("wrote:");
    for (p, n) in outputs {
        println!("  {} ({} rows)", p.display(), n);
    }
}
