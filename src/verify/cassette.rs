//! Recorded tools: a cassette built from observed steps answers each call whose input matches a
//! recording with what the tool answered then.
//!
//! Inputs match on their canonical form (key order does not matter; number text does), after
//! removing the volatile fields an [`IgnorePaths`] names. A call that matches nothing fails with
//! the JSON pointers in which it differs from the nearest recording of that tool, so a wrong
//! binding shows where it went wrong.
//!
//! Outputs are served *normalized*, as mined flows expect them: a string holding a JSON object
//! or array is parsed, and anything that is not an object is wrapped as `{"result": value}`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chainweaver_analyzer::infer::normalize_output;
use chainweaver_recorder::model::{ObservedStep, TraceWithSteps};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::flow::mapping::pointer_tokens;
use crate::replay::{StepDiff, diff_values};
use crate::tool::{JsonObject, Tool, ToolFailure, ToolRegistry, any_object_schema, canonical_json};

/// The largest JSON text a recorded string output may be for it to be parsed as JSON.
const MAX_PARSED_OUTPUT: usize = 8 << 20;
/// The nearest-recording search looks at most at this many recordings of a tool.
const MAX_NEAREST_SCAN: usize = 5_000;

/// Volatile input fields left out when matching (timestamps, request ids).
///
/// A path is a JSON pointer (`/request_id`), optionally scoped to one tool
/// (`search:/options/nonce`); a `*` segment matches every key or index (`/items/*/ts`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IgnorePaths {
    /// `(tool or None for every tool, pointer segments)`.
    paths: Vec<(Option<String>, Vec<String>)>,
}

impl IgnorePaths {
    /// Parse `[TOOL:]POINTER` specs.
    pub fn parse<S: AsRef<str>>(specs: &[S]) -> Result<Self> {
        let mut paths = Vec::new();
        for spec in specs {
            let spec = spec.as_ref();
            let (tool, pointer) = match spec.find(":/") {
                Some(at) => (Some(spec[..at].to_string()), &spec[at + 1..]),
                None => (None, spec),
            };
            let segments = match pointer_tokens(pointer) {
                Ok(segments) if !pointer.is_empty() => segments,
                Ok(_) => {
                    return Err(Error::Verify {
                        candidate: String::new(),
                        message: format!(
                            "ignore path `{spec}` is not a JSON pointer (write `/field` or `tool:/field`)"
                        ),
                    });
                }
                Err(reason) => {
                    return Err(Error::Verify {
                        candidate: String::new(),
                        message: format!("ignore path `{spec}`: {reason}"),
                    });
                }
            };
            paths.push((tool, segments));
        }
        Ok(Self { paths })
    }

    /// True when nothing is ignored.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    fn for_tool<'a>(&'a self, tool: &'a str) -> impl Iterator<Item = &'a [String]> + 'a {
        self.paths
            .iter()
            .filter(move |(t, _)| t.as_deref().is_none_or(|t| t == tool))
            .map(|(_, segments)| segments.as_slice())
    }

    /// `value` without the ignored fields of `tool` (a copy only when something is ignored).
    pub fn strip(&self, tool: &str, value: &Value) -> Value {
        let mut copy = value.clone();
        for segments in self.for_tool(tool) {
            remove_path(&mut copy, segments);
        }
        copy
    }

    /// True when the pointer (into a tool's input or output) is ignored for `tool`.
    pub fn ignores(&self, tool: &str, pointer: &str) -> bool {
        if pointer.is_empty() {
            return false;
        }
        let Ok(tokens) = pointer_tokens(pointer) else {
            return false;
        };
        self.for_tool(tool).any(|segments| {
            segments.len() <= tokens.len()
                && segments
                    .iter()
                    .zip(&tokens)
                    .all(|(pattern, token)| pattern == "*" || pattern == token)
        })
    }
}

