//! The advisor's findings (`spelunk advise`, the first lines of `spelunk report`, the HTML
//! page's first screen, `Recording.findings()` in Python): one typed model, computed by
//! [`crate::advise`] from the analyses' typed results and rendered by crates/report. Every
//! field is defined in docs/advise.md.

use serde::Serialize;

/// Schema identifier of `spelunk advise --json` (1.1: `location.data_range`, and
/// `verification` from `--verify`).
pub const ADVISE_SCHEMA: &str = "spelunk-advise/1.1";

/// What kind of problem a finding is (docs/advise.md, "Classes"): each names the fix that
/// applies to it.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum FindingClass {
    /// Threads write different bytes of one cache line: pad them apart.
    FalseSharing,
    /// Threads write the same bytes: share less (per-thread copies, batching).
    TrueSharing,
    /// Address translation walks: huge pages.
    Tlb,
    /// Strided or column-order access to data used later by other iterations: interchange
    /// or tile the loops.
    Traversal,
    /// Bytes fetched per byte used: pack the hot fields, split hot from cold.
    Layout,
    /// Accesses that cross a cache line: align the data.
    SplitLine,
    /// Loads waiting on a recent store to the same address: keep the value in a register.
    StoreForwarding,
    /// Irregular or long-stride misses a prefetch ahead can hide.
    Prefetch,
    /// Streaming at the memory's bandwidth: prefetch will not help; move fewer bytes.
    Bandwidth,
    /// Loads served by another NUMA node's memory or caches.
    RemoteMemory,
    /// Unpredictable branches.
    BranchMispredict,
    /// Short-lived heap blocks from one site.
    HeapChurn,
    /// Top-down: the front end (instruction supply) limits, memory ruled out.
    FrontEnd,
    /// Top-down: execution (the core) limits, memory ruled out.
    Core,
}

impl FindingClass {
    /// Every class, in the order docs/advise.md lists them.
    pub const ALL: [FindingClass; 14] = [
        FindingClass::FalseSharing,
        FindingClass::TrueSharing,
        FindingClass::Tlb,
        FindingClass::Traversal,
        FindingClass::Layout,
        FindingClass::SplitLine,
        FindingClass::StoreForwarding,
        FindingClass::Prefetch,
        FindingClass::Bandwidth,
        FindingClass::RemoteMemory,
        FindingClass::BranchMispredict,
        FindingClass::HeapChurn,
        FindingClass::FrontEnd,
        FindingClass::Core,
    ];

    /// The class's name in the vocabulary (`false-sharing`, `tlb`, ...).
    pub fn name(self) -> &'static str {
        match self {
            FindingClass::FalseSharing => "false-sharing",
            FindingClass::TrueSharing => "true-sharing",
            FindingClass::Tlb => "tlb",
            FindingClass::Traversal => "traversal",
            FindingClass::Layout => "layout",
            FindingClass::SplitLine => "split-line",
            FindingClass::StoreForwarding => "store-forwarding",
            FindingClass::Prefetch => "prefetch",
            FindingClass::Bandwidth => "bandwidth",
            FindingClass::RemoteMemory => "remote-memory",
            FindingClass::BranchMispredict => "branch-mispredict",
            FindingClass::HeapChurn => "heap-churn",
            FindingClass::FrontEnd => "front-end",
            FindingClass::Core => "core",
        }
    }

    pub fn parse(s: &str) -> Option<FindingClass> {
        Self::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s.trim()))
    }
}

impl std::fmt::Display for FindingClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a finding is: the code, the data and the threads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FindingLocation {
    pub function: Option<String>,
    pub dso: Option<String>,
    /// Source file and line of the hottest PC (the user's line).
    pub file: Option<String>,
    pub line: Option<u32>,
    /// The sampled code addresses the finding covers, costliest first (at most 8).
    pub pcs: Vec<u64>,
    /// The data object the accesses fall in (a named object, a global, an allocation site's
    /// block, a mapping), and its size.
    pub object: Option<String>,
    pub object_size_bytes: Option<u64>,
    /// The allocation site of the object, when the object is a heap block.
    pub allocation_site: Option<String>,
    /// Threads whose samples the finding covers (at most 16).
    pub threads: Vec<u32>,
    /// The data's virtual addresses: the data object's when resolved, else the span of the
    /// finding's sampled data addresses; for sharing, the cache line. `advise --verify` builds
    /// its counterfactual from it.
    pub data_range: Option<AddressRange>,
}

/// Virtual addresses `[start, end)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct AddressRange {
    pub start: u64,
    pub end: u64,
}

/// One measured value against its rule's threshold.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Evidence {
    /// What is measured (`tlb_walk_share`, `load_to_use_mean_cycles`, ...).
    pub name: String,
    pub value: f64,
    /// Unit of `value` and `threshold` (`share`, `cycles`, `bytes`, ...).
    pub unit: String,
    /// The rule's threshold the value passed (None: context, not a test).
    pub threshold: Option<f64>,
    /// Samples the value is computed from.
    pub samples: u64,
    /// 95 % confidence interval of a share (Wilson score; docs/methodology/statistics.md).
    pub ci95: Option<(f64, f64)>,
}

/// A field (or byte range) of a cache line the fix names.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FieldRef {
    /// The data object and offset within it (`counters+0x8`), when known.
    pub name: Option<String>,
    /// Offset of the bytes within their 64-byte line.
    pub line_offset_bytes: u64,
    /// Threads writing or reading it.
    pub threads: Vec<u32>,
}

