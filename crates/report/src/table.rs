//! A typed table written to Parquet or CSV in bounded memory.
//!
//! Columns have a physical kind (unsigned integers of 8–64 bits, booleans, text) and may be
//! nullable; absent values are written as Parquet nulls / empty CSV fields, never as 0. Unsigned
//! integers use Parquet's `INTEGER(bits, unsigned)` logical type so pandas/pyarrow read them as
//! `uint64` etc.
//!
//! Values are appended column by column into typed buffers ([`Columns`]); every
//! [`ROW_GROUP_ROWS`] rows the buffers are flushed — as a Parquet row group, or as CSV lines — so
//! memory stays constant whatever the input size. Fast producers append straight into the
//! buffers ([`TableWriter::columns`] + [`TableWriter::end_row`]); others push rows of [`Cell`]s.

use parquet::basic::{Compression, LogicalType, Repetition, Type as PhysicalType};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, Int32Type, Int64Type};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{ColumnPath, Type};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// Values of one column since the last flush: a definition level per row (1 present, 0 null)
/// and the present values. Integers are stored in Parquet's physical types.
enum ColumnBuf {
    I64 {
        vals: Vec<i64>,
        defs: Vec<i16>,
    },
    I32 {
        vals: Vec<i32>,
        defs: Vec<i16>,
    },
    Bool {
        vals: Vec<bool>,
        defs: Vec<i16>,
    },
    Bytes {
        vals: Vec<ByteArray>,
        defs: Vec<i16>,
    },
}

impl ColumnBuf {
    fn new(kind: ColumnKind) -> Self {
        match kind {
            ColumnKind::U64 => ColumnBuf::I64 {
                vals: Vec::new(),
                defs: Vec::new(),
            },
            ColumnKind::U32 | ColumnKind::U16 | ColumnKind::U8 => ColumnBuf::I32 {
                vals: Vec::new(),
                defs: Vec::new(),
            },
            ColumnKind::Bool => ColumnBuf::Bool {
                vals: Vec::new(),
                defs: Vec::new(),
            },
            ColumnKind::Text => ColumnBuf::Bytes {
                vals: Vec::new(),
                defs: Vec::new(),
            },
        }
    }

    fn rows(&self) -> usize {
        match self {
            ColumnBuf::I64 { defs, .. }
            | ColumnBuf::I32 { defs, .. }
            | ColumnBuf::Bool { defs, .. }
            | ColumnBuf::Bytes { defs, .. } => defs.len(),
        }
    }

    fn clear(&mut self) {
        match self {
            ColumnBuf::I64 { vals, defs } => {
                vals.clear();
                defs.clear();
            }
            ColumnBuf::I32 { vals, defs } => {
                vals.clear();
                defs.clear();
            }
            ColumnBuf::Bool { vals, defs } => {
                vals.clear();
                defs.clear();
            }
            ColumnBuf::Bytes { vals, defs } => {
                vals.clear();
                defs.clear();
            }
        }
    }
}

/// Typed column buffers of a table. Producers append one value to every column, in column
/// order, per row. Appending a value of the wrong kind for a column drops it and marks the
/// table damaged; [`TableWriter::end_row`] then reports the mismatch (a programming error).
pub struct Columns {
    bufs: Vec<ColumnBuf>,
    mismatch: bool,
}

macro_rules! append {
    ($self:ident, $col:expr, $v:expr, $variant:ident, $conv:expr) => {{
        match $self.bufs.get_mut($col) {
            Some(ColumnBuf::$variant { vals, defs }) => match $v {
                Some(x) => {
                    vals.push($conv(x));
                    defs.push(1);
                }
                None => defs.push(0),
            },
            _ => $self.mismatch = true,
        }
    }};
}

