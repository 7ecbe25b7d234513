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
    /// `dest` must be a path for a regular file ([`output_target`]: a device, FIFO, socket or
    /// directory there is refused; a symlink to a regular file is written at its target).
    pub fn create(dest: &Path) -> io::Result<AtomicFile> {
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
        let dest = output_target(dest)?;
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".part")
            .permissions(Permissions::from_mode(0o666))
            .tempfile_in(dir)?;
        Ok(AtomicFile { tmp, dest })
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
        // What is at the destination now, not only when the run started, must be replaceable.
        refuse_unless_regular(&self.dest)?;
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

/// The error for an output path holding something that is not a regular file.
fn not_a_regular_output(path: &Path, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "refusing to write {}: it is {what}; choose a regular file path",
            path.display()
        ),
    )
}

/// Refuses a path that holds anything but a regular file (a symlink included); a missing path
/// is fine.
fn refuse_unless_regular(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(m) if m.file_type().is_symlink() => Err(not_a_regular_output(path, "a symbolic link")),
        Ok(m) => Err(not_a_regular_output(path, kind_of(&m))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Where an output named `path` is written, by spelunk's output policy (docs/files.md):
///
/// - nothing there, or a regular file: `path` itself (the file is replaced whole);
/// - a device node, FIFO, socket or directory: refused, naming what is there — such a path
///   is never replaced by a file;
/// - a symbolic link: written at the file it resolves to when that is an existing regular
///   file (the link stays a link, as a shell's `>` would write through it); a link to nothing
///   or to anything else is refused.
pub fn output_target(path: &Path) -> io::Result<PathBuf> {
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(path.to_path_buf()),
        Err(e) => return Err(e),
    };
    if m.is_file() {
        return Ok(path.to_path_buf());
    }
    if !m.file_type().is_symlink() {
        return Err(not_a_regular_output(path, kind_of(&m)));
    }
    match std::fs::metadata(path) {
        Ok(t) if t.is_file() => std::fs::canonicalize(path),
        Ok(t) => Err(not_a_regular_output(
            path,
            &format!("a symbolic link to {}", kind_of(&t)),
        )),
        Err(_) => Err(not_a_regular_output(
            path,
            "a symbolic link to nothing (spelunk writes through a link only to an existing \
             regular file)",
        )),
    }
}

/// Checks that `path`, below the directory `base` spelunk was given (a dataset, a staging or
/// log directory), stays inside it: no component after `base` may be a symbolic link (one
/// would lead the write out of the directory). Components that do not exist yet are fine.
pub fn check_within(base: &Path, path: &Path) -> io::Result<()> {
    let rest = path.strip_prefix(base).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not inside {}", path.display(), base.display()),
        )
    })?;
    let mut at = base.to_path_buf();
    for c in rest.components() {
        use std::path::Component;
        if !matches!(c, Component::Normal(_)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} leaves {}", path.display(), base.display()),
            ));
        }
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "refusing to write through {}: it is a symbolic link inside {}, and \
                         spelunk never follows one out of a directory it was given",
                        at.display(),
                        base.display()
                    ),
                ))
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Creates the directory `path` (and its missing parents) below `base`, following no symbolic
/// link below `base` ([`check_within`]); an existing component that is not a directory is
/// refused.
pub fn create_dir_within(base: &Path, path: &Path) -> io::Result<()> {
    check_within(base, path)?;
    std::fs::create_dir_all(path)?;
    // Checked again: a link planted between the check and the creation is caught here.
    check_within(base, path)
}

/// `FILE.old`: where the previous recording goes when a new one replaces it.
pub fn old_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".old");
    PathBuf::from(p)
}

/// A recording written under a private name next to its destination and moved into place,
/// with its companions (the sidecar, a kept trace), only when the run succeeded
/// ([`StagedRecording::install`]). Dropped without being installed, it removes what it
/// staged: a failed run leaves the previous recording as it was.
#[derive(Debug)]
pub struct StagedRecording {
    /// The destination the user named (resolved by [`output_target`]).
    dest: PathBuf,
    /// Where the run writes it.
    staged: PathBuf,
    installed: bool,
}

