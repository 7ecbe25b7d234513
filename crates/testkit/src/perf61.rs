//! Linux perf 6.1 as an independent oracle: run it on a perf.data, parse what it prints, and
//! state what it should print for a packet spelunk decoded.
//!
//! The expectations below are spelunk's own decode (the Arm ARM semantics in `spelunk-spe`)
//! rendered in the vocabulary perf 6.1 uses in `perf report -D`, as observed from perf's output
//! (black box; perf's code is GPL and was not read for this). Where perf 6.1 predates an
//! encoding, the expectation is the generic form perf prints; each such limitation is listed:
//!
//! - Events: perf 6.1 names bits 0–11, 17 and 18 only; other bits print nothing.
//! - Load/store subclasses: MTE-tag, memory copy/set, GCS and unknown subclasses print as a bare
//!   `LD`/`ST`; SVE/SME register accesses print `EVLEN n [PRED] [SG]` without a subclass name.
//! - Branches: `IND` only when no bit other than COND and IND is set (call/return hints and GCS
//!   make perf 6.1 print a bare `B`/`B COND`).
//! - Other class: anything but an SVE operation prints `OTHER COND-SELECT` (bit 0 set) or
//!   `OTHER INSN-OTHER`; SME operations and the FP/ASE bits are not shown.
//! - Data virtual addresses print the whole 64-bit payload (tag byte included); addresses with
//!   index ≥ 4 print as `ADDR 0x<payload> (<index>)`; counters with index ≥ 3 print `LAT <v>`.
//! - A packet cut off by the end of an AUXTRACE buffer prints `Bad packet!` and the dump goes on
//!   one byte later (it looks at one buffer at a time); spelunk's stream decoder carries the
//!   packet into the next buffer instead.
//! - PAD runs print in pieces of at most 16 bytes (compare merged runs).
//! - An extended header followed by 0x00 is, for perf 6.1, an "alignment" pad whose length it
//!   derives from the host memory address of its own buffer (so the same bytes dump differently
//!   from run to run). The Arm ARM material spelunk follows defines the extended header for
//!   ADDRESS and COUNTER packets only, so spelunk treats the pair as a reserved header and skips
//!   (and counts) one byte. Differential streams avoid the pair ([`avoid_alignment_pairs`]).
//! - Bug: TIMESTAMP and 8-byte DATA-SOURCE values ≥ 2^63 print as negative numbers (a signed
//!   format for unsigned fields).

use spelunk_spe::{
    CodeAddress, DataPhysicalAddress, DataSource, DataSourceEncoding, DataVirtualAddress, Event,
    Events, LoadStoreKind, OpType, Operation, Packet, SpeSample,
};
use std::path::Path;
use std::process::Command;

/// Runs `perf ARGS`, returning (stdout, stderr, success). Fails clearly when perf is missing.
pub fn perf(args: &[&str]) -> (String, String, bool) {
    let out = Command::new("perf")
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run `perf` ({e}); install Debian's linux-perf (make test does this)")
        });
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

/// One packet line of `perf report -D`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpLine {
    pub offset: usize,
    pub bytes: Vec<u8>,
    pub desc: String,
}

/// The packets perf dumped for one PERF_RECORD_AUXTRACE.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DumpBuffer {
    pub cpu: u32,
    pub aux_offset: u64,
    pub size: u64,
    pub lines: Vec<DumpLine>,
}

