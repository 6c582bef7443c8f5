//! Steps whose JSON payloads are already text: what a bulk import hands the stores.
//!
//! [`RawSteps`] keeps every step's strings and its `inputs`, `outputs` and metadata, as the
//! compact JSON text the stores write, in one buffer per batch. A store appends such steps
//! without building or serializing a `serde_json::Value`, and freeing a batch is one buffer
//! instead of a tree of allocations per payload.
//!
//! The text of a payload is exactly what `serde_json::to_string` writes for the `Value` the
//! same step would carry (see [`RawSteps::push_step`]); the importer guarantees the same when
//! it copies a payload's text from its input.

use serde_json::{Map, Value};

use crate::capture::redact::RedactionPolicy;
use crate::capture::{ReceivedStep, payload_from_text};
use crate::error::{RecorderError, Result};
use crate::import::compact::{Scratch, write_compact};
use crate::model::{Metadata, ObservedStep, Timestamp};

/// A piece of [`RawSteps`]'s buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Span {
    start: usize,
    end: usize,
}

/// One step of a [`RawSteps`]: spans of the shared buffer for its text, the rest as values.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawStep {
    pub trace_id: Span,
    pub step_index: u32,
    pub call_id: Option<Span>,
    pub tool_name: Span,
    /// Compact JSON text.
    pub inputs: Span,
    /// Compact JSON text; `None` is no outputs.
    pub outputs: Option<Span>,
    pub error_type: Option<Span>,
    pub error_message: Option<Span>,
    pub started_at: Option<Timestamp>,
    pub ended_at: Option<Timestamp>,
    pub duration_ms: Option<f64>,
    pub recorded_at: Option<Timestamp>,
    /// Compact JSON text of a non-empty object; `None` is no metadata (stored as `{}`).
    pub metadata: Option<Span>,
}

/// Steps with their text in one buffer, in the order they were pushed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawSteps {
    text: String,
    steps: Vec<RawStep>,
}

/// A JSON column value: a `Value` to serialize, or text already in the stored (compact) form.
#[derive(Debug, Clone, Copy)]
pub(crate) enum JsonText<'a> {
    Value(&'a Value),
    Text(&'a str),
}

/// A metadata column value: a map to serialize (empty is `{}`), or compact text.
#[derive(Debug, Clone, Copy)]
pub(crate) enum MetadataText<'a> {
    Map(&'a Map<String, Value>),
    Text(&'a str),
}

/// One step as the stores write it, borrowed from an [`ObservedStep`] or from [`RawSteps`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct StepView<'a> {
    pub trace_id: &'a str,
    pub step_index: u32,
    pub call_id: Option<&'a str>,
    pub tool_name: &'a str,
    pub inputs: JsonText<'a>,
    pub outputs: Option<JsonText<'a>>,
    pub error_type: Option<&'a str>,
    pub error_message: Option<&'a str>,
    pub started_at: Option<&'a Timestamp>,
    pub ended_at: Option<&'a Timestamp>,
    pub duration_ms: Option<f64>,
    pub recorded_at: Option<&'a Timestamp>,
    pub metadata: MetadataText<'a>,
}

impl StepView<'_> {
    /// True when the call failed (as [`ObservedStep::is_error`]).
    pub fn is_error(&self) -> bool {
        self.error_type.is_some() || self.error_message.is_some()
    }
}

impl<'a> From<&'a ObservedStep> for StepView<'a> {
    fn from(step: &'a ObservedStep) -> Self {
        StepView {
            trace_id: &step.trace_id,
            step_index: step.step_index,
            call_id: step.call_id.as_deref(),
            tool_name: &step.tool_name,
            inputs: JsonText::Value(&step.inputs),
            outputs: step.outputs.as_ref().map(JsonText::Value),
            error_type: step.error_type.as_deref(),
            error_message: step.error_message.as_deref(),
            started_at: step.started_at.as_ref(),
            ended_at: step.ended_at.as_ref(),
            duration_ms: step.duration_ms,
            recorded_at: step.recorded_at.as_ref(),
            metadata: MetadataText::Map(&step.metadata),
        }
    }
}

