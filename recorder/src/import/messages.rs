//! `openai-messages` and `anthropic-messages`: chat logs in which tool calls and their results
//! are messages. One [`Conversation`] understands both dialects:
//!
//! - OpenAI: an assistant message's `tool_calls` (`id`, `function.name`, `function.arguments` as a
//!   JSON string), answered by `role: tool` messages with `tool_call_id`; the legacy
//!   `function_call` / `role: function` pair too.
//! - Anthropic: `tool_use` blocks (`id`, `name`, `input`) in assistant content, answered by
//!   `tool_result` blocks (`tool_use_id`, `content` text or blocks, `is_error`) in user content.
//!
//! Results pair with their call by id; where ids are missing, by order (the oldest call still
//! waiting). Arguments written as Python literals (`{'zip': '19122', 'ok': True}`) are parsed into
//! the same JSON as clean ones, with `arguments_syntax: "python"` in the step's metadata;
//! arguments that parse neither way are kept as the raw string with `arguments_unparsed` saying
//! why. A result that parses as JSON becomes that value (except `null`, kept as the text so it
//! cannot be mistaken for a missing result), otherwise the text itself. An OpenAI result that
//! reads `Error: ...` (or, as tau-bench's program-writing agents log it, `# var_3 = "Error: ..."`)
//! and an Anthropic result with `is_error` are failed calls: error type `ToolError`, the text as
//! the message, no outputs. A call whose result never comes stays a step without outputs and
//! with `result_missing: true`; a result that matches no call is counted in the trace's
//! `orphan_tool_results`.
//!
//! Files may hold a list of messages (one conversation), JSON Lines of messages (one
//! conversation), or conversations (`{"messages": [...]}`) as JSON Lines or an array.

use serde_json::{Map, Value};

use super::pyliteral;
use super::records::Handler as RecordHandler;
use super::values::{id_text, tool_name, type_name};
use super::{Output, Position, RejectUnit};
use crate::error::Result;
use crate::model::{ObservedStep, ObservedTrace};

/// The error class given to calls whose result says they failed.
const TOOL_ERROR: &str = "ToolError";

/// Tool calls and results collected from a conversation's messages, in call order.
#[derive(Debug, Default)]
pub(super) struct Conversation {
    steps: Vec<ObservedStep>,
    /// Steps whose result has not been seen yet, oldest first.
    waiting: Vec<usize>,
    orphan_results: u64,
}

