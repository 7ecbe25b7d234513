//! Writes a standard perf.data holding an Arm SPE recording, laid out the way
//! `perf record -e arm_spe_0/.../ -- CMD` (per-CPU AUX buffers) lays it out, so that
//! `perf report`, `perf script` and `perf c2c report` open what spelunk records or emulates.
//!
//! File layout (perf.data-file-format.txt; the order of sections is perf 6.1's, observed in
//! files it records): the 104-byte header; each attr's id array; the attrs section
//! (`perf_event_attr` of 128 bytes + `perf_file_section` of its ids, per event); the data
//! section; the feature-section table (one `{offset, size}` per set feature bit, ascending)
//! followed by the feature bodies. The header is written last, when sizes are known.
//!
//! Events: the SPE event (`type` = the PMU type, `config*` from [`SpeConfig`],
//! `sample_id_all` = 1) and a `dummy:u` tracking event (`PERF_TYPE_SOFTWARE`,
//! `PERF_COUNT_SW_DUMMY`) that owns the sideband (mmap, comm, task, context_switch), both with
//! `sample_type` IP|TID|TIME|CPU|IDENTIFIER (+DATA_SRC, +PHYS_ADDR with `pa_enable`), the bits
//! perf's own attr test `tests/attr/test-record-spe-physical-address` expects. Both events share
//! one sample_id layout (pid, tid, time, cpu, identifier: 32 bytes), and each CPU has its own
//! event id, listed in the attrs section, EVENT_DESC and an ID_INDEX record.
//!
//! Data section order: ID_INDEX, TIME_CONV, AUXTRACE_INFO, then sideband and AUX in call order.
//! TIME_CONV must precede AUXTRACE_INFO: perf 6.1 copies the session's time conversion when
//! it processes AUXTRACE_INFO. Each [`SpeRecordingWriter::aux`] call writes a kernel
//! `PERF_RECORD_AUX` (with sample_id) followed by a `PERF_RECORD_AUXTRACE` whose payload is
//! padded to 8 bytes (`size` includes the padding, `offset` advances by the unpadded length, as
//! perf does). The HEADER_AUXTRACE feature indexes every AUXTRACE record, which lets perf queue
//! all AUX data before it processes events. HEADER_BUILD_ID lists the build-ids the recorder
//! gives [`SpeRecordingWriter::set_build_ids`] (crate::buildid has the layout).

use spelunk_fsio::AtomicFile;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use spelunk_spe::Midr;

use crate::abi::{self, attr_flag, feature, misc, sample};
use crate::attr::{EventAttr, SpeConfig};
use crate::auxinfo::{SpeAuxtraceInfo, SpeCpuMetadata};
use crate::buildid::{header_section, BuildIdEntry};
use crate::error::PerfError;
use crate::records::{AuxFlags, MmapFileId};
use crate::timeconv::{TimeConv, TimeConvLayout};

/// Which Arm SPE metadata layout to write in AUXTRACE_INFO.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SpeMetadataLayout {
    /// Version 1 (2 u64s): what perf 6.1 writes and the only layout it reads.
    #[default]
    V1,
    /// Version 2 with a per-CPU block (MIDR, PMU type, min interval) for each recorded CPU.
    /// perf 6.1 cannot decode files with this layout.
    V2,
}

/// Everything about a recording that is fixed before the first record.
#[derive(Clone, Debug)]
pub struct RecordingSpec {
    /// `perf_event_attr.type` of the SPE PMU (its sysfs `type`; perf's attr tests use 10).
    pub pmu_type: u32,
    /// Name of the SPE PMU instance (`arm_spe_0`).
    pub pmu_name: String,
    pub spe: SpeConfig,
    /// SPE sampling interval (PMSIRR_EL1.INTERVAL), in operations.
    pub sample_period: u64,
    /// The recorded CPUs; AUX data of `cpus[i]` gets AUXTRACE `idx` i.
    pub cpus: Vec<u32>,
    /// HEADER_NRCPUS: CPUs present / online.
    pub nr_cpus_available: u32,
    pub nr_cpus_online: u32,
    /// MIDR of the CPUs (HEADER_CPUID and version-2 metadata).
    pub midr: Midr,
    /// `caps/min_interval` for version-2 metadata.
    pub min_interval: u64,
    pub metadata: SpeMetadataLayout,
    /// Converts SPE TIMESTAMP ticks to the perf times the sideband uses.
    pub time_conv: TimeConv,
    pub time_conv_layout: TimeConvLayout,
    /// The recorded workload's pid (ID_INDEX tid, -1 for system-wide).
    pub workload_pid: i32,
    pub hostname: String,
    pub os_release: String,
    /// HEADER_VERSION (the perf version string).
    pub perf_version: String,
    pub cpu_desc: String,
    pub cmdline: Vec<String>,
    /// HEADER_TOTAL_MEM in kB.
    pub total_mem_kb: u64,
}

