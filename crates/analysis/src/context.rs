//! What the recording's sideband says about its processes: address spaces (MMAP/MMAP2, with
//! fork inheritance), thread names (COMM), and how SPE sampled (the SPE event's attr and
//! metadata), plus what the recording's sidecar (`FILE.spelunk.json`, written by
//! `spelunk record`) adds: phases and objects named through the annotation API, PMU counts.
//! Built once per report from an indexed perf.data.

use crate::estimate::{base_interval, effective_interval};
use crate::maps::{AddressSpaces, Mapping};
use crate::model::Sampling;
use crate::objects::DataObjects;
use crate::phases::PhaseIndex;
use spelunk_perf::records::{MmapFileId, TaskEventKind};
use spelunk_perf::sidecar::Sidecar;
use spelunk_perf::PerfDataFile;
use spelunk_spe::CpuModel;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// The recording's processes and sampling configuration.
#[derive(Clone, Debug, Default)]
pub struct RecordingContext {
    pub spaces: AddressSpaces,
    /// tid → the thread's (last) name.
    pub thread_names: HashMap<u32, String>,
    pub sampling: Option<Sampling>,
    /// The sidecar next to the perf.data, when there is one.
    pub sidecar: Option<Arc<Sidecar>>,
    /// Phases from the sidecar (empty without one).
    pub phases: Arc<PhaseIndex>,
    /// What the sidecar lacks or dropped (not used on request, inconsistent entries), for the
    /// recording's losses.
    pub problems: Vec<String>,
}

fn u32_of(v: i32) -> Option<u32> {
    u32::try_from(v).ok()
}

impl RecordingContext {
    /// The context of `file` with its sidecar, as [`Sidecar::for_recording`] read it (and the
    /// problems it found).
    pub fn from_perf(
        file: &PerfDataFile,
        sidecar: Option<Sidecar>,
        problems: Vec<String>,
    ) -> RecordingContext {
        let sb = &file.sideband;
        // The build-id each file had when it was recorded (HEADER_BUILD_ID; an MMAP2 record's
        // own build-id wins): symbolization uses a file here only if it still has it.
        let recorded_ids: HashMap<&str, &[u8]> = file
            .features
            .build_ids
            .iter()
            .filter(|e| e.path.starts_with('/'))
            .map(|e| (e.path.as_str(), &e.build_id.0[..]))
            .collect();
        let mut spaces = AddressSpaces::new();
        // Forks in time order, so children inherit the mappings their parent had by then.
        let mut events: Vec<(u64, usize, bool)> = Vec::new();
        for (i, m) in sb.mmaps.iter().enumerate() {
            events.push((m.sample.time_ns.unwrap_or(0), i, true));
        }
        for (i, t) in sb.tasks.iter().enumerate() {
            if t.kind == TaskEventKind::Fork && t.pid != t.ppid {
                events.push((t.time_ns, i, false));
            }
        }
        events.sort_by_key(|e| e.0);
        for (time, i, is_mmap) in events {
            if is_mmap {
                let m = &sb.mmaps[i];
                let mut mapping = Mapping::new(
                    m.address,
                    m.length,
                    m.page_offset,
                    &m.path,
                    m.executable,
                    time,
                );
                mapping.build_id = match &m.file_id {
                    MmapFileId::BuildId(b) => Some(b.clone()),
                    _ => recorded_ids.get(m.path.as_str()).map(|b| b.to_vec()),
                };
                // Kernel mappings are recorded with pid -1.
                spaces.add(u32_of(m.pid), mapping);
            } else {
                let t = &sb.tasks[i];
                if let (Some(parent), Some(child)) = (u32_of(t.ppid), u32_of(t.pid)) {
                    spaces.fork(parent, child);
                }
            }
        }
        spaces.finish();

        let mut thread_names = HashMap::new();
        let mut comms: Vec<_> = sb.comms.iter().collect();
        comms.sort_by_key(|c| c.sample.time_ns.unwrap_or(0));
        for c in comms {
            if let Some(tid) = u32_of(c.tid) {
                thread_names.insert(tid, c.name.clone());
            }
        }

        let sampling = file.spe_attr().map(|attr| {
            let cfg = attr.spe_config();
            let requested = attr.sample_period();
            let min_interval = file
                .spe
                .as_ref()
                .and_then(|s| s.cpus().iter().map(|c| c.min_interval).find(|m| *m > 0));
            let base = requested.map(|r| base_interval(Some(r), min_interval.unwrap_or(0)));
            // caps/ernd is not recorded in perf.data. Neoverse N1 reports 0 ([SPE methodology] uses
            // +128 on N1); elsewhere the jittered figure is stated as an assumption.
            let model = file.features.midr().and_then(|m| m.model());
            let note = match (cfg.jitter, model) {
                (true, Some(CpuModel::NeoverseN1)) => Some(
                    "jitter on; caps/ernd = 0 on Neoverse N1 ([SPE methodology table 4.3])".into(),
                ),
                (true, _) => {
                    Some("jitter on; caps/ernd is not recorded, assumed 0 (base + 128)".into())
                }
                (false, _) => Some(
                    "fixed interval (no jitter): a loop whose operation count shares a factor \
                     with the interval can be sampled at the same few operations every time, or \
                     never; record with jitter (spelunk record's default)"
                        .into(),
                ),
            };
            Sampling {
                requested_period: requested,
                min_interval,
                base_interval: base,
                jitter: cfg.jitter,
                effective_interval: base.map(|b| effective_interval(b, cfg.jitter, false)),
                note,
            }
        });
        let sidecar = sidecar.map(Arc::new);
        let phases = Arc::new(
            sidecar
                .as_ref()
                .map(|s| PhaseIndex::new(&s.phases))
                .unwrap_or_default(),
        );
        RecordingContext {
            spaces,
            thread_names,
            sampling,
            sidecar,
            phases,
            problems,
        }
    }

    /// The processes' data objects: globals, regions and, from the sidecar, the objects named
    /// through the annotation API (with their lifetimes).
    pub fn data_objects(&self, symfs: Option<&PathBuf>) -> DataObjects {
        let mut objects = DataObjects::build(&self.spaces, symfs);
        if let Some(sc) = &self.sidecar {
            let pids: Vec<u32> = self.spaces.pids().collect();
            // An object without a pid belongs to every recorded process.
            objects.annotate_all(sc.objects.iter().flat_map(|o| {
                let targets: Vec<u32> = match o.pid {
                    Some(p) => vec![p],
                    None => pids.clone(),
                };
                targets
                    .into_iter()
                    .map(move |pid| (pid, o.address, o.size, &*o.name, o.from_ns, o.until_ns))
            }));
            if !sc.allocations.is_empty() {
                objects.allocate(crate::alloc_sites::heap_blocks(
                    &self.spaces,
                    symfs,
                    &sc.allocations,
                ));
            }
        }
        objects
    }
}
