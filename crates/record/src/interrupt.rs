//! SIGINT and SIGTERM while spelunk runs a program it records: caught, so that spelunk can end
//! the program's whole process group and keep what was recorded (docs/files.md), instead of
//! dying and leaving the program running as an orphan.

use std::sync::atomic::{AtomicI32, Ordering};

/// The last SIGINT or SIGTERM received while a [`Catch`] was installed (0: none).
static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    RECEIVED.store(sig, Ordering::SeqCst);
}

const SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

/// SIGINT and SIGTERM caught while it lives; the previous dispositions come back on drop.
pub struct Catch {
    previous: Vec<(libc::c_int, libc::sigaction)>,
}

impl Catch {
    pub fn install() -> Catch {
        RECEIVED.store(0, Ordering::SeqCst);
        let mut previous = Vec::new();
        for sig in SIGNALS {
            // SAFETY: a zeroed sigaction is valid; the handler only stores to an atomic
            // (async-signal-safe), and the old action is kept to be restored.
            unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                act.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut act.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &act, &mut old) == 0 {
                    previous.push((sig, old));
                }
            }
        }
        Catch { previous }
    }

    /// The signal received since [`Catch::install`], if any.
    pub fn received(&self) -> Option<i32> {
        match RECEIVED.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }
}

impl Drop for Catch {
    fn drop(&mut self) {
        for (sig, old) in &self.previous {
            // SAFETY: restoring the action saved by `install`.
            unsafe {
                libc::sigaction(*sig, old, std::ptr::null_mut());
            }
        }
    }
}

/// Sends `sig` to the process group `pgid` (ignoring a group that is already gone).
pub fn kill_group(pgid: i32, sig: libc::c_int) {
    if pgid > 1 {
        // SAFETY: kill(2) with a negative pid signals that process group only.
        unsafe {
            libc::kill(-pgid, sig);
        }
    }
}

/// The terminal handed to a child's process group while it runs, as a shell does for a
/// foreground job, when spelunk itself is the terminal's foreground: the program reads the
/// terminal and gets Ctrl-C as before. Given back on drop.
pub struct Foreground {
    ours: Option<libc::pid_t>,
}

impl Foreground {
    pub fn give(pgid: i32) -> Foreground {
        // SAFETY: plain queries and tcsetpgrp(3) on standard input; SIGTTOU is ignored around
        // the calls so that a background spelunk is not stopped by them.
        unsafe {
            if libc::isatty(0) != 1 || libc::tcgetpgrp(0) != libc::getpgrp() {
                return Foreground { ours: None };
            }
            let old = libc::signal(libc::SIGTTOU, libc::SIG_IGN);
            let ok = libc::tcsetpgrp(0, pgid) == 0;
            libc::signal(libc::SIGTTOU, old);
            Foreground {
                ours: ok.then(|| libc::getpgrp()),
            }
        }
    }
}

impl Drop for Foreground {
    fn drop(&mut self) {
        if let Some(pg) = self.ours {
            // SAFETY: as in `give`.
            unsafe {
                let old = libc::signal(libc::SIGTTOU, libc::SIG_IGN);
                libc::tcsetpgrp(0, pg);
                libc::signal(libc::SIGTTOU, old);
            }
        }
    }
}

/// Stops a program spelunk started when spelunk gets SIGINT or SIGTERM: [`Stopper::poll`],
/// called while waiting for it, sends SIGTERM once the signal arrived and SIGKILL after
/// [`crate::emulator::STOP_GRACE`] — to the process group `pid` leads when `group`, else to
/// the process alone.
pub struct Stopper {
    target: i32,
    signals: Catch,
    interrupted: Option<i32>,
    sent: Option<std::time::Instant>,
}

impl Stopper {
    /// Catches the signals from now on (before the program starts, so that none is missed).
    pub fn catch() -> Stopper {
        Stopper {
            target: 0,
            signals: Catch::install(),
            interrupted: None,
            sent: None,
        }
    }

    /// The program to stop: `pid` (`group`: the leader of its own process group, which is
    /// stopped whole).
    pub fn aim(&mut self, pid: i32, group: bool) {
        self.target = if group { -pid } else { pid };
    }

    /// Sends what is due; returns the signal spelunk received, if any.
    pub fn poll(&mut self) -> Option<i32> {
        if self.interrupted.is_none() {
            self.interrupted = self.signals.received();
        }
        self.interrupted?;
        match self.sent {
            None => {
                self.send(libc::SIGTERM);
                self.sent = Some(std::time::Instant::now());
            }
            Some(t) if t.elapsed() > crate::emulator::STOP_GRACE => self.send(libc::SIGKILL),
            Some(_) => {}
        }
        self.interrupted
    }

    /// After the program ended: whatever of its group outlived it goes too.
    pub fn finish(self) -> Option<i32> {
        if self.interrupted.is_some() && self.target < 0 {
            self.send(libc::SIGKILL);
        }
        self.interrupted
    }

    fn send(&self, sig: libc::c_int) {
        if self.target.abs() > 1 {
            // SAFETY: kill(2) of the program spelunk started (or its process group).
            unsafe {
                libc::kill(self.target, sig);
            }
        }
    }
}

/// The signal's name as users know it.
pub fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        s => format!("signal {s}"),
    }
}
