//! Decoded SPE samples as three tables, mirroring Arm spe-parser's output so existing notebooks
//! keep working: `PREFIX-ldst`, `PREFIX-br`, `PREFIX-other`, with spe-parser's column names —
//! but typed: addresses are u64 (virtual addresses sign-extended from bit 55, as perf prints
//! them), events are a bitmask (`event_bits`) plus spe-parser's `:`-joined names (`event`), and
//! absent fields are null rather than 0. spelunk adds `pid`, `tid`, `time_ns`, `exec_lat`
//! (derived execution latency), `data_source_raw` and a few typed operation details.
//! Every column is defined in docs/decode.md.

use crate::summary::DecodeSummary;
use crate::table::{
    ColumnDef, ColumnKind::*, Columns, DeferredRows, TableCompression, TableError, TableFormat,
    TableOptions, TableWriter, TextId, ROW_GROUP_ROWS,
};
use spelunk_decode::{SampleContext, SampleMap};
/// Which table a record belongs to (re-exported: the tables' writers and readers name it).
pub use spelunk_spe::SpeTable;
use spelunk_spe::{
    CallReturn, CodeAddress, CpuInterpretation, DataPhysicalAddress, DataSource,
    DataVirtualAddress, Events, ImpDefEventNames, Interpretation, LoadStoreKind, OpType, Operation,
    SpeRecord, SpeSample,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const fn col(name: &'static str, kind: crate::table::ColumnKind, nullable: bool) -> ColumnDef {
    ColumnDef::new(name, kind, nullable)
}

/// Columns of `PREFIX-ldst`: loads, stores and atomics.
pub const LDST_COLUMNS: &[ColumnDef] = &[
    col("cpu", U32, true),
    col("op", Text, false),
    col("pc", U64, true),
    col("el", U8, true),
    col("atomic", Bool, false),
    col("excl", Bool, false),
    col("ar", Bool, false),
    col("subclass", Text, false),
    col("event", Text, false),
    col("event_bits", U64, true),
    col("issue_lat", U16, true),
    col("total_lat", U16, true),
    col("exec_lat", U16, true),
    col("vaddr", U64, true),
    col("vaddr_tag", U8, true),
    col("xlat_lat", U16, true),
    col("paddr", U64, true),
    col("data_source", Text, true),
    col("data_source_raw", U64, true),
    col("sve_evl", U16, true),
    col("sve_pred", Bool, true),
    col("sve_sg", Bool, true),
    col("context", U32, true),
    col("ts", U64, true),
    col("pid", U32, true),
    col("tid", U32, true),
    col("time_ns", U64, true),
];

/// Columns of `PREFIX-br`: branches and exception returns.
pub const BRANCH_COLUMNS: &[ColumnDef] = &[
    col("cpu", U32, true),
    col("op", Text, false),
    col("pc", U64, true),
    col("el", U8, true),
    col("condition", Bool, false),
    col("indirect", Bool, false),
    col("call_return", Text, true),
    col("gcs", Bool, false),
    col("event", Text, false),
    col("event_bits", U64, true),
    col("issue_lat", U16, true),
    col("total_lat", U16, true),
    col("br_tgt", U64, true),
    col("br_tgt_lvl", U8, true),
    col("pbt", U64, true),
    col("pbt_lvl", U8, true),
    col("context", U32, true),
    col("ts", U64, true),
    col("pid", U32, true),
    col("tid", U32, true),
    col("time_ns", U64, true),
];

/// Columns of `PREFIX-other`: everything else (and records without an Operation Type packet).
pub const OTHER_COLUMNS: &[ColumnDef] = &[
    col("cpu", U32, true),
    col("op", Text, true),
    col("pc", U64, true),
    col("el", U8, true),
    col("subclass", Text, true),
    col("sve_evl", U16, true),
    col("sve_pred", Bool, true),
    col("sve_fp", Bool, true),
    col("condition", Bool, true),
    col("event", Text, false),
    col("event_bits", U64, true),
    col("issue_lat", U16, true),
    col("total_lat", U16, true),
    col("context", U32, true),
    col("ts", U64, true),
    col("pid", U32, true),
    col("tid", U32, true),
    col("time_ns", U64, true),
];

/// What the tables of [`SpeTable`] are named and hold.
pub trait SpeTableFormat {
    /// File-name suffix, as spe-parser names its outputs.
    fn suffix(self) -> &'static str;
    /// The table's columns.
    fn columns(self) -> &'static [ColumnDef];
}

impl SpeTableFormat for SpeTable {
    fn suffix(self) -> &'static str {
        match self {
            SpeTable::LoadStore => "ldst",
            SpeTable::Branch => "br",
            SpeTable::Other => "other",
        }
    }

    fn columns(self) -> &'static [ColumnDef] {
        match self {
            SpeTable::LoadStore => LDST_COLUMNS,
            SpeTable::Branch => BRANCH_COLUMNS,
            SpeTable::Other => OTHER_COLUMNS,
        }
    }
}

