//! Writers for spelunk's results: typed tables (Parquet, CSV), terminal tables, JSON and HTML,
//! one module per result and format (`topdown_text` for spelunk-pmu's top-down reports). Nothing
//! here analyses; it presents what earlier stages produced. Two writers drive an earlier stage
//! straight into their files: `decode_tables` (`spelunk decode`'s flow, from its options to the
//! three tables through spelunk-decode's pipeline) and `dataset` (the engine's attributed
//! samples into a Parquet dataset).

pub mod advise_text;
pub mod annotate_text;
pub mod archive_text;
pub mod bench_text;
pub mod c2c_text;
pub mod check_text;
pub mod dataset;
pub mod decode_tables;
pub mod diff_text;
pub mod estimate_text;
pub mod footprint_text;
pub mod html;
pub mod intensity_text;
pub mod overhead_text;
pub mod record_text;
pub mod spe_tables;
pub mod summary;
pub mod table;
pub mod text;
mod text_table;
pub mod timelines_text;
pub mod topdown_text;

pub use spe_tables::{SpeTable, SpeTableWriter};
pub use spelunk_spe::{CpuInterpretation, Interpretation};
pub use summary::DecodeSummary;
pub use table::{
    Cell, ColumnDef, ColumnKind, TableCompression, TableError, TableFormat, TableOptions,
    TableWriter,
};
pub use text_table::set_table_width;
