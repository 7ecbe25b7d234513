//! Comparing two recordings: did the change make the program faster, and where. The totals
//! before and after (cycles and instructions from the recordings' PMU counts when they carry
//! them, duration, samples, loads, load latency), then per function, source line and data
//! object the change in *cost* — the estimated cycles at stake — with its sampling error, and
//! the load latency and data-source changes `perf diff` does not show ([perf hot-spot guide]'s
//! `perf diff` workflow: baseline, then the optimized run).
//!
//! Both sides are [`Report`]s built the same way (same filter); rows are matched by key:
//! functions by (DSO file name, function), lines by (function, source file name, line), objects
//! by (name, kind). File names, not paths, so a rebuilt binary in another directory still
//! matches. Rows are ranked by the absolute change in cost, those within the sampling error
//! (noise) last; docs/diff.md states the formulas.

use crate::model::{GroupStats, Hotspot, LatencySummary, ObjectRow, Report};
use crate::symbolize::short_name;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Schema identifier of `spelunk diff --json` (2: totals, cost, noise; rows ranked by cost).
pub const DIFF_SCHEMA: &str = "spelunk-diff/2";

/// A recording's PMU counter totals over the run, by event name (its sidecar's; empty when it
/// has none).
pub type CounterTotals = BTreeMap<String, u64>;

/// The counter totals the diff leads with: (event, what it counts). CPU_CYCLES and
/// INST_RETIRED are the Arm architected common events 0x0011 and 0x0008 (Arm Architecture
/// Reference Manual, "PMU events and event numbers").
pub const CYCLES_EVENT: &str = "CPU_CYCLES";
pub const INSTRUCTIONS_EVENT: &str = "INST_RETIRED";

/// How many standard errors of the change a row must exceed not to be noise (2: about 95 %
/// two-sided under the normal approximation; docs/methodology/statistics.md).
pub const NOISE_SIGMAS: f64 = 2.0;

/// One side of the comparison.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DiffSide {
    pub file: String,
    pub samples_decoded: u64,
    pub samples_selected: u64,
    /// Operations per sample behind every estimate of this side: the recording's effective
    /// sampling interval (docs/methodology/statistics.md). None when the recording does not
    /// say it; its estimates then use 1 (sampled figures, not estimates), and `notes` says so.
    pub interval: Option<u64>,
    /// Recorded under spelunk's emulator (its counts are the emulator's model).
    pub emulated: bool,
    /// What this recording lost (as `spelunk report` lists it).
    pub losses: crate::model::Losses,
}

/// A figure before (baseline) and after (new).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Change {
    pub baseline: f64,
    pub new: f64,
    /// new ÷ baseline; None when the baseline is 0.
    pub ratio: Option<f64>,
}

impl Change {
    pub fn new(baseline: f64, new: f64) -> Change {
        Change {
            baseline,
            new,
            ratio: (baseline != 0.0).then(|| new / baseline),
        }
    }
}

/// The totals before and after: what the diff leads with.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DiffTotals {
    /// CPU_CYCLES over the run, from the recordings' counter totals (an emulated run's
    /// sidecar); None unless both have it. Counts the whole run, whatever the filter.
    pub cycles: Option<Change>,
    /// INST_RETIRED over the run, likewise.
    pub instructions: Option<Change>,
    /// Time from the first to the last selected sample (ns).
    pub duration_ns: Change,
    /// Selected samples.
    pub samples: Change,
    /// samples × interval: the operations the samples stand for.
    pub estimated_ops: Change,
    /// Load samples.
    pub loads: Change,
    /// loads × interval.
    pub estimated_loads: Change,
    /// Σ of the sampled loads' total latency × interval (cycles): the load latency the run
    /// spent, estimated.
    pub load_latency_sum_cycles: Change,
    /// Mean total latency of the sampled loads (cycles); None unless both sides have loads
    /// with a latency.
    pub load_latency_mean_cycles: Option<Change>,
    /// The selection's cost (the rows' definition, over every selected sample).
    pub cost_cycles: Change,
    /// The noise threshold of the change in cost: 2 standard errors (cycles; as the rows').
    pub cost_noise_cycles: f64,
}

