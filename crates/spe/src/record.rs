//! SPE records: the packets of one sampled operation, grouped.
//!
//! A record is a run of packets ended by an END packet or by a TIMESTAMP packet (the timestamp
//! belongs to the record it ends). PAD packets may appear anywhere and are ignored. Nothing here
//! assumes a record size: Neoverse N1 writes 64-byte records with PAD in absent slots, other cores
//! write compact records.

use crate::address::{CodeAddress, DataPhysicalAddress, DataVirtualAddress};
use crate::events::Events;
use crate::op::{OpClass, OpType};
use crate::packet::{
    address_index, counter_index, decode_packet, Packet, PacketError, PayloadSize, MAX_PACKET_LEN,
};

/// How a record ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Terminator {
    /// Not terminated: a new record started (a second PC address) before END/TIMESTAMP.
    #[default]
    None,
    End,
    Timestamp,
}

/// One sampled operation. Absent packets are `None`; values are raw (see the accessor types).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpeRecord {
    pub pc: Option<CodeAddress>,
    pub branch_target: Option<CodeAddress>,
    pub prev_branch_target: Option<CodeAddress>,
    pub data_va: Option<DataVirtualAddress>,
    pub data_pa: Option<DataPhysicalAddress>,
    pub op: Option<OpType>,
    pub events: Option<Events>,
    /// Raw Data Source packet value; decode with [`crate::DataSourceEncoding`].
    pub data_source: Option<u64>,
    pub total_latency_cycles: Option<u16>,
    pub issue_latency_cycles: Option<u16>,
    pub translation_latency_cycles: Option<u16>,
    /// CONTEXTIDR_EL1 (the PID on kernels running at EL1 with CONFIG_PID_IN_CONTEXTIDR).
    pub context_el1: Option<u32>,
    /// CONTEXTIDR_EL2 (the PID on VHE kernels running at EL2).
    pub context_el2: Option<u32>,
    /// Raw timer value (CNTVCT/CNTPCT, as configured); convert with the recording's TIME_CONV.
    pub timestamp: Option<u64>,
    /// The first counter packet with an index spelunk does not name: (index, value).
    pub other_counter: Option<(u8, u16)>,
    /// The first address packet with an index spelunk does not name: (index, payload).
    pub other_address: Option<(u8, u64)>,
    pub terminator: Terminator,
}

/// Counter widths: PMSIDR_EL1.CountSize says whether counters saturate at 12 or 16 bits.
pub const COUNTER_SATURATED_12BIT: u16 = 0x0fff;
pub const COUNTER_SATURATED_16BIT: u16 = 0xffff;

/// True when a latency counter holds a saturated value (12- or 16-bit saturating counters).
#[inline]
pub fn counter_saturated(v: u16) -> bool {
    v == COUNTER_SATURATED_12BIT || v == COUNTER_SATURATED_16BIT
}

impl SpeRecord {
    /// Derived execution latency = total − issue − translation ([SPE methodology §2.3.2 and table 4.1]).
    /// `None` when total or issue latency is absent, when any present counter is saturated, or
    /// when the counters are inconsistent (issue + translation > total). Translation latency is
    /// treated as 0 when absent (non-memory operations have none).
    pub fn derived_execution_latency(&self) -> Option<u16> {
        let total = self.total_latency_cycles?;
        let issue = self.issue_latency_cycles?;
        let xlat = self.translation_latency_cycles.unwrap_or(0);
        if counter_saturated(total) || counter_saturated(issue) || counter_saturated(xlat) {
            return None;
        }
        total.checked_sub(issue)?.checked_sub(xlat)
    }

    /// True when any latency counter in the record saturated.
    pub fn any_counter_saturated(&self) -> bool {
        [
            self.total_latency_cycles,
            self.issue_latency_cycles,
            self.translation_latency_cycles,
        ]
        .iter()
        .flatten()
        .any(|v| counter_saturated(*v))
    }

