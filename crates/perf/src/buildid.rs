//! ELF build-ids: reading a file's `.note.gnu.build-id`, and the HEADER_BUILD_ID table of a
//! perf.data (which file had which build-id when it was recorded).
//!
//! Provenance:
//! - System V ABI / ELF-64 object file format: e_phoff at 0x20, e_shoff at 0x28, e_phentsize
//!   at 0x36, e_phnum at 0x38, e_shentsize at 0x3a, e_shnum at 0x3c; program header p_type
//!   (u32, +0), p_offset (+8), p_filesz (+32), PT_NOTE = 4; section header sh_type (+4),
//!   sh_offset (+0x18), sh_size (+0x20), SHT_NOTE = 7; a note is namesz, descsz, type (u32
//!   each), the name and then the descriptor, each padded to 4 bytes.
//! - The GNU build-id note (binutils `ld --build-id` documentation): owner "GNU", type
//!   NT_GNU_BUILD_ID = 3, the descriptor is the id (20 bytes for sha1, 16 for md5/uuid).
//! - perf.data-file-format.txt, HEADER_BUILD_ID: a table of `struct build_id_event {
//!   perf_event_header header; pid_t pid; u8 build_id[24]; char filename[]; }`, each
//!   `header.size` bytes. What perf 6.1's own files hold there (observed with `perf record`
//!   on this project's test machines): `header.type` 0, `header.misc` the cpumode (1 kernel,
//!   2 user) | `PERF_RECORD_MISC_BUILD_ID_SIZE` (1 << 15), which says `build_id[20]` is the id's
//!   length; pid -1 (the host: perf's readers take any other pid for a guest machine); the
//!   file name NUL-terminated and padded to 64 bytes. Files without the size bit (older perf)
//!   pad a shorter id with zeros.

use crate::bytes::{u16_at, u32_at, u64_at};
use std::fmt;
use std::io::Read;
use std::path::Path;

/// An ELF build-id (at most 20 bytes in perf.data).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BuildId(pub Vec<u8>);

impl BuildId {
    /// Lower-case hex, as `readelf -n` and `perf buildid-list` print it.
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses lower- or upper-case hex (an even number of digits, 2 to 40).
    pub fn from_hex(s: &str) -> Option<BuildId> {
        if s.len() % 2 != 0 || s.len() < 2 || s.len() > 2 * MAX_LEN {
            return None;
        }
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
            .collect::<Option<Vec<u8>>>()
            .map(BuildId)
    }

    /// Where a build-id cache (perf's `~/.debug` layout) keeps the file: `.build-id/xx/rest`.
    pub fn cache_path(&self) -> Option<String> {
        let h = self.hex();
        Some(format!(".build-id/{}/{}", h.get(..2)?, h.get(2..)?))
    }
}

impl fmt::Debug for BuildId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BuildId({})", self.hex())
    }
}

impl fmt::Display for BuildId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

/// The longest build-id a perf.data record holds.
pub const MAX_LEN: usize = 20;

/// One entry of HEADER_BUILD_ID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildIdEntry {
    /// `PERF_RECORD_MISC_CPUMODE` of the file (1 kernel, 2 user).
    pub cpu_mode: u16,
    /// The pid of the entry (-1: the host).
    pub pid: i32,
    pub build_id: BuildId,
    /// The recorded path (`[kernel.kallsyms]` and `[vdso]` for those).
    pub path: String,
}

/// `PERF_RECORD_MISC_BUILD_ID_SIZE`: `build_id[20]` holds the id's length.
const MISC_BUILD_ID_SIZE: u16 = 1 << 15;
/// Fixed part of a `build_id_event`: header, pid, build_id\[24\].
const EVENT_FIXED: usize = 8 + 4 + 24;

/// The HEADER_BUILD_ID section for `entries` (see the module docs for the layout).
pub fn header_section(entries: &[BuildIdEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        let id = &e.build_id.0[..e.build_id.0.len().min(MAX_LEN)];
        let name_len = (e.path.len() + 1).div_ceil(64) * 64;
        let size = EVENT_FIXED + name_len;
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(e.cpu_mode | MISC_BUILD_ID_SIZE).to_le_bytes());
        out.extend_from_slice(&(size as u16).to_le_bytes());
        out.extend_from_slice(&e.pid.to_le_bytes());
        let mut b = [0u8; 24];
        b[..id.len()].copy_from_slice(id);
        b[MAX_LEN] = id.len() as u8;
        out.extend_from_slice(&b);
        out.extend_from_slice(e.path.as_bytes());
        out.resize(out.len() + (name_len - e.path.len()), 0);
    }
    out
}