/// What a row's change in cost means once the sampling error is accounted for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The cost fell by more than the noise threshold.
    Improved,
    /// The cost rose by more than the noise threshold.
    Regressed,
    /// |Δ cost| is within 2 standard errors: sampling alone could explain it.
    Noise,
}

/// A finding of `spelunk advise` (issue 24) that appeared, disappeared or persisted between
/// the recordings: the same class in the same function (a fix moves lines, not functions).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FindingChange {
    /// The finding's class (docs/advise.md's vocabulary).
    pub class: String,
    /// Where the finding is (function, source line).
    pub location: String,
    /// `appeared`, `disappeared` or `persisted`.
    pub status: String,
    pub cost_baseline_cycles: Option<f64>,
    pub cost_new_cycles: Option<f64>,
}

/// A data source's share of a group's loads on both sides.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SourceDelta {
    pub source: String,
    pub loads_baseline: u64,
    pub loads_new: u64,
    /// loads of this source ÷ the group's loads with a source.
    pub share_baseline: f64,
    pub share_new: f64,
    pub delta: f64,
}

/// One matched row.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DiffRow {
    pub key: String,
    pub dso: Option<String>,
    /// `baseline` or `new` when the row has samples on one side only.
    pub only_in: Option<&'static str>,
    /// Estimated cycles at stake on each side: interval × (Σ the sampled loads' load-to-use latency
    /// + 1 per other sample) (docs/diff.md).
    pub cost_baseline_cycles: f64,
    /// The same in the new recording.
    pub cost_new_cycles: f64,
    /// cost_new − cost_baseline.
    pub delta_cost_cycles: f64,
    /// cost_new ÷ cost_baseline; None when the row is only in the new recording.
    pub cost_ratio: Option<f64>,
    /// The noise threshold: 2 standard errors of delta_cost_cycles, the variance of each
    /// side's cost being interval² × Σ weight² (compound Poisson; docs/diff.md). A change
    /// smaller than this is `noise`.
    pub noise_cycles: f64,
    pub verdict: Verdict,
    pub samples_baseline: u64,
    pub samples_new: u64,
    pub share_baseline: f64,
    pub share_new: f64,
    /// share_new − share_baseline (perf diff's "Delta Abs").
    pub delta_share: f64,
    pub loads_baseline: u64,
    pub loads_new: u64,
    pub latency_baseline: Option<LatencySummary>,
    pub latency_new: Option<LatencySummary>,
    /// new − baseline of the loads' total latency (cycles), when both sides have loads.
    pub delta_mean: Option<f64>,
    pub delta_p50: Option<i64>,
    pub delta_p99: Option<i64>,
    pub sources: Vec<SourceDelta>,
}

#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DiffReport {
    pub schema: &'static str,
    pub baseline: DiffSide,
    pub new: DiffSide,
    pub filter: Vec<String>,
    /// The totals before and after.
    pub totals: DiffTotals,
    /// What the comparison assumed (an unknown or differing sampling interval, missing
    /// counters), one sentence each.
    pub notes: Vec<String>,
    /// `spelunk advise`'s findings on each side, matched by class and function: disappeared
    /// (the fix removed the cause), appeared, persisted. Absent when a side was not advised.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub findings: Option<Vec<FindingChange>>,
    /// Rows ranked by |delta_cost_cycles|, noise rows after the others.
    pub functions: Vec<DiffRow>,
    pub lines: Vec<DiffRow>,
    pub objects: Vec<DiffRow>,
}

/// A group's cost in sampled cycles and the sum of its squared weights: each sample weighs its
/// load-to-use latency (total − issue) when it is a load with one, else
/// [`crate::agg::OTHER_OP_CYCLES`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Weights {
    pub sum: f64,
    pub sum_squares: f64,
}

/// The weights of a group's samples (docs/diff.md, "Cost").
pub fn weights(g: &GroupStats) -> Weights {
    let with_latency = g.load_latency.as_ref().map_or(0, |l| l.count);
    let others = g.samples.saturating_sub(with_latency) as f64;
    let w = crate::agg::OTHER_OP_CYCLES;
    Weights {
        sum: g.load_latency_moments.sum_cycles as f64 + w * others,
        sum_squares: g.load_latency_moments.sum_squares as f64 + w * w * others,
    }
}

