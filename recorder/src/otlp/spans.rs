//! From OTLP spans to tool calls: which spans are tool calls, and what each attribute becomes.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;

use chrono::DateTime;
use serde_json::{Map, Number, Value};

use super::proto::{AnyValue, ExportTraceServiceRequest, KeyValue, Span, any_value};
use crate::capture::ReceivedStep;
use crate::model::{ObservedStep, ObservedTrace, Timestamp, otel};

// Attribute names of the OpenTelemetry GenAI semantic conventions.
const GEN_AI_OPERATION: &str = "gen_ai.operation.name";
const EXECUTE_TOOL: &str = "execute_tool";
const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
const GEN_AI_TOOL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
const GEN_AI_TOOL_RESULT: &str = "gen_ai.tool.call.result";
const GEN_AI_CONVERSATION: &str = "gen_ai.conversation.id";
const GEN_AI_AGENT_NAME: &str = "gen_ai.agent.name";
const ERROR_TYPE: &str = "error.type";
// Attribute names of OpenInference.
const OPENINFERENCE_KIND: &str = "openinference.span.kind";
const OPENINFERENCE_TOOL: &str = "TOOL";
const TOOL_NAME: &str = "tool.name";
const TOOL_CALL_ID: &str = "tool_call.id";
const INPUT_VALUE: &str = "input.value";
const OUTPUT_VALUE: &str = "output.value";
const SESSION_ID: &str = "session.id";
// General conventions: the resource's service and recorded exceptions.
const SERVICE_NAME: &str = "service.name";
const EXCEPTION_EVENT: &str = "exception";
const EXCEPTION_TYPE: &str = "exception.type";
const EXCEPTION_MESSAGE: &str = "exception.message";
/// The span status code of a failed operation.
const STATUS_ERROR: i32 = 2;

/// One tool call read from a span, before it is placed in its trace.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpan {
    /// The trace it belongs to: the conversation id when the span has one, else the
    /// OpenTelemetry trace id in hex.
    pub trace_key: String,
    /// `gen_ai.conversation.id` (or OpenInference `session.id`).
    pub conversation_id: Option<String>,
    /// `gen_ai.agent.name`, when set.
    pub agent: Option<String>,
    /// The resource's `service.name`, when set.
    pub service_name: Option<String>,
    /// The span id in hex.
    pub span_id: String,
    /// The call; its trace id is `trace_key` and its index is set when the trace is assembled.
    /// Arguments and results that came as text stay that text ([`ReceivedStep::into_step`]
    /// reads them).
    pub step: ReceivedStep,
}

/// A span that looks like a tool call but cannot be read as one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanReject {
    /// The OpenTelemetry trace id in hex.
    pub trace_id: String,
    /// The span id in hex.
    pub span_id: String,
    /// The span's name.
    pub span_name: String,
    /// Why it was not read.
    pub reason: String,
}

impl fmt::Display for SpanReject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "span {} ({:?}) of trace {}: {}",
            self.span_id, self.span_name, self.trace_id, self.reason
        )
    }
}

/// What one export request (or file document) holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extracted {
    /// Every span in the request, tool call or not.
    pub spans: u64,
    /// The tool calls, in the order the request lists them.
    pub tool_spans: Vec<ToolSpan>,
    /// Tool spans that could not be read.
    pub rejects: Vec<SpanReject>,
}

/// The tool calls of an export request. Spans that are not tool calls are counted and left out.
pub fn extract(request: ExportTraceServiceRequest) -> Extracted {
    let mut out = Extracted::default();
    for resource_spans in request.resource_spans {
        let service_name = resource_spans
            .resource
            .as_ref()
            .and_then(|r| find(&r.attributes, SERVICE_NAME))
            .and_then(text_of);
        for scope_spans in resource_spans.scope_spans {
            for span in scope_spans.spans {
                out.spans += 1;
                if !is_tool_span(&span) {
                    continue;
                }
                match tool_span(span, service_name.as_deref()) {
                    Ok(call) => out.tool_spans.push(call),
                    Err(reject) => out.rejects.push(*reject),
                }
            }
        }
    }
    out
}