    /// The thread id recorded by the CONTEXT packet: CONTEXTIDR_EL2 when present (VHE hosts),
    /// else CONTEXTIDR_EL1.
    pub fn context_tid(&self) -> Option<u32> {
        self.context_el2.or(self.context_el1)
    }

    /// Applies one packet to the record. Returns true when the packet ends the record.
    #[inline(always)]
    fn apply(&mut self, p: Packet) -> bool {
        match p {
            Packet::Pad => {}
            Packet::End => {
                self.terminator = Terminator::End;
                return true;
            }
            Packet::Timestamp(ts) => {
                self.timestamp = Some(ts);
                self.terminator = Terminator::Timestamp;
                return true;
            }
            Packet::Events { bits, .. } => self.events = Some(Events(bits)),
            Packet::DataSource { value, .. } => self.data_source = Some(value),
            Packet::Context { index, id } => match index {
                0 => self.context_el1 = Some(id),
                _ => self.context_el2 = Some(id),
            },
            Packet::OpType { class, payload } => self.op = Some(OpType { class, payload }),
            Packet::Address { index, payload, .. } => match index {
                address_index::PC => self.pc = Some(CodeAddress(payload)),
                address_index::BRANCH_TARGET => self.branch_target = Some(CodeAddress(payload)),
                address_index::DATA_VIRTUAL => self.data_va = Some(DataVirtualAddress(payload)),
                address_index::DATA_PHYSICAL => self.data_pa = Some(DataPhysicalAddress(payload)),
                address_index::PREV_BRANCH_TARGET => {
                    self.prev_branch_target = Some(CodeAddress(payload))
                }
                _ => {
                    if self.other_address.is_none() {
                        self.other_address = Some((index, payload));
                    }
                }
            },
            Packet::Counter { index, value, .. } => match index {
                counter_index::TOTAL_LATENCY => self.total_latency_cycles = Some(value),
                counter_index::ISSUE_LATENCY => self.issue_latency_cycles = Some(value),
                counter_index::TRANSLATION_LATENCY => self.translation_latency_cycles = Some(value),
                _ => {
                    if self.other_counter.is_none() {
                        self.other_counter = Some((index, value));
                    }
                }
            },
        }
        false
    }
}

/// What went wrong where, for error messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeIssue {
    /// Byte offset as given by the caller of [`RecordDecoder::feed`] (a file offset in practice).
    pub offset: u64,
    pub error: PacketError,
}

/// Counters of everything decoded, skipped or dropped. Nothing is lost silently.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeStats {
    /// Bytes fed to the decoder.
    pub bytes: u64,
    /// Packets decoded (PAD counted separately).
    pub packets: u64,
    pub pad_packets: u64,
    /// Records emitted (terminated or not).
    pub records: u64,
    /// Undecodable header bytes skipped while resynchronising.
    pub bad_bytes: u64,
    /// Partial records discarded because a bad byte interrupted them.
    pub dropped_records: u64,
    /// Records closed by the start of the next record instead of END/TIMESTAMP (emitted).
    pub unterminated_records: u64,
    /// Partial records discarded at a discontinuity or at the end of the stream.
    pub incomplete_records: u64,
    /// Packets cut off at a discontinuity or at the end of the stream.
    pub truncated_packets: u64,
    /// Address/counter packets with an index spelunk does not name.
    pub unknown_index_packets: u64,
}

impl DecodeStats {
    pub fn add(&mut self, o: &DecodeStats) {
        self.bytes += o.bytes;
        self.packets += o.packets;
        self.pad_packets += o.pad_packets;
        self.records += o.records;
        self.bad_bytes += o.bad_bytes;
        self.dropped_records += o.dropped_records;
        self.unterminated_records += o.unterminated_records;
        self.incomplete_records += o.incomplete_records;
        self.truncated_packets += o.truncated_packets;
        self.unknown_index_packets += o.unknown_index_packets;
    }

    /// True when anything was skipped or dropped.
    pub fn has_losses(&self) -> bool {
        self.bad_bytes + self.dropped_records + self.incomplete_records + self.truncated_packets > 0
    }
}

