//! An emulator trace (emulator/FORMAT.md) turned into what a hardware recording would have
//! been: a standard perf.data (per-CPU AUX buffers of SPE records in the Neoverse N1 64-byte
//! layout, COMM/FORK/EXIT/MMAP2/ITRACE_START sideband, the SPE event's config) plus the
//! sidecar for what perf.data has no place for (phases, named objects, the counter timeline,
//! ground truth).
//!
//! Two streaming passes over the trace: the first reads everything but the samples (and counts
//! the samples per virtual core, so the perf.data can list its CPUs up front), the second
//! encodes the samples into AUX chunks and interleaves the sideband in time order. Memory is
//! bounded by the non-sample records and one AUX chunk per core.
//!
//! Times: trace timestamps count generic-timer ticks at `timer_hz`; perf times are
//! `TimeConv::from_frequency(timer_hz, 0)` of them (the TIME_CONV record says so), and the
//! sidecar uses the same perf nanoseconds, so sample times, sideband and phases share one clock.

use spelunk_emutrace::{
    events, Annotation, AnnotationKind, CounterDef, Mapping, Record, RunConfig, SnapshotReason,
    TraceError, TraceReader,
};
use spelunk_perf::sidecar::{
    Allocation, BlockTruth, CounterSnapshot as SidecarSnapshot, ExactAccesses, GroundTruth,
    NamedObject, ObjectTruth, Phase, Sidecar,
};
use spelunk_perf::{
    AuxFlags, Mmap2, MmapFileId, PerfError, RecordingSpec, SpeConfig, SpeRecordingWriter, Task,
    TimeConv,
};
use spelunk_spe::{Midr, RecordLayout};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// AUX bytes per chunk (per PERF_RECORD_AUXTRACE): 4096 records of 64 bytes.
const AUX_CHUNK_BYTES: usize = 256 * 1024;

/// Errors converting a trace; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error(transparent)]
    Perf(#[from] PerfError),
    #[error("{0}: the trace has no CONFIG record (not written by a complete emulator start)")]
    NoConfig(String),
    #[error("{0}: the trace holds no process (PROCESS record missing)")]
    NoProcess(String),
    #[error(transparent)]
    Sidecar(#[from] spelunk_perf::sidecar::SidecarError),
}

/// What a conversion wrote and what it noticed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Conversion {
    pub perf_data: PathBuf,
    pub sidecar: PathBuf,
    pub samples: u64,
    /// Samples per virtual core (the perf.data's CPUs).
    pub samples_per_cpu: BTreeMap<u32, u64>,
    pub threads: usize,
    pub mappings: usize,
    pub phases: usize,
    pub objects: usize,
    pub aux_bytes: u64,
    /// The emulator wrote its END record (a program killed hard, or a crashed tool, leaves none).
    pub complete: bool,
    /// The program's exit status as the emulator saw it.
    pub exit_status: Option<i32>,
    /// Samples the emulator says it wrote (END record), to compare with `samples`.
    pub samples_written: Option<u64>,
    /// Problems that did not stop the conversion (a truncated trace, unknown records).
    pub warnings: Vec<String>,
    /// Loads and stores among the samples (for [NMO paper eq. 1] accuracy).
    pub memory_samples: u64,
    /// The sampling interval the emulator applied, on average (jitter included), in operations.
    pub mean_interval: f64,
    /// Whether the interval was randomised (jitter).
    pub jitter: bool,
    /// The emulated pages: base page size and THP policy ("4 KiB pages, THP madvise (2 MiB)").
    pub pages: String,
}

/// The records of the first pass.
#[derive(Default)]
struct Scan {
    config: Option<RunConfig>,
    pid: Option<u32>,
    argv: Vec<String>,
    threads: Vec<spelunk_emutrace::ThreadStart>,
    names: Vec<spelunk_emutrace::ThreadName>,
    exits: Vec<spelunk_emutrace::ThreadExit>,
    mappings: Vec<Mapping>,
    schema: Option<Arc<[CounterDef]>>,
    annotations: Vec<Annotation>,
    snapshots: Vec<spelunk_emutrace::CounterSnapshot>,
    truths: Vec<spelunk_emutrace::ObjectTruth>,
    allocs: Vec<spelunk_emutrace::Alloc>,
    frees: Vec<spelunk_emutrace::Free>,
    blocks: Vec<spelunk_emutrace::BlockTruth>,
    end: Option<spelunk_emutrace::EndInfo>,
    samples_per_core: BTreeMap<u32, u64>,
    first_sample_tick: Option<u64>,
    unknown: u64,
    /// Where the trace stopped being readable (the error), when it did.
    truncated: Option<TraceError>,
    /// Records read before that point (the second pass stops at the same place).
    records: u64,
}

