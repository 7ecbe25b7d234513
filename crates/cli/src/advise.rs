//! `spelunk advise`: what is wrong, where, the fix and the gain to expect. Wiring only: the
//! advisor is spelunk_analysis::advise (rules) on spelunk_engine::advise's pass; the text is
//! spelunk_report::advise_text, the page spelunk_report::html.

use anyhow::Context;
use clap::Args;
use spelunk_engine::report::{timelines_only_sidecar, ReportRequest};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::common::{CpuArgs, SidecarArgs};
use crate::recording::{FilterArgs, SymbolArgs};

/// Name the memory problems of a recording, where they are, what to change and how much it
/// will give.
///
/// Each finding has a class (false-sharing, true-sharing, tlb, traversal, layout, split-line,
/// store-forwarding, prefetch, bandwidth, remote-memory, branch-mispredict, heap-churn,
/// front-end, core), the function, source line, PCs, data object and threads, the evidence (the
/// measured values against the rule's thresholds, with sample counts and confidence intervals,
/// each rule citing its source), the fix (computed where the data allows: a prefetch distance,
/// the fields to pad apart, the huge pages to use, the loop order, the fields to pack) and the
/// expected gain as a range with its assumptions. Findings are ranked by the cycles at stake,
/// not by samples. Classes checked and not found are listed with the figure that ruled them
/// out. Rules, thresholds and sources: docs/advise.md.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  spelunk record --emulate -o run.data -- ./app    # or on SPE hardware: spelunk record -- ./app
  spelunk advise run.data                          # findings, evidence, fixes, gains
  spelunk advise run.data --json > advice.json     # schema spelunk-advise/1.1
  spelunk advise run.data --html advice.html       # the findings as one offline page
  spelunk advise run.data --tid 4243               # only one thread's samples
  spelunk advise run.data --verify                 # emulated: re-run with each cause removed
  spelunk report run.data                          # the first three findings head the report

Walk: symptom (report) -> located cause (advise: where, evidence) -> fix (advise: computed) ->
gain measured (record the fixed program, then `spelunk diff OLD NEW`).")]
pub struct AdviseArgs {
    /// perf.data with Arm SPE data (or a `spelunk record --no-spe` recording: insufficient
    /// evidence, said with the reason)
    pub file: PathBuf,

    /// Print the advice as JSON (schema spelunk-advise/1.1)
    #[arg(long)]
    pub json: bool,

    /// Write the findings as one self-contained HTML page to FILE (opens offline)
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Show every finding (default: the first 10)
    #[arg(long)]
    pub all: bool,

    /// FILE is a raw SPE byte buffer, not a perf.data file (findings then name PCs only: a
    /// raw buffer has no symbols, processes or sampling interval). A file that is not a
    /// perf.data but decodes as SPE records is read this way without the flag.
    #[arg(long)]
    pub raw: bool,

    /// Counterfactual check of an emulated recording: run the recorded command again under
    /// the emulator with its own options, then once per finding (the first N, default 3) with
    /// the finding's cause removed in the model, and print predicted against re-emulated gain
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "3", conflicts_with = "raw")]
    pub verify: Option<usize>,

    #[command(flatten)]
    pub filter: FilterArgs,

    #[command(flatten)]
    pub symbols: SymbolArgs,

    #[command(flatten)]
    pub interp: CpuArgs,

    #[command(flatten)]
    pub sidecar: SidecarArgs,
}

pub fn run(args: AdviseArgs) -> anyhow::Result<ExitCode> {
    let advice = if let Some(sidecar) = timelines_only_sidecar(&args.file) {
        crate::common::guard_outputs(&[sidecar.as_path()], args.html.as_deref())?;
        spelunk_analysis::advise::without_samples(
            &sidecar.display().to_string(),
            None,
            false,
            "a recording of timelines alone (spelunk record --no-spe) has no SPE samples: \
             record with SPE (spelunk record) or the emulator (spelunk record --emulate) for \
             findings",
        )
    } else if args.raw || is_raw_spe_buffer(&args.file) {
        crate::common::guard_outputs(&[args.file.as_path()], args.html.as_deref())?;
        let midr = spelunk_engine::select::midr_override(
            args.interp.cpu_model.as_deref(),
            args.interp.midr.as_deref(),
        )?;
        spelunk_engine::advise::raw_buffer_advice(
            &args.file,
            midr,
            args.filter
                .filter(&spelunk_analysis::context::RecordingContext::default())?,
        )?
    } else {
        let [data, sidecar] = crate::common::recording_inputs(&args.file);
        crate::common::guard_outputs(&[data.as_path(), sidecar.as_path()], args.html.as_deref())?;
        let rec = args.interp.open(&args.file, &args.sidecar)?;
        let mut symbolizer = args.symbols.symbolizer(&rec)?;
        let req = ReportRequest {
            selection: args.filter.selection(None),
            symfs: args.symbols.symfs.clone(),
            advise: true,
            ..ReportRequest::default()
        };
        let mut advice = rec.requested_advice(&req, &mut symbolizer)?;
        if let Some(n) = args.verify {
            let plan = rec.verify_plan()?;
            let say = &mut |l: &str| eprintln!("spelunk advise --verify: {l}");
            let run = &mut |knobs: &[String]| {
                spelunk_record::flow::rerun_emulated(
                    &plan.command,
                    &plan.emulator_options,
                    knobs,
                    &mut |l| eprintln!("spelunk advise --verify: {l}"),
                )
                .map_err(|e| {
                    use spelunk_engine::recording::{error_chain, error_line};
                    error_line(error_chain(&e))
                })
            };
            advice.verification =
                Some(spelunk_engine::verify::verify(&advice, &plan, n, run, say)?);
        }
        advice
    };
    if let Some(out) = &args.html {
        spelunk_report::html::write_advice_page(&advice, out)?;
        eprintln!(
            "spelunk advise: wrote {} (open it in a browser, it needs no network)",
            out.display()
        );
    }
    if args.json {
        let text = serde_json::to_string_pretty(&advice).context("serialising the advice")?;
        println!("{text}");
    } else if args.html.is_none() {
        print!("{}", spelunk_report::advise_text::render(&advice, args.all));
    }
    Ok(ExitCode::SUCCESS)
}

/// A file whose first bytes are SPE records rather than a perf.data header.
fn is_raw_spe_buffer(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut head = Vec::with_capacity(4096);
    std::fs::File::open(path)
        .and_then(|f| f.take(4096).read_to_end(&mut head))
        .is_ok()
        && spelunk_perf::reader::looks_like_raw_spe(&head)
}
