//! Estimates from sampled operations, exactly as [SPE methodology] (Arm SPE methodology) derives them.
//!
//! - Sampling interval (§4.2.4, table 4.3): the interval the hardware applied to `perf record -c N`.
//! - Derived latency (§4.2.4): time between the first and last sampled operation divided by the
//!   number of operations executed meanwhile (samples × interval).
//! - Bandwidth (§4.4.2): samples × interval × bytes per operation, divided by the same time.
//!
//! These are statistical estimates that hold for regular, repetitive code ([SPE methodology §4.2.4] says so);
//! reports label them as estimates.

use crate::agg::OpKind;
use serde::Serialize;

/// How the Linux arm_spe driver turns a requested period into PMSIRR_EL1.INTERVAL: clamp to the
/// CPU's minimum interval (`/sys/bus/event_source/devices/arm_spe_0/caps/min_interval`) and
/// round down to a multiple of 256 (the register field is bits \[31:8\]). [SPE methodology §4.2.4] step 01:
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

/// The actual (average) sampling interval, [SPE methodology table 4.3]:
///
/// | jitter | caps/ernd | actual interval  |
/// |--------|-----------|------------------|
/// | 0      | any       | base + 1         |
/// | 1      | 0         | base + 128       |
/// | 1      | 1         | base + 1         |
pub fn effective_interval(base: u64, jitter: bool, ernd: bool) -> u64 {
    // Saturating: a recording's minimum interval is a file value, not necessarily sane.
    if jitter && !ernd {
        base.saturating_add(128)
    } else {
        base.saturating_add(1)
    }
}

/// Operations executed while `samples` operations were sampled at `interval` (saturated at
/// `u64::MAX`, which [`EstimateReport::compute`] says in a note).
pub fn estimated_operations(samples: u64, interval: u64) -> u64 {
    samples.saturating_mul(interval)
}

/// The note for a figure that did not fit 64 bits and was saturated, or `None` when `exact`
/// holds it.
fn saturation_note(what: &str, formula: &str, exact: Option<u64>) -> Option<String> {
    exact.is_none().then(|| {
        format!(
            "{formula} does not fit 64 bits: the {what} is saturated at {} and is a lower \
             bound, not the count (are the interval and the samples right?)",
            u64::MAX
        )
    })
}

/// Derived latency in ns per operation ([SPE methodology §4.2.4]): `elapsed_ns / (samples × interval)`.
/// `None` when there are no samples or no elapsed time.
pub fn derived_latency_ns(elapsed_ns: f64, samples: u64, interval: u64) -> Option<f64> {
    let ops = estimated_operations(samples, interval);
    (ops > 0 && elapsed_ns > 0.0).then(|| elapsed_ns / ops as f64)
}

/// Estimated bandwidth in bytes per second ([SPE methodology §4.4.2]):
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

/// Elapsed time between two timer values: `(last − first) × ns_per_tick` ([SPE methodology] uses 40 ns
/// per tick, from CNTFRQ_EL0 = 25 MHz).
pub fn elapsed_ns_from_ticks(first: u64, last: u64, ns_per_tick: f64) -> f64 {
    last.saturating_sub(first) as f64 * ns_per_tick
}

/// Schema identifier of `spelunk estimate --json`.
pub const ESTIMATE_SCHEMA: &str = "spelunk-estimate/1";

/// Which operations an estimate counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CountedOps {
    Load,
    Store,
    /// Loads and stores.
    Memory,
    /// Every selected sample.
    All,
}

impl CountedOps {
    pub fn parse(s: &str) -> Option<CountedOps> {
        match s.trim().to_ascii_lowercase().as_str() {
            "load" | "loads" => Some(CountedOps::Load),
            "store" | "stores" => Some(CountedOps::Store),
            "memory" | "mem" => Some(CountedOps::Memory),
            "all" => Some(CountedOps::All),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            CountedOps::Load => "loads",
            CountedOps::Store => "stores",
            CountedOps::Memory => "loads and stores",
            CountedOps::All => "all sampled operations",
        }
    }
    pub fn counts(self, kind: OpKind) -> bool {
        match self {
            CountedOps::Load => kind == OpKind::Load,
            CountedOps::Store => kind == OpKind::Store,
            CountedOps::Memory => matches!(kind, OpKind::Load | OpKind::Store),
            CountedOps::All => true,
        }
    }
}

