//! Errors of the PMU library. Each carries the file, line or name it is about.

use std::path::PathBuf;

/// Something in a metric expression could not be parsed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("cannot parse expression {expr:?} at byte {offset}: {message}")]
pub struct ExprError {
    pub expr: String,
    pub offset: usize,
    pub message: String,
}

/// Errors from loading catalogs, detecting CPUs and importing counts.
#[derive(Debug, thiserror::Error)]
pub enum PmuError {
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{origin}: not an Arm telemetry specification: {message}")]
    Spec { origin: String, message: String },
    #[error("{origin}: metric {metric}: {source}")]
    Formula {
        origin: String,
        metric: String,
        #[source]
        source: ExprError,
    },
    #[error("unknown CPU {name:?}; known: {known}")]
    UnknownCpu { name: String, known: String },
    #[error("{path}:{line}: {message}")]
    Import {
        path: String,
        line: usize,
        message: String,
    },
    #[error("{0}")]
    Detect(String),
    #[error(transparent)]
    Sidecar(#[from] spelunk_perf::sidecar::SidecarError),
    /// A file given to import that holds none of the importable kinds.
    #[error("{path}: {message}", path = .path.display())]
    NotImportable { path: PathBuf, message: String },
    #[error("unknown metric group or metric {name:?} for {cpu}; available groups: {known}")]
    UnknownSelection {
        name: String,
        cpu: String,
        known: String,
    },
}

impl PmuError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        PmuError::Io {
            path: path.into(),
            source,
        }
    }
}