fn field(line: &str, name: &str) -> Option<u64> {
    let i = line.find(name)? + name.len();
    let v = line[i..].split_whitespace().next()?;
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

/// Parses the ARM SPE packet dumps of `perf report -D` output, one per AUXTRACE record.
pub fn parse_dump(text: &str) -> Vec<DumpBuffer> {
    let mut out: Vec<DumpBuffer> = Vec::new();
    let mut in_buffer = false;
    for line in text.lines() {
        if line.contains("PERF_RECORD_AUXTRACE size:") {
            out.push(DumpBuffer {
                cpu: field(line, "cpu: ").unwrap_or(u64::MAX) as u32,
                aux_offset: field(line, "offset: ").unwrap_or(0),
                size: field(line, "size: ").unwrap_or(0),
                lines: Vec::new(),
            });
            in_buffer = true;
            continue;
        }
        if !in_buffer {
            continue;
        }
        // ".  00000013:  49 01                                           ST GP-REG"
        let Some(rest) = line.strip_prefix(".  ") else {
            if !line.starts_with('.') {
                in_buffer = false;
            }
            continue;
        };
        let Some((off, tail)) = rest.split_once(":  ") else {
            continue;
        };
        let Ok(offset) = usize::from_str_radix(off.trim(), 16) else {
            continue;
        };
        // Hex bytes are two-digit tokens separated by single spaces; the description follows
        // after a run of spaces (or, for a 16-byte line, a single space).
        let mut bytes = Vec::new();
        let mut i = 0;
        let t = tail.as_bytes();
        while i + 2 <= t.len()
            && t[i].is_ascii_hexdigit()
            && t[i + 1].is_ascii_hexdigit()
            && (i + 2 == t.len() || t[i + 2] == b' ')
            && bytes.len() < 16
        {
            bytes.push(u8::from_str_radix(&tail[i..i + 2], 16).unwrap_or(0));
            i += 3;
        }
        let desc = tail
            .get(i.min(tail.len())..)
            .unwrap_or("")
            .trim()
            .to_string();
        if let Some(b) = out.last_mut() {
            b.lines.push(DumpLine {
                offset,
                bytes,
                desc,
            });
        }
    }
    out
}

/// Event names perf 6.1 prints, in the order it prints them.
const PERF61_EVENTS: [Event; 14] = [
    Event::ExceptionGenerated,
    Event::Retired,
    Event::L1dAccess,
    Event::L1dRefill,
    Event::TlbAccess,
    Event::TlbWalk,
    Event::NotTaken,
    Event::Mispredicted,
    Event::LlcAccess,
    Event::LlcMiss,
    Event::RemoteAccess,
    Event::Alignment,
    Event::SvePartialPredicate,
    Event::SveEmptyPredicate,
];

/// What perf 6.1's `report -D` prints for a packet spelunk decoded (see the module docs).
pub fn expected_dump_desc(p: &Packet) -> String {
    match *p {
        Packet::Pad => "PAD".into(),
        Packet::End => "END".into(),
        // perf 6.1 bug: it prints the unsigned timestamp with a signed format, so values at or
        // above 2^63 appear negative. spelunk keeps them unsigned.
        Packet::Timestamp(t) => format!("TS {}", t as i64),
        Packet::Events { bits, .. } => {
            let mut s = String::from("EV");
            for e in PERF61_EVENTS {
                if Events(bits).contains(e) {
                    s.push(' ');
                    s.push_str(e.name());
                }
            }
            s
        }
        // Same signed-format bug as TIMESTAMP for 8-byte data-source payloads.
        Packet::DataSource { value, .. } => format!("DATA-SOURCE {}", value as i64),
        Packet::Context { index, id } => format!("CONTEXT 0x{id:x} el{}", index + 1),
        Packet::OpType { class, payload } => op_desc(OpType { class, payload }),
        Packet::Address { index, payload, .. } => {
            let code = CodeAddress(payload);
            let pa = DataPhysicalAddress(payload);
            match index {
                0 => format!(
                    "PC 0x{:x} el{} ns={}",
                    code.raw_addr(),
                    code.el(),
                    code.ns() as u8
                ),
                1 => format!(
                    "TGT 0x{:x} el{} ns={}",
                    code.raw_addr(),
                    code.el(),
                    code.ns() as u8
                ),
                2 => format!("VA 0x{payload:x}"),
                3 => format!(
                    "PA 0x{:x} ns={} ch={} pat={:x}",
                    pa.pa(),
                    pa.ns() as u8,
                    pa.ch() as u8,
                    pa.pat()
                ),
                _ => format!("ADDR 0x{payload:x} ({index})"),
            }
        }
        Packet::Counter { index, value, .. } => match index {
            0 => format!("LAT {value} TOT"),
            1 => format!("LAT {value} ISSUE"),
            2 => format!("LAT {value} XLAT"),
            _ => format!("LAT {value}"),
        },
    }
}

fn op_desc(op: OpType) -> String {
    let v = op.payload;
    match op.operation() {
        Operation::Reserved { payload } => format!("OP-TYPE 0x{payload:x} ({})", op.class),
        Operation::SveOther {
            evl_bits,
            predicated,
            floating_point,
        } => {
            let mut s = format!("SVE-OTHER EVLEN {evl_bits}");
            if floating_point {
                s += " FP";
            }
            if predicated {
                s += " PRED";
            }
            s
        }
        Operation::Other { .. } | Operation::SmeOther { .. } | Operation::OtherUnknown(_) => {
            if v & 1 == 1 {
                "OTHER COND-SELECT"
            } else {
                "OTHER INSN-OTHER"
            }
            .into()
        }
        Operation::LoadStore { store, kind } => {
            let mut s = String::from(if store { "ST" } else { "LD" });
            match kind {
                LoadStoreKind::GpReg => s += " GP-REG",
                LoadStoreKind::SimdFp => s += " SIMD-FP",
                LoadStoreKind::UnspecifiedReg => s += " UNSPEC-REG",
                LoadStoreKind::NvSysReg => s += " NV-SYSREG",
                LoadStoreKind::Extended {
                    atomic,
                    exclusive,
                    acquire_release,
                } => {
                    if atomic {
                        s += " AT";
                    }
                    if exclusive {
                        s += " EXCL";
                    }
                    if acquire_release {
                        s += " AR";
                    }
                }
                LoadStoreKind::SveSme {
                    evl_bits,
                    predicated,
                    gather_scatter,
                } => {
                    s += &format!(" EVLEN {evl_bits}");
                    if predicated {
                        s += " PRED";
                    }
                    if gather_scatter {
                        s += " SG";
                    }
                }
                LoadStoreKind::MteTag
                | LoadStoreKind::MemCopy
                | LoadStoreKind::MemSet
                | LoadStoreKind::Gcs { .. }
                | LoadStoreKind::Unknown(_) => {}
            }
            s
        }
        Operation::Branch { conditional, .. } => {
            let mut s = String::from("B");
            if conditional {
                s += " COND";
            }
            if v & 0xfe == 0x02 {
                s += " IND";
            }
            s
        }
    }
}

/// A buffer as spelunk decodes it, in dump form: (offset, length, description), PAD runs
/// merged. perf's dump steps one byte past anything it cannot decode — an unknown header, or a
/// packet cut off by the end of the buffer (it looks at one buffer at a time) — and prints
/// `Bad packet!`; the same walk is done here with spelunk's packet decoder.
pub fn spelunk_dump(buf: &[u8]) -> Vec<(usize, usize, String)> {
    let mut out: Vec<(usize, usize, String)> = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        match spelunk_spe::decode_packet(&buf[pos..]) {
            Ok((p, n)) => {
                out.push((pos, n, expected_dump_desc(&p)));
                pos += n;
            }
            Err(_) => {
                out.push((pos, 1, "Bad packet!".into()));
                pos += 1;
            }
        }
    }
    merge_pads(out)
}

