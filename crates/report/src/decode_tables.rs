//! `spelunk decode`'s flow: an SPE recording (a perf.data, or a raw SPE buffer) decoded straight
//! into the three typed tables of [`crate::spe_tables`]. Whatever stops the decode, the tables
//! are closed first so they keep every record decoded before it; the outcome says what was
//! written, what was lost, and why the tables are incomplete when they are.

use crate::spe_tables::{SpeRowMap, SpeTableWriter};
use crate::table::{TableCompression, TableError, TableFormat};
use crate::DecodeSummary;
use spelunk_decode::{ContainerLosses, DecodeOptions, DecodePlan, PipelineError};
use spelunk_perf::PerfDataFile;
use spelunk_spe::Interpretation;
use spelunk_spe::{DecodeIssue, RecordDecoder, SpeSample};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What a decode wrote.
#[derive(Debug)]
pub struct DecodedTables {
    pub summary: DecodeSummary,
    /// Each table written, with its rows.
    pub outputs: Vec<(PathBuf, u64)>,
    /// Undecodable bytes, in file order.
    pub issues: Vec<DecodeIssue>,
    /// Why the tables stop short of the input, when they do: the caller shows them, then
    /// fails with this.
    pub incomplete: Option<TablesError>,
}

/// Why a decode wrote nothing, or stopped early.
#[derive(Debug, thiserror::Error)]
pub enum TablesError {
    #[error(transparent)]
    Table(#[from] TableError),
    #[error("decoding stopped; the tables hold the records decoded before the error")]
    Stopped(#[source] PipelineError<TableError>),
    #[error("{path}: {bytes} bytes of SPE data held no complete record{first}{damage}")]
    NoRecords {
        path: String,
        bytes: u64,
        /// "; first undecodable byte at offset N: ..." or empty.
        first: String,
        /// "; the recording is damaged: ..." or empty.
        damage: String,
    },
    #[error(
        "{path}: damaged recording ({message}); the tables hold everything decoded before the damage"
    )]
    Damaged { path: String, message: String },
    #[error("{path}: {what}")]
    Io {
        path: PathBuf,
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: this is a perf.data file, not a raw SPE buffer; drop --raw", path = .0.display())]
    PerfDataAsRaw(PathBuf),
    #[error(
        "{path}: no SPE records found in {bytes} bytes{first} — is this really a raw SPE buffer?",
        path = .path.display()
    )]
    NoRawRecords {
        path: PathBuf,
        bytes: u64,
        first: String,
    },
    #[error(transparent)]
    Perf(#[from] spelunk_perf::PerfError),
    /// `--cpu-model` or `--midr` refused.
    #[error(transparent)]
    Options(#[from] spelunk_engine::recording::RecordingError),
}

/// What `spelunk decode` decodes, and into what.
#[derive(Clone, Debug)]
pub struct DecodeRequest {
    /// A perf.data, or a raw SPE buffer when `raw`.
    pub file: PathBuf,
    pub raw: bool,
    /// With `raw`: the CPU the buffer was recorded on (the cpu column).
    pub raw_cpu: Option<u32>,
    /// The tables' prefix ([`default_prefix`] of `file` unless the user gave one).
    pub prefix: PathBuf,
    pub format: TableFormat,
    pub compression: TableCompression,
    /// `--cpu-model` and `--midr` as given: interpret every CPU as this one.
    pub cpu_model: Option<String>,
    pub midr: Option<String>,
}

/// The default table prefix: `file`'s name without `.data` (`spe` when nothing is left).
pub fn default_prefix(file: &Path) -> PathBuf {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "spe".into());
    let stem = name.strip_suffix(".data").unwrap_or(&name);
    PathBuf::from(if stem.is_empty() { "spe" } else { stem })
}

/// The input of a decode, opened and checked before any table is created (so a wrong input
/// leaves no files behind), with its size known (for a progress bar).
pub enum DecodeInput {
    Raw(RawInput),
    Perf {
        file: Box<PerfDataFile>,
        /// SPE bytes to decode.
        total_bytes: u64,
    },
}

impl DecodeInput {
    pub fn open(req: &DecodeRequest) -> Result<DecodeInput, TablesError> {
        if req.raw {
            return Ok(DecodeInput::Raw(open_raw(&req.file)?));
        }
        let file = PerfDataFile::open_spe(&req.file)?;
        let total_bytes = file.require_spe_data()?;
        Ok(DecodeInput::Perf {
            file: Box::new(file),
            total_bytes,
        })
    }

