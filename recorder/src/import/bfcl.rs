//! `bfcl`: Berkeley Function Calling Leaderboard result files of the multi-turn categories, one
//! JSON object a line: `{id, result, inference_log, input_token_count, output_token_count,
//! latency}`.
//!
//! Each line is one trace, named by its `id` (`multi_turn_base_12`, say). The calls are in
//! `inference_log`, a list holding, per turn, an object `{begin_of_turn_query, step_0, step_1,
//! ...}` (the backend's `state_info` snapshots sit between turns as lists and are skipped). A
//! step is a list of log entries: the model's answer, a `handler_log` whose
//! `model_response_decoded` lists the calls it made as Python call expressions
//! (`cd(folder='document')`), and one `tool` entry per call with what executing it returned, in
//! the same order. So the n-th decoded call of a step is answered by its n-th `tool` entry.
//!
//! Arguments are Python literals, read with [`super::pyliteral`]; keyword arguments become the
//! step's inputs by name, positional ones `arg0`, `arg1`, ...; an argument that is not a literal
//! is kept as its source text. A result is JSON when it parses as JSON, else text. A call fails
//! when executing it raised (`Error during execution: ...`) or when its result is an object whose
//! only field is `error`. Each step records its turn and step number; the trace records its test
//! category, the number of turns, and whether the harness forced the model to quit. The log
//! holds no timestamps (its `latency` times the model's answers, not the calls).

use serde_json::{Map, Value};

use super::messages::RESULT_MISSING;
use super::pyliteral;
use super::records::Handler as RecordHandler;
use super::values::{id_text, type_name};
use super::{Output, Position};
use crate::error::Result;
use crate::model::{ObservedStep, ObservedTrace};

/// What the harness writes when executing a call raised.
const EXECUTION_ERROR: &str = "Error during execution:";
/// Where a `handler_log` entry lists the calls the model made.
const DECODED: &str = "model_response_decoded";

/// The `bfcl` handler.
pub(crate) struct Handler;

impl RecordHandler for Handler {
    fn record(
        &mut self,
        out: &mut Output<'_>,
        _at: Position,
        value: Value,
    ) -> Result<Result<(), String>> {
        out.emit_or_reject(convert(value))
    }
}

fn convert(value: Value) -> std::result::Result<(ObservedTrace, Vec<ObservedStep>), String> {
    let Value::Object(mut record) = value else {
        return Err(format!(
            "expected a BFCL result object, got {}",
            type_name(&value)
        ));
    };
    let id = id_text(record.get("id")).ok_or("missing `id`")?;
    let log = match record.remove("inference_log") {
        Some(Value::Array(log)) => log,
        Some(other) => {
            return Err(format!(
                "`inference_log` must be a list, got {}",
                type_name(&other)
            ));
        }
        None => return Err("missing `inference_log` (only multi-turn results have one)".into()),
    };
    let mut steps = Vec::new();
    let mut turns = 0u64;
    let mut force_quit = false;
    for (at, entry) in log.into_iter().enumerate() {
        // Lists are `state_info` snapshots of the backend; objects are turns.
        let Value::Object(turn) = entry else { continue };
        let turn_number = turns;
        turns += 1;
        for (step_number, entries) in
            turn_steps(turn).map_err(|e| format!("inference_log[{at}]: {e}"))?
        {
            force_quit |= read_step(&entries, turn_number, step_number, &mut steps)
                .map_err(|e| format!("inference_log[{at}].step_{step_number}: {e}"))?;
        }
    }
    let mut trace = ObservedTrace::new(id.clone(), String::new());
    if let Some((category, _)) = id.rsplit_once('_') {
        trace
            .metadata
            .insert("test_category".into(), Value::String(category.to_owned()));
    }
    trace.metadata.insert("turns".into(), Value::from(turns));
    if force_quit {
        trace
            .metadata
            .insert("force_quit".into(), Value::Bool(true));
    }
    Ok((trace, steps))
}

/// A turn's steps, `step_0`, `step_1`, ... in number order (not key order).
fn turn_steps(turn: Map<String, Value>) -> std::result::Result<Vec<(u64, Vec<Value>)>, String> {
    let mut steps = Vec::new();
    for (key, value) in turn {
        let Some(number) = key.strip_prefix("step_") else {
            continue;
        };
        let number: u64 = number
            .parse()
            .map_err(|_| format!("`{key}` is not a step number"))?;
        match value {
            Value::Array(entries) => steps.push((number, entries)),
            other => return Err(format!("`{key}` must be a list, got {}", type_name(&other))),
        }
    }
    steps.sort_by_key(|(number, _)| *number);
    Ok(steps)
}

