//! Operational intensity and prefetcher effect from a recording's counter totals: what NMO's
//! `perp` and `pf` modes measure ([NMO paper §III-A]: "arithmetic intensity can be profiled by
//! augmenting bandwidth usage metrics with floating-point events" for the roofline model), from
//! the events the recording's core counts, and "not available" with the event names where it
//! counts none.
//!
//! * FP operations: FP_FIXED_OPS_SPEC + FP_SCALE_OPS_SPEC × (SVE vector bits / 128), the events
//!   Arm's telemetry specifications combine in their `fp_ops_per_cycle` metric (group
//!   FP_Arithmetic_Intensity, Neoverse V2, N3, V3). FP_SCALE_OPS_SPEC counts scalable (SVE)
//!   element operations per 128-bit granule, so the vector length scales it; FP_FIXED_OPS_SPEC
//!   counts the fixed-width (scalar and Advanced SIMD) ones [Arm ARM DDI 0487, common events
//!   0x80C0, 0x80C1].
//! * FP instructions where those are missing (Neoverse N1, and the emulator that models it):
//!   VFP_SPEC + ASE_SPEC, instructions rather than operations (a vector instruction does
//!   several, and ASE_SPEC counts integer Advanced SIMD too), shown as their own figure, never
//!   as FLOPs.
//! * Bytes: LL_CACHE_MISS_RD × line (reads the last-level cache missed: memory reads, a lower
//!   bound of memory traffic, writes not included) and L2D_CACHE_REFILL (+ L2D_CACHE_WB when
//!   counted) × line (traffic between the core's L2 and the rest of the system). BUS_ACCESS is
//!   not used: its beat width is implementation defined and not in the catalogs.
//! * Prefetch accuracy and coverage need an event that counts demand accesses hitting a line a
//!   prefetcher brought in; the cores spelunk has catalogs for implement none on the data side
//!   (Neoverse N3 and V3 count prefetch refills, not their use), so both are "not available"
//!   there, with the counts that are.

use crate::catalog::Catalog;
use schemars::JsonSchema;
use serde::Serialize;
use std::collections::BTreeMap;

/// The line size assumed when the recording does not say (every Neoverse core's L1D, L2 and
/// SLC use 64-byte lines: [N1 PMU methodology], the cores' TRMs).
pub const DEFAULT_LINE_BYTES: u64 = 64;

/// Operational intensity and prefetcher figures of one recording.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct ComputeAndPrefetch {
    /// The core the counts are from (its catalog's product name), when known.
    pub core: Option<String>,
    /// The cache line size the byte counts use.
    pub line_bytes: u64,
    pub intensity: OperationalIntensity,
    pub prefetch: PrefetchEffect,
}

/// NMO's `perp` mode: operations per byte of memory traffic.
#[derive(Clone, Debug, Default, PartialEq, Serialize, JsonSchema)]
pub struct OperationalIntensity {
    /// Floating-point operations: FP_FIXED_OPS_SPEC + FP_SCALE_OPS_SPEC × (SVE bits / 128).
    pub flops: Option<f64>,
    /// How `flops` was computed (events and factors).
    pub flops_formula: Option<String>,
    /// VFP_SPEC + ASE_SPEC: FP and Advanced SIMD instructions (not operations).
    pub fp_simd_instructions: Option<u64>,
    /// flops / CPU_CYCLES.
    pub flops_per_cycle: Option<f64>,
    /// Memory traffic at each level the counts give, with the intensity against it.
    pub traffic: Vec<Traffic>,
    /// The roofline's ridge point (peak FLOP/s / peak bandwidth): spelunk knows neither for a
    /// platform, so it is always None for now, and `ridge_note` says why.
    pub ridge_flops_per_byte: Option<f64>,
    pub ridge_note: String,
    /// Figures not available, each with the events it needs and why.
    pub not_available: Vec<String>,
}

/// Bytes moved at one level of the memory system, and the intensity against them.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct Traffic {
    /// "memory reads" or "beyond L2".
    pub level: String,
    /// The events and the line size, e.g. `LL_CACHE_MISS_RD x 64 B`.
    pub formula: String,
    pub bytes: u64,
    /// flops / bytes.
    pub flops_per_byte: Option<f64>,
    /// fp_simd_instructions / bytes.
    pub fp_simd_instructions_per_byte: Option<f64>,
}

