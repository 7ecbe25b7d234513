//! Counting PMU events with `perf_event_open(2)`: groups of raw events, read with their enabled
//! and running times, on a command, a process or CPUs; probing how many counters a PMU has.
//!
//! The kernel is reached only through the narrow [`PerfSys`] trait ([`LinuxPerfSys`] is the
//! real one), so everything above it is tested with a simulated PMU on any machine.
//!
//! Facts used (kernel UAPI `include/uapi/linux/perf_event.h`, perf_event_open(2)):
//! `perf_event_attr` layout (we pass the 128-byte `PERF_ATTR_SIZE_VER7` form; a kernel that knows
//! a shorter one accepts it because the tail is zero), flag bits `disabled` (0), `inherit` (1),
//! `exclude_kernel` (5), `exclude_hv` (6), `enable_on_exec` (12); read_format
//! `TOTAL_TIME_ENABLED` (1) | `TOTAL_TIME_RUNNING` (2), so a read returns
//! `{value, time_enabled, time_running}`; ioctls `PERF_EVENT_IOC_ENABLE` (0x2400),
//! `PERF_EVENT_IOC_DISABLE` (0x2401), `PERF_EVENT_IOC_RESET` (0x2403) with
//! `PERF_IOC_FLAG_GROUP` (1). Events of one group are scheduled onto counters together or not
//! at all; the arm64 PMU driver rejects (EINVAL) a group that cannot fit its counters, and
//! reports an event the core does not implement with EOPNOTSUPP or ENOENT.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

/// Size of [`PerfEventAttr`] as passed to the kernel (PERF_ATTR_SIZE_VER7).
pub const ATTR_SIZE: u32 = 128;
/// `perf_event_attr.type` for raw PMU events of the boot CPU's PMU.
pub const PERF_TYPE_RAW: u32 = 4;

const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_INHERIT: u64 = 1 << 1;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const FLAG_ENABLE_ON_EXEC: u64 = 1 << 12;
const FORMAT_TOTAL_TIMES: u64 = 1 | 2;

/// `struct perf_event_attr` (fields spelunk does not use are zero).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PerfEventAttr {
    pub type_: u32,
    pub size: u32,
    pub config: u64,
    pub sample_period: u64,
    pub sample_type: u64,
    pub read_format: u64,
    pub flags: u64,
    pub wakeup_events: u32,
    pub bp_type: u32,
    pub config1: u64,
    pub config2: u64,
    pub branch_sample_type: u64,
    pub sample_regs_user: u64,
    pub sample_stack_user: u32,
    pub clockid: i32,
    pub sample_regs_intr: u64,
    pub aux_watermark: u32,
    pub sample_max_stack: u16,
    pub reserved_2: u16,
    pub aux_sample_size: u32,
    pub reserved_3: u32,
    pub sig_data: u64,
}

const _: () = assert!(std::mem::size_of::<PerfEventAttr>() == ATTR_SIZE as usize);

impl PerfEventAttr {
    /// A counting (not sampling) event `code` of PMU `pmu_type`.
    pub fn counting(pmu_type: u32, code: u64, opts: &OpenOptions, leader: bool) -> Self {
        let mut flags = FLAG_EXCLUDE_HV;
        if leader {
            flags |= FLAG_DISABLED;
            if opts.enable_on_exec {
                flags |= FLAG_ENABLE_ON_EXEC;
            }
        }
        if opts.inherit {
            flags |= FLAG_INHERIT;
        }
        if opts.exclude_kernel {
            flags |= FLAG_EXCLUDE_KERNEL;
        }
        PerfEventAttr {
            type_: pmu_type,
            size: ATTR_SIZE,
            config: code,
            read_format: FORMAT_TOTAL_TIMES,
            flags,
            ..Default::default()
        }
    }
    pub fn disabled(&self) -> bool {
        self.flags & FLAG_DISABLED != 0
    }
    pub fn enable_on_exec(&self) -> bool {
        self.flags & FLAG_ENABLE_ON_EXEC != 0
    }
    pub fn exclude_kernel(&self) -> bool {
        self.flags & FLAG_EXCLUDE_KERNEL != 0
    }
}