fn scan(trace: &Path) -> Result<Scan, ConvertError> {
    let mut r = TraceReader::open(trace)?;
    let mut s = Scan::default();
    loop {
        let rec = match r.next_record() {
            Ok(Some(rec)) => rec,
            Ok(None) => break,
            Err(e) => {
                s.truncated = Some(e);
                break;
            }
        };
        s.records += 1;
        match rec {
            Record::Config(c) => s.config = Some(*c),
            Record::Process(p) => {
                s.pid = Some(p.pid);
                s.argv = p.argv;
            }
            Record::ThreadStart(t) => s.threads.push(t),
            Record::ThreadName(n) => s.names.push(n),
            Record::ThreadExit(x) => s.exits.push(x),
            Record::Mmap(m) => s.mappings.push(m),
            Record::Munmap(_) => {}
            Record::CounterSchema(schema) => s.schema = Some(schema),
            Record::Sample(smp) => {
                *s.samples_per_core.entry(u32::from(smp.core)).or_default() += 1;
                let t = smp.timestamp();
                s.first_sample_tick = Some(s.first_sample_tick.map_or(t, |f| f.min(t)));
            }
            Record::Annotation(a) => s.annotations.push(a),
            Record::Counters(c) => s.snapshots.push(c),
            Record::ObjectTruth(o) => s.truths.push(o),
            Record::End(e) => s.end = Some(e),
            Record::Alloc(a) => s.allocs.push(a),
            Record::Free(f) => s.frees.push(f),
            Record::BlockTruth(b) => s.blocks.push(b),
            Record::Unknown { .. } => s.unknown += 1,
        }
    }
    Ok(s)
}

/// A sideband record to write, in time order.
enum Side {
    Comm {
        task: Task,
        name: String,
        exec: bool,
    },
    Fork {
        task: Task,
        parent: Task,
    },
    Exit {
        task: Task,
        parent: Task,
    },
    Mmap(Mmap2),
    ItraceStart(Task),
}

