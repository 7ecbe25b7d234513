//! Code addresses to functions, source lines and inlined frames, in batches.
//!
//! Callers hand over (mapping, address) pairs — typically the unique PCs left after aggregating
//! samples — and get one [`CodeLocation`] each. Requests are grouped per file and passed to
//! blazesym in one call per file (ELF symbols, DWARF line tables and inline information,
//! `.gnu_debuglink` and build-id debug files); results are cached per (file, offset) for the
//! symbolizer's lifetime. Files not found on the analysing machine give locations with the file
//! name only, listed by [`CodeSymbolizer::missing_files`]; files found but not readable (no
//! permission, not an ELF file, damaged) likewise, listed with the reason by
//! [`CodeSymbolizer::unreadable_files`]. A file is used only if it has the build-id the
//! recording lists for it ([`crate::locate`]: `--symfs` and build-id caches first); a file
//! here with another build-id (rebuilt since the recording) names nothing: its locations get
//! the DSO `prog [build-id mismatch]` and it is listed by [`CodeSymbolizer::mismatched_files`].
//! Kernel PCs are named from the recorded kernel's kallsyms when one is given
//! ([`crate::kallsyms`]).

use crate::kallsyms::KernelSymbols;
use crate::locate::{Located, Locator};
use crate::maps::{AddressSpaces, Mapping, MappingKind};
use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A function inlined at a code address (outermost first).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InlineFrame {
    pub function: Arc<str>,
    pub file: Option<Arc<str>>,
    pub line: Option<u32>,
}

/// Where a code address is.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct CodeLocation {
    /// The mapped file (or `[heap]`, `[vdso]`, `[unknown]`...).
    pub dso: Arc<str>,
    /// The ELF symbol containing the address (the outermost function, as perf reports it).
    pub function: Option<Arc<str>>,
    /// Offset of the address from the function's start.
    pub function_offset: Option<u64>,
    /// Source file and line of the address, when debug information is available: the
    /// innermost inlined frame's (as addr2line prints it), unless that is in a compiler or
    /// C/C++ library header ([`is_library_source`]); then the first frame outward in other
    /// code, the call site in the user's code (`prog.cc:12`, not `atomic_base.h:401`). The
    /// library frames stay in `inlined`.
    pub file: Option<Arc<str>>,
    pub line: Option<u32>,
    /// Inlined functions at the address, outermost first.
    pub inlined: Vec<InlineFrame>,
    /// Offset of the address in `dso` (for annotate); absent for anonymous code.
    pub file_offset: Option<u64>,
    /// The file here is not the recorded one (another build-id): nothing is named, and `dso`
    /// carries [`BUILD_ID_MISMATCH`].
    pub build_id_mismatch: bool,
}

/// What follows the DSO of a location in a file rebuilt since the recording.
pub const BUILD_ID_MISMATCH: &str = "[build-id mismatch]";

impl CodeLocation {
    /// `function` or a placeholder naming the DSO, for tables.
    pub fn function_name(&self) -> String {
        match &self.function {
            Some(f) => f.to_string(),
            None => format!("[unknown in {}]", short_name(&self.dso)),
        }
    }

    /// `file:line`, or `None` without line information.
    pub fn source_line(&self) -> Option<String> {
        Some(format!("{}:{}", self.file.as_deref()?, self.line?))
    }
}

/// Whether a source file is a compiler's or the C/C++ libraries' header (or source), not the
/// user's code: under /usr/include, /usr/lib/gcc, /usr/lib/llvm-N, /usr/local/include, or a
/// `bits/`, `c++/`, `ext/` or glibc `sysdeps/` directory (libstdc++'s and glibc's layouts).
pub fn is_library_source(path: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "/usr/include/",
        "/usr/lib/gcc/",
        "/usr/lib/llvm",
        "/usr/local/include/",
    ];
    const DIRS: &[&str] = &["bits/", "c++/", "ext/", "sysdeps/"];
    PREFIXES.iter().any(|p| path.starts_with(p))
        || DIRS
            .iter()
            .any(|d| path.starts_with(d) || path.contains(&format!("/{d}")))
}

