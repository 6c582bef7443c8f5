//! What a run leaves behind: an [`ExecutionResult`] of [`StepRecord`]s, JSON round-trippable and
//! convertible into an observed trace for the store.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use chainweaver_recorder::model::{ObservedStep, ObservedTrace, Timestamp};

use crate::tool::JsonObject;

fn is_false(value: &bool) -> bool {
    !*value
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

/// One step of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Zero-based position of the step in the flow (`-1`: the flow-input validation record).
    pub step_index: i64,
    /// The DAG step id (absent for linear flows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_id: Option<String>,
    /// The step's configured primary tool, also when a fallback ran.
    pub tool_name: String,
    /// The inputs passed to the tool (dynamic parameters redacted).
    pub inputs: JsonObject,
    /// The validated outputs; `None` on failure (kept when only the output mapping failed).
    pub outputs: Option<JsonObject>,
    /// Error class on failure (`SchemaValidationError`, `ToolTimeoutError`, ...).
    pub error_type: Option<String>,
    pub error_message: Option<String>,
    pub success: bool,
    pub started_at: Timestamp,
    pub ended_at: Timestamp,
    pub duration_ms: f64,
    /// The step attempted its `fallback:<tool>`.
    pub fallback_used: bool,
    pub fallback_tool_name: Option<String>,
    /// Stable error code (see [`Error::code`](crate::error::Error::code)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// Tries of the primary tool (1 without retries); 0 when served from the cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempts: u32,
    /// The outputs came from the step cache.
    #[serde(default, skip_serializing_if = "is_false")]
    pub cache_hit: bool,
    /// The step failed and its `on_error: skip` let the flow go on.
    #[serde(default, skip_serializing_if = "is_false")]
    pub skipped: bool,
    /// A map step's iteration: the index of the element this call ran for, in the step's list
    /// (absent for ordinary steps, and for a map step's own failure before any iteration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<usize>,
}

/// The structured trace of one flow run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionResult {
    pub flow_name: String,
    /// The flow version that ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_version: Option<String>,
    /// True when the flow completed (failed steps under `on_error: skip` do not fail it).
    pub success: bool,
    /// The merged context (dynamic parameters redacted), or `None` on failure.
    pub final_output: Option<JsonObject>,
    pub execution_log: Vec<StepRecord>,
    pub trace_id: String,
    pub started_at: Timestamp,
    pub ended_at: Timestamp,
    pub total_duration_ms: f64,
    /// The flow's initial input, so the run can be replayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_input: Option<JsonObject>,
}

impl ExecutionResult {
    /// The first failed step that stopped the flow (or any failed step), if any.
    pub fn failed_step(&self) -> Option<&StepRecord> {
        self.execution_log
            .iter()
            .find(|r| !r.success && !r.skipped)
            .or_else(|| self.execution_log.iter().find(|r| !r.success))
    }

    /// The run as an observed trace and its steps, ready for a
    /// [`TraceStore`](chainweaver_recorder::store::TraceStore). Step indexes are positions in
    /// the log; the flow's own step index, id and fallback details go into step metadata. The
    /// flow-input validation record (index -1) becomes trace metadata.
    pub fn to_observed(&self) -> (ObservedTrace, Vec<ObservedStep>) {
        let mut trace = ObservedTrace::new(self.trace_id.clone(), "flow");
        trace.started_at = Some(self.started_at);
        trace.ended_at = Some(self.ended_at);
        trace.agent = Some("chainweaver-executor".into());
        let mut metadata = Map::new();
        metadata.insert("flow_name".into(), Value::String(self.flow_name.clone()));
        if let Some(version) = &self.flow_version {
            metadata.insert("flow_version".into(), Value::String(version.clone()));
        }
        metadata.insert("success".into(), Value::Bool(self.success));
        if let Some(input) = &self.initial_input {
            metadata.insert("initial_input".into(), Value::Object(input.clone()));
        }
        if let Some(output) = &self.final_output {
            metadata.insert("final_output".into(), Value::Object(output.clone()));
        }
        let mut steps = Vec::with_capacity(self.execution_log.len());
        for record in &self.execution_log {
            if record.step_index < 0 {
                metadata.insert(
                    "input_error".into(),
                    serde_json::json!({
                        "error_type": record.error_type,
                        "error_message": record.error_message,
                    }),
                );
                continue;
            }
            let position = u32::try_from(steps.len()).unwrap_or(u32::MAX);
            let mut step = ObservedStep::new(
                self.trace_id.clone(),
                position,
                record.tool_name.clone(),
                Value::Object(record.inputs.clone()),
            );
            step.outputs = record.outputs.clone().map(Value::Object);
            if !record.success {
                step.error_type = record.error_type.clone().or(Some("Error".into()));
                step.error_message = record.error_message.clone();
            }
            step.started_at = Some(record.started_at);
            step.ended_at = Some(record.ended_at);
            step.duration_ms = Some(record.duration_ms);
            let mut step_meta = Map::new();
            step_meta.insert("flow_step_index".into(), Value::from(record.step_index));
            if let Some(id) = &record.step_id {
                step_meta.insert("step_id".into(), Value::String(id.clone()));
            }
            if let Some(iteration) = record.iteration {
                step_meta.insert("iteration".into(), Value::from(iteration));
            }
            if record.fallback_used {
                step_meta.insert("fallback_used".into(), Value::Bool(true));
                step_meta.insert(
                    "fallback_tool_name".into(),
                    record
                        .fallback_tool_name
                        .clone()
                        .map(Value::String)
                        .unwrap_or(Value::Null),
                );
            }
            if record.cache_hit {
                step_meta.insert("cache_hit".into(), Value::Bool(true));
            }
            step.metadata = step_meta;
            steps.push(step);
        }
        trace.metadata = metadata;
        (trace, steps)
    }
}
