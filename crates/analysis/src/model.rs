//! The report model: what `spelunk report` computes, as typed data. The terminal tables, the
//! JSON output (`--json`, schema [`SCHEMA`]) and the HTML report all render this one value, so
//! every number they show is the same number. Each field is defined in docs/report.md.

use serde::Serialize;
pub use spelunk_perf::sidecar::{Overhead, TimeSpread, TimedRun};
pub use spelunk_pmu::intensity::{
    ComputeAndPrefetch, OperationalIntensity, PrefetchEffect, Traffic,
};

pub mod advise;
pub mod c2c;
/// An event asked for and not counted, with why (the sidecar's type).
pub use spelunk_perf::sidecar::NotCounted;

/// Schema identifier of the JSON output.
pub const SCHEMA: &str = "spelunk-report/1";

/// Latency distribution summary in cycles (exact over the group's samples; nearest-rank
/// percentiles, docs/methodology/statistics.md).
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct LatencySummary {
    pub count: u64,
    pub mean: f64,
    pub min: u16,
    pub p50: u16,
    pub p90: u16,
    pub p99: u16,
    pub max: u16,
}

/// A histogram: counts in fixed-width buckets of cycles.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Histogram {
    pub bucket_cycles: u16,
    /// (bucket start in cycles, samples).
    pub buckets: Vec<(u16, u64)>,
}

/// Loads per data source within a group.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SourceCount {
    pub source: String,
    pub loads: u64,
}

/// Counts and load latency of a group of samples.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct GroupStats {
    pub samples: u64,
    /// samples / selected samples of the report.
    pub share: f64,
    /// What the group's operations cost, in sampled cycles: the load-to-use latency (total −
    /// issue) of its sampled loads plus a quarter cycle per other sampled operation (docs/report.md,
    /// "cost"). × the sampling interval, an estimate of their cycles.
    pub cost_sampled_cycles: f64,
    /// cost_sampled_cycles / that of all selected samples: what the hotspot tables rank by.
    pub cost_share: f64,
    pub loads: u64,
    pub stores: u64,
    pub branches: u64,
    pub other: u64,
    pub mispredicts: u64,
    pub l1d_miss: u64,
    pub llc_miss: u64,
    pub tlb_walk: u64,
    pub remote: u64,
    /// Loads' total latency (None without loads with a total-latency counter).
    pub load_latency: Option<LatencySummary>,
    /// Loads' derived execution latency (total − issue − translation).
    pub load_exec_latency: Option<LatencySummary>,
    /// Loads per data source, most first.
    pub sources: Vec<SourceCount>,
    /// Σ and Σ² of the loads' load-to-use latency (total − issue), exact: a group's cost and
    /// its sampling error
    /// (`spelunk diff`, [`crate::diff`]). Not in the JSON (`load_latency`'s count × mean is
    /// the sum).
    #[serde(skip)]
    pub load_latency_moments: LatencyMoments,
}

/// Σ and Σ² of a group's load latencies (cycles, cycles²), exact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatencyMoments {
    pub sum_cycles: u128,
    pub sum_squares: u128,
}

/// One row of a hotspot table.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Hotspot {
    /// What the row is: a function name, `file:line`, an address or a DSO path.
    pub key: String,
    pub dso: Option<String>,
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// For instruction rows: the virtual address and offset into the function.
    pub address: Option<u64>,
    pub function_offset: Option<u64>,
    #[serde(flatten)]
    pub stats: GroupStats,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Hotspots {
    pub functions: Vec<Hotspot>,
    pub lines: Vec<Hotspot>,
    pub instructions: Vec<Hotspot>,
    pub dsos: Vec<Hotspot>,
}

/// Latency structure of the loads served by one data source.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DataSourceRow {
    pub source: String,
    pub loads: u64,
    /// loads / loads with a data source.
    pub share: f64,
    pub total: Option<LatencySummary>,
    pub issue: Option<LatencySummary>,
    pub translation: Option<LatencySummary>,
    pub execution: Option<LatencySummary>,
    pub total_histogram: Histogram,
}

/// A data object and the accesses to it.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ObjectRow {
    pub name: String,
    /// annotated, global, heap, stack, anonymous, file.
    pub kind: String,
    pub dso: Option<String>,
    pub start: u64,
    pub size: u64,
    #[serde(flatten)]
    pub stats: GroupStats,
}

