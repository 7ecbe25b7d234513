//! Reading the logs of spelunk's LD_PRELOAD runtime (`runtime/`, `libspelunk.so`) into the
//! sidecar's phases, objects and heap allocations.
//!
//! The runtime writes one log per process image, `BASE.rt.PID.N` (hex pid; N counts exec'd
//! images of one pid), as text lines into a shared file mapping (docs/runtime.md, "Log
//! format"). A process that ended with `_exit`, a fatal signal or SIGKILL leaves a log without
//! its trailer and with zero bytes after the last line; a line cut by such an end, or damaged,
//! is counted in [`RuntimeLog::damaged_lines`], never fatal. Times are CLOCK_MONOTONIC ns (in
//! a `spelunk-rt/2` log the lines carry them relative to the header's, added back here).
//!
//! With `SPELUNK_TRACK_RSS` (or NMO's `NMO_TRACK_RSS`) every process's log also holds its
//! resident memory per NUMA node and mapping class over time (`R` lines); [`merge_logs`] sums
//! the processes' series into the sidecar's capacity timeline ([`combine_capacity`]) when the
//! recorder did not sample capacity itself.

use spelunk_perf::sidecar::{
    Allocation, CapacitySample, CapacityTimeline, NamedObject, NodeResident, Phase,
};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// The first line's tag of the logs the runtime writes now.
pub const RUNTIME_LOG_SCHEMA: &str = "spelunk-rt/2";

/// The clock of the logs' times, as a sidecar names it (`config.timeline_clock`).
pub const LOG_CLOCK: &str = "CLOCK_MONOTONIC";
/// Every first-line tag read: `/1` (no header settings, no `R`/`N` lines) and `/2`.
pub const RUNTIME_LOG_SCHEMAS: [&str; 2] = ["spelunk-rt/1", "spelunk-rt/2"];

/// Largest log read (the runtime reserves 1 GiB of address space for one by default).
const MAX_LOG_BYTES: u64 = 4 << 30;

/// One event of a log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuntimeEvent {
    PhaseBegin {
        tid: u32,
        time_ns: u64,
        name: String,
    },
    PhaseEnd {
        tid: u32,
        time_ns: u64,
        name: String,
    },
    Object {
        tid: u32,
        time_ns: u64,
        address: u64,
        size: u64,
        name: String,
    },
    ObjectFree {
        tid: u32,
        time_ns: u64,
        address: u64,
    },
    /// A tagged address range (spelunk_tag_mapping, nmo_tag_addr, nmo_tag_from_maps).
    Range {
        tid: u32,
        time_ns: u64,
        start: u64,
        end: u64,
        name: String,
    },
    Alloc {
        tid: u32,
        time_ns: u64,
        address: u64,
        size: u64,
        kind: AllocKind,
        stack: Vec<u64>,
    },
    /// free() of a block (size 0) or munmap() of a range.
    Release {
        tid: u32,
        time_ns: u64,
        address: u64,
        size: u64,
        unmap: bool,
    },
}

impl RuntimeEvent {
    /// When it happened (the log's clock).
    pub fn time_ns(&self) -> u64 {
        match self {
            RuntimeEvent::PhaseBegin { time_ns, .. }
            | RuntimeEvent::PhaseEnd { time_ns, .. }
            | RuntimeEvent::Object { time_ns, .. }
            | RuntimeEvent::ObjectFree { time_ns, .. }
            | RuntimeEvent::Range { time_ns, .. }
            | RuntimeEvent::Alloc { time_ns, .. }
            | RuntimeEvent::Release { time_ns, .. } => *time_ns,
        }
    }
}

/// Which call allocated a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AllocKind {
    Malloc,
    Calloc,
    Realloc,
    Aligned,
    Mmap,
}

impl AllocKind {
    pub fn name(self) -> &'static str {
        match self {
            AllocKind::Malloc => "malloc",
            AllocKind::Calloc => "calloc",
            AllocKind::Realloc => "realloc",
            AllocKind::Aligned => "aligned",
            AllocKind::Mmap => "mmap",
        }
    }
    fn from_code(c: &str) -> Option<AllocKind> {
        Some(match c {
            "m" => AllocKind::Malloc,
            "c" => AllocKind::Calloc,
            "r" => AllocKind::Realloc,
            "a" => AllocKind::Aligned,
            "p" => AllocKind::Mmap,
            _ => return None,
        })
    }
}

/// One line of the process's `/proc/self/maps`, as the runtime copied it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapLine {
    pub start: u64,
    pub end: u64,
    pub file_offset: u64,
    pub executable: bool,
    pub path: String,
}

