//! A typed table written to Parquet or CSV in bounded memory.
//!
//! Columns have a physical kind (unsigned integers of 8–64 bits, booleans, text) and may be
//! nullable; absent values are written as Parquet nulls / empty CSV fields, never as 0. Unsigned
//! integers use Parquet's `INTEGER(bits, unsigned)` logical type so pandas/pyarrow read them as
//! `uint64` etc.
//!
//! Values are appended into typed buffers ([`Columns`]): one value and one validity byte per
//! row and column, text as ids of interned strings ([`TextId`]), so an append is two stores and
//! no branch on the data. Fast producers append a row through [`Columns::row`] (values in column
//! order) and call [`TableWriter::end_row`]; others push rows of [`Cell`]s.
//!
//! Every [`ROW_GROUP_ROWS`] rows the buffers are handed to a small pool of encoder threads shared
//! by every table of the process, which turn them into a Parquet row group (each column chunk
//! encoded and compressed in memory) or into CSV text, while the producer fills fresh buffers.
//! A writer thread per file appends the encoded row groups in order. Memory stays bounded: the
//! pool's queue, the per-file queue and the recycled buffers are all of fixed depth.

use parquet::basic::{Compression, LogicalType, Repetition, Type as PhysicalType};
use parquet::column::writer::{get_column_writer, ColumnCloseResult, ColumnWriter};
use parquet::data_type::{ByteArray, DataType};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesPtr};
use parquet::file::writer::{SerializedFileWriter, SerializedPageWriter, TrackedWrite};
use parquet::schema::types::{ColumnDescPtr, ColumnPath, SchemaDescriptor, Type};
use spelunk_fsio::AtomicFile;
use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex, OnceLock};

/// Rows per Parquet row group / CSV flush (the memory bound of a table).
pub const ROW_GROUP_ROWS: usize = 128 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnKind {
    U64,
    U32,
    U16,
    U8,
    Bool,
    Text,
}

#[derive(Clone, Copy, Debug)]
pub struct ColumnDef {
    pub name: &'static str,
    pub kind: ColumnKind,
    pub nullable: bool,
}

impl ColumnDef {
    pub const fn new(name: &'static str, kind: ColumnKind, nullable: bool) -> Self {
        ColumnDef {
            name,
            kind,
            nullable,
        }
    }
}

/// One value, for producers that build rows (see [`TableWriter::push`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    U64(Option<u64>),
    U32(Option<u32>),
    U16(Option<u16>),
    U8(Option<u8>),
    Bool(Option<bool>),
    Text(Option<ByteArray>),
}

/// Compression of Parquet pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TableCompression {
    None,
    Snappy,
    #[default]
    Lz4,
}

/// How a table is written.
#[derive(Clone, Copy, Debug, Default)]
pub struct TableOptions {
    pub compression: TableCompression,
    /// Columns that get Parquet min/max statistics (for readers' predicate push-down; computing
    /// them costs a comparison per value, so only columns people filter on get them). Empty:
    /// every column.
    pub statistics_for: &'static [&'static str],
    /// 64-bit columns written with DELTA_BINARY_PACKED instead of PLAIN: for values that grow
    /// slowly from row to row (timestamps of time-ordered rows), whose deltas take a byte or two
    /// where PLAIN takes eight, so pages shrink and compress faster.
    pub delta_for: &'static [&'static str],
}

/// Output format of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableFormat {
    Parquet,
    Csv,
}

impl TableFormat {
    pub fn extension(self) -> &'static str {
        match self {
            TableFormat::Parquet => "parquet",
            TableFormat::Csv => "csv",
        }
    }
}

/// Errors writing a table, with the file involved.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: writing Parquet: {source}")]
    Parquet {
        path: PathBuf,
        source: parquet::errors::ParquetError,
    },
    #[error("{path}: a row has {got} values, the table has {want} columns (bug)")]
    RowShape {
        path: PathBuf,
        got: usize,
        want: usize,
    },
}

/// An interned text value of one table (see [`Columns::intern`]); cheap to copy and append.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TextId(u32);

/// One column's values since the last flush: a value per row (0 / false for nulls) and a
/// validity byte per row (1 present, 0 null). Nulls are squeezed out by the encoder thread.
#[derive(Default)]
struct Col<T> {
    vals: Vec<T>,
    valid: Vec<u8>,
}

impl<T: Copy + Default> Col<T> {
    fn with_capacity(n: usize) -> Self {
        Col {
            vals: Vec::with_capacity(n),
            valid: Vec::with_capacity(n),
        }
    }

    #[inline(always)]
    fn put(&mut self, v: Option<T>) {
        self.vals.push(v.unwrap_or_default());
        self.valid.push(u8::from(v.is_some()));
    }

    fn clear(&mut self) {
        self.vals.clear();
        self.valid.clear();
    }

    fn rows(&self) -> usize {
        if self.vals.len() == self.valid.len() {
            self.valid.len()
        } else {
            usize::MAX
        }
    }
}

/// Where a column's values are kept: Parquet's physical types, text as [`TextId`]s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Store {
    I64,
    I32,
    Bool,
    Text,
}

impl Store {
    fn of(kind: ColumnKind) -> Store {
        match kind {
            ColumnKind::U64 => Store::I64,
            ColumnKind::U32 | ColumnKind::U16 | ColumnKind::U8 => Store::I32,
            ColumnKind::Bool => Store::Bool,
            ColumnKind::Text => Store::Text,
        }
    }
}

/// The typed buffers of one row group, grouped by store; within a store, in column order.
#[derive(Default)]
struct Buffers {
    i64s: Vec<Col<i64>>,
    i32s: Vec<Col<i32>>,
    bools: Vec<Col<bool>>,
    texts: Vec<Col<u32>>,
}

impl Buffers {
    fn new(defs: &[ColumnDef]) -> Self {
        let mut b = Buffers::default();
        for d in defs {
            match Store::of(d.kind) {
                Store::I64 => b.i64s.push(Col::with_capacity(ROW_GROUP_ROWS)),
                Store::I32 => b.i32s.push(Col::with_capacity(ROW_GROUP_ROWS)),
                Store::Bool => b.bools.push(Col::with_capacity(ROW_GROUP_ROWS)),
                Store::Text => b.texts.push(Col::with_capacity(ROW_GROUP_ROWS)),
            }
        }
        b
    }

    fn clear(&mut self) {
        self.i64s.iter_mut().for_each(Col::clear);
        self.i32s.iter_mut().for_each(Col::clear);
        self.bools.iter_mut().for_each(Col::clear);
        self.texts.iter_mut().for_each(Col::clear);
    }

    /// Rows of the first column whose row count differs from `rows`, if any.
    fn shape_error(&self, rows: usize) -> Option<usize> {
        let counts = self.i64s.iter().map(Col::rows);
        let counts = counts.chain(self.i32s.iter().map(Col::rows));
        let counts = counts.chain(self.bools.iter().map(Col::rows));
        let mut counts = counts.chain(self.texts.iter().map(Col::rows));
        counts.find(|n| *n != rows)
    }
}

/// Distinct text values of a table, by id. Ids are stable until the dictionary is reset (when it
/// grows past [`MAX_TEXT_VALUES`] at a flush: only corrupt data has so many distinct strings);
/// producers that cache ids check [`Columns::text_generation`].
struct TextDict {
    values: Arc<Vec<ByteArray>>,
    ids: HashMap<Vec<u8>, u32>,
    generation: u64,
}

/// Bound on a table's distinct text values kept between flushes.
pub const MAX_TEXT_VALUES: usize = 1 << 16;

impl TextDict {
    fn new() -> Self {
        TextDict {
            values: Arc::new(Vec::new()),
            ids: HashMap::new(),
            generation: 0,
        }
    }

    fn intern_with(&mut self, bytes: &[u8], make: impl FnOnce() -> ByteArray) -> TextId {
        if let Some(&i) = self.ids.get(bytes) {
            return TextId(i);
        }
        let values = Arc::make_mut(&mut self.values);
        let i = values.len() as u32;
        values.push(make());
        self.ids.insert(bytes.to_vec(), i);
        TextId(i)
    }

    /// The values for an encoder; resets the dictionary when it has grown too large.
    fn snapshot(&mut self) -> Arc<Vec<ByteArray>> {
        let snap = self.values.clone();
        if snap.len() > MAX_TEXT_VALUES {
            self.values = Arc::new(Vec::new());
            self.ids.clear();
            self.generation += 1;
        }
        snap
    }
}

/// Typed column buffers of a table, and its interned text values. Producers append one value to
/// every column, in column order, per row. Appending a value of the wrong kind for a column marks
/// the table damaged; [`TableWriter::end_row`]/[`TableWriter::finish`] then report the mismatch
/// (a programming error).
pub struct Columns {
    bufs: Buffers,
    /// Per column: its store and its index within the store.
    map: Vec<(Store, usize)>,
    dict: TextDict,
    mismatch: bool,
}

