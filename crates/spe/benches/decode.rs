//! Packet/record decoder throughput on a synthetic Neoverse N1-layout stream (64-byte records,
//! realistic load/store/branch mix). Goal (issue 2): >= 1 GB/s per core.
//! Run: cargo bench -p spelunk-spe --bench decode

use divan::counter::BytesCount;
use divan::Bencher;
use spelunk_spe::synth::{SynthConfig, SynthStream};
use spelunk_spe::{decode_packet, RecordDecoder, RecordLayout};

fn main() {
    divan::main();
}

fn stream(layout: RecordLayout, records: usize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(records * 64);
    for r in SynthStream::new(SynthConfig::default()).take(records) {
        r.encode(layout, &mut bytes);
    }
    bytes
}

const RECORDS: usize = 256 * 1024; // 16 MiB in the N1 layout

/// Records decoded the way the pipeline does it: the stream arrives in 64 KiB chunks (AUX buffer
/// pieces) and each chunk's records are consumed before the next (so the batch stays in cache).
#[divan::bench(args = [RecordLayout::N1Padded64, RecordLayout::Compact])]
fn records(bencher: Bencher, layout: RecordLayout) {
    let bytes = stream(layout, RECORDS);
    let mut out = Vec::with_capacity(4096);
    bencher
        .counter(BytesCount::new(bytes.len()))
        .bench_local(|| {
            let mut d = RecordDecoder::new();
            let mut checksum = 0u64;
            for (i, chunk) in divan::black_box(&bytes).chunks(64 * 1024).enumerate() {
                out.clear();
                d.feed(chunk, (i * 64 * 1024) as u64, &mut out);
                checksum = out
                    .iter()
                    .fold(checksum, |a, r| a ^ r.pc.map_or(0, |p| p.0));
            }
            d.finish();
            divan::black_box(checksum)
        });
}

#[divan::bench(args = [RecordLayout::N1Padded64, RecordLayout::Compact])]
fn packets_only(bencher: Bencher, layout: RecordLayout) {
    let bytes = stream(layout, RECORDS);
    bencher
        .counter(BytesCount::new(bytes.len()))
        .bench_local(|| {
            let b = divan::black_box(&bytes[..]);
            let mut pos = 0;
            let mut n = 0u64;
            while let Ok((_, len)) = decode_packet(&b[pos..]) {
                pos += len;
                n += 1;
            }
            divan::black_box(n)
        });
}
