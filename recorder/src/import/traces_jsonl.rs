//! `chainweaver-traces`: ChainWeaver's own lossless export, one trace with its steps a line
//! (`{"trace": {...}, "steps": [...]}`), as `chainweaver traces export` and
//! `chainweaver datasets generate --jsonl` write it. Every field of the data model survives.
//!
//! A JSON Lines line is read straight into the model (no intermediate `Value` of the whole
//! record), which is most of the cost of a large import. Numbers outside payloads are read the
//! way `serde_json::from_value` reads them (Rust's own parse of the number text), so the result is
//! the same as the general path; anything the direct read does not accept (a duplicate key, a
//! wrong type, bad JSON) goes through the general path, which decides and words the reject.
//!
//! When the import hands over raw steps ([`super::import_path_raw`]), a line is first read with
//! its payloads (`inputs`, `outputs`, metadata) as borrowed text: the text is copied to the
//! batch in the compact form the stores write, with no `Value` built. A line this cannot take
//! exactly (see [`super::compact`]) goes the `Value` way above, so stored rows and rejects are
//! the same either way.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

use super::compact::{Scratch, write_compact};
use super::records::{Handler as RecordHandler, record_parsed_line};
use super::{Output, Position};
use crate::error::Result;
use crate::model::{Metadata, ObservedStep, ObservedTrace, Timestamp, TraceWithSteps};
use crate::store::{RawStep, RawSteps};

/// The `chainweaver-traces` handler.
#[derive(Default)]
pub(crate) struct Handler {
    scratch: Scratch,
}

impl RecordHandler for Handler {
    fn record(
        &mut self,
        out: &mut Output<'_>,
        _at: Position,
        value: Value,
    ) -> Result<Result<(), String>> {
        match serde_json::from_value::<TraceWithSteps>(value) {
            Ok(TraceWithSteps { trace, steps }) => emit(out, trace, steps),
            Err(err) => Ok(Err(format!("not a ChainWeaver trace record: {err}"))),
        }
    }

    fn record_line(
        &mut self,
        out: &mut Output<'_>,
        at: Position,
        text: &str,
    ) -> Result<Result<(), String>> {
        if let Some(done) = self.read_raw_line(out, text) {
            return done;
        }
        match read_line(text) {
            Some(TraceWithSteps { trace, steps }) => emit(out, trace, steps),
            None => record_parsed_line(self, out, at, text),
        }
    }
}

impl Handler {
    /// Takes a line as raw steps when the import hands those over and the line can be read
    /// exactly without `Value`s; `None` leaves it to the `Value` way (nothing staged).
    fn read_raw_line(
        &mut self,
        out: &mut Output<'_>,
        text: &str,
    ) -> Option<Result<Result<(), String>>> {
        let raw = out.raw_steps(text)?;
        let record: RawRecord<'_> = serde_json::from_str(text).ok()?;
        let mark = raw.mark();
        for step in &record.steps {
            if stage(raw, step, &mut self.scratch).is_none() {
                raw.truncate(mark);
                return None;
            }
        }
        if let Some((step, index)) = record
            .steps
            .iter()
            .zip(raw.steps_from_mut(mark.1).iter())
            .find(|(step, _)| step.trace_id.0 != record.trace.trace_id)
        {
            let message = format!(
                "step {} belongs to trace `{}`, not `{}`",
                index.step_index, step.trace_id.0, record.trace.trace_id
            );
            raw.truncate(mark);
            return Some(Ok(Err(message)));
        }
        Some(out.emit_raw(record.trace, mark.1).map(Ok))
    }
}

