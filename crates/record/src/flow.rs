//! `spelunk record`'s flows, front to back: check the options, refuse an output that would
//! overwrite an input, choose the recorder (emulated, hardware SPE, or the timelines alone) and
//! run it, and for `--overhead` interleave native and recorded runs and add their timings to
//! the kept recording's sidecar. They live here, not in the command-line front end, so that
//! every front end records the same way; the front end turns its flags into a
//! [`RecordRequest`], passes a function that shows progress lines, and renders the typed
//! [`Recorded`] it gets back (spelunk-report's `record_text`).

use crate::emulator::EmulatedMachine;
use crate::overhead::{children_cpu_ns, run_native, QuietStdout};
use crate::session::{self, EmulatedRecording, Output, ProgramExit, SessionError};
use crate::timeline::{self, TimelineError, TimelineOptions, TimelineRecording};
use crate::unsupported;
use crate::{hardware, HardwareRecording};
use crate::{EmulatorError, EmulatorInstall, EmulatorOptions, HardwareError, HardwareOptions};
use spelunk_perf::sidecar::{Overhead, Sidecar, SidecarError, TimedRun};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Which recorder runs the command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Recorder {
    /// The machine's SPE (an `arm_spe_*` PMU).
    #[default]
    Hardware,
    /// Spelunk's emulator (a Valgrind tool): an emulated Neoverse N1, or the core or platform
    /// `RecordRequest::cpu_model` / `platform` name.
    Emulated,
    /// No SPE: the timelines of resident memory and PMU counters alone, into the sidecar.
    TimelinesOnly,
}

/// What `spelunk record` was asked for: its flags as plain values (the front end's parser
/// enforces which combine; the checks that need more than one flag or the file system are
/// here).
#[derive(Clone, Debug, Default)]
pub struct RecordRequest {
    pub recorder: Recorder,
    /// The perf.data to write (the sidecar goes next to it).
    pub output: PathBuf,
    /// The program and its arguments (empty for `-a` or `-p` without a command).
    pub command: Vec<OsString>,
    /// spelunk's own command line, kept in the recording's header.
    pub cmdline: Vec<String>,
    pub period_ops: u64,
    pub jitter: bool,
    /// Operation types to keep (load, store, branch); empty: all.
    pub filter: Vec<String>,
    pub min_latency_cycles: u32,
    /// PMSEVFR_EL1 bits as the user wrote them (hex, `0x` optional).
    pub event_filter: Option<String>,
    pub pa: bool,
    pub pct: bool,
    pub kernel: bool,
    pub system_wide: bool,
    pub pids: Vec<i32>,
    /// A CPU list like `0-3,8`, as the user wrote it.
    pub cpus: Option<String>,
    /// Preload libspelunk.so into the command when it can be found.
    pub runtime: bool,
    pub pmu: Option<String>,
    pub aux_pages: Option<usize>,
    pub collisions: bool,
    /// The emulated platform preset (`--platform`; emulated runs only).
    pub platform: Option<String>,
    /// The emulated core (`--cpu-model`; emulated runs only), replacing the platform's.
    pub cpu_model: Option<String>,
    pub emulator_opts: Vec<String>,
    pub keep_trace: bool,
    /// Run the program under the emulator even when it holds instructions Valgrind cannot run
    /// that nothing seems to guard (`--ignore-unsupported`; they are warned about instead).
    pub ignore_unsupported: bool,
    /// Between the timelines' samples [default: 100 ms].
    pub capacity_interval_ms: Option<u64>,
}

/// One recording as made: the recorder's own result, and how long the program ran.
#[derive(Debug)]
pub enum Recorded {
    Emulated(EmulatedRecording),
    /// `wall`: the whole recording session.
    Hardware {
        recording: HardwareRecording,
        wall: Duration,
    },
    /// `wall`: the whole recording session.
    Timelines {
        recording: Box<TimelineRecording>,
        wall: Duration,
    },
}

impl Recorded {
    /// The exit code to pass on: the program's (128+N when signal N killed it).
    pub fn exit_code(&self) -> u8 {
        match self {
            Recorded::Emulated(r) => r.exit.code(),
            Recorded::Hardware { recording, .. } => recording
                .exit_status
                .map(|s| ProgramExit(s).code())
                .unwrap_or(0),
            Recorded::Timelines { recording, .. } => ProgramExit(recording.exit_status).code(),
        }
    }

