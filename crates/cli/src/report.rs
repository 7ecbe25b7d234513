//! `spelunk report`: hotspots, memory latency by data source, data objects and threads from an
//! SPE recording, in the terminal, as JSON or as an HTML page. Wiring only: the analysis is spelunk-analysis.

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use spelunk_analysis::model::{RecordingInfo, Report};
use spelunk_analysis::profile::{
    HotspotSort, OrderedSample, ProfileBuilder, ProfileShard, ReportLimits,
};
use spelunk_decode::{SampleContext, SampleMap};
use spelunk_perf::sidecar::Sidecar;
use spelunk_report::html::{render_html, Topdown};
use spelunk_report::text::{render, HotspotsBy, TextOptions};
use spelunk_spe::{DecodeStats, SpeRecord, SpeSample};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::c2c::{check_line_size, C2cScan};
use crate::common::CpuArgs;
use crate::recording::{pc_range, FilterArgs, Recording, SymbolArgs};

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
  spelunk report perf.data --phase triad       # phases named with include/spelunk.h
  spelunk report perf.data --json > report.json
  spelunk report perf.data --html report.html  # one self-contained page, opens offline
  spelunk report perf.data --html report.html --topdown topdown.json
  spelunk report perf.data --sort latency --limit 10   # the 10 slowest functions (mean load latency)
  spelunk report perf.data --html report.html --c2c     # adds the cache-line sharing tables

Event classes for --event: load, store, memory, branch, l1d-access, l1d-miss, llc-access,
llc-miss, tlb-access, tlb-walk, branch-miss, remote, peer (loads served by another core's
cache), dram.

Orders for --sort (largest first; ties by samples): samples, loads, stores, latency (mean load
latency), p99, exec (mean execution latency), l1d-miss, llc-miss, tlb-walk, mispredicts, remote.")]
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
    /// [default: computed from the sidecar's PMU counts, when the recording has them]
    #[arg(long, value_name = "FILE", requires = "html")]
    pub topdown: Option<PathBuf>,

    /// Hotspot table to show
    #[arg(long, value_enum, default_value = "function")]
    pub by: By,

    #[command(flatten)]
    pub filter: FilterArgs,

    /// Only samples whose PC is in [FROM,TO) (hex or decimal)
    #[arg(long, value_name = "FROM,TO")]
    pub pc_range: Option<String>,

    /// Only samples in this function (as symbolized)
    #[arg(long, value_name = "NAME")]
    pub symbol: Option<String>,

    /// Order of the hotspot tables: samples, loads, stores, latency, p99, exec, l1d-miss,
    /// llc-miss, tlb-walk, mispredicts, remote (largest first; rows are cut after sorting)
    #[arg(long, default_value = "samples", value_name = "FIGURE", value_parser = parse_sort)]
    pub sort: HotspotSort,

    /// Rows per table (with --c2c: cache lines)
    #[arg(long, default_value_t = 20)]
    pub limit: usize,

    /// Add cache lines shared between cores (the tables of `spelunk c2c`, for the same samples)
    #[arg(long)]
    pub c2c: bool,

    /// With --c2c: cache line size in bytes (a power of two)
    #[arg(long, default_value_t = 64, value_name = "BYTES", requires = "c2c")]
    pub line_size: u64,

    #[command(flatten)]
    pub symbols: SymbolArgs,

    #[command(flatten)]
    pub interp: CpuArgs,
}

/// `--sort NAME`.
fn parse_sort(s: &str) -> Result<HotspotSort, String> {
    HotspotSort::parse(s).ok_or_else(|| {
        let known: Vec<&str> = HotspotSort::ALL.iter().map(|(n, _)| *n).collect();
        format!("unknown order '{s}'; known: {}", known.join(", "))
    })
}

/// Builds the report (shared with the HTML output), with the c2c analysis when `--c2c` asks
/// for it (its first pass rides on the report's decode).
pub fn build_report(args: &ReportArgs) -> anyhow::Result<Report> {
    if args.c2c {
        check_line_size(args.line_size)?;
    }
    let rec = Recording::open(&args.file, &args.interp)?;
    let objects = rec.ctx.data_objects(args.symbols.symfs.as_ref());
    let mut symbolizer = rec.symbolizer(&args.symbols)?;
    // Tables keep --limit rows (after sorting); a page keeps at least 50, as it sorts them
    // itself (and the JSON printed with it is the page's).
    let rows = if args.html.is_some() {
        args.limit.max(50)
    } else {
        args.limit
    };
    let limits = ReportLimits {
        hotspot_rows: rows,
        object_rows: rows,
        ..Default::default()
    };
    let mut filter = args.filter.filter(&rec.ctx)?;
    filter.pc_range = args.pc_range.as_deref().map(pc_range).transpose()?;

    if let Some(name) = &args.symbol {
        // First pass: the PCs of the recording; keep those in the named function.
        let mut pass = ProfileBuilder::new(&rec.interp, &objects, filter.clone(), limits);
        profile(&rec, &mut pass, None)?;
        let keep = rec.pcs_in_function(&mut symbolizer, pass.pcs(), name);
        if keep.is_empty() {
            bail!(
                "{}: no samples in a function named '{name}' (check the name with `spelunk report {}`)",
                rec.path(),
                rec.path()
            );
        }
        filter.pcs = Some(keep);
    }

    let mut c2c = args
        .c2c
        .then(|| C2cScan::new(&rec, filter.clone(), args.line_size));
    let mut builder = ProfileBuilder::new(&rec.interp, &objects, filter, limits)
        .with_phases(rec.ctx.phases.clone())
        .with_hotspot_sort(args.sort);
    let stats = profile(&rec, &mut builder, c2c.as_mut())?;
    let mut losses = rec.losses(&stats);
    losses.problems.extend(rec.ctx.problems.iter().cloned());
    let info = RecordingInfo {
        file: rec.path().to_string(),
        cpu_model: rec.interp.default.model.map(|m| m.name().to_string()),
        midr: rec.file.features.midr().map(|m| m.to_string()),
        emulated: rec
            .ctx
            .sidecar
            .as_ref()
            .is_some_and(|s| s.source == "emulator"),
        sampling: rec.ctx.sampling.clone(),
        losses,
        ..Default::default()
    };
    let mut report = builder.finish(
        &rec.ctx.spaces,
        &mut symbolizer,
        &rec.ctx.thread_names,
        info,
        rec.ctx.sidecar.as_deref(),
    );
    if let Some(c) = c2c {
        report.c2c = Some(c.finish(&rec, &stats, &objects, &mut symbolizer, args.limit)?);
    }
    Ok(report)
}