/// Parses a HEADER_BUILD_ID section; an error names the first malformed entry (the entries
/// before it are returned with it).
pub fn parse_header_section(b: &[u8]) -> (Vec<BuildIdEntry>, Option<String>) {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < b.len() {
        let (Some(misc), Some(size)) = (u16_at(b, at + 4), u16_at(b, at + 6)) else {
            return (out, Some(format!("entry at byte {at} is cut off")));
        };
        let size = usize::from(size);
        let Some(rec) = b.get(at..at + size).filter(|_| size >= EVENT_FIXED) else {
            return (
                out,
                Some(format!(
                    "entry at byte {at} says {size} bytes (at least {EVENT_FIXED}, at most the \
                     {} left)",
                    b.len() - at
                )),
            );
        };
        let pid = u32_at(rec, 8).map_or(-1, |p| p as i32);
        let raw = &rec[12..12 + 24];
        let len = if misc & MISC_BUILD_ID_SIZE != 0 {
            usize::from(raw[MAX_LEN])
        } else {
            // Older perf: a shorter id padded with zeros (whole 4-byte words).
            let mut n = MAX_LEN;
            while n >= 4 && raw[n - 4..n].iter().all(|x| *x == 0) {
                n -= 4;
            }
            n
        };
        if len == 0 || len > MAX_LEN {
            return (
                out,
                Some(format!("entry at byte {at} has a build-id of {len} bytes")),
            );
        }
        let name = &rec[EVENT_FIXED..];
        let name = &name[..name.iter().position(|c| *c == 0).unwrap_or(name.len())];
        out.push(BuildIdEntry {
            cpu_mode: misc & crate::abi::misc::CPUMODE_MASK,
            pid,
            build_id: BuildId(raw[..len].to_vec()),
            path: String::from_utf8_lossy(name).into_owned(),
        });
        at += size;
    }
    (out, None)
}

const PT_NOTE: u32 = 4;
const SHT_NOTE: u32 = 7;
const NT_GNU_BUILD_ID: u32 = 3;
/// Note segments larger than this are not searched (build-id notes sit in small ones).
const MAX_NOTE_BYTES: u64 = 1 << 20;
/// Program or section headers beyond this many are not read.
const MAX_HEADERS: usize = 4096;

/// The build-id in the notes `b` (a PT_NOTE segment's or SHT_NOTE section's bytes).
fn build_id_in_notes(b: &[u8]) -> Result<Option<BuildId>, String> {
    let mut at = 0usize;
    let pad4 = |n: usize| n.div_ceil(4) * 4;
    while at + 12 <= b.len() {
        let (Some(namesz), Some(descsz), Some(ty)) =
            (u32_at(b, at), u32_at(b, at + 4), u32_at(b, at + 8))
        else {
            break;
        };
        let name_at = at + 12;
        let desc_at = name_at + pad4(namesz as usize);
        let end = desc_at + pad4(descsz as usize);
        if end > b.len() {
            return Err(format!(
                "a note at byte {at} of a note segment says {namesz}+{descsz} bytes, past its \
                 end"
            ));
        }
        if ty == NT_GNU_BUILD_ID && b.get(name_at..name_at + namesz as usize) == Some(b"GNU\0") {
            let id = &b[desc_at..desc_at + descsz as usize];
            if id.is_empty() || id.len() > MAX_LEN {
                return Err(format!("its build-id note holds {} bytes", id.len()));
            }
            return Ok(Some(BuildId(id.to_vec())));
        }
        at = end;
    }
    Ok(None)
}

fn read_at(f: &mut std::fs::File, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Seek, SeekFrom};
    f.seek(SeekFrom::Start(offset))?;
    let mut v = Vec::new();
    f.take(len).read_to_end(&mut v)?;
    Ok(v)
}

