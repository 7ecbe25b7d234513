//! The hardware recorder: Arm SPE through `perf_event_open` and its AUX area, written as a
//! standard perf.data (the layout `perf record -e arm_spe_0// -- CMD` writes, which Linux perf
//! 6.1 decodes) plus the sidecar.
//!
//! How (kernel ABI facts: include/uapi/linux/perf_event.h, drivers/perf/arm_spe_pmu.c's
//! documented behaviour, the perf-arm-spe documentation; collected in docs/record.md):
//! - One SPE event per CPU the PMU covers (`cpumask`), because an inherited event cannot be
//!   mapped with cpu = -1: for a command, pid = the child, `inherit` and `enable_on_exec`, so
//!   its whole process tree is sampled from `exec` on; with `--all-cpus`, pid = -1.
//! - Every config bit comes from the PMU's sysfs `format/` files, never from constants: a
//!   field the kernel does not list is an error naming it. `pa_enable`/`pct_enable` need
//!   privilege; when the kernel refuses them (EACCES) they are dropped with one line.
//! - Next to each SPE event a software `dummy` event (the kernel's sideband: COMM, MMAP2,
//!   FORK/EXIT, context switches) writes into the same ring (PERF_EVENT_IOC_SET_OUTPUT).
//! - Events are opened disabled and mapped (data ring + writable AUX area) before they are
//!   enabled. The reader drains both rings whenever the kernel wakes it (half the AUX area)
//!   and every 100 ms: each PERF_RECORD_AUX names the AUX bytes it covers; they are copied to
//!   the perf.data and given back. After a TRUNCATED record the kernel has stopped the event:
//!   it is disabled and enabled again at once. TRUNCATED, PARTIAL and COLLISION are counted
//!   per CPU.

use crate::timeline::monotonic_ns;
use spelunk_perf::ring::{EventFd, MappedRing, RingRecord};
use spelunk_perf::sidecar::Sidecar;
use spelunk_perf::spe_pmu::{ConfigWord, SpePmu};
use spelunk_perf::{
    abi, counting, EventAttr, Mmap2, PerfError, RecordingSpec, SidebandRecord, SpeConfig,
    SpeRecordingWriter, Task, TaskEventKind, TimeConv, TimeConvLayout,
};
use spelunk_spe::{Midr, RecordDecoder};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// What to record and how.
#[derive(Clone, Debug)]
pub struct HardwareOptions {
    /// The SPE PMU to use (`arm_spe_0`); `None`: the first one.
    pub pmu: Option<String>,
    /// Sampling interval in operations (the driver drops the low 8 bits).
    pub period_ops: u64,
    pub jitter: bool,
    /// "load", "store", "branch": keep only these operation types (none: all).
    pub filter: Vec<String>,
    pub min_latency_cycles: u32,
    pub event_filter: u64,
    /// Physical addresses (`pa_enable`, privileged; dropped with a note when refused).
    pub pa: bool,
    /// Physical-counter timestamps (`pct_enable`, privileged).
    pub pct: bool,
    /// Also sample kernel-mode operations (needs privilege at `perf_event_paranoid` ≥ 2).
    pub kernel: bool,
    /// Record every task on the CPUs (`-a`); otherwise only the command's process tree.
    pub system_wide: bool,
    /// Attach to these running processes (`-p`): every thread they have, and (inherit) the
    /// threads and children they create from then on.
    pub pids: Vec<i32>,
    /// Only these CPUs (`-C`); otherwise every CPU the PMU covers.
    pub cpus: Option<Vec<u32>>,
    /// Data-ring pages per CPU (a power of two); `None`: 64 when spelunk may lock memory
    /// freely (root, CAP_IPC_LOCK), else 16.
    pub data_pages: Option<usize>,
    /// AUX-area pages per CPU (a power of two, at least 2); `None`: 256 when spelunk may lock
    /// memory freely, else 32 (128 KiB with 4 KiB pages: with the 16 data pages, within the
    /// kernel's default `perf_event_mlock_kb` of 516 KiB per CPU).
    pub aux_pages: Option<usize>,
    /// Where sysfs is (`/sys` on a live machine).
    pub sysfs: PathBuf,
    /// `libspelunk.so` to preload into the command (phases and objects of include/spelunk.h,
    /// heap blocks by allocation site), or none.
    pub runtime: Option<PathBuf>,
    /// Resident memory and PMU counters of the command's tree over time, on the samples'
    /// clock (every `capacity_interval_ns`; none: not recorded).
    pub timelines: Option<HardwareTimelines>,
}

/// What the timelines of a hardware recording need.
#[derive(Clone, Debug)]
pub struct HardwareTimelines {
    pub interval_ns: u64,
    pub pmu: crate::timeline::CounterPmu,
    pub line_bytes: Option<u64>,
}

impl Default for HardwareOptions {
    fn default() -> Self {
        HardwareOptions {
            pmu: None,
            period_ops: 1024,
            jitter: true,
            filter: Vec::new(),
            min_latency_cycles: 0,
            event_filter: 0,
            pa: true,
            pct: false,
            kernel: false,
            system_wide: false,
            pids: Vec::new(),
            cpus: None,
            data_pages: None,
            aux_pages: None,
            sysfs: PathBuf::from("/sys"),
            runtime: None,
            timelines: None,
        }
    }
}

/// Per-CPU figures of a recording.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CpuFigures {
    /// SPE records decoded from the AUX data.
    pub records: u64,
    pub aux_bytes: u64,
    /// PERF_RECORD_AUX records (pieces of AUX data).
    pub aux_pieces: u64,
    /// AUX records flagged TRUNCATED (the buffer was full: samples lost until re-enabled).
    pub truncated: u64,
    /// PARTIAL (the hardware lost data inside a record).
    pub partial: u64,
    /// COLLISION (a sample was taken while the previous one was still in flight).
    pub collisions: u64,
    /// Sideband records the kernel dropped (PERF_RECORD_LOST).
    pub lost_records: u64,
    /// Undecodable bytes in the AUX data.
    pub bad_bytes: u64,
}

