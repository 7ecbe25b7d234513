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
use std::sync::{Arc, Condvar, Mutex};

use crate::c2c::{check_line_size, C2cScan};
use crate::common::{CpuArgs, SidecarArgs};
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
    #[arg(long, default_value = "samples", value_name = "FIGURE", value_parser = parse_sort)]
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

/// `--sort NAME`.
fn parse_sort(s: &str) -> Result<HotspotSort, String> {
    HotspotSort::parse(s).ok_or_else(|| {
        let known: Vec<&str> = HotspotSort::ALL.iter().map(|(n, _)| *n).collect();
        format!("unknown order '{s}'; known: {}", known.join(", "))
    })
}

/// Builds the report (shared with the HTML output), with the c2c analysis when `--c2c` asks
/// for it (its first pass rides on the report's decode), and the sidecar it was built with.
/// A report without samples is an error (that says when the recording is damaged).
pub fn build_report(args: &ReportArgs) -> anyhow::Result<(Report, Option<Arc<Sidecar>>)> {
    if args.c2c {
        check_line_size(args.line_size)?;
    }
    let rec = Recording::open(&args.file, &args.interp, &args.sidecar)?;
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
                "{}: no samples in a function named '{name}' (check the name with `spelunk report {}`){}",
                rec.path(),
                rec.path(),
                rec.damage_note()
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
    let losses = rec.losses(&stats);
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
    if report.recording.samples_selected == 0 {
        let why = if report.filter.is_empty() {
            String::new()
        } else {
            format!(" matched the filter ({})", report.filter.join(", "))
        };
        bail!(
            "{}: no samples{why}; {} records were decoded{}",
            report.recording.file,
            report.recording.samples_decoded,
            rec.damage_note()
        );
    }
    if let Some(c) = c2c {
        report.c2c = Some(c.finish(&rec, &stats, &objects, &mut symbolizer, args.limit)?);
    }
    Ok((report, rec.ctx.sidecar.clone()))
}

/// The profile shards the decode workers aggregate into: about one per core, however many
/// streams (CPUs) the recording has. Each shard holds a set of per-PC aggregates, so one per
/// stream would cost a recording of 64 CPUs running the same code 64 copies of them.
struct ShardPool<'a> {
    free: Mutex<Vec<ProfileShard<'a>>>,
    returned: Condvar,
}

impl<'a> ShardPool<'a> {
    /// `n` shards of `builder` (at least one).
    fn new(builder: &ProfileBuilder<'a>, n: usize) -> Self {
        ShardPool {
            free: Mutex::new((0..n.max(1)).map(|_| builder.shard()).collect()),
            returned: Condvar::new(),
        }
    }

    /// Takes a free shard, waiting for one if all are taken (their holders are mapping
    /// records, never waiting on anything: see SampleMap::end).
    fn take(&self) -> ProfileShard<'a> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(s) = free.pop() {
                return s;
            }
            free = self.returned.wait(free).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn give_back(&self, shard: ProfileShard<'a>) {
        self.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(shard);
        self.returned.notify_one();
    }

    fn into_shards(self) -> Vec<ProfileShard<'a>> {
        self.free.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

/// A decode worker's part of the report: aggregates its stream's samples into a shard of the
/// profile taken from the pool for each run of records (in parallel with the other streams)
/// and passes on, in time order, what the order-dependent part needs.
struct ProfileMap<'p, 'a> {
    pool: &'p ShardPool<'a>,
    held: Option<ProfileShard<'a>>,
}

impl<'p, 'a> ProfileMap<'p, 'a> {
    fn new(pool: &'p ShardPool<'a>) -> Self {
        ProfileMap { pool, held: None }
    }

    /// The shard this map holds, taken from the pool if it holds none (the worker calls
    /// `begin` first, so only a map used outside a run takes one here).
    #[inline]
    fn shard(&mut self) -> &mut ProfileShard<'a> {
        let pool = self.pool;
        self.held.get_or_insert_with(|| pool.take())
    }

    #[inline]
    fn add(&mut self, s: &SpeSample) -> OrderedSample {
        self.shard().add(s)
    }

    fn take(&mut self) {
        self.shard();
    }

    fn give_back(&mut self) {
        if let Some(s) = self.held.take() {
            self.pool.give_back(s);
        }
    }
}

impl SampleMap for ProfileMap<'_, '_> {
    type Item = OrderedSample;
    #[inline]
    fn map(&mut self, r: &SpeRecord, c: &SampleContext) -> OrderedSample {
        self.add(&c.sample(r))
    }
    fn begin(&mut self) {
        self.take();
    }
    fn end(&mut self) {
        self.give_back();
    }
}

/// [`ProfileMap`] that also passes the sample on, for the c2c scan (which takes samples in
/// time order).
struct ProfileMapWithSample<'p, 'a>(ProfileMap<'p, 'a>);

impl SampleMap for ProfileMapWithSample<'_, '_> {
    type Item = (OrderedSample, SpeSample);
    #[inline]
    fn map(&mut self, r: &SpeRecord, c: &SampleContext) -> (OrderedSample, SpeSample) {
        let s = c.sample(r);
        (self.0.add(&s), s)
    }
    fn begin(&mut self) {
        self.0.take();
    }
    fn end(&mut self) {
        self.0.give_back();
    }
}

