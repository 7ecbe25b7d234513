//! The advisor's rules, as data: each names its class, the thresholds it tests, the source of
//! its method and thresholds, and the share of the cycles at stake a fix is assumed to
//! recover (likely and low ends of the gain range). docs/advise.md lists them; a test checks
//! that it lists every rule with these values.

use crate::model::advise::FindingClass;

/// One threshold of a rule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Threshold {
    pub name: &'static str,
    pub value: f64,
    pub unit: &'static str,
}

/// One rule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rule {
    pub id: &'static str,
    pub class: FindingClass,
    /// Where the method and its thresholds come from (a document's section, or "spelunk's
    /// derivation, docs/advise.md").
    pub source: &'static str,
    pub thresholds: &'static [Threshold],
    /// Share of the cycles at stake the fix recovers: likely, and the low end of the range.
    pub recovered_likely: f64,
    pub recovered_low: f64,
}

impl Rule {
    /// The value of threshold `name` (0 when the rule has none of that name: a programming
    /// error that the rules' test catches).
    pub fn t(&self, name: &str) -> f64 {
        self.thresholds
            .iter()
            .find(|t| t.name == name)
            .map_or(0.0, |t| t.value)
    }
}

const fn th(name: &'static str, value: f64, unit: &'static str) -> Threshold {
    Threshold { name, value, unit }
}

/// Shared by every rule on memory accesses: the fewest samples at a PC to judge it, and the
/// smallest share of the recording's cost worth a finding (a miss ratio of 0.77 at a PC that
/// costs nothing is not a finding).
pub const MIN_SAMPLES: f64 = 20.0;
pub const MIN_COST_SHARE: f64 = 0.02;

