//! A typed table written row by row to Parquet or CSV in bounded memory.
//!
//! Columns have a unit-free physical kind (unsigned integers of 8–64 bits, booleans, text) and
//! may be nullable; absent values are written as Parquet nulls / empty CSV fields, never as 0.
//! Unsigned integers use Parquet's `INTEGER(bits, unsigned)` logical type so pandas/pyarrow read
//! them as `uint64` etc. Rows are buffered per column and flushed as a row group every
//! [`ROW_GROUP_ROWS`] rows, so memory stays constant whatever the input size.

use parquet::basic::{Compression, LogicalType, Repetition, Type as PhysicalType};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, Int32Type, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Rows per Parquet row group (and the memory bound of a sink).
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

/// One value. Text is a cheaply clonable byte string (shared, not copied, between rows).
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    U64(Option<u64>),
    U32(Option<u32>),
    U16(Option<u16>),
    U8(Option<u8>),
    Bool(Option<bool>),
    Text(Option<ByteArray>),
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
    #[error("{path}: row has {got} cells, table has {want} columns (bug)")]
    RowShape {
        path: PathBuf,
        got: usize,
        want: usize,
    },
    #[error("{path}: column {column} got a {got} cell (bug)")]
    CellKind {
        path: PathBuf,
        column: &'static str,
        got: &'static str,
    },
}

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

fn cell_name(c: &Cell) -> &'static str {
    match c {
        Cell::U64(_) => "u64",
        Cell::U32(_) => "u32",
        Cell::U16(_) => "u16",
        Cell::U8(_) => "u8",
        Cell::Bool(_) => "bool",
        Cell::Text(_) => "text",
    }
}

/// Pushes an optional value: a definition level per row, a value only when present.
macro_rules! push_opt {
    ($vals:expr, $defs:expr, $v:expr, $conv:expr) => {{
        match $v {
            Some(x) => {
                $vals.push($conv(x));
                $defs.push(1);
            }
            None => $defs.push(0),
        }
    }};
}

struct ParquetSink {
    writer: SerializedFileWriter<BufWriter<File>>,
    columns: Vec<ColumnBuf>,
    rows: usize,
}

struct CsvSink {
    out: BufWriter<File>,
    line: Vec<u8>,
}

enum SinkImpl {
    Parquet(Box<ParquetSink>),
    Csv(CsvSink),
}

