//! What Valgrind cannot run, found before an emulated run starts: `spelunk record --emulate`
//! and `spelunk topdown --emulate` read the program's ELF file (resolved through PATH as the
//! run resolves it) and refuse, with what to do instead, a program the emulator cannot run at
//! all, rather than letting it die minutes into the run.
//!
//! What is found:
//! - **Another architecture.** The emulator is a Valgrind tool built for the host's
//!   architecture, and runs programs of that architecture only (64-bit x86-64 or aarch64):
//!   an aarch64 program on an x86-64 machine, or the reverse, or a 32-bit program, is refused.
//! - **SVE/SVE2 and SME on aarch64.** Valgrind (3.19 to 3.22) implements no SVE and no SME: the
//!   first such instruction stops the program with SIGILL. The Arm ARM (DDI 0487) §C4.1 "A64
//!   instruction set encoding", table "Top-level encodings for A64", puts every SVE and SVE2
//!   instruction in the class op0 (bits 28:25) = 0b0010 ("SVE encodings") and SME's in op0 =
//!   0b0000 with bit 31 set ("SME encodings"; bit 31 clear is the reserved space with `UDF`).
//!   `SMSTART`/`SMSTOP` are `MSR SVCR*` immediates (system class, `0xd503_407f` with bits
//!   10:8 free), counted as SME too. SVE's vector-length queries (RDVL, ADDVL, ADDPL,
//!   CNTB/H/W/D) are not counted: libgcc's unwinder, in every static program, holds `cntd`
//!   and runs it only while unwinding SVE frames.
//! - **AVX-512 on x86-64.** Valgrind implements no EVEX-encoded instruction either (the same
//!   SIGILL). The code is decoded with yaxpeax-x86 (already spelunk's disassembler, no new
//!   dependency), which says whether an instruction carries an EVEX prefix; in 64-bit mode
//!   byte 0x62 after the legacy prefixes is always EVEX (Intel SDM vol. 2 §2.7, "Intel AVX-512
//!   encoding"), so an instruction the decoder does not know is still counted when it starts so.
//!
//! The ELF headers, symbol tables and dynamic entries are parsed with the `object` crate; code
//! is then read section by section, never the whole file at once.
//!
//! Where: the executable sections of the main program and of the libraries it needs that are
//! not the system's. On aarch64, words inside a function are skipped where the ELF mapping
//! symbols (`$d` … `$x`, AAELF64 §5.7 "Mapping symbols") mark data (literal pools); with a
//! symbol table only function symbols' ranges are read (no data between functions); without
//! one (a stripped file) whole executable sections are.
//!
//! Why not the system's libraries: glibc, libm and libstdc++ ship SVE and AVX-512 variants
//! (`__memcpy_sve`, `__memmove_avx512_unaligned_erms`) that an ifunc resolver picks at load
//! time from the HWCAPs or CPUID, and Valgrind does not report what it cannot run to the
//! program, so those variants are not run under it. Measured with Valgrind 3.19: on x86-64,
//! `__builtin_cpu_supports("avx512f")` is false under it on a machine with AVX-512; on arm64
//! (Debian's arm64 build under qemu-aarch64, whose CPU has SVE, SVE2 and SME) AT_HWCAP is
//! 0xecfffffb natively and 0x1fb under Valgrind, without HWCAP_SVE, and AT_HWCAP2 loses SVE2
//! and SME. The same holds for such
//! variants linked into a static program: functions whose names are reserved to the
//! implementation (starting with an underscore, C11 §7.1.3, except C++'s and Rust's mangled
//! `_Z`/`_R` names) are not counted. A library is "the system's" when it is found only in the
//! dynamic loader's default places (the loader cache, /lib, /usr/lib); the ones reached
//! through the program's RUNPATH/RPATH or LD_LIBRARY_PATH (outside /lib and /usr/lib) are read.
//!
//! Refuse or warn: a program built with `-march=...+sve` or `-mavx512f` uses those instructions
//! unconditionally, and dies under Valgrind; a program that checks the CPU first (getauxval's
//! HWCAPs, GCC's `__builtin_cpu_supports` or function multi-versioning, ifunc, `cpuid`, an
//! `MRS` of an ID_AA64*_EL1 feature register) runs its other path under Valgrind, and runs
//! fine. So unsupported instructions are refused only in a file that shows none of these
//! checks and has a symbol table (in a static program, CPUID and ID-register reads are not
//! taken as checks: its C library's start-up code does them); otherwise spelunk warns and
//! runs, and if the program still meets such an instruction, the SIGILL is said plainly after
//! the run ([`explain_sigill`]). A program that detects the CPU some other way (reading
//! /proc/cpuinfo, an environment variable) would be refused wrongly: the refusal names
//! `--ignore-unsupported`, with which such findings become warnings and the program runs (a
//! program for another architecture is refused all the same: it cannot run at all).

use crate::flow::program_path;
use crate::session::ProgramExit;
use object::elf::{DynamicTag, FileHeader64, SectionType, SymbolType};
use object::read::elf::{FileHeader, SectionHeader, Sym, SymbolTable};
use object::{Endianness, ReadCache};
use spelunk_perf::bytes::u16_at;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// How many locations a finding lists.
const FIRST_SITES: usize = 5;
/// Files read at most (the program and its non-system libraries).
const MAX_FILES: usize = 32;
/// Most bytes read from one executable section (larger sections are read up to this).
const MAX_SECTION_BYTES: u64 = 512 << 20;

/// The machine an ELF file is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Machine {
    X86_64,
    Aarch64,
    /// Anything else: ELF class (32 or 64 bits) and `e_machine`.
    Other {
        bits: u8,
        e_machine: u16,
    },
}

