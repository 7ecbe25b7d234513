//! `spelunk topdown`: top-down methodology from PMU counters. Wiring only: catalogs, detection,
//! scheduling, evaluation and rendering are in spelunk-pmu; counting is
//! spelunk_perf::counting.

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use spelunk_perf::counting::{
    self, CountingSession, GroupReading, LinuxPerfSys, OpenOptions, PerfSys, StoppedChild, Target,
};
use spelunk_perf::sidecar::Sidecar;
use spelunk_pmu::catalog::{self, Catalog, Choice};
use spelunk_pmu::compute::{Selection, StageFilter, Warning, WarningKind};
use spelunk_pmu::counts::{delta, Measurement, RawReading};
use spelunk_pmu::detect::{self, parse_cpu_list, CoreType};
use spelunk_pmu::import::parse_perf_stat;
use spelunk_pmu::report::{
    self, cpu_report, import_report, scope_report, Counters, ImportOptions, Report, ScheduleReport,
    Source,
};
use spelunk_pmu::schedule::{schedule, Budget, Schedule};
use spelunk_pmu::sidecar::{self, SidecarImport};
use spelunk_record::{convert, emulator, EmulatorInstall, EmulatorOptions};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum StageArg {
    #[value(name = "1")]
    One,
    #[value(name = "2")]
    Two,
    All,
}

/// Top-down PMU analysis: cycle accounting, IPC, MPKI, miss ratios, operation mix.
///
/// Counts the core's PMU events for a command (or a process, or CPUs) with perf_event_open,
/// evaluates Arm's top-down metrics for the detected core (Neoverse N1, N2, V1, V2, N3, V3,
/// V3AE; other Arm cores get a generic Armv8/Armv9 catalog) and prints the stage-1 decision
/// tree with the bottleneck marked, stage-2 groups, thresholds and sanity warnings.
/// `--emulate` counts the command under spelunk's emulated Neoverse N1 instead (any Linux
/// machine); `--import` computes the same from `perf stat -x` output recorded elsewhere or from
/// the sidecar of a `spelunk record --emulate` recording.
/// Formulas, thresholds and multiplexing semantics: docs/topdown.md.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  spelunk topdown -- ./app arg1                     # stage 1 and 2 for the detected core
  spelunk topdown --stage 1 -I 500 -- ./app         # level 1 only, a 500 ms timeline
  spelunk topdown -m Cycle_Accounting,MPKI -- ./app # chosen groups (or metric names)
  spelunk topdown -n backend_bound -- ./app         # a node, its subtree and its groups
  spelunk topdown --no-multiplex -- ./app           # one run per counter group, no scaling
  spelunk topdown -p 1234 --duration 10             # attach to a process for 10 s
  spelunk topdown -a -C 0-3 -- sleep 5              # CPUs 0-3, system-wide
  spelunk topdown --list --cpu-model neoverse-v2          # groups and metrics of a catalog
  perf stat -x, -e r8,r11,r23,r24 -o counts.csv -- ./app
  spelunk topdown --import counts.csv --cpu-model neoverse-n1 --json
  spelunk topdown --emulate -- ./app                # under the emulated Neoverse N1
  spelunk topdown --emulate --per-phase -I 0.5 -- ./stream   # per annotated phase, 0.5 ms timeline
  spelunk topdown --import perf.data --per-phase    # the sidecar of `spelunk record --emulate`