/// A table being written to one file.
pub struct TableWriter {
    path: PathBuf,
    columns: &'static [ColumnDef],
    sink: SinkImpl,
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
                let props = WriterProperties::builder()
                    .set_compression(Compression::SNAPPY)
                    .build();
                let writer = SerializedFileWriter::new(file, Arc::new(schema), Arc::new(props))
                    .map_err(pq_err)?;
                SinkImpl::Parquet(Box::new(ParquetSink {
                    writer,
                    columns: columns.iter().map(|c| ColumnBuf::new(c.kind)).collect(),
                    rows: 0,
                }))
            }
            TableFormat::Csv => {
                let mut out = file;
                let header: Vec<&str> = columns.iter().map(|c| c.name).collect();
                writeln!(out, "{}", header.join(",")).map_err(io_err)?;
                SinkImpl::Csv(CsvSink {
                    out,
                    line: Vec::with_capacity(512),
                })
            }
        };
        Ok(TableWriter {
            path: path.to_path_buf(),
            columns,
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

    /// Appends one row; `row` must have one cell per column, of the column's kind.
    pub fn push(&mut self, row: &[Cell]) -> Result<(), TableError> {
        if row.len() != self.columns.len() {
            return Err(TableError::RowShape {
                path: self.path.clone(),
                got: row.len(),
                want: self.columns.len(),
            });
        }
        self.rows_total += 1;
        match &mut self.sink {
            SinkImpl::Parquet(p) => {
                for ((buf, cell), def) in p.columns.iter_mut().zip(row).zip(self.columns) {
                    let bad = || TableError::CellKind {
                        path: self.path.clone(),
                        column: def.name,
                        got: cell_name(cell),
                    };
                    match (buf, cell) {
                        (ColumnBuf::I64 { vals, defs }, Cell::U64(v)) => {
                            push_opt!(vals, defs, *v, |x: u64| x as i64)
                        }
                        (ColumnBuf::I32 { vals, defs }, Cell::U32(v)) => {
                            push_opt!(vals, defs, *v, |x: u32| x as i32)
                        }
                        (ColumnBuf::I32 { vals, defs }, Cell::U16(v)) => {
                            push_opt!(vals, defs, *v, i32::from)
                        }
                        (ColumnBuf::I32 { vals, defs }, Cell::U8(v)) => {
                            push_opt!(vals, defs, *v, i32::from)
                        }
                        (ColumnBuf::Bool { vals, defs }, Cell::Bool(v)) => {
                            push_opt!(vals, defs, *v, |x| x)
                        }
                        (ColumnBuf::Bytes { vals, defs }, Cell::Text(v)) => {
                            push_opt!(vals, defs, v.as_ref(), |x: &ByteArray| x.clone())
                        }
                        _ => return Err(bad()),
                    }
                }
                p.rows += 1;
                if p.rows >= ROW_GROUP_ROWS {
                    Self::flush_parquet(&self.path, self.columns, p)?;
                }
            }
            SinkImpl::Csv(c) => {
                c.line.clear();
                for (i, cell) in row.iter().enumerate() {
                    if i > 0 {
                        c.line.push(b',');
                    }
                    write_csv_cell(&mut c.line, cell);
                }
                c.line.push(b'\n');
                c.out.write_all(&c.line).map_err(|source| TableError::Io {
                    path: self.path.clone(),
                    source,
                })?;
            }
        }
        Ok(())
    }

    fn flush_parquet(
        path: &Path,
        defs_: &[ColumnDef],
        p: &mut ParquetSink,
    ) -> Result<(), TableError> {
        if p.rows == 0 {
            return Ok(());
        }
        let pq_err = |source| TableError::Parquet {
            path: path.to_path_buf(),
            source,
        };
        let mut rg = p.writer.next_row_group().map_err(pq_err)?;
        let mut i = 0;
        while let Some(mut col) = rg.next_column().map_err(pq_err)? {
            let nullable = defs_.get(i).map(|d| d.nullable).unwrap_or(true);
            let buf = &p.columns[i];
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
        for c in &mut p.columns {
            c.clear();
        }
        p.rows = 0;
        Ok(())
    }

    /// Flushes and closes the file.
    pub fn finish(self) -> Result<u64, TableError> {
        let rows = self.rows_total;
        match self.sink {
            SinkImpl::Parquet(mut p) => {
                Self::flush_parquet(&self.path, self.columns, &mut p)?;
                let mut inner = p
                    .writer
                    .into_inner()
                    .map_err(|source| TableError::Parquet {
                        path: self.path.clone(),
                        source,
                    })?;
                inner.flush().map_err(|source| TableError::Io {
                    path: self.path.clone(),
                    source,
                })?;
            }
            SinkImpl::Csv(mut c) => {
                c.out.flush().map_err(|source| TableError::Io {
                    path: self.path.clone(),
                    source,
                })?;
            }
        }
        Ok(rows)
    }
}

fn write_csv_cell(line: &mut Vec<u8>, cell: &Cell) {
    use std::io::Write as _;
    // Integers never need quoting; text is quoted only when it contains a delimiter or quote.
    let _ = match cell {
        Cell::U64(Some(v)) => write!(line, "{v}"),
        Cell::U32(Some(v)) => write!(line, "{v}"),
        Cell::U16(Some(v)) => write!(line, "{v}"),
        Cell::U8(Some(v)) => write!(line, "{v}"),
        Cell::Bool(Some(v)) => write!(line, "{}", if *v { "true" } else { "false" }),
        Cell::Text(Some(t)) => {
            let bytes = t.data();
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
            Ok(())
        }
        _ => Ok(()),
    };
}