/// Group-wide ioctls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupIoctl {
    Enable,
    Disable,
    Reset,
}

/// The kernel interface counting needs. Implemented by [`LinuxPerfSys`] and by test doubles.
pub trait PerfSys {
    /// perf_event_open(attr, pid, cpu, group_fd, PERF_FLAG_FD_CLOEXEC); returns the new fd.
    fn open(&self, attr: &PerfEventAttr, pid: i32, cpu: i32, group_fd: i32) -> io::Result<i32>;
    /// One `{value, time_enabled, time_running}` read of an fd.
    fn read_counts(&self, fd: i32) -> io::Result<[u64; 3]>;
    /// An ioctl on a group leader, applied to the whole group.
    fn ioctl_group(&self, fd: i32, op: GroupIoctl) -> io::Result<()>;
    fn close(&self, fd: i32);
}

/// The real kernel.
#[derive(Clone, Copy, Debug, Default)]
pub struct LinuxPerfSys;

impl PerfSys for LinuxPerfSys {
    fn open(&self, attr: &PerfEventAttr, pid: i32, cpu: i32, group_fd: i32) -> io::Result<i32> {
        const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
        // SAFETY: attr points to a live, correctly sized perf_event_attr for the whole call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                attr as *const PerfEventAttr,
                pid as libc::c_long,
                cpu as libc::c_long,
                group_fd as libc::c_long,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r as i32)
        }
    }
    fn read_counts(&self, fd: i32) -> io::Result<[u64; 3]> {
        let mut buf = [0u64; 3];
        // SAFETY: buf is 24 writable bytes owned by this frame.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), std::mem::size_of_val(&buf)) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n as usize != std::mem::size_of_val(&buf) {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("perf counter read returned {n} bytes, expected 24"),
            ));
        }
        Ok(buf)
    }
    fn ioctl_group(&self, fd: i32, op: GroupIoctl) -> io::Result<()> {
        let req: libc::c_ulong = match op {
            GroupIoctl::Enable => 0x2400,
            GroupIoctl::Disable => 0x2401,
            GroupIoctl::Reset => 0x2403,
        };
        const PERF_IOC_FLAG_GROUP: libc::c_ulong = 1;
        // SAFETY: a plain ioctl on an fd we own, with an integer argument.
        let r = unsafe { libc::ioctl(fd, req as _, PERF_IOC_FLAG_GROUP) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
    fn close(&self, fd: i32) {
        // SAFETY: closing an fd this process opened and owns.
        unsafe {
            libc::close(fd);
        }
    }
}

/// What to count on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A process (and, with `inherit`, the children it creates from now on), on any CPU.
    Process(i32),
    /// Everything running on these CPUs.
    Cpus(Vec<i32>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenOptions {
    /// Start counting when the target calls exec (for a command spelunk starts).
    pub enable_on_exec: bool,
    /// Count child threads and processes too.
    pub inherit: bool,
    /// Count user space only.
    pub exclude_kernel: bool,
}

/// Errors of the counting layer; each names the event and target it is about.
#[derive(Debug, thiserror::Error)]
pub enum CountingError {
    #[error("perf_event_open of event 0x{code:x} (PMU type {pmu_type}, pid {pid}, cpu {cpu}) failed: {source}{hint}")]
    Open {
        code: u64,
        pmu_type: u32,
        pid: i32,
        cpu: i32,
        hint: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("reading counter of event 0x{code:x}: {source}")]
    Read {
        code: u64,
        #[source]
        source: io::Error,
    },
    #[error("{what}: {source}")]
    Ioctl {
        what: &'static str,
        #[source]
        source: io::Error,
    },
}

fn hint(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            " (not permitted: lower /proc/sys/kernel/perf_event_paranoid, or run with CAP_PERFMON)"
        }
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) => {
            " (this PMU does not implement the event, or there is no hardware PMU)"
        }
        Some(libc::EINVAL) => {
            " (the group does not fit the PMU's counters, or the event is invalid)"
        }
        Some(libc::EMFILE) => " (too many open files: raise `ulimit -n`)",
        _ => "",
    }
}

