//! Arrow schemas of the part files and conversion between rows and record batches.
//!
//! The schemas are documented in `docs/parquet-schema.md`; keep both in step.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, Float64Array, RecordBatch, StringArray, StringBuilder,
    TimestampNanosecondArray, UInt32Array, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use serde_json::{Map, Value};

use crate::error::{RecorderError, Result};
use crate::model::{ObservedStep, ObservedTrace};
use crate::store::{JsonText, MetadataText, StepView, timestamp_from_nanos, timestamp_nanos};

/// Storage ordinal of a trace: assigned when the trace is first written, never changed.
pub(super) const TRACE_SEQ: &str = "trace_seq";
/// The append (commit) that wrote a row; later rows of the same trace win.
pub(super) const WRITE_SEQ: &str = "write_seq";

fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}

/// The columns of a `traces` part file.
pub(super) fn trace_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("trace_id", DataType::Utf8, false),
        Field::new("session_id", DataType::Utf8, true),
        Field::new("source", DataType::Utf8, false),
        Field::new("agent", DataType::Utf8, true),
        Field::new("started_at", timestamp_type(), true),
        Field::new("ended_at", timestamp_type(), true),
        Field::new("metadata", DataType::Utf8, false),
        Field::new(TRACE_SEQ, DataType::UInt64, false),
        Field::new(WRITE_SEQ, DataType::UInt64, false),
    ]))
}

/// The columns of a `steps` part file.
pub(super) fn step_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("trace_id", DataType::Utf8, false),
        Field::new("step_index", DataType::UInt32, false),
        Field::new("call_id", DataType::Utf8, true),
        Field::new("tool_name", DataType::Utf8, false),
        Field::new("inputs", DataType::Utf8, false),
        Field::new("outputs", DataType::Utf8, true),
        Field::new("error_type", DataType::Utf8, true),
        Field::new("error_message", DataType::Utf8, true),
        Field::new("started_at", timestamp_type(), true),
        Field::new("ended_at", timestamp_type(), true),
        Field::new("duration_ms", DataType::Float64, true),
        Field::new("recorded_at", timestamp_type(), true),
        Field::new("metadata", DataType::Utf8, false),
        Field::new("is_error", DataType::Boolean, false),
        Field::new(TRACE_SEQ, DataType::UInt64, false),
        Field::new(WRITE_SEQ, DataType::UInt64, false),
    ]))
}

fn nanos(at: &Option<crate::model::Timestamp>) -> Option<i64> {
    at.as_ref().and_then(timestamp_nanos)
}

fn timestamps(values: Vec<Option<i64>>) -> ArrayRef {
    Arc::new(TimestampNanosecondArray::from(values).with_timezone("UTC"))
}

fn metadata_text(metadata: &Map<String, Value>) -> String {
    if metadata.is_empty() {
        return "{}".to_owned();
    }
    // Serializing a map of `Value`s cannot fail; the text is what `Value::to_string` writes.
    serde_json::to_string(metadata).unwrap_or_else(|_| "{}".to_owned())
}

/// A string column of compact JSON text (`None` is a null): raw text as it is, a `Value` written
/// through one reused buffer (the same text as `Value::to_string`, without a `String` per row).
fn json_column<'a>(values: impl ExactSizeIterator<Item = Option<JsonText<'a>>>) -> ArrayRef {
    let mut builder = StringBuilder::with_capacity(values.len(), values.len() * 64);
    let mut buffer = Vec::new();
    for value in values {
        match value {
            Some(JsonText::Text(text)) => builder.append_value(text),
            Some(JsonText::Value(value)) => {
                buffer.clear();
                // Writing a `Value` to memory cannot fail; serde_json writes UTF-8.
                let _ = serde_json::to_writer(&mut buffer, value);
                builder.append_value(std::str::from_utf8(&buffer).unwrap_or("null"));
            }
            None => builder.append_null(),
        }
    }
    Arc::new(builder.finish())
}

/// A metadata column: the text [`metadata_text`] gives, without a `String` per row.
fn metadata_column<'a>(maps: impl ExactSizeIterator<Item = MetadataText<'a>>) -> ArrayRef {
    let mut builder = StringBuilder::with_capacity(maps.len(), maps.len() * 2);
    let mut buffer = Vec::new();
    for map in maps {
        let map = match map {
            MetadataText::Text(text) => {
                builder.append_value(text);
                continue;
            }
            MetadataText::Map(map) => map,
        };
        buffer.clear();
        if map.is_empty() || serde_json::to_writer(&mut buffer, map).is_err() {
            builder.append_value("{}");
        } else {
            builder.append_value(std::str::from_utf8(&buffer).unwrap_or("{}"));
        }
    }
    Arc::new(builder.finish())
}

