//! Timelines of a command's process tree, sampled while it runs: **temporal capacity**
//! (resident memory per NUMA node and mapping class, [NMO paper §VI]) and a **PMU counter
//! timeline** (cumulative counts of a default set of Arm architected events, from which the
//! report derives bandwidth over time). `spelunk record --no-spe` records these alone, which is
//! what a machine without SPE (a VM, x86-64) can give.
//!
//! - Capacity comes from `/proc/PID/numa_maps` of every process of the tree ([`parse_numa_maps`]:
//!   the `N<node>=<pages>` fields times `kernelpagesize_kB`), or, on a kernel without NUMA
//!   support (no `numa_maps`), from `/proc/PID/smaps` ([`parse_smaps`]: `Rss` per mapping, node
//!   unknown). The tree is found from the `ppid` field of every `/proc/*/stat`; a process once
//!   seen stays in the tree while it lives (same start time), so orphans reparented to init are
//!   still counted. [`CapacitySampler`] reads a `/proc` under any root, so tests use a fake one.
//! - Counters are one `perf_event_open` group (several when they do not fit) of the core PMU,
//!   on the command with `inherit` and `enable_on_exec`, read at every tick with their enabled
//!   and running times ([`CounterRecorder`], over the [`PerfSys`] trait). An event the PMU does
//!   not list in sysfs `events/` (PMCEID) or that the kernel refuses is "not counted", with the
//!   reason, never a 0.
//!
//! Both timelines are stamped with CLOCK_MONOTONIC nanoseconds at the same instants.

use spelunk_perf::counting::{
    CountingError, CountingSession, OpenOptions, PerfSys, StoppedChild, Target,
};
use spelunk_perf::sidecar::{
    CapacitySample, CapacityTimeline, CounterSnapshot, Counters, MappingClass, NodeResident,
    NotCounted, Sidecar,
};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The clock of both timelines, as the sidecar names it (`config.timeline_clock`).
pub const TIMELINE_CLOCK: &str = crate::runtime_log::LOG_CLOCK;

/// The default counter set: (architected event number, name), from the Arm ARM's common event
/// list ([Arm ARM] D17.11; the same numbers in [N1 PMU methodology]). CPU_CYCLES and
/// INST_RETIRED give the rate of work; MEM_ACCESS, the refills and LL_CACHE_MISS_RD the memory
/// traffic at each level; BUS_ACCESS the beats on the core's bus.
pub const DEFAULT_EVENTS: [(u16, &str); 7] = [
    (0x11, "CPU_CYCLES"),
    (0x08, "INST_RETIRED"),
    (0x13, "MEM_ACCESS"),
    (0x03, "L1D_CACHE_REFILL"),
    (0x17, "L2D_CACHE_REFILL"),
    (0x37, "LL_CACHE_MISS_RD"),
    (0x19, "BUS_ACCESS"),
];

/// Floating-point events counted besides [`DEFAULT_EVENTS`] when the core implements them, for
/// the report's operational intensity (spelunk-pmu's `intensity`, NMO's perp mode): the first
/// set the core lists entirely. FP_FIXED_OPS_SPEC and FP_SCALE_OPS_SPEC count operations
/// (Neoverse V1, N2, V2, N3, V3); VFP_SPEC and ASE_SPEC, on cores without them (Neoverse N1),
/// count instructions [Arm ARM DDI 0487, common event numbers]. A core with neither counts no
/// FP event, and that is not listed as "not counted" (the default set's report is unchanged).
pub const FP_EVENT_CHOICES: [[(u16, &str); 2]; 2] = [
    [(0x80c1, "FP_FIXED_OPS_SPEC"), (0x80c0, "FP_SCALE_OPS_SPEC")],
    [(0x75, "VFP_SPEC"), (0x74, "ASE_SPEC")],
];

/// A line of `numa_maps` or `smaps` that is not what the kernel writes.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("line {line}: {message}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    pub message: String,
}

/// One mapping of `/proc/PID/numa_maps` with pages resident.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumaMapping {
    pub address: u64,
    pub class: MappingClass,
    /// (node, resident pages) from the `N<node>=` fields.
    pub pages_per_node: Vec<(u32, u64)>,
    /// `kernelpagesize_kB` in bytes: the unit of the page counts (2 MiB for hugetlbfs; a
    /// transparent huge page counts as its 4 KiB pages).
    pub page_bytes: u64,
}

impl NumaMapping {
    pub fn bytes_on(&self, node: u32) -> u64 {
        self.pages_per_node
            .iter()
            .filter(|(n, _)| *n == node)
            .map(|(_, p)| p.saturating_mul(self.page_bytes))
            .sum()
    }
}

/// The class of a `file=` path: anonymous hugetlb memory shows as `/anon_hugepage`.
fn class_of_file(path: &str) -> MappingClass {
    if path.starts_with("/anon_hugepage") {
        MappingClass::Anon
    } else {
        MappingClass::File
    }
}

/// Parses `/proc/PID/numa_maps` (proc(5); `show_numa_map` in the kernel's
/// fs/proc/task_mmu.c): `ADDR POLICY [file=PATH | heap | stack] [huge] [anon=N] [dirty=N] ...
/// [N<node>=<pages> ...] kernelpagesize_kB=K`. Lines without pages (no `N` fields) are left
/// out. The policy can hold spaces (`prefer (many)`), so fields are found by their names.
pub fn parse_numa_maps(text: &str) -> Result<Vec<NumaMapping>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let err = |message: String| ParseError {
            line: i + 1,
            message,
        };
        let mut fields = line.split_whitespace();
        let Some(addr) = fields.next() else { continue };
        let address = u64::from_str_radix(addr, 16)
            .map_err(|_| err(format!("'{addr}' is not a hex address")))?;
        let mut class = MappingClass::Anon;
        let mut pages_per_node = Vec::new();
        let mut page_kib = None;
        for f in fields {
            if let Some(path) = f.strip_prefix("file=") {
                class = class_of_file(path);
            } else if f == "heap" {
                class = MappingClass::Heap;
            } else if f == "stack" {
                class = MappingClass::Stack;
            } else if let Some(k) = f.strip_prefix("kernelpagesize_kB=") {
                page_kib = Some(
                    k.parse::<u64>()
                        .map_err(|_| err(format!("kernelpagesize_kB '{k}' is not a number")))?,
                );
            } else if let Some((node, pages)) = f
                .strip_prefix('N')
                .and_then(|r| r.split_once('='))
                .filter(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            {
                let node = node
                    .parse::<u32>()
                    .map_err(|_| err(format!("node '{node}' is out of range")))?;
                let pages = pages
                    .parse::<u64>()
                    .map_err(|_| err(format!("N{node}='{pages}' is not a page count")))?;
                pages_per_node.push((node, pages));
            }
        }
        if pages_per_node.is_empty() {
            continue;
        }
        let Some(kib) = page_kib else {
            return Err(err(
                "pages per node but no kernelpagesize_kB (their unit)".into()
            ));
        };
        out.push(NumaMapping {
            address,
            class,
            pages_per_node,
            page_bytes: kib.saturating_mul(1024),
        });
    }
    Ok(out)
}

