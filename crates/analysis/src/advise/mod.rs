//! The advisor: from the analyses' typed results to findings — what is wrong, where, the
//! evidence, the fix (computed where the data allows), the gain to expect, and the classes
//! ruled out (docs/advise.md). The rules are data ([`rules::RULES`]), each citing its source;
//! this module applies them to a recording's per-PC access figures ([`scan::AccessScan`]),
//! its c2c lines and its allocation sites, and ranks the findings by the cycles at stake.
//!
//! Cost: every figure is in sampled cycles (the load-to-use latency of sampled loads; a
//! quarter cycle for any other sampled operation, [`crate::agg::OTHER_OP_CYCLES`]) and × the sampling interval an estimate of the
//! run's cycles. Load-to-use is total − issue latency: the issue latency is the time a load
//! waits for its operands (earlier operations' cost, counted there), so a chain of dependent
//! misses is not counted twice.

pub mod rules;
pub mod scan;

use crate::fasthash::FastMap;
use crate::model::advise::*;
use crate::model::c2c::{C2cReport, Verdict};
use crate::model::AllocationSiteRow;
use crate::objects::{DataObjects, ObjectKind};
use crate::symbolize::{short_name, CodeLocation};
use rules::{rule_of, Rule, MIN_COST_SHARE, MIN_SAMPLES};
use scan::{AccessScan, PcAccess, PcKey};
use spelunk_spe::DataSource;
use std::collections::BTreeMap;
use std::sync::Arc;

pub use crate::model::advise::ADVISE_SCHEMA;

/// What the advisor reads.
pub struct AdviseInput<'a> {
    pub file: String,
    pub cpu_model: Option<String>,
    pub emulated: bool,
    pub scan: &'a AccessScan,
    /// Locations of the PCs [`candidate_pcs`] chose.
    pub locations: &'a FastMap<PcKey, Arc<CodeLocation>>,
    pub objects: &'a DataObjects,
    pub c2c: Option<&'a C2cReport>,
    pub allocation_sites: &'a [AllocationSiteRow],
    /// Counter totals over the run (the sidecar's), by event name.
    pub counters: Option<&'a BTreeMap<String, u64>>,
    /// The emulator's configuration (the sidecar's `config`): clock, latencies, sizes.
    pub config: Option<&'a BTreeMap<String, serde_json::Value>>,
    /// Operations per sample (the effective interval), when known.
    pub interval_ops: Option<f64>,
}

/// The located PCs grouped by function (dso and name): the rules look up a PC's siblings
/// (the loop's other accesses) and its function's totals once per PC, so the groups are built
/// once, not by comparing names per lookup (quadratic in the located PCs, and formatting
/// names each time: seconds on a recording with thousands of PCs in one function).
#[derive(Debug, Default)]
struct FunctionGroups {
    /// PC -> index in `members`.
    group_of: FastMap<PcKey, usize>,
    /// The PCs of each function, sorted.
    members: Vec<Vec<PcKey>>,
    /// Per function: (samples, attributed time ns, sampled cost).
    totals: Vec<(u64, u64, f64)>,
}

impl FunctionGroups {
    fn new(input: &AdviseInput) -> Self {
        let mut index: BTreeMap<(Arc<str>, String), usize> = BTreeMap::new();
        let mut g = FunctionGroups::default();
        let mut keys: Vec<&PcKey> = input.locations.keys().collect();
        keys.sort_unstable();
        for k in keys {
            let Some(l) = input.locations.get(k) else {
                continue;
            };
            // Per process: the same function in two processes is two loops.
            let name = (
                l.dso.clone(),
                format!("{:?}\u{0}{}", k.0, l.function_name()),
            );
            let next = g.members.len();
            let i = *index.entry(name).or_insert(next);
            if i == next {
                g.members.push(Vec::new());
                g.totals.push((0, 0, 0.0));
            }
            g.members[i].push(*k);
            g.group_of.insert(*k, i);
            if let Some(a) = input.scan.per_pc.get(k) {
                let t = &mut g.totals[i];
                *t = (t.0 + a.samples, t.1 + a.time_ns, t.2 + pc_cost(a));
            }
        }
        g
    }

    /// The other located PCs of `k`'s function.
    fn siblings(&self, k: PcKey) -> impl Iterator<Item = PcKey> + '_ {
        self.group_of
            .get(&k)
            .map(|i| self.members[*i].as_slice())
            .unwrap_or(&[])
            .iter()
            .copied()
            .filter(move |o| *o != k)
    }

    /// (samples, attributed time, sampled cost) of `k`'s function (zeros when not located).
    fn totals(&self, k: &PcKey) -> (u64, u64, f64) {
        self.group_of
            .get(k)
            .map_or((0, 0, 0.0), |i| self.totals[*i])
    }
}

/// The PCs worth symbolizing: the costliest, covering 99 % of the sampled cost, and every PC
/// with at least 5 samples (stores beside a slow load), at most 4000.
pub fn candidate_pcs(scan: &AccessScan) -> Vec<PcKey> {
    let mut v: Vec<(PcKey, f64)> = scan.per_pc.iter().map(|(k, p)| (*k, pc_cost(p))).collect();
    v.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let total: f64 = v.iter().map(|(_, c)| c).sum();
    let mut acc = 0.0f64;
    let mut out = Vec::new();
    for (k, c) in v {
        let p = &scan.per_pc[&k];
        if acc < 0.99 * total || p.samples >= 5 {
            out.push(k);
        }
        acc += c;
        if out.len() >= 4000 {
            break;
        }
    }
    out
}

/// A PC's sampled cost: load-to-use of its timed loads, one cycle per other sample.
fn pc_cost(p: &PcAccess) -> f64 {
    p.load_to_use_sum as f64
        + crate::agg::OTHER_OP_CYCLES * (p.samples - p.timed_loads.min(p.samples)) as f64
}

/// Wilson score interval (95 %) of k successes in n trials.
pub fn wilson95(k: u64, n: u64) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    let z = 1.96f64;
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let d = 1.0 + z * z / n;
    let c = (p + z * z / (2.0 * n)) / d;
    let h = z * ((p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt()) / d;
    Some(((c - h).max(0.0), (c + h).min(1.0)))
}

fn share(k: u64, n: u64) -> f64 {
    if n == 0 {
        0.0
    } else {
        k as f64 / n as f64
    }
}

/// The machine figures the rules need, from the recording (measured) or the emulator's
/// configuration, else assumed (and said so).
struct Machine {
    l1_cycles: f64,
    l2_cycles: f64,
    llc_cycles: f64,
    dram_cycles: f64,
    l2_bytes: f64,
    llc_bytes: f64,
    /// Operations an N1-class core dispatches per cycle (assumed 4; docs/advise.md).
    width: f64,
    notes: Vec<String>,
}

impl Machine {
    fn new(input: &AdviseInput) -> Machine {
        let cfg = |k: &str| input.config.and_then(|c| c.get(k)).and_then(|v| v.as_f64());
        let mut notes = Vec::new();
        // Measured: mean load-to-use of the recording's loads per source, with 10 or more.
        let mut per_source: BTreeMap<DataSource, (u64, u64)> = BTreeMap::new();
        for p in input.scan.per_pc.values() {
            for s in &p.sources {
                let e = per_source.entry(s.source).or_default();
                e.0 += s.loads;
                e.1 += s.load_to_use_sum;
            }
        }
        let measured = |d: &[DataSource]| {
            let (n, c) = d
                .iter()
                .filter_map(|x| per_source.get(x))
                .fold((0, 0), |(n, c), (a, b)| (n + a, c + b));
            (n >= 10).then(|| c as f64 / n as f64)
        };
        // The emulator's configured latency first (exact), then the recording's measure.
        let mut pick = |name: &str, m: Option<f64>, key: &str, assumed: f64| {
            cfg(key).or(m).unwrap_or_else(|| {
                notes.push(format!(
                    "{name} latency not measured in this recording nor configured: {assumed} cycles assumed"
                ));
                assumed
            })
        };
        // Assumed values: the emulator's N1 defaults (emulator/MODEL.md, from [SPE methodology
        // table 4.4] at 2.8 GHz).
        let l1 = pick(
            "L1D",
            input.scan.l1_latency_cycles(),
            "l1d_latency_cycles",
            4.0,
        );
        let l2 = pick("L2", measured(&[DataSource::L2]), "l2_latency_cycles", 14.0);
        let llc = pick(
            "system cache",
            measured(&[DataSource::SystemCache, DataSource::L3]),
            "slc_latency_cycles",
            103.0,
        );
        let dram = pick(
            "DRAM",
            measured(&[DataSource::Dram]),
            "dram_latency_cycles",
            283.0,
        );
        Machine {
            l1_cycles: l1,
            l2_cycles: l2,
            llc_cycles: llc,
            dram_cycles: dram,
            l2_bytes: cfg("l2_bytes").unwrap_or(1048576.0),
            llc_bytes: cfg("slc_bytes").unwrap_or(32.0 * 1048576.0),
            width: 4.0,
            notes,
        }
    }

    /// The latency a prefetch must hide for data spread over `footprint` bytes: the level
    /// that holds it.
    fn latency_for_footprint(&self, footprint: f64) -> f64 {
        if footprint <= self.l2_bytes {
            self.l2_cycles
        } else if footprint <= self.llc_bytes {
            self.llc_cycles
        } else {
            self.dram_cycles
        }
    }
}

