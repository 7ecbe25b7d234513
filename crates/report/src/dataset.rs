//! `spelunk export FILE --dataset DIR`: a recording appended to a Hive-partitioned Parquet
//! dataset, for analysis of many recordings (a fleet) on DuckDB, Spark, pyarrow or polars.
//!
//! Layout (docs/dataset.md):
//!
//! ```text
//! DIR/_spelunk_dataset.json          format and version of the dataset (written once)
//! DIR/host=HOST/run=RUN/samples.parquet
//! DIR/host=HOST/run=RUN/_run.json    where the partition came from
//! ```
//!
//! A partition is written into a staging directory under DIR whose name starts with `.` (which
//! Hive-style readers skip, and which no `host=*/run=*` pattern matches) and renamed into place
//! when complete, so readers never see half a partition; an existing partition is never
//! written over (appending never rewrites earlier partitions). The rows are symbolized and
//! attributed ([`spelunk_engine::sample_rows`]), so queries need no binaries.

use crate::table::{ColumnDef, ColumnKind, TableCompression, TableError, TableFormat};
use crate::table::{TableOptions, TableWriter, TextId};
use spelunk_analysis::objects::DataObjects;
use spelunk_analysis::symbolize::CodeSymbolizer;
use spelunk_engine::recording::{Recording, RecordingError};
use spelunk_engine::sample_rows::{SampleColumn, SampleRows, SAMPLE_COLUMNS};
use spelunk_engine::samples::SampleAttributor;
use spelunk_spe::SpeSample;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The dataset format's version: readers refuse versions they do not know; a change of
/// columns' meaning or type is a new version (added columns are not).
pub const DATASET_VERSION: u32 = 1;
/// The file at the dataset's root naming its format and version.
pub const DATASET_MARKER: &str = "_spelunk_dataset.json";
/// The samples of one partition.
pub const SAMPLES_FILE: &str = "samples.parquet";
/// What one partition was made from.
pub const RUN_FILE: &str = "_run.json";

/// Samples attributed per batch (one symbolization call per batch's unique PCs).
const BATCH: usize = 1 << 16;

/// Where in the dataset a recording goes.
#[derive(Clone, Debug)]
pub struct Partition {
    pub host: String,
    pub run: String,
}

impl Partition {
    /// The partition of the recording `rec` read from `file`: `host` or else the host named
    /// in the recording's header, `run` or else `file`'s name without `.data`.
    pub fn for_recording(
        rec: &Recording,
        file: &Path,
        host: Option<String>,
        run: Option<String>,
    ) -> Result<Partition, DatasetError> {
        let host = match host.or_else(|| rec.file.features.hostname.clone()) {
            Some(h) => h,
            None => return Err(DatasetError::NoHost(file.to_path_buf())),
        };
        let run = run.unwrap_or_else(|| {
            let name = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            name.strip_suffix(".data").unwrap_or(&name).to_string()
        });
        Ok(Partition { host, run })
    }
}

/// What an export wrote.
#[derive(Debug)]
pub struct Exported {
    /// The partition's directory (`DIR/host=HOST/run=RUN`).
    pub partition: PathBuf,
    pub rows: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("{path}: {what}: {source}", path = .path.display())]
    Io {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Table(#[from] TableError),
    #[error(transparent)]
    Recording(#[from] RecordingError),
    #[error(
        "{path} exists: a dataset's partitions are never written over; give another --run \
         (or --host), or delete that directory first",
        path = .0.display()
    )]
    Exists(PathBuf),
    #[error(
        "{path}: {found}, not a spelunk dataset of version {DATASET_VERSION}: give a new \
         directory, or one written by this version of spelunk",
        path = .path.display()
    )]
    NotADataset { path: PathBuf, found: String },
    #[error("{input}: no samples to export{note}")]
    NoSamples { input: String, note: String },
    #[error("--{what} must not be empty")]
    EmptyName { what: &'static str },
    #[error("{path}: the recording does not name its host; give --host NAME", path = .0.display())]
    NoHost(PathBuf),
}

/// The table's columns: the sample rows' (a list of phases becomes text, `;`-joined).
fn columns() -> &'static [ColumnDef] {
    static COLUMNS: OnceLock<Vec<ColumnDef>> = OnceLock::new();
    COLUMNS.get_or_init(|| {
        SAMPLE_COLUMNS
            .iter()
            .map(|&(name, c)| {
                let kind = match c {
                    SampleColumn::U64 => ColumnKind::U64,
                    SampleColumn::U32 => ColumnKind::U32,
                    SampleColumn::U16 => ColumnKind::U16,
                    SampleColumn::U8 => ColumnKind::U8,
                    SampleColumn::Text | SampleColumn::TextList => ColumnKind::Text,
                };
                ColumnDef::new(name, kind, true)
            })
            .collect()
    })
}