Without a hardware PMU (e.g. an x86 or virtual machine) a live run is impossible: count under
the emulator (--emulate), or import counts taken on an Arm machine (--import).")]
pub struct TopdownArgs {
    /// Metric groups or metrics to compute, comma-separated (see --list)
    #[arg(
        short = 'm',
        long = "metric-group",
        value_name = "GROUP",
        value_delimiter = ','
    )]
    pub groups: Vec<String>,

    /// Decision-tree nodes: each metric, its descendants and the groups the tree points to
    #[arg(short = 'n', long = "node", value_name = "NODE", value_delimiter = ',')]
    pub nodes: Vec<String>,

    /// Methodology stages to compute (ignored with -m/-n)
    #[arg(long, value_enum, default_value = "all")]
    pub stage: StageArg,

    /// Also print a timeline with one row per interval of MS milliseconds (fractions allowed
    /// with --emulate and sidecars, e.g. 0.5; live runs read at most every 10 ms)
    #[arg(short = 'I', long = "interval", value_name = "MS", allow_negative_numbers = true, value_parser = crate::common::values::interval_ms)]
    pub interval_ms: Option<f64>,

    /// Count an existing process (and the children it creates from now on)
    #[arg(short = 'p', long, value_name = "PID", conflicts_with_all = ["all_cpus", "cpus"], allow_negative_numbers = true, value_parser = crate::common::values::process)]
    pub pid: Option<i32>,

    /// Count everything on all CPUs (needs perf_event_paranoid <= 0 or CAP_PERFMON)
    #[arg(short = 'a', long = "all-cpus")]
    pub all_cpus: bool,

    /// Count everything on these CPUs, e.g. 0-3,8
    #[arg(short = 'C', long = "cpus", value_name = "CPUS")]
    pub cpus: Option<String>,

    /// With -p/-a/-C and no command: stop after this many seconds (default: Ctrl-C)
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true, value_parser = crate::common::values::duration_s)]
    pub duration: Option<f64>,

    /// Do not count: compute from FILE, either `perf stat -x, ...` or `-x; ...` output, or a
    /// spelunk sidecar (FILE.spelunk.json, or a perf.data with its sidecar next to it)
    #[arg(long, value_name = "FILE", conflicts_with = "emulate")]
    pub import: Option<PathBuf>,

    /// Count the command under spelunk's emulated Neoverse N1 (a Valgrind tool, emulator/;
    /// works on any Linux machine, ~100x slower); the program's output and exit status pass
    /// through
    #[arg(long, conflicts_with_all = ["pid", "all_cpus", "cpus", "no_multiplex", "counters"])]
    pub emulate: bool,

    /// With --emulate: a further emulator option, passed as given (repeatable), e.g.
    /// --emulator-opt=--l2-size=2097152 (all: emulator/spelunk-emu --help)
    #[arg(
        long = "emulator-opt",
        value_name = "OPT",
        allow_hyphen_values = true,
        requires = "emulate"
    )]
    pub emulator_opts: Vec<String>,

    /// With --emulate: keep the recording as FILE (a perf.data with SPE samples) and
    /// FILE.spelunk.json, for `spelunk report` or a later --import
    #[arg(long, value_name = "FILE", requires = "emulate")]
    pub record: Option<PathBuf>,

    /// With --emulate --record FILE: also keep the emulator's raw trace as FILE.emutrace
    #[arg(long, requires = "record")]
    pub keep_trace: bool,

    /// Catalog to use instead of detecting it (required with --import of perf stat output):
    /// neoverse-n1, neoverse-n2-r0p2, neoverse-n2-r0p3, neoverse-n3, neoverse-v1, neoverse-v2,
    /// neoverse-v3, neoverse-v3ae, armv8, armv9
    #[arg(long = "cpu-model", alias = "cpu", value_name = "NAME")]
    pub cpu: Option<String>,

    /// Use an Arm telemetry specification JSON file as the catalog
    #[arg(long, value_name = "FILE", conflicts_with = "cpu")]
    pub spec: Option<PathBuf>,

    /// With --import or --emulate: also report each CPU/core/socket (perf stat) or each
    /// virtual core (sidecar) separately
    #[arg(long)]
    pub per_cpu: bool,

    /// With a sidecar or --emulate: also report each phase annotated with include/spelunk.h
    /// (counts from the phase's begin to its end, summed over its instances)
    #[arg(long)]
    pub per_phase: bool,

    /// Slots per cycle to use instead of the PMU's caps/slots or the catalog's width
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = crate::common::values::small_count)]
    pub slots: Option<u32>,

    /// Programmable counters per group to schedule for, instead of probing them
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = crate::common::values::small_count)]
    pub counters: Option<u32>,

    /// Run the command once per counter group instead of multiplexing the groups; warns when
    /// the runs disagree (their cycle or instruction counts differ by more than 5 %)
    #[arg(long)]
    pub no_multiplex: bool,

    /// CSV output (one row per metric, and per interval with -I)
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,

    /// JSON output (schema spelunk-topdown/1, docs/topdown.md)
    #[arg(long)]
    pub json: bool,

    /// Write the report to FILE instead of standard output (which the command also writes to)
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// List the catalog's groups and metrics with their formulas, then exit
    #[arg(long)]
    pub list: bool,

    /// Root of the sysfs/procfs tree to detect CPUs from (for tests and recorded systems)
    #[arg(long, value_name = "DIR", default_value = "/", hide = true)]
    pub sysfs_root: PathBuf,

    /// The command to count
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

pub fn run(args: TopdownArgs) -> anyhow::Result<ExitCode> {
    // --import of a perf.data reads the sidecar next to it: that is an input too.
    let import_sidecar = args.import.as_deref().map(Sidecar::path_for);
    let inputs: Vec<&Path> = [&args.import, &import_sidecar, &args.record, &args.spec]
        .into_iter()
        .filter_map(|p| p.as_deref())
        .collect();
    crate::common::guard_outputs(
        &inputs,
        &args.output.iter().map(|p| p.as_path()).collect::<Vec<_>>(),
    )?;
    if args.list {
        let choice =
            explicit_catalog(&args)?.context("--list needs --cpu-model NAME or --spec FILE")?;
        print!("{}", list_catalog(&choice.catalog));
        return Ok(ExitCode::SUCCESS);
    }
    if args.per_phase && !args.emulate && args.import.is_none() {
        bail!(
            "--per-phase needs phase annotations, which live counting does not see: use \
             --emulate, or --import a recording's sidecar"
        );
    }
    let (report, code) = if let Some(file) = &args.import {
        (import(&args, file)?, ExitCode::SUCCESS)
    } else if args.emulate {
        emulate(&args)?
    } else {
        (live(&args, &LinuxPerfSys)?, ExitCode::SUCCESS)
    };
    let out = if args.json {
        report::render_json(&report) + "\n"
    } else if args.csv {
        report::render_csv(&report)
    } else {
        report::render_text(&report)
    };
    match &args.output {
        Some(path) => spelunk_fsio::write_atomic(path, out.as_bytes())
            .with_context(|| format!("writing the report to {}", path.display()))?,
        None => print!("{out}"),
    }
    Ok(code)
}

fn stage(args: &TopdownArgs) -> StageFilter {
    match args.stage {
        StageArg::One => StageFilter::One,
        StageArg::Two => StageFilter::Two,
        StageArg::All => StageFilter::All,
    }
}

/// Largest `perf stat` output, catalog or report JSON read whole (far above any real one).
const MAX_TEXT_INPUT_BYTES: u64 = 256 << 20;