/// Ids of the fixed names, per table.
#[derive(Clone, Copy)]
struct Fixed {
    ld: TextId,
    st: TextId,
    b: TextId,
    other: TextId,
    reserved: TextId,
    call: TextId,
    ret: TextId,
    sve: TextId,
    sme: TextId,
    unknown: TextId,
}

/// Slots of the direct-mapped event-name cache (in front of the hash map).
const EVENT_SLOTS: usize = 256;

/// A table's text ids for the values that repeat across rows, so a row costs no hashing of
/// strings: made per row group, with the row group's fresh [`Columns`].
struct IdCache {
    fixed: Fixed,
    /// Static names (subclasses) by address.
    statics: Vec<(usize, TextId)>,
    /// (event bits, implementation-defined names index) -> id of the `:`-joined names.
    events_fast: Box<[Option<(u64, u8, TextId)>; EVENT_SLOTS]>,
    /// rustc-hash: keys are small integers from our own decode, so SipHash's DoS resistance
    /// buys nothing here.
    events: rustc_hash::FxHashMap<(u64, u8), TextId>,
    data_sources: Vec<(DataSource, TextId)>,
}

impl IdCache {
    fn new(cols: &mut Columns) -> Self {
        let mut s = |n| cols.intern_static(n);
        let fixed = Fixed {
            ld: s("LD"),
            st: s("ST"),
            b: s("B"),
            other: s("OTHER"),
            reserved: s("RESERVED"),
            call: s("CALL"),
            ret: s("RETURN"),
            sve: s("SVE"),
            sme: s("SME"),
            unknown: s("UNKNOWN"),
        };
        IdCache {
            fixed,
            statics: Vec::new(),
            events_fast: Box::new([None; EVENT_SLOTS]),
            events: HashMap::default(),
            data_sources: Vec::new(),
        }
    }

    #[inline]
    fn static_name(&mut self, cols: &mut Columns, name: &'static str) -> TextId {
        let key = name.as_ptr() as usize ^ (name.len() << 48);
        if let Some((_, id)) = self.statics.iter().find(|(k, _)| *k == key) {
            return *id;
        }
        let id = cols.intern_static(name);
        self.statics.push((key, id));
        id
    }