/// What a recording wrote and saw.
#[derive(Clone, Debug)]
pub struct HardwareRecording {
    pub perf_data: PathBuf,
    pub sidecar: PathBuf,
    pub pmu: String,
    pub per_cpu: BTreeMap<u32, CpuFigures>,
    /// The command's exit status (none in a system-wide run without a command).
    pub exit_status: Option<std::process::ExitStatus>,
    /// CPU time spelunk itself used (user + system, all its threads; not the command's).
    pub recorder_cpu_ns: u64,
    /// From the command's release to its exit (or to the end of a system-wide recording).
    pub recorded_ns: u64,
    /// Options the kernel refused and that were dropped, one line each.
    pub dropped: Vec<String>,
    pub warnings: Vec<String>,
    /// What the preloaded runtime's logs added to the sidecar.
    pub runtime: Option<crate::runtime_log::MergeSummary>,
}

impl HardwareRecording {
    pub fn total(&self) -> CpuFigures {
        let mut t = CpuFigures::default();
        for f in self.per_cpu.values() {
            t.records += f.records;
            t.aux_bytes += f.aux_bytes;
            t.aux_pieces += f.aux_pieces;
            t.truncated += f.truncated;
            t.partial += f.partial;
            t.collisions += f.collisions;
            t.lost_records += f.lost_records;
            t.bad_bytes += f.bad_bytes;
        }
        t
    }
}

/// Why a hardware recording could not be made or finished.
#[derive(Debug, thiserror::Error)]
pub enum HardwareError {
    #[error("{0}")]
    NoSpe(String),
    #[error(transparent)]
    Pmu(#[from] spelunk_perf::spe_pmu::SpePmuError),
    #[error("{pmu} has no format field `{field}` (its sysfs format/ lists: {known}); {why}")]
    MissingField {
        pmu: String,
        field: String,
        known: String,
        why: String,
    },
    #[error("{option} {value}: does not fit {pmu}'s format field `{field}` ({bits})")]
    FieldRange {
        option: String,
        value: u64,
        pmu: String,
        field: String,
        bits: String,
    },
    #[error("perf_event_open of {what} on CPU {cpu} failed: {source}{hint}")]
    Open {
        what: String,
        cpu: u32,
        source: io::Error,
        hint: String,
    },
    #[error("mapping the ring buffers of CPU {cpu} ({kib} KiB) failed: {source}{hint}")]
    Map {
        cpu: u32,
        kib: usize,
        source: io::Error,
        hint: String,
    },
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
    #[error(transparent)]
    Perf(#[from] PerfError),
    #[error(transparent)]
    Sidecar(#[from] spelunk_perf::sidecar::SidecarError),
    #[error("{source}; {}", match partial {
        Some(p) => format!("the recording up to that point is kept as {} (spelunk and perf read it)", p.display()),
        None => "nothing of the recording could be kept".to_string(),
    })]
    WriteFailed {
        source: Box<PerfError>,
        partial: Option<PathBuf>,
        /// The command's exit status (it ran to its end, unrecorded after the failure).
        command_status: Option<std::process::ExitStatus>,
    },
}

/// The SPE PMU to record with, or an error that says why there is none.
pub fn choose_pmu(sysfs: &Path, name: Option<&str>) -> Result<SpePmu, HardwareError> {
    let pmus = spelunk_perf::spe_pmu::spe_pmus(&sysfs.join("bus/event_source/devices"))?;
    if pmus.is_empty() {
        return Err(HardwareError::NoSpe(
            "this machine has no SPE PMU (no /sys/bus/event_source/devices/arm_spe_*). SPE \
             needs Arm metal (not a VM), a kernel with the arm_spe_pmu driver loaded \
             (`modprobe arm_spe_pmu`) and, on some cores, `kpti=off`; `spelunk check` says \
             which. Record under the emulator with `spelunk record --emulate -- CMD`, or only \
             resident memory and PMU counters over time with `spelunk record --no-spe -- CMD`"
                .into(),
        ));
    }
    match name {
        None => Ok(pmus.into_iter().next().expect("checked non-empty")),
        Some(n) => {
            let names: Vec<String> = pmus.iter().map(|p| p.name.clone()).collect();
            pmus.into_iter().find(|p| p.name == n).ok_or_else(|| {
                HardwareError::NoSpe(format!(
                    "no SPE PMU named {n}; this machine has {}",
                    names.join(", ")
                ))
            })
        }
    }
}

/// The config words (config..config4) for `o` on `pmu`, from its sysfs format fields.
pub fn spe_config_words(
    pmu: &SpePmu,
    o: &HardwareOptions,
    pa: bool,
    pct: bool,
) -> Result<[u64; 5], HardwareError> {
    let mut words = [0u64; 5];
    let known = || pmu.format.keys().cloned().collect::<Vec<_>>().join(", ");
    let mut set = |option: &str, field: &str, value: u64, why: &str| {
        let f = pmu
            .field(field)
            .ok_or_else(|| HardwareError::MissingField {
                pmu: pmu.name.clone(),
                field: field.into(),
                known: known(),
                why: why.into(),
            })?;
        let (w, bits) = f.encode(value).ok_or_else(|| HardwareError::FieldRange {
            option: option.into(),
            value,
            pmu: pmu.name.clone(),
            field: field.into(),
            bits: f.describe(),
        })?;
        let i = match w {
            ConfigWord::Config => 0,
            ConfigWord::Config1 => 1,
            ConfigWord::Config2 => 2,
            ConfigWord::Config3 => 3,
            ConfigWord::Config4 => 4,
        };
        words[i] |= bits;
        Ok::<(), HardwareError>(())
    };
    set(
        "timestamps",
        "ts_enable",
        1,
        "spelunk needs timestamps to place samples in time",
    )?;
    if pa {
        set("--pa", "pa_enable", 1, "drop --pa")?;
    }
    if pct {
        set("--pct", "pct_enable", 1, "drop --pct")?;
    }
    if o.jitter {
        set("--jitter", "jitter", 1, "record with --no-jitter")?;
    }
    for f in &o.filter {
        let field = match f.as_str() {
            "load" => "load_filter",
            "store" => "store_filter",
            "branch" => "branch_filter",
            other => {
                return Err(HardwareError::NoSpe(format!(
                    "--filter {other}: expected load, store or branch"
                )))
            }
        };
        set("--filter", field, 1, "record without --filter")?;
    }
    if o.event_filter != 0 {
        set(
            "--event-filter",
            "event_filter",
            o.event_filter,
            "record without --event-filter",
        )?;
    }
    if o.min_latency_cycles != 0 {
        set(
            "--min-latency",
            "min_latency",
            u64::from(o.min_latency_cycles),
            "record without --min-latency",
        )?;
    }
    Ok(words)
}

