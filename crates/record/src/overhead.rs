//! `spelunk record --overhead`: what recording costs the program. The command runs natively
//! (no spelunk between it and the machine) and recorded the same number of times, interleaved,
//! and each run's wall time and CPU time are kept; [`spelunk_perf::sidecar::Overhead`] sums
//! them up as medians and a slowdown ([NMO paper §VII-A] measures overhead the same way: a
//! baseline run against a profiled one).
//!
//! CPU time comes from the kernel's accounting of reaped children (`getrusage(RUSAGE_CHILDREN)`
//! before and after a run, which is what `wait4` returns for each child): the program's process
//! tree, including Valgrind under the emulator, not spelunk's own work (draining buffers,
//! converting the trace).
//!
//! Only one recorded run can keep the program's output where the user sent it without printing
//! it once per run, so every run but the last recorded one writes its standard output to
//! /dev/null ([`QuietStdout`]); standard error always passes through (error messages are not
//! lost), and the last recorded run (the recording kept) has the program's stdio unchanged.

use spelunk_perf::sidecar::TimedRun;
use std::ffi::OsString;
use std::io;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Instant;

/// CPU time (user + system) of every child this process has reaped so far, in ns.
pub fn children_cpu_ns() -> u64 {
    // SAFETY: getrusage writes one rusage into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return 0;
    }
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    ns(ru.ru_utime) + ns(ru.ru_stime)
}

/// Runs `command` natively, its stdin and stdout on /dev/null, its stderr passed through, and
/// times it.
pub fn run_native(command: &[OsString]) -> io::Result<(TimedRun, ExitStatus)> {
    let Some((program, args)) = command.split_first() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty command"));
    };
    let cpu_before = children_cpu_ns();
    let started = Instant::now();
    let status = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .status()?;
    let wall_ns = started.elapsed().as_nanos() as u64;
    let cpu_ns = children_cpu_ns().saturating_sub(cpu_before);
    Ok((TimedRun { wall_ns, cpu_ns }, status))
}

/// Sends this process's standard output (and so its children's) to /dev/null until dropped,
/// for the recorded runs whose output is not kept. The recorders start the program with
/// spelunk's own stdio, so this is the one place that reaches all three of them.
#[derive(Debug)]
pub struct QuietStdout {
    saved_fd: libc::c_int,
}

impl QuietStdout {
    pub fn new() -> io::Result<QuietStdout> {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let _ = io::stdout().flush();
        let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
        // SAFETY: plain fd calls on fds we own or on fd 1; failures are checked.
        unsafe {
            let saved_fd = libc::dup(1);
            if saved_fd < 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::dup2(null.as_raw_fd(), 1) < 0 {
                let e = io::Error::last_os_error();
                libc::close(saved_fd);
                return Err(e);
            }
            Ok(QuietStdout { saved_fd })
        }
    }
}

impl Drop for QuietStdout {
    fn drop(&mut self) {
        use std::io::Write;
        let _ = io::stdout().flush();
        // SAFETY: saved_fd is the dup of the original fd 1 made in new().
        unsafe {
            libc::dup2(self.saved_fd, 1);
            libc::close(self.saved_fd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_native_run_is_timed_and_its_cpu_counted() {
        // A shell loop that burns CPU for a moment: its CPU time is near its wall time and not 0.
        let cmd: Vec<OsString> = [
            "sh",
            "-c",
            "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let (run, status) = run_native(&cmd).unwrap();
        assert!(status.success());
        assert!(run.wall_ns > 0);
        assert!(run.cpu_ns > 0 && run.cpu_ns <= run.wall_ns * 2, "{run:?}");
    }

    #[test]
    fn a_missing_program_is_an_error() {
        assert!(run_native(&[OsString::from("/nonexistent/spelunk-test")]).is_err());
        assert!(run_native(&[]).is_err());
    }
}