/// A finding before merging and ranking.
struct Candidate {
    class: FindingClass,
    key: PcKey,
    /// Sampled cycles at stake (likely), and at most.
    stake: f64,
    stake_upper: f64,
    evidence: Vec<Evidence>,
    fix: Fix,
    samples: u64,
    assumptions: Vec<String>,
    /// A c2c line's location and fields, when the finding comes from c2c.
    location: Option<FindingLocation>,
    /// `tlb`: the walking loads' whole wait is this finding's (not the PC's miss classes').
    absorbs_walks: bool,
}

fn ev(name: &str, value: f64, unit: &str, threshold: Option<f64>, samples: u64) -> Evidence {
    Evidence {
        name: name.to_string(),
        value,
        unit: unit.to_string(),
        threshold,
        samples,
        ci95: None,
    }
}

fn ev_share(name: &str, k: u64, n: u64, threshold: Option<f64>) -> Evidence {
    Evidence {
        ci95: wilson95(k, n),
        ..ev(name, share(k, n), "share", threshold, n)
    }
}

/// The advice for a recording.
pub fn advise(input: &AdviseInput) -> Advice {
    let scan = input.scan;
    let m = Machine::new(input);
    let interval = input.interval_ops.filter(|i| *i > 0.0).unwrap_or(1.0);
    let total_sampled = scan.totals.cost_sampled_cycles.max(1.0);
    let (cycles, cycles_source) = match input.counters.and_then(|c| c.get("CPU_CYCLES")) {
        Some(&c) if c > 0 => (
            c as f64,
            "CPU_CYCLES (the recording's counters)".to_string(),
        ),
        _ => (
            total_sampled * interval,
            "sampled cost × the sampling interval (no cycle counter in this recording)".into(),
        ),
    };
    let clock_hz = input
        .config
        .and_then(|c| c.get("cpu_hz"))
        .and_then(|v| v.as_f64());
    let mut notes = m.notes.clone();
    if input.interval_ops.is_none() {
        notes.push("the sampling interval is not known: costs are in sampled cycles".into());
    }
    let mut cands: Vec<Candidate> = Vec::new();
    let mut seen: BTreeMap<FindingClass, (f64, String)> = BTreeMap::new();
    let mut note_seen = |class: FindingClass, figure: f64, text: String| {
        let e = seen.entry(class).or_insert((f64::MIN, String::new()));
        if figure > e.0 {
            *e = (figure, text);
        }
    };

    // The PCs per function (for the loop's other operations) and the functions' totals.
    let groups = FunctionGroups::new(input);
    let fn_totals = |k: &PcKey| -> (u64, u64, f64) { groups.totals(k) };

    let mut keys: Vec<&PcKey> = input.locations.keys().collect();
    keys.sort_unstable();
    for k in keys {
        let Some(p) = scan.per_pc.get(k) else {
            continue;
        };
        let mem = p.memory_samples();
        let cost_share = pc_cost(p) / total_sampled;
        if p.branches as f64 >= MIN_SAMPLES {
            branch_rule(p, *k, total_sampled, &mut cands, &mut note_seen);
        }
        if (mem as f64) < MIN_SAMPLES {
            continue;
        }
        let min_share = MIN_COST_SHARE;
        // --- split-line
        {
            let r = rule_of(FindingClass::SplitLine);
            let s = share(p.misaligned, mem);
            note_seen(
                FindingClass::SplitLine,
                s,
                format!(
                    "the costliest accesses are misaligned in at most {:.1} % of their samples (threshold {:.0} %)",
                    100.0 * s,
                    100.0 * r.t("min_misaligned_share")
                ),
            );
            if s >= r.t("min_misaligned_share") {
                let aligned_n = p.timed_loads - p.misaligned_timed_loads;
                let aligned_mean = if aligned_n >= 5 {
                    (p.load_to_use_sum - p.misaligned_load_to_use_sum) as f64 / aligned_n as f64
                } else {
                    m.l1_cycles
                };
                let excess = p.misaligned_load_to_use_sum as f64
                    - p.misaligned_timed_loads as f64 * aligned_mean;
                // Each split access looks up and fills two lines: at least a second L1 access.
                let stake = excess.max(p.misaligned as f64 * m.l1_cycles);
                if stake / total_sampled >= min_share {
                    cands.push(Candidate {
                        class: FindingClass::SplitLine,
                        key: *k,
                        stake,
                        stake_upper: stake,
                        evidence: vec![
                            ev_share("misaligned_share", p.misaligned, mem, Some(r.t("min_misaligned_share"))),
                            ev("cost_share", stake / total_sampled, "share", Some(min_share), mem),
                        ],
                        fix: Fix {
                            summary: "align the data so that no access crosses a 64-byte line".into(),
                            steps: vec![
                                "allocate the array 64-byte aligned (aligned_alloc(64, n) / alignas(64)), \
                                 and keep each vector access at an offset that is a multiple of its size"
                                    .into(),
                                format!(
                                    "{} of the {} sampled accesses here cross a line (offsets within the line seen: {})",
                                    p.misaligned,
                                    mem,
                                    offsets_text(p.pattern.line_offsets)
                                ),
                            ],
                            ..Fix::default()
                        },
                        samples: mem,
                        assumptions: vec![format!(
                            "a split access costs at least one more L1 access ({:.0} cycles)",
                            m.l1_cycles
                        )],
                        location: None,
                        absorbs_walks: false,
                    });
                }
            }
        }
        // --- tlb
        {
            let r = rule_of(FindingClass::Tlb);
            let s = share(p.tlb_walk, mem);
            note_seen(
                FindingClass::Tlb,
                s * cost_share.clamp(1e-9, 1.0).sqrt(),
                format!(
                    "{:.1} % of the samples of the costliest access walk the page table (threshold {:.0} %)",
                    100.0 * s,
                    100.0 * r.t("min_walk_share")
                ),
            );
            if s >= r.t("min_walk_share") {
                // A chase (each load waits for the previous one: no prefetch can run ahead) or
                // walks that are a quarter or more of the walking loads' wait: the walking
                // loads' whole wait beyond an L1 hit is the TLB's (their translation, and the
                // data the page-table lines push out of the caches). Otherwise a prefetch hides
                // the walks with the misses, and the TLB's stake is the translation alone.
                let walk_wait = (p.walk_load_to_use_sum as f64
                    - p.walk_timed_loads as f64 * m.l1_cycles)
                    .max(p.walk_translation_sum as f64);
                let xlat_share = p.walk_translation_sum as f64 / walk_wait.max(1.0);
                let absorbs = is_dependent(p, &m) || xlat_share >= 0.25;
                let per_walk = if p.walk_timed_loads == 0 {
                    m.l2_cycles.max(12.0)
                } else if absorbs {
                    walk_wait / p.walk_timed_loads as f64
                } else {
                    p.walk_translation_sum as f64 / p.walk_timed_loads as f64
                };
                let stake = per_walk * p.tlb_walk as f64;
                if stake / total_sampled >= min_share {
                    let obj = object_of(input, *k, p);
                    let size = obj
                        .as_ref()
                        .map(|o| o.1)
                        .or_else(|| Some(p.pattern.max_address? - p.pattern.min_address? + 1));
                    let pages = size.map(|s| s.div_ceil(2 << 20));
                    let mut steps = vec![format!(
                        "back {} with 2 MiB pages: allocate it 2 MiB-aligned \
                         (posix_memalign(&p, 2 << 20, size) or mmap) and madvise(p, size, MADV_HUGEPAGE) \
                         before first touch, or run with transparent huge pages set to always",
                        obj.as_ref().map_or("the data".to_string(), |o| format!("`{}`", o.0))
                    )];
                    if let (Some(sz), Some(n)) = (size, pages) {
                        steps.push(format!(
                            "{} bytes need {n} pages of 2 MiB (the L1 DTLB holds 48 entries, [Cortex-A76 TRM §A5.2] for N1)",
                            sz
                        ));
                    }
                    cands.push(Candidate {
                        class: FindingClass::Tlb,
                        key: *k,
                        stake,
                        stake_upper: stake,
                        evidence: vec![
                            ev_share("tlb_walk_share", p.tlb_walk, mem, Some(r.t("min_walk_share"))),
                            ev(
                                "walk_translation_mean_cycles",
                                p.walk_translation_sum as f64 / p.walk_timed_loads.max(1) as f64,
                                "cycles",
                                None,
                                p.walk_timed_loads,
                            ),
                            ev("cost_share", stake / total_sampled, "share", Some(min_share), mem),
                        ],
                        fix: Fix {
                            summary: "use 2 MiB pages for this data".into(),
                            steps,
                            huge_pages_2mib: pages,
                            ..Fix::default()
                        },
                        samples: mem,
                        assumptions: vec![
                            "huge pages remove the walks' translation latency".into(),
                        ],
                        location: None,
                        absorbs_walks: absorbs,
                    });
                }
            }
        }
        // --- remote memory
        {
            let r = rule_of(FindingClass::RemoteMemory);
            let (remote_loads, remote_cost) = p.loads_from(|d| d.is_remote());
            let n_remote = p.remote.max(remote_loads);
            let s = share(n_remote, mem);
            note_seen(
                FindingClass::RemoteMemory,
                s,
                format!(
                    "{:.1} % of the costliest accesses are remote (threshold {:.0} %)",
                    100.0 * s,
                    100.0 * r.t("min_remote_share")
                ),
            );
            if s >= r.t("min_remote_share") {
                let local = m.dram_cycles;
                let stake = (remote_cost as f64 - remote_loads as f64 * local * 0.6).max(0.0);
                if stake / total_sampled >= min_share {
                    cands.push(Candidate {
                        class: FindingClass::RemoteMemory,
                        key: *k,
                        stake,
                        stake_upper: stake,
                        evidence: vec![ev_share(
                            "remote_share",
                            n_remote,
                            mem,
                            Some(r.t("min_remote_share")),
                        )],
                        fix: Fix {
                            summary: "place the data on the node of the threads that use it".into(),
                            steps: vec![
                                "first-touch the data from the thread that uses it (initialise it in parallel, \
                                 with the same thread-to-data split as the compute loop), or bind with \
                                 numactl --membind / --interleave"
                                    .into(),
                            ],
                            ..Fix::default()
                        },
                        samples: mem,
                        assumptions: vec![
                            "a local access costs 60 % of a remote one (assumed)".into()
                        ],
                        location: None,
                        absorbs_walks: false,
                    });
                }
            }
        }
        // --- the miss classes: traversal, layout, prefetch, bandwidth, store-forwarding
        miss_rules(
            input,
            &m,
            *k,
            p,
            total_sampled,
            &groups,
            &mut cands,
            &mut note_seen,
        );
    }
    sharing_rules(input, &m, total_sampled, &mut cands, &mut note_seen);
    // A PC whose line moves between cores: its waits are the sharing's, not a miss pattern's.
    if let Some(c2c) = input.c2c {
        let shared: std::collections::HashSet<PcKey> = c2c
            .lines
            .iter()
            .filter(|l| l.verdict != Verdict::None)
            .flat_map(|l| {
                l.offsets
                    .iter()
                    .flat_map(move |o| o.accesses.iter().map(move |a| (l.pid, a.pc)))
            })
            .collect();
        let sharing =
            |c: FindingClass| matches!(c, FindingClass::FalseSharing | FindingClass::TrueSharing);
        if cands.iter().any(|c| sharing(c.class)) {
            cands.retain(|c| sharing(c.class) || !shared.contains(&c.key));
        }
    }
    // TLB walks of an access whose pattern is the problem (a column walk, sparse fields) go
    // with the pattern's fix; otherwise the walking loads' wait is the TLB finding's, and the
    // miss classes of the same PC keep the rest.
    let pattern_pcs: std::collections::HashSet<PcKey> = cands
        .iter()
        .filter(|c| matches!(c.class, FindingClass::Traversal | FindingClass::Layout))
        .map(|c| c.key)
        .collect();
    cands.retain(|c| !(c.class == FindingClass::Tlb && pattern_pcs.contains(&c.key)));
    let tlb_pcs: std::collections::HashSet<PcKey> = cands
        .iter()
        .filter(|c| c.class == FindingClass::Tlb && c.absorbs_walks)
        .map(|c| c.key)
        .collect();
    for c in cands.iter_mut() {
        if matches!(c.class, FindingClass::Prefetch | FindingClass::Bandwidth)
            && tlb_pcs.contains(&c.key)
        {
            if let Some(p) = scan.per_pc.get(&c.key) {
                let rest = 1.0 - share(p.walk_timed_loads, p.timed_loads);
                c.stake *= rest;
                c.stake_upper *= rest;
            }
        }
    }
    // A load waiting for a store it reads is not missing: its wait is the forwarding's.
    let forwarded: std::collections::HashSet<PcKey> = cands
        .iter()
        .filter(|c| c.class == FindingClass::StoreForwarding)
        .map(|c| c.key)
        .collect();
    cands.retain(|c| {
        !(matches!(c.class, FindingClass::Prefetch | FindingClass::Bandwidth)
            && forwarded.contains(&c.key))
    });
    cands.retain(|c| c.stake / total_sampled >= MIN_COST_SHARE || c.location.is_some());
    heap_churn_rule(input, total_sampled, &mut cands, &mut note_seen);
    // Top-down's verdict names the bottleneck only where the samples were enough to rule
    // memory out and no located cause explains the cycles.
    if cands.is_empty() && scan.totals.samples as f64 >= 10.0 * MIN_SAMPLES {
        top_down_rules(input, &groups, cycles, interval, &mut cands, &mut note_seen);
    }

    // Merge candidates of one class at one source line (several PCs of one statement).
    let mut merged: Vec<(Candidate, Vec<PcKey>)> = Vec::new();
    cands.sort_by(|a, b| b.stake.total_cmp(&a.stake).then(a.key.cmp(&b.key)));
    for c in cands {
        // One finding per class and place: the same source line; or, for accesses to the
        // same data object, the same function (a statement over several lines, a stencil's
        // rows); for bandwidth, the function (the fix fuses its loops).
        let place = |k: &PcKey, p: Option<&PcAccess>| {
            let l = input.locations.get(k)?;
            let object = match c.class {
                FindingClass::Bandwidth => Some("*".to_string()),
                _ => p.and_then(|p| object_of(input, *k, p)).map(|o| o.0),
            };
            Some((l.function_name(), object, (l.file.clone(), l.line)))
        };
        let here = place(&c.key, scan.per_pc.get(&c.key));
        match merged.iter_mut().find(|(m, _)| {
            if m.class != c.class || m.location.is_some() || c.location.is_some() {
                return false;
            }
            match (&here, place(&m.key, scan.per_pc.get(&m.key))) {
                (Some((f, o, l)), Some((mf, mo, ml))) => {
                    *f == mf && (*l == ml || (o.is_some() && *o == mo))
                }
                _ => false,
            }
        }) {
            Some((m, pcs)) => {
                m.stake += c.stake;
                m.stake_upper += c.stake_upper;
                m.samples += c.samples;
                if pcs.len() < 8 {
                    pcs.push(c.key);
                }
            }
            None => {
                let k = c.key;
                merged.push((c, vec![k]));
            }
        }
    }
    // Latencies of misses in flight together overlap: the stake is scaled by the function's
    // exposure, its cycles (its share of the sampled time, or of the samples) over the sum of
    // its sampled latencies; at most 1.
    let total_time = scan.totals.time_ns;
    let total_samples = scan.totals.samples.max(1);
    let mut findings: Vec<Finding> = merged
        .into_iter()
        .map(|(c, pcs)| {
            let r = rule_of(c.class);
            let stake = c.stake;
            let mut assumptions = c.assumptions;
            let mut exposure = 1.0;
            if c.location.is_none() {
                let (fn_n, fn_time, fn_cost) = fn_totals(&c.key);
                let fn_share = if total_time > 0 {
                    fn_time as f64 / total_time as f64
                } else {
                    fn_n as f64 / total_samples as f64
                };
                let fn_cycles = cycles * fn_share;
                let fn_latency = fn_cost * interval;
                if fn_latency > fn_cycles && fn_latency > 0.0 {
                    exposure = fn_cycles / fn_latency;
                    assumptions.push(format!(
                        "latencies overlap: the function's sampled latencies add up to {:.1}x its \
                         cycles ({:.1} % of the run), so {:.0} % of each is exposed",
                        fn_latency / fn_cycles.max(1.0),
                        100.0 * fn_share,
                        100.0 * exposure
                    ));
                }
            }
            let at_stake = stake * interval * exposure;
            let f = (at_stake / cycles).clamp(0.0, 0.99);
            let f_upper = (c.stake_upper.max(stake) * interval * exposure / cycles).clamp(f, 0.99);
            let speed = |rec: f64| 1.0 / (1.0 - f * rec);
            assumptions.push(format!(
                "the fix recovers {:.0} % (likely) to {:.0} % (low) of the cycles at stake; the upper bound recovers all",
                100.0 * r.recovered_likely,
                100.0 * r.recovered_low
            ));
            let location = c.location.clone().unwrap_or_else(|| location_of(input, &pcs, scan));
            Finding {
                class: c.class,
                rule: r.id.to_string(),
                source: r.source.to_string(),
                title: title(c.class, &location),
                location,
                evidence: c.evidence,
                fix: c.fix,
                gain: Gain {
                    cycles_at_stake: at_stake,
                    share_of_cycles: f,
                    low_speedup: speed(r.recovered_low),
                    likely_speedup: speed(r.recovered_likely),
                    upper_speedup: 1.0 / (1.0 - f_upper),
                    assumptions,
                },
                samples: c.samples,
            }
        })
        .collect();
    findings.sort_by(|a, b| {
        b.gain
            .cycles_at_stake
            .total_cmp(&a.gain.cycles_at_stake)
            .then(a.class.cmp(&b.class))
    });
    let raised: Vec<FindingClass> = findings.iter().map(|f| f.class).collect();
    let enough = scan.totals.samples as f64 >= 10.0 * MIN_SAMPLES;
    let mut ruled_out = Vec::new();
    for class in FindingClass::ALL {
        if raised.contains(&class) {
            continue;
        }
        let (kind, reason) = if !enough {
            (
                RuledOutKind::InsufficientEvidence,
                format!(
                    "{} samples selected: too few to decide (at least {} needed)",
                    scan.totals.samples,
                    10.0 * MIN_SAMPLES
                ),
            )
        } else if let Some((_, why)) = seen.get(&class) {
            (RuledOutKind::NotFound, why.clone())
        } else {
            (
                RuledOutKind::InsufficientEvidence,
                not_checked_reason(class, input),
            )
        };
        ruled_out.push(RuledOut {
            class,
            kind,
            reason,
        });
    }
    if scan.totals.timed_loads == 0 && scan.totals.loads > 0 {
        notes.push("no sampled load has a latency: the latency rules cannot decide".into());
    }
    Advice {
        schema: ADVISE_SCHEMA,
        file: input.file.clone(),
        cpu_model: input.cpu_model.clone(),
        emulated: input.emulated,
        totals: AdviceTotals {
            samples_selected: scan.totals.samples,
            interval_ops: interval,
            cycles,
            cycles_source,
            clock_hz,
        },
        findings,
        ruled_out,
        notes,
        verification: None,
    }
}