/// NMO's `pf` mode: how useful the hardware prefetcher was.
#[derive(Clone, Debug, Default, PartialEq, Serialize, JsonSchema)]
pub struct PrefetchEffect {
    /// Useful prefetches / prefetches: L1D_CACHE_HIT_RD_FHWPRF / L1D_CACHE_REFILL_HWPRF.
    pub accuracy: Option<f64>,
    /// Misses avoided / (misses avoided + demand misses left): L1D_CACHE_HIT_RD_FHWPRF /
    /// (L1D_CACHE_HIT_RD_FHWPRF + L1D_CACHE_REFILL_RD).
    pub coverage: Option<f64>,
    /// The prefetch events the recording counted, by name.
    pub counts: BTreeMap<String, u64>,
    pub not_available: Vec<String>,
}

/// Prefetch events reported as counts when the recording has them (Neoverse N3, V3).
const PREFETCH_EVENTS: [&str; 6] = [
    "L1D_CACHE_HWPRF",
    "L1D_CACHE_REFILL_HWPRF",
    "L2D_CACHE_PRF",
    "L2D_CACHE_REFILL_PRF",
    "L2D_CACHE_HWPRF",
    "L2D_CACHE_REFILL_HWPRF",
];

/// The SVE vector length of a catalogued core, in bits: Neoverse V1 has 256-bit SVE; N2, V2,
/// N3 and V3 128-bit (the cores' Technical Reference Manuals). None for cores without SVE or
/// not known.
fn sve_bits(catalog_id: &str) -> Option<u32> {
    match catalog_id {
        "neoverse-v1" => Some(256),
        "neoverse-n2" | "neoverse-n2-r0p2" | "neoverse-n2-r0p3" | "neoverse-v2" | "neoverse-n3"
        | "neoverse-v3" => Some(128),
        _ => None,
    }
}

/// Why `events` (some without a total) give no figure: those the core lacks, and those the
/// recording did not count.
fn missing(events: &[&str], totals: &BTreeMap<String, u64>, core: Option<&Catalog>) -> String {
    let absent: Vec<&str> = events
        .iter()
        .copied()
        .filter(|e| !totals.contains_key(*e))
        .collect();
    let (lacking, uncounted): (Vec<&str>, Vec<&str>) = absent
        .iter()
        .partition(|e| core.is_some_and(|c| !c.events.contains_key(**e)));
    let mut parts = Vec::new();
    if let Some(c) = core.filter(|_| !lacking.is_empty()) {
        parts.push(format!(
            "{} not implemented on {}",
            lacking.join(", "),
            c.product_name
        ));
    }
    if !uncounted.is_empty() {
        parts.push(format!(
            "{} not counted in this recording",
            uncounted.join(", ")
        ));
    }
    parts.join("; ")
}

fn per(n: f64, d: u64) -> Option<f64> {
    (d > 0).then(|| n / d as f64)
}