impl Default for RecordingSpec {
    fn default() -> Self {
        RecordingSpec {
            pmu_type: 10,
            pmu_name: "arm_spe_0".into(),
            spe: SpeConfig {
                ts_enable: true,
                pa_enable: true,
                ..Default::default()
            },
            sample_period: 1024,
            cpus: vec![0],
            nr_cpus_available: 1,
            nr_cpus_online: 1,
            midr: spelunk_spe::CpuModel::NeoverseN1.midr(),
            min_interval: 1024,
            metadata: SpeMetadataLayout::V1,
            time_conv: TimeConv::from_frequency(1_000_000_000, 0),
            time_conv_layout: TimeConvLayout::Long,
            workload_pid: -1,
            hostname: "spelunk".into(),
            os_release: "6.1.0".into(),
            perf_version: "6.1.0".into(),
            cpu_desc: String::new(),
            cmdline: vec!["spelunk".into(), "record".into()],
            total_mem_kb: 0,
        }
    }
}

/// A process/thread pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Task {
    pub pid: i32,
    pub tid: i32,
}

impl Task {
    pub fn new(pid: i32, tid: i32) -> Task {
        Task { pid, tid }
    }
}

/// An MMAP2 record to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mmap2 {
    pub task: Task,
    pub address: u64,
    pub length: u64,
    pub page_offset: u64,
    /// Build id (at most 20 bytes) or inode numbers; `MmapFileId::None` writes zero inode info.
    pub file_id: MmapFileId,
    pub prot: u32,
    pub flags: u32,
    /// `PERF_RECORD_MISC_CPUMODE` (2 user, 1 kernel).
    pub cpu_mode: u16,
    pub executable: bool,
    pub path: String,
}

/// What the writer wrote, for tests and logs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteSummary {
    pub path: PathBuf,
    pub data_offset: u64,
    pub data_size: u64,
    pub aux_chunks: u64,
    pub aux_bytes: u64,
    pub sideband_records: u64,
}

/// Streams a perf.data to disk. Call the record methods in time order per CPU (perf's own
/// files are ordered within FINISHED_ROUND rounds), then [`SpeRecordingWriter::finish`].
pub struct SpeRecordingWriter {
    path: PathBuf,
    display: String,
    /// Written to a temporary file next to `path`, renamed over it by [`Self::finish`]: a
    /// failed or interrupted recording never leaves a half-written perf.data where one was.
    out: BufWriter<AtomicFile>,
    spec: RecordingSpec,
    attrs: [EventAttr; 2],
    pos: u64,
    data_offset: u64,
    aux_offsets: Vec<u64>,
    /// Each recorded CPU's index in `spec.cpus` (looked up for every record written).
    cpu_indices: std::collections::HashMap<u32, usize>,
    auxtrace_index: Vec<(u64, u64)>,
    first_time: Option<u64>,
    last_time: Option<u64>,
    records_since_round: u64,
    summary: WriteSummary,
    /// Where the data section ended when the tail (features, header) was first attempted.
    tail_start: Option<u64>,
    /// The data size once the tail is written.
    tail_done: Option<u64>,
    /// HEADER_BUILD_ID: the build-ids of the recorded files ([`Self::set_build_ids`]).
    build_ids: Vec<BuildIdEntry>,
    /// Files named by the MMAP2 records written (path, cpumode), for [`Self::mapped_files`].
    mapped: std::collections::BTreeSet<(String, u16)>,
}

const SPE: usize = 0;
const DUMMY: usize = 1;

/// Entries of one PERF_RECORD_ID_INDEX: a 16-byte head and 32 bytes per entry within the
/// 65535-byte record size.
const ID_INDEX_MAX_ENTRIES: usize = (u16::MAX as usize - 16) / 32;

/// `ALIGN(n, 8)`.
fn align8(n: usize) -> usize {
    (n + 7) & !7
}

/// A perf header string: u32 length (NUL included, padded to 64 as perf does), bytes, zeros.
fn header_string(out: &mut Vec<u8>, s: &str) {
    let len = (s.len() + 1).div_ceil(64) * 64;
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
    out.resize(out.len() + (len - s.len()), 0);
}

