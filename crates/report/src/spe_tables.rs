//! Decoded SPE samples as three tables, mirroring Arm spe-parser's output so existing notebooks
//! keep working: `PREFIX-ldst`, `PREFIX-br`, `PREFIX-other`, with spe-parser's column names —
//! but typed: addresses are u64 (virtual addresses sign-extended from bit 55, as perf prints
//! them), events are a bitmask (`event_bits`) plus spe-parser's `:`-joined names (`event`), and
//! absent fields are null rather than 0. spelunk adds `pid`, `tid`, `time_ns`, `exec_lat`
//! (derived execution latency), `data_source_raw` and a few typed operation details.
//! Every column is defined in docs/decode.md.

use crate::table::{
    ColumnDef, ColumnKind::*, Columns, TableCompression, TableError, TableFormat, TableOptions,
    TableWriter,
};
use parquet::data_type::ByteArray;
use spelunk_spe::{
    CallReturn, CpuInterpretation, DataSource, ImpDefEventNames, Interpretation, LoadStoreKind,
    OpClass, Operation, SpeSample,
};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};

const fn col(name: &'static str, kind: crate::table::ColumnKind, nullable: bool) -> ColumnDef {
    ColumnDef::new(name, kind, nullable)
}

/// Columns of `PREFIX-ldst`: loads, stores and atomics.
pub const LDST_COLUMNS: &[ColumnDef] = &[
    col("cpu", U32, true),
    col("op", Text, false),
    col("pc", U64, true),
    col("el", U8, true),
    col("atomic", Bool, false),
    col("excl", Bool, false),
    col("ar", Bool, false),
    col("subclass", Text, false),
    col("event", Text, false),
    col("event_bits", U64, true),
    col("issue_lat", U16, true),
    col("total_lat", U16, true),
    col("exec_lat", U16, true),
    col("vaddr", U64, true),
    col("vaddr_tag", U8, true),
    col("xlat_lat", U16, true),
    col("paddr", U64, true),
    col("data_source", Text, true),
    col("data_source_raw", U64, true),
    col("sve_evl", U16, true),
    col("sve_pred", Bool, true),
    col("sve_sg", Bool, true),
    col("context", U32, true),
    col("ts", U64, true),
    col("pid", U32, true),
    col("tid", U32, true),
    col("time_ns", U64, true),
];

/// Columns of `PREFIX-br`: branches and exception returns.
pub const BRANCH_COLUMNS: &[ColumnDef] = &[
    col("cpu", U32, true),
    col("op", Text, false),
    col("pc", U64, true),
    col("el", U8, true),
    col("condition", Bool, false),
    col("indirect", Bool, false),
    col("call_return", Text, true),
    col("gcs", Bool, false),
    col("event", Text, false),
    col("event_bits", U64, true),
    col("issue_lat", U16, true),
    col("total_lat", U16, true),
    col("br_tgt", U64, true),
    col("br_tgt_lvl", U8, true),
    col("pbt", U64, true),
    col("pbt_lvl", U8, true),
    col("context", U32, true),
    col("ts", U64, true),
    col("pid", U32, true),
    col("tid", U32, true),
    col("time_ns", U64, true),
];

/// Columns of `PREFIX-other`: everything else (and records without an Operation Type packet).
pub const OTHER_COLUMNS: &[ColumnDef] = &[
    col("cpu", U32, true),
    col("op", Text, true),
    col("pc", U64, true),
    col("el", U8, true),
    col("subclass", Text, true),
    col("sve_evl", U16, true),
    col("sve_pred", Bool, true),
    col("sve_fp", Bool, true),
    col("condition", Bool, true),
    col("event", Text, false),
    col("event_bits", U64, true),
    col("issue_lat", U16, true),
    col("total_lat", U16, true),
    col("context", U32, true),
    col("ts", U64, true),
    col("pid", U32, true),
    col("tid", U32, true),
    col("time_ns", U64, true),
];

/// Which of the three tables a sample belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpeTable {
    LoadStore,
    Branch,
    Other,
}

