//! Estimates from sampled operations, exactly as seed 000 (Arm SPE methodology) derives them.
//!
//! - Sampling interval (§4.2.4, table 4.3): the interval the hardware applied to `perf record -c N`.
//! - Derived latency (§4.2.4): time between the first and last sampled operation divided by the
//!   number of operations executed meanwhile (samples × interval).
//! - Bandwidth (§4.4.2): samples × interval × bytes per operation, divided by the same time.
//!
//! These are statistical estimates that hold for regular, repetitive code (the paper says so);
//! reports label them as estimates.

/// How the Linux arm_spe driver turns a requested period into PMSIRR_EL1.INTERVAL: clamp to the
/// CPU's minimum interval (`/sys/bus/event_source/devices/arm_spe_0/caps/min_interval`) and
/// round down to a multiple of 256 (the register field is bits \[31:8\]). Seed 000 §4.2.4 step 01:
/// "the value that you input rounded by 256"; without `-c` the base is the minimum interval.
pub fn base_interval(requested: Option<u64>, min_interval: u64) -> u64 {
    const INTERVAL_MASK: u64 = 0xffff_ff00; // PMSIRR_EL1.INTERVAL, bits [31:8]
    match requested {
        None => min_interval,
        Some(p) if p < min_interval => min_interval,
        Some(p) if p > INTERVAL_MASK => INTERVAL_MASK,
        Some(p) => p & INTERVAL_MASK,
    }
}

/// The actual (average) sampling interval, seed 000 table 4.3:
///
/// | jitter | caps/ernd | actual interval  |
/// |--------|-----------|------------------|
/// | 0      | any       | base + 1         |
/// | 1      | 0         | base + 128       |
/// | 1      | 1         | base + 1         |
pub fn effective_interval(base: u64, jitter: bool, ernd: bool) -> u64 {
    if jitter && !ernd {
        base + 128
    } else {
        base + 1
    }
}

/// Operations executed while `samples` operations were sampled at `interval`.
pub fn estimated_operations(samples: u64, interval: u64) -> u64 {
    samples.saturating_mul(interval)
}

/// Derived latency in ns per operation (seed 000 §4.2.4): `elapsed_ns / (samples × interval)`.
/// `None` when there are no samples or no elapsed time.
pub fn derived_latency_ns(elapsed_ns: f64, samples: u64, interval: u64) -> Option<f64> {
    let ops = estimated_operations(samples, interval);
    (ops > 0 && elapsed_ns > 0.0).then(|| elapsed_ns / ops as f64)
}

/// Estimated bandwidth in bytes per second (seed 000 §4.4.2):
/// `samples × interval × bytes_per_op / elapsed`. `None` without elapsed time.
pub fn bandwidth_bytes_per_s(
    samples: u64,
    interval: u64,
    bytes_per_op: u64,
    elapsed_ns: f64,
) -> Option<f64> {
    (elapsed_ns > 0.0)
        .then(|| (samples as f64) * (interval as f64) * (bytes_per_op as f64) / (elapsed_ns * 1e-9))
}

/// Elapsed time between two timer values: `(last − first) × ns_per_tick` (seed 000 uses 40 ns
/// per tick, from CNTFRQ_EL0 = 25 MHz).
pub fn elapsed_ns_from_ticks(first: u64, last: u64, ns_per_tick: f64) -> f64 {
    last.saturating_sub(first) as f64 * ns_per_tick
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_000_interval_rounding_and_table_4_3() {
        // §4.2.4: PMSIRR_EL1.INTERVAL * 256 + 128 = 1152 for a 1024 base with jitter, ernd=0.
        assert_eq!(base_interval(Some(1024), 256), 1024);
        assert_eq!(base_interval(Some(1100), 256), 1024); // rounded down to a multiple of 256
        assert_eq!(base_interval(Some(100), 1024), 1024); // clamped to the minimum interval
        assert_eq!(base_interval(None, 4096), 4096);
        assert_eq!(effective_interval(1024, true, false), 1152);
        assert_eq!(effective_interval(1024, true, true), 1025);
        assert_eq!(effective_interval(1024, false, false), 1025);
    }

    #[test]
    fn seed_000_bandwidth_worked_example() {
        // §4.4.2: 377965 samples, 4-byte loads, interval 1152; tsc 27685587232500 ..
        // 27685591816027 at 40 ns/tick = 183,341,080 ns; 1,741,662,720 B / 0.18334108 s.
        assert_eq!(estimated_operations(377965, 1152) * 4, 1_741_662_720);
        let elapsed = elapsed_ns_from_ticks(27685587232500, 27685591816027, 40.0);
        assert_eq!(elapsed, 183_341_080.0);
        let bw = bandwidth_bytes_per_s(377965, 1152, 4, elapsed).unwrap();
        assert_eq!(format!("{:.2}", bw / 1e6), "9499.58"); // MB/s as the paper prints it
    }

    #[test]
    fn derived_latency_definition() {
        // Hand-computed: 1000 samples at interval 1152 over 1.1520 ms -> 1.0 ns per load.
        assert_eq!(derived_latency_ns(1_152_000.0, 1000, 1152), Some(1.0));
        assert_eq!(derived_latency_ns(1_000.0, 0, 1152), None);
    }
}
