//! Replay: run a recorded [`ExecutionResult`]'s flow again from its initial input and, in verify
//! mode, compare every step by JSON pointer.
//!
//! A replay matches only when it ran the same number of steps, the same tools in the same
//! order, with the same success, inputs and outputs, and the same overall success: a run that
//! stops early or calls different tools does not match. A map step's iterations are compared
//! one by one, in element order, their element index (`iteration`) included.
//!
//! A [`SavedRun`] is what `chainweaver run --save` writes: the result together with the flow
//! definition that ran, so the file replays on its own, wherever the flow came from.

use std::fmt;

use serde::de::Error as _;
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use chainweaver_recorder::model::flow::FlowDefinition;

use crate::error::{Error, Result};
use crate::executor::{ExecutionResult, FlowExecutor, RunOptions, StepRecord};
use crate::flow::mapping::escape_token;
use crate::registry::FlowRegistry;
use crate::tool::JsonObject;

/// The key under which a [`SavedRun`] keeps its flow definition, beside the result's fields.
const SAVED_FLOW_KEY: &str = "flow";

/// A run saved for replay: the execution result and the flow definition that produced it.
///
/// As JSON it is the [`ExecutionResult`]'s own fields plus `flow`, so anything that reads an
/// execution result (the `execution-result` importer, scripts) reads a saved run too, and a bare
/// execution result (saved by older versions, or by other tools) reads as a saved run without
/// a flow.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedRun {
    pub result: ExecutionResult,
    /// The definition that ran; `None` when the file did not carry one.
    pub flow: Option<FlowDefinition>,
}

/// Where the flow a replay runs came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayFlowSource {
    /// The caller named it (a flow file).
    Given,
    /// The definition saved with the run.
    Saved,
    /// The registered flow of the recorded name and version.
    Registry,
}

impl fmt::Display for ReplayFlowSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReplayFlowSource::Given => "the given flow file",
            ReplayFlowSource::Saved => "saved with the run",
            ReplayFlowSource::Registry => "registered in the store",
        })
    }
}

impl SavedRun {
    /// A run and the flow that produced it.
    pub fn new(result: ExecutionResult, flow: FlowDefinition) -> Self {
        Self {
            result,
            flow: Some(flow),
        }
    }

    /// Read a saved run (or a bare execution result) from JSON text.
    pub fn from_json(text: &str) -> serde_json::Result<Self> {
        serde_json::from_str(text)
    }

    /// The flow to replay the run with: `given` when the caller named one, else the definition
    /// saved with the run, else the registered flow of the recorded name and version. The
    /// registry is opened only in that last case, so a self-contained file needs no store.
    pub fn flow_for_replay(
        &self,
        given: Option<FlowDefinition>,
        registry: impl FnOnce() -> Result<FlowRegistry>,
    ) -> Result<(FlowDefinition, ReplayFlowSource)> {
        if let Some(flow) = given {
            return Ok((flow, ReplayFlowSource::Given));
        }
        if let Some(flow) = &self.flow {
            return Ok((flow.clone(), ReplayFlowSource::Saved));
        }
        let name = &self.result.flow_name;
        let version = self.result.flow_version.as_deref();
        match registry()?.resolve(name, version) {
            Ok(registered) => Ok((registered.definition.clone(), ReplayFlowSource::Registry)),
            Err(Error::FlowNotFound { .. }) => Err(Error::Replay {
                trace_id: self.result.trace_id.clone(),
                message: format!(
                    "the result does not carry the flow it ran, and no flow `{name}`{} is \
                     registered",
                    version.map(|v| format!(" version {v}")).unwrap_or_default()
                ),
            }),
            Err(other) => Err(other),
        }
    }
}

