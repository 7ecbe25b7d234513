//! `spelunk record`: run a program and record its SPE samples and PMU counts into a perf.data
//! plus the sidecar. Wiring only: the hardware recorder and the emulated recording (emulator
//! run and trace conversion, spelunk_record::session) are spelunk-record.

use anyhow::{bail, Context};
use clap::Args;
use spelunk_record::session::{self, EmulatedRecording, Output, ProgramExit};
use spelunk_record::{EmulatorInstall, EmulatorOptions, HardwareOptions};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Run a program and record SPE samples (and PMU counts) into a perf.data plus its sidecar.
///
/// With --emulate the program runs under spelunk's emulator: a Valgrind tool that models an Arm
/// Neoverse N1 (caches with coherence, TLBs, branch predictor, timing) and samples operations
/// the way SPE does. It works on any Linux machine (x86-64 or aarch64) and is slow (around
/// 100x). The perf.data is standard (`perf report -D`, `perf script` open it); the sidecar
/// FILE.spelunk.json holds phases and objects named with include/spelunk.h, the counter
/// timeline and the emulator's exact ground truth.
///
/// Without --emulate, spelunk records with the machine's SPE (an `arm_spe_*` PMU: Arm metal
/// with the kernel driver loaded; `spelunk check` says whether this machine can): one SPE
/// event per CPU following the program's whole process tree from its exec, a writable AUX
/// buffer per CPU drained as it fills, losses (full buffers, collisions) counted per CPU. The
/// perf.data is what `perf record -e arm_spe_0//` writes, so perf opens it too.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  spelunk record -- ./stream -n 200000                    # hardware SPE (Arm metal)
  spelunk record -c 4096 --filter load --min-latency 64 -o chase.data -- ./lat_mem_rd 8m
  spelunk record -a -C 0-3 -o sys.data -- sleep 5         # every task on CPUs 0-3
  spelunk record -p 4242 -o attached.data                 # a running process, until Ctrl-C
  spelunk record --emulate -- ./stream -n 200000          # any machine, under the emulator
  spelunk record --emulate -c 4096 --filter load -o chase.data -- ./lat_mem_rd 8m 4096
  spelunk record --emulate --min-latency 100 -- ./app args
  spelunk record --overhead --runs 5 -- ./stream -n 200000   # slowdown of recording
  spelunk report perf.data                                # then analyse it

The program's stdin, stdout and stderr pass through, and spelunk record exits with the
program's exit status (128+N when a signal N killed it). docs/record.md has the details.")]
pub struct RecordArgs {
    /// Run the program under spelunk's SPE/PMU emulator (needs valgrind and emulator/build.sh)
    #[arg(long)]
    pub emulate: bool,

    /// Output perf.data; the sidecar is written next to it as FILE.spelunk.json
    #[arg(short, long, default_value = "perf.data", value_name = "FILE")]
    pub output: PathBuf,

