//! The c2c analysis of a recording (`spelunk c2c`, `spelunk report --c2c`): its two passes
//! ([`spelunk_analysis::c2c`]) over the recording's decode.

use crate::recording::{Recording, RecordingError};
use spelunk_analysis::c2c::{C2cBuilder, C2cReport, LineScan, C2C_SCHEMA};
use spelunk_analysis::objects::DataObjects;
use spelunk_analysis::profile::Filter;
use spelunk_analysis::select::Selector;
use spelunk_analysis::symbolize::CodeSymbolizer;
use spelunk_spe::{DecodeStats, SpeSample};

/// The c2c analysis of one recording, shared by `spelunk c2c` and `spelunk report --c2c`: pass 1
/// ([`C2cScan::add`]) is fed every decoded sample — by its own decode, or by the report's, so
/// the report pays one pass less — and [`C2cScan::finish`] runs pass 2 over the lines with peer
/// snoops (if any) and assembles the report. The filter is applied exactly as the report's.
pub struct C2cScan<'a> {
    sel: Selector<'a>,
    scan: LineScan,
    line_size: u64,
}

impl<'a> C2cScan<'a> {
    /// `line_size` must have passed `check_line_size` (a power of two of at least 8).
    pub fn new(rec: &'a Recording, filter: Filter, line_size: u64) -> Self {
        C2cScan {
            sel: Selector::new(&rec.interp, filter),
            scan: LineScan::new(line_size),
            line_size,
        }
    }

    /// Pass 1: one decoded sample (in time order).
    pub fn add(&mut self, s: &SpeSample) {
        if let Some(x) = self.sel.select(s) {
            self.scan.add(s, &x);
        }
    }

    /// Samples offered to and selected by pass 1.
    pub fn decoded(&self) -> u64 {
        self.sel.decoded
    }
    pub fn selected(&self) -> u64 {
        self.sel.selected
    }
    /// Selected loads and stores with a data address.
    pub fn records(&self) -> u64 {
        self.scan.totals.records
    }

    /// Pass 2 (a decode of `rec`, skipped when no line had a peer snoop) and the report, at
    /// most `limit` lines; `stats` are pass 1's decode statistics (for the losses).
    pub fn finish(
        self,
        rec: &Recording,
        stats: &DecodeStats,
        objects: &DataObjects,
        symbolizer: &mut CodeSymbolizer,
        limit: usize,
    ) -> Result<C2cReport, RecordingError> {
        let filter = self.sel.filter.clone();
        let described = filter.describe();
        let mut builder = C2cBuilder::new(&self.scan);
        if !self.scan.peer_lines.is_empty() {
            let mut sel2 = Selector::new(&rec.interp, filter);
            rec.decode(|s| {
                if let Some(x) = sel2.select(s) {
                    builder.add(s, &x);
                }
            })?;
        }
        let (lines, totals) = builder.finish(
            &rec.ctx.spaces,
            objects,
            symbolizer,
            &rec.ctx.thread_names,
            self.scan.totals.clone(),
            limit,
        );
        Ok(C2cReport {
            schema: C2C_SCHEMA,
            file: rec.path().to_string(),
            line_size: self.line_size,
            samples_decoded: self.sel.decoded,
            samples_selected: self.sel.selected,
            filter: described,
            totals,
            lines,
            losses: rec.losses(stats),
        })
    }
}

impl Recording {
    /// The c2c analysis's first pass over the samples `filter` selects (see [`C2cScan`]): an
    /// error when none is selected or none is a load or store with a data address.
    pub fn c2c_scan(
        &self,
        filter: Filter,
        line_size: u64,
    ) -> Result<(C2cScan<'_>, DecodeStats), RecordingError> {
        let described = filter.describe();
        let mut scan = C2cScan::new(self, filter, line_size);
        let stats = self.decode(|s| scan.add(s))?;
        if scan.selected() == 0 {
            return Err(RecordingError::NoSamplesMatched {
                path: self.path().to_string(),
                filter: described,
                decoded: scan.decoded(),
                damage: self.damage_note(),
            });
        }
        if scan.records() == 0 {
            return Err(RecordingError::NoMemorySamples {
                path: self.path().to_string(),
                selected: scan.selected(),
                damage: self.damage_note(),
            });
        }
        Ok((scan, stats))
    }
}
