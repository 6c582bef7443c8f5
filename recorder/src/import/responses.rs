//! `openai-responses` and `codex-rollout`: OpenAI Responses API items, bare or inside Codex CLI
//! rollout files.
//!
//! Items: `function_call` (`name`, `arguments` as JSON text), `custom_tool_call` (`name`, `input`
//! as free text) and `local_shell_call` (`action`) are calls, answered by
//! `function_call_output` / `custom_tool_call_output` / `local_shell_call_output` items with the
//! same `call_id`. A `web_search_call` is a call too (its `action` as the inputs), but the search
//! results go straight to the model and are never written as an item, so it stays a call
//! without a result (`result_missing`). A call whose `status` is `failed` or `incomplete` failed,
//! and so did an output that says `success: false`, a non-zero exit code (`metadata.exit_code`,
//! or text starting `Exit code: N`), or the usual `Error:` text (see [`super::messages`]).
//!
//! `openai-responses` files hold items one a line, an array of items, or response objects
//! (`{"object": "response", "output": [...]}`) one a line; the whole file is one trace (named by
//! the first response's `id`, else the file). `codex-rollout` files hold one rollout line a
//! record, `{timestamp, type, payload}`: `session_meta` names the trace (its `id`) and gives the
//! working directory, originator, version and git commit; `response_item` payloads are items;
//! `turn_context` gives the model; the rest (`event_msg`, `compacted`) hold no calls. Each line's
//! `timestamp` times the calls and outputs it carries.

use serde_json::{Map, Value};

use super::messages::{CallResult, Conversation, parse_arguments};
use super::records::Handler as RecordHandler;
use super::values::{id_text, timestamp, tool_name, type_name};
use super::{Output, Position};
use crate::error::Result;
use crate::model::{ObservedStep, ObservedTrace, Timestamp};

/// Item types that are calls.
const CALL_TYPES: [&str; 4] = [
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "web_search_call",
];

/// Item types that answer calls.
const OUTPUT_TYPES: [&str; 3] = [
    "function_call_output",
    "custom_tool_call_output",
    "local_shell_call_output",
];

/// What one file's items add up to.
#[derive(Default)]
struct Items {
    conversation: Conversation,
    trace_id: Option<String>,
    metadata: Map<String, Value>,
    started_at: Option<Timestamp>,
    ended_at: Option<Timestamp>,
}

impl Items {
    fn time(&mut self, at: Option<Timestamp>) {
        if let Some(at) = at {
            self.started_at = Some(self.started_at.map_or(at, |s| s.min(at)));
            self.ended_at = Some(self.ended_at.map_or(at, |e| e.max(at)));
        }
    }

    /// Takes one Responses API item written at `at`.
    fn item(&mut self, item: &Value, at: Option<Timestamp>) -> Result<(), String> {
        let Value::Object(item) = item else {
            return Err(format!(
                "an item must be an object, got {}",
                type_name(item)
            ));
        };
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        self.time(at);
        if CALL_TYPES.contains(&kind) {
            let step = call_step(kind, item, at)?;
            self.conversation.push_call(step);
        } else if OUTPUT_TYPES.contains(&kind) {
            let call_id = id_text(item.get("call_id"));
            let result = output_result(item.get("output"));
            self.conversation.set_time(at);
            self.conversation.answer(call_id.as_deref(), result);
        }
        Ok(())
    }

    fn emit(self, out: &mut Output<'_>) -> Result<()> {
        let (steps, notes) = self.conversation.finish();
        let mut trace = ObservedTrace::new(
            self.trace_id.unwrap_or_else(|| out.stem.clone()),
            String::new(),
        );
        trace.started_at = self.started_at;
        trace.ended_at = self.ended_at;
        trace.metadata = self.metadata;
        trace.metadata.extend(notes);
        out.emit(trace, steps)
    }
}

