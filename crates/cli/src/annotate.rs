//! `spelunk annotate SYMBOL`: a function's disassembly with exact per-instruction samples, load
//! latency, data sources and branch mispredictions, source lines interleaved. Wiring only: the
//! analysis is spelunk_analysis::annotate.

use anyhow::{bail, Context};
use clap::Args;
use spelunk_analysis::agg::Agg;
use spelunk_analysis::annotate::{annotate, AnnotateInput, AnnotateReport};
use spelunk_analysis::select::Selector;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

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
  spelunk annotate main perf.data --symfs /srv/sysroot")]
pub struct AnnotateArgs {
    /// Function to annotate (as `spelunk report` names it)
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
    let described = filter.describe();
    let mut sel = Selector::new(&rec.interp, filter);
    let mut per_pc: HashMap<(Option<u32>, u64), Agg> = HashMap::new();
    let stats = rec.decode(|s| {
        let Some(x) = sel.select(s) else { return };
        if let Some(pc) = x.pc {
            per_pc
                .entry((s.pid, pc))
                .or_default()
                .add(&s.record, x.kind, x.source);
        }
    })?;
    let path = rec.path().to_string();
    let name = args.symbol.as_str();
    if sel.selected == 0 {
        bail!(
            "{path}: no samples matched; {} records were decoded{}",
            sel.decoded,
            rec.damage_note()
        );
    }

    // Symbolize the sampled PCs (one batch) and keep the function's.
    let mut symbolizer = args.symbols.symbolizer(&rec)?;
    let keys: Vec<(Option<u32>, u64)> = per_pc.keys().copied().collect();
    let mut requests = Vec::new();
    let mut of_request = Vec::new();
    for k in &keys {
        if let Some(m) = rec.ctx.spaces.lookup(k.0, k.1, None) {
            requests.push((m.clone(), k.1));
            of_request.push(*k);
        }
    }
    let locations = symbolizer.symbolize(&requests);
    // (dso, function start file offset) → offset → samples.
    type Instance = (Arc<str>, u64);
    let mut instances: HashMap<Instance, HashMap<u64, Agg>> = HashMap::new();
    for (k, loc) in of_request.iter().zip(&locations) {
        if loc.function.as_deref() != Some(name) {
            continue;
        }
        let (Some(off), Some(foff)) = (loc.function_offset, loc.file_offset) else {
            continue;
        };
        instances
            .entry((loc.dso.clone(), foff.saturating_sub(off)))
            .or_default()
            .entry(off)
            .or_default()
            .merge(&per_pc[k]);
    }
    let samples_of = |m: &HashMap<u64, Agg>| m.values().map(|a| a.samples).sum::<u64>();
    let mut ranked: Vec<(Instance, HashMap<u64, Agg>)> = instances.into_iter().collect();
    ranked.sort_by(|a, b| samples_of(&b.1).cmp(&samples_of(&a.1)).then(a.0.cmp(&b.0)));
    let mut ranked = ranked.into_iter();
    let Some(((dso, start_off), per_offset)) = ranked.next() else {
        let missing: Vec<&str> = symbolizer.missing_files().collect();
        bail!(
            "{path}: no selected samples in a function named '{name}'{} (see `spelunk report {path}` for the sampled functions){}",
            if missing.is_empty() {
                String::new()
            } else {
                format!("; binaries not found here: {}", missing.join(", "))
            },
            rec.damage_note()
        );
    };
    let others: Vec<String> = ranked
        .map(|((d, _), m)| format!("{d} ({} samples)", samples_of(&m)))
        .collect();
    let local = symbolizer.local_path(&dso);
    let mut report = annotate(
        AnnotateInput {
            file: path.clone(),
            function: name,
            dso: dso.clone(),
            local_path: &local,
            start_file_offset: start_off,
            per_offset,
            selected: sel.selected,
            filter: described,
        },
        &mut symbolizer,
    )
    .map_err(|e| anyhow::anyhow!("{path}: annotating '{name}': {e}"))?;
    if !others.is_empty() {
        report.notes.push(format!(
            "other functions named '{name}' have samples too: {}",
            others.join(", ")
        ));
    }
    if args.no_source {
        report.sources.clear();
    }
    report.losses = rec.losses(&stats);
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
