//! Per-sample enrichment: each decoded sample with its code location (function, source line,
//! DSO), data source, data object and the phases open on its thread — one row per sample for
//! the Python API's `Recording.samples()`, attributed by the same means `spelunk report`
//! aggregates with (the symbolizer, the recording's data objects, its phase index), so a
//! table grouped by function, object or phase gives the report's counts.
//!
//! Samples come in batches: the unique (pid, PC) pairs of a batch are symbolized in one call
//! (the symbolizer caches what it resolved for the next batches).

use crate::recording::Recording;
use spelunk_analysis::agg::OpKind;
use spelunk_analysis::objects::{DataObject, DataObjects};
use spelunk_analysis::select::Selector;
use spelunk_analysis::symbolize::{CodeLocation, CodeSymbolizer};
use spelunk_spe::{DataSource, OpClass, SpeSample};
use std::collections::HashMap;
use std::sync::Arc;

/// What the enrich stage knows about one sample.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SampleAttribution {
    /// Where the sampled instruction is (None without a PC). Unmapped PCs are in the DSO
    /// `[unknown]`, as in the report.
    pub code: Option<Arc<CodeLocation>>,
    /// Loads and stores (the decode's `ldst` table): the data source by the sample's CPU's
    /// table, as `spelunk decode` writes it.
    pub data_source: Option<DataSource>,
    /// Loads and stores with a data address: the innermost object live at the sample's time
    /// containing it, as the report's objects table counts it.
    pub object: Option<Arc<DataObject>>,
    /// The phases open on the sample's thread at its time, outermost first (a sample counts
    /// for each in the report's phases table).
    pub phases: Vec<Arc<str>>,
}

/// Attributes batches of samples of one recording.
pub struct SampleAttributor<'a> {
    rec: &'a Recording,
    objects: &'a DataObjects,
    symbolizer: &'a mut CodeSymbolizer,
}

impl<'a> SampleAttributor<'a> {
    /// `objects` are the recording's (`rec.ctx.data_objects(..)`) and `symbolizer` its
    /// (`rec.symbolizer(..)`): what the report would use.
    pub fn new(
        rec: &'a Recording,
        objects: &'a DataObjects,
        symbolizer: &'a mut CodeSymbolizer,
    ) -> Self {
        SampleAttributor {
            rec,
            objects,
            symbolizer,
        }
    }