/// The line a sample at an address is shown at: the innermost location outside library
/// headers, walking from the innermost inlined frame out to the function's own line (`outer`,
/// the call site of the outermost inlined frame); the innermost location when every frame is
/// in a library (a library function not inlined, e.g. a template instantiated out of line).
fn user_line(
    inlined: &[InlineFrame],
    outer: (Option<Arc<str>>, Option<u32>),
) -> (Option<Arc<str>>, Option<u32>) {
    let chain: Vec<(Option<Arc<str>>, Option<u32>)> = inlined
        .iter()
        .rev()
        .map(|f| (f.file.clone(), f.line))
        .chain(std::iter::once(outer))
        .filter(|(file, _)| file.is_some())
        .collect();
    chain
        .iter()
        .find(|(file, _)| file.as_deref().is_some_and(|f| !is_library_source(f)))
        .or_else(|| chain.first())
        .cloned()
        .unwrap_or((None, None))
}

/// Whether `path` can be opened and starts like an ELF file; the reason in words when not
/// (so "no permission" and "not an ELF file" are told apart from blazesym's parse errors).
fn looks_like_elf(path: &Path) -> Result<(), String> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => "not an ELF file (shorter than its header)".into(),
            _ => format!("cannot read it: {e}"),
        })?;
    if magic != *b"\x7fELF" {
        return Err("not an ELF file".into());
    }
    Ok(())
}

/// The last path component (for display).
pub fn short_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Batched, caching symbolizer.
pub struct CodeSymbolizer {
    inner: Symbolizer,
    cache: HashMap<(Arc<str>, u64), Arc<CodeLocation>>,
    /// Finds the recorded files here (`--symfs`, build-id caches, the recorded path).
    locator: Locator,
    /// Where each recorded file was found.
    located: HashMap<Arc<str>, Located>,
    missing: BTreeSet<Arc<str>>,
    /// Files here whose build-id is not the recorded one.
    mismatched: BTreeSet<Arc<str>>,
    /// Files found here that could not be read for symbols, and why.
    unreadable: BTreeMap<Arc<str>, String>,
    /// Kernel text symbols for kernel PCs (a kallsyms file of the recorded kernel).
    kernel: KernelSource,
}

/// Where kernel symbols come from: given, or a kallsyms file read when a kernel PC first needs
/// naming (so a recording without kernel samples never pays for reading /proc/kallsyms, which
/// the kernel formats line by line: tens of milliseconds).
#[derive(Debug, Default)]
enum KernelSource {
    #[default]
    None,
    Loaded(Arc<KernelSymbols>),
    Deferred(PathBuf),
}

impl Default for CodeSymbolizer {
    fn default() -> Self {
        Self::new(None)
    }
}

impl CodeSymbolizer {
    pub fn new(symfs: Option<PathBuf>) -> Self {
        CodeSymbolizer {
            inner: Symbolizer::new(),
            cache: HashMap::new(),
            locator: Locator::new(symfs),
            located: HashMap::new(),
            missing: BTreeSet::new(),
            mismatched: BTreeSet::new(),
            unreadable: BTreeMap::new(),
            kernel: KernelSource::None,
        }
    }

    /// Names kernel PCs with these symbols (from the recorded kernel's kallsyms).
    pub fn with_kernel_symbols(mut self, k: Arc<KernelSymbols>) -> Self {
        self.kernel = KernelSource::Loaded(k);
        self
    }

    /// Names kernel PCs with the symbols of the kallsyms file `path`, read when a kernel PC
    /// first needs a name; a file that cannot be read or parsed (e.g. every address 0 without
    /// privileges) leaves kernel PCs unnamed, as no symbols would.
    pub fn with_kernel_symbols_from(mut self, path: PathBuf) -> Self {
        self.kernel = KernelSource::Deferred(path);
        self
    }

    /// Whether kernel PCs can be named (or will be tried, with a kallsyms file not read yet).
    pub fn has_kernel_symbols(&self) -> bool {
        !matches!(self.kernel, KernelSource::None)
    }

    /// Reads deferred kernel symbols now.
    fn load_kernel_symbols(&mut self) {
        if let KernelSource::Deferred(path) = &self.kernel {
            self.kernel = std::fs::read_to_string(path)
                .ok()
                .and_then(|t| KernelSymbols::parse(&t).ok())
                .map_or(KernelSource::None, |k| KernelSource::Loaded(Arc::new(k)));
        }
    }

    /// Files that were mapped in the recording but do not exist here (wrong machine, or
    /// `--symfs` needed).
    pub fn missing_files(&self) -> impl Iterator<Item = &str> {
        self.missing.iter().map(|s| &**s)
    }