impl SpeTable {
    pub fn of(sample: &SpeSample) -> SpeTable {
        match sample.record.op.map(|o| o.class()) {
            Some(OpClass::LoadStore) => SpeTable::LoadStore,
            Some(OpClass::Branch) => SpeTable::Branch,
            _ => SpeTable::Other,
        }
    }

    /// File-name suffix, as spe-parser names its outputs.
    pub fn suffix(self) -> &'static str {
        match self {
            SpeTable::LoadStore => "ldst",
            SpeTable::Branch => "br",
            SpeTable::Other => "other",
        }
    }

    pub fn columns(self) -> &'static [ColumnDef] {
        match self {
            SpeTable::LoadStore => LDST_COLUMNS,
            SpeTable::Branch => BRANCH_COLUMNS,
            SpeTable::Other => OTHER_COLUMNS,
        }
    }
}

/// Caches the text cells that repeat across rows so rows cost no allocation. Cells point at
/// static bytes (cloning and dropping them is free, no reference counting): fixed names are
/// static already, and distinct event-name strings are leaked once each, up to
/// [`MAX_LEAKED_EVENT_NAMES`]; past that (only corrupt data has so many distinct event sets) they
/// are ordinary shared buffers.
#[derive(Default)]
struct TextCache {
    events: HashMap<(u64, ImpDefEventNames), ByteArray, BuildHasherDefault<FastHasher>>,
    leaked: usize,
}

/// A multiply-rotate hasher (the FxHash scheme) for the per-row event-name cache: keys are
/// small integers from our own decode, so SipHash's DoS resistance buys nothing here.
#[derive(Default)]
struct FastHasher(u64);

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

/// Bound on the distinct event-name strings made static per process.
pub const MAX_LEAKED_EVENT_NAMES: usize = 4096;

fn static_cell(s: &'static str) -> ByteArray {
    ByteArray::from(bytes::Bytes::from_static(s.as_bytes()))
}

impl TextCache {
    fn s(&mut self, s: &'static str) -> ByteArray {
        static_cell(s)
    }
    fn events(&mut self, bits: u64, imp: ImpDefEventNames) -> ByteArray {
        if let Some(c) = self.events.get(&(bits, imp)) {
            return c.clone();
        }
        let text = spelunk_spe::Events(bits).join(&imp, ":");
        let cell = if self.leaked < MAX_LEAKED_EVENT_NAMES {
            self.leaked += 1;
            static_cell(Box::leak(text.into_boxed_str()))
        } else {
            ByteArray::from(text.as_str())
        };
        self.events.insert((bits, imp), cell.clone());
        cell
    }
    fn data_source(&mut self, ds: DataSource) -> ByteArray {
        match ds {
            DataSource::Unknown(_) => ByteArray::from(ds.to_string().as_str()),
            known => static_cell(known.name()),
        }
    }
}

/// Appends values to a table's columns in order.
struct Cursor<'a> {
    cols: &'a mut Columns,
    i: usize,
}

impl Cursor<'_> {
    fn u64(&mut self, v: Option<u64>) {
        self.cols.u64(self.i, v);
        self.i += 1;
    }
    fn u32(&mut self, v: Option<u32>) {
        self.cols.u32(self.i, v);
        self.i += 1;
    }
    fn u16(&mut self, v: Option<u16>) {
        self.cols.u16(self.i, v);
        self.i += 1;
    }
    fn u8(&mut self, v: Option<u8>) {
        self.cols.u8(self.i, v);
        self.i += 1;
    }
    fn bool(&mut self, v: Option<bool>) {
        self.cols.bool(self.i, v);
        self.i += 1;
    }
    fn text(&mut self, v: Option<ByteArray>) {
        self.cols.text(self.i, v);
        self.i += 1;
    }
}

/// Turns samples into rows of the three tables.
#[derive(Default)]
pub struct RowBuilder {
    cache: TextCache,
}

