//! docs/schemas/sidecar.schema.json is the schema generated from the sidecar's types: this test
//! fails when they drift (SPELUNK_BLESS=1 rewrites the file), and checks that the schema
//! describes what a real sidecar holds (its top-level fields and their JSON types), read from
//! a sidecar the emulator wrote (crates/perf/tests/data/sidecar-emulator-v1.json).

use spelunk_perf::schema::assert_schema_files_current;
use spelunk_perf::sidecar::Sidecar;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .parent()
        .unwrap()
}

#[test]
fn the_schema_file_is_generated_from_the_types() {
    let test = "cargo test -p spelunk-perf --test sidecar_schema";
    let schemas = [("sidecar", Sidecar::json_schema())];
    assert_schema_files_current(&root().join("docs/schemas"), &schemas, test);
}

#[test]
fn the_schema_describes_a_real_sidecar() {
    let schema = Sidecar::json_schema();
    let props = schema["properties"].as_object().unwrap();
    let fixture = root().join("crates/perf/tests/data/sidecar-emulator-v1.json");
    let sidecar: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    for (field, value) in sidecar.as_object().unwrap() {
        let p = props
            .get(field)
            .unwrap_or_else(|| panic!("the schema has no property {field}"));
        let want = match value {
            serde_json::Value::Array(_) => "array",
            serde_json::Value::Object(_) => "object",
            serde_json::Value::String(_) => "string",
            serde_json::Value::Number(_) => "integer",
            serde_json::Value::Bool(_) => "boolean",
            serde_json::Value::Null => "null",
        };
        let text = p.to_string();
        assert!(
            text.contains(&format!("\"{want}\"")) || text.contains("$ref"),
            "{field}: a {want} in the sidecar, schema {text}"
        );
    }
}
