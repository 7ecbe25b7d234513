//! JSON Schemas of `spelunk topdown --json` and `spelunk check --json`, generated from the
//! report types (docs/schemas/{topdown,check}.schema.json, checked by
//! crates/pmu/tests/json_schemas.rs; `SPELUNK_BLESS=1` rewrites them).

use crate::check::MachineCheck;
use crate::report::Report;
use spelunk_perf::schema::serialized_schema;

/// `(name, schema)`: `docs/schemas/NAME.schema.json` describes `spelunk NAME --json`.
pub fn json_schemas() -> Vec<(&'static str, serde_json::Value)> {
    vec![
        ("topdown", serialized_schema::<Report>()),
        ("check", serialized_schema::<MachineCheck>()),
    ]
}