impl RawSteps {
    /// No steps.
    pub fn new() -> Self {
        Self::default()
    }

    /// No steps, with room for `text_bytes` of text and `steps` steps.
    pub fn with_capacity(text_bytes: usize, steps: usize) -> Self {
        Self {
            text: String::with_capacity(text_bytes),
            steps: Vec::with_capacity(steps),
        }
    }

    /// How many steps there are.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// True when there are no steps.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Bytes of text held (strings and payloads of every step).
    pub fn text_bytes(&self) -> usize {
        self.text.len()
    }

    /// Add a step, serializing its payloads to compact JSON the way the stores write a `Value`.
    pub fn push_step(&mut self, step: &ObservedStep) {
        let inputs = self.push_value(&step.inputs);
        let outputs = step.outputs.as_ref().map(|v| self.push_value(v));
        self.push_with_payloads(step, inputs, outputs);
    }

    /// Add a received step, redacted by `redaction` (which has already redacted
    /// `received.step`). A payload held as text that redaction cannot change and that has a
    /// compact form goes in as that form, with no `Value` built; any other is read into a value
    /// ([`payload_from_text`]), redacted and serialized. Either way the stored text is the same.
    pub(crate) fn push_received(
        &mut self,
        received: &ReceivedStep,
        redaction: &RedactionPolicy,
        scratch: &mut Scratch,
    ) {
        let step = &received.step;
        let inputs = match &received.inputs_text {
            Some(text) => self.push_payload_text(text, redaction, scratch),
            None => self.push_value(&step.inputs),
        };
        let outputs = match &received.outputs_text {
            Some(text) => Some(self.push_payload_text(text, redaction, scratch)),
            None => step.outputs.as_ref().map(|v| self.push_value(v)),
        };
        self.push_with_payloads(step, inputs, outputs);
    }

    fn push_payload_text(
        &mut self,
        text: &str,
        redaction: &RedactionPolicy,
        scratch: &mut Scratch,
    ) -> Span {
        if !redaction.may_change_json_text(text) {
            let start = self.text.len();
            if write_compact(text, &mut self.text, scratch) {
                return self.span_from(start);
            }
        }
        let mut value = payload_from_text(text.to_owned());
        redaction.redact_value(&mut value);
        self.push_value(&value)
    }

    /// Add `step` with payloads already in the buffer.
    fn push_with_payloads(&mut self, step: &ObservedStep, inputs: Span, outputs: Option<Span>) {
        let trace_id = self.push_str(&step.trace_id);
        let call_id = step.call_id.as_deref().map(|s| self.push_str(s));
        let tool_name = self.push_str(&step.tool_name);
        let error_type = step.error_type.as_deref().map(|s| self.push_str(s));
        let error_message = step.error_message.as_deref().map(|s| self.push_str(s));
        let metadata = (!step.metadata.is_empty()).then(|| self.push_metadata(&step.metadata));
        self.steps.push(RawStep {
            trace_id,
            step_index: step.step_index,
            call_id,
            tool_name,
            inputs,
            outputs,
            error_type,
            error_message,
            started_at: step.started_at,
            ended_at: step.ended_at,
            duration_ms: step.duration_ms,
            recorded_at: step.recorded_at,
            metadata,
        });
    }