/// The heap blocks of one allocation site (the LD_PRELOAD runtime's `allocations`) and the
/// accesses sampled in them: "data objects by allocation site".
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct AllocationSiteRow {
    /// `file:line (function)` of the allocating call (docs/report.md).
    pub site: String,
    /// Blocks allocated there over the run, and their bytes (sampled or not).
    pub blocks: u64,
    pub bytes: u64,
    /// Mean lifetime of the blocks freed during the run (None: none was freed).
    pub mean_lifetime_ns: Option<u64>,
    #[serde(flatten)]
    pub stats: GroupStats,
}

#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ThreadRow {
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub name: Option<String>,
    pub samples: u64,
    pub share: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CpuRow {
    pub cpu: Option<u32>,
    pub samples: u64,
}

/// One sampled memory access for the address-over-time view.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct TimelinePoint {
    /// Nanoseconds since the first sample of the recording.
    pub t_ns: u64,
    pub address: u64,
    /// Index into `objects` (None: no known object).
    pub object: Option<usize>,
    pub store: bool,
    pub source: Option<String>,
    pub total_latency: Option<u16>,
}

/// A bounded, uniform sample (reservoir) of the selected memory accesses.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Timeline {
    /// Selected memory accesses with an address and a time (the population).
    pub population: u64,
    pub points: Vec<TimelinePoint>,
}

/// A named phase (from the annotation API) and the samples taken while it was open on their
/// thread (summed over its instances and threads; nested phases overlap their parents).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct PhaseRow {
    pub name: String,
    /// Begin/end pairs recorded, and the threads they ran on.
    pub instances: u64,
    pub threads: u64,
    /// Sum of the instances' durations (thread time in the phase).
    pub duration_ns: u64,
    /// First begin and last end, in ns since the first sample (0 when before it).
    pub start_ns: u64,
    pub end_ns: u64,
    #[serde(flatten)]
    pub stats: GroupStats,
}

/// One phase instance, for the timeline's bands (ns since the first sample).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct PhaseSpan {
    pub name: String,
    pub tid: u32,
    /// 1 = outermost.
    pub depth: u16,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// How well the samples represent the run, from PMU counts recorded with the profile (the
/// emulator's, or a hardware run's): [SPE methodology table 2.2] and [NMO paper eq. 1].
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SamplingQuality {
    /// Where the counts come from ("emulator").
    pub counts_from: String,
    pub sample_pop: Option<u64>,
    pub sample_feed: Option<u64>,
    pub sample_filtrate: Option<u64>,
    pub sample_collision: Option<u64>,
    /// SAMPLE_FEED / SAMPLE_POP.
    pub sampling_ratio: Option<f64>,
    /// SAMPLE_FILTRATE / SAMPLE_FEED.
    pub filter_ratio: Option<f64>,
    /// SAMPLE_COLLISION / SAMPLE_POP.
    pub collision_ratio: Option<f64>,
    /// Records in the perf.data, against SAMPLE_FILTRATE (what the sampler says it wrote).
    pub samples_decoded: u64,
    /// MEM_ACCESS counted over the run.
    pub mem_access: Option<u64>,
    /// Loads and stores decoded (all of them, whatever the report's filter).
    pub memory_samples: u64,
    /// The interval used for the estimate (the effective interval).
    pub interval: Option<u64>,
    /// memory_samples x interval.
    pub estimated_mem_access: Option<u64>,
    /// 1 - |MEM_ACCESS - memory_samples x interval| / MEM_ACCESS ([NMO paper eq. 1]).
    pub accuracy: Option<f64>,
    pub notes: Vec<String>,
}

/// The sampling interval the hardware applied ([SPE methodology §4.2.4, table 4.3]).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Sampling {
    /// `perf record -c` (the SPE event's sample_period).
    pub requested_period: Option<u64>,
    pub min_interval: Option<u64>,
    pub base_interval: Option<u64>,
    pub jitter: bool,
    /// base + 128 with jitter on CPUs whose caps/ernd is 0, base + 1 otherwise.
    pub effective_interval: Option<u64>,
    /// What the effective interval assumed (e.g. ernd unknown).
    pub note: Option<String>,
}

/// Everything lost or skipped on the way from the hardware to this report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Losses {
    pub undecodable_bytes: u64,
    pub dropped_records: u64,
    pub incomplete_records: u64,
    pub truncated_packets: u64,
    pub aux_truncated: u64,
    pub aux_partial: u64,
    pub aux_collision: u64,
    pub lost_events: u64,
    pub lost_records: u64,
    pub problems: Vec<String>,
}