/// A decode worker's part of the report: aggregates its stream's samples into its own shard
/// of the profile (in parallel with the other streams) and passes on, in time order, what the
/// order-dependent part needs.
struct ProfileMap<'a>(ProfileShard<'a>);

impl SampleMap for ProfileMap<'_> {
    type Item = OrderedSample;
    #[inline]
    fn map(&mut self, r: &SpeRecord, c: &SampleContext) -> OrderedSample {
        self.0.add(&c.sample(r))
    }
}

/// [`ProfileMap`] that also passes the sample on, for the c2c scan (which takes samples in
/// time order).
struct ProfileMapWithSample<'a>(ProfileShard<'a>);

impl SampleMap for ProfileMapWithSample<'_> {
    type Item = (OrderedSample, SpeSample);
    #[inline]
    fn map(&mut self, r: &SpeRecord, c: &SampleContext) -> (OrderedSample, SpeSample) {
        let s = c.sample(r);
        (self.0.add(&s), s)
    }
}

/// Decodes `rec` into `builder` (and into `c2c`'s first pass): the same report as
/// `rec.decode(|s| builder.add(s))`, but the per-sample aggregation runs in the decode
/// workers, one shard per stream, and only the order-dependent part (first time, timeline
/// reservoir) in the time-ordered merge; the shards are merged at the end (sums).
fn profile(
    rec: &Recording,
    builder: &mut ProfileBuilder,
    c2c: Option<&mut C2cScan>,
) -> anyhow::Result<DecodeStats> {
    if builder.needs_first_time() {
        // A time range is relative to the first sample: the shards need it before the decode.
        let t0 = rec.first_time_ns()?;
        builder.set_first_time(t0);
    }
    let stats = match c2c {
        None => {
            let mut maps: Vec<_> = rec
                .plan
                .streams
                .iter()
                .map(|_| ProfileMap(builder.shard()))
                .collect();
            let stats = rec.decode_map(&mut maps, |o| builder.add_ordered(o))?;
            merge_into(builder, maps.into_iter().map(|m| m.0).collect());
            stats
        }
        Some(c2c) => {
            let mut maps: Vec<_> = rec
                .plan
                .streams
                .iter()
                .map(|_| ProfileMapWithSample(builder.shard()))
                .collect();
            let stats = rec.decode_map(&mut maps, |(o, s)| {
                builder.add_ordered(o);
                c2c.add(s);
            })?;
            merge_into(builder, maps.into_iter().map(|m| m.0).collect());
            stats
        }
    };
    Ok(stats)
}

/// Adds the workers' shards to `builder`.
fn merge_into<'a>(builder: &mut ProfileBuilder<'a>, shards: Vec<ProfileShard<'a>>) {
    if let Some(all) = ProfileShard::merge_all(shards) {
        builder.merge(all);
    }
}

/// Top-down from the PMU counts in the recording's sidecar (what `spelunk record --emulate`
/// writes), for the HTML page when no `--topdown` file is given. A recording without counts
/// has none; a failure is reported and the page is written without the section.
fn sidecar_topdown(file: &Path) -> Option<Topdown> {
    let sc = Sidecar::find(file).ok().flatten()?;
    if sc.counters.totals.is_empty() {
        return None;
    }
    let path = Sidecar::path_for(file);
    let text = match crate::topdown::sidecar_json(&sc, &path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("spelunk report: top-down section left out: {e:#}");
            return None;
        }
    };
    match Topdown::from_json(&text, &path.display().to_string()) {
        Ok(t) => Some(t),
        Err(e) => {
            eprintln!("spelunk report: top-down section left out: {e}");
            None
        }
    }
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
    let mut topdown = args.topdown.as_deref().map(read_topdown).transpose()?;
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
        if topdown.is_none() {
            topdown = sidecar_topdown(&args.file);
        }
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
        if let Some(c2c) = &report.c2c {
            print!("\n{}", spelunk_report::c2c_text::render(c2c));
        }
    }
    Ok(ExitCode::SUCCESS)
}
