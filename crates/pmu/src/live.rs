//! Live counting for `spelunk topdown`: detects the core types (sysfs), picks each one's catalog,
//! schedules the selected metrics' events into counter groups, counts a command, a process or
//! CPUs through [`spelunk_perf::counting`] and evaluates the counts into a [`Report`].
//!
//! Everything goes through a [`PerfSys`], so the whole flow is tested here against the simulated
//! PMU of `spelunk_perf::counting::sim` on any machine; the binary passes `LinuxPerfSys`.
//!
//! ```no_run
//! use spelunk_perf::counting::LinuxPerfSys;
//! use spelunk_pmu::live::{LiveOptions, LivePlan};
//!
//! let options = LiveOptions { command: vec!["./app".into()], ..LiveOptions::default() };
//! let report = LivePlan::new(&options, &LinuxPerfSys)?.count(&LinuxPerfSys)?;
//! # Ok::<(), spelunk_pmu::live::LiveError>(())
//! ```

use crate::catalog::{self, Catalog, Choice};
use crate::compute::{Selection, StageFilter, Warning, WarningKind};
use crate::counts::{delta, Measurement, RawReading};
use crate::detect::{self, CoreType};
use crate::error::PmuError;
use crate::report::{
    cpu_report, scope_report, Counters, CpuReport, Report, ScheduleReport, Source,
};
use crate::schedule::{schedule, Budget, Schedule};
use spelunk_perf::counting::{
    self, CountingError, CountingSession, GroupReading, OpenOptions, PerfSys, StoppedChild, Target,
};
use spelunk_spe::Midr;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What a machine without a usable core PMU is told: nothing was counted, and the two ways to
/// get top-down numbers anyway.
pub const NO_PMU_HELP: &str =
    "spelunk topdown counts with the CPU's hardware PMU, which this machine \
does not offer. Nothing was counted. To count here, run the command under spelunk's emulated \
Neoverse N1: `spelunk topdown --emulate -- CMD`. To analyse counts taken on an Arm machine: \
`perf stat -x, -e <events> -o counts.csv -- CMD` there, then \
`spelunk topdown --import counts.csv --cpu-model neoverse-n1` here (see --help)";

/// Errors of a live run. The messages are the ones `spelunk topdown` prints; each names the
/// CPUs, PMU or command it is about, and every "cannot count here" case carries [`NO_PMU_HELP`].
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// The machine's CPUs or PMUs could not be detected.
    #[error("{}", NO_PMU_HELP)]
    NoPmu(#[source] PmuError),
    /// The kernel refused to open or count the events.
    #[error("{}", NO_PMU_HELP)]
    CannotCount(#[source] CountingError),
    #[error(
        "no core PMU for CPUs {cpus:?} (MIDR {midr}): /sys/bus/event_source/devices has {pmus} \
         and none lists these CPUs in a `cpus` file. {}",
        NO_PMU_HELP
    )]
    NoCorePmu {
        cpus: Vec<u32>,
        midr: Midr,
        pmus: String,
    },
    #[error(
        "no PMU counter could be opened and counted on PMU type {pmu_type}; pass --counters N \
         if you know how many there are. {}",
        NO_PMU_HELP
    )]
    NoCounter { pmu_type: u32 },
    #[error("-C {0}: none of these CPUs exists")]
    NoSuchCpus(String),
    #[error(
        "nothing to count: give a command after `--`, -p PID, -a or -C CPUS (or --import FILE)"
    )]
    NothingToCount,
    #[error(
        "--no-multiplex re-runs the command once per counter group: give a command after `--`"
    )]
    NoCommandToRerun,
    #[error("starting {command:?}")]
    Start {
        command: Vec<String>,
        #[source]
        source: std::io::Error,
    },
    #[error("running {command:?}")]
    Release {
        command: Vec<String>,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Pmu(#[from] PmuError),
    #[error(transparent)]
    Counting(#[from] CountingError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// What to count besides the command: its process tree, a running process or CPUs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CountTarget {
    /// The command given in [`LiveOptions::command`] and the children it starts.
    #[default]
    Command,
    /// An existing process and the children it creates from now on.
    Process(i32),
    /// Everything on every CPU.
    AllCpus,
    /// Everything on these CPUs.
    Cpus(CpuList),
}

/// CPUs as the user wrote them (`0-3,8`, named in the report and in errors) and as numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList {
    pub spec: String,
    pub cpus: Vec<u32>,
}

/// How to count, as typed values (the binary fills it from its flags).
#[derive(Clone, Debug)]
pub struct LiveOptions {
    /// The command to run and count; may be empty with a process or CPUs as the target.
    pub command: Vec<String>,
    pub target: CountTarget,
    /// Read the counters every this many milliseconds for a timeline (at most every 10 ms).
    pub interval_ms: Option<f64>,
    /// Without a command: stop after this many seconds (else at Ctrl-C or the process's end).
    pub duration_s: Option<f64>,
    /// All groups at once, time-sliced by the kernel; `false` runs the command once per group.
    pub multiplex: bool,
    /// Programmable counters per group to schedule for, instead of probing them.
    pub counters: Option<u32>,
    /// Slots per cycle instead of the PMU's `caps/slots` or the catalog's width.
    pub slots: Option<u32>,
    pub stage: StageFilter,
    /// Metric groups or metrics to compute (empty: by `stage`).
    pub groups: Vec<String>,
    /// Decision-tree nodes to compute, with their subtrees.
    pub nodes: Vec<String>,
    /// Root of the sysfs/procfs tree the CPUs are detected from.
    pub sysfs_root: PathBuf,
    /// A catalog for every core type instead of the one its MIDR maps to.
    pub catalog: Option<Choice>,
}

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            command: Vec::new(),
            target: CountTarget::Command,
            interval_ms: None,
            duration_s: None,
            multiplex: true,
            counters: None,
            slots: None,
            stage: StageFilter::All,
            groups: Vec::new(),
            nodes: Vec::new(),
            sysfs_root: PathBuf::from("/"),
            catalog: None,
        }
    }
}

