//! Replay: run a recorded [`ExecutionResult`]'s flow again from its initial input and, in verify
//! mode, compare every step by JSON pointer.
//!
//! A replay matches only when it ran the same number of steps, the same tools in the same
//! order, with the same success, inputs and outputs, and the same overall success: a run that
//! stops early or calls different tools does not match.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use chainweaver_recorder::model::flow::FlowDefinition;

use crate::error::{Error, Result};
use crate::executor::{ExecutionResult, FlowExecutor, RunOptions, StepRecord};
use crate::flow::mapping::escape_token;
use crate::tool::JsonObject;

/// How a replay treats the new run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayMode {
    /// Run again and compare with the recording (alias `strict`).
    Verify,
    /// Run again without comparing (alias `skip_validation`).
    Execute,
}

impl ReplayMode {
    /// Parse `verify`, `execute`, or the aliases `strict` and `skip_validation`.
    pub fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().replace('-', "_").as_str() {
            "verify" | "strict" => Some(ReplayMode::Verify),
            "execute" | "skip_validation" => Some(ReplayMode::Execute),
            _ => None,
        }
    }
}

impl fmt::Display for ReplayMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReplayMode::Verify => "verify",
            ReplayMode::Execute => "execute",
        })
    }
}

/// One difference between the recording and the replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepDiff {
    /// Position in the execution log; `None` for a difference of the run as a whole.
    pub step: Option<usize>,
    /// JSON pointer into the step record (`/outputs/user/name`, `/tool_name`) or, for the run,
    /// into the result (`/success`, `/final_output/total`). Empty: the whole step.
    pub pointer: String,
    /// The recorded value (`None`: absent).
    pub expected: Option<Value>,
    /// The replayed value (`None`: absent).
    pub actual: Option<Value>,
}

/// What a replay found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayReport {
    pub mode: ReplayMode,
    /// The recording's trace id.
    pub recorded_trace_id: String,
    /// Both runs have the same number of steps.
    pub step_count_matches: bool,
    /// Both runs succeeded, or both failed.
    pub success_matches: bool,
    /// Verify: no difference at all. Execute: the replay succeeded.
    pub all_steps_match: bool,
    pub diffs: Vec<StepDiff>,
    pub replay: ExecutionResult,
}