/// A side's operations per sample, for the estimates (1 when unknown).
fn interval(r: &Report) -> Option<u64> {
    r.recording
        .sampling
        .as_ref()
        .and_then(|s| s.effective_interval)
        .or_else(|| {
            r.recording
                .sampling_quality
                .as_ref()
                .and_then(|q| q.interval)
        })
        .filter(|i| *i > 0)
}

/// The cost on both sides, its change, the noise threshold and the verdict.
struct Cost {
    baseline: f64,
    new: f64,
    noise: f64,
    verdict: Verdict,
}

fn cost(a: Option<&GroupStats>, b: Option<&GroupStats>, ia: f64, ib: f64) -> Cost {
    let (wa, wb) = (
        a.map(weights).unwrap_or_default(),
        b.map(weights).unwrap_or_default(),
    );
    let (ca, cb) = (ia * wa.sum, ib * wb.sum);
    let noise = NOISE_SIGMAS * (ia * ia * wa.sum_squares + ib * ib * wb.sum_squares).sqrt();
    let delta = cb - ca;
    let verdict = if delta == 0.0 || delta.abs() < noise {
        Verdict::Noise
    } else if delta < 0.0 {
        Verdict::Improved
    } else {
        Verdict::Regressed
    };
    Cost {
        baseline: ca,
        new: cb,
        noise,
        verdict,
    }
}

fn side(r: &Report) -> DiffSide {
    DiffSide {
        file: r.recording.file.clone(),
        samples_decoded: r.recording.samples_decoded,
        samples_selected: r.recording.samples_selected,
        interval: interval(r),
        emulated: r.recording.emulated,
        losses: r.recording.losses.clone(),
    }
}

fn source_deltas(a: Option<&GroupStats>, b: Option<&GroupStats>) -> Vec<SourceDelta> {
    let count = |g: Option<&GroupStats>, s: &str| {
        g.and_then(|g| g.sources.iter().find(|x| x.source == s))
            .map_or(0, |x| x.loads)
    };
    let total = |g: Option<&GroupStats>| g.map_or(0, |g| g.sources.iter().map(|x| x.loads).sum());
    let (ta, tb) = (total(a), total(b));
    let names: BTreeSet<&str> = a
        .iter()
        .chain(b.iter())
        .flat_map(|g| g.sources.iter().map(|x| x.source.as_str()))
        .collect();
    let frac = |n: u64, d: u64| if d == 0 { 0.0 } else { n as f64 / d as f64 };
    let mut v: Vec<SourceDelta> = names
        .into_iter()
        .map(|s| {
            let (la, lb) = (count(a, s), count(b, s));
            let (sa, sb) = (frac(la, ta), frac(lb, tb));
            SourceDelta {
                source: s.to_string(),
                loads_baseline: la,
                loads_new: lb,
                share_baseline: sa,
                share_new: sb,
                delta: sb - sa,
            }
        })
        .collect();
    v.sort_by(|x, y| {
        y.delta
            .abs()
            .total_cmp(&x.delta.abs())
            .then(x.source.cmp(&y.source))
    });
    v
}

/// Operations per sample of each side (1 when unknown).
#[derive(Clone, Copy)]
struct Intervals(f64, f64);

fn row(
    key: String,
    dso: Option<String>,
    a: Option<&GroupStats>,
    b: Option<&GroupStats>,
    iv: Intervals,
) -> DiffRow {
    let la = a.and_then(|g| g.load_latency.clone());
    let lb = b.and_then(|g| g.load_latency.clone());
    let both = la.as_ref().zip(lb.as_ref());
    let share = |g: Option<&GroupStats>| g.map_or(0.0, |g| g.share);
    let c = cost(a, b, iv.0, iv.1);
    DiffRow {
        key,
        dso,
        only_in: match (a.is_some(), b.is_some()) {
            (true, false) => Some("baseline"),
            (false, true) => Some("new"),
            _ => None,
        },
        cost_baseline_cycles: c.baseline,
        cost_new_cycles: c.new,
        delta_cost_cycles: c.new - c.baseline,
        cost_ratio: (c.baseline > 0.0).then(|| c.new / c.baseline),
        noise_cycles: c.noise,
        verdict: c.verdict,
        samples_baseline: a.map_or(0, |g| g.samples),
        samples_new: b.map_or(0, |g| g.samples),
        share_baseline: share(a),
        share_new: share(b),
        delta_share: share(b) - share(a),
        loads_baseline: a.map_or(0, |g| g.loads),
        loads_new: b.map_or(0, |g| g.loads),
        delta_mean: both.map(|(x, y)| y.mean - x.mean),
        delta_p50: both.map(|(x, y)| i64::from(y.p50) - i64::from(x.p50)),
        delta_p99: both.map(|(x, y)| i64::from(y.p99) - i64::from(x.p99)),
        latency_baseline: la,
        latency_new: lb,
        sources: source_deltas(a, b),
    }
}

