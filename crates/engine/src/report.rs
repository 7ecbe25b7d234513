//! The report of a recording (`spelunk report`, `Recording.report()` in Python): the parallel
//! profile of the selected samples, with the c2c tables on request.

use crate::advise::{AdviceScan, ADVICE_LINE_BYTES};
use crate::c2c::C2cScan;
use crate::recording::{Recording, RecordingError};
use crate::select::SampleSelection;
use spelunk_analysis::model::{RecordingInfo, Report};
use spelunk_analysis::object_timelines::per_object;
use spelunk_analysis::objects::DataObjects;
use spelunk_analysis::profile::{Filter, HotspotSort, ProfileBuilder, ReportLimits};
use spelunk_analysis::symbolize::CodeSymbolizer;
use spelunk_perf::sidecar::Sidecar;
use spelunk_spe::SpeSample;
use std::path::{Path, PathBuf};

/// The c2c analysis asked of [`Recording::report`] (`spelunk report --c2c`).
#[derive(Clone, Copy, Debug)]
pub struct C2cOptions {
    /// Cache line size in bytes (checked by [`check_line_size`]).
    pub line_size: u64,
    /// Lines to keep.
    pub limit: usize,
}

/// What [`Recording::report`] computes: the samples, the table sizes and order, and whether
/// to add the c2c tables.
#[derive(Clone, Debug, Default)]
pub struct ReportOptions {
    pub filter: Filter,
    pub limits: ReportLimits,
    pub sort: HotspotSort,
    pub c2c: Option<C2cOptions>,
    /// Run the advisor too (its findings in [`Report::advice`]).
    pub advise: bool,
}

/// `--line-size`: a power of two of at least 8 bytes.
pub fn check_line_size(bytes: u64) -> Result<(), RecordingError> {
    if !bytes.is_power_of_two() || bytes < 8 {
        return Err(RecordingError::LineSize(bytes));
    }
    Ok(())
}

impl Recording {
    /// The report of the samples `opts.filter` selects (what `spelunk report` prints), with
    /// the c2c tables when `opts.c2c` asks for them (their first pass rides on the report's
    /// decode). The line size must have passed [`check_line_size`].
    pub fn report(
        &self,
        objects: &DataObjects,
        symbolizer: &mut CodeSymbolizer,
        opts: ReportOptions,
    ) -> Result<Report, RecordingError> {
        let mut c2c = opts
            .c2c
            .map(|c| C2cScan::new(self, opts.filter.clone(), c.line_size));
        let own_c2c = opts.c2c.is_none_or(|c| c.line_size != ADVICE_LINE_BYTES);
        let mut advice = opts
            .advise
            .then(|| AdviceScan::new(self, opts.filter.clone(), own_c2c));
        let mut builder = ProfileBuilder::new(&self.interp, objects, opts.filter, opts.limits)
            .with_phases(self.ctx.phases.clone())
            .with_hotspot_sort(opts.sort);
        let stats = self.while_loading_symbols(symbolizer, || {
            let feed = |s: &SpeSample| {
                if let Some(c) = c2c.as_mut() {
                    c.add(s);
                }
                if let Some(a) = advice.as_mut() {
                    a.add(s);
                }
            };
            if opts.c2c.is_some() || opts.advise {
                crate::parallel::profile_with_side_pass(self, &mut builder, feed)
            } else {
                crate::parallel::profile(self, &mut builder, None)
            }
        })?;
        let info = self.recording_info(self.losses(&stats));
        let mut report = builder.finish(
            &self.ctx.spaces,
            symbolizer,
            &self.ctx.thread_names,
            info,
            self.ctx.sidecar.as_deref(),
        );
        report.object_timelines = per_object(
            &report.objects,
            &report.timeline,
            opts.limits.object_timelines,
        );
        if let (Some(scan), Some(o)) = (c2c, opts.c2c) {
            // Without samples there are no lines to show: say so (and why) first.
            self.require_samples(&report)?;
            report.c2c = Some(scan.finish(self, &stats, objects, symbolizer, o.limit)?);
        }
        if let Some(a) = advice {
            let shared = report
                .c2c
                .as_ref()
                .filter(|c| c.line_size == ADVICE_LINE_BYTES);
            let advice = a.finish(self, &stats, &report, shared, objects, symbolizer)?;
            report.advice = Some(advice);
        }
        Ok(report)
    }