/// The counted samples of one (pid, PC): how many, of which kind, and their timer span.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PcSpan {
    pub samples: u64,
    pub loads: u64,
    pub stores: u64,
    /// Samples without a TIMESTAMP packet (not part of the time span).
    pub untimed: u64,
    /// First and last timer value (SPE TIMESTAMP, generic-timer ticks).
    pub first_tick: Option<u64>,
    pub last_tick: Option<u64>,
}

impl PcSpan {
    pub fn add(&mut self, kind: OpKind, tick: Option<u64>) {
        self.samples += 1;
        self.loads += u64::from(kind == OpKind::Load);
        self.stores += u64::from(kind == OpKind::Store);
        match tick {
            Some(t) => {
                self.first_tick = Some(self.first_tick.map_or(t, |f| f.min(t)));
                self.last_tick = Some(self.last_tick.map_or(t, |l| l.max(t)));
            }
            None => self.untimed += 1,
        }
    }
    pub fn merge(&mut self, o: &PcSpan) {
        self.samples += o.samples;
        self.loads += o.loads;
        self.stores += o.stores;
        self.untimed += o.untimed;
        for t in [o.first_tick, o.last_tick].into_iter().flatten() {
            self.first_tick = Some(self.first_tick.map_or(t, |f| f.min(t)));
            self.last_tick = Some(self.last_tick.map_or(t, |l| l.max(t)));
        }
    }
}

/// How the sampling interval was obtained ([SPE methodology §4.2.4] steps 01 and 02).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct IntervalDerivation {
    /// `perf record -c` (the SPE event's sample_period).
    pub requested_period: Option<u64>,
    /// `caps/min_interval` when the recording has it.
    pub min_interval: Option<u64>,
    /// Step 01: the requested period rounded down to a multiple of 256 (or the minimum).
    pub base_interval: Option<u64>,
    pub jitter: Option<bool>,
    /// caps/ernd used for table 4.3 (None: not relevant because jitter is off).
    pub ernd: Option<bool>,
    /// True when ernd was not given and 0 was assumed (it is not recorded in perf.data).
    pub ernd_assumed: bool,
    /// Step 02: the actual (average) interval, table 4.3; or `--interval`.
    pub interval: u64,
    /// True when `--interval` gave the interval.
    pub overridden: bool,
}

impl IntervalDerivation {
    /// The interval from the recording's SPE configuration and table 4.3; `ernd` from the user
    /// (None: assume 0, as on Neoverse N1), `overridden` replaces the result.
    pub fn derive(
        requested_period: Option<u64>,
        min_interval: Option<u64>,
        jitter: Option<bool>,
        ernd: Option<bool>,
        overridden: Option<u64>,
    ) -> Option<IntervalDerivation> {
        let base = requested_period.map(|r| base_interval(Some(r), min_interval.unwrap_or(0)));
        let jit = jitter.unwrap_or(false);
        let derived = base.map(|b| effective_interval(b, jit, ernd.unwrap_or(false)));
        let interval = overridden.or(derived)?;
        Some(IntervalDerivation {
            requested_period,
            min_interval,
            base_interval: base,
            jitter,
            ernd: jit.then_some(ernd.unwrap_or(false)),
            ernd_assumed: jit && ernd.is_none(),
            interval,
            overridden: overridden.is_some(),
        })
    }
}

/// The timer the SPE timestamps count (from TIME_CONV or `--timer-hz`).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct TimerInfo {
    /// Nanoseconds per tick (TIME_CONV: time_mult / 2^time_shift).
    pub ns_per_tick: f64,
    pub frequency_hz: f64,
    /// `TIME_CONV` or `--timer-hz`.
    pub from: String,
}

impl TimerInfo {
    pub fn from_time_conv(time_mult: u32, time_shift: u16) -> Option<TimerInfo> {
        let ns = f64::from(time_mult) / 2f64.powi(i32::from(time_shift.min(63)));
        (ns > 0.0).then(|| TimerInfo {
            ns_per_tick: ns,
            frequency_hz: 1e9 / ns,
            from: format!("TIME_CONV: time_mult {time_mult}, time_shift {time_shift}"),
        })
    }
    pub fn from_hz(hz: f64) -> Option<TimerInfo> {
        (hz > 0.0 && hz.is_finite()).then(|| TimerInfo {
            ns_per_tick: 1e9 / hz,
            frequency_hz: hz,
            from: "--timer-hz".into(),
        })
    }
}

