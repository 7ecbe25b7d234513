//! Arbitrary bytes as a perf.data: indexing, the SPE requirement, planning and the full
//! parallel decode must never panic, whatever the input (errors are fine).
#![no_main]

use libfuzzer_sys::fuzz_target;
use spelunk_decode::{decode, plan_from_perf, DecodeOptions};
use spelunk_perf::PerfDataFile;

fuzz_target!(|data: &[u8]| {
    let Ok(file) = PerfDataFile::from_bytes(data) else { return };
    let _ = file.require_spe();
    for s in &file.aux_streams {
        for c in s.chunks.iter().take(4) {
            let mut buf = Vec::new();
            let _ = file.read_chunk(c, &mut buf);
        }
    }
    let (plan, _losses) = plan_from_perf(&file);
    let opts = DecodeOptions { piece_bytes: 4096, ..Default::default() };
    let _ = decode(&file, &plan, &opts, |s| {
        let _ = s.record.derived_execution_latency();
        Ok::<(), std::io::Error>(())
    });
});
