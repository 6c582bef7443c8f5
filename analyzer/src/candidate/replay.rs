//! The mapping replay: the flow's mappings run over each occurrence, to check they reproduce
//! the observed arguments and to see the contexts the flow ends with.

use serde_json::{Map, Value};

use super::wiring::Builder;
use crate::fast_hash::KeyIndex;
use crate::infer::index::{lookup, member, split_first_segment};

/// What the replay found: occurrences whose every step got exactly its observed arguments, and
/// each occurrence's final context.
pub(super) struct Replay<'c> {
    pub(super) reproduced: usize,
    pub(super) final_contexts: Vec<Context<'c>>,
}

/// Replay the input and output mappings over the occurrences, starting each from the flow
/// inputs the caller would have passed.
pub(super) fn replay_mappings<'c>(
    builder: &'c Builder<'_, 'c>,
    mappings: &[Map<String, Value>],
    output_mappings: &'c [Option<Map<String, Value>>],
) -> Replay<'c> {
    let views = builder.views;
    let len = builder.step_ids.len();
    let mut reproduced = 0;
    let mut final_contexts = Vec::with_capacity(views.len());
    for (o, view) in views.iter().enumerate() {
        let mut context = Context::default();
        for (name, input) in &builder.inputs {
            if let Some(value) = input.values[o].or(input.default.as_ref()) {
                context.insert(name, value);
            }
        }
        let mut all_equal = true;
        for step in 0..len {
            if !resolves_to(&mappings[step], &context, &view.steps[step].inputs) {
                all_equal = false;
            }
            if let Some(output) = view.outputs[step] {
                // Outputs that are not objects are seen as `{"result": output}`.
                let wrapped_get = |key: &str| match output {
                    Value::Object(map) => member(map, key),
                    other => (key == "result").then_some(other),
                };
                match &output_mappings[step] {
                    None => match output {
                        Value::Object(map) => {
                            for (key, value) in map {
                                context.insert(key, value);
                            }
                        }
                        other => context.insert("result", other),
                    },
                    Some(mapping) => {
                        for (context_key, output_key) in mapping {
                            if let Some(value) = output_key.as_str().and_then(wrapped_get) {
                                context.insert(context_key, value);
                            }
                        }
                    }
                }
            }
        }
        if all_equal {
            reproduced += 1;
        }
        final_contexts.push(context);
    }
    Replay {
        reproduced,
        final_contexts,
    }
}

/// A flow context during the mapping replay: keys in insertion order, values borrowed from the
/// occurrences and the candidate (payloads are never copied).
#[derive(Debug, Default)]
pub(super) struct Context<'c> {
    keys: KeyIndex<&'c str>,
    values: Vec<&'c Value>,
}

impl<'c> Context<'c> {
    pub(super) fn get(&self, key: &str) -> Option<&'c Value> {
        self.keys.position(key).map(|at| self.values[at])
    }

    /// Like a map insert: an existing key keeps its place and takes the new value.
    pub(super) fn insert(&mut self, key: &'c str, value: &'c Value) {
        match self.keys.position(key) {
            Some(at) => self.values[at] = value,
            None => {
                self.keys.push(key);
                self.values.push(value);
            }
        }
    }

    /// The entries in insertion order.
    pub(super) fn entries(&self) -> impl Iterator<Item = (&'c str, &'c Value)> + '_ {
        self.keys
            .keys()
            .iter()
            .copied()
            .zip(self.values.iter().copied())
    }

    /// Equal as JSON objects (key order does not matter).
    fn equals(&self, map: &Map<String, Value>) -> bool {
        self.values.len() == map.len() && self.entries().all(|(k, v)| member(map, k) == Some(v))
    }
}

/// Whether `mapping` resolved against `context` gives exactly `inputs`: resolving (as the
/// test-only `resolve` does) followed by a comparison, without copying the context or the
/// resolved values.
pub(super) fn resolves_to(
    mapping: &Map<String, Value>,
    context: &Context<'_>,
    inputs: &Value,
) -> bool {
    let Value::Object(inputs) = inputs else {
        return false;
    };
    if mapping.is_empty() {
        return context.equals(inputs);
    }
    let mut resolved = 0;
    for (field, source) in mapping {
        let value = match source {
            Value::String(s) if s.starts_with('/') => context_pointer(context, s),
            Value::String(s) => context.get(s),
            literal => Some(literal),
        };
        if let Some(value) = value {
            resolved += 1;
            if member(inputs, field) != Some(value) {
                return false;
            }
        }
    }
    resolved == inputs.len()
}

/// `pointer` (starting with `/`) resolved in the context seen as one object.
fn context_pointer<'c>(context: &Context<'c>, pointer: &str) -> Option<&'c Value> {
    let (key, tail) = split_first_segment(pointer)?;
    lookup(context.get(&key)?, tail)
}

/// What an input mapping hands a tool, given a context (the specification's semantics).
#[cfg(test)]
pub(super) fn resolve(mapping: &Map<String, Value>, context: &Map<String, Value>) -> Value {
    if mapping.is_empty() {
        return Value::Object(context.clone());
    }
    let whole = Value::Object(context.clone());
    let mut resolved = Map::new();
    for (field, source) in mapping {
        let value = match source {
            Value::String(s) if s.starts_with('/') => whole.pointer(s).cloned(),
            Value::String(s) => context.get(s).cloned(),
            literal => Some(literal.clone()),
        };
        if let Some(value) = value {
            resolved.insert(field.clone(), value);
        }
    }
    Value::Object(resolved)
}
