//! The advisor over a recording (`spelunk advise`, the findings at the top of `spelunk
//! report`, `Recording.findings()` in Python): its access scan rides on the report's decode
//! ([`AdviceScan`]), with a c2c scan of 64-byte lines for the sharing rules; then
//! [`spelunk_analysis::advise::advise`] applies the rules.

use crate::c2c::C2cScan;
use crate::recording::{Recording, RecordingError};
use spelunk_analysis::advise::scan::AccessScan;
use spelunk_analysis::advise::{advise, candidate_pcs, AdviseInput};
use spelunk_analysis::fasthash::FastMap;
use spelunk_analysis::model::advise::Advice;
use spelunk_analysis::model::c2c::C2cReport;
use spelunk_analysis::model::Report;
use spelunk_analysis::objects::DataObjects;
use spelunk_analysis::profile::Filter;
use spelunk_analysis::select::Selector;
use spelunk_analysis::symbolize::CodeSymbolizer;
use spelunk_spe::{DecodeStats, SpeSample};

/// The line size of the sharing rules' c2c scan (Neoverse cores' 64-byte lines).
pub const ADVICE_LINE_BYTES: u64 = 64;

/// The advisor's passes over one decode: the access scan, and a c2c scan unless the report
/// runs one of its own (then its result is passed to [`AdviceScan::finish`]).
pub struct AdviceScan<'a> {
    sel: Selector<'a>,
    scan: AccessScan,
    c2c: Option<C2cScan<'a>>,
}

impl<'a> AdviceScan<'a> {
    /// `own_c2c`: run a c2c scan for the sharing rules (false when the report has one).
    pub fn new(rec: &'a Recording, filter: Filter, own_c2c: bool) -> Self {
        let interval = rec.interval_ops().unwrap_or(1024.0);
        let hz = rec.clock_hz().unwrap_or(2.5e9);
        // The longest gap charged to one sample: the interval's operations at 1000 cycles each
        // (a DRAM miss apiece); a longer gap is the thread not running.
        let cap_ns = (interval * 1000.0 / hz * 1e9) as u64;
        AdviceScan {
            sel: Selector::new(&rec.interp, filter.clone()),
            scan: AccessScan::new(cap_ns),
            c2c: own_c2c.then(|| C2cScan::new(rec, filter, ADVICE_LINE_BYTES)),
        }
    }

    /// One decoded sample (in time order).
    pub fn add(&mut self, s: &SpeSample) {
        if let Some(x) = self.sel.select(s) {
            self.scan.add(s, &x);
        }
        if let Some(c) = self.c2c.as_mut() {
            c.add(s);
        }
    }

    /// The advice, from this pass, the report (allocation sites) and the report's c2c lines
    /// (or this scan's own).
    pub fn finish(
        self,
        rec: &Recording,
        stats: &DecodeStats,
        report: &Report,
        c2c: Option<&C2cReport>,
        objects: &DataObjects,
        symbolizer: &mut CodeSymbolizer,
    ) -> Result<Advice, RecordingError> {
        let own = match (c2c, self.c2c) {
            (None, Some(scan)) if scan.records() > 0 => {
                Some(scan.finish(rec, stats, objects, symbolizer, 50)?)
            }
            _ => None,
        };
        let c2c = c2c.or(own.as_ref());
        let keys = candidate_pcs(&self.scan);
        let locs = symbolizer.symbolize_pcs(&rec.ctx.spaces, &keys);
        let locations: FastMap<_, _> = keys.into_iter().zip(locs).collect();
        let sidecar = rec.ctx.sidecar.as_deref();
        let input = AdviseInput {
            file: rec.path().to_string(),
            cpu_model: report.recording.cpu_model.clone(),
            emulated: report.recording.emulated,
            scan: &self.scan,
            locations: &locations,
            objects,
            c2c,
            allocation_sites: &report.allocation_sites,
            counters: sidecar
                .map(|s| &s.counters.totals)
                .filter(|t| !t.is_empty()),
            config: sidecar.map(|s| &s.config).filter(|c| !c.is_empty()),
            interval_ops: rec.interval_ops(),
        };
        Ok(advise(&input))
    }
}

impl Recording {
    /// Operations per sample: the effective interval the hardware applied (else the
    /// requested period).
    pub fn interval_ops(&self) -> Option<f64> {
        let s = self.ctx.sampling.as_ref()?;
        s.effective_interval
            .or(s.requested_period)
            .filter(|i| *i > 0)
            .map(|i| i as f64)
    }

    /// The core clock of an emulated run (the sidecar's `config.cpu_hz`).
    pub fn clock_hz(&self) -> Option<f64> {
        self.ctx
            .sidecar
            .as_ref()
            .and_then(|s| s.config.get("cpu_hz"))
            .and_then(|v| v.as_f64())
            .filter(|h| *h > 0.0)
    }
}

impl Recording {
    /// The advice over the samples `req` selects (its table options are ignored): the
    /// report's decode with the advisor riding on it. A recording (or a selection) without
    /// samples is advice of "insufficient evidence" with the reason, not an error.
    pub fn requested_advice(
        &self,
        req: &crate::report::ReportRequest,
        symbolizer: &mut CodeSymbolizer,
    ) -> Result<Advice, RecordingError> {
        let req = crate::report::ReportRequest {
            rows: 10,
            page: false,
            c2c: None,
            advise: true,
            ..req.clone()
        };
        match self.requested_report(&req, symbolizer) {
            Ok(report) => Ok(report.advice.unwrap_or_else(|| {
                spelunk_analysis::advise::without_samples(
                    self.path(),
                    None,
                    false,
                    "the advisor did not run",
                )
            })),
            Err(e @ RecordingError::NoSamples { .. }) => {
                Ok(spelunk_analysis::advise::without_samples(
                    self.path(),
                    self.interp.default.model.map(|m| m.name().to_string()),
                    self.ctx
                        .sidecar
                        .as_ref()
                        .is_some_and(|s| s.source == "emulator"),
                    &crate::recording::error_line(crate::recording::error_chain(&e)),
                ))
            }
            Err(e) => Err(e),
        }
    }
}
