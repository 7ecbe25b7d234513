//! Streaming reader: one record at a time, constant memory (one payload buffer).

use crate::error::{TraceError, TraceErrorKind};
use crate::format::{
    self, record_name, record_type, FILE_HEADER_LEN, MAGIC, MAX_PAYLOAD, RECORD_HEADER_LEN,
};
use crate::parse;
use crate::types::{CounterDef, Record};
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;
use std::sync::Arc;

/// The file header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileHeader {
    pub version_major: u16,
    pub version_minor: u16,
    pub header_len: u32,
    pub flags: u64,
}

/// Reads a trace record by record.
///
/// ```no_run
/// use spelunk_emutrace::{Record, TraceReader};
/// let mut r = TraceReader::open("spelunk.emutrace")?;
/// while let Some(rec) = r.next_record()? {
///     if let Record::Sample(s) = rec {
///         println!("{:x?}", s.record.pc);
///     }
/// }
/// # Ok::<(), spelunk_emutrace::TraceError>(())
/// ```
pub struct TraceReader<R> {
    inner: R,
    name: String,
    offset: u64,
    header: FileHeader,
    schema: Option<Arc<[CounterDef]>>,
    payload: Vec<u8>,
    failed: bool,
}

impl TraceReader<BufReader<File>> {
    /// Opens a trace file and reads its header.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let f = File::open(path).map_err(|source| TraceError {
            file: name.clone(),
            offset: 0,
            kind: TraceErrorKind::Io {
                action: "open",
                source,
            },
        })?;
        TraceReader::new(BufReader::with_capacity(1 << 20, f), name)
    }
}

