//! `spelunk estimate latency|bandwidth`: [SPE methodology]'s derived latency (§4.2.4) and bandwidth
//! (§4.4.2) over a function or PC range, with every input and step printed. Wiring only: the
//! session is spelunk_engine::estimate, the arithmetic spelunk_analysis::estimate.

use anyhow::Context;
use clap::{Args, ValueEnum};
use spelunk_analysis::estimate::{CountedOps, EstimateKind, EstimateReport};
use spelunk_engine::estimate::EstimateRequest;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::common::{CpuArgs, SidecarArgs};
use crate::recording::{FilterArgs, SymbolArgs};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum What {
    /// Time per operation: elapsed time ÷ (samples × interval)
    Latency,
    /// Bytes per second: samples × interval × bytes per operation ÷ elapsed time
    Bandwidth,
}

/// Estimate the latency per operation or the memory bandwidth of a code region from SPE samples.
///
/// SPE samples one operation every INTERVAL operations, so a region's sampled operations ×
/// the interval estimates the operations it executed, and the time between its first and last
/// sampled operation is the time they took ([SPE methodology §4.2.4, §4.4.2]). The interval is the one
/// the hardware applied: `perf record -c` rounded down to a multiple of 256, + 128 with jitter
/// on CPUs whose caps/ernd is 0, else + 1 (table 4.3). The timer frequency comes from the
/// recording's TIME_CONV. These are estimates for regular, repetitive code; every step is
/// printed. Formulas: docs/estimate.md.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  spelunk estimate bandwidth perf.data --symbol frd        # bytes/op from the load instructions
  spelunk estimate bandwidth perf.data --pc-range 0xaaaaaaab1fbc,0xaaaaaaab23b4 --bytes-per-op 4
  spelunk estimate latency perf.data --symbol lat_chase --cpu-ghz 2.8
  spelunk estimate latency perf.data --symbol f --interval 4097   # override the interval
  spelunk estimate bandwidth perf.data --symbol copy --ops memory --json")]
pub struct EstimateArgs {
    /// latency or bandwidth
    #[arg(value_enum)]
    pub what: What,

    /// perf.data with Arm SPE data
    #[arg(default_value = "perf.data")]
    pub file: PathBuf,

    /// Only samples in this function: its name as the report shows it, the mangled name, or a
    /// short form without parameters (which takes in every overload)
    #[arg(long, value_name = "NAME")]
    pub symbol: Option<String>,

    /// Only samples whose PC is in [FROM,TO) (hex or decimal)
    #[arg(long, value_name = "FROM,TO")]
    pub pc_range: Option<String>,

    /// Which sampled operations to count: load, store, memory (loads and stores) or all
    /// [default: load for latency, memory for bandwidth]
    #[arg(long, value_name = "OPS")]
    pub ops: Option<String>,

    /// Bytes each counted operation transfers (default: decoded from each sampled instruction)
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = crate::common::values::bytes_per_op)]
    pub bytes_per_op: Option<u64>,

    /// Use this sampling interval instead of deriving it from the recording
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = crate::common::values::sampling_interval)]
    pub interval: Option<u64>,

    /// The CPU's /sys/bus/event_source/devices/arm_spe_0/caps/ernd (not recorded in perf.data;
    /// default 0, as on Neoverse N1)
    #[arg(long, value_name = "0|1", allow_negative_numbers = true, value_parser = crate::common::values::ernd)]
    pub ernd: Option<u8>,

    /// Timer frequency of the SPE timestamps, instead of the recording's TIME_CONV
    #[arg(long, value_name = "HZ", allow_negative_numbers = true, value_parser = crate::common::values::frequency_hz)]
    pub timer_hz: Option<f64>,

    /// CPU clock in GHz, to also give the derived latency in cycles
    #[arg(long, value_name = "GHZ", allow_negative_numbers = true, value_parser = crate::common::values::clock_ghz)]
    pub cpu_ghz: Option<f64>,

    /// Print the estimate as JSON (schema spelunk-estimate/1)
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

pub fn build(args: &EstimateArgs) -> anyhow::Result<EstimateReport> {
    let kind = match args.what {
        What::Latency => EstimateKind::Latency,
        What::Bandwidth => EstimateKind::Bandwidth,
    };
    let counted = match &args.ops {
        Some(o) => CountedOps::parse(o)
            .ok_or_else(|| anyhow::anyhow!("--ops '{o}': expected load, store, memory or all"))?,
        None => match kind {
            EstimateKind::Latency => CountedOps::Load,
            EstimateKind::Bandwidth => CountedOps::Memory,
        },
    };
    let rec = args.interp.open(&args.file, &args.sidecar)?;
    let filter = args
        .filter
        .selection(args.pc_range.as_ref())
        .filter(&rec.ctx)?;
    let mut symbolizer = args.symbols.symbolizer(&rec)?;
    let req = EstimateRequest {
        kind,
        counted,
        filter,
        function: args.symbol.clone(),
        bytes_per_op: args.bytes_per_op,
        interval: args.interval,
        ernd: args.ernd.map(|e| e == 1),
        timer_hz: args.timer_hz,
        cpu_ghz: args.cpu_ghz,
        symfs: args.symbols.symfs.clone(),
    };
    Ok(rec.estimate(req, &mut symbolizer)?)
}

pub fn run(args: EstimateArgs) -> anyhow::Result<ExitCode> {
    let report = build(&args)?;
    if args.json {
        let text = serde_json::to_string_pretty(&report).context("serialising the estimate")?;
        println!("{text}");
    } else {
        print!("{}", spelunk_report::estimate_text::render(&report));
    }
    Ok(ExitCode::SUCCESS)
}
