//! One emulated recording from start to finish: run the command under the emulator, check that
//! it wrote a trace, convert the trace into a perf.data plus sidecar and drop the trace unless
//! asked to keep it.
//!
//! `spelunk record --emulate` keeps the recording where the user asked; `spelunk topdown
//! --emulate` usually wants only the sidecar's counts, so the recording can go to a private
//! directory removed when the [`EmulatedRecording`] is dropped. Both run this same flow, so
//! the trace naming, the "wrote no trace" diagnosis and the conversion are written once.

use crate::convert::{convert, Conversion, ConvertError};
use crate::emulator::{self, EmulatorError, EmulatorInstall, EmulatorOptions};
use spelunk_perf::sidecar::{Sidecar, EMULATOR_OPTIONS_KEY};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

/// How a program ended, as spelunk says it (`status 3`, `signal 9`) and as the exit code it
/// passes on (128+N for signal N, as shells do).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgramExit(pub ExitStatus);

impl ProgramExit {
    /// The exit code to pass on: the program's own, or 128+N when signal N killed it.
    pub fn code(&self) -> u8 {
        use std::os::unix::process::ExitStatusExt;
        if let Some(c) = self.0.code() {
            return (c & 0xff) as u8;
        }
        self.0
            .signal()
            .map(|s| (128 + s).min(255) as u8)
            .unwrap_or(1)
    }

    pub fn success(&self) -> bool {
        self.0.success()
    }
}

impl std::fmt::Display for ProgramExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use std::os::unix::process::ExitStatusExt;
        match (self.0.code(), self.0.signal()) {
            (Some(c), _) => write!(f, "status {c}"),
            (None, Some(s)) => write!(f, "signal {s}"),
            _ => f.write_str("an unknown status"),
        }
    }
}

/// Where the recording goes.
#[derive(Clone, Debug)]
pub enum Output {
    /// This perf.data (its sidecar next to it); `keep_trace` keeps the emulator's raw trace as
    /// `<perf_data>.emutrace`.
    At {
        perf_data: PathBuf,
        keep_trace: bool,
    },
    /// A private temporary directory, removed with the [`EmulatedRecording`].
    Scratch,
}

/// Errors of an emulated recording; the messages are the ones the commands print.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("creating the temporary directory {}", .dir.display())]
    Scratch {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Emulator(#[from] EmulatorError),
    #[error(
        "the emulator wrote no trace ({}); {program} exited with {exit}. If valgrind could not \
         start the program, its messages are above",
        .trace.display()
    )]
    NoTrace {
        trace: PathBuf,
        program: String,
        exit: ProgramExit,
    },
    #[error("adding the emulator's options to the sidecar {}", .path.display())]
    Sidecar {
        path: PathBuf,
        #[source]
        source: spelunk_perf::sidecar::SidecarError,
    },
    /// spelunk got SIGINT or SIGTERM: the program was stopped. `conversion` is what was
    /// recorded until then (converted at the requested path), if anything.
    #[error(
        "interrupted by {}: stopped {program} and the emulator",
        crate::interrupt::signal_name(*.signal)
    )]
    Interrupted {
        signal: i32,
        program: String,
        conversion: Option<Box<Conversion>>,
    },
    #[error("converting the emulator's trace {}", .trace.display())]
    Convert {
        trace: PathBuf,
        #[source]
        source: ConvertError,
    },
}

/// A finished emulated recording.
#[derive(Debug)]
pub struct EmulatedRecording {
    pub conversion: Conversion,
    pub exit: ProgramExit,
    /// Wall time of the emulated run (the program under Valgrind, not the conversion).
    pub wall: Duration,
    /// Where the trace was written (removed unless kept).
    pub trace: PathBuf,
    /// Removes the private directory of [`Output::Scratch`] when the recording is dropped.
    _scratch: Option<ScratchDir>,
}