fn not_checked_reason(class: FindingClass, input: &AdviseInput) -> String {
    match class {
        FindingClass::FalseSharing | FindingClass::TrueSharing => match input.c2c {
            None => "no c2c analysis of this recording".into(),
            Some(c) if c.lines.is_empty() => {
                "no cache line was served from another core's cache (c2c: no peer-snoop loads)"
                    .into()
            }
            Some(_) => "c2c found shared lines, none of them costly enough".into(),
        },
        FindingClass::HeapChurn => {
            if input.allocation_sites.is_empty() {
                "no allocation sites recorded (record under the runtime or --emulate)".into()
            } else {
                "no allocation site has many short-lived blocks".into()
            }
        }
        FindingClass::FrontEnd | FindingClass::Core => match input.counters {
            Some(c) if c.contains_key("STALL_FRONTEND") => {
                "memory findings explain the cycles, or stalls are below the threshold".into()
            }
            _ => "no top-down counters in this recording (STALL_FRONTEND, STALL_BACKEND)".into(),
        },
        FindingClass::BranchMispredict => "no branch was sampled often enough to judge".into(),
        _ => "no access was sampled often enough to judge".into(),
    }
}

fn title(class: FindingClass, l: &FindingLocation) -> String {
    let at = match (&l.file, l.line, &l.function) {
        (Some(f), Some(n), Some(func)) => format!("{}:{n} ({func})", short_name(f)),
        (_, _, Some(func)) => func.clone(),
        _ => "?".into(),
    };
    let obj = l
        .object
        .as_ref()
        .map(|o| format!(" on `{o}`"))
        .unwrap_or_default();
    let what = match class {
        FindingClass::FalseSharing => {
            "false sharing: threads write different bytes of one cache line"
        }
        FindingClass::TrueSharing => "true sharing: threads write the same bytes of one cache line",
        FindingClass::Tlb => "TLB walks: the data spans more pages than the TLBs hold",
        FindingClass::Traversal => {
            "strided traversal: each access a new line, the rest of it used later"
        }
        FindingClass::Layout => "layout: most bytes of each fetched line go unused",
        FindingClass::SplitLine => "split-line accesses: loads/stores cross a cache line",
        FindingClass::StoreForwarding => "store-to-load dependency: loads wait for a recent store",
        FindingClass::Prefetch => "exposed miss latency: a prefetch ahead can hide it",
        FindingClass::Bandwidth => "memory bandwidth: a stream the prefetchers cannot feed faster",
        FindingClass::RemoteMemory => "remote memory: loads served by another node",
        FindingClass::BranchMispredict => "mispredicted branches",
        FindingClass::HeapChurn => "heap churn: many short-lived blocks from one site",
        FindingClass::FrontEnd => "front-end bound",
        FindingClass::Core => "core bound",
    };
    format!("{what} at {at}{obj}")
}

