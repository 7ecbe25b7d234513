//! `spelunk estimate latency|bandwidth`: [SPE methodology]'s derived latency (§4.2.4) and bandwidth
//! (§4.4.2) over a function or PC range, with every input and step printed. Wiring only: the
//! arithmetic is spelunk_analysis::estimate.

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use spelunk_analysis::disasm::CodeReader;
use spelunk_analysis::estimate::{
    bytes_from_instructions, BytesPerOp, CountedOps, EstimateKind, EstimateReport, EstimateSetup,
    IntervalDerivation, PcSpan, TimerInfo,
};
use spelunk_analysis::select::Selector;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::common::{CpuArgs, SidecarArgs};
use crate::recording::{pc_range, FilterArgs, SymbolArgs};

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

    /// Only samples in this function (as symbolized)
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

/// Counted samples of one (pid, PC) and what else was selected there.
#[derive(Default)]
struct PcAcc {
    span: PcSpan,
    not_counted: u64,
    cpus: BTreeSet<u32>,
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
    let mut filter = args.filter.filter(&rec.ctx)?;
    filter.pc_range = args.pc_range.as_deref().map(pc_range).transpose()?;
    let mut selection = filter.describe();
    let mut sel = Selector::new(&rec.interp, filter);
    let mut per_pc: HashMap<(Option<u32>, Option<u64>), PcAcc> = HashMap::new();
    let stats = rec.decode(|s| {
        let Some(x) = sel.select(s) else { return };
        let acc = per_pc.entry((s.pid, x.pc)).or_default();
        if counted.counts(x.kind) {
            acc.span.add(x.kind, s.record.timestamp);
            if let Some(c) = s.cpu {
                acc.cpus.insert(c);
            }
        } else {
            acc.not_counted += 1;
        }
    })?;
    let path = rec.path().to_string();
    if sel.selected == 0 {
        bail!(
            "{path}: no samples matched{}; {} records were decoded{}",
            if selection.is_empty() {
                String::new()
            } else {
                format!(" the filter ({})", selection.join(", "))
            },
            sel.decoded,
            rec.damage_note()
        );
    }

    let mut symbolizer = args.symbols.symbolizer(&rec)?;
    if let Some(name) = &args.symbol {
        let keys = per_pc.keys().filter_map(|(pid, pc)| pc.map(|p| (*pid, p)));
        let keep: HashSet<(Option<u32>, u64)> = rec.pcs_in_function(&mut symbolizer, keys, name);
        if keep.is_empty() {
            bail!(
                "{path}: no selected samples in a function named '{name}' (see `spelunk report {path}` for the sampled functions){}",
                rec.damage_note()
            );
        }
        per_pc.retain(|(pid, pc), _| pc.is_some_and(|p| keep.contains(&(*pid, p))));
        selection.push(format!("function {name}"));
    }

    let mut span = PcSpan::default();
    let mut not_counted = 0;
    let mut cpus = BTreeSet::new();
    for acc in per_pc.values() {
        span.merge(&acc.span);
        not_counted += acc.not_counted;
        cpus.extend(acc.cpus.iter().copied());
    }
    if span.samples == 0 {
        bail!(
            "{path}: none of the {} selected samples are {} (choose others with --ops){}",
            not_counted,
            counted.name(),
            rec.damage_note()
        );
    }

    let sampling = rec.ctx.sampling.as_ref();
    let interval = IntervalDerivation::derive(
        sampling.and_then(|s| s.requested_period),
        sampling.and_then(|s| s.min_interval),
        sampling.map(|s| s.jitter),
        args.ernd.map(|e| e == 1),
        args.interval,
    )
    .with_context(|| {
        format!("{path}: the recording does not say the SPE sampling period; pass --interval N")
    })?;
    let timer = match args.timer_hz {
        Some(hz) => TimerInfo::from_hz(hz)
            .with_context(|| format!("--timer-hz {hz}: expected a positive frequency"))?,
        None => rec
            .file
            .time_conv
            .and_then(|tc| TimerInfo::from_time_conv(tc.time_mult, tc.time_shift))
            .with_context(|| {
                format!(
                    "{path}: no usable TIME_CONV record to convert timer ticks; pass --timer-hz HZ"
                )
            })?,
    };

    let bytes_per_op = match (kind, args.bytes_per_op) {
        (EstimateKind::Latency, _) => None,
        (EstimateKind::Bandwidth, Some(n)) => Some(BytesPerOp {
            from: "--bytes-per-op".into(),
            uniform: Some(n),
            sample_bytes: span.samples.saturating_mul(n),
            instructions: Vec::new(),
        }),
        (EstimateKind::Bandwidth, None) => {
            let mut pcs = Vec::new();
            for ((pid, pc), acc) in &per_pc {
                if acc.span.samples == 0 {
                    continue;
                }
                let Some(pc) = pc else {
                    bail!("{path}: {} counted samples have no PC, so their access size is unknown; pass --bytes-per-op N", acc.span.samples);
                };
                let m = rec.ctx.spaces.lookup(*pid, *pc, None).cloned();
                pcs.push((m, *pc, acc.span.samples));
            }
            pcs.sort_by_key(|p| p.1);
            let mut reader = CodeReader::new(args.symbols.symfs.clone());
            Some(bytes_from_instructions(&pcs, &mut reader).map_err(|e| {
                anyhow::anyhow!(
                    "{path}: cannot infer the bytes per operation: {e}; pass --bytes-per-op N"
                )
            })?)
        }
    };

    let setup = EstimateSetup {
        kind,
        file: path.clone(),
        selection,
        counted,
        not_counted,
        cpus: cpus.len() as u64,
        interval,
        timer,
        cpu_ghz: args.cpu_ghz.filter(|g| *g > 0.0),
        bytes_per_op,
    };
    let mut report =
        EstimateReport::compute(setup, &span).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
    let l = rec.losses(&stats);
    let lost = l.dropped_records + l.incomplete_records + l.lost_records;
    let flagged = l.aux_truncated + l.aux_partial + l.aux_collision;
    if lost > 0 || flagged > 0 || l.undecodable_bytes > 0 {
        report.notes.push(format!(
            "the recording lost data ({lost} records lost or dropped, {flagged} AUX buffers flagged truncated/partial/collision, {} undecodable bytes): samples are missing, so the operation count and bandwidth are low",
            l.undecodable_bytes
        ));
    }
    report.losses = l;
    Ok(report)
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
