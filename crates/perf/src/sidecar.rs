//! The sidecar: what a spelunk profile carries that perf.data has no place for — phases and
//! data objects named through the annotation API, counter timelines, the emulator's run
//! configuration and exact ground truth. It sits next to the perf.data as `FILE.spelunk.json`
//! (docs/sidecar.md), so perf still opens the perf.data and spelunk finds both.
//!
//! Times are perf-clock nanoseconds, the same clock as the perf.data's sample times, except in
//! the timelines `spelunk record --no-spe` writes: their clock is named by
//! `config.timeline_clock` (`CLOCK_MONOTONIC`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Schema identifier.
pub const SIDECAR_SCHEMA: &str = "spelunk-sidecar/1";

/// The `config` key of an emulated recording's sidecar holding the emulator's options of the
/// run (every tool option but the trace's name), so that `spelunk advise --verify` can run the
/// command again on the same machine with the same sampling.
pub const EMULATOR_OPTIONS_KEY: &str = "emulator_options";

/// A phase (`spelunk_phase_begin`/`end`) of one thread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Phase {
    pub name: String,
    pub pid: Option<u32>,
    pub tid: u32,
    /// Nesting depth (1 = outermost, as the emulator records it).
    pub depth: u16,
    pub start_ns: u64,
    /// Phases still open when the run ended end at the run's end.
    pub end_ns: u64,
}

/// A data object named through the annotation API (or a tagged mapping).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NamedObject {
    pub name: String,
    pub pid: Option<u32>,
    pub address: u64,
    pub size: u64,
    /// When it was named, and freed (`u64::MAX` when never freed).
    pub from_ns: u64,
    pub until_ns: u64,
    /// "object" (spelunk_object) or "mapping" (spelunk_tag_mapping).
    pub kind: String,
}

/// A heap block (or anonymous mmap) logged by the LD_PRELOAD runtime or the emulator with its
/// allocation call stack (return addresses, innermost first; the first frames may be inside
/// the allocator, whose libraries the analysis skips).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Allocation {
    pub pid: u32,
    pub tid: u32,
    pub address: u64,
    pub size: u64,
    /// Allocated at, and freed at (`u64::MAX` when never freed).
    pub from_ns: u64,
    pub until_ns: u64,
    /// "malloc", "calloc", "realloc", "aligned" or "mmap".
    pub kind: String,
    pub stack: Vec<u64>,
}

/// A snapshot of counter values (cumulative since the thread's start).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CounterSnapshot {
    /// The thread running when the snapshot was taken (0: none, e.g. the final snapshot).
    pub tid: u32,
    pub cpu: Option<u32>,
    pub time_ns: u64,
    /// Why it was taken: "periodic", "annotation" (at a phase begin/end), "thread-start",
    /// "thread-exit" or "final" (the end of the run; totals are sums of these).
    pub reason: String,
    /// Values in the order of [`Counters::events`]: raw counts, as the kernel read them.
    pub values: Vec<u64>,
    /// Hardware counters only (empty, and left out of the file, for emulated ones, which count
    /// all the time): each event's cumulative enabled and running times, in the order of
    /// [`Counters::events`]. `time_running_ns < time_enabled_ns` means the kernel multiplexed
    /// the event: it counted only that fraction of the time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub time_enabled_ns: Vec<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub time_running_ns: Vec<u64>,
}

/// An event that was asked for and not counted, and why (the PMU does not implement it, or
/// there is no PMU). Never recorded as a 0 count.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NotCounted {
    pub code: u32,
    pub name: String,
    pub reason: String,
}

/// PMU counts recorded with the profile.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Counters {
    /// (architected event code, name) of each value column.
    pub events: Vec<(u32, String)>,
    pub timeline: Vec<CounterSnapshot>,
    /// Totals over the run, by event name.
    pub totals: BTreeMap<String, u64>,
    /// Events asked for and not counted (left out of the file when empty, so sidecars without
    /// them are unchanged).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_counted: Vec<NotCounted>,
}

/// Mapping classes of resident memory (docs/record.md, "--no-spe").
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum MappingClass {
    /// The brk heap (`[heap]`).
    Heap,
    /// Anonymous memory that is neither heap nor stack (mmap'd malloc arenas, large blocks).
    Anon,
    /// File-backed mappings (binaries, libraries, mapped files, their copied-on-write pages).
    File,
    /// The main thread's stack (`[stack]`).
    Stack,
}