fn batch_error(path: &Path, error: arrow::error::ArrowError) -> RecorderError {
    RecorderError::Parquet {
        path: path.to_path_buf(),
        message: format!("building a record batch: {error}"),
    }
}

/// A trace row to write: the trace's full (merged) state.
pub(super) struct TraceRowOut<'a> {
    pub trace: &'a ObservedTrace,
    pub trace_seq: u64,
}

/// Build a `traces` record batch.
pub(super) fn trace_batch(
    path: &Path,
    rows: &[TraceRowOut<'_>],
    write_seq: u64,
) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.trace.trace_id.as_str()),
        )),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.trace.session_id.as_deref()),
        )),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.trace.source.as_str()),
        )),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.trace.agent.as_deref()),
        )),
        timestamps(rows.iter().map(|r| nanos(&r.trace.started_at)).collect()),
        timestamps(rows.iter().map(|r| nanos(&r.trace.ended_at)).collect()),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| metadata_text(&r.trace.metadata)),
        )),
        Arc::new(UInt64Array::from_iter_values(
            rows.iter().map(|r| r.trace_seq),
        )),
        Arc::new(UInt64Array::from_iter_values(
            rows.iter().map(|_| write_seq),
        )),
    ];
    RecordBatch::try_new(trace_schema(), columns).map_err(|e| batch_error(path, e))
}

/// Build a `steps` record batch; `rows` pairs each step with its trace's storage ordinal.
pub(super) fn step_batch(
    path: &Path,
    rows: &[(u64, &StepView<'_>)],
    write_seq: u64,
) -> Result<RecordBatch> {
    let at = |t: Option<&crate::model::Timestamp>| t.and_then(timestamp_nanos);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|(_, s)| s.trace_id),
        )),
        Arc::new(UInt32Array::from_iter_values(
            rows.iter().map(|(_, s)| s.step_index),
        )),
        Arc::new(StringArray::from_iter(rows.iter().map(|(_, s)| s.call_id))),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|(_, s)| s.tool_name),
        )),
        json_column(rows.iter().map(|(_, s)| Some(s.inputs))),
        json_column(rows.iter().map(|(_, s)| s.outputs)),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|(_, s)| s.error_type),
        )),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|(_, s)| s.error_message),
        )),
        timestamps(rows.iter().map(|(_, s)| at(s.started_at)).collect()),
        timestamps(rows.iter().map(|(_, s)| at(s.ended_at)).collect()),
        Arc::new(Float64Array::from_iter(
            rows.iter().map(|(_, s)| s.duration_ms),
        )),
        timestamps(rows.iter().map(|(_, s)| at(s.recorded_at)).collect()),
        metadata_column(rows.iter().map(|(_, s)| s.metadata)),
        Arc::new(BooleanArray::from_iter(
            rows.iter().map(|(_, s)| Some(s.is_error())),
        )),
        Arc::new(UInt64Array::from_iter_values(
            rows.iter().map(|(seq, _)| *seq),
        )),
        Arc::new(UInt64Array::from_iter_values(
            rows.iter().map(|_| write_seq),
        )),
    ];
    RecordBatch::try_new(step_schema(), columns).map_err(|e| batch_error(path, e))
}

/// Typed access to the columns of a record batch read from `path`, with errors that name the
/// file and the column.
pub(super) struct Columns<'a> {
    pub path: &'a Path,
    pub batch: &'a RecordBatch,
}

impl<'a> Columns<'a> {
    fn corrupt(&self, message: String) -> RecorderError {
        RecorderError::CorruptStore {
            path: self.path.to_path_buf(),
            message,
        }
    }

    fn column<T: Array + 'static>(&self, name: &str) -> Result<&'a T> {
        let column = self
            .batch
            .column_by_name(name)
            .ok_or_else(|| self.corrupt(format!("column {name} is missing")))?;
        column
            .as_any()
            .downcast_ref::<T>()
            .ok_or_else(|| self.corrupt(format!("column {name} has type {}", column.data_type())))
    }

