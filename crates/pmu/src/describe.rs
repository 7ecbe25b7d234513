//! spelunk's own words for metrics and groups, and the thresholds it flags.
//!
//! Descriptions are written for spelunk (Arm's specification prose is not copied). Thresholds
//! are spelunk heuristics (Arm's specifications define none); they follow the spirit of
//! toplev's: a stage-1 share above its threshold is worth a look, and the bottleneck is the
//! largest share over its threshold. docs/topdown.md lists them all.

use serde::Serialize;

/// Our one-line description of a metric, by its (Arm telemetry) name.
pub fn metric_description(name: &str) -> Option<&'static str> {
    Some(match name {
        "frontend_bound" => "Share of dispatch slots left empty because the front end (fetch, decode, branch prediction) delivered nothing.",
        "backend_bound" => "Share of dispatch slots left empty because the back end (execution units, load/store, memory) could not accept work.",
        "retiring" => "Share of dispatch slots that carried operations which later retired: useful work.",
        "bad_speculation" => "Share of dispatch slots spent on operations that were thrown away (mispredicted paths, pipeline flushes).",
        "frontend_stalled_cycles" => "Cycles in which the front end had nothing to send to rename, in percent of all cycles.",
        "backend_stalled_cycles" => "Cycles in which rename could send nothing because the back end was full, in percent of all cycles.",
        "ipc" => "Instructions retired per cycle: work done per unit of time.",
        "branch_mpki" => "Mispredicted retired branches per thousand retired instructions.",
        "branch_misprediction_ratio" => "Fraction of retired branches that were mispredicted.",
        "branch_percentage" => "Branch operations as a percentage of speculatively executed operations.",
        "branch_direct_ratio" => "Fraction of retired branches that were direct (immediate) branches.",
        "branch_indirect_ratio" => "Fraction of retired branches that were indirect branches.",
        "branch_return_ratio" => "Fraction of retired branches that were procedure returns.",
        "itlb_mpki" => "Instruction-side translation table walks per thousand retired instructions.",
        "dtlb_mpki" => "Data-side translation table walks per thousand retired instructions.",
        "itlb_walk_ratio" => "Instruction-side table walks per L1 instruction TLB access.",
        "dtlb_walk_ratio" => "Data-side table walks per L1 data TLB access.",
        "l1i_tlb_mpki" => "L1 instruction TLB refills per thousand retired instructions.",
        "l1d_tlb_mpki" => "L1 data TLB refills per thousand retired instructions.",
        "l2_tlb_mpki" => "L2 (unified) TLB refills per thousand retired instructions.",
        "l1i_tlb_miss_ratio" => "L1 instruction TLB refills per L1 instruction TLB access.",
        "l1d_tlb_miss_ratio" => "L1 data TLB refills per L1 data TLB access.",
        "l2_tlb_miss_ratio" => "L2 TLB refills per L2 TLB access.",
        "l1i_cache_mpki" => "L1 instruction cache refills per thousand retired instructions.",
        "l1d_cache_mpki" => "L1 data cache refills per thousand retired instructions.",
        "l2_cache_mpki" => "L2 cache refills per thousand retired instructions.",
        "ll_cache_read_mpki" => "Last-level cache read misses per thousand retired instructions.",
        "l1i_cache_miss_ratio" => "L1 instruction cache refills per L1 instruction cache access.",
        "l1d_cache_miss_ratio" => "L1 data cache refills per L1 data cache access.",
        "l2_cache_miss_ratio" => "L2 cache refills per L2 cache access.",
        "ll_cache_read_miss_ratio" => "Last-level cache read misses per last-level cache read.",
        "ll_cache_read_hit_ratio" => "Last-level cache reads that hit, per last-level cache read.",
        "load_percentage" => "Loads as a percentage of speculatively executed operations.",
        "store_percentage" => "Stores as a percentage of speculatively executed operations.",
        "integer_dp_percentage" => "Integer data-processing operations as a percentage of speculatively executed operations.",
        "simd_percentage" => "Advanced SIMD (Neon) operations as a percentage of speculatively executed operations.",
        "scalar_fp_percentage" => "Scalar floating-point operations as a percentage of speculatively executed operations.",
        "crypto_percentage" => "Cryptographic operations as a percentage of speculatively executed operations.",
        "barrier_percentage" => "Barriers (ISB, DSB, DMB) as a percentage of speculatively executed operations.",
        "sve_all_percentage" => "SVE operations as a percentage of speculatively executed operations.",
        "sve_predicate_percentage" => "Predicated SVE operations as a percentage of speculatively executed operations.",
        "sve_predicate_full_percentage" => "Predicated SVE operations with every lane active, per predicated SVE operation.",
        "sve_predicate_partial_percentage" => "Predicated SVE operations with some lanes active, per predicated SVE operation.",
        "sve_predicate_empty_percentage" => "Predicated SVE operations with no lane active, per predicated SVE operation.",
        "fp16_percentage" => "Half-precision floating-point operations as a percentage of speculatively executed operations.",
        "fp32_percentage" => "Single-precision floating-point operations as a percentage of speculatively executed operations.",
        "fp64_percentage" => "Double-precision floating-point operations as a percentage of speculatively executed operations.",
        "fp_ops_per_cycle" => "Floating-point operations (SVE-scaled plus fixed-width) per cycle.",
        "sve_fp_ops_per_cycle" => "SVE floating-point operations (scaled by vector length) per cycle.",
        "nonsve_fp_ops_per_cycle" => "Fixed-width (non-SVE) floating-point operations per cycle.",
        "frontend_core_bound" => "Front-end stall cycles caused inside the core (flushes, fetch flow), in percent of front-end stall cycles.",
        "frontend_mem_bound" => "Front-end stall cycles waiting for instruction memory (caches, TLB), in percent of front-end stall cycles.",
        "frontend_core_flush_bound" => "Front-end stall cycles recovering from pipeline flushes, in percent of core-caused front-end stalls.",
        "frontend_core_flow_bound" => "Front-end stall cycles from fetch-flow limits (branch prediction bubbles), in percent of core-caused front-end stalls.",
        "frontend_mem_cache_bound" => "Front-end memory stall cycles waiting on instruction caches, in percent of front-end memory stalls.",
        "frontend_mem_tlb_bound" => "Front-end memory stall cycles waiting on instruction translation, in percent of front-end memory stalls.",
        "frontend_cache_l1i_bound" => "Instruction-cache stall cycles served by the L1 instruction cache, in percent of instruction-cache stalls.",
        "frontend_cache_l2i_bound" => "Instruction-cache stall cycles waiting beyond L1 (L2 and further), in percent of instruction-cache stalls.",
        "backend_core_bound" => "Back-end stall cycles caused by core resources (not memory), in percent of back-end stall cycles.",
        "backend_mem_bound" => "Back-end stall cycles waiting for the memory system, in percent of back-end stall cycles.",
        "backend_core_rename_bound" => "Core-bound back-end stall cycles where rename ran out of registers, in percent of core-bound stalls.",
        "backend_busy_bound" => "Back-end stall cycles because issue queues were full, in percent of back-end stall cycles.",
        "backend_mem_cache_bound" => "Memory-bound back-end stall cycles waiting on data caches, in percent of memory-bound stalls.",
        "backend_mem_tlb_bound" => "Memory-bound back-end stall cycles waiting on data translation, in percent of memory-bound stalls.",
        "backend_mem_store_bound" => "Memory-bound back-end stall cycles waiting on stores, in percent of memory-bound stalls.",
        "backend_cache_l1d_bound" => "Data-cache stall cycles waiting on the L1 data cache, in percent of data-cache stalls.",
        "backend_cache_l2d_bound" => "Data-cache stall cycles waiting beyond L1 (L2 and memory), in percent of data-cache stalls.",
        _ => return None,
    })
}

