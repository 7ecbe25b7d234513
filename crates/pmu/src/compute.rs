//! Metric values from counts: selection of what to compute, evaluation, the stage-1 decision
//! tree with the bottleneck marked, and sanity checks on the counts.

use crate::catalog::{Catalog, Stage};
use crate::counts::Measurement;
use crate::describe::Threshold;
use crate::error::PmuError;
use crate::expr::{Constant, Env, Unavailable};
use serde::Serialize;
use std::collections::BTreeSet;

/// Which stages to show.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StageFilter {
    One,
    Two,
    #[default]
    All,
}

/// Below this time_running/time_enabled a metric is flagged as low confidence.
pub const LOW_CONFIDENCE_FRACTION: f64 = 0.5;
/// A level-1 sum further than this (percentage points) from 100 is reported.
pub const LEVEL1_SUM_TOLERANCE: f64 = 5.0;
/// MPKI at or above this is reported as implausible (close to one miss per instruction).
pub const MPKI_SUSPICIOUS: f64 = 900.0;

/// The metric groups (in order) and metrics selected for a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Selection {
    /// (group name, metrics of that group to show)
    pub groups: Vec<(String, Vec<String>)>,
}

impl Selection {
    /// Resolves `--stage`, `-m GROUP|METRIC,...` and `-n NODE` against a catalog. `-m` and `-n`
    /// replace the stage selection; together they add up.
    pub fn resolve(
        catalog: &Catalog,
        stage: StageFilter,
        groups_or_metrics: &[String],
        nodes: &[String],
    ) -> Result<Selection, PmuError> {
        let mut sel = Selection { groups: Vec::new() };
        let unknown = |name: &str| PmuError::UnknownSelection {
            name: name.to_string(),
            cpu: catalog.id.clone(),
            known: catalog
                .groups
                .iter()
                .map(|g| g.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        };
        if groups_or_metrics.is_empty() && nodes.is_empty() {
            let names: Vec<&String> = match stage {
                StageFilter::One => catalog.stage1.iter().collect(),
                StageFilter::Two => catalog.stage2.iter().collect(),
                StageFilter::All => catalog.stage1.iter().chain(&catalog.stage2).collect(),
            };
            for g in names {
                sel.add_group(catalog, g);
            }
            return Ok(sel);
        }
        for item in groups_or_metrics {
            if catalog.group(item).is_some() {
                sel.add_group(catalog, item);
            } else if let Some(m) = find_metric(catalog, item) {
                sel.add_metric("Selected", &m);
            } else {
                return Err(unknown(item));
            }
        }
        for node in nodes {
            let Some(m) = find_metric(catalog, node) else {
                if catalog.group(node).is_some() {
                    sel.add_group(catalog, node);
                    continue;
                }
                return Err(unknown(node));
            };
            // The node, its descendants, and the groups the tree points at below it.
            let mut stack = vec![m];
            let mut seen = BTreeSet::new();
            while let Some(cur) = stack.pop() {
                if !seen.insert(cur.clone()) {
                    continue;
                }
                let group = catalog
                    .tree
                    .get(&cur)
                    .map(|n| n.group.clone())
                    .or_else(|| catalog.groups_of(&cur).first().map(|s| s.to_string()))
                    .unwrap_or_else(|| "Selected".to_string());
                sel.add_metric(&group, &cur);
                if let Some(n) = catalog.tree.get(&cur) {
                    for next in n.next.iter().rev() {
                        if catalog.metrics.contains_key(next) {
                            stack.push(next.clone());
                        } else if catalog.group(next).is_some() {
                            sel.add_group(catalog, next);
                        }
                    }
                }
            }
        }
        Ok(sel)
    }

    fn add_group(&mut self, catalog: &Catalog, name: &str) {
        if let Some(g) = catalog.group(name) {
            for m in &g.metrics {
                if catalog.metrics.contains_key(m) {
                    self.add_metric(&g.name, m);
                }
            }
        }
    }

    fn add_metric(&mut self, group: &str, metric: &str) {
        if let Some((_, ms)) = self.groups.iter_mut().find(|(g, _)| g == group) {
            if !ms.iter().any(|m| m == metric) {
                ms.push(metric.to_string());
            }
        } else {
            self.groups
                .push((group.to_string(), vec![metric.to_string()]));
        }
    }

    /// Selected metric names, each once, in display order.
    pub fn metrics(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (_, ms) in &self.groups {
            for m in ms {
                if !out.contains(m) {
                    out.push(m.clone());
                }
            }
        }
        out
    }
}

fn find_metric(catalog: &Catalog, name: &str) -> Option<String> {
    let n = name.to_ascii_lowercase();
    catalog.metrics.contains_key(&n).then_some(n)
}

/// One metric's result.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct MetricResult {
    pub name: String,
    pub title: String,
    pub stage: Option<Stage>,
    pub groups: Vec<String>,
    pub units: String,
    pub value: Option<f64>,
    pub unavailable: Option<Unavailable>,
    /// Events the formula needs that have no count.
    pub missing_events: Vec<String>,
    /// The formula as the catalog writes it.
    pub formula: String,
    /// The formula as evaluated (slot widths named).
    pub evaluated: String,
    pub threshold: Option<Threshold>,
    /// The value is beyond its threshold.
    pub flagged: bool,
    /// On the path the decision tree marks as the bottleneck.
    pub bottleneck: bool,
    /// Smallest time_running/time_enabled of the events it reads (None: unknown).
    pub running_fraction: Option<f64>,
    pub low_confidence: bool,
    pub description: String,
}

