//! Indexes a perf.data in one pass with bounded memory.
//!
//! # Why the data section is walked here and not with linux-perf-data's record iterator
//!
//! linux-perf-data's `PerfRecordIter` sorts records by time: it buffers whole
//! FINISHED_ROUND rounds and copies every PERF_RECORD_AUXTRACE payload into memory. A 10 GB
//! SPE recording is almost entirely AUX payload, so that would cost gigabytes of memory and
//! copying before the first byte is decoded. Instead this module reads each 8-byte
//! `perf_event_header`, keeps only the *location* of AUX payloads (an AUXTRACE payload follows
//! its 48-byte record and is not counted in `header.size`), and hands the bytes of every other
//! record (at most 64 KiB each) to linux-perf-event-reader's parser. Memory is proportional to
//! the number of sideband records and AUX chunks, never to the AUX data. The AUX bytes are read
//! later, chunk by chunk, with positional reads ([`PerfDataFile::read_chunk`]), so per-CPU
//! streams can be decoded on several threads from one `&PerfDataFile`.
//!
//! The container (file header, attrs, feature sections, EVENT_DESC names) goes through
//! linux-perf-data, but only after this module has checked every offset and count it will
//! follow: the crate allocates what the file says (`vec![0; section.size]`,
//! `Vec::with_capacity(nr)`), which on a corrupt file would abort the process. It sees a
//! sanitized view (`OverlayCursor`): a header whose feature table lists only the sections that
//! passed the checks. Records the crate leaves raw or does not know (AUXTRACE_INFO, AUXTRACE,
//! TIME_CONV, AUX, ITRACE_START, LOST_SAMPLES, AUXTRACE_ERROR) are parsed here from their
//! documented layouts.

use crate::bytes::{u32_at, u64_at};
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use linux_perf_data::linux_perf_event_reader::{
    CommOrExecRecord, ContextSwitchRecord, EventRecord, ForkOrExitRecord, LostRecord, Mmap2FileId,
    Mmap2Record, MmapRecord, RawData, RawEventRecord, RecordParseInfo, RecordType,
};
use linux_perf_data::{AttributeDescription, PerfFileReader};
use spelunk_spe::Midr;

use crate::abi::{self, feature, record as rt};
use crate::attr::EventAttr;
use crate::auxinfo::{self, AuxInfoError, SpeAuxtraceInfo};
use crate::error::PerfError;
use crate::records::*;
use crate::source::{BufferedCursor, FileSource, MemorySource, OverlayCursor, ReadAt};
use crate::timeconv::{TimeConv, TimeConvLayout};

/// How many [`Problem`]s are kept (all are counted in [`IndexSummary::problem_count`]).
pub const MAX_KEPT_PROBLEMS: usize = 64;
/// Feature sections larger than this are ignored (no sane feature is near it).
const MAX_FEATURE_SECTION: u64 = 256 << 20;
/// All feature sections together (linux-perf-data reads them all into memory).
const MAX_FEATURE_TOTAL: u64 = 1 << 30;
/// Event ids per attr accepted from the attrs section.
const MAX_IDS_PER_ATTR: u64 = 1 << 20;

/// What kind of problem indexing met.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProblemKind {
    /// The header's data size is 0: perf was killed before it finished the file. The data
    /// section was scanned to the end of the file; there are no feature sections.
    DataSizeZero,
    /// The header's data section extends past the end of the file (the file was cut).
    DataBeyondEof,
    /// A record (or an AUXTRACE payload) is cut off by the end of the data.
    RecordCutOff,
    /// A record's fields are inconsistent; it was skipped (or, if its size is unusable,
    /// indexing stopped there).
    MalformedRecord,
    /// A feature section or the feature table is unusable; the feature was ignored.
    FeatureSection,
    /// Compressed records (`perf record -z`): their sideband is not indexed.
    Compressed,
    /// AUXTRACE records of one `idx` disagree about their CPU or thread.
    InconsistentAuxStream,
}

/// One problem met while indexing, with its location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub kind: ProblemKind,
    /// File offset the problem refers to.
    pub offset: u64,
    /// One line, e.g. `truncated PERF_RECORD_AUXTRACE at byte 123: header says 4194304 payload
    /// bytes, file ends after 1000`.
    pub message: String,
}

/// Records of a type this crate does not know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownRecords {
    pub count: u64,
    pub first_offset: u64,
}

/// What indexing saw: record counts and problems. Indexing keeps everything decoded before a
/// problem, so a damaged file still yields its good part.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexSummary {
    /// Where the data section starts and where the walk stopped.
    pub data_offset: u64,
    pub data_end: u64,
    /// The data size the header claims (0 when perf did not finish the file).
    pub header_data_size: u64,
    /// True when the walk stopped before the end of the data section.
    pub stopped_early: bool,
    /// Records per `PERF_RECORD_*` type.
    pub record_counts: BTreeMap<u32, u64>,
    /// Record types this crate does not know, counted.
    pub unknown_records: BTreeMap<u32, UnknownRecords>,
    /// The first [`MAX_KEPT_PROBLEMS`] problems.
    pub problems: Vec<Problem>,
    pub problem_count: u64,
}

impl IndexSummary {
    /// True when the file was read completely without problems.
    pub fn is_clean(&self) -> bool {
        self.problem_count == 0 && self.unknown_records.is_empty()
    }
    /// Records of `ty` seen.
    pub fn count(&self, ty: u32) -> u64 {
        self.record_counts.get(&ty).copied().unwrap_or(0)
    }
}

/// Values of the header feature sections spelunk uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeaderFeatures {
    /// Feature bits set in the file header (including ones this crate ignored).
    pub present: Vec<u32>,
    pub hostname: Option<String>,
    pub os_release: Option<String>,
    /// The perf version that wrote the file (HEADER_VERSION).
    pub perf_version: Option<String>,
    /// `uname -m` of the recording machine (`aarch64`).
    pub arch: Option<String>,
    pub nr_cpus_online: Option<u32>,
    pub nr_cpus_available: Option<u32>,
    pub cpu_desc: Option<String>,
    /// HEADER_CPUID as stored (`0x00000000410fd0c0` on arm64, `GenuineIntel,6,167,1` on x86).
    pub cpuid: Option<String>,
    pub cmdline: Option<Vec<String>>,
    pub total_mem_kb: Option<u64>,
    /// HEADER_AUXTRACE: (file offset, size) of each AUXTRACE record perf indexed.
    pub auxtrace_index: Option<Vec<(u64, u64)>>,
    /// HEADER_SAMPLE_TIME: first and last sample time (ns).
    pub sample_time: Option<(u64, u64)>,
    /// HEADER_BUILD_ID: the build-id each recorded file had (empty without the section).
    pub build_ids: Vec<crate::buildid::BuildIdEntry>,
}

impl HeaderFeatures {
    /// The MIDR in HEADER_CPUID, when the file comes from arm64 (perf writes
    /// `0x%016lx` of MIDR_EL1, with variant and revision cleared by perf up to at least 6.1).
    pub fn midr(&self) -> Option<Midr> {
        let s = self.cpuid.as_deref()?.trim();
        let hex = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
        u64::from_str_radix(hex, 16).ok().map(Midr)
    }
}

/// The raw AUXTRACE_INFO record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuxtraceInfoRecord {
    pub offset: u64,
    /// perf's `enum auxtrace_type` (4 = Arm SPE).
    pub auxtrace_type: u32,
    pub priv_: Vec<u64>,
}

