//! Differential test against Linux perf 6.1 at the record level: for the same perf.data,
//! `perf script` synthesizes samples per event category from each SPE record; the samples
//! predicted from spelunk's decode (the whole pipeline: reader, parallel per-CPU decode, TIME_CONV,
//! merge) must be exactly the ones perf prints — same CPU, time (ns), PC, data or branch-target
//! address, physical address, weight (total latency) and data-source level.
//!
//! perf 6.1 rules, as observed: one sample per set event bit among L1D refill/access, LLC
//! miss/access, TLB walk/access, mispredict and remote access, whatever the operation; a
//! `memory` sample for every load/store/atomic and (a perf 6.1 quirk) every SVE data-processing
//! operation; nothing else (a correctly predicted branch gives no sample). A `branch-miss`
//! sample carries the branch target as its address and no data fields; others carry the data
//! VA (perf fills its top byte only when bits 55:52 are all ones), the physical address, the
//! total latency as weight and a data-source level (none for stores; a missing Data Source
//! packet counts as value 0).

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use spelunk_perf::{AuxFlags, RecordingSpec, SpeRecordingWriter, Task, TimeConv};
use spelunk_spe::{
    CodeAddress, DataPhysicalAddress, DataVirtualAddress, Events, OpType, RecordLayout, SpeRecord,
    Terminator,
};
use spelunk_testkit::perf61::{parse_script, perf, predict_script, ScriptSample, SCRIPT_FIELDS};
use spelunk_testkit::{decode_all, SynthRecording};
use std::path::Path;

fn compare(path: &Path) -> usize {
    let ours = decode_all(path);
    let mut want: Vec<ScriptSample> = ours.iter().flat_map(predict_script).collect();
    let (out, err, ok) = perf(&[
        "script",
        "-i",
        path.to_str().unwrap(),
        "-F",
        SCRIPT_FIELDS,
        "--ns",
    ]);
    assert!(ok, "perf script failed: {err}");
    let mut got = parse_script(&out);
    want.sort();
    got.sort();
    if got != want {
        let missing: Vec<_> = want.iter().filter(|w| !got.contains(w)).take(5).collect();
        let extra: Vec<_> = got.iter().filter(|g| !want.contains(g)).take(5).collect();
        let count = |v: &[ScriptSample]| {
            let mut m = std::collections::BTreeMap::new();
            for x in v {
                *m.entry(x.event.clone()).or_insert(0usize) += 1;
            }
            m
        };
        eprintln!(
            "per category: perf {:?}\n              spelunk {:?}",
            count(&got),
            count(&want)
        );
        panic!(
            "{}: perf printed {} samples, spelunk predicts {}\n  predicted, not printed: {missing:#?}\n  printed, not predicted: {extra:#?}",
            path.display(),
            got.len(),
            want.len()
        );
    }
    want.len()
}

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("spelunk-perf61s-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join("rec.data")
}

#[test]
fn perf_script_agrees_on_synthetic_n1_recording_with_context() {
    let path = scratch("n1");
    SynthRecording {
        cpus: 3,
        records_per_cpu: 4000,
        ..Default::default()
    }
    .write(&path)
    .unwrap();
    assert!(compare(&path) > 3 * 4000);
}

#[test]
fn perf_script_agrees_on_compact_recording_without_context() {
    let path = scratch("compact");
    let spec = SynthRecording {
        cpus: 2,
        records_per_cpu: 3000,
        layout: RecordLayout::Compact,
        context_packets: false,
        chunk_bytes: 5000, // records straddle AUXTRACE records
        seed: 9,
        ..Default::default()
    };
    spec.write(&path).unwrap();
    assert!(compare(&path) > 2 * 3000);
}