/// Adds one step of a raw record to `raw` (its trace id is filled in later, its index holds
/// the index the line gave); `None` when the `Value` way must read the line.
fn stage(raw: &mut RawSteps, step: &StepRaw<'_>, scratch: &mut Scratch) -> Option<()> {
    // The model's numbers are read as the `Value` way reads them (see `StepText::into_step`).
    let step_index = step.step_index.get().parse::<u32>().ok()?;
    let duration_ms = match step.duration_ms {
        None => None,
        Some(raw) => Some(raw.get().parse::<f64>().ok()?),
    };
    let mut compact = |raw: &mut RawSteps, json: &RawValue| {
        let start = raw.text_bytes();
        write_compact(json.get(), raw.text_mut(), scratch).then(|| raw.span_from(start))
    };
    let inputs = compact(raw, step.inputs)?;
    let outputs = match step.outputs {
        Some(json) => Some(compact(raw, json)?),
        None => None,
    };
    let metadata = match step.metadata {
        None => None,
        // Metadata must be an object, as the model's map is.
        Some(json) if !json.get().starts_with('{') => return None,
        Some(json) => {
            let start = raw.text_bytes();
            compact(raw, json)?;
            if raw.text_bytes() - start == 2 {
                // `{}`: stored as no metadata is.
                raw.text_mut().truncate(start);
                None
            } else {
                Some(raw.span_from(start))
            }
        }
    };
    let call_id = step.call_id.as_ref().map(|s| raw.push_str(&s.0));
    let tool_name = raw.push_str(&step.tool_name.0);
    let error_type = step.error_type.as_ref().map(|s| raw.push_str(&s.0));
    let error_message = step.error_message.as_ref().map(|s| raw.push_str(&s.0));
    raw.push_raw(RawStep {
        trace_id: Default::default(),
        step_index,
        call_id,
        tool_name,
        inputs,
        outputs,
        error_type,
        error_message,
        started_at: step.started_at,
        ended_at: step.ended_at,
        duration_ms,
        recorded_at: step.recorded_at,
        metadata,
    });
    Some(())
}

/// A record with its steps' payloads as text.
#[derive(Deserialize)]
struct RawRecord<'a> {
    trace: ObservedTrace,
    #[serde(borrow)]
    steps: Vec<StepRaw<'a>>,
}

/// [`ObservedStep`] with strings borrowed where they have no escapes and payloads as text.
#[derive(Deserialize)]
struct StepRaw<'a> {
    #[serde(borrow)]
    trace_id: Text<'a>,
    #[serde(borrow)]
    step_index: &'a RawValue,
    #[serde(default, borrow)]
    call_id: Option<Text<'a>>,
    #[serde(borrow)]
    tool_name: Text<'a>,
    #[serde(borrow)]
    inputs: &'a RawValue,
    #[serde(default, borrow)]
    outputs: Option<&'a RawValue>,
    #[serde(default, borrow)]
    error_type: Option<Text<'a>>,
    #[serde(default, borrow)]
    error_message: Option<Text<'a>>,
    #[serde(default)]
    started_at: Option<Timestamp>,
    #[serde(default)]
    ended_at: Option<Timestamp>,
    #[serde(default, borrow)]
    duration_ms: Option<&'a RawValue>,
    #[serde(default)]
    recorded_at: Option<Timestamp>,
    /// `Some` also for `null`, which the model refuses (unlike a missing field).
    #[serde(default, borrow, deserialize_with = "present")]
    metadata: Option<&'a RawValue>,
}

fn present<'de: 'a, 'a, D: Deserializer<'de>>(
    deserializer: D,
) -> std::result::Result<Option<&'a RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// A JSON string, borrowed from the line unless it had escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> std::result::Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> std::result::Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> std::result::Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s)))
            }
        }
        deserializer.deserialize_str(Visit)
    }
}

fn emit(
    out: &mut Output<'_>,
    trace: ObservedTrace,
    steps: Vec<ObservedStep>,
) -> Result<Result<(), String>> {
    if let Some(step) = steps.iter().find(|s| s.trace_id != trace.trace_id) {
        return Ok(Err(format!(
            "step {} belongs to trace `{}`, not `{}`",
            step.step_index, step.trace_id, trace.trace_id
        )));
    }
    out.emit(trace, steps)?;
    Ok(Ok(()))
}