/// One process image's log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeLog {
    pub path: PathBuf,
    pub pid: u32,
    pub ppid: u32,
    pub start_ns: u64,
    /// Blocks smaller than this were not logged.
    pub alloc_min_bytes: u64,
    pub events: Vec<RuntimeEvent>,
    /// Every distinct mapping the log's map copies list (start, at the end when it ended cleanly).
    pub maps: Vec<MapLine>,
    /// The trailer was written: the process ended through exit() or returned from main.
    pub ended_cleanly: bool,
    /// Events the runtime could not log (log full or disk full), from the trailer.
    pub dropped_events: u64,
    /// Lines that did not parse (cut by a sudden end, or damaged), with the first one's offset.
    pub damaged_lines: u64,
    pub first_damage_offset: Option<u64>,
    /// The header's `key=value` settings (`spelunk-rt/2`): `clock`, `rss_interval_ns`, and
    /// NMO's SPE settings `spe_period`, `spe_mode`, `spe_ring_mib`, `spe_aux_mib` when given
    /// (docs/runtime.md, "NMO's variables"). Numbers are hex, as everywhere in the log.
    pub settings: BTreeMap<String, String>,
    /// What the runtime noted about its configuration (`N` lines: an invalid value, a sampler
    /// that could not start), `VARIABLE text`.
    pub notes: Vec<String>,
    /// Resident memory samples of this process (`R` lines), `processes` 1, in log order.
    pub capacity: Vec<CapacitySample>,
    /// Where the samples came from: `numa_maps` or `smaps` (no NUMA support: node unknown).
    pub capacity_source: Option<String>,
}

/// Why a log could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeLogError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a spelunk runtime log (it does not start with '{RUNTIME_LOG_SCHEMA}')")]
    NotALog { path: PathBuf },
    #[error("{path}: {size} bytes is more than a runtime log can hold ({MAX_LOG_BYTES})")]
    TooLarge { path: PathBuf, size: u64 },
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s, 16).ok()
}

fn hex32(s: &str) -> Option<u32> {
    u32::from_str_radix(s, 16).ok()
}

/// The rest of `line` after `n` space-separated fields (a name may contain spaces).
fn rest_after(line: &str, n: usize) -> &str {
    let mut s = line;
    for _ in 0..n {
        match s.find(' ') {
            Some(i) => s = &s[i + 1..],
            None => return "",
        }
    }
    s
}

fn parse_map(text: &str) -> Option<MapLine> {
    let mut f = text.split_ascii_whitespace();
    let range = f.next()?;
    let perms = f.next()?;
    let off = f.next()?;
    let _dev = f.next()?;
    let _inode = f.next()?;
    let (a, b) = range.split_once('-')?;
    let path = rest_after(text.trim_start(), 5).trim_start().to_string();
    Some(MapLine {
        start: hex(a)?,
        end: hex(b)?,
        file_offset: hex(off)?,
        executable: perms.as_bytes().get(2) == Some(&b'x'),
        path,
    })
}