impl Machine {
    /// The machine spelunk runs on (the emulator is built for it), when it is one of ours.
    pub fn host() -> Option<Machine> {
        if cfg!(target_arch = "x86_64") {
            Some(Machine::X86_64)
        } else if cfg!(target_arch = "aarch64") {
            Some(Machine::Aarch64)
        } else {
            None
        }
    }

    /// From the ELF header's class (1: 32-bit, 2: 64-bit) and `e_machine` (System V ABI:
    /// EM_X86_64 = 62, EM_AARCH64 = 183; EM_386 = 3, EM_ARM = 40).
    fn from_elf(class: u8, e_machine: u16) -> Machine {
        match (class, e_machine) {
            (2, 62) => Machine::X86_64,
            (2, 183) => Machine::Aarch64,
            (c, m) => Machine::Other {
                bits: if c == 1 { 32 } else { 64 },
                e_machine: m,
            },
        }
    }
}

impl std::fmt::Display for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Machine::X86_64 => f.write_str("x86-64"),
            Machine::Aarch64 => f.write_str("aarch64"),
            Machine::Other {
                bits: 32,
                e_machine: 3,
            } => f.write_str("32-bit x86 (i386)"),
            Machine::Other {
                bits: 32,
                e_machine: 40,
            } => f.write_str("32-bit Arm"),
            Machine::Other { bits, e_machine } => write!(f, "{bits}-bit ELF machine {e_machine}"),
        }
    }
}

/// An instruction set extension Valgrind does not implement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InstructionSet {
    /// The Scalable Vector Extension and SVE2 (aarch64).
    Sve,
    /// The Scalable Matrix Extension (aarch64).
    Sme,
    /// EVEX-encoded instructions: AVX-512 and AVX10 (x86-64).
    Avx512,
}

impl InstructionSet {
    pub fn name(self) -> &'static str {
        match self {
            InstructionSet::Sve => "SVE/SVE2",
            InstructionSet::Sme => "SME",
            InstructionSet::Avx512 => "AVX-512 (EVEX-encoded)",
        }
    }

    /// How to build the program without it.
    fn rebuild_hint(self) -> &'static str {
        match self {
            InstructionSet::Sve => {
                "rebuild it without SVE for the emulated run (no `+sve`/`+sve2` in -march, \
                 e.g. -march=armv8.2-a, and no SVE intrinsics or assembly)"
            }
            InstructionSet::Sme => {
                "rebuild it without SME for the emulated run (no `+sme` in -march, no \
                 __arm_streaming code)"
            }
            InstructionSet::Avx512 => {
                "rebuild it without AVX-512 for the emulated run (no -mavx512*, and \
                 -march=x86-64-v3 instead of -march=native or x86-64-v4)"
            }
        }
    }
}

/// One place an unsupported instruction is, as objdump shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeSite {
    /// ELF virtual address.
    pub address: u64,
    /// The function symbol holding it, when the file has one.
    pub function: Option<String>,
}

impl std::fmt::Display for CodeSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.function {
            Some(n) => write!(f, "{:#x} in {n}", self.address),
            None => write!(f, "{:#x}", self.address),
        }
    }
}

/// Unsupported instructions of one set in one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsupportedCode {
    pub file: PathBuf,
    pub set: InstructionSet,
    pub count: u64,
    /// The first few, in address order: one per function when the file names functions.
    pub first: Vec<CodeSite>,
    /// Why the program may never run them (it checks the CPU's features at run time, or the
    /// file has no symbol table to tell program code from library variants); `None`: nothing
    /// suggests it avoids them.
    pub maybe_avoided: Option<String>,
}

impl UnsupportedCode {
    fn describe(&self) -> String {
        let mut s = format!(
            "{}: {} {} instruction{}",
            self.file.display(),
            self.count,
            self.set.name(),
            if self.count == 1 { "" } else { "s" }
        );
        let sites: Vec<String> = self.first.iter().map(|c| c.to_string()).collect();
        let _ = write!(
            s,
            " ({}{}{})",
            if self.count > 1 { "first at " } else { "at " },
            sites.join(", "),
            if self.count as usize > self.first.len() {
                ", ..."
            } else {
                ""
            }
        );
        s
    }
}

/// What the check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    /// The program is built for another machine than the emulator's.
    WrongMachine {
        file: PathBuf,
        machine: Machine,
        host: Machine,
    },
    /// Instructions Valgrind does not implement.
    Code(UnsupportedCode),
}

/// The findings for one program and its non-system libraries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgramCheck {
    pub findings: Vec<Finding>,
    /// Files that could not be read as ELF (named, with why); not a reason to refuse.
    pub unread: Vec<String>,
}

impl ProgramCheck {
    /// The message refusing the emulated run, when the program cannot run under Valgrind.
    /// `command` is the spelunk command (`spelunk record`), for what to do instead.
    pub fn refusal(&self, command: &str) -> Option<String> {
        for f in &self.findings {
            if let Finding::WrongMachine {
                file,
                machine,
                host,
            } = f
            {
                let instead = match machine {
                    Machine::Aarch64 => format!("run `{command}` on an aarch64 machine, or "),
                    Machine::X86_64 => {
                        format!("run `{command} --emulate` on an x86-64 machine, or ")
                    }
                    Machine::Other { .. } => String::new(),
                };
                return Some(format!(
                    "{}: a program for {machine}; the emulator runs {host} programs only (it \
                     is a Valgrind tool for this machine): {instead}build the program for \
                     {host}",
                    file.display()
                ));
            }
        }
        let blocking: Vec<&UnsupportedCode> = self
            .findings
            .iter()
            .filter_map(|f| match f {
                Finding::Code(c) if c.maybe_avoided.is_none() => Some(c),
                _ => None,
            })
            .collect();
        let first = blocking.first()?;
        let mut s = String::new();
        for c in &blocking {
            let _ = write!(s, "{}; ", c.describe());
        }
        let hardware = match first.set {
            InstructionSet::Avx512 => String::new(),
            _ => format!("run `{command}` without --emulate on hardware with SPE, or "),
        };
        let _ = write!(
            s,
            "Valgrind cannot run {} instructions, and nothing in the program checks the CPU \
             before using them, so it would stop with SIGILL at the first one: {hardware}{}. \
             If the program never runs them (it checks the CPU in a way spelunk does not \
             see), `{command} --emulate {IGNORE_FLAG}` runs it anyway",
            first.set.name(),
            first.set.rebuild_hint()
        );
        Some(s)
    }