/// A call item as a step.
fn call_step(
    kind: &str,
    item: &Map<String, Value>,
    at: Option<Timestamp>,
) -> Result<ObservedStep, String> {
    let mut metadata = Map::new();
    let (name, inputs) = match kind {
        "function_call" => {
            let name = tool_name(item.get("name"), "name")?;
            let inputs = match item.get("arguments") {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(Value::String(text)) => parse_arguments(text, &mut metadata),
                Some(other) => other.clone(),
            };
            (name, inputs)
        }
        "custom_tool_call" => {
            let name = tool_name(item.get("name"), "name")?;
            (name, item.get("input").cloned().unwrap_or(Value::Null))
        }
        "local_shell_call" => (
            "local_shell".to_owned(),
            item.get("action").cloned().unwrap_or(Value::Null),
        ),
        _ => (
            "web_search".to_owned(),
            item.get("action").cloned().unwrap_or(Value::Null),
        ),
    };
    let mut step = ObservedStep::new(String::new(), 0, name, inputs);
    step.call_id = id_text(item.get("call_id")).or_else(|| id_text(item.get("id")));
    step.started_at = at;
    if let Some(Value::String(status)) = item.get("status") {
        metadata.insert("status".to_owned(), Value::from(status.as_str()));
        if status == "failed" || status == "incomplete" {
            step.error_type = Some(super::messages::TOOL_ERROR.to_owned());
            step.error_message = Some(format!("the call's status is {status}"));
        }
    }
    metadata.insert("item_type".to_owned(), Value::from(kind));
    step.metadata = metadata;
    Ok(step)
}

/// An output item's `output` as a result: text (JSON text is read as JSON), or a structured
/// value; failed when it says so.
fn output_result(output: Option<&Value>) -> CallResult {
    match output {
        None | Some(Value::Null) => CallResult::text(String::new(), false),
        Some(Value::String(text)) => {
            let failed = exit_code_text(text).is_some_and(|code| code != 0)
                || serde_json::from_str::<Value>(text).is_ok_and(|v| structured_failure(&v));
            CallResult::text(text.clone(), failed)
        }
        Some(other) => CallResult::Value(other.clone(), structured_failure(other)),
    }
}

/// `success: false`, or a non-zero `metadata.exit_code`.
fn structured_failure(value: &Value) -> bool {
    value.get("success") == Some(&Value::Bool(false))
        || value
            .get("metadata")
            .and_then(|m| m.get("exit_code"))
            .and_then(Value::as_i64)
            .is_some_and(|code| code != 0)
}

/// The exit code of text starting `Exit code: N`.
fn exit_code_text(text: &str) -> Option<i64> {
    let rest = text.trim_start().strip_prefix("Exit code:")?;
    rest.split_whitespace().next()?.parse().ok()
}

/// The `openai-responses` handler.
#[derive(Default)]
pub(crate) struct ResponsesHandler {
    items: Items,
}

impl RecordHandler for ResponsesHandler {
    fn record(
        &mut self,
        _out: &mut Output<'_>,
        _at: Position,
        value: Value,
    ) -> Result<Result<(), String>> {
        let at = value.get("created_at").and_then(timestamp);
        let result = match value.get("output") {
            Some(Value::Array(output)) if value.get("type").is_none() => {
                if self.items.trace_id.is_none() {
                    self.items.trace_id = id_text(value.get("id"));
                }
                output.iter().enumerate().try_for_each(|(i, item)| {
                    self.items
                        .item(item, at)
                        .map_err(|e| format!("output[{i}]: {e}"))
                })
            }
            _ => self.items.item(&value, at),
        };
        Ok(result)
    }

    fn finish(&mut self, out: &mut Output<'_>) -> Result<()> {
        std::mem::take(&mut self.items).emit(out)
    }
}

/// The `codex-rollout` handler.
#[derive(Default)]
pub(crate) struct RolloutHandler {
    items: Items,
}

impl RecordHandler for RolloutHandler {
    fn record(
        &mut self,
        _out: &mut Output<'_>,
        _at: Position,
        value: Value,
    ) -> Result<Result<(), String>> {
        Ok(self.line(value))
    }