/// Appends one row's values in column order (see [`Columns::row`]).
pub struct RowWriter<'a> {
    bufs: &'a mut Buffers,
    mismatch: &'a mut bool,
    n64: usize,
    n32: usize,
    nbool: usize,
    ntext: usize,
}

impl RowWriter<'_> {
    #[inline(always)]
    pub fn u64(&mut self, v: Option<u64>) {
        match self.bufs.i64s.get_mut(self.n64) {
            Some(c) => c.put(v.map(|x| x as i64)),
            None => *self.mismatch = true,
        }
        self.n64 += 1;
    }
    #[inline(always)]
    fn i32(&mut self, v: Option<i32>) {
        match self.bufs.i32s.get_mut(self.n32) {
            Some(c) => c.put(v),
            None => *self.mismatch = true,
        }
        self.n32 += 1;
    }
    #[inline(always)]
    pub fn u32(&mut self, v: Option<u32>) {
        self.i32(v.map(|x| x as i32))
    }
    #[inline(always)]
    pub fn u16(&mut self, v: Option<u16>) {
        self.i32(v.map(i32::from))
    }
    #[inline(always)]
    pub fn u8(&mut self, v: Option<u8>) {
        self.i32(v.map(i32::from))
    }
    #[inline(always)]
    pub fn bool(&mut self, v: Option<bool>) {
        match self.bufs.bools.get_mut(self.nbool) {
            Some(c) => c.put(v),
            None => *self.mismatch = true,
        }
        self.nbool += 1;
    }
    #[inline(always)]
    pub fn text(&mut self, v: Option<TextId>) {
        match self.bufs.texts.get_mut(self.ntext) {
            Some(c) => c.put(v.map(|t| t.0)),
            None => *self.mismatch = true,
        }
        self.ntext += 1;
    }
    /// Values appended so far.
    pub fn count(&self) -> usize {
        self.n64 + self.n32 + self.nbool + self.ntext
    }
}

impl Columns {
    fn new(defs: &[ColumnDef]) -> Self {
        let mut counts = [0usize; 4];
        let map = defs
            .iter()
            .map(|d| {
                let s = Store::of(d.kind);
                let i = &mut counts[s as usize];
                *i += 1;
                (s, *i - 1)
            })
            .collect();
        Columns {
            bufs: Buffers::new(defs),
            map,
            dict: TextDict::new(),
            mismatch: false,
        }
    }

    /// Appends one row: call the writer's methods once per column, in column order.
    #[inline(always)]
    pub fn row(&mut self) -> RowWriter<'_> {
        RowWriter {
            bufs: &mut self.bufs,
            mismatch: &mut self.mismatch,
            n64: 0,
            n32: 0,
            nbool: 0,
            ntext: 0,
        }
    }

    /// The id of a text value (interned on first use).
    pub fn intern(&mut self, bytes: &[u8]) -> TextId {
        self.dict
            .intern_with(bytes, || ByteArray::from(bytes.to_vec()))
    }

    /// The id of a static text value (kept without copying).
    pub fn intern_static(&mut self, s: &'static str) -> TextId {
        self.dict.intern_with(s.as_bytes(), || {
            ByteArray::from(bytes::Bytes::from_static(s.as_bytes()))
        })
    }

    /// Changes when interned ids are invalidated (see [`TextDict`]); producers caching
    /// [`TextId`]s drop their caches when it does.
    #[inline]
    pub fn text_generation(&self) -> u64 {
        self.dict.generation
    }

    #[inline]
    fn slot(&mut self, col: usize, want: Store) -> Option<usize> {
        match self.map.get(col) {
            Some(&(s, i)) if s == want => Some(i),
            _ => {
                self.mismatch = true;
                None
            }
        }
    }

    pub fn u64(&mut self, col: usize, v: Option<u64>) {
        if let Some(i) = self.slot(col, Store::I64) {
            self.bufs.i64s[i].put(v.map(|x| x as i64));
        }
    }
    pub fn u32(&mut self, col: usize, v: Option<u32>) {
        if let Some(i) = self.slot(col, Store::I32) {
            self.bufs.i32s[i].put(v.map(|x| x as i32));
        }
    }
    pub fn u16(&mut self, col: usize, v: Option<u16>) {
        if let Some(i) = self.slot(col, Store::I32) {
            self.bufs.i32s[i].put(v.map(i32::from));
        }
    }
    pub fn u8(&mut self, col: usize, v: Option<u8>) {
        if let Some(i) = self.slot(col, Store::I32) {
            self.bufs.i32s[i].put(v.map(i32::from));
        }
    }
    pub fn bool(&mut self, col: usize, v: Option<bool>) {
        if let Some(i) = self.slot(col, Store::Bool) {
            self.bufs.bools[i].put(v);
        }
    }
    pub fn text_id(&mut self, col: usize, v: Option<TextId>) {
        if let Some(i) = self.slot(col, Store::Text) {
            self.bufs.texts[i].put(v.map(|t| t.0));
        }
    }
    pub fn text(&mut self, col: usize, v: Option<ByteArray>) {
        let id = v.map(|b| {
            let bytes = b.data().to_vec();
            self.dict.intern_with(&bytes, || b)
        });
        self.text_id(col, id)
    }

    fn col_mut<T>(
        &mut self,
        col: usize,
        want: Store,
        pick: impl FnOnce(&mut Buffers) -> &mut Vec<Col<T>>,
    ) -> Option<&mut Col<T>> {
        let i = self.slot(col, want)?;
        pick(&mut self.bufs).get_mut(i)
    }

    /// Appends a run of values to column `col` (for producers that fill a row group column by
    /// column: the loops are tight and allocation-free). Every column must end up with the
    /// same number of rows.
    pub fn extend_u64<I: Iterator<Item = Option<u64>> + Clone>(&mut self, col: usize, it: I) {
        if let Some(c) = self.col_mut(col, Store::I64, |b| &mut b.i64s) {
            c.vals.extend(it.clone().map(|v| v.unwrap_or(0) as i64));
            c.valid.extend(it.map(|v| u8::from(v.is_some())));
        }
    }
    fn extend_i32<I: Iterator<Item = Option<i32>> + Clone>(&mut self, col: usize, it: I) {
        if let Some(c) = self.col_mut(col, Store::I32, |b| &mut b.i32s) {
            c.vals.extend(it.clone().map(|v| v.unwrap_or(0)));
            c.valid.extend(it.map(|v| u8::from(v.is_some())));
        }
    }
    pub fn extend_u32<I: Iterator<Item = Option<u32>> + Clone>(&mut self, col: usize, it: I) {
        self.extend_i32(col, it.map(|v| v.map(|x| x as i32)))
    }
    pub fn extend_u16<I: Iterator<Item = Option<u16>> + Clone>(&mut self, col: usize, it: I) {
        self.extend_i32(col, it.map(|v| v.map(i32::from)))
    }
    pub fn extend_u8<I: Iterator<Item = Option<u8>> + Clone>(&mut self, col: usize, it: I) {
        self.extend_i32(col, it.map(|v| v.map(i32::from)))
    }
    pub fn extend_bool<I: Iterator<Item = Option<bool>> + Clone>(&mut self, col: usize, it: I) {
        if let Some(c) = self.col_mut(col, Store::Bool, |b| &mut b.bools) {
            c.vals.extend(it.clone().map(|v| v.unwrap_or(false)));
            c.valid.extend(it.map(|v| u8::from(v.is_some())));
        }
    }
    pub fn extend_text<I: Iterator<Item = Option<TextId>> + Clone>(&mut self, col: usize, it: I) {
        if let Some(c) = self.col_mut(col, Store::Text, |b| &mut b.texts) {
            c.vals.extend(it.clone().map(|v| v.map_or(0, |t| t.0)));
            c.valid.extend(it.map(|v| u8::from(v.is_some())));
        }
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Marks the table damaged (a producer found its own bug); reported at the flush.
    pub fn mark_mismatch(&mut self) {
        self.mismatch = true;
    }

    fn cell(&mut self, col: usize, c: &Cell) {
        match c {
            Cell::U64(v) => self.u64(col, *v),
            Cell::U32(v) => self.u32(col, *v),
            Cell::U16(v) => self.u16(col, *v),
            Cell::U8(v) => self.u8(col, *v),
            Cell::Bool(v) => self.bool(col, *v),
            Cell::Text(v) => self.text(col, v.clone()),
        }
    }
}

/// Encoded row group on its way to the file.
enum Encoded {
    Parquet(Vec<(bytes::Bytes, ColumnCloseResult)>),
    Csv(Vec<u8>),
}

type EncodeResult = Result<Encoded, TableError>;

