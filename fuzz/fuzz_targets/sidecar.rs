//! Arbitrary bytes as a sidecar (FILE.spelunk.json): parsing and the consistency checks must
//! never panic, whatever the input (errors are fine); what is accepted writes back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spelunk_perf::sidecar::Sidecar;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(sc) = Sidecar::from_json(data, Path::new("fuzz.spelunk.json")) else { return };
    let _ = serde_json::to_vec(&sc);
    if let Some(cap) = &sc.capacity {
        let _ = cap.peak_per_class();
        let _ = cap.peak_sample();
    }
});
