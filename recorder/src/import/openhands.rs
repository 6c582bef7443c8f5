//! `openhands`: OpenHands event streams, a JSON array of events `{id, timestamp, source,
//! message, action | observation, args | content + extras, tool_call_metadata, cause, ...}`.
//!
//! One trace per file (named by the file). An action event that came from a tool call (it has
//! `tool_call_metadata: {function_name, tool_call_id}`) is a step named by the function
//! (`execute_bash`, `str_replace_editor`, `finish`, ...) with its `args` as inputs and the
//! OpenHands action (`run`, `edit`, `read`, ...) in metadata. An observation answers the action
//! whose event id its `cause` names (else the one with its `tool_call_id`): its `content`
//! becomes the output, its timestamp the step's end. An observation of kind `error`, with
//! `success: false`, or with a non-zero `extras.metadata.exit_code` makes the call failed.
//! Messages, state changes and other events without a tool call are not steps. `finish` never
//! gets an observation, so it counts as a call without a result.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::messages::{CallResult, Conversation};
use super::records::Handler as RecordHandler;
use super::values::{id_text, timestamp, tool_name, type_name};
use super::{Output, Position};
use crate::error::Result;
use crate::model::{ObservedStep, ObservedTrace, Timestamp};

/// Keys of an action's `args` that are the agent's commentary, not the call's inputs.
const COMMENTARY_ARGS: [&str; 1] = ["thought"];

/// The `openhands` handler.
#[derive(Default)]
pub(crate) struct Handler {
    conversation: Conversation,
    /// The tool call id of each action event, by event id.
    call_of_event: HashMap<String, String>,
    started_at: Option<Timestamp>,
    ended_at: Option<Timestamp>,
}

impl RecordHandler for Handler {
    fn record(
        &mut self,
        _out: &mut Output<'_>,
        _at: Position,
        value: Value,
    ) -> Result<Result<(), String>> {
        Ok(self.event(value))
    }

    fn finish(&mut self, out: &mut Output<'_>) -> Result<()> {
        let (steps, notes) = std::mem::take(&mut self.conversation).finish();
        let mut trace = ObservedTrace::new(out.stem.clone(), String::new());
        trace.agent = Some("openhands".to_owned());
        trace.started_at = self.started_at;
        trace.ended_at = self.ended_at;
        trace.metadata = notes;
        out.emit(trace, steps)
    }
}

impl Handler {
    fn event(&mut self, value: Value) -> Result<(), String> {
        let Value::Object(event) = value else {
            return Err(format!(
                "an event must be an object, got {}",
                type_name(&value)
            ));
        };
        let at = event.get("timestamp").and_then(timestamp);
        if let Some(at) = at {
            self.started_at = Some(self.started_at.map_or(at, |s| s.min(at)));
            self.ended_at = Some(self.ended_at.map_or(at, |e| e.max(at)));
        }
        self.conversation.set_time(at);
        let metadata = match event.get("tool_call_metadata") {
            Some(Value::Object(metadata)) => metadata,
            None | Some(Value::Null) => return Ok(()),
            Some(other) => {
                return Err(format!(
                    "`tool_call_metadata` must be an object, got {}",
                    type_name(other)
                ));
            }
        };
        let call_id = id_text(metadata.get("tool_call_id"));
        if let Some(action) = event.get("action").and_then(Value::as_str) {
            let name = tool_name(metadata.get("function_name"), "function_name")?;
            let mut inputs = match event.get("args") {
                Some(Value::Object(args)) => args.clone(),
                _ => Map::new(),
            };
            for key in COMMENTARY_ARGS {
                inputs.remove(key);
            }
            let mut step = ObservedStep::new(String::new(), 0, name, Value::Object(inputs));
            step.call_id.clone_from(&call_id);
            step.metadata
                .insert("openhands_action".to_owned(), Value::from(action));
            if let (Some(event_id), Some(call_id)) = (id_text(event.get("id")), &call_id) {
                self.call_of_event.insert(event_id, call_id.clone());
            }
            self.conversation.push_call(step);
        } else if let Some(kind) = event.get("observation").and_then(Value::as_str) {
            let answered = id_text(event.get("cause"))
                .and_then(|cause| self.call_of_event.get(&cause).cloned())
                .or(call_id);
            let content = match event.get("content") {
                Some(Value::String(text)) => text.clone(),
                None | Some(Value::Null) => String::new(),
                Some(other) => other.to_string(),
            };
            let exit_code = event
                .get("extras")
                .and_then(|extras| extras.get("metadata"))
                .and_then(|metadata| metadata.get("exit_code"))
                .and_then(Value::as_i64);
            let failed = kind == "error"
                || event.get("success") == Some(&Value::Bool(false))
                || exit_code.is_some_and(|code| code != 0 && code != -1);
            let text = if failed && content.is_empty() {
                event
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("failed")
                    .to_owned()
            } else {
                content
            };
            self.conversation
                .answer(answered.as_deref(), CallResult::Text(text, failed));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn observations_answer_the_action_their_cause_names() {
        let mut handler = Handler::default();
        for event in [
            json!({"id": 0, "source": "user", "action": "message", "args": {"content": "hi"}}),
            json!({"id": 3, "timestamp": "2025-01-01T00:00:00", "source": "agent", "action": "run",
                "args": {"command": "false", "thought": "try"},
                "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": "t1"}}),
            json!({"id": 4, "timestamp": "2025-01-01T00:00:01", "source": "agent", "observation": "run",
                "cause": 3, "content": "", "message": "exit 1", "extras": {"metadata": {"exit_code": 1}},
                "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": "t1"}}),
        ] {
            handler.event(event).unwrap();
        }
        let (steps, _) = std::mem::take(&mut handler.conversation).finish();
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0].tool_name, "execute_bash");
        assert_eq!(steps[0].inputs, json!({"command": "false"}));
        assert_eq!(steps[0].error_message.as_deref(), Some("exit 1"));
        assert_eq!(steps[0].duration_ms, Some(1000.0));
    }

    #[test]
    fn bad_events_are_named() {
        let mut handler = Handler::default();
        assert!(handler.event(json!(1)).is_err());
        let err = handler
            .event(json!({"action": "run", "tool_call_metadata": {"function_name": 3}}))
            .unwrap_err();
        assert!(err.contains("function_name"), "{err}");
    }
}
