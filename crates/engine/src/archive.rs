//! `spelunk archive FILE`: the recording, its sidecar and the files its samples are named from,
//! in one tar file, so the report made elsewhere (another machine, or after a rebuild) names
//! what the recording's report named here: `tar xf FILE.tar -C DIR` and
//! `spelunk report DIR/FILE --symfs DIR`.
//!
//! Members: the recording and its sidecar under their own names; each mapped file the
//! recording lists a build-id for (HEADER_BUILD_ID), found here by that build-id
//! ([`spelunk_analysis::locate`]: never a rebuilt namesake), as `.build-id/xx/yyyy…` (perf's
//! build-id cache layout, which `--symfs` looks in first) and, as a hard link to it, under its
//! recorded path (so a report by path under `--symfs` finds it too). Files without a
//! recorded build-id, or no longer here with it, are left out and listed.
//!
//! The tar format (POSIX.1-2001, the `pax` utility's ustar and pax interchange formats): a
//! 512-byte header per member (name\[100\], mode, uid, gid, size\[12\] and mtime\[12\] in octal,
//! checksum, type flag '0' file / '1' hard link / 'x' pax extended header, linkname\[100\],
//! magic "ustar\0", version "00", ...), the contents padded to 512 bytes, and two zero
//! blocks at the end; names or link names longer than the header holds go in a pax `x`
//! header's `path=` / `linkpath=` records before the member.

use spelunk_analysis::locate::{Located, Locator};
use spelunk_perf::sidecar::Sidecar;
use spelunk_perf::{PerfDataFile, PerfError};
use std::io::{BufWriter, Read as _, Write};
use std::path::{Path, PathBuf};

/// What went into an archive.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArchiveSummary {
    pub output: PathBuf,
    /// The recording's member name (its file name).
    pub recording: String,
    /// The sidecar's member name, when there is one.
    pub sidecar: Option<String>,
    pub files: Vec<ArchivedFile>,
    /// Mapped files left out, and why.
    pub left_out: Vec<(String, String)>,
    pub size_bytes: u64,
}

/// A mapped file in an archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchivedFile {
    /// The path the recording names it by.
    pub recorded_path: String,
    pub build_id: String,
    pub size_bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error(transparent)]
    Perf(#[from] PerfError),
    #[error("{path}: cannot {action}: {source}")]
    Io {
        path: String,
        action: &'static str,
        source: std::io::Error,
    },
    #[error("{path}: {size_bytes} bytes is more than a tar member can hold here (8 GiB)")]
    TooLarge { path: String, size_bytes: u64 },
}

const BLOCK: usize = 512;
/// The largest size the 11 octal digits of a ustar header hold.
const MAX_MEMBER_BYTES: u64 = 0o77_777_777_777;

/// `n` in octal, NUL-terminated, right-aligned with zeros in a field of `width` bytes.
fn octal(field: &mut [u8], n: u64) {
    let width = field.len();
    let s = format!("{n:0w$o}\0", w = width - 1);
    field.copy_from_slice(&s.as_bytes()[s.len() - width..]);
}

/// One ustar header (type `kind`), for a name and link name that fit.
fn header(name: &str, link: &str, size: u64, mtime: u64, kind: u8) -> [u8; BLOCK] {
    let mut h = [0u8; BLOCK];
    let put = |h: &mut [u8; BLOCK], at: usize, len: usize, s: &str| {
        let b = s.as_bytes();
        let n = b.len().min(len);
        h[at..at + n].copy_from_slice(&b[..n]);
    };
    put(&mut h, 0, 100, name);
    octal(&mut h[100..108], 0o644);
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    octal(&mut h[124..136], size);
    octal(&mut h[136..148], mtime);
    h[156] = kind;
    put(&mut h, 157, 100, link);
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    // The checksum: the sum of the header's bytes with its own field as spaces.
    h[148..156].copy_from_slice(b"        ");
    let sum: u64 = h.iter().map(|b| u64::from(*b)).sum();
    let s = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(s.as_bytes());
    h
}

/// A pax record `"LEN key=value\n"`, LEN counting the whole record.
fn pax_record(key: &str, value: &str) -> String {
    let body = format!(" {key}={value}\n");
    let mut len = body.len() + 1;
    while format!("{len}").len() + body.len() > len {
        len += 1;
    }
    format!("{len}{body}")
}

struct TarWriter<W: Write> {
    out: W,
    written: u64,
    display: String,
}

impl<W: Write> TarWriter<W> {
    fn io(&self, action: &'static str, source: std::io::Error) -> ArchiveError {
        ArchiveError::Io {
            path: self.display.clone(),
            action,
            source,
        }
    }

    fn put(&mut self, b: &[u8]) -> Result<(), ArchiveError> {
        self.out.write_all(b).map_err(|e| self.io("write", e))?;
        self.written += b.len() as u64;
        Ok(())
    }

    fn pad(&mut self, len: u64) -> Result<(), ArchiveError> {
        let rest = (BLOCK as u64 - len % BLOCK as u64) % BLOCK as u64;
        self.put(&vec![0u8; rest as usize])
    }

