//! `spelunk bench`: a memory-behaviour gate for CI. A benchmark run under the emulator gives
//! the emulated core's exact counter totals (cycles, refills per level, TLB walks, ...) and SPE
//! samples attributed per function, source line and data object. A **baseline** keeps both
//! ([`Baseline`], schema `spelunk-bench/1`); a later run is compared with it metric by metric
//! against thresholds in percent with an absolute floor ([`Thresholds`]), and every regression
//! is explained by the functions, lines and objects whose sampled counts moved most, with the
//! shift of their loads' data sources ([`compare`]). docs/bench.md states the metrics, the
//! defaults and the rules.

use crate::diff::{weights, NOISE_SIGMAS};
use crate::model::{GroupStats, Hotspot, ObjectRow, Report};
use crate::symbolize::short_name;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Schema identifier of a baseline file.
pub const BENCH_SCHEMA: &str = "spelunk-bench/1";
/// Schema identifier of `spelunk bench --compare --json`.
pub const BENCH_COMPARE_SCHEMA: &str = "spelunk-bench-compare/1";

/// What is gated. Each is a counter total of the emulated run (or a ratio of two).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// CPU_CYCLES.
    Cycles,
    /// INST_RETIRED.
    Instructions,
    /// INST_RETIRED ÷ CPU_CYCLES (a fall is the regression).
    Ipc,
    /// L1D_CACHE_REFILL.
    L1dRefills,
    /// L2D_CACHE_REFILL.
    L2Refills,
    /// LL_CACHE_MISS_RD: reads not served by the system-level cache.
    LlcRefills,
    /// The emulator's exact bytes of loads served by DRAM (ground truth TRUTH_LOAD_BYTES_DRAM).
    DramBytes,
    /// DTLB_WALK + ITLB_WALK.
    TlbWalks,
    /// BR_MIS_PRED_RETIRED.
    BranchMispredicts,
    /// STALL_BACKEND ÷ CPU_CYCLES.
    BackendStallShare,
}

/// Every metric, in the order tables print them.
pub const METRICS: [Metric; 10] = [
    Metric::Cycles,
    Metric::Instructions,
    Metric::Ipc,
    Metric::L1dRefills,
    Metric::L2Refills,
    Metric::LlcRefills,
    Metric::DramBytes,
    Metric::TlbWalks,
    Metric::BranchMispredicts,
    Metric::BackendStallShare,
];

/// A regression threshold: a change is past it when |Δ| exceeds both `pct` % of the baseline
/// and the absolute `floor` (in the metric's unit), so that tiny counts moving by a few do not
/// fail a build.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Threshold {
    pub pct: f64,
    pub floor: f64,
}

/// What samples stand for a metric when a regression is explained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Proxy {
    /// diff's cost (docs/diff.md): cycles at stake.
    Cost,
    /// Every sampled operation.
    Ops,
    /// Samples with the L1D-refill event.
    L1dMiss,
    /// Loads served beyond the L2.
    BeyondL2,
    /// Loads served by DRAM.
    Dram,
    /// Samples with a TLB walk.
    TlbWalk,
    /// Mispredicted branches.
    Mispredict,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::Cycles => "cycles",
            Metric::Instructions => "instructions",
            Metric::Ipc => "ipc",
            Metric::L1dRefills => "l1d_refills",
            Metric::L2Refills => "l2_refills",
            Metric::LlcRefills => "llc_refills",
            Metric::DramBytes => "dram_bytes",
            Metric::TlbWalks => "tlb_walks",
            Metric::BranchMispredicts => "branch_mispredicts",
            Metric::BackendStallShare => "backend_stall_share",
        }
    }

    /// The metric's name in sentences ("L1D refills").
    pub fn label(self) -> &'static str {
        match self {
            Metric::Cycles => "cycles",
            Metric::Instructions => "instructions",
            Metric::Ipc => "IPC",
            Metric::L1dRefills => "L1D refills",
            Metric::L2Refills => "L2 refills",
            Metric::LlcRefills => "LLC refills",
            Metric::DramBytes => "DRAM bytes",
            Metric::TlbWalks => "TLB walks",
            Metric::BranchMispredicts => "branch mispredicts",
            Metric::BackendStallShare => "back-end stall share",
        }
    }

    pub fn from_name(name: &str) -> Option<Metric> {
        METRICS.iter().copied().find(|m| m.name() == name)
    }

    /// A rise is worse (every metric but IPC).
    pub fn higher_is_worse(self) -> bool {
        self != Metric::Ipc
    }

    /// The metric is a ratio (printed with decimals, not as a count).
    pub fn is_ratio(self) -> bool {
        matches!(self, Metric::Ipc | Metric::BackendStallShare)
    }

    /// The default threshold (docs/bench.md, "Thresholds"). spelunk's own choice, not a
    /// published figure: the emulator's single-threaded counts move by a few tenths of a
    /// percent between runs (address-space layout; emulator/MODEL.md, "Validation"), so 2 % on
    /// time-like totals and 5 % on miss counts sit well above that, and the floors keep a
    /// handful of misses from failing a build.
    pub fn default_threshold(self) -> Threshold {
        let (pct, floor) = match self {
            Metric::Cycles => (2.0, 10_000.0),
            Metric::Instructions => (1.0, 10_000.0),
            Metric::Ipc => (2.0, 0.01),
            Metric::L1dRefills | Metric::L2Refills | Metric::LlcRefills => (5.0, 1_000.0),
            Metric::DramBytes => (5.0, 65_536.0),
            Metric::TlbWalks => (10.0, 100.0),
            Metric::BranchMispredicts => (5.0, 1_000.0),
            Metric::BackendStallShare => (5.0, 0.02),
        };
        Threshold { pct, floor }
    }

    fn proxy(self) -> Proxy {
        match self {
            Metric::Cycles | Metric::Ipc | Metric::BackendStallShare => Proxy::Cost,
            Metric::Instructions => Proxy::Ops,
            Metric::L1dRefills => Proxy::L1dMiss,
            Metric::L2Refills => Proxy::BeyondL2,
            Metric::LlcRefills | Metric::DramBytes => Proxy::Dram,
            Metric::TlbWalks => Proxy::TlbWalk,
            Metric::BranchMispredicts => Proxy::Mispredict,
        }
    }
}

