//! The JSON documents commands print with `--format json`: one object with the
//! `schema_version` and the result under a documented name, so scripts can tell versions apart.

use serde::Serialize;
use serde::ser::SerializeMap;

use super::{Global, SCHEMA_VERSION, output};

/// `{"schema_version": N, "<name>": value}`.
struct Versioned<'a, T> {
    name: &'a str,
    value: &'a T,
}

impl<T: Serialize> Serialize for Versioned<'_, T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("schema_version", &SCHEMA_VERSION)?;
        map.serialize_entry(self.name, self.value)?;
        map.end()
    }
}

/// Print `value` under `name` in a versioned JSON document with `--format json`, else
/// `table()`'s text.
pub fn emit_named<T: Serialize>(
    global: &Global,
    name: &str,
    value: &T,
    table: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    output::emit(global, &Versioned { name, value }, table)
}

/// Print `value`, a JSON object, with `schema_version` added as its first field with
/// `--format json`, else `table()`'s text.
pub fn emit_document<T: Serialize>(
    global: &Global,
    value: &T,
    table: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    let mut document = serde_json::Map::new();
    document.insert("schema_version".into(), SCHEMA_VERSION.into());
    match serde_json::to_value(value)? {
        serde_json::Value::Object(fields) => document.extend(fields),
        other => anyhow::bail!("internal: a command's JSON document is not an object: {other}"),
    }
    output::emit(global, &document, table)
}
