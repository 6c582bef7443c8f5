//! OpenTelemetry traces in: OTLP trace exports read as tool calls.
//!
//! Agent frameworks that follow the OpenTelemetry GenAI semantic conventions record each tool
//! call as an `execute_tool` span (`gen_ai.operation.name = execute_tool`) with
//! `gen_ai.tool.name`, `gen_ai.tool.call.id` and, where content capture is on,
//! `gen_ai.tool.call.arguments` and `gen_ai.tool.call.result`; `gen_ai.conversation.id` names the
//! conversation. OpenInference instrumentations mark the same calls with
//! `openinference.span.kind = TOOL`, `tool.name`, `input.value` and `output.value` (and
//! `session.id`). Every other span is counted and left out.
//!
//! | from the span | becomes |
//! |---|---|
//! | `gen_ai.conversation.id` / `session.id`, else the trace id (hex) | the trace id (and `session_id`) |
//! | `gen_ai.tool.name` / `tool.name`, else the span name after `execute_tool ` | `tool_name` |
//! | `gen_ai.tool.call.id` / `tool_call.id` | `call_id` |
//! | `gen_ai.tool.call.arguments` / `input.value` (JSON text parsed, other text kept) | `inputs` (null when not recorded) |
//! | `gen_ai.tool.call.result` / `output.value` | `outputs` |
//! | start and end time | `started_at`, `ended_at`, `duration_ms` |
//! | status code 2 (error), its message, `error.type` or the `exception` event | `error_type`, `error_message` |
//! | span id, trace id, parent span id | step metadata ([`otel`](crate::model::otel)) |
//! | `gen_ai.agent.name`, else the resource's `service.name` | the trace's `agent` |
//!
//! Steps are ordered by start time. Two encodings are read ([`Encoding`]): the OTLP/HTTP JSON
//! encoding (what the OpenTelemetry collector's file exporter and JSON exporters write; a file
//! holds one document or JSON Lines of documents) and protobuf `ExportTraceServiceRequest`s (one
//! message, or messages each preceded by its length as 4 big-endian bytes).
//!
//! - [`read_file`]: a whole export file into [`ImportBatch`](crate::import::ImportBatch)es.
//! - [`decode`], [`extract`], [`assemble`]: the steps of that, for a receiver that gets
//!   requests one at a time.

mod file;
mod json;
pub mod proto;
mod spans;

use std::fmt;

use prost::Message as _;

pub use self::file::{FileEncoding, OtlpReport, ReadOptions, read_file};
use self::proto::{ExportTraceServiceRequest, ExportTraceServiceResponse};
pub use self::spans::{
    AssembledTrace, Extracted, SpanReject, ToolSpan, assemble, extract, hex, order_steps, widen,
};

/// How an export request's body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `application/json`: the OTLP/HTTP JSON encoding.
    Json,
    /// `application/x-protobuf`: a protobuf `ExportTraceServiceRequest`.
    Protobuf,
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Encoding::Json => "JSON",
            Encoding::Protobuf => "protobuf",
        })
    }
}

/// Decodes one export request. The error says what is wrong, in words for the sender.
pub fn decode(body: &[u8], encoding: Encoding) -> Result<ExportTraceServiceRequest, String> {
    match encoding {
        Encoding::Json => {
            serde_json::from_slice(body).map_err(|e| format!("not an OTLP JSON trace export: {e}"))
        }
        Encoding::Protobuf => ExportTraceServiceRequest::decode(body)
            .map_err(|e| format!("not an OTLP protobuf trace export: {e}")),
    }
}

/// The protobuf encoding of a receiver's answer.
pub fn encode_response(response: &ExportTraceServiceResponse) -> Vec<u8> {
    response.encode_to_vec()
}