fn explicit_catalog(args: &TopdownArgs) -> anyhow::Result<Option<Choice>> {
    if let Some(spec) = &args.spec {
        let json = spelunk_fsio::read_to_string_bounded(spec, MAX_TEXT_INPUT_BYTES)
            .with_context(|| format!("reading --spec {}", spec.display()))?;
        let name = spec
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| "spec".into());
        let catalog = Catalog::from_spec_json(&json, &name, &spec.display().to_string(), false)?;
        return Ok(Some(Choice {
            catalog,
            note: None,
        }));
    }
    match &args.cpu {
        Some(n) => Ok(Some(catalog::by_name(n)?)),
        None => Ok(None),
    }
}

fn list_catalog(c: &Catalog) -> String {
    let mut s = format!(
        "{} ({}), {} slots/cycle, from {}\n",
        c.product_name,
        c.id,
        c.num_slots.map(|n| n.to_string()).unwrap_or("?".into()),
        c.origin
    );
    for g in &c.groups {
        let st = match c.stage_of_group(&g.name) {
            Some(spelunk_pmu::Stage::One) => "stage 1",
            Some(spelunk_pmu::Stage::Two) => "stage 2",
            None => "other",
        };
        s += &format!("\n{} [{st}]: {}\n", g.name, g.description);
        for m in &g.metrics {
            if let Some(m) = c.metrics.get(m) {
                s += &format!("  {:<32} {}  [{}]\n", m.name, m.expr, m.units);
            }
        }
    }
    s
}

/// What `--import FILE` holds.
enum ImportInput {
    PerfStat(String),
    /// The sidecar and the path it was read from.
    Sidecar(Box<Sidecar>, PathBuf),
}

/// Reads `--import FILE`: a sidecar (JSON), a perf.data (its sidecar next to it) or
/// `perf stat -x` text.
fn read_import(file: &Path) -> anyhow::Result<ImportInput> {
    let ctx = || format!("reading --import {}", file.display());
    spelunk_fsio::regular_file(file).with_context(ctx)?;
    let mut magic = [0u8; 8];
    let is_perf_data = {
        use std::io::Read;
        let mut f = std::fs::File::open(file).with_context(ctx)?;
        f.read_exact(&mut magic).is_ok() && &magic == b"PERFILE2"
    };
    if is_perf_data {
        let side = Sidecar::path_for(file);
        if !side.exists() {
            bail!(
                "{}: a perf.data without a spelunk sidecar ({} does not exist): spelunk topdown \
                 reads counts from the sidecar `spelunk record --emulate` writes, or from \
                 `perf stat -x,` output",
                file.display(),
                side.display()
            );
        }
        let sc = Sidecar::read(&side)?;
        return Ok(ImportInput::Sidecar(Box::new(sc), side));
    }
    let bytes = spelunk_fsio::read_bounded(file, MAX_TEXT_INPUT_BYTES).with_context(ctx)?;
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'{') {
        return Ok(ImportInput::Sidecar(
            Box::new(Sidecar::read(file)?),
            file.to_path_buf(),
        ));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{}: neither a spelunk sidecar, a perf.data nor `perf stat -x` text (not UTF-8 at \
             byte {})",
            file.display(),
            e.utf8_error().valid_up_to()
        )
    })?;
    Ok(ImportInput::PerfStat(text))
}

fn import(args: &TopdownArgs, file: &Path) -> anyhow::Result<Report> {
    let name = file.display().to_string();
    match read_import(file)? {
        ImportInput::PerfStat(text) => {
            let choice = explicit_catalog(args)?.context(
                "--import of perf stat output needs the CPU the counts were taken on: --cpu-model NAME \
                 (e.g. neoverse-n1) or --spec FILE",
            )?;
            if args.per_phase {
                bail!("--per-phase: {name} is perf stat output, which has no phases (sidecars do)");
            }
            let imported = parse_perf_stat(&text, &name, &choice.catalog)?;
            let sel = Selection::resolve(&choice.catalog, stage(args), &args.groups, &args.nodes)?;
            Ok(import_report(
                &imported,
                &choice.catalog,
                &sel,
                ImportOptions {
                    file: &name,
                    per_scope: args.per_cpu,
                    per_phase: false,
                    slots: args.slots,
                    notes: choice.note.into_iter().collect(),
                },
            ))
        }
        ImportInput::Sidecar(sc, path) => sidecar_report(args, &sc, &path),
    }
}

/// Top-down of a recording's sidecar with the defaults (both stages, a scope per phase), as
/// `spelunk topdown --import FILE --per-phase --json` prints it: what `spelunk report --html`
/// embeds when the recording carries PMU counts and no `--topdown` file is given.
pub(crate) fn sidecar_json(sc: &Sidecar, path: &Path) -> anyhow::Result<String> {
    #[derive(clap::Parser)]
    struct Defaults {
        #[command(flatten)]
        args: TopdownArgs,
    }
    let d = <Defaults as clap::Parser>::try_parse_from(["topdown", "--per-phase"])?;
    Ok(report::render_json(&sidecar_report(&d.args, sc, path)?))
}

/// The report of a sidecar's counters: the catalog of its CPU (or --cpu-model/--spec), per-core and
/// phase scopes, intervals from its timeline.
fn sidecar_report(args: &TopdownArgs, sc: &Sidecar, path: &Path) -> anyhow::Result<Report> {
    let name = path.display().to_string();
    let detected = sidecar::catalog_for(sc, &name);
    let choice = match explicit_catalog(args)? {
        Some(mut c) => {
            if let Ok(d) = &detected {
                if d.catalog.id != c.catalog.id {
                    c.note = Some(format!(
                        "the counts are from a {} ({}); evaluated with {} as asked",
                        sc.config
                            .get("cpu_name")
                            .and_then(|v| v.as_str())
                            .unwrap_or("CPU"),
                        d.catalog.id,
                        c.catalog.id
                    ));
                }
            }
            c
        }
        None => detected?,
    };
    let opts = SidecarImport {
        interval_ns: args
            .interval_ms
            .map(|ms| (ms * 1e6).round().max(1.0) as u64),
    };
    let imported = sidecar::import(sc, &name, &choice.catalog, opts)?;
    let sel = Selection::resolve(&choice.catalog, stage(args), &args.groups, &args.nodes)?;
    // What reading the sidecar dropped, said with the report.
    let mut notes: Vec<String> = choice.note.into_iter().collect();
    notes.extend(sc.problems.iter().cloned());
    Ok(import_report(
        &imported,
        &choice.catalog,
        &sel,
        ImportOptions {
            file: &name,
            per_scope: args.per_cpu,
            per_phase: args.per_phase,
            slots: args.slots,
            notes,
        },
    ))
}