/// A GenAI `execute_tool` span or an OpenInference `TOOL` span.
fn is_tool_span(span: &Span) -> bool {
    span.attributes.iter().any(|kv| match kv.key.as_str() {
        GEN_AI_OPERATION => str_of(kv.value.as_ref()) == Some(EXECUTE_TOOL),
        OPENINFERENCE_KIND => {
            str_of(kv.value.as_ref()).is_some_and(|k| k.eq_ignore_ascii_case(OPENINFERENCE_TOOL))
        }
        _ => false,
    })
}

/// The attributes of a tool span that become the step, found in one pass.
#[derive(Default)]
struct ToolAttributes {
    tool_name: Option<AnyValue>,
    call_id: Option<AnyValue>,
    arguments: Option<AnyValue>,
    result: Option<AnyValue>,
    conversation: Option<AnyValue>,
    agent: Option<AnyValue>,
    error_type: Option<AnyValue>,
}

impl ToolAttributes {
    /// GenAI names win over OpenInference ones when a span carries both.
    fn collect(attributes: Vec<KeyValue>) -> Self {
        let mut found = Self::default();
        let mut fallback = Self::default();
        for kv in attributes {
            let Some(value) = kv.value else { continue };
            let slot = match kv.key.as_str() {
                GEN_AI_TOOL_NAME => &mut found.tool_name,
                GEN_AI_TOOL_CALL_ID => &mut found.call_id,
                GEN_AI_TOOL_ARGUMENTS => &mut found.arguments,
                GEN_AI_TOOL_RESULT => &mut found.result,
                GEN_AI_CONVERSATION => &mut found.conversation,
                GEN_AI_AGENT_NAME => &mut found.agent,
                ERROR_TYPE => &mut found.error_type,
                TOOL_NAME => &mut fallback.tool_name,
                TOOL_CALL_ID => &mut fallback.call_id,
                INPUT_VALUE => &mut fallback.arguments,
                OUTPUT_VALUE => &mut fallback.result,
                SESSION_ID => &mut fallback.conversation,
                _ => continue,
            };
            *slot = Some(value);
        }
        found.tool_name = found.tool_name.or(fallback.tool_name);
        found.call_id = found.call_id.or(fallback.call_id);
        found.arguments = found.arguments.or(fallback.arguments);
        found.result = found.result.or(fallback.result);
        found.conversation = found.conversation.or(fallback.conversation);
        found
    }
}