impl RuntimeLog {
    /// Reads one log file.
    pub fn read(path: &Path) -> Result<RuntimeLog, RuntimeLogError> {
        let io = |source| RuntimeLogError::Io {
            path: path.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(io)?;
        if !meta.is_file() {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a regular file",
            )));
        }
        if meta.len() > MAX_LOG_BYTES {
            return Err(RuntimeLogError::TooLarge {
                path: path.to_path_buf(),
                size: meta.len(),
            });
        }
        let bytes = std::fs::read(path).map_err(io)?;
        Self::parse(path, &bytes)
    }

    /// Parses a log's bytes (`path` names it in errors).
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<RuntimeLog, RuntimeLogError> {
        let mut log = RuntimeLog {
            path: path.to_path_buf(),
            ..Default::default()
        };
        let mut maps: BTreeMap<(u64, u64, u64), MapLine> = BTreeMap::new();
        let mut offset = 0u64;
        let mut first = true;
        let mut base_ns = 0u64;
        for raw in bytes.split(|&b| b == b'\n') {
            let here = offset;
            offset += raw.len() as u64 + 1;
            // Bytes a writer reserved but never filled (a sudden end) are zero.
            let raw = trim_zeros(raw);
            if raw.is_empty() {
                continue;
            }
            let Ok(line) = std::str::from_utf8(raw) else {
                log.damage(here);
                continue;
            };
            if first {
                first = false;
                let mut f = line.split(' ');
                if !f.next().is_some_and(|t| RUNTIME_LOG_SCHEMAS.contains(&t)) {
                    return Err(RuntimeLogError::NotALog {
                        path: path.to_path_buf(),
                    });
                }
                let (settings, numbers): (Vec<&str>, Vec<&str>) =
                    f.partition(|field| field.contains('='));
                log.settings = settings
                    .iter()
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                let v: Vec<u64> = numbers.into_iter().filter_map(hex).collect();
                if v.len() < 4 {
                    return Err(RuntimeLogError::NotALog {
                        path: path.to_path_buf(),
                    });
                }
                log.pid = v[0] as u32;
                log.ppid = v[1] as u32;
                log.start_ns = v[2];
                log.alloc_min_bytes = v[3];
                // From /2 on, lines carry times relative to the header's.
                if line.starts_with(RUNTIME_LOG_SCHEMA) {
                    base_ns = log.start_ns;
                }
                continue;
            }
            if let Some(m) = line.strip_prefix("m ") {
                match parse_map(m) {
                    Some(m) => {
                        maps.insert((m.start, m.end, m.file_offset), m);
                    }
                    None if m.is_empty() => {}
                    None => log.damage(here),
                }
                continue;
            }
            if let Some(note) = line.strip_prefix("N ") {
                // `N TID T VARIABLE TEXT`
                log.notes.push(rest_after(note, 2).to_string());
                continue;
            }
            if line.starts_with("R ") {
                match parse_resident(line, base_ns) {
                    Some((source, sample)) => {
                        log.capacity_source.get_or_insert_with(|| source.into());
                        log.capacity.push(sample);
                    }
                    None => log.damage(here),
                }
                continue;
            }
            match parse_event(line, base_ns) {
                Some(Parsed::Event(e)) => log.events.push(e),
                Some(Parsed::Trailer { dropped }) => {
                    log.ended_cleanly = true;
                    log.dropped_events = dropped;
                }
                None => log.damage(here),
            }
        }
        if first {
            return Err(RuntimeLogError::NotALog {
                path: path.to_path_buf(),
            });
        }
        log.maps = maps.into_values().collect();
        Ok(log)
    }

    fn damage(&mut self, offset: u64) {
        self.damaged_lines += 1;
        self.first_damage_offset.get_or_insert(offset);
    }

    /// The logs of one recording: every `BASE.rt.*` file next to `base`, in name order.
    pub fn find(base: &Path) -> std::io::Result<Vec<PathBuf>> {
        let dir = match base.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let Some(stem) = base.file_name().map(|n| n.to_string_lossy().into_owned()) else {
            return Ok(Vec::new());
        };
        let prefix = format!("{stem}.rt.");
        let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path())
            .collect();
        out.sort();
        Ok(out)
    }

    /// The sidecar's view of this log: phases (nesting per thread; a phase still open at the
    /// end ends at `end_ns`), named objects and tagged ranges, and heap allocations with their
    /// lifetimes (a block never freed lives until `u64::MAX`).
    pub fn to_sidecar(&self, end_ns: u64) -> RuntimeParts {
        let pid = Some(self.pid);
        let mut parts = RuntimeParts {
            capacity: self.capacity.clone(),
            ..Default::default()
        };
        let mut open_phases: HashMap<u32, Vec<(String, u64)>> = HashMap::new();
        let mut open_objects: HashMap<u64, usize> = HashMap::new();
        let mut live: HashMap<u64, usize> = HashMap::new();
        for e in &self.events {
            match e {
                RuntimeEvent::PhaseBegin { tid, time_ns, name } => {
                    open_phases
                        .entry(*tid)
                        .or_default()
                        .push((name.clone(), *time_ns));
                }
                RuntimeEvent::PhaseEnd { tid, time_ns, .. } => {
                    let stack = open_phases.entry(*tid).or_default();
                    let depth = stack.len();
                    if let Some((name, start_ns)) = stack.pop() {
                        parts.phases.push(Phase {
                            name,
                            pid,
                            tid: *tid,
                            depth: depth.min(u16::MAX as usize) as u16,
                            start_ns,
                            end_ns: *time_ns,
                        });
                    } else {
                        parts.unmatched_phase_ends += 1;
                    }
                }
                RuntimeEvent::Object {
                    time_ns,
                    address,
                    size,
                    name,
                    ..
                } => {
                    open_objects.insert(*address, parts.objects.len());
                    parts.objects.push(NamedObject {
                        name: name.clone(),
                        pid,
                        address: *address,
                        size: *size,
                        from_ns: *time_ns,
                        until_ns: u64::MAX,
                        kind: "object".into(),
                    });
                }
                RuntimeEvent::ObjectFree {
                    time_ns, address, ..
                } => {
                    if let Some(i) = open_objects.remove(address) {
                        parts.objects[i].until_ns = *time_ns;
                    }
                }
                RuntimeEvent::Range {
                    time_ns,
                    start,
                    end,
                    name,
                    ..
                } => {
                    parts.objects.push(NamedObject {
                        name: name.clone(),
                        pid,
                        address: *start,
                        size: end.saturating_sub(*start),
                        from_ns: *time_ns,
                        until_ns: u64::MAX,
                        kind: "mapping".into(),
                    });
                }
                RuntimeEvent::Alloc {
                    tid,
                    time_ns,
                    address,
                    size,
                    kind,
                    stack,
                } => {
                    // An address handed out again while still open here was freed by a path
                    // the runtime did not see (below the threshold test): close it now.
                    if let Some(i) = live.insert(*address, parts.allocations.len()) {
                        parts.allocations[i].until_ns = *time_ns;
                    }
                    parts.allocations.push(Allocation {
                        pid: self.pid,
                        tid: *tid,
                        address: *address,
                        size: *size,
                        from_ns: *time_ns,
                        until_ns: u64::MAX,
                        kind: kind.name().into(),
                        stack: stack.clone(),
                    });
                }
                RuntimeEvent::Release {
                    time_ns,
                    address,
                    size,
                    unmap,
                    ..
                } => {
                    if *unmap {
                        // munmap may release part of a mapping, or several: close every live
                        // mmap'd block starting inside the range.
                        let end = address.saturating_add(*size);
                        let hit: Vec<u64> = live
                            .iter()
                            .filter(|(a, &i)| {
                                **a >= *address && **a < end && parts.allocations[i].kind == "mmap"
                            })
                            .map(|(a, _)| *a)
                            .collect();
                        for a in hit {
                            if let Some(i) = live.remove(&a) {
                                parts.allocations[i].until_ns = *time_ns;
                            }
                        }
                    } else if let Some(i) = live.remove(address) {
                        parts.allocations[i].until_ns = *time_ns;
                    }
                }
            }
        }
        for (tid, stack) in open_phases {
            let n = stack.len();
            for (i, (name, start_ns)) in stack.into_iter().enumerate() {
                parts.phases.push(Phase {
                    name,
                    pid,
                    tid,
                    depth: (i + 1).min(n).min(u16::MAX as usize) as u16,
                    start_ns,
                    end_ns: end_ns.max(start_ns),
                });
            }
        }
        parts.phases.sort_by_key(|p| (p.start_ns, p.tid, p.depth));
        parts
    }
}