    pub fn strings(&self, name: &str) -> Result<&'a StringArray> {
        self.column(name)
    }

    pub fn u64s(&self, name: &str) -> Result<&'a UInt64Array> {
        self.column(name)
    }

    pub fn u32s(&self, name: &str) -> Result<&'a UInt32Array> {
        self.column(name)
    }

    pub fn f64s(&self, name: &str) -> Result<&'a Float64Array> {
        self.column(name)
    }

    pub fn bools(&self, name: &str) -> Result<&'a BooleanArray> {
        self.column(name)
    }

    pub fn timestamps(&self, name: &str) -> Result<&'a TimestampNanosecondArray> {
        self.column(name)
    }

    fn json(&self, text: &str, what: impl FnOnce() -> String) -> Result<Value> {
        serde_json::from_str(text)
            .map_err(|e| self.corrupt(format!("{} is not valid JSON: {e}", what())))
    }

    fn metadata(&self, text: &str, what: impl FnOnce() -> String) -> Result<Map<String, Value>> {
        serde_json::from_str(text)
            .map_err(|e| self.corrupt(format!("{} is not a JSON object: {e}", what())))
    }

    /// Decode the rows of a `traces` batch whose trace id `keep` accepts:
    /// (trace_seq, write_seq, trace).
    pub fn traces_where(
        &self,
        keep: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<(u64, u64, ObservedTrace)>> {
        let trace_id = self.strings("trace_id")?;
        let session_id = self.strings("session_id")?;
        let source = self.strings("source")?;
        let agent = self.strings("agent")?;
        let started_at = self.timestamps("started_at")?;
        let ended_at = self.timestamps("ended_at")?;
        let metadata = self.strings("metadata")?;
        let trace_seq = self.u64s(TRACE_SEQ)?;
        let write_seq = self.u64s(WRITE_SEQ)?;
        let mut rows = Vec::with_capacity(self.batch.num_rows());
        for i in 0..self.batch.num_rows() {
            if !keep(trace_id.value(i)) {
                continue;
            }
            let id = trace_id.value(i).to_owned();
            let trace = ObservedTrace {
                session_id: opt_string(session_id, i),
                source: source.value(i).to_owned(),
                agent: opt_string(agent, i),
                started_at: opt_timestamp(started_at, i),
                ended_at: opt_timestamp(ended_at, i),
                metadata: self.metadata(metadata.value(i), || format!("metadata of trace {id}"))?,
                trace_id: id,
            };
            rows.push((trace_seq.value(i), write_seq.value(i), trace));
        }
        Ok(rows)
    }

    /// Decode every row of a `steps` batch: (trace_seq, step).
    pub fn steps(&self) -> Result<Vec<(u64, ObservedStep)>> {
        self.steps_where(&|_, _| true)
    }

    /// Decode the rows of a `steps` batch whose (trace_seq, step_index) `keep` accepts; the
    /// others' payloads are never parsed.
    pub fn steps_where(&self, keep: &dyn Fn(u64, u32) -> bool) -> Result<Vec<(u64, ObservedStep)>> {
        let trace_id = self.strings("trace_id")?;
        let step_index = self.u32s("step_index")?;
        let call_id = self.strings("call_id")?;
        let tool_name = self.strings("tool_name")?;
        let inputs = self.strings("inputs")?;
        let outputs = self.strings("outputs")?;
        let error_type = self.strings("error_type")?;
        let error_message = self.strings("error_message")?;
        let started_at = self.timestamps("started_at")?;
        let ended_at = self.timestamps("ended_at")?;
        let duration_ms = self.f64s("duration_ms")?;
        let recorded_at = self.timestamps("recorded_at")?;
        let metadata = self.strings("metadata")?;
        let trace_seq = self.u64s(TRACE_SEQ)?;
        let mut rows = Vec::new();
        for i in 0..self.batch.num_rows() {
            let index = step_index.value(i);
            if !keep(trace_seq.value(i), index) {
                continue;
            }
            let id = trace_id.value(i);
            let what = |column: &str| format!("{column} of trace {id}, step {index}");
            let step = ObservedStep {
                trace_id: id.to_owned(),
                step_index: index,
                call_id: opt_string(call_id, i),
                tool_name: tool_name.value(i).to_owned(),
                inputs: self.json(inputs.value(i), || what("inputs"))?,
                outputs: if outputs.is_null(i) {
                    None
                } else {
                    Some(self.json(outputs.value(i), || what("outputs"))?)
                },
                error_type: opt_string(error_type, i),
                error_message: opt_string(error_message, i),
                started_at: opt_timestamp(started_at, i),
                ended_at: opt_timestamp(ended_at, i),
                duration_ms: (!duration_ms.is_null(i)).then(|| duration_ms.value(i)),
                recorded_at: opt_timestamp(recorded_at, i),
                metadata: self.metadata(metadata.value(i), || what("metadata"))?,
            };
            rows.push((trace_seq.value(i), step));
        }
        Ok(rows)
    }
}

pub(super) fn opt_string(array: &StringArray, i: usize) -> Option<String> {
    (!array.is_null(i)).then(|| array.value(i).to_owned())
}

pub(super) fn opt_timestamp(
    array: &TimestampNanosecondArray,
    i: usize,
) -> Option<crate::model::Timestamp> {
    (!array.is_null(i)).then(|| timestamp_from_nanos(array.value(i)))
}
