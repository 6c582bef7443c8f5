//! `execution-result`: saved flow runs (`ExecutionResult`), one trace each: `flow_name`,
//! `success`, `final_output`, `execution_log` (the step records), `trace_id`, `started_at`,
//! `ended_at`, `total_duration_ms`, ... A file may hold one run, an array of runs or one run a
//! line.
//!
//! Tolerant by design: runs saved by older versions lack fields that are required today, so
//! only `execution_log` (an array) and each step's `tool_name` are required. A step record with
//! `step_index` -1 is the input-validation record, not a tool call: it goes to the trace's
//! metadata. Step fields beyond the step model (`retry_count`, `fallback_used`, ...) are kept in
//! the step's metadata, and run fields beyond the trace model in the trace's.

use serde_json::{Map, Value};

use super::records::Handler as RecordHandler;
use super::values::{id_text, millis, take_error, take_timestamp, tool_name, type_name};
use super::{Output, Position, RejectUnit};
use crate::error::Result;
use crate::model::{ObservedStep, ObservedTrace};

/// The `execution-result` handler.
pub(crate) struct Handler;

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
        out.emit_or_reject(convert(value, &fallback_id))
    }
}

fn convert(value: Value, fallback_id: &str) -> Result<(ObservedTrace, Vec<ObservedStep>), String> {
    let Value::Object(mut run) = value else {
        return Err(format!("expected a JSON object, got {}", type_name(&value)));
    };
    let log = match run.remove("execution_log") {
        Some(Value::Array(log)) => log,
        Some(other) => {
            return Err(format!(
                "`execution_log` must be an array, got {}",
                type_name(&other)
            ));
        }
        None => return Err("missing `execution_log`".to_owned()),
    };
    let trace_id =
        id_text(run.remove("trace_id").as_ref()).unwrap_or_else(|| fallback_id.to_owned());
    let mut trace = ObservedTrace::new(trace_id, String::new());
    let mut metadata = Map::new();
    trace.started_at = take_timestamp(&mut run, "started_at", &mut metadata);
    trace.ended_at = take_timestamp(&mut run, "ended_at", &mut metadata);
    if let Some(Value::String(session)) = run.remove("session_id") {
        trace.session_id = Some(session);
    }
    if let Some(Value::String(agent)) = run.remove("agent") {
        trace.agent = Some(agent);
    }
    let mut steps = Vec::with_capacity(log.len());
    for (position, record) in log.into_iter().enumerate() {
        let Value::Object(record) = record else {
            return Err(format!(
                "execution_log[{position}] must be an object, got {}",
                type_name(&record)
            ));
        };
        if record.get("step_index").and_then(Value::as_i64) == Some(-1) {
            metadata.insert("input_validation".to_owned(), Value::Object(record));
            continue;
        }
        let step = step_from(record, steps.len())
            .map_err(|why| format!("execution_log[{position}]: {why}"))?;
        steps.push(step);
    }
    run.retain(|_, v| !v.is_null());
    metadata.extend(run);
    trace.metadata = metadata;
    Ok((trace, steps))
}

fn step_from(mut record: Map<String, Value>, index: usize) -> Result<ObservedStep, String> {
    let tool = tool_name(record.get("tool_name"), "tool_name")?;
    record.remove("tool_name");
    let inputs = match record.remove("inputs") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(inputs) => inputs,
    };
    let mut step = ObservedStep::new(String::new(), 0, tool, inputs);
    step.outputs = record.remove("outputs").filter(|v| !v.is_null());
    let (error_type, error_message) = take_error(&mut record);
    step.error_type = error_type;
    step.error_message = error_message;
    let mut metadata = Map::new();
    step.started_at = take_timestamp(&mut record, "started_at", &mut metadata);
    step.ended_at = take_timestamp(&mut record, "ended_at", &mut metadata);
    if let Some(duration) = record.remove("duration_ms") {
        match millis(&duration) {
            Some(ms) => step.duration_ms = Some(ms),
            None if duration.is_null() => {}
            None => {
                metadata.insert("duration_ms".to_owned(), duration);
            }
        }
    }
    if let Some(source_index) = record.remove("step_index")
        && source_index != index
    {
        metadata.insert("source_step_index".to_owned(), source_index);
    }
    // Defaults say nothing; keep only what the run actually recorded.
    record.retain(|key, value| {
        !(value.is_null()
            || (key == "retry_count" && value.as_u64() == Some(0))
            || (key == "retry_errors" && value.as_array().is_some_and(Vec::is_empty))
            || ((key == "skipped" || key == "fallback_used") && value == &Value::Bool(false)))
    });
    metadata.extend(record);
    step.metadata = metadata;
    Ok(step)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_run_becomes_a_trace() {
        let (trace, steps) = convert(
            json!({
                "flow_name": "f", "success": false, "trace_id": "abc",
                "started_at": "2026-05-18T10:00:00Z", "total_duration_ms": 3.0,
                "execution_log": [
                    {"step_index": -1, "tool_name": "f", "inputs": {}, "error_type": "ValidationError"},
                    {"step_index": 0, "tool_name": "a", "inputs": {"x": 1}, "outputs": {"y": 2},
                     "success": true, "retry_count": 0, "retry_errors": [], "skipped": false},
                    {"step_index": 1, "tool_name": "b", "inputs": {"y": 2}, "outputs": null,
                     "success": false, "error_type": "ValueError", "error_message": "bad",
                     "retry_count": 2, "fallback_used": true, "fallback_tool_name": "c"}
                ]
            }),
            "file#1",
        )
        .unwrap();
        assert_eq!(trace.trace_id, "abc");
        assert!(trace.started_at.is_some());
        assert_eq!(trace.metadata.get("flow_name"), Some(&json!("f")));
        assert!(trace.metadata.contains_key("input_validation"));
        assert_eq!(steps.len(), 2);
        assert!(steps[0].metadata.is_empty());
        assert_eq!(steps[1].error_type.as_deref(), Some("ValueError"));
        assert_eq!(steps[1].metadata.get("retry_count"), Some(&json!(2)));
        assert_eq!(
            steps[1].metadata.get("fallback_tool_name"),
            Some(&json!("c"))
        );
    }

    #[test]
    fn missing_pieces() {
        assert!(
            convert(json!({"flow_name": "f"}), "x")
                .unwrap_err()
                .contains("execution_log")
        );
        let err = convert(json!({"execution_log": [{"inputs": {}}]}), "x").unwrap_err();
        assert!(
            err.contains("execution_log[0]") && err.contains("tool_name"),
            "{err}"
        );
        let (trace, _) = convert(json!({"execution_log": []}), "x").unwrap();
        assert_eq!(trace.trace_id, "x");
    }
}
