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

/// Bytes read from a raw buffer at a time.
const RAW_CHUNK_BYTES: usize = 1 << 20;

/// The advice over a raw SPE buffer (SPE records with no perf.data around them, as the
/// real-hardware buffers in tests/data/spe or WindowsPerf's): there are no processes, symbols,
/// sampling interval or counters, so findings name PCs only, costs are in sampled cycles, and
/// every class that needs what is missing says so. A buffer without a decodable sample is
/// advice of insufficient evidence, not an error; only an unreadable file is.
pub fn raw_buffer_advice(
    path: &std::path::Path,
    midr: Option<spelunk_spe::Midr>,
    filter: Filter,
) -> Result<Advice, RecordingError> {
    use std::io::Read;
    let name = path.display().to_string();
    let input_error = |what: String| {
        move |source: std::io::Error| RecordingError::Input {
            what,
            source: Box::new(source),
        }
    };
    spelunk_fsio::regular_file(path).map_err(input_error(format!("{name}: cannot open")))?;
    let mut file =
        std::fs::File::open(path).map_err(input_error(format!("{name}: cannot open")))?;
    let interp = spelunk_spe::Interpretation::uniform(midr);
    let mut sel = Selector::new(&interp, filter);
    // No times: no gap is charged, so the cap does not matter.
    let mut scan = AccessScan::new(u64::MAX);
    let mut decoder = spelunk_spe::RecordDecoder::new();
    let mut buf = vec![0u8; RAW_CHUNK_BYTES];
    let mut offset = 0u64;
    loop {
        let n = file
            .read(&mut buf)
            .map_err(input_error(format!("{name}: read failed at byte {offset}")))?;
        if n == 0 {
            break;
        }
        decoder.feed_each(&buf[..n], offset, |r| {
            let s = SpeSample {
                record: *r,
                ..Default::default()
            };
            if let Some(x) = sel.select(&s) {
                scan.add(&s, &x);
            }
        });
        offset += n as u64;
    }
    decoder.finish();
    let model = interp.default.model.map(|m| m.name().to_string());
    if scan.totals.samples == 0 {
        let bad = decoder.stats().bad_bytes;
        return Ok(spelunk_analysis::advise::without_samples(
            &name,
            model,
            false,
            &format!(
                "no SPE sample in this raw buffer ({offset} bytes, {bad} of them not decodable as \
                 SPE packets)"
            ),
        ));
    }
    // No symbols: each PC is a place of its own (nothing says which PCs form one loop, so the
    // rules that look at a loop's other accesses find none).
    let dso: std::sync::Arc<str> = std::sync::Arc::from("[raw SPE buffer]");
    let locations: FastMap<_, _> = candidate_pcs(&scan)
        .into_iter()
        .map(|k| {
            let loc = spelunk_analysis::symbolize::CodeLocation {
                dso: dso.clone(),
                function: Some(std::sync::Arc::from(format!("[pc {:#x}]", k.1))),
                function_offset: None,
                file: None,
                line: None,
                inlined: Vec::new(),
                file_offset: None,
                build_id_mismatch: false,
            };
            (k, std::sync::Arc::new(loc))
        })
        .collect();
    let objects = DataObjects::default();
    let input = AdviseInput {
        file: name,
        cpu_model: model,
        emulated: false,
        scan: &scan,
        locations: &locations,
        objects: &objects,
        c2c: None,
        allocation_sites: &[],
        counters: None,
        config: None,
        interval_ops: None,
    };
    let mut advice = advise(&input);
    advice.notes.push(
        "a raw SPE buffer: no processes, symbols, sampling interval or counters came with it, \
         so findings name PCs only (record with spelunk record for functions, lines and objects)"
            .into(),
    );
    Ok(advice)
}
