//! Metadata keys of traces and steps read from OpenTelemetry spans (`otlp` import and
//! `collect`). Spelled here once; readers and writers use these constants.

/// Step metadata: the span's id, 16 hex digits.
pub const SPAN_ID: &str = "otel_span_id";
/// Step metadata: the OpenTelemetry trace id the span belongs to, 32 hex digits (a trace grouped
/// by conversation can hold spans of several OpenTelemetry traces).
pub const TRACE_ID: &str = "otel_trace_id";
/// Step metadata: the parent span's id, when the span has one.
pub const PARENT_SPAN_ID: &str = "otel_parent_span_id";
/// Trace metadata: the `service.name` of the resource that sent the spans.
pub const SERVICE_NAME: &str = "otel_service_name";
