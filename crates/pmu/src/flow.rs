//! `spelunk topdown`'s flows from its options to the typed [`Report`]: which catalog (a named
//! CPU model, an Arm telemetry specification file, or detection), the import of `perf stat`
//! output or of a sidecar's counts, and the live run's options. They live here, not in the
//! command-line front end, so that every front end evaluates the same way; the front end turns
//! its flags into a [`TopdownRequest`] and renders the report (spelunk-report's
//! `topdown_text`). The emulated run is spelunk-record's (`flow::emulated_topdown`).

use crate::catalog::{self, Catalog, Choice};
use crate::compute::{Selection, StageFilter};
use crate::detect::parse_cpu_list;
use crate::import::{parse_perf_stat, ImportInput};
use crate::live::{CountTarget, CpuList, LiveOptions};
use crate::report::{import_report, ImportOptions, Report};
use crate::sidecar::{self, SidecarTopdown};
use crate::PmuError;
use spelunk_perf::sidecar::Sidecar;
use std::path::{Path, PathBuf};

/// Largest `perf stat` output or catalog read whole (far above any real one).
const MAX_TEXT_INPUT_BYTES: u64 = 256 << 20;

/// What to evaluate, whatever the counts' origin.
#[derive(Clone, Debug, Default)]
pub struct TopdownRequest {
    /// A built-in catalog by name (`--cpu-model`).
    pub cpu_model: Option<String>,
    /// An Arm telemetry specification JSON file as the catalog (`--spec`).
    pub spec: Option<PathBuf>,
    pub stage: StageFilter,
    /// Metric groups or metrics (`-m`).
    pub groups: Vec<String>,
    /// Decision-tree nodes (`-n`).
    pub nodes: Vec<String>,
    /// A timeline row per interval (`-I`).
    pub interval_ms: Option<f64>,
    /// Each CPU/core/socket (perf stat) or virtual core (sidecar) too.
    pub per_cpu: bool,
    /// Each annotated phase too (sidecars only).
    pub per_phase: bool,
    /// Slots per cycle instead of the PMU's or the catalog's.
    pub slots: Option<u32>,
}

/// What a live run counts, and how (`-p`, `-a`, `-C`, the command, `--duration`, ...).
#[derive(Clone, Debug, Default)]
pub struct LiveTarget {
    pub command: Vec<String>,
    /// A CPU list like `0-3,8`, as the user wrote it.
    pub cpus: Option<String>,
    pub all_cpus: bool,
    pub pid: Option<i32>,
    pub duration_s: Option<f64>,
    pub multiplex: bool,
    pub counters: Option<u32>,
    /// Root of the sysfs/procfs tree to detect CPUs from.
    pub sysfs_root: PathBuf,
}

/// Why a top-down evaluation was refused or failed. `Display` is the message; causes are
/// `source`s.
#[derive(Debug, thiserror::Error)]
pub enum TopdownError {
    /// Options that cannot be evaluated with, said with what to do instead.
    #[error("{0}")]
    Options(String),
    /// A step that failed, named, with its cause.
    #[error("{what}")]
    Step {
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error(transparent)]
    Pmu(#[from] PmuError),
}

fn step<E: std::error::Error + Send + Sync + 'static>(
    what: impl Into<String>,
) -> impl FnOnce(E) -> TopdownError {
    let what = what.into();
    move |e| TopdownError::Step {
        what,
        source: Box::new(e),
    }
}

impl TopdownRequest {
    /// The catalog the options name (`--spec`, else `--cpu-model`), or none: detect it.
    pub fn explicit_catalog(&self) -> Result<Option<Choice>, TopdownError> {
        if let Some(spec) = &self.spec {
            let json = spelunk_fsio::read_to_string_bounded(spec, MAX_TEXT_INPUT_BYTES)
                .map_err(step(format!("reading --spec {}", spec.display())))?;
            let name = spec
                .file_stem()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_else(|| "spec".into());
            let catalog =
                Catalog::from_spec_json(&json, &name, &spec.display().to_string(), false)?;
            return Ok(Some(Choice {
                catalog,
                note: None,
            }));
        }
        match &self.cpu_model {
            Some(n) => Ok(Some(catalog::by_name(n)?)),
            None => Ok(None),
        }
    }

    /// The catalog `--list` shows: one must be named.
    pub fn listed_catalog(&self) -> Result<Catalog, TopdownError> {
        match self.explicit_catalog()? {
            Some(choice) => Ok(choice.catalog),
            None => Err(TopdownError::Options(
                "--list needs --cpu-model NAME or --spec FILE".into(),
            )),
        }
    }