/// Resident bytes of one NUMA node, per mapping class.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NodeResident {
    /// The NUMA node; `None` when the kernel does not say (no NUMA support: smaps).
    pub node: Option<u32>,
    pub heap_bytes: u64,
    pub anon_bytes: u64,
    pub file_bytes: u64,
    pub stack_bytes: u64,
}

impl NodeResident {
    pub fn bytes(&self, class: MappingClass) -> u64 {
        match class {
            MappingClass::Heap => self.heap_bytes,
            MappingClass::Anon => self.anon_bytes,
            MappingClass::File => self.file_bytes,
            MappingClass::Stack => self.stack_bytes,
        }
    }
    pub fn add(&mut self, class: MappingClass, bytes: u64) {
        let slot = match class {
            MappingClass::Heap => &mut self.heap_bytes,
            MappingClass::Anon => &mut self.anon_bytes,
            MappingClass::File => &mut self.file_bytes,
            MappingClass::Stack => &mut self.stack_bytes,
        };
        *slot = slot.saturating_add(bytes);
    }
    pub fn total_bytes(&self) -> u64 {
        self.heap_bytes
            .saturating_add(self.anon_bytes)
            .saturating_add(self.file_bytes)
            .saturating_add(self.stack_bytes)
    }
}

/// Resident memory of the recorded process tree at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CapacitySample {
    pub time_ns: u64,
    /// Processes of the tree whose memory was read.
    pub processes: u32,
    /// Per NUMA node, in node order (nodes with nothing resident are left out).
    pub nodes: Vec<NodeResident>,
}

impl CapacitySample {
    /// The sample's bytes per class summed over its nodes (`node` is `None`).
    pub fn all_nodes(&self) -> NodeResident {
        let mut t = NodeResident::default();
        for n in &self.nodes {
            for c in MappingClass::ALL {
                t.add(c, n.bytes(c));
            }
        }
        t
    }
}

impl MappingClass {
    pub const ALL: [MappingClass; 4] = [
        MappingClass::Heap,
        MappingClass::Anon,
        MappingClass::File,
        MappingClass::Stack,
    ];
    pub fn name(self) -> &'static str {
        match self {
            MappingClass::Heap => "heap",
            MappingClass::Anon => "anon",
            MappingClass::File => "file",
            MappingClass::Stack => "stack",
        }
    }
}

impl CapacityTimeline {
    /// Each class's largest resident bytes (summed over nodes) over the samples; the classes
    /// can peak at different times.
    pub fn peak_per_class(&self) -> NodeResident {
        let mut p = NodeResident::default();
        for s in &self.samples {
            let t = s.all_nodes();
            p.heap_bytes = p.heap_bytes.max(t.heap_bytes);
            p.anon_bytes = p.anon_bytes.max(t.anon_bytes);
            p.file_bytes = p.file_bytes.max(t.file_bytes);
            p.stack_bytes = p.stack_bytes.max(t.stack_bytes);
        }
        p
    }

    /// The sample with the most resident bytes in all (the first of equals).
    pub fn peak_sample(&self) -> Option<&CapacitySample> {
        self.samples
            .iter()
            .fold(None, |best: Option<&CapacitySample>, s| match best {
                Some(b) if b.all_nodes().total_bytes() >= s.all_nodes().total_bytes() => Some(b),
                _ => Some(s),
            })
    }
}

/// Temporal capacity: resident memory of the process tree per NUMA node and mapping class,
/// sampled at an interval ([NMO paper §VI]'s capacity profiling).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CapacityTimeline {
    /// `numa_maps` (per node) or `smaps` (the kernel has no NUMA support: node unknown).
    pub source: String,
    pub interval_ns: u64,
    pub samples: Vec<CapacitySample>,
    /// What could not be read, said once each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Every access the emulator counted to one object or heap block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ExactAccesses {
    pub loads: u64,
    pub stores: u64,
    pub load_bytes: u64,
    pub store_bytes: u64,
    /// Accesses that missed L1D.
    pub l1d_misses: u64,
}

/// Exact accesses to one annotated object (emulator ground truth).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ObjectTruth {
    pub name: String,
    pub address: u64,
    pub size: u64,
    #[serde(flatten)]
    pub accesses: ExactAccesses,
}