/// Whether an open error means "this event is not implemented here".
pub fn is_unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP)
    )
}

/// One event's reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventReading {
    pub code: u64,
    pub value: u64,
    pub time_enabled_ns: u64,
    pub time_running_ns: u64,
    /// The PMU does not implement the event (it was left out of the group).
    pub unsupported: bool,
}

/// Readings of one group on one CPU (cpu = -1: any CPU, process target).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupReading {
    pub group: usize,
    pub cpu: i32,
    pub events: Vec<EventReading>,
}

struct OpenGroup {
    group: usize,
    cpu: i32,
    /// (code, fd or None when unsupported); the first Some is the leader.
    fds: Vec<(u64, Option<i32>)>,
}

impl OpenGroup {
    fn leader(&self) -> Option<i32> {
        self.fds.iter().find_map(|(_, fd)| *fd)
    }
}

/// Counter groups opened on a target. Closing happens on drop.
pub struct CountingSession<'a, S: PerfSys + ?Sized> {
    sys: &'a S,
    groups: Vec<OpenGroup>,
}

impl<'a, S: PerfSys + ?Sized> CountingSession<'a, S> {
    /// Opens `groups` (lists of raw event codes) of PMU `pmu_type` on `target`. Each group is
    /// opened on every target CPU. An event the PMU does not implement is left out of its group
    /// and read back as `unsupported`; any other failure is an error.
    pub fn open(
        sys: &'a S,
        pmu_type: u32,
        groups: &[Vec<u64>],
        target: &Target,
        opts: OpenOptions,
    ) -> Result<Self, CountingError> {
        let mut session = CountingSession {
            sys,
            groups: Vec::new(),
        };
        let mut first_unsupported: Option<(u64, i32, io::Error)> = None;
        let (pid, cpus): (i32, Vec<i32>) = match target {
            Target::Process(p) => (*p, vec![-1]),
            Target::Cpus(c) => (-1, c.clone()),
        };
        for (gi, codes) in groups.iter().enumerate() {
            for &cpu in &cpus {
                let mut og = OpenGroup {
                    group: gi,
                    cpu,
                    fds: Vec::new(),
                };
                for &code in codes {
                    let leader = og.leader();
                    let attr = PerfEventAttr::counting(pmu_type, code, &opts, leader.is_none());
                    match sys.open(&attr, pid, cpu, leader.unwrap_or(-1)) {
                        Ok(fd) => og.fds.push((code, Some(fd))),
                        Err(e) if is_unsupported(&e) => {
                            if first_unsupported.is_none() {
                                first_unsupported = Some((code, cpu, e));
                            }
                            og.fds.push((code, None));
                        }
                        Err(source) => {
                            // Close what this group opened; the session closes the others.
                            og.fds
                                .iter()
                                .filter_map(|(_, fd)| *fd)
                                .for_each(|fd| sys.close(fd));
                            return Err(CountingError::Open {
                                code,
                                pmu_type,
                                pid,
                                cpu,
                                hint: hint(&source),
                                source,
                            });
                        }
                    }
                }
                session.groups.push(og);
            }
        }
        // Not one event could be opened: there is no usable PMU, not just a missing event.
        if session.groups.iter().all(|g| g.leader().is_none()) {
            if let Some((code, cpu, source)) = first_unsupported {
                return Err(CountingError::Open {
                    code,
                    pmu_type,
                    pid,
                    cpu,
                    hint: hint(&source),
                    source,
                });
            }
        }
        Ok(session)
    }