    /// SPE sampling interval in operations (rounded down to a multiple of 256, as the hardware does)
    #[arg(
        short = 'c',
        long = "period",
        default_value_t = 1024,
        value_name = "OPS",
        allow_negative_numbers = true, value_parser = crate::common::values::record_period
    )]
    pub period: u64,

    /// Randomise the interval (PMSIRR_EL1.RND), which avoids aliasing with loop periods
    /// [the default; kept for old command lines]
    #[arg(long, conflicts_with = "no_jitter", hide = true)]
    pub jitter: bool,

    /// A fixed interval, not randomised. A loop whose operation count shares a factor with
    /// the interval can then be sampled at the same few instructions every time (or never)
    #[arg(long)]
    pub no_jitter: bool,

    /// Keep only these operation types (comma-separated: load, store, branch) [default: all]
    #[arg(long, value_delimiter = ',', value_name = "TYPES")]
    pub filter: Vec<String>,

    /// Keep only operations whose total latency is at least this many cycles
    #[arg(long, default_value_t = 0, value_name = "CYCLES", allow_negative_numbers = true, value_parser = crate::common::values::min_latency)]
    pub min_latency: u32,

    /// Keep only records with all of these events (PMSEVFR_EL1 bits, hex)
    #[arg(long, value_name = "HEX")]
    pub event_filter: Option<String>,

    /// Hardware SPE: do not ask for physical addresses (pa_enable; asked by default, and
    /// dropped with a note when the kernel refuses it to an unprivileged user)
    #[arg(long)]
    pub no_pa: bool,

    /// Hardware SPE: timestamps from the physical counter (pct_enable, privileged)
    #[arg(long)]
    pub pct: bool,

    /// Hardware SPE: also sample kernel-mode operations (privileged at perf_event_paranoid ≥ 2)
    #[arg(long)]
    pub kernel: bool,

    /// Hardware SPE: record every task on the CPUs (system-wide), until the command ends or,
    /// without a command, until Ctrl-C
    #[arg(short = 'a', long)]
    pub all_cpus: bool,

    /// Hardware SPE: attach to running processes (comma-separated PIDs): all their threads,
    /// and the threads and children they start from then on, until they end or Ctrl-C
    #[arg(
        short = 'p',
        long = "pid",
        value_delimiter = ',',
        value_name = "PID",
        conflicts_with_all = ["all_cpus", "command", "emulate", "no_spe"],
        allow_negative_numbers = true, value_parser = crate::common::values::process
    )]
    pub pids: Vec<i32>,

    /// Hardware SPE: only these CPUs (a list like 0-3,8) [default: every CPU the SPE PMU covers]
    #[arg(short = 'C', long = "cpus", value_name = "LIST")]
    pub cpus: Option<String>,

    /// Do not preload spelunk's runtime (libspelunk.so) into the command. By default it is
    /// loaded when found, so include/spelunk.h phases and objects and heap blocks by
    /// allocation site reach the recording (hardware SPE)
    #[arg(long)]
    pub no_runtime: bool,

    /// Hardware SPE: the PMU to use [default: the first arm_spe_*]
    #[arg(long, value_name = "NAME")]
    pub pmu: Option<String>,

    /// Hardware SPE: AUX buffer pages per CPU (a power of two ≥ 2; counts against
    /// kernel.perf_event_mlock_kb) [default: 256 as root, else 32]
    #[arg(long, value_name = "PAGES", allow_negative_numbers = true, value_parser = crate::common::values::aux_pages)]
    pub aux_pages: Option<usize>,

    /// Do not model sample collisions (a new sample while the previous one is still in flight)
    #[arg(long)]
    pub no_collisions: bool,

    /// A further emulator option, passed as given (repeatable), e.g. --emulator-opt=--l2-size=2097152
    /// (all options: emulator/spelunk-emu --help)
    #[arg(long = "emulator-opt", value_name = "OPT", allow_hyphen_values = true)]
    pub emulator_opts: Vec<String>,

    /// Keep the emulator's raw trace next to the output (FILE.emutrace)
    #[arg(long)]
    pub keep_trace: bool,

    /// No SPE: record only the timelines of the command's process tree, resident memory per
    /// NUMA node and mapping class and PMU counters (what a VM or an x86-64 machine can give).
    /// Writes the sidecar FILE.spelunk.json and no perf.data; `spelunk report FILE` reads it
    #[arg(long, conflicts_with_all = [
        "emulate", "filter", "min_latency", "event_filter", "no_pa", "pct", "kernel",
        "all_cpus", "cpus", "pmu", "aux_pages", "no_collisions", "emulator_opts", "keep_trace",
        "jitter", "no_jitter", "period",
    ])]
    pub no_spe: bool,

    /// Sample the command's resident memory and PMU counters every MS milliseconds (hardware
    /// SPE and --no-spe; the emulator keeps its own counter timeline) [default: 100]
    #[arg(long, value_name = "MS", conflicts_with = "emulate", allow_negative_numbers = true, value_parser = crate::common::values::interval_ms_whole)]
    pub capacity_interval: Option<u64>,

    /// Also measure what recording costs: run the command --runs times natively and --runs
    /// times recorded (interleaved, the same recording mode), and report the median wall and
    /// CPU times and the slowdown. The last recorded run is the recording kept; every other
    /// run's standard output goes to /dev/null ([NMO paper §VII-A])
    #[arg(long, conflicts_with_all = ["all_cpus", "pids"])]
    pub overhead: bool,

    /// Runs of each kind for --overhead
    #[arg(long, default_value_t = 3, value_name = "N", requires = "overhead", allow_negative_numbers = true, value_parser = crate::common::values::small_count)]
    pub runs: u32,

    /// The program and its arguments (after --)
    #[arg(
        last = true,
        required_unless_present_any = ["all_cpus", "pids"],
        value_name = "COMMAND"
    )]
    pub command: Vec<OsString>,
}