    /// `--ignore-unsupported`: unsupported instructions nothing seems to guard are kept as
    /// warnings instead of refusing the run (a program for another machine is still refused).
    pub fn ignore_unsupported(&mut self) {
        for f in &mut self.findings {
            if let Finding::Code(c) = f {
                if c.maybe_avoided.is_none() {
                    c.maybe_avoided = Some(format!("{IGNORE_FLAG} was given"));
                }
            }
        }
    }

    /// Warnings for instructions the program may avoid at run time and for files that could
    /// not be read (the run goes ahead).
    pub fn warnings(&self) -> Vec<String> {
        let unread = self
            .unread
            .iter()
            .map(|e| format!("not checked for what Valgrind cannot run: {e}"));
        self.findings
            .iter()
            .filter_map(|f| match f {
                Finding::Code(c) => c.maybe_avoided.as_ref().map(|why| {
                    format!(
                        "{}, which Valgrind cannot run; running anyway, as {why}. If the \
                         program stops with SIGILL, {}",
                        c.describe(),
                        c.set.rebuild_hint()
                    )
                }),
                _ => None,
            })
            .chain(unread)
            .collect()
    }
}

/// Checks `program` (the file the run will start, already resolved through PATH) and its
/// non-system libraries for what the emulator on this machine cannot run. A file that is not
/// ELF (a script) is not checked: the run says what happens to it.
pub fn check_program(program: &Path) -> ProgramCheck {
    match Machine::host() {
        Some(host) => check_files(program, host),
        None => ProgramCheck::default(),
    }
}

/// [`check_program`] for a file and a given emulator machine (tests check aarch64 programs on
/// any machine with it).
pub fn check_files(program: &Path, host: Machine) -> ProgramCheck {
    let mut check = ProgramCheck::default();
    let mut queue = vec![program.to_path_buf()];
    let mut seen = HashSet::new();
    while let Some(path) = queue.pop() {
        if seen.len() >= MAX_FILES {
            break;
        }
        if !seen.insert(path.canonicalize().unwrap_or_else(|_| path.clone())) {
            continue;
        }
        let is_program = path == program;
        let mut elf = match Elf::read(&path) {
            Ok(Some(e)) => e,
            Ok(None) => continue,
            Err(e) => {
                check.unread.push(e);
                continue;
            }
        };
        if elf.machine != host {
            if is_program {
                check.findings.push(Finding::WrongMachine {
                    file: path,
                    machine: elf.machine,
                    host,
                });
                return check;
            }
            continue;
        }
        match elf.scan(&path) {
            Ok(found) => check.findings.extend(found.into_iter().map(Finding::Code)),
            Err(e) => check.unread.push(e),
        }
        queue.extend(elf.non_system_libraries(&path));
    }
    check
}

/// The flag that runs a program despite unsupported instructions nothing seems to guard.
pub const IGNORE_FLAG: &str = "--ignore-unsupported";

/// Before an emulated run of `argv0`: the refusal message when there is no such program or
/// the emulator cannot run it (`command` is the spelunk command, for what to do instead),
/// else its warnings said with `say` and the check kept for [`after_emulated_run`].
/// `ignore_unsupported` ([`IGNORE_FLAG`]): unsupported instructions are warned about, not
/// refused.
pub fn before_emulated_run(
    argv0: &OsStr,
    command: &str,
    ignore_unsupported: bool,
    say: &mut dyn FnMut(&str),
) -> Result<ProgramCheck, String> {
    let name = argv0.to_string_lossy();
    let program = match program_path(argv0) {
        Some(p) if p.is_file() => p,
        Some(_) => return Err(format!("{name}: no such file; nothing was run")),
        None => {
            return Err(format!(
                "{name}: not found on PATH; nothing was run (a program in this directory is \
                 ./{name})"
            ))
        }
    };
    let mut check = check_program(&program);
    if ignore_unsupported {
        check.ignore_unsupported();
    }
    if let Some(refusal) = check.refusal(command) {
        return Err(refusal);
    }
    for w in check.warnings() {
        say(&format!("warning: {w}"));
    }
    Ok(check)
}

/// After an emulated run: a program stopped by SIGILL is said plainly with `say`.
pub fn after_emulated_run(
    exit: ProgramExit,
    valgrind_lines: &[String],
    check: &ProgramCheck,
    say: &mut dyn FnMut(&str),
) {
    use std::os::unix::process::ExitStatusExt;
    if exit.0.signal() == Some(libc::SIGILL) {
        say(&format!(
            "warning: {}",
            explain_sigill(valgrind_lines, check)
        ));
    }
}