    /// Refuses `--per-phase` for a live run, which sees no phase annotations.
    pub fn check_live(&self) -> Result<(), TopdownError> {
        if self.per_phase {
            return Err(TopdownError::Options(
                "--per-phase needs phase annotations, which live counting does not see: use \
                 --emulate, or --import a recording's sidecar"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The live run to count. A `-C` list and the catalog are checked here, before any
    /// counting starts.
    pub fn live_options(&self, target: &LiveTarget) -> Result<LiveOptions, TopdownError> {
        let count = match (&target.cpus, target.all_cpus, target.pid) {
            (Some(spec), _, _) => CountTarget::Cpus(CpuList {
                cpus: match parse_cpu_list(spec) {
                    Some(cpus) => cpus,
                    None => {
                        return Err(TopdownError::Options(format!(
                            "-C {spec}: not a CPU list like 0-3,8"
                        )))
                    }
                },
                spec: spec.clone(),
            }),
            (None, true, _) => CountTarget::AllCpus,
            (None, false, Some(pid)) => CountTarget::Process(pid),
            (None, false, None) => CountTarget::Command,
        };
        Ok(LiveOptions {
            command: target.command.clone(),
            target: count,
            interval_ms: self.interval_ms,
            duration_s: target.duration_s,
            multiplex: target.multiplex,
            counters: target.counters,
            slots: self.slots,
            stage: self.stage,
            groups: self.groups.clone(),
            nodes: self.nodes.clone(),
            sysfs_root: target.sysfs_root.clone(),
            catalog: self.explicit_catalog()?,
        })
    }

    /// The report of `file`: `perf stat -x` output (which needs the catalog named) or a
    /// sidecar (FILE.spelunk.json, or a perf.data with its sidecar next to it).
    pub fn import(&self, file: &Path) -> Result<Report, TopdownError> {
        let name = file.display().to_string();
        match ImportInput::read(file).map_err(step("--import"))? {
            ImportInput::PerfStat(text) => {
                let Some(choice) = self.explicit_catalog()? else {
                    return Err(TopdownError::Options(
                        "--import of perf stat output needs the CPU the counts were taken on: --cpu-model NAME \
                         (e.g. neoverse-n1) or --spec FILE"
                            .into(),
                    ));
                };
                if self.per_phase {
                    return Err(TopdownError::Options(format!(
                        "--per-phase: {name} is perf stat output, which has no phases (sidecars do)"
                    )));
                }
                let imported = parse_perf_stat(&text, &name, &choice.catalog)?;
                let sel =
                    Selection::resolve(&choice.catalog, self.stage, &self.groups, &self.nodes)?;
                Ok(import_report(
                    &imported,
                    &choice.catalog,
                    &sel,
                    ImportOptions {
                        file: &name,
                        per_scope: self.per_cpu,
                        per_phase: false,
                        slots: self.slots,
                        notes: choice.note.into_iter().collect(),
                    },
                ))
            }
            ImportInput::Sidecar(sc, path) => self.sidecar_report(&sc, &path),
        }
    }

    /// The report of a sidecar's counters with the request's catalog, selection, scopes and
    /// interval.
    pub fn sidecar_report(&self, sc: &Sidecar, path: &Path) -> Result<Report, TopdownError> {
        let opts = SidecarTopdown {
            catalog: self.explicit_catalog()?,
            interval_ns: self
                .interval_ms
                .map(|ms| (ms * 1e6).round().max(1.0) as u64),
            stage: self.stage,
            groups: self.groups.clone(),
            nodes: self.nodes.clone(),
            per_core: self.per_cpu,
            per_phase: self.per_phase,
            slots: self.slots,
        };
        Ok(sidecar::topdown(sc, &path.display().to_string(), &opts)?)
    }
}

/// The top-down section `spelunk report --html` adds from the PMU counts in the recording's
/// sidecar `sc` (what `spelunk record --emulate` writes), computed as `spelunk topdown --import
/// FILE --per-phase` computes it; none when the sidecar has no counts. `recording` names the
/// perf.data.
pub fn page_topdown(sc: &Sidecar, recording: &Path) -> Option<Result<Report, PmuError>> {
    if sc.counters.totals.is_empty() {
        return None;
    }
    let path = Sidecar::path_for(recording);
    let opts = SidecarTopdown {
        per_phase: true,
        ..SidecarTopdown::default()
    };
    Some(sidecar::topdown(sc, &path.display().to_string(), &opts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_needs_a_named_catalog_and_live_runs_have_no_phases() {
        let none = TopdownRequest::default();
        assert!(matches!(
            none.listed_catalog(),
            Err(TopdownError::Options(_))
        ));
        let v2 = TopdownRequest {
            cpu_model: Some("neoverse-v2".into()),
            ..Default::default()
        };
        assert!(v2.listed_catalog().unwrap().group("Topdown_L1").is_some());
        let phases = TopdownRequest {
            per_phase: true,
            ..Default::default()
        };
        assert!(none.check_live().is_ok() && phases.check_live().is_err());
        let bad_cpus = LiveTarget {
            cpus: Some("x".into()),
            ..Default::default()
        };
        match none.live_options(&bad_cpus) {
            Err(TopdownError::Options(m)) => assert_eq!(m, "-C x: not a CPU list like 0-3,8"),
            other => panic!("{other:?}"),
        }
        // No counts in the sidecar: no top-down section.
        let sc = Sidecar::default();
        assert!(page_topdown(&sc, Path::new("perf.data")).is_none());
    }
}