fn trim_zeros(raw: &[u8]) -> &[u8] {
    let start = raw.iter().position(|&b| b != 0).unwrap_or(raw.len());
    let end = raw.iter().rposition(|&b| b != 0).map_or(start, |i| i + 1);
    &raw[start..end]
}

/// `R TID T n NODE HEAP ANON FILE STACK...` (per node, numa_maps) or `R TID T s - HEAP ANON
/// FILE STACK` (smaps, node unknown): one resident-memory sample, in bytes.
fn parse_resident(line: &str, base_ns: u64) -> Option<(&'static str, CapacitySample)> {
    let mut f = line.split(' ').skip(2);
    let time_ns = base_ns.checked_add(hex(f.next()?)?)?;
    let source = match f.next()? {
        "n" => "numa_maps",
        "s" => "smaps",
        _ => return None,
    };
    let fields: Vec<&str> = f.collect();
    if fields.len() % 5 != 0 {
        return None;
    }
    let mut nodes = Vec::with_capacity(fields.len() / 5);
    for g in fields.chunks(5) {
        let node = match g[0] {
            "-" => None,
            n => Some(hex32(n)?),
        };
        nodes.push(NodeResident {
            node,
            heap_bytes: hex(g[1])?,
            anon_bytes: hex(g[2])?,
            file_bytes: hex(g[3])?,
            stack_bytes: hex(g[4])?,
        });
    }
    Some((
        source,
        CapacitySample {
            time_ns,
            processes: 1,
            nodes,
        },
    ))
}

enum Parsed {
    Event(RuntimeEvent),
    Trailer { dropped: u64 },
}

/// One event line; `base_ns` is added to its time (the header's time from `spelunk-rt/2` on).
fn parse_event(line: &str, base_ns: u64) -> Option<Parsed> {
    let mut f = line.split(' ');
    let kind = f.next()?;
    let tid = hex32(f.next()?)?;
    let time_ns = base_ns.checked_add(hex(f.next()?)?)?;
    let ev = match kind {
        "B" | "E" => {
            let name = rest_after(line, 3).to_string();
            if kind == "B" {
                RuntimeEvent::PhaseBegin { tid, time_ns, name }
            } else {
                RuntimeEvent::PhaseEnd { tid, time_ns, name }
            }
        }
        "O" => RuntimeEvent::Object {
            tid,
            time_ns,
            address: hex(f.next()?)?,
            size: hex(f.next()?)?,
            name: rest_after(line, 5).to_string(),
        },
        "F" => RuntimeEvent::ObjectFree {
            tid,
            time_ns,
            address: hex(f.next()?)?,
        },
        "G" => RuntimeEvent::Range {
            tid,
            time_ns,
            start: hex(f.next()?)?,
            end: hex(f.next()?)?,
            name: rest_after(line, 5).to_string(),
        },
        "A" => {
            let address = hex(f.next()?)?;
            let size = hex(f.next()?)?;
            let kind = AllocKind::from_code(f.next()?)?;
            let stack = f.map(hex).collect::<Option<Vec<u64>>>()?;
            RuntimeEvent::Alloc {
                tid,
                time_ns,
                address,
                size,
                kind,
                stack,
            }
        }
        "X" | "U" => RuntimeEvent::Release {
            tid,
            time_ns,
            address: hex(f.next()?)?,
            size: hex(f.next()?)?,
            unmap: kind == "U",
        },
        "Z" => {
            return Some(Parsed::Trailer {
                dropped: hex(f.next()?)?,
            })
        }
        _ => return None,
    };
    Some(Parsed::Event(ev))
}

/// What a runtime log adds to a sidecar.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RuntimeParts {
    pub phases: Vec<Phase>,
    pub objects: Vec<NamedObject>,
    pub allocations: Vec<Allocation>,
    /// This process's resident memory samples (see [`combine_capacity`] for several).
    pub capacity: Vec<CapacitySample>,
    /// Phase ends with no open phase on their thread.
    pub unmatched_phase_ends: u64,
}

impl RuntimeParts {
    /// Moves every time by `offset_ns` (the log's CLOCK_MONOTONIC to the recording's clock);
    /// "never" (`u64::MAX`) stays never.
    pub fn shift_time(&mut self, offset_ns: i64) {
        let shift = |t: &mut u64| {
            if *t != u64::MAX {
                *t = t.saturating_add_signed(offset_ns);
            }
        };
        for p in &mut self.phases {
            shift(&mut p.start_ns);
            shift(&mut p.end_ns);
        }
        for o in &mut self.objects {
            shift(&mut o.from_ns);
            shift(&mut o.until_ns);
        }
        for a in &mut self.allocations {
            shift(&mut a.from_ns);
            shift(&mut a.until_ns);
        }
        for c in &mut self.capacity {
            shift(&mut c.time_ns);
        }
    }
}

