//! `spelunk report`: hotspots, memory latency by data source, data objects and threads from an
//! SPE recording, in the terminal, as JSON or as an HTML page. Wiring only: the flows are
//! spelunk_engine::report, the analysis spelunk-analysis, the page spelunk_report::html.

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use spelunk_analysis::model::Report;
use spelunk_analysis::profile::HotspotSort;
use spelunk_engine::report::{
    check_line_size, timelines_only_report, timelines_only_sidecar, C2cOptions, ReportRequest,
};
use spelunk_perf::sidecar::Sidecar;
use spelunk_pmu::flow::page_topdown;
use spelunk_report::html::{write_report_page, Topdown};
use spelunk_report::text::{render, HotspotsBy, TextOptions};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use crate::common::{CpuArgs, SidecarArgs};
use crate::recording::{FilterArgs, SymbolArgs};

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

Orders for --sort (largest first; ties by samples): cost (the default: the estimated cycles, the
load-to-use latency of the loads and a quarter cycle per other operation; docs/report.md), samples,
loads, stores, latency (mean load latency), p99, exec (mean execution latency), l1d-miss,
llc-miss, tlb-walk, mispredicts, remote.

The report starts with the advisor's first three findings (spelunk advise for their evidence,
fixes and gains; --no-advice leaves them out).")]
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

    /// Only samples in this function: its name as the report shows it, the mangled name, or a
    /// short form without parameters (which takes in every overload)
    #[arg(long, value_name = "NAME")]
    pub symbol: Option<String>,

    /// Order of the hotspot tables: cost (estimated cycles: what costs time, not what is
    /// frequent), samples, loads, stores, latency, p99, exec, l1d-miss, llc-miss, tlb-walk,
    /// mispredicts, remote (largest first; rows are cut after sorting)
    #[arg(long, default_value = "cost", value_name = "FIGURE", value_parser = HotspotSort::parse_or_explain)]
    pub sort: HotspotSort,

    /// Leave out the advisor's findings (the report's first lines; `spelunk advise`)
    #[arg(long)]
    pub no_advice: bool,

    /// Rows per table (with --c2c: cache lines)
    #[arg(long, default_value_t = 20, value_name = "N", allow_negative_numbers = true, value_parser = crate::common::values::rows)]
    pub limit: usize,

    /// Add cache lines shared between cores (the tables of `spelunk c2c`, for the same samples)
    #[arg(long)]
    pub c2c: bool,

    /// With --c2c: cache line size in bytes (a power of two)
    #[arg(long, default_value_t = 64, value_name = "BYTES", requires = "c2c", allow_negative_numbers = true, value_parser = crate::common::values::line_size)]
    pub line_size: u64,

    /// Print names in full in the text tables (by default they are cut to the terminal's
    /// width, or $COLUMNS; --json always has them in full)
    #[arg(long)]
    pub wide: bool,

    #[command(flatten)]
    pub symbols: SymbolArgs,

    #[command(flatten)]
    pub interp: CpuArgs,

    #[command(flatten)]
    pub sidecar: SidecarArgs,
}

impl ReportArgs {
    /// The flags as spelunk-engine's request.
    fn request(&self) -> ReportRequest {
        ReportRequest {
            selection: self.filter.selection(self.pc_range.as_ref()),
            function: self.symbol.clone(),
            sort: self.sort,
            rows: self.limit,
            page: self.html.is_some(),
            c2c: self.c2c.then_some(C2cOptions {
                line_size: self.line_size,
                limit: self.limit,
            }),
            advise: !self.no_advice,
            symfs: self.symbols.symfs.clone(),
        }
    }
}

/// Builds the report (shared with the HTML output) and returns the sidecar it was built with.
pub fn build_report(args: &ReportArgs) -> anyhow::Result<(Report, Option<Arc<Sidecar>>)> {
    if args.c2c {
        check_line_size(args.line_size)?;
    }
    let rec = args.interp.open(&args.file, &args.sidecar)?;
    let mut symbolizer = args.symbols.symbolizer(&rec)?;
    let report = rec.requested_report(&args.request(), &mut symbolizer)?;
    Ok((report, rec.ctx.sidecar.clone()))
}

/// Top-down from the PMU counts in the recording's sidecar `sc`, for the HTML page when no
/// `--topdown` file is given; a failure is reported and the page is written without it.
fn sidecar_topdown(sc: &Sidecar, file: &Path) -> Option<Topdown> {
    let computed = page_topdown(sc, file)?
        .map_err(anyhow::Error::from)
        .and_then(|r| Ok(Topdown::from_report(&r)?));
    computed
        .map_err(|e| eprintln!("spelunk report: top-down section left out: {e:#}"))
        .ok()
}

/// Writes the HTML page (with top-down results, when given) to `out`.
fn write_html(report: &Report, topdown: Option<&Topdown>, out: &Path) -> anyhow::Result<()> {
    let what = write_report_page(report, topdown, out)?;
    eprintln!(
        "spelunk report: wrote {} ({what}; open it in a browser, it needs no network)",
        out.display()
    );
    Ok(())
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
    let report = timelines_only_report(&sc, file)?;
    if let Some(out) = &args.html {
        write_html(&report, None, out)?;
    }
    if args.json {
        let text = serde_json::to_string_pretty(&report).context("serialising the report")?;
        println!("{text}");
    } else if args.html.is_none() {
        let opts = TextOptions {
            by: HotspotsBy::Function,
            rows: args.limit,
        };
        print!("{}", render(&report, &opts));
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    spelunk_report::set_table_width(if args.wide {
        None
    } else {
        crate::common::terminal_width()
    });
    if let Some(sidecar) = timelines_only_sidecar(&args.file) {
        let inputs = [sidecar.as_path()];
        crate::common::guard_outputs(&inputs, args.html.as_deref())?;
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
    crate::common::guard_outputs(&inputs, args.html.as_deref())?;
    let mut topdown = args.topdown.as_deref().map(Topdown::read).transpose()?;
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