/// One mapping of `/proc/PID/smaps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmapsMapping {
    pub address: u64,
    pub class: MappingClass,
    pub rss_bytes: u64,
}

/// The class of an smaps pathname: `[heap]`, `[stack]`, other `[...]` (vdso, named anonymous
/// memory) and none are anonymous, a path is a file (anonymous hugetlb aside), as in
/// [`parse_numa_maps`].
fn class_of_pathname(path: &str) -> MappingClass {
    match path {
        "" => MappingClass::Anon,
        "[heap]" => MappingClass::Heap,
        p if p == "[stack]" || p.starts_with("[stack:") => MappingClass::Stack,
        p if p.starts_with('[') => MappingClass::Anon,
        p => class_of_file(p),
    }
}

/// The mapping header of an smaps entry (`START-END PERMS OFFSET DEV INODE [PATHNAME]`, as in
/// /proc/PID/maps): its start address and pathname, or None for a field line (`Rss: 4 kB`).
fn smaps_header(line: &str) -> Option<(u64, &str)> {
    let (range, rest) = line.split_once(' ')?;
    let (start, end) = range.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    u64::from_str_radix(end, 16).ok()?;
    // PERMS OFFSET DEV INODE, then the pathname (which may hold spaces) after the padding.
    let mut rest = rest;
    for _ in 0..4 {
        rest = rest.trim_start();
        let end = rest.find(' ').unwrap_or(rest.len());
        rest = &rest[end..];
    }
    Some((start, rest.trim()))
}

/// Parses `/proc/PID/smaps` (proc(5)): each mapping's header and its `Rss:` in kB.
pub fn parse_smaps(text: &str) -> Result<Vec<SmapsMapping>, ParseError> {
    let mut out: Vec<SmapsMapping> = Vec::new();
    let mut rss_seen = true;
    for (i, line) in text.lines().enumerate() {
        let err = |message: String| ParseError {
            line: i + 1,
            message,
        };
        if let Some((address, path)) = smaps_header(line) {
            if !rss_seen {
                return Err(err("the previous mapping has no Rss line".into()));
            }
            out.push(SmapsMapping {
                address,
                class: class_of_pathname(path),
                rss_bytes: 0,
            });
            rss_seen = false;
        } else if let Some(v) = line.strip_prefix("Rss:") {
            let Some(m) = out.last_mut() else {
                return Err(err("Rss before any mapping".into()));
            };
            let mut t = v.split_whitespace();
            let kib = t
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| err(format!("Rss '{}' is not a number", v.trim())))?;
            if t.next() != Some("kB") {
                return Err(err(format!("Rss '{}' is not in kB", v.trim())));
            }
            m.rss_bytes = kib.saturating_mul(1024);
            rss_seen = true;
        }
    }
    if !rss_seen {
        return Err(ParseError {
            line: text.lines().count(),
            message: "the last mapping has no Rss line".into(),
        });
    }
    Ok(out)
}

/// What the tree walk needs of `/proc/PID/stat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    /// `Z` for a zombie (ended, not yet reaped: it has no memory left).
    pub state: char,
    pub ppid: i32,
    /// Start time after boot, in clock ticks: with the pid, it names one process.
    pub start_ticks: u64,
}

/// Parses `/proc/PID/stat` (fields 3, 4 and 22; the command name in field 2 may hold spaces
/// and parentheses, so fields are counted after its last `)`).
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    // Fields 5..21 are skipped; starttime is field 22.
    let start_ticks = f.nth(17)?.parse().ok()?;
    Some(ProcStat {
        state,
        ppid,
        start_ticks,
    })
}

/// Where resident memory is read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    NumaMaps,
    Smaps,
}

impl Source {
    fn file(self) -> &'static str {
        match self {
            Source::NumaMaps => "numa_maps",
            Source::Smaps => "smaps",
        }
    }
}

/// Why a process's memory could not be read.
enum ReadFailure {
    /// It ended between listing and reading: normal, skipped silently.
    Gone,
    /// This kernel has no numa_maps (built without NUMA).
    NoNumaMaps,
    Denied,
    Other(String),
}

/// Samples the resident memory of a process tree under a `/proc` root (`/proc` live; a
/// directory of `PID/stat` and `PID/numa_maps` files in tests). It owns what must persist
/// between samples: the processes seen so far, the source in use, what was already said.
pub struct CapacitySampler {
    proc_root: PathBuf,
    root_pid: i32,
    /// pid -> start time of every process seen in the tree.
    known: BTreeMap<i32, u64>,
    source: Source,
    timeline: CapacityTimeline,
    denied: BTreeSet<i32>,
    said: BTreeSet<String>,
}

impl CapacitySampler {
    pub fn new(proc_root: impl Into<PathBuf>, root_pid: i32, interval_ns: u64) -> Self {
        CapacitySampler {
            proc_root: proc_root.into(),
            root_pid,
            known: BTreeMap::new(),
            source: Source::NumaMaps,
            timeline: CapacityTimeline {
                source: Source::NumaMaps.file().into(),
                interval_ns,
                ..Default::default()
            },
            denied: BTreeSet::new(),
            said: BTreeSet::new(),
        }
    }

    /// The samples so far.
    pub fn samples(&self) -> &[CapacitySample] {
        &self.timeline.samples
    }

    /// Notes so far (each said once).
    pub fn notes(&self) -> &[String] {
        &self.timeline.notes
    }

    fn note(&mut self, key: &str, text: String) {
        if self.said.insert(key.to_string()) {
            self.timeline.notes.push(text);
        }
    }

