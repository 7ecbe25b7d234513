//! Running a program under spelunk's SPE/PMU emulator (the Valgrind tool in `emulator/`).
//!
//! The tool is found as a `VALGRIND_LIB` directory holding `spelunk-<arch>-linux` (what
//! `emulator/build.sh` makes in `emulator/build/lib`). The program's stdin, stdout and stderr
//! pass through untouched; Valgrind's own messages go to a log file that is returned for the
//! caller to show when it says anything.

use spelunk_spe::CpuModel;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

/// Where the tool is: a directory usable as `VALGRIND_LIB`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmulatorInstall {
    pub lib_dir: PathBuf,
    /// The `valgrind` launcher to run.
    pub valgrind: PathBuf,
}

/// Errors finding or starting the emulator. Each says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    #[error(
        "the emulator is not built (looked for {tool} in: {looked}). Build it with \
         emulator/build.sh (needs gcc and valgrind: apt-get install valgrind gcc), or point \
         SPELUNK_EMULATOR_LIB at the directory holding {tool}"
    )]
    NotBuilt { tool: String, looked: String },
    #[error(
        "valgrind not found ({0}): install it (apt-get install valgrind) or set VALGRIND to its path"
    )]
    NoValgrind(String),
    #[error("cannot start {what}: {source}")]
    Spawn {
        what: String,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The tool's file name on this host (`spelunk-amd64-linux`, `spelunk-arm64-linux`).
pub fn tool_name() -> &'static str {
    if cfg!(target_arch = "aarch64") {
        "spelunk-arm64-linux"
    } else {
        "spelunk-amd64-linux"
    }
}