/// Everything about counting on one core type.
struct CorePlan {
    ty: CoreType,
    pmu_type: u32,
    catalog: Catalog,
    selection: Selection,
    schedule: Schedule,
    /// Raw codes per group, and the event name of each.
    groups: Vec<Vec<(String, u64)>>,
    cpu: CpuReport,
}

/// The counting plan of a live run: per core type, its catalog, the selected metrics and their
/// counter groups. Built once (detection, probing, scheduling), then [`LivePlan::count`]ed.
pub struct LivePlan<'o> {
    options: &'o LiveOptions,
    cores: Vec<CorePlan>,
}

impl<'o> LivePlan<'o> {
    /// Detects the core types under `options.sysfs_root` and plans each one's counter groups,
    /// probing `sys` for the number of counters unless `options.counters` says it.
    pub fn new<S: PerfSys + ?Sized>(
        options: &'o LiveOptions,
        sys: &S,
    ) -> Result<LivePlan<'o>, LiveError> {
        let system = detect::detect(&options.sysfs_root).map_err(LiveError::NoPmu)?;
        let wanted: Option<&[u32]> = match &options.target {
            CountTarget::Cpus(list) => Some(&list.cpus),
            _ => None,
        };
        let mut cores = Vec::new();
        for ty in system.core_types {
            let cpus: Vec<u32> = match wanted {
                Some(w) => ty.cpus.iter().copied().filter(|c| w.contains(c)).collect(),
                None => ty.cpus.clone(),
            };
            if cpus.is_empty() {
                continue;
            }
            let Some(pmu) = ty.pmu.clone() else {
                return Err(LiveError::NoCorePmu {
                    cpus: ty.cpus,
                    midr: ty.midr,
                    pmus: system.pmu_names.join(", "),
                });
            };
            let choice = match &options.catalog {
                Some(c) => c.clone(),
                None => catalog::for_midr(ty.midr, pmu.events.contains_key("STALL_SLOT"))?,
            };
            let catalog = choice.catalog;
            let selection =
                Selection::resolve(&catalog, options.stage, &options.groups, &options.nodes)?;
            let mut notes: Vec<String> = choice.note.into_iter().collect();
            let counters = match options.counters {
                Some(n) => Counters {
                    programmable: n as usize,
                    cycle_counter: true,
                    source: "user".into(),
                },
                None => probe(sys, pmu.perf_type, &catalog, &mut notes)?,
            };
            let budget = Budget {
                programmable: counters.programmable,
                cycle_counter: counters.cycle_counter,
            };
            let metric_events: Vec<(String, BTreeSet<String>)> = selection
                .metrics()
                .into_iter()
                .filter_map(|m| {
                    let evs = catalog.metrics.get(&m)?.events.clone();
                    let uncodable: Vec<&String> = evs
                        .iter()
                        .filter(|e| !catalog.events.contains_key(*e))
                        .collect();
                    if !uncodable.is_empty() {
                        notes.push(format!("{m}: no event code for {uncodable:?}; not counted"));
                        return None;
                    }
                    Some((m, evs))
                })
                .collect();
            let schedule = schedule(&metric_events, budget);
            for (m, n) in &schedule.unschedulable {
                notes.push(format!(
                    "{m} needs {n} counters in one group but a group has {}; not counted",
                    budget.programmable
                ));
            }
            let groups = schedule
                .groups
                .iter()
                .map(|g| {
                    g.iter()
                        .filter_map(|e| catalog.events.get(e).map(|c| (e.clone(), u64::from(*c))))
                        .collect()
                })
                .collect();
            let slots = options.slots.or(pmu.slots);
            let cpu = cpu_report(&catalog, slots, Some(counters), notes);
            cores.push(CorePlan {
                ty: CoreType { cpus, ..ty },
                pmu_type: pmu.perf_type,
                catalog,
                selection,
                schedule,
                groups,
                cpu,
            });
        }
        if cores.is_empty() {
            let spec = match &options.target {
                CountTarget::Cpus(list) => list.spec.clone(),
                _ => String::new(),
            };
            return Err(LiveError::NoSuchCpus(spec));
        }
        Ok(LivePlan { options, cores })
    }

    /// Counts the target (once, or once per counter group without multiplexing) and evaluates
    /// the counts of each core type into one scope of the report.
    pub fn count<S: PerfSys + ?Sized>(&self, sys: &S) -> Result<Report, LiveError> {
        let args = self.options;
        let plans = &self.cores;
        let mut warnings: Vec<Vec<Warning>> = vec![Vec::new(); plans.len()];
        let runs: Vec<(Option<usize>, Run)> = if !args.multiplex {
            if args.command.is_empty() {
                return Err(LiveError::NoCommandToRerun);
            }
            let n = plans.iter().map(|p| p.groups.len()).max().unwrap_or(0);
            (0..n)
                .map(|g| Ok((Some(g), self.count_once(sys, Some(g))?)))
                .collect::<Result<_, LiveError>>()?
        } else {
            vec![(None, self.count_once(sys, None)?)]
        };
        let mut scopes = Vec::new();
        for (pi, p) in plans.iter().enumerate() {
            let mut total: Vec<RawReading> = Vec::new();
            for (_, r) in &runs {
                total.extend(r.total.get(pi).cloned().unwrap_or_default());
            }
            let m = Measurement::from_raw(p.groups.len(), &total, p.schedule.metric_group.clone());
            if !args.multiplex {
                warnings[pi].extend(disagreement(&m));
            }
            // Intervals (multiplexed runs only: separate runs have no common timeline).
            let mut intervals = Vec::new();
            if let [(None, run)] = runs.as_slice() {
                let mut prev: Vec<RawReading> = Vec::new();
                for (t, all) in &run.intervals {
                    let cur = all.get(pi).cloned().unwrap_or_default();
                    let d = delta(&cur, &prev);
                    intervals.push((
                        *t,
                        Measurement::from_raw(p.groups.len(), &d, p.schedule.metric_group.clone()),
                    ));
                    prev = cur;
                }
            }
            let mode = if args.multiplex {
                "multiplexed"
            } else {
                "one run per group"
            };
            let mut s = scope_report(
                &format!("{} on CPUs {}", p.catalog.id, compact_list(&p.ty.cpus)),
                &p.catalog,
                p.cpu.clone(),
                &p.selection,
                &m,
                &intervals,
                Some(ScheduleReport::new(&p.schedule, mode)),
            );
            s.totals.warnings.append(&mut warnings[pi]);
            scopes.push(s);
        }
        let mut notes = Vec::new();
        if let Some((_, r)) = runs.last() {
            if let Some(st) = r.exit {
                if !st.success() {
                    notes.push(format!("the command exited with {st}"));
                }
            }
        }
        let target = if !args.command.is_empty() {
            args.command.join(" ")
        } else {
            match &args.target {
                CountTarget::Process(p) => format!("pid {p}"),
                CountTarget::Cpus(list) => format!("CPUs {}", list.spec),
                CountTarget::AllCpus | CountTarget::Command => "CPUs all".to_string(),
            }
        };
        Ok(Report {
            schema: crate::report::SCHEMA,
            source: Source {
                kind: "live".into(),
                detail: target,
            },
            scopes,
            notes,
        })
    }

    /// One counting run of every core type's groups (or only group `only_group` of each).
    fn count_once<S: PerfSys + ?Sized>(
        &self,
        sys: &S,
        only_group: Option<usize>,
    ) -> Result<Run, LiveError> {
        let args = self.options;
        let plans = &self.cores;
        let mut child = if args.command.is_empty() {
            None
        } else {
            Some(
                StoppedChild::spawn(&args.command).map_err(|source| LiveError::Start {
                    command: args.command.clone(),
                    source,
                })?,
            )
        };
        let system_wide = matches!(args.target, CountTarget::AllCpus | CountTarget::Cpus(_));
        let pid = match args.target {
            CountTarget::Process(p) => Some(p),
            _ => None,
        };
        if child.is_none() && pid.is_none() && !system_wide {
            return Err(LiveError::NothingToCount);
        }
        let opts = OpenOptions {
            enable_on_exec: child.is_some() && !system_wide,
            inherit: !system_wide,
            exclude_kernel: false,
        };
        let mut sessions = Vec::new();
        for p in plans {
            let groups: Vec<Vec<u64>> = p
                .groups
                .iter()
                .enumerate()
                .filter(|(i, _)| only_group.is_none_or(|g| g == *i))
                .map(|(_, g)| g.iter().map(|(_, c)| *c).collect())
                .collect();
            let target = if system_wide {
                Target::Cpus(p.ty.cpus.iter().map(|&c| c as i32).collect())
            } else if let Some(pid) = pid {
                Target::Process(pid)
            } else {
                Target::Process(child.as_ref().map(|c| c.pid()).unwrap_or(0))
            };
            let mut o = opts;
            let s = match CountingSession::open(sys, p.pmu_type, &groups, &target, o) {
                Ok(s) => s,
                Err(CountingError::Open { source, .. })
                    if matches!(source.raw_os_error(), Some(1) | Some(13)) =>
                {
                    // Not allowed to count the kernel (perf_event_paranoid >= 2): user space only.
                    o.exclude_kernel = true;
                    CountingSession::open(sys, p.pmu_type, &groups, &target, o)
                        .map_err(LiveError::CannotCount)?
                }
                Err(e) => return Err(LiveError::CannotCount(e)),
            };
            if !o.enable_on_exec {
                s.enable()?;
            }
            sessions.push(s);
        }
        counting::catch_interrupt();
        let start = Instant::now();
        if let Some(c) = child.as_mut() {
            c.release().map_err(|source| LiveError::Release {
                command: args.command.clone(),
                source,
            })?;
        }
        let read_all =
            |sessions: &[CountingSession<'_, S>]| -> Result<Vec<Vec<RawReading>>, LiveError> {
                let offset = only_group.unwrap_or(0);
                sessions
                    .iter()
                    .zip(plans)
                    .map(|(s, p)| Ok(to_raw(p, &s.read()?, offset)))
                    .collect()
            };
        let tick = Duration::from_secs_f64(args.interval_ms.unwrap_or(100.0).max(10.0) / 1000.0);
        let mut intervals = Vec::new();
        let mut exit = None;
        loop {
            std::thread::sleep(tick);
            let done = match child.as_mut() {
                Some(c) => match c.try_wait()? {
                    Some(st) => {
                        exit = Some(st);
                        true
                    }
                    None => false,
                },
                None => {
                    counting::interrupted()
                        || args
                            .duration_s
                            .is_some_and(|d| start.elapsed().as_secs_f64() >= d)
                        || pid.is_some_and(|p| !counting::process_alive(p))
                }
            };
            if args.interval_ms.is_some() {
                intervals.push((start.elapsed().as_secs_f64(), read_all(&sessions)?));
            }
            if done {
                break;
            }
        }
        let total = read_all(&sessions)?;
        Ok(Run {
            total,
            intervals,
            exit,
        })
    }
}