    /// The processes of the tree now: the root's descendants from `ppid` links, plus every
    /// process seen before that still runs (an orphan reparented to init stays counted).
    /// Zombies (ended, not yet reaped) are left out: they hold no memory.
    pub fn tree(&mut self) -> Vec<i32> {
        let mut stats: BTreeMap<i32, ProcStat> = BTreeMap::new();
        if let Ok(rd) = std::fs::read_dir(&self.proc_root) {
            for e in rd.flatten() {
                let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                    continue;
                };
                let stat = std::fs::read_to_string(e.path().join("stat")).ok();
                if let Some(s) = stat.as_deref().and_then(parse_stat) {
                    stats.insert(pid, s);
                }
            }
        }
        let mut children: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for (&pid, st) in &stats {
            children.entry(st.ppid).or_default().push(pid);
        }
        // Seeds (the root, the processes seen before) must be the same process as before (same
        // start time: the pid was not reused); their descendants are found by their links.
        let mut todo: Vec<(i32, bool)> = vec![(self.root_pid, true)];
        todo.extend(self.known.keys().map(|pid| (*pid, true)));
        let mut tree = BTreeSet::new();
        while let Some((pid, seed)) = todo.pop() {
            let Some(start) = stats.get(&pid).map(|s| s.start_ticks) else {
                continue;
            };
            if seed && self.known.get(&pid).is_some_and(|s| *s != start) {
                continue;
            }
            if !tree.insert(pid) {
                continue;
            }
            self.known.insert(pid, start);
            todo.extend(
                children
                    .get(&pid)
                    .into_iter()
                    .flatten()
                    .map(|c| (*c, false)),
            );
        }
        tree.into_iter()
            .filter(|pid| stats.get(pid).is_some_and(|s| s.state != 'Z'))
            .collect()
    }

    fn read(&self, pid: i32) -> Result<String, ReadFailure> {
        let dir = self.proc_root.join(pid.to_string());
        let path = dir.join(self.source.file());
        match std::fs::read_to_string(&path) {
            Ok(t) => Ok(t),
            Err(e) => Err(match e.kind() {
                io::ErrorKind::PermissionDenied => ReadFailure::Denied,
                io::ErrorKind::NotFound if self.source == Source::NumaMaps && dir.is_dir() => {
                    ReadFailure::NoNumaMaps
                }
                // ESRCH: the process ended while its file was read.
                _ if !dir.is_dir() || e.raw_os_error() == Some(libc::ESRCH) => ReadFailure::Gone,
                _ => ReadFailure::Other(format!("{}: {e}", path.display())),
            }),
        }
    }

    /// Adds one process's resident memory to `nodes`; false when it could not be read.
    fn add_process(&mut self, pid: i32, nodes: &mut BTreeMap<Option<u32>, NodeResident>) -> bool {
        let text = match self.read(pid) {
            Ok(t) => t,
            Err(ReadFailure::NoNumaMaps) => {
                self.source = Source::Smaps;
                self.timeline.source = Source::Smaps.file().into();
                self.note(
                    "smaps",
                    "this kernel has no /proc/PID/numa_maps (built without NUMA support): \
                     resident memory comes from /proc/PID/smaps (Rss per mapping), and its \
                     NUMA node is unknown (null)"
                        .into(),
                );
                return self.add_process(pid, nodes);
            }
            Err(ReadFailure::Gone) => return false,
            Err(ReadFailure::Denied) => {
                self.denied.insert(pid);
                let file = self.source.file();
                self.note(
                    "denied",
                    format!(
                        "/proc/PID/{file} of a process of the tree could not be read \
                         (permission denied, e.g. a setuid program): its memory is left out; \
                         the pids are listed in the last note"
                    ),
                );
                return false;
            }
            Err(ReadFailure::Other(m)) => {
                self.note(
                    &format!("read {pid}"),
                    format!("{m}; this process is left out"),
                );
                return false;
            }
        };
        let parsed = match self.source {
            Source::NumaMaps => parse_numa_maps(&text).map(|maps| {
                for m in maps {
                    for &(node, _) in &m.pages_per_node {
                        nodes
                            .entry(Some(node))
                            .or_insert_with(|| NodeResident {
                                node: Some(node),
                                ..Default::default()
                            })
                            .add(m.class, m.bytes_on(node));
                    }
                }
            }),
            Source::Smaps => parse_smaps(&text).map(|maps| {
                let n = nodes.entry(None).or_default();
                for m in maps {
                    n.add(m.class, m.rss_bytes);
                }
            }),
        };
        if let Err(e) = parsed {
            let file = self.source.file();
            self.note(
                &format!("parse {file}"),
                format!(
                    "/proc/{pid}/{file} {e}: the process is left out of that sample (and \
                     others like it)"
                ),
            );
            return false;
        }
        true
    }

    /// Reads the tree's resident memory now and records it at `time_ns`. Nothing is recorded
    /// when no process of the tree is alive (the command has ended): false then.
    pub fn sample(&mut self, time_ns: u64) -> bool {
        let mut nodes: BTreeMap<Option<u32>, NodeResident> = BTreeMap::new();
        let mut processes = 0;
        let tree = self.tree();
        if tree.is_empty() {
            return false;
        }
        for pid in tree {
            if self.add_process(pid, &mut nodes) {
                processes += 1;
            }
        }
        self.timeline.samples.push(CapacitySample {
            time_ns,
            processes,
            nodes: nodes
                .into_values()
                .filter(|n| n.total_bytes() > 0)
                .collect(),
        });
        true
    }

    /// The timeline, with the pids that could not be read named once.
    pub fn finish(mut self) -> CapacityTimeline {
        if !self.denied.is_empty() {
            let pids: Vec<String> = self.denied.iter().map(|p| p.to_string()).collect();
            self.timeline.notes.push(format!(
                "not readable (permission denied): pid {}",
                pids.join(", ")
            ));
        }
        self.timeline
    }
}

/// The core PMU the counters use, as sysfs describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorePmuEvents {
    pub name: String,
    /// MIDR_EL1 of the cores it counts on (the sidecar's `config.midr`, so `spelunk topdown
    /// --import` finds the catalog), when known.
    pub midr: Option<spelunk_spe::Midr>,
    /// `perf_event_attr.type` (sysfs `type`).
    pub perf_type: u32,
    /// Event numbers the PMU lists under sysfs `events/` (the kernel lists the common events
    /// PMCEID0/1 say the core implements).
    pub listed: BTreeSet<u16>,
}

/// The PMU to count with, or why there is none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CounterPmu {
    Found(CorePmuEvents),
    Missing(String),
}

/// Which of [`DEFAULT_EVENTS`] are opened and which are not counted (with why).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterPlan {
    pub pmu: Option<(String, u32)>,
    pub events: Vec<(u16, String)>,
    pub not_counted: Vec<NotCounted>,
}

impl CounterPlan {
    pub fn new(pmu: &CounterPmu) -> CounterPlan {
        let not = |code: u16, name: &str, reason: String| NotCounted {
            code: u32::from(code),
            name: name.into(),
            reason,
        };
        match pmu {
            CounterPmu::Missing(why) => CounterPlan {
                pmu: None,
                events: Vec::new(),
                not_counted: DEFAULT_EVENTS
                    .iter()
                    .map(|&(c, n)| not(c, n, why.clone()))
                    .collect(),
            },
            CounterPmu::Found(p) => {
                let mut plan = CounterPlan {
                    pmu: Some((p.name.clone(), p.perf_type)),
                    events: Vec::new(),
                    not_counted: Vec::new(),
                };
                for &(code, name) in &DEFAULT_EVENTS {
                    if p.listed.contains(&code) {
                        plan.events.push((code, name.into()));
                    } else {
                        plan.not_counted.push(not(
                            code,
                            name,
                            format!(
                                "not in {}'s sysfs events/ (the core does not implement it: \
                                 PMCEID)",
                                p.name
                            ),
                        ));
                    }
                }
                if let Some(fp) = FP_EVENT_CHOICES
                    .iter()
                    .find(|set| set.iter().all(|(c, _)| p.listed.contains(c)))
                {
                    plan.events
                        .extend(fp.iter().map(|&(code, name)| (code, name.to_string())));
                }
                plan
            }
        }
    }
}