/// The sideband records, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sideband {
    pub comms: Vec<Comm>,
    pub mmaps: Vec<Mmap>,
    pub tasks: Vec<TaskEvent>,
    pub switches: Vec<ContextSwitch>,
    pub itrace_starts: Vec<ItraceStart>,
    pub lost: Vec<Lost>,
    pub lost_samples: Vec<LostSamples>,
    pub aux: Vec<AuxRecord>,
    pub auxtrace_errors: Vec<AuxtraceError>,
}

/// One PERF_RECORD_AUXTRACE payload: a piece of one AUX buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AuxChunk {
    /// File offset of the AUXTRACE record header.
    pub record_offset: u64,
    /// File offset of the payload.
    pub file_offset: u64,
    /// Payload bytes in the file (perf pads payloads to 8 bytes with zeros, which SPE decodes
    /// as PAD packets). Smaller than the record says when the file is cut ([`Self::cut_off`]).
    pub size: u64,
    /// The record's `offset`: position of this data in the AUX buffer's running offset.
    pub aux_offset: u64,
    /// The record's `reference` (perf's time reference of the read).
    pub reference: u64,
    /// True when this chunk continues the previous chunk of the stream: its `aux_offset` is the
    /// previous `aux_offset + size`, less at most the 7 bytes of padding perf adds. False for
    /// the first chunk.
    pub contiguous: bool,
    /// Union of the flags of the PERF_RECORD_AUX records (same CPU) overlapping this chunk.
    pub aux_flags: AuxFlags,
    /// True when a decoder must drop its state before this chunk: the chunk is not contiguous,
    /// or the previous chunk's AUX records say data was truncated or partial.
    pub decoder_reset: bool,
    /// True when the file ends inside this payload.
    pub cut_off: bool,
}

/// All AUX data of one AUX buffer (one CPU in per-CPU mode, one thread in per-thread mode).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuxStream {
    /// The AUXTRACE `idx` (perf's mmap index).
    pub idx: u32,
    /// The CPU, or `None` (stored as -1) in per-thread mode.
    pub cpu: Option<u32>,
    /// The thread, or `None` (stored as -1).
    pub tid: Option<u32>,
    /// Chunks in file order.
    pub chunks: Vec<AuxChunk>,
}

impl AuxStream {
    /// Total payload bytes.
    pub fn bytes(&self) -> u64 {
        self.chunks.iter().map(|c| c.size).sum()
    }
}

/// A perf.data file, indexed. See the module docs.
pub struct PerfDataFile {
    path: String,
    source: Box<dyn ReadAt>,
    /// File length in bytes.
    pub file_len: u64,
    /// The event attributes, in file order, with EVENT_DESC names and ids.
    pub attrs: Vec<EventAttr>,
    pub features: HeaderFeatures,
    pub time_conv: Option<TimeConv>,
    /// Layout of the TIME_CONV record.
    pub time_conv_layout: Option<TimeConvLayout>,
    pub auxtrace_info: Option<AuxtraceInfoRecord>,
    /// The Arm SPE metadata, when AUXTRACE_INFO is of type 4 and its layout is known.
    pub spe: Option<SpeAuxtraceInfo>,
    spe_error: Option<(u64, AuxInfoError)>,
    pub sideband: Sideband,
    /// AUX streams ordered by `idx`.
    pub aux_streams: Vec<AuxStream>,
    /// PERF_RECORD_SAMPLE records seen (not indexed).
    pub samples: u64,
    pub summary: IndexSummary,
}

impl std::fmt::Debug for PerfDataFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfDataFile")
            .field("path", &self.path)
            .field("file_len", &self.file_len)
            .field("attrs", &self.attrs.len())
            .field("spe", &self.spe)
            .field("aux_streams", &self.aux_streams.len())
            .field("summary", &self.summary)
            .finish()
    }
}

fn i32_at(b: &[u8], o: usize) -> Option<i32> {
    u32_at(b, o).map(|v| v as i32)
}

/// Whether a file's first bytes (up to 4 KiB) decode as SPE records with PCs and nothing
/// else: a raw SPE buffer, not a perf.data file.
pub fn looks_like_raw_spe(head: &[u8]) -> bool {
    if head.get(0..8) == Some(&abi::header::MAGIC[..]) {
        return false;
    }
    let (records, stats, _) = spelunk_spe::decode_records(head);
    !records.is_empty() && stats.bad_bytes == 0 && records.iter().any(|r| r.pc.is_some())
}

/// Describes what a non-perf file looks like, for the "not a perf.data file" error.
fn describe_foreign(head: &[u8]) -> String {
    if head.is_empty() {
        return "the file is empty".into();
    }
    if looks_like_raw_spe(head) {
        return "looks like a raw SPE buffer; use --raw".into();
    }
    if head.starts_with(b"\x7fELF") {
        return "it is an ELF file".into();
    }
    if head.starts_with(b"PERFFILE") {
        return "it is a version-1 perf file (magic \"PERFFILE\"), which spelunk does not read"
            .into();
    }
    let shown: Vec<String> = head.iter().take(8).map(|b| format!("{b:02x}")).collect();
    if head
        .iter()
        .take(16)
        .all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace())
    {
        let text: String = head.iter().take(24).map(|b| *b as char).collect();
        return format!("it starts with text {:?}", text.trim_end());
    }
    format!(
        "it starts with bytes {} instead of \"PERFILE2\"",
        shown.join(" ")
    )
}

/// Sections and fields of the file header.
#[derive(Clone, Copy, Debug)]
struct RawHeader {
    header_size: u64,
    attr_size: u64,
    attrs: (u64, u64),
    data: (u64, u64),
    features: [u64; 4],
}

impl RawHeader {
    fn feature_bits(&self) -> Vec<u32> {
        (0..feature::BITS)
            .filter(|b| self.features[(*b / 64) as usize] >> (b % 64) & 1 != 0)
            .collect()
    }
}

struct Ctx<'a> {
    path: &'a str,
}

impl Ctx<'_> {
    fn truncated(&self, offset: u64, what: &str, detail: String) -> PerfError {
        PerfError::Truncated {
            path: self.path.into(),
            offset,
            what: what.into(),
            detail,
        }
    }
    fn malformed(&self, offset: u64, what: &str, detail: String) -> PerfError {
        PerfError::Malformed {
            path: self.path.into(),
            offset,
            what: what.into(),
            detail,
        }
    }
    fn io(&self, action: String, source: std::io::Error) -> PerfError {
        PerfError::Io {
            path: self.path.into(),
            action,
            source,
        }
    }
}

fn read_vec(
    src: &dyn ReadAt,
    ctx: &Ctx,
    offset: u64,
    len: u64,
    what: &str,
) -> Result<Vec<u8>, PerfError> {
    let end = offset.checked_add(len);
    if end.is_none_or(|e| e > src.len()) {
        return Err(ctx.truncated(
            offset,
            what,
            format!("needs {len} bytes, the file ends at byte {}", src.len()),
        ));
    }
    let mut v = vec![0u8; len as usize];
    src.read_exact_at(&mut v, offset)
        .map_err(|e| ctx.io(format!("read {len} bytes at byte {offset}"), e))?;
    Ok(v)
}

impl PerfDataFile {
    /// Opens and indexes `path` (any perf.data; see [`PerfDataFile::require_spe`]).
    pub fn open(path: impl AsRef<Path>) -> Result<PerfDataFile, PerfError> {
        let p = path.as_ref();
        let name = p.display().to_string();
        // A FIFO would block or never end, /dev/zero never ends: refused before opening.
        spelunk_fsio::regular_file(p).map_err(|source| PerfError::Io {
            path: name.clone(),
            action: "open".into(),
            source,
        })?;
        let file = File::open(p).map_err(|source| PerfError::Io {
            path: name.clone(),
            action: "open".into(),
            source,
        })?;
        let src = FileSource::new(file).map_err(|source| PerfError::Io {
            path: name.clone(),
            action: "read the file size".into(),
            source,
        })?;
        Self::from_source(name, Box::new(src))
    }