/// What to change, computed where the data allows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Fix {
    /// One line.
    pub summary: String,
    /// How, step by step, with the computed values.
    pub steps: Vec<String>,
    /// `prefetch`: iterations ahead (latency ÷ cycles per iteration) and the bytes ahead
    /// (× the stride), [N1 PMU methodology] stride case study's arithmetic.
    pub prefetch_distance_iterations: Option<u64>,
    pub prefetch_distance_bytes: Option<u64>,
    /// `tlb`: 2 MiB pages the object needs.
    pub huge_pages_2mib: Option<u64>,
    /// `traversal`, `layout`, `prefetch`: the address stride between consecutive executions
    /// of the PC, in bytes (negative: descending).
    pub stride_bytes: Option<i64>,
    /// `layout`: bytes of each stride the loop uses.
    pub bytes_used_per_stride: Option<u64>,
    /// `false-sharing`: the fields to pad apart.
    pub fields: Vec<FieldRef>,
}

/// What fixing the cause can give, as a speedup of the whole recording (its cycles ÷ the
/// cycles after the fix), with the assumptions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Gain {
    /// Estimated cycles the cause costs (sampled cycles × the sampling interval).
    pub cycles_at_stake: f64,
    /// cycles_at_stake ÷ the recording's cycles.
    pub share_of_cycles: f64,
    /// The range: low, likely, upper bound (1 / (1 − share)).
    pub low_speedup: f64,
    pub likely_speedup: f64,
    pub upper_speedup: f64,
    pub assumptions: Vec<String>,
}

/// One problem: what, where, the evidence, the fix, the gain.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Finding {
    pub class: FindingClass,
    /// The rule that raised it (docs/advise.md) and the rule's source.
    pub rule: String,
    pub source: String,
    /// One line: the problem and where.
    pub title: String,
    pub location: FindingLocation,
    pub evidence: Vec<Evidence>,
    pub fix: Fix,
    pub gain: Gain,
    /// Samples at the finding's PCs.
    pub samples: u64,
}

/// Why a class was not raised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RuledOutKind {
    /// Checked: the figure is below the rule's threshold.
    NotFound,
    /// Too few samples to decide, or the recording lacks what the rule needs.
    InsufficientEvidence,
}

/// A class checked and not raised, with the figure that ruled it out.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct RuledOut {
    pub class: FindingClass,
    pub kind: RuledOutKind,
    pub reason: String,
}

/// The recording's totals the gains are relative to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct AdviceTotals {
    pub samples_selected: u64,
    /// Operations per sample (the effective interval; 1 when unknown).
    pub interval_ops: f64,
    /// Cycles of the run: the counters' CPU_CYCLES when recorded, else the sampled cost ×
    /// the interval.
    pub cycles: f64,
    /// Where `cycles` comes from.
    pub cycles_source: String,
    /// The core clock used to turn sample times into cycles (None: not known).
    pub clock_hz: Option<f64>,
}

/// `spelunk advise`'s output.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Advice {
    pub schema: &'static str,
    pub file: String,
    pub cpu_model: Option<String>,
    pub emulated: bool,
    pub totals: AdviceTotals,
    /// Most cycles at stake first.
    pub findings: Vec<Finding>,
    pub ruled_out: Vec<RuledOut>,
    /// What limits the advice (e.g. no samples with a latency, a hardware recording without
    /// counters).
    pub notes: Vec<String>,
    /// `spelunk advise --verify`: the findings' predicted gains against the emulator's, re-run
    /// with each cause removed (absent without `--verify`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,
}

/// `spelunk advise --verify` (docs/advise.md, "Counterfactual check"): the recorded command
/// run again under the emulator with its own settings (the baseline), then once per finding
/// with the finding's cause removed in the model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Verification {
    /// The program and its arguments, as recorded.
    pub command: Vec<String>,
    /// The recording's emulator options, which every run repeats.
    pub emulator_options: Vec<String>,
    /// CPU_CYCLES of the baseline re-run, and of the recording itself.
    pub baseline_cycles: f64,
    pub recorded_cycles: Option<f64>,
    /// One per finding checked, in the findings' order.
    pub checks: Vec<CounterfactualCheck>,
}

/// One finding's counterfactual run: the predicted gain against the re-emulated one.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CounterfactualCheck {
    /// Index of the finding in `findings`.
    pub finding: usize,
    pub class: FindingClass,
    /// What the run removes, in words.
    pub counterfactual: String,
    /// The emulator options added to the baseline's (empty: no counterfactual for the class).
    pub knobs: Vec<String>,
    /// The finding's predicted speedups (its gain range).
    pub predicted_low: f64,
    pub predicted_likely: f64,
    pub predicted_upper: f64,
    /// CPU_CYCLES of the counterfactual run.
    pub cycles: Option<f64>,
    /// Baseline cycles ÷ the counterfactual run's.
    pub reemulated_speedup: Option<f64>,
    /// Where the re-emulated speedup falls against the predicted range.
    pub verdict: CheckVerdict,
    /// Why no run was made, or what limits the comparison.
    pub note: Option<String>,
}

/// The re-emulated speedup against the predicted range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CheckVerdict {
    /// Within [low, upper].
    Within,
    /// Under the low end: the finding promises more than removing its cause gives.
    Below,
    /// Over the upper bound: the cause costs more than the finding counted.
    Above,
    /// No counterfactual for the class, or the run failed.
    NotRun,
}