    #[inline]
    fn events(
        &mut self,
        cols: &mut Columns,
        bits: u64,
        imp: u8,
        names: &ImpDefEventNames,
    ) -> TextId {
        let h = (bits ^ (u64::from(imp) << 56)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let slot = (h >> 56) as usize % EVENT_SLOTS;
        if let Some((b, i, id)) = self.events_fast[slot] {
            if b == bits && i == imp {
                return id;
            }
        }
        let id = match self.events.get(&(bits, imp)) {
            Some(id) => *id,
            None => {
                let text = spelunk_spe::Events(bits).join(names, ":");
                let id = cols.intern(text.as_bytes());
                self.events.insert((bits, imp), id);
                id
            }
        };
        self.events_fast[slot] = Some((bits, imp, id));
        id
    }

    #[inline]
    fn data_source(&mut self, cols: &mut Columns, ds: DataSource) -> TextId {
        if let Some((_, id)) = self.data_sources.iter().find(|(d, _)| *d == ds) {
            return *id;
        }
        let id = match ds {
            DataSource::Unknown(_) => cols.intern(ds.to_string().as_bytes()),
            known => cols.intern_static(known.name()),
        };
        // Unknown values are few in real data; keep the linear list short regardless.
        if self.data_sources.len() < 64 {
            self.data_sources.push((ds, id));
        }
        id
    }
}

/// True when two sets of implementation-defined event names are the same (by address first:
/// they are static tables).
fn same_imp_def(a: &ImpDefEventNames, b: &ImpDefEventNames) -> bool {
    a.names.iter().zip(&b.names).all(|(x, y)| match (x, y) {
        (None, None) => true,
        (Some(x), Some(y)) => (x.as_ptr() == y.as_ptr() && x.len() == y.len()) || x == y,
        _ => false,
    })
}

/// Small keys for the distinct implementation-defined event names met (per CPU model).
#[derive(Default)]
struct ImpKeys {
    seen: Vec<ImpDefEventNames>,
    last: Option<(ImpDefEventNames, u8)>,
}

impl ImpKeys {
    #[inline]
    fn key(&mut self, imp: &ImpDefEventNames) -> u8 {
        if let Some((last, i)) = &self.last {
            if same_imp_def(last, imp) {
                return *i;
            }
        }
        let i = match self.seen.iter().position(|x| same_imp_def(x, imp)) {
            Some(i) => i,
            None => {
                self.seen.push(*imp);
                self.seen.len() - 1
            }
        };
        // More than 256 distinct sets cannot come from the static per-CPU tables; never shared
        // in practice, and the event cache compares the full key anyway.
        let i = i.min(255) as u8;
        self.last = Some((*imp, i));
        i
    }
}

/// Which of a row's optional values are present.
mod has {
    pub const PC: u32 = 1 << 0;
    pub const ADDR_A: u32 = 1 << 1;
    pub const ADDR_B: u32 = 1 << 2;
    pub const EVENTS: u32 = 1 << 3;
    pub const DATA_SOURCE: u32 = 1 << 4;
    pub const TIMESTAMP: u32 = 1 << 5;
    pub const TIME_NS: u32 = 1 << 6;
    pub const CPU: u32 = 1 << 7;
    pub const CONTEXT: u32 = 1 << 8;
    pub const PID: u32 = 1 << 9;
    pub const TID: u32 = 1 << 10;
    pub const ISSUE: u32 = 1 << 11;
    pub const TOTAL: u32 = 1 << 12;
    pub const XLAT: u32 = 1 << 13;
    pub const EXEC: u32 = 1 << 14;
    pub const OP: u32 = 1 << 15;
}

/// One sample reduced to what its table's columns are computed from: raw packet values and a
/// presence bit per value, about 100 bytes against an [`SpeSample`]'s 240. Built in the decode
/// workers ([`SpeRowMap`]), moved in time order by the merge, and expanded into column values
/// by the encoder threads (names, data sources, address fields), so the serial merge does
/// as little as possible per record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpeRow {
    pc: u64,
    /// Data virtual address (ldst) or branch target (br), raw.
    addr_a: u64,
    /// Data physical address (ldst) or previous branch target (br), raw.
    addr_b: u64,
    events: u64,
    data_source: u64,
    timestamp: u64,
    time_ns: u64,
    cpu: u32,
    context: u32,
    pid: u32,
    tid: u32,
    issue: u16,
    total: u16,
    xlat: u16,
    exec: u16,
    has: u32,
    op: OpType,
    table: u8,
}

impl SpeRow {
    #[inline]
    pub fn from_sample(s: &SpeSample) -> SpeRow {
        let c = SampleContext {
            cpu: s.cpu,
            pid: s.pid,
            tid: s.tid,
            time_ns: s.time_ns,
        };
        Self::from_record(&s.record, &c)
    }

    /// The row of `r` sampled in context `s`.
    #[inline]
    pub fn from_record(r: &SpeRecord, s: &SampleContext) -> SpeRow {
        let table = SpeTable::of_record(r);
        let mut bits = 0u32;
        let mut take = |v: Option<u64>, bit: u32| match v {
            Some(x) => {
                bits |= bit;
                x
            }
            None => 0,
        };
        let (a, b) = match table {
            SpeTable::LoadStore => (r.data_va.map(|x| x.0), r.data_pa.map(|x| x.0)),
            SpeTable::Branch => (
                r.branch_target.map(|x| x.0),
                r.prev_branch_target.map(|x| x.0),
            ),
            SpeTable::Other => (None, None),
        };
        let pc = take(r.pc.map(|x| x.0), has::PC);
        let addr_a = take(a, has::ADDR_A);
        let addr_b = take(b, has::ADDR_B);
        let events = take(r.events.map(|e| e.0), has::EVENTS);
        let data_source = take(r.data_source, has::DATA_SOURCE);
        let timestamp = take(r.timestamp, has::TIMESTAMP);
        let time_ns = take(s.time_ns, has::TIME_NS);
        let cpu = take(s.cpu.map(u64::from), has::CPU) as u32;
        let context = take(r.context_tid().map(u64::from), has::CONTEXT) as u32;
        let pid = take(s.pid.map(u64::from), has::PID) as u32;
        let tid = take(s.tid.map(u64::from), has::TID) as u32;
        let issue = take(r.issue_latency_cycles.map(u64::from), has::ISSUE) as u16;
        let total = take(r.total_latency_cycles.map(u64::from), has::TOTAL) as u16;
        let xlat = take(r.translation_latency_cycles.map(u64::from), has::XLAT) as u16;
        let exec = take(r.derived_execution_latency().map(u64::from), has::EXEC) as u16;
        let op = r.op.unwrap_or_default();
        if r.op.is_some() {
            bits |= has::OP;
        }
        SpeRow {
            pc,
            addr_a,
            addr_b,
            events,
            data_source,
            timestamp,
            time_ns,
            cpu,
            context,
            pid,
            tid,
            issue,
            total,
            xlat,
            exec,
            has: bits,
            op,
            table: table.index() as u8,
        }
    }