/// Bytes per operation for a bandwidth estimate.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct BytesPerOp {
    /// `--bytes-per-op` or `instructions` (decoded at each sampled PC).
    pub from: String,
    /// The common size when every counted instruction moves the same number of bytes (or the
    /// user's value); None when sizes differ.
    pub uniform: Option<u64>,
    /// Σ samples × bytes over the counted instructions.
    pub sample_bytes: u64,
    /// Per instruction when decoded: (address, text, bytes, samples), most samples first.
    pub instructions: Vec<SizedInstruction>,
}

#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SizedInstruction {
    pub address: u64,
    pub text: String,
    pub bytes: u64,
    pub samples: u64,
}

/// What an estimate computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EstimateKind {
    Latency,
    Bandwidth,
}

/// An estimate with every input and step (schema [`ESTIMATE_SCHEMA`]; docs/estimate.md).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct EstimateReport {
    pub schema: &'static str,
    pub kind: EstimateKind,
    pub file: String,
    /// The selection (filters, symbol or PC range), human-readable.
    pub selection: Vec<String>,
    pub counted: CountedOps,
    /// Counted samples, and of them loads and stores.
    pub samples: u64,
    pub loads: u64,
    pub stores: u64,
    /// Selected samples of other kinds, not counted.
    pub not_counted: u64,
    /// Counted samples without a timestamp (counted, outside the time span).
    pub untimed: u64,
    /// CPUs the counted samples came from.
    pub cpus: u64,
    pub interval: IntervalDerivation,
    pub timer: TimerInfo,
    pub first_tick: u64,
    pub last_tick: u64,
    pub elapsed_ticks: u64,
    /// elapsed_ticks × ns_per_tick.
    pub elapsed_ns: f64,
    /// samples × interval: the operations executed meanwhile.
    pub estimated_operations: u64,
    /// Latency: elapsed_ns / estimated_operations.
    pub derived_latency_ns: Option<f64>,
    /// × `--cpu-ghz`, when given.
    pub derived_latency_cycles: Option<f64>,
    pub cpu_ghz: Option<f64>,
    /// Bandwidth: Σ samples × bytes × interval / elapsed.
    pub bytes_per_op: Option<BytesPerOp>,
    pub estimated_bytes: Option<u64>,
    pub bandwidth_bytes_per_s: Option<f64>,
    /// Caveats that apply to this estimate.
    pub notes: Vec<String>,
    /// What the recording lost (as `spelunk report` lists it; set by the caller).
    pub losses: crate::model::Losses,
}

/// Inputs of [`EstimateReport::compute`] besides the spans.
pub struct EstimateSetup {
    pub kind: EstimateKind,
    pub file: String,
    pub selection: Vec<String>,
    pub counted: CountedOps,
    pub not_counted: u64,
    pub cpus: u64,
    pub interval: IntervalDerivation,
    pub timer: TimerInfo,
    pub cpu_ghz: Option<f64>,
    /// Bandwidth only.
    pub bytes_per_op: Option<BytesPerOp>,
}

