//! `spelunk report`: hotspots, memory latency by data source, data objects and threads from an
//! SPE recording, in the terminal, as JSON or as an HTML page. Wiring only: the analysis is spelunk-analysis.

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use spelunk_analysis::model::Report;
use spelunk_analysis::profile::{HotspotSort, ProfileBuilder, ReportLimits};
use spelunk_engine::parallel::profile;
use spelunk_engine::report::{check_line_size, C2cOptions, ReportOptions};
use spelunk_perf::sidecar::Sidecar;
use spelunk_pmu::sidecar::SidecarTopdown;
use spelunk_report::html::{render_html, Topdown};
use spelunk_report::text::{render, HotspotsBy, TextOptions};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use crate::common::{CpuArgs, SidecarArgs};
use crate::recording::{pc_range, FilterArgs, SymbolArgs};

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
  spelunk report run.data.spelunk.json          # the timelines of `spelunk record --no-spe`

Event classes for --event: load, store, memory, branch, l1d-access, l1d-miss, llc-access,
llc-miss, tlb-access, tlb-walk, branch-miss, remote, peer (loads served by another core's
cache), dram.

Orders for --sort (largest first; ties by samples): samples, loads, stores, latency (mean load
latency), p99, exec (mean execution latency), l1d-miss, llc-miss, tlb-walk, mispredicts, remote.")]
pub struct ReportArgs {
    /// perf.data with Arm SPE data (or a `spelunk record --no-spe` recording: FILE.spelunk.json,
    /// also found as FILE when FILE does not exist)
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
    #[arg(long, default_value = "samples", value_name = "FIGURE", value_parser = HotspotSort::parse_or_explain)]
    pub sort: HotspotSort,

    /// Rows per table (with --c2c: cache lines)
    #[arg(long, default_value_t = 20, value_name = "N", allow_negative_numbers = true, value_parser = crate::common::values::rows)]
    pub limit: usize,

    /// Add cache lines shared between cores (the tables of `spelunk c2c`, for the same samples)
    #[arg(long)]
    pub c2c: bool,

    /// With --c2c: cache line size in bytes (a power of two)
    #[arg(long, default_value_t = 64, value_name = "BYTES", requires = "c2c", allow_negative_numbers = true, value_parser = crate::common::values::line_size)]
    pub line_size: u64,

    #[command(flatten)]
    pub symbols: SymbolArgs,

    #[command(flatten)]
    pub interp: CpuArgs,

    #[command(flatten)]
    pub sidecar: SidecarArgs,
}

/// Builds the report (shared with the HTML output), with the c2c analysis when `--c2c` asks
/// for it (its first pass rides on the report's decode), and the sidecar it was built with.
/// A report without samples is an error (that says when the recording is damaged).
pub fn build_report(args: &ReportArgs) -> anyhow::Result<(Report, Option<Arc<Sidecar>>)> {
    if args.c2c {
        check_line_size(args.line_size)?;
    }
    let rec = args.interp.open(&args.file, &args.sidecar)?;
    let objects = rec.ctx.data_objects(args.symbols.symfs.as_ref());
    let mut symbolizer = args.symbols.symbolizer(&rec)?;
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
                "{}: no samples in a function named '{name}' (check the name with `spelunk report {}`){}",
                rec.path(),
                rec.path(),
                rec.damage_note()
            );
        }
        filter.pcs = Some(keep);
    }

    let opts = ReportOptions {
        filter,
        limits,
        sort: args.sort,
        c2c: args.c2c.then_some(C2cOptions {
            line_size: args.line_size,
            limit: args.limit,
        }),
    };
    let report = rec.report(&objects, &mut symbolizer, opts)?;
    rec.require_samples(&report)?;
    Ok((report, rec.ctx.sidecar.clone()))
}

/// Top-down from the PMU counts in the recording's sidecar `sc` (what `spelunk record
/// --emulate` writes), for the HTML page when no `--topdown` file is given. A recording
/// without counts has none; a failure is reported and the page is written without the section.
fn sidecar_topdown(sc: &Sidecar, file: &Path) -> Option<Topdown> {
    if sc.counters.totals.is_empty() {
        return None;
    }
    let path = Sidecar::path_for(file);
    // As `spelunk topdown --import FILE --per-phase` computes it.
    let opts = SidecarTopdown {
        per_phase: true,
        ..SidecarTopdown::default()
    };
    let computed = spelunk_pmu::sidecar::topdown(sc, &path.display().to_string(), &opts)
        .map_err(anyhow::Error::from)
        .and_then(|r| Ok(Topdown::from_report(&r)?));
    match computed {
        Ok(t) => Some(t),
        Err(e) => {
            eprintln!("spelunk report: top-down section left out: {e:#}");
            None
        }
    }
}