/// Converts `trace` into `perf_data` and its sidecar. `command_line` is recorded as the
/// perf.data's HEADER_CMDLINE (the spelunk command that made it).
pub fn convert(
    trace: &Path,
    perf_data: &Path,
    command_line: &[String],
) -> Result<Conversion, ConvertError> {
    let name = trace.display().to_string();
    let s = scan(trace)?;
    let config = s
        .config
        .clone()
        .ok_or_else(|| ConvertError::NoConfig(name.clone()))?;
    let pid = s.pid.ok_or_else(|| ConvertError::NoProcess(name.clone()))?;
    let tc = TimeConv::from_frequency(config.timer_hz.max(1), 0);
    let ns = |ticks: u64| tc.tsc_to_perf_time(ticks);

    let mut out = Conversion {
        perf_data: perf_data.to_path_buf(),
        sidecar: Sidecar::path_for(perf_data),
        complete: s.end.is_some(),
        ..Default::default()
    };
    if let Some(e) = &s.truncated {
        out.warnings.push(format!(
            "the trace is damaged or incomplete ({e}); converted the {} records before it",
            s.records
        ));
    } else if s.end.is_none() {
        out.warnings.push(format!(
            "{name}: the trace has no END record: the emulator did not finish (the program was \
             killed, or the tool failed); converted what it wrote"
        ));
    }
    if s.unknown > 0 {
        out.warnings.push(format!(
            "{name}: skipped {} records of types this spelunk does not know (a newer emulator?)",
            s.unknown
        ));
    }

    // CPUs: the virtual cores threads ran on and samples came from.
    let mut cores: BTreeSet<u32> = s.samples_per_core.keys().copied().collect();
    cores.extend(s.threads.iter().map(|t| u32::from(t.core)));
    if cores.is_empty() {
        cores.insert(0);
    }
    let cpus: Vec<u32> = cores.iter().copied().collect();
    let max_cpu = *cores.iter().next_back().unwrap_or(&0);
    let core_of: HashMap<u32, u32> = s
        .threads
        .iter()
        .map(|t| (t.tid, u32::from(t.core)))
        .collect();
    let first_cpu = cpus[0];
    let cpu_of = |tid: u32| core_of.get(&tid).copied().unwrap_or(first_cpu);

    let filters = config.spe_type_filter;
    let spec = RecordingSpec {
        spe: SpeConfig {
            ts_enable: config.spe_flags & spelunk_emutrace::format::spe_flags::TIMESTAMPS != 0,
            pa_enable: config.spe_flags & spelunk_emutrace::format::spe_flags::PHYSICAL_ADDRESSES
                != 0,
            jitter: config.jitter(),
            load_filter: filters & spelunk_emutrace::format::type_filter::LOAD != 0,
            store_filter: filters & spelunk_emutrace::format::type_filter::STORE != 0,
            branch_filter: filters & spelunk_emutrace::format::type_filter::BRANCH != 0,
            event_filter: config.spe_event_filter,
            min_latency: config.spe_min_latency.min(0xfff) as u16,
            ..Default::default()
        },
        sample_period: u64::from(config.spe_interval),
        cpus: cpus.clone(),
        nr_cpus_available: max_cpu + 1,
        nr_cpus_online: max_cpu + 1,
        midr: Midr(config.midr),
        metadata: Default::default(),
        time_conv: tc,
        workload_pid: pid as i32,
        hostname: hostname(),
        os_release: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        perf_version: format!("spelunk {} emulator", env!("CARGO_PKG_VERSION")),
        cpu_desc: emulated_cpu_desc(&config),
        cmdline: command_line.to_vec(),
        total_mem_kb: total_mem_kb(),
        ..Default::default()
    };

    // Sideband, in time order (a stable sort keeps the trace's order for equal times).
    let comm = s
        .argv
        .first()
        .map(|a| a.rsplit('/').next().unwrap_or(a).to_string())
        .unwrap_or_else(|| "program".into());
    let start_tick = s
        .threads
        .iter()
        .map(|t| t.timestamp)
        .chain(s.mappings.iter().map(|m| m.timestamp))
        .min()
        .unwrap_or(0);
    let p = pid as i32;
    let mut side: Vec<(u64, u32, Side)> = vec![(
        ns(start_tick),
        cpu_of(pid),
        Side::Comm {
            task: Task::new(p, p),
            name: comm.clone(),
            exec: true,
        },
    )];
    for t in &s.threads {
        let task = Task::new(t.pid as i32, t.tid as i32);
        let at = ns(t.timestamp);
        if t.tid != t.pid {
            let parent = if t.parent_tid == 0 {
                t.pid
            } else {
                t.parent_tid
            };
            side.push((
                at,
                u32::from(t.core),
                Side::Fork {
                    task,
                    parent: Task::new(t.pid as i32, parent as i32),
                },
            ));
            side.push((
                at,
                u32::from(t.core),
                Side::Comm {
                    task,
                    name: comm.clone(),
                    exec: false,
                },
            ));
        }
        side.push((at, u32::from(t.core), Side::ItraceStart(task)));
    }
    for n in &s.names {
        side.push((
            ns(n.timestamp),
            cpu_of(n.tid),
            Side::Comm {
                task: Task::new(p, n.tid as i32),
                name: n.name.clone(),
                exec: false,
            },
        ));
    }
    for x in &s.exits {
        side.push((
            ns(x.timestamp),
            u32::from(x.core),
            Side::Exit {
                task: Task::new(p, x.tid as i32),
                parent: Task::new(p, p),
            },
        ));
    }
    for m in &s.mappings {
        side.push((ns(m.timestamp), cpu_of(m.tid), Side::Mmap(mmap2(m))));
    }
    side.sort_by_key(|(t, _, _)| *t);

    // Second pass: samples into per-CPU AUX chunks, sideband interleaved by time.
    let mut w = SpeRecordingWriter::create(perf_data, spec)?;
    let mut pending = side.into_iter().peekable();
    let mut write_side_until = |w: &mut SpeRecordingWriter, until: u64| -> Result<(), PerfError> {
        while let Some((t, _, _)) = pending.peek() {
            if *t > until {
                break;
            }
            let Some((t, cpu, rec)) = pending.next() else {
                break;
            };
            match rec {
                Side::Comm { task, name, exec } => w.comm(cpu, t, task, &name, exec)?,
                Side::Fork { task, parent } => w.fork(cpu, t, task, parent)?,
                Side::Exit { task, parent } => w.exit(cpu, t, task, parent)?,
                Side::Mmap(m) => w.mmap2(cpu, t, &m)?,
                Side::ItraceStart(task) => w.itrace_start(cpu, t, task)?,
            }
        }
        Ok(())
    };
    struct Chunk {
        bytes: Vec<u8>,
        last_time_ns: u64,
        last_tid: u32,
    }
    // One AUX buffer write of `cpu`, stamped with its last sample's time and thread.
    let flush = |w: &mut SpeRecordingWriter, cpu: u32, c: &mut Chunk| -> Result<u64, PerfError> {
        if c.bytes.is_empty() {
            return Ok(0);
        }
        w.aux(
            cpu,
            Task::new(p, c.last_tid as i32),
            c.last_time_ns,
            AuxFlags(0),
            &c.bytes,
        )?;
        let n = c.bytes.len() as u64;
        c.bytes.clear();
        Ok(n)
    };
    let mut chunks: BTreeMap<u32, Chunk> = BTreeMap::new();
    let mut r = TraceReader::open(trace)?;
    let mut records = 0u64;
    while records < s.records {
        let Ok(Some(rec)) = r.next_record() else {
            break;
        };
        records += 1;
        let Record::Sample(smp) = rec else { continue };
        let cpu = u32::from(smp.core);
        let c = chunks.entry(cpu).or_insert_with(|| Chunk {
            bytes: Vec::with_capacity(AUX_CHUNK_BYTES + 64),
            last_time_ns: 0,
            last_tid: smp.tid,
        });
        smp.record.encode(RecordLayout::N1Padded64, &mut c.bytes);
        c.last_time_ns = c.last_time_ns.max(ns(smp.timestamp()));
        c.last_tid = smp.tid;
        out.samples += 1;
        *out.samples_per_cpu.entry(cpu).or_default() += 1;
        if smp.is_load() || smp.is_store() {
            out.memory_samples += 1;
        }
        if c.bytes.len() >= AUX_CHUNK_BYTES {
            write_side_until(&mut w, c.last_time_ns)?;
            out.aux_bytes += flush(&mut w, cpu, c)?;
        }
    }
    write_side_until(&mut w, u64::MAX)?;
    for (cpu, c) in chunks.iter_mut() {
        out.aux_bytes += flush(&mut w, *cpu, c)?;
    }
    crate::buildids::attach(&mut w, &mut out.warnings);
    w.finish()?;

    let sidecar = build_sidecar(&s, &config, pid, &ns);
    out.threads = s.threads.len();
    out.mappings = s.mappings.len();
    out.phases = sidecar.phases.len();
    out.objects = sidecar.objects.len();
    out.exit_status = sidecar.exit_status;
    out.samples_written = s.end.map(|e| e.samples_written);
    out.mean_interval = config.actual_interval();
    out.jitter = config.jitter();
    out.pages = config.pages_description();
    if let Some(n) = out.samples_written {
        if n != out.samples && s.truncated.is_none() {
            out.warnings.push(format!(
                "{name}: the emulator says it wrote {n} samples, the trace holds {}",
                out.samples
            ));
        }
    }
    sidecar.write(&out.sidecar)?;
    Ok(out)
}

