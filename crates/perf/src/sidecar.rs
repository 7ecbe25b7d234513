//! The sidecar: what a spelunk profile carries that perf.data has no place for — phases and
//! data objects named through the annotation API, counter timelines, the emulator's run
//! configuration and exact ground truth. It sits next to the perf.data as `FILE.spelunk.json`
//! (docs/sidecar.md), so perf still opens the perf.data and spelunk finds both.
//!
//! Times are perf-clock nanoseconds, the same clock as the perf.data's sample times.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Schema identifier.
pub const SIDECAR_SCHEMA: &str = "spelunk-sidecar/1";

/// A phase (`spelunk_phase_begin`/`end`) of one thread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

/// A heap block (or anonymous mmap) logged by the LD_PRELOAD runtime with its allocation
/// call stack (return addresses, innermost first; the first is in the allocating function).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterSnapshot {
    /// The thread running when the snapshot was taken (0: none, e.g. the final snapshot).
    pub tid: u32,
    pub cpu: Option<u32>,
    pub time_ns: u64,
    /// Why it was taken: "periodic", "annotation" (at a phase begin/end), "thread-start",
    /// "thread-exit" or "final" (the end of the run; totals are sums of these).
    pub reason: String,
    /// Values in the order of [`Counters::events`].
    pub values: Vec<u64>,
}

/// PMU counts recorded with the profile.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// (architected event code, name) of each value column.
    pub events: Vec<(u32, String)>,
    pub timeline: Vec<CounterSnapshot>,
    /// Totals over the run, by event name.
    pub totals: BTreeMap<String, u64>,
}

/// Exact accesses to one annotated object (emulator ground truth).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectTruth {
    pub name: String,
    pub address: u64,
    pub size: u64,
    pub loads: u64,
    pub stores: u64,
    pub load_bytes: u64,
    pub store_bytes: u64,
    pub l1d_misses: u64,
}

/// What the emulator knows exactly.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroundTruth {
    pub objects: Vec<ObjectTruth>,
    /// Named totals (e.g. SAMPLE_POP, loads per level) over the run.
    pub totals: BTreeMap<String, u64>,
}

/// The sidecar file. Missing fields read as empty, so newer writers stay readable.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    /// Heap blocks by allocation site (the LD_PRELOAD runtime; empty otherwise, and then left
    /// out of the file, so sidecars without allocations are unchanged).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allocations: Vec<Allocation>,
}

/// Errors reading or writing a sidecar, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum SidecarError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
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
        let s: Sidecar = serde_json::from_slice(&text).map_err(|source| SidecarError::Json {
            path: path.to_path_buf(),
            source,
        })?;
        if s.schema != SIDECAR_SCHEMA {
            return Err(SidecarError::Schema {
                path: path.to_path_buf(),
                found: s.schema,
            });
        }
        Ok(s)
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
}