/// A record as the direct read sees it.
#[derive(Deserialize)]
struct RecordText<'a> {
    trace: ObservedTrace,
    #[serde(borrow)]
    steps: Vec<StepText<'a>>,
}

/// [`ObservedStep`] with its two numbers kept as text, to be read like `from_value` reads them.
#[derive(Deserialize)]
struct StepText<'a> {
    trace_id: String,
    #[serde(borrow)]
    step_index: &'a RawValue,
    #[serde(default)]
    call_id: Option<String>,
    tool_name: String,
    inputs: Value,
    #[serde(default)]
    outputs: Option<Value>,
    #[serde(default)]
    error_type: Option<String>,
    #[serde(default)]
    error_message: Option<String>,
    #[serde(default)]
    started_at: Option<Timestamp>,
    #[serde(default)]
    ended_at: Option<Timestamp>,
    #[serde(default, borrow)]
    duration_ms: Option<&'a RawValue>,
    #[serde(default)]
    recorded_at: Option<Timestamp>,
    #[serde(default)]
    metadata: Metadata,
}

impl StepText<'_> {
    fn into_step(self) -> Option<ObservedStep> {
        // Text that Rust parses as a number is JSON number text (JSON has no `inf` or `nan`), and
        // `from_value` reads a number by parsing its text the same way.
        let step_index = self.step_index.get().parse::<u32>().ok()?;
        let duration_ms = match self.duration_ms {
            None => None,
            Some(raw) => Some(raw.get().parse::<f64>().ok()?),
        };
        Some(ObservedStep {
            trace_id: self.trace_id,
            step_index,
            call_id: self.call_id,
            tool_name: self.tool_name,
            inputs: self.inputs,
            outputs: self.outputs,
            error_type: self.error_type,
            error_message: self.error_message,
            started_at: self.started_at,
            ended_at: self.ended_at,
            duration_ms,
            recorded_at: self.recorded_at,
            metadata: self.metadata,
        })
    }
}

