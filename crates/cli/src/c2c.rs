//! `spelunk c2c`: cache lines shared between cores, ranked by peer snoops, with offsets, PCs,
//! threads and a false/true-sharing verdict. Wiring only: the analysis is
//! spelunk_analysis::c2c.

use anyhow::{bail, Context};
use clap::Args;
use spelunk_analysis::c2c::{C2cBuilder, C2cReport, LineScan, C2C_SCHEMA};
use spelunk_analysis::objects::DataObjects;
use spelunk_analysis::profile::Filter;
use spelunk_analysis::select::Selector;
use spelunk_analysis::symbolize::CodeSymbolizer;
use spelunk_spe::{DecodeStats, SpeSample};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::common::{CpuArgs, SidecarArgs};
use crate::recording::{FilterArgs, Recording, SymbolArgs};

/// Find cache lines that move between cores (false and true sharing), like `perf c2c report`.
///
/// A load served by another core's cache (a peer snoop in SPE's data source) shows a cache line
/// that moved between cores. Lines are ranked by their peer-snoop loads; for each line the
/// offsets touched, the code addresses, source lines and threads touching each offset, loads
/// vs stores, local vs remote, and a verdict: false sharing (one thread writes an offset that
/// another thread, using other offsets of the line, never touches: pad the data apart), true
/// sharing (threads write and access the same offset: the data itself is shared), or none.
/// The columns are perf c2c's ([SPE methodology §5.2]); every figure is defined in docs/c2c.md.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  spelunk c2c perf.data                      # lines ranked by peer snoops, with verdicts
  spelunk c2c perf.data --limit 5            # the five most shared lines
  spelunk c2c perf.data --line-size 128      # pairs of lines (adjacent-line prefetch)
  spelunk c2c perf.data --tid 4242,4243 --json > c2c.json
  spelunk c2c perf.data --html c2c.html      # the tables as one self-contained page
  spelunk report perf.data --html report.html --c2c   # the same tables in the full report

Record with loads and stores and physical addresses, e.g.
  perf record -e arm_spe_0/ts_enable=1,pa_enable=1,load_filter=1,store_filter=1/ -- ./app")]
pub struct C2cArgs {
    /// perf.data with Arm SPE data
    #[arg(default_value = "perf.data")]
    pub file: PathBuf,

    /// Cache line size in bytes (a power of two)
    #[arg(long, default_value_t = 64, value_name = "BYTES", allow_negative_numbers = true, value_parser = crate::common::values::line_size)]
    pub line_size: u64,

    /// Lines to show
    #[arg(long, default_value_t = 20, value_name = "N", allow_negative_numbers = true, value_parser = crate::common::values::rows)]
    pub limit: usize,

    /// Print the report as JSON (schema spelunk-c2c/1)
    #[arg(long)]
    pub json: bool,

    /// Write the tables as one self-contained HTML page to FILE (opens offline; docs/c2c.md)
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    #[command(flatten)]
    pub symbols: SymbolArgs,

    #[command(flatten)]
    pub filter: FilterArgs,

    #[command(flatten)]
    pub interp: CpuArgs,

    #[command(flatten)]
    pub sidecar: SidecarArgs,
}

/// `--line-size`: a power of two of at least 8 bytes.
pub fn check_line_size(bytes: u64) -> anyhow::Result<()> {
    if !bytes.is_power_of_two() || bytes < 8 {
        bail!("--line-size {bytes}: expected a power of two of at least 8");
    }
    Ok(())
}

/// The c2c analysis of one recording, shared by `spelunk c2c` and `spelunk report --c2c`: pass 1
/// ([`C2cScan::add`]) is fed every decoded sample — by its own decode, or by the report's, so
/// the report pays one pass less — and [`C2cScan::finish`] runs pass 2 over the lines with peer
/// snoops (if any) and assembles the report. The filter is applied exactly as the report's.
pub struct C2cScan<'a> {
    sel: Selector<'a>,
    scan: LineScan,
    line_size: u64,
}

impl<'a> C2cScan<'a> {
    /// `line_size` must have passed [`check_line_size`].
    pub fn new(rec: &'a Recording, filter: Filter, line_size: u64) -> Self {
        C2cScan {
            sel: Selector::new(&rec.interp, filter),
            scan: LineScan::new(line_size),
            line_size,
        }
    }