/// How the counters were opened, for the sidecar.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CounterSetup {
    /// "user" (kernel excluded: perf_event_paranoid refused it) or "user+kernel".
    pub scope: String,
    /// "one group" or "one group per event (the kernel multiplexes them)".
    pub grouping: String,
}

/// A counter timeline being recorded: the open groups, the snapshots so far.
pub struct CounterRecorder<'a, S: PerfSys + ?Sized> {
    session: Option<CountingSession<'a, S>>,
    counters: Counters,
    setup: CounterSetup,
    /// A read failed: said once, no further snapshots.
    failed: Option<String>,
}

fn open_error_is(e: &CountingError, errnos: &[i32]) -> bool {
    matches!(e, CountingError::Open { source, .. }
        if source.raw_os_error().is_some_and(|r| errnos.contains(&r)))
}

impl<'a, S: PerfSys + ?Sized> CounterRecorder<'a, S> {
    /// Opens the plan's events on `pid` (a stopped child: counting starts at its exec). The
    /// kernel side is tried in this order: one group, counting kernel and user; user only when
    /// the kernel is refused (EACCES/EPERM: perf_event_paranoid); one group per event when one
    /// group does not fit the counters (EINVAL/ENOSPC). When nothing opens, every event is
    /// "not counted" with the kernel's answer.
    pub fn open(sys: &'a S, plan: &CounterPlan, pid: i32) -> Self {
        let mut rec = CounterRecorder {
            session: None,
            counters: Counters {
                not_counted: plan.not_counted.clone(),
                ..Default::default()
            },
            setup: CounterSetup::default(),
            failed: None,
        };
        let Some((_, pmu_type)) = &plan.pmu else {
            return rec;
        };
        if plan.events.is_empty() {
            return rec;
        }
        let codes: Vec<u64> = plan.events.iter().map(|(c, _)| u64::from(*c)).collect();
        let mut opts = OpenOptions {
            enable_on_exec: true,
            inherit: true,
            exclude_kernel: false,
        };
        let mut split = false;
        let result = loop {
            let groups: Vec<Vec<u64>> = if split {
                codes.iter().map(|c| vec![*c]).collect()
            } else {
                vec![codes.clone()]
            };
            match CountingSession::open(sys, *pmu_type, &groups, &Target::Process(pid), opts) {
                Err(e)
                    if !opts.exclude_kernel && open_error_is(&e, &[libc::EACCES, libc::EPERM]) =>
                {
                    opts.exclude_kernel = true
                }
                Err(e) if !split && open_error_is(&e, &[libc::EINVAL, libc::ENOSPC]) => {
                    split = true
                }
                other => break other,
            }
        };
        let session = match result {
            Ok(s) => s,
            Err(e) => {
                let why = format!("perf_event_open failed: {e}");
                for (code, name) in &plan.events {
                    rec.counters.not_counted.push(NotCounted {
                        code: u32::from(*code),
                        name: name.clone(),
                        reason: why.clone(),
                    });
                }
                return rec;
            }
        };
        // Which events the kernel left out of their group (not implemented after all): the
        // counters are still disabled, so this read costs nothing.
        let unsupported: BTreeSet<u64> = match session.read() {
            Ok(r) => r
                .iter()
                .flat_map(|g| &g.events)
                .filter(|e| e.unsupported)
                .map(|e| e.code)
                .collect(),
            Err(_) => BTreeSet::new(),
        };
        for (code, name) in &plan.events {
            if unsupported.contains(&u64::from(*code)) {
                rec.counters.not_counted.push(NotCounted {
                    code: u32::from(*code),
                    name: name.clone(),
                    reason: "the kernel refused it (EOPNOTSUPP/ENOENT: not implemented)".into(),
                });
            } else {
                rec.counters.events.push((u32::from(*code), name.clone()));
            }
        }
        rec.setup = CounterSetup {
            scope: if opts.exclude_kernel {
                "user".into()
            } else {
                "user+kernel".into()
            },
            grouping: if split {
                "one group per event (the kernel multiplexes them)".into()
            } else {
                "one group".into()
            },
        };
        rec.session = Some(session);
        rec
    }

    /// Whether any event is being counted.
    pub fn counting(&self) -> bool {
        self.session.is_some() && !self.counters.events.is_empty()
    }

    pub fn setup(&self) -> &CounterSetup {
        &self.setup
    }

    /// Reads every counter and records a snapshot (`reason` "periodic" or "final").
    pub fn snapshot(&mut self, time_ns: u64, reason: &str) {
        let Some(session) = &self.session else { return };
        if self.failed.is_some() || self.counters.events.is_empty() {
            return;
        }
        let readings = match session.read() {
            Ok(r) => r,
            Err(e) => {
                self.failed = Some(format!(
                    "reading the counters failed at {time_ns} ns ({e}): the counter timeline \
                     stops there"
                ));
                return;
            }
        };
        let by_code: BTreeMap<u64, _> = readings
            .iter()
            .flat_map(|g| &g.events)
            .filter(|e| !e.unsupported)
            .map(|e| (e.code, *e))
            .collect();
        let mut snap = CounterSnapshot {
            time_ns,
            reason: reason.into(),
            ..Default::default()
        };
        for (code, _) in &self.counters.events {
            let r = by_code.get(&u64::from(*code));
            snap.values.push(r.map_or(0, |r| r.value));
            snap.time_enabled_ns
                .push(r.map_or(0, |r| r.time_enabled_ns));
            snap.time_running_ns
                .push(r.map_or(0, |r| r.time_running_ns));
        }
        self.counters.timeline.push(snap);
    }

    /// The counters (totals from the final snapshot) and a note when a read failed.
    pub fn finish(mut self) -> (Counters, CounterSetup, Option<String>) {
        self.counters.not_counted.sort_by_key(|n| {
            DEFAULT_EVENTS
                .iter()
                .position(|(c, _)| u32::from(*c) == n.code)
        });
        if let Some(fin) = self
            .counters
            .timeline
            .iter()
            .rev()
            .find(|s| s.reason == "final")
        {
            for ((_, name), v) in self.counters.events.iter().zip(&fin.values) {
                self.counters.totals.insert(name.clone(), *v);
            }
        }
        self.session = None;
        (self.counters, self.setup, self.failed)
    }
}

/// CLOCK_MONOTONIC now, in ns.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// What to record.
#[derive(Clone, Debug)]
pub struct TimelineOptions {
    /// Time between samples (both timelines).
    pub interval_ns: u64,
    /// `/proc` (live) or a fake tree.
    pub proc_root: PathBuf,
    pub pmu: CounterPmu,
    /// The cache line size (sysfs `coherency_line_size`), for the report's bandwidth; `None`
    /// when unknown.
    pub line_bytes: Option<u64>,
    /// `libspelunk.so` to preload: its phases, objects and heap blocks join the sidecar on the
    /// timelines' clock (both CLOCK_MONOTONIC).
    pub runtime: Option<PathBuf>,
}

