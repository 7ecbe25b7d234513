//! Event catalogs per CPU: event codes, metrics (formula, units, group), the top-down
//! methodology's stages and decision tree.
//!
//! Built-in catalogs are Arm's telemetry specifications (Apache-2.0, ARM-software/
//! telemetry-solution), trimmed to facts and embedded at build time (crates/pmu/data,
//! provenance in data/README.md), plus spelunk's generic Armv8/Armv9 fallbacks built from
//! architected events. Any telemetry specification file can also be loaded at run time
//! ([`Catalog::from_spec_json`]), so a core Arm publishes a specification for works at once.

use crate::describe::{self, Threshold};
use crate::error::PmuError;
use crate::expr::Expr;
use serde::Deserialize;
use spelunk_spe::Midr;
use std::collections::{BTreeMap, BTreeSet};

/// The top-down stages a metric group can belong to.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, schemars::JsonSchema,
)]
pub enum Stage {
    #[serde(rename = "1")]
    One,
    #[serde(rename = "2")]
    Two,
}

/// One metric of a catalog.
#[derive(Clone, Debug)]
pub struct Metric {
    pub name: String,
    pub title: String,
    pub description: String,
    /// The formula as the specification writes it.
    pub formula: String,
    /// The parsed formula; literal slot widths next to CPU_CYCLES are replaced by `SLOTS`.
    pub expr: Expr,
    pub units: String,
    /// Events the formula reads.
    pub events: BTreeSet<String>,
    pub threshold: Option<Threshold>,
}

/// A named group of metrics (`Cycle_Accounting`, `MPKI`, ...).
#[derive(Clone, Debug)]
pub struct MetricGroup {
    pub name: String,
    pub title: String,
    pub description: String,
    pub metrics: Vec<String>,
}

/// A node of the decision tree: a metric, and what to look at next when it is high.
#[derive(Clone, Debug)]
pub struct TreeNode {
    pub metric: String,
    pub group: String,
    /// Metric names (child nodes) or group names (where to drill down).
    pub next: Vec<String>,
}

/// Everything spelunk knows about one core type's PMU.
#[derive(Clone, Debug)]
pub struct Catalog {
    /// `neoverse-n1`, `neoverse-n2-r0p3`, `armv8`, or the spec file name.
    pub id: String,
    pub product_name: String,
    /// Where the catalog came from (built-in spec and its sha1, or a file path).
    pub origin: String,
    pub implementer: Option<u8>,
    pub part: Option<u16>,
    /// (variant, revision) the specification was written for.
    pub revision: Option<(u8, u8)>,
    /// Slots per cycle the specification assumes (None: take it from the PMU).
    pub num_slots: Option<u32>,
    /// Programmable counters documented for the core (Arm's PMU event data); a live run probes.
    pub documented_counters: Option<u32>,
    /// Event name -> event number.
    pub events: BTreeMap<String, u16>,
    pub metrics: BTreeMap<String, Metric>,
    /// Groups in methodology order: stage 1, stage 2, then any others.
    pub groups: Vec<MetricGroup>,
    pub stage1: Vec<String>,
    pub stage2: Vec<String>,
    pub roots: Vec<String>,
    pub tree: BTreeMap<String, TreeNode>,
    /// Non-fatal problems found while loading (e.g. a formula event without a code).
    pub warnings: Vec<String>,
}

// --- Arm telemetry specification (v1.0 schema), only the fields spelunk reads -----------------

#[derive(Deserialize)]
struct Spec {
    #[serde(default)]
    document: Option<SpecDocument>,
    product_configuration: SpecProduct,
    events: BTreeMap<String, SpecEvent>,
    metrics: BTreeMap<String, SpecMetric>,
    groups: SpecGroups,
    #[serde(default)]
    methodologies: Option<SpecMethodologies>,
}

#[derive(Deserialize)]
struct SpecDocument {
    #[serde(default)]
    sha1: Option<String>,
}