    /// Pass 1: one decoded sample (in time order).
    pub fn add(&mut self, s: &SpeSample) {
        if let Some(x) = self.sel.select(s) {
            self.scan.add(s, &x);
        }
    }

    /// Samples offered to and selected by pass 1.
    pub fn decoded(&self) -> u64 {
        self.sel.decoded
    }
    pub fn selected(&self) -> u64 {
        self.sel.selected
    }
    /// Selected loads and stores with a data address.
    pub fn records(&self) -> u64 {
        self.scan.totals.records
    }

    /// Pass 2 (a decode of `rec`, skipped when no line had a peer snoop) and the report, at
    /// most `limit` lines; `stats` are pass 1's decode statistics (for the losses).
    pub fn finish(
        self,
        rec: &Recording,
        stats: &DecodeStats,
        objects: &DataObjects,
        symbolizer: &mut CodeSymbolizer,
        limit: usize,
    ) -> anyhow::Result<C2cReport> {
        let filter = self.sel.filter.clone();
        let described = filter.describe();
        let mut builder = C2cBuilder::new(&self.scan);
        if !self.scan.peer_lines.is_empty() {
            let mut sel2 = Selector::new(&rec.interp, filter);
            rec.decode(|s| {
                if let Some(x) = sel2.select(s) {
                    builder.add(s, &x);
                }
            })?;
        }
        let (lines, totals) = builder.finish(
            &rec.ctx.spaces,
            objects,
            symbolizer,
            &rec.ctx.thread_names,
            self.scan.totals.clone(),
            limit,
        );
        Ok(C2cReport {
            schema: C2C_SCHEMA,
            file: rec.path().to_string(),
            line_size: self.line_size,
            samples_decoded: self.sel.decoded,
            samples_selected: self.sel.selected,
            filter: described,
            totals,
            lines,
            losses: rec.losses(stats),
        })
    }
}

pub fn build(args: &C2cArgs) -> anyhow::Result<C2cReport> {
    check_line_size(args.line_size)?;
    let rec = Recording::open(&args.file, &args.interp, &args.sidecar)?;
    let filter = args.filter.filter(&rec.ctx)?;
    let described = filter.describe();

    // Pass 1: which lines saw peer snoops.
    let mut scan = C2cScan::new(&rec, filter, args.line_size);
    let stats = rec.decode(|s| scan.add(s))?;
    let path = rec.path().to_string();
    if scan.selected() == 0 {
        bail!(
            "{path}: no samples matched{}; {} records were decoded{}",
            if described.is_empty() {
                String::new()
            } else {
                format!(" the filter ({})", described.join(", "))
            },
            scan.decoded(),
            rec.damage_note()
        );
    }
    if scan.records() == 0 {
        bail!(
            "{path}: none of the {} selected samples is a load or store with a data address (record with load_filter=1,store_filter=1){}",
            scan.selected(),
            rec.damage_note()
        );
    }

    // Pass 2: details of those lines.
    let objects = rec.ctx.data_objects(args.symbols.symfs.as_ref());
    let mut symbolizer = rec.symbolizer(&args.symbols)?;
    scan.finish(&rec, &stats, &objects, &mut symbolizer, args.limit)
}

pub fn run(args: C2cArgs) -> anyhow::Result<ExitCode> {
    let [data, sidecar] = crate::common::recording_inputs(&args.file);
    crate::common::guard_outputs(
        &[&data, &sidecar],
        &args.html.iter().map(|p| p.as_path()).collect::<Vec<_>>(),
    )?;
    let report = build(&args)?;
    if let Some(out) = &args.html {
        let page = spelunk_report::html::render_c2c_html(&report)?;
        spelunk_fsio::write_atomic(out, page.as_bytes())
            .with_context(|| format!("writing {}", out.display()))?;
        eprintln!(
            "spelunk c2c: wrote {} ({} cache lines; open it in a browser, it needs no network)",
            out.display(),
            report.lines.len()
        );
    }
    if args.json {
        let text = serde_json::to_string_pretty(&report).context("serialising the report")?;
        println!("{text}");
    } else if args.html.is_none() {
        print!("{}", spelunk_report::c2c_text::render(&report));
    }
    Ok(ExitCode::SUCCESS)
}
