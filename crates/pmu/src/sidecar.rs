//! Import of the PMU counts in a spelunk sidecar (`FILE.spelunk.json`, schema
//! `spelunk-sidecar/1`, what `spelunk record --emulate` writes next to its perf.data).
//!
//! The sidecar's `counters` hold the events as (architected code, name), the run `totals`, and
//! a `timeline` of cumulative snapshots per virtual core: periodic ones, one at each phase
//! begin and end (reason `annotation`, same thread and time as the annotation), at thread start
//! and exit, and a `final` one per core at the end of the run (totals are the sum of the finals).
//! From these this module builds the same [`Imported`] a `perf stat -x` import gives:
//!
//! * one scope per core (`CPU3`): the core's final snapshot; their sum is the whole run;
//! * with an interval, per-core deltas between the latest snapshots at or before each interval
//!   boundary, so the intervals of a core add up to its total exactly;
//! * one phase scope per phase name (`phase triad`): the sum over its instances of the thread's
//!   core's counts from the begin snapshot to the end snapshot.
//!
//! Emulated counters count all the time: every count has a running fraction of 1. Hardware
//! counters (`spelunk record --no-spe`) carry enabled and running times per event: multiplexed
//! counts are scaled by enabled/running, as perf scales them, with their running fraction.

use crate::catalog::{self, Catalog, Choice};
use crate::compute::{Selection, StageFilter};
use crate::counts::{EventCount, Imported, ImportedScope, Measurement};
use crate::error::PmuError;
use crate::report::{import_report, ImportOptions, Report};
use spelunk_perf::sidecar::{CounterSnapshot, Phase, Sidecar};
use spelunk_spe::Midr;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// How to import a sidecar.
#[derive(Clone, Copy, Debug, Default)]
pub struct SidecarImport {
    /// Interval length for a timeline (`-I`), in perf-clock nanoseconds; `None`: no intervals.
    pub interval_ns: Option<u64>,
}

/// The most intervals an import builds (a guard against `-I` far below the run's length).
pub const MAX_INTERVALS: u64 = 100_000;

/// The CPU the sidecar's counts were taken on (its `config.midr`), as a catalog choice: the
/// same MIDR mapping as live detection. `path` names the file in errors.
pub fn catalog_for(sidecar: &Sidecar, path: &str) -> Result<Choice, PmuError> {
    let midr = midr_of(sidecar).ok_or_else(|| PmuError::Import {
        path: path.to_string(),
        line: 0,
        message: "the sidecar does not say which CPU its counts are from (no config.midr); \
                  pass --cpu NAME or --spec FILE"
            .into(),
    })?;
    let has_slots = sidecar
        .counters
        .events
        .iter()
        .any(|(_, n)| n.eq_ignore_ascii_case("STALL_SLOT"));
    catalog::for_midr(midr, has_slots)
}

/// `config.midr` as a number (`"0x413fd0c1"` as the emulator writes it, or a JSON integer).
pub fn midr_of(sidecar: &Sidecar) -> Option<Midr> {
    match sidecar.config.get("midr")? {
        serde_json::Value::String(s) => Midr::parse(s),
        serde_json::Value::Number(n) => n.as_u64().map(Midr),
        _ => None,
    }
}

/// `config.cpu_name` (or `fallback`), with `config.platform` when the emulator was given a
/// platform preset: `Neoverse V1 (platform graviton3)`.
fn cpu_of(sidecar: &Sidecar, fallback: &str) -> String {
    let text = |k: &str| sidecar.config.get(k).and_then(|v| v.as_str());
    let cpu = text("cpu_name").unwrap_or(fallback);
    match text("platform") {
        Some(p) => format!("{cpu} (platform {p})"),
        None => cpu.to_string(),
    }
}