fn mmap2(m: &Mapping) -> Mmap2 {
    let path = match &m.path {
        Some(p) => p.clone(),
        None => "//anon".to_string(),
    };
    let prot =
        u32::from(m.readable) | (u32::from(m.writable) << 1) | (u32::from(m.executable) << 2);
    Mmap2 {
        task: Task::new(m.pid as i32, m.tid as i32),
        address: m.addr,
        length: m.len,
        page_offset: m.file_offset,
        file_id: MmapFileId::None,
        prot,
        flags: 2,    // MAP_PRIVATE
        cpu_mode: 2, // PERF_RECORD_MISC_USER
        executable: m.executable,
        path,
    }
}

fn reason_name(r: SnapshotReason) -> String {
    match r {
        SnapshotReason::Periodic => "periodic".into(),
        SnapshotReason::Annotation => "annotation".into(),
        SnapshotReason::ThreadExit => "thread-exit".into(),
        SnapshotReason::Final => "final".into(),
        SnapshotReason::ThreadStart => "thread-start".into(),
        SnapshotReason::Other(v) => format!("reason-{v}"),
    }
}

/// The perf.data's CPU description: the emulated core, the platform preset when the run had
/// one, and that spelunk emulated it, e.g. "Neoverse V1 (emulated by spelunk, platform
/// graviton3)".
fn emulated_cpu_desc(config: &RunConfig) -> String {
    match &config.platform {
        Some(p) => format!("{} (emulated by spelunk, platform {p})", config.cpu_name),
        None => format!("{} (emulated by spelunk)", config.cpu_name),
    }
}

