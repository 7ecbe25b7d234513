//! `spelunk._native`: the Rust half of the Python package `spelunk` (the typed, documented API
//! is the pure-Python half, crates/python/python/spelunk). Wiring only, as the CLI is: a
//! recording is opened, decoded, attributed and reported by spelunk-analysis, exactly as the
//! `spelunk` commands do it; this crate turns the results into Python values — the report
//! model as dicts and lists (what `spelunk report --json` prints, without going through text),
//! the attributed samples as Arrow record batches (samples.rs).
//!
//! Errors are the CLI's messages (spelunk_engine::recording::error_line), raised as
//! `spelunk.errors.SpelunkError`, or its subclass `RecordingNotFoundError` (also a
//! `FileNotFoundError`) when the file does not exist.

mod samples;
mod values;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use spelunk_analysis::objects::DataObjects;
use spelunk_analysis::profile::{Filter, HotspotSort, ReportLimits};
use spelunk_engine::recording::{error_chain, error_line, Recording, RecordingError, SidecarUse};
use spelunk_engine::report::{check_line_size, C2cOptions, ReportOptions};
use std::path::PathBuf;
use std::sync::OnceLock;

/// The Python exception for `e`: its class from `spelunk.errors`, its message the one line
/// `spelunk` prints (without the `spelunk: error: ` prefix).
fn to_py_err(py: Python<'_>, e: RecordingError) -> PyErr {
    let not_found = error_chain(&e).any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound)
    });
    let class = if not_found {
        "RecordingNotFoundError"
    } else {
        "SpelunkError"
    };
    py_error(py, class, error_line(error_chain(&e)))
}

/// `spelunk.errors.SpelunkError` with `message`.
fn spelunk_error(py: Python<'_>, message: String) -> PyErr {
    py_error(py, "SpelunkError", message)
}