    /// The table the row belongs to.
    pub fn table(&self) -> SpeTable {
        match self.table {
            0 => SpeTable::LoadStore,
            1 => SpeTable::Branch,
            _ => SpeTable::Other,
        }
    }

    #[inline(always)]
    fn get<T>(&self, bit: u32, v: T) -> Option<T> {
        (self.has & bit != 0).then_some(v)
    }
    #[inline(always)]
    fn cpu(&self) -> Option<u32> {
        self.get(has::CPU, self.cpu)
    }
    #[inline(always)]
    fn pc(&self) -> Option<CodeAddress> {
        self.get(has::PC, CodeAddress(self.pc))
    }
    #[inline(always)]
    fn events(&self) -> Option<u64> {
        self.get(has::EVENTS, self.events)
    }
    #[inline(always)]
    fn op(&self) -> Option<Operation> {
        self.get(has::OP, self.op).map(|o| o.operation())
    }
}

/// Rows per column-at-a-time block when expanding rows (fits the L2 cache).
const FILL_BLOCK: usize = 2048;

/// Appends column runs in column order.
struct ColFill<'a> {
    cols: &'a mut Columns,
    i: usize,
}

impl ColFill<'_> {
    fn u64<I: Iterator<Item = Option<u64>> + Clone>(&mut self, it: I) {
        self.cols.extend_u64(self.i, it);
        self.i += 1;
    }
    fn u32<I: Iterator<Item = Option<u32>> + Clone>(&mut self, it: I) {
        self.cols.extend_u32(self.i, it);
        self.i += 1;
    }
    fn u16<I: Iterator<Item = Option<u16>> + Clone>(&mut self, it: I) {
        self.cols.extend_u16(self.i, it);
        self.i += 1;
    }
    fn u8<I: Iterator<Item = Option<u8>> + Clone>(&mut self, it: I) {
        self.cols.extend_u8(self.i, it);
        self.i += 1;
    }
    fn bool<I: Iterator<Item = Option<bool>> + Clone>(&mut self, it: I) {
        self.cols.extend_bool(self.i, it);
        self.i += 1;
    }
    fn text<I: Iterator<Item = Option<TextId>> + Clone>(&mut self, it: I) {
        self.cols.extend_text(self.i, it);
        self.i += 1;
    }
    /// The columns every table ends with; checks every column got its values.
    fn tail(mut self, rows: &[SpeRow]) {
        self.u32(rows.iter().map(|r| r.get(has::CONTEXT, r.context)));
        self.u64(rows.iter().map(|r| r.get(has::TIMESTAMP, r.timestamp)));
        self.u32(rows.iter().map(|r| r.get(has::PID, r.pid)));
        self.u32(rows.iter().map(|r| r.get(has::TID, r.tid)));
        self.u64(rows.iter().map(|r| r.get(has::TIME_NS, r.time_ns)));
        if self.i != self.cols.len() {
            self.cols.mark_mismatch();
        }
    }
}

/// Column values of a load/store row that are not plain copies.
#[derive(Clone, Copy)]
struct LdstDerived {
    op: TextId,
    subclass: TextId,
    event: TextId,
    data_source: Option<TextId>,
    atomic: bool,
    excl: bool,
    ar: bool,
    sve: Option<(u16, bool, bool)>,
}

#[derive(Clone, Copy)]
struct BranchDerived {
    event: TextId,
    call_return: Option<TextId>,
    conditional: bool,
    indirect: bool,
    gcs: bool,
}

#[derive(Clone, Copy)]
struct OtherDerived {
    event: TextId,
    name: Option<TextId>,
    subclass: Option<TextId>,
    evl: Option<u16>,
    pred: Option<bool>,
    fp: Option<bool>,
    cond: Option<bool>,
}

/// Expands rows of one table into its columns (in an encoder thread).
struct Expander<'a> {
    interp: &'a Interpretation,
    ids: IdCache,
    imp: ImpKeys,
}

