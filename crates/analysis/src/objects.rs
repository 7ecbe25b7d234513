//! Data addresses to data objects: what a load or store touched.
//!
//! Objects, most specific first:
//! 1. objects named through the annotation API (`spelunk.h`), with their lifetime;
//! 2. global and static variables from the ELF symbol tables of every mapped file (`.data`,
//!    `.bss`, `.rodata`; e.g. STREAM's arrays), placed with the mapping's load bias;
//! 3. the regions of the address space: `[heap]`, `[stack]`, anonymous mappings (malloc'd
//!    buffers, thread stacks) and mapped data files.

use crate::elf::{load_bias, read_load_segments};
use crate::maps::{AddressSpaces, MappingKind};
use blazesym::inspect::source::{Elf, Source};
use blazesym::inspect::Inspector;
use blazesym::SymType;
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    /// Named through the annotation API.
    Annotated,
    /// A global or static variable.
    Global,
    Heap,
    Stack,
    /// Anonymous memory (malloc arenas, thread stacks, mmap'd buffers).
    Anonymous,
    /// A mapped data file.
    File,
}

impl ObjectKind {
    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::Annotated => "annotated",
            ObjectKind::Global => "global",
            ObjectKind::Heap => "heap",
            ObjectKind::Stack => "stack",
            ObjectKind::Anonymous => "anonymous",
            ObjectKind::File => "file",
        }
    }
}

/// A data object of a process.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DataObject {
    pub start: u64,
    pub end: u64,
    pub name: Arc<str>,
    pub kind: ObjectKind,
    /// The file defining a global.
    pub dso: Option<Arc<str>>,
    /// Lifetime for annotated objects (perf time), else unbounded.
    pub from_ns: u64,
    pub until_ns: u64,
}

impl DataObject {
    pub fn size(&self) -> u64 {
        self.end - self.start
    }
    fn live_at(&self, t: Option<u64>) -> bool {
        t.is_none_or(|t| self.from_ns <= t && t < self.until_ns)
    }
}

/// A global variable of a file: (name, virtual address in the file, size).
type FileVariables = Arc<Vec<(Arc<str>, u64, u64)>>;

/// Per-process data objects.
#[derive(Clone, Debug, Default)]
pub struct DataObjects {
    named: HashMap<u32, Vec<Arc<DataObject>>>,
    regions: HashMap<u32, Vec<Arc<DataObject>>>,
    /// Files whose symbols could not be read (missing here, not ELF).
    pub unreadable_files: Vec<Arc<str>>,
}

/// Bound on the objects a lookup walks back over (nested or overlapping objects).
const MAX_WALK: usize = 64;

fn find(v: &[Arc<DataObject>], addr: u64, t: Option<u64>) -> Option<&Arc<DataObject>> {
    let i = v.partition_point(|o| o.start <= addr);
    // The innermost (smallest) live object containing addr.
    v[..i]
        .iter()
        .rev()
        .take(MAX_WALK)
        .filter(|o| addr < o.end && o.live_at(t))
        .min_by_key(|o| (o.kind, o.size()))
}

