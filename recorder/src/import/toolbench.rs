//! `toolbench`: ToolBench answer files, one JSON document per query
//! `{win, tree, forward_args, compare_candidates, answer_generation: {query, finish_type,
//! final_answer, train_messages: [[message, ...], ...], ...}}`.
//!
//! Each file is one trace (named by the file). Its steps come from the last conversation in
//! `train_messages` (each one extends the one before, so the last holds every call of the
//! answer): legacy OpenAI `function_call`s answered by `role: function` messages. A tool answers
//! `{"error": "...", "response": "..."}`; a non-empty `error` makes the call failed. `Finish`
//! is ToolBench's pseudo-tool for giving the answer (or giving up): it is kept as a step, so the
//! steps are the calls the model made, and marked with `pseudo_tool: true`; it never gets a
//! result, so it is not counted as a call without one. A file without `train_messages` (a
//! query the search did not answer) is a trace without steps. The trace keeps the query,
//! `win`, `finish_type`, `query_count` and `valid_data`.

use serde_json::{Map, Value};

use super::messages::{Conversation, RESULT_MISSING};
use super::records::Handler as RecordHandler;
use super::values::type_name;
use super::{Output, Position};
use crate::error::Result;
use crate::model::ObservedTrace;

/// ToolBench's pseudo-tool for ending an answer.
pub(crate) const FINISH: &str = "Finish";

/// `answer_generation` fields copied into the trace's metadata.
const ANSWER_FIELDS: [&str; 4] = ["query", "finish_type", "query_count", "valid_data"];

/// The `toolbench` handler.
pub(crate) struct Handler;

impl RecordHandler for Handler {
    fn record(
        &mut self,
        out: &mut Output<'_>,
        _at: Position,
        value: Value,
    ) -> Result<Result<(), String>> {
        out.emit_or_reject(convert(value, &out.stem))
    }
}

fn convert(
    value: Value,
    stem: &str,
) -> Result<(ObservedTrace, Vec<crate::model::ObservedStep>), String> {
    let Value::Object(mut document) = value else {
        return Err(format!(
            "expected a ToolBench answer document, got {}",
            type_name(&value)
        ));
    };
    let Some(Value::Object(mut answer)) = document.remove("answer_generation") else {
        return Err("missing `answer_generation` (an object)".to_owned());
    };
    let mut metadata = Map::new();
    if let Some(win) = document.get("win") {
        metadata.insert("win".to_owned(), win.clone());
    }
    for field in ANSWER_FIELDS {
        if let Some(value) = answer.get(field) {
            metadata.insert(field.to_owned(), value.clone());
        }
    }
    let conversations = match answer.remove("train_messages") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(conversations)) => conversations,
        Some(other) => {
            return Err(format!(
                "`train_messages` must be an array, got {}",
                type_name(&other)
            ));
        }
    };
    let mut conversation = Conversation::default();
    if let Some(last) = conversations.into_iter().last() {
        let Value::Array(messages) = last else {
            return Err("the last of `train_messages` must be an array of messages".to_owned());
        };
        for (i, message) in messages.into_iter().enumerate() {
            conversation
                .add(message)
                .map_err(|e| format!("train_messages[-1][{i}]: {e}"))?;
        }
    } else {
        metadata.insert("train_messages".to_owned(), Value::Bool(false));
    }
    let (mut steps, notes) = conversation.finish();
    for step in steps.iter_mut().filter(|s| s.tool_name == FINISH) {
        step.metadata.remove(RESULT_MISSING);
        step.metadata
            .insert("pseudo_tool".to_owned(), Value::Bool(true));
    }
    metadata.extend(notes);
    let mut trace = ObservedTrace::new(stem.to_owned(), String::new());
    trace.metadata = metadata;
    Ok((trace, steps))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_last_conversation_gives_the_steps_and_finish_is_marked() {
        let (trace, steps) = convert(
            json!({"win": true, "answer_generation": {"query": "q", "train_messages": [
                [{"role": "user", "content": "q"}],
                [{"role": "user", "content": "q"},
                 {"role": "assistant", "content": null, "function_call": {"name": "f", "arguments": "{\"a\": 1}"}},
                 {"role": "function", "name": "f", "content": "{\"error\": \"Rate limited\", \"response\": \"\"}"},
                 {"role": "assistant", "content": null, "function_call": {"name": "g", "arguments": "{}"}},
                 {"role": "function", "name": "g", "content": "{\"error\": \"\", \"response\": \"ok\"}"},
                 {"role": "assistant", "content": null, "function_call": {"name": "Finish", "arguments": "{}"}}]
            ]}}),
            "G1",
        )
        .unwrap();
        assert_eq!(trace.trace_id, "G1");
        assert_eq!(steps.len(), 3);
        assert_eq!(steps[0].error_message.as_deref(), Some("Rate limited"));
        assert!(!steps[1].is_error());
        assert_eq!(steps[2].metadata.get("pseudo_tool"), Some(&json!(true)));
        assert!(!steps[2].metadata.contains_key("result_missing"));
    }

    #[test]
    fn a_file_without_answer_generation_is_named() {
        assert!(
            convert(json!({"win": true}), "x")
                .unwrap_err()
                .contains("answer_generation")
        );
    }
}