/// The figures from `totals` (event name → count over the run) of a recording made on `core`
/// with `line_bytes`-byte lines. None when `totals` is empty (no counters: no section).
pub fn compute(
    totals: &BTreeMap<String, u64>,
    core: Option<&Catalog>,
    line_bytes: u64,
) -> Option<ComputeAndPrefetch> {
    if totals.is_empty() {
        return None;
    }
    let get = |n: &str| totals.get(n).copied();
    let mut intensity = OperationalIntensity {
        ridge_note: "not available: spelunk does not know this platform's peak FLOP/s and \
                     memory bandwidth"
            .into(),
        ..Default::default()
    };

    // FP operations [Arm telemetry specification, fp_ops_per_cycle].
    let (fixed, scale) = (get("FP_FIXED_OPS_SPEC"), get("FP_SCALE_OPS_SPEC"));
    let vl = core.and_then(|c| sve_bits(&c.id));
    match (fixed, scale, vl) {
        (None, None, _) => intensity.not_available.push(format!(
            "FLOPs: {}",
            missing(&["FP_FIXED_OPS_SPEC", "FP_SCALE_OPS_SPEC"], totals, core)
        )),
        (Some(f), None, _) => {
            intensity.flops = Some(f as f64);
            intensity.flops_formula = Some(
                "FP_FIXED_OPS_SPEC (FP_SCALE_OPS_SPEC not counted: SVE operations left out)".into(),
            );
        }
        (f, Some(_), None) => intensity.not_available.push(format!(
            "FLOPs: FP_SCALE_OPS_SPEC needs the SVE vector length, unknown for {}{}",
            core.map_or("this core", |c| c.product_name.as_str()),
            if f.is_some() {
                ""
            } else {
                " (FP_FIXED_OPS_SPEC not counted)"
            }
        )),
        (f, Some(s), Some(bits)) => {
            let factor = f64::from(bits) / 128.0;
            intensity.flops = Some(f.unwrap_or(0) as f64 + s as f64 * factor);
            intensity.flops_formula = Some(match f {
                Some(_) => format!("FP_FIXED_OPS_SPEC + FP_SCALE_OPS_SPEC x {bits}/128"),
                None => format!(
                    "FP_SCALE_OPS_SPEC x {bits}/128 (FP_FIXED_OPS_SPEC not counted: fixed-width \
                     operations left out)"
                ),
            });
        }
    }
    match (get("VFP_SPEC"), get("ASE_SPEC")) {
        (Some(v), Some(a)) => intensity.fp_simd_instructions = Some(v + a),
        _ => {
            if intensity.flops.is_none() {
                intensity.not_available.push(format!(
                    "FP and SIMD instructions: {}",
                    missing(&["VFP_SPEC", "ASE_SPEC"], totals, core)
                ));
            }
        }
    }
    if let (Some(fl), Some(c)) = (intensity.flops, get("CPU_CYCLES")) {
        intensity.flops_per_cycle = per(fl, c);
    }

    // Bytes at each level.
    let mut level = |name: &str, formula: String, lines: u64| {
        let bytes = lines.saturating_mul(line_bytes);
        intensity.traffic.push(Traffic {
            level: name.into(),
            formula,
            bytes,
            flops_per_byte: intensity.flops.and_then(|f| per(f, bytes)),
            fp_simd_instructions_per_byte: intensity
                .fp_simd_instructions
                .and_then(|i| per(i as f64, bytes)),
        });
    };
    match get("LL_CACHE_MISS_RD") {
        Some(m) => level(
            "memory reads",
            format!("LL_CACHE_MISS_RD x {line_bytes} B"),
            m,
        ),
        None => intensity.not_available.push(format!(
            "memory reads: {}",
            missing(&["LL_CACHE_MISS_RD"], totals, core)
        )),
    }
    match (get("L2D_CACHE_REFILL"), get("L2D_CACHE_WB")) {
        (Some(r), Some(w)) => level(
            "beyond L2",
            format!("(L2D_CACHE_REFILL + L2D_CACHE_WB) x {line_bytes} B"),
            r.saturating_add(w),
        ),
        (Some(r), None) => level(
            "beyond L2",
            format!("L2D_CACHE_REFILL x {line_bytes} B (write-backs not counted)"),
            r,
        ),
        (None, _) => intensity.not_available.push(format!(
            "traffic beyond L2: {}",
            missing(&["L2D_CACHE_REFILL"], totals, core)
        )),
    }

    // Prefetcher.
    let mut prefetch = PrefetchEffect::default();
    for e in PREFETCH_EVENTS {
        if let Some(v) = get(e) {
            prefetch.counts.insert(e.to_string(), v);
        }
    }
    let useful = get("L1D_CACHE_HIT_RD_FHWPRF");
    match (useful, get("L1D_CACHE_REFILL_HWPRF")) {
        (Some(u), Some(p)) => prefetch.accuracy = per(u as f64, p),
        _ => prefetch.not_available.push(format!(
            "accuracy: {}",
            missing(
                &["L1D_CACHE_HIT_RD_FHWPRF", "L1D_CACHE_REFILL_HWPRF"],
                totals,
                core
            )
        )),
    }
    match (useful, get("L1D_CACHE_REFILL_RD")) {
        (Some(u), Some(m)) => prefetch.coverage = per(u as f64, u.saturating_add(m)),
        _ => prefetch.not_available.push(format!(
            "coverage: {}",
            missing(
                &["L1D_CACHE_HIT_RD_FHWPRF", "L1D_CACHE_REFILL_RD"],
                totals,
                core
            )
        )),
    }

    Some(ComputeAndPrefetch {
        core: core.map(|c| c.product_name.clone()),
        line_bytes,
        intensity,
        prefetch,
    })
}