/// PMU event names the metrics read (Arm architected common events: CPU_CYCLES 0x11,
/// INST_RETIRED 0x08, L1D_CACHE_REFILL 0x03, L2D_CACHE_REFILL 0x17, LL_CACHE_MISS_RD 0x37,
/// DTLB_WALK 0x34, ITLB_WALK 0x35, BR_MIS_PRED_RETIRED 0x22, STALL_BACKEND 0x24; Arm
/// Architecture Reference Manual, "PMU events and event numbers").
const CPU_CYCLES: &str = "CPU_CYCLES";
const INST_RETIRED: &str = "INST_RETIRED";
const STALL_BACKEND: &str = "STALL_BACKEND";
/// The emulator's ground truth: bytes of loads served by DRAM (emulator/MODEL.md "Ground truth").
const TRUTH_LOAD_BYTES_DRAM: &str = "TRUTH_LOAD_BYTES_DRAM";

/// The metrics of a run from its counter totals and the emulator's ground-truth totals; a
/// metric whose events are absent is `None` ("not counted"), never 0.
pub fn metric_values(
    counters: &BTreeMap<String, u64>,
    truth: &BTreeMap<String, u64>,
) -> BTreeMap<Metric, Option<f64>> {
    let c = |e: &str| counters.get(e).map(|v| *v as f64);
    let ratio =
        |n: Option<f64>, d: Option<f64>| n.zip(d).and_then(|(n, d)| (d > 0.0).then_some(n / d));
    let tlb = match (c("DTLB_WALK"), c("ITLB_WALK")) {
        (None, None) => None,
        (d, i) => Some(d.unwrap_or(0.0) + i.unwrap_or(0.0)),
    };
    METRICS
        .iter()
        .map(|&m| {
            let v = match m {
                Metric::Cycles => c(CPU_CYCLES),
                Metric::Instructions => c(INST_RETIRED),
                Metric::Ipc => ratio(c(INST_RETIRED), c(CPU_CYCLES)),
                Metric::L1dRefills => c("L1D_CACHE_REFILL"),
                Metric::L2Refills => c("L2D_CACHE_REFILL"),
                Metric::LlcRefills => c("LL_CACHE_MISS_RD"),
                Metric::DramBytes => truth.get(TRUTH_LOAD_BYTES_DRAM).map(|v| *v as f64),
                Metric::TlbWalks => tlb,
                Metric::BranchMispredicts => c("BR_MIS_PRED_RETIRED"),
                Metric::BackendStallShare => ratio(c(STALL_BACKEND), c(CPU_CYCLES)),
            };
            (m, v)
        })
        .collect()
}

/// What a benchmark ran on: a change of any of these (the build-ids aside) makes the
/// comparison refuse unless allowed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Environment {
    pub spelunk_version: String,
    /// The emulated core (`neoverse-n1`, ...).
    pub emulator_core: String,
    /// The emulated platform preset, when one was named.
    pub emulator_platform: Option<String>,
    /// Further emulator options, as given.
    pub emulator_options: Vec<String>,
    /// SPE sampling interval asked for (operations).
    pub period_ops: u64,
    /// The C library's version (glibc's `gnu_get_libc_version`), when known.
    pub libc_version: Option<String>,
    /// The host architecture the emulator ran on (x86_64, aarch64).
    pub host_arch: String,
    /// The program's GNU build-id (.note.gnu.build-id, hex), when it has one. Not compared:
    /// the program is expected to change.
    pub program_build_id: Option<String>,
}

/// A difference of environment between the baseline and the new run.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct EnvChange {
    pub field: String,
    pub baseline: String,
    pub new: String,
}

