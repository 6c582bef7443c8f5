//! Flow files (JSON and YAML), a uniform view over linear and DAG steps, and DAG levels.

pub mod chain;
pub mod compile;
pub mod mapping;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde_json::Value;

use chainweaver_recorder::model::flow::{DagFlowStep, FlowDefinition, FlowStep};

use crate::error::{Error, Result};

pub use compile::{CompileReport, Finding, Severity, compile_flow};

/// One step of either kind of flow, with its position, id and dependencies.
#[derive(Debug, Clone, PartialEq)]
pub struct StepView {
    /// Position in the flow's `steps` list.
    pub index: usize,
    /// The DAG step id, or `step_<index>` for a linear step.
    pub id: String,
    pub step: FlowStep,
    /// Ids of the steps this one waits for (linear: the previous step).
    pub depends_on: Vec<String>,
    /// True for a DAG step.
    pub is_dag: bool,
}

/// The steps of a flow as [`StepView`]s.
pub fn step_views(flow: &FlowDefinition) -> Vec<StepView> {
    match flow {
        FlowDefinition::Linear(flow) => flow
            .steps
            .iter()
            .enumerate()
            .map(|(index, step)| StepView {
                index,
                id: format!("step_{index}"),
                step: step.clone(),
                depends_on: if index == 0 {
                    Vec::new()
                } else {
                    vec![format!("step_{}", index - 1)]
                },
                is_dag: false,
            })
            .collect(),
        FlowDefinition::Dag(flow) => flow
            .steps
            .iter()
            .enumerate()
            .map(|(index, step)| dag_view(index, step))
            .collect(),
    }
}

fn dag_view(index: usize, step: &DagFlowStep) -> StepView {
    StepView {
        index,
        id: step.step_id.clone(),
        step: step.as_flow_step(),
        depends_on: step.depends_on.clone(),
        is_dag: true,
    }
}

/// The flow's declared input schema, if any.
pub fn flow_input_schema(flow: &FlowDefinition) -> Option<&Value> {
    match flow {
        FlowDefinition::Linear(flow) => flow.input_schema.as_ref(),
        FlowDefinition::Dag(flow) => flow.input_schema.as_ref(),
    }
}

/// The flow's description.
pub fn flow_description(flow: &FlowDefinition) -> &str {
    match flow {
        FlowDefinition::Linear(flow) => &flow.description,
        FlowDefinition::Dag(flow) => &flow.description,
    }
}

/// A DAG's structural problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GraphProblem {
    DuplicateStepId {
        index: usize,
        id: String,
    },
    UnknownDependency {
        index: usize,
        id: String,
        dependency: String,
    },
    /// The ids of the steps on (or stuck behind) a cycle.
    Cycle {
        ids: Vec<String>,
    },
}

