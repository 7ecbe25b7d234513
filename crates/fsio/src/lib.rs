//! File safety for every command that writes: an output never lands on an input, and an output
//! is written whole or not at all.
//!
//! - [`OutputGuard`] holds a command's inputs (the recording, its sidecar, the program being
//!   recorded, an imported file) by device and inode, so an output path that names one of them
//!   — directly, through a symlink or a hard link, or under another spelling — is refused
//!   before anything is written. A path that does not exist yet cannot be an input.
//! - [`AtomicFile`] writes into a temporary file in the destination's directory and renames it
//!   over the destination on [`AtomicFile::commit`]. A run that fails or is interrupted before
//!   then leaves the destination as it was (and removes the temporary file, except when the
//!   process is killed outright). The new file gets the usual creation mode (0666 less the
//!   umask), like `File::create`, not the temporary file's 0600.
//!
//! Why a crate of its own: every stage that writes (perf.data and sidecar in spelunk-perf,
//! tables in spelunk-report, pages and JSON in the CLI) needs the same two rules.

use std::fs::{File, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// An output that would overwrite an input.
#[derive(Debug, thiserror::Error)]
#[error("refusing to write {output}: it is the input {input}{how}; choose another output path")]
pub struct OutputIsInput {
    pub output: PathBuf,
    pub input: PathBuf,
    how: &'static str,
}

/// A command's inputs, by identity.
#[derive(Clone, Debug, Default)]
pub struct OutputGuard {
    inputs: Vec<(PathBuf, u64, u64)>,
}

impl OutputGuard {
    pub fn new() -> OutputGuard {
        OutputGuard::default()
    }

    /// Records an input. One that does not exist (yet) is ignored: nothing can overwrite it.
    pub fn input(&mut self, path: &Path) -> &mut Self {
        if let Ok(m) = std::fs::metadata(path) {
            self.inputs.push((path.to_path_buf(), m.dev(), m.ino()));
        }
        self
    }

    /// Records several inputs.
    pub fn inputs<'p>(&mut self, paths: impl IntoIterator<Item = &'p Path>) -> &mut Self {
        for p in paths {
            self.input(p);
        }
        self
    }

    /// Refuses `output` when it is one of the inputs (same device and inode).
    pub fn check(&self, output: &Path) -> Result<(), OutputIsInput> {
        let Ok(m) = std::fs::metadata(output) else {
            return Ok(());
        };
        for (input, dev, ino) in &self.inputs {
            if m.dev() == *dev && m.ino() == *ino {
                let same_spelling = output == input.as_path();
                return Err(OutputIsInput {
                    output: output.to_path_buf(),
                    input: input.clone(),
                    how: if same_spelling {
                        ""
                    } else {
                        " (the same file under another name)"
                    },
                });
            }
        }
        Ok(())
    }

    /// Checks every output.
    pub fn check_all<'p>(
        &self,
        outputs: impl IntoIterator<Item = &'p Path>,
    ) -> Result<(), OutputIsInput> {
        outputs.into_iter().try_for_each(|o| self.check(o))
    }
}

/// A file written in full or not at all (see the module docs).
#[derive(Debug)]
pub struct AtomicFile {
    tmp: tempfile::NamedTempFile,
    dest: PathBuf,
}

impl AtomicFile {
    /// Starts writing `dest`: a temporary file next to it.
    pub fn create(dest: &Path) -> io::Result<AtomicFile> {
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: not a file name", dest.display()),
            ));
        }
        if dest.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("{} is a directory", dest.display()),
            ));
        }
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".part")
            .permissions(Permissions::from_mode(0o666))
            .tempfile_in(dir)?;
        Ok(AtomicFile {
            tmp,
            dest: dest.to_path_buf(),
        })
    }

    /// The file being written.
    pub fn file(&mut self) -> &mut File {
        self.tmp.as_file_mut()
    }

    /// Where it goes on commit.
    pub fn destination(&self) -> &Path {
        &self.dest
    }

    /// Flushes and renames the file over the destination.
    pub fn commit(mut self) -> io::Result<()> {
        self.tmp.as_file_mut().flush()?;
        self.tmp.persist(&self.dest).map_err(|e| e.error)?;
        Ok(())
    }

    /// Keeps what was written under another name (`path`, which must not exist: an existing
    /// file is never replaced), for output that failed half-way but is still worth having,
    /// e.g. a recording cut short by a full disk. The destination is left as it was.
    pub fn keep_as(mut self, path: &Path) -> io::Result<()> {
        let _ = self.tmp.as_file_mut().flush();
        self.tmp.persist_noclobber(path).map_err(|e| e.error)?;
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tmp.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.tmp.flush()
    }
}