#[derive(Deserialize)]
struct SpecProduct {
    product_name: String,
    #[serde(default)]
    part_num: Option<String>,
    #[serde(default)]
    major_revision: Option<String>,
    #[serde(default)]
    minor_revision: Option<String>,
    #[serde(default)]
    implementer: Option<String>,
    #[serde(default)]
    num_slots: Option<u32>,
}

#[derive(Deserialize)]
struct SpecEvent {
    #[serde(default)]
    code: Option<String>,
}

#[derive(Deserialize)]
struct SpecMetric {
    #[serde(default)]
    title: Option<String>,
    formula: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    units: Option<String>,
}

#[derive(Deserialize)]
struct SpecGroups {
    metrics: BTreeMap<String, SpecGroup>,
}

#[derive(Deserialize)]
struct SpecGroup {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    description: Option<String>,
    metrics: Vec<String>,
}

#[derive(Deserialize)]
struct SpecMethodologies {
    topdown_methodology: SpecMethodology,
}

#[derive(Deserialize)]
struct SpecMethodology {
    metric_grouping: SpecGrouping,
    #[serde(default)]
    decision_tree: Option<SpecTree>,
}

#[derive(Deserialize)]
struct SpecGrouping {
    #[serde(default)]
    stage_1: Vec<String>,
    #[serde(default)]
    stage_2: Vec<String>,
}

#[derive(Deserialize)]
struct SpecTree {
    root_nodes: Vec<String>,
    metrics: Vec<SpecTreeNode>,
}

#[derive(Deserialize)]
struct SpecTreeNode {
    name: String,
    #[serde(default)]
    group: String,
    #[serde(default)]
    next_items: Vec<String>,
}

fn parse_hex_u(s: &str) -> Option<u64> {
    let t = s.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    u64::from_str_radix(t, 16).ok()
}

