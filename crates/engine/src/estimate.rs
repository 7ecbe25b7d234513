//! Derived latency and bandwidth of a code region of a recording (`spelunk estimate`): the
//! selected samples per PC, the region (a function, a PC range), the interval and timer the
//! recording used, and [`spelunk_analysis::estimate`]'s arithmetic over them.

use crate::recording::{Recording, RecordingError};
use spelunk_analysis::disasm::CodeReader;
use spelunk_analysis::estimate::{
    bytes_from_instructions, BytesPerOp, CountedOps, EstimateKind, EstimateReport, EstimateSetup,
    IntervalDerivation, PcSpan, TimerInfo,
};
use spelunk_analysis::profile::Filter;
use spelunk_analysis::select::Selector;
use spelunk_analysis::symbolize::CodeSymbolizer;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;

/// What to estimate, over which samples, with which overrides of what the recording says.
#[derive(Clone, Debug)]
pub struct EstimateRequest {
    pub kind: EstimateKind,
    /// The operations counted.
    pub counted: CountedOps,
    pub filter: Filter,
    /// Only samples in this function (as symbolized).
    pub function: Option<String>,
    /// Bytes per counted operation, instead of decoding each sampled instruction.
    pub bytes_per_op: Option<u64>,
    /// The sampling interval, instead of the recording's.
    pub interval: Option<u64>,
    /// The CPU's caps/ernd (not recorded in perf.data).
    pub ernd: Option<bool>,
    /// The timer frequency, instead of the recording's TIME_CONV.
    pub timer_hz: Option<f64>,
    /// The CPU clock, to also give the latency in cycles.
    pub cpu_ghz: Option<f64>,
    /// Where the recorded binaries are (to decode the access sizes).
    pub symfs: Option<PathBuf>,
}

