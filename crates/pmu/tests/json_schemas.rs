//! docs/schemas/{topdown,check}.schema.json are the schemas generated from
//! the report types: this test fails when they drift (SPELUNK_BLESS=1 rewrites them). That the
//! commands' real output matches them is checked by an independent validator
//! (tests/python/test_schemas.py).

use spelunk_perf::schema::assert_schema_files_current;
use spelunk_pmu::schemas::json_schemas;
use std::path::Path;

#[test]
fn the_schema_files_are_generated_from_the_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/schemas");
    let test = "cargo test -p spelunk-pmu --test json_schemas";
    assert_schema_files_current(&dir, &json_schemas(), test);
}