    /// The bytes [`DecodeInput::decode`]'s progress counts up to.
    pub fn bytes(&self) -> u64 {
        match self {
            DecodeInput::Raw(r) => r.len,
            DecodeInput::Perf { total_bytes, .. } => *total_bytes,
        }
    }

    /// Decodes into the tables `req` names; `progress` gets the bytes decoded so far.
    pub fn decode(
        self,
        req: &DecodeRequest,
        progress: &dyn Fn(u64),
    ) -> Result<DecodedTables, TablesError> {
        let midr =
            || spelunk_engine::select::midr_override(req.cpu_model.as_deref(), req.midr.as_deref());
        let create =
            |interp| SpeTableWriter::create(&req.prefix, req.format, req.compression, interp);
        match self {
            DecodeInput::Raw(input) => {
                let writer = create(Interpretation::uniform(midr()?))?;
                raw_to_tables(input, req.raw_cpu, writer, progress)
            }
            DecodeInput::Perf { file, .. } => {
                let (plan, losses) = spelunk_decode::plan_from_perf(&file);
                let interp =
                    spelunk_engine::recording::interpretation(&file, &plan.streams, midr()?);
                perf_to_tables(&file, &plan, losses, create(interp)?, progress)
            }
        }
    }
}

/// Samples between progress updates (the caller's callback reads decoded bytes).
const PROGRESS_EVERY: u64 = 1 << 16;

/// Decodes a perf.data's SPE data (`plan` and `losses` from `spelunk_decode::plan_from_perf`)
/// into `writer`'s tables, in parallel per AUX stream. `progress` is called now and then with
/// the SPE bytes decoded so far. When no record at all was decoded the empty tables are removed.
pub fn perf_to_tables(
    file: &PerfDataFile,
    plan: &DecodePlan,
    losses: ContainerLosses,
    mut writer: SpeTableWriter,
    progress: &dyn Fn(u64),
) -> Result<DecodedTables, TablesError> {
    let interp = writer.interpretation().clone();
    let done_bytes = Arc::new(AtomicU64::new(0));
    let opts = DecodeOptions {
        progress: Some(done_bytes.clone()),
        ..Default::default()
    };
    // Per-record work (rows, summary counts) runs in the decode workers, one map per stream;
    // the merge only moves compact rows into the tables.
    let mut maps: Vec<SpeRowMap> = plan
        .streams
        .iter()
        .map(|_| SpeRowMap::new(interp.clone()))
        .collect();
    let mut n = 0u64;
    let result = spelunk_decode::decode_map(file, plan, &opts, &mut maps, |row| {
        n += 1;
        if n % PROGRESS_EVERY == 0 {
            progress(done_bytes.load(Ordering::Relaxed));
        }
        writer.push(row)
    });
    let mut summary = DecodeSummary {
        container: losses,
        ..Default::default()
    };
    for m in &maps {
        summary.merge(&m.summary);
    }
    // Whatever happens, keep what was decoded: close the tables first.
    let outputs = writer.finish()?;
    let outcome = match result {
        Ok(o) => o,
        Err(PipelineError::Sink(e)) => return Err(e.into()),
        Err(e) => {
            return Ok(DecodedTables {
                summary,
                outputs,
                issues: Vec::new(),
                incomplete: Some(TablesError::Stopped(e)),
            })
        }
    };
    summary.decode = outcome.stats;
    if summary.samples == 0 {
        remove_outputs(&outputs);
        return Err(TablesError::NoRecords {
            path: file.path().to_string(),
            bytes: file.spe_data_bytes(),
            first: first_issue(&outcome.issues),
            damage: file.damage_note(),
        });
    }
    // A damaged file still gets its tables, but the caller fails after showing them.
    let incomplete = file.damage().map(|p| TablesError::Damaged {
        path: file.path().to_string(),
        message: p.message.clone(),
    });
    Ok(DecodedTables {
        summary,
        outputs,
        issues: outcome.issues,
        incomplete,
    })
}

/// Reads raw buffers in chunks of this size (bounded memory whatever the file size).
const RAW_CHUNK: usize = 4 << 20;

/// A raw SPE byte buffer opened for [`raw_to_tables`] (before any table is created, so a
/// wrong input leaves no files behind).
pub struct RawInput {
    path: PathBuf,
    file: std::fs::File,
    /// Its size in bytes.
    pub len: u64,
}