/// How many counters a group can hold on PMU `pmu_type`: probed by counting a short spin with
/// ever larger groups, else the catalog's documented number (with a note saying so).
fn probe<S: PerfSys + ?Sized>(
    sys: &S,
    pmu_type: u32,
    catalog: &Catalog,
    notes: &mut Vec<String>,
) -> Result<Counters, LiveError> {
    let inst = u64::from(catalog.events.get("INST_RETIRED").copied().unwrap_or(0x08));
    let cyc = u64::from(catalog.events.get("CPU_CYCLES").copied().unwrap_or(0x11));
    let mut spin = || {
        let mut x = 0u64;
        for i in 0..200_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
    };
    let p = counting::probe_counters(sys, pmu_type, inst, cyc, 32, &mut spin)
        .map_err(LiveError::CannotCount)?;
    if p.programmable > 0 {
        return Ok(Counters {
            programmable: p.programmable,
            cycle_counter: p.cycle_counter,
            source: "probed".into(),
        });
    }
    match catalog.documented_counters {
        Some(n) => {
            notes.push(format!(
                "probing found no usable counter on this CPU type (the probe may have run on \
                 another core type); scheduling for the documented {n}"
            ));
            Ok(Counters {
                programmable: n as usize,
                cycle_counter: true,
                source: "catalog".into(),
            })
        }
        None => Err(LiveError::NoCounter { pmu_type }),
    }
}