/// `--emulate`: runs the command under the emulator (as `spelunk record --emulate` does),
/// converts its trace into a perf.data plus sidecar, and reports the sidecar's counts. Returns
/// the report and the program's exit status as the exit code.
fn emulate(args: &TopdownArgs) -> anyhow::Result<(Report, ExitCode)> {
    if args.command.is_empty() {
        bail!("--emulate needs the command to run after `--`");
    }
    let install = EmulatorInstall::locate()?;
    let options = EmulatorOptions {
        extra: args.emulator_opts.clone(),
        ..EmulatorOptions::default()
    };
    // The recording: where the user asked, else a private directory removed afterwards.
    let (perf_data, scratch) = match &args.record {
        Some(p) => {
            if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                if !dir.is_dir() {
                    bail!("--record {}: no such directory", p.display());
                }
            }
            (p.clone(), None)
        }
        None => {
            let s = Scratch::new()?;
            (s.0.join("perf.data"), Some(s))
        }
    };
    let mut trace = perf_data.clone().into_os_string();
    trace.push(".emutrace");
    let trace = PathBuf::from(trace);
    let command: Vec<OsString> = args.command.iter().map(OsString::from).collect();
    eprintln!(
        "spelunk topdown: running {} under the emulated Neoverse N1 (Valgrind; expect the \
         program to run ~100x slower than natively)",
        args.command[0]
    );
    let run = emulator::run(&install, &options, &trace, &command)?;
    for line in run.valgrind_log.lines() {
        eprintln!("spelunk topdown: valgrind: {line}");
    }
    if !trace.exists() {
        bail!(
            "the emulator wrote no trace ({}); {} exited with {}. If valgrind could not start \
             the program, its messages are above",
            trace.display(),
            args.command[0],
            crate::record::describe(&run.status)
        );
    }
    let cmdline: Vec<String> = std::env::args().collect();
    let conv = convert(&trace, &perf_data, &cmdline)
        .with_context(|| format!("converting the emulator's trace {}", trace.display()))?;
    if !args.keep_trace {
        let _ = std::fs::remove_file(&trace);
    }
    for w in &conv.warnings {
        eprintln!("spelunk topdown: warning: {w}");
    }
    let sc = Sidecar::read(&conv.sidecar)?;
    let mut report = sidecar_report(args, &sc, &conv.sidecar).with_context(|| {
        format!(
            "{} exited with {}",
            args.command[0],
            crate::record::describe(&run.status)
        )
    })?;
    report.source = Source {
        kind: "emulated".into(),
        detail: format!("{} ({})", args.command.join(" "), sidecar::describe(&sc)),
    };
    if !run.status.success() {
        report.notes.push(format!(
            "the command exited with {}",
            crate::record::describe(&run.status)
        ));
    }
    if let Some(p) = &args.record {
        eprintln!(
            "spelunk topdown: kept the recording {} and {}{}",
            p.display(),
            conv.sidecar.display(),
            if args.keep_trace {
                format!(" and {}", trace.display())
            } else {
                String::new()
            }
        );
    }
    drop(scratch);
    Ok((
        report,
        ExitCode::from(crate::record::exit_code(&run.status)),
    ))
}