/// Phases, objects, counters and truth from the first pass.
fn build_sidecar(s: &Scan, config: &RunConfig, pid: u32, ns: &dyn Fn(u64) -> u64) -> Sidecar {
    let mut sc = Sidecar::new("emulator");
    sc.command = s.argv.clone();
    sc.exit_status = s
        .end
        .filter(|e| e.exit_status_known())
        .map(|e| e.exit_status as i32);
    let end_tick = s.end.map(|e| e.end_timestamp).unwrap_or_else(|| {
        s.annotations
            .iter()
            .map(|a| a.timestamp)
            .chain(s.snapshots.iter().map(|c| c.timestamp))
            .max()
            .unwrap_or(0)
    });
    let cfg = |k: &str, v: serde_json::Value| (k.to_string(), v);
    sc.config = [
        cfg("cpu_name", config.cpu_name.clone().into()),
        cfg("midr", format!("{:#x}", config.midr).into()),
        cfg("cpu_hz", config.cpu_hz.into()),
        cfg("timer_hz", config.timer_hz.into()),
        cfg("spe_interval", config.spe_interval.into()),
        cfg(
            "spe_mean_interval",
            serde_json::json!(config.actual_interval()),
        ),
        cfg("spe_jitter", config.jitter().into()),
        cfg(
            "spe_collisions_modelled",
            config.collisions_modelled().into(),
        ),
        cfg("spe_type_filter", config.spe_type_filter.into()),
        cfg("spe_min_latency", config.spe_min_latency.into()),
        cfg("spe_counter_bits", config.spe_counter_bits.into()),
        cfg("cache_line_bytes", config.cache_line_bytes.into()),
        cfg("page_bytes", config.page_bytes().into()),
        cfg("pages", config.pages_description().into()),
        cfg("l1d_bytes", config.l1d_bytes.into()),
        cfg("l1d_latency_cycles", config.l1d_latency_cycles.into()),
        cfg("l2_bytes", config.l2_bytes.into()),
        cfg("l2_latency_cycles", config.l2_latency_cycles.into()),
        cfg("slc_bytes", config.slc_bytes.into()),
        cfg("slc_latency_cycles", config.slc_latency_cycles.into()),
        cfg("dram_latency_cycles", config.dram_latency_cycles.into()),
        cfg("peer_latency_cycles", config.peer_latency_cycles.into()),
        cfg("walk_latency_cycles", config.walk_latency_cycles.into()),
        cfg("tool_version", config.tool_version.clone().into()),
        cfg("host_arch", config.host_arch.clone().into()),
    ]
    .into_iter()
    .chain(
        config
            .platform
            .as_ref()
            .map(|p| cfg("platform", p.clone().into())),
    )
    .chain(config.thp.map(|t| cfg("thp", t.name().into())))
    .chain(
        config
            .huge_page_bytes()
            .map(|b| cfg("huge_page_bytes", b.into())),
    )
    .collect();

    // Phases: begin/end pairs per thread; a phase still open at the end ends with the run.
    let mut open: HashMap<u32, Vec<(String, u16, u64)>> = HashMap::new();
    for a in &s.annotations {
        match a.kind {
            AnnotationKind::PhaseBegin => {
                open.entry(a.tid)
                    .or_default()
                    .push((a.name.clone(), a.depth, a.timestamp))
            }
            AnnotationKind::PhaseEnd => {
                if let Some((name, depth, start)) = open.get_mut(&a.tid).and_then(|v| v.pop()) {
                    sc.phases.push(Phase {
                        name,
                        pid: Some(pid),
                        tid: a.tid,
                        depth,
                        start_ns: ns(start),
                        end_ns: ns(a.timestamp),
                    });
                }
            }
            AnnotationKind::Object | AnnotationKind::TagMapping => sc.objects.push(NamedObject {
                name: a.name.clone(),
                pid: Some(pid),
                address: a.addr,
                size: a.size,
                from_ns: ns(a.timestamp),
                until_ns: u64::MAX,
                kind: if a.kind == AnnotationKind::Object {
                    "object".into()
                } else {
                    "mapping".into()
                },
            }),
            AnnotationKind::ObjectFree => {
                if let Some(o) = sc
                    .objects
                    .iter_mut()
                    .rev()
                    .find(|o| o.address == a.addr && o.until_ns == u64::MAX)
                {
                    o.until_ns = ns(a.timestamp);
                }
            }
            AnnotationKind::Other(_) => {}
        }
    }
    for (tid, stack) in open {
        for (name, depth, start) in stack {
            sc.phases.push(Phase {
                name,
                pid: Some(pid),
                tid,
                depth,
                start_ns: ns(start),
                end_ns: ns(end_tick),
            });
        }
    }
    sc.phases.sort_by_key(|p| (p.start_ns, p.tid, p.depth));

    // Counters: PMU events in the timeline and totals; ground-truth codes go to `truth`.
    let mut truth = GroundTruth::default();
    if let Some(schema) = &s.schema {
        let pmu_cols: Vec<usize> = (0..schema.len())
            .filter(|&i| !events::is_truth(schema[i].code))
            .collect();
        sc.counters.events = pmu_cols
            .iter()
            .map(|&i| (schema[i].code, schema[i].name.clone()))
            .collect();
        for c in &s.snapshots {
            sc.counters.timeline.push(SidecarSnapshot {
                tid: c.tid,
                cpu: Some(u32::from(c.core)),
                time_ns: ns(c.timestamp),
                reason: reason_name(c.reason),
                values: pmu_cols
                    .iter()
                    .map(|&i| c.values.get(i).copied().unwrap_or(0))
                    .collect(),
                ..Default::default()
            });
            if c.reason == SnapshotReason::Final {
                for (i, d) in schema.iter().enumerate() {
                    let v = c.values.get(i).copied().unwrap_or(0);
                    let map = if events::is_truth(d.code) {
                        &mut truth.totals
                    } else {
                        &mut sc.counters.totals
                    };
                    *map.entry(d.name.clone()).or_default() += v;
                }
            }
        }
    }
    truth.objects = s
        .truths
        .iter()
        .map(|o| ObjectTruth {
            name: o.name.clone(),
            address: o.addr,
            size: o.size,
            accesses: exact(o.accesses),
        })
        .collect();
    heap_blocks(s, pid, ns, &mut sc, &mut truth);
    if let Some(e) = s.end {
        truth
            .totals
            .insert("SAMPLES_WRITTEN".into(), e.samples_written);
        truth
            .totals
            .insert("END_TIME_NS".into(), ns(e.end_timestamp));
    }
    if let Some(t) = s.first_sample_tick {
        truth.totals.insert("FIRST_SAMPLE_TIME_NS".into(), ns(t));
    }
    sc.truth = Some(truth);
    sc
}