fn offsets_text(mask: u64) -> String {
    let v: Vec<String> = (0..64)
        .filter(|i| mask & (1u64 << i) != 0)
        .take(8)
        .map(|i| i.to_string())
        .collect();
    let more = if mask.count_ones() > 8 { ", ..." } else { "" };
    format!("{}{more}", v.join(", "))
}

/// The data object of a PC's first sampled access: (name, size, allocation site, addresses).
type ObjectOf = (String, u64, Option<String>, Option<AddressRange>);
fn object_of(input: &AdviseInput, k: PcKey, p: &PcAccess) -> Option<ObjectOf> {
    let (va, t) = p.first_access?;
    let o = input.objects.resolve(k.0, va, t)?;
    let site = (o.kind == ObjectKind::Allocation).then(|| o.name.to_string());
    let range = AddressRange {
        start: o.start,
        end: o.end,
    };
    Some((o.name.to_string(), o.size(), site, Some(range)))
}

fn location_of(input: &AdviseInput, pcs: &[PcKey], scan: &AccessScan) -> FindingLocation {
    let first = pcs[0];
    let loc = input.locations.get(&first);
    let mut threads: Vec<u32> = pcs
        .iter()
        .filter_map(|k| scan.per_pc.get(k))
        .flat_map(|p| p.threads().iter().copied())
        .collect();
    threads.sort_unstable();
    threads.dedup();
    threads.truncate(16);
    let obj = scan
        .per_pc
        .get(&first)
        .and_then(|p| object_of(input, first, p));
    // The data: the object's range, else the span the PCs' samples touched (to the end of the
    // last line).
    let span = pcs
        .iter()
        .filter_map(|k| {
            let p = &scan.per_pc.get(k)?.pattern;
            Some((p.min_address?, p.max_address?))
        })
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));
    let data_range = obj.as_ref().and_then(|o| o.3).or_else(|| {
        span.map(|(lo, hi)| AddressRange {
            start: lo,
            end: (hi | 63).saturating_add(1),
        })
    });
    FindingLocation {
        function: loc.map(|l| l.function_name()),
        dso: loc.map(|l| l.dso.to_string()),
        file: loc.and_then(|l| l.file.as_ref().map(|f| f.to_string())),
        line: loc.and_then(|l| l.line),
        pcs: pcs.iter().map(|k| k.1).collect(),
        object: obj.as_ref().map(|o| o.0.clone()),
        object_size_bytes: obj.as_ref().map(|o| o.1),
        allocation_site: obj.and_then(|o| o.2),
        threads,
        data_range,
    }
}

fn branch_rule(
    p: &PcAccess,
    k: PcKey,
    total_sampled: f64,
    cands: &mut Vec<Candidate>,
    note_seen: &mut impl FnMut(FindingClass, f64, String),
) {
    let r = rule_of(FindingClass::BranchMispredict);
    let s = share(p.mispredicts, p.branches);
    note_seen(
        FindingClass::BranchMispredict,
        s,
        format!(
            "the most mispredicted sampled branch misses {:.1} % (threshold {:.0} %)",
            100.0 * s,
            100.0 * r.t("min_mispredict_share")
        ),
    );
    if s < r.t("min_mispredict_share") {
        return;
    }
    let stake = p.mispredicts as f64 * r.t("penalty_cycles");
    if stake / total_sampled < MIN_COST_SHARE {
        return;
    }
    cands.push(Candidate {
        class: FindingClass::BranchMispredict,
        key: k,
        stake,
        stake_upper: p.mispredicts as f64 * r.t("upper_penalty_cycles"),
        evidence: vec![
            ev_share("mispredict_share", p.mispredicts, p.branches, Some(r.t("min_mispredict_share"))),
            ev("cost_share", stake / total_sampled, "share", Some(MIN_COST_SHARE), p.branches),
        ],
        fix: Fix {
            summary: "make the branch predictable or remove it".into(),
            steps: vec![
                "compute both outcomes and select (a conditional select / arithmetic instead of if), \
                 or sort/partition the data so that the branch goes the same way in runs"
                    .into(),
            ],
            ..Fix::default()
        },
        samples: p.branches,
        assumptions: vec![format!(
            "{} cycles per misprediction, {} at most with the lost dispatch slots (assumed; docs/advise.md)",
            r.t("penalty_cycles"),
            r.t("upper_penalty_cycles")
        )],
        location: None,
        absorbs_walks: false,
    });
}