impl Environment {
    /// The fields that differ, build-ids aside.
    pub fn changes(&self, new: &Environment) -> Vec<EnvChange> {
        let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "(none)".into());
        let fields: [(&str, String, String); 7] = [
            (
                "spelunk_version",
                self.spelunk_version.clone(),
                new.spelunk_version.clone(),
            ),
            (
                "emulator_core",
                self.emulator_core.clone(),
                new.emulator_core.clone(),
            ),
            (
                "emulator_platform",
                opt(&self.emulator_platform),
                opt(&new.emulator_platform),
            ),
            (
                "emulator_options",
                self.emulator_options.join(" "),
                new.emulator_options.join(" "),
            ),
            (
                "period_ops",
                self.period_ops.to_string(),
                new.period_ops.to_string(),
            ),
            (
                "libc_version",
                opt(&self.libc_version),
                opt(&new.libc_version),
            ),
            ("host_arch", self.host_arch.clone(), new.host_arch.clone()),
        ];
        fields
            .into_iter()
            .filter(|(_, a, b)| a != b)
            .map(|(f, a, b)| EnvChange {
                field: f.into(),
                baseline: a,
                new: b,
            })
            .collect()
    }
}

/// Loads of one data source.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SourceLoads {
    pub source: String,
    pub loads: u64,
}

/// A function, source line or data object's sampled counts in a run (raw samples; × the
/// run's `interval_ops` they estimate operations).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BenchRow {
    /// The function name, `file:line`, or the object's `name (kind)`.
    pub key: String,
    /// The DSO's file name.
    pub dso: Option<String>,
    pub function: Option<String>,
    /// The source file as the debug information names it.
    pub file: Option<String>,
    pub line: Option<u32>,
    pub samples: u64,
    pub loads: u64,
    pub stores: u64,
    /// Samples with the L1D-refill event.
    pub l1d_miss: u64,
    pub tlb_walk: u64,
    pub mispredicts: u64,
    /// Σ of the samples' weights: diff's cost in sampled cycles (docs/diff.md, "Cost").
    pub cost_sampled_cycles: f64,
    /// Σ of the squared weights, for the cost's sampling error.
    pub cost_sum_squares: f64,
    /// Loads per data source.
    pub sources: Vec<SourceLoads>,
}

impl BenchRow {
    fn new(key: String, dso: Option<&str>, stats: &GroupStats) -> BenchRow {
        let w = weights(stats);
        BenchRow {
            key,
            dso: dso.map(|d| short_name(d).to_string()),
            function: None,
            file: None,
            line: None,
            samples: stats.samples,
            loads: stats.loads,
            stores: stats.stores,
            l1d_miss: stats.l1d_miss,
            tlb_walk: stats.tlb_walk,
            mispredicts: stats.mispredicts,
            cost_sampled_cycles: w.sum,
            cost_sum_squares: w.sum_squares,
            sources: stats
                .sources
                .iter()
                .map(|s| SourceLoads {
                    source: s.source.clone(),
                    loads: s.loads,
                })
                .collect(),
        }
    }

    fn loads_from(&self, keep: impl Fn(&str) -> bool) -> u64 {
        self.sources
            .iter()
            .filter(|s| keep(&s.source))
            .map(|s| s.loads)
            .sum()
    }

    /// The row's samples standing for `proxy` (raw), and the sum of their squared weights.
    fn proxy(&self, proxy: Proxy) -> (f64, f64) {
        let n = |x: u64| (x as f64, x as f64);
        match proxy {
            Proxy::Cost => (self.cost_sampled_cycles, self.cost_sum_squares),
            Proxy::Ops => n(self.samples),
            Proxy::L1dMiss => n(self.l1d_miss),
            Proxy::BeyondL2 => n(self.loads_from(|s| !is_l1_or_l2(s))),
            Proxy::Dram => n(self.loads_from(is_dram)),
            Proxy::TlbWalk => n(self.tlb_walk),
            Proxy::Mispredict => n(self.mispredicts),
        }
    }

    fn source_share(&self, source: &str) -> f64 {
        let total: u64 = self.sources.iter().map(|s| s.loads).sum();
        if total == 0 {
            return 0.0;
        }
        self.loads_from(|s| s == source) as f64 / total as f64
    }
}

/// Data sources at or inside the core's L2 (the names `spelunk report` gives them).
fn is_l1_or_l2(source: &str) -> bool {
    matches!(source, "L1D" | "L2D" | "L2D-HITM")
}

fn is_dram(source: &str) -> bool {
    matches!(source, "DRAM" | "REMOTE-DRAM")
}

