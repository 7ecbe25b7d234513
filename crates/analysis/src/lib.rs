//! Analyses over decoded SPE samples: enrichment (code addresses to functions and lines, data
//! addresses to objects, times to phases, threads to names), aggregations and estimates, over
//! typed inputs. [`recording`] is the entry point every front end shares (the `spelunk`
//! commands, the Python bindings): it opens a perf.data, runs the decode stage into these
//! analyses ([`parallel`] in parallel) and assembles the report; apart from the recording and
//! its sidecar, the only files read are the recorded binaries' symbols.

pub mod advise;
pub mod agg;
pub mod alloc_sites;
pub mod annotate;
pub mod bench;
pub mod c2c;
pub mod context;
pub mod diff;
pub mod disasm;
pub mod elf;
pub mod estimate;
pub mod fasthash;
pub mod footprint;
pub mod kallsyms;
pub mod locate;
pub mod maps;
pub mod model;
pub mod names;
pub mod object_timelines;
pub mod objects;
pub mod phases;
pub mod profile;
pub mod schemas;
pub mod select;
pub mod stats;
pub mod symbolize;
pub mod timelines;