    /// What a report says of the recording before its samples are counted: the file, the
    /// CPU, whether it was emulated, the sampling interval, and what was lost.
    fn recording_info(&self, losses: spelunk_analysis::model::Losses) -> RecordingInfo {
        RecordingInfo {
            file: self.path().to_string(),
            cpu_model: self.interp.default.model.map(|m| m.name().to_string()),
            midr: self.file.features.midr().map(|m| m.to_string()),
            emulated: self
                .ctx
                .sidecar
                .as_ref()
                .is_some_and(|s| s.source == "emulator"),
            emulated_platform: self
                .ctx
                .sidecar
                .as_ref()
                .filter(|s| s.source == "emulator")
                .and_then(|s| s.config.get("platform"))
                .and_then(|p| p.as_str())
                .map(str::to_string),
            emulated_pages: self
                .ctx
                .sidecar
                .as_ref()
                .filter(|s| s.source == "emulator")
                .and_then(|s| s.config.get("pages"))
                .and_then(|p| p.as_str())
                .map(str::to_string),
            sampling: self.ctx.sampling.clone(),
            losses,
            ..Default::default()
        }
    }

    /// A report of this recording that selected no sample is an error
    /// ([`RecordingError::NoSamples`], saying when the recording is damaged): there is
    /// nothing to show.
    pub fn require_samples(&self, report: &Report) -> Result<(), RecordingError> {
        if report.recording.samples_selected == 0 {
            return Err(RecordingError::NoSamples {
                path: report.recording.file.clone(),
                filter: report.filter.clone(),
                decoded: report.recording.samples_decoded,
                damage: self.damage_note(),
            });
        }
        Ok(())
    }
}

/// What `spelunk report` asks of a recording: the samples (filters as given, and a function
/// by name), the tables' order and size, and the c2c tables.
#[derive(Clone, Debug, Default)]
pub struct ReportRequest {
    pub selection: SampleSelection,
    /// Only samples in the function of this name (as symbolized).
    pub function: Option<String>,
    pub sort: HotspotSort,
    /// Rows per table (after sorting).
    pub rows: usize,
    /// The report is for an HTML page, which sorts its tables itself: keep at least 50 rows.
    pub page: bool,
    pub c2c: Option<C2cOptions>,
    /// Run the advisor (the report's first lines; `spelunk advise`).
    pub advise: bool,
    /// Where the recorded binaries are (their global data objects).
    pub symfs: Option<PathBuf>,
}

impl Recording {
    /// The report `req` asks for ([`Recording::report`]), with `req.function` resolved to its
    /// PCs by a first pass. A report without samples is an error (that says when the
    /// recording is damaged). The line size must have passed [`check_line_size`].
    pub fn requested_report(
        &self,
        req: &ReportRequest,
        symbolizer: &mut CodeSymbolizer,
    ) -> Result<Report, RecordingError> {
        let objects = self.ctx.data_objects(req.symfs.as_ref());
        let rows = if req.page { req.rows.max(50) } else { req.rows };
        let limits = ReportLimits {
            hotspot_rows: rows,
            object_rows: rows,
            ..Default::default()
        };
        let mut filter = req.selection.filter(&self.ctx)?;
        if let Some(name) = &req.function {
            // First pass: the PCs of the recording; keep those in the named function.
            let mut pass = ProfileBuilder::new(&self.interp, &objects, filter.clone(), limits);
            crate::parallel::profile(self, &mut pass, None)?;
            let keep = self.pcs_in_function(symbolizer, pass.pcs(), name);
            if keep.is_empty() {
                return Err(RecordingError::Options(format!(
                    "{}: no samples in a function named '{name}' (check the name with `spelunk report {}`){}",
                    self.path(),
                    self.path(),
                    self.damage_note()
                )));
            }
            filter.pcs = Some(keep);
        }
        let opts = ReportOptions {
            filter,
            limits,
            sort: req.sort,
            c2c: req.c2c,
            advise: req.advise,
        };
        let report = self.report(&objects, symbolizer, opts)?;
        self.require_samples(&report)?;
        Ok(report)
    }