/// One benchmark's run: what it ran, where, its metrics and its attributed samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BenchmarkRun {
    pub name: String,
    /// The program and its arguments.
    pub command: Vec<String>,
    pub environment: Environment,
    /// The run's effective sampling interval (operations per sample); a row's samples × this
    /// estimate its operations.
    pub interval_ops: Option<u64>,
    /// The program's exit status.
    pub exit_code: u8,
    /// Each metric's value; null when its events were not counted.
    pub metrics: BTreeMap<Metric, Option<f64>>,
    pub functions: Vec<BenchRow>,
    pub lines: Vec<BenchRow>,
    pub objects: Vec<BenchRow>,
}

impl BenchmarkRun {
    /// A run from its report (every row, as `spelunk diff` builds it) and its counters.
    pub fn from_report(
        name: String,
        command: Vec<String>,
        environment: Environment,
        exit_code: u8,
        report: &Report,
        metrics: BTreeMap<Metric, Option<f64>>,
    ) -> BenchmarkRun {
        let hot = |h: &Hotspot| {
            let mut r = BenchRow::new(h.key.clone(), h.dso.as_deref(), &h.stats);
            r.function = h.function.clone();
            r.file = h.file.clone();
            r.line = h.line;
            r
        };
        let obj = |o: &ObjectRow| {
            BenchRow::new(
                format!("{} ({})", o.name, o.kind),
                o.dso.as_deref(),
                &o.stats,
            )
        };
        let interval_ops = report
            .recording
            .sampling
            .as_ref()
            .and_then(|s| s.effective_interval)
            .or_else(|| {
                report
                    .recording
                    .sampling_quality
                    .as_ref()
                    .and_then(|q| q.interval)
            })
            .filter(|i| *i > 0);
        BenchmarkRun {
            name,
            command,
            environment,
            interval_ops,
            exit_code,
            metrics,
            functions: report.hotspots.functions.iter().map(hot).collect(),
            lines: report.hotspots.lines.iter().map(hot).collect(),
            objects: report.objects.iter().map(obj).collect(),
        }
    }

    fn metric(&self, m: Metric) -> Option<f64> {
        self.metrics.get(&m).copied().flatten()
    }
}

/// A baseline file: one run per benchmark.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Baseline {
    /// `spelunk-bench/1`.
    pub schema: String,
    pub benchmarks: Vec<BenchmarkRun>,
}

impl Baseline {
    pub fn new(benchmarks: Vec<BenchmarkRun>) -> Baseline {
        Baseline {
            schema: BENCH_SCHEMA.into(),
            benchmarks,
        }
    }

    /// Replaces (or adds) the benchmarks of `runs` named in `names` (every one when `names`
    /// is None): `--update` and `--accept NAME`.
    pub fn accept(&mut self, runs: &[BenchmarkRun], names: Option<&[String]>) {
        for r in runs {
            if names.is_some_and(|n| !n.contains(&r.name)) {
                continue;
            }
            match self.benchmarks.iter_mut().find(|b| b.name == r.name) {
                Some(b) => *b = r.clone(),
                None => self.benchmarks.push(r.clone()),
            }
        }
    }
}

/// A threshold for one metric, overridden in part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
pub struct ThresholdOverride {
    pub pct: Option<f64>,
    pub floor: Option<f64>,
}

/// The thresholds of one benchmark: the defaults, then the configuration's, then the
/// benchmark's own.
#[derive(Clone, Debug, PartialEq)]
pub struct Thresholds(pub BTreeMap<Metric, Threshold>);

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds(
            METRICS
                .iter()
                .map(|&m| (m, m.default_threshold()))
                .collect(),
        )
    }
}

impl Thresholds {
    /// These thresholds with `overrides` applied.
    pub fn with(&self, overrides: &BTreeMap<Metric, ThresholdOverride>) -> Thresholds {
        let mut t = self.clone();
        for (m, o) in overrides {
            let e = t.0.entry(*m).or_insert_with(|| m.default_threshold());
            if let Some(p) = o.pct {
                e.pct = p;
            }
            if let Some(f) = o.floor {
                e.floor = f;
            }
        }
        t
    }

    fn get(&self, m: Metric) -> Threshold {
        self.0
            .get(&m)
            .copied()
            .unwrap_or_else(|| m.default_threshold())
    }
}

/// A metric's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MetricStatus {
    Unchanged,
    Improved,
    Regressed,
    /// Not counted on one side or both: not gated.
    NotCounted,
}

/// A data source's share of a row's loads before and after.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SourceShift {
    pub source: String,
    pub share_baseline: f64,
    pub share_new: f64,
}

/// A function whose samples moved the metric, with its line and object that moved most.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Cause {
    pub function: String,
    pub dso: Option<String>,
    /// The function's source line whose samples moved most.
    pub file: Option<String>,
    pub line: Option<u32>,
    /// The data object whose samples moved most (all functions), for the top cause only.
    pub object: Option<String>,
    /// The metric's sampled stand-in (docs/bench.md, "Explanations") × interval, each side.
    pub estimate_baseline: f64,
    pub estimate_new: f64,
    /// 2 standard errors of the change (as `spelunk diff`'s noise rule): below it, the row's
    /// move could be sampling alone.
    pub noise: f64,
    /// The data source whose share of the function's loads changed most.
    pub source_shift: Option<SourceShift>,
}

