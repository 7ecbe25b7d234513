//! Decoded SPE samples as three tables, mirroring Arm spe-parser's output so existing notebooks
//! keep working: `PREFIX-ldst`, `PREFIX-br`, `PREFIX-other`, with spe-parser's column names —
//! but typed: addresses are u64 (virtual addresses sign-extended from bit 55, as perf prints
//! them), events are a bitmask (`event_bits`) plus spe-parser's `:`-joined names (`event`), and
//! absent fields are null rather than 0. spelunk adds `pid`, `tid`, `time_ns`, `exec_lat`
//! (derived execution latency), `data_source_raw` and a few typed operation details.
//! Every column is defined in docs/decode.md.

use crate::table::{Cell, ColumnDef, ColumnKind::*, TableError, TableFormat, TableWriter};
use parquet::data_type::ByteArray;
use spelunk_spe::{
    CallReturn, CpuModel, DataSource, DataSourceEncoding, ImpDefEventNames, LoadStoreKind, Midr,
    OpClass, Operation, SpeSample,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

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

/// Which of the three tables a sample belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpeTable {
    LoadStore,
    Branch,
    Other,
}

impl SpeTable {
    pub fn of(sample: &SpeSample) -> SpeTable {
        match sample.record.op.map(|o| o.class()) {
            Some(OpClass::LoadStore) => SpeTable::LoadStore,
            Some(OpClass::Branch) => SpeTable::Branch,
            _ => SpeTable::Other,
        }
    }

    /// File-name suffix, as spe-parser names its outputs.
    pub fn suffix(self) -> &'static str {
        match self {
            SpeTable::LoadStore => "ldst",
            SpeTable::Branch => "br",
            SpeTable::Other => "other",
        }
    }

    pub fn columns(self) -> &'static [ColumnDef] {
        match self {
            SpeTable::LoadStore => LDST_COLUMNS,
            SpeTable::Branch => BRANCH_COLUMNS,
            SpeTable::Other => OTHER_COLUMNS,
        }
    }
}

/// How to interpret one CPU's records: its data-source table and implementation-defined events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CpuInterpretation {
    pub model: Option<CpuModel>,
    pub data_source: DataSourceEncoding,
    pub imp_def: ImpDefEventNames,
}

impl CpuInterpretation {
    pub fn for_midr(midr: Option<Midr>) -> Self {
        let model = midr.and_then(|m| m.model());
        CpuInterpretation {
            model,
            data_source: midr
                .map(DataSourceEncoding::for_midr)
                .unwrap_or(DataSourceEncoding::EventsOnly),
            imp_def: match model {
                Some(CpuModel::NeoverseN1) => ImpDefEventNames::NEOVERSE_N1,
                _ => ImpDefEventNames::default(),
            },
        }
    }
}

/// The interpretation for every CPU of a recording (heterogeneous systems differ per CPU).
#[derive(Clone, Debug)]
pub struct Interpretation {
    pub default: CpuInterpretation,
    pub per_cpu: HashMap<u32, CpuInterpretation>,
}

impl Interpretation {
    pub fn uniform(midr: Option<Midr>) -> Self {
        Interpretation {
            default: CpuInterpretation::for_midr(midr),
            per_cpu: HashMap::new(),
        }
    }

    pub fn for_cpu(&self, cpu: Option<u32>) -> &CpuInterpretation {
        cpu.and_then(|c| self.per_cpu.get(&c))
            .unwrap_or(&self.default)
    }
}

/// Caches the text cells that repeat across rows so rows cost no allocation.
#[derive(Default)]
struct TextCache {
    events: HashMap<(u64, ImpDefEventNames), ByteArray>,
    statics: HashMap<&'static str, ByteArray>,
    data_sources: HashMap<DataSource, ByteArray>,
}

impl TextCache {
    fn s(&mut self, s: &'static str) -> ByteArray {
        self.statics
            .entry(s)
            .or_insert_with(|| ByteArray::from(s))
            .clone()
    }
    fn events(&mut self, bits: u64, imp: ImpDefEventNames) -> ByteArray {
        self.events
            .entry((bits, imp))
            .or_insert_with(|| ByteArray::from(spelunk_spe::Events(bits).join(&imp, ":").as_str()))
            .clone()
    }
    fn data_source(&mut self, ds: DataSource) -> ByteArray {
        self.data_sources
            .entry(ds)
            .or_insert_with(|| ByteArray::from(ds.to_string().as_str()))
            .clone()
    }
}

