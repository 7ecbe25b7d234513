//! docs/schemas/{report,c2c,diff,estimate,annotate}.schema.json are the schemas generated from
//! the report types: this test fails when they drift (SPELUNK_BLESS=1 rewrites them). That the
//! commands' real output matches them is checked by an independent validator
//! (tests/python/test_schemas.py).

use spelunk_analysis::schemas::json_schemas;
use std::path::Path;

#[test]
fn the_schema_files_are_generated_from_the_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/schemas");
    let mut stale = Vec::new();
    for (name, schema) in json_schemas() {
        let path = dir.join(format!("{name}.schema.json"));
        let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
        if std::env::var_os("SPELUNK_BLESS").is_some() {
            std::fs::write(&path, &text).unwrap();
        }
        if std::fs::read_to_string(&path).unwrap_or_default() != text {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "out of date: {stale:?}: run SPELUNK_BLESS=1 cargo test -p spelunk-analysis --test json_schemas"
    );
}