impl Catalog {
    /// Loads an Arm telemetry specification (JSON). `id` names the catalog, `origin` says where
    /// it came from (both end up in reports). `own_words`: use spelunk's descriptions where it has
    /// them (built-ins); a user's file keeps its own descriptions.
    pub fn from_spec_json(
        json: &str,
        id: &str,
        origin: &str,
        own_words: bool,
    ) -> Result<Catalog, PmuError> {
        let spec: Spec = serde_json::from_str(json).map_err(|e| PmuError::Spec {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        let mut warnings = Vec::new();
        let pc = &spec.product_configuration;
        let num_slots = pc.num_slots.filter(|&n| n > 0);
        let mut events = BTreeMap::new();
        for (name, e) in &spec.events {
            match e.code.as_deref().map(parse_hex_u) {
                Some(Some(c)) if c <= u64::from(u16::MAX) => {
                    events.insert(name.to_ascii_uppercase(), c as u16);
                }
                Some(_) => warnings.push(format!("event {name}: unreadable code")),
                None => {}
            }
        }
        let mut metrics = BTreeMap::new();
        for (name, m) in &spec.metrics {
            let mut expr = Expr::parse(&m.formula).map_err(|source| PmuError::Formula {
                origin: origin.to_string(),
                metric: name.clone(),
                source,
            })?;
            if let Some(w) = num_slots {
                expr.name_slot_literals(w);
            }
            let evs = expr.events();
            for e in &evs {
                if !events.contains_key(e) {
                    warnings.push(format!("metric {name}: event {e} has no code in {origin}"));
                }
            }
            let units = m.units.clone().unwrap_or_default();
            let description = match (own_words, describe::metric_description(name)) {
                (true, Some(d)) => d.to_string(),
                _ => m.description.clone().unwrap_or_default(),
            };
            metrics.insert(
                name.clone(),
                Metric {
                    name: name.clone(),
                    title: m.title.clone().unwrap_or_else(|| name.clone()),
                    description,
                    formula: m.formula.clone(),
                    threshold: describe::threshold(name, &units),
                    expr,
                    units,
                    events: evs,
                },
            );
        }
        let (stage1, stage2, roots, tree) = match &spec.methodologies {
            Some(m) => {
                let t = &m.topdown_methodology;
                let (roots, nodes) = match &t.decision_tree {
                    Some(dt) => (
                        dt.root_nodes.clone(),
                        dt.metrics
                            .iter()
                            .map(|n| {
                                (
                                    n.name.clone(),
                                    TreeNode {
                                        metric: n.name.clone(),
                                        group: n.group.clone(),
                                        next: n.next_items.clone(),
                                    },
                                )
                            })
                            .collect(),
                    ),
                    None => (Vec::new(), BTreeMap::new()),
                };
                (
                    t.metric_grouping.stage_1.clone(),
                    t.metric_grouping.stage_2.clone(),
                    roots,
                    nodes,
                )
            }
            None => (Vec::new(), Vec::new(), Vec::new(), BTreeMap::new()),
        };
        let mut order: Vec<String> = stage1.iter().chain(stage2.iter()).cloned().collect();
        for g in spec.groups.metrics.keys() {
            if !order.contains(g) {
                order.push(g.clone());
            }
        }
        let mut groups = Vec::new();
        for g in order {
            let Some(sg) = spec.groups.metrics.get(&g) else {
                warnings.push(format!("methodology names group {g}, which is not defined"));
                continue;
            };
            for m in &sg.metrics {
                if !metrics.contains_key(m) {
                    warnings.push(format!("group {g} names metric {m}, which is not defined"));
                }
            }
            let description = match (own_words, describe::group_description(&g)) {
                (true, Some(d)) => d.to_string(),
                _ => sg.description.clone().unwrap_or_default(),
            };
            groups.push(MetricGroup {
                title: sg.title.clone().unwrap_or_else(|| g.clone()),
                description,
                metrics: sg.metrics.clone(),
                name: g,
            });
        }
        let implementer = pc
            .implementer
            .as_deref()
            .and_then(parse_hex_u)
            .map(|v| v as u8);
        let part = pc
            .part_num
            .as_deref()
            .and_then(parse_hex_u)
            .map(|v| v as u16);
        let revision = match (&pc.major_revision, &pc.minor_revision) {
            (Some(a), Some(b)) => a.trim().parse().ok().zip(b.trim().parse().ok()),
            _ => None,
        };
        let sha = spec
            .document
            .and_then(|d| d.sha1)
            .map(|s| format!(" (sha1 {s})"))
            .unwrap_or_default();
        Ok(Catalog {
            id: id.to_string(),
            product_name: pc.product_name.clone(),
            origin: format!("{origin}{sha}"),
            implementer,
            part,
            revision,
            num_slots,
            documented_counters: None,
            events,
            metrics,
            groups,
            stage1,
            stage2,
            roots,
            tree,
            warnings,
        })
    }

    /// Reverse lookup: event number -> name.
    pub fn event_name(&self, code: u16) -> Option<&str> {
        self.events
            .iter()
            .find(|(_, &c)| c == code)
            .map(|(n, _)| n.as_str())
    }

    pub fn group(&self, name: &str) -> Option<&MetricGroup> {
        self.groups
            .iter()
            .find(|g| g.name.eq_ignore_ascii_case(name))
    }

    /// Stage of a group, if the methodology places it.
    pub fn stage_of_group(&self, group: &str) -> Option<Stage> {
        if self.stage1.iter().any(|g| g == group) {
            Some(Stage::One)
        } else if self.stage2.iter().any(|g| g == group) {
            Some(Stage::Two)
        } else {
            None
        }
    }

    /// Groups a metric belongs to, in catalog order.
    pub fn groups_of(&self, metric: &str) -> Vec<&str> {
        self.groups
            .iter()
            .filter(|g| g.metrics.iter().any(|m| m == metric))
            .map(|g| g.name.as_str())
            .collect()
    }

    /// Metric names of the given groups, in order, without repeats.
    pub fn metrics_of_groups<'a>(
        &'a self,
        groups: impl IntoIterator<Item = &'a str>,
    ) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for g in groups {
            if let Some(g) = self.group(g) {
                for m in &g.metrics {
                    if self.metrics.contains_key(m) && !out.contains(m) {
                        out.push(m.clone());
                    }
                }
            }
        }
        out
    }
}

