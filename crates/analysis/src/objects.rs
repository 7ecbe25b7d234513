//! Data addresses to data objects: what a load or store touched.
//!
//! Objects, most specific first:
//! 1. objects named through the annotation API (`spelunk.h`), with their lifetime;
//! 2. global and static variables from the ELF symbol tables of every mapped file (`.data`,
//!    `.bss`, `.rodata`; e.g. STREAM's arrays), placed with the mapping's load bias;
//! 3. the regions of the address space: `[heap]`, `[stack]`, anonymous mappings (malloc'd
//!    buffers, thread stacks) and mapped data files.

use crate::elf::{load_bias, read_load_segments};
use crate::maps::{AddressSpaces, Mapping, MappingKind};
use blazesym::inspect::source::{Elf, Source};
use blazesym::inspect::Inspector;
use blazesym::SymType;
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    /// Named through the annotation API.
    Annotated,
    /// A heap block (or anonymous mmap) the LD_PRELOAD runtime or the emulator logged with its allocation
    /// site; named by the site (`file:line (function)`).
    Allocation,
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
            ObjectKind::Allocation => "allocation",
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
    named: HashMap<u32, SortedObjects>,
    regions: HashMap<u32, SortedObjects>,
    /// Files whose symbols could not be read (missing here, not ELF).
    pub unreadable_files: Vec<Arc<str>>,
    /// Every allocation site's blocks, by site label (all blocks, sampled or not).
    pub sites: HashMap<Arc<str>, SiteBlocks>,
}

/// A heap block for [`DataObjects::allocate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeapBlock {
    pub pid: u32,
    pub start: u64,
    pub size: u64,
    /// The allocation site's label, shared by its blocks.
    pub site: Arc<str>,
    pub from_ns: u64,
    pub until_ns: u64,
}

/// The blocks one allocation site handed out over the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SiteBlocks {
    pub blocks: u64,
    pub bytes: u64,
    /// Blocks freed during the run, and the sum of their lifetimes.
    pub freed_blocks: u64,
    pub freed_lifetime_ns: u64,
}

/// An object named through the annotation API, live in `[from_ns, until_ns)`.
fn annotated(start: u64, size: u64, name: &str, from_ns: u64, until_ns: u64) -> Arc<DataObject> {
    Arc::new(DataObject {
        start,
        end: start.saturating_add(size),
        name: Arc::from(name),
        kind: ObjectKind::Annotated,
        dso: None,
        from_ns,
        until_ns,
    })
}

/// Bound on the objects a lookup walks back over (nested or overlapping objects).
const MAX_WALK: usize = 64;

/// Objects of one process sorted by start address, with the furthest end reached by any
/// object up to each index (`reach`), so a lookup stops walking back as soon as no earlier
/// object can contain the address. Without that bound every heap address walked back over
/// the process's globals (up to [`MAX_WALK`] of them) on every sample; with it, an address
/// past every object's end costs one binary search.
#[derive(Clone, Debug, Default)]
struct SortedObjects {
    objects: Vec<Arc<DataObject>>,
    /// `reach[i]` = max end of `objects[..=i]`.
    reach: Vec<u64>,
}

impl SortedObjects {
    fn from_sorted(objects: Vec<Arc<DataObject>>) -> SortedObjects {
        let mut reach = Vec::with_capacity(objects.len());
        let mut max_end = 0;
        for o in &objects {
            max_end = max_end.max(o.end);
            reach.push(max_end);
        }
        SortedObjects { objects, reach }
    }

    fn insert(&mut self, o: Arc<DataObject>) {
        let i = self.objects.partition_point(|x| x.start <= o.start);
        let before = if i == 0 { 0 } else { self.reach[i - 1] };
        let end = o.end;
        self.objects.insert(i, o);
        self.reach.insert(i, before.max(end));
        for r in &mut self.reach[i + 1..] {
            if *r >= end {
                break;
            }
            *r = end;
        }
    }

