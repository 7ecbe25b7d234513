//! Comparing two recordings: per function, source line and data object, the change in sample
//! share, load latency and data-source mix — [perf hot-spot guide]'s `perf diff` workflow (baseline, then the
//! optimized run), with the latency and data sources perf diff does not have.
//!
//! Both sides are [`Report`]s built the same way (same filter); rows are matched by key:
//! functions by (DSO file name, function), lines by (function, source file name, line), objects
//! by (name, kind). File names, not paths, so a rebuilt binary in another directory still
//! matches. Rows are sorted by the absolute change in share, as `perf diff` sorts by Delta.

use crate::model::{GroupStats, Hotspot, LatencySummary, ObjectRow, Report};
use crate::symbolize::short_name;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Schema identifier of `spelunk diff --json`.
pub const DIFF_SCHEMA: &str = "spelunk-diff/1";

/// One side of the comparison.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DiffSide {
    pub file: String,
    pub samples_decoded: u64,
    pub samples_selected: u64,
    /// What this recording lost (as `spelunk report` lists it).
    pub losses: crate::model::Losses,
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
    pub functions: Vec<DiffRow>,
    pub lines: Vec<DiffRow>,
    pub objects: Vec<DiffRow>,
}

fn side(r: &Report) -> DiffSide {
    DiffSide {
        file: r.recording.file.clone(),
        samples_decoded: r.recording.samples_decoded,
        samples_selected: r.recording.samples_selected,
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

fn row(
    key: String,
    dso: Option<String>,
    a: Option<&GroupStats>,
    b: Option<&GroupStats>,
) -> DiffRow {
    let la = a.and_then(|g| g.load_latency.clone());
    let lb = b.and_then(|g| g.load_latency.clone());
    let both = la.as_ref().zip(lb.as_ref());
    let share = |g: Option<&GroupStats>| g.map_or(0.0, |g| g.share);
    DiffRow {
        key,
        dso,
        only_in: match (a.is_some(), b.is_some()) {
            (true, false) => Some("baseline"),
            (false, true) => Some("new"),
            _ => None,
        },
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

/// Matches `a` and `b` by `key` and builds rows sorted by |Δ share|, then key.
fn matched<'a, T: 'a>(
    a: &'a [T],
    b: &'a [T],
    key: impl Fn(&T) -> (String, Option<String>),
    stats: impl Fn(&T) -> &GroupStats,
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
        .map(|((k, dso), (x, y))| row(k, dso, x, y))
        .collect();
    rows.sort_by(|x, y| {
        y.delta_share
            .abs()
            .total_cmp(&x.delta_share.abs())
            .then(x.key.cmp(&y.key))
    });
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

/// Compares a baseline report with a new one (both built with every row kept).
pub fn diff(baseline: &Report, new: &Report) -> DiffReport {
    DiffReport {
        schema: DIFF_SCHEMA,
        baseline: side(baseline),
        new: side(new),
        filter: baseline.filter.clone(),
        functions: matched(
            &baseline.hotspots.functions,
            &new.hotspots.functions,
            hotspot_key,
            |h| &h.stats,
        ),
        lines: matched(
            &baseline.hotspots.lines,
            &new.hotspots.lines,
            line_key,
            |h| &h.stats,
        ),
        objects: matched(&baseline.objects, &new.objects, object_key, |o| &o.stats),
    }
}