impl RowBuilder {
    /// Appends `s` as one row of table [`SpeTable::of`]`(s)` to `cols` (that table's columns);
    /// returns the number of values appended (the table's column count).
    pub fn append(
        &mut self,
        s: &SpeSample,
        interp: &CpuInterpretation,
        cols: &mut Columns,
    ) -> usize {
        let r = &s.record;
        let op = r.op.map(|o| o.operation());
        let c = &mut self.cache;
        let mut w = Cursor { cols, i: 0 };
        w.u32(s.cpu);
        let event_bits = r.events.map(|e| e.0);
        let event = c.events(event_bits.unwrap_or(0), interp.imp_def);
        let pc = r.pc.map(|a| a.va());
        let el = r.pc.map(|a| a.el());
        match (SpeTable::of(s), op) {
            (SpeTable::LoadStore, Some(Operation::LoadStore { store, kind })) => {
                let (atomic, excl, ar) = match kind {
                    LoadStoreKind::Extended {
                        atomic,
                        exclusive,
                        acquire_release,
                    } => (atomic, exclusive, acquire_release),
                    _ => (false, false, false),
                };
                let (evl, pred, sg) = match kind {
                    LoadStoreKind::SveSme {
                        evl_bits,
                        predicated,
                        gather_scatter,
                    } => (Some(evl_bits), Some(predicated), Some(gather_scatter)),
                    _ => (None, None, None),
                };
                let ds = interp
                    .data_source
                    .resolve(r.data_source, r.events)
                    .map(|(d, _)| d);
                w.text(Some(c.s(if store { "ST" } else { "LD" })));
                w.u64(pc);
                w.u8(el);
                w.bool(Some(atomic));
                w.bool(Some(excl));
                w.bool(Some(ar));
                w.text(Some(c.s(kind.subclass_name())));
                w.text(Some(event));
                w.u64(event_bits);
                w.u16(r.issue_latency_cycles);
                w.u16(r.total_latency_cycles);
                w.u16(r.derived_execution_latency());
                w.u64(r.data_va.map(|a| a.va()));
                w.u8(r.data_va.map(|a| a.tag()));
                w.u16(r.translation_latency_cycles);
                w.u64(r.data_pa.map(|a| a.pa()));
                w.text(ds.map(|d| c.data_source(d)));
                w.u64(r.data_source);
                w.u16(evl);
                w.bool(pred);
                w.bool(sg);
            }
            (
                SpeTable::Branch,
                Some(Operation::Branch {
                    conditional,
                    indirect,
                    gcs,
                    call_return,
                }),
            ) => {
                let cr = match call_return {
                    CallReturn::None => None,
                    CallReturn::Call => Some(c.s("CALL")),
                    CallReturn::Return => Some(c.s("RETURN")),
                    CallReturn::Other => Some(c.s("OTHER")),
                };
                w.text(Some(c.s("B")));
                w.u64(pc);
                w.u8(el);
                w.bool(Some(conditional));
                w.bool(Some(indirect));
                w.text(cr);
                w.bool(Some(gcs));
                w.text(Some(event));
                w.u64(event_bits);
                w.u16(r.issue_latency_cycles);
                w.u16(r.total_latency_cycles);
                w.u64(r.branch_target.map(|a| a.va()));
                w.u8(r.branch_target.map(|a| a.el()));
                w.u64(r.prev_branch_target.map(|a| a.va()));
                w.u8(r.prev_branch_target.map(|a| a.el()));
            }
            (_, op) => {
                let (name, subclass, evl, pred, fp, cond): (
                    Option<&'static str>,
                    Option<&'static str>,
                    _,
                    _,
                    _,
                    _,
                ) = match op {
                    Some(Operation::Other {
                        conditional,
                        floating_point,
                        ..
                    }) => (
                        Some("OTHER"),
                        Some("OTHER"),
                        None,
                        None,
                        Some(floating_point),
                        Some(conditional),
                    ),
                    Some(Operation::SveOther {
                        evl_bits,
                        predicated,
                        floating_point,
                    }) => (
                        Some("OTHER"),
                        Some("SVE"),
                        Some(evl_bits),
                        Some(predicated),
                        Some(floating_point),
                        None,
                    ),
                    Some(Operation::SmeOther { floating_point, .. }) => (
                        Some("OTHER"),
                        Some("SME"),
                        None,
                        None,
                        Some(floating_point),
                        None,
                    ),
                    Some(Operation::OtherUnknown(_)) => {
                        (Some("OTHER"), Some("UNKNOWN"), None, None, None, None)
                    }
                    Some(Operation::Reserved { .. }) => {
                        (Some("RESERVED"), None, None, None, None, None)
                    }
                    // Unreachable by construction of SpeTable::of; kept total.
                    Some(Operation::LoadStore { .. }) | Some(Operation::Branch { .. }) | None => {
                        (None, None, None, None, None, None)
                    }
                };
                w.text(name.map(|n| c.s(n)));
                w.u64(pc);
                w.u8(el);
                w.text(subclass.map(|n| c.s(n)));
                w.u16(evl);
                w.bool(pred);
                w.bool(fp);
                w.bool(cond);
                w.text(Some(event));
                w.u64(event_bits);
                w.u16(r.issue_latency_cycles);
                w.u16(r.total_latency_cycles);
            }
        }
        w.u32(r.context_tid());
        w.u64(r.timestamp);
        w.u32(s.pid);
        w.u32(s.tid);
        w.u64(s.time_ns);
        w.i
    }
}