/// Exact accesses to one heap block over its life (emulator ground truth); the block is the
/// entry of [`Sidecar::allocations`] with the same `address` and `from_ns`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BlockTruth {
    pub address: u64,
    pub from_ns: u64,
    pub size: u64,
    #[serde(flatten)]
    pub accesses: ExactAccesses,
}

/// What the emulator knows exactly.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GroundTruth {
    pub objects: Vec<ObjectTruth>,
    /// Heap blocks (left out of the file when there are none, so older sidecars are unchanged).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<BlockTruth>,
    /// Named totals (e.g. SAMPLE_POP, loads per level) over the run.
    pub totals: BTreeMap<String, u64>,
}

/// Wall and CPU time of one run of the command (`spelunk record --overhead`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TimedRun {
    /// From starting the program to its exit, as the recorder saw it.
    pub wall_ns: u64,
    /// User + system CPU time of the program's process tree (`wait4`/`getrusage` of the
    /// children), spelunk's own work not included.
    pub cpu_ns: u64,
}

/// Median and range of a set of times.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TimeSpread {
    /// The middle value (the mean of the two middle values for an even count).
    pub median_ns: f64,
    pub min_ns: u64,
    pub max_ns: u64,
}

/// `spelunk record --overhead`: the command run natively and recorded the same number of
/// times, and the slowdown recording causes ([NMO paper §VII-A]: time overhead is the
/// profiled run's extra time over the baseline's, as a share of the baseline).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Overhead {
    /// How the recorded runs were recorded: "emulated", "hardware SPE" or "no SPE".
    pub mode: String,
    /// Runs of each kind.
    pub runs: u32,
    /// Runs without spelunk, in the order they ran (interleaved with the recorded ones).
    pub native: Vec<TimedRun>,
    /// Recorded runs, in order; the last is the recording kept.
    pub recorded: Vec<TimedRun>,
    pub native_wall: TimeSpread,
    pub recorded_wall: TimeSpread,
    pub native_cpu: TimeSpread,
    pub recorded_cpu: TimeSpread,
    /// recorded_wall.median_ns / native_wall.median_ns (None when the native median is 0).
    pub slowdown: Option<f64>,
    /// recorded_cpu.median_ns / native_cpu.median_ns (None when the native median is 0).
    pub cpu_slowdown: Option<f64>,
    /// slowdown - 1 ([NMO paper §VII-A]'s time overhead, as a fraction).
    pub time_overhead: Option<f64>,
}

impl TimeSpread {
    /// Median, minimum and maximum of `times_ns`; zeros when it is empty.
    pub fn of(times_ns: &[u64]) -> TimeSpread {
        let mut v = times_ns.to_vec();
        v.sort_unstable();
        let n = v.len();
        if n == 0 {
            return TimeSpread::default();
        }
        let median_ns = if n % 2 == 1 {
            v[n / 2] as f64
        } else {
            (v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0
        };
        TimeSpread {
            median_ns,
            min_ns: v[0],
            max_ns: v[n - 1],
        }
    }
}

impl Overhead {
    /// The summary of `native` and `recorded` runs (as many of each).
    pub fn of(mode: &str, native: Vec<TimedRun>, recorded: Vec<TimedRun>) -> Overhead {
        let spread = |runs: &[TimedRun], f: fn(&TimedRun) -> u64| {
            TimeSpread::of(&runs.iter().map(f).collect::<Vec<_>>())
        };
        let native_wall = spread(&native, |r| r.wall_ns);
        let recorded_wall = spread(&recorded, |r| r.wall_ns);
        let native_cpu = spread(&native, |r| r.cpu_ns);
        let recorded_cpu = spread(&recorded, |r| r.cpu_ns);
        let ratio =
            |a: &TimeSpread, b: &TimeSpread| (b.median_ns > 0.0).then(|| a.median_ns / b.median_ns);
        let slowdown = ratio(&recorded_wall, &native_wall);
        Overhead {
            mode: mode.into(),
            runs: recorded.len().max(native.len()) as u32,
            slowdown,
            cpu_slowdown: ratio(&recorded_cpu, &native_cpu),
            time_overhead: slowdown.map(|s| s - 1.0),
            native_wall,
            recorded_wall,
            native_cpu,
            recorded_cpu,
            native,
            recorded,
        }
    }
}

/// The sidecar file. Missing fields read as empty, so newer writers stay readable.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Sidecar {
    pub schema: String,
    /// Who wrote it: "emulator" or "runtime".
    pub source: String,
    /// The command that was profiled.
    pub command: Vec<String>,
    pub exit_status: Option<i32>,
    /// Free-form run configuration (the emulator's model parameters), by name.
    pub config: BTreeMap<String, serde_json::Value>,
    pub phases: Vec<Phase>,
    pub objects: Vec<NamedObject>,
    pub counters: Counters,
    pub truth: Option<GroundTruth>,
    /// Heap blocks by allocation site (the LD_PRELOAD runtime, or the emulator; empty otherwise,
    /// and then left out of the file, so sidecars without allocations are unchanged).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allocations: Vec<Allocation>,
    /// Resident memory over time (`spelunk record --no-spe`; absent otherwise, and then left
    /// out of the file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityTimeline>,
    /// `spelunk record --overhead`'s timings (absent otherwise, and then left out of the file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead: Option<Overhead>,
    /// What [`Sidecar::read`] dropped as inconsistent (an entry that ends before it starts, an
    /// object that wraps around the address space, a counter snapshot whose columns do not
    /// match the events), one line each naming the file, the count and the first instance.
    /// Never written to the file.
    #[serde(skip)]
    pub problems: Vec<String>,
}

