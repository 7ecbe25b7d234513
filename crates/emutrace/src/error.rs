//! The one error type of this crate: every error names the file and the byte offset where the
//! problem starts, so a message alone locates it.

use std::fmt;
use std::io;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum TraceErrorKind {
    #[error("cannot {action}: {source}")]
    Io {
        action: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("not a spelunk emulator trace (magic {found:02x?}, expected \"SPLKEMUT\")")]
    BadMagic { found: Vec<u8> },
    #[error("unsupported trace format version {major}.{minor} (this reader knows major 1)")]
    UnsupportedVersion { major: u16, minor: u16 },
    #[error("file header size {size} is smaller than 32")]
    BadHeaderSize { size: u32 },
    #[error("truncated {what}: needs {needed} bytes, the file ends after {available}")]
    Truncated {
        what: &'static str,
        needed: u64,
        available: u64,
    },
    #[error("{record} record payload of {len} bytes is shorter than its {min}-byte fixed part")]
    TooShort {
        record: &'static str,
        len: usize,
        min: usize,
    },
    #[error("record payload length {len} exceeds the {max}-byte limit")]
    TooLarge { len: u32, max: u32 },
    #[error("malformed {record} record: {detail}")]
    Malformed {
        record: &'static str,
        detail: String,
    },
}

/// An error reading a trace: `Display` is `FILE: byte OFFSET: what went wrong`.
#[derive(Debug)]
pub struct TraceError {
    /// The file (or the name given to [`crate::TraceReader::new`]).
    pub file: String,
    /// Byte offset in the file where the offending record (or structure) starts.
    pub offset: u64,
    pub kind: TraceErrorKind,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: byte {}: {}", self.file, self.offset, self.kind)
    }
}

impl std::error::Error for TraceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.kind)
    }
}