/// True when the PMU's sysfs `events/` list shows that the PMU does not implement `code`.
///
/// The armv8_pmuv3 driver lists a common event (0x0000-0x003F, 0x4000-0x403F) under `events/`
/// only when the PMCEID registers say the core implements it, yet a raw event it lacks still
/// opens and counts 0 (seen under QEMU's neoverse-n1 and on real cores). Such a reading is "not
/// counted", never 0. Codes outside the PMCEID ranges are never listed, so nothing is inferred
/// for them; an empty or missing `events/` directory says nothing either.
fn absent_per_pmceid(code: u64, listed: &BTreeSet<u64>) -> bool {
    let pmceid_range = code < 0x40 || (0x4000..0x4040).contains(&code);
    pmceid_range && !listed.is_empty() && !listed.contains(&code)
}

/// The readings of a core type's sessions as named raw readings; `group_offset` is the group
/// index of the first reading (a run of one group only).
fn to_raw(plan: &CorePlan, readings: &[GroupReading], group_offset: usize) -> Vec<RawReading> {
    let listed: BTreeSet<u64> = plan
        .ty
        .pmu
        .iter()
        .flat_map(|p| p.events.values().map(|&c| u64::from(c)))
        .collect();
    let mut out = Vec::new();
    for r in readings {
        let g = r.group + group_offset;
        let Some(names) = plan.groups.get(g) else {
            continue;
        };
        for (e, (name, code)) in r.events.iter().zip(names) {
            out.push(RawReading {
                group: g,
                event: name.clone(),
                value: e.value,
                time_enabled_ns: e.time_enabled_ns,
                time_running_ns: e.time_running_ns,
                unsupported: e.unsupported || absent_per_pmceid(*code, &listed),
            });
        }
    }
    out
}