    /// Opens `path` and requires Arm SPE data in it (the usual entry point for decoding).
    pub fn open_spe(path: impl AsRef<Path>) -> Result<PerfDataFile, PerfError> {
        let f = Self::open(path)?;
        f.require_spe()?;
        Ok(f)
    }

    /// Indexes a perf.data held in memory (tests, fuzzing); `path` in messages is `<memory>`.
    pub fn from_bytes(bytes: &[u8]) -> Result<PerfDataFile, PerfError> {
        Self::from_source("<memory>".into(), Box::new(MemorySource(Arc::from(bytes))))
    }

    /// Indexes any [`ReadAt`] source; `name` is used in messages.
    pub fn from_source(name: String, source: Box<dyn ReadAt>) -> Result<PerfDataFile, PerfError> {
        let ctx = Ctx { path: &name };
        let len = source.len();
        let head_len = len.min(4096);
        let head = read_vec(source.as_ref(), &ctx, 0, head_len, "file header")?;
        if head.get(0..8) != Some(&abi::header::MAGIC[..]) {
            if head.get(0..8) == Some(&abi::header::MAGIC_SWAPPED[..]) {
                return Err(PerfError::BigEndian { path: name });
            }
            return Err(PerfError::NotPerfData {
                path: name,
                what: describe_foreign(&head),
            });
        }
        let header_size = u64_at(&head, 8).unwrap_or(0);
        if header_size == abi::header::PIPE_SIZE {
            return Err(PerfError::PipeMode { path: name });
        }
        if len < abi::header::SIZE {
            return Err(ctx.truncated(
                0,
                "file header",
                format!(
                    "the header needs {} bytes, the file has {len}",
                    abi::header::SIZE
                ),
            ));
        }
        if header_size < abi::header::SIZE {
            return Err(ctx.malformed(
                8,
                "file header",
                format!("header size {header_size} is below {}", abi::header::SIZE),
            ));
        }
        let sec = |o: usize| {
            (
                u64_at(&head, o).unwrap_or(0),
                u64_at(&head, o + 8).unwrap_or(0),
            )
        };
        let h = RawHeader {
            header_size,
            attr_size: u64_at(&head, 16).unwrap_or(0),
            attrs: sec(abi::header::OFF_ATTRS),
            data: sec(abi::header::OFF_DATA),
            features: [72, 80, 88, 96].map(|o| u64_at(&head, o).unwrap_or(0)),
        };
        let mut summary = IndexSummary {
            data_offset: h.data.0,
            header_data_size: h.data.1,
            ..Default::default()
        };

        let attrs = Self::read_attrs(source.as_ref(), &ctx, &h)?;

        // Where the data walk ends, and whether the feature table can be trusted.
        if h.data.0 < h.header_size || h.data.0 > len {
            return Err(ctx.truncated(
                abi::header::OFF_DATA as u64,
                "data section",
                format!(
                    "the header says it starts at byte {}, the file has {len} bytes",
                    h.data.0
                ),
            ));
        }
        let mut features_usable = true;
        let data_end = if h.data.1 == 0 {
            features_usable = false;
            push_problem(
                &mut summary,
                ProblemKind::DataSizeZero,
                abi::header::OFF_DATA as u64,
                format!(
                    "the header's data size is 0 (perf did not finish writing the file, e.g. \
                     it was killed); scanned the records from byte {} to the end of the file \
                     ({len}); no feature sections",
                    h.data.0
                ),
            );
            len
        } else if h.data.0.checked_add(h.data.1).is_none_or(|e| e > len) {
            features_usable = false;
            push_problem(
                &mut summary,
                ProblemKind::DataBeyondEof,
                abi::header::OFF_DATA as u64,
                format!(
                    "the data section ends at byte {} but the file ends at {len} (the file was \
                     cut); scanned to the end of the file; no feature sections",
                    h.data.0.saturating_add(h.data.1)
                ),
            );
            len
        } else {
            h.data.0 + h.data.1
        };

        let mut f = PerfDataFile {
            path: name.clone(),
            source,
            file_len: len,
            attrs,
            features: HeaderFeatures {
                present: h.feature_bits(),
                ..Default::default()
            },
            time_conv: None,
            time_conv_layout: None,
            auxtrace_info: None,
            spe: None,
            spe_error: None,
            sideband: Sideband::default(),
            aux_streams: Vec::new(),
            samples: 0,
            summary,
        };
        if features_usable {
            f.read_features(&h, data_end);
        }
        f.walk_data(h.data.0, data_end);
        f.link_aux();
        if let Some(info) = &f.auxtrace_info {
            if info.auxtrace_type == abi::auxtrace_type::ARM_SPE {
                match SpeAuxtraceInfo::parse(&info.priv_) {
                    Ok(s) => f.spe = Some(s),
                    Err(e) => f.spe_error = Some((info.offset, e)),
                }
            }
        }
        Ok(f)
    }

    fn read_attrs(src: &dyn ReadAt, ctx: &Ctx, h: &RawHeader) -> Result<Vec<EventAttr>, PerfError> {
        let (off, size) = h.attrs;
        let entry = h.attr_size;
        let min_entry = u64::from(abi::attr::SIZE_VER0) + abi::header::SECTION_SIZE;
        if entry < min_entry {
            return Err(ctx.malformed(
                16,
                "file header",
                format!(
                    "attr_size {entry} is below {min_entry} (a 64-byte perf_event_attr and its \
                     ids section)"
                ),
            ));
        }
        if size == 0 || size % entry != 0 {
            return Err(ctx.malformed(
                abi::header::OFF_ATTRS as u64,
                "attrs section",
                format!("size {size} is not a positive multiple of attr_size {entry}"),
            ));
        }
        let bytes = read_vec(src, ctx, off, size, "attrs section")?;
        let mut attrs = Vec::new();
        for (i, e) in bytes.chunks_exact(entry as usize).enumerate() {
            let at = off + i as u64 * entry;
            let attr_bytes = &e[..e.len() - 16];
            let mut a = EventAttr::parse(attr_bytes)
                .map_err(|d| ctx.malformed(at, "perf_event_attr", d))?;
            let ids_off = u64_at(e, e.len() - 16).unwrap_or(0);
            let ids_size = u64_at(e, e.len() - 8).unwrap_or(0);
            if ids_size > 0 {
                if ids_size % 8 != 0 || ids_size / 8 > MAX_IDS_PER_ATTR {
                    return Err(ctx.malformed(
                        at,
                        "perf_event_attr ids section",
                        format!("size {ids_size} is not a multiple of 8 or too large"),
                    ));
                }
                let ids = read_vec(src, ctx, ids_off, ids_size, "event id array")?;
                a.ids = ids
                    .chunks_exact(8)
                    .filter_map(|c| c.try_into().ok().map(u64::from_le_bytes))
                    .collect();
            }
            attrs.push(a);
        }
        Ok(attrs)
    }

    fn problem(&mut self, kind: ProblemKind, offset: u64, message: String) {
        push_problem(&mut self.summary, kind, offset, message);
    }

