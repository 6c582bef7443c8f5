//! The step cache: outputs of cacheable tools, keyed by tool, schema hash and canonical input.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::tool::{JsonObject, Tool, canonical_json};

/// Memoized outputs of cacheable tools. A changed schema (hash) or input misses; a late result
/// of a timed-out call is never stored because only successful calls are.
#[derive(Debug, Default)]
pub struct StepCache {
    entries: Mutex<HashMap<String, JsonObject>>,
    max_entries: Option<usize>,
    hits: std::sync::atomic::AtomicU64,
    misses: std::sync::atomic::AtomicU64,
}

impl StepCache {
    /// An unbounded cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache that stops adding entries once it holds `max_entries`.
    pub fn bounded(max_entries: usize) -> Self {
        Self {
            max_entries: Some(max_entries),
            ..Self::default()
        }
    }

    /// The key of one call: tool name, schema hash and canonical input JSON.
    pub fn key(tool: &Tool, input: &JsonObject) -> String {
        let input = serde_json::Value::Object(input.clone());
        format!(
            "{}\u{1f}{}\u{1f}{}",
            tool.name(),
            tool.schema_hash(),
            canonical_json(&input)
        )
    }

    /// The cached outputs for a key.
    pub fn get(&self, key: &str) -> Option<JsonObject> {
        let found = self
            .entries
            .lock()
            .ok()
            .and_then(|entries| entries.get(key).cloned());
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        found
    }

    /// Remember outputs for a key.
    pub fn put(&self, key: String, outputs: JsonObject) {
        if let Ok(mut entries) = self.entries.lock()
            && self
                .max_entries
                .is_none_or(|max| entries.len() < max || entries.contains_key(&key))
        {
            entries.insert(key, outputs);
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// (hits, misses) so far.
    pub fn stats(&self) -> (u64, u64) {
        (
            self.hits.load(std::sync::atomic::Ordering::Relaxed),
            self.misses.load(std::sync::atomic::Ordering::Relaxed),
        )
    }
}