/// A one-line description of where the counts come from, e.g. `spelunk sidecar, emulated
/// Neoverse N1`, or `spelunk sidecar, emulated Neoverse V1 (platform graviton3)`.
pub fn describe(sidecar: &Sidecar) -> String {
    let cpu = cpu_of(sidecar, "CPU");
    if sidecar.source == "emulator" {
        format!("spelunk sidecar, emulated {cpu}")
    } else if sidecar.source.is_empty() {
        "spelunk sidecar".to_string()
    } else {
        format!("spelunk sidecar from {}, {cpu}", sidecar.source)
    }
}

/// Column `i` of the sidecar's values is catalog event `name`.
struct Column {
    index: usize,
    name: String,
}

/// Builds per-core, interval and phase counts from a sidecar. `path` names the file in errors
/// and notes.
pub fn import(
    sidecar: &Sidecar,
    path: &str,
    catalog: &Catalog,
    opts: SidecarImport,
) -> Result<Imported, PmuError> {
    let err = |message: String| PmuError::Import {
        path: path.to_string(),
        line: 0,
        message,
    };
    let c = &sidecar.counters;
    if c.events.is_empty() && c.totals.is_empty() {
        return Err(err(
            "the sidecar holds no PMU counters (counters.events and counters.totals are empty)"
                .into(),
        ));
    }
    let mut notes = Vec::new();
    if sidecar.source == "emulator" {
        notes.push(format!(
            "emulated: the counts come from spelunk's model of a {} (emulator/MODEL.md), not \
             from a hardware PMU",
            cpu_of(sidecar, "Neoverse N1")
        ));
    }
    let columns = map_columns(sidecar, catalog, &mut notes);
    let width = c.events.len();
    for (i, s) in c.timeline.iter().enumerate() {
        if s.values.len() != width {
            return Err(err(format!(
                "counters.timeline[{i}] has {} values for {width} events",
                s.values.len()
            )));
        }
    }

    // Per core: its snapshots in time order (the file's order among equal times).
    let mut by_core: BTreeMap<Option<u32>, Vec<&CounterSnapshot>> = BTreeMap::new();
    for s in &c.timeline {
        by_core.entry(s.cpu).or_default().push(s);
    }
    for snaps in by_core.values_mut() {
        snaps.sort_by_key(|s| s.time_ns);
    }
    let finals: BTreeMap<Option<u32>, &CounterSnapshot> = by_core
        .iter()
        .filter_map(|(core, snaps)| {
            snaps
                .iter()
                .rev()
                .find(|s| s.reason == "final")
                .map(|s| (*core, *s))
        })
        .collect();

    let mut scopes = Vec::new();
    if finals.is_empty() {
        if !c.timeline.is_empty() {
            return Err(err(
                "the counter timeline has no final snapshot: the run did not finish (the \
                 program was killed or the emulator failed), so its counts would be partial"
                    .into(),
            ));
        }
        // Totals only (no timeline): one scope.
        let mut events = BTreeMap::new();
        for (name, v) in &c.totals {
            match catalog_name(name, c, catalog) {
                Some(n) => {
                    events
                        .entry(n)
                        .or_insert_with(|| EventCount::counted(*v as f64, Some(1.0)));
                }
                None => notes.push(format!(
                    "{name}: not an event of the {} catalog, ignored",
                    catalog.id
                )),
            }
        }
        if opts.interval_ns.is_some() {
            return Err(err(
                "the sidecar has counter totals but no timeline: no intervals can be computed"
                    .into(),
            ));
        }
        scopes.push(ImportedScope {
            id: None,
            total: Measurement::single(events),
            ..Default::default()
        });
    } else {
        if let Some(core) = by_core.keys().find(|k| !finals.contains_key(*k)) {
            return Err(err(format!(
                "core {} has counter snapshots but no final one: the timeline is incomplete",
                core_name(*core)
            )));
        }
        check_totals(c, &finals).map_err(err)?;
        let end_ns = c.timeline.iter().map(|s| s.time_ns).max().unwrap_or(0);
        let boundaries = match opts.interval_ns {
            Some(0) => return Err(err("the interval must be longer than 0 ns".into())),
            Some(step) => {
                let n = end_ns.div_ceil(step).max(1);
                if n > MAX_INTERVALS {
                    return Err(err(format!(
                        "an interval of {step} ns makes {n} intervals over the run's {end_ns} \
                         ns (at most {MAX_INTERVALS}): choose a longer interval"
                    )));
                }
                if let Some(p) = periodic_spacing_ns(&by_core) {
                    if step < p {
                        notes.push(format!(
                            "the counters were snapshotted about every {:.1} µs: intervals \
                             shorter than that hold no new snapshot, so their counts are 0 and \
                             their metrics n/a (record with --emulator-opt=--timeline-us=N for \
                             a finer timeline)",
                            p as f64 / 1000.0
                        ));
                    }
                }
                (1..=n).map(|k| (k * step).min(end_ns)).collect()
            }
            None => Vec::new(),
        };
        for (core, snaps) in &by_core {
            let fin = finals[core];
            let mut intervals = Vec::new();
            let mut prev: Option<&CounterSnapshot> = None;
            for &t in &boundaries {
                let cur = snaps.iter().rev().find(|s| s.time_ns <= t).copied();
                let values = delta(cur, prev, width)
                    .map_err(|e| err(format!("core {}: {e}", core_name(*core))))?;
                intervals.push((
                    t as f64 / 1e9,
                    measurement_between(&columns, cur, prev, &values),
                ));
                prev = cur;
            }
            scopes.push(ImportedScope {
                id: Some(core_name(*core)),
                total: measurement_between(&columns, Some(fin), None, &fin.values),
                intervals,
                notes: Vec::new(),
            });
        }
    }
    let phases = phase_scopes(sidecar, &by_core, &columns, width, &mut notes);
    Ok(Imported {
        separator: ',',
        format: describe(sidecar),
        scopes,
        phases,
        notes,
    })
}

