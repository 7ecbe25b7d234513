//! `spelunk report`: hotspots, memory latency by data source, data objects and threads from an
//! SPE recording, in the terminal, as JSON or as an HTML page. Wiring only: the analysis is spelunk-analysis.

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use spelunk_analysis::context::RecordingContext;
use spelunk_analysis::model::{Losses, RecordingInfo, Report};
use spelunk_analysis::objects::DataObjects;
use spelunk_analysis::profile::{EventClass, Filter, ProfileBuilder, ReportLimits};
use spelunk_analysis::symbolize::CodeSymbolizer;
use spelunk_decode::{plan_from_perf, ContainerLosses, DecodeOptions, DecodePlan, PipelineError};
use spelunk_perf::PerfDataFile;
use spelunk_report::html::{render_html, Topdown};
use spelunk_report::text::{render, HotspotsBy, TextOptions};
use spelunk_spe::{DecodeStats, Interpretation};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::common::CpuArgs;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum By {
    Function,
    Line,
    Instruction,
    Dso,
}

/// Report hotspots, load latency by data source, data objects and threads of an SPE recording.
///
/// Samples are attributed exactly (SPE has no skid) to the instruction, function, source line
/// and DSO of their PC, and loads and stores to the data object their address falls in (globals
/// from the binaries' symbol tables, heap, stack, anonymous and annotated regions). Every figure
/// is defined in docs/report.md.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  spelunk report perf.data                     # hotspots by function, data sources, objects
  spelunk report perf.data --by line --event l1d-miss
  spelunk report perf.data --symbol triad --by instruction
  spelunk report perf.data --time-range 0.5,1.0 --tid 4243
  spelunk report perf.data --json > report.json
  spelunk report perf.data --html report.html  # one self-contained page, opens offline
  spelunk report perf.data --html report.html --topdown topdown.json

Event classes for --event: load, store, memory, branch, l1d-access, l1d-miss, llc-access,
llc-miss, tlb-access, tlb-walk, branch-miss, remote, peer (loads served by another core's
cache), dram.")]
pub struct ReportArgs {
    /// perf.data with Arm SPE data
    pub file: PathBuf,

    /// Print the report as JSON (schema spelunk-report/1) instead of tables
    #[arg(long)]
    pub json: bool,

    /// Write the report as one self-contained HTML page to FILE (opens offline; docs/report.md)
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// With --html: add a top-down section from FILE, the output of `spelunk topdown --json`
    #[arg(long, value_name = "FILE", requires = "html")]
    pub topdown: Option<PathBuf>,

    /// Hotspot table to show
    #[arg(long, value_enum, default_value = "function")]
    pub by: By,

    /// Only samples of this event class (see below)
    #[arg(long, value_name = "CLASS")]
    pub event: Option<String>,

    /// Only these processes (comma-separated)
    #[arg(long, value_delimiter = ',')]
    pub pid: Vec<u32>,

    /// Only these threads (comma-separated)
    #[arg(long, value_delimiter = ',')]
    pub tid: Vec<u32>,

    /// Only samples from these CPUs (comma-separated)
    #[arg(long = "cpu", value_delimiter = ',')]
    pub cpus: Vec<u32>,

    /// Only samples in [FROM,TO) seconds since the first sample (e.g. 0.5,1.25)
    #[arg(long, value_name = "FROM,TO")]
    pub time_range: Option<String>,

    /// Only samples whose PC is in [FROM,TO) (hex or decimal)
    #[arg(long, value_name = "FROM,TO")]
    pub pc_range: Option<String>,

    /// Only samples in this function (as symbolized)
    #[arg(long, value_name = "NAME")]
    pub symbol: Option<String>,

    /// Rows per table
    #[arg(long, default_value_t = 20)]
    pub limit: usize,

    /// Look for the recorded binaries under this directory (like perf --symfs)
    #[arg(long, value_name = "DIR")]
    pub symfs: Option<PathBuf>,

    #[command(flatten)]
    pub interp: CpuArgs,
}

fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn pair<T>(s: &str, what: &str, parse: impl Fn(&str) -> Option<T>) -> anyhow::Result<(T, T)> {
    let Some((a, b)) = s.split_once(',') else {
        bail!("{what} '{s}': expected FROM,TO")
    };
    match (parse(a), parse(b)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => bail!("{what} '{s}': expected two numbers FROM,TO"),
    }
}

fn filter_from(args: &ReportArgs) -> anyhow::Result<Filter> {
    let event = match &args.event {
        Some(e) => Some(EventClass::parse(e).ok_or_else(|| {
            let known: Vec<&str> = EventClass::ALL.iter().map(|(n, _)| *n).collect();
            anyhow::anyhow!("unknown event class '{e}'; known: {}", known.join(", "))
        })?),
        None => None,
    };
    Ok(Filter {
        pids: args.pid.clone(),
        tids: args.tid.clone(),
        cpus: args.cpus.clone(),
        time_range_s: args
            .time_range
            .as_deref()
            .map(|s| pair(s, "--time-range", |x| x.trim().parse::<f64>().ok()))
            .transpose()?,
        pc_range: args
            .pc_range
            .as_deref()
            .map(|s| pair(s, "--pc-range", parse_u64))
            .transpose()?,
        event,
        pcs: None,
    })
}

