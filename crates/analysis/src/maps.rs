//! The recorded processes' address spaces, from MMAP/MMAP2 sideband: which file (or anonymous
//! region, heap, stack) backs an address of a process at a time.
//!
//! perf records executable mappings by default and data mappings with `perf record -d`;
//! spelunk's own recorder writes both. Mappings are kept per process; when several mappings
//! of a process contain an address (a region was unmapped and mapped again) the most recent
//! one at or before the sample's time wins.

use std::collections::HashMap;
use std::sync::Arc;

/// What backs a mapping.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MappingKind {
    /// A file (executable, shared object or data file).
    File,
    /// `[heap]` (brk).
    Heap,
    /// `[stack]` (the main thread's stack).
    Stack,
    /// `[vdso]`, `[vsyscall]`, ...
    Special,
    /// Anonymous memory (`//anon`, or no name): malloc arenas, thread stacks, mmap'd buffers.
    Anonymous,
    /// Kernel text (`[kernel.kallsyms]...`) and modules.
    Kernel,
}

/// One mapping of a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// File offset of `start`.
    pub page_offset: u64,
    pub path: Arc<str>,
    pub kind: MappingKind,
    pub executable: bool,
    /// The file's build-id when it was recorded (MMAP2 record or HEADER_BUILD_ID).
    pub build_id: Option<Vec<u8>>,
    /// When the mapping appeared (perf time); 0 when unknown.
    pub time_ns: u64,
}

impl Mapping {
    pub fn new(
        start: u64,
        length: u64,
        page_offset: u64,
        path: &str,
        executable: bool,
        time_ns: u64,
    ) -> Mapping {
        Mapping {
            start,
            end: start.saturating_add(length),
            page_offset,
            kind: Self::kind_of(path),
            path: Arc::from(path),
            executable,
            build_id: None,
            time_ns,
        }
    }

    fn kind_of(path: &str) -> MappingKind {
        match path {
            "[heap]" => MappingKind::Heap,
            "[stack]" => MappingKind::Stack,
            "" | "//anon" | "/dev/zero" => MappingKind::Anonymous,
            p if p.starts_with("/dev/zero")
                || p.starts_with("/anon_hugepage")
                || p.starts_with("/SYSV") =>
            {
                MappingKind::Anonymous
            }
            p if p.starts_with("[kernel") || p.starts_with("[guest.kernel") => MappingKind::Kernel,
            p if p.starts_with('[') => MappingKind::Special,
            _ => MappingKind::File,
        }
    }

    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }

    /// The file offset of `addr` (meaningful for file mappings).
    pub fn file_offset(&self, addr: u64) -> u64 {
        addr - self.start + self.page_offset
    }
}

/// How far back a lookup walks over earlier-starting mappings (bounds pathological inputs).
const MAX_OVERLAP_WALK: usize = 64;

/// Per-process mappings.
#[derive(Clone, Debug, Default)]
pub struct AddressSpaces {
    per_pid: HashMap<u32, Vec<Arc<Mapping>>>,
    /// Kernel mappings apply to every process.
    kernel: Vec<Arc<Mapping>>,
    sorted: bool,
}

impl AddressSpaces {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a mapping of `pid` (`None`: a kernel mapping, visible to all processes).
    pub fn add(&mut self, pid: Option<u32>, m: Mapping) {
        let m = Arc::new(m);
        match pid {
            Some(p) if m.kind != MappingKind::Kernel => self.per_pid.entry(p).or_default().push(m),
            _ => self.kernel.push(m),
        }
        self.sorted = false;
    }

    /// Copies `parent`'s mappings to `child` (fork without exec).
    pub fn fork(&mut self, parent: u32, child: u32) {
        if let Some(v) = self.per_pid.get(&parent).cloned() {
            self.per_pid.entry(child).or_default().extend(v);
            self.sorted = false;
        }
    }

    /// Sorts for lookups; call after adding.
    pub fn finish(&mut self) {
        for v in self.per_pid.values_mut() {
            v.sort_by_key(|m| (m.start, m.time_ns));
        }
        self.kernel.sort_by_key(|m| (m.start, m.time_ns));
        self.sorted = true;
    }

