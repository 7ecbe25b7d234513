//! Properties of the decoder that must hold for every input.

use proptest::prelude::*;
use spelunk_spe::{
    decode_packet, decode_records, CodeAddress, DataPhysicalAddress, DataVirtualAddress, Events,
    OpType, Packet, PacketReader, PayloadSize, RecordDecoder, RecordLayout, SpeRecord, Terminator,
};

fn payload_size() -> impl Strategy<Value = PayloadSize> {
    prop_oneof![
        Just(PayloadSize::B1),
        Just(PayloadSize::B2),
        Just(PayloadSize::B4),
        Just(PayloadSize::B8)
    ]
}

/// Any encodable packet (fields within their architectural widths).
fn packet() -> impl Strategy<Value = Packet> {
    prop_oneof![
        Just(Packet::Pad),
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

/// Any record with the named packets (timestamped or END-terminated).
fn record() -> impl Strategy<Value = SpeRecord> {
    (
        (
            opt(any::<u64>()),
            opt(any::<u64>()),
            opt(any::<u64>()),
            opt(any::<u64>()),
            opt(any::<u64>()),
        ),
        (
            opt((0u8..3, any::<u8>())),
            opt(any::<u64>()),
            opt(0u64..=0xffff),
        ),
        (opt(any::<u16>()), opt(any::<u16>()), opt(any::<u16>())),
        (opt(any::<u32>()), opt(any::<u32>()), opt(any::<u64>())),
    )
        .prop_map(
            |((pc, tgt, pbt, va, pa), (op, ev, ds), (tot, iss, xl), (c1, c2, ts))| SpeRecord {
                pc: pc.map(CodeAddress),
                branch_target: tgt.map(CodeAddress),
                prev_branch_target: pbt.map(CodeAddress),
                data_va: va.map(DataVirtualAddress),
                data_pa: pa.map(DataPhysicalAddress),
                op: op.map(|(c, p)| OpType::new(c, p)),
                events: ev.map(Events),
                data_source: ds,
                total_latency_cycles: tot,
                issue_latency_cycles: iss,
                translation_latency_cycles: xl,
                context_el1: c1,
                context_el2: c2,
                timestamp: ts,
                other_counter: None,
                other_address: None,
                terminator: if ts.is_some() {
                    Terminator::Timestamp
                } else {
                    Terminator::End
                },
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn packet_round_trip(p in packet()) {
        let bytes = p.to_bytes();
        prop_assert_eq!(bytes.len(), p.encoded_len());
        let (q, n) = decode_packet(&bytes).unwrap();
        prop_assert_eq!(n, bytes.len());
        prop_assert_eq!(q, p);
        // Any prefix is reported as truncated, never misdecoded.
        for cut in 1..bytes.len() {
            let r = decode_packet(&bytes[..cut]);
            prop_assert!(matches!(r, Err(spelunk_spe::PacketError::Truncated { .. })), "{:?}", r);
        }
    }

    #[test]
    fn records_round_trip_in_both_layouts(recs in prop::collection::vec(record(), 0..20), n1 in any::<bool>()) {
        let layout = if n1 { RecordLayout::N1Padded64 } else { RecordLayout::Compact };
        let mut bytes = Vec::new();
        for r in &recs {
            r.encode(layout, &mut bytes);
        }
        let (back, stats, issues) = decode_records(&bytes);
        prop_assert!(issues.is_empty(), "{:?}", issues);
        prop_assert!(!stats.has_losses());
        // A record without PC that follows one... round-trips exactly: records are delimited by
        // END/TIMESTAMP, which every encoded record has.
        prop_assert_eq!(back, recs);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_reader_consumes_all(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let mut last_end = 0;
        for item in PacketReader::new(&bytes) {
            match item {
                Ok((off, p)) => { prop_assert!(off >= last_end); last_end = off + p.encoded_len(); }
                Err((off, _)) => { prop_assert!(off >= last_end); last_end = off + 1; }
            }
        }
        let (_, stats, _) = decode_records(&bytes);
        prop_assert_eq!(stats.bytes, bytes.len() as u64);
    }

    #[test]
    fn chunked_decoding_equals_whole_decoding(
        bytes in prop::collection::vec(prop_oneof![any::<u8>(), Just(0u8), Just(0x01), Just(0x71), Just(0xb0), Just(0x20)], 0..600),
        cuts in prop::collection::vec(0usize..600, 0..12),
    ) {
        let (whole, whole_stats, whole_issues) = decode_records(&bytes);
        let mut cuts: Vec<usize> = cuts.into_iter().filter(|c| *c <= bytes.len()).collect();
        cuts.push(0);
        cuts.push(bytes.len());
        cuts.sort_unstable();
        cuts.dedup();
        let mut d = RecordDecoder::new();
        let mut out = Vec::new();
        for w in cuts.windows(2) {
            d.feed(&bytes[w[0]..w[1]], w[0] as u64, &mut out);
        }
        d.finish();
        prop_assert_eq!(out, whole);
        prop_assert_eq!(*d.stats(), whole_stats);
        prop_assert_eq!(d.issues(), &whole_issues[..]);
    }

    #[test]
    fn valid_stream_chunked_anywhere(recs in prop::collection::vec(record(), 1..12), cut in 0usize..800) {
        let mut bytes = Vec::new();
        for r in &recs {
            r.encode(RecordLayout::Compact, &mut bytes);
        }
        let cut = cut.min(bytes.len());
        let mut d = RecordDecoder::new();
        let mut out = Vec::new();
        d.feed(&bytes[..cut], 0, &mut out);
        d.feed(&bytes[cut..], cut as u64, &mut out);
        d.finish();
        prop_assert_eq!(out, recs);
    }
}