impl SpeRecordingWriter {
    /// Creates `path` and writes the attrs and the leading records (ID_INDEX, TIME_CONV,
    /// AUXTRACE_INFO).
    pub fn create(path: impl AsRef<Path>, spec: RecordingSpec) -> Result<Self, PerfError> {
        let path = path.as_ref().to_path_buf();
        let display = path.display().to_string();
        if spec.cpus.is_empty() {
            return Err(PerfError::Unwritable {
                path: display,
                what: "recording".into(),
                detail: "RecordingSpec.cpus is empty".into(),
            });
        }
        let file = AtomicFile::create(&path).map_err(|source| PerfError::Io {
            path: display.clone(),
            action: "create".into(),
            source,
        })?;
        let ncpu = spec.cpus.len() as u64;
        let mut sample_type =
            sample::IP | sample::TID | sample::TIME | sample::CPU | sample::IDENTIFIER;
        let tracking_sample_type = sample_type;
        sample_type |= sample::DATA_SRC;
        if spec.spe.pa_enable {
            sample_type |= sample::PHYS_ADDR;
        }
        let spe_attr = EventAttr {
            type_: spec.pmu_type,
            size: abi::attr::SIZE_PERF_6_1,
            config: spec.spe.config(),
            config1: spec.spe.config1(),
            config2: spec.spe.config2(),
            config3: None,
            sample_period_or_freq: spec.sample_period,
            sample_type,
            read_format: 4, // PERF_FORMAT_ID
            flags: attr_flag::DISABLED
                | attr_flag::INHERIT
                | attr_flag::ENABLE_ON_EXEC
                | attr_flag::SAMPLE_ID_ALL
                | attr_flag::EXCLUDE_GUEST,
            wakeup_events_or_watermark: 0,
            clockid: None,
            aux_watermark: Some(0),
            name: Some(format!("{}//", spec.pmu_name)),
            ids: (0..ncpu).map(|i| 100 + i).collect(),
        };
        let dummy_attr = EventAttr {
            type_: abi::event_type::SOFTWARE,
            size: abi::attr::SIZE_PERF_6_1,
            config: abi::event_type::SW_DUMMY,
            config1: 0,
            config2: 0,
            config3: None,
            sample_period_or_freq: 1,
            sample_type: tracking_sample_type,
            read_format: 4,
            flags: attr_flag::INHERIT
                | attr_flag::EXCLUDE_KERNEL
                | attr_flag::EXCLUDE_HV
                | attr_flag::MMAP
                | attr_flag::COMM
                | attr_flag::TASK
                | attr_flag::SAMPLE_ID_ALL
                | attr_flag::EXCLUDE_GUEST
                | attr_flag::MMAP2
                | attr_flag::COMM_EXEC
                | attr_flag::CONTEXT_SWITCH,
            wakeup_events_or_watermark: 0,
            clockid: None,
            aux_watermark: Some(0),
            name: Some("dummy:u".into()),
            ids: (0..ncpu).map(|i| 200 + i).collect(),
        };
        let mut w = SpeRecordingWriter {
            path: path.clone(),
            display,
            out: BufWriter::with_capacity(1 << 20, file),
            aux_offsets: vec![0; spec.cpus.len()],
            cpu_indices: spec
                .cpus
                .iter()
                .enumerate()
                .map(|(i, c)| (*c, i))
                .rev()
                .collect(),
            spec,
            attrs: [spe_attr, dummy_attr],
            pos: 0,
            data_offset: 0,
            auxtrace_index: Vec::new(),
            first_time: None,
            last_time: None,
            records_since_round: 0,
            summary: WriteSummary::default(),
            tail_start: None,
            tail_done: None,
            build_ids: Vec::new(),
            mapped: Default::default(),
        };
        w.write_prologue()?;
        Ok(w)
    }

    fn io_err(&self, action: &str, source: std::io::Error) -> PerfError {
        PerfError::Io {
            path: self.display.clone(),
            action: action.into(),
            source,
        }
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), PerfError> {
        self.out
            .write_all(bytes)
            .map_err(|e| self.io_err("write", e))?;
        self.pos += bytes.len() as u64;
        Ok(())
    }

    fn write_prologue(&mut self) -> Result<(), PerfError> {
        self.put(&[0u8; abi::header::SIZE as usize])?;
        // Id arrays, then the attrs section pointing at them.
        let mut id_sections = Vec::new();
        for a in 0..2 {
            let start = self.pos;
            let ids: Vec<u8> = self.attrs[a]
                .ids
                .iter()
                .flat_map(|i| i.to_le_bytes())
                .collect();
            self.put(&ids)?;
            id_sections.push((start, ids.len() as u64));
        }
        let attrs_offset = self.pos;
        for (a, (off, size)) in id_sections.iter().enumerate() {
            let mut b = self.attrs[a].to_bytes();
            b.extend_from_slice(&off.to_le_bytes());
            b.extend_from_slice(&size.to_le_bytes());
            self.put(&b)?;
        }
        self.data_offset = self.pos;
        // Remember the attrs section for the header.
        self.summary.data_offset = self.data_offset;
        let _ = attrs_offset;

        // ID_INDEX: {id, idx, cpu, tid} per event id.
        let mut entries = Vec::new();
        for a in 0..2 {
            for (i, id) in self.attrs[a].ids.iter().enumerate() {
                entries.push([
                    *id,
                    i as u64,
                    u64::from(self.spec.cpus[i]),
                    self.spec.workload_pid as i64 as u64,
                ]);
            }
        }
        // As many records as the 16-bit record size needs, as perf does
        // (perf_event__synthesize_id_index: a record holds at most 2047 entries).
        for part in entries.chunks(ID_INDEX_MAX_ENTRIES) {
            let mut rec = Vec::new();
            let size = 8 + 8 + 32 * part.len();
            push_header(&mut rec, abi::record::ID_INDEX, 0, size);
            rec.extend_from_slice(&(part.len() as u64).to_le_bytes());
            for e in part {
                for v in e {
                    rec.extend_from_slice(&v.to_le_bytes());
                }
            }
            self.put_record(&rec)?;
        }

        let tc = self.spec.time_conv.to_record(self.spec.time_conv_layout);
        self.put_record(&tc)?;

        let info = match self.spec.metadata {
            SpeMetadataLayout::V1 => SpeAuxtraceInfo::V1 {
                pmu_type: self.spec.pmu_type,
                per_cpu_mmaps: true,
            },
            SpeMetadataLayout::V2 => SpeAuxtraceInfo::V2 {
                pmu_type: self.spec.pmu_type,
                cpus: self
                    .spec
                    .cpus
                    .iter()
                    .map(|c| SpeCpuMetadata {
                        cpu: *c,
                        midr: self.spec.midr,
                        pmu_type: Some(self.spec.pmu_type),
                        min_interval: self.spec.min_interval,
                        event_filter: None,
                        extra: vec![],
                    })
                    .collect(),
            },
        };
        self.put_record(&info.to_record())?;
        Ok(())
    }