impl EstimateReport {
    /// Combines the counted samples' span with the setup. Errors say what is missing.
    pub fn compute(setup: EstimateSetup, span: &PcSpan) -> Result<EstimateReport, String> {
        if span.samples == 0 {
            return Err(format!("no {} were selected", setup.counted.name()));
        }
        let (Some(first), Some(last)) = (span.first_tick, span.last_tick) else {
            return Err("the counted samples have no timestamps (record with ts_enable=1)".into());
        };
        let elapsed_ticks = last.saturating_sub(first);
        let elapsed_ns = elapsed_ns_from_ticks(first, last, setup.timer.ns_per_tick);
        if elapsed_ticks == 0 {
            return Err(format!(
                "the first and last counted samples have the same timestamp ({first}); an estimate needs a time span"
            ));
        }
        let interval = setup.interval.interval;
        let ops = estimated_operations(span.samples, interval);
        let mut notes = Vec::new();
        notes.extend(saturation_note(
            "estimated operation count",
            &format!("{} samples x interval {interval}", span.samples),
            span.samples.checked_mul(interval),
        ));
        if setup.cpus > 1 {
            notes.push(format!(
                "the samples come from {} CPUs: the time span is wall-clock time, so operations on different CPUs overlap in it",
                setup.cpus
            ));
        }
        if span.untimed > 0 {
            notes.push(format!(
                "{} counted samples had no timestamp; they count as operations but not for the time span",
                span.untimed
            ));
        }
        if setup.interval.ernd_assumed {
            notes.push("caps/ernd is not recorded in perf.data; 0 was assumed (Neoverse N1), giving base + 128 with jitter; pass --ernd 1 if your CPU reports 1".into());
        }
        let (mut lat_ns, mut lat_cyc, mut bytes, mut bw) = (None, None, None, None);
        match setup.kind {
            EstimateKind::Latency => {
                lat_ns = derived_latency_ns(elapsed_ns, span.samples, interval);
                lat_cyc = match (lat_ns, setup.cpu_ghz) {
                    (Some(l), Some(g)) => Some(l * g),
                    _ => None,
                };
            }
            EstimateKind::Bandwidth => {
                let b = setup
                    .bytes_per_op
                    .as_ref()
                    .ok_or("a bandwidth estimate needs the bytes per operation")?;
                let total = b.sample_bytes.saturating_mul(interval);
                notes.extend(saturation_note(
                    "estimated byte count",
                    &format!("{} sampled bytes x interval {interval}", b.sample_bytes),
                    b.sample_bytes
                        .checked_mul(interval)
                        .filter(|_| b.sample_bytes < u64::MAX),
                ));
                bytes = Some(total);
                bw = (elapsed_ns > 0.0).then(|| total as f64 / (elapsed_ns * 1e-9));
            }
        }
        Ok(EstimateReport {
            schema: ESTIMATE_SCHEMA,
            kind: setup.kind,
            file: setup.file,
            selection: setup.selection,
            counted: setup.counted,
            samples: span.samples,
            loads: span.loads,
            stores: span.stores,
            not_counted: setup.not_counted,
            untimed: span.untimed,
            cpus: setup.cpus,
            interval: setup.interval,
            timer: setup.timer,
            first_tick: first,
            last_tick: last,
            elapsed_ticks,
            elapsed_ns,
            estimated_operations: ops,
            derived_latency_ns: lat_ns,
            derived_latency_cycles: lat_cyc,
            cpu_ghz: setup.cpu_ghz,
            bytes_per_op: setup.bytes_per_op,
            estimated_bytes: bytes,
            bandwidth_bytes_per_s: bw,
            notes,
            losses: Default::default(),
        })
    }
}