    /// The steps as the data model holds them (payload text parsed back into `Value`s).
    pub fn to_steps(&self) -> Result<Vec<ObservedStep>> {
        (0..self.steps.len())
            .map(|i| {
                let view = self.view(i);
                let parse = |text: &str, what: &str| {
                    serde_json::from_str::<Value>(text).map_err(|e| RecorderError::InvalidStep {
                        trace_id: view.trace_id.to_owned(),
                        step_index: view.step_index,
                        message: format!("{what} is not valid JSON: {e}"),
                    })
                };
                let json = |value: JsonText<'_>, what: &str| match value {
                    JsonText::Value(v) => Ok(v.clone()),
                    JsonText::Text(t) => parse(t, what),
                };
                let metadata: Metadata = match view.metadata {
                    MetadataText::Map(map) => map.clone(),
                    MetadataText::Text(text) => match parse(text, "metadata")? {
                        Value::Object(map) => map,
                        _ => Map::new(),
                    },
                };
                Ok(ObservedStep {
                    trace_id: view.trace_id.to_owned(),
                    step_index: view.step_index,
                    call_id: view.call_id.map(str::to_owned),
                    tool_name: view.tool_name.to_owned(),
                    inputs: json(view.inputs, "inputs")?,
                    outputs: view.outputs.map(|o| json(o, "outputs")).transpose()?,
                    error_type: view.error_type.map(str::to_owned),
                    error_message: view.error_message.map(str::to_owned),
                    started_at: view.started_at.copied(),
                    ended_at: view.ended_at.copied(),
                    duration_ms: view.duration_ms,
                    recorded_at: view.recorded_at.copied(),
                    metadata,
                })
            })
            .collect()
    }

    /// Step `i` as the stores write it.
    pub(crate) fn view(&self, i: usize) -> StepView<'_> {
        let step = &self.steps[i];
        StepView {
            trace_id: self.get(step.trace_id),
            step_index: step.step_index,
            call_id: step.call_id.map(|s| self.get(s)),
            tool_name: self.get(step.tool_name),
            inputs: JsonText::Text(self.get(step.inputs)),
            outputs: step.outputs.map(|s| JsonText::Text(self.get(s))),
            error_type: step.error_type.map(|s| self.get(s)),
            error_message: step.error_message.map(|s| self.get(s)),
            started_at: step.started_at.as_ref(),
            ended_at: step.ended_at.as_ref(),
            duration_ms: step.duration_ms,
            recorded_at: step.recorded_at.as_ref(),
            metadata: match step.metadata {
                Some(span) => MetadataText::Text(self.get(span)),
                None => MetadataText::Text("{}"),
            },
        }
    }

    /// Every step as the stores write it.
    pub(crate) fn views(&self) -> Vec<StepView<'_>> {
        (0..self.steps.len()).map(|i| self.view(i)).collect()
    }

    fn get(&self, span: Span) -> &str {
        self.text.get(span.start..span.end).unwrap_or_default()
    }

    /// The buffer, to append text to; pair with [`RawSteps::span_from`].
    pub(crate) fn text_mut(&mut self) -> &mut String {
        &mut self.text
    }

    /// The text appended since the buffer was `start` bytes long.
    pub(crate) fn span_from(&self, start: usize) -> Span {
        Span {
            start,
            end: self.text.len(),
        }
    }

    /// Append `s` to the buffer.
    pub(crate) fn push_str(&mut self, s: &str) -> Span {
        let start = self.text.len();
        self.text.push_str(s);
        self.span_from(start)
    }

    fn push_value(&mut self, value: &Value) -> Span {
        let start = self.text.len();
        // `Display` of a `Value` is `serde_json::to_string`, the stores' form; writing to a
        // `String` cannot fail.
        let _ = std::fmt::Write::write_fmt(&mut self.text, format_args!("{value}"));
        self.span_from(start)
    }

    fn push_metadata(&mut self, metadata: &Map<String, Value>) -> Span {
        let start = self.text.len();
        match serde_json::to_string(metadata) {
            Ok(text) => self.text.push_str(&text),
            Err(_) => self.text.push_str("{}"),
        }
        self.span_from(start)
    }

    /// Move `other`'s steps to the end of these, in order.
    pub fn append(&mut self, other: RawSteps) {
        if self.steps.is_empty() {
            *self = other;
            return;
        }
        let offset = self.text.len();
        let moved = |span: Span| Span {
            start: span.start + offset,
            end: span.end + offset,
        };
        self.text.push_str(&other.text);
        self.steps
            .extend(other.steps.into_iter().map(|step| RawStep {
                trace_id: moved(step.trace_id),
                call_id: step.call_id.map(moved),
                tool_name: moved(step.tool_name),
                inputs: moved(step.inputs),
                outputs: step.outputs.map(moved),
                error_type: step.error_type.map(moved),
                error_message: step.error_message.map(moved),
                metadata: step.metadata.map(moved),
                ..step
            }));
    }

    /// Keep only the steps `keep` accepts; returns how many were removed.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&StepView<'_>) -> bool) -> usize {
        let kept: Vec<bool> = (0..self.steps.len()).map(|i| keep(&self.view(i))).collect();
        let removed = kept.iter().filter(|k| !**k).count();
        if removed == 0 {
            return 0;
        }
        let mut out = RawSteps::with_capacity(self.text.len(), self.steps.len() - removed);
        for (step, _) in self.steps.iter().zip(&kept).filter(|(_, k)| **k) {
            let mut copy = |span: Span| out.push_str(self.get(span));
            let copied = RawStep {
                trace_id: copy(step.trace_id),
                call_id: step.call_id.map(&mut copy),
                tool_name: copy(step.tool_name),
                inputs: copy(step.inputs),
                outputs: step.outputs.map(&mut copy),
                error_type: step.error_type.map(&mut copy),
                error_message: step.error_message.map(&mut copy),
                metadata: step.metadata.map(&mut copy),
                ..*step
            };
            out.steps.push(copied);
        }
        *self = out;
        removed
    }

    /// Set every step's `recorded_at`.
    pub fn set_recorded_at(&mut self, at: Timestamp) {
        for step in &mut self.steps {
            step.recorded_at = Some(at);
        }
    }

    /// Add a step whose text is already in the buffer.
    pub(crate) fn push_raw(&mut self, step: RawStep) {
        self.steps.push(step);
    }

    /// How far the buffer and the step list go, to roll back to with [`RawSteps::truncate`].
    pub(crate) fn mark(&self) -> (usize, usize) {
        (self.text.len(), self.steps.len())
    }

    /// Drop everything added since `mark`.
    pub(crate) fn truncate(&mut self, mark: (usize, usize)) {
        self.text.truncate(mark.0);
        self.steps.truncate(mark.1);
    }

    /// The steps added since `first`, to fill in their trace id and index.
    pub(crate) fn steps_from_mut(&mut self, first: usize) -> &mut [RawStep] {
        let first = first.min(self.steps.len());
        &mut self.steps[first..]
    }
}

