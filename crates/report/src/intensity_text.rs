//! The report's "Compute and prefetch" section: operational intensity (NMO's perp mode) and the
//! prefetcher's accuracy and coverage (its pf mode), as spelunk-pmu computed them from the
//! recording's counter totals, with every figure that is not available and why.

use spelunk_analysis::model::ComputeAndPrefetch;
use std::fmt::Write;

fn ratio(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.4}"))
}

/// The section (a blank line, a title, indented lines).
pub fn render(c: &ComputeAndPrefetch) -> String {
    let mut o = String::new();
    let core = c.core.as_deref().unwrap_or("an unknown core");
    let _ = writeln!(
        o,
        "\nCompute and prefetch (from the counter totals of {core}; {} B lines)",
        c.line_bytes
    );
    let i = &c.intensity;
    if let (Some(f), Some(formula)) = (&i.flops, &i.flops_formula) {
        let _ = writeln!(o, "  FLOPs: {f:.0} = {formula}");
    }
    if let Some(n) = i.fp_simd_instructions {
        let _ = writeln!(
            o,
            "  FP and SIMD instructions: {n} = VFP_SPEC + ASE_SPEC (instructions, not operations)"
        );
    }
    if let Some(f) = i.flops_per_cycle {
        let _ = writeln!(o, "  FLOPs per cycle: {f:.4}");
    }
    for t in &i.traffic {
        let mut per = Vec::new();
        if i.flops.is_some() {
            per.push(format!("{} FLOPs/B", ratio(t.flops_per_byte)));
        }
        if i.fp_simd_instructions.is_some() {
            per.push(format!(
                "{} FP/SIMD instructions/B",
                ratio(t.fp_simd_instructions_per_byte)
            ));
        }
        let per = if per.is_empty() {
            String::new()
        } else {
            format!(": {}", per.join(", "))
        };
        let _ = writeln!(
            o,
            "  intensity against {}: {} B = {}{per}",
            t.level, t.bytes, t.formula
        );
    }
    let _ = writeln!(
        o,
        "  roofline ridge point: {}",
        i.ridge_flops_per_byte
            .map_or(i.ridge_note.clone(), |r| format!("{r:.3} FLOPs/B"))
    );
    for n in &i.not_available {
        let _ = writeln!(o, "  not available: {n}");
    }
    let p = &c.prefetch;
    if let Some(a) = p.accuracy {
        let _ = writeln!(
            o,
            "  prefetch accuracy: {:.1}% (L1D_CACHE_HIT_RD_FHWPRF / L1D_CACHE_REFILL_HWPRF)",
            100.0 * a
        );
    }
    if let Some(cov) = p.coverage {
        let _ = writeln!(
            o,
            "  prefetch coverage: {:.1}% (L1D_CACHE_HIT_RD_FHWPRF / (L1D_CACHE_HIT_RD_FHWPRF + L1D_CACHE_REFILL_RD))",
            100.0 * cov
        );
    }
    if !p.counts.is_empty() {
        let counts: Vec<String> = p.counts.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(o, "  prefetch counts: {}", counts.join(", "));
    }
    for n in &p.not_available {
        let _ = writeln!(o, "  not available: prefetch {n}");
    }
    o
}