impl Expander<'_> {
    #[inline]
    fn event(&mut self, cols: &mut Columns, r: &SpeRow, interp: &CpuInterpretation) -> TextId {
        let key = self.imp.key(&interp.imp_def);
        let bits = r.events().unwrap_or(0);
        self.ids.events(cols, bits, key, &interp.imp_def)
    }

    fn ldst(&mut self, rows: &[SpeRow], cols: &mut Columns) {
        let mut d = Vec::with_capacity(FILL_BLOCK);
        for block in rows.chunks(FILL_BLOCK) {
            d.clear();
            for r in block {
                let ci = self.interp.for_cpu(r.cpu());
                let event = self.event(cols, r, ci);
                let Some(Operation::LoadStore { store, kind }) = r.op() else {
                    cols.mark_mismatch();
                    return;
                };
                let (atomic, excl, ar) = match kind {
                    LoadStoreKind::Extended {
                        atomic,
                        exclusive,
                        acquire_release,
                    } => (atomic, exclusive, acquire_release),
                    _ => (false, false, false),
                };
                let sve = match kind {
                    LoadStoreKind::SveSme {
                        evl_bits,
                        predicated,
                        gather_scatter,
                    } => Some((evl_bits, predicated, gather_scatter)),
                    _ => None,
                };
                let data_source = ci
                    .data_source
                    .resolve(
                        r.get(has::DATA_SOURCE, r.data_source),
                        r.events().map(Events),
                    )
                    .map(|(ds, _)| self.ids.data_source(cols, ds));
                d.push(LdstDerived {
                    op: if store {
                        self.ids.fixed.st
                    } else {
                        self.ids.fixed.ld
                    },
                    subclass: self.ids.static_name(cols, kind.subclass_name()),
                    event,
                    data_source,
                    atomic,
                    excl,
                    ar,
                    sve,
                });
            }
            let mut f = ColFill { cols, i: 0 };
            let va = |r: &SpeRow| r.get(has::ADDR_A, DataVirtualAddress(r.addr_a));
            f.u32(block.iter().map(SpeRow::cpu));
            f.text(d.iter().map(|x| Some(x.op)));
            f.u64(block.iter().map(|r| r.pc().map(|a| a.va())));
            f.u8(block.iter().map(|r| r.pc().map(|a| a.el())));
            f.bool(d.iter().map(|x| Some(x.atomic)));
            f.bool(d.iter().map(|x| Some(x.excl)));
            f.bool(d.iter().map(|x| Some(x.ar)));
            f.text(d.iter().map(|x| Some(x.subclass)));
            f.text(d.iter().map(|x| Some(x.event)));
            f.u64(block.iter().map(SpeRow::events));
            f.u16(block.iter().map(|r| r.get(has::ISSUE, r.issue)));
            f.u16(block.iter().map(|r| r.get(has::TOTAL, r.total)));
            f.u16(block.iter().map(|r| r.get(has::EXEC, r.exec)));
            f.u64(block.iter().map(|r| va(r).map(|a| a.va())));
            f.u8(block.iter().map(|r| va(r).map(|a| a.tag())));
            f.u16(block.iter().map(|r| r.get(has::XLAT, r.xlat)));
            f.u64(block.iter().map(|r| {
                r.get(has::ADDR_B, DataPhysicalAddress(r.addr_b))
                    .map(|a| a.pa())
            }));
            f.text(d.iter().map(|x| x.data_source));
            f.u64(block.iter().map(|r| r.get(has::DATA_SOURCE, r.data_source)));
            f.u16(d.iter().map(|x| x.sve.map(|s| s.0)));
            f.bool(d.iter().map(|x| x.sve.map(|s| s.1)));
            f.bool(d.iter().map(|x| x.sve.map(|s| s.2)));
            f.tail(block);
        }
    }

    fn branch(&mut self, rows: &[SpeRow], cols: &mut Columns) {
        let mut d = Vec::with_capacity(FILL_BLOCK);
        for block in rows.chunks(FILL_BLOCK) {
            d.clear();
            for r in block {
                let ci = self.interp.for_cpu(r.cpu());
                let event = self.event(cols, r, ci);
                let Some(Operation::Branch {
                    conditional,
                    indirect,
                    gcs,
                    call_return,
                }) = r.op()
                else {
                    cols.mark_mismatch();
                    return;
                };
                let f = self.ids.fixed;
                d.push(BranchDerived {
                    event,
                    call_return: match call_return {
                        CallReturn::None => None,
                        CallReturn::Call => Some(f.call),
                        CallReturn::Return => Some(f.ret),
                        CallReturn::Other => Some(f.other),
                    },
                    conditional,
                    indirect,
                    gcs,
                });
            }
            let b = self.ids.fixed.b;
            let tgt = |r: &SpeRow| r.get(has::ADDR_A, CodeAddress(r.addr_a));
            let pbt = |r: &SpeRow| r.get(has::ADDR_B, CodeAddress(r.addr_b));
            let mut f = ColFill { cols, i: 0 };
            f.u32(block.iter().map(SpeRow::cpu));
            f.text(block.iter().map(|_| Some(b)));
            f.u64(block.iter().map(|r| r.pc().map(|a| a.va())));
            f.u8(block.iter().map(|r| r.pc().map(|a| a.el())));
            f.bool(d.iter().map(|x| Some(x.conditional)));
            f.bool(d.iter().map(|x| Some(x.indirect)));
            f.text(d.iter().map(|x| x.call_return));
            f.bool(d.iter().map(|x| Some(x.gcs)));
            f.text(d.iter().map(|x| Some(x.event)));
            f.u64(block.iter().map(SpeRow::events));
            f.u16(block.iter().map(|r| r.get(has::ISSUE, r.issue)));
            f.u16(block.iter().map(|r| r.get(has::TOTAL, r.total)));
            f.u64(block.iter().map(|r| tgt(r).map(|a| a.va())));
            f.u8(block.iter().map(|r| tgt(r).map(|a| a.el())));
            f.u64(block.iter().map(|r| pbt(r).map(|a| a.va())));
            f.u8(block.iter().map(|r| pbt(r).map(|a| a.el())));
            f.tail(block);
        }
    }

    fn other(&mut self, rows: &[SpeRow], cols: &mut Columns) {
        let mut d = Vec::with_capacity(FILL_BLOCK);
        for block in rows.chunks(FILL_BLOCK) {
            d.clear();
            for r in block {
                let ci = self.interp.for_cpu(r.cpu());
                let event = self.event(cols, r, ci);
                let f = self.ids.fixed;
                let (name, subclass, evl, pred, fp, cond) = match r.op() {
                    Some(Operation::Other {
                        conditional,
                        floating_point,
                        ..
                    }) => (
                        Some(f.other),
                        Some(f.other),
                        None,
                        None,
                        Some(floating_point),
                        Some(conditional),
                    ),
                    Some(Operation::SveOther {
                        evl_bits,
                        predicated,
                        floating_point,
                    }) => (
                        Some(f.other),
                        Some(f.sve),
                        Some(evl_bits),
                        Some(predicated),
                        Some(floating_point),
                        None,
                    ),
                    Some(Operation::SmeOther { floating_point, .. }) => (
                        Some(f.other),
                        Some(f.sme),
                        None,
                        None,
                        Some(floating_point),
                        None,
                    ),
                    Some(Operation::OtherUnknown(_)) => {
                        (Some(f.other), Some(f.unknown), None, None, None, None)
                    }
                    Some(Operation::Reserved { .. }) => {
                        (Some(f.reserved), None, None, None, None, None)
                    }
                    // Unreachable by construction of SpeTable::of; kept total.
                    Some(Operation::LoadStore { .. }) | Some(Operation::Branch { .. }) | None => {
                        (None, None, None, None, None, None)
                    }
                };
                d.push(OtherDerived {
                    event,
                    name,
                    subclass,
                    evl,
                    pred,
                    fp,
                    cond,
                });
            }
            let mut f = ColFill { cols, i: 0 };
            f.u32(block.iter().map(SpeRow::cpu));
            f.text(d.iter().map(|x| x.name));
            f.u64(block.iter().map(|r| r.pc().map(|a| a.va())));
            f.u8(block.iter().map(|r| r.pc().map(|a| a.el())));
            f.text(d.iter().map(|x| x.subclass));
            f.u16(d.iter().map(|x| x.evl));
            f.bool(d.iter().map(|x| x.pred));
            f.bool(d.iter().map(|x| x.fp));
            f.bool(d.iter().map(|x| x.cond));
            f.text(d.iter().map(|x| Some(x.event)));
            f.u64(block.iter().map(SpeRow::events));
            f.u16(block.iter().map(|r| r.get(has::ISSUE, r.issue)));
            f.u16(block.iter().map(|r| r.get(has::TOTAL, r.total)));
            f.tail(block);
        }
    }
}