#[allow(clippy::too_many_arguments)]
fn miss_rules(
    input: &AdviseInput,
    m: &Machine,
    k: PcKey,
    p: &PcAccess,
    total_sampled: f64,
    groups: &FunctionGroups,
    cands: &mut Vec<Candidate>,
    note_seen: &mut impl FnMut(FindingClass, f64, String),
) {
    let mem = p.memory_samples();
    let mean = {
        let (peer_n, peer_cost) = p.loads_from(|d| d.is_peer_snoop());
        let n = p.timed_loads - peer_n;
        (n > 0).then(|| (p.load_to_use_sum - peer_cost) as f64 / n as f64)
    };
    let excess_per_load = mean.map(|x| x - m.l1_cycles).unwrap_or(0.0);
    // Loads: each beyond the L1 hit latency; stores that refill L1: at least an L2 access each.
    // Loads served by another core's cache are the sharing rules' (c2c): not a miss here.
    let (peer_n, peer_cost) = p.loads_from(|d| d.is_peer_snoop());
    let load_stake = ((p.load_to_use_sum - peer_cost) as f64
        - (p.timed_loads - peer_n) as f64 * m.l1_cycles)
        .max(0.0);
    let store_refills = if p.stores > 0 {
        // l1d_refill counts loads and stores: the loads' share is their beyond-L1 sources.
        let (l1_loads, _) = p.loads_from(|d| d == DataSource::L1D);
        let load_misses = p.timed_loads.saturating_sub(l1_loads);
        p.l1d_refill.saturating_sub(load_misses).min(p.stores)
    } else {
        0
    };
    let store_stake = store_refills as f64 * m.l2_cycles;
    let stake = load_stake + store_stake;
    let store_miss_share = share(store_refills, p.stores);
    let cost_share = stake / total_sampled;
    let pat = &p.pattern;
    let stride = pat.stride_bytes(0.5);
    let dir = pat.direction_share().unwrap_or(0.0);
    let regular = pat.votes() >= 8 && dir >= 0.75 && stride.is_some();
    // A 2-D walk (column order): the deltas are multiples of a row, within a few elements.
    let row = if regular {
        None
    } else {
        pat.row_bytes(0.5, 0.6)
    };
    let granules = (0..8)
        .filter(|g| (pat.line_offsets >> (g * 8)) & 0xff != 0)
        .count() as f64;
    let slow = excess_per_load >= 4.0 || store_miss_share >= 0.25;

    // store-forwarding: L1-served loads slower than the L1 latency, at addresses a store of the
    // same function writes.
    {
        let r = rule_of(FindingClass::StoreForwarding);
        let (l1_n, l1_cost) = p.loads_from(|d| d == DataSource::L1D);
        let l1_share = share(l1_n, p.timed_loads);
        let l1_excess = if l1_n > 0 {
            l1_cost as f64 / l1_n as f64 - m.l1_cycles
        } else {
            0.0
        };
        let overlap = store_overlap(input, groups, k, p);
        note_seen(
            FindingClass::StoreForwarding,
            l1_excess * overlap,
            format!(
                "L1-served loads of the costliest accesses take {:.1} cycles over the L1 hit latency \
                 (threshold {}), {:.0} % of them at an address a store had just written (threshold {:.0} %)",
                l1_excess.max(0.0),
                r.t("min_excess_cycles"),
                100.0 * overlap,
                100.0 * r.t("min_overlap")
            ),
        );
        let fs = l1_excess * l1_n as f64;
        // A load that waited for a line in flight is L1-served too, but refills: a forwarded
        // load does not.
        let refill_share = share(p.l1d_refill, mem);
        if l1_excess >= r.t("min_excess_cycles")
            && refill_share <= r.t("max_refill_share")
            && l1_share >= r.t("min_l1_share")
            && overlap >= r.t("min_overlap")
            && fs / total_sampled >= MIN_COST_SHARE
        {
            cands.push(Candidate {
                class: FindingClass::StoreForwarding,
                key: k,
                stake: fs,
                stake_upper: fs,
                evidence: vec![
                    ev(
                        "l1_load_excess_cycles",
                        l1_excess,
                        "cycles",
                        Some(r.t("min_excess_cycles")),
                        l1_n,
                    ),
                    ev("stored_overlap", overlap, "share", Some(r.t("min_overlap")), mem),
                    ev("cost_share", fs / total_sampled, "share", Some(MIN_COST_SHARE), l1_n),
                ],
                fix: Fix {
                    summary: "keep the value in a register instead of storing and reloading it".into(),
                    steps: vec![
                        "accumulate into a local variable and store once after the loop; if the store and \
                         load may alias, say they do not (restrict) or copy to a local first"
                            .into(),
                    ],
                    ..Fix::default()
                },
                samples: l1_n,
                assumptions: vec![format!(
                    "without the dependency the loads take the L1 hit latency ({:.1} cycles)",
                    m.l1_cycles
                )],
                location: None,
                absorbs_walks: false,
            });
        }
    }

    let shape = match (stride, row) {
        (_, Some(r)) => format!(
            "column order: rows of {r} B, {granules:.0} of 8 granules of each line touched"
        ),
        (Some(st), _) if regular => format!(
            "stride {st} B in one direction ({:.0} % of steps), {granules:.0} of 8 granules of each line touched",
            100.0 * dir
        ),
        _ => format!("scattered (one direction in {:.0} % of steps)", 100.0 * dir),
    };
    for class in [
        FindingClass::Traversal,
        FindingClass::Layout,
        FindingClass::Prefetch,
        FindingClass::Bandwidth,
    ] {
        note_seen(
            class,
            cost_share,
            format!(
                "the costliest missing access ({shape}) waits {:.1} cycles over an L1 hit and loses \
                 {:.1} % of the cycles (a finding needs {:.0} %) without matching this class",
                excess_per_load.max(0.0),
                100.0 * cost_share,
                100.0 * MIN_COST_SHARE
            ),
        );
    }
    if !slow || cost_share < MIN_COST_SHARE {
        return;
    }
    let footprint = match (pat.min_address, pat.max_address) {
        (Some(a), Some(b)) => (b - a + 64) as f64,
        _ => 0.0,
    };
    let miss_ev = |extra: Vec<Evidence>| {
        let mut v = vec![
            ev(
                "load_to_use_mean_cycles",
                mean.unwrap_or(0.0),
                "cycles",
                None,
                p.timed_loads,
            ),
            ev_share("l1d_refill_share", p.l1d_refill, mem, None),
            ev("cost_share", cost_share, "share", Some(MIN_COST_SHARE), mem),
        ];
        v.extend(extra);
        v
    };
    let stride_ev = |s: u64| {
        vec![
            ev("stride_bytes", s as f64, "bytes", None, pat.votes()),
            ev("direction_share", dir, "share", None, pat.deltas),
            ev("line_granules_used", granules, "8-byte granules", None, mem),
        ]
    };
    let signed = |s: u64| {
        if pat.ascending() {
            s as i64
        } else {
            -(s as i64)
        }
    };
    if regular || row.is_some() {
        let s = row.or(stride).unwrap_or(0);
        let tr = rule_of(FindingClass::Traversal);
        let la = rule_of(FindingClass::Layout);
        let bw = rule_of(FindingClass::Bandwidth);
        if s as f64 >= tr.t("min_stride_bytes")
            && (granules >= tr.t("min_line_granules") || row.is_some())
        {
            // A unit-stride sibling in the same function (a transpose reads one way, writes the
            // other): interchange only moves the problem, tile instead.
            let sibling = unit_stride_sibling(input, groups, k);
            let (summary, step) = if sibling {
                (
                    "tile the loops (block the walk)".to_string(),
                    format!(
                        "this access steps {s} bytes per iteration while another in the same loop walks \
                         unit-stride: interchanging only swaps which one strides; process B×B blocks \
                         (B × B × element ≤ L1D, e.g. B = 32 for 8-byte elements) so both stay in cache"
                    ),
                )
            } else {
                (
                    "interchange the loops so the innermost one walks contiguous memory".to_string(),
                    format!(
                        "the innermost loop steps {s} bytes per iteration (one row); make the index that \
                         moves by the element size innermost, so each fetched line is used {:.0} times in a row",
                        granules
                    ),
                )
            };
            let mut e = stride_ev(s);
            if let Some(r) = row {
                e.push(ev(
                    "row_bytes",
                    r as f64,
                    "bytes",
                    None,
                    pat.sample_addresses.len() as u64,
                ));
            }
            cands.push(Candidate {
                class: FindingClass::Traversal,
                key: k,
                stake,
                stake_upper: stake,
                evidence: miss_ev(e),
                fix: Fix {
                    summary,
                    steps: vec![step],
                    stride_bytes: Some(signed(s)),
                    ..Fix::default()
                },
                samples: mem,
                assumptions: vec![
                    "after the change the accesses hit L1 (the line is reused at once)".into(),
                ],
                location: None,
                absorbs_walks: false,
            });
            return;
        }
        if row.is_some() {
            return;
        }
        if s as f64 >= la.t("min_stride_bytes") && s as f64 <= la.t("max_stride_bytes") {
            let used = u64::from(pat.offsets_mod(s, 1).max(1) as u32)
                .max(p.pattern.line_offset_count() as u64)
                .max(8)
                .min(s);
            let used = sibling_bytes_used(input, groups, k, s).max(used).min(s);
            if (used as f64) / (s as f64) <= la.t("max_used_share") {
                cands.push(Candidate {
                    class: FindingClass::Layout,
                    key: k,
                    stake,
                    stake_upper: stake,
                    evidence: miss_ev({
                        let mut v = stride_ev(s);
                        v.push(ev(
                            "used_share",
                            used as f64 / s as f64,
                            "share",
                            Some(la.t("max_used_share")),
                            mem,
                        ));
                        v
                    }),
                    fix: Fix {
                        summary: "pack the fields the loop uses together (hot/cold split or struct of arrays)"
                            .into(),
                        steps: vec![format!(
                            "each element is {s} bytes and the loop uses about {used} of them: move the hot \
                             fields into their own array (or a smaller struct) so a line holds {} elements instead of {}",
                            64 / used.max(1),
                            (64 / s).max(1)
                        )],
                        stride_bytes: Some(signed(s)),
                        bytes_used_per_stride: Some(used),
                        ..Fix::default()
                    },
                    samples: mem,
                    assumptions: vec![format!(
                        "lines fetched fall by {s}/{used}; the misses left cost the same"
                    )],
                    location: None,
                    absorbs_walks: false,
                });
                return;
            }
        }
        // A unit-stride access that waits while another access of the same loop walks column
        // order (a transpose: the striding stores' misses hold up the loop): the cause is the
        // column walk, and since one of the two strides whichever loop is innermost, tile.
        if (s as f64) <= bw.t("max_stride_bytes") && excess_per_load >= tr.t("min_excess_cycles") {
            if let Some((sk, srow)) = column_sibling(input, groups, k) {
                let mut e = stride_ev(s);
                e.push(ev("sibling_row_bytes", srow as f64, "bytes", None, 0));
                cands.push(Candidate {
                    class: FindingClass::Traversal,
                    key: sk,
                    stake,
                    stake_upper: stake,
                    evidence: miss_ev(e),
                    fix: Fix {
                        summary: "tile the loops (block the walk)".into(),
                        steps: vec![format!(
                            "an access of this loop steps {srow} bytes (column order) while this one walks \
                             unit-stride and waits {:.0} cycles per load: interchanging only swaps which one \
                             strides; process B×B blocks (B × B × element ≤ L1D, e.g. B = 32 for 8-byte \
                             elements) so the lines of both stay in cache",
                            excess_per_load
                        )],
                        stride_bytes: Some(srow as i64),
                        ..Fix::default()
                    },
                    samples: mem,
                    assumptions: vec!["after tiling both walks hit L1 for most accesses".into()],
                    location: None,
                    absorbs_walks: false,
                });
                return;
            }
        }
        if (s as f64) <= bw.t("max_stride_bytes") {
            let (far, _) = p.loads_from(|d| {
                matches!(
                    d,
                    DataSource::Dram
                        | DataSource::RemoteDram
                        | DataSource::SystemCache
                        | DataSource::L3
                )
            });
            if excess_per_load >= bw.t("min_excess_cycles") {
                cands.push(Candidate {
                    class: FindingClass::Bandwidth,
                    key: k,
                    stake,
                    stake_upper: stake,
                    evidence: miss_ev({
                        let mut v = stride_ev(s);
                        v.push(ev_share("beyond_l2_share", far, p.timed_loads, None));
                        v
                    }),
                    fix: Fix {
                        summary: "move fewer bytes: fuse the passes over this data, use smaller types, \
                                  or non-temporal stores for output not read again"
                            .into(),
                        steps: vec![format!(
                            "the loop streams {} (stride {s} B): prefetching will not help, the prefetchers \
                             already follow it; fuse the loops that read the same arrays so each line is \
                             fetched once",
                            human_bytes(footprint)
                        )],
                        stride_bytes: Some(signed(s)),
                        ..Fix::default()
                    },
                    samples: mem,
                    assumptions: vec!["bandwidth-bound: a fix saves in proportion to the bytes it removes".into()],
                    location: None,
                    absorbs_walks: false,
                });
                return;
            }
            return;
        }
    }
    // Irregular, or a long stride touching little of each line: prefetch ahead.
    let pf = rule_of(FindingClass::Prefetch);
    if excess_per_load < pf.t("min_excess_cycles") || p.timed_loads == 0 {
        return;
    }
    let latency = m.latency_for_footprint(footprint);
    // Cycles per iteration were the load an L1 hit: the loop's operations at the core's width,
    // or, for a dependent load (one that waited for its address), the L1 latency + 2 cycles.
    let (fn_ops, _, _) = groups.totals(&k);
    let ops_per_iter = (fn_ops as f64 / p.samples.max(1) as f64).max(1.0);
    let dependent = is_dependent(p, m);
    let fast_iter = (ops_per_iter / m.width).max(if dependent { m.l1_cycles + 2.0 } else { 1.0 });
    let dist = (latency / fast_iter).ceil().clamp(1.0, 256.0) as u64;
    let stride_b = if regular { stride } else { None };
    let mut steps = vec![format!(
        "prefetch {dist} iterations ahead: __builtin_prefetch(&a[i + {dist}]) (or the address the loop will \
         load {dist} iterations later); {latency:.0} cycles to hide ÷ {fast_iter:.1} cycles per iteration \
         once the load hits ({ops_per_iter:.1} operations per iteration{})",
        if dependent { ", each waiting for the previous load" } else { "" }
    )];
    if let Some(s) = stride_b {
        steps.push(format!(
            "the load steps {s} bytes per iteration: {dist} iterations = {} bytes ahead",
            dist * s
        ));
    }
    cands.push(Candidate {
        class: FindingClass::Prefetch,
        key: k,
        stake: load_stake,
        stake_upper: load_stake,
        evidence: miss_ev(vec![
            ev("direction_share", dir, "share", None, pat.deltas),
            ev(
                "latency_to_hide_cycles",
                latency,
                "cycles",
                None,
                p.timed_loads,
            ),
            ev(
                "operations_per_iteration",
                ops_per_iter,
                "operations",
                None,
                fn_ops,
            ),
        ]),
        fix: Fix {
            summary: format!("software-prefetch {dist} iterations ahead"),
            steps,
            prefetch_distance_iterations: Some(dist),
            prefetch_distance_bytes: stride_b.map(|s| s * dist),
            stride_bytes: stride_b.map(signed),
            ..Fix::default()
        },
        samples: mem,
        assumptions: vec![format!(
            "the data comes from the level that holds {} ({latency:.0} cycles)",
            human_bytes(footprint)
        )],
        location: None,
        absorbs_walks: false,
    });
}