/// Reads the output of `spelunk topdown --json` for the HTML page.
fn read_topdown(path: &Path) -> anyhow::Result<Topdown> {
    let text = spelunk_fsio::read_to_string_bounded(path, 256 << 20)
        .with_context(|| format!("reading top-down results {}", path.display()))?;
    Ok(Topdown::from_json(&text, &path.display().to_string())?)
}

/// Writes the HTML page (with top-down results, when given) to `out`.
fn write_html(report: &Report, topdown: Option<&Topdown>, out: &Path) -> anyhow::Result<()> {
    let page = render_html(report, topdown)?;
    spelunk_fsio::write_atomic(out, page.as_bytes())
        .with_context(|| format!("writing {}", out.display()))?;
    let what = match &report.timelines {
        Some(t) if !t.spe => "timelines only".to_string(),
        _ => format!("{} samples", report.recording.samples_selected),
    };
    eprintln!(
        "spelunk report: wrote {} ({what}; open it in a browser, it needs no network)",
        out.display()
    );
    Ok(())
}

/// The sidecar to read when the recording is its timelines alone (`spelunk record --no-spe`):
/// FILE itself when it is a `.spelunk.json`, or FILE's sidecar when FILE does not exist.
fn timelines_only_sidecar(file: &Path) -> Option<PathBuf> {
    if file.to_string_lossy().ends_with(".spelunk.json") {
        return Some(file.to_path_buf());
    }
    let sidecar = Sidecar::path_for(file);
    (!file.exists() && sidecar.exists()).then_some(sidecar)
}

/// `spelunk report` of a recording without samples (`--no-spe`, or the runtime's logs alone):
/// the timelines in text, JSON or HTML. `file` names it.
fn run_timelines_only(args: &ReportArgs, sc: Sidecar, file: &str) -> anyhow::Result<ExitCode> {
    if args.c2c || args.symbol.is_some() || args.pc_range.is_some() || args.topdown.is_some() {
        bail!(
            "{file}: a recording without SPE samples (spelunk record --no-spe, or the \
             runtime's logs) has only its timelines; --c2c, --symbol, --pc-range and --topdown \
             need samples"
        );
    }
    let file = file.to_string();
    let Some(mut report) = spelunk_analysis::timelines::timelines_report(&sc, &file) else {
        bail!(
            "{file}: this sidecar has no timelines (no config.timeline_clock, no capacity), and \
             a sidecar alone holds no samples: give the perf.data it belongs to"
        );
    };
    // What reading the sidecar dropped is damage like a recording's.
    report
        .recording
        .losses
        .problems
        .extend(sc.problems.iter().cloned());
    if let Some(out) = &args.html {
        write_html(&report, None, out)?;
    }
    if args.json {
        let text = serde_json::to_string_pretty(&report).context("serialising the report")?;
        println!("{text}");
    } else if args.html.is_none() {
        print!(
            "{}",
            render(
                &report,
                &TextOptions {
                    by: HotspotsBy::Function,
                    rows: args.limit
                }
            )
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    if let Some(sidecar) = timelines_only_sidecar(&args.file) {
        let inputs = [sidecar.as_path()];
        crate::common::guard_outputs(
            &inputs,
            &args.html.iter().map(|p| p.as_path()).collect::<Vec<_>>(),
        )?;
        let sc = Sidecar::read(&sidecar)?;
        return run_timelines_only(&args, sc, &sidecar.display().to_string());
    }
    if !args.file.exists() {
        // A run of the LD_PRELOAD runtime alone: its logs BASE.rt.PID.N (kept as they are).
        if let Some((sc, merged)) = spelunk_record::runtime_log::sidecar_from_logs(&args.file) {
            for p in &merged.problems {
                eprintln!("spelunk report: warning: {p}");
            }
            let name = format!("{}.rt.*", args.file.display());
            return run_timelines_only(&args, sc, &name);
        }
        bail!(
            "{}: no such file. A `spelunk record --no-spe` recording is only its sidecar \
             ({}): `spelunk report` reads it when given FILE.spelunk.json, or FILE when FILE \
             does not exist and its sidecar does; for the logs of the runtime run alone \
             (SPELUNK_OUTPUT=BASE), give BASE",
            args.file.display(),
            Sidecar::path_for(&args.file).display()
        );
    }
    let [data, sidecar] = crate::common::recording_inputs(&args.file);
    let mut inputs = vec![data.as_path(), sidecar.as_path()];
    inputs.extend(args.topdown.as_deref());
    crate::common::guard_outputs(
        &inputs,
        &args.html.iter().map(|p| p.as_path()).collect::<Vec<_>>(),
    )?;
    let mut topdown = args.topdown.as_deref().map(read_topdown).transpose()?;
    let (report, sidecar) = build_report(&args)?;
    if let Some(out) = &args.html {
        if topdown.is_none() {
            topdown = sidecar
                .as_deref()
                .and_then(|sc| sidecar_topdown(sc, &args.file));
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