impl StagedRecording {
    /// Plans a recording for `dest`: checks that `dest` can be written ([`output_target`])
    /// and picks a private name in its directory (`.NAME.PID.N.rec`) that nothing holds.
    pub fn new(dest: &Path) -> io::Result<StagedRecording> {
        let dest = output_target(dest)?;
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{}: not a file name", dest.display()),
                )
            })?;
        static SERIAL: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let staged = dest.with_file_name(format!(".{name}.{}.{n}.rec", std::process::id()));
        Ok(StagedRecording {
            dest,
            staged,
            installed: false,
        })
    }

    /// Where the recorder writes (its companions are named from it as from the destination).
    pub fn staged(&self) -> &Path {
        &self.staged
    }

    /// Where the recording goes.
    pub fn destination(&self) -> &Path {
        &self.dest
    }

    /// The staged name of a companion named `dest_companion` at the destination (e.g. the
    /// sidecar `FILE.spelunk.json` → `.FILE.PID.N.rec.spelunk.json`).
    pub fn companion(&self, dest_companion: &Path) -> PathBuf {
        let d = self.dest.as_os_str().as_encoded_bytes();
        let c = dest_companion.as_os_str().as_encoded_bytes();
        match c.strip_prefix(d) {
            Some(suffix) => {
                let mut p = self.staged.as_os_str().to_owned();
                p.push(String::from_utf8_lossy(suffix).as_ref());
                PathBuf::from(p)
            }
            None => dest_companion.to_path_buf(),
        }
    }

    /// Moves the recording into place with `companions` (their destinations; each is staged
    /// at [`Self::companion`]), following `perf record`'s convention: an existing recording
    /// and its companions are renamed to `NAME.old` first, as a pair — a member that has no
    /// counterpart now leaves no stale `NAME.old` behind. Returns the `.old` path of the
    /// recording when one was kept. A member this run did not write (no perf.data under
    /// `--no-spe`) is not put in place, though its old one is still moved aside.
    pub fn install(mut self, companions: &[&Path]) -> io::Result<Option<PathBuf>> {
        let mut members = vec![self.dest.clone()];
        members.extend(companions.iter().map(|p| p.to_path_buf()));
        for m in &members {
            refuse_unless_regular(m)?;
            refuse_unless_regular(&old_path(m))?;
        }
        let kept = members.iter().any(|m| m.exists());
        if kept {
            for m in &members {
                let old = old_path(m);
                if m.exists() {
                    std::fs::rename(m, &old)?;
                } else if old.exists() {
                    std::fs::remove_file(&old)?;
                }
            }
        }
        for m in &members {
            let staged = self.companion(m);
            if staged.exists() {
                std::fs::rename(&staged, m)?;
            }
        }
        self.installed = true;
        Ok(kept.then(|| old_path(&self.dest)))
    }

    /// Keeps what a cut-short run wrote as `NAME.partial` (and its companions likewise,
    /// `NAME.partial.spelunk.json`), never replacing a file: `NAME.partial.N` when that
    /// exists. Returns where the recording went (its first member kept: the sidecar of a run
    /// that writes no perf.data), or `None` when the run wrote none.
    pub fn keep_partial(mut self, companions: &[&Path]) -> io::Result<Option<PathBuf>> {
        self.installed = true;
        if !self.staged.exists() && !companions.iter().any(|c| self.companion(c).exists()) {
            self.remove_staged(companions);
            return Ok(None);
        }
        let partial = partial_path(&self.dest);
        let renamed = |from: &Path, suffix: &[u8]| {
            let mut p = partial.as_os_str().to_owned();
            p.push(String::from_utf8_lossy(suffix).as_ref());
            (from.to_path_buf(), PathBuf::from(p))
        };
        let mut moves = vec![renamed(&self.staged, b"")];
        for c in companions {
            let d = self.dest.as_os_str().as_encoded_bytes();
            if let Some(suffix) = c.as_os_str().as_encoded_bytes().strip_prefix(d) {
                moves.push(renamed(&self.companion(c), suffix));
            }
        }
        let mut kept = None;
        for (from, to) in moves {
            if from.exists() && !to.exists() {
                std::fs::rename(&from, &to)?;
                kept = kept.or(Some(to));
            }
        }
        self.remove_staged(companions);
        Ok(kept)
    }

    fn remove_staged(&self, companions: &[&Path]) {
        let _ = std::fs::remove_file(&self.staged);
        for c in companions {
            let _ = std::fs::remove_file(self.companion(c));
        }
    }

    /// Removes every file whose name starts with the staged name (a recorder's own temporary
    /// files, e.g. the emulator's per-process traces `.NAME.PID.N.rec.emutrace.PID`).
    pub fn remove_all_staged(&self) {
        let (Some(dir), Some(name)) = (self.staged.parent(), self.staged.file_name()) else {
            return;
        };
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let name = name.as_encoded_bytes();
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                if e.file_name().as_encoded_bytes().starts_with(name) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
}

impl Drop for StagedRecording {
    fn drop(&mut self) {
        if !self.installed {
            self.remove_all_staged();
        }
    }
}