/// What an encoder needs to know about a table.
struct TableSpec {
    path: PathBuf,
    defs: &'static [ColumnDef],
    map: Vec<(Store, usize)>,
    /// Parquet only: properties and column descriptors.
    parquet: Option<(WriterPropertiesPtr, Vec<ColumnDescPtr>)>,
    /// Parquet only, per column: encoded by [`direct`] (no statistics wanted) rather than by
    /// parquet's generic column writer.
    direct: Vec<bool>,
    /// Parquet only, per column: DELTA_BINARY_PACKED (see [`TableOptions::delta_for`]).
    delta: Vec<bool>,
    compression: TableCompression,
    /// Buffers the encoders return for reuse (no page faults on fresh allocations).
    recycle: Mutex<Vec<Buffers>>,
}

impl TableSpec {
    /// Empty buffers for a row group: recycled ones when there are.
    fn take_buffers(&self) -> Buffers {
        self.recycle
            .lock()
            .ok()
            .and_then(|mut r| r.pop())
            .unwrap_or_else(|| Buffers::new(self.defs))
    }
}

impl Columns {
    /// The error for buffers that do not hold `rows` rows in every column.
    fn shape_error(&self, path: &Path, rows: usize) -> Option<TableError> {
        let bad = self.bufs.shape_error(rows);
        (self.mismatch || bad.is_some()).then(|| TableError::RowShape {
            path: path.to_path_buf(),
            got: bad.unwrap_or(rows),
            want: rows,
        })
    }
}

/// Tests set this to write integer statistics columns with parquet's generic writer, to compare.
static GENERIC_STATISTICS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Buffers kept for reuse per table.
const RECYCLED_BUFFERS: usize = 2;

/// Rows whose column values an encoder thread appends itself (so a producer can hand over
/// compact rows and keep its own thread free): see [`TableWriter::write_deferred`].
pub trait DeferredRows: Send {
    /// Number of rows.
    fn rows(&self) -> usize;
    /// Appends every row to `cols` (a fresh, empty row group of the table).
    fn fill(&mut self, cols: &mut Columns);
}

/// A row group's content: buffers filled by the producer, or rows the encoder fills in.
enum JobRows {
    Filled {
        bufs: Buffers,
        dict: Arc<Vec<ByteArray>>,
    },
    Deferred(Box<dyn DeferredRows>),
}

/// One row group to encode.
struct Job {
    spec: Arc<TableSpec>,
    rows: usize,
    content: JobRows,
    reply: SyncSender<EncodeResult>,
}

/// The encoder threads shared by every table: as many as there are cores (at least 2).
struct Pool {
    jobs: SyncSender<Job>,
}

/// Row groups queued for the encoders (beyond the one each is encoding).
const POOL_QUEUE: usize = 2;
/// Encoded (or encoding) row groups queued per file.
const FILE_QUEUE: usize = 3;
/// The same for CSV, whose encoded row groups are several times larger than Parquet's (about
/// 30 MB per 128 Ki rows): a deeper queue only holds memory (issue 2: < 300 MB for 1 GB).
const CSV_FILE_QUEUE: usize = 1;

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let (tx, rx) = sync_channel::<Job>(POOL_QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        let n = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
            .clamp(2, 16);
        for i in 0..n {
            let rx = rx.clone();
            // A failed spawn leaves fewer encoders; with none, `flush` reports the error.
            let _ = std::thread::Builder::new()
                .name(format!("encode {i}"))
                .spawn(move || {
                    let mut scratch = Scratch::default();
                    loop {
                        let job = match rx.lock() {
                            Ok(guard) => guard.recv(),
                            Err(_) => return,
                        };
                        let Ok(job) = job else { return };
                        let spec = job.spec;
                        let (result, mut bufs) = match job.content {
                            JobRows::Filled { bufs, dict } => {
                                (encode(&spec, &bufs, &dict, job.rows, &mut scratch), bufs)
                            }
                            JobRows::Deferred(mut rows) => {
                                let mut cols = Columns {
                                    bufs: spec.take_buffers(),
                                    map: spec.map.clone(),
                                    dict: TextDict::new(),
                                    mismatch: false,
                                };
                                rows.fill(&mut cols);
                                drop(rows);
                                let result = match cols.shape_error(&spec.path, job.rows) {
                                    Some(e) => Err(e),
                                    None => encode(
                                        &spec,
                                        &cols.bufs,
                                        &cols.dict.values,
                                        job.rows,
                                        &mut scratch,
                                    ),
                                };
                                (result, cols.bufs)
                            }
                        };
                        bufs.clear();
                        if let Ok(mut r) = spec.recycle.lock() {
                            if r.len() < RECYCLED_BUFFERS {
                                r.push(bufs);
                            }
                        }
                        let _ = job.reply.send(result);
                    }
                });
        }
        Pool { jobs: tx }
    })
}

/// One column's buffered values, for [`direct::column_chunk`].
fn store_values<'a>(
    b: &'a Buffers,
    store: Store,
    i: usize,
    dict: &'a [ByteArray],
) -> direct::Values<'a> {
    match store {
        Store::I64 => direct::Values::I64(&b.i64s[i].vals, &b.i64s[i].valid),
        Store::I32 => direct::Values::I32(&b.i32s[i].vals, &b.i32s[i].valid),
        Store::Bool => direct::Values::Bool(&b.bools[i].vals, &b.bools[i].valid),
        Store::Text => direct::Values::Text(&b.texts[i].vals, &b.texts[i].valid, dict),
    }
}

/// Per-encoder reusable buffers for squeezing out nulls.
#[derive(Default)]
struct Scratch {
    direct: direct::Scratch,
    defs: Vec<i16>,
    i64s: Vec<i64>,
    i32s: Vec<i32>,
    bools: Vec<bool>,
    texts: Vec<ByteArray>,
}

/// Writes one column's values: present values only, with definition levels when nullable.
fn write_values<D: DataType>(
    w: &mut parquet::column::writer::ColumnWriterImpl<'_, D>,
    vals: &[D::T],
    valid: &[u8],
    nullable: bool,
    dense: &mut Vec<D::T>,
    defs: &mut Vec<i16>,
) -> Result<(), parquet::errors::ParquetError>
where
    D::T: Clone,
{
    let all_present = !valid.contains(&0);
    if !nullable {
        if !all_present {
            return Err(parquet::errors::ParquetError::General(
                "a null in a required column (bug)".into(),
            ));
        }
        w.write_batch(vals, None, None)?;
        return Ok(());
    }
    defs.clear();
    defs.extend(valid.iter().map(|v| i16::from(*v)));
    if all_present {
        w.write_batch(vals, Some(defs), None)?;
    } else {
        dense.clear();
        dense.extend(
            vals.iter()
                .zip(valid)
                .filter(|(_, ok)| **ok == 1)
                .map(|(v, _)| v.clone()),
        );
        w.write_batch(dense, Some(defs), None)?;
    }
    Ok(())
}

fn encode(
    spec: &TableSpec,
    b: &Buffers,
    dict: &[ByteArray],
    rows: usize,
    s: &mut Scratch,
) -> EncodeResult {
    let pq_err = |source| TableError::Parquet {
        path: spec.path.clone(),
        source,
    };
    let Some((props, descrs)) = &spec.parquet else {
        let mut out = Vec::with_capacity(rows * 64);
        write_csv_rows(b, &spec.map, dict, rows, &mut out);
        return Ok(Encoded::Csv(out));
    };
    let mut chunks = Vec::with_capacity(spec.defs.len());
    for (c, ((def, &(store, i)), descr)) in spec.defs.iter().zip(&spec.map).zip(descrs).enumerate()
    {
        if spec.direct.get(c).copied().unwrap_or(false) {
            let stats = props.statistics_enabled(descr.path()) != EnabledStatistics::None;
            let chunk = direct::column_chunk(
                descr,
                spec.compression,
                stats,
                spec.delta.get(c).copied().unwrap_or(false),
                def.nullable,
                rows,
                store_values(b, store, i, dict),
                &mut s.direct,
            )
            .map_err(pq_err)?;
            chunks.push(chunk);
            continue;
        }
        let mut sink = TrackedWrite::new(Vec::new());
        let mut w = get_column_writer(
            descr.clone(),
            props.clone(),
            Box::new(SerializedPageWriter::new(&mut sink)),
        );
        let n = def.nullable;
        let written = match (&mut w, store) {
            (ColumnWriter::Int64ColumnWriter(w), Store::I64) => {
                let c = &b.i64s[i];
                write_values(w, &c.vals, &c.valid, n, &mut s.i64s, &mut s.defs)
            }
            (ColumnWriter::Int32ColumnWriter(w), Store::I32) => {
                let c = &b.i32s[i];
                write_values(w, &c.vals, &c.valid, n, &mut s.i32s, &mut s.defs)
            }
            (ColumnWriter::BoolColumnWriter(w), Store::Bool) => {
                let c = &b.bools[i];
                write_values(w, &c.vals, &c.valid, n, &mut s.bools, &mut s.defs)
            }
            (ColumnWriter::ByteArrayColumnWriter(w), Store::Text) => {
                let c = &b.texts[i];
                let mut missing = false;
                s.texts.clear();
                s.texts.extend(c.vals.iter().zip(&c.valid).map(|(id, ok)| {
                    match dict.get(*id as usize) {
                        Some(v) if *ok == 1 => v.clone(),
                        Some(_) => ByteArray::new(),
                        None => {
                            missing = true;
                            ByteArray::new()
                        }
                    }
                }));
                if missing {
                    Err(parquet::errors::ParquetError::General(
                        "a text id without a value (bug)".into(),
                    ))
                } else {
                    let mut dense = Vec::new();
                    write_values(w, &s.texts, &c.valid, n, &mut dense, &mut s.defs)
                }
            }
            _ => Err(parquet::errors::ParquetError::General(format!(
                "column {} buffered as {store:?} (bug)",
                def.name
            ))),
        };
        written.map_err(pq_err)?;
        let close = w.close().map_err(pq_err)?;
        let bytes = sink.into_inner().map_err(pq_err)?;
        chunks.push((bytes::Bytes::from(bytes), close));
    }
    Ok(Encoded::Parquet(chunks))
}