/// Errors reading or writing a sidecar, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum SidecarError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: the sidecar is empty (was the recording interrupted before it was written?)")]
    Empty { path: PathBuf },
    #[error("{path}: the sidecar is cut off: its JSON ends unfinished at byte {len} ({source})")]
    Cut {
        path: PathBuf,
        len: u64,
        source: serde_json::Error,
    },
    #[error("{path}: not a spelunk sidecar: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(
        "{path}: sidecar schema '{found}' is not supported (this spelunk reads {SIDECAR_SCHEMA})"
    )]
    Schema { path: PathBuf, found: String },
}

impl Sidecar {
    /// The sidecar's JSON Schema (draft 2020-12), generated from these types
    /// (docs/schemas/sidecar.schema.json is this, checked by a test).
    pub fn json_schema() -> serde_json::Value {
        serde_json::to_value(schemars::schema_for!(Sidecar)).unwrap_or_default()
    }

    pub fn new(source: &str) -> Sidecar {
        Sidecar {
            schema: SIDECAR_SCHEMA.into(),
            source: source.into(),
            ..Default::default()
        }
    }

    /// Where the sidecar of `perf_data` lives.
    pub fn path_for(perf_data: &Path) -> PathBuf {
        let mut s = perf_data.as_os_str().to_owned();
        s.push(".spelunk.json");
        PathBuf::from(s)
    }

    pub fn write(&self, path: &Path) -> Result<(), SidecarError> {
        let text = serde_json::to_vec_pretty(self).map_err(|source| SidecarError::Json {
            path: path.to_path_buf(),
            source,
        })?;
        // Whole or not at all (spelunk-fsio): an interrupted run keeps the old sidecar.
        spelunk_fsio::write_atomic(path, &text).map_err(|source| SidecarError::Io {
            path: path.to_path_buf(),
            source,
        })
    }