/// Builds the row cells of each table from samples.
#[derive(Default)]
pub struct RowBuilder {
    cache: TextCache,
    row: Vec<Cell>,
}

impl RowBuilder {
    /// The row for `s` in table [`SpeTable::of`]`(s)`.
    pub fn build(&mut self, s: &SpeSample, interp: &CpuInterpretation) -> (SpeTable, &[Cell]) {
        let r = &s.record;
        let table = SpeTable::of(s);
        let op = r.op.map(|o| o.operation());
        let c = &mut self.cache;
        let row = &mut self.row;
        row.clear();
        row.push(Cell::U32(s.cpu));
        let event_bits = r.events.map(|e| e.0);
        let event = c.events(event_bits.unwrap_or(0), interp.imp_def);
        let pc = r.pc.map(|a| a.va());
        let el = r.pc.map(|a| a.el());
        let context = r.context_tid();
        match (table, op) {
            (SpeTable::LoadStore, Some(Operation::LoadStore { store, kind })) => {
                let (atomic, excl, ar) = match kind {
                    LoadStoreKind::Extended {
                        atomic,
                        exclusive,
                        acquire_release,
                    } => (atomic, exclusive, acquire_release),
                    _ => (false, false, false),
                };
                let (evl, pred, sg) = match kind {
                    LoadStoreKind::SveSme {
                        evl_bits,
                        predicated,
                        gather_scatter,
                    } => (Some(evl_bits), Some(predicated), Some(gather_scatter)),
                    _ => (None, None, None),
                };
                let ds = interp
                    .data_source
                    .resolve(r.data_source, r.events)
                    .map(|(d, _)| d);
                row.extend([
                    Cell::Text(Some(c.s(if store { "ST" } else { "LD" }))),
                    Cell::U64(pc),
                    Cell::U8(el),
                    Cell::Bool(Some(atomic)),
                    Cell::Bool(Some(excl)),
                    Cell::Bool(Some(ar)),
                    Cell::Text(Some(c.s(kind.subclass_name()))),
                    Cell::Text(Some(event)),
                    Cell::U64(event_bits),
                    Cell::U16(r.issue_latency_cycles),
                    Cell::U16(r.total_latency_cycles),
                    Cell::U16(r.derived_execution_latency()),
                    Cell::U64(r.data_va.map(|a| a.va())),
                    Cell::U8(r.data_va.map(|a| a.tag())),
                    Cell::U16(r.translation_latency_cycles),
                    Cell::U64(r.data_pa.map(|a| a.pa())),
                    Cell::Text(ds.map(|d| c.data_source(d))),
                    Cell::U64(r.data_source),
                    Cell::U16(evl),
                    Cell::Bool(pred),
                    Cell::Bool(sg),
                ]);
            }
            (
                SpeTable::Branch,
                Some(Operation::Branch {
                    conditional,
                    indirect,
                    gcs,
                    call_return,
                }),
            ) => {
                let cr = match call_return {
                    CallReturn::None => None,
                    CallReturn::Call => Some(c.s("CALL")),
                    CallReturn::Return => Some(c.s("RETURN")),
                    CallReturn::Other => Some(c.s("OTHER")),
                };
                row.extend([
                    Cell::Text(Some(c.s("B"))),
                    Cell::U64(pc),
                    Cell::U8(el),
                    Cell::Bool(Some(conditional)),
                    Cell::Bool(Some(indirect)),
                    Cell::Text(cr),
                    Cell::Bool(Some(gcs)),
                    Cell::Text(Some(event)),
                    Cell::U64(event_bits),
                    Cell::U16(r.issue_latency_cycles),
                    Cell::U16(r.total_latency_cycles),
                    Cell::U64(r.branch_target.map(|a| a.va())),
                    Cell::U8(r.branch_target.map(|a| a.el())),
                    Cell::U64(r.prev_branch_target.map(|a| a.va())),
                    Cell::U8(r.prev_branch_target.map(|a| a.el())),
                ]);
            }
            (_, op) => {
                let (name, subclass, evl, pred, fp, cond): (Option<&'static str>, _, _, _, _, _) =
                    match op {
                        Some(Operation::Other {
                            conditional,
                            floating_point,
                            ..
                        }) => (
                            Some("OTHER"),
                            Some("OTHER"),
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
                            Some("OTHER"),
                            Some("SVE"),
                            Some(evl_bits),
                            Some(predicated),
                            Some(floating_point),
                            None,
                        ),
                        Some(Operation::SmeOther { floating_point, .. }) => (
                            Some("OTHER"),
                            Some("SME"),
                            None,
                            None,
                            Some(floating_point),
                            None,
                        ),
                        Some(Operation::OtherUnknown(_)) => {
                            (Some("OTHER"), Some("UNKNOWN"), None, None, None, None)
                        }
                        Some(Operation::Reserved { .. }) => {
                            (Some("RESERVED"), None, None, None, None, None)
                        }
                        // Unreachable by construction of SpeTable::of; kept total.
                        Some(Operation::LoadStore { .. })
                        | Some(Operation::Branch { .. })
                        | None => (None, None, None, None, None, None),
                    };
                row.extend([
                    Cell::Text(name.map(|n| c.s(n))),
                    Cell::U64(pc),
                    Cell::U8(el),
                    Cell::Text(subclass.map(|n| c.s(n))),
                    Cell::U16(evl),
                    Cell::Bool(pred),
                    Cell::Bool(fp),
                    Cell::Bool(cond),
                    Cell::Text(Some(event)),
                    Cell::U64(event_bits),
                    Cell::U16(r.issue_latency_cycles),
                    Cell::U16(r.total_latency_cycles),
                ]);
                row.extend([
                    Cell::U32(context),
                    Cell::U64(r.timestamp),
                    Cell::U32(s.pid),
                    Cell::U32(s.tid),
                    Cell::U64(s.time_ns),
                ]);
                return (SpeTable::Other, row);
            }
        }
        row.extend([
            Cell::U32(context),
            Cell::U64(r.timestamp),
            Cell::U32(s.pid),
            Cell::U32(s.tid),
            Cell::U64(s.time_ns),
        ]);
        (table, row)
    }
}

/// Writes samples to `PREFIX-ldst.EXT`, `PREFIX-br.EXT` and `PREFIX-other.EXT`.
pub struct SpeTableWriter {
    ldst: TableWriter,
    br: TableWriter,
    other: TableWriter,
    rows: RowBuilder,
    interp: Interpretation,
}

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
        interp: Interpretation,
    ) -> Result<Self, TableError> {
        let [l, b, o] = Self::paths(prefix, format);
        Ok(SpeTableWriter {
            ldst: TableWriter::create(&l, "spe_ldst", LDST_COLUMNS, format)?,
            br: TableWriter::create(&b, "spe_br", BRANCH_COLUMNS, format)?,
            other: TableWriter::create(&o, "spe_other", OTHER_COLUMNS, format)?,
            rows: RowBuilder::default(),
            interp,
        })
    }

    pub fn write(&mut self, s: &SpeSample) -> Result<(), TableError> {
        let interp = self.interp.for_cpu(s.cpu);
        let (table, row) = self.rows.build(s, interp);
        match table {
            SpeTable::LoadStore => self.ldst.push(row),
            SpeTable::Branch => self.br.push(row),
            SpeTable::Other => self.other.push(row),
        }
    }

    /// Closes the files; returns (path, rows) for each.
    pub fn finish(self) -> Result<Vec<(PathBuf, u64)>, TableError> {
        let mut out = Vec::new();
        for t in [self.ldst, self.br, self.other] {
            let p = t.path().to_path_buf();
            out.push((p, t.finish()?));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_shapes_match_columns() {
        use spelunk_spe::{CodeAddress, Events, OpType, SpeRecord};
        let interp = CpuInterpretation::for_midr(Some(CpuModel::NeoverseN1.midr()));
        let mut rb = RowBuilder::default();
        for (class, payload, table) in [
            (1u8, 0u8, SpeTable::LoadStore),
            (1, 0x16, SpeTable::LoadStore),
            (2, 1, SpeTable::Branch),
            (0, 0, SpeTable::Other),
            (0, 0x2e, SpeTable::Other),
            (3, 0, SpeTable::Other),
        ] {
            let s = SpeSample {
                record: SpeRecord {
                    pc: Some(CodeAddress::new(0x1000, 0, true)),
                    op: Some(OpType::new(class, payload)),
                    events: Some(Events(2)),
                    ..Default::default()
                },
                ..Default::default()
            };
            let (t, row) = rb.build(&s, &interp);
            assert_eq!(t, table);
            assert_eq!(row.len(), t.columns().len(), "{t:?}");
        }
        let s = SpeSample::default();
        let (t, row) = rb.build(&s, &interp);
        assert_eq!((t, row.len()), (SpeTable::Other, OTHER_COLUMNS.len()));
    }
}
