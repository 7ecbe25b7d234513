//! docs/schemas/{report,c2c,diff,estimate,annotate}.schema.json are the schemas generated from
//! the report types: this test fails when they drift (SPELUNK_BLESS=1 rewrites them). That the
//! commands' real output matches them is checked by an independent validator
//! (tests/python/test_schemas.py).

use spelunk_analysis::schemas::json_schemas;
use spelunk_perf::schema::assert_schema_files_current;
use std::path::Path;

#[test]
fn the_schema_files_are_generated_from_the_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/schemas");
    let test = "cargo test -p spelunk-analysis --test json_schemas";
    assert_schema_files_current(&dir, &json_schemas(), test);
}