/// Our one-line description of a metric group.
pub fn group_description(name: &str) -> Option<&'static str> {
    Some(match name {
        "Topdown_L1" => "Where the dispatch slots went: front end, back end, wasted speculation or retired work.",
        "Topdown_Frontend" => "Breakdown of front-end stalls into core and memory causes.",
        "Topdown_Backend" => "Breakdown of back-end stalls into core and memory causes.",
        "Cycle_Accounting" => "Cycles stalled in the front end and in the back end.",
        "General" => "Overall throughput.",
        "MPKI" => "Misses per thousand retired instructions, for every cache, TLB and the branch predictor.",
        "Miss_Ratio" => "Misses per access, for every cache, TLB and the branch predictor.",
        "Branch_Effectiveness" => "How well branches are predicted.",
        "ITLB_Effectiveness" => "How well instruction address translation hits in the TLBs.",
        "DTLB_Effectiveness" => "How well data address translation hits in the TLBs.",
        "L1I_Cache_Effectiveness" => "How well instruction fetch hits in the L1 instruction cache.",
        "L1D_Cache_Effectiveness" => "How well loads and stores hit in the L1 data cache.",
        "L2_Cache_Effectiveness" => "How well the unified L2 cache serves L1 misses.",
        "LL_Cache_Effectiveness" => "How well the last-level (system) cache serves reads.",
        "Operation_Mix" => "What kind of operations were executed (speculatively).",
        "SVE_Effectiveness" => "How much work is done with SVE and how full its predicates are.",
        "FP_Arithmetic_Intensity" => "Floating-point operations per cycle.",
        "FP_Precision_Mix" => "Floating-point operations by precision.",
        _ => return None,
    })
}