/// Reads up to `buf.len()` bytes; returns how many (short only at end of input).
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl<R: Read> TraceReader<R> {
    /// Wraps a byte source; `name` is used in error messages. Reads and checks the header.
    pub fn new(mut inner: R, name: impl Into<String>) -> Result<Self, TraceError> {
        let name = name.into();
        let err = |offset: u64, kind| TraceError {
            file: name.clone(),
            offset,
            kind,
        };
        let mut h = [0u8; FILE_HEADER_LEN];
        let n = read_full(&mut inner, &mut h).map_err(|source| {
            err(
                0,
                TraceErrorKind::Io {
                    action: "read the file header",
                    source,
                },
            )
        })?;
        if n < 8 || &h[..8] != MAGIC {
            return Err(err(
                0,
                TraceErrorKind::BadMagic {
                    found: h[..n.min(8)].to_vec(),
                },
            ));
        }
        if n < FILE_HEADER_LEN {
            return Err(err(
                0,
                TraceErrorKind::Truncated {
                    what: "file header",
                    needed: FILE_HEADER_LEN as u64,
                    available: n as u64,
                },
            ));
        }
        let header = FileHeader {
            version_major: u16::from_le_bytes([h[8], h[9]]),
            version_minor: u16::from_le_bytes([h[10], h[11]]),
            header_len: u32::from_le_bytes([h[12], h[13], h[14], h[15]]),
            flags: u64::from_le_bytes([h[16], h[17], h[18], h[19], h[20], h[21], h[22], h[23]]),
        };
        if header.version_major != format::VERSION_MAJOR {
            return Err(err(
                8,
                TraceErrorKind::UnsupportedVersion {
                    major: header.version_major,
                    minor: header.version_minor,
                },
            ));
        }
        if (header.header_len as usize) < FILE_HEADER_LEN {
            return Err(err(
                12,
                TraceErrorKind::BadHeaderSize {
                    size: header.header_len,
                },
            ));
        }
        // a later minor version may have a longer header: skip the rest
        let extra = header.header_len as usize - FILE_HEADER_LEN;
        if extra > 0 {
            let mut skip = vec![0u8; extra.min(1 << 16)];
            let mut left = extra;
            while left > 0 {
                let k = left.min(skip.len());
                let got = read_full(&mut inner, &mut skip[..k]).map_err(|source| {
                    err(
                        FILE_HEADER_LEN as u64,
                        TraceErrorKind::Io {
                            action: "read the file header",
                            source,
                        },
                    )
                })?;
                if got < k {
                    return Err(err(
                        0,
                        TraceErrorKind::Truncated {
                            what: "file header",
                            needed: u64::from(header.header_len),
                            available: (header.header_len as usize - left + got) as u64,
                        },
                    ));
                }
                left -= k;
            }
        }
        Ok(TraceReader {
            inner,
            name,
            offset: u64::from(header.header_len),
            header,
            schema: None,
            payload: Vec::new(),
            failed: false,
        })
    }

    pub fn header(&self) -> &FileHeader {
        &self.header
    }

    /// Byte offset of the next record.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The file name used in errors.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The counter schema, once its record has been read.
    pub fn schema(&self) -> Option<&Arc<[CounterDef]>> {
        self.schema.as_ref()
    }

    fn error(&mut self, offset: u64, kind: TraceErrorKind) -> TraceError {
        self.failed = true;
        TraceError {
            file: self.name.clone(),
            offset,
            kind,
        }
    }

    /// The next record; `Ok(None)` at the end of the file (exactly at a record boundary).
    /// After an error the reader returns `Ok(None)`.
    pub fn next_record(&mut self) -> Result<Option<Record>, TraceError> {
        if self.failed {
            return Ok(None);
        }
        let start = self.offset;
        let mut h = [0u8; RECORD_HEADER_LEN];
        let n = match read_full(&mut self.inner, &mut h) {
            Ok(n) => n,
            Err(source) => {
                return Err(self.error(
                    start,
                    TraceErrorKind::Io {
                        action: "read a record header",
                        source,
                    },
                ))
            }
        };
        if n == 0 {
            return Ok(None);
        }
        if n < RECORD_HEADER_LEN {
            return Err(self.error(
                start,
                TraceErrorKind::Truncated {
                    what: "record header",
                    needed: RECORD_HEADER_LEN as u64,
                    available: n as u64,
                },
            ));
        }
        let rtype = u16::from_le_bytes([h[0], h[1]]);
        let len = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
        if len > MAX_PAYLOAD {
            return Err(self.error(
                start,
                TraceErrorKind::TooLarge {
                    len,
                    max: MAX_PAYLOAD,
                },
            ));
        }
        // read through `take` so a corrupt length costs only the bytes actually present
        let mut payload = std::mem::take(&mut self.payload);
        payload.clear();
        let got = match (&mut self.inner)
            .take(u64::from(len))
            .read_to_end(&mut payload)
        {
            Ok(g) => g,
            Err(source) => {
                self.payload = payload;
                return Err(self.error(
                    start,
                    TraceErrorKind::Io {
                        action: "read a record payload",
                        source,
                    },
                ));
            }
        };
        if got < len as usize {
            self.payload = payload;
            return Err(self.error(
                start,
                TraceErrorKind::Truncated {
                    what: record_name(rtype),
                    needed: u64::from(len),
                    available: got as u64,
                },
            ));
        }
        self.offset = start + RECORD_HEADER_LEN as u64 + u64::from(len);
        let rec = self.parse(rtype, start, &payload);
        self.payload = payload;
        match rec {
            Ok(r) => Ok(Some(r)),
            Err(kind) => Err(self.error(start, kind)),
        }
    }

    fn parse(&mut self, rtype: u16, start: u64, p: &[u8]) -> Result<Record, TraceErrorKind> {
        use record_type::*;
        Ok(match rtype {
            CONFIG => Record::Config(Box::new(parse::config(p)?)),
            PROCESS => Record::Process(parse::process(p)?),
            THREAD_START => Record::ThreadStart(parse::thread_start(p)?),
            THREAD_NAME => Record::ThreadName(parse::thread_name(p)?),
            THREAD_EXIT => Record::ThreadExit(parse::thread_exit(p)?),
            MMAP => Record::Mmap(parse::mmap(p)?),
            MUNMAP => Record::Munmap(parse::munmap(p)?),
            COUNTER_SCHEMA => {
                let s = parse::counter_schema(p)?;
                self.schema = Some(s.clone());
                Record::CounterSchema(s)
            }
            SAMPLE => Record::Sample(parse::sample(p)?),
            ANNOTATION => Record::Annotation(parse::annotation(p)?),
            COUNTERS => Record::Counters(parse::counters(p, self.schema.as_ref())?),
            OBJECT_TRUTH => Record::ObjectTruth(parse::object_truth(p)?),
            END => Record::End(parse::end(p)?),
            ALLOC => Record::Alloc(parse::alloc(p)?),
            FREE => Record::Free(parse::free(p)?),
            BLOCK_TRUTH => Record::BlockTruth(parse::block_truth(p)?),
            other => Record::Unknown {
                record_type: other,
                offset: start,
                payload_len: p.len() as u32,
            },
        })
    }
}

impl<R: Read> Iterator for TraceReader<R> {
    type Item = Result<Record, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}