    fn each_leader(&self, op: GroupIoctl, what: &'static str) -> Result<(), CountingError> {
        for g in &self.groups {
            if let Some(fd) = g.leader() {
                self.sys
                    .ioctl_group(fd, op)
                    .map_err(|source| CountingError::Ioctl { what, source })?;
            }
        }
        Ok(())
    }

    /// Starts counting now (targets that are already running).
    pub fn enable(&self) -> Result<(), CountingError> {
        self.each_leader(GroupIoctl::Reset, "resetting counters")?;
        self.each_leader(GroupIoctl::Enable, "enabling counters")
    }

    pub fn disable(&self) -> Result<(), CountingError> {
        self.each_leader(GroupIoctl::Disable, "disabling counters")
    }

    /// Current cumulative readings of every group on every CPU.
    pub fn read(&self) -> Result<Vec<GroupReading>, CountingError> {
        let mut out = Vec::with_capacity(self.groups.len());
        for g in &self.groups {
            let mut events = Vec::with_capacity(g.fds.len());
            for &(code, fd) in &g.fds {
                match fd {
                    Some(fd) => {
                        let [value, en, run] = self
                            .sys
                            .read_counts(fd)
                            .map_err(|source| CountingError::Read { code, source })?;
                        events.push(EventReading {
                            code,
                            value,
                            time_enabled_ns: en,
                            time_running_ns: run,
                            unsupported: false,
                        });
                    }
                    None => events.push(EventReading {
                        code,
                        value: 0,
                        time_enabled_ns: 0,
                        time_running_ns: 0,
                        unsupported: true,
                    }),
                }
            }
            out.push(GroupReading {
                group: g.group,
                cpu: g.cpu,
                events,
            });
        }
        Ok(out)
    }
}

impl<S: PerfSys + ?Sized> Drop for CountingSession<'_, S> {
    fn drop(&mut self) {
        for g in &self.groups {
            for (_, fd) in &g.fds {
                if let Some(fd) = fd {
                    self.sys.close(*fd);
                }
            }
        }
    }
}

/// Counters found by [`probe_counters`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterProbe {
    /// Largest group of non-cycle events that opens and actually counts.
    pub programmable: usize,
    /// A group of `programmable` events plus CPU_CYCLES also counts (the cycle counter is free).
    pub cycle_counter: bool,
}

/// Probes how many counters one group can use on this PMU, by opening growing groups of
/// `probe_code` (a common event such as INST_RETIRED, 0x08) on the calling thread and checking
/// that each actually counts (time_running > 0) while `spin` runs. Counters taken by others
/// (e.g. the NMI watchdog) are thereby excluded. `cycles_code` is CPU_CYCLES (0x11).
pub fn probe_counters<S: PerfSys + ?Sized>(
    sys: &S,
    pmu_type: u32,
    probe_code: u64,
    cycles_code: u64,
    max: usize,
    spin: &mut dyn FnMut(),
) -> Result<CounterProbe, CountingError> {
    let opts = OpenOptions {
        enable_on_exec: false,
        inherit: false,
        exclude_kernel: true,
    };
    let counts = |codes: &[u64], spin: &mut dyn FnMut()| -> Result<bool, CountingError> {
        let session = match CountingSession::open(
            sys,
            pmu_type,
            &[codes.to_vec()],
            &Target::Process(0),
            opts,
        ) {
            Ok(s) => s,
            Err(CountingError::Open { source, .. })
                if source.raw_os_error() == Some(libc::EINVAL)
                    || source.raw_os_error() == Some(libc::ENOSPC) =>
            {
                return Ok(false)
            }
            Err(e) => return Err(e),
        };
        session.enable()?;
        spin();
        session.disable()?;
        let r = session.read()?;
        Ok(r.iter()
            .flat_map(|g| &g.events)
            .all(|e| !e.unsupported && e.time_running_ns > 0))
    };
    let mut programmable = 0;
    for k in 1..=max {
        if counts(&vec![probe_code; k], spin)? {
            programmable = k;
        } else {
            break;
        }
    }
    let mut with_cycles = vec![probe_code; programmable];
    with_cycles.push(cycles_code);
    let cycle_counter = programmable > 0 && counts(&with_cycles, spin)?;
    Ok(CounterProbe {
        programmable,
        cycle_counter,
    })
}