impl Losses {
    /// Nothing lost, nothing wrong.
    pub fn is_empty(&self) -> bool {
        *self == Losses::default()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct RecordingInfo {
    pub file: String,
    pub cpu_model: Option<String>,
    pub midr: Option<String>,
    /// Recorded under spelunk's emulator (the sidecar says so): every figure comes from its
    /// model of the CPU, not from hardware.
    pub emulated: bool,
    /// The platform preset an emulated run modelled (`--platform`, e.g. `graviton3`; the
    /// sidecar's `config.platform`); absent from the JSON otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulated_platform: Option<String>,
    /// The pages an emulated run had (the sidecar's `config.pages`, e.g. "4 KiB pages, THP
    /// madvise (2 MiB)"); absent from the JSON otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulated_pages: Option<String>,
    pub duration_ns: u64,
    pub first_time_ns: Option<u64>,
    /// Records decoded, and those the report's filter selected.
    pub samples_decoded: u64,
    pub samples_selected: u64,
    pub sampling: Option<Sampling>,
    /// Present when the profile carries PMU counts (a sidecar).
    pub sampling_quality: Option<SamplingQuality>,
    /// What recording cost the program (`spelunk record --overhead`, from the sidecar); absent
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead: Option<Overhead>,
    pub losses: Losses,
    /// Mapped files that do not exist here (no symbols for them).
    pub missing_files: Vec<String>,
    /// Mapped files found here that could not be read for symbols, with the reason (absent
    /// from the JSON when there are none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreadable_files: Vec<UnreadableFile>,
    /// Mapped files whose copy here has another build-id than the recording lists (rebuilt
    /// since): their samples are not named (absent from the JSON when there are none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mismatched_files: Vec<MismatchedFile>,
}

/// A mapped file whose copy here is not the recorded one (another build-id).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct MismatchedFile {
    pub path: String,
    /// Selected samples in it, left unnamed.
    pub samples: u64,
}

/// A file found on the analysing machine that could not be read for symbols.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct UnreadableFile {
    pub path: String,
    /// Why: no permission, not an ELF file, damaged (the symbolizer's message).
    pub reason: String,
}

/// Bytes per mapping class (docs/record.md, "--no-spe": heap, anon, file, stack).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ClassBytes {
    pub heap_bytes: u64,
    pub anon_bytes: u64,
    pub file_bytes: u64,
    pub stack_bytes: u64,
    /// heap + anon + file + stack.
    pub total_bytes: u64,
}

/// Resident memory of the process tree at one sample.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct CapacityPoint {
    /// ns since the timelines' origin (the command's start).
    pub t_ns: u64,
    /// Processes of the tree read.
    pub processes: u32,
    /// Summed over the nodes.
    pub all_nodes: ClassBytes,
    /// Per node, in the order of [`CapacitySeries::nodes`] (zeros where a node had nothing).
    pub nodes: Vec<ClassBytes>,
}

/// Temporal capacity: resident memory per NUMA node and mapping class over time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct CapacitySeries {
    /// `numa_maps` or `smaps` (no NUMA support: the node is unknown, `null`).
    pub source: String,
    pub interval_ns: u64,
    /// The nodes seen, in order (`null`: unknown).
    pub nodes: Vec<Option<u32>>,
    pub points: Vec<CapacityPoint>,
    /// Each class's largest value over the points (the classes can peak at different times);
    /// `total_bytes` is the largest total of one point.
    pub peak: ClassBytes,
    /// When the largest total was seen.
    pub peak_t_ns: Option<u64>,
    pub notes: Vec<String>,
}

/// One counted event of the counter timeline.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CounterColumn {
    pub code: u32,
    pub name: String,
    /// Raw count over the run (the final snapshot).
    pub total: u64,
    /// time_running / time_enabled over the run (< 1: multiplexed; None: unknown).
    pub running_fraction: Option<f64>,
}

/// A figure derived from the counters per interval, with its formula and its source.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DerivedRate {
    /// `llc_read_miss_bytes_per_s`, `l2_refill_bytes_per_s`, `bus_access_beats_per_s`, `ipc`.
    pub name: String,
    pub unit: String,
    pub formula: String,
    pub source: String,
    /// The events it is computed from (names in [`CounterSeries::events`]).
    pub events: Vec<String>,
}

/// Counts between two snapshots.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CounterInterval {
    /// ns since the timelines' origin.
    pub start_ns: u64,
    pub end_ns: u64,
    /// Per event ([`CounterSeries::events`]): the count in the interval, scaled by
    /// Δtime_enabled / Δtime_running when the event was multiplexed; None when it did not run
    /// at all while enabled.
    pub counts: Vec<Option<f64>>,
    /// Per event: it was multiplexed in this interval, so its count is an estimate.
    pub scaled: Vec<bool>,
    /// Per [`CounterSeries::derived`].
    pub rates: Vec<Option<f64>>,
}