impl EmulatedRecording {
    /// Runs `command` under the emulator and converts its trace. Valgrind's own messages are
    /// passed line by line to `valgrind_line` as soon as the program ends, before any error
    /// about a missing trace (they usually explain it). `cmdline` is the command line recorded
    /// in the perf.data header.
    pub fn run(
        install: &EmulatorInstall,
        options: &EmulatorOptions,
        output: Output,
        command: &[OsString],
        cmdline: &[String],
        mut valgrind_line: impl FnMut(&str),
    ) -> Result<EmulatedRecording, SessionError> {
        let (perf_data, keep_trace, scratch) = match output {
            Output::At {
                perf_data,
                keep_trace,
            } => (perf_data, keep_trace, None),
            Output::Scratch => {
                let s = ScratchDir::new()?;
                (s.0.join("perf.data"), false, Some(s))
            }
        };
        let trace = trace_path(&perf_data);
        let started = Instant::now();
        let run = emulator::run(install, options, &trace, command)?;
        let wall = started.elapsed();
        for line in run.valgrind_log.lines() {
            valgrind_line(line);
        }
        let exit = ProgramExit(run.status);
        let program = command
            .first()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some(signal) = run.interrupted {
            let conversion = trace
                .exists()
                .then(|| convert(&trace, &perf_data, cmdline).ok())
                .flatten()
                .map(Box::new);
            if !keep_trace {
                let _ = std::fs::remove_file(&trace);
            }
            return Err(SessionError::Interrupted {
                signal,
                program,
                conversion,
            });
        }
        if !trace.exists() {
            return Err(SessionError::NoTrace {
                trace,
                program,
                exit,
            });
        }
        let conversion =
            convert(&trace, &perf_data, cmdline).map_err(|source| SessionError::Convert {
                trace: trace.clone(),
                source,
            })?;
        keep_tool_options(&conversion.sidecar, options, &trace)?;
        if !keep_trace {
            let _ = std::fs::remove_file(&trace);
        }
        Ok(EmulatedRecording {
            conversion,
            exit,
            wall,
            trace,
            _scratch: scratch,
        })
    }
}

/// Adds the run's tool options to the sidecar the conversion wrote ([`EMULATOR_OPTIONS_KEY`]).
fn keep_tool_options(
    sidecar: &Path,
    options: &EmulatorOptions,
    trace: &Path,
) -> Result<(), SessionError> {
    let failed = |source| SessionError::Sidecar {
        path: sidecar.to_path_buf(),
        source,
    };
    let mut sc = Sidecar::read(sidecar).map_err(failed)?;
    let args: Vec<String> = options
        .tool_args(trace)
        .into_iter()
        .skip(1) // --out=TRACE
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    sc.config.insert(EMULATOR_OPTIONS_KEY.into(), args.into());
    sc.write(sidecar).map_err(failed)
}

impl EmulatedRecording {
    /// Points the recording's paths at where it was moved to.
    pub(crate) fn relocate(&mut self, perf_data: &Path, sidecar: &Path) {
        self.conversion.perf_data = perf_data.to_path_buf();
        self.conversion.sidecar = sidecar.to_path_buf();
        self.trace = trace_path(perf_data);
    }
}

/// The emulator's raw trace of a recording: `<perf_data>.emutrace`.
pub fn trace_path(perf_data: &Path) -> PathBuf {
    let mut trace = perf_data.as_os_str().to_owned();
    trace.push(".emutrace");
    PathBuf::from(trace)
}

/// A private temporary directory, removed when dropped. Named after `spelunk topdown`, its
/// only user (the name shows in a "wrote no trace" error).
#[derive(Debug)]
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new() -> Result<ScratchDir, SessionError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir =
            std::env::temp_dir().join(format!("spelunk-topdown-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|source| SessionError::Scratch {
            dir: dir.clone(),
            source,
        })?;
        Ok(ScratchDir(dir))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn program_exit_is_said_and_passed_on_as_shells_do() {
        let exited = ProgramExit(ExitStatus::from_raw(3 << 8));
        assert_eq!((exited.to_string(), exited.code()), ("status 3".into(), 3));
        let killed = ProgramExit(ExitStatus::from_raw(9));
        assert_eq!(
            (killed.to_string(), killed.code()),
            ("signal 9".into(), 137)
        );
    }

    #[test]
    fn the_trace_sits_next_to_the_perf_data() {
        assert_eq!(
            trace_path(Path::new("out/x.data")),
            PathBuf::from("out/x.data.emutrace")
        );
    }

    #[test]
    fn a_scratch_directory_goes_with_its_owner() {
        let s = ScratchDir::new().unwrap();
        let dir = s.0.clone();
        assert!(dir.is_dir());
        drop(s);
        assert!(!dir.exists());
    }
}