// --- Built-in catalogs ------------------------------------------------------------------------

struct Builtin {
    id: &'static str,
    file: &'static str,
    json: &'static str,
    counters: Option<u32>,
}

/// Provenance: data/README.md. Counter numbers: Arm's PMU event data (ARM-software/data,
/// pmu/*.json "counters"), present for N1, N2 and V1; others are probed on the machine.
const BUILTINS: &[Builtin] = &[
    Builtin {
        id: "neoverse-n1",
        file: "telemetry/neoverse-n1.json",
        json: include_str!("../data/telemetry/neoverse-n1.json"),
        counters: Some(6),
    },
    Builtin {
        id: "neoverse-n2-r0p2",
        file: "telemetry/neoverse-n2.json",
        json: include_str!("../data/telemetry/neoverse-n2.json"),
        counters: Some(6),
    },
    Builtin {
        id: "neoverse-n2-r0p3",
        file: "telemetry/neoverse-n2-r0p3.json",
        json: include_str!("../data/telemetry/neoverse-n2-r0p3.json"),
        counters: Some(6),
    },
    Builtin {
        id: "neoverse-n3",
        file: "telemetry/neoverse-n3.json",
        json: include_str!("../data/telemetry/neoverse-n3.json"),
        counters: None,
    },
    Builtin {
        id: "neoverse-v1",
        file: "telemetry/neoverse-v1.json",
        json: include_str!("../data/telemetry/neoverse-v1.json"),
        counters: Some(6),
    },
    Builtin {
        id: "neoverse-v2",
        file: "telemetry/neoverse-v2.json",
        json: include_str!("../data/telemetry/neoverse-v2.json"),
        counters: None,
    },
    Builtin {
        id: "neoverse-v3",
        file: "telemetry/neoverse-v3.json",
        json: include_str!("../data/telemetry/neoverse-v3.json"),
        counters: None,
    },
    Builtin {
        id: "armv8",
        file: "generic-armv8.json",
        json: include_str!("../data/generic-armv8.json"),
        counters: None,
    },
    Builtin {
        id: "armv9",
        file: "generic-armv9.json",
        json: include_str!("../data/generic-armv9.json"),
        counters: None,
    },
];

/// Names `--cpu` accepts besides the catalog ids, with the catalog they select.
const ALIASES: &[(&str, &str, &str)] = &[
    (
        "neoverse-n2",
        "neoverse-n2-r0p2",
        "Neoverse N2 revisions before r0p3 need a correction of STALL_SLOT counts; use --cpu neoverse-n2-r0p3 for r0p3 and later",
    ),
    (
        "azure-cobalt-100",
        "neoverse-n2-r0p2",
        "Cobalt 100 is a Neoverse N2; use --cpu neoverse-n2-r0p3 if its MIDR revision is r0p3",
    ),
    (
        "neoverse-v3ae",
        "neoverse-v3",
        "Neoverse V3AE uses the Neoverse V3 specification (same events; Arm's MIDR mapping)",
    ),
    ("generic", "armv8", ""),
    ("generic-armv8", "armv8", ""),
    ("generic-armv9", "armv9", ""),
];

/// Ids of the built-in catalogs.
pub fn builtin_ids() -> Vec<&'static str> {
    BUILTINS.iter().map(|b| b.id).collect()
}

/// Every name `--cpu` accepts.
pub fn accepted_names() -> Vec<&'static str> {
    let mut v = builtin_ids();
    v.extend(ALIASES.iter().map(|a| a.0));
    v
}