/// A row's key (name, DSO file name) and its groups on each side.
type RowKey = (String, Option<String>);
type Pair<'a> = (Option<&'a GroupStats>, Option<&'a GroupStats>);

/// Rows that are not noise first, each part by |Δ cost| (largest first), then key.
fn rank(rows: &mut [DiffRow]) {
    rows.sort_by(|x, y| {
        (x.verdict == Verdict::Noise)
            .cmp(&(y.verdict == Verdict::Noise))
            .then(
                y.delta_cost_cycles
                    .abs()
                    .total_cmp(&x.delta_cost_cycles.abs()),
            )
            .then(x.key.cmp(&y.key))
            .then(x.dso.cmp(&y.dso))
    });
}

/// Matches `a` and `b` by `key` and builds rows ranked by [`rank`].
fn matched<'a, T: 'a>(
    a: &'a [T],
    b: &'a [T],
    key: impl Fn(&T) -> (String, Option<String>),
    stats: impl Fn(&T) -> &GroupStats,
    iv: Intervals,
) -> Vec<DiffRow> {
    let mut m: BTreeMap<RowKey, Pair<'_>> = BTreeMap::new();
    for x in a {
        m.entry(key(x)).or_default().0 = Some(stats(x));
    }
    for x in b {
        m.entry(key(x)).or_default().1 = Some(stats(x));
    }
    let mut rows: Vec<DiffRow> = m
        .into_iter()
        .map(|((k, dso), (x, y))| row(k, dso, x, y, iv))
        .collect();
    rank(&mut rows);
    rows
}

fn hotspot_key(h: &Hotspot) -> (String, Option<String>) {
    (
        h.key.clone(),
        h.dso.as_deref().map(|d| short_name(d).to_string()),
    )
}

fn line_key(h: &Hotspot) -> (String, Option<String>) {
    let f = h.function.clone().unwrap_or_default();
    (
        format!("{f} {}", h.key),
        h.dso.as_deref().map(|d| short_name(d).to_string()),
    )
}

fn object_key(o: &ObjectRow) -> (String, Option<String>) {
    (
        format!("{} ({})", o.name, o.kind),
        o.dso.as_deref().map(|d| short_name(d).to_string()),
    )
}

fn totals(
    a: &Report,
    b: &Report,
    counters: [Option<&CounterTotals>; 2],
    iv: Intervals,
) -> DiffTotals {
    let counter = |name: &str| {
        let [ca, cb] = counters.map(|c| c.and_then(|c| c.get(name)).copied());
        ca.zip(cb).map(|(x, y)| Change::new(x as f64, y as f64))
    };
    let (ta, tb) = (&a.totals, &b.totals);
    let count = |f: fn(&GroupStats) -> u64| Change::new(f(ta) as f64, f(tb) as f64);
    let estimated =
        |f: fn(&GroupStats) -> u64| Change::new(iv.0 * f(ta) as f64, iv.1 * f(tb) as f64);
    let mean = |g: &GroupStats| g.load_latency.as_ref().map(|l| l.mean);
    let c = cost(Some(ta), Some(tb), iv.0, iv.1);
    DiffTotals {
        cycles: counter(CYCLES_EVENT),
        instructions: counter(INSTRUCTIONS_EVENT),
        duration_ns: Change::new(
            a.recording.duration_ns as f64,
            b.recording.duration_ns as f64,
        ),
        samples: count(|g| g.samples),
        estimated_ops: estimated(|g| g.samples),
        loads: count(|g| g.loads),
        estimated_loads: estimated(|g| g.loads),
        load_latency_sum_cycles: Change::new(
            iv.0 * ta.load_latency_moments.sum_cycles as f64,
            iv.1 * tb.load_latency_moments.sum_cycles as f64,
        ),
        load_latency_mean_cycles: mean(ta).zip(mean(tb)).map(|(x, y)| Change::new(x, y)),
        cost_cycles: Change::new(c.baseline, c.new),
        cost_noise_cycles: c.noise,
    }
}

