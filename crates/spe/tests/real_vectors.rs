//! Decoding real SPE bytes recorded on Arm hardware by third parties, checked against the
//! decodes their tools produced (tests/data/spe/README.md gives provenance).

use spelunk_spe::{decode_packet, decode_records, Operation, Packet, PacketReader, Terminator};
use std::path::PathBuf;

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/spe")
}

fn hex_bytes(s: &str) -> Vec<u8> {
    let digits: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    assert!(digits.len() % 2 == 0, "odd hex length in {s}");
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap())
        .collect()
}

/// Every packet of the 23 (bytes -> expected text) pairs from Arm's spe-parser test-suite.
#[test]
fn packet_oracles_from_arm_spe_parser() {
    let text =
        std::fs::read_to_string(data_dir().join("packet_oracles_from_test_spe_decoder.json"))
            .unwrap();
    let oracles: serde_json::Value = serde_json::from_str(&text).unwrap();
    let oracles = oracles.as_array().unwrap();
    assert_eq!(oracles.len(), 23);
    let mut checked_packets = 0;
    for o in oracles {
        let bytes = hex_bytes(o["hex"].as_str().unwrap());
        let expected: Vec<String> = match &o["expected"] {
            serde_json::Value::String(s) => vec![s.clone()],
            serde_json::Value::Array(a) => {
                a.iter().map(|v| v.as_str().unwrap().to_string()).collect()
            }
            other => panic!("unexpected oracle {other}"),
        };
        let mut got = Vec::new();
        for item in PacketReader::new(&bytes) {
            let (_, p) = item.unwrap_or_else(|(off, e)| panic!("{}: offset {off}: {e}", o["test"]));
            if p != Packet::Pad {
                got.push(p.to_string());
            }
        }
        assert_eq!(got, expected, "oracle {} ({})", o["test"], o["hex"]);
        checked_packets += got.len();
        // The encoder reproduces the bytes of every packet exactly.
        let mut re = Vec::new();
        let mut pos = 0;
        while pos < bytes.len() {
            let (p, n) = decode_packet(&bytes[pos..]).unwrap();
            p.encode(&mut re);
            pos += n;
        }
        assert_eq!(re, bytes);
    }
    assert_eq!(checked_packets, 20 + 10 + 7 + 7);
}

/// The spe-parser CSV for a WindowsPerf buffer: header row and one data row.
fn parse_csv(name: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(data_dir().join(name)).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .unwrap()
        .split(',')
        .map(|s| s.trim_matches('"').to_string())
        .collect();
    let row: Vec<String> = lines
        .next()
        .unwrap()
        .split(',')
        .map(|s| s.to_string())
        .collect();
    assert_eq!(header.len(), row.len());
    header.into_iter().zip(row).collect()
}

fn field<'a>(row: &'a [(String, String)], name: &str) -> &'a str {
    &row.iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no column {name}"))
        .1
}

fn check_windowsperf_buffer(data: &str, csv: &str) {
    let bytes = std::fs::read(data_dir().join(data)).unwrap();
    assert_eq!(bytes.len(), 64);
    let (recs, stats, issues) = decode_records(&bytes);
    assert!(
        issues.is_empty() && !stats.has_losses(),
        "{stats:?} {issues:?}"
    );
    assert_eq!(recs.len(), 1);
    let r = &recs[0];
    let row = parse_csv(csv);
    assert_eq!(field(&row, "op"), "B");
    let op = r.op.unwrap().operation();
    let Operation::Branch {
        conditional,
        indirect,
        ..
    } = op
    else {
        panic!("not a branch: {op:?}")
    };
    assert_eq!(conditional.to_string(), field(&row, "condition"));
    assert_eq!(indirect.to_string(), field(&row, "indirect"));
    let pc = r.pc.unwrap();
    assert_eq!(format!("0x{:x}", pc.va()), field(&row, "pc"));
    assert_eq!(pc.el().to_string(), field(&row, "el"));
    let tgt = r.branch_target.unwrap();
    assert_eq!(format!("0x{:x}", tgt.va()), field(&row, "br_tgt"));
    assert_eq!(tgt.el().to_string(), field(&row, "br_tgt_lvl"));
    assert_eq!(
        r.events.unwrap().join(&Default::default(), ":"),
        field(&row, "event")
    );
    assert_eq!(
        r.issue_latency_cycles.unwrap().to_string(),
        field(&row, "issue_lat")
    );
    assert_eq!(
        r.total_latency_cycles.unwrap().to_string(),
        field(&row, "total_lat")
    );
    assert!(r.prev_branch_target.is_none() && field(&row, "pbt").is_empty());
    assert!(
        r.context_el1.is_none() && r.context_el2.is_none() && field(&row, "context").is_empty()
    );
    // spe-parser prints 0 for an absent timestamp; spelunk keeps it absent.
    match r.timestamp {
        Some(ts) => {
            assert_eq!(ts.to_string(), field(&row, "ts"));
            assert_eq!(r.terminator, Terminator::Timestamp);
        }
        None => {
            assert_eq!(field(&row, "ts"), "0");
            assert_eq!(r.terminator, Terminator::End);
        }
    }
}

#[test]
fn windowsperf_branch_buffer_without_timestamp() {
    check_windowsperf_buffer("spe-b1-ts0.data", "spe-b1-ts0.csv");
}

#[test]
fn windowsperf_branch_buffer_with_timestamp() {
    check_windowsperf_buffer("spe-b1-ts1.data", "spe-b1-ts1.csv");
}