/// One recording: the program's exit code to pass on and how long the program ran.
struct Once {
    exit_code: u8,
    /// From starting the program to its end (the emulated run without the trace's conversion;
    /// for the hardware and --no-spe recorders, their whole session).
    program_wall: Duration,
}

pub fn run(args: RecordArgs) -> anyhow::Result<ExitCode> {
    if args.overhead {
        return run_overhead(&args);
    }
    Ok(ExitCode::from(record_once(&args)?.exit_code))
}

fn record_once(args: &RecordArgs) -> anyhow::Result<Once> {
    if args.no_spe {
        return run_timelines(args);
    }
    let event_filter = check_sampling_options(args)?;
    if !args.emulate {
        return run_hardware(args, event_filter);
    }
    let options = EmulatorOptions {
        period_ops: args.period,
        jitter: !args.no_jitter,
        filter: args.filter.clone(),
        min_latency_cycles: args.min_latency,
        event_filter,
        collisions: !args.no_collisions,
        extra: args.emulator_opts.clone(),
    };
    let trace = session::trace_path(&args.output);
    let sidecar = spelunk_perf::sidecar::Sidecar::path_for(&args.output);
    let program = args.command.first().and_then(|p| program_path(p));
    crate::common::guard_outputs(
        &program.iter().map(|p| p.as_path()).collect::<Vec<_>>(),
        &[&args.output, &sidecar, &trace],
    )?;
    // Where the output goes is checked before the program runs (minutes under the emulator).
    if let Some(dir) = args.output.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            bail!("{}: no such directory for the output", dir.display());
        }
    }
    if args.output.is_dir() {
        bail!(
            "-o {}: is a directory; give the perf.data's file name",
            args.output.display()
        );
    }
    let install = EmulatorInstall::locate()?;

    let program = args.command[0].to_string_lossy().into_owned();
    eprintln!(
        "spelunk record: running {program} under the emulated Neoverse N1 (Valgrind; expect \
         the program to run ~100x slower than natively)"
    );
    let cmdline: Vec<String> = std::env::args().collect();
    let output = Output::At {
        perf_data: args.output.clone(),
        keep_trace: args.keep_trace,
    };
    let rec = EmulatedRecording::run(&install, &options, output, &args.command, &cmdline, |l| {
        eprintln!("spelunk record: valgrind: {l}")
    })?;
    eprint!(
        "{}",
        spelunk_report::record_text::emulated_summary(&rec, args.keep_trace, args.period)
    );
    Ok(Once {
        exit_code: rec.exit.code(),
        program_wall: rec.wall,
    })
}

/// Checks shared by both recorders; returns the event filter.
fn check_sampling_options(args: &RecordArgs) -> anyhow::Result<u64> {
    if args.period < 256 {
        bail!(
            "--period {}: SPE intervals are multiples of 256 operations (the smallest Neoverse \
             N1 allows is 1024)",
            args.period
        );
    }
    for f in &args.filter {
        if !matches!(f.as_str(), "load" | "store" | "branch") {
            bail!("--filter {f}: expected load, store or branch (comma-separated)");
        }
    }
    Ok(match &args.event_filter {
        None => 0,
        Some(s) => {
            let h = s.trim_start_matches("0x").trim_start_matches("0X");
            u64::from_str_radix(h, 16)
                .with_context(|| format!("--event-filter {s}: not a hex number"))?
        }
    })
}

