//! `Recording.samples()`: every decoded sample with its attribution (spelunk_engine::samples)
//! as Arrow record batches, handed to Python through the Arrow C stream interface (a PyCapsule
//! named `arrow_array_stream`, the Arrow PyCapsule protocol's `__arrow_c_stream__`), which
//! pyarrow, polars and DuckDB import without a copy.
//!
//! Why arrow-array's own FFI and not pyo3-arrow or arrow's `pyarrow` feature: both work, but
//! pyo3-arrow also brings arrow-cast, arrow-select, chrono-tz and numpy for conversions this
//! module does not make, and the capsule is all either would hand over; arrow-array (with
//! `ffi`) is the maintained implementation of the C interface both build on, and it needs
//! nothing from the interpreter, so the module stays abi3.
//!
//! The decode columns carry `spelunk decode`'s names and values (docs/decode.md), so a sample
//! table and the decode tables compare column by column.

use arrow_array::builder::{
    ListBuilder, StringBuilder, UInt16Builder, UInt32Builder, UInt64Builder, UInt8Builder,
};
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{ArrayRef, RecordBatch, RecordBatchIterator};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use spelunk_analysis::objects::DataObjects;
use spelunk_engine::recording::{Recording, RecordingError};
use spelunk_engine::sample_rows::{SampleColumn, SampleRows, SAMPLE_COLUMNS};
use spelunk_engine::samples::{SampleAttribution, SampleAttributor};
use spelunk_spe::SpeSample;
use std::sync::{Arc, Mutex};