/// The exception `class` of `spelunk.errors` with `message`.
fn py_error(py: Python<'_>, class: &str, message: String) -> PyErr {
    let made = py
        .import("spelunk.errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.call1((message,)));
    match made {
        Ok(exception) => PyErr::from_value(exception),
        Err(e) => e,
    }
}

/// A recording opened for analysis (see `spelunk.Recording`, which wraps it).
#[pyclass(module = "spelunk._native", frozen)]
struct NativeRecording {
    rec: Recording,
    /// The processes' data objects, built on first use (they read the binaries' symbols).
    objects: OnceLock<DataObjects>,
}

impl NativeRecording {
    fn objects(&self) -> &DataObjects {
        self.objects.get_or_init(|| self.rec.ctx.data_objects(None))
    }
}

#[pymethods]
impl NativeRecording {
    /// The file name, as given to `open`.
    #[getter]
    fn path(&self) -> &str {
        self.rec.path()
    }

    /// Every sample, attributed, as Arrow record batches of at most `batch_rows` rows (an
    /// object with `__arrow_c_stream__`, for `pyarrow.table()`).
    #[pyo3(signature = (batch_rows = 65536))]
    fn samples(&self, py: Python<'_>, batch_rows: usize) -> PyResult<samples::SampleStream> {
        if batch_rows == 0 {
            return Err(PyValueError::new_err("batch_rows must be at least 1"));
        }
        py.detach(|| samples::sample_batches(&self.rec, self.objects(), batch_rows))
            .map_err(|e| to_py_err(py, e))
    }

    /// The report (`spelunk report FILE --json`) as a dict: `limit` rows per table, hotspots
    /// ordered by `sort`, and with `c2c` the cache-line sharing tables (`--c2c --line-size`).
    #[pyo3(signature = (limit = 20, sort = "cost", c2c = false, line_size = 64))]
    fn report(
        &self,
        py: Python<'_>,
        limit: usize,
        sort: &str,
        c2c: bool,
        line_size: u64,
    ) -> PyResult<Py<PyAny>> {
        let sort = HotspotSort::parse_or_explain(sort).map_err(PyValueError::new_err)?;
        if c2c {
            check_line_size(line_size).map_err(|e| PyValueError::new_err(e.to_string()))?;
        }
        let opts = ReportOptions {
            filter: Filter::default(),
            limits: ReportLimits {
                hotspot_rows: limit,
                object_rows: limit,
                ..Default::default()
            },
            sort,
            c2c: c2c.then_some(C2cOptions { line_size, limit }),
            advise: true,
        };
        let report = py
            .detach(|| {
                let mut symbolizer = self.rec.symbolizer(None, None);
                let report = self.rec.report(self.objects(), &mut symbolizer, opts)?;
                self.rec.require_samples(&report)?;
                Ok(report)
            })
            .map_err(|e| to_py_err(py, e))?;
        values::to_python(py, &report)
    }

    /// The advisor's findings (`spelunk advise FILE --json`) as a dict: `findings`,
    /// `ruled_out`, `totals`, `notes`.
    fn advice(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let advice = py
            .detach(|| {
                let mut symbolizer = self.rec.symbolizer(None, None);
                let req = spelunk_engine::report::ReportRequest {
                    advise: true,
                    ..Default::default()
                };
                self.rec.requested_advice(&req, &mut symbolizer)
            })
            .map_err(|e| to_py_err(py, e))?;
        values::to_python(py, &advice)
    }

    /// The cache lines shared between cores (`spelunk c2c FILE --json`) as a dict.
    #[pyo3(signature = (line_size = 64, limit = 20))]
    fn c2c(&self, py: Python<'_>, line_size: u64, limit: usize) -> PyResult<Py<PyAny>> {
        check_line_size(line_size).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let report = py
            .detach(|| {
                let (scan, stats) = self.rec.c2c_scan(Filter::default(), line_size)?;
                let mut symbolizer = self.rec.symbolizer(None, None);
                scan.finish(&self.rec, &stats, self.objects(), &mut symbolizer, limit)
            })
            .map_err(|e| to_py_err(py, e))?;
        values::to_python(py, &report)
    }

    /// The top-down figures of the PMU counts in the recording's sidecar (`spelunk topdown
    /// --import FILE --json`, with `--per-phase` when `per_phase`) as a dict.
    #[pyo3(signature = (per_phase = false))]
    fn topdown(&self, py: Python<'_>, per_phase: bool) -> PyResult<Py<PyAny>> {
        let path = spelunk_perf::sidecar::Sidecar::path_for(std::path::Path::new(self.rec.path()));
        let Some(sc) = self.rec.ctx.sidecar.as_deref() else {
            return Err(spelunk_error(
                py,
                format!(
                    "{}: no sidecar with PMU counts ({} does not exist or was ignored): record \
                     with `spelunk record --emulate`, or import `perf stat` output with \
                     `spelunk topdown --import`",
                    self.rec.path(),
                    path.display()
                ),
            ));
        };
        let opts = spelunk_pmu::sidecar::SidecarTopdown {
            per_phase,
            ..Default::default()
        };
        let report = spelunk_pmu::sidecar::topdown(sc, &path.display().to_string(), &opts)
            .map_err(|e| spelunk_error(py, e.to_string()))?;
        values::to_python(py, &report)
    }
}

/// Opens `path`, a perf.data with Arm SPE data, as `spelunk report` does; raises when it is
/// missing, not a perf.data, without SPE metadata, or without SPE data.
#[pyfunction]
#[pyo3(signature = (path, ignore_sidecar = false))]
fn open(py: Python<'_>, path: PathBuf, ignore_sidecar: bool) -> PyResult<NativeRecording> {
    let how = if ignore_sidecar {
        SidecarUse::Ignore
    } else {
        SidecarUse::Read
    };
    let rec = py
        .detach(|| {
            let rec = Recording::open(&path, None, how)?;
            rec.require_spe_data()?;
            Ok(rec)
        })
        .map_err(|e| to_py_err(py, e))?;
    Ok(NativeRecording {
        rec,
        objects: OnceLock::new(),
    })
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeRecording>()?;
    m.add_class::<samples::SampleStream>()?;
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
