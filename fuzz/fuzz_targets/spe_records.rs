//! Arbitrary bytes through the packet reader and the streaming record decoder, fed in the
//! chunks the first byte chooses. Never panics; chunked decoding equals whole decoding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spelunk_spe::{decode_records, PacketReader, RecordDecoder};

fuzz_target!(|data: &[u8]| {
    let Some((&chunk_seed, bytes)) = data.split_first() else { return };
    for item in PacketReader::new(bytes) {
        let _ = item;
    }
    let (whole, stats, _) = decode_records(bytes);
    let chunk = usize::from(chunk_seed % 17) + 1;
    let mut d = RecordDecoder::new();
    let mut out = Vec::new();
    for (i, c) in bytes.chunks(chunk).enumerate() {
        d.feed(c, (i * chunk) as u64, &mut out);
    }
    d.finish();
    assert_eq!(out, whole);
    assert_eq!(*d.stats(), stats);
    for r in &out {
        let _ = r.derived_execution_latency();
        if let Some(op) = r.op {
            let _ = op.operation().to_string();
        }
    }
});