    /// Points the recording's paths at where it was moved (it was written under a private
    /// name, see [`finish`]).
    fn relocate(&mut self, perf_data: &Path, sidecar: &Path) {
        match self {
            Recorded::Emulated(r) => r.relocate(perf_data, sidecar),
            Recorded::Hardware { recording, .. } => {
                recording.perf_data = perf_data.to_path_buf();
                recording.sidecar = sidecar.to_path_buf();
            }
            Recorded::Timelines { recording, .. } => {
                recording.sidecar_path = sidecar.to_path_buf();
            }
        }
    }

    /// From starting the program to its end (the emulated run without the trace's
    /// conversion; for the hardware and timelines recorders, their whole session).
    pub fn program_wall(&self) -> Duration {
        match self {
            Recorded::Emulated(r) => r.wall,
            Recorded::Hardware { wall, .. } | Recorded::Timelines { wall, .. } => *wall,
        }
    }
}

/// Why a recording was refused or failed. `Display` is the message; causes are `source`s.
#[derive(Debug, thiserror::Error)]
pub enum RecordFlowError {
    /// Options that cannot be recorded with, said with what to do instead.
    #[error("{0}")]
    Options(String),
    /// A step that failed, named, with its cause.
    #[error("{what}")]
    Step {
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error(transparent)]
    Output(#[from] spelunk_fsio::OutputIsInput),
    #[error(transparent)]
    Emulator(#[from] EmulatorError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Hardware(#[from] HardwareError),
    #[error(transparent)]
    Timeline(#[from] TimelineError),
    #[error(transparent)]
    Sidecar(#[from] SidecarError),
    /// spelunk got SIGINT or SIGTERM while the program ran: it was stopped, and what was
    /// recorded is kept (`kept`) when there was anything.
    #[error(
        "interrupted by {}: stopped {program}; {}",
        crate::interrupt::signal_name(*.signal),
        match kept {
            Some(p) => format!("kept what was recorded as {}", p.display()),
            None => "nothing was recorded".to_string(),
        }
    )]
    Interrupted {
        signal: i32,
        program: String,
        kept: Option<PathBuf>,
    },
}

impl RecordFlowError {
    /// The exit code a front end passes on for this error: 128+N for an interrupt by signal N
    /// (as shells report it), else `None` (an ordinary failure).
    pub fn exit_code(&self) -> Option<u8> {
        match self {
            RecordFlowError::Interrupted { signal, .. } => Some((128 + signal).min(255) as u8),
            _ => None,
        }
    }
}

type Result<T> = std::result::Result<T, RecordFlowError>;

fn refuse<T>(message: String) -> Result<T> {
    Err(RecordFlowError::Options(message))
}

fn step<E: std::error::Error + Send + Sync + 'static>(
    what: impl Into<String>,
) -> impl FnOnce(E) -> RecordFlowError {
    let what = what.into();
    move |e| RecordFlowError::Step {
        what,
        source: Box::new(e),
    }
}

/// Records once with the request's recorder. `say` gets the progress lines (`running ...`,
/// `note: ...`, `warning: ...`, `valgrind: ...`) as they happen.
///
/// The recording is written under a private name next to `req.output` and moved into place
/// only when the run succeeded, the previous one (and its sidecar) kept as `FILE.old`
/// ([`finish`], docs/files.md).
pub fn record(req: &RecordRequest, say: &mut dyn FnMut(&str)) -> Result<Recorded> {
    let stage = stage_output(&req.output)?;
    let mut rec = match record_into(req, None, stage.staged(), say) {
        Ok(rec) => rec,
        Err(e) => return Err(interrupted(e, Some(stage), req.keep_trace)),
    };
    let program = req
        .command
        .first()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (perf_data, sidecar) = finish(stage, req.keep_trace, rec.exit_code(), &program, say)?;
    rec.relocate(&perf_data, &sidecar);
    Ok(rec)
}

/// Records once with the request's recorder into `out` (emulated runs with `plan` when one
/// was made).
fn record_into(
    req: &RecordRequest,
    plan: Option<&EmulatedPlan>,
    out: &Path,
    say: &mut dyn FnMut(&str),
) -> Result<Recorded> {
    match req.recorder {
        Recorder::TimelinesOnly => record_timelines(req, out, say),
        Recorder::Hardware => {
            let event_filter = check_sampling_options(req)?;
            record_hardware(req, event_filter, out, say)
        }
        Recorder::Emulated => match plan {
            Some(plan) => record_emulated(req, plan, out, say),
            None => {
                let plan = plan_emulated(req, say)?;
                record_emulated(req, &plan, out, say)
            }
        },
    }
}

/// Plans the recording of `output` under a private name: refuses at once an output path that
/// holds no regular file (a device, FIFO, socket, directory, or a link to one).
fn stage_output(output: &Path) -> Result<spelunk_fsio::StagedRecording> {
    spelunk_fsio::StagedRecording::new(output).map_err(|e| {
        let m = e.to_string();
        if m.starts_with("refusing") {
            RecordFlowError::Options(m)
        } else {
            step::<std::io::Error>(format!("-o {}", output.display()))(e)
        }
    })
}

/// The companions of a recording at `perf_data`: its sidecar, and the emulator's trace when
/// kept.
fn companions(perf_data: &Path, keep_trace: bool) -> Vec<PathBuf> {
    let mut c = vec![Sidecar::path_for(perf_data)];
    if keep_trace {
        c.push(session::trace_path(perf_data));
    }
    c
}

/// Turns an interrupted run's error into the one to show, keeping what it recorded as
/// `FILE.partial`; other errors pass (the staged files go with `stage`).
fn interrupted(
    e: RecordFlowError,
    stage: Option<spelunk_fsio::StagedRecording>,
    keep_trace: bool,
) -> RecordFlowError {
    let (signal, program, recorded) = match e {
        RecordFlowError::Session(SessionError::Interrupted {
            signal,
            program,
            conversion,
        }) => (signal, program, conversion.is_some()),
        RecordFlowError::Timeline(TimelineError::Interrupted { signal, program }) => {
            (signal, program, true)
        }
        e => return e,
    };
    let kept = match (recorded, stage) {
        (true, Some(stage)) => {
            let companions = companions(stage.destination(), keep_trace);
            let refs: Vec<&Path> = companions.iter().map(PathBuf::as_path).collect();
            stage.keep_partial(&refs).ok().flatten()
        }
        _ => None,
    };
    RecordFlowError::Interrupted {
        signal,
        program,
        kept,
    }
}

/// Moves a finished recording into place (`perf record`'s convention): the previous one and
/// its sidecar become `FILE.old` (said once). A run whose program failed does not replace an
/// existing recording: it is kept as `FILE.partial` and the previous one is left as it was.
/// Returns where the perf.data and the sidecar are.
fn finish(
    stage: spelunk_fsio::StagedRecording,
    keep_trace: bool,
    exit_code: u8,
    program: &str,
    say: &mut dyn FnMut(&str),
) -> Result<(PathBuf, PathBuf)> {
    let dest = stage.destination().to_path_buf();
    let companions = companions(&dest, keep_trace);
    let refs: Vec<&Path> = companions.iter().map(PathBuf::as_path).collect();
    let previous = refs.iter().take(2).any(|p| p.exists()) || dest.exists();
    if exit_code != 0 && previous {
        let kept = stage
            .keep_partial(&refs)
            .map_err(step(format!(
                "keeping the recording next to {}",
                dest.display()
            )))?
            .unwrap_or_else(|| spelunk_fsio::partial_path(&dest));
        say(&format!(
            "note: {program} failed (exit code {exit_code}): the previous recording {} is left \
             as it was; this run's recording is kept as {}",
            dest.display(),
            kept.display()
        ));
        let sidecar = Sidecar::path_for(&kept);
        return Ok((kept, sidecar));
    }
    let old = stage.install(&refs).map_err(step(format!(
        "moving the recording into place as {}",
        dest.display()
    )))?;
    if let Some(old) = old {
        say(&format!("kept the previous recording as {}", old.display()));
    }
    let sidecar = Sidecar::path_for(&dest);
    Ok((dest, sidecar))
}

/// An emulated recording ready to run: every check that needs no run done (the options, the
/// output, the program's instructions, the emulator found). `--overhead` makes it once for
/// its whole series, so the check's warnings are said once.
struct EmulatedPlan {
    options: EmulatorOptions,
    check: unsupported::ProgramCheck,
    install: EmulatorInstall,
}

fn plan_emulated(req: &RecordRequest, say: &mut dyn FnMut(&str)) -> Result<EmulatedPlan> {
    let event_filter = check_sampling_options(req)?;
    let machine = emulated_machine(
        req.platform.as_deref(),
        req.cpu_model.as_deref(),
        &req.emulator_opts,
    )?;
    let options = EmulatorOptions {
        period_ops: req.period_ops,
        jitter: req.jitter,
        filter: req.filter.clone(),
        min_latency_cycles: req.min_latency_cycles,
        event_filter,
        collisions: req.collisions,
        machine,
        extra: req.emulator_opts.clone(),
        cwd: None,
        stdout_to_stderr: false,
    };
    let trace = session::trace_path(&req.output);
    let sidecar = Sidecar::path_for(&req.output);
    guard_program(&req.command, &[&req.output, &sidecar, &trace])?;
    // Where the output goes is checked before the program runs (minutes under the emulator).
    check_output_dir(&req.output)?;
    if req.output.is_dir() {
        return refuse(format!(
            "-o {}: is a directory; give the perf.data's file name",
            req.output.display()
        ));
    }
    let check = unsupported::before_emulated_run(
        &req.command[0],
        "spelunk record",
        req.ignore_unsupported,
        say,
    )
    .map_err(RecordFlowError::Options)?;
    let install = EmulatorInstall::locate()?;
    Ok(EmulatedPlan {
        options,
        check,
        install,
    })
}

fn record_emulated(
    req: &RecordRequest,
    plan: &EmulatedPlan,
    out: &Path,
    say: &mut dyn FnMut(&str),
) -> Result<Recorded> {
    let program = req.command[0].to_string_lossy().into_owned();
    say(&format!(
        "running {program} under {} (Valgrind; expect the program to run ~100x slower than \
         natively)",
        plan.options.machine.describe()
    ));
    let output = Output::At {
        perf_data: out.to_path_buf(),
        keep_trace: req.keep_trace,
    };
    let mut valgrind_lines = Vec::new();
    let rec = EmulatedRecording::run(
        &plan.install,
        &plan.options,
        output,
        &req.command,
        &req.cmdline,
        |l| {
            say(&format!("valgrind: {l}"));
            valgrind_lines.push(l.to_owned());
        },
    )?;
    unsupported::after_emulated_run(rec.exit, &valgrind_lines, &plan.check, say);
    Ok(Recorded::Emulated(rec))
}

/// The emulated machine the flags name, or a refusal listing the valid names, or refusing an
/// `--emulator-opt` that would choose another core or claim another CPU behind spelunk's back.
fn emulated_machine(
    platform: Option<&str>,
    cpu_model: Option<&str>,
    emulator_opts: &[String],
) -> Result<EmulatedMachine> {
    let refused = |e: &dyn std::fmt::Display| RecordFlowError::Options(e.to_string());
    crate::emulator::check_extra_options(emulator_opts).map_err(|e| refused(&e))?;
    EmulatedMachine::new(platform, cpu_model).map_err(|e| refused(&e))
}

/// Checks shared by the SPE recorders; returns the event filter.
fn check_sampling_options(req: &RecordRequest) -> Result<u64> {
    if req.period_ops < 256 {
        return refuse(format!(
            "--period {}: SPE intervals are multiples of 256 operations (the smallest Neoverse \
             N1 allows is 1024)",
            req.period_ops
        ));
    }
    for f in &req.filter {
        if !matches!(f.as_str(), "load" | "store" | "branch") {
            return refuse(format!(
                "--filter {f}: expected load, store or branch (comma-separated)"
            ));
        }
    }
    match &req.event_filter {
        None => Ok(0),
        Some(s) => {
            let h = s.trim_start_matches("0x").trim_start_matches("0X");
            u64::from_str_radix(h, 16)
                .map_err(step(format!("--event-filter {s}: not a hex number")))
        }
    }
}

/// Refuses an output that would overwrite the program being recorded (docs/files.md).
fn guard_program(command: &[OsString], outputs: &[&Path]) -> Result<()> {
    let mut guard = spelunk_fsio::OutputGuard::new();
    guard.inputs(command.first().and_then(|p| program_path(p)).as_deref());
    guard.check_all(outputs.iter().copied())?;
    Ok(())
}

/// A missing directory for the output is refused before the program runs.
fn check_output_dir(output: &Path) -> Result<()> {
    if let Some(dir) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            return refuse(format!(
                "{}: no such directory for the output",
                dir.display()
            ));
        }
    }
    Ok(())
}

