//! The reader against files whose content is known independently: what the writer was told to
//! write, a hand-laid-out perf.data, files Linux perf records on this machine, and damaged
//! copies of both (which must give errors or problems with offsets, never panics).

mod common;

use common::*;
use spelunk_perf::abi::{aux_flag, record as rt};
use spelunk_perf::*;
use spelunk_spe::{CpuModel, Midr};

fn problems(f: &PerfDataFile) -> String {
    f.summary
        .problems
        .iter()
        .map(|p| p.message.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn round_trip_of_everything_the_writer_wrote() {
    let dir = scratch_dir("rt");
    let flags = [
        AuxFlags(0),
        AuxFlags(aux_flag::PARTIAL | aux_flag::TRUNCATED),
        AuxFlags(aux_flag::COLLISION),
    ];
    let rec = write_recording(&dir, "spe.data", SpeMetadataLayout::V1, &flags, true);
    let f = PerfDataFile::open(&rec.path).unwrap();
    assert!(f.summary.is_clean(), "{}", problems(&f));
    assert_eq!(
        f.spe,
        Some(SpeAuxtraceInfo::V1 {
            pmu_type: 10,
            per_cpu_mmaps: true
        })
    );
    assert_eq!(f.require_spe().unwrap().pmu_type(), 10);
    // Every AUX byte written, payloads padded to 8 bytes as perf pads them.
    let aux_bytes: usize = rec
        .chunks
        .iter()
        .map(|c| c.bytes.len().next_multiple_of(8))
        .sum();
    assert_eq!(f.require_spe_data().unwrap(), aux_bytes as u64);
    assert_eq!(f.time_conv, Some(rec.spec.time_conv));
    assert_eq!(f.time_conv_layout, Some(TimeConvLayout::Long));

    // Attrs.
    assert_eq!(f.attrs.len(), 2);
    let spe = f.spe_attr().unwrap();
    assert_eq!(spe.name.as_deref(), Some("arm_spe_0//"));
    assert_eq!(spe.spe_config(), rec.spec.spe);
    assert!(spe.sample_id_all());
    assert_eq!(spe.sample_period(), Some(rec.spec.sample_period));
    assert_eq!(spe.ids.len(), 2);
    let dummy = &f.attrs[1];
    assert_eq!((dummy.type_, dummy.config), (1, 9));
    assert_eq!(dummy.name.as_deref(), Some("dummy:u"));

    // Features.
    let h = &f.features;
    assert_eq!(h.hostname.as_deref(), Some("test-host"));
    assert_eq!(h.os_release.as_deref(), Some("6.1.0-test"));
    assert_eq!(h.arch.as_deref(), Some("aarch64"));
    assert_eq!((h.nr_cpus_online, h.nr_cpus_available), (Some(4), Some(4)));
    assert_eq!(h.cpu_desc.as_deref(), Some("Neoverse N1"));
    assert_eq!(h.cpuid.as_deref(), Some("0x00000000410fd0c0"));
    assert_eq!(h.midr(), Some(CpuModel::NeoverseN1.midr()));
    assert_eq!(f.cpu_midr(3), Some(CpuModel::NeoverseN1.midr()));
    assert_eq!(
        h.cmdline.as_deref(),
        Some(&["spelunk", "record", "--", "bench"].map(String::from)[..])
    );
    assert_eq!(h.auxtrace_index.as_ref().map(Vec::len), Some(6));

    // Sideband.
    let sb = &f.sideband;
    assert_eq!(sb.comms.len(), 1);
    let c = &sb.comms[0];
    assert_eq!(
        (c.pid, c.tid, c.name.as_str(), c.exec),
        (PID, PID, "bench", true)
    );
    assert_eq!(c.sample.time_ns, Some(rec.t0));
    assert_eq!(c.sample.cpu, Some(0));
    assert_eq!(c.pos.attr_index, 1);
    assert_eq!(sb.mmaps.len(), 2);
    let m = &sb.mmaps[0];
    assert!(m.mmap2 && m.executable);
    assert_eq!(m.address, rec.text_base);
    assert_eq!(m.file_id, MmapFileId::BuildId((1..=20).collect()));
    assert_eq!((m.prot, m.flags, m.cpu_mode), (Some(5), Some(2), 2));
    assert_eq!(m.path, "/usr/bin/bench");
    let d = &sb.mmaps[1];
    assert!(!d.executable);
    assert_eq!(
        d.file_id,
        MmapFileId::Inode {
            maj: 254,
            min: 1,
            ino: 123456,
            ino_generation: 7
        }
    );
    assert_eq!((d.page_offset, d.sample.cpu), (0x2000, Some(3)));
    assert_eq!(sb.tasks.len(), 2);
    assert_eq!(sb.tasks[0].kind, TaskEventKind::Fork);
    assert_eq!((sb.tasks[0].tid, sb.tasks[0].ptid), (PID + 1, PID));
    assert_eq!(sb.tasks[1].kind, TaskEventKind::Exit);
    assert_eq!(sb.tasks[1].time_ns, rec.t0 + 100_000_000);
    assert_eq!(sb.switches.len(), 3);
    assert!(!sb.switches[0].out);
    assert_eq!(sb.switches[0].other_pid, Some(0));
    let out = sb.switches[2];
    assert!(out.out && out.preempted);
    assert_eq!((out.other_pid, out.other_tid), (Some(7), Some(8)));
    assert_eq!(sb.itrace_starts.len(), 2);
    assert_eq!(sb.itrace_starts[1].sample.cpu, Some(3));
    assert_eq!(sb.itrace_starts[1].pos.attr_index, 0);
    assert_eq!(sb.lost.len(), 1);
    assert_eq!(sb.lost[0].lost, 5);
    assert_eq!(sb.lost_samples.len(), 1);
    assert_eq!(sb.lost_samples[0].lost, 9);
    assert_eq!(sb.aux.len(), 6);
    for (a, w) in sb.aux.iter().zip(&rec.chunks) {
        assert_eq!(a.aux_offset, w.aux_offset);
        assert_eq!(a.aux_size, w.bytes.len() as u64);
        assert_eq!(a.flags, w.flags);
        assert_eq!(a.sample.cpu, Some(w.cpu));
        assert_eq!(a.sample.time_ns, Some(w.time_ns));
        assert_eq!(a.sample.tid, Some(PID));
    }
    assert!(sb.aux[1].flags.partial() && sb.aux[1].flags.truncated());
    assert!(sb.aux[2].flags.collision());

    // AUX streams: idx 0 = CPU 0, idx 1 = CPU 3; chunk bytes come back exactly.
    assert_eq!(f.aux_streams.len(), 2);
    let mut buf = Vec::new();
    for (s, cpu) in f.aux_streams.iter().zip([0u32, 3]) {
        assert_eq!((s.cpu, s.tid), (Some(cpu), Some(PID as u32)));
        let written: Vec<_> = rec.chunks.iter().filter(|c| c.cpu == cpu).collect();
        assert_eq!(s.chunks.len(), 3);
        for (i, (c, w)) in s.chunks.iter().zip(&written).enumerate() {
            assert_eq!(c.aux_offset, w.aux_offset);
            f.read_chunk(c, &mut buf).unwrap();
            assert_eq!(&buf[..w.bytes.len()], &w.bytes[..]);
            assert!(buf[w.bytes.len()..].iter().all(|b| *b == 0), "padding");
            assert!(buf.len() - w.bytes.len() < 8);
            assert_eq!(c.contiguous, i > 0);
            assert_eq!(c.aux_flags, w.flags);
        }
        // Chunk 2 follows a PARTIAL|TRUNCATED chunk: a decoder must reset there.
        let resets: Vec<bool> = s.chunks.iter().map(|c| c.decoder_reset).collect();
        assert_eq!(resets, vec![true, false, true]);
    }
}

#[test]
fn chunks_can_be_read_from_several_threads() {
    let dir = scratch_dir("threads");
    let rec = write_recording(&dir, "spe.data", SpeMetadataLayout::V1, &[], false);
    let f = PerfDataFile::open(&rec.path).unwrap();
    let per_stream: Vec<Vec<u8>> = std::thread::scope(|s| {
        let handles: Vec<_> = f
            .aux_streams
            .iter()
            .map(|st| {
                let f = &f;
                s.spawn(move || {
                    let mut all = Vec::new();
                    let mut buf = Vec::new();
                    for c in &st.chunks {
                        f.read_chunk(c, &mut buf).unwrap();
                        all.extend_from_slice(&buf);
                    }
                    all
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (bytes, cpu) in per_stream.iter().zip([0u32, 3]) {
        let want: usize = rec
            .chunks
            .iter()
            .filter(|c| c.cpu == cpu)
            .map(|c| c.bytes.len().div_ceil(8) * 8)
            .sum();
        assert_eq!(bytes.len(), want);
        let (records, stats, _) = spelunk_spe::decode_records(bytes);
        assert_eq!(records.len(), 300);
        assert!(!stats.has_losses());
    }
}

#[test]
fn version_2_metadata_round_trips_with_per_cpu_midr() {
    let dir = scratch_dir("v2");
    let rec = write_recording(&dir, "spe.data", SpeMetadataLayout::V2, &[], false);
    let f = PerfDataFile::open(&rec.path).unwrap();
    let spe = f.require_spe().unwrap();
    assert_eq!(spe.version(), 2);
    assert_eq!(spe.pmu_type(), 10);
    let cpus: Vec<u32> = spe.cpus().iter().map(|c| c.cpu).collect();
    assert_eq!(cpus, vec![0, 3]);
    assert_eq!(spe.cpu_midr(3), Some(CpuModel::NeoverseN1.midr()));
    assert_eq!(spe.cpus()[0].min_interval, 1024);
    assert_eq!(f.spe_attr().unwrap().type_, 10);
}

/// A minimal perf.data laid out by hand from perf.data-file-format.txt and perf_event.h:
/// header, one attr (type 10, sample_id_all, sample_type TID|TIME|CPU), data with
/// AUXTRACE_INFO (v1), TIME_CONV (short), an AUX record and an AUXTRACE with 16 bytes.
#[test]
fn hand_laid_out_file() {
    let le64 = |v: u64| v.to_le_bytes().to_vec();
    let le32 = |v: u32| v.to_le_bytes().to_vec();
    let mut data: Vec<u8> = Vec::new();
    // AUXTRACE_INFO: type 70, size 32, auxtrace type 4, priv [10, 1].
    data.extend(
        [
            le32(70),
            vec![0, 0, 32, 0],
            le32(4),
            le32(0),
            le64(10),
            le64(1),
        ]
        .concat(),
    );
    // TIME_CONV short: shift 0, mult 1, zero 0.
    data.extend([le32(79), vec![0, 0, 32, 0], le64(0), le64(1), le64(0)].concat());
    // AUX: offset 0, size 16, flags PARTIAL; sample_id pid/tid 7/8, time 99, cpu 2.
    data.extend(
        [
            le32(11),
            vec![0, 0, 56, 0],
            le64(0),
            le64(16),
            le64(4),
            le32(7),
            le32(8),
            le64(99),
            le32(2),
            le32(0),
        ]
        .concat(),
    );
    // AUXTRACE: size 16, offset 0, reference 5, idx 0, tid 8, cpu 2; payload: a PC packet
    // (0xb0 + 8 bytes), END (0x01), 6 PAD bytes.
    data.extend(
        [
            le32(71),
            vec![0, 0, 48, 0],
            le64(16),
            le64(0),
            le64(5),
            le32(0),
            le32(8),
            le32(2),
            le32(0),
        ]
        .concat(),
    );
    let payload = [
        0xb0, 0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0x00, 0x80, 0x01, 0, 0, 0, 0, 0, 0,
    ];
    data.extend_from_slice(&payload);

    // attr: 128 bytes, then its ids section (none).
    let mut attr = vec![0u8; 128];
    attr[0..4].copy_from_slice(&10u32.to_le_bytes());
    attr[4..8].copy_from_slice(&128u32.to_le_bytes());
    attr[16..24].copy_from_slice(&4096u64.to_le_bytes());
    attr[24..32].copy_from_slice(&(2u64 | 4 | 128).to_le_bytes()); // TID|TIME|CPU
    attr[40..48].copy_from_slice(&(1u64 << 18).to_le_bytes()); // sample_id_all
    attr.extend(le64(0));
    attr.extend(le64(0));

    let attrs_at = 104u64;
    let data_at = attrs_at + attr.len() as u64;
    let mut file = Vec::new();
    file.extend_from_slice(b"PERFILE2");
    file.extend([le64(104), le64(144), le64(attrs_at), le64(144)].concat());
    file.extend([le64(data_at), le64(data.len() as u64), le64(0), le64(0)].concat());
    file.extend([le64(0), le64(0), le64(0), le64(0)].concat()); // no features
    file.extend(attr);
    file.extend(&data);

    let f = PerfDataFile::from_bytes(&file).unwrap();
    assert!(f.summary.is_clean(), "{}", problems(&f));
    assert_eq!(f.spe.as_ref().map(|s| s.pmu_type()), Some(10));
    assert_eq!(f.time_conv_layout, Some(TimeConvLayout::Short));
    assert_eq!(f.time_conv.unwrap().tsc_to_perf_time(1234), 1234);
    assert_eq!(f.attrs[0].sample_period(), Some(4096));
    assert_eq!(f.spe_attr_index(), Some(0));
    let a = &f.sideband.aux[0];
    assert_eq!((a.aux_offset, a.aux_size), (0, 16));
    assert!(a.flags.partial() && !a.flags.truncated());
    assert_eq!(
        (a.sample.pid, a.sample.tid, a.sample.time_ns, a.sample.cpu),
        (Some(7), Some(8), Some(99), Some(2))
    );
    assert_eq!(f.aux_streams.len(), 1);
    let s = &f.aux_streams[0];
    assert_eq!((s.idx, s.cpu, s.tid), (0, Some(2), Some(8)));
    let c = s.chunks[0];
    assert_eq!(c.file_offset, data_at + data.len() as u64 - 16);
    assert_eq!((c.size, c.reference), (16, 5));
    assert!(c.aux_flags.partial());
    let mut buf = Vec::new();
    f.read_chunk(&c, &mut buf).unwrap();
    assert_eq!(buf, payload);
    let (records, _, _) = spelunk_spe::decode_records(&buf);
    assert_eq!(records[0].pc.unwrap().va(), 0xba98_7654_3210);
    assert_eq!(f.summary.count(rt::AUXTRACE), 1);
    assert!(f.features.hostname.is_none());
}

fn record_ls(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("ls.data");
    let (_, err, ok) = perf(&[
        "record",
        "-q",
        "-o",
        path.to_str().unwrap(),
        "-e",
        "cpu-clock",
        "--",
        "ls",
        "/",
    ]);
    assert!(ok, "perf record -e cpu-clock -- ls failed: {err}");
    path
}

#[test]
fn real_perf_record_file_has_sideband_and_a_clear_no_spe_error() {
    let dir = scratch_dir("ls");
    let path = record_ls(&dir);
    let f = PerfDataFile::open(&path).unwrap();
    assert!(f.summary.is_clean(), "{}", problems(&f));
    assert_eq!(f.attrs.len(), 1);
    assert_eq!((f.attrs[0].type_, f.attrs[0].config), (1, 0)); // software cpu-clock
    assert_eq!(f.attrs[0].name.as_deref(), Some("cpu-clock"));
    assert!(f.attrs[0].sample_id_all());
    assert!(f.sideband.comms.iter().any(|c| c.name == "ls" && c.exec));
    let ls_pid = f
        .sideband
        .comms
        .iter()
        .find(|c| c.name == "ls")
        .unwrap()
        .pid;
    assert!(f
        .sideband
        .mmaps
        .iter()
        .any(|m| m.mmap2 && m.pid == ls_pid && m.path.ends_with("/ls")));
    assert!(f
        .sideband
        .tasks
        .iter()
        .any(|t| t.kind == TaskEventKind::Exit));
    assert!(f.sideband.comms[1..]
        .iter()
        .all(|c| c.sample.time_ns.is_some_and(|t| t > 0)));
    assert!(f.aux_streams.is_empty() && f.spe.is_none());

    // What perf itself says about the header.
    let (hdr, _, _) = perf(&["report", "--header-only", "-i", path.to_str().unwrap()]);
    let field = |label: &str| {
        hdr.lines()
            .find_map(|l| l.strip_prefix(&format!("# {label} : ")))
            .map(|s| s.trim_end().to_string())
    };
    assert_eq!(f.features.hostname, field("hostname"));
    assert_eq!(f.features.os_release, field("os release"));
    assert_eq!(f.features.cpuid, field("cpuid"));
    assert_eq!(
        f.features.nr_cpus_online.map(|n| n.to_string()),
        field("nrcpus online")
    );
    let (script, _, _) = perf(&["script", "-i", path.to_str().unwrap()]);
    assert_eq!(f.samples, script.lines().count() as u64);

    let e = f.require_spe().unwrap_err().to_string();
    assert!(
        e.contains("contains no Arm SPE data") && e.contains("perf record -e arm_spe_0//"),
        "{e}"
    );
    assert!(e.contains("cpu-clock"), "{e}");
    assert!(PerfDataFile::open_spe(&path).is_err());
}

/// Truncates at many offsets and flips bytes: every result is an error or an index with
/// problems (with offsets), and nothing panics.
fn damage(bytes: &[u8], label: &str) {
    let n = bytes.len();
    let mut cuts: Vec<usize> = (0..n.min(700)).collect();
    cuts.extend((700..n).step_by(37));
    for cut in cuts {
        match PerfDataFile::from_bytes(&bytes[..cut]) {
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.starts_with("<memory>: "), "{label} cut {cut}: {msg}");
            }
            Ok(f) => {
                assert!(
                    !f.summary.problems.is_empty(),
                    "{label} cut at {cut} of {n} gave a clean index"
                );
                for p in &f.summary.problems {
                    assert!(p.offset <= n as u64, "{label}: {p:?}");
                }
                // Partial output is kept and chunks stay readable.
                let mut buf = Vec::new();
                for s in &f.aux_streams {
                    for c in &s.chunks {
                        f.read_chunk(c, &mut buf).unwrap();
                    }
                }
            }
        }
    }
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..3000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut b = bytes.to_vec();
        let at = (state as usize) % n;
        b[at] ^= (state >> 32) as u8 | 1;
        if i % 3 == 0 {
            let at2 = (state >> 20) as usize % n;
            b[at2] = 0xff;
        }
        if let Ok(f) = PerfDataFile::from_bytes(&b) {
            let _ = f.require_spe();
            let mut buf = Vec::new();
            for s in &f.aux_streams {
                for c in &s.chunks {
                    let _ = f.read_chunk(c, &mut buf);
                }
            }
        }
    }
}

#[test]
fn damaged_files_give_errors_with_offsets_and_never_panic() {
    let dir = scratch_dir("damage");
    let rec = write_recording(&dir, "spe.data", SpeMetadataLayout::V2, &[], true);
    damage(&std::fs::read(&rec.path).unwrap(), "writer file");
    damage(&std::fs::read(record_ls(&dir)).unwrap(), "perf file");
}

#[test]
fn a_cut_auxtrace_payload_is_reported_with_its_offset_and_kept() {
    let dir = scratch_dir("cut");
    let rec = write_recording(&dir, "spe.data", SpeMetadataLayout::V1, &[], false);
    let bytes = std::fs::read(&rec.path).unwrap();
    let full = PerfDataFile::from_bytes(&bytes).unwrap();
    let c = full.aux_streams[1].chunks[1];
    let cut = (c.file_offset + 1000) as usize;
    let f = PerfDataFile::from_bytes(&bytes[..cut]).unwrap();
    let p = &f.summary.problems[0];
    assert_eq!(p.kind, ProblemKind::DataBeyondEof);
    let p = f
        .summary
        .problems
        .iter()
        .find(|p| p.kind == ProblemKind::RecordCutOff)
        .unwrap();
    assert_eq!(
        p.message,
        format!(
            "truncated PERF_RECORD_AUXTRACE at byte {}: header says {} payload bytes, file \
             ends after 1000",
            c.record_offset, c.size
        )
    );
    assert_eq!(p.offset, c.record_offset);
    // Everything before is kept; the cut chunk is kept with the bytes that exist.
    assert_eq!(f.aux_streams[0].chunks.len(), 3);
    let kept = f.aux_streams[1].chunks[1];
    assert!(kept.cut_off);
    assert_eq!(kept.size, 1000);
    assert_eq!(f.sideband.comms.len(), 1);
    assert!(f.features.hostname.is_none());
}

/// A file cut before its SPE metadata is said to be cut, with the byte it ends at, not to
/// hold no SPE data.
#[test]
fn a_file_cut_before_its_spe_metadata_says_it_was_cut() {
    let dir = scratch_dir("cut-early");
    let rec = write_recording(&dir, "spe.data", SpeMetadataLayout::V1, &[], false);
    let bytes = std::fs::read(&rec.path).unwrap();
    let full = PerfDataFile::from_bytes(&bytes).unwrap();
    let info = full.auxtrace_info.as_ref().unwrap().offset as usize;
    for cut in [full.summary.data_offset as usize, info, info + 5] {
        let f = PerfDataFile::from_bytes(&bytes[..cut]).unwrap();
        let e = f.require_spe().unwrap_err();
        let damage = f.damage().unwrap();
        assert!(matches!(e, PerfError::DamagedBeforeSpe { .. }), "{e}");
        assert_eq!(e.offset(), Some(damage.offset));
        assert!(
            e.to_string().contains(&format!("the file ends at {cut}")),
            "{cut}: {e}"
        );
    }
    // Cut only in the feature sections: the SPE data is all there, no damage.
    let data_end = (full.summary.data_offset + full.summary.header_data_size) as usize;
    let f = PerfDataFile::from_bytes(&bytes[..data_end + 4]).unwrap();
    assert!(f.require_spe().is_ok());
    assert!(f.damage().is_none());
    assert!(
        problems(&f).contains("the file was cut"),
        "{}",
        problems(&f)
    );
}

#[test]
fn data_size_zero_is_scanned_to_the_end() {
    let dir = scratch_dir("zero");
    let rec = write_recording(&dir, "spe.data", SpeMetadataLayout::V1, &[], false);
    let mut bytes = std::fs::read(&rec.path).unwrap();
    let full = PerfDataFile::from_bytes(&bytes).unwrap();
    // What a killed `perf record` leaves: data size 0 and nothing after the records.
    let data_end = (full.summary.data_offset + full.summary.header_data_size) as usize;
    bytes.truncate(data_end);
    bytes[48..56].copy_from_slice(&0u64.to_le_bytes());
    let f = PerfDataFile::from_bytes(&bytes).unwrap();
    assert_eq!(f.summary.problems[0].kind, ProblemKind::DataSizeZero);
    assert!(f.summary.problems[0].message.contains("data size is 0"));
    assert_eq!(f.summary.problem_count, 1, "{}", problems(&f));
    assert_eq!(f.aux_streams, full.aux_streams);
    assert_eq!(f.sideband, full.sideband);
    assert!(f.spe.is_some());
    assert!(f.features.hostname.is_none());
}

#[test]
fn clear_errors_for_files_that_are_not_spe_perf_data() {
    let dir = scratch_dir("errors");
    // A raw SPE buffer (the shared test vector recorded on Arm hardware).
    let raw = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/spe/spe-b1-ts1.data");
    let e = PerfDataFile::open(&raw).unwrap_err().to_string();
    assert!(
        e.contains("not a perf.data file: looks like a raw SPE buffer; use --raw"),
        "{e}"
    );
    let e = PerfDataFile::from_bytes(b"hello, this is text\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("not a perf.data file") && e.contains("hello"),
        "{e}"
    );
    let e = PerfDataFile::from_bytes(b"").unwrap_err().to_string();
    assert!(e.contains("empty"), "{e}");
    let e = PerfDataFile::open(dir.join("missing.data"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.data: cannot open"), "{e}");

    let rec = write_recording(&dir, "spe.data", SpeMetadataLayout::V2, &[], false);
    let bytes = std::fs::read(&rec.path).unwrap();
    let mut be = bytes.clone();
    be[0..8].copy_from_slice(b"2ELIFREP");
    assert!(matches!(
        PerfDataFile::from_bytes(&be),
        Err(PerfError::BigEndian { .. })
    ));

    // Pipe mode, as `perf record -o -` writes it.
    let out = std::process::Command::new("perf")
        .args(["record", "-q", "-o", "-", "-e", "cpu-clock", "--", "true"])
        .output()
        .expect("perf");
    let e = PerfDataFile::from_bytes(&out.stdout)
        .unwrap_err()
        .to_string();
    assert!(e.contains("pipe-mode perf.data"), "{e}");

    // AUXTRACE_INFO of another tracer, and an unknown SPE metadata version.
    let f = PerfDataFile::from_bytes(&bytes).unwrap();
    let at = f.auxtrace_info.as_ref().unwrap().offset as usize;
    let mut pt = bytes.clone();
    pt[at + 8..at + 12].copy_from_slice(&1u32.to_le_bytes());
    let e = PerfDataFile::from_bytes(&pt)
        .unwrap()
        .require_spe()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!(
            "contains Intel PT data (PERF_RECORD_AUXTRACE_INFO type 1 at byte {at})"
        )),
        "{e}"
    );
    let mut v7 = bytes.clone();
    v7[at + 16..at + 24].copy_from_slice(&7u64.to_le_bytes());
    let e = PerfDataFile::from_bytes(&v7)
        .unwrap()
        .require_spe()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("at byte {at}")) && e.contains("unknown Arm SPE metadata version 7"),
        "{e}"
    );
    let _ = Midr(0);
}

/// Random headers (valid magic, random sections and sizes) and random bodies never panic.
#[test]
fn random_headers_never_panic() {
    let mut state = 0x1234_5678_9abc_def1u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..4000 {
        let len = 104 + (next() % 1500) as usize;
        let mut b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        b[0..8].copy_from_slice(b"PERFILE2");
        // Mostly plausible values, sometimes huge ones.
        let small = |v: u64, m: u64| if v % 5 == 0 { v } else { v % m };
        let fields = [
            104,
            small(next(), 200),
            small(next(), len as u64),
            small(next(), 600),
            small(next(), len as u64),
            small(next(), len as u64),
        ];
        for (i, v) in fields.iter().enumerate() {
            b[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        if next() % 2 == 0 && len > 400 {
            // A valid attrs section so that the data walk and features run on random bytes.
            for (at, v) in [(16, 144u64), (24, 104), (32, 144), (40, 248)] {
                b[at..at + 8].copy_from_slice(&v.to_le_bytes());
            }
            b[108..112].copy_from_slice(&128u32.to_le_bytes());
            b[232..248].copy_from_slice(&[0; 16]);
            if next() % 2 == 0 {
                let size = (len - 248) as u64 - next() % 64;
                b[48..56].copy_from_slice(&size.to_le_bytes());
            }
        }
        if let Ok(f) = PerfDataFile::from_bytes(&b) {
            let _ = f.require_spe();
            let mut buf = Vec::new();
            for s in &f.aux_streams {
                for c in &s.chunks {
                    let _ = f.read_chunk(c, &mut buf);
                }
            }
        }
    }
}

/// More CPUs than one PERF_RECORD_ID_INDEX can list (2047 entries of 32 bytes, two events per
/// CPU): the writer splits it over several records, as perf does, and the file reads back.
#[test]
fn many_cpus_split_the_id_index() {
    let dir = scratch_dir("many-cpus");
    let path = dir.join("spe.data");
    let cpus = 3000u32;
    let spec = RecordingSpec {
        cpus: (0..cpus).collect(),
        nr_cpus_available: cpus,
        nr_cpus_online: cpus,
        midr: CpuModel::NeoverseN1.midr(),
        ..RecordingSpec::default()
    };
    let mut w = SpeRecordingWriter::create(&path, spec).unwrap();
    let task = Task::new(1, 1);
    for cpu in [0, cpus - 1] {
        w.aux(cpu, task, 1000, AuxFlags(0), &[0u8; 64]).unwrap();
    }
    w.finish().unwrap();
    let f = PerfDataFile::open(&path).unwrap();
    let with_data: Vec<Option<u32>> = f.aux_streams.iter().map(|s| s.cpu).collect();
    assert_eq!(with_data, [Some(0), Some(cpus - 1)]);
}

#[test]
fn a_damaged_build_id_table_is_a_counted_problem_not_a_panic() {
    let dir = scratch_dir("build-id-table");
    let path = dir.join("ids.data");
    let mut w = SpeRecordingWriter::create(&path, RecordingSpec::default()).unwrap();
    let entry = |name: &str, byte: u8| BuildIdEntry {
        cpu_mode: 2,
        pid: -1,
        build_id: BuildId(vec![byte; 20]),
        path: name.into(),
    };
    let entries = vec![entry("/bin/a", 0xaa), entry("/bin/b", 0xbb)];
    w.set_build_ids(entries.clone());
    w.finish().unwrap();
    let good = std::fs::read(&path).unwrap();
    let f = PerfDataFile::from_bytes(&good).unwrap();
    assert_eq!(f.features.build_ids, entries);
    assert!(f.summary.is_clean(), "{}", problems(&f));

    // The second entry's header.size (bytes 6-7 of its perf_event_header) made too large:
    // found by its file name, 36 bytes after the entry's start.
    let name_at = good.windows(6).position(|w| w == b"/bin/b").unwrap();
    let mut bad = good.clone();
    bad[name_at - 36 + 6..name_at - 36 + 8].copy_from_slice(&u16::MAX.to_le_bytes());
    let f = PerfDataFile::from_bytes(&bad).unwrap();
    assert_eq!(f.features.build_ids, entries[..1]);
    assert_eq!(f.summary.problem_count, 1, "{}", problems(&f));
    assert!(problems(&f).contains("build-id table"), "{}", problems(&f));
}
