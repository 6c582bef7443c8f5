//! `tau-bench`: tau-bench result files, an array of records
//! `{"task_id", "trial", "reward", "info": {"task": {"user_id", "actions", ...}}, "traj": [...]}`
//! whose `traj` is an OpenAI chat-completions conversation (see [`super::messages`] for how its
//! tool calls and results become steps).
//!
//! Each record is one trace, named `<file stem>/<task_id>/<trial>`. Its metadata keeps
//! `task_id`, `trial`, `reward`, the task's `user_id` and its annotated `gold_actions` (the calls
//! a correct agent makes: ground truth for mining). A run that crashed (an empty `traj` and an
//! `info.error`) is still a trace, without steps, its error in `run_error`.

use serde_json::{Map, Value};

use super::messages::Conversation;
use super::records::Handler as RecordHandler;
use super::values::{id_text, type_name};
use super::{Output, Position};
use crate::error::Result;
use crate::model::ObservedTrace;

/// The `tau-bench` handler.
pub(crate) struct Handler;

impl RecordHandler for Handler {
    fn record(
        &mut self,
        out: &mut Output<'_>,
        at: Position,
        value: Value,
    ) -> Result<Result<(), String>> {
        match convert(value, &out.stem, at.line) {
            Ok((trace, conversation)) => {
                let (steps, notes) = conversation.finish();
                let mut trace = trace;
                trace.metadata.extend(notes);
                out.emit(trace, steps)?;
                Ok(Ok(()))
            }
            Err(reason) => Ok(Err(reason)),
        }
    }
}

fn convert(
    value: Value,
    stem: &str,
    record_number: u64,
) -> Result<(ObservedTrace, Conversation), String> {
    let Value::Object(mut record) = value else {
        return Err(format!("expected a JSON object, got {}", type_name(&value)));
    };
    let traj = match record.remove("traj") {
        Some(Value::Array(traj)) => traj,
        Some(other) => {
            return Err(format!(
                "`traj` must be an array, got {}",
                type_name(&other)
            ));
        }
        None => return Err("missing `traj`".to_owned()),
    };
    let task_id = record.get("task_id").cloned().unwrap_or(Value::Null);
    let trial = record.get("trial").cloned().unwrap_or(Value::Null);
    let task_text = id_text(Some(&task_id)).unwrap_or_else(|| format!("record-{record_number}"));
    let trial_text = id_text(Some(&trial)).unwrap_or_else(|| "0".to_owned());
    let mut trace = ObservedTrace::new(format!("{stem}/{task_text}/{trial_text}"), String::new());
    let mut metadata = Map::new();
    metadata.insert("task_id".to_owned(), task_id);
    metadata.insert("trial".to_owned(), trial);
    metadata.insert(
        "reward".to_owned(),
        record.get("reward").cloned().unwrap_or(Value::Null),
    );
    let task = record.get("info").and_then(|info| info.get("task"));
    if let Some(user_id) = task.and_then(|t| t.get("user_id")) {
        metadata.insert("user_id".to_owned(), user_id.clone());
    }
    if let Some(actions) = task.and_then(|t| t.get("actions")) {
        metadata.insert("gold_actions".to_owned(), actions.clone());
    }
    // A run that crashed has an empty `traj` and says why here.
    if let Some(error) = record.get("info").and_then(|info| info.get("error")) {
        metadata.insert("run_error".to_owned(), error.clone());
    }
    trace.metadata = metadata;
    let mut conversation = Conversation::default();
    for (i, message) in traj.into_iter().enumerate() {
        conversation
            .add(message)
            .map_err(|e| format!("traj[{i}]: {e}"))?;
    }
    Ok((trace, conversation))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_record_becomes_a_named_trace() {
        let (trace, conversation) = convert(
            json!({
                "task_id": 7, "trial": 1, "reward": 1.0,
                "info": {"task": {"user_id": "u", "actions": [{"name": "f", "kwargs": {}}]}},
                "traj": [
                    {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": "c", "content": "\"u\""}
                ]
            }),
            "run",
            1,
        )
        .unwrap();
        assert_eq!(trace.trace_id, "run/7/1");
        assert_eq!(trace.metadata.get("reward").unwrap().to_string(), "1.0");
        assert_eq!(trace.metadata.get("user_id"), Some(&json!("u")));
        let (steps, _) = conversation.finish();
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0].outputs, Some(json!("u")));
    }

    #[test]
    fn records_without_traj_are_rejected() {
        assert!(
            convert(json!({"task_id": 1}), "s", 1)
                .unwrap_err()
                .contains("traj")
        );
        assert!(
            convert(json!({"traj": {}}), "s", 1)
                .unwrap_err()
                .contains("array")
        );
        let err = convert(
            json!({"traj": [{"role": "assistant", "tool_calls": [{"function": {}}]}]}),
            "s",
            1,
        )
        .unwrap_err();
        assert!(err.starts_with("traj[0]: tool_calls[0]"), "{err}");
    }
}