/// Comparison direction of a threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Flag values above the threshold.
    Above,
    /// Flag values below the threshold.
    Below,
}

/// A value worth flagging.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Threshold {
    pub direction: Direction,
    pub value: f64,
}

impl Threshold {
    pub fn exceeded(&self, v: f64) -> bool {
        match self.direction {
            Direction::Above => v > self.value,
            Direction::Below => v < self.value,
        }
    }
}

const fn above(value: f64) -> Option<Threshold> {
    Some(Threshold {
        direction: Direction::Above,
        value,
    })
}

/// spelunk's heuristic threshold for a metric (by name, then by unit), if any.
pub fn threshold(name: &str, units: &str) -> Option<Threshold> {
    match name {
        // Stage 1 shares (percent of slots / cycles).
        "frontend_bound" | "bad_speculation" => return above(15.0),
        "backend_bound" => return above(20.0),
        "retiring" => return None, // useful work is never a bottleneck
        "frontend_stalled_cycles" => return above(10.0),
        "backend_stalled_cycles" => return above(20.0),
        "ipc" => {
            return Some(Threshold {
                direction: Direction::Below,
                value: 1.0,
            })
        }
        "branch_mpki" => return above(5.0),
        "branch_misprediction_ratio" => return above(0.05),
        "ll_cache_read_hit_ratio" => return None,
        n if n.starts_with("frontend_") || n.starts_with("backend_") => {
            // Level-2 breakdowns are percentages of their parent: flag the larger part.
            return above(50.0);
        }
        _ => {}
    }
    match units {
        "MPKI" => above(10.0),
        u if u.starts_with("per ") && u != "per cycle" => above(0.10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds() {
        assert!(threshold("backend_stalled_cycles", "percent of cycles")
            .unwrap()
            .exceeded(83.95));
        assert!(!threshold("frontend_stalled_cycles", "percent of cycles")
            .unwrap()
            .exceeded(0.01));
        assert!(threshold("ipc", "per cycle").unwrap().exceeded(0.2292));
        assert!(threshold("l1d_cache_mpki", "MPKI").unwrap().exceeded(106.5));
        assert!(threshold("l2_cache_miss_ratio", "per cache access")
            .unwrap()
            .exceeded(0.187));
        assert_eq!(threshold("retiring", "percent of slots"), None);
        assert_eq!(threshold("load_percentage", "percent of operations"), None);
    }
}