impl EmulatorInstall {
    /// Finds the tool: `$SPELUNK_EMULATOR_LIB` if set; else, relative to the running
    /// executable, `emulator/build/lib` of the source tree it was built in
    /// (`target/<profile>/spelunk` → `../../emulator/build/lib`) and `../lib/spelunk/emulator`
    /// (an installed layout). `valgrind` is `$VALGRIND` or the one on PATH.
    pub fn locate() -> Result<EmulatorInstall, EmulatorError> {
        let candidates: Vec<PathBuf> = match std::env::var_os("SPELUNK_EMULATOR_LIB") {
            Some(dir) => vec![PathBuf::from(dir)],
            None => crate::beside_binary("emulator/build/lib", "emulator"),
        };
        let tool = tool_name();
        let lib_dir = candidates
            .iter()
            .find(|d| d.join(tool).is_file())
            .cloned()
            .ok_or_else(|| EmulatorError::NotBuilt {
                tool: tool.to_string(),
                looked: candidates
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        let valgrind = match std::env::var_os("VALGRIND") {
            Some(v) => PathBuf::from(v),
            None => find_on_path("valgrind")
                .ok_or_else(|| EmulatorError::NoValgrind("not on PATH".into()))?,
        };
        Ok(EmulatorInstall { lib_dir, valgrind })
    }
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The cores the emulator models (`spelunk-emu --cpu-model`), by the names `decode
/// --cpu-model` uses, with the name the progress line shows.
pub const EMULATED_CORES: [(&str, &str); 4] = [
    (CpuModel::NeoverseN1.name(), "Neoverse N1"),
    (CpuModel::NeoverseV1.name(), "Neoverse V1"),
    (CpuModel::NeoverseV2.name(), "Neoverse V2"),
    (CpuModel::NeoverseN2.name(), "Neoverse N2"),
];

/// The emulator's platform presets (`spelunk-emu --platform`) and the core each has
/// (emulator/MODEL.md "Cores and platforms").
pub const EMULATED_PLATFORMS: [(&str, &str); 7] = [
    ("graviton2", "neoverse-n1"),
    ("graviton3", "neoverse-v1"),
    ("graviton4", "neoverse-v2"),
    ("grace", "neoverse-v2"),
    ("cobalt100", "neoverse-n2"),
    ("altra", "neoverse-n1"),
    ("n1sdp", "neoverse-n1"),
];

/// Which machine an emulated run models: a platform preset, a core, both (the core replaces
/// the platform's), or neither (the default Neoverse N1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EmulatedMachine {
    pub platform: Option<String>,
    pub cpu_model: Option<String>,
}

/// A platform or core name the emulator does not have.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{flag} {name}: the emulator has no such {what}; use one of: {valid}")]
pub struct UnknownMachine {
    pub flag: &'static str,
    pub name: String,
    pub what: &'static str,
    pub valid: String,
}

/// Accepts no name or one of `list`'s.
fn known(
    name: &Option<String>,
    list: &[(&str, &str)],
    flag: &'static str,
    what: &'static str,
) -> Result<(), UnknownMachine> {
    match name {
        Some(n) if !list.iter().any(|e| e.0 == n) => Err(UnknownMachine {
            flag,
            name: n.clone(),
            what,
            valid: list.iter().map(|e| e.0).collect::<Vec<_>>().join(", "),
        }),
        _ => Ok(()),
    }
}

impl EmulatedMachine {
    /// Checks the names (lower case, `_` as `-`); the tool would refuse them only after Valgrind
    /// started.
    pub fn new(
        platform: Option<&str>,
        cpu_model: Option<&str>,
    ) -> Result<EmulatedMachine, UnknownMachine> {
        let norm = |s: &str| s.trim().to_ascii_lowercase().replace('_', "-");
        let platform = platform.map(norm);
        let cpu_model = cpu_model.map(norm);
        known(&platform, &EMULATED_PLATFORMS, "--platform", "platform")?;
        known(&cpu_model, &EMULATED_CORES, "--cpu-model", "emulated core")?;
        Ok(EmulatedMachine {
            platform,
            cpu_model,
        })
    }

    /// The core modelled: the `--cpu-model`, else the platform's, else neoverse-n1.
    pub fn core(&self) -> &'static str {
        let name = self.cpu_model.as_deref().or_else(|| {
            let p = self.platform.as_deref()?;
            EMULATED_PLATFORMS.iter().find(|e| e.0 == p).map(|e| e.1)
        });
        EMULATED_CORES
            .iter()
            .find(|e| Some(e.0) == name)
            .unwrap_or(&EMULATED_CORES[0])
            .0
    }

    /// For progress lines: "the emulated Neoverse V2 (platform graviton4)".
    pub fn describe(&self) -> String {
        let core = self.core();
        let name = EMULATED_CORES
            .iter()
            .find(|e| e.0 == core)
            .map_or(core, |e| e.1);
        match &self.platform {
            Some(p) => format!("the emulated {name} (platform {p})"),
            None => format!("the emulated {name}"),
        }
    }

    /// The tool options choosing the machine (before any `--emulator-opt`, which override
    /// them whatever their order).
    pub fn tool_args(&self) -> Vec<OsString> {
        let mut a = Vec::new();
        if let Some(p) = &self.platform {
            a.push(format!("--platform={p}").into());
        }
        if let Some(c) = &self.cpu_model {
            a.push(format!("--cpu-model={c}").into());
        }
        a
    }
}

/// The tool options that choose or claim the emulated CPU, which `--emulator-opt` may not
/// pass: spelunk chooses the core itself (`--cpu-model`, `--platform`), so that its progress
/// line, its check of the program and the recording all name the core the tool models. The
/// tool's `--midr` and `--cpu-name` would have the recording claim a CPU other than the one
/// modelled: the MIDR picks the SPE record layout, the data-source encoding and the top-down
/// catalog the recording is read with (an N1's counters evaluated with a V2's formulas), the
/// name is what every report shows.
const MACHINE_OPTIONS: [&str; 4] = ["--cpu-model", "--platform", "--midr", "--cpu-name"];

/// An `--emulator-opt` that sets the core, the platform or the CPU identity claimed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{}", self.message())]
pub struct MachineOption {
    /// The option as given, e.g. `--cpu-model=neoverse-v2`.
    pub option: String,
    /// The tool option it sets, e.g. `--cpu-model`.
    pub name: &'static str,
}

impl MachineOption {
    fn message(&self) -> String {
        let value = self
            .option
            .split_once('=')
            .map_or("NAME", |(_, v)| v)
            .to_string();
        let given = format!("--emulator-opt={}", self.option);
        match self.name {
            "--cpu-model" | "--platform" => format!(
                "{given}: choose the emulated {} with spelunk's own {} {value} instead, so that \
                 the progress line and the recording name what the emulator models",
                if self.name == "--platform" {
                    "platform"
                } else {
                    "core"
                },
                self.name
            ),
            _ => {
                let (what, why) = if self.name == "--midr" {
                    (
                        "MIDR",
                        "the MIDR chooses how the samples and counters are read",
                    )
                } else {
                    ("name", "every report shows the name")
                };
                format!(
                    "{given}: the recording would claim a CPU other than the one the emulator \
                     models ({why}); choose the emulated core with --cpu-model NAME or \
                     --platform NAME, and it claims its own {what}"
                )
            }
        }
    }
}

/// Refuses `--emulator-opt` values that set the emulated core or platform or the CPU identity
/// claimed ([`MACHINE_OPTIONS`]), in the forms the tool reads (`--name=value`) or would
/// refuse later (`--name` alone).
pub fn check_extra_options(extra: &[String]) -> Result<(), MachineOption> {
    for opt in extra {
        let key = opt.split_once('=').map_or(opt.as_str(), |(k, _)| k);
        if let Some(name) = MACHINE_OPTIONS.iter().find(|n| **n == key) {
            return Err(MachineOption {
                option: opt.clone(),
                name,
            });
        }
    }
    Ok(())
}

/// The SPE and model settings of an emulated run, as the tool's options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmulatorOptions {
    /// SPE sampling interval in operations (`perf record -c`); the tool rounds it down to a
    /// multiple of 256 as the hardware does.
    pub period_ops: u64,
    pub jitter: bool,
    /// Operation types to keep: any of "load", "store", "branch"; empty keeps every type.
    pub filter: Vec<String>,
    pub min_latency_cycles: u32,
    /// PMSEVFR_EL1 bits: keep records with all these events (0: no filter).
    pub event_filter: u64,
    pub collisions: bool,
    /// The platform preset and core to model.
    pub machine: EmulatedMachine,
    /// Further tool options, passed as given (`--l2-size=2097152`, `--cores=8`, ...).
    pub extra: Vec<String>,
    /// The program's working directory (spelunk's own when None; `spelunk bench`'s `cwd`).
    pub cwd: Option<PathBuf>,
    /// Send the program's standard output to spelunk's standard error, so that spelunk's own
    /// output (`spelunk bench --json`) is not mixed with it.
    pub stdout_to_stderr: bool,
}