/// Tables are written to a temporary file next to their path and renamed into place when
/// complete (spelunk-fsio), so a failed or interrupted decode leaves no half-written table.
enum Sink {
    Parquet(Box<SerializedFileWriter<BufWriter<AtomicFile>>>),
    Csv(BufWriter<AtomicFile>),
}

/// The file thread: appends encoded row groups in order, then closes the file.
fn write_file(
    path: PathBuf,
    mut sink: Sink,
    order: Receiver<Receiver<EncodeResult>>,
) -> Result<(), TableError> {
    let pq_err = |source| TableError::Parquet {
        path: path.clone(),
        source,
    };
    let io_err = |source| TableError::Io {
        path: path.clone(),
        source,
    };
    for rx in order {
        let encoded = rx.recv().map_err(|_| TableError::Io {
            path: path.clone(),
            source: std::io::Error::other("table encoder thread stopped (bug)"),
        })??;
        match (encoded, &mut sink) {
            (Encoded::Parquet(chunks), Sink::Parquet(w)) => {
                let mut rg = w.next_row_group().map_err(pq_err)?;
                for (bytes, close) in chunks {
                    rg.append_column(&bytes, close).map_err(pq_err)?;
                }
                rg.close().map_err(pq_err)?;
            }
            (Encoded::Csv(text), Sink::Csv(out)) => out.write_all(&text).map_err(io_err)?,
            _ => {
                return Err(io_err(std::io::Error::other(
                    "row group encoded for another format (bug)",
                )))
            }
        }
    }
    let out = match sink {
        Sink::Parquet(w) => w.into_inner().map_err(pq_err)?,
        Sink::Csv(out) => out,
    };
    let file = out.into_inner().map_err(|e| io_err(e.into_error()))?;
    file.commit().map_err(io_err)
}

/// A table being written to one file.
pub struct TableWriter {
    path: PathBuf,
    columns: Columns,
    rows: usize,
    rows_total: u64,
    spec: Arc<TableSpec>,
    order: Option<SyncSender<Receiver<EncodeResult>>>,
    file: Option<std::thread::JoinHandle<Result<(), TableError>>>,
}

fn parquet_schema(
    name: &str,
    columns: &[ColumnDef],
) -> Result<Type, parquet::errors::ParquetError> {
    let mut fields = Vec::with_capacity(columns.len());
    for c in columns {
        let (phys, logical) = match c.kind {
            ColumnKind::U64 => (PhysicalType::INT64, Some(LogicalType::integer(64, false))),
            ColumnKind::U32 => (PhysicalType::INT32, Some(LogicalType::integer(32, false))),
            ColumnKind::U16 => (PhysicalType::INT32, Some(LogicalType::integer(16, false))),
            ColumnKind::U8 => (PhysicalType::INT32, Some(LogicalType::integer(8, false))),
            ColumnKind::Bool => (PhysicalType::BOOLEAN, None),
            ColumnKind::Text => (PhysicalType::BYTE_ARRAY, Some(LogicalType::String)),
        };
        let rep = if c.nullable {
            Repetition::OPTIONAL
        } else {
            Repetition::REQUIRED
        };
        fields.push(Arc::new(
            Type::primitive_type_builder(c.name, phys)
                .with_repetition(rep)
                .with_logical_type(logical)
                .build()?,
        ));
    }
    Type::group_type_builder(name).with_fields(fields).build()
}