/// A built-in catalog by id.
pub fn builtin(id: &str) -> Result<Catalog, PmuError> {
    let b = BUILTINS
        .iter()
        .find(|b| b.id == id)
        .ok_or_else(|| PmuError::UnknownCpu {
            name: id.to_string(),
            known: accepted_names().join(", "),
        })?;
    let mut c = Catalog::from_spec_json(b.json, b.id, &format!("built-in {}", b.file), true)?;
    c.documented_counters = b.counters;
    Ok(c)
}

/// A catalog chosen for a CPU, with a note when the choice is an approximation.
#[derive(Clone, Debug)]
pub struct Choice {
    pub catalog: Catalog,
    pub note: Option<String>,
}

/// A catalog by user-facing name: a catalog id, a CPU model name (`neoverse-n2`,
/// `azure-cobalt-100`, `neoverse-v3ae`), or `generic`.
pub fn by_name(name: &str) -> Result<Choice, PmuError> {
    let n = name.trim().to_ascii_lowercase().replace('_', "-");
    if let Some((_, id, note)) = ALIASES.iter().find(|a| a.0 == n) {
        return Ok(Choice {
            catalog: builtin(id)?,
            note: (!note.is_empty()).then(|| note.to_string()),
        });
    }
    Ok(Choice {
        catalog: builtin(&n)?,
        note: None,
    })
}