/// A partition value as a directory name: letters, digits, `.`, `_` and `-` kept, every other
/// byte `%XX` (Hive's escaping, which DuckDB and Spark undo when they read the value).
pub fn escape_partition_value(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

/// The partition directory of `part` under `dir`.
pub fn partition_dir(dir: &Path, part: &Partition) -> PathBuf {
    dir.join(format!("host={}", escape_partition_value(&part.host)))
        .join(format!("run={}", escape_partition_value(&part.run)))
}

/// A dataset marker is a line of JSON; anything larger is not one.
const MAX_MARKER_BYTES: u64 = 64 << 10;

/// Creates `dir` as a dataset, or checks that it is one of this version.
fn open_dataset(dir: &Path) -> Result<(), DatasetError> {
    let io = |what| {
        move |source| DatasetError::Io {
            path: dir.to_path_buf(),
            what,
            source,
        }
    };
    std::fs::create_dir_all(dir).map_err(io("cannot create the dataset directory"))?;
    let marker = dir.join(DATASET_MARKER);
    let want = serde_json::json!({"format": "spelunk-dataset", "version": DATASET_VERSION});
    // Read only as a regular file inside the dataset: a FIFO there would block for ever, a
    // link could lead elsewhere.
    spelunk_fsio::check_within(dir, &marker).map_err(io("cannot use the dataset marker"))?;
    match spelunk_fsio::read_bounded(&marker, MAX_MARKER_BYTES) {
        Ok(bytes) => {
            let found: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
            if found != want {
                return Err(DatasetError::NotADataset {
                    path: marker,
                    found: format!("holds {found}"),
                });
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Not a dataset yet: only an empty directory (or one holding partitions) becomes one.
            let stray = std::fs::read_dir(dir)
                .map_err(io("cannot list the dataset directory"))?
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .find(|n| !n.starts_with("host=") && !n.starts_with('.'));
            if let Some(name) = stray {
                return Err(DatasetError::NotADataset {
                    path: dir.to_path_buf(),
                    found: format!(
                        "a directory holding other files ({name}) and no {DATASET_MARKER}"
                    ),
                });
            }
            spelunk_fsio::write_atomic(&marker, format!("{want:#}\n").as_bytes()).map_err(
                |source| DatasetError::Io {
                    path: marker.clone(),
                    what: "cannot write",
                    source,
                },
            )
        }
        Err(source) => Err(DatasetError::Io {
            path: marker,
            what: "cannot read",
            source,
        }),
    }
}

/// Appends `rec` to the dataset at `dir` as partition `part`. `source` names the recording in
/// the partition's `_run.json`; `progress` gets the samples written so far.
pub fn export(
    rec: &Recording,
    objects: &DataObjects,
    symbolizer: &mut CodeSymbolizer,
    dir: &Path,
    part: &Partition,
    source: &str,
    progress: &dyn Fn(u64),
) -> Result<Exported, DatasetError> {
    for (what, v) in [("host", &part.host), ("run", &part.run)] {
        if v.is_empty() {
            return Err(DatasetError::EmptyName { what });
        }
    }
    open_dataset(dir)?;
    let final_dir = partition_dir(dir, part);
    if final_dir.exists() {
        return Err(DatasetError::Exists(final_dir));
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let staging = dir.join(format!(".staging-{}-{nanos}", std::process::id()));
    std::fs::create_dir(&staging).map_err(|source| DatasetError::Io {
        path: staging.clone(),
        what: "cannot create the staging directory",
        source,
    })?;
    let result = write_partition(rec, objects, symbolizer, &staging, part, source, progress)
        .and_then(|rows| {
            if rows == 0 {
                return Err(DatasetError::NoSamples {
                    input: source.to_string(),
                    note: rec.damage_note(),
                });
            }
            publish(&staging, &final_dir).map(|()| rows)
        });
    match result {
        Ok(rows) => Ok(Exported {
            partition: final_dir,
            rows,
        }),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            Err(e)
        }
    }
}

/// Moves the complete partition into place; refuses when another export got there first.
fn publish(staging: &Path, final_dir: &Path) -> Result<(), DatasetError> {
    let host_dir = final_dir.parent().unwrap_or(final_dir);
    let dataset = host_dir.parent().unwrap_or(host_dir);
    // Never through a link out of the dataset (`host=NAME` planted as a symlink elsewhere).
    spelunk_fsio::create_dir_within(dataset, host_dir)
        .and_then(|()| spelunk_fsio::check_within(dataset, final_dir))
        .map_err(|source| DatasetError::Io {
            path: host_dir.to_path_buf(),
            what: "cannot create",
            source,
        })?;
    if final_dir.exists() {
        return Err(DatasetError::Exists(final_dir.to_path_buf()));
    }
    // rename(2) of a directory onto an existing non-empty one fails: never a merge.
    std::fs::rename(staging, final_dir).map_err(|source| {
        if final_dir.exists() {
            DatasetError::Exists(final_dir.to_path_buf())
        } else {
            DatasetError::Io {
                path: final_dir.to_path_buf(),
                what: "cannot move the partition into place",
                source,
            }
        }
    })
}

fn write_partition(
    rec: &Recording,
    objects: &DataObjects,
    symbolizer: &mut CodeSymbolizer,
    staging: &Path,
    part: &Partition,
    source: &str,
    progress: &dyn Fn(u64),
) -> Result<u64, DatasetError> {
    let options = TableOptions {
        compression: TableCompression::Lz4,
        statistics_for: &["time_ns", "cpu", "pid", "tid", "pc", "vaddr", "total_lat"],
        delta_for: &["time_ns", "ts"],
    };
    let mut table = TableWriter::create(
        &staging.join(SAMPLES_FILE),
        "samples",
        columns(),
        TableFormat::Parquet,
        options,
    )?;
    let mut attributor = SampleAttributor::new(rec, objects, symbolizer);
    let mut rows = SampleRows::new(rec);
    let mut pending: Vec<SpeSample> = Vec::with_capacity(BATCH);
    let mut failed: Option<TableError> = None;
    let mut flush = |pending: &mut Vec<SpeSample>, table: &mut TableWriter| {
        let attrs = attributor.attribute(pending);
        for (s, a) in pending.iter().zip(&attrs) {
            if failed.is_some() {
                break;
            }
            if let Err(e) = write_row(table, &rows.row(s, a)) {
                failed = Some(e);
            }
        }
        pending.clear();
        progress(table.rows());
    };
    let stats = rec.decode(|s| {
        pending.push(*s);
        if pending.len() == BATCH {
            flush(&mut pending, &mut table);
        }
    })?;
    if !pending.is_empty() {
        flush(&mut pending, &mut table);
    }
    if let Some(e) = failed {
        return Err(e.into());
    }
    let n = table.finish()?;
    let meta = serde_json::json!({
        "host": part.host,
        "run": part.run,
        "source": source,
        "samples": n,
        // What the recording lost (a cut file, dropped records): a partition is never taken
        // for a complete run in silence.
        "losses": rec.losses(&stats),
        "dataset_version": DATASET_VERSION,
        "spelunk_version": env!("CARGO_PKG_VERSION"),
        "exported_unix_s": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    });
    let run_file = staging.join(RUN_FILE);
    spelunk_fsio::write_atomic(&run_file, format!("{meta:#}\n").as_bytes()).map_err(|source| {
        DatasetError::Io {
            path: run_file,
            what: "cannot write",
            source,
        }
    })?;
    Ok(n)
}

/// Appends one sample row, values in [`SAMPLE_COLUMNS`] order.
fn write_row(
    table: &mut TableWriter,
    r: &spelunk_engine::sample_rows::SampleRow<'_>,
) -> Result<(), TableError> {
    let cols = table.columns();
    let mut text = |v: Option<&str>| -> Option<TextId> { v.map(|s| cols.intern(s.as_bytes())) };
    let thread = text(r.thread);
    let op = text(r.op);
    let function = text(r.function.as_deref());
    let file = text(r.file);
    let dso = text(r.dso);
    let event = text(Some(r.event));
    let data_source = text(r.data_source.as_deref());
    let object = text(r.object);
    let object_kind = text(r.object_kind);
    let allocation_site = text(r.allocation_site);
    let phase = text(r.phase);
    let phases = (!r.phases.is_empty()).then(|| r.phases.join(";"));
    let phases = text(phases.as_deref());
    let mut w = cols.row();
    w.u64(r.time_ns);
    w.u32(r.cpu);
    w.u32(r.pid);
    w.u32(r.tid);
    w.text(thread);
    w.text(op);
    w.u64(r.pc);
    w.u8(r.el);
    w.text(function);
    w.u64(r.function_offset);
    w.text(file);
    w.u32(r.line);
    w.text(dso);
    w.text(event);
    w.u64(r.event_bits);
    w.u16(r.issue_lat);
    w.u16(r.total_lat);
    w.u16(r.xlat_lat);
    w.u16(r.exec_lat);
    w.u64(r.vaddr);
    w.u64(r.paddr);
    w.text(data_source);
    w.u64(r.data_source_raw);
    w.text(object);
    w.text(object_kind);
    w.u64(r.object_start);
    w.text(allocation_site);
    w.text(phase);
    w.text(phases);
    w.u64(r.br_tgt);
    w.u32(r.context);
    w.u64(r.ts);
    table.end_row()
}