    /// Reads the feature table after the data section and the sections it points at, through
    /// linux-perf-data on a sanitized view.
    fn read_features(&mut self, h: &RawHeader, data_end: u64) {
        let src = self.source.as_ref();
        let len = self.file_len;
        let bits = h.feature_bits();
        let table_len = bits.len() as u64 * abi::header::SECTION_SIZE;
        if bits.is_empty() {
            return;
        }
        if data_end.checked_add(table_len).is_none_or(|e| e > len) {
            push_problem(
                &mut self.summary,
                ProblemKind::FeatureSection,
                data_end,
                format!(
                    "the feature table ({} entries) at byte {data_end} extends past the end of \
                     the file ({len} bytes: the file was cut); features ignored",
                    bits.len()
                ),
            );
            return;
        }
        let mut table = vec![0u8; table_len as usize];
        if src.read_exact_at(&mut table, data_end).is_err() {
            push_problem(
                &mut self.summary,
                ProblemKind::FeatureSection,
                data_end,
                "cannot read the feature table".into(),
            );
            return;
        }
        let mut good: Vec<(u32, u64, u64)> = Vec::new();
        let mut total = 0u64;
        for (i, bit) in bits.iter().enumerate() {
            let at = data_end + 16 * i as u64;
            let (o, s) = (
                u64_at(&table, 16 * i).unwrap_or(0),
                u64_at(&table, 16 * i + 8).unwrap_or(0),
            );
            if o.checked_add(s).is_none_or(|e| e > len) || s > MAX_FEATURE_SECTION {
                push_problem(
                    &mut self.summary,
                    ProblemKind::FeatureSection,
                    at,
                    if s > MAX_FEATURE_SECTION {
                        format!(
                            "feature {bit} section (byte {o}, {s} bytes) is larger than any \
                             feature can be ({MAX_FEATURE_SECTION} bytes); ignored"
                        )
                    } else {
                        format!(
                            "feature {bit} section (byte {o}, {s} bytes) lies outside the file \
                             ({len} bytes: the file was cut, or its feature table is damaged); \
                             ignored"
                        )
                    },
                );
                continue;
            }
            total += s;
            if total > MAX_FEATURE_TOTAL {
                push_problem(
                    &mut self.summary,
                    ProblemKind::FeatureSection,
                    at,
                    format!("feature {bit} section would exceed 1 GiB of feature data; ignored"),
                );
                continue;
            }
            good.push((*bit, o, s));
        }
        let read = |o: u64, s: u64| -> Option<Vec<u8>> {
            let mut v = vec![0u8; s as usize];
            src.read_exact_at(&mut v, o).ok().map(|_| v)
        };
        // Checks of sections linux-perf-data would otherwise trust.
        let mut checked = Vec::new();
        for (bit, o, s) in good {
            let ok = match bit {
                feature::EVENT_DESC => read(o, s).is_some_and(|b| event_desc_ok(&b)),
                feature::CMDLINE => read(o, s).is_some_and(|b| string_list_ok(&b)),
                _ => true,
            };
            if ok {
                checked.push((bit, o, s));
            } else {
                push_problem(
                    &mut self.summary,
                    ProblemKind::FeatureSection,
                    o,
                    format!("feature {bit} section at byte {o} is malformed; ignored"),
                );
            }
        }
        // Simple sections parsed here from their documented layouts.
        for (bit, o, s) in &checked {
            let Some(b) = read(*o, *s) else { continue };
            match *bit {
                feature::AUXTRACE => {
                    let n = u64_at(&b, 0).unwrap_or(0);
                    let entries: Vec<(u64, u64)> = b
                        .get(8..)
                        .unwrap_or(&[])
                        .chunks_exact(16)
                        .take(n.min(b.len() as u64 / 16) as usize)
                        .map(|c| (u64_at(c, 0).unwrap_or(0), u64_at(c, 8).unwrap_or(0)))
                        .collect();
                    self.features.auxtrace_index = Some(entries);
                }
                feature::SAMPLE_TIME => {
                    if let (Some(a), Some(z)) = (u64_at(&b, 0), u64_at(&b, 8)) {
                        self.features.sample_time = Some((a, z));
                    }
                }
                feature::TOTAL_MEM => self.features.total_mem_kb = u64_at(&b, 0),
                feature::BUILD_ID => {
                    let (entries, damage) = crate::buildid::parse_header_section(&b);
                    self.features.build_ids = entries;
                    if let Some(d) = damage {
                        push_problem(
                            &mut self.summary,
                            ProblemKind::FeatureSection,
                            *o,
                            format!(
                                "the build-id table (feature {bit} at byte {o}) is damaged: \
                                 {d}; the entries after it are ignored"
                            ),
                        );
                    }
                }
                _ => {}
            }
        }
        // The crate reads the rest: the sanitized header lists only the checked features, and
        // its feature table sits just past the end of the file (an overlay).
        let mut vh = vec![0u8; abi::header::SIZE as usize];
        vh[0..8].copy_from_slice(&abi::header::MAGIC);
        vh[8..16].copy_from_slice(&abi::header::SIZE.to_le_bytes());
        vh[16..24].copy_from_slice(&h.attr_size.to_le_bytes());
        vh[24..32].copy_from_slice(&h.attrs.0.to_le_bytes());
        vh[32..40].copy_from_slice(&h.attrs.1.to_le_bytes());
        vh[40..48].copy_from_slice(&h.data.0.to_le_bytes());
        vh[48..56].copy_from_slice(&(len - h.data.0).to_le_bytes());
        let mut vbits = [0u64; 4];
        let mut vtable = Vec::new();
        for (bit, o, s) in &checked {
            vbits[(*bit / 64) as usize] |= 1 << (bit % 64);
            vtable.extend_from_slice(&o.to_le_bytes());
            vtable.extend_from_slice(&s.to_le_bytes());
        }
        for (i, w) in vbits.iter().enumerate() {
            vh[72 + 8 * i..80 + 8 * i].copy_from_slice(&w.to_le_bytes());
        }
        let cursor = OverlayCursor {
            src,
            overlays: vec![(0, vh), (len, vtable)],
            pos: 0,
        };
        match PerfFileReader::parse_file(cursor) {
            Ok(PerfFileReader { perf_file, .. }) => {
                let s = |r: Result<Option<&str>, linux_perf_data::Error>| {
                    r.ok().flatten().map(str::to_string)
                };
                self.features.hostname = s(perf_file.hostname());
                self.features.os_release = s(perf_file.os_release());
                self.features.perf_version = s(perf_file.perf_version());
                self.features.arch = s(perf_file.arch());
                self.features.cpu_desc = s(perf_file.cpu_desc());
                self.features.cpuid = s(perf_file.cpu_id());
                if let Ok(Some(n)) = perf_file.nr_cpus() {
                    self.features.nr_cpus_available = Some(n.nr_cpus_available);
                    self.features.nr_cpus_online = Some(n.nr_cpus_online);
                }
                if let Ok(Some(c)) = perf_file.cmdline() {
                    self.features.cmdline = Some(c.into_iter().map(str::to_string).collect());
                }
                apply_attribute_names(&mut self.attrs, perf_file.event_attributes());
            }
            Err(e) => push_problem(
                &mut self.summary,
                ProblemKind::FeatureSection,
                0,
                format!("linux-perf-data could not read the attrs/feature sections: {e}"),
            ),
        }
    }