    /// Files that exist here but could not be read for symbols, each with the reason (no
    /// permission, not an ELF file, damaged).
    pub fn unreadable_files(&self) -> impl Iterator<Item = (&str, &str)> {
        self.unreadable.iter().map(|(p, why)| (&**p, why.as_str()))
    }

    /// Files mapped in the recording whose copy here has another build-id (rebuilt since):
    /// their samples are not named.
    pub fn mismatched_files(&self) -> impl Iterator<Item = &str> {
        self.mismatched.iter().map(|s| &**s)
    }

    /// Where the recorded `path` is on this machine: the file found for it when it was
    /// symbolized (by build-id), else by path (under `--symfs`).
    pub fn local_path(&self, path: &str) -> PathBuf {
        match self.located.get(path) {
            Some(Located::Found(p)) => p.clone(),
            _ => self.locator.by_path(path),
        }
    }

    /// Finds the recorded file `path` (build-id `expected`) once.
    fn locate(&mut self, path: &Arc<str>, expected: Option<&[u8]>) -> &Located {
        self.located
            .entry(path.clone())
            .or_insert_with(|| self.locator.locate(path, expected))
    }

    /// Loads the symbols of the recorded `paths` (their ELF symbol tables, DWARF and debug
    /// files, which a large program takes a long time to read and, when its debug sections are
    /// compressed, to inflate) so that symbolizing their addresses later finds them loaded; in
    /// order, until `stop` is set. Meant to run while the samples are decoded (the PCs to
    /// symbolize are known only then). A file that is missing or cannot be read is skipped
    /// here, not recorded: only files that hold sampled PCs are reported as missing or
    /// unreadable, by [`CodeSymbolizer::symbolize`]. Returns the files loaded.
    pub fn preload(&mut self, files: &[Arc<Mapping>], stop: &AtomicBool) -> usize {
        let mut loaded = 0;
        for m in files {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let Located::Found(local) = self.locate(&m.path, m.build_id.as_deref()).clone() else {
                continue;
            };
            if looks_like_elf(&local).is_err() {
                continue;
            }
            // One address builds and caches the file's resolver (blazesym keeps one per file).
            let src = Source::Elf(Elf::new(local));
            if self.inner.symbolize(&src, Input::FileOffset(&[0])).is_ok() {
                loaded += 1;
            }
        }
        loaded
    }

    /// The ELF virtual address and size of the function starting at `file_offset` of the
    /// local file `path` (found by address: symbolized names are demangled, symbol tables'
    /// are not); `None` when no sized symbol starts there.
    pub fn function_extent(
        &mut self,
        path: &Path,
        file_offset: u64,
    ) -> Result<Option<(u64, u64)>, String> {
        // The ELF symbol tables first: a function GCC split has one symbol per piece there,
        // and one DWARF entry for all its pieces.
        for debug_syms in [false, true] {
            let mut elf = Elf::new(path);
            elf.debug_syms = debug_syms;
            let src = Source::Elf(elf);
            let found = self
                .inner
                .symbolize(&src, Input::FileOffset(&[file_offset]))
                .map_err(|e| format!("{}: cannot read symbols: {e}", path.display()))?;
            let extent = found.into_iter().find_map(|r| match r {
                Symbolized::Sym(s) if s.offset == 0 && s.addr != 0 => match s.size {
                    Some(size) if size > 0 => Some((s.addr, size as u64)),
                    _ => None,
                },
                _ => None,
            });
            if extent.is_some() {
                return Ok(extent);
            }
        }
        Ok(None)
    }