impl TableWriter {
    /// Creates `path` (truncating it) for a table called `name` with `columns`.
    pub fn create(
        path: &Path,
        name: &str,
        columns: &'static [ColumnDef],
        format: TableFormat,
        options: TableOptions,
    ) -> Result<Self, TableError> {
        let io_err = |source| TableError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = BufWriter::with_capacity(1 << 20, AtomicFile::create(path).map_err(io_err)?);
        let delta = columns
            .iter()
            .map(|c| c.kind == ColumnKind::U64 && options.delta_for.contains(&c.name))
            .collect();
        let (sink, parquet, direct) = match format {
            TableFormat::Parquet => {
                let pq_err = |source| TableError::Parquet {
                    path: path.to_path_buf(),
                    source,
                };
                let schema = Arc::new(parquet_schema(name, columns).map_err(pq_err)?);
                // Dictionary encoding pays off only for low-cardinality text (op, event names,
                // data source); for addresses and counters it costs a hash per value and is
                // abandoned by the writer anyway once the dictionary outgrows its page.
                let compression = match options.compression {
                    TableCompression::None => Compression::UNCOMPRESSED,
                    TableCompression::Snappy => Compression::SNAPPY,
                    TableCompression::Lz4 => Compression::LZ4_RAW,
                };
                let mut props = WriterProperties::builder()
                    .set_compression(compression)
                    .set_dictionary_enabled(false);
                for c in columns.iter().filter(|c| c.kind == ColumnKind::Text) {
                    props = props.set_column_dictionary_enabled(ColumnPath::from(c.name), true);
                }
                if !options.statistics_for.is_empty() {
                    props = props.set_statistics_enabled(EnabledStatistics::None);
                    for name in options.statistics_for {
                        props = props.set_column_statistics_enabled(
                            ColumnPath::from(*name),
                            EnabledStatistics::Page,
                        );
                    }
                }
                let props = Arc::new(props.build());
                // Integer columns with statistics are encoded directly too (min/max, null
                // count, column index); booleans and text with statistics use parquet's writer.
                let direct = columns
                    .iter()
                    .map(|c| {
                        let stats = props.statistics_enabled(&ColumnPath::from(c.name))
                            != EnabledStatistics::None;
                        !stats
                            || (matches!(Store::of(c.kind), Store::I64 | Store::I32)
                                && !GENERIC_STATISTICS.load(std::sync::atomic::Ordering::Relaxed))
                    })
                    .collect();
                let descr = SchemaDescriptor::new(schema.clone());
                let descrs = (0..descr.num_columns()).map(|i| descr.column(i)).collect();
                let writer =
                    SerializedFileWriter::new(file, schema, props.clone()).map_err(pq_err)?;
                (
                    Sink::Parquet(Box::new(writer)),
                    Some((props, descrs)),
                    direct,
                )
            }
            TableFormat::Csv => {
                let mut out = file;
                let header: Vec<&str> = columns.iter().map(|c| c.name).collect();
                writeln!(out, "{}", header.join(",")).map_err(io_err)?;
                (Sink::Csv(out), None, Vec::new())
            }
        };
        let table = Columns::new(columns);
        let spec = Arc::new(TableSpec {
            path: path.to_path_buf(),
            defs: columns,
            map: table.map.clone(),
            parquet,
            direct,
            delta,
            compression: options.compression,
            recycle: Mutex::new(Vec::new()),
        });
        let queue = match format {
            TableFormat::Parquet => FILE_QUEUE,
            TableFormat::Csv => CSV_FILE_QUEUE,
        };
        let (order, order_rx) = sync_channel(queue);
        let file_path = path.to_path_buf();
        let file = std::thread::Builder::new()
            .name(format!("write {name}"))
            .spawn(move || write_file(file_path, sink, order_rx))
            .map_err(io_err)?;
        Ok(TableWriter {
            path: path.to_path_buf(),
            columns: table,
            rows: 0,
            rows_total: 0,
            spec,
            order: Some(order),
            file: Some(file),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn rows(&self) -> u64 {
        self.rows_total
    }

    /// The column buffers, for appending one row (one value per column, in order); then call
    /// [`TableWriter::end_row`].
    #[inline]
    pub fn columns(&mut self) -> &mut Columns {
        &mut self.columns
    }

    /// Completes a row appended through [`TableWriter::columns`]; hands the buffers to the
    /// encoders when a row group is full.
    #[inline]
    pub fn end_row(&mut self) -> Result<(), TableError> {
        self.rows += 1;
        self.rows_total += 1;
        if self.rows >= ROW_GROUP_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    /// Appends one row of cells (one per column, of the column's kind).
    pub fn push(&mut self, row: &[Cell]) -> Result<(), TableError> {
        if row.len() != self.spec.defs.len() {
            return Err(TableError::RowShape {
                path: self.path.clone(),
                got: row.len(),
                want: self.spec.defs.len(),
            });
        }
        for (i, c) in row.iter().enumerate() {
            self.columns.cell(i, c);
        }
        self.end_row()
    }

    fn check_shape(&self) -> Result<(), TableError> {
        match self.columns.shape_error(&self.path, self.rows) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The file thread's error, once it has stopped.
    fn file_error(&mut self) -> TableError {
        self.order = None;
        match self.file.take().map(|h| h.join()) {
            Some(Ok(Err(e))) => e,
            Some(Err(_)) => TableError::Io {
                path: self.path.clone(),
                source: std::io::Error::other("table writer thread panicked (bug)"),
            },
            _ => TableError::Io {
                path: self.path.clone(),
                source: std::io::Error::other("table writer thread stopped"),
            },
        }
    }

    fn flush(&mut self) -> Result<(), TableError> {
        if self.rows == 0 {
            return Ok(());
        }
        self.check_shape()?;
        let fresh = self.spec.take_buffers();
        let content = JobRows::Filled {
            bufs: std::mem::replace(&mut self.columns.bufs, fresh),
            dict: self.columns.dict.snapshot(),
        };
        let rows = std::mem::take(&mut self.rows);
        self.submit(rows, content)
    }

    /// Queues a row group for the encoders and its result for the file thread (in order).
    fn submit(&mut self, rows: usize, content: JobRows) -> Result<(), TableError> {
        let (tx, rx) = sync_channel(1);
        let Some(order) = &self.order else {
            return Err(self.file_error());
        };
        if order.send(rx).is_err() {
            return Err(self.file_error());
        }
        let job = Job {
            spec: self.spec.clone(),
            rows,
            content,
            reply: tx,
        };
        if pool().jobs.send(job).is_err() {
            return Err(TableError::Io {
                path: self.path.clone(),
                source: std::io::Error::other("no table encoder threads"),
            });
        }
        Ok(())
    }

    /// Writes `rows` as one row group (after the rows appended so far), their column values
    /// appended by an encoder thread. At most [`ROW_GROUP_ROWS`] rows, so row groups keep their
    /// size whichever way rows arrive.
    pub fn write_deferred(&mut self, rows: Box<dyn DeferredRows>) -> Result<(), TableError> {
        let n = rows.rows();
        if n == 0 {
            return Ok(());
        }
        if n > ROW_GROUP_ROWS {
            return Err(TableError::RowShape {
                path: self.path.clone(),
                got: n,
                want: ROW_GROUP_ROWS,
            });
        }
        self.flush()?;
        self.rows_total += n as u64;
        self.submit(n, JobRows::Deferred(rows))
    }

    /// Flushes and closes the file; returns the number of rows written.
    pub fn finish(mut self) -> Result<u64, TableError> {
        self.flush()?;
        self.order = None;
        match self.file.take().map(|h| h.join()) {
            Some(Ok(Ok(()))) => Ok(self.rows_total),
            Some(Ok(Err(e))) => Err(e),
            _ => Err(TableError::Io {
                path: self.path.clone(),
                source: std::io::Error::other("table writer thread panicked (bug)"),
            }),
        }
    }
}

/// Formats buffered rows as CSV: integers in decimal, booleans as true/false, text quoted only
/// when it contains a delimiter or quote, nulls as empty fields.
fn write_csv_rows(
    b: &Buffers,
    map: &[(Store, usize)],
    dict: &[ByteArray],
    rows: usize,
    line: &mut Vec<u8>,
) {
    for r in 0..rows {
        for (c, &(store, i)) in map.iter().enumerate() {
            if c > 0 {
                line.push(b',');
            }
            match store {
                Store::I64 => {
                    let col = &b.i64s[i];
                    if col.valid[r] == 1 {
                        let _ = write!(line, "{}", col.vals[r] as u64);
                    }
                }
                Store::I32 => {
                    let col = &b.i32s[i];
                    if col.valid[r] == 1 {
                        let _ = write!(line, "{}", col.vals[r] as u32);
                    }
                }
                Store::Bool => {
                    let col = &b.bools[i];
                    if col.valid[r] == 1 {
                        line.extend_from_slice(if col.vals[r] { b"true" } else { b"false" });
                    }
                }
                Store::Text => {
                    let col = &b.texts[i];
                    if col.valid[r] != 1 {
                        continue;
                    }
                    let bytes = dict.get(col.vals[r] as usize).map_or(&[][..], |v| v.data());
                    if bytes
                        .iter()
                        .any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r'))
                    {
                        line.push(b'"');
                        for &b in bytes {
                            if b == b'"' {
                                line.push(b'"');
                            }
                            line.push(b);
                        }
                        line.push(b'"');
                    } else {
                        line.extend_from_slice(bytes);
                    }
                }
            }
        }
        line.push(b'\n');
    }
}

/// Column chunks encoded straight from the buffers, for columns without statistics: one data
/// page (format v1) of PLAIN values — or, for text, a dictionary page of the distinct values
/// and RLE_DICTIONARY indices built from the table's text ids (no hashing of strings) —
/// definition levels in the RLE/bit-packed hybrid, the table's codec, and the same metadata
/// parquet's generic writer records for such columns (encodings, page encoding statistics,
/// offset index). Values, types and layout rules are those of the Parquet format; readers see
/// the same file structure as before, only written with less bookkeeping.
mod direct {
    use super::TableCompression;
    use bytes::Bytes;
    use parquet::basic::{BoundaryOrder, Compression, Encoding, PageType, SortOrder};
    use parquet::column::page::{CompressedPage, Page, PageWriter};
    use parquet::column::writer::ColumnCloseResult;
    use parquet::data_type::ByteArray;
    use parquet::errors::ParquetError;
    use parquet::file::metadata::{
        ColumnChunkMetaData, ColumnIndexBuilder, LevelHistogram, OffsetIndexBuilder,
        PageEncodingStats,
    };
    use parquet::file::page_index::column_index::ColumnIndexMetaData;
    use parquet::file::statistics::{Statistics, ValueStatistics};
    use parquet::file::writer::{SerializedPageWriter, TrackedWrite};
    use parquet::schema::types::ColumnDescPtr;

    /// A column's values: one per row, with a validity byte per row (nulls hold a default).
    #[derive(Clone, Copy)]
    pub enum Values<'a> {
        I64(&'a [i64], &'a [u8]),
        I32(&'a [i32], &'a [u8]),
        Bool(&'a [bool], &'a [u8]),
        /// Text ids and the values they index.
        Text(&'a [u32], &'a [u8], &'a [ByteArray]),
    }

    #[derive(Default)]
    pub struct Scratch {
        raw: Vec<u8>,
        packed: Vec<u8>,
        levels: Vec<u8>,
        /// Text id -> dictionary index + 1 (0: not in this chunk's dictionary yet).
        local: Vec<u32>,
        /// A page's present values (delta encoding).
        dense: Vec<i64>,
        indices: Vec<u32>,
    }

    fn put_uleb(out: &mut Vec<u8>, mut v: u64) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    /// Length of the run of values equal to `vals[0]`, counting at most `cap`.
    fn run_len<T: PartialEq>(vals: &[T], cap: usize) -> usize {
        let first = &vals[0];
        vals.iter().take(cap).take_while(|v| *v == first).count()
    }

    /// The RLE/bit-packed hybrid encoding of `vals` at `bw` bits per value (Parquet's
    /// definition levels and dictionary indices). Runs of 8 or more equal values are RLE runs;
    /// the rest are bit-packed in groups of 8 (at most 63 groups per run, so every header is one
    /// byte); only the final group may be padded.
    pub fn hybrid<T: Copy + PartialEq + Into<u64>>(vals: &[T], bw: u8, out: &mut Vec<u8>) {
        let vbytes = usize::from(bw).div_ceil(8);
        let mut i = 0;
        while i < vals.len() {
            let run = run_len(&vals[i..], usize::MAX);
            if run >= 8 {
                put_uleb(out, (run as u64) << 1);
                let v: u64 = vals[i].into();
                out.extend_from_slice(&v.to_le_bytes()[..vbytes]);
                i += run;
                continue;
            }
            // Bit-packed groups until the next long run (checked at group starts).
            let start = i;
            let mut groups = 0usize;
            while i < vals.len() && groups < 63 {
                if groups > 0 && run_len(&vals[i..], 8) >= 8 {
                    break;
                }
                i = (i + 8).min(vals.len());
                groups += 1;
            }
            out.push(((groups as u8) << 1) | 1);
            if bw <= 8 {
                // A group of 8 values fills exactly `bw` bytes.
                for g in 0..groups {
                    let at = start + g * 8;
                    let group = vals.get(at..(at + 8).min(vals.len())).unwrap_or(&[]);
                    let mut acc = 0u64;
                    for (k, v) in group.iter().enumerate() {
                        let v: u64 = (*v).into();
                        acc |= v << (k as u32 * u32::from(bw));
                    }
                    out.extend_from_slice(&acc.to_le_bytes()[..usize::from(bw)]);
                }
                continue;
            }
            let mut acc = 0u64;
            let mut nbits = 0u32;
            for k in 0..groups * 8 {
                let v: u64 = vals.get(start + k).map_or(0, |v| (*v).into());
                acc |= v << nbits;
                nbits += u32::from(bw);
                while nbits >= 8 {
                    out.push(acc as u8);
                    acc >>= 8;
                    nbits -= 8;
                }
            }
        }
    }

    fn put_zigzag(out: &mut Vec<u8>, v: i64) {
        put_uleb(out, ((v << 1) ^ (v >> 63)) as u64);
    }

    /// Values per DELTA_BINARY_PACKED block, miniblocks per block (32 values each).
    const DELTA_BLOCK: usize = 128;
    const DELTA_MINIBLOCKS: usize = 4;

    /// The DELTA_BINARY_PACKED encoding of `vals` (Parquet format, Encodings.md): a header
    /// (block size, miniblocks per block, value count, first value), then per block of 128
    /// deltas the minimum delta and four miniblocks of 32 bit-packed (delta - minimum), each
    /// with its own bit width. Arithmetic wraps, as readers undo it.
    pub fn delta_binary_packed(vals: &[i64], out: &mut Vec<u8>) {
        put_uleb(out, DELTA_BLOCK as u64);
        put_uleb(out, DELTA_MINIBLOCKS as u64);
        put_uleb(out, vals.len() as u64);
        put_zigzag(out, vals.first().copied().unwrap_or(0));
        let per_mini = DELTA_BLOCK / DELTA_MINIBLOCKS;
        let mut deltas = [0i64; DELTA_BLOCK];
        let mut i = 1;
        while i < vals.len() {
            let n = (vals.len() - i).min(DELTA_BLOCK);
            for (k, d) in deltas[..n].iter_mut().enumerate() {
                *d = vals[i + k].wrapping_sub(vals[i + k - 1]);
            }
            let min = deltas[..n].iter().copied().min().unwrap_or(0);
            put_zigzag(out, min);
            let widths_at = out.len();
            out.extend_from_slice(&[0u8; DELTA_MINIBLOCKS]);
            for m in 0..DELTA_MINIBLOCKS {
                let start = m * per_mini;
                if start >= n {
                    break; // unneeded miniblocks: width 0, no body
                }
                let mini = &deltas[start..(start + per_mini).min(n)];
                let max = mini
                    .iter()
                    .map(|d| d.wrapping_sub(min) as u64)
                    .max()
                    .unwrap_or(0);
                let bw = 64 - max.leading_zeros();
                out[widths_at + m] = bw as u8;
                // 32 values of `bw` bits, LSB first, padded with zeros: exactly 4 * bw bytes.
                let mut acc = 0u128;
                let mut nbits = 0u32;
                for k in 0..per_mini {
                    let v = mini.get(k).map_or(0, |d| d.wrapping_sub(min) as u64);
                    acc |= u128::from(v) << nbits;
                    nbits += bw;
                    while nbits >= 8 {
                        out.push(acc as u8);
                        acc >>= 8;
                        nbits -= 8;
                    }
                }
            }
            i += n;
        }
    }

    fn compress(codec: TableCompression, raw: &[u8]) -> Result<Bytes, ParquetError> {
        let out = match codec {
            TableCompression::None => raw.to_vec(),
            TableCompression::Lz4 => {
                let mut out = vec![0u8; lz4_flex::block::get_maximum_output_size(raw.len())];
                let n = lz4_flex::block::compress_into(raw, &mut out)
                    .map_err(|e| ParquetError::External(Box::new(e)))?;
                out.truncate(n);
                out
            }
            TableCompression::Snappy => {
                let mut out = vec![0u8; snap::raw::max_compress_len(raw.len())];
                let n = snap::raw::Encoder::new()
                    .compress(raw, &mut out)
                    .map_err(|e| ParquetError::External(Box::new(e)))?;
                out.truncate(n);
                out
            }
        };
        Ok(Bytes::from(out))
    }

    /// Appends the present values of `vals` (PLAIN: little-endian).
    fn plain<T: Copy, const N: usize>(
        vals: &[T],
        valid: &[u8],
        all: bool,
        bytes: impl Fn(T) -> [u8; N],
        out: &mut Vec<u8>,
    ) {
        let start = out.len();
        if all {
            out.resize(start + vals.len() * N, 0);
            for (dst, v) in out[start..].chunks_exact_mut(N).zip(vals) {
                dst.copy_from_slice(&bytes(*v));
            }
        } else {
            // Every value is written, and the position advances past present ones only (no
            // branch on the data); one slot of slack for the last write.
            let present = valid.iter().filter(|v| **v == 1).count();
            out.resize(start + (present + 1) * N, 0);
            let dst = &mut out[start..];
            let mut k = 0usize;
            for (v, ok) in vals.iter().zip(valid) {
                if let Some(d) = dst.get_mut(k..k + N) {
                    d.copy_from_slice(&bytes(*v));
                }
                k += N * usize::from(*ok & 1);
            }
            out.truncate(start + present * N);
        }
    }

    /// Rows per data page: parquet's writer closes a page once it holds 20,000 rows, checked
    /// every 1,024 values, so its pages hold 20,480 rows; the same layout keeps the page index
    /// (per-page min/max of the statistics columns) as fine-grained as before.
    pub const PAGE_ROWS: usize = 20 * 1024;

    /// Integer values with statistics: an order key (per the column's sort order) and PLAIN bytes.
    trait Int: Copy {
        fn key(self, unsigned: bool) -> i128;
        fn plain(self) -> Vec<u8>;
        fn statistics(min: Self, max: Self, nulls: usize, signed: bool) -> Statistics;
        fn no_statistics(nulls: usize) -> Statistics;
    }

    macro_rules! int {
        ($t:ty, $u:ty, $variant:ident) => {
            impl Int for $t {
                #[inline]
                fn key(self, unsigned: bool) -> i128 {
                    if unsigned {
                        i128::from(self as $u)
                    } else {
                        i128::from(self)
                    }
                }
                fn plain(self) -> Vec<u8> {
                    self.to_le_bytes().to_vec()
                }
                fn statistics(min: Self, max: Self, nulls: usize, signed: bool) -> Statistics {
                    Statistics::$variant(
                        ValueStatistics::new(Some(min), Some(max), None, Some(nulls as u64), false)
                            .with_backwards_compatible_min_max(signed),
                    )
                }
                fn no_statistics(nulls: usize) -> Statistics {
                    Statistics::$variant(ValueStatistics::new(
                        None,
                        None,
                        None,
                        Some(nulls as u64),
                        false,
                    ))
                }
            }
        };
    }
    int!(i64, u64, Int64);
    int!(i32, u32, Int32);

    /// Min and max (by key) of the present values, None when all are null.
    fn page_min_max<T: Int>(vals: &[T], valid: &[u8], all: bool, unsigned: bool) -> Option<(T, T)> {
        let mut it = vals
            .iter()
            .zip(valid)
            .filter(|(_, ok)| all || **ok == 1)
            .map(|(v, _)| *v);
        let first = it.next()?;
        let (mut lo, mut hi) = ((first.key(unsigned), first), (first.key(unsigned), first));
        for v in it {
            let k = v.key(unsigned);
            if k < lo.0 {
                lo = (k, v);
            }
            if k > hi.0 {
                hi = (k, v);
            }
        }
        Some((lo.1, hi.1))
    }

    /// Statistics of a chunk, page by page, as parquet's writer keeps them.
    struct Stats<T> {
        unsigned: bool,
        index: ColumnIndexBuilder,
        min: Option<T>,
        max: Option<T>,
        nulls: usize,
        histogram: Option<Vec<i64>>,
        last: Option<(T, T)>,
        ascending: bool,
        descending: bool,
    }

    impl<T: Int> Stats<T> {
        fn new(descr: &ColumnDescPtr) -> Self {
            Stats {
                unsigned: descr.sort_order() == SortOrder::UNSIGNED,
                index: ColumnIndexBuilder::new(descr.physical_type()),
                min: None,
                max: None,
                nulls: 0,
                histogram: (descr.max_def_level() > 0).then(|| vec![0, 0]),
                last: None,
                ascending: true,
                descending: true,
            }
        }

        fn page(&mut self, vals: &[T], valid: &[u8], all: bool, nulls: usize) {
            let u = self.unsigned;
            let page_histogram = self.histogram.as_mut().map(|h| {
                h[0] += nulls as i64;
                h[1] += (valid.len() - nulls) as i64;
                LevelHistogram::from(vec![nulls as i64, (valid.len() - nulls) as i64])
            });
            self.nulls += nulls;
            match page_min_max(vals, valid, all, u) {
                None => self
                    .index
                    .append(true, Vec::new(), Vec::new(), nulls as i64),
                Some((lo, hi)) => {
                    if let Some((a, b)) = self.last {
                        if a.key(u) > lo.key(u) || b.key(u) > hi.key(u) {
                            self.ascending = false;
                        }
                        if lo.key(u) > a.key(u) || hi.key(u) > b.key(u) {
                            self.descending = false;
                        }
                    }
                    self.last = Some((lo, hi));
                    self.index
                        .append(false, lo.plain(), hi.plain(), nulls as i64);
                    if self.min.is_none_or(|m| lo.key(u) < m.key(u)) {
                        self.min = Some(lo);
                    }
                    if self.max.is_none_or(|m| hi.key(u) > m.key(u)) {
                        self.max = Some(hi);
                    }
                }
            }
            self.index.append_histograms(&None, &page_histogram);
        }

        fn finish(
            mut self,
            builder: parquet::file::metadata::ColumnChunkMetaDataBuilder,
        ) -> Result<
            (
                parquet::file::metadata::ColumnChunkMetaDataBuilder,
                ColumnIndexMetaData,
            ),
            ParquetError,
        > {
            self.index
                .set_boundary_order(match (self.ascending, self.descending) {
                    (true, _) => BoundaryOrder::ASCENDING,
                    (false, true) => BoundaryOrder::DESCENDING,
                    (false, false) => BoundaryOrder::UNORDERED,
                });
            let statistics = match (self.min, self.max) {
                (Some(lo), Some(hi)) => T::statistics(lo, hi, self.nulls, !self.unsigned),
                _ => T::no_statistics(self.nulls),
            };
            let builder = builder
                .set_statistics(statistics)
                .set_unencoded_byte_array_data_bytes(None)
                .set_repetition_level_histogram(None)
                .set_definition_level_histogram(self.histogram.map(LevelHistogram::from));
            Ok((builder, self.index.build()?))
        }
    }

    /// Encodes one column chunk (see the module comment); `stats` adds min/max statistics and
    /// a column index (integer columns only).
    #[allow(clippy::too_many_arguments)]
    pub fn column_chunk(
        descr: &ColumnDescPtr,
        codec: TableCompression,
        stats: bool,
        delta: bool,
        nullable: bool,
        rows: usize,
        values: Values<'_>,
        s: &mut Scratch,
    ) -> Result<(Bytes, ColumnCloseResult), ParquetError> {
        let valid = match values {
            Values::I64(_, v) | Values::I32(_, v) | Values::Bool(_, v) | Values::Text(_, v, _) => v,
        };
        if valid.len() != rows {
            return Err(ParquetError::General(format!(
                "column {} has {} values for {rows} rows (bug)",
                descr.name(),
                valid.len()
            )));
        }
        // Validity bytes are 0 or 1: all present when there is no 0 (a memchr).
        if !nullable && valid.contains(&0) {
            return Err(ParquetError::General(format!(
                "a null in required column {} (bug)",
                descr.name()
            )));
        }
        let compression = match codec {
            TableCompression::None => Compression::UNCOMPRESSED,
            TableCompression::Snappy => Compression::SNAPPY,
            TableCompression::Lz4 => Compression::LZ4_RAW,
        };
        let mut sink = TrackedWrite::new(Vec::new());
        let mut pages = SerializedPageWriter::new(&mut sink);
        let mut total_compressed = 0i64;
        let mut total_uncompressed = 0i64;
        let mut dict_offset = None;
        let mut encoding_stats = Vec::new();
        let mut encodings = vec![Encoding::PLAIN, Encoding::RLE];

        // Text: this chunk's dictionary (the values its rows use, in first-use order) and the
        // index of every present value; written as the dictionary page.
        let mut bw = 0u8;
        if let Values::Text(ids, _, dict) = values {
            s.local.clear();
            s.local.resize(dict.len(), 0);
            s.indices.clear();
            s.packed.clear();
            let mut entries = 0u32;
            for (id, ok) in ids.iter().zip(valid) {
                if *ok != 1 {
                    continue;
                }
                let slot = s.local.get_mut(*id as usize).ok_or_else(|| {
                    ParquetError::General(format!(
                        "column {}: a text id without a value (bug)",
                        descr.name()
                    ))
                })?;
                if *slot == 0 {
                    entries += 1;
                    *slot = entries;
                    let v = dict[*id as usize].data();
                    s.packed.extend_from_slice(&(v.len() as u32).to_le_bytes());
                    s.packed.extend_from_slice(v);
                }
                s.indices.push(*slot - 1);
            }
            // Bits per index: enough for the largest (0 for a single entry), as parquet does.
            bw = (32 - entries.saturating_sub(1).leading_zeros()) as u8;
            let page = Page::DictionaryPage {
                buf: compress(codec, &s.packed)?,
                num_values: entries,
                encoding: Encoding::PLAIN,
                is_sorted: false,
            };
            let spec = pages.write_page(CompressedPage::new(page, s.packed.len()))?;
            total_compressed += spec.compressed_size as i64;
            total_uncompressed += spec.uncompressed_size as i64;
            dict_offset = Some(spec.offset as i64);
            encoding_stats.push(PageEncodingStats {
                page_type: PageType::DICTIONARY_PAGE,
                encoding: Encoding::PLAIN,
                count: 1,
            });
            encodings.push(Encoding::RLE_DICTIONARY);
        }
        let delta = delta && matches!(values, Values::I64(..));
        let encoding = match values {
            Values::Text(..) => Encoding::RLE_DICTIONARY,
            Values::I64(..) if delta => {
                // The chunk's encodings: definition levels and deltas, no PLAIN page.
                encodings = vec![Encoding::RLE, Encoding::DELTA_BINARY_PACKED];
                Encoding::DELTA_BINARY_PACKED
            }
            _ => Encoding::PLAIN,
        };
        let mut stats64 =
            (stats && matches!(values, Values::I64(..))).then(|| Stats::<i64>::new(descr));
        let mut stats32 =
            (stats && matches!(values, Values::I32(..))).then(|| Stats::<i32>::new(descr));
        if stats && stats64.is_none() && stats32.is_none() {
            return Err(ParquetError::General(format!(
                "column {}: direct statistics for integers only (bug)",
                descr.name()
            )));
        }

        let mut offsets = OffsetIndexBuilder::new();
        let mut first_data_page = None;
        let mut data_pages = 0;
        let mut present_before = 0usize;
        let mut lo = 0usize;
        while lo < rows {
            let hi = (lo + PAGE_ROWS).min(rows);
            let pvalid = &valid[lo..hi];
            let all = !pvalid.contains(&0);
            let nulls = if all {
                0
            } else {
                pvalid.iter().filter(|v| **v == 0).count()
            };
            // The data page: definition levels (nullable columns), then the values.
            s.raw.clear();
            if nullable {
                s.levels.clear();
                if all {
                    // One RLE run of 1s.
                    put_uleb(&mut s.levels, ((hi - lo) as u64) << 1);
                    s.levels.push(1);
                } else {
                    hybrid(pvalid, 1, &mut s.levels);
                }
                s.raw
                    .extend_from_slice(&(s.levels.len() as u32).to_le_bytes());
                s.raw.extend_from_slice(&s.levels);
            }
            match values {
                Values::I64(vals, _) => {
                    if delta {
                        s.dense.clear();
                        s.dense.extend(
                            vals[lo..hi]
                                .iter()
                                .zip(pvalid)
                                .filter(|(_, ok)| **ok == 1)
                                .map(|(v, _)| *v),
                        );
                        delta_binary_packed(&s.dense, &mut s.raw);
                    } else {
                        plain(&vals[lo..hi], pvalid, all, i64::to_le_bytes, &mut s.raw);
                    }
                    if let Some(st) = &mut stats64 {
                        st.page(&vals[lo..hi], pvalid, all, nulls);
                    }
                }
                Values::I32(vals, _) => {
                    plain(&vals[lo..hi], pvalid, all, i32::to_le_bytes, &mut s.raw);
                    if let Some(st) = &mut stats32 {
                        st.page(&vals[lo..hi], pvalid, all, nulls);
                    }
                }
                Values::Bool(vals, _) => {
                    // Bit-packed, LSB first.
                    let mut byte = 0u8;
                    let mut n = 0u32;
                    for (v, ok) in vals[lo..hi].iter().zip(pvalid) {
                        if *ok == 1 {
                            byte |= u8::from(*v) << n;
                            n += 1;
                            if n == 8 {
                                s.raw.push(byte);
                                byte = 0;
                                n = 0;
                            }
                        }
                    }
                    if n > 0 {
                        s.raw.push(byte);
                    }
                }
                Values::Text(..) => {
                    let present = hi - lo - nulls;
                    s.raw.push(bw);
                    let idx = s.indices.get(present_before..present_before + present);
                    hybrid(idx.unwrap_or(&[]), bw, &mut s.raw);
                    present_before += present;
                }
            }
            let page = Page::DataPage {
                buf: compress(codec, &s.raw)?,
                num_values: (hi - lo) as u32,
                encoding,
                def_level_encoding: Encoding::RLE,
                rep_level_encoding: Encoding::RLE,
                statistics: None,
            };
            let spec = pages.write_page(CompressedPage::new(page, s.raw.len()))?;
            total_compressed += spec.compressed_size as i64;
            total_uncompressed += spec.uncompressed_size as i64;
            first_data_page.get_or_insert(spec.offset as i64);
            offsets.append_offset_and_size(spec.offset as i64, spec.compressed_size as i32);
            offsets.append_row_count((hi - lo) as i64);
            data_pages += 1;
            lo = hi;
        }
        pages.close()?;
        encoding_stats.push(PageEncodingStats {
            page_type: PageType::DATA_PAGE,
            encoding,
            count: data_pages,
        });
        let mut builder = ColumnChunkMetaData::builder(descr.clone());
        let mut column_index = None;
        if let Some(st) = stats64 {
            let (b, index) = st.finish(builder)?;
            builder = b;
            column_index = Some(index);
        } else if let Some(st) = stats32 {
            let (b, index) = st.finish(builder)?;
            builder = b;
            column_index = Some(index);
        }
        let metadata = builder
            .set_compression(compression)
            .set_encodings(encodings)
            .set_page_encoding_stats(encoding_stats)
            .set_total_compressed_size(total_compressed)
            .set_total_uncompressed_size(total_uncompressed)
            .set_num_values(rows as i64)
            .set_data_page_offset(first_data_page.unwrap_or(0))
            .set_dictionary_page_offset(dict_offset)
            .build()?;
        let bytes_written = sink.bytes_written() as u64;
        let bytes = sink.into_inner()?;
        Ok((
            Bytes::from(bytes),
            ColumnCloseResult {
                bytes_written,
                rows_written: rows as u64,
                metadata,
                bloom_filter: None,
                column_index,
                offset_index: Some(offsets.build()),
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    use std::fs::File;

    const COLUMNS: &[ColumnDef] = &[
        ColumnDef::new("a", ColumnKind::U64, true),
        ColumnDef::new("b", ColumnKind::U32, false),
        ColumnDef::new("c", ColumnKind::Bool, true),
        ColumnDef::new("d", ColumnKind::Text, true),
        ColumnDef::new("e", ColumnKind::Text, false),
        ColumnDef::new("f", ColumnKind::U16, true),
        ColumnDef::new("g", ColumnKind::U8, true),
        ColumnDef::new("h", ColumnKind::U32, true),
    ];

    /// Expected cells of row `i`: null patterns with long runs, short alternations and
    /// isolated values, so every branch of the hybrid encoder is taken.
    fn row(i: u64) -> Vec<Cell> {
        let h = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40;
        let present = match (i / 1000) % 4 {
            0 => true,
            1 => h % 2 == 0,
            2 => i % 17 != 3,
            _ => false,
        };
        let text = ["LD", "ST", "x,y", "q\"uote", ""][(h % 5) as usize];
        vec![
            Cell::U64(present.then_some(h << 20 | i)),
            Cell::U32(Some(i as u32)),
            Cell::Bool((i % 3 != 0).then_some(h % 2 == 1)),
            Cell::Text(present.then(|| ByteArray::from(text))),
            Cell::Text(Some(ByteArray::from("same"))),
            Cell::U16((!present).then_some(i as u16)),
            Cell::U8((i % 1000 < 990).then_some((h % 3) as u8)),
            // Null for the whole second row group (a null page).
            Cell::U32((i < ROW_GROUP_ROWS as u64).then_some(u32::MAX - (h as u32))),
        ]
    }

    #[test]
    fn parquet_reads_back_every_value() {
        let dir = std::env::temp_dir().join(format!("spelunk-table-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.parquet");
        let options = TableOptions {
            compression: TableCompression::Lz4,
            statistics_for: &["f"],
            // Large, unordered deltas (full 64-bit widths) and nulls.
            delta_for: &["a"],
        };
        let mut w =
            TableWriter::create(&path, "t", COLUMNS, TableFormat::Parquet, options).unwrap();
        let n = ROW_GROUP_ROWS as u64 + 4321;
        for i in 0..n {
            w.push(&row(i)).unwrap();
        }
        assert_eq!(w.finish().unwrap(), n);

        let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        assert_eq!(reader.metadata().num_row_groups(), 2);
        let mut i = 0u64;
        for r in reader.get_row_iter(None).unwrap() {
            let r = r.unwrap();
            for ((_, got), want) in r.get_column_iter().zip(row(i)) {
                let ok = match (got, &want) {
                    (Field::Null, c) => matches!(
                        c,
                        Cell::U64(None)
                            | Cell::U32(None)
                            | Cell::U16(None)
                            | Cell::U8(None)
                            | Cell::Bool(None)
                            | Cell::Text(None)
                    ),
                    (Field::ULong(v), Cell::U64(Some(w))) => v == w,
                    (Field::UInt(v), Cell::U32(Some(w))) => v == w,
                    (Field::UShort(v), Cell::U16(Some(w))) => v == w,
                    (Field::UByte(v), Cell::U8(Some(w))) => v == w,
                    (Field::Bool(v), Cell::Bool(Some(w))) => v == w,
                    (Field::Str(v), Cell::Text(Some(w))) => v.as_bytes() == w.data(),
                    _ => false,
                };
                assert!(ok, "row {i}: got {got:?}, want {want:?}");
            }
            i += 1;
        }
        assert_eq!(i, n);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn write(path: &Path, statistics_for: &'static [&'static str]) {
        let options = TableOptions {
            compression: TableCompression::Lz4,
            statistics_for,
            delta_for: &["a"],
        };
        let mut w = TableWriter::create(path, "t", COLUMNS, TableFormat::Parquet, options).unwrap();
        for i in 0..ROW_GROUP_ROWS as u64 + 4321 {
            w.push(&row(i)).unwrap();
        }
        w.finish().unwrap();
    }

    #[test]
    fn direct_statistics_match_parquets_writer() {
        use parquet::file::serialized_reader::ReadOptionsBuilder;
        let dir = std::env::temp_dir().join(format!("spelunk-stats-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        const STATS: &[&str] = &["a", "b", "f", "g", "h"];
        let (direct, generic) = (dir.join("direct.parquet"), dir.join("generic.parquet"));
        write(&direct, STATS);
        GENERIC_STATISTICS.store(true, std::sync::atomic::Ordering::Relaxed);
        write(&generic, STATS);
        GENERIC_STATISTICS.store(false, std::sync::atomic::Ordering::Relaxed);
        let open = |p: &Path| {
            let opts = ReadOptionsBuilder::new().with_page_index().build();
            SerializedFileReader::new_with_options(File::open(p).unwrap(), opts).unwrap()
        };
        let (d, g) = (open(&direct), open(&generic));
        let (dm, gm) = (d.metadata(), g.metadata());
        assert_eq!(dm.num_row_groups(), 2);
        for r in 0..dm.num_row_groups() {
            for c in 0..COLUMNS.len() {
                let (x, y) = (dm.row_group(r).column(c), gm.row_group(r).column(c));
                let what = format!("row group {r} column {}", COLUMNS[c].name);
                assert_eq!(x.statistics(), y.statistics(), "{what}");
                assert_eq!(
                    x.definition_level_histogram(),
                    y.definition_level_histogram(),
                    "{what}"
                );
                assert_eq!(x.num_values(), y.num_values(), "{what}");
                let (xi, yi) = (dm.column_index().unwrap(), gm.column_index().unwrap());
                assert_eq!(
                    format!("{:?}", xi[r][c]),
                    format!("{:?}", yi[r][c]),
                    "{what}"
                );
                let (xo, yo) = (dm.offset_index().unwrap(), gm.offset_index().unwrap());
                assert_eq!(
                    xo[r][c].page_locations().len(),
                    yo[r][c].page_locations().len(),
                    "{what}"
                );
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