    /// The sample_id parse info for each attr, and how to find a record's attr.
    fn id_layout(&self) -> (Vec<Option<RecordParseInfo>>, IdLookup) {
        let infos: Vec<_> = self.attrs.iter().map(EventAttr::parse_info).collect();
        const SID_BITS: u64 = abi::sample::TID
            | abi::sample::TIME
            | abi::sample::ID
            | abi::sample::STREAM_ID
            | abi::sample::CPU
            | abi::sample::IDENTIFIER;
        let key = |a: &EventAttr| (a.sample_id_all(), a.sample_type & SID_BITS);
        let lookup = match self.attrs.first() {
            _ if self.attrs.len() <= 1 => IdLookup::Single,
            Some(first) if self.attrs.iter().all(|a| key(a) == key(first)) => IdLookup::Same,
            _ if self
                .attrs
                .iter()
                .all(|a| a.sample_id_all() && a.sample_type & abi::sample::IDENTIFIER != 0) =>
            {
                IdLookup::Identifier
            }
            _ => IdLookup::Single,
        };
        (infos, lookup)
    }

    fn walk_data(&mut self, start: u64, end: u64) {
        let (infos, lookup) = self.id_layout();
        let mut id_to_attr = HashMap::new();
        for (i, a) in self.attrs.iter().enumerate() {
            for id in &a.ids {
                id_to_attr.insert(*id, i);
            }
        }
        let mut streams: BTreeMap<u32, AuxStream> = BTreeMap::new();
        // The cursor borrows the source while records update `self`: move the source out for
        // the walk and put it back afterwards.
        let source =
            std::mem::replace(&mut self.source, Box::new(MemorySource(Arc::from(&[][..]))));
        // 64 KiB windows: large enough for runs of sideband, small next to typical AUX chunks
        // (MiBs), whose payloads are skipped, not read.
        let mut cursor_buf = BufferedCursor::new(source.as_ref(), 64 << 10);
        let mut body = Vec::with_capacity(1 << 16);
        let mut pos = start;
        while pos < end {
            if end - pos < abi::size::HEADER as u64 {
                self.problem(
                    ProblemKind::RecordCutOff,
                    pos,
                    format!(
                        "truncated perf_event_header at byte {pos}: {} bytes left before the \
                         end of the data",
                        end - pos
                    ),
                );
                self.summary.stopped_early = true;
                break;
            }
            let hdr = match cursor_buf.bytes_at(pos, 8) {
                Ok(b) => b.to_vec(),
                Err(_) => {
                    self.problem(
                        ProblemKind::RecordCutOff,
                        pos,
                        format!("cannot read the record header at byte {pos}"),
                    );
                    self.summary.stopped_early = true;
                    break;
                }
            };
            let ty = u32_at(&hdr, 0).unwrap_or(0);
            let misc = u16::from_le_bytes([hdr[4], hdr[5]]);
            let size = u16::from_le_bytes([hdr[6], hdr[7]]) as u64;
            let name = rt::name(ty);
            if size < abi::size::HEADER as u64 {
                self.problem(
                    ProblemKind::MalformedRecord,
                    pos,
                    format!(
                        "malformed {name} at byte {pos}: record size {size} is below the 8-byte \
                         header; cannot find the next record, indexing stopped"
                    ),
                );
                self.summary.stopped_early = true;
                break;
            }
            if pos + size > end {
                self.problem(
                    ProblemKind::RecordCutOff,
                    pos,
                    format!(
                        "truncated {name} at byte {pos}: header says {size} bytes, the data \
                         ends after {}",
                        end - pos
                    ),
                );
                self.summary.stopped_early = true;
                break;
            }
            body.clear();
            match cursor_buf.bytes_at(pos + 8, (size - 8) as usize) {
                Ok(b) => body.extend_from_slice(b),
                Err(_) => {
                    self.problem(
                        ProblemKind::RecordCutOff,
                        pos,
                        format!("cannot read {name} at byte {pos}"),
                    );
                    self.summary.stopped_early = true;
                    break;
                }
            }
            *self.summary.record_counts.entry(ty).or_insert(0) += 1;
            let mut next = pos + size;
            if ty == rt::AUXTRACE {
                match self.on_auxtrace(pos, size, &body, end, &mut streams) {
                    Some(n) => next = n,
                    None => {
                        self.summary.stopped_early = true;
                        break;
                    }
                }
            } else if (1..=rt::KERNEL_MAX).contains(&ty) {
                self.on_kernel_record(pos, ty, misc, &body, &infos, lookup, &id_to_attr);
            } else if rt::is_known(ty) {
                self.on_user_record(pos, ty, &body);
            } else {
                let u = self
                    .summary
                    .unknown_records
                    .entry(ty)
                    .or_insert(UnknownRecords {
                        count: 0,
                        first_offset: pos,
                    });
                u.count += 1;
            }
            pos = next;
        }
        drop(cursor_buf);
        self.source = source;
        self.summary.data_end = pos.min(end);
        self.aux_streams = streams.into_values().collect();
    }

    /// Returns the offset after the payload, or `None` when indexing must stop.
    fn on_auxtrace(
        &mut self,
        pos: u64,
        size: u64,
        body: &[u8],
        end: u64,
        streams: &mut BTreeMap<u32, AuxStream>,
    ) -> Option<u64> {
        let fields = (
            u64_at(body, 0),
            u64_at(body, 8),
            u64_at(body, 16),
            u32_at(body, 24),
            u32_at(body, 28),
            u32_at(body, 32),
        );
        let (Some(psize), Some(aux_offset), Some(reference), Some(idx), Some(tid), Some(cpu)) =
            fields
        else {
            self.problem(
                ProblemKind::MalformedRecord,
                pos,
                format!(
                    "malformed PERF_RECORD_AUXTRACE at byte {pos}: record size {size} is below \
                     48; cannot find its payload, indexing stopped"
                ),
            );
            return None;
        };
        let payload_at = pos + size;
        let avail = end.saturating_sub(payload_at);
        let cut_off = psize > avail;
        let chunk = AuxChunk {
            record_offset: pos,
            file_offset: payload_at,
            size: psize.min(avail),
            aux_offset,
            reference,
            contiguous: false,
            aux_flags: AuxFlags(0),
            decoder_reset: true,
            cut_off,
        };
        let opt = |v: u32| (v != u32::MAX).then_some(v);
        let s = streams.entry(idx).or_insert_with(|| AuxStream {
            idx,
            cpu: opt(cpu),
            tid: opt(tid),
            chunks: Vec::new(),
        });
        if s.cpu != opt(cpu) {
            let msg = format!(
                "PERF_RECORD_AUXTRACE at byte {pos}: idx {idx} has cpu {cpu}, earlier chunks had \
                 {:?}",
                s.cpu
            );
            self.problem(ProblemKind::InconsistentAuxStream, pos, msg);
        }
        if chunk.size > 0 || !cut_off {
            s.chunks.push(chunk);
        }
        if cut_off {
            self.problem(
                ProblemKind::RecordCutOff,
                pos,
                format!(
                    "truncated PERF_RECORD_AUXTRACE at byte {pos}: header says {psize} payload \
                     bytes, file ends after {avail}"
                ),
            );
            return None;
        }
        Some(payload_at + psize)
    }