/// `spelunk record` without --emulate: the machine's SPE.
fn run_hardware(args: &RecordArgs, event_filter: u64) -> anyhow::Result<Once> {
    if !args.emulator_opts.is_empty() || args.keep_trace || args.no_collisions {
        bail!("--emulator-opt, --keep-trace and --no-collisions apply to --emulate only");
    }
    if let Some(p) = args.aux_pages.filter(|p| *p < 2 || !p.is_power_of_two()) {
        bail!("--aux-pages {p}: the kernel needs a power of two, at least 2");
    }
    let cpus = match &args.cpus {
        None => None,
        Some(list) => Some(
            spelunk_perf::spe_pmu::parse_cpu_list(list)
                .filter(|v| !v.is_empty())
                .with_context(|| format!("--cpus {list}: expected a CPU list like 0-3,8"))?,
        ),
    };
    let command: Vec<String> = args
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let sidecar = spelunk_perf::sidecar::Sidecar::path_for(&args.output);
    let program = args.command.first().and_then(|p| program_path(p));
    crate::common::guard_outputs(
        &program.iter().map(|p| p.as_path()).collect::<Vec<_>>(),
        &[&args.output, &sidecar],
    )?;
    let runtime = runtime_for(args, &command);
    let interval_ms = args.capacity_interval.unwrap_or(100);
    let timelines = Some(spelunk_record::hardware::HardwareTimelines {
        interval_ns: interval_ms
            .checked_mul(1_000_000)
            .with_context(|| format!("--capacity-interval {interval_ms}: too long"))?,
        pmu: spelunk_record::timeline::detect_counter_pmu(std::path::Path::new("/")),
        line_bytes: spelunk_record::timeline::line_bytes(std::path::Path::new("/sys")),
    });
    let options = HardwareOptions {
        timelines,
        runtime,
        pmu: args.pmu.clone(),
        period_ops: args.period,
        jitter: !args.no_jitter,
        filter: args.filter.clone(),
        min_latency_cycles: args.min_latency,
        event_filter,
        pa: !args.no_pa,
        pct: args.pct,
        kernel: args.kernel,
        system_wide: args.all_cpus,
        pids: args.pids.clone(),
        cpus,
        aux_pages: args.aux_pages,
        ..Default::default()
    };
    let cmdline: Vec<String> = std::env::args().collect();
    if let Some(p) = args.pids.iter().find(|p| **p <= 0) {
        bail!("--pid {p}: a process id is a positive number");
    }
    let what = if !args.pids.is_empty() {
        format!(
            "process(es) {} (until they end, or Ctrl-C)",
            args.pids
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else if command.is_empty() {
        "every task (Ctrl-C stops)".to_string()
    } else {
        command[0].clone()
    };
    eprintln!("spelunk record: recording {what} with hardware SPE");
    let started = std::time::Instant::now();
    let rec = spelunk_record::hardware::record(&options, &command, &args.output, &cmdline)?;
    let wall = started.elapsed();
    for d in &rec.dropped {
        eprintln!("spelunk record: note: {d}");
    }
    for w in &rec.warnings {
        eprintln!("spelunk record: warning: {w}");
    }
    eprint!(
        "{}",
        spelunk_report::record_text::hardware_summary(&rec, wall)
    );
    let code = rec.exit_status.map(|s| ProgramExit(s).code()).unwrap_or(0);
    Ok(Once {
        exit_code: code,
        program_wall: wall,
    })
}

/// libspelunk.so to preload into `command`, unless --no-runtime or there is no command; a
/// runtime that cannot be found is a note, not an error.
fn runtime_for(args: &RecordArgs, command: &[String]) -> Option<PathBuf> {
    if args.no_runtime || command.is_empty() {
        return None;
    }
    match spelunk_record::runtime_log::locate_runtime() {
        Ok(lib) => Some(lib),
        Err(why) => {
            eprintln!(
                "spelunk record: note: {why}: recording without include/spelunk.h phases and \
                 objects and without heap blocks"
            );
            None
        }
    }
}

/// The file `argv0` runs: itself when it names a path, else the first match on PATH.
fn program_path(argv0: &std::ffi::OsStr) -> Option<PathBuf> {
    let p = std::path::Path::new(argv0);
    if p.components().count() > 1 {
        return Some(p.to_path_buf());
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(p))
            .find(|c| c.is_file())
    })
}