/// Says plainly why an emulated program stopped with SIGILL, from Valgrind's lines (`Illegal
/// opcode at address 0x...` and the stack line under it) and what the check found before.
pub fn explain_sigill(valgrind_lines: &[String], check: &ProgramCheck) -> String {
    let at = valgrind_lines
        .iter()
        .position(|l| l.contains("Illegal opcode at address"))
        .map(|i| {
            let where_ = valgrind_lines
                .get(i + 1)
                .and_then(|l| l.split_once(" at "))
                .map(|(_, s)| s.trim().to_string());
            let addr = valgrind_lines[i]
                .rsplit(' ')
                .next()
                .unwrap_or_default()
                .to_string();
            match where_ {
                Some(w) if !w.is_empty() => format!(" at {w}"),
                _ => format!(" at {addr}"),
            }
        })
        .unwrap_or_default();
    let known: Vec<&'static str> = check
        .findings
        .iter()
        .filter_map(|f| match f {
            Finding::Code(c) => Some(c.set.name()),
            _ => None,
        })
        .collect();
    let what = if known.is_empty() {
        "an instruction Valgrind does not implement (on aarch64 SVE/SME, on x86-64 AVX-512 \
         are the usual ones; Valgrind's `Illegal opcode` line above names the address)"
            .to_string()
    } else {
        format!(
            "an instruction Valgrind does not implement ({}, found in it before the run)",
            known.join(", ")
        )
    };
    format!(
        "the program stopped with SIGILL{at} under the emulator: {what}. The recording covers \
         only the run up to there; rebuild the program without that extension for the \
         emulated run, or record it on hardware"
    )
}

// ---- ELF ---------------------------------------------------------------------------------
use object::elf::{
    DT_NEEDED, DT_RPATH, DT_RUNPATH, SHF_EXECINSTR, SHT_DYNSYM, SHT_NOBITS, SHT_SYMTAB, STT_FUNC,
    STT_GNU_IFUNC,
};

/// Names whose presence shows the program checks the CPU's features at run time: the auxv
/// HWCAP reader, GCC's and LLVM's `__builtin_cpu_supports` and function multi-versioning
/// support (libgcc's cpuinfo, compiler-rt's cpu_model).
const CPU_CHECK_SYMBOLS: [&str; 7] = [
    "getauxval",
    "__getauxval",
    "__cpu_indicator_init",
    "__cpu_model",
    "__cpu_features2",
    "__init_cpu_features_resolver",
    "__aarch64_cpu_features",
];

#[derive(Clone, Debug)]
struct Section {
    kind: SectionType,
    flags: u64,
    addr: u64,
    offset: u64,
    size: u64,
}

#[derive(Clone, Debug)]
struct Symbol {
    name: String,
    kind: SymbolType,
    section: u16,
    value: u64,
    size: u64,
}

/// The parts of an ELF file the check reads: headers, symbols and dynamic entries parsed by
/// the `object` crate; code is read later, section by section, from `file`.
struct Elf {
    machine: Machine,
    sections: Vec<Section>,
    /// `.symtab` when there is one.
    symtab: Vec<Symbol>,
    dynsym: Vec<Symbol>,
    /// (tag, string) of DT_NEEDED, DT_RPATH, DT_RUNPATH.
    dynamic: Vec<(DynamicTag, String)>,
    file: std::fs::File,
}

fn read_at(f: &mut std::fs::File, path: &Path, offset: u64, len: u64) -> Result<Vec<u8>, String> {
    let n = usize::try_from(len.min(MAX_SECTION_BYTES))
        .map_err(|_| format!("{}: {len} bytes do not fit in memory", path.display()))?;
    let mut buf = vec![0u8; n];
    f.seek(SeekFrom::Start(offset))
        .and_then(|_| f.read_exact(&mut buf))
        .map_err(|e| {
            format!(
                "{}: cannot read {n} bytes at offset {offset:#x}: {e}",
                path.display()
            )
        })?;
    Ok(buf)
}

/// The symbols of one table, names decoded lossily.
fn symbols_of<'data>(
    table: &SymbolTable<'data, FileHeader64<Endianness>, &'data ReadCache<std::fs::File>>,
    endian: Endianness,
) -> Vec<Symbol> {
    table
        .iter()
        .map(|s| Symbol {
            name: String::from_utf8_lossy(s.name(endian, table.strings()).unwrap_or_default())
                .into_owned(),
            kind: s.st_type(),
            section: s.st_shndx(endian).0,
            value: s.st_value(endian),
            size: s.st_size(endian),
        })
        .collect()
}

type Tables = (
    Vec<Section>,
    Vec<Symbol>,
    Vec<Symbol>,
    Vec<(DynamicTag, String)>,
);

/// Section headers, both symbol tables and the dynamic entries of a 64-bit ELF file.
fn parse_tables(data: &ReadCache<std::fs::File>) -> object::Result<Tables> {
    let header = FileHeader64::<Endianness>::parse(data)?;
    let endian = header.endian()?;
    let table = header.sections(endian, data)?;
    let sections = table
        .iter()
        .map(|s| Section {
            kind: s.sh_type(endian),
            flags: s.sh_flags(endian).0,
            addr: s.sh_addr(endian),
            offset: s.sh_offset(endian),
            size: s.sh_size(endian),
        })
        .collect();
    let symtab = symbols_of(&table.symbols(endian, data, SHT_SYMTAB)?, endian);
    let dynsym = symbols_of(&table.symbols(endian, data, SHT_DYNSYM)?, endian);
    let dyn_table = table.dynamic_table(endian, data)?;
    let dynamic = dyn_table
        .iter()
        .filter(|d| matches!(d.tag, DT_NEEDED | DT_RPATH | DT_RUNPATH))
        .map(|d| {
            let name = dyn_table.string(d).unwrap_or_default();
            (d.tag, String::from_utf8_lossy(name).into_owned())
        })
        .collect();
    Ok((sections, symtab, dynsym, dynamic))
}

