//! Analyses over decoded SPE samples: estimates (seed 000), latency statistics, and (growing)
//! symbolization, data objects, phases, c2c and diffs. Pure computation: no I/O of its own.

pub mod estimate;
pub mod stats;