/// Recycled row vectors (a row group's worth each), so no fresh pages are faulted in per group.
type RowPool = Arc<Mutex<Vec<Vec<SpeRow>>>>;

/// Row vectors kept for reuse.
const RECYCLED_ROW_VECS: usize = 4;

/// A row group of one SPE table, expanded into columns by an encoder thread.
struct SpeRowGroup {
    table: SpeTable,
    rows: Vec<SpeRow>,
    interp: Arc<Interpretation>,
    free: RowPool,
}

impl DeferredRows for SpeRowGroup {
    fn rows(&self) -> usize {
        self.rows.len()
    }

    fn fill(&mut self, cols: &mut Columns) {
        let mut x = Expander {
            interp: &self.interp,
            ids: IdCache::new(cols),
            imp: ImpKeys::default(),
        };
        match self.table {
            SpeTable::LoadStore => x.ldst(&self.rows, cols),
            SpeTable::Branch => x.branch(&self.rows, cols),
            SpeTable::Other => x.other(&self.rows, cols),
        }
    }
}

impl Drop for SpeRowGroup {
    fn drop(&mut self) {
        if let Ok(mut free) = self.free.lock() {
            if free.len() < RECYCLED_ROW_VECS {
                let mut rows = std::mem::take(&mut self.rows);
                rows.clear();
                free.push(rows);
            }
        }
    }
}