    fn put_record(&mut self, rec: &[u8]) -> Result<(), PerfError> {
        if rec.len() > u16::MAX as usize {
            return Err(PerfError::Unwritable {
                path: self.display.clone(),
                what: "record".into(),
                detail: format!("{} bytes exceed the 65535-byte record limit", rec.len()),
            });
        }
        self.records_since_round += 1;
        self.put(rec)
    }

    fn cpu_index(&self, cpu: u32) -> Result<usize, PerfError> {
        self.cpu_indices
            .get(&cpu)
            .copied()
            .ok_or_else(|| PerfError::Unwritable {
                path: self.display.clone(),
                what: "record".into(),
                detail: format!("CPU {cpu} is not in RecordingSpec.cpus"),
            })
    }

    /// sample_id trailer: pid, tid, time, cpu, res, identifier (32 bytes).
    fn sample_id(
        &mut self,
        rec: &mut Vec<u8>,
        event: usize,
        cpu: u32,
        task: Task,
        time_ns: u64,
    ) -> Result<(), PerfError> {
        let idx = self.cpu_index(cpu)?;
        rec.extend_from_slice(&task.pid.to_le_bytes());
        rec.extend_from_slice(&task.tid.to_le_bytes());
        rec.extend_from_slice(&time_ns.to_le_bytes());
        rec.extend_from_slice(&cpu.to_le_bytes());
        rec.extend_from_slice(&0u32.to_le_bytes());
        rec.extend_from_slice(&self.attrs[event].ids[idx].to_le_bytes());
        self.first_time = Some(self.first_time.map_or(time_ns, |t| t.min(time_ns)));
        self.last_time = Some(self.last_time.map_or(time_ns, |t| t.max(time_ns)));
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn sideband(
        &mut self,
        ty: u32,
        misc: u16,
        body: &[u8],
        event: usize,
        cpu: u32,
        task: Task,
        time_ns: u64,
    ) -> Result<(), PerfError> {
        let mut rec = Vec::with_capacity(8 + body.len() + 32);
        push_header(&mut rec, ty, misc, 0);
        rec.extend_from_slice(body);
        self.sample_id(&mut rec, event, cpu, task, time_ns)?;
        let size = rec.len() as u16;
        rec[6..8].copy_from_slice(&size.to_le_bytes());
        self.summary.sideband_records += 1;
        self.put_record(&rec)
    }

    /// PERF_RECORD_COMM for `task` (name truncated to the kernel's 15 characters + NUL).
    pub fn comm(
        &mut self,
        cpu: u32,
        time_ns: u64,
        task: Task,
        name: &str,
        exec: bool,
    ) -> Result<(), PerfError> {
        let mut body = Vec::new();
        body.extend_from_slice(&task.pid.to_le_bytes());
        body.extend_from_slice(&task.tid.to_le_bytes());
        let name: String = name.chars().take(15).collect();
        push_cstr(&mut body, &name);
        let misc = if exec { misc::COMM_EXEC } else { 0 };
        self.sideband(abi::record::COMM, misc, &body, DUMMY, cpu, task, time_ns)
    }

    /// PERF_RECORD_MMAP2.
    pub fn mmap2(&mut self, cpu: u32, time_ns: u64, m: &Mmap2) -> Result<(), PerfError> {
        let mut body = Vec::new();
        body.extend_from_slice(&m.task.pid.to_le_bytes());
        body.extend_from_slice(&m.task.tid.to_le_bytes());
        body.extend_from_slice(&m.address.to_le_bytes());
        body.extend_from_slice(&m.length.to_le_bytes());
        body.extend_from_slice(&m.page_offset.to_le_bytes());
        let mut misc = m.cpu_mode & misc::CPUMODE_MASK;
        match &m.file_id {
            MmapFileId::BuildId(id) => {
                if id.len() > 20 {
                    return Err(PerfError::Unwritable {
                        path: self.display.clone(),
                        what: "PERF_RECORD_MMAP2".into(),
                        detail: format!("build id of {} bytes (at most 20)", id.len()),
                    });
                }
                misc |= misc::MMAP_BUILD_ID;
                body.push(id.len() as u8);
                body.extend_from_slice(&[0, 0, 0]);
                let mut b = [0u8; 20];
                b[..id.len()].copy_from_slice(id);
                body.extend_from_slice(&b);
            }
            MmapFileId::Inode {
                maj,
                min,
                ino,
                ino_generation,
            } => {
                body.extend_from_slice(&maj.to_le_bytes());
                body.extend_from_slice(&min.to_le_bytes());
                body.extend_from_slice(&ino.to_le_bytes());
                body.extend_from_slice(&ino_generation.to_le_bytes());
            }
            MmapFileId::None => body.extend_from_slice(&[0u8; 24]),
        }
        if !m.executable {
            misc |= misc::MMAP_DATA;
        }
        body.extend_from_slice(&m.prot.to_le_bytes());
        body.extend_from_slice(&m.flags.to_le_bytes());
        push_cstr(&mut body, &m.path);
        if m.path.starts_with('/') && !self.mapped.contains(&(m.path.clone(), m.cpu_mode)) {
            self.mapped.insert((m.path.clone(), m.cpu_mode));
        }
        self.sideband(abi::record::MMAP2, misc, &body, DUMMY, cpu, m.task, time_ns)
    }

    fn task_event(
        &mut self,
        ty: u32,
        cpu: u32,
        time_ns: u64,
        task: Task,
        parent: Task,
    ) -> Result<(), PerfError> {
        let mut body = Vec::new();
        for v in [task.pid, parent.pid, task.tid, parent.tid] {
            body.extend_from_slice(&v.to_le_bytes());
        }
        body.extend_from_slice(&time_ns.to_le_bytes());
        self.sideband(ty, 0, &body, DUMMY, cpu, task, time_ns)
    }

    /// PERF_RECORD_FORK: `task` was created by `parent`.
    pub fn fork(
        &mut self,
        cpu: u32,
        time_ns: u64,
        task: Task,
        parent: Task,
    ) -> Result<(), PerfError> {
        self.task_event(abi::record::FORK, cpu, time_ns, task, parent)
    }

    /// PERF_RECORD_EXIT of `task` (`parent` as in the kernel's record: the parent process).
    pub fn exit(
        &mut self,
        cpu: u32,
        time_ns: u64,
        task: Task,
        parent: Task,
    ) -> Result<(), PerfError> {
        self.task_event(abi::record::EXIT, cpu, time_ns, task, parent)
    }

    /// PERF_RECORD_SWITCH_CPU_WIDE on `cpu`. For a switch-out, `task` leaves and `other` comes
    /// next; for a switch-in, `task` arrives and `other` ran before.
    pub fn switch(
        &mut self,
        cpu: u32,
        time_ns: u64,
        out: bool,
        preempted: bool,
        task: Task,
        other: Task,
    ) -> Result<(), PerfError> {
        let mut body = Vec::new();
        body.extend_from_slice(&other.pid.to_le_bytes());
        body.extend_from_slice(&other.tid.to_le_bytes());
        let mut m = 0;
        if out {
            m |= misc::SWITCH_OUT;
            if preempted {
                m |= misc::SWITCH_OUT_PREEMPT;
            }
        }
        self.sideband(
            abi::record::SWITCH_CPU_WIDE,
            m,
            &body,
            DUMMY,
            cpu,
            task,
            time_ns,
        )
    }

    /// PERF_RECORD_SWITCH (a per-task event's switch, no other task named) of `task` on
    /// `cpu`: a switch-in when `out` is false.
    pub fn switch_task(
        &mut self,
        cpu: u32,
        time_ns: u64,
        out: bool,
        preempted: bool,
        task: Task,
    ) -> Result<(), PerfError> {
        let mut m = 0;
        if out {
            m |= misc::SWITCH_OUT;
            if preempted {
                m |= misc::SWITCH_OUT_PREEMPT;
            }
        }
        self.sideband(abi::record::SWITCH, m, &[], DUMMY, cpu, task, time_ns)
    }

    /// PERF_RECORD_ITRACE_START (SPE event) for `task` on `cpu`.
    pub fn itrace_start(&mut self, cpu: u32, time_ns: u64, task: Task) -> Result<(), PerfError> {
        let mut body = Vec::new();
        body.extend_from_slice(&task.pid.to_le_bytes());
        body.extend_from_slice(&task.tid.to_le_bytes());
        self.sideband(abi::record::ITRACE_START, 0, &body, SPE, cpu, task, time_ns)
    }

    /// PERF_RECORD_LOST: `lost` ring-buffer records of the tracking event were dropped.
    pub fn lost(&mut self, cpu: u32, time_ns: u64, lost: u64) -> Result<(), PerfError> {
        let idx = self.cpu_index(cpu)?;
        let mut body = Vec::new();
        body.extend_from_slice(&self.attrs[DUMMY].ids[idx].to_le_bytes());
        body.extend_from_slice(&lost.to_le_bytes());
        self.sideband(
            abi::record::LOST,
            0,
            &body,
            DUMMY,
            cpu,
            Task::new(-1, -1),
            time_ns,
        )
    }

    /// PERF_RECORD_LOST_SAMPLES on the SPE event.
    pub fn lost_samples(&mut self, cpu: u32, time_ns: u64, lost: u64) -> Result<(), PerfError> {
        self.sideband(
            abi::record::LOST_SAMPLES,
            0,
            &lost.to_le_bytes(),
            SPE,
            cpu,
            Task::new(-1, -1),
            time_ns,
        )
    }

    /// One AUX buffer write of `cpu`: a PERF_RECORD_AUX (`aux_offset` = the CPU's running
    /// offset, `aux_size` = `bytes.len()`, `flags`, sample_id of `task` at `time_ns`), then a
    /// PERF_RECORD_AUXTRACE carrying `bytes` (idx = the CPU's index in `spec.cpus`, cpu, tid).
    /// `bytes` are SPE records whose TIMESTAMP packets use `spec.time_conv`'s timer. Without
    /// bytes (the kernel reports a loss with no data) only the PERF_RECORD_AUX is written.
    pub fn aux(
        &mut self,
        cpu: u32,
        task: Task,
        time_ns: u64,
        flags: AuxFlags,
        bytes: &[u8],
    ) -> Result<(), PerfError> {
        let idx = self.cpu_index(cpu)?;
        let offset = self.aux_offsets[idx];
        let len = bytes.len() as u64;
        let mut body = Vec::with_capacity(24);
        body.extend_from_slice(&offset.to_le_bytes());
        body.extend_from_slice(&len.to_le_bytes());
        body.extend_from_slice(&flags.0.to_le_bytes());
        self.sideband(abi::record::AUX, 0, &body, SPE, cpu, task, time_ns)?;
        self.summary.sideband_records -= 1;
        if bytes.is_empty() {
            return Ok(());
        }

        let padded = align8(bytes.len());
        let mut rec = Vec::with_capacity(abi::size::AUXTRACE);
        push_header(&mut rec, abi::record::AUXTRACE, 0, abi::size::AUXTRACE);
        rec.extend_from_slice(&(padded as u64).to_le_bytes());
        rec.extend_from_slice(&offset.to_le_bytes());
        rec.extend_from_slice(&time_ns.to_le_bytes()); // reference
        rec.extend_from_slice(&(idx as u32).to_le_bytes());
        rec.extend_from_slice(&(task.tid as u32).to_le_bytes());
        rec.extend_from_slice(&cpu.to_le_bytes());
        rec.extend_from_slice(&0u32.to_le_bytes());
        self.auxtrace_index
            .push((self.pos, abi::size::AUXTRACE as u64));
        self.put_record(&rec)?;
        self.put(bytes)?;
        self.put(&[0u8; 8][..padded - bytes.len()])?;
        self.aux_offsets[idx] = offset + len;
        self.summary.aux_chunks += 1;
        self.summary.aux_bytes += len;
        Ok(())
    }

    /// PERF_RECORD_FINISHED_ROUND: no record after this sorts before a record before it.
    pub fn finish_round(&mut self) -> Result<(), PerfError> {
        let mut rec = Vec::new();
        push_header(&mut rec, abi::record::FINISHED_ROUND, 0, 8);
        self.put(&rec)?;
        self.records_since_round = 0;
        Ok(())
    }

    /// The files (absolute paths) the MMAP2 records written so far name, each once, with their
    /// cpumode: the files whose build-ids [`Self::set_build_ids`] should list.
    pub fn mapped_files(&self) -> impl Iterator<Item = (&str, u16)> {
        self.mapped.iter().map(|(p, m)| (p.as_str(), *m))
    }

    /// The build-ids of the recorded files, written as HEADER_BUILD_ID (so `perf report` and
    /// `perf buildid-list` see them, and spelunk can tell a rebuilt file from the recorded
    /// one). The recorder reads them from the files it saw mapped; replaces earlier ones.
    pub fn set_build_ids(&mut self, entries: Vec<BuildIdEntry>) {
        self.build_ids = entries;
    }

    fn features(&self) -> Vec<(u32, Vec<u8>)> {
        let s = &self.spec;
        let mut f: Vec<(u32, Vec<u8>)> = Vec::new();
        if !self.build_ids.is_empty() {
            f.push((feature::BUILD_ID, header_section(&self.build_ids)));
        }
        let string = |v: &str| {
            let mut b = Vec::new();
            header_string(&mut b, v);
            b
        };
        f.push((feature::HOSTNAME, string(&s.hostname)));
        f.push((feature::OSRELEASE, string(&s.os_release)));
        f.push((feature::VERSION, string(&s.perf_version)));
        f.push((feature::ARCH, string("aarch64")));
        // perf writes nr_cpus_available first, then nr_cpus_online (its reader agrees; the
        // format document lists them the other way round).
        let mut nr = Vec::new();
        nr.extend_from_slice(&s.nr_cpus_available.to_le_bytes());
        nr.extend_from_slice(&s.nr_cpus_online.to_le_bytes());
        f.push((feature::NRCPUS, nr));
        f.push((feature::CPUDESC, string(&s.cpu_desc)));
        f.push((feature::CPUID, string(&cpuid_string(s.midr))));
        f.push((feature::TOTAL_MEM, s.total_mem_kb.to_le_bytes().to_vec()));
        let mut cmd = Vec::new();
        cmd.extend_from_slice(&(s.cmdline.len() as u32).to_le_bytes());
        for a in &s.cmdline {
            header_string(&mut cmd, a);
        }
        f.push((feature::CMDLINE, cmd));
        let mut ed = Vec::new();
        ed.extend_from_slice(&2u32.to_le_bytes());
        ed.extend_from_slice(&abi::attr::SIZE_PERF_6_1.to_le_bytes());
        for a in &self.attrs {
            ed.extend_from_slice(&a.to_bytes());
            ed.extend_from_slice(&(a.ids.len() as u32).to_le_bytes());
            header_string(&mut ed, a.name.as_deref().unwrap_or(""));
            for id in &a.ids {
                ed.extend_from_slice(&id.to_le_bytes());
            }
        }
        f.push((feature::EVENT_DESC, ed));
        // One NUMA node holding every CPU (perf c2c report needs NUMA_TOPOLOGY).
        let mut numa = Vec::new();
        numa.extend_from_slice(&1u32.to_le_bytes());
        numa.extend_from_slice(&0u32.to_le_bytes());
        numa.extend_from_slice(&s.total_mem_kb.to_le_bytes());
        numa.extend_from_slice(&s.total_mem_kb.to_le_bytes());
        header_string(&mut numa, &cpu_list(s.nr_cpus_available));
        f.push((feature::NUMA_TOPOLOGY, numa));
        // HEADER_MEM_TOPOLOGY (perf.data-file-format.txt): version 1, block_size_bytes, count,
        // then per node {node_id, size, bitmap {size, u64 words}}. One 2^48-byte block on
        // node 0 covers every physical address, so perf c2c finds a node for each sample.
        let mut mem = Vec::new();
        for v in [1u64, 1 << 48, 1, 0, 1, 1, 1] {
            mem.extend_from_slice(&v.to_le_bytes());
        }
        let mut pmu = Vec::new();
        pmu.extend_from_slice(&2u32.to_le_bytes());
        pmu.extend_from_slice(&abi::event_type::SOFTWARE.to_le_bytes());
        header_string(&mut pmu, "software");
        pmu.extend_from_slice(&s.pmu_type.to_le_bytes());
        header_string(&mut pmu, &s.pmu_name);
        f.push((feature::PMU_MAPPINGS, pmu));
        let mut idx = Vec::new();
        idx.extend_from_slice(&(self.auxtrace_index.len() as u64).to_le_bytes());
        for (off, sz) in &self.auxtrace_index {
            idx.extend_from_slice(&off.to_le_bytes());
            idx.extend_from_slice(&sz.to_le_bytes());
        }
        f.push((feature::AUXTRACE, idx));
        if let (Some(a), Some(b)) = (self.first_time, self.last_time) {
            let mut t = a.to_le_bytes().to_vec();
            t.extend_from_slice(&b.to_le_bytes());
            f.push((feature::SAMPLE_TIME, t));
        }
        f.push((feature::MEM_TOPOLOGY, mem));
        f
    }

    /// The file header for a data section of `data_size` bytes and feature bits `bits`.
    fn header(&self, data_size: u64, bits: [u64; 4]) -> Vec<u8> {
        let ids_size: u64 = self.attrs.iter().map(|a| 8 * a.ids.len() as u64).sum();
        let attr_entry = u64::from(abi::attr::SIZE_PERF_6_1) + abi::header::SECTION_SIZE;
        let attrs_offset = abi::header::SIZE + ids_size;
        let mut h = Vec::with_capacity(abi::header::SIZE as usize);
        h.extend_from_slice(&abi::header::MAGIC);
        h.extend_from_slice(&abi::header::SIZE.to_le_bytes());
        h.extend_from_slice(&attr_entry.to_le_bytes());
        h.extend_from_slice(&attrs_offset.to_le_bytes());
        h.extend_from_slice(&(2 * attr_entry).to_le_bytes());
        h.extend_from_slice(&self.data_offset.to_le_bytes());
        h.extend_from_slice(&data_size.to_le_bytes());
        h.extend_from_slice(&0u64.to_le_bytes());
        h.extend_from_slice(&0u64.to_le_bytes());
        for b in bits {
            h.extend_from_slice(&b.to_le_bytes());
        }
        h
    }

    /// Gives up after an error (a full disk): keeps what was written as `path` (which must not
    /// exist; the destination is left as it was). When everything written so far reached the
    /// disk and there is room for the feature sections, the file is complete up to the last
    /// record; otherwise its header says data size 0 and it has no feature sections, the way a
    /// killed `perf record` leaves its file, and readers scan the records up to the last whole
    /// one (spelunk reports that cut).
    pub fn keep_partial(mut self, path: &Path) -> Result<(), PerfError> {
        let display = path.display().to_string();
        let io = |action: &str, source: std::io::Error| PerfError::Io {
            path: display.clone(),
            action: action.into(),
            source,
        };
        let data_end = self.tail_start.unwrap_or(self.pos);
        let h = self.header(0, [0; 4]);
        let complete = self.tail_done.is_some()
            || (self.tail_start.is_none() && self.out.flush().is_ok() && self.end().is_ok());
        let (mut file, _unwritten) = self.out.into_parts();
        if !complete {
            let f = file.file();
            // Drop a half-written tail (shrinking needs no space), then the header.
            let len = f.metadata().map(|m| m.len()).unwrap_or(data_end);
            if len > data_end {
                let _ = f.set_len(data_end);
            }
            f.seek(SeekFrom::Start(0))
                .and_then(|_| f.write_all(&h))
                .map_err(|e| io("write the file header", e))?;
        }
        file.keep_as(path)
            .map_err(|e| io("keep the partial recording", e))
    }

    /// Writes the last round marker, the feature sections and the header (in place, at byte
    /// 0), and syncs: the file is complete but not yet in place ([`Self::finish`] renames it;
    /// after an error here [`Self::keep_partial`] can still keep the data). Idempotent.
    pub fn end(&mut self) -> Result<(), PerfError> {
        if self.tail_done.is_some() {
            return Ok(());
        }
        if self.tail_start.is_some() {
            return Err(PerfError::Unwritable {
                path: self.display.clone(),
                what: "the file's end".into(),
                detail: "an earlier attempt to write it failed".into(),
            });
        }
        self.tail_start = Some(self.pos);
        let data_size = self.write_tail()?;
        self.tail_done = Some(data_size);
        Ok(())
    }

    /// Writes everything buffered to the file (so an error such as a full disk shows now).
    pub fn flush(&mut self) -> Result<(), PerfError> {
        self.out.flush().map_err(|e| self.io_err("write", e))
    }

    fn write_tail(&mut self) -> Result<u64, PerfError> {
        if self.records_since_round > 0 {
            self.finish_round()?;
        }
        let data_size = self.pos - self.data_offset;
        let features = self.features();
        let table_size = features.len() as u64 * abi::header::SECTION_SIZE;
        let mut table = Vec::new();
        let mut bodies = Vec::new();
        let mut at = self.pos + table_size;
        let mut bits = [0u64; 4];
        for (bit, body) in &features {
            table.extend_from_slice(&at.to_le_bytes());
            table.extend_from_slice(&(body.len() as u64).to_le_bytes());
            at += body.len() as u64;
            bodies.extend_from_slice(body);
            bits[(*bit / 64) as usize] |= 1 << (*bit % 64);
        }
        self.put(&table)?;
        self.put(&bodies)?;
        let h = self.header(data_size, bits);
        self.out.flush().map_err(|e| self.io_err("write", e))?;
        let file = self.out.get_mut().file();
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.write_all(&h))
            .and_then(|_| file.sync_data())
            .map_err(|e| PerfError::Io {
                path: self.display.clone(),
                action: "write the file header".into(),
                source: e,
            })?;
        Ok(data_size)
    }