impl Elf {
    /// `Ok(None)` for a file that is not ELF (a script); errors name the file and the problem.
    fn read(path: &Path) -> Result<Option<Elf>, String> {
        let bad = |what: &str| format!("{}: {what}", path.display());
        let mut file = std::fs::File::open(path).map_err(|e| bad(&format!("cannot open: {e}")))?;
        let mut head = Vec::with_capacity(20);
        (&mut file)
            .take(20)
            .read_to_end(&mut head)
            .map_err(|e| bad(&format!("cannot read: {e}")))?;
        if head.get(..4) != Some(b"\x7fELF".as_slice()) {
            return Ok(None);
        }
        // ELF identification (System V ABI): EI_CLASS at 4, EI_DATA at 5; e_machine at 0x12 in
        // both classes, read here so a 32-bit or big-endian file is named by its machine.
        let class = head.get(4).copied().unwrap_or(0);
        let machine = Machine::from_elf(class, u16_at(&head, 0x12).unwrap_or(0));
        let mut elf = Elf {
            machine,
            sections: Vec::new(),
            symtab: Vec::new(),
            dynsym: Vec::new(),
            dynamic: Vec::new(),
            file,
        };
        if class != 2 || head.get(5) != Some(&1) {
            // Another class or big-endian: only the machine matters (it is not the host's).
            return Ok(Some(elf));
        }
        let cache = ReadCache::new(elf.file);
        let tables = parse_tables(&cache);
        elf.file = cache.into_inner();
        (elf.sections, elf.symtab, elf.dynsym, elf.dynamic) =
            tables.map_err(|e| bad(&format!("malformed ELF file: {e}")))?;
        Ok(Some(elf))
    }

    /// A file that needs shared libraries (a dynamic executable or library); a static program,
    /// static-pie included, carries the C library's own CPU checks, which say nothing about
    /// its code.
    fn is_dynamic(&self) -> bool {
        self.dynamic.iter().any(|(tag, _)| *tag == DT_NEEDED)
    }

    /// The function symbols of `.symtab` (`.dynsym` names only the exported functions, so a
    /// stripped file is read whole instead).
    fn function_symbols(&self) -> impl Iterator<Item = &Symbol> {
        self.symtab
            .iter()
            .filter(|s| matches!(s.kind, STT_FUNC | STT_GNU_IFUNC) && s.size > 0)
    }

    /// Why the program may avoid its unsupported instructions at run time, if anything says so.
    fn cpu_check(&self, checks_in_code: Option<&str>) -> Option<String> {
        if self.is_dynamic() {
            let all = self.dynsym.iter().chain(&self.symtab);
            if let Some(s) = all
                .clone()
                .find(|s| CPU_CHECK_SYMBOLS.contains(&s.name.as_str()))
            {
                return Some(format!(
                    "the file uses {} to check the CPU's features at run time",
                    s.name
                ));
            }
            if let Some(s) = all.clone().find(|s| s.kind == STT_GNU_IFUNC) {
                return Some(format!(
                    "the file chooses code by the CPU's features at load time (ifunc {})",
                    s.name
                ));
            }
        } else if let Some(s) = self
            .symtab
            .iter()
            .find(|s| CPU_CHECK_SYMBOLS[2..].contains(&s.name.as_str()))
        {
            return Some(format!(
                "the program uses {} to check the CPU's features at run time",
                s.name
            ));
        }
        // A static program's own C library reads CPUID or the ID registers at start-up
        // (glibc's init_cpu_features), so only a dynamic file's reads say something.
        if let Some(f) = checks_in_code.filter(|_| self.is_dynamic()) {
            return Some(format!(
                "{f} reads the CPU's feature registers (it may choose another path)"
            ));
        }
        if self.function_symbols().next().is_none() {
            return Some(
                "the file has no symbol table to tell the program's code from the C \
                 library's run-time-selected variants"
                    .into(),
            );
        }
        None
    }

    /// Code ranges to read, (section index, start address, end address, function name), in
    /// address order: function symbols' ranges, or whole sections without them.
    fn code_ranges(&self) -> Vec<(usize, u64, u64, Option<String>)> {
        let exec = |i: usize| {
            self.sections
                .get(i)
                .is_some_and(|s| s.flags & SHF_EXECINSTR.0 != 0 && s.kind != SHT_NOBITS)
        };
        let mut ranges: Vec<(usize, u64, u64, Option<String>)> = self
            .function_symbols()
            .filter(|s| exec(usize::from(s.section)) && !reserved_name(&s.name))
            .map(|s| {
                (
                    usize::from(s.section),
                    s.value,
                    s.value.saturating_add(s.size),
                    Some(s.name.clone()),
                )
            })
            .collect();
        if self.function_symbols().next().is_none() {
            ranges = (0..self.sections.len())
                .filter(|&i| exec(i))
                .map(|i| {
                    let s = &self.sections[i];
                    (i, s.addr, s.addr.saturating_add(s.size), None)
                })
                .collect();
        }
        ranges.sort_by_key(|r| (r.1, r.2));
        // Aliases share a range: keep the first name.
        ranges.dedup_by(|b, a| a.1 == b.1 && a.2 == b.2);
        ranges
    }

    /// aarch64 mapping symbols of section `i`: (address, is data), in address order.
    fn mapping_symbols(&self, i: usize) -> Vec<(u64, bool)> {
        let mut m: Vec<(u64, bool)> = self
            .symtab
            .iter()
            .filter(|s| usize::from(s.section) == i)
            .filter_map(|s| {
                let n = s.name.as_str();
                let data = n == "$d" || n.starts_with("$d.");
                let code = n == "$x" || n.starts_with("$x.");
                (data || code).then_some((s.value, data))
            })
            .collect();
        m.sort_unstable();
        m
    }

