//! Value index of one occurrence: canonical hash of every JSON node -> where it sits.
//!
//! Building it is one post-order walk over each payload (linear in its size, capped); looking a
//! value up is one hash probe plus an equality check per hit.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::Value;

/// Which side of a step a value sits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Side {
    Input,
    Output,
}

/// The innermost list a location sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ElementOf {
    /// Byte length of the list's pointer (a prefix of the location's pointer).
    pub list_pointer_len: usize,
    /// Byte offset in the location's pointer where the pointer inside the element starts.
    pub item_pointer_start: usize,
    pub index: usize,
    pub list_len: usize,
}

/// Where a value sits: a step of the pattern, a side, a JSON pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Location {
    pub step: usize,
    pub side: Side,
    pub pointer: String,
    pub element: Option<ElementOf>,
}

impl Location {
    pub fn list_pointer(&self) -> Option<(&str, &str)> {
        self.element.map(|e| {
            (
                &self.pointer[..e.list_pointer_len],
                &self.pointer[e.item_pointer_start..],
            )
        })
    }
}

/// Escape one key for use as a JSON pointer segment (RFC 6901).
pub(crate) fn escape_segment(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The last segment of a pointer, unescaped (`""` for the root).
pub(crate) fn last_segment(pointer: &str) -> String {
    pointer
        .rsplit('/')
        .next()
        .unwrap_or("")
        .replace("~1", "/")
        .replace("~0", "~")
}

fn finish<H: Hash>(tag: u8, value: H) -> u64 {
    let mut hasher = DefaultHasher::new();
    tag.hash(&mut hasher);
    value.hash(&mut hasher);
    hasher.finish()
}

fn combine_object(mut entries: Vec<(u64, u64)>) -> u64 {
    // Key order does not matter for equality (serde_json maps compare as sets).
    entries.sort_unstable();
    finish(5, entries)
}

/// Canonical hash of a value: equal values hash equal, whatever their key order.
pub(crate) fn canonical_hash(value: &Value) -> u64 {
    match value {
        Value::Null => finish(0, ()),
        Value::Bool(b) => finish(1, b),
        Value::Number(n) => finish(2, n.to_string()),
        Value::String(s) => finish(3, s),
        Value::Array(items) => finish(4, items.iter().map(canonical_hash).collect::<Vec<_>>()),
        Value::Object(map) => combine_object(
            map.iter()
                .map(|(k, v)| (finish(3, k), canonical_hash(v)))
                .collect(),
        ),
    }
}

/// Hash -> locations for every node of the payloads added.
#[derive(Debug, Default)]
pub(crate) struct ValueIndex {
    by_hash: HashMap<u64, Vec<usize>>,
    pub locations: Vec<Location>,
    /// String (and number) leaves, as location ids, for template search.
    pub text_leaves: Vec<usize>,
}

impl ValueIndex {
    /// Index every node of `value` (at most `max_nodes` of them).
    pub fn add(&mut self, step: usize, side: Side, value: &Value, max_nodes: usize) {
        let mut pointer = String::new();
        let mut budget = max_nodes;
        self.walk(step, side, value, &mut pointer, None, &mut budget);
    }

    fn walk(
        &mut self,
        step: usize,
        side: Side,
        value: &Value,
        pointer: &mut String,
        element: Option<ElementOf>,
        budget: &mut usize,
    ) -> u64 {
        if *budget == 0 {
            // Over the cap: keep the hash right for the ancestors but index nothing more.
            return canonical_hash(value);
        }
        *budget -= 1;
        let hash = match value {
            Value::Array(items) => {
                let base = pointer.len();
                let mut hashes = Vec::with_capacity(items.len());
                for (index, item) in items.iter().enumerate() {
                    pointer.push('/');
                    pointer.push_str(&index.to_string());
                    let inner = ElementOf {
                        list_pointer_len: base,
                        item_pointer_start: pointer.len(),
                        index,
                        list_len: items.len(),
                    };
                    hashes.push(self.walk(step, side, item, pointer, Some(inner), budget));
                    pointer.truncate(base);
                }
                finish(4, hashes)
            }
            Value::Object(map) => {
                let base = pointer.len();
                let mut entries = Vec::with_capacity(map.len());
                for (key, item) in map {
                    pointer.push('/');
                    pointer.push_str(&escape_segment(key));
                    let child = self.walk(step, side, item, pointer, element, budget);
                    entries.push((finish(3, key), child));
                    pointer.truncate(base);
                }
                combine_object(entries)
            }
            leaf => canonical_hash(leaf),
        };
        let id = self.locations.len();
        self.locations.push(Location {
            step,
            side,
            pointer: pointer.clone(),
            element,
        });
        if matches!(value, Value::String(_) | Value::Number(_)) {
            self.text_leaves.push(id);
        }
        self.by_hash.entry(hash).or_default().push(id);
        hash
    }

    /// Location ids whose value hashes like `hash` (callers check equality).
    pub fn candidates(&self, hash: u64) -> &[usize] {
        self.by_hash.get(&hash).map(Vec::as_slice).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_change_the_hash_but_values_do() {
        let a: Value = serde_json::from_str(r#"{"x": 1, "y": [1, "a"]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"y": [1, "a"], "x": 1}"#).unwrap();
        let c: Value = serde_json::from_str(r#"{"y": ["a", 1], "x": 1}"#).unwrap();
        assert_eq!(canonical_hash(&a), canonical_hash(&b));
        assert_ne!(canonical_hash(&a), canonical_hash(&c));
        assert_ne!(canonical_hash(&json!("1")), canonical_hash(&json!(1)));
    }

    #[test]
    fn index_finds_nested_values_with_list_positions() {
        let mut index = ValueIndex::default();
        let out = json!({"orders": ["#A", "#B"], "a/b": {"c": "#B"}});
        index.add(0, Side::Output, &out, 100);
        let hits: Vec<&Location> = index
            .candidates(canonical_hash(&json!("#B")))
            .iter()
            .map(|&id| &index.locations[id])
            .collect();
        let pointers: Vec<&str> = hits.iter().map(|l| l.pointer.as_str()).collect();
        assert_eq!(pointers, vec!["/orders/1", "/a~1b/c"]);
        assert_eq!(hits[0].list_pointer(), Some(("/orders", "")));
        assert_eq!(hits[0].element.unwrap().index, 1);
        assert_eq!(hits[1].list_pointer(), None);
        // Whole containers are indexed too, the root at "".
        assert_eq!(index.candidates(canonical_hash(&out)).len(), 1);
    }

    #[test]
    fn node_cap_limits_indexing() {
        let mut index = ValueIndex::default();
        let out = json!({"a": [1, 2, 3, 4, 5, 6]});
        index.add(0, Side::Output, &out, 3);
        assert_eq!(index.locations.len(), 3);
        assert_eq!(last_segment("/a~1b/c~0d"), "c~d");
    }
}
