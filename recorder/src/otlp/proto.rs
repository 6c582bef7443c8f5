//! The parts of the OTLP trace protobuf messages ChainWeaver reads, as prost messages.
//!
//! Field numbers follow `opentelemetry/proto/collector/trace/v1/trace_service.proto` and the
//! `trace/v1`, `resource/v1` and `common/v1` files it imports. Fields not declared here (links,
//! dropped counts, flags, schema URLs) are skipped by the decoder, as protobuf allows.
//!
//! The same types read the OTLP/HTTP JSON encoding (see the `otlp::json` module): lowerCamelCase keys,
//! ids as hex text, 64-bit integers as text or numbers, enums as numbers, unknown keys ignored.

use serde::Deserialize;

use super::json;

/// `ExportTraceServiceRequest`: what an exporter sends to `/v1/traces`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExportTraceServiceRequest {
    #[prost(message, repeated, tag = "1")]
    pub resource_spans: Vec<ResourceSpans>,
}

/// `ExportTraceServiceResponse`, with the partial success a receiver reports for rejected spans.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportTraceServiceResponse {
    #[prost(message, optional, tag = "1")]
    pub partial_success: Option<ExportTracePartialSuccess>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportTracePartialSuccess {
    #[prost(int64, tag = "1")]
    pub rejected_spans: i64,
    #[prost(string, tag = "2")]
    pub error_message: String,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourceSpans {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub scope_spans: Vec<ScopeSpans>,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ScopeSpans {
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    #[prost(message, repeated, tag = "2")]
    pub spans: Vec<Span>,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InstrumentationScope {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub version: String,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Span {
    #[prost(bytes = "vec", tag = "1")]
    #[serde(deserialize_with = "json::hex_id")]
    pub trace_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    #[serde(deserialize_with = "json::hex_id")]
    pub span_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "4")]
    #[serde(deserialize_with = "json::hex_id")]
    pub parent_span_id: Vec<u8>,
    #[prost(string, tag = "5")]
    pub name: String,
    #[prost(fixed64, tag = "7")]
    #[serde(deserialize_with = "json::unsigned")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "8")]
    #[serde(deserialize_with = "json::unsigned")]
    pub end_time_unix_nano: u64,
    #[prost(message, repeated, tag = "9")]
    pub attributes: Vec<KeyValue>,
    #[prost(message, repeated, tag = "11")]
    pub events: Vec<Event>,
    #[prost(message, optional, tag = "15")]
    pub status: Option<Status>,
}

/// `Span.Event`: exceptions are recorded as events named `exception`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Event {
    #[prost(fixed64, tag = "1")]
    #[serde(deserialize_with = "json::unsigned")]
    pub time_unix_nano: u64,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(message, repeated, tag = "3")]
    pub attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Status {
    #[prost(string, tag = "2")]
    pub message: String,
    /// 0 unset, 1 ok, 2 error.
    #[prost(int32, tag = "3")]
    #[serde(deserialize_with = "json::status_code")]
    pub code: i32,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

/// An attribute value. Its JSON form is an object with one key naming the kind
/// (`stringValue`, `intValue`, ...), read by hand in the `otlp::json` module.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AnyValue {
    #[prost(oneof = "any_value::Value", tags = "1, 2, 3, 4, 5, 6, 7")]
    pub value: Option<any_value::Value>,
}

pub mod any_value {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        #[prost(string, tag = "1")]
        StringValue(String),
        #[prost(bool, tag = "2")]
        BoolValue(bool),
        #[prost(int64, tag = "3")]
        IntValue(i64),
        #[prost(double, tag = "4")]
        DoubleValue(f64),
        #[prost(message, tag = "5")]
        ArrayValue(super::ArrayValue),
        #[prost(message, tag = "6")]
        KvlistValue(super::KeyValueList),
        #[prost(bytes = "vec", tag = "7")]
        BytesValue(Vec<u8>),
    }
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ArrayValue {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<AnyValue>,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KeyValueList {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<KeyValue>,
}