/// `spelunk record --no-spe`: the timelines alone (resident memory and PMU counters of the
/// command's process tree over time), in the sidecar; no SPE, no perf.data.
fn run_timelines(args: &RecordArgs) -> anyhow::Result<Once> {
    use spelunk_record::timeline::{self, TimelineOptions};
    let interval_ms = args.capacity_interval.unwrap_or(100);
    let interval_ns = interval_ms
        .checked_mul(1_000_000)
        .with_context(|| format!("--capacity-interval {interval_ms}: too long"))?;
    if args.command.is_empty() {
        bail!("--no-spe records a command: give it after `--`");
    }
    let sidecar = spelunk_perf::sidecar::Sidecar::path_for(&args.output);
    if args.output.exists() {
        bail!(
            "{} exists: --no-spe writes no perf.data, so {} would sit next to a recording it \
             does not describe. Remove {} or choose another -o",
            args.output.display(),
            sidecar.display(),
            args.output.display()
        );
    }
    if let Some(dir) = args.output.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            bail!("{}: no such directory for the output", dir.display());
        }
    }
    let program = args.command.first().and_then(|p| program_path(p));
    crate::common::guard_outputs(
        &program.iter().map(|p| p.as_path()).collect::<Vec<_>>(),
        &[&sidecar],
    )?;
    let command: Vec<String> = args
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let pmu = timeline::detect_counter_pmu(std::path::Path::new("/"));
    let runtime = runtime_for(args, &command);
    let options = TimelineOptions {
        runtime,
        interval_ns,
        proc_root: PathBuf::from("/proc"),
        pmu,
        line_bytes: timeline::line_bytes(std::path::Path::new("/sys")),
    };
    eprintln!(
        "spelunk record: recording {}'s resident memory and PMU counters every {interval_ms} ms \
         (--no-spe: no SPE samples)",
        command[0]
    );
    let started = std::time::Instant::now();
    let rec = timeline::record_timelines(
        &spelunk_perf::counting::LinuxPerfSys,
        &options,
        &command,
        &sidecar,
    )?;
    for w in &rec.warnings {
        eprintln!("spelunk record: note: {w}");
    }
    let wall = started.elapsed();
    eprint!(
        "{}",
        spelunk_report::record_text::timelines_summary(&rec, wall)
    );
    Ok(Once {
        exit_code: ProgramExit(rec.exit_status).code(),
        program_wall: wall,
    })
}

/// `spelunk record --overhead`: native and recorded runs, interleaved (native first in each
/// pair, so drift in the machine's state hits both kinds alike); the timings go into the kept
/// recording's sidecar and the closing summary.
fn run_overhead(args: &RecordArgs) -> anyhow::Result<ExitCode> {
    use spelunk_record::overhead::{children_cpu_ns, run_native, QuietStdout};
    // -a and -p are refused by clap (nothing to run natively); a command is needed.
    if args.command.is_empty() {
        bail!("--overhead runs a command natively and recorded: give it after `--`");
    }
    let mode = if args.no_spe {
        "no SPE"
    } else if args.emulate {
        "emulated"
    } else {
        "hardware SPE"
    };
    let runs = args.runs;
    let program = args.command[0].to_string_lossy().into_owned();
    eprintln!(
        "spelunk record: --overhead: running {program} {runs} time(s) natively and {runs} time(s) recorded ({mode}); only the last recorded run keeps its standard output"
    );
    let mut native = Vec::new();
    let mut recorded = Vec::new();
    let mut exit_code = 0;
    for i in 1..=runs {
        let (run, status) = run_native(&args.command)
            .with_context(|| format!("--overhead: starting {program} natively"))?;
        if !status.success() {
            eprintln!(
                "spelunk record: warning: native run {i} of {program} exited with {}",
                ProgramExit(status)
            );
        }
        native.push(run);
        let quiet = if i < runs {
            Some(
                QuietStdout::new()
                    .context("--overhead: sending the program's output to /dev/null")?,
            )
        } else {
            None
        };
        let cpu_before = children_cpu_ns();
        let once = record_once(args)?;
        let cpu_ns = children_cpu_ns().saturating_sub(cpu_before);
        drop(quiet);
        recorded.push(spelunk_perf::sidecar::TimedRun {
            wall_ns: once.program_wall.as_nanos() as u64,
            cpu_ns,
        });
        exit_code = once.exit_code;
    }
    let overhead = spelunk_perf::sidecar::Overhead::of(mode, native, recorded);
    let sidecar_path = spelunk_perf::sidecar::Sidecar::path_for(&args.output);
    let mut sidecar = spelunk_perf::sidecar::Sidecar::read(&sidecar_path)
        .context("--overhead: reading the recording's sidecar to add the timings")?;
    sidecar.overhead = Some(overhead.clone());
    sidecar
        .write(&sidecar_path)
        .context("--overhead: writing the timings into the sidecar")?;
    eprint!(
        "{}",
        spelunk_report::overhead_text::record_summary(&overhead)
    );
    Ok(ExitCode::from(exit_code))
}
