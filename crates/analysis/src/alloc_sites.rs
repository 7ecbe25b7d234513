//! Heap blocks to allocation sites: the label (`file:line (function)`) of the call that
//! allocated each block the LD_PRELOAD runtime or the emulator logged (sidecar `allocations`).
//!
//! A block's stack holds return addresses, innermost first. The allocating call is the first
//! frame outside the allocator's own libraries (libc, libstdc++'s operator new, spelunk's
//! runtime, the dynamic loader, jemalloc/tcmalloc) and outside the C++ library's headers
//! (`std::vector` growth allocates from libstdc++'s `_M_realloc_insert`, instantiated in the
//! program: the site is the user's `push_back` line): for `new T[n]` that is the caller of
//! operator new, not operator new. A return address is symbolized one byte back, inside the
//! call instruction, so the line is the call's line. Symbolization goes through the recording's
//! address spaces (the perf.data's mmap records) and blazesym, once per distinct address.

use crate::maps::{AddressSpaces, MappingKind};
use crate::objects::HeapBlock;
use crate::symbolize::{is_library_source, short_name, CodeLocation, CodeSymbolizer};
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
    // Every frame outside the allocator's libraries, symbolized once per (pid, PC).
    let mut index: HashMap<(u32, u64), usize> = HashMap::new();
    let mut todo = Vec::new();
    let mut candidates: Vec<Vec<usize>> = Vec::with_capacity(allocations.len());
    let mut fallbacks: Vec<Option<usize>> = Vec::with_capacity(allocations.len());
    for a in allocations {
        let mut mine = Vec::new();
        let mut fallback = None;
        for &ret in &a.stack {
            let pc = ret.saturating_sub(1);
            let Some(m) = spaces.lookup(Some(a.pid), pc, Some(a.from_ns)) else {
                continue;
            };
            if m.kind != MappingKind::File {
                continue;
            }
            let i = *index.entry((a.pid, pc)).or_insert_with(|| {
                todo.push((m.clone(), pc));
                todo.len() - 1
            });
            if is_allocator(&m.path) {
                fallback.get_or_insert(i);
            } else {
                mine.push(i);
            }
        }
        candidates.push(mine);
        fallbacks.push(fallback);
    }
    let locations = symbolizer.symbolize(&todo);
    // The allocating frame: the first outside the allocators whose line is the user's (not a
    // standard-library header: `std::vector` growth calls operator new from libstdc++'s
    // templates, instantiated in the program), else the first outside the allocators, else
    // the first frame.
    let user = |i: &usize| {
        locations[*i]
            .file
            .as_deref()
            .is_some_and(|f| !is_library_source(f))
    };
    let mut labels: HashMap<usize, Arc<str>> = HashMap::new();
    let unknown: Arc<str> = Arc::from("[unknown allocation site]");
    allocations
        .iter()
        .zip(candidates.iter().zip(fallbacks))
        .map(|(a, (mine, fallback))| {
            let frame = mine
                .iter()
                .find(|i| user(i))
                .or(mine.first())
                .copied()
                .or(fallback);
            let site = match frame {
                Some(i) => labels
                    .entry(i)
                    .or_insert_with(|| site_label(&locations[i]))
                    .clone(),
                None => unknown.clone(),
            };
            HeapBlock {
                pid: a.pid,
                start: a.address,
                size: a.size,
                site,
                from_ns: a.from_ns,
                until_ns: a.until_ns,
            }
        })
        .collect()
}

/// `file:line (function)`, or what is known of the frame without line information.
fn site_label(loc: &CodeLocation) -> Arc<str> {
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
    Arc::from(label)
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