/// Adds a step's calls to `steps`; true when the harness forced the model to quit in it.
fn read_step(
    entries: &[Value],
    turn: u64,
    step: u64,
    steps: &mut Vec<ObservedStep>,
) -> std::result::Result<bool, String> {
    let mut calls: Option<Vec<String>> = None;
    let mut results: Vec<&Value> = Vec::new();
    let mut force_quit = false;
    for entry in entries {
        match entry.get("role").and_then(Value::as_str) {
            Some("handler_log") => {
                if let Some(decoded) = entry.get(DECODED)
                    && calls.is_none()
                {
                    calls = Some(decoded_calls(decoded)?);
                }
                let content = entry.get("content").and_then(Value::as_str).unwrap_or("");
                force_quit |= content.contains("forced to quit");
            }
            Some("tool") => results.push(entry.get("content").unwrap_or(&Value::Null)),
            _ => {}
        }
    }
    let calls = calls.unwrap_or_default();
    for (i, call) in calls.iter().enumerate() {
        let (name, inputs) = parse_call(call).map_err(|e| format!("call {call:?}: {e}"))?;
        let mut observed = ObservedStep::new(String::new(), 0, name, Value::Object(inputs));
        observed.metadata.insert("turn".into(), Value::from(turn));
        observed.metadata.insert("step".into(), Value::from(step));
        match results.get(i) {
            Some(result) => set_result(&mut observed, result),
            None => {
                observed
                    .metadata
                    .insert(RESULT_MISSING.to_owned(), Value::Bool(true));
            }
        }
        steps.push(observed);
    }
    Ok(force_quit)
}

/// The calls a `model_response_decoded` lists (empty strings are an empty answer).
fn decoded_calls(decoded: &Value) -> std::result::Result<Vec<String>, String> {
    match decoded {
        Value::Array(items) => items
            .iter()
            .filter_map(|item| match item {
                Value::String(s) if s.trim().is_empty() => None,
                Value::String(s) => Some(Ok(s.trim().to_owned())),
                other => Some(Err(format!(
                    "`{DECODED}` holds {}, not a call expression",
                    type_name(other)
                ))),
            })
            .collect(),
        // A failed decode logs the raw answer here as text: no calls.
        Value::String(_) | Value::Null => Ok(Vec::new()),
        other => Err(format!(
            "`{DECODED}` must be a list, got {}",
            type_name(other)
        )),
    }
}

fn set_result(step: &mut ObservedStep, result: &Value) {
    let text = match result {
        Value::String(text) => text.as_str(),
        other => {
            step.outputs = Some(other.clone());
            return;
        }
    };
    if let Some(message) = text.strip_prefix(EXECUTION_ERROR) {
        step.error_type = Some("ExecutionError".into());
        step.error_message = Some(message.trim().to_owned());
        return;
    }
    let parsed = serde_json::from_str::<Value>(text).unwrap_or_else(|_| Value::String(text.into()));
    if let Value::Object(object) = &parsed
        && object.len() == 1
        && let Some(error) = object.get("error")
    {
        step.error_type = Some("ToolError".into());
        step.error_message = Some(match error {
            Value::String(message) => message.clone(),
            other => other.to_string(),
        });
    }
    step.outputs = Some(parsed);
}

/// `name(arg=value, ...)`: the tool name and its arguments by name.
fn parse_call(call: &str) -> std::result::Result<(String, Map<String, Value>), String> {
    let open = call.find('(').ok_or("no argument list")?;
    let name = call[..open].trim();
    if name.is_empty()
        || name.starts_with(|c: char| c.is_ascii_digit())
        || !name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
    {
        return Err(format!("{name:?} is not a function name"));
    }
    let inner = call[open + 1..]
        .trim_end()
        .strip_suffix(')')
        .ok_or("the argument list is not closed")?;
    let mut inputs = Map::new();
    for (position, argument) in split_arguments(inner)?.into_iter().enumerate() {
        let (key, text) = match keyword(argument) {
            Some((key, text)) => (key.to_owned(), text),
            None => (format!("arg{position}"), argument),
        };
        let value = pyliteral::parse(text).unwrap_or_else(|_| Value::String(text.to_owned()));
        inputs.insert(key, value);
    }
    Ok((name.to_owned(), inputs))
}

/// `key=rest` when the argument starts with an identifier and a single `=`.
fn keyword(argument: &str) -> Option<(&str, &str)> {
    let eq = argument.find('=')?;
    let key = argument[..eq].trim();
    let rest = &argument[eq + 1..];
    let is_identifier = !key.is_empty()
        && !key.starts_with(|c: char| c.is_ascii_digit())
        && key.chars().all(|c| c.is_alphanumeric() || c == '_');
    (is_identifier && !rest.starts_with('=')).then(|| (key, rest.trim()))
}