/// Rewrites every extended-header byte (0x20–0x23) followed by 0x00 — or ending the stream, where
/// the writer's zero padding will follow — to 0x24 (a reserved header for both decoders), so a
/// generated stream never contains perf 6.1's host-address-dependent "alignment" packet (see the
/// module docs).
pub fn avoid_alignment_pairs(b: &mut [u8]) {
    for i in 0..b.len() {
        if (0x20..=0x23).contains(&b[i]) && b.get(i + 1).is_none_or(|n| *n == 0) {
            b[i] = 0x24;
        }
    }
}

/// perf's dump lines in the same (offset, length, description) form, PAD runs merged.
pub fn perf_dump(lines: &[DumpLine]) -> Vec<(usize, usize, String)> {
    merge_pads(
        lines
            .iter()
            .map(|l| (l.offset, l.bytes.len(), l.desc.clone()))
            .collect(),
    )
}

fn merge_pads(items: Vec<(usize, usize, String)>) -> Vec<(usize, usize, String)> {
    let mut out: Vec<(usize, usize, String)> = Vec::with_capacity(items.len());
    for it in items {
        if it.2 == "PAD" {
            if let Some(last) = out.last_mut() {
                if last.2 == "PAD" && last.0 + last.1 == it.0 {
                    last.1 += it.1;
                    continue;
                }
            }
        }
        out.push(it);
    }
    out
}