/// How many [`DecodeIssue`]s a decoder keeps (the stats count all of them).
pub const MAX_KEPT_ISSUES: usize = 32;

/// Streaming record decoder for one AUX stream (one CPU). Feed it consecutive chunks; packets
/// and records may straddle chunk boundaries. Memory use is constant.
#[derive(Clone, Debug, Default)]
pub struct RecordDecoder {
    cur: SpeRecord,
    open: bool,
    carry: [u8; MAX_PACKET_LEN],
    carry_len: usize,
    carry_offset: u64,
    stats: DecodeStats,
    issues: Vec<DecodeIssue>,
}

impl RecordDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn stats(&self) -> &DecodeStats {
        &self.stats
    }

    /// The first [`MAX_KEPT_ISSUES`] problems, with offsets.
    pub fn issues(&self) -> &[DecodeIssue] {
        &self.issues
    }

    /// Whether the decoder is between records (no packet and no record in progress): a fresh
    /// decoder then decodes the rest of the stream exactly as this one would. Parts of a stream
    /// can so be decoded apart, in parallel, and checked afterwards.
    pub fn at_record_boundary(&self) -> bool {
        !self.open && self.carry_len == 0
    }

    /// A decoder that goes on from where this one is in its stream (the packet and the record
    /// in progress) with no statistics or issues of its own: the next part's share of them.
    pub fn resumed(&self) -> RecordDecoder {
        RecordDecoder {
            cur: self.cur,
            open: self.open,
            carry: self.carry,
            carry_len: self.carry_len,
            carry_offset: self.carry_offset,
            stats: DecodeStats::default(),
            issues: Vec::new(),
        }
    }

    #[inline(always)]
    fn on_packet<F: FnMut(&SpeRecord)>(&mut self, p: Packet, out: &mut F) {
        match p {
            Packet::Pad => {
                self.stats.pad_packets += 1;
                return;
            }
            Packet::Address {
                index: address_index::PC,
                ..
            } if self.open && self.cur.pc.is_some() => {
                // A second PC: the previous record lost its END/TIMESTAMP. Emit it as unterminated.
                self.stats.unterminated_records += 1;
                self.emit(out);
            }
            Packet::Address { index, .. } if index > address_index::PREV_BRANCH_TARGET => {
                self.stats.unknown_index_packets += 1;
            }
            Packet::Counter { index, .. } if index > counter_index::TRANSLATION_LATENCY => {
                self.stats.unknown_index_packets += 1;
            }
            _ => {}
        }
        self.stats.packets += 1;
        self.open = true;
        if self.cur.apply(p) {
            self.emit(out);
        }
    }

    #[inline(always)]
    fn emit<F: FnMut(&SpeRecord)>(&mut self, out: &mut F) {
        out(&self.cur);
        self.stats.records += 1;
        self.cur = SpeRecord::default();
        self.open = false;
    }

    fn on_bad(&mut self, offset: u64, error: PacketError) {
        self.stats.bad_bytes += 1;
        if self.open {
            self.stats.dropped_records += 1;
            self.cur = SpeRecord::default();
            self.open = false;
        }
        if self.issues.len() < MAX_KEPT_ISSUES {
            self.issues.push(DecodeIssue { offset, error });
        }
    }

    /// Decodes `data`, the next bytes of the stream. `offset` is where `data` starts in its file,
    /// used only for [`DecodeIssue`]s. Completed records are appended to `out`.
    pub fn feed(&mut self, data: &[u8], offset: u64, out: &mut Vec<SpeRecord>) {
        self.feed_each(data, offset, |r| out.push(*r));
    }

    /// Like [`RecordDecoder::feed`], but hands each completed record to `f` as it completes
    /// (no copy into a vector: for consumers that process records one by one).
    pub fn feed_each<F: FnMut(&SpeRecord)>(&mut self, data: &[u8], offset: u64, mut f: F) {
        let out = &mut f;
        self.stats.bytes += data.len() as u64;
        let mut pos = 0usize;
        if self.carry_len > 0 {
            // Complete the packet that straddled the previous chunk's end.
            let mut tmp = [0u8; 2 * MAX_PACKET_LEN];
            let take = data.len().min(MAX_PACKET_LEN);
            tmp[..self.carry_len].copy_from_slice(&self.carry[..self.carry_len]);
            tmp[self.carry_len..self.carry_len + take].copy_from_slice(&data[..take]);
            let avail = self.carry_len + take;
            match decode_packet(&tmp[..avail]) {
                Ok((p, n)) => {
                    pos = n - self.carry_len;
                    self.carry_len = 0;
                    self.on_packet(p, out);
                }
                Err(PacketError::Truncated { .. }) => {
                    // Still not enough bytes: keep accumulating.
                    self.carry[self.carry_len..avail].copy_from_slice(&data[..take]);
                    self.carry_len = avail;
                    return;
                }
                Err(e) => {
                    // The carried bytes start with a header that turned out bad (an extended
                    // header followed by a non-address/counter byte). Skip that byte and re-scan
                    // the rest of the carry followed by this chunk (rare path: allocation is fine).
                    let off = self.carry_offset;
                    self.on_bad(off, e);
                    let mut joined = self.carry[1..self.carry_len].to_vec();
                    self.carry_len = 0;
                    joined.extend_from_slice(data);
                    self.decode_slice_from(&joined, 0, off + 1, out);
                    return;
                }
            }
        }
        self.decode_slice_from(data, pos, offset, out);
    }

    #[inline]
    fn decode_slice_from<F: FnMut(&SpeRecord)>(
        &mut self,
        data: &[u8],
        mut pos: usize,
        offset: u64,
        out: &mut F,
    ) {
        while pos < data.len() {
            if data[pos] == 0 {
                // PAD run (N1 records are ~half padding): count it in one pass.
                let run = data[pos..].iter().take_while(|b| **b == 0).count();
                self.stats.pad_packets += run as u64;
                pos += run;
                continue;
            }
            match decode_packet(&data[pos..]) {
                Ok((p, n)) => {
                    pos += n;
                    self.on_packet(p, out);
                }
                Err(PacketError::Truncated { .. }) => {
                    let rest = &data[pos..];
                    self.carry[..rest.len()].copy_from_slice(rest);
                    self.carry_len = rest.len();
                    self.carry_offset = offset + pos as u64;
                    return;
                }
                Err(e) => {
                    self.on_bad(offset + pos as u64, e);
                    pos += 1;
                }
            }
        }
    }

    /// The stream has a gap (data lost or overwritten): a packet or record in progress cannot be
    /// completed and is counted as truncated/incomplete.
    pub fn discontinuity(&mut self) {
        if self.carry_len > 0 {
            self.stats.truncated_packets += 1;
            if self.issues.len() < MAX_KEPT_ISSUES {
                self.issues.push(DecodeIssue {
                    offset: self.carry_offset,
                    error: PacketError::Truncated {
                        needed: MAX_PACKET_LEN,
                        available: self.carry_len,
                    },
                });
            }
            self.carry_len = 0;
        }
        if self.open {
            self.stats.incomplete_records += 1;
            self.cur = SpeRecord::default();
            self.open = false;
        }
    }

    /// End of stream. Equivalent to a final [`RecordDecoder::discontinuity`].
    pub fn finish(&mut self) {
        self.discontinuity();
    }
}