/// What a timelines recording wrote and saw.
#[derive(Clone, Debug)]
pub struct TimelineRecording {
    pub sidecar_path: PathBuf,
    /// CLOCK_MONOTONIC ns when the command was released (the timelines' origin).
    pub start_ns: u64,
    pub interval_ns: u64,
    /// The sidecar as written.
    pub sidecar: Sidecar,
    pub exit_status: std::process::ExitStatus,
    /// Things the user should know, one line each (also in the sidecar).
    pub warnings: Vec<String>,
    /// What the preloaded runtime's logs added.
    pub runtime: Option<crate::runtime_log::MergeSummary>,
}

impl TimelineRecording {
    pub fn capacity(&self) -> Option<&CapacityTimeline> {
        self.sidecar.capacity.as_ref()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TimelineError {
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
    #[error(transparent)]
    Sidecar(#[from] spelunk_perf::sidecar::SidecarError),
    /// spelunk got SIGINT or SIGTERM: the program was stopped; the sidecar holds the
    /// timelines up to then.
    #[error(
        "interrupted by {}: stopped {program}",
        crate::interrupt::signal_name(*.signal)
    )]
    Interrupted { signal: i32, program: String },
}

/// The cache line size sysfs gives for CPU 0's first cache, in bytes.
pub fn line_bytes(sysfs: &Path) -> Option<u64> {
    std::fs::read_to_string(sysfs.join("devices/system/cpu/cpu0/cache/index0/coherency_line_size"))
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|&b: &u64| b > 0)
}

/// Runs `command` and records both timelines into `sidecar_path` (no perf.data). The command
/// starts stopped; the counters are attached, then it runs; every `interval_ns` both
/// timelines are sampled at one CLOCK_MONOTONIC instant; when it ends a final counter snapshot
/// is taken. The program's stdin, stdout and stderr are spelunk's.
pub fn record_timelines<S: PerfSys + ?Sized>(
    sys: &S,
    o: &TimelineOptions,
    command: &[String],
    sidecar_path: &Path,
) -> Result<TimelineRecording, TimelineError> {
    let io_err = |what: String| move |source: io::Error| TimelineError::Io { what, source };
    let program = command.first().cloned().unwrap_or_default();
    let mut runtime_dir = None;
    let mut env = Vec::new();
    let mut warnings = Vec::new();
    if let Some(lib) = &o.runtime {
        match crate::runtime_log::private_log_dir(sidecar_path) {
            Ok(dir) => {
                env = crate::runtime_log::preload_env(lib, &dir);
                runtime_dir = Some(dir);
            }
            Err(e) => warnings.push(format!(
                "no directory for the runtime's logs ({e}): recording without the runtime"
            )),
        }
    }
    let mut stopper = crate::interrupt::Stopper::catch();
    let mut child =
        StoppedChild::spawn_env(command, &env).map_err(io_err(format!("starting {program}")))?;
    // SIGINT/SIGTERM to spelunk stop the program (it shares spelunk's process group and
    // terminal, so it is stopped alone), and what was recorded is kept (docs/files.md).
    stopper.aim(child.pid(), false);
    let plan = CounterPlan::new(&o.pmu);
    let mut counters = CounterRecorder::open(sys, &plan, child.pid());
    let mut capacity = CapacitySampler::new(&o.proc_root, child.pid(), o.interval_ns);
    let start_ns = monotonic_ns();
    child
        .release()
        .map_err(io_err(format!("running {program}")))?;
    let interval = o.interval_ns.max(1);
    let mut next = start_ns.saturating_add(interval);
    let status = loop {
        if let Some(s) = child
            .try_wait()
            .map_err(io_err(format!("waiting for {program}")))?
        {
            break s;
        }
        stopper.poll();
        let now = monotonic_ns();
        if now >= next {
            capacity.sample(now);
            counters.snapshot(now, "periodic");
            // A late tick (a slow /proc walk) is not caught up with a burst of samples.
            next = next
                .saturating_add(interval)
                .max(now.saturating_add(interval / 2));
            continue;
        }
        // Wake at the tick, and at least every 10 ms to notice the end of the command.
        std::thread::sleep(Duration::from_nanos((next - now).min(10_000_000)));
    };
    counters.snapshot(monotonic_ns(), "final");
    let interrupted = stopper.finish();

    let mut sc = Sidecar::new("timelines");
    sc.command = command.to_vec();
    sc.exit_status = Some(exit_status_code(&status));
    let timeline = TimelineSidecar {
        clock: TIMELINE_CLOCK,
        start_ns,
        interval_ns: o.interval_ns,
        line_bytes: o.line_bytes,
        pmu: &o.pmu,
    };
    warnings.extend(timeline.fill(&mut sc, &plan, counters, capacity));
    let mut runtime = None;
    if let Some(dir) = &runtime_dir {
        let m = crate::runtime_log::merge_logs(&dir.join("log"), 0, monotonic_ns(), &mut sc);
        sc.config
            .insert("phases_clock".into(), TIMELINE_CLOCK.into());
        let _ = std::fs::remove_dir_all(dir);
        runtime = Some(m);
    }

    sc.write(sidecar_path)?;
    if let Some(signal) = interrupted {
        return Err(TimelineError::Interrupted { signal, program });
    }
    Ok(TimelineRecording {
        sidecar_path: sidecar_path.to_path_buf(),
        start_ns,
        interval_ns: o.interval_ns,
        sidecar: sc,
        exit_status: status,
        warnings,
        runtime,
    })
}

/// How a recording's timelines are described in its sidecar.
pub struct TimelineSidecar<'p> {
    /// The clock of every time: "CLOCK_MONOTONIC" (--no-spe) or "perf" (with SPE samples).
    pub clock: &'static str,
    pub start_ns: u64,
    pub interval_ns: u64,
    pub line_bytes: Option<u64>,
    pub pmu: &'p CounterPmu,
}