fn tool_span(span: Span, service_name: Option<&str>) -> Result<ToolSpan, Box<SpanReject>> {
    let trace_id = hex(&span.trace_id);
    let span_id = hex(&span.span_id);
    let reject = |reason: String| {
        Box::new(SpanReject {
            trace_id: trace_id.clone(),
            span_id: span_id.clone(),
            span_name: span.name.clone(),
            reason,
        })
    };
    if span.trace_id.is_empty() {
        return Err(reject("the span has no trace id".into()));
    }
    let started_at = timestamp(span.start_time_unix_nano)
        .map_err(|nanos| reject(format!("start time {nanos} ns is out of range")))?;
    let ended_at = timestamp(span.end_time_unix_nano)
        .map_err(|nanos| reject(format!("end time {nanos} ns is out of range")))?;
    let attributes = ToolAttributes::collect(span.attributes);
    let tool_name = attributes
        .tool_name
        .as_ref()
        .and_then(text_of)
        .filter(|name| !name.is_empty())
        .or_else(|| {
            span.name
                .strip_prefix("execute_tool ")
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .map(str::to_owned)
        })
        .ok_or_else(|| {
            reject(format!(
                "a tool span without a tool name (no {GEN_AI_TOOL_NAME} or {TOOL_NAME})"
            ))
        })?;
    let conversation_id = attributes
        .conversation
        .as_ref()
        .and_then(text_of)
        .filter(|id| !id.is_empty());
    let trace_key = conversation_id.clone().unwrap_or_else(|| trace_id.clone());

    let (inputs, inputs_text) = attributes.arguments.map_or((Value::Null, None), payload);
    let mut step = ObservedStep::new(trace_key.clone(), 0, tool_name, inputs);
    step.call_id = attributes.call_id.as_ref().and_then(text_of);
    let (outputs, outputs_text) = match attributes.result.map(payload) {
        Some((value, None)) => (Some(value), None),
        Some((_, text)) => (None, text),
        None => (None, None),
    };
    step.outputs = outputs;
    step.started_at = started_at;
    step.ended_at = ended_at;
    if span.end_time_unix_nano >= span.start_time_unix_nano && started_at.is_some() {
        let nanos = span.end_time_unix_nano - span.start_time_unix_nano;
        #[allow(clippy::cast_precision_loss)]
        let duration_ms = nanos as f64 / 1e6;
        step.duration_ms = ended_at.map(|_| duration_ms);
    }
    if span.status.as_ref().is_some_and(|s| s.code == STATUS_ERROR) {
        let status_message = span.status.map(|s| s.message).unwrap_or_default();
        let exception = span
            .events
            .iter()
            .find(|event| event.name == EXCEPTION_EVENT);
        let exception_attr = |key| {
            exception
                .and_then(|e| find(&e.attributes, key))
                .and_then(text_of)
        };
        let error_type = attributes
            .error_type
            .as_ref()
            .and_then(text_of)
            .or_else(|| exception_attr(EXCEPTION_TYPE))
            .unwrap_or_else(|| "error".to_owned());
        let message = Some(status_message)
            .filter(|m| !m.is_empty())
            .or_else(|| exception_attr(EXCEPTION_MESSAGE))
            .unwrap_or_else(|| error_type.clone());
        step.error_type = Some(error_type);
        step.error_message = Some(message);
    }
    step.metadata
        .insert(otel::SPAN_ID.to_owned(), Value::String(span_id.clone()));
    step.metadata
        .insert(otel::TRACE_ID.to_owned(), Value::String(trace_id.clone()));
    if !span.parent_span_id.is_empty() {
        step.metadata.insert(
            otel::PARENT_SPAN_ID.to_owned(),
            Value::String(hex(&span.parent_span_id)),
        );
    }
    Ok(ToolSpan {
        trace_key,
        conversation_id,
        agent: attributes.agent.as_ref().and_then(text_of),
        service_name: service_name.map(str::to_owned),
        span_id,
        step: ReceivedStep {
            step,
            inputs_text,
            outputs_text,
        },
    })
}

/// One trace assembled from tool spans.
#[derive(Debug, Clone, PartialEq)]
pub struct AssembledTrace {
    /// The trace row; its `source` is left empty for the caller.
    pub trace: ObservedTrace,
    /// Its steps, ordered by start time (spans without one last, in arrival order), numbered
    /// from 0; payloads that came as text are still text.
    pub steps: Vec<ReceivedStep>,
}

/// Groups tool spans into traces (by [`ToolSpan::trace_key`], in order of first appearance)
/// and orders each trace's steps by start time. A span id seen twice in one trace is kept
/// once; the second return value counts the copies left out.
pub fn assemble(tool_spans: Vec<ToolSpan>) -> (Vec<AssembledTrace>, u64) {
    let mut slots: HashMap<String, usize> = HashMap::new();
    let mut groups: Vec<(AssembledTrace, Vec<String>)> = Vec::new();
    let mut duplicates = 0;
    for call in tool_spans {
        let slot = match slots.entry(call.trace_key.clone()) {
            Entry::Occupied(entry) => *entry.get(),
            Entry::Vacant(entry) => {
                let mut trace = ObservedTrace::new(call.trace_key.clone(), "");
                trace.session_id.clone_from(&call.conversation_id);
                groups.push((
                    AssembledTrace {
                        trace,
                        steps: Vec::new(),
                    },
                    Vec::new(),
                ));
                *entry.insert(groups.len() - 1)
            }
        };
        let (assembled, span_ids) = &mut groups[slot];
        if span_ids.contains(&call.span_id) {
            duplicates += 1;
            continue;
        }
        span_ids.push(call.span_id);
        widen(&mut assembled.trace, &call.step.step);
        if assembled.trace.agent.is_none() {
            assembled.trace.agent = call.agent.or_else(|| call.service_name.clone());
        }
        if let Some(service) = call.service_name {
            assembled
                .trace
                .metadata
                .entry(otel::SERVICE_NAME)
                .or_insert(Value::String(service));
        }
        assembled.steps.push(call.step);
    }
    let traces = groups
        .into_iter()
        .map(|(mut assembled, _)| {
            order_steps(&mut assembled.steps);
            assembled
        })
        .collect();
    (traces, duplicates)
}