/// The resident memory of several processes over time, from each one's own samples: at every
/// time any process sampled, the sum per node and class over the processes alive then, each
/// counted with its latest sample. A process counts from its first sample to its last (the
/// runtime samples once more at a clean exit, so the last sample is close to its end; one that
/// ended suddenly counts until its last periodic sample). `processes` says how many were
/// summed. Each series must be in time order; the result is.
pub fn combine_capacity(series: &[Vec<CapacitySample>]) -> Vec<CapacitySample> {
    let mut times: Vec<u64> = series.iter().flatten().map(|s| s.time_ns).collect();
    times.sort_unstable();
    times.dedup();
    let mut at = vec![0usize; series.len()];
    let mut out = Vec::with_capacity(times.len());
    for t in times {
        let mut nodes: BTreeMap<Option<u32>, NodeResident> = BTreeMap::new();
        let mut processes = 0u32;
        for (i, s) in series.iter().enumerate() {
            while at[i] + 1 < s.len() && s[at[i] + 1].time_ns <= t {
                at[i] += 1;
            }
            let (Some(first), Some(last)) = (s.first(), s.last()) else {
                continue;
            };
            if t < first.time_ns || t > last.time_ns {
                continue;
            }
            processes += 1;
            for n in &s[at[i]].nodes {
                let sum = nodes.entry(n.node).or_insert_with(|| NodeResident {
                    node: n.node,
                    ..Default::default()
                });
                for c in spelunk_perf::sidecar::MappingClass::ALL {
                    sum.add(c, n.bytes(c));
                }
            }
        }
        out.push(CapacitySample {
            time_ns: t,
            processes,
            nodes: nodes.into_values().collect(),
        });
    }
    out
}