fn sample_id_type() -> u64 {
    abi::sample::TID | abi::sample::TIME | abi::sample::CPU | abi::sample::IDENTIFIER
}

/// The flags that say which tasks an event follows: a command's tree from its exec
/// (`inherit`, `enable_on_exec`), attached processes' threads and their later children
/// (`inherit`), or everything on a CPU (none).
fn target_flags(o: &HardwareOptions, command: bool) -> u64 {
    use abi::attr_flag as f;
    if o.system_wide {
        0
    } else if !o.pids.is_empty() {
        f::INHERIT
    } else if command {
        f::INHERIT | f::ENABLE_ON_EXEC
    } else {
        0
    }
}

fn spe_attr(pmu: &SpePmu, words: &[u64; 5], o: &HardwareOptions, command: bool) -> EventAttr {
    use abi::attr_flag as f;
    let mut flags = f::DISABLED
        | f::SAMPLE_ID_ALL
        | f::EXCLUDE_HV
        | f::EXCLUDE_GUEST
        | target_flags(o, command);
    if !o.kernel {
        flags |= f::EXCLUDE_KERNEL;
    }
    EventAttr {
        config1: words[1],
        config2: words[2],
        ..EventAttr::new(
            pmu.perf_type,
            words[0],
            o.period_ops,
            sample_id_type(),
            flags,
        )
    }
}

fn dummy_attr(o: &HardwareOptions, command: bool) -> EventAttr {
    use abi::attr_flag as f;
    let flags = f::DISABLED
        | f::EXCLUDE_KERNEL
        | f::EXCLUDE_HV
        | f::MMAP
        | f::MMAP_DATA
        | f::COMM
        | f::TASK
        | f::SAMPLE_ID_ALL
        | f::MMAP2
        | f::COMM_EXEC
        | f::CONTEXT_SWITCH
        | target_flags(o, command);
    EventAttr::new(
        abi::event_type::SOFTWARE,
        abi::event_type::SW_DUMMY,
        1,
        sample_id_type(),
        flags,
    )
}

fn read_text(p: &Path) -> Option<String> {
    let b = spelunk_fsio::read_bounded(p, 64 << 10).ok()?;
    String::from_utf8(b).ok()
}

fn open_hint(e: &io::Error, sysfs: &Path, pmu: &str, cpu: u32, privileged: bool) -> String {
    let paranoid = read_text(&sysfs.join("../proc/sys/kernel/perf_event_paranoid"))
        .or_else(|| read_text(Path::new("/proc/sys/kernel/perf_event_paranoid")))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    match e.raw_os_error() {
        Some(libc::EBUSY) => format!(
            " (another program already uses {pmu} on CPU {cpu}, e.g. perf record or another \
             spelunk: SPE has one user per CPU; stop it, or record other CPUs with -C)"
        ),
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            " (not permitted: perf_event_paranoid is {paranoid}{}; run as root, or `sudo setcap \
             cap_perfmon+ep $(command -v spelunk)`, or `sudo sysctl \
             kernel.perf_event_paranoid={}`)",
            if privileged {
                ", and --kernel or -a need privilege"
            } else {
                ""
            },
            if privileged { 1 } else { 2 }
        ),
        Some(libc::ENOENT) | Some(libc::ENODEV) => format!(
            " (CPU {cpu} is not covered by {pmu}, or the PMU went away: see `spelunk check`)"
        ),
        Some(libc::EOPNOTSUPP) => {
            " (the driver does not support an option: a filter or field this SPE lacks)".into()
        }
        Some(libc::EINVAL) => {
            " (the driver refused the configuration: the period must be at least 256 \
             operations)"
                .into()
        }
        Some(libc::EMFILE) => " (too many open files: raise `ulimit -n`)".into(),
        _ => String::new(),
    }
}

fn map_hint(e: &io::Error, kib: usize) -> String {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::ENOMEM) => format!(
            " (the AUX and data buffers ({kib} KiB per CPU) count against \
             kernel.perf_event_mlock_kb and RLIMIT_MEMLOCK: use a smaller --aux-pages, run as \
             root, or raise them)"
        ),
        _ => String::new(),
    }
}

/// One CPU's events and ring.
struct CpuRing {
    cpu: u32,
    spe: EventFd,
    _dummy: EventFd,
    /// Attached threads beyond the first: their SPE and sideband events write into this ring.
    more_spe: Vec<EventFd>,
    more_dummy: Vec<EventFd>,
    ring: MappedRing,
    decoder: RecordDecoder,
    figures: CpuFigures,
    last_time_ns: u64,
}

impl CpuRing {
    fn disable_all(&self) {
        for fd in [&self.spe, &self._dummy]
            .into_iter()
            .chain(&self.more_spe)
            .chain(&self.more_dummy)
        {
            let _ = fd.disable();
        }
    }
}

/// Every thread of the processes `pids` (`/proc/PID/task`), or an error naming a process
/// that does not exist.
fn attached_threads(pids: &[i32]) -> Result<Vec<i32>, HardwareError> {
    let mut tids = Vec::new();
    for &pid in pids {
        let dir = PathBuf::from(format!("/proc/{pid}/task"));
        let rd = std::fs::read_dir(&dir).map_err(|source| HardwareError::Io {
            what: format!("-p {pid}: no such process ({})", dir.display()),
            source,
        })?;
        let mut these: Vec<i32> = rd
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        these.sort_unstable();
        // The process's main thread first: its ring is the one the others write into.
        these.retain(|t| *t != pid);
        tids.push(pid);
        tids.extend(these);
    }
    Ok(tids)
}

