//! `openai-messages` and `anthropic-messages`: chat logs in which tool calls and their results
//! are messages. One [`Conversation`] understands both dialects and the variants harnesses write:
//!
//! - OpenAI: a message's `tool_calls` (`id`, `function.name`, `function.arguments` as a JSON
//!   string), answered by `role: tool` messages with `tool_call_id`; the legacy `function_call` /
//!   `role: function` pair too. Variants seen in real logs: the call flattened (`{id, name,
//!   arguments}`, tau2-bench), `function` as a plain string with `args`, `tool_calls` written as
//!   a (Python or JSON) string, results keyed by `id` instead of `tool_call_id`, and results
//!   naming their calls in a `tool_call_ids` list (SWE-agent). Tool calls are taken from any
//!   role but `tool`, since user simulators call tools too.
//! - Anthropic: `tool_use` blocks (`id`, `name`, `input`) in assistant content, answered by
//!   `tool_result` blocks (`tool_use_id`, `content` text or blocks, `is_error`) in user content.
//!
//! Results pair with their call by id; where ids are missing, by order (the oldest call still
//! waiting). Arguments written as Python literals (`{'zip': '19122', 'ok': True}`) are parsed into
//! the same JSON as clean ones, with `arguments_syntax: "python"` in the step's metadata;
//! arguments that parse neither way are kept as the raw string with `arguments_unparsed` saying
//! why. A result that parses as JSON becomes that value (except `null`, kept as the text so it
//! cannot be mistaken for a missing result), otherwise the text itself.
//!
//! Failed calls get error type `ToolError`, the failure text as the message and no outputs. A
//! result fails when it reads `Error: ...` (or, as tau-bench's program-writing agents log it,
//! `# var_3 = "Error: ..."`), when the message says `error: true` (tau2-bench) or the Anthropic
//! block `is_error`, and when it is a JSON object whose `error` is set (`{"error": "timeout",
//! "response": ""}`, as ToolBench's tools answer; an empty or `null` `error` is a success).
//! A call whose result never comes stays a step without outputs and with `result_missing: true`;
//! a result that matches no call is counted in the trace's `orphan_tool_results`.
//!
//! A message's `timestamp` (when the harness writes one) becomes the call's `started_at` and the
//! result's `ended_at`, and the two give the step's duration.
//!
//! Files may hold a list of messages (one conversation), JSON Lines of messages (one
//! conversation), or conversations (`{"messages": [...]}`) as JSON Lines or an array.

use serde_json::{Map, Value};

use super::pyliteral;
use super::records::Handler as RecordHandler;
use super::values::{id_text, timestamp, tool_name, type_name};
use super::{Output, Position, RejectUnit};
use crate::error::Result;
use crate::model::{ObservedStep, ObservedTrace, Timestamp};

/// The error class given to calls whose result says they failed.
pub(super) const TOOL_ERROR: &str = "ToolError";

/// The step metadata key that marks a call whose result never came.
pub(super) const RESULT_MISSING: &str = "result_missing";

/// Tool calls and results collected from a conversation's messages, in call order.
#[derive(Debug, Default)]
pub(super) struct Conversation {
    steps: Vec<ObservedStep>,
    /// Steps whose result has not been seen yet, oldest first.
    waiting: Vec<usize>,
    orphan_results: u64,
    /// When the message being read was written, if the log says.
    now: Option<Timestamp>,
}

impl Conversation {
    /// Takes the next message; its own `timestamp` field, when it has one, times it. An error
    /// names what is wrong with it.
    pub fn add(&mut self, message: Value) -> Result<(), String> {
        let at = message.get("timestamp").and_then(timestamp);
        self.add_at(message, at)
    }

