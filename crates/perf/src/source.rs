//! Where a perf.data's bytes come from: a file read with positional reads (so any number of
//! threads can read different AUX chunks through one `&PerfDataFile`), or memory (for fuzzing
//! and tests). Both go through the same reader code.

use std::fs::File;
use std::io;
use std::sync::Arc;

/// Random-access, thread-safe byte source.
pub trait ReadAt: Send + Sync {
    /// Total length in bytes.
    fn len(&self) -> u64;
    /// True when the source has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fills `buf` from `offset`, or fails with `UnexpectedEof` when the source ends first.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
}

/// A file read with `pread` (`std::os::unix::fs::FileExt::read_exact_at`); the length is taken
/// once at open.
#[derive(Debug)]
pub struct FileSource {
    file: File,
    len: u64,
}

impl FileSource {
    pub fn new(file: File) -> io::Result<FileSource> {
        let len = file.metadata()?.len();
        Ok(FileSource { file, len })
    }
}

impl ReadAt for FileSource {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(&self.file, buf, offset)
    }
}

/// Bytes in memory.
#[derive(Clone, Debug)]
pub struct MemorySource(pub Arc<[u8]>);

impl ReadAt for MemorySource {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| eof())?;
        let end = start.checked_add(buf.len()).ok_or_else(eof)?;
        let src = self.0.get(start..end).ok_or_else(eof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

fn eof() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end")
}

/// Sequential reads over a [`ReadAt`] through a fixed-size buffer, for walking the data
/// section without a syscall per record header. `seek` within the buffer is free.
pub(crate) struct BufferedCursor<'a> {
    src: &'a dyn ReadAt,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    buf_start: u64,
    buf_len: usize,
}

impl<'a> BufferedCursor<'a> {
    pub(crate) fn new(src: &'a dyn ReadAt, capacity: usize) -> Self {
        BufferedCursor {
            src,
            buf: vec![0; capacity],
            buf_start: 0,
            buf_len: 0,
        }
    }

    /// Returns `len` bytes at `offset` (len <= capacity), reading through the buffer.
    pub(crate) fn bytes_at(&mut self, offset: u64, len: usize) -> io::Result<&[u8]> {
        let in_buf = offset >= self.buf_start
            && offset
                .checked_add(len as u64)
                .is_some_and(|e| e <= self.buf_start + self.buf_len as u64);
        if !in_buf {
            if len > self.buf.len() {
                self.buf.resize(len, 0);
            }
            let avail = self.src.len().saturating_sub(offset);
            if avail < len as u64 {
                return Err(eof());
            }
            let n = (self.buf.len() as u64).min(avail) as usize;
            self.src.read_exact_at(&mut self.buf[..n], offset)?;
            self.buf_start = offset;
            self.buf_len = n;
        }
        let s = (offset - self.buf_start) as usize;
        Ok(&self.buf[s..s + len])
    }
}

/// A `Read + Seek` view of a [`ReadAt`] in which some byte ranges are replaced, used to hand
/// linux-perf-data a sanitized header and feature table (see `reader.rs`). Ranges must not
/// overlap; bytes past the source's end exist only where an overlay provides them.
pub(crate) struct OverlayCursor<'a> {
    pub(crate) src: &'a dyn ReadAt,
    pub(crate) overlays: Vec<(u64, Vec<u8>)>,
    pub(crate) pos: u64,
}

impl io::Read for OverlayCursor<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        let pos = self.pos;
        // Inside an overlay?
        for (start, bytes) in &self.overlays {
            let end = start + bytes.len() as u64;
            if pos >= *start && pos < end {
                let s = (pos - start) as usize;
                let n = out.len().min(bytes.len() - s);
                out[..n].copy_from_slice(&bytes[s..s + n]);
                self.pos += n as u64;
                return Ok(n);
            }
        }
        // Stop at the next overlay start or the end of the source.
        let mut limit = self.src.len();
        for (start, _) in &self.overlays {
            if *start > pos {
                limit = limit.min(*start);
            }
        }
        if pos >= limit {
            return Ok(0);
        }
        let n = (out.len() as u64).min(limit - pos) as usize;
        self.src.read_exact_at(&mut out[..n], pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl io::Seek for OverlayCursor<'_> {
    fn seek(&mut self, to: io::SeekFrom) -> io::Result<u64> {
        let new = match to {
            io::SeekFrom::Start(p) => Some(p),
            io::SeekFrom::Current(d) => self.pos.checked_add_signed(d),
            io::SeekFrom::End(d) => self.src.len().checked_add_signed(d),
        };
        self.pos = new.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bad seek"))?;
        Ok(self.pos)
    }
}
