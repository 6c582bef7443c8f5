//! Event logs for process-mining tools: XES (IEEE 1849) and OCEL 2.0 JSON.
//!
//! One case per trace, one event per step; the activity is the tool. Each event carries its
//! time (the step's start, else its end, else the trace's start), whether the call failed and
//! why, its duration, call id and index, and its inputs and outputs as JSON text when they are
//! small (at most [`SMALL_PAYLOAD_BYTES`]). PM4Py, ProM, Disco and Celonis read both.
//!
//! [`LogWriter`] streams: XES is written trace by trace; OCEL writes its events as they come and
//! its objects (one per trace, a few attributes each) and types at the end.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::SecondsFormat;
use serde_json::{Value, json};

use crate::error::{RecorderError, Result};
use crate::model::{ObservedStep, Timestamp, TraceWithSteps};

/// Inputs and outputs whose JSON text is at most this long are written into the log.
pub const SMALL_PAYLOAD_BYTES: usize = 512;

/// The event log formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// XES (IEEE 1849-2016) XML.
    Xes,
    /// OCEL 2.0 JSON, with one object type, `trace`.
    Ocel,
}

/// Writes traces as an event log to `out`.
pub struct LogWriter<W: Write> {
    format: LogFormat,
    out: W,
    path: PathBuf,
    /// OCEL: the objects written at the end, the tools seen, whether an event was written.
    objects: Vec<Value>,
    tools: BTreeSet<String>,
    first_event: bool,
}

/// The name of the one OCEL object type.
const TRACE_OBJECT: &str = "trace";
/// ChainWeaver's own XES attributes live under this prefix.
const PREFIX: &str = "chainweaver";

impl<W: Write> LogWriter<W> {
    /// Starts a log; `path` names the output in errors.
    pub fn new(format: LogFormat, out: W, path: &Path) -> Result<Self> {
        let mut writer = Self {
            format,
            out,
            path: path.to_owned(),
            objects: Vec::new(),
            tools: BTreeSet::new(),
            first_event: true,
        };
        let head = match format {
            LogFormat::Xes => XES_HEAD,
            LogFormat::Ocel => "{\"events\":[\n",
        };
        writer.put(head.as_bytes())?;
        Ok(writer)
    }

    /// Adds one trace and its steps.
    pub fn write_trace(&mut self, trace: &TraceWithSteps) -> Result<()> {
        match self.format {
            LogFormat::Xes => self.xes_trace(trace),
            LogFormat::Ocel => self.ocel_trace(trace),
        }
    }

    /// Ends the log and returns the output.
    pub fn finish(mut self) -> Result<W> {
        match self.format {
            LogFormat::Xes => self.put(b"</log>\n")?,
            LogFormat::Ocel => self.ocel_end()?,
        }
        self.out.flush().map_err(|source| RecorderError::Io {
            path: self.path.clone(),
            source,
        })?;
        Ok(self.out)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.out
            .write_all(bytes)
            .map_err(|source| RecorderError::Io {
                path: self.path.clone(),
                source,
            })
    }

    fn xes_trace(&mut self, trace: &TraceWithSteps) -> Result<()> {
        let mut text = String::from("  <trace>\n");
        attribute(
            &mut text,
            4,
            "string",
            "concept:name",
            &trace.trace.trace_id,
        );
        attribute(
            &mut text,
            4,
            "string",
            &format!("{PREFIX}:source"),
            &trace.trace.source,
        );
        if let Some(agent) = &trace.trace.agent {
            attribute(&mut text, 4, "string", &format!("{PREFIX}:agent"), agent);
        }
        if let Some(session) = &trace.trace.session_id {
            attribute(
                &mut text,
                4,
                "string",
                &format!("{PREFIX}:session_id"),
                session,
            );
        }
        for step in &trace.steps {
            text.push_str("    <event>\n");
            attribute(&mut text, 6, "string", "concept:name", &step.tool_name);
            attribute(&mut text, 6, "string", "lifecycle:transition", "complete");
            if let Some(time) = event_time(trace, step) {
                attribute(&mut text, 6, "date", "time:timestamp", &rfc3339(time));
            }
            for (name, value) in event_attributes(step) {
                let (kind, text_value) = match &value {
                    Value::Bool(b) => ("boolean", b.to_string()),
                    Value::Number(n) if n.is_i64() || n.is_u64() => ("int", n.to_string()),
                    Value::Number(n) => ("float", n.to_string()),
                    Value::String(s) => ("string", s.clone()),
                    other => ("string", other.to_string()),
                };
                attribute(&mut text, 6, kind, &format!("{PREFIX}:{name}"), &text_value);
            }
            text.push_str("    </event>\n");
        }
        text.push_str("  </trace>\n");
        self.put(text.as_bytes())
    }

    fn ocel_trace(&mut self, trace: &TraceWithSteps) -> Result<()> {
        let id = &trace.trace.trace_id;
        for step in &trace.steps {
            self.tools.insert(step.tool_name.clone());
            let time = event_time(trace, step).map_or_else(|| EPOCH.to_owned(), rfc3339);
            let attributes: Vec<Value> = event_attributes(step)
                .into_iter()
                .map(|(name, value)| json!({"name": name, "value": value}))
                .collect();
            let event = json!({
                "id": format!("{id}#{}", step.step_index),
                "type": step.tool_name,
                "time": time,
                "attributes": attributes,
                "relationships": [{"objectId": id, "qualifier": "case"}],
            });
            let separator: &[u8] = if self.first_event { b"" } else { b",\n" };
            self.first_event = false;
            self.put(separator)?;
            self.put(event.to_string().as_bytes())?;
        }
        let mut attributes =
            vec![json!({"name": "source", "time": EPOCH, "value": trace.trace.source})];
        if let Some(agent) = &trace.trace.agent {
            attributes.push(json!({"name": "agent", "time": EPOCH, "value": agent}));
        }
        if let Some(session) = &trace.trace.session_id {
            attributes.push(json!({"name": "session_id", "time": EPOCH, "value": session}));
        }
        self.objects.push(json!({
            "id": id,
            "type": TRACE_OBJECT,
            "attributes": attributes,
            "relationships": [],
        }));
        Ok(())
    }