fn remove_path(value: &mut Value, segments: &[String]) {
    let Some((first, rest)) = segments.split_first() else {
        return;
    };
    match value {
        Value::Object(map) => {
            if first == "*" {
                if rest.is_empty() {
                    map.clear();
                } else {
                    for item in map.values_mut() {
                        remove_path(item, rest);
                    }
                }
            } else if rest.is_empty() {
                map.shift_remove(first.as_str());
            } else if let Some(item) = map.get_mut(first.as_str()) {
                remove_path(item, rest);
            }
        }
        Value::Array(items) => {
            if first == "*" {
                for item in items.iter_mut() {
                    if rest.is_empty() {
                        *item = Value::Null;
                    } else {
                        remove_path(item, rest);
                    }
                }
            } else if let Ok(index) = first.parse::<usize>()
                && let Some(item) = items.get_mut(index)
            {
                if rest.is_empty() {
                    *item = Value::Null;
                } else {
                    remove_path(item, rest);
                }
            }
        }
        _ => {}
    }
}

/// A step's output as mined flows see it: JSON text parsed, a non-object wrapped in `result`.
pub fn normalized_output(output: &Value) -> JsonObject {
    match normalize_output(output, MAX_PARSED_OUTPUT) {
        Value::Object(map) => map,
        other => {
            let mut map = Map::new();
            map.insert("result".into(), other);
            map
        }
    }
}

/// What a recorded call answered.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordedOutcome {
    /// The normalized output.
    Output(JsonObject),
    /// The recorded failure: its error type and message.
    Failure { kind: String, message: String },
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    pub trace_id: String,
    pub step_index: u32,
    /// The input as the agent sent it.
    pub input: Value,
    pub outcome: RecordedOutcome,
}

impl Recording {
    fn of(step: &ObservedStep) -> Self {
        let outcome = if step.is_error() {
            RecordedOutcome::Failure {
                kind: step
                    .error_type
                    .clone()
                    .unwrap_or_else(|| "ToolError".into()),
                message: step.error_message.clone().unwrap_or_default(),
            }
        } else {
            RecordedOutcome::Output(normalized_output(
                step.outputs.as_ref().unwrap_or(&Value::Null),
            ))
        };
        Self {
            trace_id: step.trace_id.clone(),
            step_index: step.step_index,
            input: step.inputs.clone(),
            outcome,
        }
    }
}

#[derive(Debug, Default)]
struct ToolRecordings {
    recordings: Vec<Recording>,
    /// The input key of each recording (an index into `keys`).
    key_of: Vec<usize>,
    /// Canonical stripped input -> its key.
    by_input: HashMap<String, usize>,
    /// Per key, the recordings holding it, in recording order.
    keys: Vec<Vec<usize>>,
    /// Trace id -> the recordings of this tool in that trace (few), for the preferred match.
    by_trace: HashMap<String, Vec<usize>>,
}

/// A call no recording answers, and how it differs from the nearest recording of its tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Miss {
    pub tool: String,
    /// The nearest recording's `(trace id, step index)`, when the tool has recordings.
    pub nearest: Option<(String, u32)>,
    /// Pointers (into the input) where the call differs from the nearest recording.
    pub diffs: Vec<StepDiff>,
}

impl Miss {
    /// A one-paragraph explanation naming the differing pointers.
    pub fn message(&self) -> String {
        match &self.nearest {
            None => format!("no recording of tool `{}`", self.tool),
            Some((trace, step)) => {
                let shown: Vec<String> = self
                    .diffs
                    .iter()
                    .take(5)
                    .map(|d| {
                        format!(
                            "{}: recorded {}, called with {}",
                            if d.pointer.is_empty() {
                                "/"
                            } else {
                                &d.pointer
                            },
                            show(d.expected.as_ref()),
                            show(d.actual.as_ref())
                        )
                    })
                    .collect();
                format!(
                    "no recording of `{}` matches this input; nearest is trace {trace} step {step}, which differs at {}{}",
                    self.tool,
                    shown.join("; "),
                    if self.diffs.len() > 5 {
                        format!(" (and {} more)", self.diffs.len() - 5)
                    } else {
                        String::new()
                    }
                )
            }
        }
    }
}

fn show(value: Option<&Value>) -> String {
    match value {
        None => "nothing".into(),
        Some(value) => {
            let text = value.to_string();
            if text.len() > 80 {
                let mut end = 77;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                format!("{}...", &text[..end])
            } else {
                text
            }
        }
    }
}