    /// The unsupported instructions of this file, one entry per instruction set.
    fn scan(&mut self, path: &Path) -> Result<Vec<UnsupportedCode>, String> {
        let mut found: Vec<UnsupportedCode> = Vec::new();
        let mut checks_in_code: Option<String> = None;
        let mut section_bytes: Option<(usize, Vec<u8>)> = None;
        for (i, start, end, name) in self.code_ranges() {
            let s = self.sections[i].clone();
            if section_bytes.as_ref().map(|(j, _)| *j) != Some(i) {
                section_bytes = Some((i, read_at(&mut self.file, path, s.offset, s.size)?));
            }
            let bytes = match &section_bytes {
                Some((_, b)) => b,
                None => continue,
            };
            let lo = start.saturating_sub(s.addr) as usize;
            let hi = (end.saturating_sub(s.addr) as usize).min(bytes.len());
            let Some(code) = bytes.get(lo..hi) else {
                continue;
            };
            let mut hit = |set: InstructionSet, address: u64| {
                let idx = match found.iter().position(|c| c.set == set) {
                    Some(k) => k,
                    None => {
                        found.push(UnsupportedCode {
                            file: path.to_path_buf(),
                            set,
                            count: 0,
                            first: Vec::new(),
                            maybe_avoided: None,
                        });
                        found.len() - 1
                    }
                };
                let c = &mut found[idx];
                c.count += 1;
                // The first site of each function, so the few listed name different places.
                let new_place = name.is_none() || c.first.iter().all(|f| f.function != name);
                if c.first.len() < FIRST_SITES && new_place {
                    c.first.push(CodeSite {
                        address,
                        function: name.clone(),
                    });
                }
            };
            let checks = match self.machine {
                Machine::Aarch64 => scan_a64(code, start, &self.mapping_symbols(i), &mut hit),
                Machine::X86_64 => scan_x86(code, start, &mut hit),
                Machine::Other { .. } => false,
            };
            if checks && checks_in_code.is_none() {
                checks_in_code = Some(name.clone().unwrap_or_else(|| "the code".into()));
            }
        }
        let avoided = self.cpu_check(checks_in_code.as_deref());
        for c in &mut found {
            c.maybe_avoided.clone_from(&avoided);
        }
        Ok(found)
    }

    /// The libraries this file needs that are not the system's (see the module doc).
    fn non_system_libraries(&self, path: &Path) -> Vec<PathBuf> {
        let origin = path
            .parent()
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_else(|| ".".into());
        let dirs_of = |tag: DynamicTag| -> Vec<String> {
            self.dynamic
                .iter()
                .filter(|(t, _)| *t == tag)
                .flat_map(|(_, v)| v.split(':').map(str::to_owned).collect::<Vec<_>>())
                .map(|d| d.replace("${ORIGIN}", &origin).replace("$ORIGIN", &origin))
                .collect()
        };
        let runpath = dirs_of(DT_RUNPATH);
        let mut dirs = if runpath.is_empty() {
            dirs_of(DT_RPATH)
        } else {
            Vec::new()
        };
        if let Some(p) = std::env::var_os("LD_LIBRARY_PATH") {
            dirs.extend(std::env::split_paths(&p).map(|d| d.to_string_lossy().into_owned()));
        }
        dirs.extend(runpath);
        let system = |d: &Path| {
            let d = d.to_string_lossy();
            ["/lib", "/usr/lib"].iter().any(|s| d.starts_with(s))
        };
        self.dynamic
            .iter()
            .filter(|(t, _)| *t == DT_NEEDED)
            .filter_map(|(_, name)| {
                if name.contains('/') {
                    return Some(PathBuf::from(name));
                }
                dirs.iter()
                    .filter(|d| !d.is_empty())
                    .map(|d| Path::new(d).join(name))
                    .find(|p| p.is_file())
            })
            .filter(|p| !system(p))
            .collect()
    }
}

/// A function name reserved to the C implementation (C11 §7.1.3: every file-scope name
/// starting with an underscore), as glibc's and libgcc's are (`__memcpy_sve`,
/// `_dl_runtime_profile_avx512`); not C++'s or Rust's mangled names (`_Z...`, `_R...`).
fn reserved_name(name: &str) -> bool {
    name.starts_with('_') && !name.starts_with("_Z") && !name.starts_with("_R")
}

/// SVE's vector-length queries: ADDVL and ADDPL (`0x0420_5000`/`0x0460_5000`, mask
/// `0xffe0_f800`), RDVL (`0x04bf_5000`, mask `0xffff_f800`) and CNTB/CNTH/CNTW/CNTD
/// (`0x0420_e000`, mask `0xff30_fc00`: size in bits 23:22, bit 20 clear, unlike INC*), per the
/// Arm ARM's SVE encodings (checked against binutils' assembler). libgcc's DWARF unwinder, linked
/// into every static program, holds `cntd` to read the VG register, and runs it only for frames
/// whose call-frame information uses VG, that is frames of SVE code; a program with no other
/// SVE instruction never runs them, so they are not counted.
fn sve_vector_length_query(word: u32) -> bool {
    word & 0xffe0_f800 == 0x0420_5000
        || word & 0xffe0_f800 == 0x0460_5000
        || word & 0xffff_f800 == 0x04bf_5000
        || word & 0xff30_fc00 == 0x0420_e000
}