/// Compare two values, appending a diff per differing leaf (by JSON pointer under `prefix`).
pub fn diff_values(
    step: Option<usize>,
    prefix: &str,
    expected: Option<&Value>,
    actual: Option<&Value>,
    out: &mut Vec<StepDiff>,
) {
    match (expected, actual) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => diff_objects(step, prefix, a, b, out),
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            for i in 0..a.len().max(b.len()) {
                diff_values(step, &format!("{prefix}/{i}"), a.get(i), b.get(i), out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(StepDiff {
            step,
            pointer: prefix.to_string(),
            expected: a.cloned(),
            actual: b.cloned(),
        }),
    }
}

/// [`diff_values`] for two objects, borrowed as they are (no `Value` wrapper to build).
pub fn diff_objects(
    step: Option<usize>,
    prefix: &str,
    expected: &JsonObject,
    actual: &JsonObject,
    out: &mut Vec<StepDiff>,
) {
    for (key, value) in expected {
        let pointer = format!("{prefix}/{}", escape_token(key));
        diff_values(step, &pointer, Some(value), actual.get(key), out);
    }
    for (key, value) in actual {
        if !expected.contains_key(key) {
            let pointer = format!("{prefix}/{}", escape_token(key));
            diff_values(step, &pointer, None, Some(value), out);
        }
    }
}

/// The fields of a step record a replay compares (timing and attempt counts excluded).
fn comparable(record: &StepRecord) -> Value {
    serde_json::json!({
        "step_index": record.step_index,
        "step_id": record.step_id,
        "tool_name": record.tool_name,
        "success": record.success,
        "inputs": record.inputs,
        "outputs": record.outputs,
        "error_type": record.error_type,
        "fallback_used": record.fallback_used,
        "fallback_tool_name": record.fallback_tool_name,
    })
}

/// Every difference between a recorded and a replayed run.
pub fn diff_results(recorded: &ExecutionResult, replayed: &ExecutionResult) -> Vec<StepDiff> {
    let mut diffs = Vec::new();
    if recorded.success != replayed.success {
        diffs.push(StepDiff {
            step: None,
            pointer: "/success".into(),
            expected: Some(Value::Bool(recorded.success)),
            actual: Some(Value::Bool(replayed.success)),
        });
    }
    let (a, b) = (&recorded.execution_log, &replayed.execution_log);
    if a.len() != b.len() {
        diffs.push(StepDiff {
            step: None,
            pointer: "/execution_log/length".into(),
            expected: Some(Value::from(a.len())),
            actual: Some(Value::from(b.len())),
        });
    }
    for i in 0..a.len().max(b.len()) {
        match (a.get(i), b.get(i)) {
            (Some(x), Some(y)) => diff_values(
                Some(i),
                "",
                Some(&comparable(x)),
                Some(&comparable(y)),
                &mut diffs,
            ),
            (x, y) => diffs.push(StepDiff {
                step: Some(i),
                pointer: String::new(),
                expected: x.map(comparable),
                actual: y.map(comparable),
            }),
        }
    }
    let to_value = |o: &Option<JsonObject>| o.clone().map(Value::Object);
    diff_values(
        None,
        "/final_output",
        to_value(&recorded.final_output).as_ref(),
        to_value(&replayed.final_output).as_ref(),
        &mut diffs,
    );
    diffs
}

impl FlowExecutor {
    /// Replay a recorded run of `flow` (blocking).
    pub fn replay_flow(
        &self,
        flow: &FlowDefinition,
        recorded: &ExecutionResult,
        mode: ReplayMode,
        options: &RunOptions,
    ) -> Result<ReplayReport> {
        self.block_on(self.replay_flow_async(flow, recorded, mode, options))?
    }

    /// Replay a recorded run of `flow`.
    pub async fn replay_flow_async(
        &self,
        flow: &FlowDefinition,
        recorded: &ExecutionResult,
        mode: ReplayMode,
        options: &RunOptions,
    ) -> Result<ReplayReport> {
        let fail = |message: String| Error::Replay {
            trace_id: recorded.trace_id.clone(),
            message,
        };
        if recorded.flow_name != flow.name() {
            return Err(fail(format!(
                "it recorded flow `{}`, not `{}`",
                recorded.flow_name,
                flow.name()
            )));
        }
        let input = recorded
            .initial_input
            .clone()
            .or_else(|| {
                recorded
                    .execution_log
                    .iter()
                    .find(|r| r.step_index == 0)
                    .map(|r| r.inputs.clone())
            })
            .ok_or_else(|| fail("the recording has no initial_input to start from".into()))?;
        let replay = self.execute_async(flow, input, options).await?;
        let success_matches = replay.success == recorded.success;
        let step_count_matches = replay.execution_log.len() == recorded.execution_log.len();
        let (diffs, all_steps_match) = match mode {
            ReplayMode::Verify => {
                let diffs = diff_results(recorded, &replay);
                let matches = diffs.is_empty() && success_matches && step_count_matches;
                (diffs, matches)
            }
            ReplayMode::Execute => (Vec::new(), replay.success),
        };
        Ok(ReplayReport {
            mode,
            recorded_trace_id: recorded.trace_id.clone(),
            step_count_matches,
            success_matches,
            all_steps_match,
            diffs,
            replay,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_differences_are_reported_by_pointer() {
        let mut diffs = Vec::new();
        diff_values(
            Some(2),
            "/outputs",
            Some(&json!({"user": {"name": "ann", "tags": ["a", "b"]}, "n": 1})),
            Some(&json!({"user": {"name": "bob", "tags": ["a"]}, "n": 1, "x/y": true})),
            &mut diffs,
        );
        let pointers: Vec<&str> = diffs.iter().map(|d| d.pointer.as_str()).collect();
        assert_eq!(
            pointers,
            vec![
                "/outputs/user/name",
                "/outputs/user/tags/1",
                "/outputs/x~1y"
            ]
        );
        assert_eq!(diffs[1].actual, None);
    }

    #[test]
    fn aliases_parse() {
        assert_eq!(ReplayMode::parse("strict"), Some(ReplayMode::Verify));
        assert_eq!(
            ReplayMode::parse("SKIP_VALIDATION"),
            Some(ReplayMode::Execute)
        );
        assert_eq!(ReplayMode::parse("nope"), None);
    }
}