/// A child process created stopped before `exec`, so counters can be attached to it first and
/// start exactly at `exec` (`enable_on_exec`), as `perf stat -- CMD` does: fork, the child waits
/// on a pipe, the parent opens the counters and releases it.
pub struct StoppedChild {
    pid: i32,
    release_fd: Option<i32>,
    /// Close-on-exec pipe on which the child reports a failed exec (errno as 4 bytes).
    exec_err_fd: Option<i32>,
    status: Option<std::process::ExitStatus>,
}

impl StoppedChild {
    /// Forks `argv` (the program is looked up in PATH); the child waits until
    /// [`StoppedChild::release`].
    pub fn spawn(argv: &[String]) -> io::Result<StoppedChild> {
        Self::spawn_env(argv, &[])
    }

    /// Like [`StoppedChild::spawn`], with `env` set (or replaced) in the child's environment.
    pub fn spawn_env(argv: &[String], env: &[(String, String)]) -> io::Result<StoppedChild> {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        if argv.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty command"));
        }
        let nul = |_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in command");
        let cargs: Vec<CString> = argv
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .map_err(nul)?;
        let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        // The environment, built before fork: ours with `env` replacing what it names.
        let mut cenv: Vec<CString> = Vec::new();
        for (k, v) in std::env::vars_os() {
            if env.iter().any(|(name, _)| k.as_bytes() == name.as_bytes()) {
                continue;
            }
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            if let Ok(c) = CString::new(kv) {
                cenv.push(c);
            }
        }
        for (k, v) in env {
            cenv.push(CString::new(format!("{k}={v}")).map_err(nul)?);
        }
        let mut envp: Vec<*const libc::c_char> = cenv.iter().map(|c| c.as_ptr()).collect();
        envp.push(std::ptr::null());
        let mut gate = [0i32; 2];
        let mut errp = [0i32; 2];
        // SAFETY: each array has room for the two fds pipe2 writes.
        unsafe {
            if libc::pipe2(gate.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::pipe2(errp.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                let e = io::Error::last_os_error();
                libc::close(gate[0]);
                libc::close(gate[1]);
                return Err(e);
            }
        }
        // SAFETY: after fork the child only calls async-signal-safe functions (close, read,
        // write, _exit) and execvpe (glibc's searches PATH with stack buffers, no malloc), on
        // memory prepared before the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let e = io::Error::last_os_error();
            // SAFETY: closing fds we own.
            unsafe {
                for fd in gate.iter().chain(errp.iter()) {
                    libc::close(*fd);
                }
            }
            return Err(e);
        }
        if pid == 0 {
            // SAFETY: child side, see above.
            unsafe {
                libc::close(gate[1]);
                libc::close(errp[0]);
                let mut b = 0u8;
                while libc::read(gate[0], (&mut b as *mut u8).cast(), 1) < 0
                    && *libc::__errno_location() == libc::EINTR
                {}
                libc::execvpe(ptrs[0], ptrs.as_ptr(), envp.as_ptr());
                let errno = *libc::__errno_location();
                let bytes = errno.to_ne_bytes();
                libc::write(errp[1], bytes.as_ptr().cast(), bytes.len());
                libc::_exit(127);
            }
        }
        // SAFETY: closing the child's ends in the parent.
        unsafe {
            libc::close(gate[0]);
            libc::close(errp[1]);
        }
        Ok(StoppedChild {
            pid,
            release_fd: Some(gate[1]),
            exec_err_fd: Some(errp[0]),
            status: None,
        })
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Lets the child exec its program; fails if the exec failed (e.g. no such program).
    pub fn release(&mut self) -> io::Result<()> {
        if let Some(fd) = self.release_fd.take() {
            let b = [1u8];
            // SAFETY: one byte from a live buffer to a pipe we own, then close it.
            unsafe {
                libc::write(fd, b.as_ptr().cast(), 1);
                libc::close(fd);
            }
        }
        if let Some(fd) = self.exec_err_fd.take() {
            let mut buf = [0u8; 4];
            let mut got = 0usize;
            loop {
                // SAFETY: reading into the unfilled tail of a live buffer.
                let n = unsafe { libc::read(fd, buf[got..].as_mut_ptr().cast(), 4 - got) };
                if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                if n <= 0 {
                    break;
                }
                got += n as usize;
                if got == 4 {
                    break;
                }
            }
            // SAFETY: closing a pipe end we own.
            unsafe {
                libc::close(fd);
            }
            if got == 4 {
                let _ = self.wait_inner(0);
                return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(buf)));
            }
        }
        Ok(())
    }

    fn wait_inner(&mut self, flags: i32) -> io::Result<Option<std::process::ExitStatus>> {
        use std::os::unix::process::ExitStatusExt;
        if let Some(s) = self.status {
            return Ok(Some(s));
        }
        let mut st = 0i32;
        loop {
            // SAFETY: waiting for our own child, status into a local.
            let r = unsafe { libc::waitpid(self.pid, &mut st, flags) };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return Err(e);
            }
            if r == 0 {
                return Ok(None);
            }
            let s = std::process::ExitStatus::from_raw(st);
            self.status = Some(s);
            return Ok(Some(s));
        }
    }

    /// The exit status if the child has ended (never blocks).
    pub fn try_wait(&mut self) -> io::Result<Option<std::process::ExitStatus>> {
        self.wait_inner(libc::WNOHANG)
    }

    /// Releases the child if needed and waits for it to end.
    pub fn wait(&mut self) -> io::Result<std::process::ExitStatus> {
        self.release()?;
        match self.wait_inner(0)? {
            Some(s) => Ok(s),
            None => Err(io::Error::other("waitpid returned no status")),
        }
    }
}