/// Stretch the trace's start and end to cover `step`.
pub fn widen(trace: &mut ObservedTrace, step: &ObservedStep) {
    if let Some(start) = step.started_at {
        trace.started_at = Some(trace.started_at.map_or(start, |s| s.min(start)));
    }
    if let Some(end) = step.ended_at.or(step.started_at) {
        trace.ended_at = Some(trace.ended_at.map_or(end, |e| e.max(end)));
    }
}

/// Sort by start time (a stable sort: equal or missing times keep arrival order, missing last)
/// and number the steps from 0.
pub fn order_steps(steps: &mut [ReceivedStep]) {
    steps.sort_by_key(|received| (received.step.started_at.is_none(), received.step.started_at));
    for (index, received) in steps.iter_mut().enumerate() {
        received.step.step_index = u32::try_from(index).unwrap_or(u32::MAX);
    }
}

fn find<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
}

fn str_of(value: Option<&AnyValue>) -> Option<&str> {
    match value?.value.as_ref()? {
        any_value::Value::StringValue(text) => Some(text),
        _ => None,
    }
}

/// An attribute as text: strings as they are, numbers and booleans written out.
fn text_of(value: &AnyValue) -> Option<String> {
    match value.value.as_ref()? {
        any_value::Value::StringValue(text) => Some(text.clone()),
        any_value::Value::IntValue(n) => Some(n.to_string()),
        any_value::Value::BoolValue(b) => Some(b.to_string()),
        any_value::Value::DoubleValue(x) => Some(x.to_string()),
        _ => None,
    }
}

/// An argument or result attribute as a payload: text is kept as text, to be read by
/// [`payload_from_text`](crate::capture::payload_from_text) when it is needed as a value (JSON
/// text becomes that JSON, as the conventions record arguments and results JSON-encoded; other
/// text stays text); structured values become JSON now.
fn payload(value: AnyValue) -> (Value, Option<String>) {
    match value.value {
        Some(any_value::Value::StringValue(text)) => (Value::Null, Some(text)),
        other => (json_of(other), None),
    }
}

/// An attribute value as JSON, exactly: integers as integers, non-finite doubles as text, bytes
/// as hex text.
fn json_of(value: Option<any_value::Value>) -> Value {
    use any_value::Value as Any;
    match value {
        None => Value::Null,
        Some(Any::StringValue(text)) => Value::String(text),
        Some(Any::BoolValue(b)) => Value::Bool(b),
        Some(Any::IntValue(n)) => Value::Number(n.into()),
        Some(Any::DoubleValue(x)) => {
            Number::from_f64(x).map_or_else(|| Value::String(x.to_string()), Value::Number)
        }
        Some(Any::BytesValue(bytes)) => Value::String(hex(&bytes)),
        Some(Any::ArrayValue(array)) => {
            Value::Array(array.values.into_iter().map(|v| json_of(v.value)).collect())
        }
        Some(Any::KvlistValue(list)) => {
            let mut map = Map::new();
            for kv in list.values {
                map.insert(kv.key, json_of(kv.value.and_then(|v| v.value)));
            }
            Value::Object(map)
        }
    }
}

/// Nanoseconds since 1970 as a timestamp; 0 means unset. `Err` holds a value past what the
/// stores keep (64-bit signed nanoseconds).
fn timestamp(nanos: u64) -> Result<Option<Timestamp>, u64> {
    if nanos == 0 {
        return Ok(None);
    }
    let signed = i64::try_from(nanos).map_err(|_| nanos)?;
    Ok(Some(DateTime::from_timestamp_nanos(signed)))
}

/// Lower-case hex of an id.
pub fn hex(bytes: &[u8]) -> String {
    // By table rather than `write!`: every span's trace, span and parent ids pass through here,
    // and formatting two digits at a time cost `collect` about 2% of its CPU.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::hex;

    #[test]
    fn ids_are_lower_case_hex_two_digits_a_byte() {
        assert_eq!(hex(&[]), "");
        assert_eq!(hex(&[0x00, 0x0a, 0xff, 0x5c]), "000aff5c");
        let every: Vec<u8> = (0..=255).collect();
        let by_format: String = every.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex(&every), by_format);
    }
}