/// One sample line of `perf script -F event,cpu,time,ip,addr,phys_addr,weight,data_src --ns`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ScriptSample {
    pub event: String,
    pub cpu: u32,
    pub time: String,
    pub ip: u64,
    pub addr: u64,
    pub phys_addr: u64,
    pub weight: u64,
    /// perf's rendering of the data source, e.g. `L1 or L1 hit/None` (level / snoop), or `N/A`.
    pub level: String,
}

/// The `-F` list [`parse_script`] understands.
pub const SCRIPT_FIELDS: &str = "event,cpu,time,ip,addr,phys_addr,weight,data_src";

/// Parses `perf script -F SCRIPT_FIELDS --ns` output.
pub fn parse_script(text: &str) -> Vec<ScriptSample> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix('[') else {
            continue;
        };
        let Some((cpu, rest)) = rest.split_once(']') else {
            continue;
        };
        let mut it = rest.split_whitespace();
        let (Some(time), Some(event)) = (it.next(), it.next()) else {
            continue;
        };
        let Some(addr) = it.next() else { continue };
        // data_src: "<hex> |OP LOAD|LVL L1 or L1 hit|SNP None|TLB ...|LCK No|BLK  N/A"
        let Some(bar) = line.find('|') else { continue };
        let after = &line[bar..];
        let ds_end = after.find("BLK").map(|i| i + 3).unwrap_or(after.len());
        let ds = &after[..ds_end];
        let lvl = ds
            .split('|')
            .find_map(|f| f.strip_prefix("LVL "))
            .unwrap_or("")
            .trim();
        let snp = ds
            .split('|')
            .find_map(|f| f.strip_prefix("SNP "))
            .unwrap_or("")
            .trim();
        let tail: Vec<&str> = after[ds_end..].split_whitespace().collect();
        // After "BLK  N/A": weight, ip, phys_addr.
        if tail.len() < 4 {
            continue;
        }
        let hex = |s: &str| u64::from_str_radix(s, 16).unwrap_or(u64::MAX);
        out.push(ScriptSample {
            event: event.trim_end_matches(':').to_string(),
            cpu: cpu.trim().parse().unwrap_or(u32::MAX),
            time: time.trim_end_matches(':').to_string(),
            ip: hex(tail[2]),
            addr: hex(addr),
            phys_addr: hex(tail[3]),
            weight: tail[1].parse().unwrap_or(u64::MAX),
            level: format!("{lvl}/{snp}"),
        });
    }
    out
}

/// perf's `--ns` time text for a perf time in ns: `S.NNNNNNNNN`.
pub fn script_time(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// How perf 6.1 labels the data source of a load on a Neoverse N1 (`level/snoop` from its
/// `data_src` rendering), as observed for every N1 value 0–15 (values the N1 table does not
/// define print `N/A`; so do loads without a Data Source packet).
pub fn expected_load_level(ds: Option<DataSource>) -> &'static str {
    match ds {
        Some(DataSource::L1D) => "L1 or L1 hit/None",
        Some(DataSource::L2) => "L2 or L2 hit/None",
        Some(DataSource::PeerCore) => "L2 or L2 hit/Peer",
        Some(DataSource::LocalCluster) | Some(DataSource::PeerCluster) => "L3 or L3 hit/Peer",
        Some(DataSource::SystemCache) => "L3 or L3 hit/Hit",
        Some(DataSource::Remote) => "Remote N/A or N/A/Peer",
        Some(DataSource::Dram) => "Local RAM or RAM hit/None",
        _ => "N/A/N/A",
    }
}