impl Default for EmulatorOptions {
    fn default() -> Self {
        EmulatorOptions {
            period_ops: 1024,
            jitter: false,
            filter: Vec::new(),
            min_latency_cycles: 0,
            event_filter: 0,
            collisions: true,
            machine: EmulatedMachine::default(),
            extra: Vec::new(),
            cwd: None,
            stdout_to_stderr: false,
        }
    }
}

impl EmulatorOptions {
    /// The tool options (after `--tool=spelunk`).
    pub fn tool_args(&self, trace: &Path) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        let mut out = OsString::from("--out=");
        out.push(trace.as_os_str());
        a.push(out);
        a.push(format!("--period={}", self.period_ops).into());
        a.push(format!("--jitter={}", yes_no(self.jitter)).into());
        if !self.filter.is_empty() {
            a.push(format!("--filter={}", self.filter.join(",")).into());
        }
        if self.min_latency_cycles > 0 {
            a.push(format!("--min-latency={}", self.min_latency_cycles).into());
        }
        if self.event_filter != 0 {
            a.push(format!("--event-filter={:#x}", self.event_filter).into());
        }
        a.push(format!("--collisions={}", yes_no(self.collisions)).into());
        a.extend(self.machine.tool_args());
        a.extend(self.extra.iter().map(OsString::from));
        a
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// How the emulated program ended.
#[derive(Debug)]
pub struct EmulatedRun {
    pub status: ExitStatus,
    /// Valgrind's own messages (empty when it had nothing to say).
    pub valgrind_log: String,
    /// The signal (SIGINT, SIGTERM) spelunk received during the run: the program was stopped
    /// (its process group ended) and its trace holds what was recorded until then.
    pub interrupted: Option<i32>,
}

/// Runs `command` (program and arguments) under the tool, writing the trace to `trace`.
/// Blocks until the program exits; its stdio is inherited.
///
/// Valgrind and the program run in a process group of their own (given the terminal when
/// spelunk has it, so Ctrl-C and reads from the terminal reach them as before). SIGINT or
/// SIGTERM sent to spelunk itself ends that whole group — first SIGTERM, SIGKILL after
/// [`STOP_GRACE`] — and the run returns with [`EmulatedRun::interrupted`] set: no process is
/// left behind. Valgrind's gdbserver is off (`--vgdb=no`), so no `vgdb-pipe-*` files appear.
pub fn run(
    install: &EmulatorInstall,
    options: &EmulatorOptions,
    trace: &Path,
    command: &[OsString],
) -> Result<EmulatedRun, EmulatorError> {
    use std::os::unix::process::CommandExt;
    // The log is named from the trace, which is private to this run: no file of the user's
    // is removed.
    let log = trace.with_extension("valgrind.log");
    let mut log_opt = OsString::from("--log-file=");
    log_opt.push(log.as_os_str());
    let mut cmd = Command::new(&install.valgrind);
    cmd.env("VALGRIND_LIB", &install.lib_dir)
        .arg("--tool=spelunk")
        .arg("-q")
        .arg("--fair-sched=yes")
        .arg("--vgdb=no")
        .arg(log_opt)
        .args(options.tool_args(trace))
        .args(command)
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .process_group(0);
    if let Some(dir) = &options.cwd {
        cmd.current_dir(dir);
    }
    if options.stdout_to_stderr {
        cmd.stdout(std::io::stderr());
    }
    let mut stopper = crate::interrupt::Stopper::catch();
    let mut child = cmd.spawn().map_err(|source| EmulatorError::Spawn {
        what: install.valgrind.display().to_string(),
        source,
    })?;
    let pgid = child.id() as i32;
    stopper.aim(pgid, true);
    let terminal = crate::interrupt::Foreground::give(pgid);
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(source) => {
                crate::interrupt::kill_group(pgid, libc::SIGKILL);
                let _ = child.wait();
                return Err(EmulatorError::Io {
                    path: install.valgrind.clone(),
                    source,
                });
            }
        }
        stopper.poll();
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let interrupted = stopper.finish();
    drop(terminal);
    let valgrind_log = spelunk_fsio::read_to_string_bounded(&log, 64 << 20).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    Ok(EmulatedRun {
        status,
        valgrind_log,
        interrupted,
    })
}