    /// Takes the next message, written at `at` (the container's timestamp, say).
    pub fn add_at(&mut self, message: Value, at: Option<Timestamp>) -> Result<(), String> {
        let Value::Object(message) = message else {
            return Err(format!(
                "a message must be an object, got {}",
                type_name(&message)
            ));
        };
        self.now = at;
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        if role == "tool" || role == "function" {
            self.openai_result(&message);
            return Ok(());
        }
        match message.get("tool_calls") {
            None | Some(Value::Null) => {}
            Some(calls) => {
                for (i, call) in tool_call_list(calls)?.iter().enumerate() {
                    self.openai_call(call)
                        .map_err(|e| format!("tool_calls[{i}]: {e}"))?;
                }
            }
        }
        if let Some(call @ Value::Object(_)) = message.get("function_call") {
            self.openai_call(&serde_json::json!({ "function": call }))
                .map_err(|e| format!("function_call: {e}"))?;
        }
        if let Some(Value::Array(blocks)) = message.get("content") {
            for (i, block) in blocks.iter().enumerate() {
                match block.get("type").and_then(Value::as_str) {
                    Some("tool_use") => self
                        .anthropic_call(block)
                        .map_err(|e| format!("content[{i}]: {e}"))?,
                    Some("tool_result") => self.anthropic_result(block),
                    _ => {}
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
                .insert(RESULT_MISSING.to_owned(), Value::Bool(true));
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

    /// Adds a call made elsewhere (a text action, say) that waits for its result like any other.
    pub fn push_call(&mut self, mut step: ObservedStep) {
        if step.started_at.is_none() {
            step.started_at = self.now;
        }
        self.waiting.push(self.steps.len());
        self.steps.push(step);
    }

    /// Times what comes next (calls pushed, results answered) at `at`.
    pub fn set_time(&mut self, at: Option<Timestamp>) {
        self.now = at;
    }

    /// The last call added, for the format that knows more about it.
    pub fn last_call_mut(&mut self) -> Option<&mut ObservedStep> {
        self.steps.last_mut()
    }

    /// The call with this id, for the format that knows more about it.
    pub fn call_mut(&mut self, call_id: &str) -> Option<&mut ObservedStep> {
        self.steps
            .iter_mut()
            .rev()
            .find(|step| step.call_id.as_deref() == Some(call_id))
    }

    /// How many calls so far.
    pub fn calls(&self) -> usize {
        self.steps.len()
    }

    /// Answers the oldest waiting call (or the one with `id`) with `result`; `false` when no
    /// call was waiting.
    pub fn answer(&mut self, id: Option<&str>, result: CallResult) -> bool {
        let Some(index) = self.pair(id) else {
            self.orphan_results += 1;
            return false;
        };
        let now = self.now;
        apply_result(&mut self.steps[index], result, now);
        true
    }

    fn openai_call(&mut self, call: &Value) -> Result<(), String> {
        let Value::Object(call) = call else {
            return Err(format!(
                "a tool call must be an object, got {}",
                type_name(call)
            ));
        };
        // Some harnesses flatten `function` into the call itself; some write it as the name.
        let (name, function) = match call.get("function") {
            Some(Value::Object(function)) => {
                (tool_name(function.get("name"), "function.name")?, function)
            }
            Some(Value::String(name)) if !name.trim().is_empty() => (name.clone(), call),
            Some(other) => {
                return Err(format!(
                    "`function` must be an object or a name, got {}",
                    type_name(other)
                ));
            }
            None => (tool_name(call.get("name"), "name")?, call),
        };
        let mut metadata = Map::new();
        let arguments = function.get("arguments").or_else(|| function.get("args"));
        let inputs = match arguments {
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
        let flagged = message.get("error") == Some(&Value::Bool(true));
        let result = match message.get("content") {
            None | Some(Value::Null) => CallResult::text(String::new(), flagged),
            Some(Value::String(text)) => CallResult::text(text.clone(), flagged),
            Some(Value::Array(parts)) if parts.iter().all(is_text_part) => {
                CallResult::text(join_text(parts), flagged)
            }
            Some(other) => CallResult::Value(other.clone(), flagged),
        };
        let name = match message.get("name") {
            Some(Value::String(name)) => Some(name.clone()),
            _ => None,
        };
        // `tool_call_id` is the standard; tau2-bench keys results by `id`, SWE-agent lists them.
        let ids = match id_text(message.get("tool_call_id")).or_else(|| id_text(message.get("id")))
        {
            Some(id) => vec![id],
            None => id_list(message.get("tool_call_ids")),
        };
        if ids.is_empty() {
            self.answer_named(None, result, name);
        } else {
            for id in &ids {
                self.answer_named(Some(id), result.clone(), name.clone());
            }
        }
    }

    fn answer_named(&mut self, id: Option<&str>, result: CallResult, name: Option<String>) {
        let Some(index) = self.pair(id) else {
            self.orphan_results += 1;
            return;
        };
        let step = &mut self.steps[index];
        if let Some(name) = name
            && name != step.tool_name
        {
            step.metadata
                .insert("result_name".to_owned(), Value::String(name));
        }
        apply_result(step, result, self.now);
    }

    fn anthropic_result(&mut self, block: &Value) {
        let id = id_text(block.get("tool_use_id"));
        let flagged = block.get("is_error") == Some(&Value::Bool(true));
        let result = match block.get("content") {
            None | Some(Value::Null) => CallResult::text(String::new(), flagged),
            Some(Value::String(text)) => CallResult::text(text.clone(), flagged),
            Some(Value::Array(parts)) if parts.iter().all(is_text_part) => {
                CallResult::text(join_text(parts), flagged)
            }
            Some(other) => CallResult::Value(other.clone(), flagged),
        };
        self.answer(id.as_deref(), result);
    }
}

/// What answered a call: text as the tool wrote it, or a structured value; `true` when the log
/// flags it as failed.
#[derive(Debug, Clone)]
pub(super) enum CallResult {
    Text(String, bool),
    Value(Value, bool),
}

impl CallResult {
    pub fn text(text: String, flagged: bool) -> Self {
        CallResult::Text(text, flagged)
    }
}

/// Writes `result` into `step`: outputs, or the failure it says; `ended_at` and the duration
/// when the result is timed.
pub(super) fn apply_result(step: &mut ObservedStep, result: CallResult, at: Option<Timestamp>) {
    if let Some(ended) = at {
        step.ended_at = Some(ended);
        if let Some(started) = step.started_at
            && ended >= started
        {
            #[allow(clippy::cast_precision_loss)]
            let millis = (ended - started)
                .num_microseconds()
                .map(|us| us as f64 / 1000.0);
            step.duration_ms = millis;
        }
    }
    let (value, text, flagged) = match result {
        CallResult::Text(text, flagged) => (json_or_text(text.clone()), Some(text), flagged),
        CallResult::Value(value, flagged) => (value, None, flagged),
    };
    let failure = text
        .as_deref()
        .and_then(error_result)
        .or_else(|| error_field(&value))
        .or_else(|| {
            flagged.then(|| match &text {
                Some(text) => text.clone(),
                None => value.to_string(),
            })
        });
    match failure {
        Some(message) => {
            let original = text.unwrap_or_else(|| value.to_string());
            if message != original {
                step.metadata
                    .insert("result_text".to_owned(), Value::String(original));
            }
            step.error_type = Some(TOOL_ERROR.to_owned());
            step.error_message = Some(message);
        }
        None => step.outputs = Some(value),
    }
}

/// The failure a structured result reports in its `error` field: a non-empty text, `true`, or
/// an object (its `message` when it has one).
fn error_field(value: &Value) -> Option<String> {
    match value.get("error")? {
        Value::String(text) if !text.trim().is_empty() => Some(text.clone()),
        Value::Bool(true) => Some("error".to_owned()),
        Value::Object(detail) => Some(match detail.get("message") {
            Some(Value::String(message)) => message.clone(),
            _ => Value::Object(detail.clone()).to_string(),
        }),
        _ => None,
    }
}

/// `tool_calls` as a list: an array, or an array written as JSON or Python text.
fn tool_call_list(calls: &Value) -> Result<Vec<Value>, String> {
    match calls {
        Value::Array(calls) => Ok(calls.clone()),
        Value::String(text) if text.trim().is_empty() => Ok(Vec::new()),
        Value::String(text) => {
            let parsed = serde_json::from_str::<Value>(text)
                .ok()
                .or_else(|| pyliteral::parse(text).ok());
            match parsed {
                Some(Value::Array(calls)) => Ok(calls),
                Some(Value::Null) => Ok(Vec::new()),
                _ => Err("`tool_calls` is text that is not a list of calls".to_owned()),
            }
        }
        other => Err(format!(
            "`tool_calls` must be an array, got {}",
            type_name(other)
        )),
    }
}

/// A list of ids: an array, or an array written as JSON or Python text.
fn id_list(value: Option<&Value>) -> Vec<String> {
    let items = match value {
        Some(Value::Array(items)) => items.clone(),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text)
            .ok()
            .or_else(|| pyliteral::parse(text).ok())
        {
            Some(Value::Array(items)) => items,
            _ => vec![Value::String(text.clone())],
        },
        _ => Vec::new(),
    };
    items.iter().filter_map(|id| id_text(Some(id))).collect()
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
pub(super) fn error_result(text: &str) -> Option<String> {
    let trimmed = text.trim();
    if trimmed.starts_with("Error:") || trimmed.starts_with("ERROR:") || trimmed == "Error" {
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