/// The per-stream work of `spelunk decode` in the decode workers: each sample becomes an
/// [`SpeRow`] and is counted in the stream's [`DecodeSummary`] (combine them with
/// [`DecodeSummary::merge`]).
pub struct SpeRowMap {
    interp: Interpretation,
    pub summary: DecodeSummary,
}

impl SpeRowMap {
    pub fn new(interp: Interpretation) -> Self {
        SpeRowMap {
            interp,
            summary: DecodeSummary::default(),
        }
    }
}

impl SampleMap for SpeRowMap {
    type Item = SpeRow;
    #[inline]
    fn map(&mut self, r: &SpeRecord, c: &SampleContext) -> SpeRow {
        self.summary.add_record(r, c, &self.interp);
        SpeRow::from_record(r, c)
    }
}

/// Writes samples to `PREFIX-ldst.EXT`, `PREFIX-br.EXT` and `PREFIX-other.EXT`.
///
/// Samples arrive as compact [`SpeRow`]s (see [`SpeRowMap`]; [`SpeTableWriter::write`] converts
/// a sample itself) and are gathered per table into row groups; each full row group goes to the
/// shared encoder threads, which expand the rows into column values (event and data-source names,
/// address fields) and encode and compress them, and a thread per file appends the row groups in
/// order (see [`crate::table`]). The caller's thread only copies rows. Memory is bounded by the
/// encoders' queue depths.
pub struct SpeTableWriter {
    tables: Vec<TableWriter>,
    pending: [Vec<SpeRow>; 3],
    interp: Arc<Interpretation>,
    free: RowPool,
}

/// Columns that get Parquet min/max statistics: what analyses filter on (time, CPU, thread, code
/// and data addresses).
pub const STATISTICS_COLUMNS: &[&str] = &[
    "cpu", "pc", "vaddr", "paddr", "br_tgt", "ts", "time_ns", "pid", "tid", "context",
];

/// Columns written with DELTA_BINARY_PACKED: the timestamps, which grow with every row of the
/// time-ordered tables (a byte or two per row instead of eight; see docs/decode.md).
pub const DELTA_COLUMNS: &[&str] = &["ts", "time_ns"];

impl SpeTableWriter {
    /// The three file paths for `prefix` and `format`.
    pub fn paths(prefix: &Path, format: TableFormat) -> [PathBuf; 3] {
        let p = |t: SpeTable| {
            let mut s = prefix.as_os_str().to_owned();
            s.push(format!("-{}.{}", t.suffix(), format.extension()));
            PathBuf::from(s)
        };
        [
            p(SpeTable::LoadStore),
            p(SpeTable::Branch),
            p(SpeTable::Other),
        ]
    }

    pub fn create(
        prefix: &Path,
        format: TableFormat,
        compression: TableCompression,
        interp: Interpretation,
    ) -> Result<Self, TableError> {
        let [l, b, o] = Self::paths(prefix, format);
        let options = TableOptions {
            compression,
            statistics_for: STATISTICS_COLUMNS,
            delta_for: DELTA_COLUMNS,
        };
        let mut tables = Vec::new();
        for (path, name, columns) in [
            (l, "spe_ldst", LDST_COLUMNS),
            (b, "spe_br", BRANCH_COLUMNS),
            (o, "spe_other", OTHER_COLUMNS),
        ] {
            tables.push(TableWriter::create(&path, name, columns, format, options)?);
        }
        Ok(SpeTableWriter {
            tables,
            pending: Default::default(),
            interp: Arc::new(interp),
            free: RowPool::default(),
        })
    }