/// Opens a raw buffer, refusing a perf.data given with `--raw`.
pub fn open_raw(path: &Path) -> Result<RawInput, TablesError> {
    let cannot_open = |source| TablesError::Io {
        path: path.to_path_buf(),
        what: "cannot open".into(),
        source,
    };
    spelunk_fsio::regular_file(path).map_err(cannot_open)?;
    let mut file = std::fs::File::open(path).map_err(cannot_open)?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut magic = [0u8; 8];
    if file.read_exact(&mut magic).is_ok() && (&magic == b"PERFILE2" || &magic == b"2ELIFREP") {
        return Err(TablesError::PerfDataAsRaw(path.to_path_buf()));
    }
    let file = std::fs::File::open(path).map_err(cannot_open)?;
    Ok(RawInput {
        path: path.to_path_buf(),
        file,
        len,
    })
}

/// Decodes a raw SPE byte buffer (no perf.data around it, e.g. WindowsPerf's) into `writer`'s
/// tables; `cpu` fills the cpu column. `progress` gets the bytes read so far.
pub fn raw_to_tables(
    input: RawInput,
    cpu: Option<u32>,
    mut writer: SpeTableWriter,
    progress: &dyn Fn(u64),
) -> Result<DecodedTables, TablesError> {
    let RawInput {
        path,
        mut file,
        len,
    } = input;
    let io = |what: String| {
        let path = path.clone();
        move |source| TablesError::Io { path, what, source }
    };
    let interp = writer.interpretation().clone();
    let mut summary = DecodeSummary::default();
    let mut decoder = RecordDecoder::new();
    let mut buf = vec![0u8; RAW_CHUNK];
    let mut records = Vec::new();
    let mut offset = 0u64;
    loop {
        let n =
            read_full(&mut file, &mut buf).map_err(io(format!("read failed at byte {offset}")))?;
        if n == 0 {
            break;
        }
        records.clear();
        decoder.feed(&buf[..n], offset, &mut records);
        for r in &records {
            let s = SpeSample {
                cpu,
                record: *r,
                ..Default::default()
            };
            summary.add(&s, &interp);
            writer.write(&s)?;
        }
        offset += n as u64;
        progress(offset);
    }
    decoder.finish();
    summary.decode = *decoder.stats();
    let outputs = writer.finish()?;
    if summary.samples == 0 {
        remove_outputs(&outputs);
        return Err(TablesError::NoRawRecords {
            path,
            bytes: len,
            first: first_issue(decoder.issues()),
        });
    }
    Ok(DecodedTables {
        summary,
        outputs,
        issues: decoder.issues().to_vec(),
        incomplete: None,
    })
}

fn first_issue(issues: &[DecodeIssue]) -> String {
    issues
        .first()
        .map(|i| {
            format!(
                "; first undecodable byte at offset {}: {}",
                i.offset, i.error
            )
        })
        .unwrap_or_default()
}

fn remove_outputs(outputs: &[(PathBuf, u64)]) {
    for (p, _) in outputs {
        let _ = std::fs::remove_file(p);
    }
}

fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// The closing text of `spelunk decode`: the summary, the first undecodable bytes, the tables.
pub fn render_decoded(t: &DecodedTables, input: &Path) -> String {
    let mut s = t.summary.render_text();
    for i in t.issues.iter().take(5) {
        s += &format!("  {}: byte {}: {}\n", input.display(), i.offset, i.error);
    }
    s += "wrote:\n";
    for (p, n) in &t.outputs {
        s += &format!("  {} ({} rows)\n", p.display(), n);
    }
    s
}

#[cfg(test)]
mod prefix_tests {
    use super::default_prefix;
    use std::path::{Path, PathBuf};

    /// spe-parser's naming: the recording's name without `.data` (docs/decode.md).
    #[test]
    fn the_default_prefix_drops_data() {
        assert_eq!(
            default_prefix(Path::new("/tmp/run1.data")),
            PathBuf::from("run1")
        );
        assert_eq!(
            default_prefix(Path::new("trace.bin")),
            PathBuf::from("trace.bin")
        );
        assert_eq!(default_prefix(Path::new(".data")), PathBuf::from("spe"));
        assert_eq!(default_prefix(Path::new("/")), PathBuf::from("spe"));
    }
}