/// Cumulative readings of every core type, polled at the interval.
struct Run {
    total: Vec<Vec<RawReading>>,
    intervals: Vec<(f64, Vec<Vec<RawReading>>)>,
    exit: Option<std::process::ExitStatus>,
}

/// With one run per group, compare the events every run counted (CPU_CYCLES, INST_RETIRED).
fn disagreement(m: &Measurement) -> Vec<Warning> {
    let mut out = Vec::new();
    for ev in ["CPU_CYCLES", "INST_RETIRED"] {
        let vals: Vec<f64> = m
            .groups
            .iter()
            .filter_map(|g| g.get(ev).and_then(|c| c.value))
            .collect();
        if vals.len() < 2 {
            continue;
        }
        let (lo, hi) = vals
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
        if lo > 0.0 && (hi - lo) / lo > 0.05 {
            out.push(Warning {
                kind: WarningKind::RunsDisagree,
                message: format!(
                    "{ev} differs by {:.1} % between the {} runs ({lo:.0} .. {hi:.0}): the \
                     command does not behave the same each time, so metrics from different \
                     groups are not comparable",
                    (hi - lo) / lo * 100.0,
                    vals.len()
                ),
            });
        }
    }
    out
}

/// CPU numbers as ranges (`0-3,8`), for scope names.
fn compact_list(cpus: &[u32]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use spelunk_perf::counting::sim::SimPmu;
    use std::collections::BTreeMap;

    /// A run of `command` with the sysfs tree `tree` (crates/pmu/tests/data).
    fn options(tree: &str, command: &[&str]) -> LiveOptions {
        LiveOptions {
            command: command.iter().map(|s| s.to_string()).collect(),
            sysfs_root: PathBuf::from(format!("{}/tests/data/{tree}", env!("CARGO_MANIFEST_DIR"))),
            ..LiveOptions::default()
        }
    }

    fn live(o: &LiveOptions, pmu: &SimPmu) -> Result<Report, LiveError> {
        LivePlan::new(o, pmu)?.count(pmu)
    }

    /// QEMU's neoverse-n1 lists only these four under `events/` (docs: arm64-vm recipe); the
    /// armv8_pmuv3 driver hides PMCEID-absent common events, so L1D_CACHE (0x04) is absent,
    /// while an implementation-defined code (0x40+) is never listed and proves nothing.
    #[test]
    fn events_missing_from_sysfs_are_not_counted() {
        let listed: BTreeSet<u64> = [0x11, 0x08, 0x24, 0x23].into();
        assert!(absent_per_pmceid(0x04, &listed));
        assert!(absent_per_pmceid(0x4004, &listed));
        assert!(!absent_per_pmceid(0x08, &listed));
        assert!(!absent_per_pmceid(0x40, &listed));
        assert!(!absent_per_pmceid(0x04, &Default::default()));
    }

    /// N1 with 6 counters + cycle counter, rates giving IPC 0.5 and 80 % back-end stalls.
    fn n1_pmu() -> SimPmu {
        let mut pmu = SimPmu::new(6, true);
        for (code, rate) in [(0x11, 2.0), (0x08, 1.0), (0x24, 1.6), (0x23, 0.02)] {
            pmu.rates.insert(code, rate);
        }
        pmu
    }

    fn groups(names: &str) -> Vec<String> {
        names.split(',').map(str::to_string).collect()
    }

    #[test]
    fn live_run_on_a_simulated_n1() {
        let a = LiveOptions {
            stage: StageFilter::One,
            ..options("sysfs-altra-n1", &["true"])
        };
        let pmu = n1_pmu();
        let r = live(&a, &pmu).unwrap();
        let s = &r.scopes[0];
        assert_eq!(s.cpu.catalog, "neoverse-n1");
        let c = s.cpu.counters.as_ref().unwrap();
        assert_eq!(
            (c.programmable, c.cycle_counter, c.source.as_str()),
            (6, true, "probed")
        );
        // One group holds both cycle-accounting metrics: counted all the time.
        assert_eq!(s.schedule.as_ref().unwrap().groups.len(), 1);
        let be = s.totals.metric("backend_stalled_cycles").unwrap();
        assert!((be.value.unwrap() - 80.0).abs() < 1e-6, "{:?}", be.value);
        assert_eq!(be.running_fraction, Some(1.0));
        assert_eq!(s.totals.bottleneck_path, vec!["backend_stalled_cycles"]);
        assert_eq!(pmu.open_fds(), 0, "every counter closed");
        // The command's counters were enabled on exec, the leader disabled until then.
        let opened = pmu.opened.borrow();
        assert!(opened.iter().any(|a| a.disabled()));
    }

    #[test]
    fn multiplexed_groups_are_scaled_and_flagged() {
        // Two programmable counters: stage 2 needs several groups, time-sliced.
        let a = LiveOptions {
            counters: Some(2),
            groups: groups("Cycle_Accounting,General,L1D_Cache_Effectiveness"),
            ..options("sysfs-altra-n1", &["true"])
        };
        let mut pmu = n1_pmu();
        pmu.rates.insert(0x04, 0.5);
        pmu.rates.insert(0x03, 0.05);
        let r = live(&a, &pmu).unwrap();
        let s = &r.scopes[0];
        let n = s.schedule.as_ref().unwrap().groups.len();
        assert!(n >= 2);
        let ipc = s.totals.metric("ipc").unwrap();
        // Scaled counts keep the ratio: 1.0 / 2.0.
        assert!((ipc.value.unwrap() - 0.5).abs() < 1e-3, "{:?}", ipc.value);
        let f = ipc.running_fraction.unwrap();
        assert!((f - 1.0 / n as f64).abs() < 1e-9);
        assert_eq!(ipc.low_confidence, f < 0.5);
        let miss = s.totals.metric("l1d_cache_miss_ratio").unwrap();
        assert!((miss.value.unwrap() - 0.1).abs() < 1e-3);
    }

    #[test]
    fn no_multiplex_runs_each_group() {
        let a = LiveOptions {
            counters: Some(2),
            multiplex: false,
            groups: groups("Cycle_Accounting,General"),
            ..options("sysfs-altra-n1", &["true"])
        };
        let pmu = n1_pmu();
        let r = live(&a, &pmu).unwrap();
        let s = &r.scopes[0];
        assert_eq!(s.schedule.as_ref().unwrap().mode, "one run per group");
        let be = s.totals.metric("backend_stalled_cycles").unwrap();
        assert_eq!(
            be.running_fraction,
            Some(1.0),
            "a group alone is never time-sliced"
        );
        // The simulated runs are identical, so no disagreement.
        assert!(!s
            .totals
            .warnings
            .iter()
            .any(|w| w.kind == WarningKind::RunsDisagree));
    }

    #[test]
    fn interval_timeline_from_a_live_run() {
        let a = LiveOptions {
            stage: StageFilter::One,
            interval_ms: Some(10.0),
            ..options("sysfs-altra-n1", &["sleep", "0.1"])
        };
        let mut pmu = n1_pmu();
        pmu.advance_per_read_ns = 1_000_000;
        let r = live(&a, &pmu).unwrap();
        let s = &r.scopes[0];
        assert!(s.intervals.len() >= 3, "{} intervals", s.intervals.len());
        // Every interval's delta has the simulated 80 % back-end stalls.
        for iv in &s.intervals[1..] {
            let v = iv.metrics["backend_stalled_cycles"].expect("value");
            assert!((v - 80.0).abs() < 0.5, "{v}");
            assert_eq!(iv.bottleneck, vec!["backend_stalled_cycles"]);
        }
        assert!(s.intervals.windows(2).all(|w| w[0].time_s < w[1].time_s));
    }

    #[test]
    fn runs_that_disagree_are_reported() {
        let mut m = Measurement::default();
        for v in [100.0, 120.0] {
            let mut g = BTreeMap::new();
            g.insert(
                "CPU_CYCLES".to_string(),
                crate::EventCount::counted(v, Some(1.0)),
            );
            m.groups.push(g);
        }
        let w = disagreement(&m);
        assert_eq!(w.len(), 1);
        assert!(w[0].message.contains("20.0 %"), "{}", w[0].message);
    }

    /// The error and its causes on one line, as the binary prints them.
    fn chain(e: &LiveError) -> String {
        let mut s = e.to_string();
        let mut cur: Option<&dyn std::error::Error> = std::error::Error::source(e);
        while let Some(c) = cur {
            s += &format!(": {c}");
            cur = c.source();
        }
        s
    }

    #[test]
    fn x86_vm_exits_with_an_honest_message() {
        let a = options("sysfs-x86-vm", &["true"]);
        let err = chain(&live(&a, &n1_pmu()).unwrap_err());
        assert!(err.contains("hardware PMU"), "{err}");
        assert!(err.contains("--import"), "{err}");
        assert!(err.contains("GenuineIntel"), "{err}");
        // --emulate is offered as available, not as a plan.
        assert!(err.contains("`spelunk topdown --emulate -- CMD`"), "{err}");
        assert!(!err.contains("not available"), "{err}");
    }

    #[test]
    fn kernel_without_pmu_support_is_named() {
        let a = options("sysfs-altra-n1", &["true"]);
        let mut pmu = n1_pmu();
        pmu.fail_all = Some(2); // ENOENT
        let err = chain(&live(&a, &pmu).unwrap_err());
        assert!(err.contains("--import"), "{err}");
        assert!(
            err.contains("does not implement the event, or there is no hardware PMU"),
            "{err}"
        );
    }

    #[test]
    fn cpu_lists_compact() {
        assert_eq!(compact_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
    }
}