/// The catalog for a MIDR, following Arm's midr-mapping.json: implementer 0x41 (Arm) or 0x6d
/// (Microsoft, Cobalt) with the Neoverse part numbers; Neoverse N2 r0p3 and later get the r0p3
/// specification (the STALL_SLOT erratum correction of earlier revisions no longer applies).
/// Unknown cores get the generic catalog: Armv9 when `has_topdown_events` (the PMU lists
/// STALL_SLOT and friends), else Armv8.
pub fn for_midr(midr: Midr, has_topdown_events: bool) -> Result<Choice, PmuError> {
    let imp = midr.implementer();
    let part = midr.part();
    let arm_like = imp == 0x41 || imp == 0x6d;
    let id = match (arm_like, part) {
        (true, 0xd0c) => Some("neoverse-n1"),
        (true, 0xd49) => Some(if (midr.variant(), midr.revision()) >= (0, 3) {
            "neoverse-n2-r0p3"
        } else {
            "neoverse-n2-r0p2"
        }),
        (true, 0xd8e) => Some("neoverse-n3"),
        (true, 0xd40) => Some("neoverse-v1"),
        (true, 0xd4f) => Some("neoverse-v2"),
        (true, 0xd84) | (true, 0xd83) => Some("neoverse-v3"),
        _ => None,
    };
    match id {
        Some(id) => {
            let note = (part == 0xd83)
                .then(|| "Neoverse V3AE: using the Neoverse V3 specification".to_string());
            Ok(Choice {
                catalog: builtin(id)?,
                note,
            })
        }
        None => {
            let id = if has_topdown_events { "armv9" } else { "armv8" };
            let model = midr
                .model()
                .map(|m| m.name().to_string())
                .unwrap_or_else(|| format!("MIDR {midr}"));
            Ok(Choice {
                catalog: builtin(id)?,
                note: Some(format!(
                    "no Arm telemetry specification for {model}: using the generic {id} catalog \
                     (architected events only); pass --spec FILE if Arm publishes one"
                )),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_loads_clean() {
        for id in builtin_ids() {
            let c = builtin(id).unwrap();
            assert!(c.warnings.is_empty(), "{id}: {:?}", c.warnings);
            assert!(!c.stage1.is_empty(), "{id}");
            assert!(!c.metrics.is_empty(), "{id}");
            for r in &c.roots {
                assert!(c.metrics.contains_key(r), "{id}: root {r}");
            }
            for m in c.metrics.values() {
                assert!(
                    !m.description.is_empty(),
                    "{id}: {} has no description",
                    m.name
                );
            }
            for g in &c.groups {
                assert!(!g.description.is_empty(), "{id}: group {}", g.name);
            }
        }
    }

    #[test]
    fn slot_widths_become_named_constants() {
        // N1 has no slot-based metric; V1 (8), N2 (5), V3 (10) do.
        for (id, w) in [
            ("neoverse-v1", 8),
            ("neoverse-n2-r0p3", 5),
            ("neoverse-v3", 10),
        ] {
            let c = builtin(id).unwrap();
            assert_eq!(c.num_slots, Some(w));
            let fe = &c.metrics["frontend_bound"];
            assert!(fe.expr.to_string().contains("SLOTS"), "{id}: {}", fe.expr);
            assert!(!fe.expr.to_string().contains(&format!("{w} *")), "{id}");
        }
        // V1's branch penalty `BR_MIS_PRED * 4` is not a slot width and stays literal.
        let v1 = builtin("neoverse-v1").unwrap();
        assert!(v1.metrics["frontend_bound"]
            .expr
            .to_string()
            .contains("BR_MIS_PRED * 4"));
    }

    #[test]
    fn n2_revisions_differ() {
        let old = builtin("neoverse-n2-r0p2").unwrap();
        let new = builtin("neoverse-n2-r0p3").unwrap();
        assert!(old.metrics["frontend_bound"]
            .formula
            .contains("STALL_SLOT_FRONTEND - CPU_CYCLES"));
        assert!(!new.metrics["frontend_bound"]
            .formula
            .contains("STALL_SLOT_FRONTEND - CPU_CYCLES"));
    }

    #[test]
    fn midr_mapping() {
        let pick = |m: u64| for_midr(Midr(m), false).unwrap().catalog.id;
        assert_eq!(pick(0x413fd0c1), "neoverse-n1"); // Ampere Altra, Graviton2
        assert_eq!(pick(0x410fd492), "neoverse-n2-r0p2");
        assert_eq!(pick(0x410fd493), "neoverse-n2-r0p3");
        assert_eq!(pick(0x6d0fd490), "neoverse-n2-r0p2"); // Cobalt 100 before r0p3
        assert_eq!(pick(0x6d0fd493), "neoverse-n2-r0p3");
        assert_eq!(pick(0x411fd401), "neoverse-v1"); // Graviton3
        assert_eq!(pick(0x410fd4f0), "neoverse-v2"); // Grace, Graviton4
        assert_eq!(pick(0x410fd8e0), "neoverse-n3");
        assert_eq!(pick(0x410fd840), "neoverse-v3");
        assert_eq!(pick(0x410fd830), "neoverse-v3"); // V3AE
        assert_eq!(pick(0xc00fac30), "armv8"); // AmpereOne: no Arm spec
        assert_eq!(
            for_midr(Midr(0xc00fac30), true).unwrap().catalog.id,
            "armv9"
        );
    }

    #[test]
    fn names() {
        assert_eq!(by_name("neoverse-v3ae").unwrap().catalog.id, "neoverse-v3");
        assert_eq!(by_name("Neoverse_N1").unwrap().catalog.id, "neoverse-n1");
        assert!(by_name("neoverse-n2").unwrap().note.is_some());
        assert!(matches!(
            by_name("pentium"),
            Err(PmuError::UnknownCpu { .. })
        ));
    }

    #[test]
    fn rejects_bad_specs() {
        assert!(matches!(
            Catalog::from_spec_json("{}", "x", "x.json", false),
            Err(PmuError::Spec { .. })
        ));
        let bad_formula = r#"{"product_configuration":{"product_name":"X"},"events":{},
            "metrics":{"m":{"formula":"A +","units":""}},"groups":{"metrics":{}}}"#;
        assert!(matches!(
            Catalog::from_spec_json(bad_formula, "x", "x.json", false),
            Err(PmuError::Formula { .. })
        ));
    }
}