    pub fn read(path: &Path) -> Result<Sidecar, SidecarError> {
        // Bounded: a sidecar with millions of phases and objects is a few hundred MB.
        let text =
            spelunk_fsio::read_bounded(path, 4 << 30).map_err(|source| SidecarError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        Self::from_json(&text, path)
    }

    /// Parses and checks a sidecar's bytes (`path` names it in messages): the schema must be
    /// ours; inconsistent entries are dropped and said in [`Sidecar::problems`].
    pub fn from_json(text: &[u8], path: &Path) -> Result<Sidecar, SidecarError> {
        if text.iter().all(u8::is_ascii_whitespace) {
            return Err(SidecarError::Empty {
                path: path.to_path_buf(),
            });
        }
        let mut s: Sidecar = serde_json::from_slice(text).map_err(|source| {
            if source.is_eof() {
                SidecarError::Cut {
                    path: path.to_path_buf(),
                    len: text.len() as u64,
                    source,
                }
            } else {
                SidecarError::Json {
                    path: path.to_path_buf(),
                    source,
                }
            }
        })?;
        if s.schema != SIDECAR_SCHEMA {
            return Err(SidecarError::Schema {
                path: path.to_path_buf(),
                found: s.schema,
            });
        }
        s.drop_inconsistent(path);
        Ok(s)
    }

    /// Drops the entries no writer of ours produces and no analysis can use — times that run
    /// backwards, address ranges past the end of the address space, counter snapshots whose
    /// columns do not match the events — counting them in [`Sidecar::problems`].
    fn drop_inconsistent(&mut self, path: &Path) {
        let mut problems = Vec::new();
        let mut note = |what: &str, n: usize, first: Option<String>| {
            if let (true, Some(first)) = (n > 0, first) {
                problems.push(format!(
                    "{}: {n} {what} dropped (the first: {first})",
                    path.display()
                ));
            }
        };
        let (n, first) = retain_counted(
            &mut self.phases,
            |p| p.end_ns >= p.start_ns,
            |p| {
                format!(
                    "phase '{}' of thread {} ends before it starts, {} < {} ns",
                    p.name, p.tid, p.end_ns, p.start_ns
                )
            },
        );
        note("phase(s) that end before they start", n, first);
        let (n, first) = retain_ranges(&mut self.objects, "object", |o| {
            (&o.name, o.address, o.size, o.from_ns, o.until_ns)
        });
        note(
            "object(s) that end before they start or wrap around the address space",
            n,
            first,
        );
        let (n, first) = retain_ranges(&mut self.allocations, "block", |a| {
            (&a.kind, a.address, a.size, a.from_ns, a.until_ns)
        });
        note(
            "heap block(s) that end before they start or wrap around the address space",
            n,
            first,
        );
        let events = self.counters.events.len();
        let (n, first) = retain_counted(
            &mut self.counters.timeline,
            |c| {
                c.values.len() == events
                    && (c.time_enabled_ns.is_empty() || c.time_enabled_ns.len() == events)
                    && (c.time_running_ns.is_empty() || c.time_running_ns.len() == events)
            },
            |c| {
                format!(
                    "the snapshot at {} ns has {} values for {events} events",
                    c.time_ns,
                    c.values.len()
                )
            },
        );
        note(
            "counter snapshot(s) whose values do not match the events",
            n,
            first,
        );
        self.problems.extend(problems);
    }

    /// The sidecar next to `perf_data`, if there is one.
    pub fn find(perf_data: &Path) -> Result<Option<Sidecar>, SidecarError> {
        let p = Self::path_for(perf_data);
        if p.exists() {
            Self::read(&p).map(Some)
        } else {
            Ok(None)
        }
    }

    /// The sidecar of a recording, the one way every command reads it: none when there is no
    /// `FILE.spelunk.json` (nothing there at all, not even a dangling link); with
    /// [`SidecarUse::Ignore`], none and a problem saying it was not used; otherwise the sidecar,
    /// or the error that says why it cannot be read (a damaged sidecar is never dropped
    /// silently). The problems (to list with the recording's losses) include those
    /// [`Sidecar::read`] found.
    pub fn for_recording(
        perf_data: &Path,
        how: SidecarUse,
    ) -> Result<(Option<Sidecar>, Vec<String>), SidecarError> {
        let p = Self::path_for(perf_data);
        if std::fs::symlink_metadata(&p).is_err() {
            return Ok((None, Vec::new()));
        }
        match how {
            SidecarUse::Ignore => Ok((
                None,
                vec![format!(
                    "{}: sidecar not used, as asked: no phases, named objects, heap blocks or \
                     PMU counts",
                    p.display()
                )],
            )),
            SidecarUse::Read => {
                let mut sc = Self::read(&p)?;
                let problems = std::mem::take(&mut sc.problems);
                Ok((Some(sc), problems))
            }
        }
    }
}

/// Whether a recording's sidecar is read ([`Sidecar::for_recording`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SidecarUse {
    /// Read it; one that cannot be read is an error.
    #[default]
    Read,
    /// Do not read it (the user asked: e.g. it is damaged).
    Ignore,
}

/// Keeps the items `keep` accepts; returns how many were dropped and the first one described.
fn retain_counted<T>(
    v: &mut Vec<T>,
    keep: impl Fn(&T) -> bool,
    describe: impl Fn(&T) -> String,
) -> (usize, Option<String>) {
    let mut first = None;
    let before = v.len();
    v.retain(|x| {
        let k = keep(x);
        if !k && first.is_none() {
            first = Some(describe(x));
        }
        k
    });
    (before - v.len(), first)
}