/// The columns, in order (documented in docs/python.md): the sample rows' columns.
fn schema() -> SchemaRef {
    let fields: Vec<Field> = SAMPLE_COLUMNS
        .iter()
        .map(|&(name, c)| {
            let t = match c {
                SampleColumn::U64 => DataType::UInt64,
                SampleColumn::U32 => DataType::UInt32,
                SampleColumn::U16 => DataType::UInt16,
                SampleColumn::U8 => DataType::UInt8,
                SampleColumn::Text => DataType::Utf8,
                SampleColumn::TextList => {
                    DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
                }
            };
            Field::new(name, t, true)
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// One record batch being filled, a builder per column.
struct BatchBuilder {
    time_ns: UInt64Builder,
    cpu: UInt32Builder,
    pid: UInt32Builder,
    tid: UInt32Builder,
    thread: StringBuilder,
    op: StringBuilder,
    pc: UInt64Builder,
    el: UInt8Builder,
    function: StringBuilder,
    function_offset: UInt64Builder,
    file: StringBuilder,
    line: UInt32Builder,
    dso: StringBuilder,
    event: StringBuilder,
    event_bits: UInt64Builder,
    issue_lat: UInt16Builder,
    total_lat: UInt16Builder,
    xlat_lat: UInt16Builder,
    exec_lat: UInt16Builder,
    vaddr: UInt64Builder,
    paddr: UInt64Builder,
    data_source: StringBuilder,
    data_source_raw: UInt64Builder,
    object: StringBuilder,
    object_kind: StringBuilder,
    object_start: UInt64Builder,
    allocation_site: StringBuilder,
    phase: StringBuilder,
    phases: ListBuilder<StringBuilder>,
    br_tgt: UInt64Builder,
    context: UInt32Builder,
    ts: UInt64Builder,
}

impl BatchBuilder {
    fn new(rows: usize) -> Self {
        let u64s = || UInt64Builder::with_capacity(rows);
        let u32s = || UInt32Builder::with_capacity(rows);
        let u16s = || UInt16Builder::with_capacity(rows);
        let text = StringBuilder::new;
        BatchBuilder {
            time_ns: u64s(),
            cpu: u32s(),
            pid: u32s(),
            tid: u32s(),
            thread: text(),
            op: text(),
            pc: u64s(),
            el: UInt8Builder::with_capacity(rows),
            function: text(),
            function_offset: u64s(),
            file: text(),
            line: u32s(),
            dso: text(),
            event: text(),
            event_bits: u64s(),
            issue_lat: u16s(),
            total_lat: u16s(),
            xlat_lat: u16s(),
            exec_lat: u16s(),
            vaddr: u64s(),
            paddr: u64s(),
            data_source: text(),
            data_source_raw: u64s(),
            object: text(),
            object_kind: text(),
            object_start: u64s(),
            allocation_site: text(),
            phase: text(),
            phases: ListBuilder::new(text()),
            br_tgt: u64s(),
            context: u32s(),
            ts: u64s(),
        }
    }

    fn finish(mut self, schema: &SchemaRef) -> RecordBatch {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.time_ns.finish()),
            Arc::new(self.cpu.finish()),
            Arc::new(self.pid.finish()),
            Arc::new(self.tid.finish()),
            Arc::new(self.thread.finish()),
            Arc::new(self.op.finish()),
            Arc::new(self.pc.finish()),
            Arc::new(self.el.finish()),
            Arc::new(self.function.finish()),
            Arc::new(self.function_offset.finish()),
            Arc::new(self.file.finish()),
            Arc::new(self.line.finish()),
            Arc::new(self.dso.finish()),
            Arc::new(self.event.finish()),
            Arc::new(self.event_bits.finish()),
            Arc::new(self.issue_lat.finish()),
            Arc::new(self.total_lat.finish()),
            Arc::new(self.xlat_lat.finish()),
            Arc::new(self.exec_lat.finish()),
            Arc::new(self.vaddr.finish()),
            Arc::new(self.paddr.finish()),
            Arc::new(self.data_source.finish()),
            Arc::new(self.data_source_raw.finish()),
            Arc::new(self.object.finish()),
            Arc::new(self.object_kind.finish()),
            Arc::new(self.object_start.finish()),
            Arc::new(self.allocation_site.finish()),
            Arc::new(self.phase.finish()),
            Arc::new(self.phases.finish()),
            Arc::new(self.br_tgt.finish()),
            Arc::new(self.context.finish()),
            Arc::new(self.ts.finish()),
        ];
        // The builders and the schema are this file's, column for column: a mismatch is a bug
        // here, not a property of the data.
        RecordBatch::try_new(schema.clone(), columns).expect("sample columns match the schema")
    }
}

/// Fills a batch from samples and their attributions.
fn batch(
    rows: &mut SampleRows<'_>,
    schema: &SchemaRef,
    samples: &[SpeSample],
    attrs: &[SampleAttribution],
) -> RecordBatch {
    let mut b = BatchBuilder::new(samples.len());
    for (s, a) in samples.iter().zip(attrs) {
        let r = rows.row(s, a);
        b.time_ns.append_option(r.time_ns);
        b.cpu.append_option(r.cpu);
        b.pid.append_option(r.pid);
        b.tid.append_option(r.tid);
        b.thread.append_option(r.thread);
        b.op.append_option(r.op);
        b.pc.append_option(r.pc);
        b.el.append_option(r.el);
        b.function.append_option(r.function);
        b.function_offset.append_option(r.function_offset);
        b.file.append_option(r.file);
        b.line.append_option(r.line);
        b.dso.append_option(r.dso);
        b.event.append_value(r.event);
        b.event_bits.append_option(r.event_bits);
        b.issue_lat.append_option(r.issue_lat);
        b.total_lat.append_option(r.total_lat);
        b.xlat_lat.append_option(r.xlat_lat);
        b.exec_lat.append_option(r.exec_lat);
        b.vaddr.append_option(r.vaddr);
        b.paddr.append_option(r.paddr);
        b.data_source.append_option(r.data_source);
        b.data_source_raw.append_option(r.data_source_raw);
        b.object.append_option(r.object);
        b.object_kind.append_option(r.object_kind);
        b.object_start.append_option(r.object_start);
        b.allocation_site.append_option(r.allocation_site);
        b.phase.append_option(r.phase);
        for p in &r.phases {
            b.phases.values().append_value(p);
        }
        b.phases.append(true);
        b.br_tgt.append_option(r.br_tgt);
        b.context.append_option(r.context);
        b.ts.append_option(r.ts);
    }
    b.finish(schema)
}

/// Decodes `rec` and attributes every sample, `batch_rows` per record batch.
pub fn sample_batches(
    rec: &Recording,
    objects: &DataObjects,
    batch_rows: usize,
) -> Result<SampleStream, RecordingError> {
    let mut symbolizer = rec.symbolizer(None, None);
    let mut attributor = SampleAttributor::new(rec, objects, &mut symbolizer);
    let mut rows = SampleRows::new(rec);
    let schema = schema();
    let mut batches = Vec::new();
    let mut pending: Vec<SpeSample> = Vec::with_capacity(batch_rows.min(1 << 16));
    let mut flush = |pending: &mut Vec<SpeSample>| {
        let attrs = attributor.attribute(pending);
        batches.push(batch(&mut rows, &schema, pending, &attrs));
        pending.clear();
    };
    rec.decode(|s| {
        pending.push(*s);
        if pending.len() == batch_rows {
            flush(&mut pending);
        }
    })?;
    if !pending.is_empty() {
        flush(&mut pending);
    }
    Ok(SampleStream {
        schema,
        batches: Mutex::new(Some(batches)),
    })
}

/// Record batches for one consumer, through the Arrow PyCapsule protocol.
#[pyclass(module = "spelunk._native", frozen)]
pub struct SampleStream {
    schema: SchemaRef,
    batches: Mutex<Option<Vec<RecordBatch>>>,
}

#[pymethods]
impl SampleStream {
    /// The batches as an `ArrowArrayStream` capsule; they move to the consumer, so a second
    /// call raises.
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        // The columns have one type each; a requested schema is for casts, which the
        // consumer (pyarrow) makes itself.
        let _ = requested_schema;
        let batches = self
            .batches
            .lock()
            .map_err(|_| PyRuntimeError::new_err("sample batches: lock poisoned"))?
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("the sample stream was already read"))?;
        let reader = RecordBatchIterator::new(batches.into_iter().map(Ok), self.schema.clone());
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        // The capsule owns the stream; pyarrow moves it out (leaving a released stream, which
        // the capsule's destructor then drops as a no-op) or, if never consumed, the
        // destructor releases it.
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }
}