impl Conversation {
    /// Takes the next message. An error names what is wrong with it.
    pub fn add(&mut self, message: Value) -> Result<(), String> {
        let Value::Object(message) = message else {
            return Err(format!(
                "a message must be an object, got {}",
                type_name(&message)
            ));
        };
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        match role {
            "assistant" | "model" => {
                match message.get("tool_calls") {
                    None | Some(Value::Null) => {}
                    Some(Value::Array(calls)) => {
                        for (i, call) in calls.iter().enumerate() {
                            self.openai_call(call)
                                .map_err(|e| format!("tool_calls[{i}]: {e}"))?;
                        }
                    }
                    Some(other) => {
                        return Err(format!(
                            "`tool_calls` must be an array, got {}",
                            type_name(other)
                        ));
                    }
                }
                if let Some(call @ Value::Object(_)) = message.get("function_call") {
                    self.openai_call(&serde_json::json!({ "function": call }))
                        .map_err(|e| format!("function_call: {e}"))?;
                }
                if let Some(Value::Array(blocks)) = message.get("content") {
                    for (i, block) in blocks.iter().enumerate() {
                        if block.get("type").and_then(Value::as_str) == Some("tool_use") {
                            self.anthropic_call(block)
                                .map_err(|e| format!("content[{i}]: {e}"))?;
                        }
                    }
                }
            }
            "tool" | "function" => self.openai_result(&message),
            _ => {
                if let Some(Value::Array(blocks)) = message.get("content") {
                    for block in blocks {
                        if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                            self.anthropic_result(block);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The steps, and what the trace's metadata should note.
    pub fn finish(mut self) -> (Vec<ObservedStep>, Map<String, Value>) {
        for &index in &self.waiting {
            self.steps[index]
                .metadata
                .insert("result_missing".to_owned(), Value::Bool(true));
        }
        let mut metadata = Map::new();
        if self.orphan_results > 0 {
            metadata.insert(
                "orphan_tool_results".to_owned(),
                Value::from(self.orphan_results),
            );
        }
        (self.steps, metadata)
    }

    fn push_call(&mut self, step: ObservedStep) {
        self.waiting.push(self.steps.len());
        self.steps.push(step);
    }

    fn openai_call(&mut self, call: &Value) -> Result<(), String> {
        let Value::Object(call) = call else {
            return Err(format!(
                "a tool call must be an object, got {}",
                type_name(call)
            ));
        };
        // Some harnesses flatten `function` into the call itself.
        let function = match call.get("function") {
            Some(Value::Object(function)) => function,
            Some(other) => {
                return Err(format!(
                    "`function` must be an object, got {}",
                    type_name(other)
                ));
            }
            None => call,
        };
        let name = tool_name(function.get("name"), "function.name")?;
        let mut metadata = Map::new();
        let inputs = match function.get("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(Value::String(text)) => parse_arguments(text, &mut metadata),
            Some(other) => other.clone(),
        };
        let mut step = ObservedStep::new(String::new(), 0, name, inputs);
        step.call_id = id_text(call.get("id"));
        step.metadata = metadata;
        self.push_call(step);
        Ok(())
    }

    fn anthropic_call(&mut self, block: &Value) -> Result<(), String> {
        let name = tool_name(block.get("name"), "name")?;
        let mut metadata = Map::new();
        let inputs = match block.get("input") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(Value::String(text)) => parse_arguments(text, &mut metadata),
            Some(other) => other.clone(),
        };
        let mut step = ObservedStep::new(String::new(), 0, name, inputs);
        step.call_id = id_text(block.get("id"));
        step.metadata = metadata;
        self.push_call(step);
        Ok(())
    }

    /// The waiting call a result answers: the one with its id, else the oldest one without an
    /// id, else (when the result has no id either) the oldest one.
    fn pair(&mut self, id: Option<&str>) -> Option<usize> {
        let steps = &self.steps;
        let found = id
            .and_then(|id| {
                self.waiting
                    .iter()
                    .position(|&i| steps[i].call_id.as_deref() == Some(id))
            })
            .or_else(|| {
                self.waiting
                    .iter()
                    .position(|&i| steps[i].call_id.is_none())
            })
            .or_else(|| {
                if id.is_none() && !self.waiting.is_empty() {
                    Some(0)
                } else {
                    None
                }
            })?;
        Some(self.waiting.remove(found))
    }

    fn openai_result(&mut self, message: &Map<String, Value>) {
        let id = id_text(message.get("tool_call_id"));
        let Some(index) = self.pair(id.as_deref()) else {
            self.orphan_results += 1;
            return;
        };
        let step = &mut self.steps[index];
        if let Some(Value::String(name)) = message.get("name")
            && *name != step.tool_name
        {
            step.metadata
                .insert("result_name".to_owned(), Value::String(name.clone()));
        }
        let text = match message.get("content") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text.clone(),
            Some(Value::Array(parts)) if parts.iter().all(is_text_part) => join_text(parts),
            Some(other) => {
                step.outputs = Some(other.clone());
                return;
            }
        };
        if let Some(message) = error_result(&text) {
            if message != text {
                step.metadata
                    .insert("result_text".to_owned(), Value::String(text));
            }
            step.error_type = Some(TOOL_ERROR.to_owned());
            step.error_message = Some(message);
        } else {
            step.outputs = Some(json_or_text(text));
        }
    }

    fn anthropic_result(&mut self, block: &Value) {
        let id = id_text(block.get("tool_use_id"));
        let Some(index) = self.pair(id.as_deref()) else {
            self.orphan_results += 1;
            return;
        };
        let step = &mut self.steps[index];
        let output = match block.get("content") {
            None | Some(Value::Null) => Value::String(String::new()),
            Some(Value::String(text)) => json_or_text(text.clone()),
            Some(Value::Array(parts)) if parts.iter().all(is_text_part) => {
                json_or_text(join_text(parts))
            }
            Some(other) => other.clone(),
        };
        if block.get("is_error") == Some(&Value::Bool(true)) {
            step.error_type = Some(TOOL_ERROR.to_owned());
            step.error_message = Some(match block.get("content") {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Array(parts)) if parts.iter().all(is_text_part) => join_text(parts),
                _ => output.to_string(),
            });
        } else {
            step.outputs = Some(output);
        }
    }
}

fn is_text_part(part: &Value) -> bool {
    part.is_string() || part.get("type").and_then(Value::as_str) == Some("text")
}

fn join_text(parts: &[Value]) -> String {
    parts
        .iter()
        .filter_map(|p| p.as_str().or_else(|| p.get("text").and_then(Value::as_str)))
        .collect::<Vec<_>>()
        .join("")
}

/// Arguments as JSON, or as a Python literal, or (noting why) as the raw text.
pub(super) fn parse_arguments(text: &str, metadata: &mut Map<String, Value>) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Map::new());
    }
    let json_error = match serde_json::from_str::<Value>(text) {
        Ok(value) => return value,
        Err(e) => e,
    };
    match pyliteral::parse(text) {
        Ok(value) => {
            metadata.insert(
                "arguments_syntax".to_owned(),
                Value::String("python".to_owned()),
            );
            value
        }
        Err(python_error) => {
            metadata.insert(
                "arguments_unparsed".to_owned(),
                Value::String(format!(
                    "not JSON ({json_error}) nor a Python literal ({python_error})"
                )),
            );
            Value::String(text.to_owned())
        }
    }
}

