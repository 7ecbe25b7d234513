//! Machine code of the recorded binaries: bytes read from an ELF file through its PT_LOAD
//! program headers, disassembled in-process for AArch64 (what spelunk's users run) and x86-64
//! (where CI compiles test programs).
//!
//! Disassembly uses the pure-Rust yaxpeax decoders (0BSD): no objdump process, no text parsing,
//! and the decoded operands tell which instructions are branches and how many bytes a load or
//! store moves (which `spelunk estimate bandwidth` uses as its default bytes per operation).
//!
//! Provenance: ELF-64 header `e_machine` at 0x12 (EM_X86_64 = 62, EM_AARCH64 = 183); program
//! headers as in [`crate::elf`]. AArch64 access sizes follow the Arm ARM's load/store encodings
//! (size from the transfer register: Wt 4, Xt 8, Bt/Ht/St/Dt/Qt 1/2/4/8/16; `B`/`H` mnemonic
//! suffixes 1/2; `SW` 4; pairs twice the register; LD1–LD4/ST1–ST4 the registers of the list).

use crate::elf::{load_segments, LoadSegment};
use crate::locate::{Located, Locator};
use crate::maps::{Mapping, MappingKind};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use yaxpeax_arch::{Decoder, LengthedInstruction, U8Reader};

/// Instruction set of an ELF file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    Aarch64,
    X86_64,
}

impl Arch {
    pub fn name(self) -> &'static str {
        match self {
            Arch::Aarch64 => "aarch64",
            Arch::X86_64 => "x86-64",
        }
    }

    /// From ELF `e_machine`.
    pub fn from_e_machine(m: u16) -> Option<Arch> {
        match m {
            183 => Some(Arch::Aarch64),
            62 => Some(Arch::X86_64),
            _ => None,
        }
    }

    /// Longest instruction (bytes to read to decode one).
    pub fn max_insn_len(self) -> usize {
        match self {
            Arch::Aarch64 => 4,
            Arch::X86_64 => 15,
        }
    }
}

/// What an instruction does, as far as annotate and the estimates care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsnKind {
    /// A branch; `target` for direct branches (ELF virtual address).
    Branch {
        conditional: bool,
        target: Option<u64>,
    },
    /// Reads or writes memory (loads, stores, atomics, prefetches).
    Memory,
    Other,
}

/// One decoded instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Insn {
    /// ELF virtual address (as objdump prints it).
    pub address: u64,
    pub bytes: Vec<u8>,
    /// Mnemonic and operands (yaxpeax's syntax; Intel syntax on x86-64).
    pub text: String,
    pub kind: InsnKind,
    /// Bytes a memory instruction transfers, when the encoding says (None for prefetches and
    /// what the decoder cannot size).
    pub access_bytes: Option<u32>,
}