/// How to compute the top-down report of a sidecar's counters. The default is what
/// `spelunk topdown --import FILE` computes: both stages, no intervals, one scope for the run.
#[derive(Clone, Debug, Default)]
pub struct SidecarTopdown {
    /// A catalog to use instead of the one the sidecar's CPU maps to (a note says so when the
    /// two differ).
    pub catalog: Option<Choice>,
    /// Interval length for a timeline, in perf-clock nanoseconds.
    pub interval_ns: Option<u64>,
    pub stage: StageFilter,
    /// Metric groups or metrics to compute (empty: by `stage`).
    pub groups: Vec<String>,
    /// Decision-tree nodes to compute, with their subtrees.
    pub nodes: Vec<String>,
    /// Also report each virtual core.
    pub per_core: bool,
    /// Also report each annotated phase.
    pub per_phase: bool,
    /// Slots per cycle instead of the catalog's width.
    pub slots: Option<u32>,
}

/// The top-down report of a sidecar's counters: the catalog of its CPU (or `opts.catalog`),
/// per-core and phase scopes, intervals from its timeline, and what reading the sidecar dropped
/// as notes. `path` names the file in the report and in errors.
pub fn topdown(sidecar: &Sidecar, path: &str, opts: &SidecarTopdown) -> Result<Report, PmuError> {
    let detected = catalog_for(sidecar, path);
    let choice = match &opts.catalog {
        Some(c) => {
            let mut c = c.clone();
            if let Ok(d) = &detected {
                if d.catalog.id != c.catalog.id {
                    c.note = Some(format!(
                        "the counts are from a {} ({}); evaluated with {} as asked",
                        cpu_of(sidecar, "CPU"),
                        d.catalog.id,
                        c.catalog.id
                    ));
                }
            }
            c
        }
        None => detected?,
    };
    let imported = import(
        sidecar,
        path,
        &choice.catalog,
        SidecarImport {
            interval_ns: opts.interval_ns,
        },
    )?;
    let sel = Selection::resolve(&choice.catalog, opts.stage, &opts.groups, &opts.nodes)?;
    let mut notes: Vec<String> = choice.note.into_iter().collect();
    notes.extend(sidecar.problems.iter().cloned());
    Ok(import_report(
        &imported,
        &choice.catalog,
        &sel,
        ImportOptions {
            file: path,
            per_scope: opts.per_core,
            per_phase: opts.per_phase,
            slots: opts.slots,
            notes,
        },
    ))
}