/// The A64 instruction classes (Arm ARM §C4.1, "Top-level encodings for A64"): op0 is bits
/// 28:25. `None` for the classes Valgrind implements.
pub fn a64_unsupported(word: u32) -> Option<InstructionSet> {
    let op0 = (word >> 25) & 0xf;
    if op0 == 0b0010 {
        return (!sve_vector_length_query(word)).then_some(InstructionSet::Sve);
    }
    if op0 == 0b0000 && word >> 31 == 1 {
        return Some(InstructionSet::Sme);
    }
    // MSR SVCRSM/SVCRZA/SVCRSMZA, #imm (SMSTART, SMSTOP): CRm = 0b0 mask(2) imm(1), bits 10:8.
    if word & 0xffff_f8ff == 0xd503_407f {
        return Some(InstructionSet::Sme);
    }
    None
}

/// `MRS Xt, ID_AA64PFR0_EL1 | ID_AA64PFR1_EL1 | ID_AA64ZFR0_EL1 | ID_AA64SMFR0_EL1`: a program
/// reading the registers that say whether SVE or SME exist (Linux emulates these reads for
/// user space).
fn a64_reads_feature_register(word: u32) -> bool {
    matches!(
        word & 0xffff_ffe0,
        0xd538_0400 | 0xd538_0420 | 0xd538_0480 | 0xd538_04a0
    )
}

/// Counts unsupported A64 instructions of `code` (placed at `address`), skipping the words
/// that the mapping symbols mark as data; returns whether the code reads feature registers.
fn scan_a64(
    code: &[u8],
    address: u64,
    mapping: &[(u64, bool)],
    hit: &mut dyn FnMut(InstructionSet, u64),
) -> bool {
    let mut checks = false;
    for (k, w) in code.chunks_exact(4).enumerate() {
        let at = address + 4 * k as u64;
        let is_data = mapping
            .partition_point(|(a, _)| *a <= at)
            .checked_sub(1)
            .is_some_and(|j| mapping[j].1);
        if is_data {
            continue;
        }
        let word = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        if let Some(set) = a64_unsupported(word) {
            hit(set, at);
        }
        checks |= a64_reads_feature_register(word);
    }
    checks
}

/// x86 legacy prefixes (Intel SDM vol. 2 §2.1.1): lock/rep, segment overrides, operand and
/// address size.
fn is_legacy_prefix(b: u8) -> bool {
    matches!(
        b,
        0xf0 | 0xf2 | 0xf3 | 0x2e | 0x36 | 0x3e | 0x26 | 0x64 | 0x65 | 0x66 | 0x67
    )
}