/// Where a recording cut short is kept: `OUT.partial`, or `OUT.partial.N` when that exists
/// (never over an existing file).
pub fn partial_path(output: &Path) -> PathBuf {
    let mut base = output.as_os_str().to_owned();
    base.push(".partial");
    let first = PathBuf::from(&base);
    if std::fs::symlink_metadata(&first).is_err() {
        return first;
    }
    (1..1000)
        .map(|n| {
            let mut p = base.clone();
            p.push(format!(".{n}"));
            PathBuf::from(p)
        })
        .find(|p| std::fs::symlink_metadata(p).is_err())
        .unwrap_or(first)
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

    fn mkfifo(p: &Path) {
        assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
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
        mkfifo(&fifo);
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

    #[test]
    fn only_regular_files_are_written_and_links_only_to_one() {
        let d = scratch("policy");
        let e = output_target(Path::new("/dev/null")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "refusing to write /dev/null: it is a character device; choose a regular file path"
        );
        let fifo = d.join("fifo");
        mkfifo(&fifo);
        assert!(output_target(&fifo)
            .unwrap_err()
            .to_string()
            .contains("a FIFO"));
        assert!(AtomicFile::create(&fifo).is_err());
        assert!(output_target(&d)
            .unwrap_err()
            .to_string()
            .contains("a directory"));
        let target = d.join("target.html");
        std::fs::write(&target, b"old").unwrap();
        let link = d.join("link.html");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        let dangling = d.join("dangling");
        std::os::unix::fs::symlink(d.join("nothing"), &dangling).unwrap();
        assert!(write_atomic(&dangling, b"x").is_err());
        assert!(!d.join("nothing").exists());
        let to_dev = d.join("to-null");
        std::os::unix::fs::symlink("/dev/null", &to_dev).unwrap();
        assert!(output_target(&to_dev)
            .unwrap_err()
            .to_string()
            .contains("a symbolic link to a character device"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn nothing_is_written_through_a_link_out_of_a_given_directory() {
        let d = scratch("within");
        let outside = d.join("outside");
        let base = d.join("ds");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::create_dir_all(&base).unwrap();
        std::os::unix::fs::symlink(&outside, base.join("host=evil")).unwrap();
        let e = create_dir_within(&base, &base.join("host=evil").join("run=1")).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        create_dir_within(&base, &base.join("host=a").join("run=1")).unwrap();
        assert!(base.join("host=a/run=1").is_dir());
        assert!(check_within(&base, &base.join("../x")).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    fn pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        (dir.join(name), dir.join(format!("{name}.spelunk.json")))
    }

    #[test]
    fn recordings_replace_their_previous_pair_as_old_only_when_installed() {
        let d = scratch("staged");
        let (data, side) = pair(&d, "r.data");
        std::fs::write(&data, b"old data").unwrap();
        std::fs::write(&side, b"old side").unwrap();
        // A failed run: staged files go, the old pair stays.
        {
            let s = StagedRecording::new(&data).unwrap();
            std::fs::write(s.staged(), b"half").unwrap();
            std::fs::write(s.companion(&side), b"half").unwrap();
            std::fs::write(format!("{}.emutrace.123", s.staged().display()), b"t").unwrap();
        }
        assert_eq!(std::fs::read(&data).unwrap(), b"old data");
        assert_eq!(std::fs::read(&side).unwrap(), b"old side");
        assert_eq!(
            std::fs::read_dir(&d).unwrap().count(),
            2,
            "staged files removed"
        );
        // A good run: the old pair becomes .old, the new one takes its place.
        let s = StagedRecording::new(&data).unwrap();
        std::fs::write(s.staged(), b"new data").unwrap();
        std::fs::write(s.companion(&side), b"new side").unwrap();
        let old = s.install(&[&side]).unwrap();
        assert_eq!(old, Some(d.join("r.data.old")));
        assert_eq!(std::fs::read(&data).unwrap(), b"new data");
        assert_eq!(std::fs::read(&side).unwrap(), b"new side");
        assert_eq!(std::fs::read(d.join("r.data.old")).unwrap(), b"old data");
        assert_eq!(
            std::fs::read(d.join("r.data.spelunk.json.old")).unwrap(),
            b"old side"
        );
        // A run that writes no perf.data (--no-spe) still moves the old one aside with its
        // sidecar; a stale .old of a member is not left to pair with the wrong file.
        std::fs::remove_file(&side).unwrap();
        let s = StagedRecording::new(&data).unwrap();
        std::fs::write(s.companion(&side), b"timelines").unwrap();
        s.install(&[&side]).unwrap();
        assert!(!data.exists());
        assert_eq!(std::fs::read(&side).unwrap(), b"timelines");
        assert_eq!(std::fs::read(d.join("r.data.old")).unwrap(), b"new data");
        assert!(!d.join("r.data.spelunk.json.old").exists());
        // Cut short: kept as .partial, nothing replaced.
        let s = StagedRecording::new(&data).unwrap();
        std::fs::write(s.staged(), b"cut").unwrap();
        std::fs::write(s.companion(&side), b"cut side").unwrap();
        let p = s.keep_partial(&[&side]).unwrap().unwrap();
        assert_eq!(p, d.join("r.data.partial"));
        assert_eq!(std::fs::read(&p).unwrap(), b"cut");
        assert_eq!(
            std::fs::read(d.join("r.data.partial.spelunk.json")).unwrap(),
            b"cut side"
        );
        assert_eq!(std::fs::read(&side).unwrap(), b"timelines");
        assert!(StagedRecording::new(Path::new("/dev/null")).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