/// A result's text as JSON when it parses (and is not `null`), else as a string.
fn json_or_text(text: String) -> Value {
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Null) | Err(_) => Value::String(text),
        Ok(value) => value,
    }
}

/// The error message when a result's text says the call failed: `Error: ...`, or tau-bench's
/// `# var_N = "Error: ..."` (a Python string assigned in the agent's program).
fn error_result(text: &str) -> Option<String> {
    let trimmed = text.trim();
    if trimmed.starts_with("Error:") || trimmed == "Error" {
        return Some(text.to_owned());
    }
    let assignment = trimmed.strip_prefix('#')?.trim_start();
    let (name, literal) = assignment.split_once('=')?;
    let name = name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    match pyliteral::parse(literal.trim()) {
        Ok(Value::String(inner)) if inner.starts_with("Error:") || inner == "Error" => Some(inner),
        _ => None,
    }
}

/// The `openai-messages` / `anthropic-messages` handler.
#[derive(Default)]
pub(crate) struct Handler {
    /// Messages that came one a record: together one conversation, the file's.
    loose: Option<Conversation>,
}

/// The fields a conversation record may name itself with.
const ID_FIELDS: [&str; 4] = ["id", "conversation_id", "session_id", "trace_id"];

impl RecordHandler for Handler {
    fn record(
        &mut self,
        out: &mut Output<'_>,
        at: Position,
        value: Value,
    ) -> Result<Result<(), String>> {
        let fallback_id = match at.unit {
            RejectUnit::Line => format!("{}:{}", out.stem, at.line),
            RejectUnit::Record => format!("{}#{}", out.stem, at.line),
        };
        let (messages, mut record) = match value {
            Value::Array(messages) => (messages, Map::new()),
            Value::Object(mut record) => match record.remove("messages") {
                Some(Value::Array(messages)) => (messages, record),
                Some(other) => {
                    return Ok(Err(format!(
                        "`messages` must be an array, got {}",
                        type_name(&other)
                    )));
                }
                None if record.contains_key("role") => {
                    let loose = self.loose.get_or_insert_with(Conversation::default);
                    return Ok(loose.add(Value::Object(record)));
                }
                None => {
                    return Ok(Err(
                        "expected a message (with `role`) or a conversation (with `messages`)"
                            .to_owned(),
                    ));
                }
            },
            other => {
                return Ok(Err(format!(
                    "expected a message or a conversation, got {}",
                    type_name(&other)
                )));
            }
        };
        let mut conversation = Conversation::default();
        for (i, message) in messages.into_iter().enumerate() {
            if let Err(e) = conversation.add(message) {
                return Ok(Err(format!("messages[{i}]: {e}")));
            }
        }
        let trace_id = ID_FIELDS
            .iter()
            .find_map(|field| id_text(record.get(*field)).map(|id| (field, id)))
            .map(|(field, id)| {
                record.remove(*field);
                id
            })
            .unwrap_or(fallback_id);
        let (steps, notes) = conversation.finish();
        let mut trace = ObservedTrace::new(trace_id, String::new());
        record.extend(notes);
        trace.metadata = record;
        out.emit(trace, steps)?;
        Ok(Ok(()))
    }