    fn ocel_end(&mut self) -> Result<()> {
        let objects = Value::Array(std::mem::take(&mut self.objects));
        let event_attributes: Vec<Value> = EVENT_ATTRIBUTES
            .iter()
            .map(|(name, kind)| json!({"name": name, "type": kind}))
            .collect();
        let event_types: Vec<Value> = self
            .tools
            .iter()
            .map(|tool| json!({"name": tool, "attributes": event_attributes}))
            .collect();
        let object_types = json!([{
            "name": TRACE_OBJECT,
            "attributes": [
                {"name": "source", "type": "string"},
                {"name": "agent", "type": "string"},
                {"name": "session_id", "type": "string"},
            ],
        }]);
        let tail = format!(
            "\n],\n\"objects\":{objects},\n\"objectTypes\":{object_types},\n\"eventTypes\":{}\n}}\n",
            Value::Array(event_types)
        );
        self.put(tail.as_bytes())
    }
}

const XES_HEAD: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<log xes.version="1849-2016" xes.features="nested-attributes" xmlns="http://www.xes-standard.org/">
  <extension name="Concept" prefix="concept" uri="http://www.xes-standard.org/concept.xesext"/>
  <extension name="Time" prefix="time" uri="http://www.xes-standard.org/time.xesext"/>
  <extension name="Lifecycle" prefix="lifecycle" uri="http://www.xes-standard.org/lifecycle.xesext"/>
  <global scope="trace">
    <string key="concept:name" value="__INVALID__"/>
  </global>
  <global scope="event">
    <string key="concept:name" value="__INVALID__"/>
    <string key="lifecycle:transition" value="complete"/>
  </global>
  <classifier name="Activity" keys="concept:name"/>
"#;

/// The time OCEL needs where a step has none.
const EPOCH: &str = "1970-01-01T00:00:00Z";

/// The event attributes, with their OCEL types.
const EVENT_ATTRIBUTES: [(&str, &str); 8] = [
    ("step_index", "integer"),
    ("error", "boolean"),
    ("error_type", "string"),
    ("error_message", "string"),
    ("duration_ms", "float"),
    ("call_id", "string"),
    ("inputs", "string"),
    ("outputs", "string"),
];

/// A step's attributes: always its index and failure flag, the rest where set (payloads only
/// when small).
fn event_attributes(step: &ObservedStep) -> Vec<(&'static str, Value)> {
    let mut attributes = vec![
        ("step_index", Value::from(step.step_index)),
        ("error", Value::Bool(step.is_error())),
    ];
    if let Some(kind) = &step.error_type {
        attributes.push(("error_type", Value::String(kind.clone())));
    }
    if let Some(message) = &step.error_message {
        attributes.push(("error_message", Value::String(message.clone())));
    }
    if let Some(duration) = step.duration_ms.and_then(serde_json::Number::from_f64) {
        attributes.push(("duration_ms", Value::Number(duration)));
    }
    if let Some(call_id) = &step.call_id {
        attributes.push(("call_id", Value::String(call_id.clone())));
    }
    let inputs = step.inputs.to_string();
    if inputs.len() <= SMALL_PAYLOAD_BYTES {
        attributes.push(("inputs", Value::String(inputs)));
    }
    if let Some(outputs) = &step.outputs {
        let outputs = outputs.to_string();
        if outputs.len() <= SMALL_PAYLOAD_BYTES {
            attributes.push(("outputs", Value::String(outputs)));
        }
    }
    attributes
}

fn event_time(trace: &TraceWithSteps, step: &ObservedStep) -> Option<Timestamp> {
    step.started_at.or(step.ended_at).or(trace.trace.started_at)
}

fn rfc3339(time: Timestamp) -> String {
    time.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// One XES attribute element on its own line.
fn attribute(text: &mut String, indent: usize, kind: &str, key: &str, value: &str) {
    text.extend(std::iter::repeat_n(' ', indent));
    text.push('<');
    text.push_str(kind);
    text.push_str(" key=\"");
    escape_into(text, key);
    text.push_str("\" value=\"");
    escape_into(text, value);
    text.push_str("\"/>\n");
}

/// XML attribute text: markup characters escaped, characters XML 1.0 forbids replaced.
fn escape_into(text: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '&' => text.push_str("&amp;"),
            '<' => text.push_str("&lt;"),
            '>' => text.push_str("&gt;"),
            '"' => text.push_str("&quot;"),
            '\n' => text.push_str("&#10;"),
            '\r' => text.push_str("&#13;"),
            '\t' => text.push_str("&#9;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => text.push('\u{FFFD}'),
            c => text.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_text_is_escaped_and_forbidden_characters_replaced() {
        let mut text = String::new();
        escape_into(&mut text, "a<b & \"c\"\u{1}\n");
        assert_eq!(text, "a&lt;b &amp; &quot;c&quot;\u{FFFD}&#10;");
    }
}