/// The build-id of the ELF file at `path`: `Ok(None)` when it is not a 64-bit little-endian
/// ELF file or has no build-id note; an error when it cannot be read or its notes are damaged.
pub fn read_build_id(path: &Path) -> Result<Option<BuildId>, String> {
    let mut f = std::fs::File::open(path).map_err(|e| format!("cannot open it: {e}"))?;
    let head = read_at(&mut f, 0, 64).map_err(|e| format!("cannot read it: {e}"))?;
    if head.get(..4) != Some(b"\x7fELF") || head.get(4) != Some(&2) || head.get(5) != Some(&1) {
        return Ok(None);
    }
    let field = |off: usize| u64_at(&head, off).ok_or("its ELF header is cut off");
    let (phoff, shoff) = (field(0x20)?, field(0x28)?);
    let count = |off: usize| usize::from(u16_at(&head, off).unwrap_or(0));
    // (table offset, entry size, entries, type field, offset field, size field, wanted type)
    let tables = [
        (phoff, count(0x36), count(0x38), 0, 8, 32, PT_NOTE),
        (shoff, count(0x3a), count(0x3c), 4, 0x18, 0x20, SHT_NOTE),
    ];
    for (table, entsize, n, ty_at, off_at, size_at, wanted) in tables {
        if table == 0 || n == 0 || entsize < size_at + 8 || n > MAX_HEADERS {
            continue;
        }
        let t = read_at(&mut f, table, (entsize * n) as u64)
            .map_err(|e| format!("cannot read its headers: {e}"))?;
        for i in 0..n {
            let e = i * entsize;
            if u32_at(&t, e + ty_at) != Some(wanted) {
                continue;
            }
            let (Some(off), Some(size)) = (u64_at(&t, e + off_at), u64_at(&t, e + size_at)) else {
                return Err("its program or section headers are cut off".into());
            };
            if size > MAX_NOTE_BYTES {
                continue;
            }
            let notes =
                read_at(&mut f, off, size).map_err(|e| format!("cannot read its notes: {e}"))?;
            if (notes.len() as u64) < size {
                return Err(format!(
                    "a note segment at byte {off} lies past the file's end"
                ));
            }
            if let Some(id) = build_id_in_notes(&notes)? {
                return Ok(Some(id));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_section_round_trips_and_bad_entries_are_named() {
        let entries = vec![
            BuildIdEntry {
                cpu_mode: 2,
                pid: -1,
                build_id: BuildId((1..=20).collect()),
                path: "/usr/bin/prog".into(),
            },
            BuildIdEntry {
                cpu_mode: 1,
                pid: -1,
                build_id: BuildId(vec![0xab; 16]),
                path: "[kernel.kallsyms]".into(),
            },
        ];
        let b = header_section(&entries);
        // 36 fixed bytes + the name padded to 64.
        assert_eq!(b.len(), 2 * (36 + 64));
        assert_eq!(parse_header_section(&b), (entries.clone(), None));
        // Cut in the second entry: the first is kept, the damage said.
        let (kept, err) = parse_header_section(&b[..120]);
        assert_eq!(kept, entries[..1]);
        assert!(err.unwrap().contains("byte 100"));
        // Without the size bit a 16-byte id is found from its zero padding.
        let mut old = b.clone();
        old[100 + 5] &= 0x7f;
        old[100 + 12 + 20] = 0;
        assert_eq!(parse_header_section(&old).0[1].build_id.0.len(), 16);
    }

    #[test]
    fn hex_and_cache_paths() {
        let id = BuildId::from_hex("d6b31386e80fe2cb9e319869068f1a6b4818a1cc").unwrap();
        assert_eq!(id.0[0], 0xd6);
        assert_eq!(id.hex(), "d6b31386e80fe2cb9e319869068f1a6b4818a1cc");
        assert_eq!(
            id.cache_path().unwrap(),
            ".build-id/d6/b31386e80fe2cb9e319869068f1a6b4818a1cc"
        );
        assert_eq!(BuildId::from_hex("abc"), None);
        assert_eq!(BuildId::from_hex("zz"), None);
    }

    #[test]
    fn notes_with_bad_sizes_are_errors() {
        let mut n = Vec::new();
        for v in [4u32, 3, NT_GNU_BUILD_ID] {
            n.extend_from_slice(&v.to_le_bytes());
        }
        n.extend_from_slice(b"GNU\0");
        n.extend_from_slice(&[7, 8, 9, 0]);
        assert_eq!(build_id_in_notes(&n), Ok(Some(BuildId(vec![7, 8, 9]))));
        n[4] = 200;
        assert!(build_id_in_notes(&n).is_err());
        assert_eq!(build_id_in_notes(&[]), Ok(None));
    }
}