/// Why an estimate could not be made; each says what to pass instead.
#[derive(Debug, thiserror::Error)]
pub enum EstimateError {
    #[error(transparent)]
    Recording(#[from] RecordingError),
    #[error("{path}: no selected samples in a function named '{name}' (see `spelunk report {path}` for the sampled functions){damage}")]
    NoSamplesInFunction {
        path: String,
        name: String,
        damage: String,
    },
    #[error("{path}: none of the {not_counted} selected samples are {ops} (choose others with --ops){damage}")]
    NothingCounted {
        path: String,
        not_counted: u64,
        ops: &'static str,
        damage: String,
    },
    #[error("{path}: the recording does not say the SPE sampling period; pass --interval N")]
    NoInterval { path: String },
    #[error("--timer-hz {hz}: expected a positive frequency")]
    TimerHz { hz: f64 },
    #[error("{path}: no usable TIME_CONV record to convert timer ticks; pass --timer-hz HZ")]
    NoTimer { path: String },
    #[error("{path}: {samples} counted samples have no PC, so their access size is unknown; pass --bytes-per-op N")]
    NoPc { path: String, samples: u64 },
    #[error("{path}: cannot infer the bytes per operation: {detail}; pass --bytes-per-op N")]
    BytesPerOp { path: String, detail: String },
    #[error("{path}: {detail}")]
    Compute { path: String, detail: String },
}

/// Counted samples of one (pid, PC) and what else was selected there.
#[derive(Default)]
struct PcAcc {
    span: PcSpan,
    not_counted: u64,
    cpus: BTreeSet<u32>,
}

impl Recording {
    /// The estimate `req` asks for, with every input and step in the report, and a note when
    /// the recording lost samples (the counts are then low).
    pub fn estimate(
        &self,
        req: EstimateRequest,
        symbolizer: &mut CodeSymbolizer,
    ) -> Result<EstimateReport, EstimateError> {
        let EstimateRequest {
            kind,
            counted,
            filter,
            ..
        } = req;
        let rec = self;
        let mut selection = filter.describe();
        let mut sel = Selector::new(&rec.interp, filter);
        let mut per_pc: HashMap<(Option<u32>, Option<u64>), PcAcc> = HashMap::new();
        let stats = rec.decode(|s| {
            let Some(x) = sel.select(s) else { return };
            let acc = per_pc.entry((s.pid, x.pc)).or_default();
            if counted.counts(x.kind) {
                acc.span.add(x.kind, s.record.timestamp);
                if let Some(c) = s.cpu {
                    acc.cpus.insert(c);
                }
            } else {
                acc.not_counted += 1;
            }
        })?;
        let path = rec.path().to_string();
        if sel.selected == 0 {
            return Err(RecordingError::NoSamplesMatched {
                path,
                filter: selection,
                decoded: sel.decoded,
                damage: rec.damage_note(),
            }
            .into());
        }

        if let Some(name) = &req.function {
            let keys = per_pc.keys().filter_map(|(pid, pc)| pc.map(|p| (*pid, p)));
            let keep: HashSet<(Option<u32>, u64)> = rec.pcs_in_function(symbolizer, keys, name);
            if keep.is_empty() {
                return Err(EstimateError::NoSamplesInFunction {
                    path,
                    name: name.clone(),
                    damage: rec.damage_note(),
                });
            }
            per_pc.retain(|(pid, pc), _| pc.is_some_and(|p| keep.contains(&(*pid, p))));
            selection.push(format!("function {name}"));
        }

        let mut span = PcSpan::default();
        let mut not_counted = 0;
        let mut cpus = BTreeSet::new();
        for acc in per_pc.values() {
            span.merge(&acc.span);
            not_counted += acc.not_counted;
            cpus.extend(acc.cpus.iter().copied());
        }
        if span.samples == 0 {
            return Err(EstimateError::NothingCounted {
                path,
                not_counted,
                ops: counted.name(),
                damage: rec.damage_note(),
            });
        }

        let sampling = rec.ctx.sampling.as_ref();
        let interval = IntervalDerivation::derive(
            sampling.and_then(|s| s.requested_period),
            sampling.and_then(|s| s.min_interval),
            sampling.map(|s| s.jitter),
            req.ernd,
            req.interval,
        )
        .ok_or_else(|| EstimateError::NoInterval { path: path.clone() })?;
        let timer = match req.timer_hz {
            Some(hz) => TimerInfo::from_hz(hz).ok_or(EstimateError::TimerHz { hz })?,
            None => rec
                .file
                .time_conv
                .and_then(|tc| TimerInfo::from_time_conv(tc.time_mult, tc.time_shift))
                .ok_or_else(|| EstimateError::NoTimer { path: path.clone() })?,
        };

        let bytes_per_op = match (kind, req.bytes_per_op) {
            (EstimateKind::Latency, _) => None,
            (EstimateKind::Bandwidth, Some(n)) => Some(BytesPerOp {
                from: "--bytes-per-op".into(),
                uniform: Some(n),
                sample_bytes: span.samples.saturating_mul(n),
                instructions: Vec::new(),
            }),
            (EstimateKind::Bandwidth, None) => {
                let mut pcs = Vec::new();
                for ((pid, pc), acc) in &per_pc {
                    if acc.span.samples == 0 {
                        continue;
                    }
                    let Some(pc) = pc else {
                        return Err(EstimateError::NoPc {
                            path,
                            samples: acc.span.samples,
                        });
                    };
                    let m = rec.ctx.spaces.lookup(*pid, *pc, None).cloned();
                    pcs.push((m, *pc, acc.span.samples));
                }
                pcs.sort_by_key(|p| p.1);
                let mut reader = CodeReader::new(req.symfs.clone());
                Some(
                    bytes_from_instructions(&pcs, &mut reader).map_err(|detail| {
                        EstimateError::BytesPerOp {
                            path: path.clone(),
                            detail,
                        }
                    })?,
                )
            }
        };

        let setup = EstimateSetup {
            kind,
            file: path.clone(),
            selection,
            counted,
            not_counted,
            cpus: cpus.len() as u64,
            interval,
            timer,
            cpu_ghz: req.cpu_ghz.filter(|g| *g > 0.0),
            bytes_per_op,
        };
        let mut report = EstimateReport::compute(setup, &span)
            .map_err(|detail| EstimateError::Compute { path, detail })?;
        let l = rec.losses(&stats);
        let lost = l.dropped_records + l.incomplete_records + l.lost_records;
        let flagged = l.aux_truncated + l.aux_partial + l.aux_collision;
        if lost > 0 || flagged > 0 || l.undecodable_bytes > 0 {
            report.notes.push(format!(
                "the recording lost data ({lost} records lost or dropped, {flagged} AUX buffers flagged truncated/partial/collision, {} undecodable bytes): samples are missing, so the operation count and bandwidth are low",
                l.undecodable_bytes
            ));
        }
        report.losses = l;
        Ok(report)
    }
}
