//! Sessions over SPE recordings, shared by every front end (the `spelunk` commands and the
//! Python bindings): [`recording`] opens a perf.data and its sidecar (index the file, plan the
//! decode, interpret each CPU's data sources, rebuild the processes' address spaces) and
//! decodes it; [`parallel`] feeds the decode into the profile in parallel; [`report`] and
//! [`c2c`] assemble the reports; [`samples`] gives every sample attributed; [`select`] turns
//! the sample-filter and symbol options into the analyses' types; [`verify`] plans and reads
//! `spelunk advise --verify`'s counterfactual runs. The analyses
//! themselves are spelunk-analysis (pure computation over typed samples); this crate is where
//! they meet the decode stage.

pub mod advise;
pub mod annotate;
pub mod archive;
pub mod bench;
pub mod c2c;
pub mod estimate;
pub mod parallel;
pub mod recording;
pub mod report;
pub mod sample_rows;
pub mod samples;
pub mod select;
pub mod verify;