impl io::Seek for AtomicFile {
    fn seek(&mut self, pos: io::SeekFrom) -> io::Result<u64> {
        self.tmp.as_file_mut().seek(pos)
    }
}

/// What kind of thing a path is, in words, for errors about files that are not regular.
fn kind_of(m: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Refuses, before opening it, what is not a regular file: a FIFO or a pipe would block or
/// never end, a device (`/dev/zero`) never ends, a directory is not an input. Returns the size.
/// spelunk reads recordings by position and needs their size; pipe-mode perf.data is not
/// supported.
pub fn regular_file(path: &Path) -> io::Result<u64> {
    let m = std::fs::metadata(path)?;
    if m.is_file() {
        return Ok(m.len());
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{} is {}; spelunk reads its inputs from regular files (save a pipe's output to a \
             file first)",
            path.display(),
            kind_of(&m)
        ),
    ))
}

/// Reads a whole regular file of at most `max_bytes` (a file over the limit is refused, not
/// cut). Files the kernel reports as empty but that have content (procfs) are read up to the
/// limit too.
pub fn read_bounded(path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let len = regular_file(path)?;
    let too_large = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} is larger than {max_bytes} bytes, more than such a file can sensibly hold",
                path.display()
            ),
        )
    };
    if len > max_bytes {
        return Err(too_large());
    }
    let mut out = Vec::with_capacity(len as usize);
    File::open(path)?
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut out)?;
    if out.len() as u64 > max_bytes {
        return Err(too_large());
    }
    Ok(out)
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_to_string_bounded(path: &Path, max_bytes: u64) -> io::Result<String> {
    String::from_utf8(read_bounded(path, max_bytes)?).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not UTF-8 text", path.display()),
        )
    })
}

/// Writes `bytes` to `path` in full or not at all.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes)?;
    f.commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("spelunk-fsio-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn an_output_that_is_an_input_under_any_name_is_refused() {
        let d = scratch("guard");
        let input = d.join("r.data");
        std::fs::write(&input, b"recording").unwrap();
        std::os::unix::fs::symlink(&input, d.join("link")).unwrap();
        std::fs::hard_link(&input, d.join("hard")).unwrap();
        let mut g = OutputGuard::new();
        g.input(&input).input(&d.join("missing"));
        for out in [
            input.clone(),
            d.join("link"),
            d.join("hard"),
            d.join(".").join("r.data"),
        ] {
            let e = g.check(&out).unwrap_err();
            assert!(e.to_string().contains("refusing to write"), "{e}");
        }
        assert!(g.check(&d.join("report.html")).is_ok());
        assert!(g.check(&d.join("missing")).is_ok());
        assert_eq!(std::fs::read(&input).unwrap(), b"recording");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn only_regular_files_of_bounded_size_are_read() {
        let d = scratch("bounded");
        let e = read_bounded(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("a character device"), "{e}");
        let e = read_bounded(&d, 10).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        let fifo = d.join("fifo");
        assert!(Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let e = read_bounded(&fifo, 10).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        std::fs::write(d.join("big"), [b'x'; 11]).unwrap();
        let e = read_bounded(&d.join("big"), 10).unwrap_err();
        assert!(e.to_string().contains("larger than 10 bytes"), "{e}");
        assert_eq!(read_bounded(&d.join("big"), 11).unwrap().len(), 11);
        // procfs reports size 0 and still has content.
        assert!(
            !read_to_string_bounded(Path::new("/proc/self/status"), 1 << 20)
                .unwrap()
                .is_empty()
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_file_is_replaced_only_on_commit_and_gets_the_usual_mode() {
        let d = scratch("atomic");
        let dest = d.join("out.json");
        std::fs::write(&dest, b"old").unwrap();
        {
            let mut f = AtomicFile::create(&dest).unwrap();
            f.write_all(b"half").unwrap();
            // dropped without commit: an interrupted run
        }
        assert_eq!(std::fs::read(&dest).unwrap(), b"old");
        assert_eq!(
            std::fs::read_dir(&d).unwrap().count(),
            1,
            "temporary file removed"
        );
        write_atomic(&dest, b"new").unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"new");
        // 0666 less the umask, as File::create: at least owner read/write, never execute.
        let mode = std::fs::metadata(&dest).unwrap().permissions().mode() & 0o777;
        let reference = d.join("reference");
        File::create(&reference).unwrap();
        let want = std::fs::metadata(&reference).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, want);
        assert!(
            AtomicFile::create(&d).is_err(),
            "a directory is not a destination"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
