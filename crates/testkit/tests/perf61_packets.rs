//! Differential test against Linux perf 6.1: thousands of generated SPE streams (well-formed
//! records in the N1 64-byte and compact layouts, arbitrary packets of every kind, garbage
//! bytes) are wrapped in perf.data files; `perf report -D` must decode every packet as spelunk
//! does — same offsets, same bytes, same fields (rendered in perf 6.1's vocabulary; the
//! documented perf 6.1 limitations are in `spelunk_testkit::perf61`).
//!
//! SPELUNK_DIFF_CASES (default 2000) streams are checked, SPELUNK_DIFF_SEED picks other cases.
//! A failing stream is saved under target/perf61-failures/ for reproduction.

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use spelunk_spe::synth::{SynthConfig, SynthStream};
use spelunk_spe::{
    CodeAddress, DataPhysicalAddress, DataVirtualAddress, Events, OpType, Packet, PayloadSize,
    RecordLayout, SpeRecord, Terminator,
};
use spelunk_testkit::perf61::{
    avoid_alignment_pairs, parse_dump, perf, perf_dump, spelunk_dump, write_streams,
};

fn payload_size() -> impl Strategy<Value = PayloadSize> {
    prop_oneof![
        Just(PayloadSize::B1),
        Just(PayloadSize::B2),
        Just(PayloadSize::B4),
        Just(PayloadSize::B8)
    ]
}

fn packet() -> impl Strategy<Value = Packet> {
    prop_oneof![
        Just(Packet::End),
        any::<u64>().prop_map(Packet::Timestamp),
        (any::<u64>(), payload_size()).prop_map(|(b, size)| Packet::Events {
            bits: b & size.mask(),
            size
        }),
        (any::<u64>(), payload_size()).prop_map(|(v, size)| Packet::DataSource {
            value: v & size.mask(),
            size
        }),
        (0u8..4, any::<u32>()).prop_map(|(index, id)| Packet::Context { index, id }),
        (0u8..4, any::<u8>()).prop_map(|(class, payload)| Packet::OpType { class, payload }),
        (0u8..32, any::<u64>(), any::<bool>()).prop_map(|(index, payload, ext)| Packet::Address {
            index,
            payload,
            extended: ext || index > 7
        }),
        (0u8..32, any::<u16>(), any::<bool>()).prop_map(|(index, value, ext)| Packet::Counter {
            index,
            value,
            extended: ext || index > 7
        }),
    ]
}

fn opt<T: std::fmt::Debug + Clone>(
    s: impl Strategy<Value = T>,
) -> impl Strategy<Value = Option<T>> {
    prop::option::of(s)
}

fn record() -> impl Strategy<Value = SpeRecord> {
    (
        (
            opt(any::<u64>()),
            opt(any::<u64>()),
            opt(any::<u64>()),
            opt(any::<u64>()),
        ),
        (
            opt((0u8..4, any::<u8>())),
            opt(any::<u64>()),
            opt(0u64..=0xff),
        ),
        (opt(any::<u16>()), opt(any::<u16>()), opt(any::<u16>())),
        (opt(any::<u32>()), opt(any::<u64>())),
    )
        .prop_map(
            |((pc, tgt, va, pa), (op, ev, ds), (tot, iss, xl), (ctx, ts))| SpeRecord {
                pc: pc.map(CodeAddress),
                branch_target: tgt.map(CodeAddress),
                data_va: va.map(DataVirtualAddress),
                data_pa: pa.map(DataPhysicalAddress),
                op: op.map(|(c, p)| OpType::new(c, p)),
                events: ev.map(|e| Events(e & 0xffff)),
                data_source: ds,
                total_latency_cycles: tot,
                issue_latency_cycles: iss,
                translation_latency_cycles: xl,
                context_el1: ctx,
                timestamp: ts,
                terminator: if ts.is_some() {
                    Terminator::Timestamp
                } else {
                    Terminator::End
                },
                ..Default::default()
            },
        )
}

#[derive(Clone, Debug)]
enum Segment {
    Record(SpeRecord, bool),
    Packet(Packet),
    Garbage(Vec<u8>),
}