impl DataObjects {
    /// Builds the objects of every process in `spaces`, reading the symbol tables of mapped
    /// files (under `symfs` when given).
    pub fn build(spaces: &AddressSpaces, symfs: Option<&PathBuf>) -> DataObjects {
        let mut out = DataObjects::default();
        let inspector = Inspector::new();
        let mut file_vars: HashMap<
            Arc<str>,
            Option<(FileVariables, Vec<crate::elf::LoadSegment>)>,
        > = HashMap::new();
        let local = |p: &str| match symfs {
            Some(root) => root.join(p.trim_start_matches('/')),
            None => PathBuf::from(p),
        };
        for pid in spaces.pids() {
            let mut named = Vec::new();
            let mut regions = Vec::new();
            let mut placed: Vec<(Arc<str>, u64)> = Vec::new();
            for m in spaces.mappings(pid) {
                let region = |name: Arc<str>, kind| {
                    Arc::new(DataObject {
                        start: m.start,
                        end: m.end,
                        name,
                        kind,
                        dso: None,
                        from_ns: 0,
                        until_ns: u64::MAX,
                    })
                };
                match m.kind {
                    MappingKind::Heap => regions.push(region(m.path.clone(), ObjectKind::Heap)),
                    MappingKind::Stack => regions.push(region(m.path.clone(), ObjectKind::Stack)),
                    MappingKind::Anonymous => regions.push(region(
                        Arc::from(format!("anon@{:#x}", m.start)),
                        ObjectKind::Anonymous,
                    )),
                    MappingKind::File => {
                        if !m.executable {
                            regions.push(region(m.path.clone(), ObjectKind::File));
                        }
                        let entry = file_vars.entry(m.path.clone()).or_insert_with(|| {
                            let path = local(&m.path);
                            let segs = read_load_segments(&path)?;
                            let mut vars = Vec::new();
                            // The ELF symbol tables list variables; with debug symbols on,
                            // blazesym enumerates DWARF functions only.
                            let mut elf = Elf::new(&path);
                            elf.debug_syms = false;
                            let src = Source::Elf(elf);
                            let r = inspector.for_each(&src, |s| {
                                if s.sym_type == SymType::Variable {
                                    if let Some(size) = s.size.filter(|z| *z > 0) {
                                        vars.push((
                                            Arc::<str>::from(s.name.as_ref()),
                                            s.addr,
                                            size as u64,
                                        ));
                                    }
                                }
                                ControlFlow::Continue(())
                            });
                            r.ok()?;
                            Some((Arc::new(vars), segs))
                        });
                        let Some((vars, segs)) = entry else {
                            if !out.unreadable_files.contains(&m.path) {
                                out.unreadable_files.push(m.path.clone());
                            }
                            continue;
                        };
                        // Bias from the file's executable mapping when it has one (its segment
                        // is unambiguous), else from this mapping.
                        let mappings = spaces.mappings(pid);
                        let exec = mappings.iter().find(|x| x.path == m.path && x.executable);
                        let basis = exec.map(|x| &**x).unwrap_or(&**m);
                        let Some(bias) =
                            load_bias(segs, basis.start, basis.page_offset, basis.executable)
                        else {
                            continue;
                        };
                        // One placement per (file, bias): every mapping of a file gives the same.
                        if placed.iter().any(|(p, b)| *p == m.path && *b == bias) {
                            continue;
                        }
                        placed.push((m.path.clone(), bias));
                        for (name, vaddr, size) in vars.iter() {
                            let start = vaddr.wrapping_add(bias);
                            named.push(Arc::new(DataObject {
                                start,
                                end: start.saturating_add(*size),
                                name: name.clone(),
                                kind: ObjectKind::Global,
                                dso: Some(m.path.clone()),
                                from_ns: 0,
                                until_ns: u64::MAX,
                            }));
                        }
                    }
                    MappingKind::Special | MappingKind::Kernel => {}
                }
            }
            named.sort_by_key(|o| o.start);
            regions.sort_by_key(|o| o.start);
            out.named.insert(pid, named);
            out.regions.insert(pid, regions);
        }
        out
    }

    /// Adds an object named through the annotation API, live in `[from_ns, until_ns)`.
    pub fn annotate(
        &mut self,
        pid: u32,
        start: u64,
        size: u64,
        name: &str,
        from_ns: u64,
        until_ns: u64,
    ) {
        let v = self.named.entry(pid).or_default();
        let o = Arc::new(DataObject {
            start,
            end: start.saturating_add(size),
            name: Arc::from(name),
            kind: ObjectKind::Annotated,
            dso: None,
            from_ns,
            until_ns,
        });
        let i = v.partition_point(|x| x.start <= start);
        v.insert(i, o);
    }

    /// The object `addr` of `pid` falls in at `time_ns` (most specific first).
    pub fn resolve(
        &self,
        pid: Option<u32>,
        addr: u64,
        time_ns: Option<u64>,
    ) -> Option<&Arc<DataObject>> {
        let pid = pid?;
        self.named
            .get(&pid)
            .and_then(|v| find(v, addr, time_ns))
            .or_else(|| self.regions.get(&pid).and_then(|v| find(v, addr, time_ns)))
    }
}