/// The PC's loads wait for their address (a pointer chase): mean issue latency at least half
/// the load-to-use and over twice the L1 latency.
fn is_dependent(p: &PcAccess, m: &Machine) -> bool {
    if p.timed_loads == 0 {
        return false;
    }
    let n = p.timed_loads as f64;
    let issue_mean = (p.load_total_sum - p.load_to_use_sum) as f64 / n;
    issue_mean >= p.load_to_use_sum as f64 / n / 2.0 && issue_mean > 2.0 * m.l1_cycles
}

fn human_bytes(b: f64) -> String {
    if b >= 1048576.0 {
        format!("{:.1} MiB", b / 1048576.0)
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

/// PCs of the same function as `k` (located ones), with their accesses.
fn same_function<'a>(
    input: &'a AdviseInput,
    groups: &'a FunctionGroups,
    k: PcKey,
) -> impl Iterator<Item = (PcKey, &'a PcAccess)> + 'a {
    groups
        .siblings(k)
        .filter_map(move |o| input.scan.per_pc.get(&o).map(|p| (o, p)))
}

/// An access of the same function, in the same time span, walking column order over more
/// than a page: its key and row (or stride) in bytes.
fn column_sibling(input: &AdviseInput, groups: &FunctionGroups, k: PcKey) -> Option<(PcKey, u64)> {
    let me = input.scan.per_pc.get(&k)?;
    same_function(input, groups, k)
        .filter(|(_, p)| {
            p.memory_samples() as f64 >= MIN_SAMPLES / 2.0 && me.time_overlap(p) >= 0.5
        })
        .filter_map(|(o, p)| {
            let pat = &p.pattern;
            let regular_long = (pat.votes() >= 8 && pat.direction_share().unwrap_or(0.0) >= 0.75)
                .then(|| pat.stride_bytes(0.5))
                .flatten()
                .filter(|s| *s >= 1024);
            let row = regular_long.or_else(|| pat.row_bytes(0.5, 0.6))?;
            Some((o, row, p.memory_samples()))
        })
        .max_by_key(|(o, _, n)| (*n, std::cmp::Reverse(*o)))
        .map(|(o, r, _)| (o, r))
}

/// Another access of the same function walking unit-stride (≤ 16 bytes) over a large range.
fn unit_stride_sibling(input: &AdviseInput, groups: &FunctionGroups, k: PcKey) -> bool {
    same_function(input, groups, k).any(|(_, p)| {
        p.memory_samples() as f64 >= MIN_SAMPLES / 2.0
            && p.pattern.votes() >= 4
            && p.pattern.direction_share().unwrap_or(0.0) >= 0.75
            && p.pattern.stride_bytes(0.5).is_some_and(|s| s <= 16)
            && p.pattern.max_address.unwrap_or(0) - p.pattern.min_address.unwrap_or(0) >= 4096
    })
}

/// Bytes of each `stride` used by all accesses of the same function with that stride over the
/// same range (the fields a loop reads of each record).
fn sibling_bytes_used(input: &AdviseInput, groups: &FunctionGroups, k: PcKey, stride: u64) -> u64 {
    let Some(me) = input.scan.per_pc.get(&k) else {
        return 0;
    };
    let (lo, hi) = (
        me.pattern.min_address.unwrap_or(0),
        me.pattern.max_address.unwrap_or(0),
    );
    let mut offsets: Vec<u64> = Vec::new();
    for (_, p) in same_function(input, groups, k).chain(std::iter::once((k, me))) {
        let (a, b) = (
            p.pattern.min_address.unwrap_or(0),
            p.pattern.max_address.unwrap_or(0),
        );
        if a > hi || b < lo || p.pattern.stride_bytes(0.5) != Some(stride) {
            continue;
        }
        for x in &p.pattern.sample_addresses {
            offsets.push(x % stride / 8);
        }
    }
    offsets.sort_unstable();
    offsets.dedup();
    offsets.len() as u64 * 8
}

/// How much a load PC reads what a store of the same function has just written: the share of
/// the load's kept samples whose address is within 256 bytes of where the store was at that
/// moment (its address interpolated between its samples around the load's time), for the
/// store that matches most. Two walks over different arrays, or over one array at different
/// times, match in few samples; `a[i] = a[i-1] + ...` or a running total kept in memory match
/// in most.
fn store_overlap(input: &AdviseInput, groups: &FunctionGroups, k: PcKey, p: &PcAccess) -> f64 {
    if p.timed_loads == 0 || p.pattern.sample_addresses.len() < 8 {
        return 0.0;
    }
    let mut best = 0.0f64;
    for (_, s) in same_function(input, groups, k) {
        if s.stores == 0 || s.loads > s.stores || p.time_overlap(s) < 0.5 {
            continue;
        }
        let pairs = p
            .pattern
            .sample_addresses
            .iter()
            .zip(&p.pattern.sample_times_ns)
            .filter(|(_, t)| **t > 0);
        let (mut n, mut near) = (0u64, 0u64);
        for (a, t) in pairs {
            if let Some(at) = s.pattern.address_at(*t) {
                n += 1;
                near += u64::from((*a as f64 - at).abs() <= 256.0);
            }
        }
        if n >= 8 {
            best = best.max(near as f64 / n as f64);
        }
    }
    best
}

fn sharing_rules(
    input: &AdviseInput,
    m: &Machine,
    total_sampled: f64,
    cands: &mut Vec<Candidate>,
    note_seen: &mut impl FnMut(FindingClass, f64, String),
) {
    let Some(c2c) = input.c2c else { return };
    // A PC's waits are charged to the first (most shared) line it touches only: lines come
    // ranked by peer snoops, and one PC can touch several (a loop over two padded buffers).
    let mut charged: std::collections::HashSet<PcKey> = std::collections::HashSet::new();
    for line in &c2c.lines {
        let class = match line.verdict {
            Verdict::FalseSharing | Verdict::TrueAndFalseSharing => FindingClass::FalseSharing,
            Verdict::TrueSharing => FindingClass::TrueSharing,
            Verdict::None => continue,
        };
        let r = rule_of(class);
        let peer = line.counts.peer();
        // Sampled cycles of the line's peer loads (each access's mean × its peer loads).
        let mut stake = 0.0;
        let mut best: Option<(&crate::model::c2c::C2cAccess, u64)> = None;
        let mut fields = Vec::new();
        for off in &line.offsets {
            let mut tids: Vec<u32> = off.threads.iter().filter_map(|t| t.thread.tid).collect();
            tids.sort_unstable();
            fields.push(FieldRef {
                name: off.object.clone(),
                line_offset_bytes: off.offset,
                threads: tids,
            });
            for a in &off.accesses {
                let n = a.counts.peer();
                let mean = a
                    .mean_cycles_peer_local
                    .or(a.mean_cycles_peer_remote)
                    .or(a.mean_cycles_load)
                    .unwrap_or(0.0);
                stake += n as f64 * mean;
                if best.is_none_or(|(_, b)| n > b) {
                    best = Some((a, n));
                }
            }
        }
        // A line that moves between cores holds up every access to it, not only the loads
        // served by the other core (stores wait for ownership, loads for the stores they
        // read): the wait of its PCs' loads beyond an L1 hit, when larger.
        let mut pcs: Vec<PcKey> = line
            .offsets
            .iter()
            .flat_map(|o| o.accesses.iter().map(|a| (line.pid, a.pc)))
            .collect();
        pcs.sort_unstable();
        pcs.dedup();
        let waits: f64 = pcs
            .iter()
            .filter(|k| charged.insert(**k))
            .filter_map(|k| input.scan.per_pc.get(k))
            .map(|p| (p.load_to_use_sum as f64 - p.timed_loads as f64 * m.l1_cycles).max(0.0))
            .sum();
        let stake = stake.max(waits);
        note_seen(
            class,
            stake / total_sampled,
            format!(
                "the most shared line costs {:.1} % of the cycles (threshold {:.0} %)",
                100.0 * stake / total_sampled,
                100.0 * MIN_COST_SHARE
            ),
        );
        if (peer as f64) < r.t("min_peer_loads") || stake / total_sampled < r.t("min_cost_share") {
            continue;
        }
        let mut threads: Vec<u32> = fields.iter().flat_map(|f| f.threads.clone()).collect();
        threads.sort_unstable();
        threads.dedup();
        let location = FindingLocation {
            function: best.and_then(|(a, _)| a.function.clone()),
            dso: best.and_then(|(a, _)| a.dso.clone()),
            file: best.and_then(|(a, _)| a.file.clone()),
            line: best.and_then(|(a, _)| a.line),
            pcs: best.map(|(a, _)| vec![a.pc]).unwrap_or_default(),
            object: line.object.clone(),
            object_size_bytes: None,
            allocation_site: None,
            threads: threads.clone(),
            data_range: Some(AddressRange {
                start: line.address,
                end: line.address + c2c.line_size,
            }),
        };
        let names: Vec<String> = fields
            .iter()
            .map(|f| match &f.name {
                Some(n) => format!(
                    "{n} (line offset {}, threads {:?})",
                    f.line_offset_bytes, f.threads
                ),
                None => format!(
                    "line offset {} (threads {:?})",
                    f.line_offset_bytes, f.threads
                ),
            })
            .collect();
        let (summary, steps) = if class == FindingClass::FalseSharing {
            (
                "pad the fields apart so each thread's data has its own 64-byte line".to_string(),
                vec![
                    format!("line {:#x}: {}", line.address, names.join("; ")),
                    "give each thread's field its own line: alignas(64) on the per-thread struct or field, \
                     or pad it to 64 bytes (char pad[64 - sizeof field]); for an array of per-thread \
                     counters, index by thread × 64 / sizeof(counter)"
                        .into(),
                ],
            )
        } else {
            (
                "share less: per-thread copies combined at the end, or batched updates".to_string(),
                vec![
                    format!("line {:#x}: {}", line.address, names.join("; ")),
                    "the threads write the same bytes: give each thread a private copy (or accumulate \
                     locally) and combine once"
                        .into(),
                ],
            )
        };
        cands.push(Candidate {
            class,
            key: (line.pid, best.map_or(0, |(a, _)| a.pc)),
            stake,
            stake_upper: stake,
            evidence: vec![
                ev(
                    "peer_snoop_loads",
                    peer as f64,
                    "samples",
                    Some(r.t("min_peer_loads")),
                    line.counts.loads,
                ),
                ev(
                    "threads",
                    threads.len() as f64,
                    "threads",
                    None,
                    line.counts.records,
                ),
                ev(
                    "cost_share",
                    stake / total_sampled,
                    "share",
                    Some(r.t("min_cost_share")),
                    peer,
                ),
            ],
            fix: Fix {
                summary,
                steps,
                fields,
                ..Fix::default()
            },
            samples: line.counts.records,
            assumptions: vec![
                "after the fix the peer-core loads hit L1 (each thread owns its line)".into(),
            ],
            location: Some(location),
            absorbs_walks: false,
        });
    }
}

/// `front-end` and `core`: the run's stall cycles from the recording's counters (top-down
/// stage 1, [N1 PMU methodology] cycle accounting), raised only when no memory (or other
/// located) cause was found: the stall share is the stake, the hottest function the place.
fn top_down_rules(
    input: &AdviseInput,
    groups: &FunctionGroups,
    cycles: f64,
    interval: f64,
    cands: &mut Vec<Candidate>,
    note_seen: &mut impl FnMut(FindingClass, f64, String),
) {
    let Some(counters) = input.counters else {
        return;
    };
    let Some(&run_cycles) = counters.get("CPU_CYCLES").filter(|c| **c > 0) else {
        return;
    };
    // The hottest function by samples: where the stalled cycles are spent most.
    let mut hottest: Option<(u64, PcKey)> = None;
    for k in groups.group_of.keys() {
        let (n, _, _) = groups.totals(k);
        if hottest.is_none_or(|(m, hk)| n > m || (n == m && *k < hk)) {
            hottest = Some((n, *k));
        }
    }
    let location = hottest
        .and_then(|(_, k)| input.locations.get(&k))
        .map(|l| FindingLocation {
            function: Some(l.function_name()),
            dso: Some(l.dso.to_string()),
            ..FindingLocation::default()
        });
    let per_kilo = |name: &str| {
        let inst = *counters.get("INST_RETIRED")?;
        let n = *counters.get(name)?;
        (inst > 0).then(|| n as f64 * 1000.0 / inst as f64)
    };
    let classes = [
        (FindingClass::FrontEnd, "STALL_FRONTEND"),
        (FindingClass::Core, "STALL_BACKEND"),
    ];
    for (class, event) in classes {
        let Some(&stalls) = counters.get(event) else {
            continue;
        };
        let r = rule_of(class);
        let stall_share = stalls as f64 / run_cycles as f64;
        note_seen(
            class,
            stall_share,
            format!(
                "{event} is {:.0} % of the cycles (threshold {:.0} %){}",
                100.0 * stall_share,
                100.0 * r.t("min_stall_share"),
                if class == FindingClass::Core {
                    ", with memory ruled out"
                } else {
                    ""
                }
            ),
        );
        if stall_share < r.t("min_stall_share") {
            continue;
        }
        let mut evidence = vec![ev(
            &format!("{}_share", event.to_ascii_lowercase()),
            stall_share,
            "share",
            Some(r.t("min_stall_share")),
            0,
        )];
        let (summary, steps, detail): (&str, Vec<String>, &[&str]) = match class {
            FindingClass::FrontEnd => (
                "shrink and straighten the hot code path",
                vec![
                    "the core waits for instructions, not data: build with profile-guided                      optimisation (-fprofile-generate, then -fprofile-use) and link-time                      optimisation so hot code is laid out together and cold code split off"
                        .into(),
                    "`spelunk topdown --stage 2` (or --emulate) says which: instruction-cache or                      instruction-TLB refills (code footprint) or branch mispredicts (redirects)"
                        .into(),
                ],
                &["L1I_CACHE_REFILL", "ITLB_WALK", "BR_MIS_PRED_RETIRED"],
            ),
            _ => (
                "shorten the dependency chains and use the vector units",
                vec![
                    "the back end stalls with loads served from L1: split a reduction over                      several accumulators, vectorise the loop (NEON/SVE: check the compiler's                      -fopt-info-vec), move divisions and square roots out of the loop"
                        .into(),
                    "`spelunk topdown --stage 2` splits the back-end stalls".into(),
                ],
                &["INST_SPEC", "DP_SPEC", "ASE_SPEC", "VFP_SPEC"],
            ),
        };
        for name in detail {
            if let Some(v) = per_kilo(name) {
                evidence.push(ev(
                    &format!("{}_pki", name.to_ascii_lowercase()),
                    v,
                    "per kilo-instruction",
                    None,
                    0,
                ));
            }
        }
        // In sampled cycles, as the other candidates' stakes.
        let stake = stall_share * cycles / interval;
        cands.push(Candidate {
            class,
            key: (None, 0),
            stake,
            stake_upper: stake,
            evidence,
            fix: Fix {
                summary: summary.into(),
                steps,
                ..Fix::default()
            },
            samples: input.scan.totals.samples,
            assumptions: vec![format!(
                "the stalls are {event} from the recording's counters over the whole run; no                  memory cause was found in the samples"
            )],
            location: Some(location.clone().unwrap_or_default()),
            absorbs_walks: false,
        });
    }
}

fn heap_churn_rule(
    input: &AdviseInput,
    total_sampled: f64,
    cands: &mut Vec<Candidate>,
    note_seen: &mut impl FnMut(FindingClass, f64, String),
) {
    let r = rule_of(FindingClass::HeapChurn);
    // The time in allocator and page-zeroing code is the churn's cost.
    let alloc_fn = |name: &str| {
        let n = name.trim_start_matches('_');
        [
            "malloc",
            "free",
            "calloc",
            "realloc",
            "int_malloc",
            "int_free",
            "mmap",
            "munmap",
            "memset",
            "GI___mmap",
            "GI___munmap",
            "sysmalloc",
            "libc_malloc",
            "libc_free",
        ]
        .iter()
        .any(|a| n.starts_with(a.trim_start_matches('_')))
            || name.contains("memset")
    };
    let mut alloc_cost = 0.0f64;
    for (k, l) in input.locations {
        if l.function.as_deref().is_some_and(alloc_fn) {
            if let Some(p) = input.scan.per_pc.get(k) {
                alloc_cost += pc_cost(p);
            }
        }
    }
    for site in input.allocation_sites {
        let lifetime = site.mean_lifetime_ns.unwrap_or(u64::MAX);
        note_seen(
            FindingClass::HeapChurn,
            site.blocks as f64,
            format!(
                "the busiest allocation site made {} blocks (threshold {}) living {} on average (threshold {} ns)",
                site.blocks,
                r.t("min_blocks"),
                site.mean_lifetime_ns
                    .map_or("the whole run".to_string(), |l| format!("{l} ns")),
                r.t("max_mean_lifetime_ns")
            ),
        );
        if (site.blocks as f64) < r.t("min_blocks") || lifetime as f64 > r.t("max_mean_lifetime_ns")
        {
            continue;
        }
        let stake = alloc_cost;
        if stake / total_sampled < r.t("min_cost_share") {
            continue;
        }
        let (file, line) = site
            .site
            .split_once(' ')
            .map(|(fl, _)| fl)
            .and_then(|fl| fl.rsplit_once(':'))
            .map(|(f, l)| (Some(f.to_string()), l.parse().ok()))
            .unwrap_or((None, None));
        let function = site
            .site
            .split_once('(')
            .map(|(_, f)| f.trim_end_matches(')').to_string());
        cands.push(Candidate {
            class: FindingClass::HeapChurn,
            key: (None, 0),
            stake,
            stake_upper: stake,
            evidence: vec![
                ev("blocks", site.blocks as f64, "blocks", Some(r.t("min_blocks")), site.blocks),
                ev(
                    "mean_lifetime_ns",
                    lifetime as f64,
                    "ns",
                    Some(r.t("max_mean_lifetime_ns")),
                    site.blocks,
                ),
                ev("allocator_cost_share", stake / total_sampled, "share", Some(r.t("min_cost_share")), 0),
            ],
            fix: Fix {
                summary: "allocate once and reuse the buffer".into(),
                steps: vec![format!(
                    "{} blocks of {} bytes on average from {}: hoist the allocation out of the loop \
                     (or keep a pool), so the allocator, page faults and zeroing run once",
                    site.blocks,
                    site.bytes / site.blocks.max(1),
                    site.site
                )],
                ..Fix::default()
            },
            samples: site.stats.samples,
            assumptions: vec!["the time in allocator functions is what reuse saves".into()],
            location: Some(FindingLocation {
                function,
                file,
                line,
                allocation_site: Some(site.site.clone()),
                object: Some(site.site.clone()),
                ..FindingLocation::default()
            }),
            absorbs_walks: false,
        });
    }
}

/// The rule of a class (re-exported for renderers that show a rule's thresholds).
pub fn rule(class: FindingClass) -> &'static Rule {
    rule_of(class)
}

/// The advice for a recording whose samples cannot decide anything (none selected, or a
/// recording of timelines alone): every class "insufficient evidence", with `reason`.
pub fn without_samples(
    file: &str,
    cpu_model: Option<String>,
    emulated: bool,
    reason: &str,
) -> Advice {
    Advice {
        schema: ADVISE_SCHEMA,
        file: file.to_string(),
        cpu_model,
        emulated,
        totals: AdviceTotals {
            interval_ops: 1.0,
            cycles_source: "none: no samples".into(),
            ..AdviceTotals::default()
        },
        findings: Vec::new(),
        ruled_out: FindingClass::ALL
            .into_iter()
            .map(|class| RuledOut {
                class,
                kind: RuledOutKind::InsufficientEvidence,
                reason: reason.to_string(),
            })
            .collect(),
        notes: vec![reason.to_string()],
        verification: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input_with<'a>(
        scan: &'a AccessScan,
        locations: &'a FastMap<PcKey, Arc<CodeLocation>>,
        objects: &'a DataObjects,
        counters: &'a BTreeMap<String, u64>,
    ) -> AdviseInput<'a> {
        AdviseInput {
            file: "t.data".into(),
            cpu_model: Some("neoverse-n1".into()),
            emulated: true,
            scan,
            locations,
            objects,
            c2c: None,
            allocation_sites: &[],
            counters: Some(counters),
            config: None,
            interval_ops: Some(1000.0),
        }
    }

    /// Top-down stage 1 names the bottleneck when no located cause was found: half the cycles
    /// stalled in the back end is a `core` finding whose share of the cycles is that half; a
    /// front end stalled 10 % of the time is ruled out with its figure.
    #[test]
    fn back_end_stalls_without_a_memory_cause_are_a_core_finding() {
        // Enough samples to rule memory out: loads served by L1 at 4 cycles, one PC.
        let mut scan = AccessScan::new(1);
        for i in 0..3000u64 {
            let s = spelunk_spe::SpeSample {
                tid: Some(1),
                time_ns: Some(i * 100),
                record: spelunk_spe::SpeRecord {
                    data_va: Some(spelunk_spe::DataVirtualAddress::new(0x10000 + 8 * i, 0)),
                    total_latency_cycles: Some(5),
                    issue_latency_cycles: Some(1),
                    ..Default::default()
                },
                ..Default::default()
            };
            let x = crate::select::Selected {
                kind: crate::agg::OpKind::Load,
                source: Some(DataSource::L1D),
                pc: Some(0x400000),
            };
            scan.add(&s, &x);
        }
        let locations = FastMap::default();
        let objects = DataObjects::default();
        let counters: BTreeMap<String, u64> = [
            ("CPU_CYCLES", 1_000_000),
            ("INST_RETIRED", 2_000_000),
            ("STALL_BACKEND", 500_000),
            ("STALL_FRONTEND", 100_000),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let a = advise(&input_with(&scan, &locations, &objects, &counters));
        assert_eq!(a.findings.len(), 1, "{:#?}", a.findings);
        let f = &a.findings[0];
        assert_eq!(f.class, FindingClass::Core);
        assert!((f.gain.share_of_cycles - 0.5).abs() < 1e-9, "{:?}", f.gain);
        assert!((f.gain.cycles_at_stake - 500_000.0).abs() < 1e-3);
        let fe = a
            .ruled_out
            .iter()
            .find(|r| r.class == FindingClass::FrontEnd)
            .unwrap();
        assert!(fe.reason.contains("10 %"), "{}", fe.reason);
    }
}