/// `--capacity-interval` in nanoseconds [default: 100 ms].
fn capacity_interval_ns(req: &RecordRequest) -> Result<(u64, u64)> {
    let interval_ms = req.capacity_interval_ms.unwrap_or(100);
    match interval_ms.checked_mul(1_000_000) {
        Some(ns) => Ok((interval_ms, ns)),
        None => refuse(format!("--capacity-interval {interval_ms}: too long")),
    }
}

fn command_strings(req: &RecordRequest) -> Vec<String> {
    req.command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// The machine's SPE.
fn record_hardware(
    req: &RecordRequest,
    event_filter: u64,
    out: &Path,
    say: &mut dyn FnMut(&str),
) -> Result<Recorded> {
    if !req.emulator_opts.is_empty()
        || req.keep_trace
        || !req.collisions
        || req.platform.is_some()
        || req.cpu_model.is_some()
        || req.ignore_unsupported
    {
        return refuse(
            "--emulator-opt, --keep-trace, --no-collisions, --platform, --cpu-model and \
             --ignore-unsupported apply to --emulate only"
                .into(),
        );
    }
    if let Some(p) = req.aux_pages.filter(|p| *p < 2 || !p.is_power_of_two()) {
        return refuse(format!(
            "--aux-pages {p}: the kernel needs a power of two, at least 2"
        ));
    }
    let cpus = match &req.cpus {
        None => None,
        Some(list) => match spelunk_perf::spe_pmu::parse_cpu_list(list).filter(|v| !v.is_empty()) {
            Some(v) => Some(v),
            None => return refuse(format!("--cpus {list}: expected a CPU list like 0-3,8")),
        },
    };
    let command = command_strings(req);
    let sidecar = Sidecar::path_for(&req.output);
    guard_program(&req.command, &[&req.output, &sidecar])?;
    check_output_dir(&req.output)?;
    let runtime = runtime_for(req, &command, say);
    let (_, interval_ns) = capacity_interval_ns(req)?;
    let timelines = Some(hardware::HardwareTimelines {
        interval_ns,
        pmu: timeline::detect_counter_pmu(Path::new("/")),
        line_bytes: timeline::line_bytes(Path::new("/sys")),
    });
    let options = HardwareOptions {
        timelines,
        runtime,
        pmu: req.pmu.clone(),
        period_ops: req.period_ops,
        jitter: req.jitter,
        filter: req.filter.clone(),
        min_latency_cycles: req.min_latency_cycles,
        event_filter,
        pa: req.pa,
        pct: req.pct,
        kernel: req.kernel,
        system_wide: req.system_wide,
        pids: req.pids.clone(),
        cpus,
        aux_pages: req.aux_pages,
        ..Default::default()
    };
    if let Some(p) = req.pids.iter().find(|p| **p <= 0) {
        return refuse(format!("--pid {p}: a process id is a positive number"));
    }
    let what = if !req.pids.is_empty() {
        format!(
            "process(es) {} (until they end, or Ctrl-C)",
            req.pids
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
    say(&format!("recording {what} with hardware SPE"));
    let started = Instant::now();
    let recording = hardware::record(&options, &command, out, &req.output, &req.cmdline)?;
    let wall = started.elapsed();
    for d in &recording.dropped {
        say(&format!("note: {d}"));
    }
    for w in &recording.warnings {
        say(&format!("warning: {w}"));
    }
    Ok(Recorded::Hardware { recording, wall })
}

/// libspelunk.so to preload into `command`, unless not asked for or there is no command; a
/// runtime that cannot be found is a note, not an error.
fn runtime_for(
    req: &RecordRequest,
    command: &[String],
    say: &mut dyn FnMut(&str),
) -> Option<PathBuf> {
    if !req.runtime || command.is_empty() {
        return None;
    }
    match crate::runtime_log::locate_runtime() {
        Ok(lib) => Some(lib),
        Err(why) => {
            say(&format!(
                "note: {why}: recording without include/spelunk.h phases and \
                 objects and without heap blocks"
            ));
            None
        }
    }
}

/// The file `argv0` runs: itself when it names a path, else the first match on PATH.
pub fn program_path(argv0: &OsStr) -> Option<PathBuf> {
    let p = Path::new(argv0);
    if p.components().count() > 1 {
        return Some(p.to_path_buf());
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(p))
            .find(|c| c.is_file())
    })
}

/// `--no-spe`: the timelines alone (resident memory and PMU counters of the command's process
/// tree over time), in the sidecar; no SPE, no perf.data.
///
/// An existing recording at `-o` is kept as `FILE.old` like any other ([`finish`]): the new
/// sidecar never sits next to a perf.data it does not describe.
fn record_timelines(
    req: &RecordRequest,
    out: &Path,
    say: &mut dyn FnMut(&str),
) -> Result<Recorded> {
    let (interval_ms, interval_ns) = capacity_interval_ns(req)?;
    if req.command.is_empty() {
        return refuse("--no-spe records a command: give it after `--`".into());
    }
    let sidecar = Sidecar::path_for(&req.output);
    check_output_dir(&req.output)?;
    guard_program(&req.command, &[&req.output, &sidecar])?;
    let command = command_strings(req);
    let pmu = timeline::detect_counter_pmu(Path::new("/"));
    let runtime = runtime_for(req, &command, say);
    let options = TimelineOptions {
        runtime,
        interval_ns,
        proc_root: PathBuf::from("/proc"),
        pmu,
        line_bytes: timeline::line_bytes(Path::new("/sys")),
    };
    say(&format!(
        "recording {}'s resident memory and PMU counters every {interval_ms} ms \
         (--no-spe: no SPE samples)",
        command[0]
    ));
    let started = Instant::now();
    let recording = timeline::record_timelines(
        &spelunk_perf::counting::LinuxPerfSys,
        &options,
        &command,
        &Sidecar::path_for(out),
    )?;
    for w in &recording.warnings {
        say(&format!("note: {w}"));
    }
    let wall = started.elapsed();
    Ok(Recorded::Timelines {
        recording: Box::new(recording),
        wall,
    })
}

/// `--overhead`: `runs` native and `runs` recorded runs, interleaved (native first in each
/// pair, so drift in the machine's state hits both kinds alike) [NMO paper §VII-A]. Every
/// recorded run but the last sends the program's standard output to /dev/null; `recorded`
/// sees each recording as it is made. The timings go into the kept (last) recording's sidecar;
/// returns them and the last run's exit code.
pub fn record_overhead(
    req: &RecordRequest,
    runs: u32,
    say: &mut dyn FnMut(&str),
    recorded: &mut dyn FnMut(&Recorded),
) -> Result<(Overhead, u8)> {
    // -a and -p are refused by the parser (nothing to run natively); a command is needed.
    if req.command.is_empty() {
        return refuse(
            "--overhead runs a command natively and recorded: give it after `--`".into(),
        );
    }
    let mode = match req.recorder {
        Recorder::TimelinesOnly => "no SPE",
        Recorder::Emulated => "emulated",
        Recorder::Hardware => "hardware SPE",
    };
    // An emulated series is checked once, before its first run: refusals come before any
    // native run, and the program check's warnings are said once.
    let plan = match req.recorder {
        Recorder::Emulated => Some(plan_emulated(req, say)?),
        _ => None,
    };
    let stage = stage_output(&req.output)?;
    let program = req.command[0].to_string_lossy().into_owned();
    say(&format!(
        "--overhead: running {program} {runs} time(s) natively and {runs} time(s) recorded ({mode}); only the last recorded run keeps its standard output"
    ));
    let mut native = Vec::new();
    let mut timed = Vec::new();
    let mut exit_code = 0;
    let mut last = None;
    for i in 1..=runs {
        let (run, status) = run_native(&req.command)
            .map_err(step(format!("--overhead: starting {program} natively")))?;
        if !status.success() {
            say(&format!(
                "warning: native run {i} of {program} exited with {}",
                ProgramExit(status)
            ));
        }
        native.push(run);
        let quiet = if i < runs {
            Some(QuietStdout::new().map_err(step(
                "--overhead: sending the program's output to /dev/null",
            ))?)
        } else {
            None
        };
        let cpu_before = children_cpu_ns();
        // Every run records into the same private name; only the last is moved into place.
        let once = match record_into(req, plan.as_ref(), stage.staged(), say) {
            Ok(r) => r,
            Err(e) => return Err(interrupted(e, Some(stage), req.keep_trace)),
        };
        let cpu_ns = children_cpu_ns().saturating_sub(cpu_before);
        drop(quiet);
        timed.push(TimedRun {
            wall_ns: once.program_wall().as_nanos() as u64,
            cpu_ns,
        });
        exit_code = once.exit_code();
        // The last run is shown where it ends up, once moved into place; earlier ones where
        // they were written (the private name the next run replaces).
        if i < runs {
            recorded(&once);
        } else {
            last = Some(once);
        }
    }
    let overhead = Overhead::of(mode, native, timed);
    let sidecar_path = Sidecar::path_for(stage.staged());
    let mut sidecar = Sidecar::read(&sidecar_path).map_err(step::<SidecarError>(
        "--overhead: reading the recording's sidecar to add the timings",
    ))?;
    sidecar.overhead = Some(overhead.clone());
    sidecar.write(&sidecar_path).map_err(step::<SidecarError>(
        "--overhead: writing the timings into the sidecar",
    ))?;
    let (perf_data, sidecar) = finish(stage, req.keep_trace, exit_code, &program, say)?;
    if let Some(mut once) = last {
        once.relocate(&perf_data, &sidecar);
        recorded(&once);
    }
    Ok((overhead, exit_code))
}

/// `spelunk advise --verify`: runs a recorded emulated command again, with the recording's own
/// tool options (`recorded`: the sidecar's
/// [`spelunk_perf::sidecar::EMULATOR_OPTIONS_KEY`]) followed by
/// `knobs` (which override them), into a private directory removed afterwards, and returns the
/// run's sidecar (its counters). The program's standard output goes to /dev/null (its standard
/// error passes through); Valgrind's messages go to `say`.
pub fn rerun_emulated(
    command: &[String],
    recorded: &[String],
    knobs: &[String],
    say: &mut dyn FnMut(&str),
) -> Result<Sidecar> {
    if command.is_empty() {
        return refuse("the recording names no command to run again".into());
    }
    let install = EmulatorInstall::locate()?;
    let options = EmulatorOptions {
        extra: recorded.iter().chain(knobs).cloned().collect(),
        ..EmulatorOptions::default()
    };
    let command: Vec<OsString> = command.iter().map(OsString::from).collect();
    let quiet = QuietStdout::new().map_err(step("sending the program's output to /dev/null"))?;
    let rec = EmulatedRecording::run(&install, &options, Output::Scratch, &command, &[], |l| {
        say(&format!("valgrind: {l}"))
    });
    drop(quiet);
    let rec = rec?;
    if rec.exit.code() != 0 {
        say(&format!(
            "warning: {} exited with {} in this run",
            command[0].to_string_lossy(),
            rec.exit
        ));
    }
    Ok(Sidecar::read(&rec.conversion.sidecar)?)
}

/// `spelunk topdown --emulate`: the command to count under the emulator, and where to keep the
/// recording.
#[derive(Clone, Debug, Default)]
pub struct EmulatedTopdown {
    pub command: Vec<String>,
    /// spelunk's own command line, kept in the recording's header.
    pub cmdline: Vec<String>,
    pub emulator_opts: Vec<String>,
    /// The emulated platform preset (`--platform`). The emulated core is the request's
    /// `cpu_model` (`--cpu-model`), else the platform's.
    pub platform: Option<String>,
    /// Keep the recording as this perf.data (and its sidecar); else a private directory
    /// removed afterwards.
    pub record: Option<PathBuf>,
    /// With `record`: keep the emulator's raw trace too.
    pub keep_trace: bool,
    /// As [`RecordRequest::ignore_unsupported`].
    pub ignore_unsupported: bool,
}

/// Runs the command under the emulator (as `spelunk record --emulate` does), converts its trace
/// into a perf.data plus sidecar, and evaluates the sidecar's counts as `req` says. Returns the
/// report and the program's exit code to pass on. `say` gets the progress lines.
///
/// `req.cpu_model` names the core to emulate (one of [`crate::emulator::EMULATED_CORES`]);
/// the catalog then follows the MIDR the emulated core claims, as for a hardware recording
/// (so an emulated Neoverse N2, r0p3, is evaluated with the r0p3 specification).
pub fn emulated_topdown(
    req: &spelunk_pmu::flow::TopdownRequest,
    run: &EmulatedTopdown,
    say: &mut dyn FnMut(&str),
) -> Result<(spelunk_pmu::report::Report, u8)> {
    if run.command.is_empty() {
        return refuse("--emulate needs the command to run after `--`".into());
    }
    let machine = emulated_machine(
        run.platform.as_deref(),
        req.cpu_model.as_deref(),
        &run.emulator_opts,
    )?;
    let check = unsupported::before_emulated_run(
        OsStr::new(&run.command[0]),
        "spelunk topdown",
        run.ignore_unsupported,
        say,
    )
    .map_err(RecordFlowError::Options)?;
    let req = &spelunk_pmu::flow::TopdownRequest {
        cpu_model: None,
        ..req.clone()
    };
    let install = EmulatorInstall::locate()?;
    let options = EmulatorOptions {
        machine,
        extra: run.emulator_opts.clone(),
        ..EmulatorOptions::default()
    };
    let command: Vec<OsString> = run.command.iter().map(OsString::from).collect();
    // The recording: where the user asked (staged, moved into place at the end as `record`
    // does), else a private directory removed afterwards.
    let stage = match &run.record {
        Some(p) => {
            if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                if !dir.is_dir() {
                    return refuse(format!("--record {}: no such directory", p.display()));
                }
            }
            guard_program(
                &command,
                &[p, &Sidecar::path_for(p), &session::trace_path(p)],
            )?;
            Some(stage_output(p)?)
        }
        None => None,
    };
    let output = match &stage {
        Some(stage) => Output::At {
            perf_data: stage.staged().to_path_buf(),
            keep_trace: run.keep_trace,
        },
        None => Output::Scratch,
    };
    say(&format!(
        "running {} under {} (Valgrind; expect the program to run ~100x slower than \
         natively)",
        run.command[0],
        options.machine.describe()
    ));
    let mut valgrind_lines = Vec::new();
    let rec = EmulatedRecording::run(&install, &options, output, &command, &run.cmdline, |l| {
        say(&format!("valgrind: {l}"));
        valgrind_lines.push(l.to_owned());
    });
    let mut rec = match rec {
        Ok(rec) => rec,
        Err(e) => return Err(interrupted(e.into(), stage, run.keep_trace)),
    };
    unsupported::after_emulated_run(rec.exit, &valgrind_lines, &check, say);
    let conv = &rec.conversion;
    for w in &conv.warnings {
        say(&format!("warning: {w}"));
    }
    let sc = Sidecar::read(&conv.sidecar)?;
    let mut report = req
        .sidecar_report(&sc, &conv.sidecar)
        .map_err(step(format!("{} exited with {}", run.command[0], rec.exit)))?;
    report.source = spelunk_pmu::report::Source {
        kind: "emulated".into(),
        detail: format!(
            "{} ({})",
            run.command.join(" "),
            spelunk_pmu::sidecar::describe(&sc)
        ),
    };
    if !rec.exit.success() {
        report
            .notes
            .push(format!("the command exited with {}", rec.exit));
    }
    if let Some(stage) = stage {
        let (perf_data, sidecar) =
            finish(stage, run.keep_trace, rec.exit.code(), &run.command[0], say)?;
        rec.relocate(&perf_data, &sidecar);
        say(&format!(
            "kept the recording {} and {}{}",
            perf_data.display(),
            sidecar.display(),
            if run.keep_trace {
                format!(" and {}", rec.trace.display())
            } else {
                String::new()
            }
        ));
    }
    Ok((report, rec.exit.code()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(req: &RecordRequest) -> String {
        match record(req, &mut |l| panic!("nothing runs, yet: {l}")) {
            Err(RecordFlowError::Options(m)) => m,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn options_are_checked_before_anything_runs() {
        let base = RecordRequest {
            recorder: Recorder::Emulated,
            period_ops: 1024,
            command: vec!["true".into()],
            output: PathBuf::from("perf.data"),
            ..Default::default()
        };
        // PMSIRR_EL1.INTERVAL counts in units of 256 operations.
        let r = RecordRequest {
            period_ops: 100,
            ..base.clone()
        };
        assert!(refused(&r).starts_with("--period 100: SPE intervals are multiples of 256"));
        let r = RecordRequest {
            filter: vec!["load".into(), "alu".into()],
            ..base.clone()
        };
        assert_eq!(
            refused(&r),
            "--filter alu: expected load, store or branch (comma-separated)"
        );
        let r = RecordRequest {
            recorder: Recorder::Hardware,
            keep_trace: true,
            collisions: true,
            ..base.clone()
        };
        assert!(refused(&r).contains("apply to --emulate only"));
        let r = RecordRequest {
            recorder: Recorder::Hardware,
            platform: Some("graviton3".into()),
            collisions: true,
            ..base.clone()
        };
        assert!(refused(&r).contains("apply to --emulate only"));
        let r = RecordRequest {
            cpu_model: Some("neoverse-x9".into()),
            ..base.clone()
        };
        assert!(refused(&r).starts_with("--cpu-model neoverse-x9: the emulator has no such"));
        let r = RecordRequest {
            recorder: Recorder::TimelinesOnly,
            command: Vec::new(),
            ..base.clone()
        };
        assert_eq!(
            refused(&r),
            "--no-spe records a command: give it after `--`"
        );
        let r = RecordRequest {
            event_filter: Some("0xzz".into()),
            ..base
        };
        match record(&r, &mut |_| {}) {
            Err(RecordFlowError::Step { what, .. }) => {
                assert_eq!(what, "--event-filter 0xzz: not a hex number")
            }
            other => panic!("{other:?}"),
        }
    }
}
