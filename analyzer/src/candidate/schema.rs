//! JSON Schema inference from observed values.
//!
//! Types are the union of what was seen (`integer` folds into `number` when both occur);
//! objects list their properties in first-seen order with `required` holding the keys present in
//! every observed object; arrays describe their items; a string field with few distinct values,
//! each seen about twice or more, gets an `enum`.

use crate::fast_hash::KeyIndex;

use serde_json::{Map, Value, json};

use crate::infer::index::canonical_hash;

/// JSON Schema type names, alphabetical: bit `i` of [`Shape::types`] stands for `TYPES[i]`.
const TYPES: [&str; 7] = [
    "array", "boolean", "integer", "null", "number", "object", "string",
];
const ARRAY: u8 = 1;
const BOOLEAN: u8 = 1 << 1;
const INTEGER: u8 = 1 << 2;
const NULL: u8 = 1 << 3;
const NUMBER: u8 = 1 << 4;
const OBJECT: u8 = 1 << 5;
const STRING: u8 = 1 << 6;

/// Schemas describe values down to this many levels of nesting.
const MAX_SCHEMA_DEPTH: usize = 64;

#[derive(Debug, Default)]
struct Shape {
    count: usize,
    /// Types seen, one bit each (see [`TYPES`]).
    types: u8,
    objects: usize,
    /// Property names in first-seen order; `property_shapes` in the same order.
    property_names: KeyIndex<String>,
    property_shapes: Vec<Shape>,
    items: Option<Box<Shape>>,
    strings: usize,
    /// Distinct string values, up to one more than the enum limit.
    distinct: Vec<(u64, Value)>,
}

impl Shape {
    /// Adds one observed value. Below [`MAX_SCHEMA_DEPTH`] levels only the type of a container
    /// is recorded, not its contents, so a deeply nested payload cannot overflow the stack.
    fn add(&mut self, value: &Value, max_enum: usize, depth: usize) {
        self.count += 1;
        if depth >= MAX_SCHEMA_DEPTH {
            self.types |= match value {
                Value::Null => NULL,
                Value::Bool(_) => BOOLEAN,
                Value::Number(n) if n.as_str().contains(['.', 'e', 'E']) => NUMBER,
                Value::Number(_) => INTEGER,
                Value::String(_) => STRING,
                Value::Array(_) => ARRAY,
                Value::Object(_) => OBJECT,
            };
            return;
        }
        match value {
            Value::Null => {
                self.types |= NULL;
            }
            Value::Bool(_) => {
                self.types |= BOOLEAN;
            }
            Value::Number(n) => {
                let integer = !n.as_str().contains(['.', 'e', 'E']);
                self.types |= if integer { INTEGER } else { NUMBER };
            }
            Value::String(_) => {
                self.types |= STRING;
                self.strings += 1;
                if self.distinct.len() <= max_enum {
                    let hash = canonical_hash(value);
                    if !self.distinct.iter().any(|(h, _)| *h == hash) {
                        self.distinct.push((hash, value.clone()));
                    }
                }
            }
            Value::Array(items) => {
                self.types |= ARRAY;
                let shape = self.items.get_or_insert_with(Box::default);
                for item in items {
                    shape.add(item, max_enum, depth + 1);
                }
            }
            Value::Object(map) => {
                self.count -= 1;
                self.add_object(map.iter().map(|(k, v)| (k.as_str(), v)), max_enum, depth);
            }
        }
    }