impl Insn {
    pub fn is_branch(&self) -> bool {
        matches!(self.kind, InsnKind::Branch { .. })
    }
    pub fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// An ELF file opened for reading code.
#[derive(Clone, Debug)]
pub struct ElfCode {
    path: PathBuf,
    pub arch: Arch,
    segments: Vec<LoadSegment>,
}

const EM_OFFSET: usize = 0x12;

impl ElfCode {
    /// Opens `path`; errors name the file and say what is wrong with it.
    pub fn open(path: &Path) -> Result<ElfCode, String> {
        let mut f = std::fs::File::open(path)
            .map_err(|e| format!("{}: cannot open: {e}", path.display()))?;
        let mut head = Vec::with_capacity(64 * 1024);
        f.by_ref()
            .take(64 * 1024)
            .read_to_end(&mut head)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        let segments = load_segments(&head).ok_or_else(|| {
            format!(
                "{}: not a 64-bit little-endian ELF file with program headers",
                path.display()
            )
        })?;
        let machine = head
            .get(EM_OFFSET..EM_OFFSET + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .unwrap_or(0);
        let arch = Arch::from_e_machine(machine).ok_or_else(|| {
            format!(
                "{}: ELF machine {machine} is not supported (aarch64 and x86-64 are)",
                path.display()
            )
        })?;
        Ok(ElfCode {
            path: path.to_path_buf(),
            arch,
            segments,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file offset of virtual address `vaddr` when `len` bytes from it are in one loadable
    /// segment's file image.
    pub fn file_offset(&self, vaddr: u64, len: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| {
                s.vaddr <= vaddr
                    && vaddr
                        .checked_add(len)
                        .is_some_and(|end| end <= s.vaddr.saturating_add(s.filesz))
            })
            .map(|s| s.offset + (vaddr - s.vaddr))
    }

    /// The virtual address of file offset `off` (through the loadable segment holding it).
    pub fn vaddr_of_file_offset(&self, off: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| s.offset <= off && off < s.offset.saturating_add(s.filesz))
            .map(|s| s.vaddr + (off - s.offset))
    }

    /// Reads `len` bytes at virtual address `vaddr`.
    pub fn read(&self, vaddr: u64, len: u64) -> Result<Vec<u8>, String> {
        let off = self.file_offset(vaddr, len).ok_or_else(|| {
            format!(
                "{}: {len} bytes at {vaddr:#x} are not in a loadable segment",
                self.path.display()
            )
        })?;
        let n = usize::try_from(len)
            .ok()
            .filter(|n| *n <= 64 << 20)
            .ok_or_else(|| format!("{}: {len} bytes is too much code", self.path.display()))?;
        let mut f = std::fs::File::open(&self.path)
            .map_err(|e| format!("{}: cannot open: {e}", self.path.display()))?;
        f.seek(SeekFrom::Start(off))
            .map_err(|e| format!("{}: cannot seek to {off:#x}: {e}", self.path.display()))?;
        let mut buf = vec![0u8; n];
        f.read_exact(&mut buf).map_err(|e| {
            format!(
                "{}: cannot read {n} bytes at offset {off:#x}: {e}",
                self.path.display()
            )
        })?;
        Ok(buf)
    }

    /// Decodes the one instruction at `vaddr` (None when it cannot be read or decoded).
    pub fn insn_at(&self, vaddr: u64) -> Option<Insn> {
        let max = self.arch.max_insn_len() as u64;
        // Near the end of a segment fewer bytes may be readable.
        let bytes = (1..=max).rev().find_map(|n| self.read(vaddr, n).ok())?;
        decode_one(self.arch, &bytes, vaddr)
    }
}

/// Decodes instructions at process addresses, opening each mapped file once (the file with
/// the recorded build-id: [`crate::locate`]).
#[derive(Default)]
pub struct CodeReader {
    locator: Locator,
    files: HashMap<Arc<str>, Result<ElfCode, String>>,
}

impl CodeReader {
    /// `symfs`: where to look for the recorded files (like perf's `--symfs`).
    pub fn new(symfs: Option<PathBuf>) -> Self {
        CodeReader {
            locator: Locator::new(symfs),
            files: HashMap::new(),
        }
    }

    /// The ELF file behind mapping `m`'s recorded file.
    pub fn elf(&mut self, m: &Mapping) -> Result<&ElfCode, String> {
        let locator = &self.locator;
        self.files
            .entry(m.path.clone())
            .or_insert_with(|| match locator.locate(&m.path, m.build_id.as_deref()) {
                Located::Found(local) => ElfCode::open(&local),
                Located::Missing => Err(format!("{}: not found here", m.path)),
                Located::Mismatch { found, .. } => Err(format!(
                    "{}: build-id mismatch (the file here has {found}): rebuilt since the \
                     recording",
                    m.path
                )),
            })
            .as_ref()
            .map_err(|e| e.clone())
    }

    /// The instruction at process address `pc` of mapping `m`.
    pub fn insn_at(&mut self, m: &Mapping, pc: u64) -> Result<Insn, String> {
        if m.kind != MappingKind::File {
            return Err(format!("{pc:#x} is in {}, not in a file", m.path));
        }
        let elf = self.elf(m)?;
        let off = m.file_offset(pc);
        let vaddr = elf.vaddr_of_file_offset(off).ok_or_else(|| {
            format!(
                "{}: file offset {off:#x} of {pc:#x} is not in a loadable segment",
                m.path
            )
        })?;
        elf.insn_at(vaddr)
            .ok_or_else(|| format!("{}: cannot decode the instruction at {vaddr:#x}", m.path))
    }
}

/// Disassembles `bytes` placed at `address`. An undecodable instruction becomes a `.byte`
/// (x86-64: one byte, AArch64: one word) and decoding continues after it.
pub fn disassemble(arch: Arch, bytes: &[u8], address: u64) -> Vec<Insn> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let addr = address + at as u64;
        let insn = decode_one(arch, &bytes[at..], addr).unwrap_or_else(|| {
            let n = match arch {
                Arch::X86_64 => 1,
                Arch::Aarch64 => 4.min(bytes.len() - at),
            };
            let raw = &bytes[at..at + n];
            let mut text = String::from(".byte");
            for (i, b) in raw.iter().enumerate() {
                let _ = write!(text, "{}{b:#04x}", if i == 0 { " " } else { ", " });
            }
            Insn {
                address: addr,
                bytes: raw.to_vec(),
                text,
                kind: InsnKind::Other,
                access_bytes: None,
            }
        });
        at += insn.bytes.len().max(1);
        out.push(insn);
    }
    out
}

/// Decodes the instruction at the start of `bytes`.
pub fn decode_one(arch: Arch, bytes: &[u8], address: u64) -> Option<Insn> {
    match arch {
        Arch::X86_64 => decode_x86(bytes, address),
        Arch::Aarch64 => decode_a64(bytes, address),
    }
}

fn decode_x86(bytes: &[u8], address: u64) -> Option<Insn> {
    use yaxpeax_x86::long_mode::{InstDecoder, Opcode, Operand};
    let mut reader = U8Reader::new(bytes);
    let inst = InstDecoder::default().decode(&mut reader).ok()?;
    let len = usize::try_from(inst.len().to_const()).ok()?;
    let raw = bytes.get(..len)?.to_vec();
    let next = address.wrapping_add(len as u64);
    let op = inst.opcode();
    let rel_target = || {
        (0..inst.operand_count()).find_map(|i| match inst.operand(i) {
            Operand::ImmediateI8 { imm } => Some(next.wrapping_add_signed(i64::from(imm))),
            Operand::ImmediateI32 { imm } => Some(next.wrapping_add_signed(i64::from(imm))),
            _ => None,
        })
    };
    let touches_memory = (0..inst.operand_count()).any(|i| inst.operand(i).is_memory());
    let kind = if op.is_jcc()
        || matches!(
            op,
            Opcode::JRCXZ | Opcode::LOOP | Opcode::LOOPZ | Opcode::LOOPNZ
        ) {
        InsnKind::Branch {
            conditional: true,
            target: rel_target(),
        }
    } else if matches!(op, Opcode::JMP | Opcode::CALL) {
        InsnKind::Branch {
            conditional: false,
            target: if touches_memory { None } else { rel_target() },
        }
    } else if matches!(
        op,
        Opcode::RETURN
            | Opcode::RETF
            | Opcode::JMPF
            | Opcode::CALLF
            | Opcode::IRET
            | Opcode::IRETD
            | Opcode::IRETQ
    ) {
        InsnKind::Branch {
            conditional: false,
            target: None,
        }
    } else if touches_memory && !matches!(op, Opcode::LEA | Opcode::NOP) {
        InsnKind::Memory
    } else {
        InsnKind::Other
    };
    let access_bytes = match kind {
        InsnKind::Memory if !is_x86_prefetch(op) => inst
            .mem_size()
            .and_then(|m| m.bytes_size())
            .map(u32::from)
            .filter(|n| *n > 0),
        _ => None,
    };
    Some(Insn {
        address,
        bytes: raw,
        text: inst.to_string(),
        kind,
        access_bytes,
    })
}

fn is_x86_prefetch(op: yaxpeax_x86::long_mode::Opcode) -> bool {
    use yaxpeax_x86::long_mode::Opcode;
    matches!(
        op,
        Opcode::PREFETCH0
            | Opcode::PREFETCH1
            | Opcode::PREFETCH2
            | Opcode::PREFETCHNTA
            | Opcode::PREFETCHW
            | Opcode::CLFLUSH
            | Opcode::CLFLUSHOPT
            | Opcode::CLWB
    )
}

fn decode_a64(bytes: &[u8], address: u64) -> Option<Insn> {
    use yaxpeax_arm::armv8::a64::{InstDecoder, Opcode, Operand};
    let word = bytes.get(..4)?;
    let mut reader = U8Reader::new(word);
    let inst = InstDecoder::default().decode(&mut reader).ok()?;
    if inst.opcode == Opcode::Invalid {
        return None;
    }
    let mnemonic = inst.opcode.to_string();
    let ops: Vec<Operand> = inst
        .operands
        .iter()
        .copied()
        .filter(|o| !matches!(o, Operand::Nothing))
        .collect();
    let pc_target = ops.iter().find_map(|o| match o {
        Operand::PCOffset(off) => Some(address.wrapping_add_signed(*off)),
        _ => None,
    });
    let branch = match inst.opcode {
        Opcode::B | Opcode::BL => Some((false, pc_target)),
        Opcode::Bcc(_) | Opcode::CBZ | Opcode::CBNZ | Opcode::TBZ | Opcode::TBNZ => {
            Some((true, pc_target))
        }
        Opcode::BR | Opcode::BLR | Opcode::RET | Opcode::ERET => Some((false, None)),
        _ if mnemonic.starts_with("bra")
            || mnemonic.starts_with("blra")
            || mnemonic.starts_with("reta") =>
        {
            Some((false, None))
        }
        _ => None,
    };
    let memory = ops.iter().any(|o| {
        matches!(
            o,
            Operand::RegPreIndex(..)
                | Operand::RegPostIndex(..)
                | Operand::RegPostIndexReg(..)
                | Operand::RegRegOffset(..)
        )
    });
    let (kind, access_bytes) = match branch {
        Some((conditional, target)) => (
            InsnKind::Branch {
                conditional,
                target,
            },
            None,
        ),
        None if memory => (InsnKind::Memory, a64_access_bytes(&mnemonic, &ops)),
        None => (InsnKind::Other, None),
    };
    Some(Insn {
        address,
        bytes: word.to_vec(),
        text: inst.to_string(),
        kind,
        access_bytes,
    })
}

/// Bytes an AArch64 load/store moves, from its mnemonic and transfer registers (module docs).
fn a64_access_bytes(mnemonic: &str, ops: &[yaxpeax_arm::armv8::a64::Operand]) -> Option<u32> {
    use yaxpeax_arm::armv8::a64::{Operand, SIMDSizeCode, SizeCode};
    let m = mnemonic;
    if m.starts_with("prf") || m.starts_with("dc") {
        return None;
    }
    let simd = |s: SIMDSizeCode| match s {
        SIMDSizeCode::B => 1u32,
        SIMDSizeCode::H => 2,
        SIMDSizeCode::S => 4,
        SIMDSizeCode::D => 8,
        SIMDSizeCode::Q => 16,
    };
    // LD1..LD4 / ST1..ST4 (and replicating forms): the registers of the list or one lane each.
    if let Some(Operand::SIMDRegisterGroup(vec, _, _, n)) = ops.first() {
        return Some(simd(*vec) * u32::from(*n));
    }
    if let Some(Operand::SIMDRegisterGroupLane(_, elem, n, _)) = ops.first() {
        return Some(simd(*elem) * u32::from(*n));
    }
    let pair = matches!(
        m,
        "ldp" | "stp" | "ldnp" | "stnp" | "ldpsw" | "ldxp" | "ldaxp" | "stxp" | "stlxp"
    );
    // Size from the mnemonic suffix (byte, halfword and signed-word forms).
    let from_suffix = if m.ends_with("sw") {
        Some(4)
    } else if m.ends_with('b') {
        Some(1)
    } else if m.ends_with('h') {
        Some(2)
    } else {
        None
    };
    let reg_bytes = |o: Option<&Operand>| match o? {
        Operand::Register(SizeCode::W, _) | Operand::RegisterOrSP(SizeCode::W, _) => Some(4),
        Operand::Register(SizeCode::X, _) | Operand::RegisterOrSP(SizeCode::X, _) => Some(8),
        // CASP's register pairs.
        Operand::RegisterPair(SizeCode::W, _) => Some(8),
        Operand::RegisterPair(SizeCode::X, _) => Some(16),
        Operand::SIMDRegister(s, _) => Some(simd(*s)),
        _ => None,
    };
    // Store-exclusive forms name the status register first (stxr w1, x2, [x0]).
    let data = if m.starts_with("stxr")
        || m.starts_with("stlxr")
        || m.starts_with("stxp")
        || m.starts_with("stlxp")
    {
        ops.get(1)
    } else {
        ops.first()
    };
    let one = from_suffix.or_else(|| reg_bytes(data))?;
    Some(if pair { one * 2 } else { one })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a64(word: u32, addr: u64) -> Insn {
        decode_one(Arch::Aarch64, &word.to_le_bytes(), addr).unwrap()
    }

    #[test]
    fn aarch64_matches_seed_000_figure_4_10() {
        // Encodings and objdump text from [SPE methodology figure 4.10] (lmbench bw_mem frd).
        let i = a64(0xb9400041, 0x1fbc);
        assert_eq!(i.text, "ldr w1, [x2]");
        assert_eq!((i.kind, i.access_bytes), (InsnKind::Memory, Some(4)));
        let i = a64(0xb941fc46, 0x23b0);
        assert_eq!(i.text, "ldr w6, [x2, #0x1fc]"); // objdump: ldr w6, [x2, #508]
        assert_eq!(i.access_bytes, Some(4));
        let i = a64(0xa9bf7bfd, 0x1f84);
        assert_eq!(i.text, "stp x29, x30, [sp, #-0x10]!");
        assert_eq!(i.access_bytes, Some(16));
        let i = a64(0xf9401823, 0x1f8c); // ldr x3, [x1, #48]
        assert_eq!(i.access_bytes, Some(8));
        let i = a64(0x0b060021, 0x1fc4);
        assert_eq!(i.text, "add w1, w1, w6");
        assert_eq!(i.kind, InsnKind::Other);
        // b.cs 1fbc <frd+0x38> at 23c4; cbz x0, 23cc at 1f90; b 1fb0 at 1fa0; ret at 23d8.
        assert_eq!(
            a64(0x54ffdfc2, 0x23c4).kind,
            InsnKind::Branch {
                conditional: true,
                target: Some(0x1fbc)
            }
        );
        assert_eq!(
            a64(0xb40021e0, 0x1f90).kind,
            InsnKind::Branch {
                conditional: true,
                target: Some(0x23cc)
            }
        );
        assert_eq!(
            a64(0x14000004, 0x1fa0).kind,
            InsnKind::Branch {
                conditional: false,
                target: Some(0x1fb0)
            }
        );
        assert_eq!(
            a64(0xd65f03c0, 0x23d8).kind,
            InsnKind::Branch {
                conditional: false,
                target: None
            }
        );
        // bl 4478 <use_int> at 23d0.
        assert_eq!(
            a64(0x9400082a, 0x23d0).kind,
            InsnKind::Branch {
                conditional: false,
                target: Some(0x4478)
            }
        );
    }

    #[test]
    fn aarch64_access_sizes_from_seed_000_memcpy() {
        // [SPE methodology §3.3.2/§3.4.2] memcpy: ldp q0, q1 moves 32 bytes; tbz is a conditional branch.
        // Encodings from aarch64-linux-gnu-as, checked with aarch64-linux-gnu-objdump:
        // ldp q0, q1, [x1, #80] = 0xad428420.
        let i = a64(0xad428420, 0x85114);
        assert_eq!(i.text, "ldp q0, q1, [x1, #0x50]");
        assert_eq!(i.access_bytes, Some(32));
        // ldrb w0, [x1] = 0x39400020; ldrh w0, [x1] = 0x79400020; ldrsw x0, [x1] = 0xb9800020.
        assert_eq!(a64(0x39400020, 0).access_bytes, Some(1));
        assert_eq!(a64(0x79400020, 0).access_bytes, Some(2));
        assert_eq!(a64(0xb9800020, 0).access_bytes, Some(4));
        // tbz w2, #3, +0x18 = 0x361800c2.
        assert!(matches!(
            a64(0x361800c2, 0x85044).kind,
            InsnKind::Branch {
                conditional: true,
                target: Some(0x8505c)
            }
        ));
    }

    #[test]
    fn x86_64_sizes_and_branches() {
        // mov eax, dword [rdi] = 8b 07; add rax, qword [rdi+8] = 48 03 47 08;
        // movsd xmm0, qword [rdi] = f2 0f 10 07; lea rax, [rdi+8] = 48 8d 47 08;
        // jne -2 = 75 fc; ret = c3.
        let d = |b: &[u8]| decode_one(Arch::X86_64, b, 0x1000).unwrap();
        let i = d(&[0x8b, 0x07]);
        assert_eq!(
            (i.kind, i.access_bytes, i.len()),
            (InsnKind::Memory, Some(4), 2)
        );
        assert_eq!(d(&[0x48, 0x03, 0x47, 0x08]).access_bytes, Some(8));
        assert_eq!(d(&[0xf2, 0x0f, 0x10, 0x07]).access_bytes, Some(8));
        assert_eq!(d(&[0x48, 0x8d, 0x47, 0x08]).kind, InsnKind::Other);
        assert_eq!(
            d(&[0x75, 0xfc]).kind,
            InsnKind::Branch {
                conditional: true,
                target: Some(0x0ffe)
            }
        );
        assert!(d(&[0xc3]).is_branch());
        // An undecodable byte does not stop the listing.
        let v = disassemble(Arch::X86_64, &[0x06, 0xc3], 0x10);
        assert_eq!(v.len(), 2);
        assert!(v[0].text.starts_with(".byte"));
        assert_eq!(v[1].address, 0x11);
    }
}
