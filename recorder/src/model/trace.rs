//! Observed traces and steps: what an agent actually did, one tool call at a time.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A UTC instant. Stores keep nanosecond precision.
pub type Timestamp = DateTime<Utc>;

/// Free-form metadata, key order preserved.
pub type Metadata = Map<String, Value>;

/// One recorded agent session: an ordered series of tool calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObservedTrace {
    /// Unique id of the trace within a store.
    pub trace_id: String,
    /// The agent's conversation or session id, when the source has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Where the trace came from: an importer name and file, `recorder`, `mcp-proxy`, ...
    pub source: String,
    /// The agent that made the calls, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
    /// Anything else the source said about the trace (task id, reward, ...).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Metadata,
}

impl ObservedTrace {
    /// A trace with only an id and a source.
    pub fn new(trace_id: impl Into<String>, source: impl Into<String>) -> Self {
        Self {
            trace_id: trace_id.into(),
            session_id: None,
            source: source.into(),
            agent: None,
            started_at: None,
            ended_at: None,
            metadata: Map::new(),
        }
    }
}

/// One tool call inside a trace.
///
/// `inputs` and `outputs` are kept exactly as observed: key order and the textual form of every
/// number survive every store and conversion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObservedStep {
    pub trace_id: String,
    /// Zero-based position of the call in its trace.
    pub step_index: u32,
    /// The id the agent gave the call (OpenAI `tool_call_id`, Anthropic `tool_use.id`, MCP request id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    pub tool_name: String,
    /// The arguments, normally a JSON object; kept as given when a source passed something else.
    pub inputs: Value,
    /// The result, or `None` when the call failed or its result was never seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Value>,
    /// Error class or kind when the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    /// Human-readable error when the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    /// When the step was written to the store (the specification's `recorded_at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Metadata,
}

impl ObservedStep {
    /// A successful step with the given tool and inputs and nothing else set.
    pub fn new(
        trace_id: impl Into<String>,
        step_index: u32,
        tool_name: impl Into<String>,
        inputs: Value,
    ) -> Self {
        Self {
            trace_id: trace_id.into(),
            step_index,
            call_id: None,
            tool_name: tool_name.into(),
            inputs,
            outputs: None,
            error_type: None,
            error_message: None,
            started_at: None,
            ended_at: None,
            duration_ms: None,
            recorded_at: None,
            metadata: Map::new(),
        }
    }

    /// True when the call failed.
    pub fn is_error(&self) -> bool {
        self.error_type.is_some() || self.error_message.is_some()
    }
}

/// A trace together with its steps in step order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceWithSteps {
    pub trace: ObservedTrace,
    pub steps: Vec<ObservedStep>,
}