fn stream() -> impl Strategy<Value = Vec<u8>> {
    let segment = prop_oneof![
        6 => (record(), any::<bool>()).prop_map(|(r, n1)| Segment::Record(r, n1)),
        3 => packet().prop_map(Segment::Packet),
        1 => prop::collection::vec(any::<u8>(), 1..6).prop_map(Segment::Garbage),
    ];
    prop::collection::vec(segment, 1..40).prop_map(|segs| {
        let mut b = Vec::new();
        for s in segs {
            match s {
                Segment::Record(r, n1) => r.encode(
                    if n1 {
                        RecordLayout::N1Padded64
                    } else {
                        RecordLayout::Compact
                    },
                    &mut b,
                ),
                Segment::Packet(p) => p.encode(&mut b),
                Segment::Garbage(g) => b.extend_from_slice(&g),
            }
        }
        avoid_alignment_pairs(&mut b);
        b
    })
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn hex(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Compares perf's dump of each stream with spelunk's decode. Returns the number of packets.
fn check_batch(streams: &[Vec<u8>], tag: &str) -> usize {
    let dir = std::env::temp_dir().join(format!("spelunk-perf61-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("streams.data");
    write_streams(&path, streams).unwrap();
    let (out, err, ok) = perf(&["report", "-D", "-i", path.to_str().unwrap()]);
    assert!(ok, "perf report -D failed: {err}");
    let dumps = parse_dump(&out);
    assert_eq!(
        dumps.len(),
        streams.len(),
        "perf dumped {} buffers for {} streams",
        dumps.len(),
        streams.len()
    );
    let mut packets = 0;
    for (i, (s, d)) in streams.iter().zip(&dumps).enumerate() {
        // The writer pads each AUX payload to 8 bytes with zeros, and perf dumps the padded bytes.
        let mut padded = s.clone();
        padded.resize(s.len().div_ceil(8) * 8, 0);
        let ours = spelunk_dump(&padded);
        let theirs = perf_dump(&d.lines);
        for l in &d.lines {
            assert_eq!(
                &padded[l.offset..l.offset + l.bytes.len()],
                &l.bytes[..],
                "perf printed other bytes"
            );
        }
        if ours != theirs {
            let fail_dir =
                std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("perf61-failures");
            std::fs::create_dir_all(&fail_dir).unwrap();
            let f = fail_dir.join(format!("{tag}-{i}.bin"));
            std::fs::write(&f, &padded).unwrap();
            let first = ours
                .iter()
                .zip(&theirs)
                .position(|(a, b)| a != b)
                .unwrap_or(ours.len().min(theirs.len()));
            panic!(
                "stream {i} of batch {tag} disagrees at item {first}:\n  spelunk: {:?}\n  perf:    {:?}\nstream saved to {} ({} bytes): {}",
                ours.get(first),
                theirs.get(first),
                f.display(),
                padded.len(),
                hex(&padded[..padded.len().min(256)])
            );
        }
        packets += ours.len();
    }
    let _ = std::fs::remove_dir_all(&dir);
    packets
}

#[test]
fn perf_report_dump_agrees_packet_by_packet_on_generated_streams() {
    let cases = env_u64("SPELUNK_DIFF_CASES", 2000) as usize;
    let seed = env_u64("SPELUNK_DIFF_SEED", 0x5e11c);
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let strat = stream();
    let mut total_packets = 0;
    let batch = 250;
    for b in 0..cases.div_ceil(batch) {
        let n = batch.min(cases - b * batch);
        let streams: Vec<Vec<u8>> = (0..n)
            .map(|_| strat.new_tree(&mut runner).unwrap().current())
            .collect();
        total_packets += check_batch(&streams, &format!("b{b}"));
    }
    assert!(
        total_packets > cases * 10,
        "too few packets generated: {total_packets}"
    );
}

#[test]
fn perf_report_dump_agrees_on_realistic_n1_and_compact_streams() {
    let mut streams = Vec::new();
    for (seed, layout) in [
        (1, RecordLayout::N1Padded64),
        (2, RecordLayout::Compact),
        (3, RecordLayout::N1Padded64),
    ] {
        let cfg = SynthConfig {
            seed,
            timestamps: seed != 3,
            ..SynthConfig::default()
        };
        let mut b = Vec::new();
        for r in SynthStream::new(cfg).take(3000) {
            r.encode(layout, &mut b);
        }
        streams.push(b);
    }
    let packets = check_batch(&streams, "synth");
    assert!(packets > 3 * 3000 * 8);
}
