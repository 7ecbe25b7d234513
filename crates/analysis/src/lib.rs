//! Analyses over decoded SPE samples: enrichment (code addresses to functions and lines, data
//! addresses to objects, times to phases, threads to names), aggregations and estimates. Pure
//! computation over typed inputs; the only files it reads are the recorded binaries' symbols.

pub mod agg;
pub mod alloc_sites;
pub mod annotate;
pub mod c2c;
pub mod context;
pub mod diff;
pub mod disasm;
pub mod elf;
pub mod estimate;
pub mod fasthash;
pub mod kallsyms;
pub mod maps;
pub mod model;
pub mod objects;
pub mod phases;
pub mod profile;
pub mod select;
pub mod stats;
pub mod symbolize;
pub mod timelines;