/// A node of the evaluated decision tree.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct TreeResult {
    pub metric: String,
    pub value: Option<f64>,
    pub units: String,
    pub flagged: bool,
    pub bottleneck: bool,
    pub children: Vec<TreeResult>,
    /// Groups the methodology says to look at next.
    pub next_groups: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    RefillsExceedAccesses,
    NegativeLevel1,
    Level1Sum,
    MpkiNearThousand,
    LowConfidence,
    MissingEvents,
    Catalog,
    RunsDisagree,
    Input,
}

#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Warning {
    pub kind: WarningKind,
    pub message: String,
}

/// All results of one scope and time span.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Evaluation {
    pub metrics: Vec<MetricResult>,
    pub tree: Vec<TreeResult>,
    /// Metric names from the root to the deepest flagged node, largest share first.
    pub bottleneck_path: Vec<String>,
    pub warnings: Vec<Warning>,
}

impl Evaluation {
    pub fn metric(&self, name: &str) -> Option<&MetricResult> {
        self.metrics.iter().find(|m| m.name == name)
    }
}

struct MetricEnv<'a> {
    m: &'a Measurement,
    metric: &'a str,
    slots: Option<f64>,
}

impl Env for MetricEnv<'_> {
    fn event(&self, name: &str) -> Option<f64> {
        self.m.get(self.metric, name).and_then(|c| c.value)
    }
    fn constant(&self, c: Constant) -> Option<f64> {
        match c {
            Constant::Slots => self.slots,
        }
    }
}

/// Evaluates the selected metrics on a measurement. `slots`: slots per cycle in force.
pub fn evaluate(
    catalog: &Catalog,
    selection: &Selection,
    measurement: &Measurement,
    slots: Option<u32>,
) -> Evaluation {
    let mut metrics = Vec::new();
    for name in selection.metrics() {
        let Some(m) = catalog.metrics.get(&name) else {
            continue;
        };
        let env = MetricEnv {
            m: measurement,
            metric: &name,
            slots: slots.map(f64::from),
        };
        let (value, unavailable) = match m.expr.eval(&env) {
            Ok(v) => (Some(v), None),
            Err(u) => (None, Some(u)),
        };
        let running_fraction = m
            .events
            .iter()
            .filter_map(|e| measurement.get(&name, e).and_then(|c| c.running_fraction))
            .reduce(f64::min);
        let missing_events: Vec<String> = m
            .events
            .iter()
            .filter(|e| env.event(e).is_none())
            .cloned()
            .collect();
        let groups: Vec<String> = selection
            .groups
            .iter()
            .filter(|(_, ms)| ms.contains(&name))
            .map(|(g, _)| g.clone())
            .collect();
        let stage = catalog
            .groups_of(&name)
            .iter()
            .filter_map(|g| catalog.stage_of_group(g))
            .min();
        let flagged = matches!((value, m.threshold), (Some(v), Some(t)) if t.exceeded(v));
        metrics.push(MetricResult {
            title: m.title.clone(),
            stage,
            groups,
            units: m.units.clone(),
            value,
            unavailable,
            missing_events,
            formula: m.formula.clone(),
            evaluated: m.expr.to_string(),
            threshold: m.threshold,
            flagged,
            bottleneck: false,
            running_fraction,
            low_confidence: running_fraction.is_some_and(|f| f < LOW_CONFIDENCE_FRACTION),
            description: m.description.clone(),
            name,
        });
    }
    let bottleneck_path = find_bottleneck(catalog, &metrics);
    for m in &mut metrics {
        m.bottleneck = bottleneck_path.contains(&m.name);
    }
    let tree = catalog
        .roots
        .iter()
        .filter_map(|r| build_tree(catalog, &metrics, r, &mut BTreeSet::new()))
        .collect();
    let mut warnings = sanity(catalog, &metrics);
    warnings.extend(catalog.warnings.iter().map(|w| Warning {
        kind: WarningKind::Catalog,
        message: w.clone(),
    }));
    Evaluation {
        metrics,
        tree,
        bottleneck_path,
        warnings,
    }
}

fn find_bottleneck(catalog: &Catalog, metrics: &[MetricResult]) -> Vec<String> {
    let get = |n: &str| metrics.iter().find(|m| m.name == n);
    let pick = |cands: &mut dyn Iterator<Item = &String>| -> Option<String> {
        cands
            .filter_map(|c| get(c))
            .filter(|m| m.flagged && m.value.is_some())
            .filter(|m| {
                m.threshold
                    .is_some_and(|t| t.direction == crate::describe::Direction::Above)
            })
            .max_by(|a, b| {
                a.value
                    .unwrap_or(f64::MIN)
                    .total_cmp(&b.value.unwrap_or(f64::MIN))
            })
            .map(|m| m.name.clone())
    };
    let mut path = Vec::new();
    let mut cur = pick(&mut catalog.roots.iter());
    while let Some(c) = cur {
        if path.contains(&c) {
            break;
        }
        path.push(c.clone());
        cur = catalog.tree.get(&c).and_then(|n| pick(&mut n.next.iter()));
    }
    path
}

