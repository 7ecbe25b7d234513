//! perf.data reading and writing (work in progress).