/// Decodes `rec` into `builder` (and into `c2c`'s first pass): the same report as
/// `rec.decode(|s| builder.add(s))`, but the per-sample aggregation runs in the decode
/// workers, into a pool of shards (about one per core), and only the order-dependent part (first
/// time, timeline reservoir) in the time-ordered merge; the shards are merged at the end
/// (sums).
pub(crate) fn profile(
    rec: &Recording,
    builder: &mut ProfileBuilder,
    c2c: Option<&mut C2cScan>,
) -> anyhow::Result<DecodeStats> {
    // One shard more than the cores: a worker the OS deschedules while it holds a shard does
    // not stall the others (measured on 2 cores, 1 GiB, 64 streams: 2 shards 10.3 s, 3
    // shards 8.6 s; docs/performance.md).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    profile_in(rec, builder, c2c, cores + 1)
}

/// [`profile`] with at most `shards` shards.
fn profile_in(
    rec: &Recording,
    builder: &mut ProfileBuilder,
    c2c: Option<&mut C2cScan>,
    shards: usize,
) -> anyhow::Result<DecodeStats> {
    if builder.needs_first_time() {
        // A time range is relative to the first sample: the shards need it before the decode.
        let t0 = rec.first_time_ns()?;
        builder.set_first_time(t0);
    }
    let pool = ShardPool::new(builder, shards.min(rec.plan.streams.len()));
    let stats = match c2c {
        None => {
            let mut maps: Vec<_> = rec
                .plan
                .streams
                .iter()
                .map(|_| ProfileMap::new(&pool))
                .collect();
            let stats = rec.decode_map(&mut maps, |o| builder.add_ordered(o))?;
            maps.iter_mut().for_each(ProfileMap::give_back);
            stats
        }
        Some(c2c) => {
            let mut maps: Vec<_> = rec
                .plan
                .streams
                .iter()
                .map(|_| ProfileMapWithSample(ProfileMap::new(&pool)))
                .collect();
            let stats = rec.decode_map(&mut maps, |(o, s)| {
                builder.add_ordered(o);
                c2c.add(s);
            })?;
            maps.iter_mut().for_each(|m| m.0.give_back());
            stats
        }
    };
    if let Some(all) = ProfileShard::merge_all(pool.into_shards()) {
        builder.merge(all);
    }
    Ok(stats)
}

/// Top-down from the PMU counts in the recording's sidecar `sc` (what `spelunk record
/// --emulate` writes), for the HTML page when no `--topdown` file is given. A recording
/// without counts has none; a failure is reported and the page is written without the section.
fn sidecar_topdown(sc: &Sidecar, file: &Path) -> Option<Topdown> {
    if sc.counters.totals.is_empty() {
        return None;
    }
    let path = Sidecar::path_for(file);
    let text = match crate::topdown::sidecar_json(sc, &path) {
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

/// `spelunk report` of a `--no-spe` recording: the timelines in text, JSON or HTML.
fn run_timelines_only(args: &ReportArgs, sidecar: &Path) -> anyhow::Result<ExitCode> {
    if args.c2c || args.symbol.is_some() || args.pc_range.is_some() || args.topdown.is_some() {
        bail!(
            "{}: a recording without SPE samples (spelunk record --no-spe) has only its \
             timelines; --c2c, --symbol, --pc-range and --topdown need samples",
            sidecar.display()
        );
    }
    let sc = Sidecar::read(sidecar)?;
    let file = sidecar.display().to_string();
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
        return run_timelines_only(&args, &sidecar);
    }
    if !args.file.exists() {
        bail!(
            "{}: no such file. A `spelunk record --no-spe` recording is only its sidecar \
             ({}): `spelunk report` reads it when given FILE.spelunk.json, or FILE when FILE \
             does not exist and its sidecar does",
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

#[cfg(test)]
mod tests {
    use super::*;
    use spelunk_analysis::profile::{EventClass, Filter, ReportLimits};
    use spelunk_testkit::SynthRecording;

    /// However few shards the workers share (one for six streams) or many (one each), the
    /// report is the serial one: every sample fed in decode order to one builder, timeline
    /// and time-range filter included.
    #[test]
    fn any_number_of_shards_gives_the_serial_report() {
        let dir = std::env::temp_dir().join(format!("spelunk-shard-pool-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("six-cpus.data");
        SynthRecording {
            cpus: 6,
            records_per_cpu: 4000,
            chunk_bytes: 4096,
            ..Default::default()
        }
        .write(&path)
        .unwrap();
        let rec = Recording::open(&path, &CpuArgs::default(), &SidecarArgs::default()).unwrap();
        assert_eq!(rec.plan.streams.len(), 6);
        let objects = rec.ctx.data_objects(None);
        let limits = ReportLimits {
            timeline_points: 500,
            ..Default::default()
        };
        let json = |b: ProfileBuilder| {
            let mut sym = rec.symbolizer(&SymbolArgs::default()).unwrap();
            let r = b.finish(
                &rec.ctx.spaces,
                &mut sym,
                &rec.ctx.thread_names,
                RecordingInfo::default(),
                None,
            );
            serde_json::to_string(&r).unwrap()
        };
        let filters = [
            Filter::default(),
            Filter {
                time_range_s: Some((0.001, 0.003)),
                event: Some(EventClass::Load),
                ..Default::default()
            },
        ];
        for filter in filters {
            let mut serial = ProfileBuilder::new(&rec.interp, &objects, filter.clone(), limits);
            rec.decode(|s| serial.add(s)).unwrap();
            let want = json(serial);
            assert!(want.contains("\"loads\""), "{want}");
            for shards in [1, 2, 6] {
                let mut b = ProfileBuilder::new(&rec.interp, &objects, filter.clone(), limits);
                profile_in(&rec, &mut b, None, shards).unwrap();
                assert!(json(b) == want, "{shards} shards, {filter:?}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