fn build_tree(
    catalog: &Catalog,
    metrics: &[MetricResult],
    name: &str,
    seen: &mut BTreeSet<String>,
) -> Option<TreeResult> {
    let m = metrics.iter().find(|m| m.name == name)?;
    if !seen.insert(name.to_string()) {
        return None;
    }
    let mut children = Vec::new();
    let mut next_groups = Vec::new();
    if let Some(node) = catalog.tree.get(name) {
        for n in &node.next {
            if catalog.metrics.contains_key(n) {
                if let Some(c) = build_tree(catalog, metrics, n, seen) {
                    children.push(c);
                }
            } else {
                next_groups.push(n.clone());
            }
        }
    }
    Some(TreeResult {
        metric: m.name.clone(),
        value: m.value,
        units: m.units.clone(),
        flagged: m.flagged,
        bottleneck: m.bottleneck,
        children,
        next_groups,
    })
}

fn sanity(catalog: &Catalog, metrics: &[MetricResult]) -> Vec<Warning> {
    let mut w = Vec::new();
    let mut low = Vec::new();
    let mut missing = BTreeSet::new();
    for m in metrics {
        if m.low_confidence {
            low.push(format!(
                "{} ({:.0} %)",
                m.name,
                m.running_fraction.unwrap_or(0.0) * 100.0
            ));
        }
        missing.extend(m.missing_events.iter().cloned());
        let Some(v) = m.value else { continue };
        let is_ratio = m.units.starts_with("per ") && m.units != "per cycle";
        if is_ratio && v > 1.0 {
            let cat = catalog.metrics.get(&m.name);
            w.push(Warning {
                kind: WarningKind::RefillsExceedAccesses,
                message: format!(
                    "{} = {v:.3} > 1: more misses/refills than accesses ({}); the events were \
                     probably counted over different time slices or are mislabelled",
                    m.name,
                    cat.map(|c| c.formula.as_str()).unwrap_or("")
                ),
            });
        }
        if m.units == "MPKI" && v >= MPKI_SUSPICIOUS {
            w.push(Warning {
                kind: WarningKind::MpkiNearThousand,
                message: format!(
                    "{} = {v:.1}: close to one miss per instruction; genuine only for code made \
                     almost entirely of missing loads (a pointer chase), otherwise check the \
                     event codes and that both events were counted over the same run",
                    m.name
                ),
            });
        }
        if m.stage == Some(Stage::One) && v < 0.0 {
            w.push(Warning {
                kind: WarningKind::NegativeLevel1,
                message: format!(
                    "{} = {v:.2} is negative: a correction term in its formula exceeds the \
                     measured stalls (see docs/topdown.md)",
                    m.name
                ),
            });
        }
    }
    // Level-1 shares should add up to 100 % of slots.
    let l1: Vec<&MetricResult> = metrics
        .iter()
        .filter(|m| m.groups.iter().any(|g| g == "Topdown_L1"))
        .collect();
    if l1.len() == 4 && l1.iter().all(|m| m.value.is_some()) {
        let sum: f64 = l1.iter().filter_map(|m| m.value).sum();
        if (sum - 100.0).abs() > LEVEL1_SUM_TOLERANCE {
            w.push(Warning {
                kind: WarningKind::Level1Sum,
                message: format!(
                    "level-1 shares add up to {sum:.1} %, not 100 % (more than {LEVEL1_SUM_TOLERANCE} \
                     points off): the slot width or the counts are inconsistent"
                ),
            });
        }
    }
    let ca: Vec<f64> = metrics
        .iter()
        .filter(|m| m.name == "frontend_stalled_cycles" || m.name == "backend_stalled_cycles")
        .filter_map(|m| m.value)
        .collect();
    if ca.len() == 2 && ca[0] + ca[1] > 100.0 + LEVEL1_SUM_TOLERANCE {
        w.push(Warning {
            kind: WarningKind::Level1Sum,
            message: format!(
                "front-end and back-end stall cycles add up to {:.1} % of cycles (> 100 %)",
                ca[0] + ca[1]
            ),
        });
    }
    if !low.is_empty() {
        w.push(Warning {
            kind: WarningKind::LowConfidence,
            message: format!(
                "counted less than {:.0} % of the time (multiplexed; scaled): {}",
                LOW_CONFIDENCE_FRACTION * 100.0,
                low.join(", ")
            ),
        });
    }
    if !missing.is_empty() {
        w.push(Warning {
            kind: WarningKind::MissingEvents,
            message: format!(
                "not counted, so the metrics that need them are not available: {}",
                missing.into_iter().collect::<Vec<_>>().join(", ")
            ),
        });
    }
    w
}