/// Whether `pid` still runs (exists and is not a zombie).
fn process_alive(pid: i32) -> bool {
    read_text(Path::new(&format!("/proc/{pid}/stat")))
        .and_then(|t| {
            let after = t.rsplit_once(')')?.1;
            after
                .split_whitespace()
                .next()
                .map(|s| s != "Z" && s != "X")
        })
        .unwrap_or(false)
}

/// Whether locked memory is not limited for this process: root, or CAP_IPC_LOCK (bit 14 of
/// `CapEff` in /proc/self/status), which the kernel checks before `perf_event_mlock_kb`.
fn may_lock_freely() -> bool {
    // SAFETY: geteuid has no memory effects.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    read_text(Path::new("/proc/self/status"))
        .and_then(|t| {
            let hex = t
                .lines()
                .find_map(|l| l.strip_prefix("CapEff:"))?
                .trim()
                .to_string();
            u64::from_str_radix(&hex, 16).ok()
        })
        .is_some_and(|caps| caps & (1 << 14) != 0)
}

/// The (data, AUX) pages per CPU to map.
fn buffer_pages(o: &HardwareOptions) -> (usize, usize) {
    let free = may_lock_freely();
    (
        o.data_pages.unwrap_or(if free { 64 } else { 16 }),
        o.aux_pages.unwrap_or(if free { 256 } else { 32 }),
    )
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .ok()
        .filter(|p| *p > 0)
        .unwrap_or(4096)
}

/// Opens and maps every CPU's events (disabled).
fn open_all(
    pmu: &SpePmu,
    o: &HardwareOptions,
    cpus: &[u32],
    tasks: &[i32],
    command: bool,
    words: &[u64; 5],
) -> Result<Vec<CpuRing>, HardwareError> {
    let (pid, more) = tasks.split_first().map_or((-1, &[][..]), |(p, m)| (*p, m));
    let spe = spe_attr(pmu, words, o, command).to_bytes();
    let dummy = dummy_attr(o, command).to_bytes();
    let privileged = o.kernel || o.system_wide;
    let (data_pages, aux_pages) = buffer_pages(o);
    let kib = (1 + data_pages + aux_pages) * page_size() / 1024;
    let mut out = Vec::with_capacity(cpus.len());
    for &cpu in cpus {
        let open_for = |attr: &[u8], what: &str, pid: i32| {
            EventFd::open(attr, pid, cpu as i32).map_err(|source| HardwareError::Open {
                what: what.into(),
                cpu,
                hint: open_hint(&source, &o.sysfs, &pmu.name, cpu, privileged),
                source,
            })
        };
        let open = |attr: &[u8], what: &str| open_for(attr, what, pid);
        let spe_fd = open(&spe, &pmu.name)?;
        let ring = MappedRing::map(spe_fd.raw(), data_pages, aux_pages).map_err(|source| {
            HardwareError::Map {
                cpu,
                kib,
                hint: map_hint(&source, kib),
                source,
            }
        })?;
        let dummy_fd = open(&dummy, "the sideband (dummy) event")?;
        dummy_fd
            .set_output(&spe_fd)
            .map_err(|source| HardwareError::Io {
                what: format!("redirecting CPU {cpu}'s sideband into its SPE ring"),
                source,
            })?;
        let (mut more_spe, mut more_dummy) = (Vec::new(), Vec::new());
        for &tid in more {
            let redirect = |fd: &EventFd| {
                fd.set_output(&spe_fd).map_err(|source| HardwareError::Io {
                    what: format!("redirecting thread {tid}'s events into CPU {cpu}'s ring"),
                    source,
                })
            };
            // A thread that ended since it was listed is no error.
            let s = match open_for(&spe, &pmu.name, tid) {
                Err(HardwareError::Open { source, .. })
                    if source.raw_os_error() == Some(libc::ESRCH) =>
                {
                    continue
                }
                other => other?,
            };
            redirect(&s)?;
            let d = open_for(&dummy, "the sideband (dummy) event", tid)?;
            redirect(&d)?;
            more_spe.push(s);
            more_dummy.push(d);
        }
        out.push(CpuRing {
            more_spe,
            more_dummy,
            cpu,
            spe: spe_fd,
            _dummy: dummy_fd,
            ring,
            decoder: RecordDecoder::new(),
            figures: CpuFigures::default(),
            last_time_ns: 0,
        });
    }
    Ok(out)
}

/// The counter the kernel's perf-time conversion applies to (`cap_user_time_zero`): the
/// virtual counter CNTVCT_EL0 on arm64 (the one SPE timestamps use), the TSC on x86-64.
#[cfg(target_arch = "aarch64")]
fn perf_counter() -> Option<u64> {
    let v: u64;
    // SAFETY: reading the virtual counter is allowed at EL0 on Linux (CNTKCTL_EL1.EL0VCTEN).
    unsafe { std::arch::asm!("isb", "mrs {v}, cntvct_el0", v = out(reg) v) };
    Some(v)
}
#[cfg(target_arch = "x86_64")]
fn perf_counter() -> Option<u64> {
    // SAFETY: rdtsc has no memory effects.
    Some(unsafe { std::arch::x86_64::_rdtsc() })
}
#[cfg(not(any(target_arch = "aarch64", target_arch = "x86_64")))]
fn perf_counter() -> Option<u64> {
    None
}

/// perf time minus CLOCK_MONOTONIC, now: the counter read between two monotonic reads and
/// converted with the kernel's own conversion. The runtime's logs are in CLOCK_MONOTONIC.
fn perf_minus_monotonic_ns(tc: &TimeConv) -> Option<i64> {
    if !tc.cap_user_time_zero {
        return None;
    }
    let a = monotonic_ns();
    let c = perf_counter()?;
    let b = monotonic_ns();
    let perf = tc.tsc_to_perf_time(c);
    Some(perf as i64 - (a / 2 + b / 2) as i64)
}

/// User + system CPU time of this process so far (getrusage RUSAGE_SELF).
fn self_cpu_ns() -> u64 {
    // SAFETY: getrusage fills a zeroed struct we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return 0;
    }
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    ns(u.ru_utime) + ns(u.ru_stime)
}

/// Host facts for the perf.data header.
struct Host {
    hostname: String,
    release: String,
}

