//! Heap blocks to allocation sites: the label (`file:line (function)`) of the call that
//! allocated each block the LD_PRELOAD runtime or the emulator logged (sidecar `allocations`).
//!
//! A block's stack holds return addresses, innermost first. The allocating call is the first
//! frame outside the allocator's own libraries (libc, libstdc++'s operator new, spelunk's
//! runtime, the dynamic loader, jemalloc/tcmalloc): for `new T[n]` that is the caller of
//! operator new, not operator new. A return address is symbolized one byte back, inside the
//! call instruction, so the line is the call's line. Symbolization goes through the recording's
//! address spaces (the perf.data's mmap records) and blazesym, once per distinct address.

use crate::maps::{AddressSpaces, MappingKind};
use crate::objects::HeapBlock;
use crate::symbolize::{short_name, CodeSymbolizer};
use spelunk_perf::sidecar::Allocation;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// DSO name prefixes of allocator code, skipped when looking for the allocating call.
const ALLOCATOR_DSOS: &[&str] = &[
    "libc.so",
    "libc-",
    "libstdc++",
    "libspelunk",
    "libnmo",
    "ld-linux",
    "libjemalloc",
    "libtcmalloc",
    "vgpreload_",
];

fn is_allocator(path: &str) -> bool {
    let name = short_name(path);
    ALLOCATOR_DSOS.iter().any(|p| name.starts_with(p))
}

/// The heap blocks of `allocations`, each named by its allocation site.
pub fn heap_blocks(
    spaces: &AddressSpaces,
    symfs: Option<&PathBuf>,
    allocations: &[Allocation],
) -> Vec<HeapBlock> {
    let mut symbolizer = CodeSymbolizer::new(symfs.cloned());
    // The allocating frame of each block: (mapping, address) to symbolize, or a bare label.
    let mut labels: HashMap<(u32, u64), Arc<str>> = HashMap::new();
    let mut todo = Vec::new();
    let mut todo_keys = Vec::new();
    let frame_of = |a: &Allocation| -> Option<(u64, Arc<crate::maps::Mapping>)> {
        let mut fallback = None;
        for &ret in &a.stack {
            let pc = ret.saturating_sub(1);
            let Some(m) = spaces.lookup(Some(a.pid), pc, Some(a.from_ns)) else {
                continue;
            };
            if m.kind != MappingKind::File {
                continue;
            }
            if !is_allocator(&m.path) {
                return Some((pc, m.clone()));
            }
            fallback.get_or_insert((pc, m.clone()));
        }
        fallback
    };
    let mut frames = Vec::with_capacity(allocations.len());
    for a in allocations {
        let f = frame_of(a);
        if let Some((pc, m)) = &f {
            if let std::collections::hash_map::Entry::Vacant(e) = labels.entry((a.pid, *pc)) {
                e.insert(Arc::from(""));
                todo.push((m.clone(), *pc));
                todo_keys.push((a.pid, *pc));
            }
        }
        frames.push(f.map(|(pc, _)| pc));
    }
    let locations = symbolizer.symbolize(&todo);
    for (key, loc) in todo_keys.into_iter().zip(locations) {
        let label = match (&loc.file, loc.line) {
            (Some(file), Some(line)) => {
                format!("{}:{} ({})", short_name(file), line, loc.function_name())
            }
            _ => match &loc.function {
                Some(f) => format!("{f} ({})", short_name(&loc.dso)),
                None => format!(
                    "{}+{:#x}",
                    short_name(&loc.dso),
                    loc.file_offset.unwrap_or_default()
                ),
            },
        };
        labels.insert(key, Arc::from(label));
    }
    let unknown: Arc<str> = Arc::from("[unknown allocation site]");
    allocations
        .iter()
        .zip(frames)
        .map(|(a, pc)| HeapBlock {
            pid: a.pid,
            start: a.address,
            size: a.size,
            site: pc
                .and_then(|pc| labels.get(&(a.pid, pc)).cloned())
                .unwrap_or_else(|| unknown.clone()),
            from_ns: a.from_ns,
            until_ns: a.until_ns,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocator_libraries_are_recognised_by_file_name() {
        assert!(is_allocator("/usr/lib/x86_64-linux-gnu/libc.so.6"));
        assert!(is_allocator(
            "/usr/lib/aarch64-linux-gnu/libstdc++.so.6.0.30"
        ));
        assert!(is_allocator("/opt/spelunk/lib/libspelunk.so"));
        assert!(!is_allocator("/home/u/app"));
        assert!(!is_allocator("/usr/lib/libcrypto.so.3"));
    }
}
