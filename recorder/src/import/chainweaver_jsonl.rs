//! `chainweaver-jsonl`: the Python ChainWeaver's tool-call records, one call a line:
//! `{"trace_id", "tool" | "tool_name", "inputs", "outputs", ...}`.
//!
//! Lines are grouped into traces by `trace_id` (lines of different traces may interleave); steps
//! keep their order of appearance. Lines without a `trace_id` form one default trace named after
//! the file. `inputs` defaults to `{}` and must otherwise be an object. Error fields
//! (`error_type`, `error_message`, `error`, `success: false`, a failing `status`), timestamps
//! (`started_at`, `ended_at`, `recorded_at`, or `timestamp` for the start), `duration_ms` and
//! `call_id` are read; a `session_id` goes to the trace; every other field is kept in the step's
//! metadata.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::records::Handler as RecordHandler;
use super::values::{id_text, millis, take_error, take_timestamp, tool_name, type_name};
use super::{Output, Position};
use crate::error::Result;
use crate::model::{ObservedStep, ObservedTrace};

/// Traces being assembled from records that may interleave, in order of first appearance.
#[derive(Default)]
pub(super) struct Groups {
    traces: Vec<(ObservedTrace, Vec<ObservedStep>)>,
    by_id: HashMap<String, usize>,
}

impl Groups {
    /// The trace with this id, created (with `source` left for the driver to fill) if new.
    pub fn entry(&mut self, trace_id: &str) -> &mut (ObservedTrace, Vec<ObservedStep>) {
        let index = match self.by_id.get(trace_id) {
            Some(&index) => index,
            None => {
                self.traces
                    .push((ObservedTrace::new(trace_id, String::new()), Vec::new()));
                self.by_id
                    .insert(trace_id.to_owned(), self.traces.len() - 1);
                self.traces.len() - 1
            }
        };
        &mut self.traces[index]
    }

    /// Hands every trace over, in order of first appearance. Start and end default to the
    /// earliest step start and latest step end when the source gave none.
    pub fn emit_all(&mut self, out: &mut Output<'_>) -> Result<()> {
        self.by_id.clear();
        for (mut trace, steps) in std::mem::take(&mut self.traces) {
            if trace.started_at.is_none() {
                trace.started_at = steps.iter().filter_map(|s| s.started_at).min();
            }
            if trace.ended_at.is_none() {
                trace.ended_at = steps
                    .iter()
                    .filter_map(|s| s.ended_at.or(s.started_at))
                    .max();
            }
            out.emit(trace, steps)?;
        }
        Ok(())
    }
}

/// The `chainweaver-jsonl` handler.
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

impl Handler {
    fn add(&mut self, value: Value, default_trace: &str) -> Result<(), String> {
        let Value::Object(mut record) = value else {
            return Err(format!("expected a JSON object, got {}", type_name(&value)));
        };
        let trace_id = match record.remove("trace_id") {
            None | Some(Value::Null) => default_trace.to_owned(),
            Some(id) => id_text(Some(&id)).ok_or_else(|| {
                format!(
                    "`trace_id` must be a string or a number, got {}",
                    type_name(&id)
                )
            })?,
        };
        let session_id = match record.remove("session_id") {
            Some(Value::String(session)) => Some(session),
            Some(other) => {
                record.insert("session_id".to_owned(), other);
                None
            }
            None => None,
        };
        let (step, source_index) = step_from_record(record)?;
        let (trace, steps) = self.groups.entry(&trace_id);
        if trace.session_id.is_none() {
            trace.session_id = session_id;
        }
        let mut step = step;
        step.trace_id.clone_from(&trace_id);
        if let Some(index) = source_index
            && index != steps.len()
        {
            step.metadata.insert("source_step_index".to_owned(), index);
        }
        steps.push(step);
        Ok(())
    }
}