/// How long an interrupted run's process group has to end after SIGTERM before SIGKILL.
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machine_names_its_core_and_passes_its_presets_on() {
        let m = EmulatedMachine::new(Some("Graviton4"), None).unwrap();
        assert_eq!(m.core(), "neoverse-v2");
        assert_eq!(
            m.describe(),
            "the emulated Neoverse V2 (platform graviton4)"
        );
        assert_eq!(m.tool_args(), vec![OsString::from("--platform=graviton4")]);
        let m = EmulatedMachine::new(Some("cobalt100"), Some("neoverse_v1")).unwrap();
        assert_eq!(m.core(), "neoverse-v1");
        assert_eq!(
            m.tool_args(),
            vec![
                OsString::from("--platform=cobalt100"),
                OsString::from("--cpu-model=neoverse-v1")
            ]
        );
        let m = EmulatedMachine::default();
        assert_eq!(m.describe(), "the emulated Neoverse N1");
        assert!(m.tool_args().is_empty());
        // the machine's options come before --emulator-opt ones
        let o = EmulatorOptions {
            machine: EmulatedMachine::new(None, Some("neoverse-n2")).unwrap(),
            extra: vec!["--l2-size=2097152".into()],
            ..EmulatorOptions::default()
        };
        let a = o.tool_args(Path::new("t.emutrace"));
        let at = |s: &str| a.iter().position(|x| x == s).unwrap();
        assert!(at("--cpu-model=neoverse-n2") < at("--l2-size=2097152"));
    }

    #[test]
    fn extra_options_choosing_the_cpu_are_refused() {
        let refused = |o: &[&str]| {
            check_extra_options(&o.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .map_err(|e| e.name)
        };
        assert_eq!(refused(&["--l2-size=2097152", "--cores=8"]), Ok(()));
        // a longer option starting with the same letters is not one of them
        assert_eq!(refused(&["--cpu-models=x", "--midrange"]), Ok(()));
        assert_eq!(
            refused(&["--cores=8", "--cpu-model=neoverse-v2"]),
            Err("--cpu-model")
        );
        assert_eq!(refused(&["--platform"]), Err("--platform"));
        assert_eq!(refused(&["--midr=0x410fd4f0"]), Err("--midr"));
        assert_eq!(refused(&["--cpu-name=Neoverse V2"]), Err("--cpu-name"));
    }

    #[test]
    fn unknown_names_are_refused_with_the_valid_ones() {
        let e = EmulatedMachine::new(None, Some("neoverse-n3")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--cpu-model neoverse-n3: the emulator has no such emulated core; use one of: \
             neoverse-n1, neoverse-v1, neoverse-v2, neoverse-n2"
        );
        let e = EmulatedMachine::new(Some("graviton5"), None).unwrap_err();
        assert!(e
            .to_string()
            .ends_with("graviton2, graviton3, graviton4, grace, cobalt100, altra, n1sdp"));
    }
}