/// One metric of one benchmark compared.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct MetricComparison {
    pub metric: Metric,
    pub baseline: Option<f64>,
    pub new: Option<f64>,
    /// new − baseline.
    pub delta: Option<f64>,
    /// (new − baseline) ÷ baseline × 100; None when the baseline is 0 or either is missing.
    pub delta_pct: Option<f64>,
    pub threshold: Threshold,
    pub status: MetricStatus,
    /// For a regression: the functions whose samples moved most, largest first.
    pub causes: Vec<Cause>,
    /// For a regression: one sentence, e.g. "L1D refills +38 % (+1.2 M): parse() at
    /// parse.c:88, loads now L2D 61 % (was 3 %)".
    pub explanation: Option<String>,
}

/// A benchmark's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BenchStatus {
    /// Every metric within its threshold.
    Unchanged,
    /// Some metric better past its threshold, none worse.
    Improved,
    /// Some metric worse past its threshold.
    Regressed,
    /// The environment changed and that was not allowed: not compared.
    Refused,
    /// Not in the baseline.
    New,
    /// In the baseline, not run.
    Missing,
}

#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct BenchmarkComparison {
    pub name: String,
    pub status: BenchStatus,
    pub environment_changes: Vec<EnvChange>,
    /// The regression was accepted (`--accept NAME` / `--update`): the baseline now holds
    /// the new run.
    pub accepted: bool,
    pub metrics: Vec<MetricComparison>,
}

/// `spelunk bench --compare`'s result.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct BenchComparison {
    /// `spelunk-bench-compare/1`.
    pub schema: &'static str,
    pub baseline_file: String,
    pub benchmarks: Vec<BenchmarkComparison>,
}

impl BenchComparison {
    /// Some benchmark regressed (and was not accepted).
    pub fn regressed(&self) -> bool {
        self.benchmarks
            .iter()
            .any(|b| b.status == BenchStatus::Regressed && !b.accepted)
    }

    /// Some benchmark was refused for its environment.
    pub fn refused(&self) -> bool {
        self.benchmarks
            .iter()
            .any(|b| b.status == BenchStatus::Refused)
    }
}

/// How a comparison treats what it finds.
#[derive(Clone, Debug, Default)]
pub struct CompareOptions {
    /// Compare even when the environment changed.
    pub allow_env_change: bool,
    /// Thresholds per benchmark name (the defaults for one not named).
    pub thresholds: BTreeMap<String, Thresholds>,
    /// Causes listed per regression.
    pub causes: usize,
}

/// Compares `runs` with `baseline`.
pub fn compare(
    baseline: &Baseline,
    baseline_file: &str,
    runs: &[BenchmarkRun],
    opts: &CompareOptions,
) -> BenchComparison {
    let mut benchmarks = Vec::new();
    for run in runs {
        let Some(base) = baseline.benchmarks.iter().find(|b| b.name == run.name) else {
            benchmarks.push(BenchmarkComparison {
                name: run.name.clone(),
                status: BenchStatus::New,
                environment_changes: Vec::new(),
                accepted: false,
                metrics: Vec::new(),
            });
            continue;
        };
        let thresholds = opts.thresholds.get(&run.name).cloned().unwrap_or_default();
        benchmarks.push(compare_one(base, run, &thresholds, opts));
    }
    for b in &baseline.benchmarks {
        if !runs.iter().any(|r| r.name == b.name) {
            benchmarks.push(BenchmarkComparison {
                name: b.name.clone(),
                status: BenchStatus::Missing,
                environment_changes: Vec::new(),
                accepted: false,
                metrics: Vec::new(),
            });
        }
    }
    BenchComparison {
        schema: BENCH_COMPARE_SCHEMA,
        baseline_file: baseline_file.into(),
        benchmarks,
    }
}

fn compare_one(
    base: &BenchmarkRun,
    run: &BenchmarkRun,
    thresholds: &Thresholds,
    opts: &CompareOptions,
) -> BenchmarkComparison {
    let environment_changes = base.environment.changes(&run.environment);
    let refused = !environment_changes.is_empty() && !opts.allow_env_change;
    let metrics: Vec<MetricComparison> = METRICS
        .iter()
        .map(|&m| compare_metric(m, base, run, thresholds.get(m), opts.causes))
        .collect();
    let any = |s: MetricStatus| metrics.iter().any(|x| x.status == s);
    let status = if refused {
        BenchStatus::Refused
    } else if any(MetricStatus::Regressed) {
        BenchStatus::Regressed
    } else if any(MetricStatus::Improved) {
        BenchStatus::Improved
    } else {
        BenchStatus::Unchanged
    };
    BenchmarkComparison {
        name: run.name.clone(),
        status,
        environment_changes,
        accepted: false,
        metrics,
    }
}