/// Writes `bytes` (one SPE stream per element) as AUX buffers of CPU 0 in a perf.data at `path`.
pub fn write_streams(path: &Path, streams: &[Vec<u8>]) -> Result<(), spelunk_perf::PerfError> {
    use spelunk_perf::{AuxFlags, RecordingSpec, SpeRecordingWriter, Task};
    let mut w = SpeRecordingWriter::create(path, RecordingSpec::default())?;
    for (i, s) in streams.iter().enumerate() {
        w.aux(0, Task::new(1, 1), 1000 + i as u64, AuxFlags(0), s)?;
    }
    w.finish()?;
    Ok(())
}

/// perf script's sample categories: one sample per set event bit.
pub const CATEGORIES: [(Event, &str); 8] = [
    (Event::L1dRefill, "l1d-miss"),
    (Event::L1dAccess, "l1d-access"),
    (Event::LlcMiss, "llc-miss"),
    (Event::LlcAccess, "llc-access"),
    (Event::TlbWalk, "tlb-miss"),
    (Event::TlbAccess, "tlb-access"),
    (Event::Mispredicted, "branch-miss"),
    (Event::RemoteAccess, "remote-access"),
];

/// perf 6.1's data-address rule: the 56-bit address, with the top byte filled only when bits
/// \[55:52\] are all ones (its kernel-address heuristic). spelunk sign-extends from bit 55 (the
/// architectural TTBR1 rule); the two agree for every real Linux address.
/// perf 6.1's code-address rule (PC, branch target): the 56-bit address, with the top byte
/// filled when NS=1 and the exception level is 1 or 2 (kernel code). spelunk sign-extends from
/// bit 55; again the two agree for every real Linux address.
fn perf_code_va(a: CodeAddress) -> u64 {
    if a.ns() && matches!(a.el(), 1 | 2) {
        a.raw_addr() | (0xff << 56)
    } else {
        a.raw_addr()
    }
}

fn perf_data_va(va: DataVirtualAddress) -> u64 {
    let a = va.raw_addr();
    if (a >> 52) & 0xf == 0xf {
        a | (0xff << 56)
    } else {
        a
    }
}

/// The samples perf 6.1 should print for one sample spelunk decoded.
pub fn predict_script(s: &SpeSample) -> Vec<ScriptSample> {
    let r = &s.record;
    let op = r.op.unwrap();
    let is_mem_op = op.is_load() || op.is_store();
    let ev = r.events.unwrap_or_default();
    // perf 6.1 treats loads/stores/atomics and (a quirk) SVE data-processing operations as memory
    // operations: they get a `memory` sample, and a data-source level unless they are stores (a
    // missing Data Source packet counts as value 0). Other operations have no level.
    let sve_other = matches!(op.operation(), Operation::SveOther { .. });
    let level = if op.is_store() {
        "N/A or N/A/N/A"
    } else if op.is_load() || sve_other {
        expected_load_level(DataSourceEncoding::Common.decode(r.data_source.unwrap_or(0)))
    } else {
        "N/A/N/A"
    };
    let base = ScriptSample {
        event: String::new(),
        cpu: s.cpu.unwrap(),
        time: script_time(s.time_ns.unwrap()),
        ip: r.pc.map_or(0, perf_code_va),
        addr: r.data_va.map_or(0, perf_data_va),
        phys_addr: r.data_pa.map_or(0, |a| a.pa()),
        weight: u64::from(r.total_latency_cycles.unwrap_or(0)),
        level: level.to_string(),
    };
    let mut out: Vec<ScriptSample> = CATEGORIES
        .iter()
        .filter(|(e, _)| ev.contains(*e))
        .map(|(e, name)| {
            if *e == Event::Mispredicted {
                // A branch-miss sample carries the branch target and no data fields.
                ScriptSample {
                    event: name.to_string(),
                    addr: r.branch_target.map_or(0, perf_code_va),
                    phys_addr: 0,
                    level: "N/A/N/A".into(),
                    ..base.clone()
                }
            } else {
                ScriptSample {
                    event: name.to_string(),
                    ..base.clone()
                }
            }
        })
        .collect();
    if is_mem_op || sve_other {
        out.push(ScriptSample {
            event: "memory".into(),
            ..base
        });
    }
    out
}