/// A private temporary directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> anyhow::Result<Scratch> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir =
            std::env::temp_dir().join(format!("spelunk-topdown-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&dir)
            .with_context(|| format!("creating the temporary directory {}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Everything about counting on one core type.
struct Plan {
    ty: CoreType,
    pmu_type: u32,
    catalog: Catalog,
    selection: Selection,
    schedule: Schedule,
    /// Raw codes per group, and the event name of each.
    groups: Vec<Vec<(String, u64)>>,
    cpu: report::CpuReport,
}

const NO_PMU_HELP: &str = "spelunk topdown counts with the CPU's hardware PMU, which this machine \
does not offer. Nothing was counted. To count here, run the command under spelunk's emulated \
Neoverse N1: `spelunk topdown --emulate -- CMD`. To analyse counts taken on an Arm machine: \
`perf stat -x, -e <events> -o counts.csv -- CMD` there, then \
`spelunk topdown --import counts.csv --cpu-model neoverse-n1` here (see --help)";

fn plan<S: PerfSys + ?Sized>(args: &TopdownArgs, sys: &S) -> anyhow::Result<Vec<Plan>> {
    let system = detect::detect(&args.sysfs_root).context(NO_PMU_HELP)?;
    let wanted: Option<Vec<u32>> = match (&args.cpus, args.all_cpus) {
        (Some(list), _) => Some(
            parse_cpu_list(list)
                .with_context(|| format!("-C {list}: not a CPU list like 0-3,8"))?,
        ),
        _ => None,
    };
    let explicit = explicit_catalog(args)?;
    let mut plans = Vec::new();
    for ty in system.core_types {
        let cpus: Vec<u32> = match &wanted {
            Some(w) => ty.cpus.iter().copied().filter(|c| w.contains(c)).collect(),
            None => ty.cpus.clone(),
        };
        if cpus.is_empty() {
            continue;
        }
        let Some(pmu) = ty.pmu.clone() else {
            bail!(
                "no core PMU for CPUs {:?} (MIDR {}): /sys/bus/event_source/devices has {} and none \
                 lists these CPUs in a `cpus` file. {NO_PMU_HELP}",
                ty.cpus,
                ty.midr,
                system.pmu_names.join(", ")
            );
        };
        let choice = match &explicit {
            Some(c) => c.clone(),
            None => catalog::for_midr(ty.midr, pmu.events.contains_key("STALL_SLOT"))?,
        };
        let catalog = choice.catalog;
        let selection = Selection::resolve(&catalog, stage(args), &args.groups, &args.nodes)?;
        let mut notes: Vec<String> = choice.note.into_iter().collect();
        let counters = match args.counters {
            Some(n) => Counters {
                programmable: n as usize,
                cycle_counter: true,
                source: "user".into(),
            },
            None => probe(sys, pmu.perf_type, &catalog, &mut notes)?,
        };
        let budget = Budget {
            programmable: counters.programmable,
            cycle_counter: counters.cycle_counter,
        };
        let metric_events: Vec<(String, std::collections::BTreeSet<String>)> = selection
            .metrics()
            .into_iter()
            .filter_map(|m| {
                let evs = catalog.metrics.get(&m)?.events.clone();
                let uncodable: Vec<&String> = evs
                    .iter()
                    .filter(|e| !catalog.events.contains_key(*e))
                    .collect();
                if !uncodable.is_empty() {
                    notes.push(format!("{m}: no event code for {uncodable:?}; not counted"));
                    return None;
                }
                Some((m, evs))
            })
            .collect();
        let schedule = schedule(&metric_events, budget);
        for (m, n) in &schedule.unschedulable {
            notes.push(format!(
                "{m} needs {n} counters in one group but a group has {}; not counted",
                budget.programmable
            ));
        }
        let groups = schedule
            .groups
            .iter()
            .map(|g| {
                g.iter()
                    .filter_map(|e| catalog.events.get(e).map(|c| (e.clone(), u64::from(*c))))
                    .collect()
            })
            .collect();
        let slots = args.slots.or(pmu.slots);
        let cpu = cpu_report(&catalog, slots, Some(counters), notes);
        plans.push(Plan {
            ty: CoreType { cpus, ..ty },
            pmu_type: pmu.perf_type,
            catalog,
            selection,
            schedule,
            groups,
            cpu,
        });
    }
    if plans.is_empty() {
        bail!(
            "-C {}: none of these CPUs exists",
            args.cpus.as_deref().unwrap_or("")
        );
    }
    Ok(plans)
}

fn probe<S: PerfSys + ?Sized>(
    sys: &S,
    pmu_type: u32,
    catalog: &Catalog,
    notes: &mut Vec<String>,
) -> anyhow::Result<Counters> {
    let inst = u64::from(catalog.events.get("INST_RETIRED").copied().unwrap_or(0x08));
    let cyc = u64::from(catalog.events.get("CPU_CYCLES").copied().unwrap_or(0x11));
    let mut spin = || {
        let mut x = 0u64;
        for i in 0..200_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
    };
    let p =
        counting::probe_counters(sys, pmu_type, inst, cyc, 32, &mut spin).context(NO_PMU_HELP)?;
    if p.programmable > 0 {
        return Ok(Counters {
            programmable: p.programmable,
            cycle_counter: p.cycle_counter,
            source: "probed".into(),
        });
    }
    match catalog.documented_counters {
        Some(n) => {
            notes.push(format!(
                "probing found no usable counter on this CPU type (the probe may have run on \
                 another core type); scheduling for the documented {n}"
            ));
            Ok(Counters {
                programmable: n as usize,
                cycle_counter: true,
                source: "catalog".into(),
            })
        }
        None => bail!(
            "no PMU counter could be opened and counted on PMU type {pmu_type}; pass --counters N \
             if you know how many there are. {NO_PMU_HELP}"
        ),
    }
}

/// True when the PMU's sysfs `events/` list shows that the PMU does not implement `code`.
///
/// The armv8_pmuv3 driver lists a common event (0x0000-0x003F, 0x4000-0x403F) under `events/`
/// only when the PMCEID registers say the core implements it, yet a raw event it lacks still
/// opens and counts 0 (seen under QEMU's neoverse-n1 and on real cores). Such a reading is "not
/// counted", never 0. Codes outside the PMCEID ranges are never listed, so nothing is inferred
/// for them; an empty or missing `events/` directory says nothing either.
fn absent_per_pmceid(code: u64, listed: &std::collections::BTreeSet<u64>) -> bool {
    let pmceid_range = code < 0x40 || (0x4000..0x4040).contains(&code);
    pmceid_range && !listed.is_empty() && !listed.contains(&code)
}

fn to_raw(plan: &Plan, readings: &[GroupReading], group_offset: usize) -> Vec<RawReading> {
    let listed: std::collections::BTreeSet<u64> = plan
        .ty
        .pmu
        .iter()
        .flat_map(|p| p.events.values().map(|&c| u64::from(c)))
        .collect();
    let mut out = Vec::new();
    for r in readings {
        let g = r.group + group_offset;
        let Some(names) = plan.groups.get(g) else {
            continue;
        };
        for (e, (name, code)) in r.events.iter().zip(names) {
            out.push(RawReading {
                group: g,
                event: name.clone(),
                value: e.value,
                time_enabled_ns: e.time_enabled_ns,
                time_running_ns: e.time_running_ns,
                unsupported: e.unsupported || absent_per_pmceid(*code, &listed),
            });
        }
    }
    out
}

/// Cumulative readings of every plan, polled at the interval.
struct Run {
    total: Vec<Vec<RawReading>>,
    intervals: Vec<(f64, Vec<Vec<RawReading>>)>,
    exit: Option<std::process::ExitStatus>,
}

fn count_once<S: PerfSys + ?Sized>(
    args: &TopdownArgs,
    sys: &S,
    plans: &[Plan],
    only_group: Option<usize>,
) -> anyhow::Result<Run> {
    let mut child = if args.command.is_empty() {
        None
    } else {
        Some(
            StoppedChild::spawn(&args.command)
                .with_context(|| format!("starting {:?}", args.command))?,
        )
    };
    let system_wide = args.all_cpus || args.cpus.is_some();
    if child.is_none() && args.pid.is_none() && !system_wide {
        bail!(
            "nothing to count: give a command after `--`, -p PID, -a or -C CPUS (or --import FILE)"
        );
    }
    let opts = OpenOptions {
        enable_on_exec: child.is_some() && !system_wide,
        inherit: !system_wide,
        exclude_kernel: false,
    };
    let mut sessions = Vec::new();
    for p in plans {
        let groups: Vec<Vec<u64>> = p
            .groups
            .iter()
            .enumerate()
            .filter(|(i, _)| only_group.is_none_or(|g| g == *i))
            .map(|(_, g)| g.iter().map(|(_, c)| *c).collect())
            .collect();
        let target = if system_wide {
            Target::Cpus(p.ty.cpus.iter().map(|&c| c as i32).collect())
        } else if let Some(pid) = args.pid {
            Target::Process(pid)
        } else {
            Target::Process(child.as_ref().map(|c| c.pid()).unwrap_or(0))
        };
        let mut o = opts;
        let s = match CountingSession::open(sys, p.pmu_type, &groups, &target, o) {
            Ok(s) => s,
            Err(counting::CountingError::Open { source, .. })
                if matches!(source.raw_os_error(), Some(1) | Some(13)) =>
            {
                // Not allowed to count the kernel (perf_event_paranoid >= 2): user space only.
                o.exclude_kernel = true;
                CountingSession::open(sys, p.pmu_type, &groups, &target, o).context(NO_PMU_HELP)?
            }
            Err(e) => return Err(anyhow::Error::new(e).context(NO_PMU_HELP)),
        };
        if !o.enable_on_exec {
            s.enable()?;
        }
        sessions.push(s);
    }
    counting::catch_interrupt();
    let start = Instant::now();
    if let Some(c) = child.as_mut() {
        c.release()
            .with_context(|| format!("running {:?}", args.command))?;
    }
    let read_all = |sessions: &[CountingSession<'_, S>]| -> anyhow::Result<Vec<Vec<RawReading>>> {
        let offset = only_group.unwrap_or(0);
        sessions
            .iter()
            .zip(plans)
            .map(|(s, p)| Ok(to_raw(p, &s.read()?, offset)))
            .collect()
    };
    let tick = Duration::from_secs_f64(args.interval_ms.unwrap_or(100.0).max(10.0) / 1000.0);
    let mut intervals = Vec::new();
    let mut exit = None;
    loop {
        std::thread::sleep(tick);
        let done = match child.as_mut() {
            Some(c) => match c.try_wait()? {
                Some(st) => {
                    exit = Some(st);
                    true
                }
                None => false,
            },
            None => {
                counting::interrupted()
                    || args
                        .duration
                        .is_some_and(|d| start.elapsed().as_secs_f64() >= d)
                    || args.pid.is_some_and(|p| !counting::process_alive(p))
            }
        };
        if args.interval_ms.is_some() {
            intervals.push((start.elapsed().as_secs_f64(), read_all(&sessions)?));
        }
        if done {
            break;
        }
    }
    let total = read_all(&sessions)?;
    Ok(Run {
        total,
        intervals,
        exit,
    })
}

fn live<S: PerfSys + ?Sized>(args: &TopdownArgs, sys: &S) -> anyhow::Result<Report> {
    let plans = plan(args, sys)?;
    let mut warnings: Vec<Vec<Warning>> = vec![Vec::new(); plans.len()];
    let runs: Vec<(Option<usize>, Run)> = if args.no_multiplex {
        if args.command.is_empty() {
            bail!("--no-multiplex re-runs the command once per counter group: give a command after `--`");
        }
        let n = plans.iter().map(|p| p.groups.len()).max().unwrap_or(0);
        (0..n)
            .map(|g| Ok((Some(g), count_once(args, sys, &plans, Some(g))?)))
            .collect::<anyhow::Result<_>>()?
    } else {
        vec![(None, count_once(args, sys, &plans, None)?)]
    };
    let mut scopes = Vec::new();
    for (pi, p) in plans.iter().enumerate() {
        let mut total: Vec<RawReading> = Vec::new();
        for (_, r) in &runs {
            total.extend(r.total.get(pi).cloned().unwrap_or_default());
        }
        let m = Measurement::from_raw(p.groups.len(), &total, p.schedule.metric_group.clone());
        if args.no_multiplex {
            warnings[pi].extend(disagreement(&m));
        }
        // Intervals (multiplexed runs only: separate runs have no common timeline).
        let mut intervals = Vec::new();
        if let [(None, run)] = runs.as_slice() {
            let mut prev: Vec<RawReading> = Vec::new();
            for (t, all) in &run.intervals {
                let cur = all.get(pi).cloned().unwrap_or_default();
                let d = delta(&cur, &prev);
                intervals.push((
                    *t,
                    Measurement::from_raw(p.groups.len(), &d, p.schedule.metric_group.clone()),
                ));
                prev = cur;
            }
        }
        let mode = if args.no_multiplex {
            "one run per group"
        } else {
            "multiplexed"
        };
        let mut s = scope_report(
            &format!("{} on CPUs {}", p.catalog.id, compact_list(&p.ty.cpus)),
            &p.catalog,
            p.cpu.clone(),
            &p.selection,
            &m,
            &intervals,
            Some(ScheduleReport::new(&p.schedule, mode)),
        );
        s.totals.warnings.append(&mut warnings[pi]);
        scopes.push(s);
    }
    let mut notes = Vec::new();
    if let Some((_, r)) = runs.last() {
        if let Some(st) = r.exit {
            if !st.success() {
                notes.push(format!("the command exited with {st}"));
            }
        }
    }
    let target = if !args.command.is_empty() {
        args.command.join(" ")
    } else if let Some(p) = args.pid {
        format!("pid {p}")
    } else {
        format!("CPUs {}", args.cpus.as_deref().unwrap_or("all"))
    };
    Ok(Report {
        schema: report::SCHEMA,
        source: Source {
            kind: "live".into(),
            detail: target,
        },
        scopes,
        notes,
    })
}

/// With one run per group, compare the events every run counted (CPU_CYCLES, INST_RETIRED).
fn disagreement(m: &Measurement) -> Vec<Warning> {
    let mut out = Vec::new();
    for ev in ["CPU_CYCLES", "INST_RETIRED"] {
        let vals: Vec<f64> = m
            .groups
            .iter()
            .filter_map(|g| g.get(ev).and_then(|c| c.value))
            .collect();
        if vals.len() < 2 {
            continue;
        }
        let (lo, hi) = vals
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
        if lo > 0.0 && (hi - lo) / lo > 0.05 {
            out.push(Warning {
                kind: WarningKind::RunsDisagree,
                message: format!(
                    "{ev} differs by {:.1} % between the {} runs ({lo:.0} .. {hi:.0}): the \
                     command does not behave the same each time, so metrics from different \
                     groups are not comparable",
                    (hi - lo) / lo * 100.0,
                    vals.len()
                ),
            });
        }
    }
    out
}

fn compact_list(cpus: &[u32]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use spelunk_perf::counting::sim::SimPmu;
    use std::collections::BTreeMap;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: TopdownArgs,
    }

    fn args(v: &[&str]) -> TopdownArgs {
        let mut full = vec!["topdown"];
        full.extend_from_slice(v);
        Cli::try_parse_from(full).unwrap().args
    }

    /// QEMU's neoverse-n1 lists only these four under `events/` (docs: arm64-vm recipe); the
    /// armv8_pmuv3 driver hides PMCEID-absent common events, so L1D_CACHE (0x04) is absent,
    /// while an implementation-defined code (0x40+) is never listed and proves nothing.
    #[test]
    fn events_missing_from_sysfs_are_not_counted() {
        let listed: std::collections::BTreeSet<u64> = [0x11, 0x08, 0x24, 0x23].into();
        assert!(absent_per_pmceid(0x04, &listed));
        assert!(absent_per_pmceid(0x4004, &listed));
        assert!(!absent_per_pmceid(0x08, &listed));
        assert!(!absent_per_pmceid(0x40, &listed));
        assert!(!absent_per_pmceid(0x04, &Default::default()));
    }

    fn tree(name: &str) -> String {
        format!("{}/../pmu/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
    }

    /// N1 with 6 counters + cycle counter, rates giving IPC 0.5 and 80 % back-end stalls.
    fn n1_pmu() -> SimPmu {
        let mut pmu = SimPmu::new(6, true);
        for (code, rate) in [(0x11, 2.0), (0x08, 1.0), (0x24, 1.6), (0x23, 0.02)] {
            pmu.rates.insert(code, rate);
        }
        pmu
    }

    #[test]
    fn live_run_on_a_simulated_n1() {
        let root = tree("sysfs-altra-n1");
        let a = args(&["--sysfs-root", &root, "--stage", "1", "--", "true"]);
        let pmu = n1_pmu();
        let r = live(&a, &pmu).unwrap();
        let s = &r.scopes[0];
        assert_eq!(s.cpu.catalog, "neoverse-n1");
        let c = s.cpu.counters.as_ref().unwrap();
        assert_eq!(
            (c.programmable, c.cycle_counter, c.source.as_str()),
            (6, true, "probed")
        );
        // One group holds both cycle-accounting metrics: counted all the time.
        assert_eq!(s.schedule.as_ref().unwrap().groups.len(), 1);
        let be = s.totals.metric("backend_stalled_cycles").unwrap();
        assert!((be.value.unwrap() - 80.0).abs() < 1e-6, "{:?}", be.value);
        assert_eq!(be.running_fraction, Some(1.0));
        assert_eq!(s.totals.bottleneck_path, vec!["backend_stalled_cycles"]);
        assert_eq!(pmu.open_fds(), 0, "every counter closed");
        // The command's counters were enabled on exec, the leader disabled until then.
        let opened = pmu.opened.borrow();
        assert!(opened.iter().any(|a| a.disabled()));
    }

    #[test]
    fn multiplexed_groups_are_scaled_and_flagged() {
        let root = tree("sysfs-altra-n1");
        // Two programmable counters: stage 2 needs several groups, time-sliced.
        let a = args(&[
            "--sysfs-root",
            &root,
            "--counters",
            "2",
            "-m",
            "Cycle_Accounting,General,L1D_Cache_Effectiveness",
            "--",
            "true",
        ]);
        let mut pmu = n1_pmu();
        pmu.rates.insert(0x04, 0.5);
        pmu.rates.insert(0x03, 0.05);
        let r = live(&a, &pmu).unwrap();
        let s = &r.scopes[0];
        let n = s.schedule.as_ref().unwrap().groups.len();
        assert!(n >= 2);
        let ipc = s.totals.metric("ipc").unwrap();
        // Scaled counts keep the ratio: 1.0 / 2.0.
        assert!((ipc.value.unwrap() - 0.5).abs() < 1e-3, "{:?}", ipc.value);
        let f = ipc.running_fraction.unwrap();
        assert!((f - 1.0 / n as f64).abs() < 1e-9);
        assert_eq!(ipc.low_confidence, f < 0.5);
        let miss = s.totals.metric("l1d_cache_miss_ratio").unwrap();
        assert!((miss.value.unwrap() - 0.1).abs() < 1e-3);
    }

    #[test]
    fn no_multiplex_runs_each_group() {
        let root = tree("sysfs-altra-n1");
        let a = args(&[
            "--sysfs-root",
            &root,
            "--counters",
            "2",
            "--no-multiplex",
            "-m",
            "Cycle_Accounting,General",
            "--",
            "true",
        ]);
        let pmu = n1_pmu();
        let r = live(&a, &pmu).unwrap();
        let s = &r.scopes[0];
        assert_eq!(s.schedule.as_ref().unwrap().mode, "one run per group");
        let be = s.totals.metric("backend_stalled_cycles").unwrap();
        assert_eq!(
            be.running_fraction,
            Some(1.0),
            "a group alone is never time-sliced"
        );
        // The simulated runs are identical, so no disagreement.
        assert!(!s
            .totals
            .warnings
            .iter()
            .any(|w| w.kind == WarningKind::RunsDisagree));
    }

    #[test]
    fn interval_timeline_from_a_live_run() {
        let root = tree("sysfs-altra-n1");
        let a = args(&[
            "--sysfs-root",
            &root,
            "--stage",
            "1",
            "-I",
            "10",
            "--",
            "sleep",
            "0.1",
        ]);
        let mut pmu = n1_pmu();
        pmu.advance_per_read_ns = 1_000_000;
        let r = live(&a, &pmu).unwrap();
        let s = &r.scopes[0];
        assert!(s.intervals.len() >= 3, "{} intervals", s.intervals.len());
        // Every interval's delta has the simulated 80 % back-end stalls.
        for iv in &s.intervals[1..] {
            let v = iv.metrics["backend_stalled_cycles"].expect("value");
            assert!((v - 80.0).abs() < 0.5, "{v}");
            assert_eq!(iv.bottleneck, vec!["backend_stalled_cycles"]);
        }
        assert!(s.intervals.windows(2).all(|w| w[0].time_s < w[1].time_s));
        assert!(report::render_text(&r).contains("Timeline"));
    }

    #[test]
    fn runs_that_disagree_are_reported() {
        let mut m = Measurement::default();
        for v in [100.0, 120.0] {
            let mut g = BTreeMap::new();
            g.insert(
                "CPU_CYCLES".to_string(),
                spelunk_pmu::EventCount::counted(v, Some(1.0)),
            );
            m.groups.push(g);
        }
        let w = disagreement(&m);
        assert_eq!(w.len(), 1);
        assert!(w[0].message.contains("20.0 %"), "{}", w[0].message);
    }

    #[test]
    fn x86_vm_exits_with_an_honest_message() {
        let root = tree("sysfs-x86-vm");
        let a = args(&["--sysfs-root", &root, "--", "true"]);
        let err = format!("{:#}", live(&a, &n1_pmu()).unwrap_err());
        assert!(err.contains("hardware PMU"), "{err}");
        assert!(err.contains("--import"), "{err}");
        assert!(err.contains("GenuineIntel"), "{err}");
        // --emulate is offered as available, not as a plan.
        assert!(err.contains("`spelunk topdown --emulate -- CMD`"), "{err}");
        assert!(!err.contains("not available"), "{err}");
    }

    #[test]
    fn kernel_without_pmu_support_is_named() {
        let root = tree("sysfs-altra-n1");
        let a = args(&["--sysfs-root", &root, "--", "true"]);
        let mut pmu = n1_pmu();
        pmu.fail_all = Some(2); // ENOENT
        let err = format!("{:#}", live(&a, &pmu).unwrap_err());
        assert!(err.contains("--import"), "{err}");
        assert!(
            err.contains("does not implement the event, or there is no hardware PMU"),
            "{err}"
        );
    }

    #[test]
    fn import_needs_a_cpu_and_list_works() {
        let dir = std::env::temp_dir().join(format!("spelunk-td-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let csv = dir.join("x.csv");
        std::fs::write(&csv, "100,,r8,1000,100.00,,\n").unwrap();
        let a = args(&["--import", csv.to_str().unwrap()]);
        let err = format!("{:#}", run(a).unwrap_err());
        assert!(err.contains("--cpu"), "{err}");
        let a = args(&["--import", dir.join("missing.csv").to_str().unwrap()]);
        let err = format!("{:#}", run(a).unwrap_err());
        assert!(err.contains("missing.csv"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
        let c = catalog::by_name("neoverse-v2").unwrap().catalog;
        let l = list_catalog(&c);
        assert!(l.contains("Topdown_L1 [stage 1]"), "{l}");
        assert!(l.contains("SLOTS"), "{l}");
    }

    #[test]
    fn cpu_lists_compact() {
        assert_eq!(compact_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
    }
}