impl Drop for StoppedChild {
    fn drop(&mut self) {
        // Never released: close the gate (the child's read returns EOF and it execs) rather
        // than leave it blocked; then reap it if it has already ended.
        for fd in [self.release_fd.take(), self.exec_err_fd.take()]
            .into_iter()
            .flatten()
        {
            // SAFETY: closing pipe ends we own.
            unsafe {
                libc::close(fd);
            }
        }
        let _ = self.wait_inner(libc::WNOHANG);
    }
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Makes Ctrl-C set a flag ([`interrupted`]) instead of killing spelunk, so a `-p`/`-a` run
/// stops counting and still prints its report. A command spelunk started gets the SIGINT too
/// (same process group) and ends by itself.
pub fn catch_interrupt() {
    // SAFETY: installing a handler that only stores to an atomic (async-signal-safe).
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Whether process `pid` still exists.
pub fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks existence and permission.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// A simulated PMU for tests of everything above the syscall layer: `programmable` counters plus
/// an optional cycle counter, events it does not implement, and time slicing of groups that do
/// not all fit at once (each group runs 1/n of the time when n groups are open on one CPU).
pub mod sim {
    use super::*;
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    #[derive(Debug)]
    struct Ev {
        code: u64,
        leader: i32,
        cpu: i32,
        enabled: bool,
    }

    /// See the module documentation.
    pub struct SimPmu {
        pub programmable: usize,
        pub cycle_counter: bool,
        pub cycles_code: u64,
        pub unsupported: Vec<u64>,
        /// Event code -> count per nanosecond of running time.
        pub rates: BTreeMap<u64, f64>,
        /// Simulated enabled time per read, in ns.
        pub elapsed_ns: u64,
        /// Enabled time added by every read (0: time stands still), so interval deltas move.
        pub advance_per_read_ns: u64,
        reads: RefCell<u64>,
        /// Fail perf_event_open with this errno for every event (e.g. ENOENT: no PMU).
        pub fail_all: Option<i32>,
        evs: RefCell<BTreeMap<i32, Ev>>,
        next_fd: RefCell<i32>,
        pub opened: RefCell<Vec<PerfEventAttr>>,
    }

    impl SimPmu {
        pub fn new(programmable: usize, cycle_counter: bool) -> Self {
            SimPmu {
                programmable,
                cycle_counter,
                cycles_code: 0x11,
                unsupported: Vec::new(),
                rates: BTreeMap::new(),
                elapsed_ns: 1_000_000_000,
                advance_per_read_ns: 0,
                reads: RefCell::new(0),
                fail_all: None,
                evs: RefCell::new(BTreeMap::new()),
                next_fd: RefCell::new(100),
                opened: RefCell::new(Vec::new()),
            }
        }
        pub fn open_fds(&self) -> usize {
            self.evs.borrow().len()
        }
        fn cost(&self, codes: &[u64]) -> usize {
            let cyc = codes.iter().filter(|&&c| c == self.cycles_code).count();
            codes.len() - usize::from(self.cycle_counter && cyc > 0)
        }
    }

    impl PerfSys for SimPmu {
        fn open(
            &self,
            attr: &PerfEventAttr,
            _pid: i32,
            cpu: i32,
            group_fd: i32,
        ) -> io::Result<i32> {
            if let Some(e) = self.fail_all {
                return Err(io::Error::from_raw_os_error(e));
            }
            if self.unsupported.contains(&attr.config) {
                return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
            }
            let mut evs = self.evs.borrow_mut();
            let fd = *self.next_fd.borrow();
            let leader = if group_fd < 0 { fd } else { group_fd };
            let mut codes: Vec<u64> = evs
                .values()
                .filter(|e| e.leader == leader)
                .map(|e| e.code)
                .collect();
            codes.push(attr.config);
            if self.cost(&codes) > self.programmable {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            *self.next_fd.borrow_mut() += 1;
            self.opened.borrow_mut().push(*attr);
            evs.insert(
                fd,
                Ev {
                    code: attr.config,
                    leader,
                    cpu,
                    // enable_on_exec: the target execs right after the counters are opened.
                    enabled: group_fd < 0 && (!attr.disabled() || attr.enable_on_exec()),
                },
            );
            Ok(fd)
        }
        fn read_counts(&self, fd: i32) -> io::Result<[u64; 3]> {
            let evs = self.evs.borrow();
            let e = evs
                .get(&fd)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))?;
            let leader_enabled = evs.get(&e.leader).is_some_and(|l| l.enabled);
            if !leader_enabled {
                return Ok([0, 0, 0]);
            }
            let groups_on_cpu: std::collections::BTreeSet<i32> = evs
                .values()
                .filter(|x| x.cpu == e.cpu && evs.get(&x.leader).is_some_and(|l| l.enabled))
                .map(|x| x.leader)
                .collect();
            *self.reads.borrow_mut() += 1;
            let enabled = self.elapsed_ns + self.advance_per_read_ns * *self.reads.borrow();
            let running = enabled / groups_on_cpu.len().max(1) as u64;
            let rate = self.rates.get(&e.code).copied().unwrap_or(0.0);
            Ok([(rate * running as f64) as u64, enabled, running])
        }
        fn ioctl_group(&self, fd: i32, op: GroupIoctl) -> io::Result<()> {
            let mut evs = self.evs.borrow_mut();
            let e = evs
                .get_mut(&fd)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))?;
            match op {
                // A disabled counter keeps its value; the simulation's time is fixed per read,
                // so disabling changes nothing observable.
                GroupIoctl::Enable => e.enabled = true,
                GroupIoctl::Disable | GroupIoctl::Reset => {}
            }
            Ok(())
        }
        fn close(&self, fd: i32) {
            self.evs.borrow_mut().remove(&fd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::sim::SimPmu;
    use super::*;

    fn opts() -> OpenOptions {
        OpenOptions {
            enable_on_exec: false,
            inherit: true,
            exclude_kernel: false,
        }
    }

    #[test]
    fn attr_layout_and_flags() {
        let a = PerfEventAttr::counting(
            8,
            0x11,
            &OpenOptions {
                enable_on_exec: true,
                ..opts()
            },
            true,
        );
        assert_eq!(a.size, 128);
        assert_eq!(a.flags & FLAG_DISABLED, FLAG_DISABLED);
        assert_eq!(a.flags & FLAG_ENABLE_ON_EXEC, FLAG_ENABLE_ON_EXEC);
        assert_eq!(a.flags & FLAG_INHERIT, FLAG_INHERIT);
        let m = PerfEventAttr::counting(8, 0x08, &opts(), false);
        assert!(!m.disabled(), "members follow their leader");
        assert_eq!(m.read_format, 3);
    }

    #[test]
    fn session_reads_groups_with_multiplexing_and_unsupported_events() {
        let mut pmu = SimPmu::new(2, true);
        pmu.unsupported = vec![0x99];
        pmu.rates.insert(0x11, 2.0);
        pmu.rates.insert(0x08, 1.0);
        let groups = vec![vec![0x11, 0x08, 0x23], vec![0x11, 0x24, 0x99]];
        {
            let s =
                CountingSession::open(&pmu, 8, &groups, &Target::Cpus(vec![0, 1]), opts()).unwrap();
            assert_eq!(pmu.open_fds(), 10);
            s.enable().unwrap();
            let r = s.read().unwrap();
            assert_eq!(r.len(), 4);
            let g0 = &r[0];
            assert_eq!((g0.group, g0.cpu), (0, 0));
            // Two groups per CPU: each runs half of the 1 s.
            assert_eq!(g0.events[0].time_running_ns, 500_000_000);
            assert_eq!(g0.events[0].value, 1_000_000_000);
            assert!(r[3].events[2].unsupported);
        }
        assert_eq!(pmu.open_fds(), 0, "drop closes every fd");
    }

    #[test]
    fn oversized_group_fails_with_a_hint_and_leaks_nothing() {
        let pmu = SimPmu::new(1, false);
        let err = CountingSession::open(&pmu, 8, &[vec![0x08, 0x11]], &Target::Process(1), opts())
            .err()
            .unwrap();
        assert!(err.to_string().contains("does not fit"), "{err}");
        assert_eq!(pmu.open_fds(), 0);
    }

    #[test]
    fn no_pmu_is_reported_as_such() {
        let mut pmu = SimPmu::new(6, true);
        pmu.fail_all = Some(libc::ENODEV);
        let err = CountingSession::open(&pmu, 4, &[vec![0x11]], &Target::Process(1), opts())
            .err()
            .unwrap();
        assert!(err.to_string().contains("no hardware PMU"), "{err}");
    }

    #[test]
    fn probe_finds_the_counters() {
        for (n, cyc) in [(6, true), (4, false), (1, true)] {
            let pmu = SimPmu::new(n, cyc);
            let p = probe_counters(&pmu, 8, 0x08, 0x11, 32, &mut || {}).unwrap();
            assert_eq!(
                p,
                CounterProbe {
                    programmable: n,
                    cycle_counter: cyc
                }
            );
            assert_eq!(pmu.open_fds(), 0);
        }
    }

    #[test]
    fn stopped_child_runs_after_release() {
        let mut c = StoppedChild::spawn(&["true".to_string()]).unwrap();
        assert!(c.pid() > 0);
        assert!(c.try_wait().unwrap().is_none(), "held before exec");
        let st = c.wait().unwrap();
        assert!(st.success());
        assert!(StoppedChild::spawn(&[]).is_err());
        let mut bad = StoppedChild::spawn(&["/nonexistent/spelunk-test".to_string()]).unwrap();
        let err = bad.release().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT), "{err}");
    }
}