impl From<&[ObservedStep]> for RawSteps {
    fn from(steps: &[ObservedStep]) -> Self {
        let mut raw = RawSteps::new();
        for step in steps {
            raw.push_step(step);
        }
        raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn steps_round_trip_through_text() {
        let mut step = ObservedStep::new("t", 3, "calc", json!({"b": 1.50, "a": "\u{e9}\n"}));
        step.outputs = Some(json!([1, null]));
        step.error_message = Some("boom".into());
        step.metadata
            .insert("k".into(), serde_json::from_str("-0").unwrap());
        step.duration_ms = Some(2.5);
        let plain = ObservedStep::new("u", 0, "x", json!(null));
        let raw = RawSteps::from(&[step.clone(), plain.clone()][..]);
        assert_eq!(raw.len(), 2);
        let view = raw.view(0);
        assert!(matches!(
            view.inputs,
            JsonText::Text(r#"{"b":1.5,"a":"é\n"}"#)
        ));
        assert!(matches!(view.metadata, MetadataText::Text(r#"{"k":-0}"#)));
        assert!(matches!(raw.view(1).metadata, MetadataText::Text("{}")));
        assert!(view.is_error());
        assert_eq!(raw.to_steps().unwrap(), vec![step, plain]);
    }

    #[test]
    fn appended_and_retained_steps_keep_their_text() {
        let mut a = ObservedStep::new("a", 0, "x", json!({"n": 1}));
        a.call_id = Some("c0".into());
        let mut b = ObservedStep::new("b", 1, "y", json!({"n": [2, "two"]}));
        b.outputs = Some(json!({"ok": true}));
        b.error_type = Some("Timeout".into());
        b.metadata.insert("m".into(), json!("v"));
        let c = ObservedStep::new("c", 2, "z", json!("three"));
        let mut raw = RawSteps::new();
        raw.append(RawSteps::from(&[a.clone()][..]));
        raw.append(RawSteps::from(&[b.clone(), c.clone()][..]));
        assert_eq!(
            raw.to_steps().unwrap(),
            vec![a.clone(), b.clone(), c.clone()]
        );

        assert_eq!(raw.retain(|step| step.trace_id != "a"), 1);
        assert_eq!(raw.to_steps().unwrap(), vec![b.clone(), c.clone()]);
        assert_eq!(raw.retain(|_| true), 0);
        assert_eq!(raw.retain(|step| step.step_index != 2), 1);
        assert_eq!(raw.to_steps().unwrap(), vec![b.clone()]);
        // Only the kept steps' text is left.
        assert_eq!(raw.text_bytes(), RawSteps::from(&[b][..]).text_bytes());

        let at = chrono::Utc::now();
        raw.set_recorded_at(at);
        assert_eq!(raw.to_steps().unwrap()[0].recorded_at, Some(at));
    }

    #[test]
    fn received_text_payloads_store_what_their_values_would() {
        let policy = RedactionPolicy::default().with_max_string_bytes(Some(40));
        let texts = [
            r#"{"query": "shoes",  "limit": 5}"#,
            r#"{"b":1.50,"a":1E5,"n":-0,"e":"\u00e9\/"}"#,
            r#"{"api_key":"k-123","q":"x"}"#,
            r#"{"name":"Authorization","value":"Bearer abc"}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"text":"a string well past the forty bytes the policy keeps"}"#,
            "not json {",
            "\"quoted\"",
            "[1, [2, {}], null, true]",
            r#"{"log":"token ghp_abcdefghijklmnopqrstuvwxyz0123456789 used"}"#,
            r#"{"url":"https://ann:hunter2@example.com/x","h":"Bearer eyJhbGciOiJIUzI1NiJ9.e30.x"}"#,
        ];
        let mut scratch = Scratch::default();
        for text in texts {
            let mut raw = RawSteps::new();
            let received = ReceivedStep {
                step: ObservedStep::new("t", 0, "x", Value::Null),
                inputs_text: Some(text.to_owned()),
                outputs_text: Some(text.to_owned()),
            };
            raw.push_received(&received, &policy, &mut scratch);
            let mut value = payload_from_text(text.to_owned());
            policy.redact_value(&mut value);
            let expected = value.to_string();
            assert!(
                matches!(raw.view(0).inputs, JsonText::Text(t) if t == expected),
                "{text}: {:?} against {expected}",
                raw.view(0).inputs
            );
            assert!(matches!(raw.view(0).outputs, Some(JsonText::Text(t)) if t == expected));
            for secret in [
                "k-123",
                "Bearer abc",
                "ghp_abc",
                "hunter2",
                "eyJhbGciOiJIUzI1NiJ9",
            ] {
                assert!(!raw.text.contains(secret), "{secret} kept from {text}");
            }
        }
    }

    #[test]
    fn truncate_drops_what_came_after_the_mark() {
        let a = ObservedStep::new("a", 0, "x", json!({"n": 1}));
        let b = ObservedStep::new("b", 1, "y", json!({"n": 2}));
        let mut raw = RawSteps::from(&[a.clone()][..]);
        let mark = raw.mark();
        raw.push_step(&b);
        assert_eq!(raw.len(), 2);
        raw.truncate(mark);
        assert_eq!(raw.to_steps().unwrap(), vec![a.clone()]);
        raw.push_step(&b);
        assert_eq!(raw.to_steps().unwrap(), vec![a, b]);
    }
}