/// `libspelunk.so`, for `spelunk record` to preload: `SPELUNK_RUNTIME` (the file), else
/// `runtime/build/libspelunk.so` of the source tree the spelunk binary was built in, else
/// `../lib/spelunk/libspelunk.so` next to the binary (an installed layout). The error lists
/// where it looked.
pub fn locate_runtime() -> Result<PathBuf, String> {
    let candidates: Vec<PathBuf> = match std::env::var_os("SPELUNK_RUNTIME") {
        Some(p) => vec![PathBuf::from(p)],
        None => crate::beside_binary("runtime/build/libspelunk.so", "libspelunk.so"),
    };
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| {
            format!(
                "libspelunk.so not found (looked at {}; build it with runtime/build.sh or set \
             SPELUNK_RUNTIME)",
                candidates
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

/// Where the runtime's logs of one recording go (`DIR/log.rt.*`): a fresh private directory in the temporary
/// directory, else next to the output.
pub fn private_log_dir(output: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let next_to_output = match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut last = std::io::Error::other("no free name for the runtime's log directory");
    for base in [std::env::temp_dir(), next_to_output] {
        for n in 0..100u32 {
            let d = base.join(format!(".spelunk-rt-{}-{n}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&d) {
                Ok(()) => return Ok(d),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    last = e;
                    break;
                }
            }
        }
    }
    Err(last)
}

/// The environment that makes a command load the runtime `lib` and log into `dir` (an
/// `LD_PRELOAD` of the caller's own is kept, after ours).
pub fn preload_env(lib: &Path, dir: &Path) -> Vec<(String, String)> {
    let preload = match std::env::var("LD_PRELOAD") {
        Ok(p) if !p.is_empty() => format!("{}:{p}", lib.display()),
        _ => lib.display().to_string(),
    };
    vec![
        ("LD_PRELOAD".to_string(), preload),
        ("SPELUNK_ENABLE".to_string(), "1".to_string()),
        (
            "SPELUNK_OUTPUT".to_string(),
            dir.join("log").display().to_string(),
        ),
    ]
}

/// What [`merge_logs`] took from the runtime's logs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MergeSummary {
    pub logs: usize,
    pub phases: usize,
    pub objects: usize,
    pub allocations: usize,
    /// Resident memory samples put into the sidecar's capacity timeline (0 when the runtime
    /// did not sample, or the recorder's own sampler already gave one).
    pub capacity_samples: usize,
    /// Problems worth a line each (a damaged or unreadable log, dropped events).
    pub problems: Vec<String>,
}

/// Reads every log of `base` (`BASE.rt.*`), moves its times by `offset_ns` onto the
/// recording's clock, adds phases, objects and allocations to `sidecar`, and removes the logs
/// it read. `end_ns` (recording clock) ends what is still open. When the logs hold resident
/// memory samples and the sidecar has no capacity timeline yet (the recorder did not sample
/// one), the processes' series, summed per time ([`combine_capacity`]), become it.
pub fn merge_logs(
    base: &Path,
    offset_ns: i64,
    end_ns: u64,
    sidecar: &mut spelunk_perf::sidecar::Sidecar,
) -> MergeSummary {
    merge(base, offset_ns, end_ns, sidecar, Logs::Remove)
}

/// Whether merging removes the logs it read (the recorder's private ones) or keeps them (the
/// user's, from a run of the runtime alone).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Logs {
    Remove,
    Keep,
}

/// The sidecar of a run of the runtime alone (`LD_PRELOAD=libspelunk.so SPELUNK_ENABLE=1
/// SPELUNK_OUTPUT=BASE`): phases, objects, heap blocks and the capacity timeline of every log
/// of `base`, on the logs' own clock (`CLOCK_MONOTONIC`), with what is still open at the end
/// closed at the last time any log holds. The logs are left as they are. None when `base` has
/// no logs.
pub fn sidecar_from_logs(base: &Path) -> Option<(spelunk_perf::sidecar::Sidecar, MergeSummary)> {
    let paths = RuntimeLog::find(base).ok().filter(|p| !p.is_empty())?;
    // The first process's start is the timelines' origin; the last time of any log (events and
    // resident-memory samples) ends what is still open.
    let (mut start_ns, mut end_ns) = (u64::MAX, 0);
    for log in paths.iter().filter_map(|p| RuntimeLog::read(p).ok()) {
        start_ns = start_ns.min(log.start_ns);
        let events = log.events.iter().map(RuntimeEvent::time_ns).max();
        let capacity = log.capacity.iter().map(|c| c.time_ns).max();
        end_ns = [events, capacity, Some(log.start_ns), Some(end_ns)]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(end_ns);
    }
    let mut sc = spelunk_perf::sidecar::Sidecar::new("runtime");
    let m = merge(base, 0, end_ns, &mut sc, Logs::Keep);
    let clock = LOG_CLOCK;
    sc.config.insert("timeline_clock".into(), clock.into());
    sc.config.insert("phases_clock".into(), clock.into());
    if start_ns != u64::MAX {
        sc.config
            .insert("timeline_start_ns".into(), start_ns.into());
    }
    Some((sc, m))
}

fn merge(
    base: &Path,
    offset_ns: i64,
    end_ns: u64,
    sidecar: &mut spelunk_perf::sidecar::Sidecar,
    logs: Logs,
) -> MergeSummary {
    let mut m = MergeSummary::default();
    let paths = match RuntimeLog::find(base) {
        Ok(p) => p,
        Err(e) => {
            m.problems.push(format!(
                "{}: cannot list the runtime's logs: {e}",
                base.display()
            ));
            return m;
        }
    };
    let end_mono = end_ns.saturating_add_signed(offset_ns.saturating_neg());
    let mut capacity: Vec<Vec<CapacitySample>> = Vec::new();
    let mut sources: Vec<String> = Vec::new();
    let mut interval_ns: Option<u64> = None;
    for path in paths {
        let log = match RuntimeLog::read(&path) {
            Ok(l) => l,
            Err(e) => {
                m.problems.push(e.to_string());
                continue;
            }
        };
        if log.damaged_lines > 0 {
            m.problems.push(format!(
                "{}: {} damaged line(s) skipped (first at byte {})",
                path.display(),
                log.damaged_lines,
                log.first_damage_offset.unwrap_or(0)
            ));
        }
        if log.dropped_events > 0 {
            m.problems.push(format!(
                "{}: the runtime dropped {} event(s) (its log was full)",
                path.display(),
                log.dropped_events
            ));
        }
        for note in &log.notes {
            m.problems
                .push(format!("{}: the runtime noted: {note}", path.display()));
        }
        let mut parts = log.to_sidecar(end_mono);
        parts.shift_time(offset_ns);
        if !parts.capacity.is_empty() {
            if let Some(source) = &log.capacity_source {
                if !sources.contains(source) {
                    sources.push(source.clone());
                }
            }
            let every = log.settings.get("rss_interval_ns").and_then(|v| hex(v));
            interval_ns = interval_ns.or(every);
            capacity.push(std::mem::take(&mut parts.capacity));
        }
        m.logs += 1;
        m.phases += parts.phases.len();
        m.objects += parts.objects.len();
        m.allocations += parts.allocations.len();
        sidecar.phases.extend(parts.phases);
        sidecar.objects.extend(parts.objects);
        sidecar.allocations.extend(parts.allocations);
        if logs == Logs::Remove {
            let _ = std::fs::remove_file(&path);
        }
    }
    if !capacity.is_empty() && sidecar.capacity.is_none() {
        let samples = combine_capacity(&capacity);
        m.capacity_samples = samples.len();
        let mut notes = vec![format!(
            "sampled inside each of {} process image(s) by the runtime (libspelunk.so, \
             SPELUNK_TRACK_RSS) and summed per time over the processes alive then",
            capacity.len()
        )];
        if sources.len() > 1 {
            notes.push(format!(
                "sources differ between processes: {}",
                sources.join(", ")
            ));
        }
        sidecar.capacity = Some(CapacityTimeline {
            source: sources
                .first()
                .cloned()
                .unwrap_or_else(|| "numa_maps".into()),
            interval_ns: interval_ns.unwrap_or(0),
            samples,
            notes,
        });
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "spelunk-rt/1 64 1 3e8 1000\n\
m 5555000-5556000 r-xp 00001000 08:01 12 /usr/bin/app with space\n\
B 65 3e9 outer\n\
B 65 3ea inner phase\n\
A 65 3eb 7f0000 2000 m 5555123 5555456\n\
O 65 3ec 7f0000 2000 my buffer\n\
E 65 3ed inner phase\n\
X 65 3ee 7f0000 0\n\
A 66 3ef 7f0000 3000 c 5555789\n\
A 66 3f0 9000000 10000 p\n\
U 66 3f1 9000000 10000\n\
F 65 3f2 7f0000\n\
E 65 3f3 outer\n\
B 66 3f4 never closed\n\
Q broken line\n\
G 65 3f5 100 200 [heap]\n\
Z 65 3f6 2\n\0\0\0\0";

    #[test]
    fn a_hand_written_log_gives_the_hand_derived_sidecar_parts() {
        let log = RuntimeLog::parse(Path::new("x.rt.64.0"), LOG.as_bytes()).unwrap();
        assert_eq!(
            (log.pid, log.ppid, log.start_ns, log.alloc_min_bytes),
            (100, 1, 1000, 4096)
        );
        assert!(log.ended_cleanly);
        assert_eq!(log.dropped_events, 2);
        assert_eq!(log.damaged_lines, 1);
        assert_eq!(log.maps.len(), 1);
        assert_eq!(log.maps[0].path, "/usr/bin/app with space");
        assert_eq!(log.maps[0].file_offset, 0x1000);
        assert!(log.maps[0].executable);
        let p = log.to_sidecar(2000);
        let phases: Vec<_> = p
            .phases
            .iter()
            .map(|x| (x.name.as_str(), x.depth, x.start_ns, x.end_ns))
            .collect();
        assert_eq!(
            phases,
            vec![
                ("outer", 1, 0x3e9, 0x3f3),
                ("inner phase", 2, 0x3ea, 0x3ed),
                ("never closed", 1, 0x3f4, 2000)
            ]
        );
        let allocs: Vec<_> = p
            .allocations
            .iter()
            .map(|a| {
                (
                    a.tid,
                    a.address,
                    a.size,
                    a.kind.as_str(),
                    a.from_ns,
                    a.until_ns,
                )
            })
            .collect();
        assert_eq!(
            allocs,
            vec![
                (0x65, 0x7f0000, 0x2000, "malloc", 0x3eb, 0x3ee),
                (0x66, 0x7f0000, 0x3000, "calloc", 0x3ef, u64::MAX),
                (0x66, 0x9000000, 0x10000, "mmap", 0x3f0, 0x3f1),
            ]
        );
        assert_eq!(p.allocations[0].stack, vec![0x5555123, 0x5555456]);
        let objects: Vec<_> = p
            .objects
            .iter()
            .map(|o| {
                (
                    o.name.as_str(),
                    o.address,
                    o.size,
                    o.from_ns,
                    o.until_ns,
                    o.kind.as_str(),
                )
            })
            .collect();
        assert_eq!(
            objects,
            vec![
                ("my buffer", 0x7f0000, 0x2000, 0x3ec, 0x3f2, "object"),
                ("[heap]", 0x100, 0x100, 0x3f5, u64::MAX, "mapping"),
            ]
        );
    }

    #[test]
    fn merged_logs_move_onto_the_recording_clock_and_are_removed() {
        let dir = std::env::temp_dir().join(format!("spelunk-rt-merge-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let base = dir.join("log");
        let log = dir.join("log.rt.100.0");
        std::fs::write(&log, LOG).unwrap();
        let mut sc = spelunk_perf::sidecar::Sidecar::new("hardware");
        // perf time = CLOCK_MONOTONIC - 0x100 ns.
        let m = merge_logs(&base, -0x100, 0x2000, &mut sc);
        assert_eq!((m.logs, m.phases, m.objects), (1, 3, 2));
        assert_eq!(m.allocations, 3);
        assert!(m.problems.iter().any(|p| p.contains("damaged")), "{m:?}");
        // "inner phase": 0x3ea..0x3ed on the log's clock.
        let inner = sc.phases.iter().find(|p| p.name == "inner phase").unwrap();
        assert_eq!(
            (inner.start_ns, inner.end_ns),
            (0x3ea - 0x100, 0x3ed - 0x100)
        );
        // Still open at the end: ends at the recording's end (0x2000 on its clock).
        let open = sc.phases.iter().find(|p| p.name == "never closed").unwrap();
        assert_eq!((open.start_ns, open.end_ns), (0x3f4 - 0x100, 0x2000));
        // A block never freed stays "never".
        assert!(sc.allocations.iter().any(|a| a.until_ns == u64::MAX));
        assert!(!log.exists(), "the merged log is removed");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_log_cut_mid_line_keeps_what_came_before() {
        let cut = &LOG.as_bytes()[..LOG.find("A 66 3ef").unwrap() + 12];
        let log = RuntimeLog::parse(Path::new("cut"), cut).unwrap();
        assert!(!log.ended_cleanly);
        assert_eq!(log.damaged_lines, 1);
        assert_eq!(log.to_sidecar(0).allocations.len(), 1);
    }

    /// A `spelunk-rt/2` log of a process sampled three times, on two NUMA nodes, with a note.
    const LOG2: &str = "spelunk-rt/2 c8 64 3e8 1000 clock=monotonic rss_interval_ns=989680 \
spe_period=2710 spe_mode=perp spe_ring_mib=4\n\
N c8 3e9 NMO_AUXBUFSIZE is 0: taken as 1 MiB, as NMO does\n\
B c8 10 work\n\
E c8 20 work\n\
R c9 400 n 0 1000 2000 3000 4000 1 0 100000 0 0\n\
R c9 500 n 0 2000 2000 3000 4000\n\
R c9 600 x 0 1 2 3\n\
R c8 700 n 0 5000 2000 3000 4000\n\
Z c8 701 0\n";

    #[test]
    fn a_version_2_header_gives_its_settings_and_r_lines_give_resident_bytes() {
        let log = RuntimeLog::parse(Path::new("x.rt.c8.0"), LOG2.as_bytes()).unwrap();
        assert_eq!((log.pid, log.ppid, log.start_ns), (200, 100, 1000));
        assert_eq!(log.settings["spe_mode"], "perp");
        assert_eq!(log.settings["spe_period"], "2710"); // 10000
        assert_eq!(log.settings["rss_interval_ns"], "989680"); // 10 ms
        assert_eq!(
            log.notes,
            vec!["NMO_AUXBUFSIZE is 0: taken as 1 MiB, as NMO does"]
        );
        assert_eq!(log.damaged_lines, 1, "the R line with an unknown source");
        assert_eq!(log.capacity_source.as_deref(), Some("numa_maps"));
        // Times are relative to the header's (0x3e8) in a /2 log.
        let times: Vec<u64> = log.capacity.iter().map(|c| c.time_ns).collect();
        assert_eq!(times, vec![0x7e8, 0x8e8, 0xae8]);
        let p = log.to_sidecar(u64::MAX);
        assert_eq!((p.phases[0].start_ns, p.phases[0].end_ns), (0x3f8, 0x408));
        let first = &log.capacity[0];
        assert_eq!(first.nodes.len(), 2);
        assert_eq!(
            (first.nodes[1].node, first.nodes[1].anon_bytes),
            (Some(1), 0x100000)
        );
        assert_eq!(
            first.all_nodes().total_bytes(),
            0x1000 + 0x2000 + 0x3000 + 0x4000 + 0x100000
        );
        let smaps = RuntimeLog::parse(
            Path::new("s"),
            b"spelunk-rt/2 1 1 0 1000\nR 2 10 s - 1 2 3 4\n",
        )
        .unwrap();
        assert_eq!(smaps.capacity_source.as_deref(), Some("smaps"));
        assert_eq!(smaps.capacity[0].nodes[0].node, None);
        assert_eq!(smaps.capacity[0].nodes[0].stack_bytes, 4);
    }

    fn sample(time_ns: u64, heap_bytes: u64) -> CapacitySample {
        CapacitySample {
            time_ns,
            processes: 1,
            nodes: vec![NodeResident {
                node: Some(0),
                heap_bytes,
                ..Default::default()
            }],
        }
    }

    #[test]
    fn processes_are_summed_at_every_time_with_their_latest_sample_while_alive() {
        // Parent 10 -> 30 -> 50 at t 0, 20, 40; child 7 at t 10 and 30, then gone.
        let parent = vec![sample(0, 10), sample(20, 30), sample(40, 50)];
        let child = vec![sample(10, 7), sample(30, 7)];
        let got: Vec<(u64, u32, u64)> = combine_capacity(&[parent, child])
            .iter()
            .map(|s| (s.time_ns, s.processes, s.all_nodes().heap_bytes))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, 1, 10),
                (10, 2, 17),
                (20, 2, 37),
                (30, 2, 37),
                (40, 1, 50)
            ]
        );
    }

    #[test]
    fn merged_resident_samples_become_the_capacity_timeline_unless_one_exists() {
        let dir = std::env::temp_dir().join(format!("spelunk-rt-cap-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let base = dir.join("log");
        std::fs::write(dir.join("log.rt.c8.0"), LOG2).unwrap();
        let mut sc = spelunk_perf::sidecar::Sidecar::new("hardware");
        let m = merge_logs(&base, -0x100, 0x2000, &mut sc);
        assert_eq!(m.capacity_samples, 3);
        assert!(
            m.problems.iter().any(|p| p.contains("NMO_AUXBUFSIZE")),
            "{m:?}"
        );
        let cap = sc.capacity.as_ref().expect("capacity timeline");
        assert_eq!(cap.source, "numa_maps");
        assert_eq!(cap.interval_ns, 10_000_000);
        assert_eq!(cap.samples[0].time_ns, 0x3e8 + 0x400 - 0x100);
        assert_eq!(cap.samples[2].all_nodes().heap_bytes, 0x5000);

        // The recorder's own timeline is kept.
        std::fs::write(dir.join("log.rt.c8.0"), LOG2).unwrap();
        let own = CapacityTimeline {
            source: "smaps".into(),
            ..Default::default()
        };
        sc.capacity = Some(own.clone());
        let m = merge_logs(&base, 0, 0x2000, &mut sc);
        assert_eq!(m.capacity_samples, 0);
        assert_eq!(sc.capacity, Some(own));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn other_files_are_refused_by_name() {
        let e = RuntimeLog::parse(Path::new("f.txt"), b"hello\n").unwrap_err();
        assert!(
            e.to_string().contains("f.txt: not a spelunk runtime log"),
            "{e}"
        );
        let e = RuntimeLog::parse(Path::new("empty"), b"\0\0").unwrap_err();
        assert!(matches!(e, RuntimeLogError::NotALog { .. }));
    }
}
