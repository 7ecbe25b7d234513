//! The little of ELF spelunk reads itself: the PT_LOAD program headers of 64-bit little-endian
//! files, to turn a file mapping into the load bias that relocates the file's symbol addresses
//! (needed for `.bss` objects, which have no file offset). Symbols themselves come from blazesym.
//!
//! Provenance: System V ABI / ELF-64 object file format (e_phoff at 0x20, e_phentsize at 0x36,
//! e_phnum at 0x38; program header: p_type u32, p_flags u32, p_offset u64, p_vaddr u64,
//! p_paddr u64, p_filesz u64, p_memsz u64, p_align u64; PT_LOAD = 1).

use std::io::Read;
use std::path::Path;

/// One loadable segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadSegment {
    pub offset: u64,
    pub vaddr: u64,
    pub filesz: u64,
    pub memsz: u64,
    pub executable: bool,
}

const PT_LOAD: u32 = 1;
const PF_X: u32 = 1;
/// Largest page size a mapping's offset can be rounded to (arm64 64 KiB pages).
const MAX_PAGE: u64 = 64 * 1024;

use spelunk_perf::bytes::{u16_at, u32_at, u64_at};

/// Parses the PT_LOAD segments from the start of an ELF file (`None` if it is not a 64-bit
/// little-endian ELF or its program headers are not within `head`).
pub fn load_segments(head: &[u8]) -> Option<Vec<LoadSegment>> {
    if head.get(..4)? != b"\x7fELF" || *head.get(4)? != 2 || *head.get(5)? != 1 {
        return None;
    }
    let phoff = usize::try_from(u64_at(head, 0x20)?).ok()?;
    let phentsize = usize::from(u16_at(head, 0x36)?);
    let phnum = usize::from(u16_at(head, 0x38)?);
    if phentsize < 56 || phnum > 4096 {
        return None;
    }
    let mut out = Vec::new();
    for i in 0..phnum {
        let p = phoff.checked_add(i.checked_mul(phentsize)?)?;
        if u32_at(head, p)? != PT_LOAD {
            continue;
        }
        out.push(LoadSegment {
            executable: u32_at(head, p + 4)? & PF_X != 0,
            offset: u64_at(head, p + 8)?,
            vaddr: u64_at(head, p + 16)?,
            filesz: u64_at(head, p + 32)?,
            memsz: u64_at(head, p + 40)?,
        });
    }
    Some(out)
}

/// Reads the PT_LOAD segments of the ELF file at `path` (program headers are near the start).
pub fn read_load_segments(path: &Path) -> Option<Vec<LoadSegment>> {
    let mut head = vec![0u8; 64 * 1024];
    let mut f = std::fs::File::open(path).ok()?;
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(_) => return None,
        }
    }
    head.truncate(n);
    load_segments(&head)
}

/// The load bias of a file mapped at `start` from file offset `page_offset`: the value to add
/// to the file's virtual addresses (symbol addresses) to get process addresses. The segment is
/// the PT_LOAD with the mapping's executable flag whose file range (rounded down to the largest
/// page size) holds `page_offset`. Data segments can share a file page (`.rodata` and `.data`),
/// so callers should prefer an executable mapping, whose segment is unambiguous.
pub fn load_bias(
    segments: &[LoadSegment],
    start: u64,
    page_offset: u64,
    executable: bool,
) -> Option<u64> {
    let seg = segments.iter().find(|s| {
        s.executable == executable
            && s.offset / MAX_PAGE * MAX_PAGE <= page_offset
            && page_offset < s.offset + s.filesz.max(1)
    })?;
    // start maps file offset page_offset, which the segment places at
    // vaddr - (offset - page_offset).
    let vaddr_of_start = seg.vaddr.wrapping_sub(seg.offset.wrapping_sub(page_offset));
    Some(start.wrapping_sub(vaddr_of_start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bias_from_hand_made_segments() {
        // A PIE: text at file 0x0 / vaddr 0x0, data at file 0x2db8 / vaddr 0x3db8.
        let segs = [
            LoadSegment {
                offset: 0,
                vaddr: 0,
                filesz: 0x1000,
                memsz: 0x1000,
                executable: true,
            },
            LoadSegment {
                offset: 0x2db8,
                vaddr: 0x3db8,
                filesz: 0x260,
                memsz: 0x2000,
                executable: false,
            },
        ];
        // Text mapped at 0x5555_5555_4000 from offset 0.
        assert_eq!(
            load_bias(&segs, 0x5555_5555_4000, 0, true),
            Some(0x5555_5555_4000)
        );
        // Data mapped at 0x5555_5555_7000 from page offset 0x2000: vaddr of that offset is
        // 0x3db8 - 0xdb8 = 0x3000, so the bias is the same.
        assert_eq!(
            load_bias(&segs, 0x5555_5555_7000, 0x2000, false),
            Some(0x5555_5555_4000)
        );
        assert_eq!(load_segments(b"not an elf"), None);
        assert_eq!(load_segments(&[0x7f, b'E', b'L', b'F', 2, 1]), None);
    }
}