/// The heap blocks the emulator logged (ALLOC/FREE), with the exact accesses of each
/// (BLOCK_TRUTH): the same `allocations` the LD_PRELOAD runtime's logs give on hardware.
fn heap_blocks(
    s: &Scan,
    pid: u32,
    ns: &dyn Fn(u64) -> u64,
    sc: &mut Sidecar,
    truth: &mut GroundTruth,
) {
    let ended: HashMap<u64, u64> = s.frees.iter().map(|f| (f.id, f.timestamp)).collect();
    let mut start_of: HashMap<u64, (u64, u64)> = HashMap::with_capacity(s.allocs.len());
    sc.allocations = s
        .allocs
        .iter()
        .map(|a| {
            let from_ns = ns(a.timestamp);
            start_of.insert(a.id, (a.addr, from_ns));
            Allocation {
                pid,
                tid: a.tid,
                address: a.addr,
                size: a.size,
                from_ns,
                // a block the trace never ends lives to the end of the run
                until_ns: ended.get(&a.id).map_or(u64::MAX, |&t| ns(t).max(from_ns)),
                kind: a.kind.name().into(),
                stack: a.stack.clone(),
            }
        })
        .collect();
    truth.blocks = s
        .blocks
        .iter()
        .filter_map(|b| {
            let &(address, from_ns) = start_of.get(&b.id)?;
            Some(BlockTruth {
                address,
                from_ns,
                size: b.size,
                accesses: exact(b.accesses),
            })
        })
        .collect();
}

fn exact(a: spelunk_emutrace::ExactAccesses) -> ExactAccesses {
    ExactAccesses {
        loads: a.loads,
        stores: a.stores,
        load_bytes: a.load_bytes,
        store_bytes: a.store_bytes,
        l1d_misses: a.l1d_misses,
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

fn total_mem_kb() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}
