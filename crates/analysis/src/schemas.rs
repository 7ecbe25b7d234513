//! JSON Schemas of the reports the commands print with `--json`, generated from the report
//! types themselves (schemars), so they cannot drift from what is printed: docs/schemas holds
//! them (checked by crates/analysis/tests/json_schemas.rs; `SPELUNK_BLESS=1` rewrites them),
//! and tests/python/test_schemas.py validates real output against them with an independent
//! validator.

use crate::annotate::AnnotateReport;
use crate::bench::{Baseline, BenchComparison};
use crate::c2c::C2cReport;
use crate::diff::DiffReport;
use crate::estimate::EstimateReport;
use crate::model::advise::Advice;
use crate::model::Report;

/// `(name, schema)` of each `--json` output of the analyses: `docs/schemas/NAME.schema.json`
/// describes `spelunk NAME --json` (`report` is `spelunk report --json`; `bench` is the baseline
/// file `spelunk bench --save` writes, `bench-compare` is `spelunk bench --compare --json`).
pub fn json_schemas() -> Vec<(&'static str, serde_json::Value)> {
    use spelunk_perf::schema::serialized_schema as schema;
    vec![
        ("report", schema::<Report>()),
        ("c2c", schema::<C2cReport>()),
        ("diff", schema::<DiffReport>()),
        ("estimate", schema::<EstimateReport>()),
        ("annotate", schema::<AnnotateReport>()),
        ("advise", schema::<Advice>()),
        ("bench", schema::<Baseline>()),
        ("bench-compare", schema::<BenchComparison>()),
    ]
}