    /// Symbolizes each (mapping, address). Addresses outside a file mapping get a location
    /// naming the mapping only.
    pub fn symbolize(&mut self, items: &[(Arc<Mapping>, u64)]) -> Vec<Arc<CodeLocation>> {
        if items.iter().any(|(m, _)| m.kind == MappingKind::Kernel) {
            self.load_kernel_symbols();
        }
        // Group the uncached file offsets per file.
        type Todo<'a> = HashMap<Arc<str>, (Option<&'a [u8]>, BTreeSet<u64>)>;
        let mut todo: Todo = HashMap::new();
        for (m, addr) in items {
            if m.kind == MappingKind::File {
                let off = m.file_offset(*addr);
                if !self.cache.contains_key(&(m.path.clone(), off)) {
                    todo.entry(m.path.clone())
                        .or_insert_with(|| (m.build_id.as_deref(), BTreeSet::new()))
                        .1
                        .insert(off);
                }
            }
        }
        for (path, (build_id, offsets)) in todo {
            let offsets: Vec<u64> = offsets.into_iter().collect();
            let locs = self.symbolize_file(&path, build_id, &offsets);
            for (off, loc) in offsets.into_iter().zip(locs) {
                self.cache.insert((path.clone(), off), Arc::new(loc));
            }
        }
        items
            .iter()
            .map(|(m, addr)| {
                if m.kind == MappingKind::File {
                    let off = m.file_offset(*addr);
                    if let Some(l) = self.cache.get(&(m.path.clone(), off)) {
                        return l.clone();
                    }
                }
                if m.kind == MappingKind::Kernel {
                    let kernel = match &self.kernel {
                        KernelSource::Loaded(k) => Some(k),
                        _ => None,
                    };
                    if let Some((sym, off)) = kernel.and_then(|k| k.lookup(*addr)) {
                        return Arc::new(CodeLocation {
                            dso: match &sym.module {
                                Some(module) => Arc::from(format!("[{module}]")),
                                None => m.path.clone(),
                            },
                            function: Some(sym.name.clone()),
                            function_offset: Some(off),
                            ..Default::default()
                        });
                    }
                }
                Arc::new(CodeLocation {
                    dso: m.path.clone(),
                    ..Default::default()
                })
            })
            .collect()
    }

    /// Symbolizes each (pid, PC) in its process's address space (as mapped at the end of the
    /// recording), in one batch. A PC outside every mapping of its process gets a location in
    /// the DSO `[unknown]`.
    pub fn symbolize_pcs(
        &mut self,
        spaces: &AddressSpaces,
        pcs: &[(Option<u32>, u64)],
    ) -> Vec<Arc<CodeLocation>> {
        let mut requests = Vec::new();
        let mut request_of = Vec::with_capacity(pcs.len());
        for (pid, pc) in pcs {
            match spaces.lookup(*pid, *pc, None) {
                Some(m) => {
                    request_of.push(Some(requests.len()));
                    requests.push((m.clone(), *pc));
                }
                None => request_of.push(None),
            }
        }
        let locations = self.symbolize(&requests);
        let unknown = Arc::new(CodeLocation {
            dso: Arc::from("[unknown]"),
            ..Default::default()
        });
        request_of
            .into_iter()
            .map(|r| r.map_or_else(|| unknown.clone(), |r| locations[r].clone()))
            .collect()
    }

    fn symbolize_file(
        &mut self,
        path: &Arc<str>,
        build_id: Option<&[u8]>,
        offsets: &[u64],
    ) -> Vec<CodeLocation> {
        let bare = |off: u64| CodeLocation {
            dso: path.clone(),
            file_offset: Some(off),
            ..Default::default()
        };
        let local = match self.locate(path, build_id).clone() {
            Located::Found(local) => local,
            Located::Missing => {
                self.missing.insert(path.clone());
                return offsets.iter().map(|o| bare(*o)).collect();
            }
            Located::Mismatch { .. } => {
                self.mismatched.insert(path.clone());
                let dso: Arc<str> = Arc::from(format!("{path} {BUILD_ID_MISMATCH}"));
                return offsets
                    .iter()
                    .map(|o| CodeLocation {
                        dso: dso.clone(),
                        file_offset: Some(*o),
                        build_id_mismatch: true,
                        ..Default::default()
                    })
                    .collect();
            }
        };
        if let Err(why) = looks_like_elf(&local) {
            self.unreadable.insert(path.clone(), why);
            return offsets.iter().map(|o| bare(*o)).collect();
        }
        let src = Source::Elf(Elf::new(local.clone()));
        let results = match self.inner.symbolize(&src, Input::FileOffset(offsets)) {
            Ok(r) => r,
            Err(e) => {
                self.unreadable.insert(path.clone(), e.to_string());
                return offsets.iter().map(|o| bare(*o)).collect();
            }
        };
        // A function in several address ranges (GCC's hot/cold split: DW_AT_ranges) comes
        // back from the DWARF with start 0, so its offset is the address; its pieces have
        // ELF symbols of their own (`f` and `f.cold`), which name such addresses instead.
        let split: Vec<usize> = results
            .iter()
            .enumerate()
            .filter(|(_, r)| matches!(r, Symbolized::Sym(s) if s.addr == 0))
            .map(|(i, _)| i)
            .collect();
        let mut elf_names: HashMap<usize, (Arc<str>, u64)> = HashMap::new();
        if !split.is_empty() {
            let mut elf = Elf::new(local);
            elf.debug_syms = false;
            let src = Source::Elf(elf);
            let wanted: Vec<u64> = split.iter().map(|i| offsets[*i]).collect();
            if let Ok(found) = self.inner.symbolize(&src, Input::FileOffset(&wanted)) {
                for (i, r) in split.iter().zip(found) {
                    if let Symbolized::Sym(sym) = r {
                        elf_names.insert(*i, (Arc::from(sym.name.as_ref()), sym.offset as u64));
                    }
                }
            }
        }
        offsets
            .iter()
            .zip(results)
            .enumerate()
            .map(|(i, (off, r))| match r {
                Symbolized::Sym(sym) => {
                    let info = |ci: &blazesym::symbolize::CodeInfo<'_>| {
                        (
                            Some(Arc::<str>::from(ci.to_path().to_string_lossy().as_ref())),
                            ci.line,
                        )
                    };
                    let inlined: Vec<InlineFrame> = sym
                        .inlined
                        .iter()
                        .map(|f| {
                            let (file, line) =
                                f.code_info.as_ref().map(info).unwrap_or((None, None));
                            InlineFrame {
                                function: Arc::from(f.name.as_ref()),
                                file,
                                line,
                            }
                        })
                        .collect();
                    let outer = sym.code_info.as_deref().map(info).unwrap_or((None, None));
                    let (file, line) = user_line(&inlined, outer);
                    let (function, function_offset) = match elf_names.remove(&i) {
                        Some((name, offset)) => (name, offset),
                        None => (Arc::from(sym.name.as_ref()), sym.offset as u64),
                    };
                    CodeLocation {
                        dso: path.clone(),
                        function: Some(function),
                        function_offset: Some(function_offset),
                        file,
                        line,
                        inlined,
                        file_offset: Some(*off),
                        build_id_mismatch: false,
                    }
                }
                Symbolized::Unknown(_) => bare(*off),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_headers_are_told_from_user_code() {
        for lib in [
            "/usr/include/c++/12/bits/atomic_base.h",
            "/usr/lib/gcc/aarch64-linux-gnu/12/include/arm_neon.h",
            "/usr/include/stdlib.h",
            "bits/stl_vector.h",
            "./string/../sysdeps/x86_64/multiarch/memmove-vec-unaligned-erms.S",
        ] {
            assert!(is_library_source(lib), "{lib}");
        }
        for user in [
            "/home/u/src/prog.cc",
            "prog.cc",
            "/srv/build/include/spelunk.h",
        ] {
            assert!(!is_library_source(user), "{user}");
        }
    }

    #[test]
    fn the_line_shown_is_the_first_frame_outside_library_headers() {
        let f = |function: &str, file: &str, line: u32| InlineFrame {
            function: Arc::from(function),
            file: Some(Arc::from(file)),
            line: Some(line),
        };
        let at = |file: &str, line: u32| (Some(Arc::<str>::from(file)), Some(line));
        // count() calls fetch_add (atomic_base.h), inlined; the function's own line is the call.
        let chain = [f(
            "std::__atomic_base<long>::fetch_add",
            "/usr/include/c++/12/bits/atomic_base.h",
            618,
        )];
        assert_eq!(user_line(&chain, at("/src/p.cc", 41)), at("/src/p.cc", 41));
        // A user helper inlined between: its line, not the outer call's.
        let chain = [
            f("helper", "/src/p.cc", 12),
            f(
                "std::vector<long>::push_back",
                "/usr/include/c++/12/bits/stl_vector.h",
                1287,
            ),
        ];
        assert_eq!(user_line(&chain, at("/src/p.cc", 40)), at("/src/p.cc", 12));
        // Nothing inlined: the address's own line.
        assert_eq!(user_line(&[], at("/src/p.cc", 7)), at("/src/p.cc", 7));
        // All library (an out-of-line template instance): the innermost line.
        let chain = [f(
            "std::__new_allocator<long>::allocate",
            "/usr/include/c++/12/bits/new_allocator.h",
            137,
        )];
        assert_eq!(
            user_line(&chain, at("/usr/include/c++/12/bits/vector.tcc", 114)),
            at("/usr/include/c++/12/bits/new_allocator.h", 137)
        );
    }
}