impl Serialize for SavedRun {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        // Through a map rather than `#[serde(flatten)]`, which would buffer the result's numbers
        // and lose their exact spelling (the JSON keeps every number as written).
        let Value::Object(mut fields) =
            serde_json::to_value(&self.result).map_err(S::Error::custom)?
        else {
            return Err(S::Error::custom("an execution result is a JSON object"));
        };
        if let Some(flow) = &self.flow {
            let flow = serde_json::to_value(flow).map_err(S::Error::custom)?;
            fields.insert(SAVED_FLOW_KEY.into(), flow);
        }
        fields.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SavedRun {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let mut fields = serde_json::Map::deserialize(deserializer)?;
        let flow = fields
            .remove(SAVED_FLOW_KEY)
            .filter(|flow| !flow.is_null())
            .map(FlowDefinition::from_value)
            .transpose()
            .map_err(|err| D::Error::custom(format!("`{SAVED_FLOW_KEY}`: {err}")))?;
        let result = serde_json::from_value(Value::Object(fields)).map_err(D::Error::custom)?;
        Ok(Self { result, flow })
    }
}

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
        "iteration": record.iteration,
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

    /// A one-step run of flow `calc` 1.0.0, as `run --save` would have saved it without a flow.
    fn bare_result() -> ExecutionResult {
        serde_json::from_str(
            r#"{"flow_name": "calc", "flow_version": "1.0.0", "success": true,
                "final_output": {"a": 2, "sum": 5.50}, "execution_log": [],
                "trace_id": "calc-1", "started_at": "2025-01-01T00:00:00Z",
                "ended_at": "2025-01-01T00:00:01Z", "total_duration_ms": 1000.0,
                "initial_input": {"a": 2}}"#,
        )
        .unwrap()
    }

    fn calc_flow(version: &str) -> FlowDefinition {
        FlowDefinition::from_value(
            json!({"name": "calc", "version": version, "steps": [{"tool_name": "add"}]}),
        )
        .unwrap()
    }

    fn no_registry() -> Result<FlowRegistry> {
        panic!("the registry is opened only when the run carries no flow")
    }

    #[test]
    fn a_saved_run_is_the_result_plus_its_flow_and_round_trips() {
        let saved = SavedRun::new(bare_result(), calc_flow("1.0.0"));
        let text = serde_json::to_string(&saved).unwrap();
        assert!(
            text.contains(r#""sum":5.50"#),
            "numbers keep their text: {text}"
        );
        // Still an execution result to anything that reads one.
        let as_result: ExecutionResult = serde_json::from_str(&text).unwrap();
        assert_eq!(as_result, bare_result());
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["flow"]["name"], json!("calc"));
        assert_eq!(SavedRun::from_json(&text).unwrap(), saved);
    }

    #[test]
    fn a_bare_result_reads_as_a_saved_run_without_a_flow() {
        let text = serde_json::to_string(&bare_result()).unwrap();
        let saved = SavedRun::from_json(&text).unwrap();
        assert_eq!(saved.flow, None);
        assert_eq!(saved.result, bare_result());
        assert!(SavedRun::from_json(r#"{"flow_name": "calc"}"#).is_err());
    }

    #[test]
    fn the_replay_flow_is_the_given_one_then_the_saved_one_then_the_registered_one() {
        let saved = SavedRun::new(bare_result(), calc_flow("1.0.0"));
        let (flow, source) = saved
            .flow_for_replay(Some(calc_flow("2.0.0")), no_registry)
            .unwrap();
        assert_eq!((flow.version(), source), ("2.0.0", ReplayFlowSource::Given));
        let (flow, source) = saved.flow_for_replay(None, no_registry).unwrap();
        assert_eq!((flow.version(), source), ("1.0.0", ReplayFlowSource::Saved));

        let bare = SavedRun {
            result: bare_result(),
            flow: None,
        };
        let (flow, source) = bare
            .flow_for_replay(None, || {
                let mut registry = FlowRegistry::new();
                registry.register(calc_flow("1.0.0"), crate::registry::FlowStatus::Draft)?;
                Ok(registry)
            })
            .unwrap();
        assert_eq!(
            (flow.version(), source),
            ("1.0.0", ReplayFlowSource::Registry)
        );
    }

    #[test]
    fn a_flow_found_nowhere_is_named_in_the_error() {
        let bare = SavedRun {
            result: bare_result(),
            flow: None,
        };
        let err = bare
            .flow_for_replay(None, || Ok(FlowRegistry::new()))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "replay of trace calc-1: the result does not carry the flow it ran, and no flow \
             `calc` version 1.0.0 is registered"
        );
    }

    #[test]
    fn a_map_iteration_that_ran_for_another_element_differs() {
        let record = |iteration| StepRecord {
            iteration: Some(iteration),
            ..serde_json::from_value(json!({
                "step_index": 0, "tool_name": "get", "inputs": {"id": 1}, "outputs": {"v": 1},
                "error_type": null, "error_message": null, "success": true,
                "started_at": "2025-01-01T00:00:00Z", "ended_at": "2025-01-01T00:00:00Z",
                "duration_ms": 1.0, "fallback_used": false, "fallback_tool_name": null
            }))
            .unwrap()
        };
        let mut recorded = bare_result();
        recorded.execution_log = vec![record(0)];
        let mut replayed = recorded.clone();
        assert!(diff_results(&recorded, &replayed).is_empty());
        replayed.execution_log = vec![record(2)];
        let diffs = diff_results(&recorded, &replayed);
        assert_eq!(diffs.len(), 1, "{diffs:?}");
        assert_eq!(diffs[0].pointer, "/iteration");
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