fn notes(a: &DiffSide, b: &DiffSide, counters: [Option<&CounterTotals>; 2]) -> Vec<String> {
    let mut n = Vec::new();
    match (a.interval, b.interval) {
        (Some(x), Some(y)) if x != y => n.push(format!(
            "the sampling intervals differ ({x} and {y} operations per sample): samples are \
             compared as estimated counts (samples × interval), never raw"
        )),
        (Some(_), Some(_)) => {}
        (x, y) => {
            let unknown: Vec<&str> = [(x, "A"), (y, "B")]
                .iter()
                .filter(|(i, _)| i.is_none())
                .map(|(_, s)| *s)
                .collect();
            n.push(format!(
                "the sampling interval of {} is unknown: its costs and estimates count each \
                 sample once (interval 1){}",
                unknown.join(" and "),
                if unknown.len() == 1 {
                    ", so they do not compare with the other side's"
                } else {
                    ""
                }
            ));
        }
    }
    let has = |c: Option<&CounterTotals>| c.is_some_and(|c| c.contains_key(CYCLES_EVENT));
    match (has(counters[0]), has(counters[1])) {
        (true, true) => {}
        (false, false) => n.push(format!(
            "no {CYCLES_EVENT} counts in either recording (record with --emulate, or with a \
             counter sidecar): the totals are the samples' estimates"
        )),
        (ha, _) => n.push(format!(
            "only {} has {CYCLES_EVENT} counts: cycles are not compared",
            if ha { "A" } else { "B" }
        )),
    }
    n
}

/// Compares a baseline report with a new one (both built with every row kept), with each
/// recording's PMU counter totals when it has them (`counters`: baseline's, new's).
pub fn diff(baseline: &Report, new: &Report, counters: [Option<&CounterTotals>; 2]) -> DiffReport {
    let (sa, sb) = (side(baseline), side(new));
    let iv = Intervals(
        sa.interval.unwrap_or(1) as f64,
        sb.interval.unwrap_or(1) as f64,
    );
    DiffReport {
        schema: DIFF_SCHEMA,
        totals: totals(baseline, new, counters, iv),
        notes: notes(&sa, &sb, counters),
        baseline: sa,
        new: sb,
        filter: baseline.filter.clone(),
        findings: finding_changes(baseline, new),
        functions: matched(
            &baseline.hotspots.functions,
            &new.hotspots.functions,
            hotspot_key,
            |h| &h.stats,
            iv,
        ),
        lines: matched(
            &baseline.hotspots.lines,
            &new.hotspots.lines,
            line_key,
            |h| &h.stats,
            iv,
        ),
        objects: matched(
            &baseline.objects,
            &new.objects,
            object_key,
            |o| &o.stats,
            iv,
        ),
    }
}

