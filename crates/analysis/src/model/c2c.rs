//! The c2c report's data (`spelunk c2c --json`, `spelunk report --c2c`): lines, offsets,
//! accesses and their counts, computed by the c2c module.

use crate::agg::OpKind;
use serde::Serialize;
use spelunk_spe::{DataSource, Event, SpeSample};

/// Schema identifier of `spelunk c2c --json`.
pub const C2C_SCHEMA: &str = "spelunk-c2c/1";

/// perf c2c's per-line (and per-offset, per-PC) counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct LineCounts {
    /// Loads and stores with a data address.
    pub records: u64,
    pub loads: u64,
    pub stores: u64,
    /// Loads served by another core's cache in this socket / another socket ("Load Peer").
    pub peer_local: u64,
    pub peer_remote: u64,
    /// Stores by their L1D events: access without refill, refill, neither recorded.
    pub store_l1_hit: u64,
    pub store_l1_miss: u64,
    pub store_na: u64,
    /// Loads by data source, in perf c2c's columns ("Core Load Hit" FB/L1/L2, "LLC Load Hit"
    /// LclHit/LclHitm, "RMT Load Hit" RmtHit/RmtHitm, "Load Dram" Lcl/Rmt). SPE has no
    /// fill-buffer source, so `load_fb` is always 0.
    pub load_fb: u64,
    pub load_l1: u64,
    pub load_l2: u64,
    pub load_lcl_hit: u64,
    pub load_lcl_hitm: u64,
    pub load_rmt_hit: u64,
    pub load_rmt_hitm: u64,
    pub load_dram_lcl: u64,
    pub load_dram_rmt: u64,
    /// Loads whose source is none of the above (unknown, device, no data source).
    pub load_other: u64,
}

impl LineCounts {
    pub fn peer(&self) -> u64 {
        self.peer_local + self.peer_remote
    }

    pub fn add(&mut self, s: &SpeSample, kind: OpKind, source: Option<DataSource>) {
        self.records += 1;
        match kind {
            OpKind::Load => {
                self.loads += 1;
                match source {
                    Some(d) if d.is_peer_snoop() && d.is_remote() => self.peer_remote += 1,
                    Some(d) if d.is_peer_snoop() => self.peer_local += 1,
                    _ => {}
                }
                use DataSource::*;
                match source {
                    Some(L1D) => self.load_l1 += 1,
                    Some(L2) => self.load_l2 += 1,
                    Some(LocalCluster | L3 | SystemCache) => self.load_lcl_hit += 1,
                    Some(
                        L2Hitm | PeerCore | PeerCoreHitm | PeerCluster | PeerClusterHitm | L3Hitm,
                    ) => self.load_lcl_hitm += 1,
                    Some(Remote) => self.load_rmt_hit += 1,
                    Some(RemoteHitm) => self.load_rmt_hitm += 1,
                    Some(Dram) => self.load_dram_lcl += 1,
                    Some(RemoteDram) => self.load_dram_rmt += 1,
                    _ => self.load_other += 1,
                }
            }
            OpKind::Store => {
                self.stores += 1;
                let ev = s.record.events.unwrap_or_default();
                if ev.contains(Event::L1dRefill) {
                    self.store_l1_miss += 1;
                } else if ev.contains(Event::L1dAccess) {
                    self.store_l1_hit += 1;
                } else {
                    self.store_na += 1;
                }
            }
            _ => {}
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    FalseSharing,
    TrueSharing,
    TrueAndFalseSharing,
    None,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::FalseSharing => "false sharing",
            Verdict::TrueSharing => "true sharing",
            Verdict::TrueAndFalseSharing => "true+false sharing",
            Verdict::None => "none",
        }
    }
}

/// A thread (or, without thread ids, a CPU).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ThreadRef {
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub cpu: Option<u32>,
    pub name: Option<String>,
}

impl ThreadRef {
    pub fn label(&self) -> String {
        match (self.tid, self.cpu, &self.name) {
            (Some(t), _, Some(n)) => format!("{t}:{n}"),
            (Some(t), _, None) => t.to_string(),
            (None, Some(c), _) => format!("cpu{c}"),
            _ => "?".into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ThreadAccesses {
    pub thread: ThreadRef,
    pub loads: u64,
    pub stores: u64,
}

/// One code address touching one offset (a row of perf c2c's Pareto table).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct C2cAccess {
    pub pc: u64,
    pub function: Option<String>,
    pub function_offset: Option<u64>,
    pub dso: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// This PC's share of the line's remote / local peer-snoop loads ("Peer Snoop Rmt/Lcl").
    pub peer_remote_pct: f64,
    pub peer_local_pct: f64,
    /// This PC's share of the line's stores by L1D outcome ("Store Refs").
    pub store_l1_hit_pct: f64,
    pub store_l1_miss_pct: f64,
    pub store_na_pct: f64,
    /// Mean total latency (cycles) of its remote-peer, local-peer and all loads ("cycles").
    pub mean_cycles_peer_remote: Option<f64>,
    pub mean_cycles_peer_local: Option<f64>,
    pub mean_cycles_load: Option<f64>,
    pub cpu_count: u64,
    pub threads: Vec<ThreadRef>,
    #[serde(flatten)]
    pub counts: LineCounts,
}

/// One offset within a line.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct C2cOffset {
    pub offset: u64,
    pub address: u64,
    /// The data object at the address (`buf2+0x20`).
    pub object: Option<String>,
    /// Distinct physical addresses seen.
    pub pa_count: u64,
    pub threads: Vec<ThreadAccesses>,
    #[serde(flatten)]
    pub counts: LineCounts,
    pub accesses: Vec<C2cAccess>,
}

/// One cache line (a row of perf c2c's Shared Data Cache Line Table).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct C2cLine {
    pub index: u64,
    pub pid: Option<u32>,
    pub address: u64,
    /// The data object holding the line's first accessed offset.
    pub object: Option<String>,
    /// Distinct physical lines seen for this virtual line.
    pub pa_count: u64,
    pub cpu_count: u64,
    /// The line's peer-snoop loads ÷ those of all lines ("Peer Snoop").
    pub peer_snoop_share: f64,
    pub verdict: Verdict,
    pub verdict_reason: String,
    #[serde(flatten)]
    pub counts: LineCounts,
    pub offsets: Vec<C2cOffset>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct C2cTotals {
    /// Over every selected load and store with a data address.
    #[serde(flatten)]
    pub counts: LineCounts,
    pub lines_with_peer_snoops: u64,
    pub peer_snoops_in_lines: u64,
}

/// The whole c2c report.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct C2cReport {
    pub schema: &'static str,
    pub file: String,
    pub line_size: u64,
    pub samples_decoded: u64,
    pub samples_selected: u64,
    pub filter: Vec<String>,
    pub totals: C2cTotals,
    pub lines: Vec<C2cLine>,
    pub losses: super::Losses,
}