/// Writes samples to `PREFIX-ldst.EXT`, `PREFIX-br.EXT` and `PREFIX-other.EXT`.
///
/// Each table is written by its own thread (rows are built and encoded there), fed with
/// batches of samples; the caller's thread only routes samples. The tables are independent
/// files, so this parallelises the expensive part (row building, Parquet encoding and
/// compression) without any ordering concern. Memory is bounded by the channel depth.
pub struct SpeTableWriter {
    tables: Vec<TableThread>,
    interp: Interpretation,
}

struct TableThread {
    batch: Vec<SpeSample>,
    tx: Option<std::sync::mpsc::SyncSender<Vec<SpeSample>>>,
    handle: Option<std::thread::JoinHandle<Result<(PathBuf, u64), TableError>>>,
    path: PathBuf,
}

/// Columns that get Parquet min/max statistics: what analyses filter on (time, CPU, thread, code
/// and data addresses).
pub const STATISTICS_COLUMNS: &[&str] = &[
    "cpu", "pc", "vaddr", "paddr", "br_tgt", "ts", "time_ns", "pid", "tid", "context",
];

/// Samples per batch handed to a table thread.
const TABLE_BATCH: usize = 4096;
/// Batches queued per table thread.
const TABLE_QUEUE: usize = 4;

impl SpeTableWriter {
    /// The three file paths for `prefix` and `format`.
    pub fn paths(prefix: &Path, format: TableFormat) -> [PathBuf; 3] {
        let p = |t: SpeTable| {
            let mut s = prefix.as_os_str().to_owned();
            s.push(format!("-{}.{}", t.suffix(), format.extension()));
            PathBuf::from(s)
        };
        [
            p(SpeTable::LoadStore),
            p(SpeTable::Branch),
            p(SpeTable::Other),
        ]
    }

    pub fn create(
        prefix: &Path,
        format: TableFormat,
        compression: TableCompression,
        interp: Interpretation,
    ) -> Result<Self, TableError> {
        let [l, b, o] = Self::paths(prefix, format);
        let options = TableOptions {
            compression,
            statistics_for: STATISTICS_COLUMNS,
        };
        let mut tables = Vec::new();
        for (path, name, columns) in [
            (l, "spe_ldst", LDST_COLUMNS),
            (b, "spe_br", BRANCH_COLUMNS),
            (o, "spe_other", OTHER_COLUMNS),
        ] {
            let mut writer = TableWriter::create(&path, name, columns, format, options)?;
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<SpeSample>>(TABLE_QUEUE);
            let interp = interp.clone();
            let handle = std::thread::Builder::new()
                .name(format!("write {name}"))
                .spawn(move || {
                    let mut rows = RowBuilder::default();
                    for batch in rx {
                        for s in &batch {
                            rows.append(s, interp.for_cpu(s.cpu), writer.columns());
                            writer.end_row()?;
                        }
                    }
                    let path = writer.path().to_path_buf();
                    Ok((path, writer.finish()?))
                })
                .map_err(|source| TableError::Io {
                    path: path.clone(),
                    source,
                })?;
            tables.push(TableThread {
                batch: Vec::with_capacity(TABLE_BATCH),
                tx: Some(tx),
                handle: Some(handle),
                path,
            });
        }
        Ok(SpeTableWriter { tables, interp })
    }

