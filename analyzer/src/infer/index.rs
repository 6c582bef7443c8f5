//! Value index of one occurrence: canonical hash of every JSON node -> where it sits.
//!
//! Building it is one post-order walk over each payload (linear in its size, capped); looking a
//! value up is one hash probe plus an equality check per hit.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

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

/// A fast, non-cryptographic 64-bit hasher for canonical value hashes: eight bytes a round
/// (multiply and rotate), then a full avalanche at the end. Value hashes are computed for every
/// node of every payload, where SipHash's per-call cost dominated; collisions are checked by
/// equality wherever a hash picks a location.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct NodeHasher(u64);

const NODE_HASH_MUL: u64 = 0x9E37_79B9_7F4A_7C15;

impl NodeHasher {
    #[inline]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(26) ^ word).wrapping_mul(NODE_HASH_MUL);
    }
}

impl Hasher for NodeHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            // The length keeps "a" and "a\0" apart.
            self.mix(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
        }
    }

    #[inline]
    fn write_u8(&mut self, value: u8) {
        self.mix(u64::from(value) | 0x100);
    }

    #[inline]
    fn write_u64(&mut self, value: u64) {
        self.mix(value);
    }

    #[inline]
    fn write_usize(&mut self, value: usize) {
        self.mix(value as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // murmur3's fmix64.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

fn finish<H: Hash>(tag: u8, value: H) -> u64 {
    let mut hasher = NodeHasher::default();
    tag.hash(&mut hasher);
    value.hash(&mut hasher);
    hasher.finish()
}

fn combine_object(mut entries: Vec<(u64, u64)>) -> u64 {
    // Key order does not matter for equality (serde_json maps compare as sets).
    entries.sort_unstable();
    finish(5, entries)
}

/// A number's exact text (as written: `arbitrary_precision` keeps it).
fn number_text(n: &serde_json::Number) -> &str {
    n.as_str()
}

/// Nesting depth up to which the recursive walks (hashing, indexing) recurse; deeper values are
/// hashed with an explicit stack and not indexed, so a payload nested 10,000 levels deep cannot
/// overflow the call stack.
pub(crate) const MAX_RECURSION_DEPTH: usize = 64;

/// Canonical hash of a value: equal values hash equal, whatever their key order.
pub(crate) fn canonical_hash(value: &Value) -> u64 {
    hash_at_depth(value, 0)
}

fn hash_at_depth(value: &Value, depth: usize) -> u64 {
    if depth >= MAX_RECURSION_DEPTH {
        return hash_iterative(value);
    }
    match value {
        Value::Null => finish(0, ()),
        Value::Bool(b) => finish(1, b),
        Value::Number(n) => finish(2, number_text(n)),
        Value::String(s) => finish(3, s),
        Value::Array(items) => finish(
            4,
            items
                .iter()
                .map(|item| hash_at_depth(item, depth + 1))
                .collect::<Vec<_>>(),
        ),
        Value::Object(map) => combine_object(
            map.iter()
                .map(|(k, v)| (finish(3, k), hash_at_depth(v, depth + 1)))
                .collect(),
        ),
    }
}

/// [`canonical_hash`] with an explicit stack instead of recursion (same result).
fn hash_iterative(root: &Value) -> u64 {
    enum Frame<'v> {
        Array(std::slice::Iter<'v, Value>, Vec<u64>),
        Object(serde_json::map::Iter<'v>, Vec<(u64, u64)>, u64),
    }
    let leaf = |value: &Value| -> Option<u64> {
        Some(match value {
            Value::Null => finish(0, ()),
            Value::Bool(b) => finish(1, b),
            Value::Number(n) => finish(2, number_text(n)),
            Value::String(s) => finish(3, s),
            Value::Array(_) | Value::Object(_) => return None,
        })
    };
    fn open(value: &Value) -> Option<Frame<'_>> {
        match value {
            Value::Array(items) => Some(Frame::Array(items.iter(), Vec::new())),
            Value::Object(map) => Some(Frame::Object(map.iter(), Vec::new(), 0)),
            _ => None,
        }
    }
    let Some(first) = open(root) else {
        return leaf(root).unwrap_or_default();
    };
    let mut stack = vec![first];
    // The hash of the child just finished, to hand to its parent.
    let mut done: Option<u64> = None;
    loop {
        let Some(top) = stack.last_mut() else {
            return done.unwrap_or_default();
        };
        let next = match top {
            Frame::Array(items, hashes) => {
                if let Some(hash) = done.take() {
                    hashes.push(hash);
                }
                items.next()
            }
            Frame::Object(entries, hashes, pending_key) => {
                if let Some(hash) = done.take() {
                    hashes.push((*pending_key, hash));
                }
                entries.next().map(|(key, value)| {
                    *pending_key = finish(3, key);
                    value
                })
            }
        };
        match next {
            Some(child) => match leaf(child) {
                Some(hash) => done = Some(hash),
                None => {
                    if let Some(frame) = open(child) {
                        stack.push(frame);
                    }
                }
            },
            None => {
                done = Some(match stack.pop() {
                    Some(Frame::Array(_, hashes)) => finish(4, hashes),
                    Some(Frame::Object(_, hashes, _)) => combine_object(hashes),
                    None => 0,
                });
            }
        }
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
        self.walk(step, side, value, &mut pointer, None, &mut budget, 0);
    }

    #[allow(clippy::too_many_arguments)]
    fn walk(
        &mut self,
        step: usize,
        side: Side,
        value: &Value,
        pointer: &mut String,
        element: Option<ElementOf>,
        budget: &mut usize,
        depth: usize,
    ) -> u64 {
        if *budget == 0 || depth >= MAX_RECURSION_DEPTH {
            // Over the cap or too deep: keep the hash right for the ancestors but index
            // nothing more.
            return hash_at_depth(value, depth);
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
                    hashes.push(self.walk(
                        step,
                        side,
                        item,
                        pointer,
                        Some(inner),
                        budget,
                        depth + 1,
                    ));
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
                    let child = self.walk(step, side, item, pointer, element, budget, depth + 1);
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
    fn deep_values_hash_like_shallow_ones_without_recursion() {
        // The explicit-stack hash agrees with the recursive one.
        let value = json!({"a": [1, {"b": "x", "c": [null, true]}], "d": 2.50});
        assert_eq!(hash_iterative(&value), hash_at_depth(&value, 0));
        assert_eq!(hash_iterative(&json!("s")), hash_at_depth(&json!("s"), 0));
        // 20,000 levels: no stack overflow, and the depth changes the hash.
        // Built by moving values in (`json!` would serialize, recursively, each level).
        let mut deep = json!(1);
        for level in 0..20_001 {
            deep = if level % 2 == 0 {
                let mut map = serde_json::Map::new();
                map.insert("k".into(), deep);
                Value::Object(map)
            } else {
                Value::Array(vec![deep])
            };
        }
        let mut index = ValueIndex::default();
        index.add(0, Side::Output, &deep, 100_000);
        assert_eq!(index.locations.len(), MAX_RECURSION_DEPTH);
        let Value::Object(map) = &deep else { panic!() };
        assert_ne!(canonical_hash(&deep), canonical_hash(&map["k"]));
        // Values this deep drop recursively inside serde_json: unwind them by hand.
        let mut rest = deep;
        loop {
            rest = match rest {
                Value::Object(mut map) => match map.remove("k") {
                    Some(inner) => inner,
                    None => break,
                },
                Value::Array(mut items) => match items.pop() {
                    Some(inner) => inner,
                    None => break,
                },
                _ => break,
            };
        }
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