/// Counts EVEX-encoded instructions of `code` (placed at `address`); returns whether the code
/// executes CPUID.
fn scan_x86(code: &[u8], address: u64, hit: &mut dyn FnMut(InstructionSet, u64)) -> bool {
    use yaxpeax_arch::{Decoder, LengthedInstruction, U8Reader};
    use yaxpeax_x86::long_mode::{InstDecoder, Opcode};
    let decoder = InstDecoder::default();
    let mut checks = false;
    let mut at = 0usize;
    while at < code.len() {
        let rest = &code[at..];
        let mut reader = U8Reader::new(rest);
        let len = match decoder.decode(&mut reader) {
            Ok(inst) => {
                if inst.prefixes.evex().is_some() {
                    hit(InstructionSet::Avx512, address + at as u64);
                }
                checks |= inst.opcode() == Opcode::CPUID;
                usize::try_from(inst.len().to_const()).unwrap_or(1)
            }
            Err(_) => {
                // An instruction the decoder does not know: EVEX if it starts with 0x62 after
                // the legacy prefixes; its length is unknown, so skip the 4-byte prefix.
                let p = rest.iter().take_while(|b| is_legacy_prefix(**b)).count();
                if rest.get(p) == Some(&0x62) {
                    hit(InstructionSet::Avx512, address + at as u64);
                    p + 4
                } else {
                    1
                }
            }
        };
        at += len.max(1);
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodings as binutils 2.40 `aarch64-linux-gnu-as` assembles them (checked against the
    /// Arm ARM's encoding diagrams for the same instructions).
    #[test]
    fn a64_classes_follow_the_top_level_encoding_table() {
        let sve = [
            0x2518_e3e0, // ptrue p0.b
            0xa5e0_a000, // ld1d {z0.d}, p0/z, [x0]
            0x25a1_1c01, // whilelo p1.s, x0, x1
            0x04f0_e3e0, // incd x0 (an element count, not a vector-length query)
        ];
        for w in sve {
            assert_eq!(a64_unsupported(w), Some(InstructionSet::Sve), "{w:#x}");
        }
        let sme = [
            0x8081_0000, // fmopa za0.s, p0/m, p0/m, z0.s, z1.s
            0xd503_477f, // smstart
            0xd503_467f, // smstop
            0xd503_437f, // smstart sm
        ];
        for w in sme {
            assert_eq!(a64_unsupported(w), Some(InstructionSet::Sme), "{w:#x}");
        }
        let base = [
            0x9100_0400, // add x0, x0, #1
            0x0000_0000, // udf #0
            0xd65f_03c0, // ret
            0xd538_0402, // mrs x2, id_aa64pfr0_el1
            0x4ea1_1c20, // mov v0.16b, v1.16b (Advanced SIMD)
            0xd503_201f, // nop
            // SVE's vector-length queries, not counted (libgcc's unwinder holds them)
            0x043f_57ff, // addvl sp, sp, #-1
            0x0461_5040, // addpl x0, x1, #2
            0x04bf_5020, // rdvl x0, #1
            0x0420_e3e0, // cntb x0
            0x0461_e3e1, // cnth x1, all, mul #2
            0x04a0_e3e2, // cntw x2
            0x04e0_e103, // cntd x3, vl8
        ];
        for w in base {
            assert_eq!(a64_unsupported(w), None, "{w:#x}");
        }
        assert!(a64_reads_feature_register(0xd538_0483)); // mrs x3, id_aa64zfr0_el1
        assert!(a64_reads_feature_register(0xd538_04a4)); // mrs x4, id_aa64smfr0_el1
        assert!(!a64_reads_feature_register(0xd53b_4200)); // mrs x0, nzcv
    }

    #[test]
    fn data_words_under_a_mapping_symbol_are_skipped() {
        // ptrue p0.b at 0x100, then a literal word with the same bits at 0x104 ($d), then
        // code again ($x at 0x108): one SVE instruction, at 0x100.
        let mut code = Vec::new();
        for w in [0x2518_e3e0u32, 0x2518_e3e0, 0xd65f_03c0] {
            code.extend_from_slice(&w.to_le_bytes());
        }
        let mapping = [(0x100, false), (0x104, true), (0x108, false)];
        let mut hits = Vec::new();
        scan_a64(&code, 0x100, &mapping, &mut |s, a| hits.push((s, a)));
        assert_eq!(hits, vec![(InstructionSet::Sve, 0x100)]);
    }

    #[test]
    fn evex_instructions_are_found_between_others() {
        // Intel SDM encodings: 48 89 c8 mov rax, rcx; 62 f1 7d 48 ef c0 vpxord zmm0, zmm0,
        // zmm0 (EVEX.512.66.0F.W0 EF /r); c5 fc 77 vzeroall (VEX, supported); 0f a2 cpuid;
        // c3 ret.
        let code = [
            0x48, 0x89, 0xc8, 0x62, 0xf1, 0x7d, 0x48, 0xef, 0xc0, 0xc5, 0xfc, 0x77, 0x0f, 0xa2,
            0xc3,
        ];
        let mut hits = Vec::new();
        let cpuid = scan_x86(&code, 0x1000, &mut |s, a| hits.push((s, a)));
        assert_eq!(hits, vec![(InstructionSet::Avx512, 0x1003)]);
        assert!(cpuid);
    }

    #[test]
    fn messages_say_what_to_do() {
        let wrong = ProgramCheck {
            findings: vec![Finding::WrongMachine {
                file: "prog".into(),
                machine: Machine::Aarch64,
                host: Machine::X86_64,
            }],
            unread: Vec::new(),
        };
        let m = wrong.refusal("spelunk record").unwrap_or_default();
        assert!(
            m.starts_with("prog: a program for aarch64; the emulator runs x86-64 programs only"),
            "{m}"
        );
        assert!(m.contains(
            "run `spelunk record` on an aarch64 machine, or build the program for x86-64"
        ));
        let code = UnsupportedCode {
            file: "prog".into(),
            set: InstructionSet::Sve,
            count: 7,
            first: vec![CodeSite {
                address: 0x7a0,
                function: Some("kernel".into()),
            }],
            maybe_avoided: None,
        };
        let blocked = ProgramCheck {
            findings: vec![Finding::Code(code.clone())],
            unread: Vec::new(),
        };
        let m = blocked.refusal("spelunk record").unwrap_or_default();
        assert!(
            m.starts_with("prog: 7 SVE/SVE2 instructions (first at 0x7a0 in kernel, ...); Valgrind cannot run SVE/SVE2"),
            "{m}"
        );
        assert!(m.contains("without --emulate on hardware with SPE"), "{m}");
        assert!(blocked.warnings().is_empty());
        let avoided = ProgramCheck {
            findings: vec![Finding::Code(UnsupportedCode {
                maybe_avoided: Some("the file uses getauxval to check".into()),
                ..code
            })],
            unread: Vec::new(),
        };
        assert_eq!(avoided.refusal("spelunk record"), None);
        assert_eq!(avoided.warnings().len(), 1);
        let unread = ProgramCheck {
            findings: Vec::new(),
            unread: vec!["lib.so: truncated section header table".into()],
        };
        assert_eq!(
            unread.warnings(),
            vec![
                "not checked for what Valgrind cannot run: lib.so: truncated section header \
                 table"
            ]
        );
    }

    #[test]
    fn sigill_is_said_plainly() {
        // Valgrind 3.19's lines for an EVEX instruction in main (as spelunk passes them on).
        let lines: Vec<String> = [
            "==13280== Process terminating with default action of signal 4 (SIGILL)",
            "==13280==  Illegal opcode at address 0x109165",
            "==13280==    at 0x109165: main (avx.c:6)",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let m = explain_sigill(&lines, &ProgramCheck::default());
        assert!(
            m.starts_with("the program stopped with SIGILL at 0x109165: main (avx.c:6) under the emulator: an instruction Valgrind does not implement"),
            "{m}"
        );
        // Valgrind 3.19's arm64 build (under qemu-aarch64) on `ptrue p0.b` in sve_kernel.
        let lines: Vec<String> = [
            "==25152== valgrind: Unrecognised instruction at address 0x108754.",
            "==25152==    at 0x108754: sve_kernel (sve.c:3)",
            "==25152== Process terminating with default action of signal 4 (SIGILL)",
            "==25152==  Illegal opcode at address 0x108754",
            "==25152==    at 0x108754: sve_kernel (sve.c:3)",
            "==25152==    by 0x10877B: main (sve.c:5)",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let m = explain_sigill(&lines, &ProgramCheck::default());
        assert!(
            m.starts_with(
                "the program stopped with SIGILL at 0x108754: sve_kernel (sve.c:3) under"
            ),
            "{m}"
        );
    }
}