    /// Writes the last round marker, the feature sections and the header, and renames the file
    /// into place; returns a summary.
    pub fn finish(mut self) -> Result<WriteSummary, PerfError> {
        self.end()?;
        let data_size = self.tail_done.unwrap_or(0);
        let display = self.display.clone();
        let out = self.out.into_inner().map_err(|e| PerfError::Io {
            path: display.clone(),
            action: "write".into(),
            source: e.into_error(),
        })?;
        out.commit().map_err(|source| PerfError::Io {
            path: display,
            action: "rename the finished file into place".into(),
            source,
        })?;
        self.summary.path = self.path.clone();
        self.summary.data_size = data_size;
        Ok(self.summary)
    }
}

/// The HEADER_CPUID string perf's arm64 code writes: `0x%016lx` of the MIDR with Variant
/// \[23:20\] and Revision \[3:0\] cleared (perf up to at least 6.1 masks them).
pub fn cpuid_string(midr: Midr) -> String {
    format!("0x{:016x}", midr.0 & !0x00f0_000f)
}

fn cpu_list(n: u32) -> String {
    match n {
        0 | 1 => "0".into(),
        n => format!("0-{}", n - 1),
    }
}

fn push_header(rec: &mut Vec<u8>, ty: u32, misc: u16, size: usize) {
    rec.extend_from_slice(&ty.to_le_bytes());
    rec.extend_from_slice(&misc.to_le_bytes());
    rec.extend_from_slice(&(size as u16).to_le_bytes());
}

/// NUL-terminated string padded with NULs to a multiple of 8 bytes (as the kernel pads COMM
/// and MMAP file names).
fn push_cstr(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
    let n = align8(s.len() + 1) - s.len();
    out.resize(out.len() + n, 0);
}