/// The verdict of a change: worse or better past the threshold, else unchanged.
pub fn judge(metric: Metric, baseline: f64, new: f64, t: Threshold) -> MetricStatus {
    let delta = new - baseline;
    let limit = (t.pct / 100.0 * baseline.abs()).max(t.floor);
    if delta.abs() <= limit {
        MetricStatus::Unchanged
    } else if (delta > 0.0) == metric.higher_is_worse() {
        MetricStatus::Regressed
    } else {
        MetricStatus::Improved
    }
}

fn compare_metric(
    m: Metric,
    base: &BenchmarkRun,
    run: &BenchmarkRun,
    threshold: Threshold,
    causes: usize,
) -> MetricComparison {
    let (a, b) = (base.metric(m), run.metric(m));
    let status = match (a, b) {
        (Some(a), Some(b)) => judge(m, a, b, threshold),
        _ => MetricStatus::NotCounted,
    };
    let delta = a.zip(b).map(|(a, b)| b - a);
    let delta_pct = a
        .zip(b)
        .and_then(|(a, b)| (a != 0.0).then(|| (b - a) / a * 100.0));
    let mut c = MetricComparison {
        metric: m,
        baseline: a,
        new: b,
        delta,
        delta_pct,
        threshold,
        status,
        causes: Vec::new(),
        explanation: None,
    };
    if status == MetricStatus::Regressed {
        c.causes = explain(m, base, run, causes);
        c.explanation = Some(sentence(&c));
    }
    c
}

/// Matching keys of rows: (key, DSO file name), the DSO None for the benchmark's program
/// itself, so that a program built under another name (or path) still matches.
fn row_map<'a>(
    rows: &'a [BenchRow],
    program: &str,
) -> BTreeMap<(&'a str, Option<&'a str>), &'a BenchRow> {
    rows.iter()
        .map(|r| {
            let dso = r.dso.as_deref().filter(|d| *d != program);
            ((r.key.as_str(), dso), r)
        })
        .collect()
}

impl BenchmarkRun {
    /// The program's file name (as rows name their DSO).
    fn program(&self) -> &str {
        self.command.first().map_or("", |p| short_name(p))
    }
}

/// A row's change in the metric's stand-in (estimated: × each side's interval), worse
/// direction positive, and its noise (2 standard errors).
struct Moved<'a> {
    key: (&'a str, Option<&'a str>),
    baseline: Option<&'a BenchRow>,
    new: Option<&'a BenchRow>,
    estimate_baseline: f64,
    estimate_new: f64,
    noise: f64,
}

/// One side of a comparison: its rows, its program's file name, its interval.
#[derive(Clone, Copy)]
struct Side<'a> {
    rows: &'a [BenchRow],
    program: &'a str,
    interval: f64,
}

fn moved<'a>(proxy: Proxy, a: Side<'a>, b: Side<'a>) -> Vec<Moved<'a>> {
    let (ia, ib) = (a.interval, b.interval);
    let (ma, mb) = (row_map(a.rows, a.program), row_map(b.rows, b.program));
    let mut keys: Vec<(&str, Option<&str>)> = ma.keys().chain(mb.keys()).copied().collect();
    keys.sort();
    keys.dedup();
    let mut v: Vec<Moved> = keys
        .into_iter()
        .map(|k| {
            let (x, y) = (ma.get(&k).copied(), mb.get(&k).copied());
            let (sa, qa) = x.map_or((0.0, 0.0), |r| r.proxy(proxy));
            let (sb, qb) = y.map_or((0.0, 0.0), |r| r.proxy(proxy));
            Moved {
                key: k,
                baseline: x,
                new: y,
                estimate_baseline: ia * sa,
                estimate_new: ib * sb,
                noise: NOISE_SIGMAS * (ia * ia * qa + ib * ib * qb).sqrt(),
            }
        })
        .collect();
    // The largest rise first; ties by key, so the order does not depend on the map.
    v.sort_by(|x, y| {
        (y.estimate_new - y.estimate_baseline)
            .total_cmp(&(x.estimate_new - x.estimate_baseline))
            .then(x.key.cmp(&y.key))
    });
    v
}

