//! Which file on this machine holds the code of a recorded file: the one with the build-id the
//! recording lists for it (HEADER_BUILD_ID or the MMAP2 record), never a rebuilt namesake.
//!
//! The order, for a recorded path with a build-id:
//! 1. `--symfs DIR`'s build-id directory, `DIR/.build-id/xx/yyyy…` (what `spelunk archive`
//!    stores; perf's layout, where `xx` is the id's first byte in hex and `yyyy…` the rest);
//! 2. the build-id caches: spelunk's (`$XDG_CACHE_HOME/spelunk`, else `~/.cache/spelunk`)
//!    and perf's (`~/.debug`, read only), same layout; an entry that is a directory (perf's
//!    cache) holds the file as `elf`;
//! 3. the recorded path (under `--symfs DIR` when given): used when its build-id matches, or
//!    when it has none; another build-id is a mismatch ([`Located::Mismatch`]).
//!
//! A recorded path without a build-id (an older recording, a file linked without one) is
//! looked up at step 3 only, as before build-ids were recorded.

use spelunk_perf::buildid::{read_build_id, BuildId};
use std::path::{Path, PathBuf};

/// Where a recorded file's code is here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Located {
    /// This file has the recorded build-id (or there is none to check).
    Found(PathBuf),
    /// No file here.
    Missing,
    /// The file at the recorded path has another build-id: it was rebuilt (or replaced) since
    /// the recording. Its symbols would name the wrong code.
    Mismatch { local: PathBuf, found: BuildId },
}

/// Finds recorded files (see the module docs for the order).
#[derive(Clone, Debug, Default)]
pub struct Locator {
    symfs: Option<PathBuf>,
    caches: Vec<PathBuf>,
}

impl Locator {
    /// A locator for `--symfs` (when given) and the user's build-id caches (from the
    /// environment: `XDG_CACHE_HOME`, `HOME`).
    pub fn new(symfs: Option<PathBuf>) -> Locator {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let xdg = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| home.as_ref().map(|h| h.join(".cache")));
        let caches = xdg
            .map(|x| x.join("spelunk"))
            .into_iter()
            .chain(home.map(|h| h.join(".debug")))
            .collect();
        Locator::with_caches(symfs, caches)
    }

    /// A locator with these build-id cache directories (in order).
    pub fn with_caches(symfs: Option<PathBuf>, caches: Vec<PathBuf>) -> Locator {
        Locator { symfs, caches }
    }

    /// The recorded `path` on this machine, by path alone (under `--symfs` when given).
    pub fn by_path(&self, path: &str) -> PathBuf {
        match &self.symfs {
            Some(root) => root.join(path.trim_start_matches('/')),
            None => PathBuf::from(path),
        }
    }

    /// The file in build-id directory `base` with build-id `id`, if it is there and has it.
    fn in_build_id_dir(base: &Path, id: &BuildId) -> Option<PathBuf> {
        let entry = base.join(id.cache_path()?);
        let file = if entry.is_dir() {
            entry.join("elf")
        } else {
            entry
        };
        match read_build_id(&file) {
            Ok(Some(found)) if found == *id => Some(file),
            _ => None,
        }
    }

    /// Where the code of the recorded `path`, which had build-id `expected`, is here.
    pub fn locate(&self, path: &str, expected: Option<&[u8]>) -> Located {
        let expected = expected
            .filter(|b| !b.is_empty())
            .map(|b| BuildId(b.to_vec()));
        if let Some(id) = &expected {
            let dirs = self.symfs.iter().chain(&self.caches);
            if let Some(found) = dirs.into_iter().find_map(|d| Self::in_build_id_dir(d, id)) {
                return Located::Found(found);
            }
        }
        let local = self.by_path(path);
        if !local.is_file() {
            return Located::Missing;
        }
        match (expected, read_build_id(&local)) {
            (Some(id), Ok(Some(found))) if found != id => Located::Mismatch { local, found },
            // No build-id to compare (or an unreadable file, which symbolization reports).
            _ => Located::Found(local),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal 64-bit little-endian ELF file holding one PT_NOTE with a GNU build-id note
    /// (layout: System V ABI ELF-64 header and program header; the GNU note's owner "GNU",
    /// type 3).
    fn elf_with_build_id(id: &[u8]) -> Vec<u8> {
        let mut note = Vec::new();
        for v in [4u32, id.len() as u32, 3] {
            note.extend_from_slice(&v.to_le_bytes());
        }
        note.extend_from_slice(b"GNU\0");
        note.extend_from_slice(id);
        note.resize(note.len().div_ceil(4) * 4, 0);
        let mut f = vec![0u8; 64 + 56];
        f[..6].copy_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1]);
        f[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        f[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        f[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
        f[64..68].copy_from_slice(&4u32.to_le_bytes());
        f[64 + 8..64 + 16].copy_from_slice(&120u64.to_le_bytes());
        f[64 + 32..64 + 40].copy_from_slice(&(note.len() as u64).to_le_bytes());
        f.extend_from_slice(&note);
        f
    }

    #[test]
    fn build_id_directories_first_then_the_path_if_it_matches() {
        let dir = std::env::temp_dir().join(format!("spelunk-locate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let old = [0x11u8; 20];
        let new = [0x22u8; 20];
        let prog = dir.join("bin/prog");
        std::fs::create_dir_all(prog.parent().unwrap()).unwrap();
        std::fs::write(&prog, elf_with_build_id(&new)).unwrap();
        let p = prog.to_str().unwrap();
        let none = Locator::with_caches(None, vec![]);
        assert_eq!(none.locate(p, Some(&new)), Located::Found(prog.clone()));
        assert_eq!(none.locate(p, None), Located::Found(prog.clone()));
        assert_eq!(
            none.locate(p, Some(&old)),
            Located::Mismatch {
                local: prog.clone(),
                found: BuildId(new.to_vec())
            }
        );
        assert_eq!(none.locate("/no/such/file", Some(&old)), Located::Missing);
        // The old file in a cache (perf's directory form) and in a symfs (a plain file).
        let cache = dir.join("cache");
        let entry = cache.join(BuildId(old.to_vec()).cache_path().unwrap());
        std::fs::create_dir_all(&entry).unwrap();
        std::fs::write(entry.join("elf"), elf_with_build_id(&old)).unwrap();
        let cached = Locator::with_caches(None, vec![cache.clone()]);
        assert_eq!(
            cached.locate(p, Some(&old)),
            Located::Found(entry.join("elf"))
        );
        let symfs = dir.join("symfs");
        let stored = symfs.join(BuildId(old.to_vec()).cache_path().unwrap());
        std::fs::create_dir_all(stored.parent().unwrap()).unwrap();
        std::fs::write(&stored, elf_with_build_id(&old)).unwrap();
        let both = Locator::with_caches(Some(symfs), vec![cache]);
        assert_eq!(both.locate(p, Some(&old)), Located::Found(stored));
        // An entry whose file has another id is not used.
        std::fs::write(entry.join("elf"), elf_with_build_id(&new)).unwrap();
        assert!(matches!(
            cached.locate(p, Some(&old)),
            Located::Mismatch { .. }
        ));
        let _ = std::fs::remove_dir_all(dir);
    }
}