    /// Adds many objects with one sort: each in the order [`Self::insert`] would put it
    /// (after the objects already there at its start address), without its per-object shift.
    fn extend(&mut self, new: Vec<Arc<DataObject>>) {
        let mut all = std::mem::take(&mut self.objects);
        all.extend(new);
        all.sort_by_key(|o| o.start); // stable: equal starts keep their insertion order
        *self = SortedObjects::from_sorted(all);
    }

    /// The innermost (smallest) live object containing `addr`, walking back over at most
    /// [`MAX_WALK`] objects that start at or below it.
    fn find(&self, addr: u64, t: Option<u64>) -> Option<&Arc<DataObject>> {
        let i = self.objects.partition_point(|o| o.start <= addr);
        // Objects before the first index whose reach exceeds addr cannot contain it.
        let first = self.reach[..i].partition_point(|&r| r <= addr);
        let lo = first.max(i.saturating_sub(MAX_WALK));
        self.objects[lo..i]
            .iter()
            .rev()
            .filter(|o| addr < o.end && o.live_at(t))
            .min_by_key(|o| (o.kind, o.size()))
    }
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
        // Only the file with the recorded build-id names variables ([`crate::locate`]).
        let locator = crate::locate::Locator::new(symfs.cloned());
        for pid in spaces.pids() {
            let mut named = Vec::new();
            let mut regions = Vec::new();
            // Sets, not lists searched per mapping: a process with many mappings (or
            // recordings with many unreadable files) made those searches quadratic.
            let mut placed: HashSet<(Arc<str>, u64)> = HashSet::new();
            let mut unreadable: HashSet<Arc<str>> = out.unreadable_files.iter().cloned().collect();
            // Each file's first executable mapping.
            let mut exec_of: HashMap<&str, &Mapping> = HashMap::new();
            for x in spaces.mappings(pid).iter().filter(|x| x.executable) {
                exec_of.entry(&*x.path).or_insert(&**x);
            }
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
                            let crate::locate::Located::Found(path) =
                                locator.locate(&m.path, m.build_id.as_deref())
                            else {
                                return None;
                            };
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
                                        // Symbol tables hold mangled names.
                                        let name = crate::names::demangle(&s.name)
                                            .map_or_else(|| Arc::from(s.name.as_ref()), Arc::from);
                                        vars.push((name, s.addr, size as u64));
                                    }
                                }
                                ControlFlow::Continue(())
                            });
                            r.ok()?;
                            Some((Arc::new(vars), segs))
                        });
                        let Some((vars, segs)) = entry else {
                            if unreadable.insert(m.path.clone()) {
                                out.unreadable_files.push(m.path.clone());
                            }
                            continue;
                        };
                        // Bias from the file's executable mapping when it has one (its segment
                        // is unambiguous), else from this mapping.
                        let basis = exec_of.get(&*m.path).copied().unwrap_or(&**m);
                        let Some(bias) =
                            load_bias(segs, basis.start, basis.page_offset, basis.executable)
                        else {
                            continue;
                        };
                        // One placement per (file, bias): every mapping of a file gives the same.
                        if !placed.insert((m.path.clone(), bias)) {
                            continue;
                        }
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
            out.named.insert(pid, SortedObjects::from_sorted(named));
            out.regions.insert(pid, SortedObjects::from_sorted(regions));
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
        let o = annotated(start, size, name, from_ns, until_ns);
        self.named.entry(pid).or_default().insert(o);
    }

    /// [`Self::annotate`] for many objects (`(pid, start, size, name, from_ns, until_ns)`),
    /// with one sort per process instead of an insertion each (quadratic in the objects).
    pub fn annotate_all<'a>(
        &mut self,
        objects: impl IntoIterator<Item = (u32, u64, u64, &'a str, u64, u64)>,
    ) {
        let mut per_pid: HashMap<u32, Vec<Arc<DataObject>>> = HashMap::new();
        for (pid, start, size, name, from_ns, until_ns) in objects {
            per_pid
                .entry(pid)
                .or_default()
                .push(annotated(start, size, name, from_ns, until_ns));
        }
        for (pid, new) in per_pid {
            self.named.entry(pid).or_default().extend(new);
        }
    }

    /// Adds heap blocks, each allocated at a site and live in `[from_ns, until_ns)`
    /// (`until_ns` is `u64::MAX` for a block never freed). A sample in a block's address range
    /// resolves to the block live at the sample's time, so a reused address is attributed to
    /// the block that held it then. One sort for all blocks: linear-logarithmic in their
    /// number, however many there are.
    pub fn allocate(&mut self, blocks: impl IntoIterator<Item = HeapBlock>) {
        let mut per_pid: HashMap<u32, Vec<Arc<DataObject>>> = HashMap::new();
        for b in blocks {
            let s = self.sites.entry(b.site.clone()).or_default();
            s.blocks += 1;
            s.bytes = s.bytes.saturating_add(b.size);
            if b.until_ns != u64::MAX {
                s.freed_blocks += 1;
                s.freed_lifetime_ns = s
                    .freed_lifetime_ns
                    .saturating_add(b.until_ns.saturating_sub(b.from_ns));
            }
            per_pid.entry(b.pid).or_default().push(Arc::new(DataObject {
                start: b.start,
                end: b.start.saturating_add(b.size),
                name: b.site,
                kind: ObjectKind::Allocation,
                dso: None,
                from_ns: b.from_ns,
                until_ns: b.until_ns,
            }));
        }
        for (pid, new) in per_pid {
            let old = self.named.remove(&pid).unwrap_or_default();
            let mut all = old.objects;
            all.extend(new);
            // Stable: blocks that start where an object already starts go after it, as
            // inserting them one by one would place them.
            all.sort_by_key(|o| o.start);
            self.named.insert(pid, SortedObjects::from_sorted(all));
        }
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
            .and_then(|v| v.find(addr, time_ns))
            .or_else(|| self.regions.get(&pid).and_then(|v| v.find(addr, time_ns)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(start: u64, end: u64, kind: ObjectKind, from_ns: u64, until_ns: u64) -> Arc<DataObject> {
        Arc::new(DataObject {
            start,
            end,
            name: Arc::from(format!("{start:#x}")),
            kind,
            dso: None,
            from_ns,
            until_ns,
        })
    }

    /// The definition, by brute force: every live object containing addr, smallest
    /// (kind, size) first; ties go to the later start (the walk runs backwards).
    fn innermost(all: &[Arc<DataObject>], addr: u64, t: Option<u64>) -> Option<(u64, u64)> {
        all.iter()
            .filter(|o| o.start <= addr && addr < o.end && o.live_at(t))
            .min_by_key(|o| (o.kind, o.size(), u64::MAX - o.start))
            .map(|o| (o.start, o.end))
    }

    #[test]
    fn lookup_matches_a_full_scan_with_nesting_lifetimes_and_far_addresses() {
        // A deterministic xorshift so the case is the same on every run.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut all = Vec::new();
        for _ in 0..300 {
            let start = next() % 100_000;
            let size = 1 + next() % 2_000;
            let (from, until) = if next() % 3 == 0 {
                let f = next() % 1_000;
                (f, f + 1 + next() % 500)
            } else {
                (0, u64::MAX)
            };
            let kind = if next() % 2 == 0 {
                ObjectKind::Annotated
            } else {
                ObjectKind::Global
            };
            all.push(obj(start, start + size, kind, from, until));
        }
        // Half built sorted at once, half inserted one by one (as annotations are).
        let (first, rest) = all.split_at(150);
        let mut sorted: Vec<_> = first.to_vec();
        sorted.sort_by_key(|o| o.start);
        let mut objects = SortedObjects::from_sorted(sorted);
        for o in rest {
            objects.insert(o.clone());
        }
        for _ in 0..20_000 {
            let addr = next() % 110_000;
            let t = if next() % 2 == 0 {
                None
            } else {
                Some(next() % 1_600)
            };
            let got = objects.find(addr, t).map(|o| (o.start, o.end));
            assert_eq!(got, innermost(&all, addr, t), "addr {addr:#x} t {t:?}");
        }
        // Far past every object: nothing, and reach says so without a walk.
        assert!(objects.find(u64::MAX - 1, None).is_none());
    }
}