    #[allow(clippy::too_many_arguments)]
    fn on_kernel_record(
        &mut self,
        pos: u64,
        ty: u32,
        misc: u16,
        body: &[u8],
        infos: &[Option<RecordParseInfo>],
        lookup: IdLookup,
        id_to_attr: &HashMap<u64, usize>,
    ) {
        if ty == rt::SAMPLE {
            self.samples += 1;
            return;
        }
        // Which attr: by the sample_id's id when there are several.
        let attr_index = match lookup {
            IdLookup::Single => 0,
            IdLookup::Same => infos
                .first()
                .copied()
                .flatten()
                .and_then(|pi| raw(ty, misc, body, pi).id())
                .and_then(|id| id_to_attr.get(&id).copied())
                .unwrap_or(0),
            IdLookup::Identifier => body
                .len()
                .checked_sub(8)
                .and_then(|o| u64_at(body, o))
                .and_then(|id| id_to_attr.get(&id).copied())
                .unwrap_or(0),
        };
        let Some(attr) = self.attrs.get(attr_index) else {
            return;
        };
        let sid_len = attr.sample_id_size();
        let Some(Some(pi)) = infos.get(attr_index).copied() else {
            return;
        };
        match parse_sideband(ty, misc, body, sid_len, pi, attr_index, pos) {
            Err(message) => self.problem(ProblemKind::MalformedRecord, pos, message),
            Ok(None) => {}
            Ok(Some(rec)) => {
                let sb = &mut self.sideband;
                match rec {
                    SidebandRecord::Comm(c) => sb.comms.push(c),
                    SidebandRecord::Mmap(m) => sb.mmaps.push(m),
                    SidebandRecord::Task(t) => sb.tasks.push(t),
                    SidebandRecord::Switch(c) => sb.switches.push(c),
                    SidebandRecord::ItraceStart(i) => sb.itrace_starts.push(i),
                    SidebandRecord::Lost(l) => sb.lost.push(l),
                    SidebandRecord::LostSamples(l) => sb.lost_samples.push(l),
                    SidebandRecord::Aux(a) => sb.aux.push(a),
                }
            }
        }
    }

    fn on_user_record(&mut self, pos: u64, ty: u32, body: &[u8]) {
        match ty {
            rt::AUXTRACE_INFO => {
                let Some((auxtrace_type, priv_)) = auxinfo::split_record_body(body) else {
                    self.problem(
                        ProblemKind::MalformedRecord,
                        pos,
                        format!(
                            "malformed PERF_RECORD_AUXTRACE_INFO at byte {pos}: {} body bytes",
                            body.len()
                        ),
                    );
                    return;
                };
                if self.auxtrace_info.is_none() {
                    self.auxtrace_info = Some(AuxtraceInfoRecord {
                        offset: pos,
                        auxtrace_type,
                        priv_,
                    });
                }
            }
            rt::TIME_CONV => match TimeConv::parse_body(body) {
                Ok((tc, layout)) => {
                    self.time_conv = Some(tc);
                    self.time_conv_layout = Some(layout);
                }
                Err(d) => self.problem(
                    ProblemKind::MalformedRecord,
                    pos,
                    format!("malformed PERF_RECORD_TIME_CONV at byte {pos}: {d}"),
                ),
            },
            rt::AUXTRACE_ERROR => {
                // struct perf_record_auxtrace_error: type, code, cpu, pid, tid, fmt (u32 each),
                // ip, [time if fmt >= 2], msg[64].
                let fmt = u32_at(body, 20).unwrap_or(0);
                let msg_at = if fmt >= 2 { 40 } else { 32 };
                let msg = body.get(msg_at..).unwrap_or(&[]);
                let msg_end = msg
                    .iter()
                    .take(64)
                    .position(|b| *b == 0)
                    .unwrap_or(msg.len().min(64));
                self.sideband.auxtrace_errors.push(AuxtraceError {
                    offset: pos,
                    error_type: u32_at(body, 0).unwrap_or(0),
                    code: u32_at(body, 4).unwrap_or(0),
                    cpu: u32_at(body, 8).unwrap_or(u32::MAX),
                    pid: u32_at(body, 12).unwrap_or(u32::MAX),
                    tid: u32_at(body, 16).unwrap_or(u32::MAX),
                    ip: u64_at(body, 24).unwrap_or(0),
                    message: String::from_utf8_lossy(&msg[..msg_end]).into_owned(),
                });
            }
            rt::COMPRESSED | rt::COMPRESSED2
                if self.summary.count(rt::COMPRESSED) + self.summary.count(rt::COMPRESSED2)
                    == 1 =>
            {
                self.problem(
                    ProblemKind::Compressed,
                    pos,
                    format!(
                        "{} at byte {pos}: the file was recorded with `perf record -z`; \
                             compressed sideband is not indexed (AUX data is unaffected)",
                        rt::name(ty)
                    ),
                );
            }
            _ => {}
        }
    }

    /// Computes chunk continuity and the AUX flags that apply to each chunk.
    ///
    /// A chunk covers `[aux_offset, aux_offset + size)` of the CPU's running AUX offset, except
    /// that its last bytes may be perf's padding, which the next chunk's data follows (so the
    /// chunk is cut at the next chunk's start). A zero-size AUX record at offset X (the kernel
    /// writes those with TRUNCATED when the buffer was full) belongs to the chunk ending at X.
    fn link_aux(&mut self) {
        let mut by_cpu: HashMap<u32, Vec<&AuxRecord>> = HashMap::new();
        for a in &self.sideband.aux {
            if let Some(cpu) = a.sample.cpu {
                by_cpu.entry(cpu).or_default().push(a);
            }
        }
        for s in &mut self.aux_streams {
            let recs = s.cpu.and_then(|c| by_cpu.get(&c));
            let starts: Vec<u64> = s.chunks.iter().map(|c| c.aux_offset).collect();
            let mut prev: Option<AuxChunk> = None;
            for (i, c) in s.chunks.iter_mut().enumerate() {
                let lo = c.aux_offset;
                let mut hi = lo.saturating_add(c.size);
                if let Some(next) = starts.get(i + 1) {
                    if *next > lo && *next < hi {
                        hi = *next;
                    }
                }
                if let Some(recs) = recs {
                    for r in recs.iter() {
                        let rlo = r.aux_offset;
                        let hit = if r.aux_size == 0 {
                            lo < rlo && rlo <= hi
                        } else {
                            rlo < hi && lo < rlo.saturating_add(r.aux_size)
                        };
                        if hit {
                            c.aux_flags.0 |= r.flags.0;
                        }
                    }
                }
                c.contiguous = prev.is_some_and(|p| {
                    let end = p.aux_offset.saturating_add(p.size);
                    c.aux_offset <= end && c.aux_offset >= end.saturating_sub(7)
                });
                c.decoder_reset = !c.contiguous
                    || prev.is_some_and(|p| p.aux_flags.truncated() || p.aux_flags.partial());
                prev = Some(*c);
            }
        }
    }