    fn finish(&mut self, out: &mut Output<'_>) -> Result<()> {
        if let Some(conversation) = self.loose.take() {
            let (steps, notes) = conversation.finish();
            let mut trace = ObservedTrace::new(out.stem.clone(), String::new());
            trace.metadata = notes;
            out.emit(trace, steps)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(messages: Value) -> (Vec<ObservedStep>, Map<String, Value>) {
        let mut c = Conversation::default();
        for m in messages.as_array().unwrap() {
            c.add(m.clone()).unwrap();
        }
        c.finish()
    }

    #[test]
    fn openai_calls_pair_by_id_even_out_of_order() {
        let (steps, meta) = run(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{'y': True}"}}
            ]},
            {"role": "tool", "tool_call_id": "b", "content": "{\"ok\": 1}"},
            {"role": "tool", "tool_call_id": "a", "content": "plain text"}
        ]));
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].tool_name, "f");
        assert_eq!(steps[0].outputs, Some(json!("plain text")));
        assert_eq!(steps[1].inputs, json!({"y": true}));
        assert_eq!(
            steps[1].metadata.get("arguments_syntax"),
            Some(&json!("python"))
        );
        assert_eq!(steps[1].outputs, Some(json!({"ok": 1})));
        assert!(meta.is_empty());
    }

    #[test]
    fn pairs_by_order_without_ids_and_notes_missing_and_orphans() {
        let (steps, meta) = run(json!([
            {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "content": "Error: user not found"},
            {"role": "assistant", "tool_calls": [{"function": {"name": "g", "arguments": "not an argument"}}]},
            {"role": "tool", "tool_call_id": "zzz", "content": "x"}
        ]));
        // The result with an unknown id still answers the oldest call that has no id.
        assert_eq!(steps[0].error_type.as_deref(), Some("ToolError"));
        assert_eq!(
            steps[0].error_message.as_deref(),
            Some("Error: user not found")
        );
        assert_eq!(steps[0].outputs, None);
        assert_eq!(steps[1].outputs, Some(json!("x")));
        assert_eq!(steps[1].inputs, json!("not an argument"));
        assert!(steps[1].metadata.contains_key("arguments_unparsed"));
        assert!(meta.is_empty());

        let (steps, meta) = run(json!([
            {"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": ""}}]},
            {"role": "tool", "tool_call_id": "2", "content": "x"}
        ]));
        assert_eq!(steps[0].inputs, json!({}));
        assert_eq!(steps[0].metadata.get("result_missing"), Some(&json!(true)));
        assert_eq!(meta.get("orphan_tool_results"), Some(&json!(1)));
    }

    #[test]
    fn assigned_error_strings_are_failures() {
        let (steps, _) = run(json!([
            {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "content": "# var_6 = \"Error: non-delivered order cannot be returned\""},
            {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "content": "# var_7 = \"fine\""}
        ]));
        assert_eq!(
            steps[0].error_message.as_deref(),
            Some("Error: non-delivered order cannot be returned")
        );
        assert!(steps[0].metadata.contains_key("result_text"));
        assert!(!steps[1].is_error());
        assert_eq!(steps[1].outputs, Some(json!("# var_7 = \"fine\"")));
    }

    #[test]
    fn anthropic_blocks() {
        let (steps, _) = run(json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "tu1", "name": "get", "input": {"id": 3}},
                {"type": "tool_use", "id": "tu2", "name": "put", "input": {"v": "x"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "tu2", "content": "denied", "is_error": true},
                {"type": "tool_result", "tool_use_id": "tu1", "content": [{"type": "text", "text": "{\"n\": 2}"}]}
            ]}
        ]));
        assert_eq!(steps[0].call_id.as_deref(), Some("tu1"));
        assert_eq!(steps[0].outputs, Some(json!({"n": 2})));
        assert!(steps[1].is_error());
        assert_eq!(steps[1].error_message.as_deref(), Some("denied"));
        assert_eq!(steps[1].outputs, None);
    }

    #[test]
    fn bad_calls_are_errors() {
        let mut c = Conversation::default();
        let err = c
            .add(json!({"role": "assistant", "tool_calls": [{"function": {"name": 5}}]}))
            .unwrap_err();
        assert!(
            err.contains("tool_calls[0]") && err.contains("must be a string"),
            "{err}"
        );
        assert!(c.add(json!("text")).is_err());
    }

    #[test]
    fn null_result_text_stays_text() {
        assert_eq!(json_or_text("null".to_owned()), json!("null"));
        assert_eq!(json_or_text("12".to_owned()), json!(12));
    }
}