    /// Adds one observed object given as its entries.
    fn add_object<'a>(
        &mut self,
        entries: impl Iterator<Item = (&'a str, &'a Value)>,
        max_enum: usize,
        depth: usize,
    ) {
        self.count += 1;
        self.types |= OBJECT;
        if depth >= MAX_SCHEMA_DEPTH {
            return;
        }
        self.objects += 1;
        for (key, item) in entries {
            let id = match self.property_names.position(key) {
                Some(id) => id,
                None => {
                    self.property_shapes.push(Shape::default());
                    self.property_names.push(key.to_string())
                }
            };
            self.property_shapes[id].add(item, max_enum, depth + 1);
        }
    }

    fn schema(&self, max_enum: usize) -> Value {
        let mut schema = Map::new();
        let mut types: Vec<&str> = TYPES
            .iter()
            .enumerate()
            .filter(|(bit, _)| self.types & (1 << bit) != 0)
            .map(|(_, name)| *name)
            .collect();
        if types.contains(&"number") {
            types.retain(|t| *t != "integer");
        }
        match types.as_slice() {
            [] => {}
            [single] => {
                schema.insert("type".into(), json!(single));
            }
            many => {
                schema.insert("type".into(), json!(many));
            }
        }
        if self.objects > 0 {
            let mut properties = Map::new();
            let mut required = Vec::new();
            for (key, shape) in self.property_names.keys().iter().zip(&self.property_shapes) {
                properties.insert(key.clone(), shape.schema(max_enum));
                if shape.count == self.objects {
                    required.push(Value::String(key.clone()));
                }
            }
            schema.insert("properties".into(), Value::Object(properties));
            if !required.is_empty() {
                schema.insert("required".into(), Value::Array(required));
            }
        }
        if let Some(items) = self.items.as_ref().filter(|items| items.count > 0) {
            schema.insert("items".into(), items.schema(max_enum));
        }
        let only_strings = self.strings == self.count && self.count > 0;
        if only_strings && self.distinct.len() <= max_enum && self.count >= 2 * self.distinct.len()
        {
            schema.insert(
                "enum".into(),
                Value::Array(self.distinct.iter().map(|(_, v)| v.clone()).collect()),
            );
        }
        Value::Object(schema)
    }
}

/// [`infer_schema`] of objects given as borrowed entries (no object is built to describe it).
pub(crate) fn infer_object_schema<'a, E>(
    objects: impl IntoIterator<Item = E>,
    max_enum: usize,
) -> Value
where
    E: Iterator<Item = (&'a str, &'a Value)>,
{
    let mut shape = Shape::default();
    for entries in objects {
        shape.add_object(entries, max_enum, 0);
    }
    shape.schema(max_enum)
}

/// A JSON Schema describing every value given; `{}` (anything) when there are none.
pub fn infer_schema<'a>(values: impl IntoIterator<Item = &'a Value>, max_enum: usize) -> Value {
    let mut shape = Shape::default();
    for value in values {
        shape.add(value, max_enum, 0);
    }
    shape.schema(max_enum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_get_properties_required_keys_and_enums() {
        let values: Vec<Value> = vec![
            serde_json::from_str(r#"{"id": 1, "kind": "a", "tags": ["x"], "note": "n1"}"#).unwrap(),
            serde_json::from_str(r#"{"id": 2, "kind": "a", "tags": [], "note": "n2"}"#).unwrap(),
            serde_json::from_str(r#"{"id": 3.5, "kind": "b", "tags": ["y"]}"#).unwrap(),
            serde_json::from_str(r#"{"id": 4, "kind": "b", "tags": ["z"]}"#).unwrap(),
        ];
        let schema = infer_schema(&values, 5);
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["id", "kind", "tags"]));
        assert_eq!(schema["properties"]["id"]["type"], "number");
        assert_eq!(schema["properties"]["kind"]["enum"], json!(["a", "b"]));
        assert!(schema["properties"]["note"].get("enum").is_none());
        assert_eq!(schema["properties"]["tags"]["items"]["type"], "string");
    }

    #[test]
    fn mixed_types_become_a_type_list() {
        let values = vec![json!("x"), json!(null), json!(3)];
        let schema = infer_schema(&values, 5);
        assert_eq!(schema["type"], json!(["integer", "null", "string"]));
        assert!(schema.get("enum").is_none());
    }
}