/// The findings of the two sides matched by (class, function): disappeared first (largest
/// cost first), then appeared, then persisted. None unless both reports carry advice.
fn finding_changes(baseline: &Report, new: &Report) -> Option<Vec<FindingChange>> {
    use crate::model::advise::Finding;
    let (a, b) = (baseline.advice.as_ref()?, new.advice.as_ref()?);
    let key = |f: &Finding| (f.class.name().to_string(), f.location.function.clone());
    let place = |f: &Finding| {
        let func = f.location.function.as_deref().unwrap_or("[unknown]");
        match (&f.location.file, f.location.line) {
            (Some(file), Some(line)) => format!("{func} at {file}:{line}"),
            _ => func.to_string(),
        }
    };
    let mut out = Vec::new();
    for f in &a.findings {
        let other = b.findings.iter().find(|g| key(g) == key(f));
        out.push(FindingChange {
            class: f.class.name().to_string(),
            location: place(other.unwrap_or(f)),
            status: if other.is_some() {
                "persisted"
            } else {
                "disappeared"
            }
            .into(),
            cost_baseline_cycles: Some(f.gain.cycles_at_stake),
            cost_new_cycles: other.map(|g| g.gain.cycles_at_stake),
        });
    }
    for g in &b.findings {
        if !a.findings.iter().any(|f| key(f) == key(g)) {
            out.push(FindingChange {
                class: g.class.name().to_string(),
                location: place(g),
                status: "appeared".into(),
                cost_baseline_cycles: None,
                cost_new_cycles: Some(g.gain.cycles_at_stake),
            });
        }
    }
    let rank = |c: &FindingChange| match c.status.as_str() {
        "disappeared" => 0,
        "appeared" => 1,
        _ => 2,
    };
    out.sort_by(|x, y| {
        rank(x).cmp(&rank(y)).then(
            y.cost_baseline_cycles
                .or(y.cost_new_cycles)
                .unwrap_or(0.0)
                .total_cmp(&x.cost_baseline_cycles.or(x.cost_new_cycles).unwrap_or(0.0)),
        )
    });
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{LatencyMoments, Sampling};

    /// A group of `n` loads of `latency` cycles and `others` other samples.
    fn group(loads: u64, latency: u16, others: u64) -> GroupStats {
        let l = u128::from(latency);
        GroupStats {
            samples: loads + others,
            loads,
            other: others,
            load_latency: (loads > 0).then(|| LatencySummary {
                count: loads,
                mean: f64::from(latency),
                min: latency,
                p50: latency,
                p90: latency,
                p99: latency,
                max: latency,
            }),
            load_latency_moments: LatencyMoments {
                sum_cycles: u128::from(loads) * l,
                sum_squares: u128::from(loads) * l * l,
            },
            ..Default::default()
        }
    }

    fn report(interval: Option<u64>, functions: &[(&str, GroupStats)]) -> Report {
        let mut r = Report::default();
        let selected: u64 = functions.iter().map(|(_, g)| g.samples).sum();
        r.recording.samples_selected = selected;
        r.recording.sampling = interval.map(|i| Sampling {
            requested_period: Some(i),
            min_interval: None,
            base_interval: Some(i),
            jitter: false,
            effective_interval: Some(i),
            note: None,
        });
        let mut totals = GroupStats::default();
        for (name, g) in functions {
            let mut g = g.clone();
            g.share = g.samples as f64 / selected as f64;
            totals.samples += g.samples;
            totals.loads += g.loads;
            totals.load_latency_moments.sum_cycles += g.load_latency_moments.sum_cycles;
            totals.load_latency_moments.sum_squares += g.load_latency_moments.sum_squares;
            r.hotspots.functions.push(Hotspot {
                key: name.to_string(),
                dso: Some("/bin/app".into()),
                function: Some(name.to_string()),
                file: None,
                line: None,
                address: None,
                function_offset: None,
                stats: g,
            });
        }
        let with_latency: u64 = functions
            .iter()
            .filter_map(|(_, g)| g.load_latency.as_ref().map(|l| l.count))
            .sum();
        totals.load_latency = (with_latency > 0).then(|| LatencySummary {
            count: with_latency,
            mean: totals.load_latency_moments.sum_cycles as f64 / with_latency as f64,
            ..Default::default()
        });
        r.totals = totals;
        r
    }

    /// The fixed function's loads go from 100 to 20 cycles while the rest of the program
    /// shrinks, so its share rises (0.5 → 0.83): it must rank first, as improved, 5× less.
    #[test]
    fn a_fixed_function_reads_as_improved_though_its_share_rises() {
        let a = report(
            Some(1024),
            &[("hot", group(1000, 100, 0)), ("rest", group(0, 0, 1000))],
        );
        let b = report(
            Some(1024),
            &[("hot", group(1000, 20, 0)), ("rest", group(0, 0, 200))],
        );
        let d = diff(&a, &b, [None, None]);
        let hot = &d.functions[0];
        assert_eq!(hot.key, "hot");
        assert!(hot.delta_share > 0.3, "its share rose: {}", hot.delta_share);
        // 1024 × 1000 × 100 and 1024 × 1000 × 20 cycles.
        assert_eq!(hot.cost_baseline_cycles, 102_400_000.0);
        assert_eq!(hot.cost_new_cycles, 20_480_000.0);
        assert_eq!(hot.cost_ratio, Some(0.2));
        assert_eq!(hot.verdict, Verdict::Improved);
        // 2 × 1024 × √(1000 × 100² + 1000 × 20²).
        let noise = 2.0 * 1024.0 * (10_400_000f64).sqrt();
        assert!((hot.noise_cycles - noise).abs() < 1e-6);
        let rest = &d.functions[1];
        assert_eq!(
            (rest.key.as_str(), rest.verdict),
            ("rest", Verdict::Improved)
        );
        // Totals: cost 1024 × (100000 + 1000 × ¼) → 1024 × (20000 + 200 × ¼).
        let t = &d.totals;
        assert_eq!(t.cost_cycles.baseline, 1024.0 * 100_250.0);
        assert_eq!(t.cost_cycles.new, 1024.0 * 20_050.0);
        assert!((t.cost_cycles.ratio.unwrap() - 0.2).abs() < 1e-12);
        assert_eq!(t.load_latency_sum_cycles.new, 1024.0 * 20_000.0);
        assert_eq!(t.samples.ratio, Some(0.6));
        assert!(t.cycles.is_none());
        assert!(d.notes.iter().any(|n| n.contains("no CPU_CYCLES")));
    }

    /// 1000 → 1040 samples of weight ¼ is 10 against a threshold of 2√(2040/16) ≈ 23: noise; a row
    /// with one sample on one side is noise too, and both come after a real change.
    #[test]
    fn changes_within_the_sampling_error_are_noise_and_last() {
        let a = report(
            Some(256),
            &[("steady", group(0, 0, 1000)), ("slow", group(500, 50, 0))],
        );
        let b = report(
            Some(256),
            &[
                ("steady", group(0, 0, 1040)),
                ("slow", group(500, 80, 0)),
                ("loader", group(0, 0, 1)),
            ],
        );
        let d = diff(&a, &b, [None, None]);
        let keys: Vec<(&str, Verdict)> = d
            .functions
            .iter()
            .map(|r| (r.key.as_str(), r.verdict))
            .collect();
        assert_eq!(
            keys,
            [
                ("slow", Verdict::Regressed),
                ("steady", Verdict::Noise),
                ("loader", Verdict::Noise)
            ]
        );
        let steady = &d.functions[1];
        assert_eq!(steady.delta_cost_cycles, 10.0 * 256.0);
        assert!((steady.noise_cycles - 2.0 * 256.0 * (2040.0f64 / 16.0).sqrt()).abs() < 1e-6);
        assert_eq!(d.functions[2].only_in, Some("new"));
        assert_eq!(d.functions[2].cost_ratio, None);
    }

    /// Half the samples at twice the interval are the same operations: no change, and the
    /// note says the intervals differ.
    #[test]
    fn different_intervals_compare_estimated_counts() {
        let a = report(Some(512), &[("f", group(0, 0, 2000))]);
        let b = report(Some(1024), &[("f", group(0, 0, 1000))]);
        let mut ca = CounterTotals::new();
        ca.insert("CPU_CYCLES".into(), 5_400_000);
        ca.insert("INST_RETIRED".into(), 2_000_000);
        let mut cb = CounterTotals::new();
        cb.insert("CPU_CYCLES".into(), 1_000_000);
        cb.insert("INST_RETIRED".into(), 2_000_000);
        let d = diff(&a, &b, [Some(&ca), Some(&cb)]);
        let f = &d.functions[0];
        assert_eq!(
            (f.cost_baseline_cycles, f.cost_new_cycles),
            (256_000.0, 256_000.0)
        );
        assert_eq!(f.verdict, Verdict::Noise);
        assert_eq!(d.totals.estimated_ops.ratio, Some(1.0));
        assert_eq!(d.totals.samples.ratio, Some(0.5));
        assert!(d.notes.iter().any(|n| n.contains("512 and 1024")));
        let cycles = d.totals.cycles.unwrap();
        assert_eq!(cycles.ratio, Some(1.0 / 5.4));
        assert_eq!(d.totals.instructions.unwrap().ratio, Some(1.0));
        // Unknown interval: counted once per sample (a quarter cycle each), and said.
        let d = diff(&report(None, &[("f", group(0, 0, 10))]), &b, [None, None]);
        assert_eq!(d.functions[0].cost_baseline_cycles, 2.5);
        assert!(d
            .notes
            .iter()
            .any(|n| n.contains("interval of A is unknown")));
    }
}