/// The functions whose sampled stand-in for `m` rose most (for IPC, whose fall is the
/// regression, the cost that rose), each with its line that rose most and the data-source
/// shift of its loads; the top one also names the object that rose most.
fn explain<'a>(m: Metric, base: &'a BenchmarkRun, run: &'a BenchmarkRun, n: usize) -> Vec<Cause> {
    let proxy = m.proxy();
    let side = |r: &'a BenchmarkRun, rows: fn(&BenchmarkRun) -> &[BenchRow]| Side {
        rows: rows(r),
        program: r.program(),
        interval: r.interval_ops.unwrap_or(1) as f64,
    };
    let pair =
        |rows: fn(&BenchmarkRun) -> &[BenchRow]| moved(proxy, side(base, rows), side(run, rows));
    let functions = pair(|r| &r.functions);
    let lines = pair(|r| &r.lines);
    let objects = pair(|r| &r.objects);
    let rose = |x: &Moved| x.estimate_new > x.estimate_baseline;
    // Rows whose rise is past the sampling error first; those within it only when no row is.
    let beyond = |x: &Moved| x.estimate_new - x.estimate_baseline >= x.noise;
    let any_beyond = functions.iter().any(|f| rose(f) && beyond(f));
    let top_object = objects
        .iter()
        .find(|o| rose(o))
        .map(|o| o.key.0.to_string());
    functions
        .iter()
        .filter(|f| rose(f) && (beyond(f) || !any_beyond))
        .take(n)
        .enumerate()
        .map(|(i, f)| {
            let line = lines
                .iter()
                .filter(|l| rose(l))
                .find(|l| {
                    let r = l.new.or(l.baseline);
                    r.and_then(|r| r.function.as_deref()) == Some(f.key.0) && l.key.1 == f.key.1
                })
                .and_then(|l| l.new.or(l.baseline));
            Cause {
                function: f.key.0.to_string(),
                dso: f.key.1.map(str::to_string),
                file: line.and_then(|l| l.file.clone()),
                line: line.and_then(|l| l.line),
                object: if i == 0 { top_object.clone() } else { None },
                estimate_baseline: f.estimate_baseline,
                estimate_new: f.estimate_new,
                noise: f.noise,
                source_shift: source_shift(f.baseline, f.new),
            }
        })
        .collect()
}

/// The data source whose share of the row's loads rose most (when any did).
fn source_shift(a: Option<&BenchRow>, b: Option<&BenchRow>) -> Option<SourceShift> {
    let b = b?;
    let share = |r: Option<&BenchRow>, s: &str| r.map_or(0.0, |r| r.source_share(s));
    b.sources
        .iter()
        .map(|s| SourceShift {
            source: s.source.clone(),
            share_baseline: share(a, &s.source),
            share_new: share(Some(b), &s.source),
        })
        .filter(|s| s.share_new > s.share_baseline)
        .max_by(|x, y| {
            (x.share_new - x.share_baseline)
                .total_cmp(&(y.share_new - y.share_baseline))
                .then(y.source.cmp(&x.source))
        })
}

/// A figure with an SI suffix: "1.2 M", "350 k", "0.231" for ratios.
pub fn figure(m: Metric, x: f64) -> String {
    if m.is_ratio() {
        return format!("{x:.3}");
    }
    let a = x.abs();
    let (v, unit) = match a {
        a if a >= 1e9 => (x / 1e9, " G"),
        a if a >= 1e6 => (x / 1e6, " M"),
        a if a >= 1e3 => (x / 1e3, " k"),
        _ => return format!("{x:.0}"),
    };
    format!("{v:.1}{unit}")
}