    /// How this writer interprets each CPU's records.
    pub fn interpretation(&self) -> &Interpretation {
        &self.interp
    }

    /// Appends one sample (converting it here; [`SpeTableWriter::push`] takes rows built
    /// elsewhere, e.g. in the decode workers).
    #[inline]
    pub fn write(&mut self, s: &SpeSample) -> Result<(), TableError> {
        self.push(&SpeRow::from_sample(s))
    }

    /// Appends one row to its table.
    #[inline]
    pub fn push(&mut self, row: &SpeRow) -> Result<(), TableError> {
        let i = usize::from(row.table).min(2);
        let pending = &mut self.pending[i];
        if pending.capacity() == 0 {
            *pending = self
                .free
                .lock()
                .ok()
                .and_then(|mut f| f.pop())
                .unwrap_or_default();
            pending.reserve_exact(ROW_GROUP_ROWS);
        }
        pending.push(*row);
        if pending.len() >= ROW_GROUP_ROWS {
            self.ship(i)?;
        }
        Ok(())
    }

    fn ship(&mut self, i: usize) -> Result<(), TableError> {
        let rows = std::mem::take(&mut self.pending[i]);
        if rows.is_empty() {
            return Ok(());
        }
        let group = SpeRowGroup {
            table: [SpeTable::LoadStore, SpeTable::Branch, SpeTable::Other][i],
            rows,
            interp: self.interp.clone(),
            free: self.free.clone(),
        };
        self.tables[i].write_deferred(Box::new(group))
    }

    /// Flushes and closes the files; returns (path, rows) for each.
    pub fn finish(mut self) -> Result<Vec<(PathBuf, u64)>, TableError> {
        let mut out = Vec::new();
        let mut first_err = None;
        for i in 0..self.pending.len() {
            if let Err(e) = self.ship(i) {
                first_err.get_or_insert(e);
            }
        }
        for t in self.tables {
            let path = t.path().to_path_buf();
            match t.finish() {
                Ok(rows) => out.push((path, rows)),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_fill_every_column_of_their_table() {
        use spelunk_spe::{CodeAddress, Events, OpType, SpeRecord};
        let interp = Interpretation::uniform(Some(spelunk_spe::CpuModel::NeoverseN1.midr()));
        let dir = std::env::temp_dir().join(format!("spelunk-rowshape-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut samples: Vec<(SpeSample, SpeTable)> = [
            (1u8, 0u8, SpeTable::LoadStore),
            (1, 0x16, SpeTable::LoadStore),
            (1, 0xbc, SpeTable::LoadStore),
            (2, 1, SpeTable::Branch),
            (2, 0x12, SpeTable::Branch),
            (0, 0, SpeTable::Other),
            (0, 0x2e, SpeTable::Other),
            (0, 0x88, SpeTable::Other),
            (3, 0, SpeTable::Other),
        ]
        .iter()
        .map(|&(class, payload, table)| {
            let s = SpeSample {
                record: SpeRecord {
                    pc: Some(CodeAddress::new(0x1000, 0, true)),
                    op: Some(OpType::new(class, payload)),
                    events: Some(Events(2)),
                    ..Default::default()
                },
                ..Default::default()
            };
            (s, table)
        })
        .collect();
        samples.push((SpeSample::default(), SpeTable::Other));
        for format in [TableFormat::Csv, TableFormat::Parquet] {
            for (n, (s, table)) in samples.iter().enumerate() {
                assert_eq!(SpeTable::of_record(&s.record), *table);
                assert_eq!(SpeRow::from_sample(s).table(), *table);
                let prefix = dir.join(format!("t{n}"));
                let mut w =
                    SpeTableWriter::create(&prefix, format, Default::default(), interp.clone())
                        .unwrap();
                w.write(s).unwrap();
                // A row that misses a column fails the encode, and so `finish`.
                let out = w
                    .finish()
                    .unwrap_or_else(|e| panic!("{table:?} {:?}: {e}", s.record.op));
                let rows: Vec<u64> = out.iter().map(|(_, n)| *n).collect();
                let mut want = vec![0u64; 3];
                want[table.index()] = 1;
                assert_eq!(rows, want);
                if format == TableFormat::Csv {
                    let text = std::fs::read_to_string(&out[table.index()].0).unwrap();
                    let mut lines = text.lines();
                    let header = lines.next().unwrap().split(',').count();
                    assert_eq!(header, table.columns().len());
                    assert_eq!(lines.next().unwrap().split(',').count(), header);
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
