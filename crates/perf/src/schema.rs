//! JSON Schemas of what spelunk prints, generated from the printed types (schemars): in
//! serialize mode, as the schema describes output — a field serde leaves out when empty is
//! optional. docs/schemas holds them; each crate's test checks they are current.

/// The schema of `T` as serialized.
pub fn serialized_schema<T: schemars::JsonSchema>() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::default()
        .for_serialize()
        .into_generator();
    serde_json::to_value(generator.into_root_schema_for::<T>()).unwrap_or_default()
}

/// The files of `schemas` under `dir` (`NAME.schema.json`) that differ from the generated
/// schemas, rewritten first when `SPELUNK_BLESS` is set: what each crate's schema test asserts
/// is empty.
pub fn stale_schema_files(
    dir: &std::path::Path,
    schemas: &[(&str, serde_json::Value)],
) -> std::io::Result<Vec<String>> {
    let mut stale = Vec::new();
    for (name, schema) in schemas {
        let path = dir.join(format!("{name}.schema.json"));
        let text = serde_json::to_string_pretty(schema).map_err(std::io::Error::other)? + "\n";
        if std::env::var_os("SPELUNK_BLESS").is_some() {
            spelunk_fsio::write_atomic(&path, text.as_bytes())?;
        }
        if std::fs::read_to_string(&path).unwrap_or_default() != text {
            stale.push(path.display().to_string());
        }
    }
    Ok(stale)
}

/// For the crates' schema tests: panics, naming the files and `test` (the command that
/// rewrites them), when [`stale_schema_files`] finds any.
pub fn assert_schema_files_current(
    dir: &std::path::Path,
    schemas: &[(&str, serde_json::Value)],
    test: &str,
) {
    match stale_schema_files(dir, schemas) {
        Ok(stale) if stale.is_empty() => {}
        Ok(stale) => panic!("out of date: {stale:?}: run SPELUNK_BLESS=1 {test}"),
        Err(e) => panic!("{}: {e}", dir.display()),
    }
}