/// The record on one line, read directly; `None` when the general path must decide.
fn read_line(text: &str) -> Option<TraceWithSteps> {
    let record: RecordText<'_> = serde_json::from_str(text).ok()?;
    let steps = record
        .steps
        .into_iter()
        .map(StepText::into_step)
        .collect::<Option<Vec<_>>>()?;
    Some(TraceWithSteps {
        trace: record.trace,
        steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What the general path makes of a line: the record, or `None` when it would reject it.
    fn general(text: &str) -> Option<TraceWithSteps> {
        let value: Value = serde_json::from_str(text).ok()?;
        serde_json::from_value(value).ok()
    }

    const LINE: &str = r#"{"trace":{"trace_id":"t","source":"s","started_at":"2026-11-14T12:56:47Z","metadata":{"seed":1,"x":1.50}},"steps":[{"trace_id":"t","step_index":0,"call_id":"c","tool_name":"calc","inputs":{"b":1.0,"a":1e+5,"n":-1.250,"s":"\u00e9\n"},"outputs":{"value":782},"started_at":"2026-11-14T12:56:47Z","ended_at":"2026-11-14T12:56:47.365Z","duration_ms":365.0},{"trace_id":"t","step_index":1,"tool_name":"x","inputs":{},"outputs":null,"error_message":"boom","duration_ms":null,"metadata":{"k":[1,2]}}]}"#;

    #[test]
    fn direct_read_equals_the_general_path() {
        let direct = read_line(LINE).unwrap();
        assert_eq!(Some(&direct), general(LINE).as_ref());
        assert_eq!(
            serde_json::to_string(&direct.steps[0].inputs).unwrap(),
            r#"{"b":1.0,"a":1e+5,"n":-1.250,"s":"é\n"}"#
        );
        assert_eq!(direct.steps[0].duration_ms, Some(365.0));
        assert_eq!(direct.steps[1].outputs, None);
        assert_eq!(direct.steps[1].duration_ms, None);
    }

    /// The general path reads payloads through `from_value`, which rewrites the text of a few
    /// numbers (`-0` becomes `0`; a long decimal whose `Display` is exact becomes its shortest
    /// form). The direct read keeps every payload number as written, as the data model promises.
    #[test]
    fn payload_numbers_keep_their_text_where_the_general_path_lost_it() {
        let long = "0.000000000000000000000000000000000000000000000000000000000000000000000000000000000000000013016738788002335";
        let text = format!(
            r#"{{"trace":{{"trace_id":"t","source":"s"}},"steps":[{{"trace_id":"t","step_index":0,"tool_name":"x","inputs":{{"z":-0,"f":{long}}}}}]}}"#
        );
        let direct = read_line(&text).unwrap();
        assert_eq!(
            direct.steps[0].inputs.to_string(),
            format!(r#"{{"z":-0,"f":{long}}}"#)
        );
        let general = general(&text).unwrap();
        assert_eq!(general.steps[0].inputs["z"].to_string(), "0");
        assert_ne!(general.steps[0].inputs["f"].to_string(), long);
    }

    #[test]
    fn what_the_direct_read_refuses_is_left_to_the_general_path() {
        for text in [
            // A duplicate key: the general path keeps the last value.
            r#"{"trace":{"trace_id":"t","source":"s"},"steps":[],"steps":[]}"#,
            // Numbers that are not what the model holds.
            r#"{"trace":{"trace_id":"t","source":"s"},"steps":[{"trace_id":"t","step_index":1.0,"tool_name":"x","inputs":{}}]}"#,
            r#"{"trace":{"trace_id":"t","source":"s"},"steps":[{"trace_id":"t","step_index":-0,"tool_name":"x","inputs":{}}]}"#,
            r#"{"trace":{"trace_id":"t","source":"s"},"steps":[{"trace_id":"t","step_index":0,"tool_name":"x","inputs":{},"duration_ms":"5"}]}"#,
            r#"{"trace":{"trace_id":"t","source":"s"}"#,
        ] {
            assert_eq!(read_line(text), None, "{text}");
        }
        let duplicate = r#"{"trace":{"trace_id":"t","source":"s"},"steps":[],"steps":[]}"#;
        assert!(general(duplicate).is_some());
    }

    fn number_text() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<u32>().prop_map(|n| n.to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| f.to_string()),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| format!("{f:e}")),
            (0u32..1000, 0u32..1000, -30i32..30).prop_map(|(a, b, e)| format!("{a}.{b:03}0e{e}")),
            Just("1e400".to_owned()),
            Just("-0".to_owned()),
            Just("null".to_owned()),
            Just("\"7\"".to_owned()),
        ]
    }

    proptest! {
        /// Whatever numbers a record carries, the direct read either steps aside or reads the
        /// model's numbers exactly as the general path does and keeps payload numbers as parsing
        /// the payload alone gives them.
        #[test]
        fn direct_read_never_differs_from_the_general_path(
            index in number_text(),
            duration in number_text(),
        ) {
            let text = format!(
                r#"{{"trace":{{"trace_id":"t","source":"s"}},"steps":[{{"trace_id":"t","step_index":{index},"tool_name":"x","inputs":{{"n":{duration}}},"duration_ms":{duration}}}]}}"#
            );
            if let Some(direct) = read_line(&text) {
                let expected = general(&text);
                prop_assert!(expected.is_some(), "the general path rejects {}", text);
                let expected = expected.unwrap();
                let (got, want) = (&direct.steps[0], &expected.steps[0]);
                prop_assert_eq!(got.step_index, want.step_index);
                prop_assert_eq!(
                    got.duration_ms.map(f64::to_bits),
                    want.duration_ms.map(f64::to_bits)
                );
                // As parsing the payload on its own gives it (serde_json spells exponents `e+`).
                let payload: Value = serde_json::from_str(&format!(r#"{{"n":{duration}}}"#)).unwrap();
                prop_assert_eq!(got.inputs.to_string(), payload.to_string());
            }
        }
    }
}
