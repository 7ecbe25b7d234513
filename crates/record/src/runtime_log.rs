//! Reading the logs of spelunk's LD_PRELOAD runtime (`runtime/`, `libspelunk.so`) into the
//! sidecar's phases, objects and heap allocations.
//!
//! The runtime writes one log per process image, `BASE.rt.PID.N` (hex pid; N counts exec'd
//! images of one pid), as text lines into a shared file mapping (docs/runtime.md, "Log
//! format"). A process that ended with `_exit`, a fatal signal or SIGKILL leaves a log without
//! its trailer and with zero bytes after the last line; a line cut by such an end, or damaged,
//! is counted in [`RuntimeLog::damaged_lines`], never fatal. Times are CLOCK_MONOTONIC ns.

use spelunk_perf::sidecar::{Allocation, NamedObject, Phase};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// The first line's tag.
pub const RUNTIME_LOG_SCHEMA: &str = "spelunk-rt/1";

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
                if f.next() != Some(RUNTIME_LOG_SCHEMA) {
                    return Err(RuntimeLogError::NotALog {
                        path: path.to_path_buf(),
                    });
                }
                let v: Vec<u64> = f.filter_map(hex).collect();
                if v.len() < 4 {
                    return Err(RuntimeLogError::NotALog {
                        path: path.to_path_buf(),
                    });
                }
                log.pid = v[0] as u32;
                log.ppid = v[1] as u32;
                log.start_ns = v[2];
                log.alloc_min_bytes = v[3];
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
            match parse_event(line) {
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
        let mut parts = RuntimeParts::default();
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

enum Parsed {
    Event(RuntimeEvent),
    Trailer { dropped: u64 },
}

fn parse_event(line: &str) -> Option<Parsed> {
    let mut f = line.split(' ');
    let kind = f.next()?;
    let tid = hex32(f.next()?)?;
    let time_ns = hex(f.next()?)?;
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
    }
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
    /// Problems worth a line each (a damaged or unreadable log, dropped events).
    pub problems: Vec<String>,
}

/// Reads every log of `base` (`BASE.rt.*`), moves its times by `offset_ns` onto the
/// recording's clock, adds phases, objects and allocations to `sidecar`, and removes the logs
/// it read. `end_ns` (recording clock) ends what is still open.
pub fn merge_logs(
    base: &Path,
    offset_ns: i64,
    end_ns: u64,
    sidecar: &mut spelunk_perf::sidecar::Sidecar,
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
        let mut parts = log.to_sidecar(end_mono);
        parts.shift_time(offset_ns);
        m.logs += 1;
        m.phases += parts.phases.len();
        m.objects += parts.objects.len();
        m.allocations += parts.allocations.len();
        sidecar.phases.extend(parts.phases);
        sidecar.objects.extend(parts.objects);
        sidecar.allocations.extend(parts.allocations);
        let _ = std::fs::remove_file(&path);
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