impl TimelineSidecar<'_> {
    /// Puts the finished timelines and what describes them into `sc`; returns the notes the
    /// user should see (a counter read that failed, memory that could not be read).
    pub fn fill<S: PerfSys + ?Sized>(
        &self,
        sc: &mut Sidecar,
        plan: &CounterPlan,
        counters: CounterRecorder<'_, S>,
        capacity: CapacitySampler,
    ) -> Vec<String> {
        let config = &mut sc.config;
        config.insert("timeline_clock".into(), self.clock.into());
        config.insert("timeline_start_ns".into(), self.start_ns.into());
        config.insert("timeline_interval_ns".into(), self.interval_ns.into());
        if let Some(b) = self.line_bytes {
            config.insert("cache_line_bytes".into(), b.into());
        }
        if let Some((name, ty)) = &plan.pmu {
            config.insert("counters_pmu".into(), name.clone().into());
            config.insert("counters_pmu_type".into(), (*ty).into());
        }
        if let CounterPmu::Found(CorePmuEvents {
            midr: Some(midr), ..
        }) = self.pmu
        {
            config.insert("midr".into(), midr.to_string().into());
        }
        let (c, setup, failed) = counters.finish();
        if !c.events.is_empty() {
            config.insert("counters_scope".into(), setup.scope.into());
            config.insert("counters_grouping".into(), setup.grouping.into());
            config.insert(
                "counters_values".into(),
                "raw: scale by time_enabled_ns / time_running_ns when multiplexed".into(),
            );
        }
        sc.counters = c;
        let mut notes = Vec::new();
        if let Some(f) = failed {
            notes.push(f.clone());
            config_note(sc, f);
        }
        let cap = capacity.finish();
        notes.extend(cap.notes.iter().cloned());
        sc.capacity = Some(cap);
        notes
    }
}

/// The core PMU to count on, from sysfs under `root` (`/` live), or why there is none.
pub fn detect_counter_pmu(root: &Path) -> CounterPmu {
    match spelunk_pmu::detect::detect(root) {
        Err(e) => CounterPmu::Missing(format!("no Arm core PMU: {e}")),
        Ok(system) => match system
            .core_types
            .iter()
            .find_map(|t| t.pmu.as_ref().map(|p| (p, t.midr)))
        {
            None => CounterPmu::Missing(format!(
                "no Arm core PMU in sysfs (PMUs: {})",
                system.pmu_names.join(", ")
            )),
            Some((p, midr)) => CounterPmu::Found(CorePmuEvents {
                name: p.name.clone(),
                midr: Some(midr),
                perf_type: p.perf_type,
                listed: p.events.values().copied().collect(),
            }),
        },
    }
}

fn config_note(sc: &mut Sidecar, note: String) {
    let notes = sc
        .config
        .entry("counters_notes".into())
        .or_insert_with(|| serde_json::Value::Array(Vec::new()));
    if let serde_json::Value::Array(a) = notes {
        a.push(note.into());
    }
}