/// Decodes a whole buffer into records (convenience for small inputs and tests).
pub fn decode_records(data: &[u8]) -> (Vec<SpeRecord>, DecodeStats, Vec<DecodeIssue>) {
    let mut d = RecordDecoder::new();
    let mut out = Vec::new();
    d.feed(data, 0, &mut out);
    d.finish();
    (out, d.stats, d.issues)
}

/// Byte layouts for writing records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecordLayout {
    /// Packets back to back, no padding (as some Cortex cores write: e.g. 48-byte records).
    Compact,
    /// Neoverse N1 style: fixed 64-byte records with a slot per packet and PAD in absent slots:
    /// PC(9) CONTEXT×2(10) OP(2) EVENTS(3) ISSUE(3) TOTAL(3) TGT-or-VA(9) XLAT(3) PA(9) DS(2) PAD(2)
    /// then TIMESTAMP(9) or PAD×8+END. Slot positions inferred from real N1 records
    /// (tests/data/spe/spe-b1-ts*.data, packet_oracles test_get_frame).
    N1Padded64,
}

impl SpeRecord {
    /// The record's packets in the canonical order (PC first, terminator last).
    pub fn packets(&self) -> Vec<Packet> {
        let mut v = Vec::with_capacity(16);
        let addr = |index: u8, payload: u64| Packet::Address {
            index,
            payload,
            extended: false,
        };
        let ctr = |index: u8, value: u16| Packet::Counter {
            index,
            value,
            extended: false,
        };
        if let Some(pc) = self.pc {
            v.push(addr(address_index::PC, pc.0));
        }
        if let Some(id) = self.context_el1 {
            v.push(Packet::Context { index: 0, id });
        }
        if let Some(id) = self.context_el2 {
            v.push(Packet::Context { index: 1, id });
        }
        if let Some(op) = self.op {
            v.push(Packet::OpType {
                class: op.class,
                payload: op.payload,
            });
        }
        if let Some(ev) = self.events {
            v.push(Packet::Events {
                bits: ev.0,
                size: PayloadSize::fitting(ev.0).max(PayloadSize::B2),
            });
        }
        if let Some(x) = self.issue_latency_cycles {
            v.push(ctr(counter_index::ISSUE_LATENCY, x));
        }
        if let Some(x) = self.total_latency_cycles {
            v.push(ctr(counter_index::TOTAL_LATENCY, x));
        }
        if let Some(t) = self.branch_target {
            v.push(addr(address_index::BRANCH_TARGET, t.0));
        }
        if let Some(va) = self.data_va {
            v.push(addr(address_index::DATA_VIRTUAL, va.0));
        }
        if let Some(x) = self.translation_latency_cycles {
            v.push(ctr(counter_index::TRANSLATION_LATENCY, x));
        }
        if let Some(pa) = self.data_pa {
            v.push(addr(address_index::DATA_PHYSICAL, pa.0));
        }
        if let Some(t) = self.prev_branch_target {
            v.push(addr(address_index::PREV_BRANCH_TARGET, t.0));
        }
        if let Some(ds) = self.data_source {
            v.push(Packet::DataSource {
                value: ds,
                size: PayloadSize::fitting(ds),
            });
        }
        if let Some((index, value)) = self.other_counter {
            v.push(Packet::Counter {
                index,
                value,
                extended: index > 7,
            });
        }
        if let Some((index, payload)) = self.other_address {
            v.push(Packet::Address {
                index,
                payload,
                extended: index > 7,
            });
        }
        match (self.terminator, self.timestamp) {
            (_, Some(ts)) => v.push(Packet::Timestamp(ts)),
            (Terminator::End, None) => v.push(Packet::End),
            (_, None) => {}
        }
        v
    }

