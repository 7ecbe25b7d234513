//! `spelunk topdown`: top-down methodology from PMU counters. Wiring only: catalogs, detection,
//! scheduling, live counting (spelunk_pmu::live), evaluation and the import flows
//! (spelunk_pmu::flow) are in spelunk-pmu, the emulated run in spelunk_record::flow, rendering
//! in spelunk_report::topdown_text; the syscalls are spelunk_perf::counting.

use anyhow::Context;
use clap::{Args, ValueEnum};
use spelunk_perf::counting::LinuxPerfSys;
use spelunk_perf::sidecar::Sidecar;
use spelunk_pmu::compute::StageFilter;
use spelunk_pmu::flow::{LiveTarget, TopdownRequest};
use spelunk_pmu::live::LivePlan;
use spelunk_record::flow::{emulated_topdown, EmulatedTopdown};
use spelunk_report::topdown_text;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

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
/// `--emulate` counts the command under spelunk's emulated Neoverse N1 (or the core
/// --cpu-model or --platform names) instead (any Linux machine); `--import` computes the same from `perf stat -x` output recorded elsewhere or from
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
  spelunk topdown --emulate --platform graviton4 -- ./app   # an emulated Neoverse V2
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

    /// Count the command under spelunk's emulator (a Valgrind tool, emulator/; works on any
    /// Linux machine, ~100x slower): an emulated Neoverse N1, or the core --cpu-model names or
    /// the --platform's; the program's output and exit status pass through. A program
    /// Valgrind cannot run (another architecture; SVE/SME or AVX-512 used without a CPU
    /// check) is refused before the run (docs/record.md)
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

    /// With --emulate: a system preset (core, clock, L2, SLC, page size, DRAM latency, core
    /// count): graviton2, graviton3, graviton4, grace, cobalt100, altra, n1sdp. An
    /// --emulator-opt setting a parameter overrides it (emulator/MODEL.md); one setting
    /// --cpu-model, --platform, --midr or --cpu-name is refused
    #[arg(long, value_name = "NAME", requires = "emulate")]
    pub platform: Option<String>,

    /// With --emulate: run the program even though it holds instructions Valgrind cannot run
    /// (SVE, SME, AVX-512) that no CPU check spelunk recognises guards (e.g. it reads
    /// /proc/cpuinfo); they are warned about, and the program stops with SIGILL if it runs one
    #[arg(long, requires = "emulate")]
    pub ignore_unsupported: bool,

    /// Catalog to use instead of detecting it (required with --import of perf stat output):
    /// neoverse-n1, neoverse-n2-r0p2, neoverse-n2-r0p3, neoverse-n3, neoverse-v1, neoverse-v2,
    /// neoverse-v3, neoverse-v3ae, armv8, armv9. With --emulate: the core to emulate
    /// (neoverse-n1, neoverse-v1, neoverse-v2, neoverse-n2; it replaces a --platform's core),
    /// whose catalog is then picked by the MIDR it claims
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

impl TopdownArgs {
    /// The flags as spelunk-pmu's request.
    fn request(&self) -> TopdownRequest {
        TopdownRequest {
            cpu_model: self.cpu.clone(),
            spec: self.spec.clone(),
            stage: match self.stage {
                StageArg::One => StageFilter::One,
                StageArg::Two => StageFilter::Two,
                StageArg::All => StageFilter::All,
            },
            groups: self.groups.clone(),
            nodes: self.nodes.clone(),
            interval_ms: self.interval_ms,
            per_cpu: self.per_cpu,
            per_phase: self.per_phase,
            slots: self.slots,
        }
    }
}

pub fn run(args: TopdownArgs) -> anyhow::Result<ExitCode> {
    // --import of a perf.data reads the sidecar next to it: that is an input too.
    let import_sidecar = args.import.as_deref().map(Sidecar::path_for);
    // So is the program --emulate runs (its path, or the first match on PATH).
    let program = args
        .command
        .first()
        .and_then(|p| spelunk_record::flow::program_path(p.as_ref()));
    let inputs: Vec<&Path> = [
        &args.import,
        &import_sidecar,
        &args.record,
        &args.spec,
        &program,
    ]
    .into_iter()
    .filter_map(|p| p.as_deref())
    .collect();
    crate::common::guard_outputs(&inputs, args.output.as_deref())?;
    let req = args.request();
    if args.list {
        print!("{}", topdown_text::render_catalog(&req.listed_catalog()?));
        return Ok(ExitCode::SUCCESS);
    }
    let (report, code) = if let Some(file) = &args.import {
        (req.import(file)?, 0)
    } else if args.emulate {
        let run = EmulatedTopdown {
            command: args.command.clone(),
            cmdline: std::env::args().collect(),
            emulator_opts: args.emulator_opts.clone(),
            platform: args.platform.clone(),
            record: args.record.clone(),
            keep_trace: args.keep_trace,
            ignore_unsupported: args.ignore_unsupported,
        };
        match emulated_topdown(&req, &run, &mut |l| eprintln!("spelunk topdown: {l}")) {
            Ok(r) => r,
            Err(e) => return crate::record::interrupted_exit("spelunk topdown", e),
        }
    } else {
        req.check_live()?;
        let options = req.live_options(&LiveTarget {
            command: args.command.clone(),
            cpus: args.cpus.clone(),
            all_cpus: args.all_cpus,
            pid: args.pid,
            duration_s: args.duration,
            multiplex: !args.no_multiplex,
            counters: args.counters,
            sysfs_root: args.sysfs_root.clone(),
        })?;
        let plan = LivePlan::new(&options, &LinuxPerfSys)?;
        (plan.count(&LinuxPerfSys)?, 0)
    };
    let out = if args.json {
        topdown_text::render_json(&report) + "\n"
    } else if args.csv {
        topdown_text::render_csv(&report)
    } else {
        topdown_text::render_text(&report)
    };
    match &args.output {
        Some(path) => spelunk_fsio::write_atomic(path, out.as_bytes())
            .with_context(|| format!("writing the report to {}", path.display()))?,
        None => print!("{out}"),
    }
    Ok(ExitCode::from(code))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

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
        let c = spelunk_pmu::catalog::by_name("neoverse-v2")
            .unwrap()
            .catalog;
        let l = topdown_text::render_catalog(&c);
        assert!(l.contains("Topdown_L1 [stage 1]"), "{l}");
        assert!(l.contains("SLOTS"), "{l}");
    }
}