/// One tool-call record (its `trace_id` already taken out) as a step, with the `step_index` the
/// record gave, if any.
fn step_from_record(
    mut record: Map<String, Value>,
) -> Result<(ObservedStep, Option<Value>), String> {
    if !record.contains_key("tool") && !record.contains_key("tool_name") {
        return Err("missing `tool` (or `tool_name`)".to_owned());
    }
    let name_field = if record.contains_key("tool") {
        "tool"
    } else {
        "tool_name"
    };
    let tool = tool_name(record.get(name_field), name_field)?;
    record.remove(name_field);
    let inputs = match record.remove("inputs") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(inputs @ Value::Object(_)) => inputs,
        Some(other) => {
            return Err(format!(
                "`inputs` must be a JSON object, got {}",
                type_name(&other)
            ));
        }
    };
    let mut step = ObservedStep::new(String::new(), 0, tool, inputs);
    step.outputs = record.remove("outputs").filter(|v| !v.is_null());
    let (error_type, error_message) = take_error(&mut record);
    step.error_type = error_type;
    step.error_message = error_message;
    let mut metadata = Map::new();
    step.call_id = id_text(record.remove("call_id").as_ref());
    step.started_at = take_timestamp(&mut record, "started_at", &mut metadata)
        .or_else(|| take_timestamp(&mut record, "timestamp", &mut metadata));
    step.ended_at = take_timestamp(&mut record, "ended_at", &mut metadata);
    step.recorded_at = take_timestamp(&mut record, "recorded_at", &mut metadata);
    for field in ["duration_ms", "latency_ms"] {
        if step.duration_ms.is_none()
            && let Some(value) = record.remove(field)
        {
            match millis(&value) {
                Some(ms) => step.duration_ms = Some(ms),
                None if value.is_null() => {}
                None => {
                    metadata.insert(field.to_owned(), value);
                }
            }
        }
    }
    let source_index = record.remove("step_index");
    if let Some(Value::Object(extra)) = record.remove("metadata") {
        metadata.extend(extra);
    }
    metadata.extend(record);
    step.metadata = metadata;
    Ok((step, source_index))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step(value: Value) -> Result<ObservedStep, String> {
        match value {
            Value::Object(map) => step_from_record(map).map(|(s, _)| s),
            _ => unreachable!(),
        }
    }

    #[test]
    fn reads_the_fields_and_keeps_the_rest() {
        let s = step(
            serde_json::from_str(
                r#"{"tool_name": "fetch", "inputs": {"url": "u"}, "outputs": {"body": 1.50},
                    "started_at": "2026-05-18T10:00:00Z", "duration_ms": 12.5, "call_id": 7, "model": "m"}"#,
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(s.tool_name, "fetch");
        assert_eq!(s.inputs, json!({"url": "u"}));
        assert_eq!(
            serde_json::to_string(&s.outputs).unwrap(),
            r#"{"body":1.50}"#
        );
        assert_eq!(s.duration_ms, Some(12.5));
        assert_eq!(s.call_id.as_deref(), Some("7"));
        assert!(s.started_at.is_some());
        assert_eq!(
            s.metadata,
            json!({"model": "m"}).as_object().unwrap().clone()
        );
        assert!(!s.is_error());
    }

    #[test]
    fn error_fields_mark_failure() {
        let s =
            step(json!({"tool": "t", "error": {"type": "Timeout", "message": "slow"}})).unwrap();
        assert_eq!(s.error_type.as_deref(), Some("Timeout"));
        assert_eq!(s.error_message.as_deref(), Some("slow"));
        let s = step(json!({"tool": "t", "success": false})).unwrap();
        assert!(s.is_error());
        let s = step(json!({"tool": "t", "error": "boom"})).unwrap();
        assert_eq!(s.error_message.as_deref(), Some("boom"));
        let s = step(json!({"tool": "t", "error": null, "success": true})).unwrap();
        assert!(!s.is_error());
    }

    #[test]
    fn wrong_types_are_rejected_with_the_field_named() {
        assert!(
            step(json!({"tool": 5}))
                .unwrap_err()
                .contains("`tool` must be a string")
        );
        assert!(
            step(json!({"tool": "t", "inputs": "x"}))
                .unwrap_err()
                .contains("`inputs`")
        );
        assert!(
            step(json!({"inputs": {}}))
                .unwrap_err()
                .contains("missing `tool`")
        );
    }
}
