//! Steps as a receiver gets them: a payload that arrived as JSON text may stay that text until
//! it is stored, so a clean payload is never built into a `Value` and written back.

use serde_json::Value;

use crate::model::ObservedStep;

/// A step whose inputs or outputs may still be the text they arrived as.
///
/// Where a payload is held as text, the step's own field is empty in its place (`Null` inputs,
/// no outputs). [`ReceivedStep::into_step`] reads the text the way the recorder stores it:
/// JSON text becomes that JSON, other text a JSON string ([`payload_from_text`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedStep {
    pub step: ObservedStep,
    /// The inputs' text, when they arrived as text.
    pub inputs_text: Option<String>,
    /// The outputs' text, when they arrived as text.
    pub outputs_text: Option<String>,
}

impl From<ObservedStep> for ReceivedStep {
    fn from(step: ObservedStep) -> Self {
        Self {
            step,
            inputs_text: None,
            outputs_text: None,
        }
    }
}

impl ReceivedStep {
    /// The step with its payload text read into values.
    pub fn into_step(self) -> ObservedStep {
        let mut step = self.step;
        if let Some(text) = self.inputs_text {
            step.inputs = payload_from_text(text);
        }
        if let Some(text) = self.outputs_text {
            step.outputs = Some(payload_from_text(text));
        }
        step
    }
}

/// A payload that arrived as text: JSON text is that JSON (tracing conventions record arguments
/// and results JSON-encoded), anything else is kept as a string.
pub fn payload_from_text(text: String) -> Value {
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_payloads_are_read_as_json_or_kept_as_strings() {
        let received = ReceivedStep {
            step: ObservedStep::new("t", 0, "x", Value::Null),
            inputs_text: Some(r#"{"a": [1, "two"]}"#.into()),
            outputs_text: Some("not json {".into()),
        };
        let step = received.into_step();
        assert_eq!(step.inputs, json!({"a": [1, "two"]}));
        assert_eq!(step.outputs, Some(json!("not json {")));
        let plain = ReceivedStep::from(ObservedStep::new("t", 1, "y", json!(3)));
        assert_eq!(plain.into_step().inputs, json!(3));
    }
}