fn core_name(core: Option<u32>) -> String {
    match core {
        Some(c) => format!("CPU{c}"),
        None => "CPU?".to_string(),
    }
}

/// Which catalog event each value column is: by architected code, else by name.
fn map_columns(sidecar: &Sidecar, catalog: &Catalog, notes: &mut Vec<String>) -> Vec<Column> {
    let mut out: Vec<Column> = Vec::new();
    let mut ignored = Vec::new();
    for (index, (code, name)) in sidecar.counters.events.iter().enumerate() {
        let by_code = u16::try_from(*code)
            .ok()
            .and_then(|c| catalog.event_name(c));
        let by_name = catalog
            .events
            .get_key_value(&name.to_ascii_uppercase())
            .map(|(k, _)| k.as_str());
        let Some(cat_name) = by_code.or(by_name) else {
            ignored.push(format!("{name} ({code:#x})"));
            continue;
        };
        if !cat_name.eq_ignore_ascii_case(name) {
            notes.push(format!("{name} ({code:#x}) read as {cat_name}"));
        }
        if out.iter().any(|c| c.name == cat_name) {
            notes.push(format!(
                "{cat_name} appears more than once in counters.events; the first is used"
            ));
            continue;
        }
        out.push(Column {
            index,
            name: cat_name.to_string(),
        });
    }
    if !ignored.is_empty() {
        notes.push(format!(
            "not events of the {} catalog, ignored: {}",
            catalog.id,
            ignored.join(", ")
        ));
    }
    out
}

/// The catalog name of a `counters.totals` key: the name of its column's code when it has a
/// column, else the name itself if the catalog knows it.
fn catalog_name(
    name: &str,
    c: &spelunk_perf::sidecar::Counters,
    catalog: &Catalog,
) -> Option<String> {
    if let Some((code, _)) = c.events.iter().find(|(_, n)| n == name) {
        if let Some(n) = u16::try_from(*code)
            .ok()
            .and_then(|c| catalog.event_name(c))
        {
            return Some(n.to_string());
        }
    }
    let upper = name.to_ascii_uppercase();
    catalog.events.contains_key(&upper).then_some(upper)
}