    /// One attribution per sample of `batch`, in order.
    pub fn attribute(&mut self, batch: &[SpeSample]) -> Vec<SampleAttribution> {
        // The batch's unique PCs, symbolized at once.
        let mut index: HashMap<(Option<u32>, u64), usize> = HashMap::new();
        let mut keys = Vec::new();
        for s in batch {
            if let Some(pc) = s.record.pc {
                index.entry((s.pid, pc.va())).or_insert_with(|| {
                    keys.push((s.pid, pc.va()));
                    keys.len() - 1
                });
            }
        }
        let locations = self.symbolizer.symbolize_pcs(&self.rec.ctx.spaces, &keys);
        let phases = &self.rec.ctx.phases;
        batch
            .iter()
            .map(|s| {
                let r = &s.record;
                let code = r.pc.map(|pc| locations[index[&(s.pid, pc.va())]].clone());
                let data_source = match r.op.map(|o| o.class()) {
                    Some(OpClass::LoadStore) => Selector::load_source(&self.rec.interp, s),
                    _ => None,
                };
                let object = match OpKind::of(r) {
                    OpKind::Load | OpKind::Store => r
                        .data_va
                        .and_then(|va| self.objects.resolve(s.pid, va.va(), s.time_ns))
                        .cloned(),
                    _ => None,
                };
                let phases = if phases.is_empty() {
                    Vec::new()
                } else {
                    phases
                        .open_at(s.tid, s.time_ns)
                        .map(|p| p.name.clone())
                        .collect()
                };
                SampleAttribution {
                    code,
                    data_source,
                    object,
                    phases,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ReportOptions;
    use spelunk_analysis::model::ObjectRow;
    use spelunk_perf::sidecar::{NamedObject, Phase, Sidecar};
    use spelunk_testkit::SynthRecording;
    use std::path::PathBuf;

    /// Counted per function, object and phase, the attributions give the report's rows.
    #[test]
    fn attributions_grouped_give_the_report_counts() {
        let dir = std::env::temp_dir().join(format!("spelunk-samples-attr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path: PathBuf = dir.join("synth.data");
        SynthRecording {
            records_per_cpu: 3000,
            ..Default::default()
        }
        .write(&path)
        .unwrap();
        // Phases and an annotated object over part of the run and of the data.
        let probe = Recording::open(&path, None, spelunk_perf::sidecar::SidecarUse::Read).unwrap();
        let mut all = Vec::new();
        probe.decode(|s| all.push(*s)).unwrap();
        let t0 = all.iter().filter_map(|s| s.time_ns).min().unwrap();
        let t1 = all.iter().filter_map(|s| s.time_ns).max().unwrap();
        let va = all
            .iter()
            .find_map(|s| s.record.data_va.map(|a| a.va()))
            .unwrap();
        let mut sc = Sidecar::new("runtime");
        let mid = t0 + (t1 - t0) / 2;
        for tid in [4242, 4243] {
            sc.phases.push(Phase {
                name: "outer".into(),
                pid: Some(4242),
                tid,
                depth: 1,
                start_ns: t0,
                end_ns: t1,
            });
            sc.phases.push(Phase {
                name: "inner".into(),
                pid: Some(4242),
                tid,
                depth: 2,
                start_ns: mid,
                end_ns: t1,
            });
        }
        sc.objects.push(NamedObject {
            name: "buffer".into(),
            pid: Some(4242),
            address: va & !0xfff_ffff,
            size: 0x800_0000,
            from_ns: 0,
            until_ns: u64::MAX,
            kind: "annotated".into(),
        });
        sc.write(&Sidecar::path_for(&path)).unwrap();

        let rec = Recording::open(&path, None, spelunk_perf::sidecar::SidecarUse::Read).unwrap();
        let objects = rec.ctx.data_objects(None);
        let mut sym = rec.symbolizer(None, None);
        let mut samples = Vec::new();
        rec.decode(|s| samples.push(*s)).unwrap();
        let mut attrs = Vec::new();
        let mut a = SampleAttributor::new(&rec, &objects, &mut sym);
        for batch in samples.chunks(1000) {
            attrs.extend(a.attribute(batch));
        }
        assert_eq!(attrs.len(), samples.len());

        let mut sym = rec.symbolizer(None, None);
        let opts = ReportOptions {
            limits: spelunk_analysis::profile::ReportLimits {
                hotspot_rows: usize::MAX,
                object_rows: usize::MAX,
                ..Default::default()
            },
            ..Default::default()
        };
        let report = rec.report(&objects, &mut sym, opts).unwrap();

        let mut functions: HashMap<(String, String), u64> = HashMap::new();
        for c in attrs.iter().filter_map(|a| a.code.as_ref()) {
            *functions
                .entry((c.dso.to_string(), c.function_name()))
                .or_default() += 1;
        }
        assert_eq!(functions.len(), report.hotspots.functions.len());
        for h in &report.hotspots.functions {
            let key = (h.dso.clone().unwrap(), h.function.clone().unwrap());
            assert_eq!(functions[&key], h.stats.samples, "{key:?}");
        }

        let mut objs: HashMap<(String, u64), u64> = HashMap::new();
        for o in attrs.iter().filter_map(|a| a.object.as_ref()) {
            *objs.entry((o.name.to_string(), o.start)).or_default() += 1;
        }
        let rows: HashMap<(String, u64), u64> = report
            .objects
            .iter()
            .map(|o: &ObjectRow| ((o.name.clone(), o.start), o.stats.samples))
            .collect();
        assert_eq!(objs, rows);
        assert!(rows.contains_key(&("buffer".to_string(), va & !0xfff_ffff)));

        let mut phases: HashMap<String, u64> = HashMap::new();
        for p in attrs.iter().flat_map(|a| &a.phases) {
            *phases.entry(p.to_string()).or_default() += 1;
        }
        assert_eq!(report.phases.len(), 2);
        for p in &report.phases {
            assert_eq!(phases[&p.name], p.stats.samples, "{}", p.name);
        }
        assert!(phases["inner"] < phases["outer"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