/// Decodes `file` once, feeding every sample to `f`; returns the decoder's counters.
fn decode_all(
    file: &PerfDataFile,
    plan: &DecodePlan,
    mut f: impl FnMut(&spelunk_spe::SpeSample),
) -> anyhow::Result<DecodeStats> {
    let outcome = spelunk_decode::decode(file, plan, &DecodeOptions::default(), |s| {
        f(s);
        Ok::<(), std::convert::Infallible>(())
    });
    match outcome {
        Ok(o) => Ok(o.stats),
        Err(PipelineError::Sink(never)) => match never {},
        Err(e) => Err(e.into()),
    }
}

fn losses(stats: &DecodeStats, c: &ContainerLosses) -> Losses {
    Losses {
        undecodable_bytes: stats.bad_bytes,
        dropped_records: stats.dropped_records,
        incomplete_records: stats.incomplete_records,
        truncated_packets: stats.truncated_packets,
        aux_truncated: c.aux_truncated,
        aux_partial: c.aux_partial,
        aux_collision: c.aux_collision,
        lost_events: c.lost_events,
        lost_records: c.lost_records,
        problems: c.problems.clone(),
    }
}

/// Builds the report (shared with the HTML output).
pub fn build_report(args: &ReportArgs) -> anyhow::Result<Report> {
    let file = PerfDataFile::open_spe(&args.file)?;
    let (plan, container) = plan_from_perf(&file);
    let interp: Interpretation = args.interp.interpretation(&file, &plan.streams)?;
    let ctx = RecordingContext::from_perf(&file);
    let objects = DataObjects::build(&ctx.spaces, args.symfs.as_ref());
    let mut symbolizer = CodeSymbolizer::new(args.symfs.clone());
    let limits = ReportLimits {
        hotspot_rows: args.limit.max(50),
        object_rows: args.limit.max(50),
        ..Default::default()
    };
    let mut filter = filter_from(args)?;

    if let Some(name) = &args.symbol {
        // First pass: the PCs of the recording; keep those in the named function.
        let mut pass = ProfileBuilder::new(&interp, &objects, filter.clone(), limits);
        decode_all(&file, &plan, |s| pass.add(s))?;
        let pcs: Vec<(Option<u32>, u64)> = pass.pcs().collect();
        let requests: Vec<_> = pcs
            .iter()
            .filter_map(|(pid, pc)| {
                ctx.spaces
                    .lookup(*pid, *pc, None)
                    .map(|m| ((*pid, *pc), (m.clone(), *pc)))
            })
            .collect();
        let locs =
            symbolizer.symbolize(&requests.iter().map(|(_, r)| r.clone()).collect::<Vec<_>>());
        let keep: HashSet<(Option<u32>, u64)> = requests
            .iter()
            .zip(locs)
            .filter(|(_, l)| l.function.as_deref() == Some(name.as_str()))
            .map(|((k, _), _)| *k)
            .collect();
        if keep.is_empty() {
            bail!("{}: no samples in a function named '{name}' (check the name with `spelunk report {}`)", file.path(), file.path());
        }
        filter.pcs = Some(keep);
    }

    let mut builder = ProfileBuilder::new(&interp, &objects, filter, limits);
    let stats = decode_all(&file, &plan, |s| builder.add(s))?;
    let info = RecordingInfo {
        file: file.path().to_string(),
        cpu_model: interp.default.model.map(|m| m.name().to_string()),
        midr: file.features.midr().map(|m| m.to_string()),
        sampling: ctx.sampling.clone(),
        losses: losses(&stats, &container),
        ..Default::default()
    };
    Ok(builder.finish(&ctx.spaces, &mut symbolizer, &ctx.thread_names, info))
}

/// Reads the output of `spelunk topdown --json` for the HTML page.
fn read_topdown(path: &Path) -> anyhow::Result<Topdown> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading top-down results {}", path.display()))?;
    Ok(Topdown::from_json(&text, &path.display().to_string())?)
}

/// Writes the HTML page (with top-down results, when given) to `out`.
fn write_html(report: &Report, topdown: Option<&Topdown>, out: &Path) -> anyhow::Result<()> {
    let page = render_html(report, topdown)?;
    std::fs::write(out, page).with_context(|| format!("writing {}", out.display()))?;
    eprintln!(
        "spelunk report: wrote {} ({} samples; open it in a browser, it needs no network)",
        out.display(),
        report.recording.samples_selected
    );
    Ok(())
}

pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let topdown = args.topdown.as_deref().map(read_topdown).transpose()?;
    let report = build_report(&args)?;
    if report.recording.samples_selected == 0 {
        let why = if report.filter.is_empty() {
            String::new()
        } else {
            format!(" matched the filter ({})", report.filter.join(", "))
        };
        bail!(
            "{}: no samples{why}; {} records were decoded",
            report.recording.file,
            report.recording.samples_decoded
        );
    }
    if let Some(out) = &args.html {
        write_html(&report, topdown.as_ref(), out)?;
    }
    if args.json {
        let text = serde_json::to_string_pretty(&report).context("serialising the report")?;
        println!("{text}");
    } else if args.html.is_none() {
        let by = match args.by {
            By::Function => HotspotsBy::Function,
            By::Line => HotspotsBy::Line,
            By::Instruction => HotspotsBy::Instruction,
            By::Dso => HotspotsBy::Dso,
        };
        print!(
            "{}",
            render(
                &report,
                &TextOptions {
                    by,
                    rows: args.limit
                }
            )
        );
    }
    Ok(ExitCode::SUCCESS)
}
