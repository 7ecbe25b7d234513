//! `spelunk record`: run a program and record its SPE samples and PMU counts into a perf.data
//! plus the sidecar. Wiring only: the flows (which recorder, the checks, --overhead's runs) are
//! spelunk_record::flow, the summaries spelunk_report::record_text.

use clap::Args;
use spelunk_record::flow::{self, RecordRequest, Recorded, Recorder};
use spelunk_report::record_text;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

/// Run a program and record SPE samples (and PMU counts) into a perf.data plus its sidecar.
///
/// With --emulate the program runs under spelunk's emulator: a Valgrind tool that models an Arm
/// Neoverse core (N1 by default; V1, V2 or N2 with --cpu-model, or a system with --platform:
/// caches with coherence, TLBs, branch predictor, timing) and samples operations the way SPE
/// does. It works on any Linux machine (x86-64 or aarch64) and is slow (around
/// 100x). The perf.data is standard (`perf report -D`, `perf script` open it); the sidecar
/// FILE.spelunk.json holds phases and objects named with include/spelunk.h, the counter
/// timeline and the emulator's exact ground truth. Before the run, spelunk reads the program
/// (and its own, non-system libraries) for what Valgrind cannot run: a program for another
/// architecture, or SVE/SME (aarch64) or AVX-512 (x86-64) instructions, and refuses it, or
/// only warns when the program checks the CPU's features before using them.
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
  spelunk record --emulate --platform graviton4 -- ./app  # an emulated Graviton4 (Neoverse V2)
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

    /// With --emulate: the core to emulate: neoverse-n1 (default), neoverse-v1, neoverse-v2,
    /// neoverse-n2 (the names decode's --cpu-model uses); replaces a --platform's core
    #[arg(long = "cpu-model", value_name = "NAME")]
    pub cpu_model: Option<String>,

    /// With --emulate: a system preset (core, clock, L2, SLC, page size, DRAM latency, core
    /// count): graviton2, graviton3, graviton4, grace, cobalt100, altra, n1sdp. An
    /// --emulator-opt setting a parameter overrides it (emulator/MODEL.md); one setting
    /// --cpu-model, --platform, --midr or --cpu-name is refused
    #[arg(long, value_name = "NAME")]
    pub platform: Option<String>,

    /// With --emulate: run the program even though it holds instructions Valgrind cannot run
    /// (SVE, SME, AVX-512) that no CPU check spelunk recognises guards (e.g. it reads
    /// /proc/cpuinfo); they are warned about, and the program stops with SIGILL if it runs one
    #[arg(long)]
    pub ignore_unsupported: bool,

    /// No SPE: record only the timelines of the command's process tree, resident memory per
    /// NUMA node and mapping class and PMU counters (what a VM or an x86-64 machine can give).
    /// Writes the sidecar FILE.spelunk.json and no perf.data; `spelunk report FILE` reads it
    #[arg(long, conflicts_with_all = [
        "emulate", "filter", "min_latency", "event_filter", "no_pa", "pct", "kernel",
        "all_cpus", "cpus", "pmu", "aux_pages", "no_collisions", "emulator_opts", "keep_trace",
        "jitter", "no_jitter", "period", "cpu_model", "platform", "ignore_unsupported",
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

    /// When the recording is written, also pack it with its sidecar and the mapped files (by
    /// build-id) into FILE.tar, as `spelunk archive FILE` does: its report then reads the same
    /// on another machine or after the program is rebuilt
    #[arg(long, conflicts_with_all = ["no_spe", "overhead"])]
    pub archive: bool,

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

impl RecordArgs {
    /// The flags as spelunk-record's request.
    fn request(&self) -> RecordRequest {
        RecordRequest {
            recorder: if self.no_spe {
                Recorder::TimelinesOnly
            } else if self.emulate {
                Recorder::Emulated
            } else {
                Recorder::Hardware
            },
            output: self.output.clone(),
            command: self.command.clone(),
            cmdline: std::env::args().collect(),
            period_ops: self.period,
            jitter: !self.no_jitter,
            filter: self.filter.clone(),
            min_latency_cycles: self.min_latency,
            event_filter: self.event_filter.clone(),
            pa: !self.no_pa,
            pct: self.pct,
            kernel: self.kernel,
            system_wide: self.all_cpus,
            pids: self.pids.clone(),
            cpus: self.cpus.clone(),
            runtime: !self.no_runtime,
            pmu: self.pmu.clone(),
            aux_pages: self.aux_pages,
            collisions: !self.no_collisions,
            platform: self.platform.clone(),
            cpu_model: self.cpu_model.clone(),
            emulator_opts: self.emulator_opts.clone(),
            keep_trace: self.keep_trace,
            ignore_unsupported: self.ignore_unsupported,
            capacity_interval_ms: self.capacity_interval,
        }
    }
}

pub fn run(args: RecordArgs) -> anyhow::Result<ExitCode> {
    let req = args.request();
    let mut say = |l: &str| eprintln!("spelunk record: {l}");
    let summary =
        |r: &Recorded| eprint!("{}", record_text::summary(r, args.keep_trace, args.period));
    if args.overhead {
        let (overhead, code) =
            match flow::record_overhead(&req, args.runs, &mut say, &mut |r| summary(r)) {
                Ok(r) => r,
                Err(e) => return interrupted_exit("spelunk record", e),
            };
        eprint!(
            "{}",
            spelunk_report::overhead_text::record_summary(&overhead)
        );
        return Ok(ExitCode::from(code));
    }
    let rec = match flow::record(&req, &mut say) {
        Ok(r) => r,
        Err(e) => return interrupted_exit("spelunk record", e),
    };
    summary(&rec);
    if args.archive {
        let tar = spelunk_engine::archive::default_output(&args.output);
        let archived = spelunk_engine::archive::archive(&args.output, &tar)?;
        eprint!("{}", spelunk_report::archive_text::render(&archived));
    }
    Ok(ExitCode::from(rec.exit_code()))
}

/// An interrupted recording is said (what was kept) and exits 128+N for signal N, as shells
/// report it; any other error goes to the usual error line.
pub fn interrupted_exit(command: &str, e: flow::RecordFlowError) -> anyhow::Result<ExitCode> {
    match e.exit_code() {
        Some(code) => {
            eprintln!("{command}: {e}");
            Ok(ExitCode::from(code))
        }
        None => Err(e.into()),
    }
}
