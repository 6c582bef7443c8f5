//! `chainweaver-events`: the Python ChainWeaver's agent-trace events, one a line:
//! `{"session_id", "turn_id", "event": "tool_call" | "model_call", "tool" | "tool_name",
//! "args" | "inputs", "result_status", "output_keys", "input_tokens", "output_tokens",
//! "latency_ms", "tool_source", "timestamp"}`.
//!
//! Events are grouped into traces by `session_id` (events without one form a default trace
//! named after the file). Each `tool_call` is a step: `args` its inputs (an object), `latency_ms`
//! its duration, `timestamp` its start, a failing `result_status` (`error`, `failed`, ...) makes
//! it a failed call. The format records result field names, not results, so `outputs` is only
//! set when an event carries `outputs`; `output_keys`, `result_status`, `turn_id` and
//! `tool_source` stay in the step's metadata. `model_call` events are the model round trips
//! between calls: they are not steps, but the trace's metadata counts them and sums their tokens.

use serde_json::{Map, Value};

use super::chainweaver_jsonl::Groups;
use super::records::Handler as RecordHandler;
use super::values::{id_text, millis, take_error, take_timestamp, tool_name, type_name};
use super::{Output, Position};
use crate::error::Result;
use crate::model::ObservedStep;

/// The `chainweaver-events` handler.
#[derive(Default)]
pub(crate) struct Handler {
    groups: Groups,
}

impl RecordHandler for Handler {
    fn record(
        &mut self,
        out: &mut Output<'_>,
        _at: Position,
        value: Value,
    ) -> Result<Result<(), String>> {
        let default_trace = format!("{}:default", out.stem);
        Ok(self.add(value, &default_trace))
    }

    fn finish(&mut self, out: &mut Output<'_>) -> Result<()> {
        self.groups.emit_all(out)
    }
}

fn add_number(metadata: &mut Map<String, Value>, key: &str, amount: &Value) {
    let Some(amount) = amount.as_u64() else {
        return;
    };
    let total = metadata.get(key).and_then(Value::as_u64).unwrap_or(0) + amount;
    metadata.insert(key.to_owned(), Value::from(total));
}

impl Handler {
    fn add(&mut self, value: Value, default_trace: &str) -> Result<(), String> {
        let Value::Object(mut event) = value else {
            return Err(format!("expected a JSON object, got {}", type_name(&value)));
        };
        let kind = match event.remove("event") {
            None | Some(Value::Null) => "tool_call".to_owned(),
            Some(Value::String(kind)) => kind,
            Some(other) => {
                return Err(format!(
                    "`event` must be a string, got {}",
                    type_name(&other)
                ));
            }
        };
        if kind != "tool_call" && kind != "model_call" {
            return Err(format!(
                "unknown event kind {kind:?} (expected \"tool_call\" or \"model_call\")"
            ));
        }
        let session = match event.remove("session_id") {
            None | Some(Value::Null) => default_trace.to_owned(),
            Some(Value::String(s)) if s.is_empty() => default_trace.to_owned(),
            Some(id) => id_text(Some(&id)).ok_or_else(|| {
                format!(
                    "`session_id` must be a string or a number, got {}",
                    type_name(&id)
                )
            })?,
        };
        if kind == "model_call" {
            let (trace, _) = self.groups.entry(&session);
            let count = trace
                .metadata
                .get("model_calls")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            trace
                .metadata
                .insert("model_calls".to_owned(), Value::from(count + 1));
            for key in ["input_tokens", "output_tokens"] {
                if let Some(tokens) = event.get(key) {
                    add_number(&mut trace.metadata, key, tokens);
                }
            }
            return Ok(());
        }
        let name_field = if event.contains_key("tool") {
            "tool"
        } else {
            "tool_name"
        };
        if !event.contains_key(name_field) {
            return Err("tool_call event is missing `tool` (or `tool_name`)".to_owned());
        }
        let tool = tool_name(event.get(name_field), name_field)?;
        event.remove(name_field);
        let args_field = if event.contains_key("args") {
            "args"
        } else {
            "inputs"
        };
        let inputs = match event.remove(args_field) {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(args @ Value::Object(_)) => args,
            Some(other) => {
                return Err(format!(
                    "`{args_field}` must be a JSON object, got {}",
                    type_name(&other)
                ));
            }
        };
        let mut step = ObservedStep::new(session.clone(), 0, tool, inputs);
        step.outputs = event.remove("outputs").filter(|v| !v.is_null());
        let (error_type, error_message) = take_error(&mut event);
        step.error_type = error_type;
        step.error_message = error_message;
        let mut metadata = Map::new();
        step.call_id = id_text(event.remove("call_id").as_ref());
        step.started_at = take_timestamp(&mut event, "timestamp", &mut metadata)
            .or_else(|| take_timestamp(&mut event, "started_at", &mut metadata));
        step.ended_at = take_timestamp(&mut event, "ended_at", &mut metadata);
        if let Some(latency) = event.remove("latency_ms") {
            match millis(&latency) {
                Some(ms) => step.duration_ms = Some(ms),
                None if latency.is_null() => {}
                None => {
                    metadata.insert("latency_ms".to_owned(), latency);
                }
            }
        }
        metadata.extend(event);
        step.metadata = metadata;
        let (_, steps) = self.groups.entry(&session);
        steps.push(step);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_calls_become_steps_and_model_calls_metadata() {
        let mut h = Handler::default();
        h.add(json!({"session_id": "s", "event": "model_call", "input_tokens": 10, "output_tokens": 2}), "d").unwrap();
        h.add(
            json!({"session_id": "s", "event": "tool_call", "tool": "read", "args": {"p": 1},
                     "result_status": "ok", "latency_ms": 4, "timestamp": "2026-05-18T10:00:00Z",
                     "output_keys": ["text"]}),
            "d",
        )
        .unwrap();
        h.add(
            json!({"session_id": "s", "event": "model_call", "input_tokens": 5}),
            "d",
        )
        .unwrap();
        h.add(
            json!({"session_id": "s", "tool": "write", "args": {}, "result_status": "error"}),
            "d",
        )
        .unwrap();
        h.add(json!({"tool": "other"}), "d").unwrap();
        let (trace, steps) = h.groups.entry("s").clone();
        assert_eq!(
            trace.metadata,
            json!({"model_calls": 2, "input_tokens": 15, "output_tokens": 2})
                .as_object()
                .unwrap()
                .clone()
        );
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].inputs, json!({"p": 1}));
        assert_eq!(steps[0].duration_ms, Some(4.0));
        assert!(!steps[0].is_error());
        assert_eq!(steps[0].metadata.get("result_status"), Some(&json!("ok")));
        assert_eq!(steps[0].metadata.get("output_keys"), Some(&json!(["text"])));
        assert!(steps[1].is_error());
        assert_eq!(h.groups.entry("d").1.len(), 1);
    }

    #[test]
    fn bad_events_are_rejected() {
        let mut h = Handler::default();
        assert!(
            h.add(json!({"event": "dance"}), "d")
                .unwrap_err()
                .contains("unknown event kind")
        );
        assert!(
            h.add(json!({"event": "tool_call"}), "d")
                .unwrap_err()
                .contains("missing `tool`")
        );
        assert!(
            h.add(json!({"tool": "t", "args": "x"}), "d")
                .unwrap_err()
                .contains("`args`")
        );
        assert!(
            h.add(json!({"tool": 3}), "d")
                .unwrap_err()
                .contains("must be a string")
        );
    }
}