/// The figures of a sidecar's counter totals: the core from its `config.midr`, the line size
/// from its `config.cache_line_bytes` (else [`DEFAULT_LINE_BYTES`]).
pub fn from_sidecar(sc: &spelunk_perf::sidecar::Sidecar) -> Option<ComputeAndPrefetch> {
    let catalog = crate::sidecar::catalog_for(sc, "")
        .ok()
        .map(|c| c.catalog)
        .filter(|c| !c.id.starts_with("armv"));
    let line_bytes = sc
        .config
        .get("cache_line_bytes")
        .and_then(|v| v.as_u64())
        .filter(|b| *b > 0)
        .unwrap_or(DEFAULT_LINE_BYTES);
    compute(&sc.counters.totals, catalog.as_ref(), line_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(kv: &[(&str, u64)]) -> BTreeMap<String, u64> {
        kv.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn v1_scales_sve_operations_by_its_256_bit_vectors() {
        let v1 = crate::catalog::builtin("neoverse-v1").unwrap();
        // 1000 fixed + 500 scalable x 2 = 2000 FLOPs; 10 LLC read misses x 64 B = 640 B.
        let t = totals(&[
            ("FP_FIXED_OPS_SPEC", 1000),
            ("FP_SCALE_OPS_SPEC", 500),
            ("CPU_CYCLES", 4000),
            ("LL_CACHE_MISS_RD", 10),
            ("L2D_CACHE_REFILL", 30),
        ]);
        let r = compute(&t, Some(&v1), 64).unwrap();
        assert_eq!(r.intensity.flops, Some(2000.0));
        assert_eq!(r.intensity.flops_per_cycle, Some(0.5));
        let mem = &r.intensity.traffic[0];
        assert_eq!((mem.level.as_str(), mem.bytes), ("memory reads", 640));
        assert_eq!(mem.flops_per_byte, Some(2000.0 / 640.0));
        assert_eq!(r.intensity.traffic[1].bytes, 30 * 64);
        assert!(r.intensity.ridge_flops_per_byte.is_none());
    }

    #[test]
    fn n1_has_instructions_not_flops_and_no_prefetch_usefulness() {
        let n1 = crate::catalog::builtin("neoverse-n1").unwrap();
        let t = totals(&[
            ("VFP_SPEC", 300),
            ("ASE_SPEC", 100),
            ("LL_CACHE_MISS_RD", 4),
            ("L2D_CACHE_REFILL", 6),
            ("L2D_CACHE_WB", 2),
        ]);
        let r = compute(&t, Some(&n1), 64).unwrap();
        assert_eq!(r.intensity.flops, None);
        assert_eq!(r.intensity.fp_simd_instructions, Some(400));
        assert_eq!(
            r.intensity.not_available,
            ["FLOPs: FP_FIXED_OPS_SPEC, FP_SCALE_OPS_SPEC not implemented on Neoverse N1"]
        );
        assert_eq!(
            r.intensity.traffic[0].fp_simd_instructions_per_byte,
            Some(400.0 / 256.0)
        );
        assert_eq!(r.intensity.traffic[1].bytes, 8 * 64);
        assert_eq!(r.prefetch.accuracy, None);
        assert!(r.prefetch.not_available[0].starts_with(
            "accuracy: L1D_CACHE_HIT_RD_FHWPRF, L1D_CACHE_REFILL_HWPRF not implemented on Neoverse N1"
        ));
    }

    #[test]
    fn accuracy_and_coverage_where_the_events_are_counted() {
        // 80 of 100 prefetched lines used; 20 demand misses left: coverage 80 / 100.
        let t = totals(&[
            ("L1D_CACHE_HIT_RD_FHWPRF", 80),
            ("L1D_CACHE_REFILL_HWPRF", 100),
            ("L1D_CACHE_REFILL_RD", 20),
        ]);
        let r = compute(&t, None, 64).unwrap();
        assert_eq!(r.prefetch.accuracy, Some(0.8));
        assert_eq!(r.prefetch.coverage, Some(0.8));
        assert_eq!(r.prefetch.counts["L1D_CACHE_REFILL_HWPRF"], 100);
        assert!(compute(&BTreeMap::new(), None, 64).is_none());
    }
}