/// "L1D refills +38 % (+1.2 M): parse() at parse.c:88, object tokens, loads now L2D 61 % (was
/// 3 %)".
fn sentence(c: &MetricComparison) -> String {
    let m = c.metric;
    let mut s = format!("{} ", m.label());
    if let Some(p) = c.delta_pct {
        s.push_str(&format!("{p:+.1} % "));
    }
    if let Some(d) = c.delta {
        let sign = if d >= 0.0 { "+" } else { "-" };
        s.push_str(&format!("({sign}{})", figure(m, d.abs())));
    }
    let Some(top) = c.causes.first() else {
        s.push_str(": no sampled function moved (the change is below the samples' resolution)");
        return s;
    };
    s.push_str(&format!(": {}()", top.function));
    if let (Some(f), Some(l)) = (&top.file, top.line) {
        s.push_str(&format!(" at {}:{l}", short_name(f)));
    }
    if let Some(o) = &top.object {
        s.push_str(&format!(", object {o}"));
    }
    if let Some(sh) = &top.source_shift {
        s.push_str(&format!(
            ", loads now {} {:.0} % (was {:.0} %)",
            sh.source,
            100.0 * sh.share_new,
            100.0 * sh.share_baseline
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        key: &str,
        function: &str,
        line: Option<u32>,
        l1d_miss: u64,
        src: &[(&str, u64)],
    ) -> BenchRow {
        BenchRow {
            key: key.into(),
            dso: Some("prog".into()),
            function: Some(function.into()),
            file: line.map(|_| "/src/parse.c".into()),
            line,
            samples: 100,
            loads: src.iter().map(|s| s.1).sum(),
            stores: 0,
            l1d_miss,
            tlb_walk: 0,
            mispredicts: 0,
            cost_sampled_cycles: 25.0,
            cost_sum_squares: 6.25,
            sources: src
                .iter()
                .map(|(s, l)| SourceLoads {
                    source: (*s).into(),
                    loads: *l,
                })
                .collect(),
        }
    }

    fn run(l1d: f64, parse_miss: u64, parse_src: &[(&str, u64)]) -> BenchmarkRun {
        let mut metrics: BTreeMap<Metric, Option<f64>> =
            METRICS.iter().map(|&m| (m, None)).collect();
        metrics.insert(Metric::L1dRefills, Some(l1d));
        metrics.insert(Metric::Cycles, Some(1e6));
        BenchmarkRun {
            name: "b".into(),
            command: vec!["prog".into()],
            environment: Environment::default(),
            interval_ops: Some(1000),
            exit_code: 0,
            metrics,
            functions: vec![
                row("parse", "parse", None, parse_miss, parse_src),
                row("main", "main", None, 10, &[("L1D", 50)]),
            ],
            lines: vec![
                row("parse.c:88", "parse", Some(88), parse_miss, parse_src),
                row("parse.c:90", "parse", Some(90), 1, &[]),
            ],
            objects: vec![],
        }
    }

    #[test]
    fn thresholds_need_both_the_percentage_and_the_floor() {
        let t = Threshold {
            pct: 5.0,
            floor: 1000.0,
        };
        // 6 % of 10 000 is 600, under the floor
        assert_eq!(
            judge(Metric::L1dRefills, 10_000.0, 10_600.0, t),
            MetricStatus::Unchanged
        );
        // 6 % of 100 000 is 6000, past both
        assert_eq!(
            judge(Metric::L1dRefills, 100_000.0, 106_000.0, t),
            MetricStatus::Regressed
        );
        assert_eq!(
            judge(Metric::L1dRefills, 100_000.0, 94_000.0, t),
            MetricStatus::Improved
        );
        // IPC: a fall is the regression
        let t = Threshold {
            pct: 2.0,
            floor: 0.01,
        };
        assert_eq!(judge(Metric::Ipc, 1.0, 0.9, t), MetricStatus::Regressed);
        assert_eq!(judge(Metric::Ipc, 1.0, 1.1, t), MetricStatus::Improved);
    }

    #[test]
    fn a_regression_names_the_function_line_and_source_shift() {
        let base = run(100_000.0, 3, &[("L1D", 97), ("L2D", 3)]);
        let new = run(138_000.0, 61, &[("L1D", 39), ("L2D", 61)]);
        let c = compare(
            &Baseline::new(vec![base]),
            "b.json",
            &[new],
            &CompareOptions {
                causes: 3,
                ..Default::default()
            },
        );
        let b = &c.benchmarks[0];
        assert_eq!(b.status, BenchStatus::Regressed);
        assert!(c.regressed());
        let l1 = b
            .metrics
            .iter()
            .find(|m| m.metric == Metric::L1dRefills)
            .unwrap();
        assert_eq!(l1.status, MetricStatus::Regressed);
        let top = &l1.causes[0];
        assert_eq!((top.function.as_str(), top.line), ("parse", Some(88)));
        // (61 − 3) samples × 1000
        assert_eq!(top.estimate_new - top.estimate_baseline, 58_000.0);
        assert_eq!(
            l1.explanation.as_deref(),
            Some(
                "L1D refills +38.0 % (+38.0 k): parse() at parse.c:88, loads now L2D 61 % (was 3 %)"
            )
        );
        // a metric counted on one side only is not gated
        let ipc = b.metrics.iter().find(|m| m.metric == Metric::Ipc).unwrap();
        assert_eq!(ipc.status, MetricStatus::NotCounted);
    }

    #[test]
    fn an_environment_change_is_refused_unless_allowed_and_build_ids_do_not_count() {
        let base = run(1.0, 0, &[]);
        let mut new = base.clone();
        new.environment.program_build_id = Some("ab".into());
        let b = Baseline::new(vec![base]);
        let opts = CompareOptions::default();
        let c = compare(&b, "b", std::slice::from_ref(&new), &opts);
        assert_eq!(c.benchmarks[0].status, BenchStatus::Unchanged);
        new.environment.emulator_core = "neoverse-v2".into();
        let c = compare(&b, "b", std::slice::from_ref(&new), &opts);
        assert_eq!(c.benchmarks[0].status, BenchStatus::Refused);
        assert_eq!(
            c.benchmarks[0].environment_changes[0].field,
            "emulator_core"
        );
        let allowed = CompareOptions {
            allow_env_change: true,
            ..Default::default()
        };
        let c = compare(&b, "b", &[new], &allowed);
        assert_eq!(c.benchmarks[0].status, BenchStatus::Unchanged);
    }

    #[test]
    fn metrics_absent_from_the_counters_are_not_counted_never_zero() {
        let mut c = BTreeMap::new();
        c.insert("CPU_CYCLES".to_string(), 200u64);
        c.insert("INST_RETIRED".to_string(), 100u64);
        c.insert("DTLB_WALK".to_string(), 7u64);
        let v = metric_values(&c, &BTreeMap::new());
        assert_eq!(v[&Metric::Ipc], Some(0.5));
        assert_eq!(v[&Metric::TlbWalks], Some(7.0));
        assert_eq!(v[&Metric::L1dRefills], None);
        assert_eq!(v[&Metric::DramBytes], None);
    }
}