impl Columns {
    fn new(defs: &[ColumnDef]) -> Self {
        Columns {
            bufs: defs.iter().map(|c| ColumnBuf::new(c.kind)).collect(),
            mismatch: false,
        }
    }
    #[inline]
    pub fn u64(&mut self, col: usize, v: Option<u64>) {
        append!(self, col, v, I64, |x: u64| x as i64)
    }
    #[inline]
    pub fn u32(&mut self, col: usize, v: Option<u32>) {
        append!(self, col, v, I32, |x: u32| x as i32)
    }
    #[inline]
    pub fn u16(&mut self, col: usize, v: Option<u16>) {
        append!(self, col, v, I32, i32::from)
    }
    #[inline]
    pub fn u8(&mut self, col: usize, v: Option<u8>) {
        append!(self, col, v, I32, i32::from)
    }
    #[inline]
    pub fn bool(&mut self, col: usize, v: Option<bool>) {
        append!(self, col, v, Bool, |x: bool| x)
    }
    #[inline]
    pub fn text(&mut self, col: usize, v: Option<ByteArray>) {
        append!(self, col, v, Bytes, |x: ByteArray| x)
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

struct ParquetSink {
    writer: SerializedFileWriter<BufWriter<File>>,
}

enum Sink {
    Parquet(Box<ParquetSink>),
    Csv(BufWriter<File>),
}

/// A table being written to one file.
pub struct TableWriter {
    path: PathBuf,
    defs: &'static [ColumnDef],
    columns: Columns,
    rows: usize,
    sink: Sink,
    rows_total: u64,
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
        let file = BufWriter::with_capacity(1 << 20, File::create(path).map_err(io_err)?);
        let sink = match format {
            TableFormat::Parquet => {
                let pq_err = |source| TableError::Parquet {
                    path: path.to_path_buf(),
                    source,
                };
                let schema = parquet_schema(name, columns).map_err(pq_err)?;
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
                let writer =
                    SerializedFileWriter::new(file, Arc::new(schema), Arc::new(props.build()))
                        .map_err(pq_err)?;
                Sink::Parquet(Box::new(ParquetSink { writer }))
            }
            TableFormat::Csv => {
                let mut out = file;
                let header: Vec<&str> = columns.iter().map(|c| c.name).collect();
                writeln!(out, "{}", header.join(",")).map_err(io_err)?;
                Sink::Csv(out)
            }
        };
        Ok(TableWriter {
            path: path.to_path_buf(),
            defs: columns,
            columns: Columns::new(columns),
            rows: 0,
            sink,
            rows_total: 0,
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

    /// Completes a row appended through [`TableWriter::columns`]; flushes when a row group is full.
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
        if row.len() != self.defs.len() {
            return Err(TableError::RowShape {
                path: self.path.clone(),
                got: row.len(),
                want: self.defs.len(),
            });
        }
        for (i, c) in row.iter().enumerate() {
            self.columns.cell(i, c);
        }
        self.end_row()
    }

    fn check_shape(&self) -> Result<(), TableError> {
        let bad = self.columns.bufs.iter().find(|b| b.rows() != self.rows);
        if self.columns.mismatch || bad.is_some() {
            return Err(TableError::RowShape {
                path: self.path.clone(),
                got: bad.map_or(self.rows, |b| b.rows()),
                want: self.rows,
            });
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), TableError> {
        if self.rows == 0 {
            return Ok(());
        }
        self.check_shape()?;
        match &mut self.sink {
            Sink::Parquet(p) => write_row_group(&self.path, self.defs, &self.columns.bufs, p)?,
            Sink::Csv(out) => {
                write_csv_rows(&self.columns.bufs, self.rows, out).map_err(|source| {
                    TableError::Io {
                        path: self.path.clone(),
                        source,
                    }
                })?
            }
        }
        for c in &mut self.columns.bufs {
            c.clear();
        }
        self.rows = 0;
        Ok(())
    }

    /// Flushes and closes the file; returns the number of rows written.
    pub fn finish(mut self) -> Result<u64, TableError> {
        self.flush()?;
        let rows = self.rows_total;
        let path = self.path.clone();
        match self.sink {
            Sink::Parquet(p) => {
                let mut inner = p
                    .writer
                    .into_inner()
                    .map_err(|source| TableError::Parquet {
                        path: path.clone(),
                        source,
                    })?;
                inner
                    .flush()
                    .map_err(|source| TableError::Io { path, source })?;
            }
            Sink::Csv(mut out) => out
                .flush()
                .map_err(|source| TableError::Io { path, source })?,
        }
        Ok(rows)
    }
}

fn write_row_group(
    path: &Path,
    defs: &[ColumnDef],
    bufs: &[ColumnBuf],
    p: &mut ParquetSink,
) -> Result<(), TableError> {
    let pq_err = |source| TableError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let mut rg = p.writer.next_row_group().map_err(pq_err)?;
    let mut i = 0;
    while let Some(mut col) = rg.next_column().map_err(pq_err)? {
        let nullable = defs.get(i).map(|d| d.nullable).unwrap_or(true);
        let Some(buf) = bufs.get(i) else {
            return Err(TableError::RowShape {
                path: path.to_path_buf(),
                got: bufs.len(),
                want: defs.len(),
            });
        };
        match buf {
            ColumnBuf::I64 { vals, defs } => {
                col.typed::<Int64Type>()
                    .write_batch(vals, nullable.then_some(defs), None)
                    .map_err(pq_err)?;
            }
            ColumnBuf::I32 { vals, defs } => {
                col.typed::<Int32Type>()
                    .write_batch(vals, nullable.then_some(defs), None)
                    .map_err(pq_err)?;
            }
            ColumnBuf::Bool { vals, defs } => {
                col.typed::<BoolType>()
                    .write_batch(vals, nullable.then_some(defs), None)
                    .map_err(pq_err)?;
            }
            ColumnBuf::Bytes { vals, defs } => {
                col.typed::<ByteArrayType>()
                    .write_batch(vals, nullable.then_some(defs), None)
                    .map_err(pq_err)?;
            }
        }
        col.close().map_err(pq_err)?;
        i += 1;
    }
    rg.close().map_err(pq_err)?;
    Ok(())
}

/// Formats buffered rows as CSV: integers in decimal, booleans as true/false, text quoted only
/// when it contains a delimiter or quote, nulls as empty fields.
fn write_csv_rows(
    bufs: &[ColumnBuf],
    rows: usize,
    out: &mut BufWriter<File>,
) -> std::io::Result<()> {
    // Each column's next present value.
    let mut next = vec![0usize; bufs.len()];
    let mut line = Vec::with_capacity(512);
    for r in 0..rows {
        line.clear();
        for (c, buf) in bufs.iter().enumerate() {
            if c > 0 {
                line.push(b',');
            }
            let present = |defs: &[i16]| defs.get(r).copied() == Some(1);
            match buf {
                ColumnBuf::I64 { vals, defs } if present(defs) => {
                    let _ = write!(line, "{}", vals[next[c]] as u64);
                    next[c] += 1;
                }
                ColumnBuf::I32 { vals, defs } if present(defs) => {
                    let _ = write!(line, "{}", vals[next[c]] as u32);
                    next[c] += 1;
                }
                ColumnBuf::Bool { vals, defs } if present(defs) => {
                    line.extend_from_slice(if vals[next[c]] { b"true" } else { b"false" });
                    next[c] += 1;
                }
                ColumnBuf::Bytes { vals, defs } if present(defs) => {
                    let bytes = vals[next[c]].data();
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
                    next[c] += 1;
                }
                _ => {}
            }
        }
        line.push(b'\n');
        out.write_all(&line)?;
    }
    Ok(())
}