/// Well-formed records of every operation class with arbitrary fields, data sources 0–15 and
/// events, in increasing time order.
fn record() -> impl Strategy<Value = SpeRecord> {
    let class = prop_oneof![Just(0u8), Just(1u8), Just(2u8)];
    (
        class,
        any::<u8>(),
        0u64..1 << 26,
        any::<u64>(),
        any::<u64>(),
        0u64..16,
        any::<u16>(),
        0u16..4000,
    )
        .prop_map(|(class, payload, ev, va, pa, ds, issue, extra)| {
            // Any PC: every exception level, NS value and address bit.
            let pc = CodeAddress(va.rotate_left(17) ^ pa);
            let mut r = SpeRecord {
                pc: Some(pc),
                op: Some(OpType::new(class, payload)),
                events: Some(Events(ev)),
                issue_latency_cycles: Some(issue % 2000),
                total_latency_cycles: Some(issue % 2000 + extra),
                ..Default::default()
            };
            match class {
                1 => {
                    r.data_va = Some(DataVirtualAddress(va));
                    r.data_pa = Some(DataPhysicalAddress(pa));
                    r.translation_latency_cycles = Some(1);
                    if payload & 1 == 0 {
                        r.data_source = Some(ds);
                    }
                }
                2 => r.branch_target = Some(CodeAddress(pa)),
                _ => {}
            }
            r
        })
}

#[test]
fn perf_script_agrees_on_generated_records() {
    let seed: u8 = std::env::var("SPELUNK_DIFF_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]),
    );
    let strat = prop::collection::vec(record(), 4000);
    let mut recs = strat.new_tree(&mut runner).unwrap().current();
    let tc = TimeConv::from_frequency(25_000_000, 0); // a 25 MHz generic timer, as on N1 systems
    let path = scratch("gen");
    let spec = RecordingSpec {
        cpus: vec![0, 1],
        nr_cpus_available: 2,
        nr_cpus_online: 2,
        time_conv: tc,
        ..Default::default()
    };
    let mut w = SpeRecordingWriter::create(&path, spec).unwrap();
    let mut ts = 25_000_000u64;
    for (i, chunk) in recs.chunks_mut(100).enumerate() {
        let cpu = (i % 2) as u32;
        let mut b = Vec::new();
        for r in chunk.iter_mut() {
            ts += 3;
            r.timestamp = Some(ts);
            r.terminator = Terminator::Timestamp;
            r.encode(
                if i % 3 == 0 {
                    RecordLayout::Compact
                } else {
                    RecordLayout::N1Padded64
                },
                &mut b,
            );
        }
        w.aux(
            cpu,
            Task::new(1, 1),
            tc.tsc_to_perf_time(ts),
            AuxFlags(0),
            &b,
        )
        .unwrap();
    }
    w.finish().unwrap();
    assert!(compare(&path) > 1000);
}

/// A recording given up half-way (the recorder's command failed to finish it) and kept with
/// `keep_partial` while the disk still had room: a complete file up to the last record, which
/// perf 6.1 decodes to the same samples as spelunk. (When the disk is full the file keeps a
/// data-size-0 header instead; the arm64 VM test fills a tmpfs to check that path.)
#[test]
fn a_partial_recording_is_read_by_perf_and_spelunk() {
    let rec = SynthRecording {
        cpus: 1,
        records_per_cpu: 2000,
        ..Default::default()
    };
    let tc = rec.time_conv();
    let path = scratch("partial");
    let _ = std::fs::remove_file(&path);
    let spec = RecordingSpec {
        cpus: vec![0],
        time_conv: tc,
        ..Default::default()
    };
    let mut w = SpeRecordingWriter::create(&path, spec).unwrap();
    let records: Vec<SpeRecord> = rec.records(0).collect();
    for chunk in records.chunks(250) {
        let mut b = Vec::new();
        for r in chunk {
            r.encode(RecordLayout::N1Padded64, &mut b);
        }
        let t = tc.tsc_to_perf_time(chunk[0].timestamp.unwrap_or(0));
        w.aux(0, Task::new(1, 1), t, AuxFlags(0), &b).unwrap();
    }
    w.keep_partial(&path).unwrap();
    let n = compare(&path);
    assert!(n > 1000, "{n} samples of 2000 records in the partial file");
}