    /// The report with every row and no timeline, the input of `spelunk diff` (the same
    /// parallel aggregation as [`Recording::report`]); with the advisor's findings when
    /// `advise` (diff says which a change removed; a benchmark gate does not need them). A
    /// report without samples is an error.
    pub fn every_row_report(
        &self,
        filter: Filter,
        symfs: Option<&PathBuf>,
        symbolizer: &mut CodeSymbolizer,
        advise: bool,
    ) -> Result<Report, RecordingError> {
        let objects = self.ctx.data_objects(symfs);
        let limits = ReportLimits {
            hotspot_rows: usize::MAX,
            object_rows: usize::MAX,
            timeline_points: 0,
            ..Default::default()
        };
        // The advisor rides on the decode, on a thread of its own.
        let mut advice = advise.then(|| AdviceScan::new(self, filter.clone(), true));
        let mut builder = ProfileBuilder::new(&self.interp, &objects, filter, limits)
            .with_phases(self.ctx.phases.clone());
        let stats = self.while_loading_symbols(symbolizer, || match advice.as_mut() {
            Some(a) => crate::parallel::profile_with_side_pass(self, &mut builder, |s| a.add(s)),
            None => crate::parallel::profile(self, &mut builder, None),
        })?;
        let info = self.recording_info(self.losses(&stats));
        let mut r = builder.finish(
            &self.ctx.spaces,
            symbolizer,
            &self.ctx.thread_names,
            info,
            self.ctx.sidecar.as_deref(),
        );
        self.require_samples(&r)?;
        if let Some(a) = advice {
            r.advice = Some(a.finish(self, &stats, &r, None, &objects, symbolizer)?);
        }
        Ok(r)
    }
}

/// The sidecar to read when the recording is its timelines alone (`spelunk record --no-spe`):
/// `file` itself when it is a `.spelunk.json`, or `file`'s sidecar when `file` does not exist.
pub fn timelines_only_sidecar(file: &Path) -> Option<PathBuf> {
    if file.to_string_lossy().ends_with(".spelunk.json") {
        return Some(file.to_path_buf());
    }
    let sidecar = Sidecar::path_for(file);
    (!file.exists() && sidecar.exists()).then_some(sidecar)
}

/// The report of a recording without samples (`--no-spe`, or the runtime's logs alone): its
/// timelines, with what reading the sidecar dropped as damage like a recording's. `name` names
/// the recording.
pub fn timelines_only_report(sc: &Sidecar, name: &str) -> Result<Report, RecordingError> {
    let Some(mut report) = spelunk_analysis::timelines::timelines_report(sc, name) else {
        return Err(RecordingError::Options(format!(
            "{name}: this sidecar has no timelines (no config.timeline_clock, no capacity), and \
             a sidecar alone holds no samples: give the perf.data it belongs to"
        )));
    };
    report
        .recording
        .losses
        .problems
        .extend(sc.problems.iter().cloned());
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::{error_chain, error_line, SidecarUse};
    use spelunk_testkit::SynthRecording;

    /// A recording SPE never wrote to reports no sample, and says so as an error.
    #[test]
    fn a_report_without_samples_is_an_error() {
        let dir = std::env::temp_dir().join(format!("spelunk-report-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("empty.data");
        SynthRecording {
            records_per_cpu: 0,
            ..Default::default()
        }
        .write(&path)
        .unwrap();
        let rec = Recording::open(&path, None, SidecarUse::Read).unwrap();
        let objects = rec.ctx.data_objects(None);
        let mut sym = rec.symbolizer(None, None);
        let report = rec
            .report(&objects, &mut sym, ReportOptions::default())
            .unwrap();
        let e = rec.require_samples(&report).unwrap_err();
        assert_eq!(
            error_line(error_chain(&e)),
            format!("{}: no samples; 0 records were decoded", path.display())
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn line_sizes_are_powers_of_two_of_at_least_8() {
        assert!(check_line_size(64).is_ok() && check_line_size(8).is_ok());
        assert!(check_line_size(4).is_err() && check_line_size(48).is_err());
    }
}