    /// Appends the record's bytes in `layout`. A record with a timestamp ends with TIMESTAMP,
    /// otherwise with END. In [`RecordLayout::N1Padded64`] a record whose packets do not fit the
    /// N1 slots (both a branch target and a data address, extra packets, wide payloads) is written
    /// compactly instead; the result is still a valid SPE byte stream.
    pub fn encode(&self, layout: RecordLayout, out: &mut Vec<u8>) {
        let mut rec = *self;
        if rec.timestamp.is_none() {
            rec.terminator = Terminator::End;
        }
        match layout {
            RecordLayout::Compact => {
                for p in rec.packets() {
                    p.encode(out);
                }
            }
            RecordLayout::N1Padded64 => {
                if !rec.encode_n1(out) {
                    for p in rec.packets() {
                        p.encode(out);
                    }
                }
            }
        }
    }

    fn encode_n1(&self, out: &mut Vec<u8>) -> bool {
        let fits = !(self.branch_target.is_some() && self.data_va.is_some())
            && self.prev_branch_target.is_none()
            && self.other_counter.is_none()
            && self.other_address.is_none()
            && self.events.is_none_or(|e| e.0 <= 0xffff)
            && self.data_source.is_none_or(|d| d <= 0xff);
        if !fits {
            return false;
        }
        let start = out.len();
        let slot = |out: &mut Vec<u8>, p: Option<Packet>, width: usize| {
            let before = out.len();
            if let Some(p) = p {
                p.encode(out);
            }
            out.resize(before + width, 0x00);
        };
        let addr = |index: u8, payload: u64| Packet::Address {
            index,
            payload,
            extended: false,
        };
        let ctr = |index: u8, value: u16| Packet::Counter {
            index,
            value,
            extended: false,
        };
        slot(out, self.pc.map(|a| addr(address_index::PC, a.0)), 9);
        slot(
            out,
            self.context_el1.map(|id| Packet::Context { index: 0, id }),
            5,
        );
        slot(
            out,
            self.context_el2.map(|id| Packet::Context { index: 1, id }),
            5,
        );
        slot(
            out,
            self.op.map(|o| Packet::OpType {
                class: o.class,
                payload: o.payload,
            }),
            2,
        );
        slot(
            out,
            self.events.map(|e| Packet::Events {
                bits: e.0,
                size: PayloadSize::B2,
            }),
            3,
        );
        slot(
            out,
            self.issue_latency_cycles
                .map(|x| ctr(counter_index::ISSUE_LATENCY, x)),
            3,
        );
        slot(
            out,
            self.total_latency_cycles
                .map(|x| ctr(counter_index::TOTAL_LATENCY, x)),
            3,
        );
        let tgt_or_va = self
            .branch_target
            .map(|t| addr(address_index::BRANCH_TARGET, t.0))
            .or(self
                .data_va
                .map(|va| addr(address_index::DATA_VIRTUAL, va.0)));
        slot(out, tgt_or_va, 9);
        slot(
            out,
            self.translation_latency_cycles
                .map(|x| ctr(counter_index::TRANSLATION_LATENCY, x)),
            3,
        );
        slot(
            out,
            self.data_pa
                .map(|pa| addr(address_index::DATA_PHYSICAL, pa.0)),
            9,
        );
        slot(
            out,
            self.data_source.map(|d| Packet::DataSource {
                value: d,
                size: PayloadSize::B1,
            }),
            2,
        );
        slot(out, None, 2);
        match self.timestamp {
            Some(ts) => Packet::Timestamp(ts).encode(out),
            None => {
                slot(out, None, 8);
                Packet::End.encode(out);
            }
        }
        debug_assert_eq!(out.len() - start, 64);
        true
    }
}

