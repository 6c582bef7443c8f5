//! Value index of a pattern's occurrences: canonical hash of every JSON node -> where it sits.
//!
//! Building it is one walk over each payload (linear in its size, capped) into vectors shared
//! by all of a pattern's occurrences; looking a value up in one occurrence is a binary search
//! of that occurrence's sorted hashes plus an equality check per hit. Nodes keep borrowed
//! values and parent links; a JSON pointer is spelled out only for the nodes a lookup picks.

use std::borrow::Cow;
use std::cell::RefCell;
use std::hash::{Hash, Hasher};

pub(crate) use crate::fast_hash::FastMap;
use crate::fast_hash::NodeHasher;

use serde_json::{Map, Value};

/// Which side of a step a value sits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Side {
    Input,
    Output,
}

/// The innermost list a location sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ElementOf {
    /// The list's node in the same payload.
    list: u32,
    pub index: usize,
    pub list_len: usize,
}

/// How a node is reached from its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Segment<'v> {
    Root,
    Key(&'v str),
    Index(usize),
}

/// No parent: the payload's root.
const NO_PARENT: u32 = u32::MAX;

/// One node of an indexed payload. Its JSON pointer is not stored: most nodes are never the
/// answer to a lookup, so pointers are spelled out on demand from the parent links.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Node<'v> {
    value: &'v Value,
    parent: u32,
    segment: Segment<'v>,
    element: Option<ElementOf>,
    step: u32,
    side: Side,
}

/// Where a value sits in an occurrence: a step of the pattern, a side, the node itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Location<'v> {
    pub step: usize,
    pub side: Side,
    pub value: &'v Value,
    pub element: Option<ElementOf>,
}

/// A location of a [`ValueIndex`] (its node number).
pub(crate) type LocationId = u32;

/// Escape one key for use as a JSON pointer segment (RFC 6901).
pub(crate) fn escape_segment(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The last segment of a pointer, unescaped (`""` for the root).
pub(crate) fn last_segment(pointer: &str) -> String {
    last_segment_cow(pointer).into_owned()
}

/// [`last_segment`], borrowed unless there is an escape to undo.
pub(crate) fn last_segment_cow(pointer: &str) -> Cow<'_, str> {
    unescape_segment(pointer.rsplit('/').next().unwrap_or(""))
}

/// One pointer segment with its escapes (`~1`, `~0`) undone; borrowed when it has none.
pub(crate) fn unescape_segment(segment: &str) -> Cow<'_, str> {
    if segment.contains('~') {
        Cow::Owned(segment.replace("~1", "/").replace("~0", "~"))
    } else {
        Cow::Borrowed(segment)
    }
}

/// A pointer's first segment (unescaped) and the rest (`""`, or starting with `/`); `None`
/// when the pointer does not start with `/`.
pub(crate) fn split_first_segment(pointer: &str) -> Option<(Cow<'_, str>, &str)> {
    let rest = pointer.strip_prefix('/')?;
    let (segment, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    Some((unescape_segment(segment), tail))
}

/// The value at a JSON pointer (RFC 6901), like [`Value::pointer`] but without allocating:
/// segments are unescaped only when they hold an escape, and small objects are searched by a
/// scan instead of hashing the key.
pub(crate) fn lookup<'v>(value: &'v Value, pointer: &str) -> Option<&'v Value> {
    if pointer.is_empty() {
        return Some(value);
    }
    let rest = pointer.strip_prefix('/')?;
    let mut node = value;
    for raw in rest.split('/') {
        let segment = unescape_segment(raw);
        node = match node {
            Value::Object(map) => member(map, segment.as_ref())?,
            Value::Array(items) => items.get(array_index(&segment)?)?,
            _ => return None,
        };
    }
    Some(node)
}

/// Objects up to this many keys are searched by a scan in [`member`].
const SMALL_OBJECT: usize = 8;

/// `map[key]`, by a scan when the object is small: cheaper than hashing the key (serde_json's
/// map hashes with SipHash) for the few keys most payload objects hold.
pub(crate) fn member<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    if map.len() <= SMALL_OBJECT {
        map.iter()
            .find_map(|(k, v)| (k.as_str() == key).then_some(v))
    } else {
        map.get(key)
    }
}