/// The arguments of a call, split at the commas outside strings and brackets.
fn split_arguments(inner: &str) -> std::result::Result<Vec<&str>, String> {
    let mut arguments = Vec::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut start = 0;
    for (i, c) in inner.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth < 0 {
                    return Err("unbalanced brackets".into());
                }
            }
            ',' if depth == 0 => {
                arguments.push(inner[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if quote.is_some() {
        return Err("a string is not closed".into());
    }
    if depth != 0 {
        return Err("unbalanced brackets".into());
    }
    let last = inner[start..].trim();
    if !last.is_empty() {
        arguments.push(last);
    }
    Ok(arguments)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A result line in the shape the harness writes (state snapshots, a turn with two steps,
    /// the second answered with no calls).
    fn result_line() -> Value {
        json!({
            "id": "multi_turn_base_7",
            "result": [[["cd(folder='documents')", "ls(a=True)"], []]],
            "inference_log": [
                [{"role": "state_info", "class_name": "GorillaFileSystem", "content": {}}],
                {
                    "begin_of_turn_query": [{"role": "user", "content": "list my documents"}],
                    "step_0": [
                        {"role": "assistant", "content": [{"cd": "{\"folder\": \"documents\"}"}]},
                        {"role": "handler_log", "content": "Successfully decoded model response.",
                         "model_response_decoded": ["cd(folder='documents')", "ls(a=True)",
                                                    "mv(source='a, b.txt', destination=\"x\")"]},
                        {"role": "tool", "content": "{\"current_working_directory\": \"documents\"}"},
                        {"role": "tool", "content": "{\"current_directory_content\": [\"a.txt\"]}"},
                        {"role": "tool", "content": "Error during execution: mv() got an unexpected keyword"}
                    ],
                    "step_1": [
                        {"role": "assistant", "content": "Done."},
                        {"role": "handler_log", "content": "Successfully decoded model response.",
                         "model_response_decoded": []},
                        {"role": "handler_log", "content": "Empty response from the model. Proceed to next turn.",
                         "model_response_decoded": []}
                    ]
                },
                [{"role": "state_info", "class_name": "GorillaFileSystem", "content": {}}],
                {
                    "begin_of_turn_query": [{"role": "user", "content": "and the tickets?"}],
                    "step_0": [
                        {"role": "handler_log", "content": "Successfully decoded model response.",
                         "model_response_decoded": ["get_ticket(ticket_id=3)"]},
                        {"role": "tool", "content": "{\"error\": \"Ticket not found.\"}"}
                    ]
                }
            ],
            "latency": [[1.2, 0.4], [0.9]]
        })
    }

    #[test]
    fn decoded_calls_pair_with_the_tool_entries_that_follow_them() {
        let (trace, steps) = convert(result_line()).unwrap();
        assert_eq!(trace.trace_id, "multi_turn_base_7");
        assert_eq!(trace.metadata["test_category"], json!("multi_turn_base"));
        assert_eq!(trace.metadata["turns"], json!(2));
        let names: Vec<&str> = steps.iter().map(|s| s.tool_name.as_str()).collect();
        assert_eq!(names, ["cd", "ls", "mv", "get_ticket"]);
        assert_eq!(steps[0].inputs, json!({"folder": "documents"}));
        assert_eq!(
            steps[0].outputs,
            Some(json!({"current_working_directory": "documents"}))
        );
        assert_eq!(steps[1].inputs, json!({"a": true}));
        assert_eq!(
            steps[2].inputs,
            json!({"source": "a, b.txt", "destination": "x"})
        );
        assert_eq!(steps[2].error_type.as_deref(), Some("ExecutionError"));
        assert_eq!(
            steps[2].error_message.as_deref(),
            Some("mv() got an unexpected keyword")
        );
        assert_eq!(steps[3].error_message.as_deref(), Some("Ticket not found."));
        assert_eq!(steps[3].metadata["turn"], json!(1));
        assert!(!steps[0].is_error() && !steps[1].is_error());
    }

    #[test]
    fn steps_are_read_in_number_order_and_a_call_without_a_result_is_marked() {
        let line = json!({"id": "multi_turn_x_1", "inference_log": [{
            "step_10": [{"role": "handler_log", "model_response_decoded": ["b()"]}],
            "step_2": [{"role": "handler_log", "model_response_decoded": ["a(1, [2, 3])"]},
                       {"role": "tool", "content": "[4]"}]
        }]});
        let (_, steps) = convert(line).unwrap();
        assert_eq!(steps[0].tool_name, "a");
        assert_eq!(steps[0].inputs, json!({"arg0": 1, "arg1": [2, 3]}));
        assert_eq!(steps[0].outputs, Some(json!([4])));
        assert_eq!(steps[1].tool_name, "b");
        assert_eq!(steps[1].metadata[RESULT_MISSING], json!(true));
    }

    #[test]
    fn bad_records_are_named() {
        assert!(
            convert(json!({"id": "x", "result": []}))
                .unwrap_err()
                .contains("inference_log")
        );
        let err = convert(json!({"id": "x", "inference_log": [{"step_0": [
            {"role": "handler_log", "model_response_decoded": ["cd(folder='a'"]}
        ]}]}))
        .unwrap_err();
        assert!(
            err.contains("inference_log[0].step_0") && err.contains("not closed"),
            "{err}"
        );
        assert!(parse_call("1x(a=1)").is_err());
        assert_eq!(
            parse_call("f(x='a=b', y==2)").unwrap().1,
            json!({"x": "a=b", "arg1": "y==2"})
                .as_object()
                .unwrap()
                .clone()
        );
    }
}