    fn finish(&mut self, out: &mut Output<'_>) -> Result<()> {
        let mut items = std::mem::take(&mut self.items);
        items
            .metadata
            .insert("agent".to_owned(), Value::from("codex"));
        items.emit(out)
    }
}

impl RolloutHandler {
    fn line(&mut self, value: Value) -> Result<(), String> {
        let Value::Object(line) = value else {
            return Err(format!(
                "a rollout line must be an object, got {}",
                type_name(&value)
            ));
        };
        let at = line.get("timestamp").and_then(timestamp);
        let kind = line.get("type").and_then(Value::as_str).unwrap_or("");
        let payload = line.get("payload").unwrap_or(&Value::Null);
        match kind {
            "session_meta" => {
                self.items.time(at);
                self.session_meta(payload);
                Ok(())
            }
            "turn_context" => {
                if let Some(model @ Value::String(_)) = payload.get("model") {
                    self.items
                        .metadata
                        .entry("model")
                        .or_insert_with(|| model.clone());
                }
                Ok(())
            }
            "response_item" => self.items.item(payload, at),
            "" => Err("a rollout line without `type`".to_owned()),
            _ => Ok(()),
        }
    }

    fn session_meta(&mut self, payload: &Value) {
        if self.items.trace_id.is_none() {
            self.items.trace_id = id_text(payload.get("id"));
        }
        let metadata = &mut self.items.metadata;
        for field in [
            "cwd",
            "originator",
            "cli_version",
            "model_provider",
            "source",
        ] {
            if let Some(value @ Value::String(_)) = payload.get(field) {
                metadata.insert(field.to_owned(), value.clone());
            }
        }
        if let Some(git) = payload.get("git") {
            for (field, name) in [("commit_hash", "git_commit"), ("branch", "git_branch")] {
                if let Some(value @ Value::String(_)) = git.get(field) {
                    metadata.insert(name.to_owned(), value.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(items: &[Value]) -> Vec<ObservedStep> {
        let mut all = Items::default();
        for item in items {
            all.item(item, None).unwrap();
        }
        all.conversation.finish().0
    }

    #[test]
    fn calls_pair_with_outputs_by_call_id() {
        let steps = run(&[
            json!({"type": "function_call", "name": "exec", "arguments": "{\"cmd\": \"ls\"}", "call_id": "a"}),
            json!({"type": "custom_tool_call", "name": "apply_patch", "input": "*** patch", "call_id": "b"}),
            json!({"type": "custom_tool_call_output", "call_id": "b", "output": "done"}),
            json!({"type": "function_call_output", "call_id": "a", "output": "Exit code: 2\nno such file"}),
            json!({"type": "web_search_call", "status": "completed", "action": {"query": "q"}}),
        ]);
        assert_eq!(steps.len(), 3);
        assert_eq!(steps[0].inputs, json!({"cmd": "ls"}));
        assert!(steps[0].is_error());
        assert_eq!(steps[1].outputs, Some(json!("done")));
        assert_eq!(steps[2].tool_name, "web_search");
        assert_eq!(steps[2].metadata.get("result_missing"), Some(&json!(true)));
    }

    #[test]
    fn structured_failures_and_statuses() {
        let steps = run(&[
            json!({"type": "function_call", "name": "f", "arguments": "{}", "call_id": "a"}),
            json!({"type": "function_call_output", "call_id": "a", "output": {"content": "x", "success": false}}),
            json!({"type": "web_search_call", "status": "failed", "action": {}}),
        ]);
        assert!(steps[0].is_error());
        assert!(steps[1].is_error());
    }

    #[test]
    fn bad_items_are_named() {
        let mut items = Items::default();
        let err = items
            .item(&json!({"type": "function_call", "name": 3}), None)
            .unwrap_err();
        assert!(err.contains("name"), "{err}");
        assert!(items.item(&json!("x"), None).is_err());
        let mut rollout = RolloutHandler::default();
        assert!(
            rollout
                .line(json!({"payload": {}}))
                .unwrap_err()
                .contains("type")
        );
    }
}