    /// A member's header, preceded by a pax header when the names do not fit.
    fn head(
        &mut self,
        name: &str,
        link: &str,
        size: u64,
        mtime: u64,
        kind: u8,
    ) -> Result<(), ArchiveError> {
        if name.len() > 99 || link.len() > 99 {
            let mut pax = pax_record("path", name);
            if !link.is_empty() {
                pax.push_str(&pax_record("linkpath", link));
            }
            self.put(&header("pax", "", pax.len() as u64, mtime, b'x'))?;
            self.put(pax.as_bytes())?;
            self.pad(pax.len() as u64)?;
        }
        self.put(&header(name, link, size, mtime, kind))
    }

    /// The file at `path` as member `name`; returns its size.
    fn file(&mut self, name: &str, path: &Path) -> Result<u64, ArchiveError> {
        let io = |action, source| ArchiveError::Io {
            path: path.display().to_string(),
            action,
            source,
        };
        let mut f = std::fs::File::open(path).map_err(|e| io("open", e))?;
        let meta = f.metadata().map_err(|e| io("read", e))?;
        let size = meta.len();
        if size > MAX_MEMBER_BYTES {
            return Err(ArchiveError::TooLarge {
                path: path.display().to_string(),
                size_bytes: size,
            });
        }
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs());
        self.head(name, "", size, mtime, b'0')?;
        let copied =
            std::io::copy(&mut (&mut f).take(size), &mut self.out).map_err(|e| io("copy", e))?;
        if copied != size {
            return Err(io(
                "copy",
                std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "it shrank while read"),
            ));
        }
        self.written += size;
        self.pad(size)?;
        Ok(size)
    }
}

/// Where the archive of `perf_data` goes by default: `FILE.tar` next to it.
pub fn default_output(perf_data: &Path) -> PathBuf {
    let mut p = perf_data.as_os_str().to_owned();
    p.push(".tar");
    PathBuf::from(p)
}

/// Writes the archive of the recording `perf_data` to `output` (replaced only when complete).
pub fn archive(perf_data: &Path, output: &Path) -> Result<ArchiveSummary, ArchiveError> {
    let file = PerfDataFile::open(perf_data)?;
    let display = output.display().to_string();
    let io = |action, source| ArchiveError::Io {
        path: display.clone(),
        action,
        source,
    };
    let out = spelunk_fsio::AtomicFile::create(output).map_err(|e| io("create", e))?;
    let mut tar = TarWriter {
        out: BufWriter::new(out),
        written: 0,
        display: display.clone(),
    };
    let name = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "perf.data".into())
    };
    let mut summary = ArchiveSummary {
        output: output.to_path_buf(),
        recording: name(perf_data),
        ..Default::default()
    };
    tar.file(&summary.recording, perf_data)?;
    let sidecar = Sidecar::path_for(perf_data);
    if sidecar.is_file() {
        let member = name(&sidecar);
        tar.file(&member, &sidecar)?;
        summary.sidecar = Some(member);
    }
    // Found by build-id wherever it is here (caches too), never by path alone.
    let locator = Locator::new(None);
    let mut seen = std::collections::HashSet::new();
    for e in &file.features.build_ids {
        if !e.path.starts_with('/') || !seen.insert(e.build_id.clone()) {
            continue;
        }
        let Some(member) = e.build_id.cache_path() else {
            continue;
        };
        match locator.locate(&e.path, Some(&e.build_id.0)) {
            Located::Found(local) => {
                let size_bytes = tar.file(&member, &local)?;
                let link_name = e.path.trim_start_matches('/');
                tar.head(link_name, &member, 0, 0, b'1')?;
                summary.files.push(ArchivedFile {
                    recorded_path: e.path.clone(),
                    build_id: e.build_id.hex(),
                    size_bytes,
                });
            }
            Located::Missing => summary
                .left_out
                .push((e.path.clone(), "not found here".into())),
            Located::Mismatch { found, .. } => summary.left_out.push((
                e.path.clone(),
                format!(
                    "the file here has build-id {found}, the recording {} (rebuilt since)",
                    e.build_id
                ),
            )),
        }
    }
    tar.put(&[0u8; 2 * BLOCK])?;
    summary.size_bytes = tar.written;
    let out = tar
        .out
        .into_inner()
        .map_err(|e| io("write", e.into_error()))?;
    out.commit().map_err(|e| io("rename into place", e))?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_and_pax_records_follow_the_format() {
        let h = header("a.txt", "", 5, 0, b'0');
        // Size 5 in 11 octal digits, NUL; magic; a checksum that adds up.
        assert_eq!(&h[124..136], b"00000000005\0");
        assert_eq!(&h[257..265], b"ustar\x0000");
        let sum: u64 = h
            .iter()
            .enumerate()
            .map(|(i, b)| {
                if (148..156).contains(&i) {
                    32
                } else {
                    u64::from(*b)
                }
            })
            .sum();
        let field = std::str::from_utf8(&h[148..154]).unwrap();
        assert_eq!(u64::from_str_radix(field, 8).unwrap(), sum);
        // "LEN path=x\n": the length counts its own digits (9 bytes here).
        assert_eq!(pax_record("path", "x"), "9 path=x\n");
        let long = "d/".repeat(60);
        let r = pax_record("path", &long);
        assert_eq!(r.len().to_string(), r.split(' ').next().unwrap());
    }
}