    /// The file name used in messages.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Fills `buf` with the file's bytes at `offset` (positional read; safe from several threads
    /// at once). Used to read large AUX chunks in bounded pieces.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.source.read_exact_at(buf, offset)
    }

    /// The bytes of SPE data the recording holds over all its AUX streams; an error when it
    /// holds none (SPE never wrote a buffer, or the file is damaged before any), as decoding
    /// it would give nothing.
    pub fn require_spe_data(&self) -> Result<u64, PerfError> {
        let bytes = self.spe_data_bytes();
        if bytes == 0 {
            if let Some(p) = self.damage() {
                return Err(PerfError::DamagedBeforeSpeData {
                    path: self.path.clone(),
                    offset: p.offset,
                    detail: p.message.clone(),
                });
            }
            return Err(PerfError::NoAuxData {
                path: self.path.clone(),
            });
        }
        Ok(bytes)
    }

    /// The SPE metadata, or the error that explains why there is none: no AUXTRACE_INFO, AUX
    /// data of another tracer, or an unknown metadata version.
    pub fn require_spe(&self) -> Result<&SpeAuxtraceInfo, PerfError> {
        if let Some(s) = &self.spe {
            return Ok(s);
        }
        if let Some((offset, e)) = &self.spe_error {
            return Err(PerfError::SpeMetadata {
                path: self.path.clone(),
                offset: *offset,
                source: e.clone(),
            });
        }
        match &self.auxtrace_info {
            Some(info) => Err(PerfError::OtherAuxtrace {
                path: self.path.clone(),
                offset: info.offset,
                kind: abi::auxtrace_type::name(info.auxtrace_type),
                auxtrace_type: info.auxtrace_type,
            }),
            None if self.damage().is_some() => {
                let (offset, detail) = self
                    .damage()
                    .map(|p| (p.offset, p.message.clone()))
                    .unwrap_or_default();
                Err(PerfError::DamagedBeforeSpe {
                    path: self.path.clone(),
                    offset,
                    detail,
                })
            }
            None => {
                let events: Vec<String> = self
                    .attrs
                    .iter()
                    .map(|a| {
                        a.name
                            .clone()
                            .unwrap_or_else(|| format!("type {}", a.type_))
                    })
                    .collect();
                Err(PerfError::NoSpeData {
                    path: self.path.clone(),
                    detail: format!(
                        "no PERF_RECORD_AUXTRACE_INFO; events: {}",
                        events.join(", ")
                    ),
                })
            }
        }
    }

    /// The first problem that means the file is damaged — cut short, a record cut off, a
    /// record whose size cannot be right, a header perf never finished — rather than only
    /// unusual (an unreadable feature section, compressed records).
    /// The SPE bytes of every AUX stream.
    pub fn spe_data_bytes(&self) -> u64 {
        self.aux_streams.iter().map(|s| s.bytes()).sum()
    }

    /// `"; the recording is damaged: ..."` for messages about a damaged file, else empty.
    pub fn damage_note(&self) -> String {
        match self.damage() {
            Some(p) => format!("; the recording is damaged: {}", p.message),
            None => String::new(),
        }
    }

    pub fn damage(&self) -> Option<&Problem> {
        self.summary.problems.iter().find(|p| {
            matches!(
                p.kind,
                ProblemKind::DataSizeZero
                    | ProblemKind::DataBeyondEof
                    | ProblemKind::RecordCutOff
                    | ProblemKind::MalformedRecord
            )
        })
    }

    /// Index into [`PerfDataFile::attrs`] of the SPE event (the attr whose `type` is the
    /// AUXTRACE_INFO PMU type).
    pub fn spe_attr_index(&self) -> Option<usize> {
        let t = self.spe.as_ref()?.pmu_type();
        self.attrs.iter().position(|a| a.type_ == t)
    }

    /// The SPE event's attr.
    pub fn spe_attr(&self) -> Option<&EventAttr> {
        self.spe_attr_index().and_then(|i| self.attrs.get(i))
    }

    /// The MIDR of `cpu`: from version-2 SPE metadata when present, else HEADER_CPUID.
    pub fn cpu_midr(&self, cpu: u32) -> Option<Midr> {
        self.spe
            .as_ref()
            .and_then(|s| s.cpu_midr(cpu))
            .or_else(|| self.features.midr())
    }

    /// Reads `chunk`'s payload into `buf` (resized to fit) with a positional read; safe to
    /// call from several threads at once.
    pub fn read_chunk(&self, chunk: &AuxChunk, buf: &mut Vec<u8>) -> Result<(), PerfError> {
        let n = usize::try_from(chunk.size).map_err(|_| PerfError::Malformed {
            path: self.path.clone(),
            offset: chunk.record_offset,
            what: "PERF_RECORD_AUXTRACE".into(),
            detail: format!("payload of {} bytes does not fit in memory", chunk.size),
        })?;
        if chunk
            .file_offset
            .checked_add(chunk.size)
            .is_none_or(|e| e > self.file_len)
        {
            return Err(PerfError::Truncated {
                path: self.path.clone(),
                offset: chunk.record_offset,
                what: "PERF_RECORD_AUXTRACE".into(),
                detail: format!(
                    "payload of {} bytes at byte {} extends past the end of the file ({})",
                    chunk.size, chunk.file_offset, self.file_len
                ),
            });
        }
        buf.resize(n, 0);
        self.source
            .read_exact_at(buf, chunk.file_offset)
            .map_err(|source| PerfError::Io {
                path: self.path.clone(),
                action: format!(
                    "read {} bytes of AUX data at byte {}",
                    chunk.size, chunk.file_offset
                ),
                source,
            })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IdLookup {
    /// One attr (or no way to tell): everything belongs to attr 0.
    Single,
    /// All attrs share one sample_id layout: read the id with attr 0's layout.
    Same,
    /// Layouts differ but all have IDENTIFIER: the last 8 bytes are the id.
    Identifier,
}

fn raw<'a>(ty: u32, misc: u16, body: &'a [u8], pi: RecordParseInfo) -> RawEventRecord<'a> {
    RawEventRecord::new(RecordType(ty), misc, RawData::Single(body), pi)
}

fn push_problem(s: &mut IndexSummary, kind: ProblemKind, offset: u64, message: String) {
    s.problem_count += 1;
    if s.problems.len() < MAX_KEPT_PROBLEMS {
        s.problems.push(Problem {
            kind,
            offset,
            message,
        });
    }
}

/// Walks an EVENT_DESC section: nr, attr_size, then per event attr, nr_ids, string, ids.
fn event_desc_ok(b: &[u8]) -> bool {
    let (Some(nr), Some(attr_size)) = (u32_at(b, 0), u32_at(b, 4)) else {
        return false;
    };
    if attr_size < abi::attr::SIZE_VER0 {
        return false;
    }
    let mut at = 8usize;
    for _ in 0..nr {
        let Some(size) = u32_at(b, at + 4) else {
            return false;
        };
        // linux-perf-data rejects an attr whose own size exceeds attr_size; so do we.
        if size > attr_size || size < abi::attr::SIZE_VER0 {
            return false;
        }
        at += attr_size as usize;
        let Some(nr_ids) = u32_at(b, at) else {
            return false;
        };
        let Some(slen) = u32_at(b, at + 4) else {
            return false;
        };
        at = match (at + 8).checked_add(slen as usize) {
            Some(a) => a,
            None => return false,
        };
        at = match at.checked_add(8 * nr_ids as usize) {
            Some(a) => a,
            None => return false,
        };
        if at > b.len() {
            return false;
        }
    }
    true
}

/// Walks a perf_header_string_list: nr, then nr strings of (u32 len, bytes).
fn string_list_ok(b: &[u8]) -> bool {
    let Some(nr) = u32_at(b, 0) else { return false };
    let mut at = 4usize;
    for _ in 0..nr {
        let Some(len) = u32_at(b, at) else {
            return false;
        };
        at = match (at + 4).checked_add(len as usize) {
            Some(a) if a <= b.len() => a,
            _ => return false,
        };
    }
    true
}

/// Copies EVENT_DESC names (and ids, when the attrs section had none) onto `attrs`: matched by
/// first id, else by position.
fn apply_attribute_names(attrs: &mut [EventAttr], descs: &[AttributeDescription]) {
    for (i, a) in attrs.iter_mut().enumerate() {
        let by_id = descs
            .iter()
            .find(|d| !a.ids.is_empty() && d.event_ids.first() == a.ids.first());
        let Some(d) = by_id.or_else(|| descs.get(i)) else {
            continue;
        };
        if a.name.is_none() {
            a.name = d.name.clone();
        }
        if a.ids.is_empty() {
            a.ids = d.event_ids.clone();
        }
    }
}

/// One kernel sideband record, typed (what [`parse_sideband`] returns).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SidebandRecord {
    Comm(Comm),
    Mmap(Mmap),
    Task(TaskEvent),
    Switch(ContextSwitch),
    ItraceStart(ItraceStart),
    Lost(Lost),
    LostSamples(LostSamples),
    Aux(AuxRecord),
}