/// [`retain_counted`] for address ranges with lifetimes (`fields` gives name, address, size,
/// from and until): keeps those that start before they end and fit in the address space.
fn retain_ranges<T>(
    v: &mut Vec<T>,
    what: &str,
    fields: impl Fn(&T) -> (&str, u64, u64, u64, u64),
) -> (usize, Option<String>) {
    retain_counted(
        v,
        |x| {
            let (_, address, size, from, until) = fields(x);
            until >= from && address.checked_add(size).is_some()
        },
        |x| {
            let (name, address, size, from, until) = fields(x);
            if until < from {
                format!("{what} '{name}' ends before it starts, {until} < {from} ns")
            } else {
                format!(
                    "{what} '{name}' at {address:#x} of {size} bytes wraps around the address \
                     space"
                )
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_schema_check() {
        let dir = std::env::temp_dir().join(format!("spelunk-sidecar-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let data = dir.join("perf.data");
        let mut s = Sidecar::new("emulator");
        s.phases.push(Phase {
            name: "triad".into(),
            pid: Some(1),
            tid: 1,
            depth: 0,
            start_ns: 10,
            end_ns: 20,
        });
        s.counters.totals.insert("CPU_CYCLES".into(), 123);
        let p = Sidecar::path_for(&data);
        assert!(p.to_str().unwrap().ends_with("perf.data.spelunk.json"));
        s.write(&p).unwrap();
        assert_eq!(Sidecar::find(&data).unwrap(), Some(s));
        std::fs::write(&p, br#"{"schema":"other/9"}"#).unwrap();
        assert!(matches!(
            Sidecar::read(&p),
            Err(SidecarError::Schema { .. })
        ));
        std::fs::write(&p, b"not json").unwrap();
        assert!(matches!(Sidecar::read(&p), Err(SidecarError::Json { .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Entries no writer produces are dropped and counted; the rest is kept.
    #[test]
    fn inconsistent_entries_are_dropped_and_said() {
        let text = serde_json::json!({
            "schema": SIDECAR_SCHEMA,
            "phases": [
                {"name": "ok", "pid": 1, "tid": 1, "depth": 1, "start_ns": 10, "end_ns": 20},
                {"name": "back", "pid": 1, "tid": 7, "depth": 1, "start_ns": 30, "end_ns": 5},
                {"name": "back2", "pid": 1, "tid": 7, "depth": 1, "start_ns": 9, "end_ns": 8}
            ],
            "objects": [
                {"name": "wraps", "pid": 1, "address": u64::MAX - 1, "size": 4, "from_ns": 0,
                 "until_ns": 1, "kind": "object"},
                {"name": "fine", "pid": 1, "address": 4096, "size": 4, "from_ns": 0,
                 "until_ns": 1, "kind": "object"}
            ],
            "counters": {"events": [[17, "CPU_CYCLES"]], "totals": {},
                "timeline": [{"tid": 0, "cpu": 0, "time_ns": 1, "reason": "final", "values": [1, 2]}]}
        });
        let p = Path::new("x.spelunk.json");
        let s = Sidecar::from_json(text.to_string().as_bytes(), p).unwrap();
        let names: Vec<&str> = s.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["ok"]);
        assert_eq!(s.objects.len(), 1);
        assert_eq!(s.objects[0].name, "fine");
        assert!(s.counters.timeline.is_empty());
        assert_eq!(s.problems.len(), 3, "{:?}", s.problems);
        assert!(
            s.problems[0].starts_with("x.spelunk.json: 2 phase(s)"),
            "{:?}",
            s.problems
        );
        assert!(
            s.problems[0].contains("'back' of thread 7"),
            "{:?}",
            s.problems
        );
        assert!(s.problems[1].contains("'wraps'"), "{:?}", s.problems);
        assert!(
            s.problems[2].contains("2 values for 1 events"),
            "{:?}",
            s.problems
        );
    }

    /// Empty, cut and missing sidecars, and --ignore-sidecar, as every command meets them.
    #[test]
    fn a_recordings_sidecar_is_read_one_way() {
        let dir = std::env::temp_dir().join(format!("spelunk-sidecar-use-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let data = dir.join("r.data");
        let side = Sidecar::path_for(&data);
        assert_eq!(
            Sidecar::for_recording(&data, SidecarUse::Read).unwrap(),
            (None, vec![])
        );
        std::fs::write(&side, b"  \n").unwrap();
        let e = Sidecar::for_recording(&data, SidecarUse::Read).unwrap_err();
        assert!(matches!(e, SidecarError::Empty { .. }), "{e}");
        let full = serde_json::to_vec(&Sidecar::new("runtime")).unwrap();
        std::fs::write(&side, &full[..full.len() / 2]).unwrap();
        let e = Sidecar::for_recording(&data, SidecarUse::Read).unwrap_err();
        assert!(
            e.to_string().contains(&format!(
                "cut off: its JSON ends unfinished at byte {}",
                full.len() / 2
            )),
            "{e}"
        );
        let (sc, problems) = Sidecar::for_recording(&data, SidecarUse::Ignore).unwrap();
        assert!(sc.is_none());
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("sidecar not used"), "{problems:?}");
        // A dangling link is something there: refused, not taken for no sidecar.
        std::fs::remove_file(&side).unwrap();
        std::os::unix::fs::symlink(dir.join("gone"), &side).unwrap();
        assert!(Sidecar::for_recording(&data, SidecarUse::Read).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn timelines_round_trip_and_peaks() {
        let node = |node, heap_bytes, anon_bytes| NodeResident {
            node,
            heap_bytes,
            anon_bytes,
            file_bytes: 4096,
            stack_bytes: 0,
        };
        let cap = CapacityTimeline {
            source: "numa_maps".into(),
            interval_ns: 100,
            samples: vec![
                CapacitySample {
                    time_ns: 100,
                    processes: 1,
                    nodes: vec![node(Some(0), 1000, 0), node(Some(1), 0, 50)],
                },
                CapacitySample {
                    time_ns: 200,
                    processes: 2,
                    nodes: vec![node(Some(0), 10, 9000)],
                },
            ],
            notes: vec![],
        };
        // Heap peaks in the first sample (1000), anon in the second (9000).
        let p = cap.peak_per_class();
        assert_eq!(
            (p.heap_bytes, p.anon_bytes, p.file_bytes),
            (1000, 9000, 8192)
        );
        assert_eq!(
            cap.samples[0].all_nodes().total_bytes(),
            1000 + 50 + 2 * 4096
        );
        assert_eq!(cap.peak_sample().map(|s| s.time_ns), Some(200));
        let mut s = Sidecar::new("timelines");
        s.capacity = Some(cap);
        s.counters.not_counted.push(NotCounted {
            code: 0x19,
            name: "BUS_ACCESS".into(),
            reason: "not in events/".into(),
        });
        s.counters.timeline.push(CounterSnapshot {
            time_ns: 5,
            reason: "final".into(),
            values: vec![7],
            time_enabled_ns: vec![10],
            time_running_ns: vec![5],
            ..Default::default()
        });
        let text = serde_json::to_string(&s).unwrap();
        assert!(
            text.contains(r#""capacity":{"source":"numa_maps""#),
            "{text}"
        );
        let back: Sidecar = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn overhead_is_the_ratio_of_medians() {
        let run = |wall_ns, cpu_ns| TimedRun { wall_ns, cpu_ns };
        // Odd count: the middle value; even count: the mean of the two middle values.
        let o = Overhead::of(
            "emulated",
            vec![run(30, 10), run(10, 30), run(20, 20)],
            vec![run(300, 50), run(100, 70), run(500, 60)],
        );
        assert_eq!(o.runs, 3);
        assert_eq!(
            o.native_wall,
            TimeSpread {
                median_ns: 20.0,
                min_ns: 10,
                max_ns: 30
            }
        );
        assert_eq!(o.recorded_wall.median_ns, 300.0);
        assert_eq!(o.slowdown, Some(15.0));
        assert_eq!(o.time_overhead, Some(14.0));
        assert_eq!(o.cpu_slowdown, Some(3.0));
        assert_eq!(TimeSpread::of(&[4, 1, 3, 2]).median_ns, 2.5);
        let none = Overhead::of("no SPE", vec![run(0, 0)], vec![run(5, 5)]);
        assert_eq!((none.slowdown, none.cpu_slowdown), (None, None));
    }
}