/// Topological levels (step indexes, declaration order inside a level), or the problems that
/// prevent them. Linear flows give one step a level.
pub fn levels(views: &[StepView]) -> Result<Vec<Vec<usize>>, Vec<GraphProblem>> {
    let mut problems = Vec::new();
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    for view in views {
        if by_id.insert(&view.id, view.index).is_some() {
            problems.push(GraphProblem::DuplicateStepId {
                index: view.index,
                id: view.id.clone(),
            });
        }
    }
    let mut deps: Vec<Vec<usize>> = vec![Vec::new(); views.len()];
    for view in views {
        for dependency in &view.depends_on {
            match by_id.get(dependency.as_str()) {
                Some(&dep) => deps[view.index].push(dep),
                None => problems.push(GraphProblem::UnknownDependency {
                    index: view.index,
                    id: view.id.clone(),
                    dependency: dependency.clone(),
                }),
            }
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut level_of: Vec<Option<usize>> = vec![None; views.len()];
    let mut levels: Vec<Vec<usize>> = Vec::new();
    let mut placed = 0;
    while placed < views.len() {
        let ready: Vec<usize> = (0..views.len())
            .filter(|&i| {
                level_of[i].is_none()
                    && deps[i]
                        .iter()
                        .all(|&d| level_of[d].is_some_and(|l| l < levels.len()))
            })
            .collect();
        if ready.is_empty() {
            let ids = (0..views.len())
                .filter(|&i| level_of[i].is_none())
                .map(|i| views[i].id.clone())
                .collect();
            return Err(vec![GraphProblem::Cycle { ids }]);
        }
        for &i in &ready {
            level_of[i] = Some(levels.len());
        }
        placed += ready.len();
        levels.push(ready);
    }
    Ok(levels)
}

/// For each step, the indexes of its transitive `depends_on` ancestors (requires no cycle).
pub fn ancestors(views: &[StepView]) -> Vec<Vec<usize>> {
    let by_id: HashMap<&str, usize> = views.iter().map(|v| (v.id.as_str(), v.index)).collect();
    let mut result = Vec::with_capacity(views.len());
    for view in views {
        let mut seen = vec![false; views.len()];
        let mut stack: Vec<usize> = view
            .depends_on
            .iter()
            .filter_map(|d| by_id.get(d.as_str()).copied())
            .collect();
        while let Some(i) = stack.pop() {
            if i == view.index || seen[i] {
                continue;
            }
            seen[i] = true;
            stack.extend(
                views[i]
                    .depends_on
                    .iter()
                    .filter_map(|d| by_id.get(d.as_str()).copied()),
            );
        }
        result.push((0..views.len()).filter(|&i| seen[i]).collect());
    }
    result
}

const FLOW_KEYS: &[&str] = &[
    "name",
    "version",
    "description",
    "steps",
    "input_schema",
    "output_schema",
    "metadata",
];
const STEP_KEYS: &[&str] = &[
    "tool_name",
    "input_mapping",
    "output_mapping",
    "input_templates",
    "output_key",
    "retry_policy",
    "on_error",
    "for_each",
];
const DAG_STEP_KEYS: &[&str] = &["step_id", "depends_on"];

/// Read a flow file: `.json`, `.yaml` / `.yml` (anything else is tried as JSON, then YAML). A
/// file holding a chain tool (`chain_config`) is imported as a flow.
pub fn load_flow_file(path: &Path) -> Result<FlowDefinition> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let value = match extension.as_str() {
        "yaml" | "yml" => parse_yaml(&text, path)?,
        "json" => parse_json(&text, path)?,
        _ => parse_json(&text, path).or_else(|_| parse_yaml(&text, path))?,
    };
    flow_from_value(value, path)
}

fn parse_json(text: &str, path: &Path) -> Result<Value> {
    serde_json::from_str(text).map_err(|err| Error::FlowFile {
        path: path.to_path_buf(),
        line: Some(err.line()),
        message: format!("not valid JSON: {err}"),
    })
}

fn parse_yaml(text: &str, path: &Path) -> Result<Value> {
    serde_yaml_ng::from_str(text).map_err(|err| Error::FlowFile {
        path: path.to_path_buf(),
        line: err.location().map(|l| l.line()),
        message: format!("not valid YAML: {err}"),
    })
}

/// Check a parsed flow document and read it, naming the step and field of any problem.
pub fn flow_from_value(value: Value, path: &Path) -> Result<FlowDefinition> {
    let fail = |message: String| Error::FlowFile {
        path: path.to_path_buf(),
        line: None,
        message,
    };
    let Value::Object(document) = &value else {
        return Err(fail("a flow file holds one JSON/YAML object".into()));
    };
    if document.contains_key("chain_config") {
        return chain::ChainTool::from_value(value.clone())
            .map(|chain| FlowDefinition::Linear(chain.to_flow()))
            .map_err(|message| fail(format!("chain tool: {message}")));
    }
    for key in document.keys() {
        if !FLOW_KEYS.contains(&key.as_str()) {
            return Err(fail(format!("unknown field `{key}` at the top level")));
        }
    }
    for required in ["name", "steps"] {
        if !document.contains_key(required) {
            return Err(fail(format!("missing field `{required}`")));
        }
    }
    let Some(steps) = document.get("steps").and_then(Value::as_array) else {
        return Err(fail("`steps` must be a list".into()));
    };
    let is_dag = steps
        .iter()
        .any(|s| s.get("step_id").is_some() || s.get("depends_on").is_some());
    for (index, step) in steps.iter().enumerate() {
        let Value::Object(fields) = step else {
            return Err(fail(format!("step {index}: must be an object")));
        };
        for key in fields.keys() {
            let known = STEP_KEYS.contains(&key.as_str())
                || (is_dag && DAG_STEP_KEYS.contains(&key.as_str()));
            if !known {
                return Err(fail(format!("step {index}: unknown field `{key}`")));
            }
        }
        let checked = if is_dag {
            serde_json::from_value::<DagFlowStep>(step.clone()).map(|_| ())
        } else {
            serde_json::from_value::<FlowStep>(step.clone()).map(|_| ())
        };
        if let Err(err) = checked {
            let tool = fields
                .get("tool_name")
                .and_then(Value::as_str)
                .map(|t| format!(" (`{t}`)"))
                .unwrap_or_default();
            return Err(fail(format!("step {index}{tool}: {err}")));
        }
    }
    FlowDefinition::from_value(value).map_err(|err| fail(err.to_string()))
}

/// Parse a version like `1.2.10` into comparable parts (numbers compare as numbers).
pub fn version_key(version: &str) -> Vec<(u64, String)> {
    version
        .split(['.', '-', '+'])
        .map(|part| match part.parse::<u64>() {
            Ok(n) => (n, String::new()),
            Err(_) => (u64::MAX, part.to_string()),
        })
        .collect()
}

/// Steps grouped by the tool they call (used for summaries).
pub fn tools_used(flow: &FlowDefinition) -> BTreeMap<String, usize> {
    let mut tools = BTreeMap::new();
    for view in step_views(flow) {
        *tools.entry(view.step.tool_name.clone()).or_insert(0) += 1;
        if let chainweaver_recorder::model::flow::OnError::Fallback(fallback) = &view.step.on_error
        {
            tools.entry(fallback.clone()).or_insert(0);
        }
    }
    tools
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dag(steps: Value) -> Vec<StepView> {
        let flow = FlowDefinition::from_value(json!({"name": "d", "steps": steps})).unwrap();
        step_views(&flow)
    }

    #[test]
    fn levels_group_independent_steps_and_find_cycles() {
        let views = dag(json!([
            {"step_id": "a", "tool_name": "t"},
            {"step_id": "b", "tool_name": "t"},
            {"step_id": "m", "tool_name": "t", "depends_on": ["a", "b"]},
            {"step_id": "z", "tool_name": "t", "depends_on": ["m"]}
        ]));
        assert_eq!(levels(&views).unwrap(), vec![vec![0, 1], vec![2], vec![3]]);
        assert_eq!(ancestors(&views)[3], vec![0, 1, 2]);
        let views = dag(json!([
            {"step_id": "a", "tool_name": "t", "depends_on": ["b"]},
            {"step_id": "b", "tool_name": "t", "depends_on": ["a"]},
            {"step_id": "c", "tool_name": "t", "depends_on": ["nope"]}
        ]));
        assert!(
            matches!(&levels(&views).unwrap_err()[0], GraphProblem::UnknownDependency { dependency, .. } if dependency == "nope")
        );
    }

    #[test]
    fn bad_files_name_step_and_field() {
        let path = Path::new("f.json");
        let err = flow_from_value(
            json!({"name": "x", "steps": [{"tool_name": "a"}, {"tool_name": "b", "on_error": "explode"}]}),
            path,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("step 1 (`b`)") && err.to_string().contains("explode"),
            "{err}"
        );
        let err = flow_from_value(
            json!({"name": "x", "steps": [{"tool_name": "a", "input_mapings": {}}]}),
            path,
        )
        .unwrap_err();
        assert!(err.to_string().contains("input_mapings"), "{err}");
        assert_eq!(err.code(), "invalid_flow_file");
    }

    #[test]
    fn versions_compare_numerically() {
        assert!(version_key("1.10.0") > version_key("1.9.3"));
    }
}