    /// How this writer interprets each CPU's records.
    pub fn interpretation(&self) -> &Interpretation {
        &self.interp
    }

    pub fn write(&mut self, s: &SpeSample) -> Result<(), TableError> {
        let i = match SpeTable::of(s) {
            SpeTable::LoadStore => 0,
            SpeTable::Branch => 1,
            SpeTable::Other => 2,
        };
        let t = &mut self.tables[i];
        t.batch.push(*s);
        if t.batch.len() >= TABLE_BATCH {
            let full = std::mem::replace(&mut t.batch, Vec::with_capacity(TABLE_BATCH));
            let sent =
                t.tx.as_ref()
                    .map(|tx| tx.send(full).is_ok())
                    .unwrap_or(false);
            if !sent {
                // The table thread stopped: report its error.
                return Err(Self::join(t).err().unwrap_or_else(|| TableError::Io {
                    path: t.path.clone(),
                    source: std::io::Error::other("table writer thread stopped"),
                }));
            }
        }
        Ok(())
    }

    fn join(t: &mut TableThread) -> Result<(PathBuf, u64), TableError> {
        t.tx = None;
        match t.handle.take().map(|h| h.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(TableError::Io {
                path: t.path.clone(),
                source: std::io::Error::other("table writer thread panicked (bug)"),
            }),
            None => Err(TableError::Io {
                path: t.path.clone(),
                source: std::io::Error::other("table already closed"),
            }),
        }
    }

    /// Flushes and closes the files; returns (path, rows) for each.
    pub fn finish(mut self) -> Result<Vec<(PathBuf, u64)>, TableError> {
        let mut out = Vec::new();
        let mut first_err = None;
        for t in &mut self.tables {
            if !t.batch.is_empty() {
                let b = std::mem::take(&mut t.batch);
                if let Some(tx) = &t.tx {
                    let _ = tx.send(b);
                }
            }
            match Self::join(t) {
                Ok(r) => out.push(r),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_fill_every_column_of_their_table() {
        use spelunk_spe::{CodeAddress, Events, OpType, SpeRecord};
        let interp = CpuInterpretation::for_midr(Some(spelunk_spe::CpuModel::NeoverseN1.midr()));
        let mut rb = RowBuilder::default();
        let dir = std::env::temp_dir().join(format!("spelunk-rowshape-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut samples: Vec<(SpeSample, SpeTable)> = [
            (1u8, 0u8, SpeTable::LoadStore),
            (1, 0x16, SpeTable::LoadStore),
            (1, 0xbc, SpeTable::LoadStore),
            (2, 1, SpeTable::Branch),
            (2, 0x12, SpeTable::Branch),
            (0, 0, SpeTable::Other),
            (0, 0x2e, SpeTable::Other),
            (0, 0x88, SpeTable::Other),
            (3, 0, SpeTable::Other),
        ]
        .iter()
        .map(|&(class, payload, table)| {
            let s = SpeSample {
                record: SpeRecord {
                    pc: Some(CodeAddress::new(0x1000, 0, true)),
                    op: Some(OpType::new(class, payload)),
                    events: Some(Events(2)),
                    ..Default::default()
                },
                ..Default::default()
            };
            (s, table)
        })
        .collect();
        samples.push((SpeSample::default(), SpeTable::Other));
        for (s, table) in samples {
            assert_eq!(SpeTable::of(&s), table);
            let path = dir.join(format!("{}.csv", table.suffix()));
            let mut w = TableWriter::create(
                &path,
                "t",
                table.columns(),
                TableFormat::Csv,
                Default::default(),
            )
            .unwrap();
            let n = rb.append(&s, &interp, w.columns());
            assert_eq!(n, table.columns().len(), "{table:?} {:?}", s.record.op);
            w.end_row().unwrap();
            w.finish().unwrap();
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