/// Which recording a lookup prefers when several match: the occurrence being replayed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preference {
    pub trace_id: String,
    pub step_indices: Vec<u32>,
}

/// Recordings of every tool, matched by canonical input.
#[derive(Debug, Default)]
pub struct Cassette {
    tools: HashMap<String, ToolRecordings>,
    ignore: IgnorePaths,
}

impl Cassette {
    /// Build a cassette from every step of `traces`.
    pub fn from_traces<'a>(
        traces: impl IntoIterator<Item = &'a TraceWithSteps>,
        ignore: IgnorePaths,
    ) -> Self {
        let mut cassette = Cassette {
            tools: HashMap::new(),
            ignore,
        };
        for trace in traces {
            for step in &trace.steps {
                cassette.add(Recording::of(step), &step.tool_name);
            }
        }
        cassette
    }

    /// Add one recording of `tool`.
    pub fn add(&mut self, recording: Recording, tool: &str) {
        let key = self.key(tool, &recording.input);
        let entry = self.tools.entry(tool.to_string()).or_default();
        let index = entry.recordings.len();
        let next_key = entry.keys.len();
        let key_id = *entry.by_input.entry(key).or_insert(next_key);
        if key_id == next_key {
            entry.keys.push(Vec::new());
        }
        entry.keys[key_id].push(index);
        entry.key_of.push(key_id);
        entry
            .by_trace
            .entry(recording.trace_id.clone())
            .or_default()
            .push(index);
        entry.recordings.push(recording);
    }

    /// The matching key of an input: canonical JSON without the ignored fields.
    fn key(&self, tool: &str, input: &Value) -> String {
        if self.ignore.is_empty() {
            canonical_json(input)
        } else {
            canonical_json(&self.ignore.strip(tool, input))
        }
    }

    /// The ignore paths matching uses.
    pub fn ignore_paths(&self) -> &IgnorePaths {
        &self.ignore
    }

    /// Recordings of `tool`.
    pub fn recordings(&self, tool: &str) -> usize {
        self.tools.get(tool).map_or(0, |t| t.recordings.len())
    }

    /// The recording answering `tool(input)`: the preferred occurrence's own call when it
    /// matches, else one from the same trace, else the first recorded.
    pub fn lookup(
        &self,
        tool: &str,
        input: &Value,
        prefer: Option<&Preference>,
    ) -> std::result::Result<&Recording, Miss> {
        let Some(recorded) = self.tools.get(tool) else {
            return Err(Miss {
                tool: tool.to_string(),
                nearest: None,
                diffs: Vec::new(),
            });
        };
        let key = self.key(tool, input);
        let Some(&key_id) = recorded.by_input.get(&key) else {
            return Err(self.nearest(tool, recorded, input));
        };
        let preferred = prefer.and_then(|p| {
            let in_trace = recorded.by_trace.get(&p.trace_id)?;
            let same_key = || {
                in_trace
                    .iter()
                    .copied()
                    .filter(|&i| recorded.key_of[i] == key_id)
            };
            same_key()
                .find(|&i| p.step_indices.contains(&recorded.recordings[i].step_index))
                .or_else(|| same_key().next())
        });
        let chosen = preferred.unwrap_or(recorded.keys[key_id][0]);
        Ok(&recorded.recordings[chosen])
    }

    fn nearest(&self, tool: &str, recorded: &ToolRecordings, input: &Value) -> Miss {
        let stripped = self.ignore.strip(tool, input);
        let mut best: Option<(usize, Vec<StepDiff>)> = None;
        for (i, recording) in recorded
            .recordings
            .iter()
            .take(MAX_NEAREST_SCAN)
            .enumerate()
        {
            let mut diffs = Vec::new();
            let expected = self.ignore.strip(tool, &recording.input);
            diff_values(None, "", Some(&expected), Some(&stripped), &mut diffs);
            if best.as_ref().is_none_or(|(_, b)| diffs.len() < b.len()) {
                best = Some((i, diffs));
            }
        }
        match best {
            Some((i, diffs)) => Miss {
                tool: tool.to_string(),
                nearest: Some((
                    recorded.recordings[i].trace_id.clone(),
                    recorded.recordings[i].step_index,
                )),
                diffs,
            },
            None => Miss {
                tool: tool.to_string(),
                nearest: None,
                diffs: Vec::new(),
            },
        }
    }

    /// Tools answering from this cassette, one per name in `tools`; `prefer` names the
    /// occurrence being replayed (set it before each run). A tool without recordings is an
    /// error naming it.
    pub fn registry(
        self: &Arc<Self>,
        tools: &[String],
        prefer: &Arc<Mutex<Preference>>,
    ) -> Result<ToolRegistry> {
        let mut registry = ToolRegistry::new();
        for name in tools {
            if registry.get(name).is_some() {
                continue;
            }
            if self.recordings(name) == 0 {
                return Err(Error::Verify {
                    candidate: String::new(),
                    message: format!("tool `{name}` has no recordings to replay"),
                });
            }
            let cassette = Arc::clone(self);
            let prefer = Arc::clone(prefer);
            let tool_name = name.clone();
            let tool = Tool::sync(name.clone(), move |input: &JsonObject| {
                // Matching reads recorded inputs as JSON values; the executor keeps the original.
                let input = Value::Object(input.clone());
                let preference = prefer.lock().ok();
                match cassette.lookup(&tool_name, &input, preference.as_deref()) {
                    Ok(recording) => match &recording.outcome {
                        RecordedOutcome::Output(map) => Ok(Value::Object(map.clone())),
                        RecordedOutcome::Failure { kind, message } => {
                            Err(ToolFailure::of_kind(kind.clone(), message.clone()))
                        }
                    },
                    Err(miss) => Err(ToolFailure::of_kind("NoRecording", miss.message())),
                }
            })
            .description(format!("`{name}` answered from recorded calls"))
            .input_schema(any_object_schema())
            .output_schema(any_object_schema())
            .read_only(Some(true))
            .build()?;
            registry.register(tool);
        }
        Ok(registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn trace(id: &str, steps: Vec<(&str, Value, Result<Value, &str>)>) -> TraceWithSteps {
        TraceWithSteps {
            trace: chainweaver_recorder::model::ObservedTrace::new(id, "test"),
            steps: steps
                .into_iter()
                .enumerate()
                .map(|(i, (tool, input, output))| {
                    let mut step = ObservedStep::new(id, i as u32, tool, input);
                    match output {
                        Ok(value) => step.outputs = Some(value),
                        Err(message) => {
                            step.error_type = Some("ToolError".into());
                            step.error_message = Some(message.into());
                        }
                    }
                    step
                })
                .collect(),
        }
    }

    #[test]
    fn a_matching_call_gets_the_recorded_output_normalized() {
        let traces = vec![trace(
            "t1",
            vec![
                (
                    "find",
                    json!({"name": "Ann", "zip": "19122"}),
                    Ok(json!("u_1")),
                ),
                (
                    "get",
                    json!({"id": "u_1"}),
                    Ok(json!("{\"orders\": [1, 2]}")),
                ),
                ("boom", json!({}), Err("not found")),
            ],
        )];
        let cassette = Cassette::from_traces(&traces, IgnorePaths::default());
        // Key order does not matter.
        let hit = cassette
            .lookup("find", &json!({"zip": "19122", "name": "Ann"}), None)
            .unwrap();
        assert_eq!(
            hit.outcome,
            RecordedOutcome::Output(json!({"result": "u_1"}).as_object().cloned().unwrap())
        );
        let hit = cassette.lookup("get", &json!({"id": "u_1"}), None).unwrap();
        assert_eq!(
            hit.outcome,
            RecordedOutcome::Output(json!({"orders": [1, 2]}).as_object().cloned().unwrap())
        );
        let failed = cassette.lookup("boom", &json!({}), None).unwrap();
        assert!(
            matches!(&failed.outcome, RecordedOutcome::Failure { message, .. } if message == "not found")
        );
    }

    #[test]
    fn a_miss_names_the_differing_pointers_of_the_nearest_recording() {
        let traces = vec![trace(
            "t1",
            vec![
                (
                    "get",
                    json!({"id": "u_1", "opts": {"deep": true}}),
                    Ok(json!({})),
                ),
                (
                    "get",
                    json!({"id": "u_2", "opts": {"deep": false}}),
                    Ok(json!({})),
                ),
            ],
        )];
        let cassette = Cassette::from_traces(&traces, IgnorePaths::default());
        let miss = cassette
            .lookup("get", &json!({"id": "u_9", "opts": {"deep": true}}), None)
            .unwrap_err();
        assert_eq!(miss.nearest, Some(("t1".into(), 0)));
        assert_eq!(miss.diffs.len(), 1);
        assert_eq!(miss.diffs[0].pointer, "/id");
        let message = miss.message();
        assert!(
            message.contains("/id") && message.contains("u_9") && message.contains("\"u_1\""),
            "{message}"
        );
        let none = cassette.lookup("other", &json!({}), None).unwrap_err();
        assert_eq!(none.message(), "no recording of tool `other`");
    }

    #[test]
    fn ignored_paths_do_not_take_part_in_matching() {
        let traces = vec![trace(
            "t1",
            vec![(
                "search",
                json!({"q": "x", "request_id": "r-1", "items": [{"ts": 1, "v": 2}]}),
                Ok(json!({"hits": 3})),
            )],
        )];
        let strict = Cassette::from_traces(&traces, IgnorePaths::default());
        let call = json!({"q": "x", "request_id": "r-2", "items": [{"ts": 9, "v": 2}]});
        assert!(strict.lookup("search", &call, None).is_err());
        let ignore = IgnorePaths::parse(&["/request_id", "search:/items/*/ts"]).unwrap();
        let lenient = Cassette::from_traces(&traces, ignore.clone());
        assert!(lenient.lookup("search", &call, None).is_ok());
        // A tool-scoped path does not apply to other tools.
        assert!(ignore.ignores("search", "/items/0/ts"));
        assert!(!ignore.ignores("other", "/items/0/ts"));
        assert!(ignore.ignores("other", "/request_id"));
        assert!(IgnorePaths::parse(&["request_id"]).is_err());
        let bad_escape = IgnorePaths::parse(&["/a~2"]).unwrap_err().to_string();
        assert!(
            bad_escape.contains("must be followed by 0 or 1"),
            "{bad_escape}"
        );
    }

    #[test]
    fn the_preferred_occurrence_wins_among_equal_inputs() {
        let traces = vec![
            trace("t1", vec![("now", json!({}), Ok(json!({"t": 1})))]),
            trace("t2", vec![("now", json!({}), Ok(json!({"t": 2})))]),
        ];
        let cassette = Cassette::from_traces(&traces, IgnorePaths::default());
        let first = cassette.lookup("now", &json!({}), None).unwrap();
        assert_eq!(first.trace_id, "t1");
        let prefer = Preference {
            trace_id: "t2".into(),
            step_indices: vec![0],
        };
        let chosen = cassette.lookup("now", &json!({}), Some(&prefer)).unwrap();
        assert_eq!(chosen.trace_id, "t2");
    }

    #[test]
    fn cassette_tools_run_and_fail_with_the_miss_explained() {
        let traces = vec![trace(
            "t1",
            vec![("get", json!({"id": 1}), Ok(json!({"v": 1})))],
        )];
        let cassette = Arc::new(Cassette::from_traces(&traces, IgnorePaths::default()));
        let prefer = Arc::new(Mutex::new(Preference::default()));
        let tools = cassette.registry(&["get".into()], &prefer).unwrap();
        let tool = tools.get("get").unwrap();
        let out = tool
            .run(json!({"id": 1}).as_object().cloned().unwrap())
            .unwrap();
        assert_eq!(Value::Object(out), json!({"v": 1}));
        let err = tool
            .run(json!({"id": 2}).as_object().cloned().unwrap())
            .unwrap_err();
        assert!(err.to_string().contains("/id"), "{err}");
        assert!(cassette.registry(&["ghost".into()], &prefer).is_err());
    }
}