/// Bytes per operation from the instructions at the counted PCs: each (mapping, PC, samples)
/// is decoded from its file and contributes samples × the bytes its encoding transfers. Errors
/// name the first instruction whose size cannot be known (then `--bytes-per-op` is needed).
pub fn bytes_from_instructions(
    pcs: &[(Option<std::sync::Arc<crate::maps::Mapping>>, u64, u64)],
    reader: &mut crate::disasm::CodeReader,
) -> Result<BytesPerOp, String> {
    let mut instructions = Vec::new();
    let mut sample_bytes = 0u64;
    for (m, pc, samples) in pcs {
        let m = m
            .as_ref()
            .ok_or_else(|| format!("no mapping holds the sampled PC {pc:#x}"))?;
        let insn = reader.insn_at(m, *pc)?;
        let bytes = insn.access_bytes.ok_or_else(|| {
            format!(
                "the instruction at {pc:#x} ({}) has no known access size",
                insn.text
            )
        })?;
        sample_bytes = sample_bytes.saturating_add(samples.saturating_mul(u64::from(bytes)));
        instructions.push(SizedInstruction {
            address: *pc,
            text: insn.text,
            bytes: u64::from(bytes),
            samples: *samples,
        });
    }
    instructions.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.address.cmp(&b.address)));
    let first = instructions.first().map(|i| i.bytes);
    let uniform = first.filter(|b| instructions.iter().all(|i| i.bytes == *b));
    Ok(BytesPerOp {
        from: "instructions".into(),
        uniform,
        sample_bytes,
        instructions,
    })
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
        assert_eq!(format!("{:.2}", bw / 1e6), "9499.58"); // MB/s as [SPE methodology §4.4.2] prints it
    }

    #[test]
    fn derived_latency_definition() {
        // Hand-computed: 1000 samples at interval 1152 over 1.1520 ms -> 1.0 ns per load.
        assert_eq!(derived_latency_ns(1_152_000.0, 1000, 1152), Some(1.0));
        assert_eq!(derived_latency_ns(1_000.0, 0, 1152), None);
    }

    fn paper_setup(kind: EstimateKind, bytes: Option<BytesPerOp>) -> EstimateSetup {
        EstimateSetup {
            kind,
            file: "perf.data".into(),
            selection: vec![],
            counted: CountedOps::Load,
            not_counted: 0,
            cpus: 1,
            interval: IntervalDerivation::derive(Some(1024), None, Some(true), None, None).unwrap(),
            timer: TimerInfo::from_time_conv(40, 0).unwrap(),
            cpu_ghz: Some(2.8),
            bytes_per_op: bytes,
        }
    }

    #[test]
    fn seed_000_bandwidth_report_end_to_end() {
        // §4.4.2: 377965 samples x 1152 x 4 B over tsc 27685587232500..27685591816027 at 40 ns.
        let span = PcSpan {
            samples: 377965,
            loads: 377965,
            stores: 0,
            untimed: 0,
            first_tick: Some(27685587232500),
            last_tick: Some(27685591816027),
        };
        let b = BytesPerOp {
            from: "--bytes-per-op".into(),
            uniform: Some(4),
            sample_bytes: 377965 * 4,
            instructions: vec![],
        };
        let r =
            EstimateReport::compute(paper_setup(EstimateKind::Bandwidth, Some(b)), &span).unwrap();
        assert_eq!(r.interval.base_interval, Some(1024));
        assert_eq!(r.interval.interval, 1152);
        assert!(r.interval.ernd_assumed);
        assert_eq!(r.timer.frequency_hz, 25e6);
        assert_eq!(r.elapsed_ticks, 4583527);
        assert_eq!(r.elapsed_ns, 183_341_080.0);
        assert_eq!(r.estimated_bytes, Some(1_741_662_720));
        assert_eq!(
            format!("{:.2}", r.bandwidth_bytes_per_s.unwrap() / 1e6),
            "9499.58"
        );
        // Derived latency over the same span: 183341080 ns / (377965 x 1152) = 0.42109... ns.
        let r = EstimateReport::compute(paper_setup(EstimateKind::Latency, None), &span).unwrap();
        let l = r.derived_latency_ns.unwrap();
        assert!((l - 183_341_080.0 / 435_415_680.0).abs() < 1e-15);
        assert!((r.derived_latency_cycles.unwrap() - l * 2.8).abs() < 1e-12);
    }

    /// A product past 64 bits is saturated and said so; an exact one has no such note.
    #[test]
    fn saturated_products_are_said() {
        let span = PcSpan {
            samples: 3,
            loads: 3,
            stores: 0,
            untimed: 0,
            first_tick: Some(0),
            last_tick: Some(100),
        };
        let mut setup = paper_setup(EstimateKind::Latency, None);
        // 3 x (2^63 - 1) overflows; u64::MAX / 3 x 3 does not.
        setup.interval =
            IntervalDerivation::derive(None, None, None, None, Some(i64::MAX as u64)).unwrap();
        let r = EstimateReport::compute(setup, &span).unwrap();
        assert_eq!(r.estimated_operations, u64::MAX);
        let note = r.notes.iter().find(|n| n.contains("saturated")).unwrap();
        assert!(
            note.contains(&format!("3 samples x interval {}", i64::MAX)),
            "{note}"
        );
        let mut setup = paper_setup(EstimateKind::Latency, None);
        setup.interval =
            IntervalDerivation::derive(None, None, None, None, Some(u64::MAX / 3)).unwrap();
        let r = EstimateReport::compute(setup, &span).unwrap();
        assert_eq!(r.estimated_operations, u64::MAX / 3 * 3);
        assert!(
            !r.notes.iter().any(|n| n.contains("saturated")),
            "{:?}",
            r.notes
        );
        // A recording's absurd minimum interval saturates the applied interval, no overflow.
        assert_eq!(effective_interval(u64::MAX - 5, true, false), u64::MAX);
    }

    #[test]
    fn interval_derivation_overrides_and_errors() {
        let d = IntervalDerivation::derive(Some(1100), Some(256), Some(true), Some(true), None)
            .unwrap();
        assert_eq!(
            (d.base_interval, d.interval, d.ernd_assumed),
            (Some(1024), 1025, false)
        );
        let d = IntervalDerivation::derive(Some(1024), None, Some(false), None, None).unwrap();
        assert_eq!((d.interval, d.ernd), (1025, None));
        let d = IntervalDerivation::derive(None, None, None, None, Some(4096)).unwrap();
        assert_eq!((d.interval, d.overridden), (4096, true));
        assert_eq!(
            IntervalDerivation::derive(None, None, None, None, None),
            None
        );
        let span = PcSpan::default();
        assert!(EstimateReport::compute(paper_setup(EstimateKind::Latency, None), &span).is_err());
        let mut one = PcSpan::default();
        one.add(OpKind::Load, Some(5));
        assert!(
            EstimateReport::compute(paper_setup(EstimateKind::Latency, None), &one)
                .unwrap_err()
                .contains("same timestamp")
        );
    }
}
