//! The reader against traces built byte by byte from emulator/FORMAT.md (not by the emulator):
//! field positions, optional fields, unknown records, and damaged input that must produce an
//! error with the right offset and never a panic.

use spelunk_emutrace::{
    events, AllocKind, AnnotationKind, FreeKind, MemoryLevel, Record, SnapshotReason, ThpPolicy,
    Trace, TraceErrorKind, TraceReader,
};
use spelunk_spe::{decode_records, Event, RecordLayout};

/// A little-endian byte builder for hand-made traces.
#[derive(Default)]
struct W(Vec<u8>);

impl W {
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
}

fn header() -> Vec<u8> {
    let mut w = W::default();
    w.bytes(b"SPLKEMUT").u16(1).u16(0).u32(32).u64(0).u64(0);
    w.0
}

fn record(out: &mut Vec<u8>, rtype: u16, payload: &[u8]) {
    out.extend_from_slice(&rtype.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
}

/// CONFIG payload per FORMAT.md: fixed part of 208 bytes, then three str16 (version 1.0).
fn config_payload() -> Vec<u8> {
    config_payload_with(&[], &["Neoverse N1", "0.1.0", "amd64"])
}

/// CONFIG payload per FORMAT.md: the 208 bytes of 1.0's fixed part, then `later` (fields later
/// minor versions appended to it), then `strings` as str16.
fn config_payload_with(later: &[u32], strings: &[&str]) -> Vec<u8> {
    let mut w = W::default();
    w.u32(208 + 4 * later.len() as u32).u32(64);
    w.u64(0x413f_d0c1).u64(2_800_000_000).u64(1_000_000_000);
    w.u32(1024)
        .u32(2 * 1025)
        .u32(0b1110)
        .u32(1)
        .u32(0)
        .u32(12)
        .u64(0);
    // 36 u32 fields from page_shift to timeline_interval_us, in order
    let fields: [u32; 36] = [
        21,
        4,
        128,
        23,
        16,
        24,
        11,
        65536,
        4,
        4,
        65536,
        4,
        1 << 20,
        8,
        14,
        32 << 20,
        16,
        103,
        283,
        200,
        16,
        48,
        48,
        1280,
        5,
        1,
        5,
        12,
        12,
        14,
        4096,
        16,
        64,
        100,
        20000,
        100,
    ];
    for f in fields {
        w.u32(f);
    }
    assert_eq!(w.0.len(), 208);
    for f in later {
        w.u32(*f);
    }
    for s in strings {
        w.u16(s.len() as u16).bytes(s.as_bytes());
    }
    w.0
}

fn schema_payload(codes: &[(u32, &str)]) -> Vec<u8> {
    let mut w = W::default();
    w.u32(codes.len() as u32);
    for (c, n) in codes {
        w.u32(*c).u16(n.len() as u16).bytes(n.as_bytes());
    }
    w.0
}

fn load_sample_payload() -> Vec<u8> {
    let mut w = W::default();
    w.u32(4242).u16(3).u8(1).u8(0x00); // tid, core, class LD/ST, subclass GP load
    w.u32(0x31e); // RETIRED L1D-ACCESS L1D-REFILL TLB-ACCESS LLC-ACCESS LLC-MISS
    w.u16(2472).u16(2369).u16(1).u16(0b1011); // total, issue, xlat, data source SLC
    w.u8(0b11_1011).u8(8).u8(3).u8(0); // flags VA|PA|DS|XLAT|TS, size 8, level SLC
    w.u64(0x5555_5555_1234)
        .u64(0x7fff_0000_1000)
        .u64(0x80_0000_1000)
        .u64(0);
    w.u64(123_456_789).u32(2472).u32(0);
    assert_eq!(w.0.len(), 72);
    w.0
}

fn annotation_payload(kind: u8, depth: u16, ts: u64, addr: u64, size: u64, name: &str) -> Vec<u8> {
    let mut w = W::default();
    w.u8(kind).u8(0).u16(depth).u32(4242).u16(3).u16(0).u32(0);
    w.u64(ts).u64(addr).u64(size).bytes(name.as_bytes());
    w.0
}

fn counters_payload(reason: u8, ts: u64, values: &[u64]) -> Vec<u8> {
    let mut w = W::default();
    w.u32(4242).u16(3).u8(reason).u8(0).u64(ts).u64(ts * 3);
    w.u32(values.len() as u32).u32(0);
    for v in values {
        w.u64(*v);
    }
    w.0
}

fn sample_trace() -> Vec<u8> {
    sample_trace_with_offsets().0
}

/// The trace and the byte offset of each of its records.
fn sample_trace_with_offsets() -> (Vec<u8>, Vec<usize>) {
    let mut t = header();
    let mut at = Vec::new();
    at.push(t.len());
    record(&mut t, 1, &config_payload());
    at.push(t.len());
    record(
        &mut t,
        8,
        &schema_payload(&[
            (events::MEM_ACCESS, "MEM_ACCESS"),
            (events::CPU_CYCLES, "CPU_CYCLES"),
        ]),
    );
    at.push(t.len());
    record(&mut t, 10, &annotation_payload(1, 1, 100, 0, 0, "triad"));
    at.push(t.len());
    record(&mut t, 11, &counters_payload(1, 100, &[10, 300]));
    at.push(t.len());
    record(&mut t, 9, &load_sample_payload());
    at.push(t.len());
    record(&mut t, 77, &[1, 2, 3]); // unknown type: skipped
    at.push(t.len());
    record(&mut t, 10, &annotation_payload(2, 1, 200, 0, 0, "triad"));
    at.push(t.len());
    record(&mut t, 11, &counters_payload(1, 200, &[25, 600]));
    at.push(t.len());
    record(&mut t, 11, &counters_payload(3, 250, &[30, 700]));
    let mut end = W::default();
    end.u32(3).u32(1).u64(1).u64(250);
    at.push(t.len());
    record(&mut t, 13, &end.0);
    (t, at)
}

#[test]
fn reads_every_field_of_a_hand_made_trace() {
    let (bytes, at) = sample_trace_with_offsets();
    let trace = Trace::from_reader(TraceReader::new(&bytes[..], "hand").unwrap()).unwrap();
    let c = &trace.config;
    assert_eq!(c.midr, 0x413f_d0c1);
    assert_eq!(c.cpu_hz, 2_800_000_000);
    assert_eq!(c.spe_interval, 1024);
    assert_eq!(c.actual_interval(), 1025.0);
    assert!(!c.jitter() && c.collisions_modelled());
    assert_eq!(c.spe_type_filter, 1);
    assert_eq!(c.page_bytes(), 2 << 20);
    assert_eq!(
        (c.l1d_bytes, c.l1d_assoc, c.l1d_latency_cycles),
        (65536, 4, 4)
    );
    assert_eq!(
        (c.slc_bytes, c.slc_latency_cycles, c.dram_latency_cycles),
        (32 << 20, 103, 283)
    );
    assert_eq!(c.peer_latency_cycles, 200);
    assert_eq!(c.timeline_interval_us, 100);
    assert_eq!(c.cpu_name, "Neoverse N1");
    assert_eq!(c.host_arch, "amd64");
    // a 1.0 CONFIG: three strings, no platform name
    assert_eq!(c.platform, None);

    assert_eq!(trace.samples.len(), 1);
    let s = &trace.samples[0];
    assert_eq!((s.tid, s.core, s.access_size), (4242, 3, 8));
    assert_eq!(s.level, Some(MemoryLevel::Slc));
    assert!(s.is_load());
    let r = &s.record;
    assert_eq!(r.pc.map(|p| p.va()), Some(0x5555_5555_1234));
    assert_eq!(r.pc.map(|p| (p.el(), p.ns())), Some((0, true)));
    assert_eq!(r.data_va.map(|a| a.va()), Some(0x7fff_0000_1000));
    assert_eq!(r.data_pa.map(|a| a.pa()), Some(0x80_0000_1000));
    assert_eq!(r.data_source, Some(0b1011));
    assert_eq!(r.total_latency_cycles, Some(2472));
    assert_eq!(r.issue_latency_cycles, Some(2369));
    assert_eq!(r.translation_latency_cycles, Some(1));
    assert_eq!(r.branch_target, None);
    assert_eq!(r.context_el1, Some(4242));
    assert_eq!(r.timestamp, Some(123_456_789));
    let ev = r.events.unwrap_or_default();
    assert!(ev.contains(Event::LlcAccess) && ev.contains(Event::L1dRefill));
    assert!(!ev.contains(Event::TlbWalk));

    let phases = trace.phases();
    assert_eq!(phases.len(), 1);
    assert_eq!(phases[0].name, "triad");
    assert_eq!((phases[0].begin, phases[0].end), (100, 200));
    assert_eq!(phases[0].delta(events::MEM_ACCESS), Some(15));
    assert_eq!(phases[0].delta(events::CPU_CYCLES), Some(300));
    assert_eq!(trace.samples_in(&phases[0]).count(), 0); // sample ts 123456789 is outside
    assert_eq!(trace.total(events::MEM_ACCESS), 30);
    assert_eq!(trace.unknown, vec![(77, at[5] as u64)]);
    let end = trace.end.unwrap();
    assert!(end.exit_status_known());
    assert_eq!((end.exit_status, end.samples_written), (3, 1));
    assert_eq!(
        trace.annotations.iter().map(|a| a.kind).collect::<Vec<_>>(),
        vec![AnnotationKind::PhaseBegin, AnnotationKind::PhaseEnd]
    );
    assert_eq!(trace.counters[2].reason, SnapshotReason::Final);
}

#[test]
fn sample_encodes_as_a_64_byte_n1_record_that_decodes_back() {
    let bytes = sample_trace();
    let trace = Trace::from_reader(TraceReader::new(&bytes[..], "hand").unwrap()).unwrap();
    let rec = trace.samples[0].record;
    let mut aux = Vec::new();
    rec.encode(RecordLayout::N1Padded64, &mut aux);
    assert_eq!(aux.len(), 64);
    let (back, stats, _) = decode_records(&aux);
    assert!(!stats.has_losses());
    assert_eq!(back, vec![rec]);
}

#[test]
fn rejects_bad_magic_and_versions() {
    let mut b = sample_trace();
    b[0] = b'X';
    let e = TraceReader::new(&b[..], "m").err().unwrap();
    assert!(matches!(e.kind, TraceErrorKind::BadMagic { .. }));
    assert_eq!(e.offset, 0);
    let mut b = sample_trace();
    b[8] = 2;
    let e = TraceReader::new(&b[..], "v").err().unwrap();
    assert!(matches!(
        e.kind,
        TraceErrorKind::UnsupportedVersion { major: 2, .. }
    ));
    assert!(e.to_string().starts_with("v: byte 8: "), "{e}");
    let e = TraceReader::new(&b"SPLKEMUT\x01\x00"[..], "short")
        .err()
        .unwrap();
    assert!(matches!(e.kind, TraceErrorKind::Truncated { .. }));
}

#[test]
fn a_longer_header_and_longer_fixed_parts_are_accepted() {
    // minor version 1 with a 40-byte header and 8 extra bytes after a SAMPLE's fixed part
    let mut t = W::default();
    t.bytes(b"SPLKEMUT")
        .u16(1)
        .u16(1)
        .u32(40)
        .u64(0)
        .u64(0)
        .u64(0xdead);
    let mut t = t.0;
    record(&mut t, 1, &config_payload());
    let mut s = load_sample_payload();
    s.extend_from_slice(&[9; 8]);
    record(&mut t, 9, &s);
    let trace = Trace::from_reader(TraceReader::new(&t[..], "minor").unwrap()).unwrap();
    assert_eq!(trace.samples.len(), 1);
    assert_eq!(trace.samples[0].record.data_source, Some(0b1011));
}

/// Version 1.4 appends the THP policy and the huge page shift to CONFIG's fixed part (224
/// bytes: offsets 216 and 220, FORMAT.md "1 CONFIG"); before it a run had one page size, and
/// the description says only that.
#[test]
fn config_carries_the_thp_policy_from_version_1_4() {
    let parse = |minor: u8, payload: Vec<u8>| {
        let mut t = header();
        t[10] = minor;
        record(&mut t, 1, &payload);
        Trace::from_reader(TraceReader::new(&t[..], "thp").unwrap())
            .unwrap()
            .config
    };
    let strings = ["Neoverse N1", "0.1.0", "amd64", ""];
    let mut c = parse(4, config_payload_with(&[4, 32, 1, 21], &strings));
    assert_eq!((c.thp, c.huge_page_shift), (Some(ThpPolicy::Madvise), 21));
    // the hand-made payload's page shift is 21 (offset 64): make it 4 KiB base pages
    c.page_shift = 12;
    assert_eq!(c.pages_description(), "4 KiB pages, THP madvise (2 MiB)");
    let c = parse(4, config_payload_with(&[4, 32, 2, 29], &strings));
    assert_eq!(c.thp, Some(ThpPolicy::Always));
    assert_eq!(c.huge_page_bytes(), Some(512 << 20));
    // 1.3: no policy, one page size everywhere
    let c = parse(3, config_payload_with(&[4, 32], &strings));
    assert_eq!((c.thp, c.huge_page_shift), (None, 0));
    assert_eq!(c.pages_description(), "2 MiB pages");
}

/// Version 1.3 names the platform preset in a fourth CONFIG string, after the host
/// architecture (FORMAT.md "1 CONFIG"), empty without `--platform`; 1.2's 216-byte fixed part
/// (stride prefetcher distance and largest stride) comes before the strings.
#[test]
fn config_names_the_platform_from_version_1_3() {
    let parse = |minor: u8, payload: Vec<u8>| {
        let mut t = header();
        t[10] = minor;
        record(&mut t, 1, &payload);
        Trace::from_reader(TraceReader::new(&t[..], "platform").unwrap())
    };
    let named = |platform: &str| {
        let c = parse(
            3,
            config_payload_with(&[4, 32], &["Neoverse V1", "0.1.0", "amd64", platform]),
        )
        .unwrap()
        .config;
        assert_eq!(
            (c.cpu_name.as_str(), c.host_arch.as_str()),
            ("Neoverse V1", "amd64")
        );
        c.platform
    };
    assert_eq!(named("graviton3").as_deref(), Some("graviton3"));
    assert_eq!(named(""), None);
    // 1.2: three strings after the 216-byte fixed part
    let c = parse(
        2,
        config_payload_with(&[4, 32], &["Neoverse N1", "0.1.0", "amd64"]),
    )
    .unwrap()
    .config;
    assert_eq!((c.cpu_name.as_str(), c.platform), ("Neoverse N1", None));
    // a platform name longer than the payload holds
    let mut p = config_payload_with(&[4, 32], &["Neoverse V1", "0.1.0", "amd64"]);
    p.extend_from_slice(&9u16.to_le_bytes());
    p.extend_from_slice(b"grav");
    let e = parse(3, p).err().unwrap();
    assert!(
        matches!(&e.kind, TraceErrorKind::Malformed { record: "CONFIG", detail } if detail == "truncated platform name"),
        "{e}"
    );
}

#[test]
fn truncation_reports_the_record_offset() {
    let (full, at) = sample_trace_with_offsets();
    // cut inside the SAMPLE record (the fifth record)
    let sample_at = at[4];
    let cut = &full[..sample_at + 8 + 20];
    let mut r = TraceReader::new(cut, "cut").unwrap();
    let mut n = 0;
    let err = loop {
        match r.next_record() {
            Ok(Some(_)) => n += 1,
            Ok(None) => panic!("expected an error"),
            Err(e) => break e,
        }
    };
    assert_eq!(n, 4);
    assert_eq!(err.offset, sample_at as u64);
    assert!(matches!(
        err.kind,
        TraceErrorKind::Truncated {
            needed: 72,
            available: 20,
            ..
        }
    ));
    // after an error the reader stops
    assert!(r.next_record().unwrap().is_none());
}

#[test]
fn short_fixed_parts_and_inconsistent_counters_are_errors() {
    let mut t = header();
    record(&mut t, 1, &config_payload());
    record(&mut t, 9, &[0u8; 40]);
    let mut r = TraceReader::new(&t[..], "short").unwrap();
    assert!(matches!(r.next_record(), Ok(Some(Record::Config(_)))));
    let e = r.next_record().err().unwrap();
    assert!(matches!(
        e.kind,
        TraceErrorKind::TooShort {
            record: "SAMPLE",
            len: 40,
            min: 72
        }
    ));
    assert_eq!(e.offset, (32 + 8 + config_payload().len()) as u64);

    // COUNTERS before any schema, and with a count that does not match the schema
    let mut t = header();
    record(&mut t, 11, &counters_payload(0, 1, &[1]));
    let e = TraceReader::new(&t[..], "noschema")
        .unwrap()
        .next_record()
        .err()
        .unwrap();
    assert!(e.to_string().contains("no COUNTER_SCHEMA"), "{e}");
    let mut t = header();
    record(&mut t, 8, &schema_payload(&[(1, "A"), (2, "B")]));
    record(&mut t, 11, &counters_payload(0, 1, &[1]));
    let mut r = TraceReader::new(&t[..], "mismatch").unwrap();
    r.next_record().unwrap();
    let e = r.next_record().err().unwrap();
    assert!(e.to_string().contains("schema has 2"), "{e}");

    // a schema claiming more entries than its bytes can hold
    let mut t = header();
    let mut p = W::default();
    p.u32(u32::MAX);
    record(&mut t, 8, &p.0);
    let e = TraceReader::new(&t[..], "huge")
        .unwrap()
        .next_record()
        .err()
        .unwrap();
    assert!(matches!(e.kind, TraceErrorKind::Malformed { .. }));

    // a payload length beyond the limit
    let mut t = header();
    t.extend_from_slice(&9u16.to_le_bytes());
    t.extend_from_slice(&0u16.to_le_bytes());
    t.extend_from_slice(&u32::MAX.to_le_bytes());
    let e = TraceReader::new(&t[..], "len")
        .unwrap()
        .next_record()
        .err()
        .unwrap();
    assert!(matches!(e.kind, TraceErrorKind::TooLarge { .. }));
}

#[test]
fn a_trace_without_config_is_refused() {
    let mut t = header();
    record(&mut t, 13, &[0u8; 24]);
    let e = Trace::from_reader(TraceReader::new(&t[..], "nocfg").unwrap())
        .err()
        .unwrap();
    assert!(e.to_string().contains("no CONFIG"), "{e}");
}

/// xorshift64*: deterministic pseudo-random damage.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[test]
fn damaged_traces_never_panic() {
    let good = sample_trace();
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for round in 0..20_000 {
        let mut b = good.clone();
        let flips = 1 + (rng.next() % 8) as usize;
        for _ in 0..flips {
            let i = (rng.next() as usize) % b.len();
            b[i] = rng.next() as u8;
        }
        if round % 3 == 0 {
            let keep = (rng.next() as usize) % (b.len() + 1);
            b.truncate(keep);
        }
        if let Ok(r) = TraceReader::new(&b[..], "fuzz") {
            for rec in r {
                if rec.is_err() {
                    break;
                }
            }
        }
        let _ = TraceReader::new(&b[..], "fuzz").and_then(Trace::from_reader);
    }
}

/// Version 1.1's heap-block records, built from FORMAT.md "Heap blocks": every field in place,
/// a frame count the payload cannot hold refused with the record's offset.
#[test]
fn heap_block_records_of_version_1_1() {
    let mut t = header();
    t[10] = 1; // minor 1
    record(&mut t, 1, &config_payload());
    let mut a = W::default();
    a.u8(5).u8(2).u16(7).u32(4242).u64(1000);
    a.u64(1).u64(0x7f00_0000_0000).u64(1 << 20);
    a.u64(0x5555_0000_1234).u64(0x5555_0000_5678);
    record(&mut t, 14, &a.0);
    let mut f = W::default();
    f.u8(3)
        .u8(0)
        .u16(7)
        .u32(4242)
        .u64(2000)
        .u64(1)
        .u64(0x7f00_0000_0000);
    record(&mut t, 15, &f.0);
    let mut b = W::default();
    for v in [1, 0x7f00_0000_0000, 1 << 20, 10, 20, 80, 160, 3] {
        b.u64(v);
    }
    record(&mut t, 16, &b.0);
    let trace = Trace::from_reader(TraceReader::new(&t[..], "heap").unwrap()).unwrap();
    assert_eq!(trace.allocs.len(), 1);
    let al = &trace.allocs[0];
    assert_eq!(al.kind, AllocKind::Mmap);
    assert_eq!((al.core, al.tid, al.timestamp), (7, 4242, 1000));
    assert_eq!((al.id, al.addr, al.size), (1, 0x7f00_0000_0000, 1 << 20));
    assert_eq!(al.stack, vec![0x5555_0000_1234, 0x5555_0000_5678]);
    let fr = &trace.frees[0];
    assert_eq!(fr.kind, FreeKind::Munmap);
    assert_eq!((fr.timestamp, fr.id, fr.addr), (2000, 1, 0x7f00_0000_0000));
    let bt = &trace.blocks[0];
    assert_eq!((bt.id, bt.addr, bt.size), (1, 0x7f00_0000_0000, 1 << 20));
    let want = spelunk_emutrace::ExactAccesses {
        loads: 10,
        stores: 20,
        load_bytes: 80,
        store_bytes: 160,
        l1d_misses: 3,
    };
    assert_eq!(bt.accesses, want);

    // three frames announced, two present
    let mut t = header();
    record(&mut t, 1, &config_payload());
    let at = t.len() as u64;
    let mut a = W::default();
    a.u8(1)
        .u8(3)
        .u16(0)
        .u32(1)
        .u64(0)
        .u64(1)
        .u64(0x1000)
        .u64(4096);
    a.u64(1).u64(2);
    record(&mut t, 14, &a.0);
    let mut r = TraceReader::new(&t[..], "frames").unwrap();
    r.next_record().unwrap();
    let e = r.next_record().err().unwrap();
    assert!(matches!(e.kind, TraceErrorKind::Malformed { .. }), "{e}");
    assert!(e.to_string().contains("3 frames"), "{e}");
    assert_eq!(e.offset, at);
}