/// Parses the body of kernel record `ty` (sample_id trailer of `sid_len` bytes included) into
/// its typed form; `Ok(None)` for types spelunk only counts (THROTTLE, KSYMBOL, ...). Used for
/// perf.data files and for records read live from a ring buffer ([`crate::ring`]). `Err` is a
/// message (naming byte `pos`) for a record too short or malformed, which must be skipped.
pub fn parse_sideband(
    ty: u32,
    misc: u16,
    body: &[u8],
    sid_len: usize,
    pi: RecordParseInfo,
    attr_index: usize,
    pos: u64,
) -> Result<Option<SidebandRecord>, String> {
    let name = rt::name(ty);
    let fixed = match ty {
        rt::MMAP => 33,
        rt::MMAP2 => 65,
        rt::COMM => 9,
        rt::FORK | rt::EXIT => 24,
        rt::LOST => 16,
        rt::AUX => 24,
        rt::ITRACE_START | rt::LOST_SAMPLES | rt::SWITCH_CPU_WIDE => 8,
        _ => 0,
    };
    if body.len() < fixed + sid_len {
        return Err(format!(
            "malformed {name} at byte {pos}: {} body bytes, at least {} expected ({fixed} + \
             {sid_len} of sample_id); skipped",
            body.len(),
            fixed + sid_len
        ));
    }
    let r = raw(ty, misc, body, pi);
    let sample = match r.common_data() {
        Ok(c) => SampleId {
            pid: c.pid,
            tid: c.tid,
            time_ns: c.timestamp,
            id: c.id,
            stream_id: c.stream_id,
            cpu: c.cpu,
        },
        Err(_) => SampleId::default(),
    };
    let rp = RecordPos {
        offset: pos,
        attr_index,
    };
    let payload = &body[..body.len().saturating_sub(sid_len)];
    let data = RawData::Single(payload);
    let s = |d: RawData| {
        let v = d.as_slice();
        let end = v.iter().position(|b| *b == 0).unwrap_or(v.len());
        String::from_utf8_lossy(&v[..end]).into_owned()
    };
    let rec = match ty {
        rt::AUX => SidebandRecord::Aux(AuxRecord {
            pos: rp,
            sample,
            aux_offset: u64_at(payload, 0).unwrap_or(0),
            aux_size: u64_at(payload, 8).unwrap_or(0),
            flags: AuxFlags(u64_at(payload, 16).unwrap_or(0)),
        }),
        rt::ITRACE_START => SidebandRecord::ItraceStart(ItraceStart {
            pos: rp,
            sample,
            pid: i32_at(payload, 0).unwrap_or(-1),
            tid: i32_at(payload, 4).unwrap_or(-1),
        }),
        rt::LOST_SAMPLES => SidebandRecord::LostSamples(LostSamples {
            pos: rp,
            sample,
            lost: u64_at(payload, 0).unwrap_or(0),
        }),
        rt::COMM => {
            let Ok(c) = CommOrExecRecord::parse::<byteorder::LittleEndian>(data, misc) else {
                return Ok(None);
            };
            SidebandRecord::Comm(Comm {
                pos: rp,
                sample,
                pid: c.pid,
                tid: c.tid,
                name: s(c.name),
                exec: c.is_execve,
            })
        }
        rt::MMAP => {
            let Ok(m) = MmapRecord::parse::<byteorder::LittleEndian>(data, misc) else {
                return Ok(None);
            };
            SidebandRecord::Mmap(Mmap {
                pos: rp,
                sample,
                mmap2: false,
                pid: m.pid,
                tid: m.tid,
                address: m.address,
                length: m.length,
                page_offset: m.page_offset,
                file_id: MmapFileId::None,
                prot: None,
                flags: None,
                cpu_mode: misc & abi::misc::CPUMODE_MASK,
                executable: m.is_executable,
                path: s(m.path),
            })
        }
        rt::MMAP2 => {
            // linux-perf-event-reader asserts build_id_size <= 20; check it first.
            if misc & abi::misc::MMAP_BUILD_ID != 0 && payload.get(32).is_some_and(|n| *n > 20) {
                return Err(format!(
                    "malformed PERF_RECORD_MMAP2 at byte {pos}: build id size {} > 20; skipped",
                    payload[32]
                ));
            }
            let Ok(m) = Mmap2Record::parse::<byteorder::LittleEndian>(data, misc) else {
                return Ok(None);
            };
            let file_id = match m.file_id {
                Mmap2FileId::BuildId(b) => MmapFileId::BuildId(b),
                Mmap2FileId::InodeAndVersion(i) => MmapFileId::Inode {
                    maj: i.major,
                    min: i.minor,
                    ino: i.inode,
                    ino_generation: i.inode_generation,
                },
            };
            SidebandRecord::Mmap(Mmap {
                pos: rp,
                sample,
                mmap2: true,
                pid: m.pid,
                tid: m.tid,
                address: m.address,
                length: m.length,
                page_offset: m.page_offset,
                file_id,
                prot: Some(m.protection),
                flags: Some(m.flags),
                cpu_mode: misc & abi::misc::CPUMODE_MASK,
                executable: misc & abi::misc::MMAP_DATA == 0,
                path: s(m.path),
            })
        }
        rt::FORK | rt::EXIT => {
            let Ok(t) = ForkOrExitRecord::parse::<byteorder::LittleEndian>(data) else {
                return Ok(None);
            };
            SidebandRecord::Task(TaskEvent {
                pos: rp,
                sample,
                kind: if ty == rt::FORK {
                    TaskEventKind::Fork
                } else {
                    TaskEventKind::Exit
                },
                pid: t.pid,
                ppid: t.ppid,
                tid: t.tid,
                ptid: t.ptid,
                time_ns: t.timestamp,
            })
        }
        rt::LOST => {
            let Ok(l) = LostRecord::parse::<byteorder::LittleEndian>(data) else {
                return Ok(None);
            };
            SidebandRecord::Lost(Lost {
                pos: rp,
                sample,
                id: l.id,
                lost: l.count,
            })
        }
        rt::SWITCH | rt::SWITCH_CPU_WIDE => {
            let parsed = if ty == rt::SWITCH {
                Ok(ContextSwitchRecord::from_misc(misc))
            } else {
                ContextSwitchRecord::parse_cpu_wide::<byteorder::LittleEndian>(data, misc)
            };
            let Ok(c) = parsed else {
                return Ok(None);
            };
            let (out, preempted, other_pid, other_tid) = match c {
                ContextSwitchRecord::In { prev_pid, prev_tid } => {
                    (false, false, prev_pid, prev_tid)
                }
                ContextSwitchRecord::Out {
                    next_pid,
                    next_tid,
                    preempted,
                } => (
                    true,
                    matches!(
                        preempted,
                        linux_perf_data::linux_perf_event_reader::TaskWasPreempted::Yes
                    ),
                    next_pid,
                    next_tid,
                ),
            };
            SidebandRecord::Switch(ContextSwitch {
                pos: rp,
                sample,
                out,
                preempted,
                other_pid,
                other_tid,
            })
        }
        _ => {
            // THROTTLE, READ, NAMESPACES, KSYMBOL, BPF_EVENT, CGROUP, TEXT_POKE,
            // AUX_OUTPUT_HW_ID: counted only. Touch the parser so a future typed use is
            // one match arm away.
            let _ = matches!(r.parse(), Ok(EventRecord::Raw(_)));
            return Ok(None);
        }
    };
    Ok(Some(rec))
}