/// The totals must be the sum of the cores' final snapshots (that is what they are).
fn check_totals(
    c: &spelunk_perf::sidecar::Counters,
    finals: &BTreeMap<Option<u32>, &CounterSnapshot>,
) -> Result<(), String> {
    for (i, (_, name)) in c.events.iter().enumerate() {
        let sum: u64 = finals.values().map(|s| s.values[i]).sum();
        match c.totals.get(name) {
            Some(&t) if t != sum => {
                return Err(format!(
                    "counters.totals[{name}] is {t} but the cores' final snapshots add up to \
                     {sum}: the file is inconsistent"
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// `cur - prev` per column; a missing snapshot counts as all zeros (nothing counted yet).
fn delta(
    cur: Option<&CounterSnapshot>,
    prev: Option<&CounterSnapshot>,
    width: usize,
) -> Result<Vec<u64>, String> {
    let zero = vec![0u64; width];
    let c = cur.map(|s| &s.values).unwrap_or(&zero);
    let p = prev.map(|s| &s.values).unwrap_or(&zero);
    c.iter()
        .zip(p)
        .enumerate()
        .map(|(i, (a, b))| {
            a.checked_sub(*b).ok_or_else(|| {
                format!(
                    "counter column {i} decreases from {b} to {a} between the snapshots at {} \
                     and {} ns",
                    prev.map(|s| s.time_ns).unwrap_or(0),
                    cur.map(|s| s.time_ns).unwrap_or(0)
                )
            })
        })
        .collect()
}

fn measurement(columns: &[Column], values: &[u64]) -> Measurement {
    Measurement::single(
        columns
            .iter()
            .filter_map(|c| {
                let v = *values.get(c.index)?;
                Some((c.name.clone(), EventCount::counted(v as f64, Some(1.0))))
            })
            .collect(),
    )
}

/// The counts `values` between snapshots `prev` (None: the start) and `cur`. Hardware counters
/// (`spelunk record --no-spe`) carry each event's enabled and running times: a count is then
/// scaled by Δenabled / Δrunning as perf does, with its running fraction, and one that never
/// ran is "not counted". Emulated counters have no times and counted all the time.
fn measurement_between(
    columns: &[Column],
    cur: Option<&CounterSnapshot>,
    prev: Option<&CounterSnapshot>,
    values: &[u64],
) -> Measurement {
    let times = |s: Option<&CounterSnapshot>, i: usize| -> Option<(u64, u64)> {
        match s {
            None => Some((0, 0)),
            Some(s) => Some((*s.time_enabled_ns.get(i)?, *s.time_running_ns.get(i)?)),
        }
    };
    if cur.is_none_or(|c| c.time_enabled_ns.is_empty()) {
        return measurement(columns, values);
    }
    Measurement::single(
        columns
            .iter()
            .filter_map(|c| {
                let v = *values.get(c.index)?;
                let count = match (times(cur, c.index), times(prev, c.index)) {
                    (Some((en, run)), Some((en0, run0))) => {
                        let (den, drun) = (en.saturating_sub(en0), run.saturating_sub(run0));
                        if den == drun {
                            EventCount::counted(v as f64, Some(1.0))
                        } else {
                            EventCount::from_raw(v, den, drun)
                        }
                    }
                    _ => EventCount::counted(v as f64, None),
                };
                Some((c.name.clone(), count))
            })
            .collect(),
    )
}

/// The smallest spacing of consecutive periodic snapshots on any core, in ns.
fn periodic_spacing_ns(by_core: &BTreeMap<Option<u32>, Vec<&CounterSnapshot>>) -> Option<u64> {
    by_core
        .values()
        .filter_map(|snaps| {
            let t: Vec<u64> = snaps
                .iter()
                .filter(|s| s.reason == "periodic")
                .map(|s| s.time_ns)
                .collect();
            t.windows(2).map(|w| w[1] - w[0]).filter(|d| *d > 0).min()
        })
        .min()
}

/// One end of a phase instance.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum End {
    // At one time on one thread the annotation calls happened as: phases ending (innermost
    // first), then phases beginning (outermost first). The enum order plus the depth key below
    // reproduces that order.
    Stop,
    Start,
}

/// One end of a phase instance at a (thread, time): (which end, depth key, phase index).
type PhaseEnd = (End, i32, usize);

/// The instances among `idx` (one name's) that lie inside another of them on the same thread
/// at a smaller depth (recursion): a sweep per thread in start order keeping the instances
/// still open, so the cost is linear in the instances times the recursion depth (comparing
/// every pair took seconds at 200 000 instances: issue 27).
fn nested_instances(phases: &[Phase], idx: &[usize]) -> HashSet<usize> {
    let mut order: Vec<usize> = idx.to_vec();
    order.sort_by_key(|&i| (phases[i].tid, phases[i].start_ns, phases[i].depth));
    let mut nested = HashSet::new();
    // (tid, end, depth) of the instances started before and not ended before this start.
    let mut open: Vec<(u32, u64, u16)> = Vec::new();
    for i in order {
        let p = &phases[i];
        open.retain(|(tid, end, _)| *tid == p.tid && *end >= p.start_ns);
        if open
            .iter()
            .any(|(_, end, depth)| *depth < p.depth && p.end_ns <= *end)
        {
            nested.insert(i);
        }
        open.push((p.tid, p.end_ns, p.depth));
    }
    nested
}

/// Counts over each phase, summed per phase name.
fn phase_scopes(
    sidecar: &Sidecar,
    by_core: &BTreeMap<Option<u32>, Vec<&CounterSnapshot>>,
    columns: &[Column],
    width: usize,
    notes: &mut Vec<String>,
) -> Vec<ImportedScope> {
    let phases = &sidecar.phases;
    if phases.is_empty() {
        return Vec::new();
    }
    // Annotation snapshots per (tid, time), in file order.
    let mut snaps: BTreeMap<(u32, u64), Vec<&CounterSnapshot>> = BTreeMap::new();
    for s in &sidecar.counters.timeline {
        if s.reason == "annotation" {
            snaps.entry((s.tid, s.time_ns)).or_default().push(s);
        }
    }
    // Annotation events per (tid, time) in call order.
    let mut events: BTreeMap<(u32, u64), Vec<PhaseEnd>> = BTreeMap::new();
    for (i, p) in phases.iter().enumerate() {
        events
            .entry((p.tid, p.start_ns))
            .or_default()
            .push((End::Start, i32::from(p.depth), i));
        events
            .entry((p.tid, p.end_ns))
            .or_default()
            .push((End::Stop, -i32::from(p.depth), i));
    }
    let mut begin: Vec<Option<&CounterSnapshot>> = vec![None; phases.len()];
    let mut end: Vec<Option<&CounterSnapshot>> = vec![None; phases.len()];
    let mut ambiguous = BTreeSet::new();
    for (key, mut evs) in events {
        evs.sort();
        let cands = snaps.get(&key).map(Vec::as_slice).unwrap_or(&[]);
        let all_equal = cands
            .windows(2)
            .all(|w| w[0].values == w[1].values && w[0].cpu == w[1].cpu);
        // Ends with no snapshot at all: phases still open when the run (or thread) ended.
        let with_snap: Vec<_> = if cands.len() == evs.len() {
            evs.clone()
        } else {
            evs.iter()
                .filter(|(e, _, _)| *e == End::Start)
                .copied()
                .collect()
        };
        for (k, (e, _, i)) in with_snap.iter().enumerate() {
            let s = if cands.len() == with_snap.len() {
                cands.get(k).copied()
            } else if all_equal {
                cands.first().copied()
            } else {
                ambiguous.insert(*i);
                None
            };
            match e {
                End::Start => begin[*i] = s,
                End::Stop => end[*i] = s,
            }
        }
    }
    // Phases left open: counted to their thread's exit (or the core's final snapshot).
    let mut open_at_exit = BTreeSet::new();
    for (i, p) in phases.iter().enumerate() {
        if end[i].is_some() || ambiguous.contains(&i) {
            continue;
        }
        let Some(b) = begin[i] else { continue };
        let Some(core) = by_core.get(&b.cpu) else {
            continue;
        };
        end[i] = core
            .iter()
            .find(|s| s.reason == "thread-exit" && s.tid == p.tid && s.time_ns <= p.end_ns)
            .or_else(|| core.iter().rev().find(|s| s.reason == "final"))
            .copied();
        if end[i].is_some() {
            open_at_exit.insert(p.name.clone());
        }
    }

    // Instances per name, names in order of first appearance (indexed: linear in the phases).
    let mut by_name: Vec<(&str, Vec<usize>)> = Vec::new();
    let mut name_index: HashMap<&str, usize> = HashMap::new();
    for (i, p) in phases.iter().enumerate() {
        let k = *name_index.entry(p.name.as_str()).or_insert_with(|| {
            by_name.push((p.name.as_str(), Vec::new()));
            by_name.len() - 1
        });
        by_name[k].1.push(i);
    }
    let mut out = Vec::new();
    for (name, idx) in by_name {
        let nested_in_same_name = nested_instances(phases, &idx);
        let mut sum = vec![0u64; width];
        let mut used = 0usize;
        let mut threads = BTreeSet::new();
        let mut cores = BTreeSet::new();
        let mut duration_ns = 0u64;
        let mut unresolved = 0usize;
        let mut nested = 0usize;
        for &i in &idx {
            let p: &Phase = &phases[i];
            // An instance inside another instance of the same name on the same thread
            // (recursion) is already counted by the outer one.
            if nested_in_same_name.contains(&i) {
                nested += 1;
                continue;
            }
            let (Some(b), Some(e)) = (begin[i], end[i]) else {
                unresolved += 1;
                continue;
            };
            if b.cpu != e.cpu {
                unresolved += 1;
                continue;
            }
            let Ok(d) = delta(Some(e), Some(b), width) else {
                unresolved += 1;
                continue;
            };
            for (acc, v) in sum.iter_mut().zip(d) {
                *acc += v;
            }
            used += 1;
            threads.insert(p.tid);
            cores.insert(b.cpu);
            duration_ns += p.end_ns.saturating_sub(p.start_ns);
        }
        if unresolved > 0 {
            notes.push(format!(
                "phase {name}: {unresolved} of {} instance(s) have no counter snapshot at their \
                 begin or end (or an ambiguous one), so they are not counted",
                idx.len()
            ));
        }
        if used == 0 {
            continue;
        }
        let mut scope_notes = vec![format!(
            "phase {name}: {used} instance(s) on {} thread(s), {:.1} µs; counts of each \
             thread's core from the phase's begin to its end{}",
            threads.len(),
            duration_ns as f64 / 1000.0,
            if nested > 0 {
                format!(" ({nested} nested instance(s) of the same name counted once, by the outer one)")
            } else {
                String::new()
            }
        )];
        if open_at_exit.contains(name) {
            scope_notes.push(format!(
                "phase {name} was still open when its thread ended: counted to the thread's exit"
            ));
        }
        if cores.len() > 1 {
            scope_notes.push(format!(
                "phase {name} ran on {} cores; their counts are summed",
                cores.len()
            ));
        }
        out.push(ImportedScope {
            id: Some(format!("phase {name}")),
            total: measurement(columns, &sum),
            intervals: Vec::new(),
            notes: scope_notes,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sweep finds exactly the instances the definition names (another instance of the
    /// name on the same thread, at a smaller depth, spanning it), checked pair by pair here on
    /// recursive and sequential instances over two threads.
    #[test]
    fn nested_instances_are_those_inside_another_of_the_same_name() {
        let ph = |tid, depth, start_ns, end_ns| Phase {
            name: "f".into(),
            pid: Some(1),
            tid,
            depth,
            start_ns,
            end_ns,
        };
        let mut phases = Vec::new();
        for tid in [7, 8] {
            // f recursing three deep, then two instances one after the other, twice.
            for round in 0..2u64 {
                let t = round * 1000;
                phases.push(ph(tid, 1, t, t + 100));
                phases.push(ph(tid, 2, t + 10, t + 90));
                phases.push(ph(tid, 3, t + 10, t + 50));
                phases.push(ph(tid, 1, t + 200, t + 300));
                phases.push(ph(tid, 1, t + 300, t + 400));
            }
        }
        // Another thread's longer instance spans tid 7's but is not its caller.
        phases.push(ph(9, 1, 0, 5000));
        let idx: Vec<usize> = (0..phases.len()).collect();
        let want: HashSet<usize> = idx
            .iter()
            .copied()
            .filter(|&i| {
                let p = &phases[i];
                idx.iter().any(|&j| {
                    j != i
                        && phases[j].tid == p.tid
                        && phases[j].depth < p.depth
                        && phases[j].start_ns <= p.start_ns
                        && p.end_ns <= phases[j].end_ns
                })
            })
            .collect();
        assert_eq!(
            want.len(),
            8,
            "two nested per round, two rounds, two threads"
        );
        assert_eq!(nested_instances(&phases, &idx), want);
    }
}