/// The PMU counter timeline (temporal bandwidth).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CounterSeries {
    pub pmu: Option<String>,
    /// `user` or `user+kernel`.
    pub scope: Option<String>,
    pub grouping: Option<String>,
    pub events: Vec<CounterColumn>,
    /// Asked for, not counted, and why (never 0).
    pub not_counted: Vec<NotCounted>,
    pub derived: Vec<DerivedRate>,
    pub intervals: Vec<CounterInterval>,
    pub notes: Vec<String>,
}

/// Timelines recorded with the profile (`spelunk record --no-spe`): resident memory and PMU
/// counters over time. Formulas in docs/report.md, "Timelines".
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Timelines {
    /// The clock of the recorded times (`CLOCK_MONOTONIC`).
    pub clock: String,
    /// The origin of every `*_ns` time below, on that clock (the command's start).
    pub origin_ns: u64,
    /// Whether the recording has SPE samples too (false: `--no-spe`, the timelines alone).
    pub spe: bool,
    /// The command and how it ended.
    pub command: Vec<String>,
    pub exit_status: Option<i32>,
    pub capacity: Option<CapacitySeries>,
    pub counters: Option<CounterSeries>,
    /// Phase instances on the timelines' clock (only when the sidecar says its phases use it).
    pub phases: Vec<PhaseSpan>,
}

/// The whole report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Report {
    pub schema: &'static str,
    pub recording: RecordingInfo,
    /// The filter that selected the samples (human-readable).
    pub filter: Vec<String>,
    /// The order of the hotspot tables (`--sort`: samples, latency, ...; docs/report.md).
    pub hotspot_sort: &'static str,
    pub totals: GroupStats,
    pub hotspots: Hotspots,
    pub data_sources: Vec<DataSourceRow>,
    pub objects: Vec<ObjectRow>,
    /// Data objects by allocation site, most sampled first (left out when the recording has
    /// no allocations, so reports without them are unchanged).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub allocation_sites: Vec<AllocationSiteRow>,
    pub threads: Vec<ThreadRow>,
    pub cpus: Vec<CpuRow>,
    pub phases: Vec<PhaseRow>,
    /// Phase instances for the timeline (at most `ReportLimits::phase_spans`, earliest first).
    pub phase_spans: Vec<PhaseSpan>,
    pub timeline: Timeline,
    /// Cache lines shared between cores (`--c2c`): exactly what `spelunk c2c --json` prints
    /// for the same samples (schema spelunk-c2c/1); absent without `--c2c`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub c2c: Option<c2c::C2cReport>,
    /// Resident memory and PMU counters over time (a sidecar with timelines; absent
    /// otherwise, so reports without them are unchanged).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timelines: Option<Timelines>,
    /// Operational intensity and prefetcher figures from the sidecar's counter totals (NMO's
    /// perp and pf modes; absent when the recording has no counters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute: Option<ComputeAndPrefetch>,
    /// The cumulative access distribution over the footprint (absent when no selected load
    /// or store has a data address: nothing to distribute).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub footprint: Option<crate::footprint::Footprint>,
    /// Address over time in the most sampled objects (the timeline's points as offsets into
    /// each; absent when the report lists no object).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub object_timelines: Vec<ObjectTimeline>,
    /// The advisor's findings over the same samples (docs/advise.md; exactly what `spelunk
    /// advise --json` prints); absent when the advisor did not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advice: Option<advise::Advice>,
}

/// One sampled access inside an object (address over time per object,
/// [`crate::object_timelines`]).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ObjectPoint {
    /// As the timeline's: ns since the first sample.
    pub t_ns: u64,
    /// Data address − the object's start.
    pub offset_bytes: u64,
    pub store: bool,
}

/// The timeline's points in one data object.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ObjectTimeline {
    /// Index into the report's `objects`.
    pub object: usize,
    pub name: String,
    pub size_bytes: u64,
    /// The object's selected loads and stores (its row's `samples`): what the points sample.
    pub samples: u64,
    /// The object's points among the timeline's, in time order.
    pub points: Vec<ObjectPoint>,
    /// First and last point's time (None without points).
    pub first_t_ns: Option<u64>,
    pub last_t_ns: Option<u64>,
    /// Smallest and largest offset of the points (None without points).
    pub min_offset_bytes: Option<u64>,
    pub max_offset_bytes: Option<u64>,
}
