//! Arbitrary text as `perf stat -x` output (`spelunk topdown --import`), against the Neoverse N1
//! and V2 catalogs: the importer must never panic, whatever the input (errors are fine).
#![no_main]

use libfuzzer_sys::fuzz_target;
use spelunk_pmu::catalog::{self, Catalog};
use spelunk_pmu::import::parse_perf_stat;
use std::sync::LazyLock;

/// Built once: building a catalog costs far more than an import.
static CATALOGS: LazyLock<Vec<Catalog>> = LazyLock::new(|| {
    ["neoverse-n1", "neoverse-v2"]
        .into_iter()
        .filter_map(|cpu| catalog::by_name(cpu).ok().map(|c| c.catalog))
        .collect()
});

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for cat in CATALOGS.iter() {
        let _ = parse_perf_stat(text, "fuzz.csv", cat);
    }
});