fn host() -> Host {
    // SAFETY: uname fills a zeroed struct we own.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::uname(&mut u) } == 0;
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    if !ok {
        return Host {
            hostname: String::new(),
            release: String::new(),
        };
    }
    Host {
        hostname: field(&u.nodename),
        release: field(&u.release),
    }
}

fn total_mem_kb() -> u64 {
    read_text(Path::new("/proc/meminfo"))
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

fn midr_of(sysfs: &Path, cpu: u32) -> Option<Midr> {
    let p = sysfs.join(format!(
        "devices/system/cpu/cpu{cpu}/regs/identification/midr_el1"
    ));
    Midr::parse(&read_text(&p)?)
}

fn count_cpus(sysfs: &Path, which: &str) -> Option<u32> {
    let t = read_text(&sysfs.join(format!("devices/system/cpu/{which}")))?;
    spelunk_perf::spe_pmu::parse_cpu_list(&t).map(|v| v.len() as u32)
}

/// Writes one ring's records into the perf.data.
fn drain(
    c: &mut CpuRing,
    w: &mut SpeRecordingWriter,
    spe_attr: &EventAttr,
    recs: &mut Vec<RingRecord>,
    buf: &mut Vec<u8>,
    warnings: &mut Vec<String>,
) -> Result<bool, HardwareError> {
    recs.clear();
    if let Err(e) = c.ring.drain(recs) {
        warnings.push(format!("CPU {}: {e}", c.cpu));
    }
    let cpu = c.cpu;
    for (i, r) in recs.iter().enumerate() {
        let rec = match r.parse(spe_attr, i as u64) {
            Ok(Some(rec)) => rec,
            Ok(None) => continue,
            Err(e) => {
                warnings.push(format!("CPU {cpu}: ring record skipped: {e}"));
                continue;
            }
        };
        let sample = match &rec {
            SidebandRecord::Comm(x) => x.sample,
            SidebandRecord::Mmap(x) => x.sample,
            SidebandRecord::Task(x) => x.sample,
            SidebandRecord::Switch(x) => x.sample,
            SidebandRecord::ItraceStart(x) => x.sample,
            SidebandRecord::Lost(x) => x.sample,
            SidebandRecord::LostSamples(x) => x.sample,
            SidebandRecord::Aux(x) => x.sample,
        };
        let time = sample.time_ns.unwrap_or(c.last_time_ns);
        c.last_time_ns = c.last_time_ns.max(time);
        let task = Task::new(sample.pid.unwrap_or(-1), sample.tid.unwrap_or(-1));
        match rec {
            SidebandRecord::Aux(a) => {
                buf.clear();
                c.ring.aux_copy(a.aux_offset, a.aux_size, buf);
                c.ring.aux_release(a.aux_offset.wrapping_add(a.aux_size));
                let f = &mut c.figures;
                f.aux_pieces += 1;
                f.aux_bytes += buf.len() as u64;
                f.truncated += u64::from(a.flags.truncated());
                f.partial += u64::from(a.flags.partial());
                f.collisions += u64::from(a.flags.collision());
                let offset = f.aux_bytes - buf.len() as u64;
                c.decoder.feed_each(buf, offset, |_| {});
                w.aux(cpu, task, time, a.flags, buf)?;
                if a.flags.truncated() {
                    // The kernel stops the event when the buffer fills; sampling resumes now
                    // that the space is given back. Disable first: kernels without the fix
                    // "perf/aux: Fix pending disable flow when the AUX ring buffer overruns"
                    // (6.1 among them) can leave the event enabled but stopped, and a bare
                    // ENABLE of an enabled event restarts nothing (seen through the VM's stub).
                    for fd in c.more_spe.iter() {
                        let _ = fd.disable();
                        let _ = fd.enable();
                    }
                    let _ = c.spe.disable();
                    if let Err(e) = c.spe.enable() {
                        warnings.push(format!(
                            "CPU {cpu}: re-enabling SPE after a full buffer failed: {e}"
                        ));
                    }
                }
            }
            SidebandRecord::ItraceStart(i) => w.itrace_start(cpu, time, Task::new(i.pid, i.tid))?,
            SidebandRecord::Comm(x) => {
                w.comm(cpu, time, Task::new(x.pid, x.tid), &x.name, x.exec)?
            }
            SidebandRecord::Mmap(m) => w.mmap2(
                cpu,
                time,
                &Mmap2 {
                    task: Task::new(m.pid, m.tid),
                    address: m.address,
                    length: m.length,
                    page_offset: m.page_offset,
                    file_id: m.file_id,
                    prot: m.prot.unwrap_or(0),
                    flags: m.flags.unwrap_or(0),
                    cpu_mode: m.cpu_mode,
                    executable: m.executable,
                    path: m.path,
                },
            )?,
            SidebandRecord::Task(t) => {
                let (me, parent) = (Task::new(t.pid, t.tid), Task::new(t.ppid, t.ptid));
                match t.kind {
                    TaskEventKind::Fork => w.fork(cpu, t.time_ns, me, parent)?,
                    TaskEventKind::Exit => w.exit(cpu, t.time_ns, me, parent)?,
                }
            }
            SidebandRecord::Switch(s) => match (s.other_pid, s.other_tid) {
                (Some(op), Some(ot)) => {
                    w.switch(cpu, time, s.out, s.preempted, task, Task::new(op, ot))?
                }
                _ => w.switch_task(cpu, time, s.out, s.preempted, task)?,
            },
            SidebandRecord::Lost(l) => {
                c.figures.lost_records += l.lost;
                w.lost(cpu, time, l.lost)?
            }
            SidebandRecord::LostSamples(l) => w.lost_samples(cpu, time, l.lost)?,
        }
    }
    Ok(!recs.is_empty())
}

/// Records `command` (or, with `system_wide` and no command, every task until Ctrl-C) into
/// `output` and its sidecar. `cmdline` is spelunk's own command line, for the header. A
/// recording cut short (a full disk) is kept as `partial_of.partial` (spelunk_fsio's
/// `partial_path`): `partial_of` is where the recording was to go in the end, `output` may be
/// a private name it is staged under.
pub fn record(
    o: &HardwareOptions,
    command: &[String],
    output: &Path,
    partial_of: &Path,
    cmdline: &[String],
) -> Result<HardwareRecording, HardwareError> {
    let pmu = choose_pmu(&o.sysfs, o.pmu.as_deref())?;
    let mut warnings = Vec::new();
    let mut dropped = Vec::new();
    // CPUs: the PMU's, online, and the -C list.
    let online = read_text(&o.sysfs.join("devices/system/cpu/online"))
        .and_then(|t| spelunk_perf::spe_pmu::parse_cpu_list(&t));
    let mut cpus: Vec<u32> = pmu
        .cpus
        .iter()
        .copied()
        .filter(|c| online.as_ref().is_none_or(|on| on.contains(c)))
        .collect();
    if let Some(want) = &o.cpus {
        for c in want {
            if !cpus.contains(c) {
                return Err(HardwareError::NoSpe(format!(
                    "-C: CPU {c} is not covered by {} (it covers {:?}, online ones only)",
                    pmu.name, cpus
                )));
            }
        }
        cpus.retain(|c| want.contains(c));
    }
    if cpus.is_empty() {
        return Err(HardwareError::NoSpe(format!(
            "{} covers no online CPU (its cpumask is empty)",
            pmu.name
        )));
    }
    if let Some(min) = pmu.min_interval() {
        if o.period_ops < min {
            warnings.push(format!(
                "--period {}: below {}'s smallest interval {min}; the driver may raise it",
                o.period_ops, pmu.name
            ));
        }
    }

    let has_command = !command.is_empty();
    // The runtime: preloaded into the command, logging into a private directory.
    let mut runtime_env = Vec::new();
    let mut runtime_dir = None;
    if let (Some(lib), true) = (&o.runtime, has_command) {
        match crate::runtime_log::private_log_dir(output) {
            Ok(dir) => {
                runtime_env = crate::runtime_log::preload_env(lib, &dir);
                runtime_dir = Some(dir);
            }
            Err(e) => warnings.push(format!(
                "no directory for the runtime's logs ({e}): recording without the runtime"
            )),
        }
    }
    let mut child = if has_command {
        Some(
            counting::StoppedChild::spawn_env(command, &runtime_env).map_err(|source| {
                HardwareError::Io {
                    what: format!("starting {}", command[0]),
                    source,
                }
            })?,
        )
    } else {
        None
    };
    let tasks: Vec<i32> = if o.system_wide {
        vec![-1]
    } else if !o.pids.is_empty() {
        attached_threads(&o.pids)?
    } else {
        child
            .as_ref()
            .map(|c| vec![c.pid()])
            .unwrap_or_else(|| vec![-1])
    };
    let pid = if o.system_wide {
        -1
    } else {
        o.pids.first().copied().unwrap_or(tasks[0])
    };
    let (mut pa, mut pct) = (o.pa, o.pct);
    let mut words = spe_config_words(&pmu, o, pa, pct)?;
    let mut rings = match open_all(&pmu, o, &cpus, &tasks, has_command, &words) {
        Err(HardwareError::Open { source, .. })
            if (pa || pct)
                && matches!(
                    source.raw_os_error(),
                    Some(libc::EACCES) | Some(libc::EPERM)
                ) =>
        {
            // pa_enable/pct_enable need CAP_PERFMON (or root): drop them, say so once.
            for (on, field) in [(pa, "pa_enable (--pa)"), (pct, "pct_enable (--pct)")] {
                if on {
                    dropped.push(format!(
                        "{field} was refused (needs root or CAP_PERFMON): recording without it"
                    ));
                }
            }
            pa = false;
            pct = false;
            words = spe_config_words(&pmu, o, pa, pct)?;
            open_all(&pmu, o, &cpus, &tasks, has_command, &words)?
        }
        other => other?,
    };

    let time_conv = match rings.first().and_then(|r| r.ring.time_conv()) {
        Some(t) => t,
        None => {
            warnings.push(
                "the kernel offers no conversion from the SPE timer to perf time \
                 (cap_user_time_zero is 0): sample times cannot be related to the sideband"
                    .into(),
            );
            TimeConv {
                cap_user_time_zero: false,
                ..TimeConv::from_frequency(1_000_000_000, 0)
            }
        }
    };
    let offset_at_start = perf_minus_monotonic_ns(&time_conv);
    let h = host();
    let midr = midr_of(&o.sysfs, cpus[0]).unwrap_or_else(|| {
        warnings.push(format!(
            "CPU {}'s MIDR_EL1 is not in sysfs: the perf.data names no core",
            cpus[0]
        ));
        Midr(0)
    });
    let spec = RecordingSpec {
        pmu_type: pmu.perf_type,
        pmu_name: pmu.name.clone(),
        spe: SpeConfig::from_configs(words[0], words[1], words[2], words[3]),
        sample_period: o.period_ops,
        cpus: cpus.clone(),
        nr_cpus_available: count_cpus(&o.sysfs, "possible").unwrap_or(cpus.len() as u32),
        nr_cpus_online: count_cpus(&o.sysfs, "online").unwrap_or(cpus.len() as u32),
        midr,
        min_interval: pmu.min_interval().unwrap_or(0),
        metadata: spelunk_perf::SpeMetadataLayout::V1,
        time_conv,
        time_conv_layout: TimeConvLayout::Long,
        workload_pid: pid,
        hostname: h.hostname,
        os_release: h.release.clone(),
        perf_version: format!("spelunk {}", env!("CARGO_PKG_VERSION")),
        cpu_desc: String::new(),
        cmdline: cmdline.to_vec(),
        total_mem_kb: total_mem_kb(),
    };
    let mut writer = SpeRecordingWriter::create(output, spec)?;
    let parse_attr = spe_attr(&pmu, &words, o, has_command);

    // Enable: a command's events start at its exec (enable_on_exec); system-wide and attached
    // ones now.
    if !has_command || o.system_wide || !o.pids.is_empty() {
        for r in &rings {
            for fd in std::iter::once(&r.spe).chain(&r.more_spe) {
                fd.enable().map_err(|source| HardwareError::Io {
                    what: format!("enabling SPE on CPU {}", r.cpu),
                    source,
                })?;
            }
            for fd in std::iter::once(&r._dummy).chain(&r.more_dummy) {
                fd.enable().map_err(|source| HardwareError::Io {
                    what: format!("enabling the sideband event on CPU {}", r.cpu),
                    source,
                })?;
            }
        }
    }
    counting::catch_interrupt();
    // Timelines of the command's tree, timed on the samples' clock (perf time = monotonic +
    // the offset measured now; without a conversion, no timelines).
    let timeline_plan = o
        .timelines
        .as_ref()
        .map(|t| crate::timeline::CounterPlan::new(&t.pmu));
    let mut timelines = match (&o.timelines, &timeline_plan, &child, offset_at_start) {
        (Some(t), Some(plan), Some(c), Some(_)) if !o.system_wide && o.pids.is_empty() => Some((
            crate::timeline::CounterRecorder::open(&counting::LinuxPerfSys, plan, c.pid()),
            crate::timeline::CapacitySampler::new("/proc", c.pid(), t.interval_ns),
        )),
        (Some(_), _, _, None) => {
            warnings.push(
                "no resident-memory or counter timelines: their clock cannot be put on the \
                 samples' (no perf-time conversion for this CPU's counter)"
                    .into(),
            );
            None
        }
        (Some(_), _, _, _) => {
            warnings.push(
                "no resident-memory or counter timelines in a system-wide or attached (-p) \
                 recording (they follow the tree of a command spelunk starts)"
                    .into(),
            );
            None
        }
        _ => None,
    };
    let perf_now = || monotonic_ns().saturating_add_signed(offset_at_start.unwrap_or(0));
    let timeline_start_ns = perf_now();
    // No timelines: no ticks (the poll then waits its full 100 ms).
    let tick_ns = match (&timelines, &o.timelines) {
        (Some(_), Some(t)) => t.interval_ns.max(1),
        _ => u64::MAX,
    };
    let mut next_tick = timeline_start_ns.saturating_add(tick_ns);
    let cpu_at_start = self_cpu_ns();
    let started = std::time::Instant::now();
    if let Some(c) = child.as_mut() {
        c.release().map_err(|source| HardwareError::Io {
            what: format!("running {}", command[0]),
            source,
        })?;
    }

    let mut pollfds: Vec<libc::pollfd> = rings
        .iter()
        .map(|r| libc::pollfd {
            fd: r.spe.raw(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let (mut recs, mut buf) = (Vec::new(), Vec::new());
    let mut exit_status = None;
    let mut recorded_ns = 0;
    let written = (|| -> Result<(), HardwareError> {
        loop {
            // Wake at the next timeline tick, and at least every 100 ms.
            let wait_ms = (next_tick.saturating_sub(perf_now()) / 1_000_000).min(100) as i32;
            // SAFETY: pollfds is a live array of pollfd; EINTR (Ctrl-C) just returns early.
            unsafe {
                libc::poll(pollfds.as_mut_ptr(), pollfds.len() as libc::nfds_t, wait_ms);
            }
            if let Some((counters, capacity)) = timelines.as_mut() {
                let now = perf_now();
                if now >= next_tick {
                    capacity.sample(now);
                    counters.snapshot(now, "periodic");
                    next_tick = next_tick
                        .saturating_add(tick_ns)
                        .max(now.saturating_add(tick_ns / 2));
                }
            }
            let done = match child.as_mut() {
                Some(c) => match c.try_wait() {
                    Ok(Some(s)) => {
                        exit_status = Some(s);
                        true
                    }
                    Ok(None) => false,
                    Err(e) => {
                        warnings.push(format!("waiting for the command: {e}"));
                        true
                    }
                },
                None if !o.pids.is_empty() => {
                    counting::interrupted() || o.pids.iter().all(|p| !process_alive(*p))
                }
                None => counting::interrupted(),
            };
            let mut any = false;
            for r in rings.iter_mut() {
                any |= drain(
                    r,
                    &mut writer,
                    &parse_attr,
                    &mut recs,
                    &mut buf,
                    &mut warnings,
                )?;
            }
            if any {
                writer.finish_round()?;
                writer.flush()?;
            }
            if done {
                recorded_ns = started.elapsed().as_nanos() as u64;
                break;
            }
        }
        // Stop, then take what the kernel wrote while stopping.
        for r in rings.iter() {
            r.disable_all();
        }
        for r in rings.iter_mut() {
            drain(
                r,
                &mut writer,
                &parse_attr,
                &mut recs,
                &mut buf,
                &mut warnings,
            )?;
        }
        Ok(())
    })();
    match written {
        Ok(()) => {}
        Err(HardwareError::Perf(source)) => {
            // Writing failed (a full disk): stop sampling, let the command finish, and keep what
            // was written where it cannot replace a good file.
            for r in &rings {
                r.disable_all();
            }
            drop(rings);
            let command_status = match child.as_mut() {
                Some(c) => {
                    eprintln!(
                        "spelunk record: recording stopped ({source}); waiting for {} to finish",
                        command[0]
                    );
                    c.wait().ok()
                }
                None => None,
            };
            if let Some(d) = &runtime_dir {
                let _ = std::fs::remove_dir_all(d);
            }
            let partial = spelunk_fsio::partial_path(partial_of);
            let kept = writer.keep_partial(&partial).map(|()| partial);
            return Err(HardwareError::WriteFailed {
                source: Box::new(source),
                partial: kept.ok(),
                command_status,
            });
        }
        Err(e) => return Err(e),
    }
    let mut per_cpu = BTreeMap::new();
    for r in rings.iter_mut() {
        r.decoder.finish();
        let s = r.decoder.stats();
        r.figures.records = s.records;
        r.figures.bad_bytes = s.bad_bytes;
        per_cpu.insert(r.cpu, r.figures.clone());
    }
    drop(rings);
    crate::buildids::attach(&mut writer, &mut warnings);
    writer.finish()?;

    let sidecar_path = Sidecar::path_for(output);
    let mut sc = Sidecar::new("hardware");
    if let (Some((mut counters, capacity)), Some(t), Some(plan)) =
        (timelines.take(), &o.timelines, &timeline_plan)
    {
        counters.snapshot(perf_now(), "final");
        let described = crate::timeline::TimelineSidecar {
            clock: "perf",
            start_ns: timeline_start_ns,
            interval_ns: t.interval_ns,
            line_bytes: t.line_bytes,
            pmu: &t.pmu,
        };
        warnings.extend(described.fill(&mut sc, plan, counters, capacity));
        sc.config.insert("phases_clock".into(), "perf".into());
    }
    let mut runtime = None;
    if let Some(dir) = &runtime_dir {
        let offset_at_end = perf_minus_monotonic_ns(&time_conv);
        let (offset, drift) = match (offset_at_start, offset_at_end) {
            (Some(a), Some(b)) => (Some(a / 2 + b / 2), Some(b - a)),
            (a, b) => (a.or(b), None),
        };
        match offset {
            Some(offset) => {
                let end_ns = monotonic_ns().saturating_add_signed(offset);
                let m = crate::runtime_log::merge_logs(&dir.join("log"), offset, end_ns, &mut sc);
                sc.config.insert(
                    "runtime".to_string(),
                    serde_json::json!({
                        "library": o.runtime.as_ref().map(|p| p.display().to_string()),
                        "logs": m.logs,
                        "clock": "CLOCK_MONOTONIC moved onto perf time",
                        "perf_minus_monotonic_ns": offset,
                        "offset_drift_ns": drift,
                    }),
                );
                runtime = Some(m);
            }
            None => warnings.push(
                "the runtime's CLOCK_MONOTONIC times cannot be put on the samples' clock (no \
                 perf-time conversion for this CPU's counter): its phases and objects are left \
                 out"
                .into(),
            ),
        }
        let _ = std::fs::remove_dir_all(dir);
    }
    sc.command = command.to_vec();
    sc.exit_status = exit_status.and_then(|s| s.code());
    let mut cfg = BTreeMap::new();
    cfg.insert("pmu".to_string(), serde_json::json!(pmu.name));
    cfg.insert("period_ops".to_string(), serde_json::json!(o.period_ops));
    cfg.insert(
        "config_words".to_string(),
        serde_json::json!(words.iter().map(|w| format!("{w:#x}")).collect::<Vec<_>>()),
    );
    cfg.insert("kernel_release".to_string(), serde_json::json!(h.release));
    cfg.insert("aux_per_cpu".to_string(), serde_json::json!(per_cpu));
    sc.config.extend(cfg);
    sc.write(&sidecar_path)?;
    Ok(HardwareRecording {
        recorder_cpu_ns: self_cpu_ns().saturating_sub(cpu_at_start),
        recorded_ns,
        perf_data: output.to_path_buf(),
        sidecar: sidecar_path,
        pmu: pmu.name,
        per_cpu,
        exit_status,
        dropped,
        warnings,
        runtime,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use spelunk_perf::spe_pmu::FormatField;

    fn pmu(fields: &[(&str, &str)]) -> SpePmu {
        SpePmu {
            name: "arm_spe_0".into(),
            perf_type: 10,
            cpus: vec![0, 1],
            caps: BTreeMap::new(),
            format: fields
                .iter()
                .map(|(n, t)| (n.to_string(), FormatField::parse(t).unwrap()))
                .collect(),
            unknown_format: Vec::new(),
        }
    }

    #[test]
    fn config_words_come_from_the_format_files() {
        // The bit positions of Linux 6.1's arm_spe_pmu format/ files, and moved ones: the
        // words must follow whatever the files say.
        let std = pmu(&[
            ("ts_enable", "config:0"),
            ("pa_enable", "config:1"),
            ("jitter", "config:16"),
            ("load_filter", "config:33"),
            ("store_filter", "config:34"),
            ("event_filter", "config1:0-63"),
            ("min_latency", "config2:0-11"),
        ]);
        let o = HardwareOptions {
            filter: vec!["load".into()],
            event_filter: 0x2,
            min_latency_cycles: 100,
            ..Default::default()
        };
        let w = spe_config_words(&std, &o, true, false).unwrap();
        assert_eq!(w[0], 1 | 2 | (1 << 16) | (1 << 33));
        assert_eq!((w[1], w[2]), (0x2, 100));
        let moved = pmu(&[
            ("ts_enable", "config:5"),
            ("jitter", "config:7"),
            ("load_filter", "config:9"),
            ("event_filter", "config1:0-63"),
            ("min_latency", "config2:4-15"),
        ]);
        let w = spe_config_words(&moved, &o, false, false).unwrap();
        assert_eq!(w[0], (1 << 5) | (1 << 7) | (1 << 9));
        assert_eq!(w[2], 100 << 4);
    }

    #[test]
    fn a_missing_field_or_value_too_wide_is_an_error_naming_it() {
        let p = pmu(&[("ts_enable", "config:0"), ("min_latency", "config2:0-11")]);
        let o = HardwareOptions::default(); // jitter on, pa on
        let e = spe_config_words(&p, &o, true, false).unwrap_err();
        assert!(e.to_string().contains("no format field `pa_enable`"), "{e}");
        let o = HardwareOptions {
            jitter: false,
            min_latency_cycles: 5000,
            ..Default::default()
        };
        let e = spe_config_words(&p, &o, false, false).unwrap_err();
        assert!(e.to_string().contains("--min-latency 5000"), "{e}");
        assert!(e.to_string().contains("config2:0-11"), "{e}");
    }

    #[test]
    fn format_files_spelunk_does_not_understand_are_left_alone() {
        // A newer kernel's field in a word this spelunk does not know: kept aside, and the
        // fields spelunk uses still map.
        let mut p = pmu(&[("ts_enable", "config:0"), ("jitter", "config:16")]);
        p.unknown_format
            .push(("future_field".into(), "config7:0-3".into()));
        let o = HardwareOptions {
            pa: false,
            ..Default::default()
        };
        let w = spe_config_words(&p, &o, false, false).unwrap();
        assert_eq!(w, [1 | (1 << 16), 0, 0, 0, 0]);
    }

    #[test]
    fn no_spe_pmu_says_what_to_do() {
        let dir = std::env::temp_dir().join(format!("spelunk-hw-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("bus/event_source/devices/armv8_pmuv3")).unwrap();
        let e = choose_pmu(&dir, None).unwrap_err();
        assert!(e.to_string().contains("no SPE PMU"), "{e}");
        assert!(e.to_string().contains("--emulate"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