/// Which of the three tables a record belongs to, as Arm's spe-parser splits its output:
/// loads and stores, branches, everything else (`spelunk decode` writes one table each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpeTable {
    LoadStore,
    Branch,
    Other,
}

impl SpeTable {
    /// The three, in [`SpeTable::index`] order.
    pub const ALL: [SpeTable; 3] = [SpeTable::LoadStore, SpeTable::Branch, SpeTable::Other];

    #[inline]
    pub fn of_record(record: &SpeRecord) -> SpeTable {
        match record.op.map(|o| o.class()) {
            Some(OpClass::LoadStore) => SpeTable::LoadStore,
            Some(OpClass::Branch) => SpeTable::Branch,
            _ => SpeTable::Other,
        }
    }

    /// 0, 1, 2: loads and stores, branches, other.
    pub fn index(self) -> usize {
        match self {
            SpeTable::LoadStore => 0,
            SpeTable::Branch => 1,
            SpeTable::Other => 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::OpType;

    fn sample_load() -> SpeRecord {
        SpeRecord {
            pc: Some(CodeAddress::new(0xaaaa_e4a9_b600, 0, true)),
            op: Some(OpType::new(1, 0x00)),
            events: Some(Events(0x16)),
            issue_latency_cycles: Some(4),
            total_latency_cycles: Some(8),
            data_va: Some(DataVirtualAddress::new(0xaaaa_e65d_da43, 0)),
            translation_latency_cycles: Some(1),
            data_pa: Some(DataPhysicalAddress::new(0x8032c955a43, true, false, 0)),
            data_source: Some(0),
            context_el1: Some(1234),
            timestamp: Some(13196304120239),
            terminator: Terminator::Timestamp,
            ..Default::default()
        }
    }

    #[test]
    fn n1_layout_is_64_bytes_and_round_trips() {
        let r = sample_load();
        let mut bytes = Vec::new();
        r.encode(RecordLayout::N1Padded64, &mut bytes);
        assert_eq!(bytes.len(), 64);
        let (recs, stats, _) = decode_records(&bytes);
        assert_eq!(recs, vec![r]);
        assert!(!stats.has_losses());
    }

    #[test]
    fn derived_latency() {
        let mut r = sample_load();
        assert_eq!(r.derived_execution_latency(), Some(3)); // 8 - 4 - 1
        r.total_latency_cycles = Some(0xfff);
        assert_eq!(r.derived_execution_latency(), None);
        r.total_latency_cycles = Some(2);
        assert_eq!(r.derived_execution_latency(), None);
    }

    #[test]
    fn chunked_feed_equals_whole_feed() {
        let mut bytes = Vec::new();
        for i in 0..50u64 {
            let mut r = sample_load();
            r.timestamp = Some(1000 + i);
            r.encode(
                if i % 2 == 0 {
                    RecordLayout::N1Padded64
                } else {
                    RecordLayout::Compact
                },
                &mut bytes,
            );
        }
        let (whole, _, _) = decode_records(&bytes);
        for chunk in [1usize, 2, 3, 7, 9, 10, 63, 64, 65] {
            let mut d = RecordDecoder::new();
            let mut out = Vec::new();
            for (i, c) in bytes.chunks(chunk).enumerate() {
                d.feed(c, (i * chunk) as u64, &mut out);
            }
            d.finish();
            assert_eq!(out, whole, "chunk size {chunk}");
            assert!(!d.stats().has_losses());
        }
    }

    #[test]
    fn bad_byte_drops_partial_record_and_resyncs() {
        let mut bytes = Vec::new();
        let r = sample_load();
        r.encode(RecordLayout::Compact, &mut bytes);
        let first_len = bytes.len();
        r.encode(RecordLayout::Compact, &mut bytes);
        // Corrupt the CONTEXT header of the second record (after its 9-byte PC) with an unknown
        // header byte (0x02). Its payload 1234 = d2 04 00 00 is then scanned as headers: 0xd2 and
        // 0x04 are undecodable too, the two zeros are PADs. So 3 bad bytes, 1 dropped record.
        let pc_len = 9;
        bytes[first_len + pc_len] = 0x02;
        let (recs, stats, issues) = decode_records(&bytes);
        assert_eq!(stats.bad_bytes, 3);
        assert_eq!(stats.dropped_records, 1);
        assert_eq!(issues[0].offset, (first_len + pc_len) as u64);
        // The first record survives intact; the rest of the second, after resync, is a record
        // without PC/op (its TIMESTAMP still ends it).
        assert_eq!(recs[0], r);
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1].pc, None);
    }

    #[test]
    fn truncated_end_is_counted() {
        let mut bytes = Vec::new();
        sample_load().encode(RecordLayout::Compact, &mut bytes);
        bytes.truncate(bytes.len() - 3);
        let (recs, stats, issues) = decode_records(&bytes);
        assert!(recs.is_empty());
        assert_eq!(stats.truncated_packets, 1);
        assert_eq!(stats.incomplete_records, 1);
        assert_eq!(issues.len(), 1);
    }
}