pub const RULES: &[Rule] = &[
    Rule {
        id: "false-sharing.c2c",
        class: FindingClass::FalseSharing,
        source: "[SPE methodology §5] c2c: loads served by a peer core's modified line (HITM); \
                 [perf c2c learning path]: threads at different offsets of one line",
        thresholds: &[
            th("min_peer_loads", 5.0, "samples"),
            th("min_cost_share", MIN_COST_SHARE, "share"),
        ],
        recovered_likely: 0.8,
        recovered_low: 0.4,
    },
    Rule {
        id: "true-sharing.c2c",
        class: FindingClass::TrueSharing,
        source: "[SPE methodology §5] c2c: threads at the same offsets of one line",
        thresholds: &[
            th("min_peer_loads", 5.0, "samples"),
            th("min_cost_share", MIN_COST_SHARE, "share"),
        ],
        recovered_likely: 0.5,
        recovered_low: 0.2,
    },
    Rule {
        id: "tlb.walks",
        class: FindingClass::Tlb,
        source: "[N1 PMU methodology] TLB effectiveness (DTLB walk rate = DTLB_WALK / L1D_TLB), \
                 per PC from SPE's TLB-walk event; threshold: spelunk's derivation, docs/advise.md",
        thresholds: &[
            th("min_walk_share", 0.05, "share"),
            th("min_cost_share", MIN_COST_SHARE, "share"),
        ],
        recovered_likely: 0.8,
        recovered_low: 0.4,
    },
    Rule {
        id: "split-line.alignment",
        class: FindingClass::SplitLine,
        source: "SPE's alignment event (an access crossing its alignment boundary), \
                 [SPE methodology] events packet; threshold: spelunk's derivation, docs/advise.md",
        thresholds: &[
            th("min_misaligned_share", 0.10, "share"),
            th("min_cost_share", MIN_COST_SHARE, "share"),
        ],
        recovered_likely: 0.8,
        recovered_low: 0.3,
    },
    Rule {
        id: "store-forwarding.l1-wait",
        class: FindingClass::StoreForwarding,
        source: "spelunk's derivation, docs/advise.md: L1-served loads slower than the L1 hit \
                 latency, at addresses a store of the same function writes",
        thresholds: &[
            th("min_excess_cycles", 3.0, "cycles"),
            th("min_l1_share", 0.5, "share"),
            th("max_refill_share", 0.1, "share"),
            th("min_overlap", 0.5, "share"),
            th("min_cost_share", MIN_COST_SHARE, "share"),
        ],
        recovered_likely: 0.8,
        recovered_low: 0.4,
    },
    Rule {
        id: "traversal.stride",
        class: FindingClass::Traversal,
        source: "spelunk's derivation, docs/advise.md: a regular stride of at least a line, \
                 with every part of the line used by other iterations",
        thresholds: &[
            th("min_stride_bytes", 64.0, "bytes"),
            th("min_direction_share", 0.75, "share"),
            th("min_line_granules", 4.0, "8-byte granules"),
            th("min_excess_cycles", 4.0, "cycles"),
            th("min_cost_share", MIN_COST_SHARE, "share"),
        ],
        recovered_likely: 0.7,
        recovered_low: 0.3,
    },
    Rule {
        id: "layout.bytes-used",
        class: FindingClass::Layout,
        source: "spelunk's derivation, docs/advise.md: a regular stride of a record's size \
                 (≤ max_stride_bytes) of which the loop uses a few bytes",
        thresholds: &[
            th("min_stride_bytes", 16.0, "bytes"),
            th("max_stride_bytes", 256.0, "bytes"),
            th("min_direction_share", 0.75, "share"),
            th("max_used_share", 0.5, "share"),
            th("min_excess_cycles", 4.0, "cycles"),
            th("min_cost_share", MIN_COST_SHARE, "share"),
        ],
        recovered_likely: 0.6,
        recovered_low: 0.25,
    },
    Rule {
        id: "prefetch.exposed-latency",
        class: FindingClass::Prefetch,
        source: "[N1 PMU methodology] stride benchmark case study: software prefetch DIST \
                 iterations ahead hides the miss latency; distance = latency ÷ cycles per \
                 iteration (docs/advise.md)",
        thresholds: &[
            th("min_excess_cycles", 8.0, "cycles"),
            th("min_cost_share", MIN_COST_SHARE, "share"),
        ],
        recovered_likely: 0.6,
        recovered_low: 0.25,
    },
    Rule {
        id: "bandwidth.streaming",
        class: FindingClass::Bandwidth,
        source: "spelunk's derivation, docs/advise.md: a sequential walk (stride under a line) \
                 whose loads still wait on memory: the prefetchers keep up with the pattern, \
                 not with the bytes",
        thresholds: &[
            th("max_stride_bytes", 63.0, "bytes"),
            th("min_direction_share", 0.75, "share"),
            th("min_excess_cycles", 8.0, "cycles"),
            th("min_cost_share", MIN_COST_SHARE, "share"),
        ],
        recovered_likely: 0.3,
        recovered_low: 0.1,
    },
    Rule {
        id: "remote-memory.remote-loads",
        class: FindingClass::RemoteMemory,
        source: "[SPE methodology] remote-access event and data sources; threshold: spelunk's \
                 derivation, docs/advise.md",
        thresholds: &[
            th("min_remote_share", 0.10, "share"),
            th("min_cost_share", MIN_COST_SHARE, "share"),
        ],
        recovered_likely: 0.5,
        recovered_low: 0.2,
    },
    Rule {
        id: "branch-mispredict.rate",
        class: FindingClass::BranchMispredict,
        source: "[N1 PMU methodology] branch effectiveness (misprediction rate), per PC from \
                 SPE's mispredicted event; penalty assumed (docs/advise.md)",
        thresholds: &[
            th("min_mispredict_share", 0.05, "share"),
            th("penalty_cycles", 11.0, "cycles"),
            th("upper_penalty_cycles", 20.0, "cycles"),
            th("min_cost_share", MIN_COST_SHARE, "share"),
        ],
        recovered_likely: 0.7,
        recovered_low: 0.3,
    },
    Rule {
        id: "heap-churn.short-lived",
        class: FindingClass::HeapChurn,
        source: "[NMO paper] heap objects by allocation site; thresholds: spelunk's derivation, \
                 docs/advise.md",
        thresholds: &[
            th("min_blocks", 100.0, "blocks"),
            th("max_mean_lifetime_ns", 1_000_000.0, "ns"),
            th("min_cost_share", MIN_COST_SHARE, "share"),
        ],
        recovered_likely: 0.7,
        recovered_low: 0.3,
    },
    Rule {
        id: "front-end.top-down",
        class: FindingClass::FrontEnd,
        source: "[N1 PMU methodology] cycle accounting: STALL_FRONTEND / CPU_CYCLES",
        thresholds: &[th("min_stall_share", 0.3, "share")],
        recovered_likely: 0.3,
        recovered_low: 0.1,
    },
    Rule {
        id: "core.top-down",
        class: FindingClass::Core,
        source: "[N1 PMU methodology] cycle accounting: back-end stalls with memory ruled out",
        thresholds: &[th("min_stall_share", 0.3, "share")],
        recovered_likely: 0.3,
        recovered_low: 0.1,
    },
];

/// The rule of `class` (every class has exactly one).
pub fn rule_of(class: FindingClass) -> &'static Rule {
    RULES.iter().find(|r| r.class == class).unwrap_or(&RULES[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_has_one_rule_and_every_rule_a_source() {
        for c in FindingClass::ALL {
            assert_eq!(RULES.iter().filter(|r| r.class == c).count(), 1, "{c}");
        }
        for r in RULES {
            assert!(
                !r.source.is_empty() && r.id.starts_with(r.class.name()),
                "{}",
                r.id
            );
            assert!(r.recovered_low <= r.recovered_likely && r.recovered_likely <= 1.0);
        }
    }

    /// docs/advise.md lists every rule with its thresholds' values.
    #[test]
    fn docs_list_every_rule_and_threshold() {
        let doc = include_str!("../../../../docs/advise.md");
        for r in RULES {
            let at = doc
                .find(&format!("`{}`", r.id))
                .unwrap_or_else(|| panic!("docs/advise.md does not list rule {}", r.id));
            let section = &doc[at..];
            let section = &section[..section[1..].find("\n### ").map_or(section.len(), |e| e + 1)];
            for t in r.thresholds {
                assert!(
                    section.contains(&format!("`{}`", t.name)),
                    "docs/advise.md: rule {} lacks threshold {}",
                    r.id,
                    t.name
                );
                assert!(
                    section.contains(&format!("{}", t.value)),
                    "docs/advise.md: rule {} lacks the value {} of {}",
                    r.id,
                    t.value,
                    t.name
                );
            }
        }
    }
}