/// The exit status as the sidecar keeps it: the code, or 128+N for signal N (as shells do).
fn exit_status_code(s: &std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    s.code()
        .or_else(|| s.signal().map(|n| 128 + n))
        .unwrap_or(-1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use spelunk_perf::counting::sim::SimPmu;

    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;

    /// Lines in the kernel's format (taken from a live 6.1 kernel, then edited).
    const NUMA_MAPS: &str = "\
55c946388000 default file=/usr/bin/head mapped=2 N0=2 kernelpagesize_kB=4
55c946393000 default file=/usr/bin/head anon=1 dirty=1 active=0 N0=1 kernelpagesize_kB=4
55c947a2c000 default heap anon=33 dirty=33 active=0 N0=20 N1=13 kernelpagesize_kB=4
7f1c00000000 interleave:0-1 anon=1024 dirty=1024 N0=512 N1=512 kernelpagesize_kB=4
7f1d00000000 prefer (many):0-1 anon=3 dirty=3 N1=3 kernelpagesize_kB=4
7f2000000000 default file=/dev/hugepages/buf huge dirty=3 N0=2 N1=1 kernelpagesize_kB=2048
7f2100000000 default file=/anon_hugepage\\040(deleted) huge anon=1 dirty=1 N1=1 kernelpagesize_kB=2048
7f2200000000 default
7ffd1c9e9000 default stack anon=3 dirty=3 N0=3 kernelpagesize_kB=4
";

    #[test]
    fn numa_maps_classes_nodes_and_page_sizes() {
        let m = parse_numa_maps(NUMA_MAPS).unwrap();
        assert_eq!(m.len(), 8, "the line without pages is left out");
        assert_eq!(m[0].class, MappingClass::File);
        assert_eq!(m[0].address, 0x55c946388000);
        assert_eq!(m[0].bytes_on(0), 2 * 4 * KIB);
        assert_eq!(m[2].class, MappingClass::Heap);
        assert_eq!(
            (m[2].bytes_on(0), m[2].bytes_on(1)),
            (20 * 4 * KIB, 13 * 4 * KIB)
        );
        assert_eq!(m[3].class, MappingClass::Anon);
        assert_eq!(m[3].bytes_on(1), 2 * MIB, "512 pages of 4 KiB");
        assert_eq!(m[4].pages_per_node, vec![(1, 3)], "a policy with a space");
        assert_eq!(m[5].class, MappingClass::File);
        assert_eq!(m[5].page_bytes, 2 * MIB);
        assert_eq!((m[5].bytes_on(0), m[5].bytes_on(1)), (4 * MIB, 2 * MIB));
        assert_eq!(m[6].class, MappingClass::Anon, "anonymous hugetlb");
        assert_eq!(m[6].bytes_on(1), 2 * MIB);
        assert_eq!(m[7].class, MappingClass::Stack);
        assert_eq!(m[7].bytes_on(0), 12 * KIB);
    }

    #[test]
    fn numa_maps_errors_name_the_line() {
        let e = parse_numa_maps("55c9 default N0=2 kernelpagesize_kB=4\nzz default\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = parse_numa_maps("55c9 default anon=2 N0=2\n").unwrap_err();
        assert!(e.message.contains("kernelpagesize_kB"), "{e}");
        let e = parse_numa_maps("55c9 default N0=x kernelpagesize_kB=4\n").unwrap_err();
        assert!(e.message.contains("N0"), "{e}");
    }

    const SMAPS: &str = "\
55c946388000-55c94638a000 r--p 00000000 08:01 1234                       /usr/bin/my prog
Size:                  8 kB
Rss:                   8 kB
Pss:                   8 kB
VmFlags: rd mr mw me dw sd
55c947a2c000-55c947a4d000 rw-p 00000000 00:00 0                          [heap]
Size:                132 kB
Rss:                 100 kB
7f1c00000000-7f1c04000000 rw-p 00000000 00:00 0 
Size:              65536 kB
Rss:               65536 kB
7f1d00000000-7f1d00001000 r-xp 00000000 00:00 0                          [vdso]
Rss:                   4 kB
7ffd1c9e9000-7ffd1ca0a000 rw-p 00000000 00:00 0                          [stack]
Rss:                  16 kB
";

    #[test]
    fn smaps_rss_and_classes() {
        let m = parse_smaps(SMAPS).unwrap();
        let got: Vec<(MappingClass, u64)> = m.iter().map(|m| (m.class, m.rss_bytes)).collect();
        assert_eq!(
            got,
            vec![
                (MappingClass::File, 8 * KIB),
                (MappingClass::Heap, 100 * KIB),
                (MappingClass::Anon, 64 * MIB),
                (MappingClass::Anon, 4 * KIB),
                (MappingClass::Stack, 16 * KIB),
            ]
        );
        assert!(parse_smaps("55c9-55ca r--p 0 0:0 0\nSize: 4 kB\n").is_err());
        assert!(parse_smaps("55c9-55ca r--p 0 0:0 0\nRss: 4 MB\n").is_err());
    }

    #[test]
    fn stat_fields_after_a_hostile_command_name() {
        let s = "4242 (a) b (c)) S 4200 4242 4200 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 \
                 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(
            parse_stat(s),
            Some(ProcStat {
                state: 'S',
                ppid: 4200,
                start_ticks: 987654
            })
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    /// A fake /proc: `(pid, ppid, start, numa_maps or None for no file)`.
    fn fake_proc(name: &str, procs: &[(i32, i32, u64, Option<&str>)]) -> PathBuf {
        let root =
            std::env::temp_dir().join(format!("spelunk-fake-proc-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(root.join("self")).unwrap();
        for &(pid, ppid, start, maps) in procs {
            let d = root.join(pid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join("stat"),
                format!("{pid} (p {pid}) S {ppid} 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {start} 0 0"),
            )
            .unwrap();
            if let Some(m) = maps {
                std::fs::write(d.join("numa_maps"), m).unwrap();
            }
        }
        root
    }

    #[test]
    fn sampler_sums_the_tree_per_node_and_class() {
        // 100 -> 101 -> 102 is the tree; 200 is not in it; 103 (child of 101) exits later.
        let root = fake_proc(
            "tree",
            &[
                (100, 1, 10, Some("1000 default heap anon=10 N0=10 kernelpagesize_kB=4\n")),
                (
                    101,
                    100,
                    11,
                    Some("2000 default anon=512 N1=512 kernelpagesize_kB=4\n3000 default stack anon=2 N0=2 kernelpagesize_kB=4\n"),
                ),
                (102, 101, 12, Some("4000 default file=/lib/x.so N0=1 N1=3 kernelpagesize_kB=4\n")),
                (200, 1, 13, Some("5000 default anon=999 N0=999 kernelpagesize_kB=4\n")),
            ],
        );
        let mut s = CapacitySampler::new(&root, 100, 100_000_000);
        s.sample(1_000);
        // 100 exits; 101 is reparented to init but stays in the tree (same start time);
        // a new process reusing pid 100 with another start time is not in it.
        std::fs::write(
            root.join("100/stat"),
            "100 (other) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0",
        )
        .unwrap();
        std::fs::write(
            root.join("101/stat"),
            "101 (p) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 11 0 0",
        )
        .unwrap();
        s.sample(2_000);
        let t = s.finish();
        assert_eq!(t.source, "numa_maps");
        assert!(t.notes.is_empty(), "{:?}", t.notes);
        let first = &t.samples[0];
        assert_eq!((first.time_ns, first.processes), (1_000, 3));
        assert_eq!(
            first.nodes,
            vec![
                NodeResident {
                    node: Some(0),
                    heap_bytes: 10 * 4 * KIB,
                    anon_bytes: 0,
                    file_bytes: 4 * KIB,
                    stack_bytes: 2 * 4 * KIB,
                },
                NodeResident {
                    node: Some(1),
                    heap_bytes: 0,
                    anon_bytes: 2 * MIB,
                    file_bytes: 3 * 4 * KIB,
                    stack_bytes: 0,
                },
            ]
        );
        let second = &t.samples[1];
        assert_eq!(second.processes, 2, "101 and 102, not the new pid 100");
        assert_eq!(second.nodes[0].heap_bytes, 0);
        assert_eq!(second.nodes[1].anon_bytes, 2 * MIB);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn sampler_falls_back_to_smaps_and_says_so_once() {
        let root = fake_proc("smaps", &[(300, 1, 5, None)]);
        std::fs::write(root.join("300/smaps"), SMAPS).unwrap();
        let mut s = CapacitySampler::new(&root, 300, 1);
        s.sample(1);
        s.sample(2);
        let t = s.finish();
        assert_eq!(t.source, "smaps");
        assert_eq!(t.notes.len(), 1, "{:?}", t.notes);
        assert!(t.notes[0].contains("numa_maps"), "{:?}", t.notes);
        let n = &t.samples[1].nodes;
        assert_eq!(n.len(), 1);
        assert_eq!(n[0].node, None);
        assert_eq!(n[0].anon_bytes, 64 * MIB + 4 * KIB);
        assert_eq!(n[0].heap_bytes, 100 * KIB);
        assert_eq!(n[0].stack_bytes, 16 * KIB);
        assert_eq!(n[0].file_bytes, 8 * KIB);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_vanished_process_is_skipped_silently() {
        let root = fake_proc(
            "gone",
            &[(
                400,
                1,
                5,
                Some("1000 default anon=1 N0=1 kernelpagesize_kB=4\n"),
            )],
        );
        let mut s = CapacitySampler::new(&root, 400, 1);
        assert!(s.sample(1));
        // Ended: a zombie first (no memory, not read), then gone.
        std::fs::write(
            root.join("400/stat"),
            "400 (p) Z 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0",
        )
        .unwrap();
        std::fs::write(root.join("400/numa_maps"), "").unwrap();
        assert!(!s.sample(2));
        std::fs::remove_dir_all(root.join("400")).unwrap();
        assert!(!s.sample(3));
        let t = s.finish();
        assert!(t.notes.is_empty(), "{:?}", t.notes);
        assert_eq!(
            t.samples.len(),
            1,
            "nothing recorded once the tree has ended"
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    fn pmu(listed: &[u16]) -> CounterPmu {
        CounterPmu::Found(CorePmuEvents {
            name: "armv8_pmuv3_0".into(),
            midr: None,
            perf_type: 8,
            listed: listed.iter().copied().collect(),
        })
    }

    #[test]
    fn plan_lists_absent_events_as_not_counted() {
        let p = CounterPlan::new(&pmu(&[0x11, 0x08, 0x13, 0x03, 0x17]));
        assert_eq!(p.events.len(), 5);
        let names: Vec<&str> = p.not_counted.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["LL_CACHE_MISS_RD", "BUS_ACCESS"]);
        assert!(p.not_counted[0].reason.contains("events/"));
        let none = CounterPlan::new(&CounterPmu::Missing("no Arm core PMU".into()));
        assert!(none.events.is_empty());
        assert_eq!(none.not_counted.len(), 7);
        assert_eq!(none.not_counted[0].reason, "no Arm core PMU");
    }

    #[test]
    fn plan_adds_the_fp_events_the_core_has() {
        let names = |listed: &[u16]| -> Vec<String> {
            CounterPlan::new(&pmu(listed))
                .events
                .into_iter()
                .map(|(_, n)| n)
                .collect()
        };
        // Operations preferred over instructions; nothing added, and nothing "not counted",
        // without either pair.
        assert_eq!(
            names(&[0x11, 0x74, 0x75, 0x80c0, 0x80c1]),
            ["CPU_CYCLES", "FP_FIXED_OPS_SPEC", "FP_SCALE_OPS_SPEC"]
        );
        assert_eq!(
            names(&[0x11, 0x74, 0x75]),
            ["CPU_CYCLES", "VFP_SPEC", "ASE_SPEC"]
        );
        assert_eq!(names(&[0x11, 0x75, 0x80c1]), ["CPU_CYCLES"]);
        assert_eq!(CounterPlan::new(&pmu(&[0x11, 0x75])).not_counted.len(), 6);
    }

    #[test]
    fn recorder_snapshots_with_multiplexing_and_refused_events() {
        // One programmable counter plus a cycle counter: the group does not fit, so every event
        // gets its own group and the three that open run a third of the time each; the kernel
        // refuses MEM_ACCESS at open (EOPNOTSUPP), so it is not counted.
        let mut sim = SimPmu::new(1, true);
        sim.unsupported = vec![0x13];
        sim.rates.insert(0x11, 4.0);
        sim.rates.insert(0x08, 2.0);
        sim.rates.insert(0x03, 0.5);
        let plan = CounterPlan::new(&pmu(&[0x11, 0x08, 0x13, 0x03]));
        let mut r = CounterRecorder::open(&sim, &plan, 1234);
        assert!(r.counting());
        assert_eq!(
            r.setup().grouping,
            "one group per event (the kernel multiplexes them)"
        );
        assert_eq!(r.setup().scope, "user+kernel");
        r.snapshot(5, "periodic");
        r.snapshot(9, "final");
        let (c, _, failed) = r.finish();
        assert!(failed.is_none());
        let names: Vec<&str> = c.events.iter().map(|(_, n)| n.as_str()).collect();
        assert_eq!(names, ["CPU_CYCLES", "INST_RETIRED", "L1D_CACHE_REFILL"]);
        let nc: Vec<&str> = c.not_counted.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(
            nc,
            [
                "MEM_ACCESS",
                "L2D_CACHE_REFILL",
                "LL_CACHE_MISS_RD",
                "BUS_ACCESS"
            ]
        );
        assert!(c.not_counted[0].reason.contains("refused"));
        // The simulation: 1 s enabled, three groups on one "CPU" -> each running 1/3 s.
        let fin = &c.timeline[1];
        assert_eq!(fin.reason, "final");
        assert_eq!(fin.time_enabled_ns, vec![1_000_000_000; 3]);
        assert_eq!(fin.time_running_ns, vec![333_333_333; 3]);
        assert_eq!(fin.values, vec![1_333_333_332, 666_666_666, 166_666_666]);
        assert_eq!(c.totals["INST_RETIRED"], 666_666_666);
        assert_eq!(sim.open_fds(), 0, "finish closes the counters");
    }

    #[test]
    fn record_timelines_writes_both_timelines_with_a_simulated_pmu() {
        let mut sim = SimPmu::new(6, true);
        sim.rates.insert(0x11, 2.0);
        sim.rates.insert(0x37, 0.25);
        let dir = std::env::temp_dir().join(format!("spelunk-tl-rec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("run.data.spelunk.json");
        let o = TimelineOptions {
            interval_ns: 10_000_000,
            proc_root: PathBuf::from("/proc"),
            pmu: CounterPmu::Found(CorePmuEvents {
                name: "armv8_pmuv3_0".into(),
                midr: Some(spelunk_spe::Midr(0x413fd0c1)),
                perf_type: 8,
                listed: DEFAULT_EVENTS.iter().map(|(c, _)| *c).collect(),
            }),
            line_bytes: Some(64),
            runtime: None,
        };
        let cmd: Vec<String> = ["sh", "-c", "sleep 0.1; exit 7"].map(String::from).to_vec();
        let rec = record_timelines(&sim, &o, &cmd, &path).unwrap();
        assert_eq!(rec.exit_status.code(), Some(7));
        let sc = Sidecar::read(&path).unwrap();
        assert_eq!(sc, rec.sidecar);
        assert_eq!(sc.exit_status, Some(7));
        assert_eq!(sc.config["midr"], "0x413fd0c1");
        assert_eq!(sc.config["counters_grouping"], "one group");
        assert_eq!(sc.config["counters_scope"], "user+kernel");
        assert_eq!(sc.config["cache_line_bytes"], 64);
        let c = &sc.counters;
        assert_eq!(c.events.len(), 7);
        assert!(c.not_counted.is_empty());
        let fin = c.timeline.last().unwrap();
        assert_eq!(fin.reason, "final");
        // The simulation: 1 s enabled and running (one group fits) at 2 and 0.25 per ns.
        assert_eq!(c.totals["CPU_CYCLES"], 2_000_000_000);
        assert_eq!(c.totals["LL_CACHE_MISS_RD"], 250_000_000);
        assert_eq!(c.totals["INST_RETIRED"], 0);
        assert_eq!(fin.time_enabled_ns, fin.time_running_ns);
        // 100 ms at 10 ms: periodic snapshots and capacity samples on the same ticks.
        let cap = sc.capacity.as_ref().unwrap();
        assert!(!cap.samples.is_empty());
        let periodic: Vec<u64> = c
            .timeline
            .iter()
            .filter(|s| s.reason == "periodic")
            .map(|s| s.time_ns)
            .collect();
        let ticks: Vec<u64> = cap.samples.iter().map(|s| s.time_ns).collect();
        assert!(
            ticks.iter().all(|t| periodic.contains(t)),
            "{ticks:?} {periodic:?}"
        );
        assert!(ticks.iter().all(|t| *t > rec.start_ns));
        assert_eq!(sim.open_fds(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn no_pmu_means_nothing_counted_and_nothing_opened() {
        let sim = SimPmu::new(6, true);
        let plan = CounterPlan::new(&CounterPmu::Missing("no Arm core PMU here".into()));
        let mut r = CounterRecorder::open(&sim, &plan, 1);
        assert!(!r.counting());
        r.snapshot(1, "final");
        let (c, _, _) = r.finish();
        assert!(c.events.is_empty() && c.timeline.is_empty() && c.totals.is_empty());
        assert_eq!(c.not_counted.len(), 7);
        assert!(sim.opened.borrow().is_empty());
    }

    #[test]
    fn a_pmu_that_refuses_everything_is_not_counted_with_the_kernel_answer() {
        let mut sim = SimPmu::new(6, true);
        sim.fail_all = Some(libc::ENODEV);
        let plan = CounterPlan::new(&pmu(&[0x11, 0x08]));
        let r = CounterRecorder::open(&sim, &plan, 1);
        assert!(!r.counting());
        let (c, _, _) = r.finish();
        assert_eq!(c.not_counted.len(), 7);
        let refused = c
            .not_counted
            .iter()
            .find(|n| n.name == "CPU_CYCLES")
            .unwrap();
        assert!(
            refused.reason.contains("perf_event_open failed"),
            "{}",
            refused.reason
        );
    }
}