/// An array index segment as RFC 6901 spells it: digits, no sign, no leading zero.
fn array_index(segment: &str) -> Option<usize> {
    if segment.is_empty()
        || !segment.bytes().all(|b| b.is_ascii_digit())
        || (segment.len() > 1 && segment.starts_with('0'))
    {
        return None;
    }
    segment.parse().ok()
}

fn finish<H: Hash>(tag: u8, value: H) -> u64 {
    let mut hasher = NodeHasher::default();
    tag.hash(&mut hasher);
    value.hash(&mut hasher);
    hasher.finish()
}

/// The hash of an object key, as object hashes combine it with the value's.
pub(crate) fn key_hash(key: &str) -> u64 {
    finish(3, key)
}

/// The hash of an object from its `(key hash, value hash)` entries, in any order.
pub(crate) fn combine_object(mut entries: Vec<(u64, u64)>) -> u64 {
    combine_object_in(&mut entries)
}

/// [`combine_object`] over a slice (hashes like the `Vec`: a slice hashes its length, then its
/// items).
fn combine_object_in(entries: &mut [(u64, u64)]) -> u64 {
    // Key order does not matter for equality (serde_json maps compare as sets).
    entries.sort_unstable();
    finish(5, &*entries)
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

thread_local! {
    /// One scratch per thread, reused by every container hash.
    static HASH_SCRATCH: RefCell<HashScratch> = RefCell::default();
}

fn leaf_hash(value: &Value) -> u64 {
    match value {
        Value::Null => finish(0, ()),
        Value::Bool(b) => finish(1, b),
        Value::Number(n) => finish(2, number_text(n)),
        Value::String(s) => finish(3, s),
        // Not leaves; only reached by mistake, and then still canonical.
        Value::Array(_) | Value::Object(_) => hash_iterative(value),
    }
}

/// Child hashes of the containers being hashed, as stacks shared by all levels (no
/// allocation per container).
#[derive(Default)]
struct HashScratch {
    items: Vec<u64>,
    entries: Vec<(u64, u64)>,
}

impl HashScratch {
    fn hash(&mut self, value: &Value, depth: usize) -> u64 {
        if depth >= MAX_RECURSION_DEPTH {
            return hash_iterative(value);
        }
        match value {
            Value::Array(items) => {
                let start = self.items.len();
                for item in items {
                    let hash = self.hash(item, depth + 1);
                    self.items.push(hash);
                }
                let hash = finish(4, &self.items[start..]);
                self.items.truncate(start);
                hash
            }
            Value::Object(map) => {
                let start = self.entries.len();
                for (key, item) in map {
                    let hash = self.hash(item, depth + 1);
                    self.entries.push((finish(3, key), hash));
                }
                let hash = combine_object_in(&mut self.entries[start..]);
                self.entries.truncate(start);
                hash
            }
            leaf => leaf_hash(leaf),
        }
    }
}

/// [`canonical_hash`] of a value `depth` levels down in its payload.
fn hash_at_depth(value: &Value, depth: usize) -> u64 {
    if depth >= MAX_RECURSION_DEPTH {
        return hash_iterative(value);
    }
    match value {
        Value::Array(_) | Value::Object(_) => HASH_SCRATCH.with(|scratch| {
            match scratch.try_borrow_mut() {
                Ok(mut scratch) => scratch.hash(value, depth),
                // Not reached (hashing does not re-enter), but a fresh scratch is as right.
                Err(_) => HashScratch::default().hash(value, depth),
            }
        }),
        leaf => leaf_hash(leaf),
    }
}

/// [`canonical_hash`] with an explicit stack instead of recursion (same result).
fn hash_iterative(root: &Value) -> u64 {
    enum Frame<'v> {
        Array(std::slice::Iter<'v, Value>, Vec<u64>),
        Object(serde_json::map::Iter<'v>, Vec<(u64, u64)>, u64),
    }
    let leaf = |value: &Value| -> Option<u64> {
        (!matches!(value, Value::Array(_) | Value::Object(_))).then(|| leaf_hash(value))
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

/// Hash -> locations for every node of the payloads of many occurrences (their steps' inputs
/// and outputs, occurrence after occurrence): one set of vectors for all of a pattern's
/// occurrences, so indexing costs a few allocations however many nodes there are. Each
/// occurrence reads its own part through an [`OccurrenceIndex`].
#[derive(Debug, Default)]
pub(crate) struct ValueIndex<'v> {
    /// `(hash, node)`, sorted by hash within each occurrence; nodes of one hash in the order
    /// indexed (payload by payload, post-order within each).
    by_hash: Vec<(u64, u32)>,
    /// Where the current occurrence starts in `by_hash` and `text_leaves`.
    occurrence_start: (usize, usize),
    /// Parents before their children.
    nodes: Vec<Node<'v>>,
    /// String (and number) leaves, for template search.
    text_leaves: Vec<TextLeaf<'v>>,
    /// Child hashes of the containers being walked, as stacks shared by all levels.
    item_hashes: Vec<u64>,
    entry_hashes: Vec<(u64, u64)>,
}

/// A string or number leaf, with its text (a number's as written).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TextLeaf<'v> {
    pub id: LocationId,
    pub step: usize,
    pub text: &'v str,
    pub number: bool,
}

/// Where one payload walk stands.
struct Walk {
    budget: usize,
    step: u32,
    side: Side,
}

impl<'v> ValueIndex<'v> {
    /// An empty index (for views that index nothing).
    const EMPTY: ValueIndex<'static> = ValueIndex {
        by_hash: Vec::new(),
        occurrence_start: (0, 0),
        nodes: Vec::new(),
        text_leaves: Vec::new(),
        item_hashes: Vec::new(),
        entry_hashes: Vec::new(),
    };

    /// Room for `more` occurrences the size of everything indexed so far (a quarter more).
    pub fn reserve_for(&mut self, more: usize) {
        let more = more.saturating_add(more / 4);
        self.by_hash
            .reserve(self.by_hash.len().saturating_mul(more));
        self.nodes.reserve(self.nodes.len().saturating_mul(more));
        self.text_leaves
            .reserve(self.text_leaves.len().saturating_mul(more));
    }

    /// Payloads added from now on belong to a new occurrence.
    pub fn begin_occurrence(&mut self) {
        self.occurrence_start = (self.by_hash.len(), self.text_leaves.len());
    }

    /// The part of the occurrence begun last, as `(by_hash, text_leaves)` ranges.
    pub fn occurrence_span(&self) -> OccurrenceSpan {
        OccurrenceSpan {
            hashes: self.occurrence_start.0..self.by_hash.len(),
            leaves: self.occurrence_start.1..self.text_leaves.len(),
        }
    }

    /// Everything indexed, read as one occurrence.
    #[cfg(test)]
    pub fn whole(&self) -> OccurrenceIndex<'_, 'v> {
        OccurrenceIndex {
            index: self,
            span: OccurrenceSpan {
                hashes: 0..self.by_hash.len(),
                leaves: 0..self.text_leaves.len(),
            },
        }
    }

    /// Index every node of `value` (at most `max_nodes` of them) as step `step`'s `side`.
    pub fn add(&mut self, step: usize, side: Side, value: &'v Value, max_nodes: usize) {
        // Node numbers stay within `u32`.
        let room = (NO_PARENT as usize).saturating_sub(self.nodes.len());
        let mut walk = Walk {
            budget: max_nodes.min(room),
            step: u32::try_from(step).unwrap_or(u32::MAX),
            side,
        };
        let start = self.by_hash.len();
        self.walk(value, NO_PARENT, Segment::Root, None, &mut walk, 0);
        // Stable: equal hashes keep their order. The new run is sorted, then merged with the
        // occurrence's earlier payloads.
        self.by_hash[start..].sort_by_key(|&(hash, _)| hash);
        let occurrence = self.occurrence_start.0;
        if start > occurrence {
            self.by_hash[occurrence..].sort_by_key(|&(hash, _)| hash);
        }
    }

    fn walk(
        &mut self,
        value: &'v Value,
        parent: u32,
        segment: Segment<'v>,
        element: Option<ElementOf>,
        walk: &mut Walk,
        depth: usize,
    ) -> u64 {
        if walk.budget == 0 || depth >= MAX_RECURSION_DEPTH {
            // Over the cap or too deep: keep the hash right for the ancestors but index
            // nothing more.
            return hash_at_depth(value, depth);
        }
        walk.budget -= 1;
        // Parents are pushed before their children (the links point back); hashes are known
        // only after the children, so `by_hash` is filled in post-order.
        let id = self.nodes.len() as u32;
        self.nodes.push(Node {
            value,
            parent,
            segment,
            element,
            step: walk.step,
            side: walk.side,
        });
        let hash = match value {
            Value::Array(items) => {
                let start = self.item_hashes.len();
                for (index, item) in items.iter().enumerate() {
                    let inner = ElementOf {
                        list: id,
                        index,
                        list_len: items.len(),
                    };
                    let hash = self.walk(
                        item,
                        id,
                        Segment::Index(index),
                        Some(inner),
                        walk,
                        depth + 1,
                    );
                    self.item_hashes.push(hash);
                }
                let hash = finish(4, &self.item_hashes[start..]);
                self.item_hashes.truncate(start);
                hash
            }
            Value::Object(map) => {
                let start = self.entry_hashes.len();
                for (key, item) in map {
                    let child = self.walk(item, id, Segment::Key(key), element, walk, depth + 1);
                    self.entry_hashes.push((finish(3, key), child));
                }
                let hash = combine_object_in(&mut self.entry_hashes[start..]);
                self.entry_hashes.truncate(start);
                hash
            }
            leaf => leaf_hash(leaf),
        };
        match value {
            Value::String(text) => self.text_leaves.push(TextLeaf {
                id,
                step: walk.step as usize,
                text,
                number: false,
            }),
            Value::Number(n) => self.text_leaves.push(TextLeaf {
                id,
                step: walk.step as usize,
                text: number_text(n),
                number: true,
            }),
            _ => {}
        }
        self.by_hash.push((hash, id));
        hash
    }

    /// The JSON pointer of node `id` below node `above` (`NO_PARENT`: the payload root),
    /// escaped per RFC 6901.
    fn pointer_below(&self, id: u32, above: u32) -> String {
        let mut pointer = String::with_capacity(32);
        self.write_pointer(id, above, &mut pointer);
        pointer
    }

    /// Appends the segments from `above` down to `id`. Recursion is bounded: nodes are indexed
    /// at most [`MAX_RECURSION_DEPTH`] levels deep.
    fn write_pointer(&self, id: u32, above: u32, out: &mut String) {
        if id == above || id == NO_PARENT {
            return;
        }
        let node = &self.nodes[id as usize];
        self.write_pointer(node.parent, above, out);
        match node.segment {
            Segment::Root => {}
            Segment::Key(key) => {
                out.push('/');
                if key.contains(['~', '/']) {
                    out.push_str(&escape_segment(key));
                } else {
                    out.push_str(key);
                }
            }
            Segment::Index(index) => {
                use std::fmt::Write;
                // Writing into a String cannot fail.
                let _ = write!(out, "/{index}");
            }
        }
    }
}

/// What views without an index read.
static EMPTY_INDEX: ValueIndex<'static> = ValueIndex::EMPTY;

/// Where one occurrence's entries lie in a shared [`ValueIndex`].
#[derive(Debug, Clone, Default)]
pub(crate) struct OccurrenceSpan {
    hashes: std::ops::Range<usize>,
    leaves: std::ops::Range<usize>,
}

/// One occurrence's view of a shared [`ValueIndex`].
#[derive(Debug, Clone)]
pub(crate) struct OccurrenceIndex<'a, 'v> {
    index: &'a ValueIndex<'v>,
    span: OccurrenceSpan,
}

impl Default for OccurrenceIndex<'_, '_> {
    fn default() -> Self {
        OccurrenceIndex {
            index: &EMPTY_INDEX,
            span: OccurrenceSpan::default(),
        }
    }
}

impl<'a, 'v> OccurrenceIndex<'a, 'v> {
    pub fn new(index: &'a ValueIndex<'v>, span: OccurrenceSpan) -> Self {
        Self { index, span }
    }

    /// Locations whose value hashes like `hash` (callers check equality), in the order
    /// indexed.
    pub fn candidates(&self, hash: u64) -> impl Iterator<Item = LocationId> + '_ {
        let by_hash = &self.index.by_hash[self.span.hashes.clone()];
        let start = by_hash.partition_point(|&(h, _)| h < hash);
        by_hash[start..]
            .iter()
            .take_while(move |&&(h, _)| h == hash)
            .map(|&(_, id)| id)
    }

    /// String and number leaves, in the order indexed.
    pub fn text_leaves(&self) -> &'a [TextLeaf<'v>] {
        &self.index.text_leaves[self.span.leaves.clone()]
    }

    pub fn location(&self, id: LocationId) -> Location<'v> {
        let node = &self.index.nodes[id as usize];
        Location {
            step: node.step as usize,
            side: node.side,
            value: node.value,
            element: node.element,
        }
    }

    /// The JSON pointer of a location in its payload.
    pub fn pointer(&self, id: LocationId) -> String {
        self.index.pointer_below(id, NO_PARENT)
    }

    /// For a location inside a list: the list's pointer and the pointer inside the element.
    pub fn list_pointer(&self, id: LocationId) -> Option<(String, String)> {
        let nodes = &self.index.nodes;
        let element = nodes[id as usize].element?;
        let list = self.index.pointer_below(element.list, NO_PARENT);
        // The element itself is the list's child on the way up from `id`.
        let mut child = id;
        while nodes[child as usize].parent != element.list {
            child = nodes[child as usize].parent;
        }
        Some((list, self.index.pointer_below(id, child)))
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
        let mut built = ValueIndex::default();
        let out = json!({"orders": ["#A", "#B"], "a/b": {"c": "#B"}});
        built.add(0, Side::Output, &out, 100);
        let index = built.whole();
        let ids: Vec<LocationId> = index.candidates(canonical_hash(&json!("#B"))).collect();
        let hits: Vec<Location<'_>> = ids.iter().map(|&id| index.location(id)).collect();
        let pointers: Vec<String> = ids.iter().map(|&id| index.pointer(id)).collect();
        assert_eq!(pointers, vec!["/orders/1", "/a~1b/c"]);
        assert_eq!(
            index.list_pointer(ids[0]),
            Some(("/orders".to_string(), String::new()))
        );
        assert_eq!(hits[0].element.unwrap().index, 1);
        assert_eq!(index.list_pointer(ids[1]), None);
        assert!(hits.iter().all(|l| l.value == &json!("#B")));
        // Whole containers are indexed too, the root at "".
        assert_eq!(index.candidates(canonical_hash(&out)).count(), 1);
    }

    #[test]
    fn occurrences_sharing_an_index_see_only_their_own_payloads() {
        let first = json!({"id": "x", "n": 1});
        let second = json!({"id": "y", "n": 1, "more": ["x"]});
        let mut built = ValueIndex::default();
        built.begin_occurrence();
        built.add(0, Side::Output, &first, 100);
        let one = built.occurrence_span();
        built.begin_occurrence();
        let unrelated = json!("unrelated");
        built.add(0, Side::Input, &unrelated, 100);
        built.add(1, Side::Output, &second, 100);
        let two = built.occurrence_span();
        let one = OccurrenceIndex::new(&built, one);
        let two = OccurrenceIndex::new(&built, two);
        let pointers = |index: &OccurrenceIndex<'_, '_>, value: &Value| -> Vec<String> {
            index
                .candidates(canonical_hash(value))
                .map(|id| index.pointer(id))
                .collect()
        };
        assert_eq!(pointers(&one, &json!("x")), vec!["/id"]);
        assert_eq!(pointers(&two, &json!("x")), vec!["/more/0"]);
        assert_eq!(pointers(&one, &json!(1)), vec!["/n"]);
        assert_eq!(pointers(&two, &json!(1)), vec!["/n"]);
        assert!(pointers(&one, &json!("y")).is_empty());
        assert_eq!(one.text_leaves().len(), 2);
        assert_eq!(two.text_leaves().len(), 4);
        assert!(
            OccurrenceIndex::default()
                .candidates(canonical_hash(&json!(1)))
                .next()
                .is_none()
        );
    }

    #[test]
    fn pointers_are_spelled_out_from_the_links() {
        let out = json!({"users": [{"id": "u1"}, {"profile": {"id": "u2", "a~b": [7, "u3"]}}]});
        let input = json!({"u2": "unrelated"});
        let mut built = ValueIndex::default();
        built.add(0, Side::Input, &input, 100);
        built.add(1, Side::Output, &out, 100);
        let index = built.whole();
        let find = |value: &Value| {
            index
                .candidates(canonical_hash(value))
                .last()
                .expect("indexed")
        };
        let u2 = find(&json!("u2"));
        assert_eq!(index.pointer(u2), "/users/1/profile/id");
        assert_eq!(
            index.list_pointer(u2),
            Some(("/users".to_string(), "/profile/id".to_string()))
        );
        let u3 = find(&json!("u3"));
        assert_eq!(index.pointer(u3), "/users/1/profile/a~0b/1");
        // The innermost list wins.
        assert_eq!(
            index.list_pointer(u3),
            Some(("/users/1/profile/a~0b".to_string(), String::new()))
        );
        assert_eq!(index.location(u3).element.map(|e| e.index), Some(1));
        assert_eq!(index.pointer(find(&out)), "");
        assert_eq!(index.location(u2).step, 1);
        assert_eq!(index.location(u2).side, Side::Output);
        // Payloads come in the order added: the input's "unrelated" leaf, then the output's
        // "u1", "u2", 7 and "u3".
        let leaves: Vec<usize> = index.text_leaves().iter().map(|leaf| leaf.step).collect();
        assert_eq!(leaves, vec![0, 1, 1, 1, 1]);
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
                let mut map = Map::new();
                map.insert("k".into(), deep);
                Value::Object(map)
            } else {
                Value::Array(vec![deep])
            };
        }
        let mut index = ValueIndex::default();
        index.add(0, Side::Output, &deep, 100_000);
        assert_eq!(index.nodes.len(), MAX_RECURSION_DEPTH);
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
    fn segments_are_unescaped_and_split() {
        assert_eq!(unescape_segment("a~1b~0c"), "a/b~c");
        assert!(matches!(unescape_segment("plain"), Cow::Borrowed("plain")));
        let (first, rest) = split_first_segment("/a~1b/c/d").unwrap();
        assert_eq!((first.as_ref(), rest), ("a/b", "/c/d"));
        let (first, rest) = split_first_segment("/only").unwrap();
        assert_eq!((first.as_ref(), rest), ("only", ""));
        assert!(split_first_segment("no-slash").is_none());
        assert_eq!(last_segment_cow("/x/y~0z"), "y~z");
    }

    #[test]
    fn lookup_agrees_with_serde_json_pointer() {
        let value = json!({
            "a": [1, {"b~c": {"d/e": "x"}}, [true]],
            "": {"": 0},
            "many": {"k0": 0, "k1": 1, "k2": 2, "k3": 3, "k4": 4, "k5": 5, "k6": 6, "k7": 7,
                     "k8": 8, "k9": 9},
            "07": "leading zero key"
        });
        for pointer in [
            "",
            "/a",
            "/a/0",
            "/a/1/b~0c/d~1e",
            "/a/2/0",
            "/a/01",
            "/a/-",
            "/a/+1",
            "/a/3",
            "/",
            "//",
            "/many/k9",
            "/many/k10",
            "/07",
            "/a/1/b~c",
            "a",
            "/a/0/x",
            "/a/1/",
        ] {
            assert_eq!(
                lookup(&value, pointer),
                value.pointer(pointer),
                "{pointer:?}"
            );
        }
    }

    #[test]
    fn node_cap_limits_indexing() {
        let out = json!({"a": [1, 2, 3, 4, 5, 6]});
        let mut index = ValueIndex::default();
        index.add(0, Side::Output, &out, 3);
        assert_eq!(index.nodes.len(), 3);
        assert_eq!(last_segment("/a~1b/c~0d"), "c~d");
    }
}