    fn find(v: &[Arc<Mapping>], addr: u64, time_ns: Option<u64>) -> Option<&Arc<Mapping>> {
        let i = v.partition_point(|m| m.start <= addr);
        let mut best: Option<&Arc<Mapping>> = None;
        for m in v[..i].iter().rev().take(MAX_OVERLAP_WALK) {
            if !m.contains(addr) {
                continue;
            }
            let usable = time_ns.is_none_or(|t| m.time_ns <= t);
            let better = match best {
                None => true,
                Some(b) => {
                    let b_usable = time_ns.is_none_or(|t| b.time_ns <= t);
                    (usable && !b_usable) || (usable == b_usable && m.time_ns > b.time_ns)
                }
            };
            if better {
                best = Some(m);
            }
        }
        best
    }

    /// The mapping of `pid` containing `addr` at `time_ns` (kernel mappings for kernel addresses).
    pub fn lookup(
        &self,
        pid: Option<u32>,
        addr: u64,
        time_ns: Option<u64>,
    ) -> Option<&Arc<Mapping>> {
        debug_assert!(self.sorted, "AddressSpaces::finish not called");
        if let Some(m) = pid
            .and_then(|p| self.per_pid.get(&p))
            .and_then(|v| Self::find(v, addr, time_ns))
        {
            return Some(m);
        }
        Self::find(&self.kernel, addr, time_ns)
    }

    /// Every mapping of `pid`, sorted by start.
    pub fn mappings(&self, pid: u32) -> &[Arc<Mapping>] {
        self.per_pid.get(&pid).map(|v| &v[..]).unwrap_or(&[])
    }

    pub fn pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.per_pid.keys().copied()
    }

    /// The files mapped executable in any process, each once: every process's first one (its
    /// program) before the rest, processes in pid order. What a report will most likely need
    /// symbols for, in the order to load them ([`crate::symbolize::CodeSymbolizer::preload`]).
    /// Each file's first executable mapping stands for it.
    pub fn executable_files(&self) -> Vec<Arc<Mapping>> {
        let mut pids: Vec<u32> = self.pids().collect();
        pids.sort_unstable();
        let exec = |pid: &u32| {
            self.mappings(*pid)
                .iter()
                .filter(|m| m.executable && m.kind == MappingKind::File)
                .min_by_key(|m| m.time_ns)
                .cloned()
        };
        let rest = pids.iter().flat_map(|pid| {
            self.mappings(*pid)
                .iter()
                .filter(|m| m.executable && m.kind == MappingKind::File)
                .cloned()
        });
        let mut seen = std::collections::HashSet::new();
        pids.iter()
            .filter_map(exec)
            .chain(rest)
            .filter(|m| seen.insert(m.path.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_mapping_at_sample_time_wins() {
        let mut a = AddressSpaces::new();
        a.add(Some(1), Mapping::new(0x1000, 0x1000, 0, "/bin/a", true, 10));
        a.add(
            Some(1),
            Mapping::new(0x1000, 0x2000, 0, "/lib/b.so", true, 100),
        );
        a.add(Some(1), Mapping::new(0x8000, 0x1000, 0, "[heap]", false, 5));
        a.add(
            None,
            Mapping::new(
                0xffff_0000_0000_0000,
                0x100_0000,
                0,
                "[kernel.kallsyms]_text",
                true,
                0,
            ),
        );
        a.finish();
        assert_eq!(
            &*a.lookup(Some(1), 0x1800, Some(50)).unwrap().path,
            "/bin/a"
        );
        assert_eq!(
            &*a.lookup(Some(1), 0x1800, Some(200)).unwrap().path,
            "/lib/b.so"
        );
        assert_eq!(
            &*a.lookup(Some(1), 0x2800, Some(200)).unwrap().path,
            "/lib/b.so"
        );
        assert_eq!(
            a.lookup(Some(1), 0x8800, None).unwrap().kind,
            MappingKind::Heap
        );
        assert_eq!(a.lookup(Some(1), 0x9800, None), None);
        assert_eq!(
            a.lookup(Some(2), 0xffff_0000_0000_1000, None).unwrap().kind,
            MappingKind::Kernel
        );
        assert_eq!(
            a.lookup(Some(1), 0x1800, Some(200))
                .unwrap()
                .file_offset(0x1800),
            0x800
        );
    }
}
