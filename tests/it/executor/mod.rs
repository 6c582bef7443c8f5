//! Executor tests: tools, mappings, error policies, compile checks, cache, checkpoints, DAG
//! concurrency, streaming, replay, chain tools, and the CLI end to end with command tools.

// Helpers outside `#[test]` functions panic on broken fixtures on purpose.
#![allow(clippy::unwrap_used)]

mod chain;
mod cli;
mod compile;
mod flows;
mod map;
mod registry;
mod replay;
mod runtime;
mod tools;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use chainweaver::recorder::model::flow::FlowDefinition;
use chainweaver::tool::{JsonObject, Tool, ToolFailure, ToolRegistry};
use serde_json::{Value, json};

/// A JSON object from a `json!` literal.
pub fn obj(value: Value) -> JsonObject {
    value.as_object().cloned().expect("a JSON object")
}

/// A flow definition from a `json!` literal.
pub fn flow(value: Value) -> FlowDefinition {
    FlowDefinition::from_value(value).expect("a valid flow")
}

/// An object schema with typed properties and required fields.
pub fn schema(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

/// A registry of the given tools.
pub fn registry(tools: Vec<Tool>) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    for tool in tools {
        registry.register(tool);
    }
    registry
}

/// A call counter shared with a tool.
#[derive(Clone, Default)]
pub struct Calls(Arc<AtomicUsize>);

impl Calls {
    pub fn bump(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// `add`: {a, b} -> {sum}, counting calls.
pub fn add_tool(calls: &Calls) -> Tool {
    let calls = calls.clone();
    Tool::sync("add", move |input| {
        calls.bump();
        let a = input["a"].as_f64().ok_or("a is not a number")?;
        let b = input["b"].as_f64().ok_or("b is not a number")?;
        Ok(json!({"sum": a + b}))
    })
    .input_schema(schema(
        json!({"a": {"type": "number"}, "b": {"type": "number"}}),
        &["a", "b"],
    ))
    .output_schema(schema(json!({"sum": {"type": "number"}}), &["sum"]))
    .build()
    .unwrap()
}

/// A tool that fails with `message` every time.
pub fn failing_tool(name: &str, message: &'static str, calls: &Calls) -> Tool {
    let calls = calls.clone();
    Tool::sync(name, move |_| {
        calls.bump();
        Err(ToolFailure::of_kind("ValueError", message))
    })
    .build()
    .unwrap()
}

/// The repository's `datasets/` folder.
pub fn datasets() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("datasets")
}
