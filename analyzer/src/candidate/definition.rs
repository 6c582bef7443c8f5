//! The flow definition a candidate proposes: its schemas, its metadata and its steps.

use std::collections::BTreeMap;

use chainweaver_recorder::model::candidate::{Evidence, Pattern, ToolSchema};
use chainweaver_recorder::model::flow::{DagFlow, DagFlowStep, Flow, FlowDefinition, FlowStep};
use serde_json::{Map, Value, json};

use super::flow_name;
use super::layout::Layout;
use super::profile::ToolProfiles;
use super::replay::Context;
use super::schema::{infer_object_schema, infer_schema};
use super::wiring::Builder;

/// The flow's input and output schemas.
pub(super) struct FlowSchemas {
    pub(super) input: Value,
    pub(super) output: Value,
}

/// The schemas: one input property per flow input (with its default; required when every
/// occurrence passed it and it has none), and the output as seen in the replay's final contexts.
pub(super) fn flow_schemas(
    builder: &Builder<'_, '_>,
    final_contexts: &[Context<'_>],
    max_enum: usize,
) -> FlowSchemas {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (name, input) in &builder.inputs {
        let observed: Vec<&Value> = input.values.iter().flatten().copied().collect();
        let mut schema = infer_schema(observed.iter().copied(), max_enum);
        if let (Some(default), Value::Object(map)) = (&input.default, &mut schema) {
            map.insert("default".into(), default.clone());
        }
        if input.default.is_none() && observed.len() == builder.views.len() {
            required.push(Value::String(name.clone()));
        }
        properties.insert(name.clone(), schema);
    }
    let input = json!({"type": "object", "properties": properties, "required": required});
    let output = infer_object_schema(final_contexts.iter().map(Context::entries), max_enum);
    FlowSchemas { input, output }
}

/// Each tool's schemas, as profiled.
pub(super) fn tool_schemas(
    tools: &[String],
    profiles: &ToolProfiles,
) -> BTreeMap<String, ToolSchema> {
    let mut tool_schemas = BTreeMap::new();
    for tool in tools {
        if !tool_schemas.contains_key(tool) {
            tool_schemas.insert(tool.clone(), profiles.schema(tool));
        }
    }
    tool_schemas
}

/// The candidate's id: the flow's name, marked `~gapped` when the pattern has gaps.
pub(super) fn candidate_id(pattern: &Pattern) -> String {
    let name = flow_name(&pattern.tools);
    if pattern.gapped {
        format!("{name}~gapped")
    } else {
        name
    }
}

/// The flow's metadata: the candidate it came from, how outputs are normalized, and what the
/// mappings cannot say (templates, steps given the whole context, string constants).
pub(super) fn flow_metadata(
    id: &str,
    step_ids: &[String],
    input_mappings: &[Map<String, Value>],
    templates: Vec<Value>,
    constants: Vec<Value>,
) -> Map<String, Value> {
    let mut metadata = Map::new();
    metadata.insert("mined_candidate".into(), Value::String(id.to_string()));
    metadata.insert(
        "output_normalization".into(),
        Value::String(
            "JSON text results are parsed; a result that is not an object is {\"result\": value}"
                .into(),
        ),
    );
    if !templates.is_empty() {
        metadata.insert("templates".into(), Value::Array(templates));
    }
    // An empty input_mapping hands a tool the whole context: flag the steps observed with no
    // arguments, which a mapping cannot express.
    let whole_context: Vec<Value> = (0..step_ids.len())
        .filter(|&s| input_mappings[s].is_empty())
        .map(|s| Value::String(step_ids[s].clone()))
        .collect();
    if !whole_context.is_empty() {
        metadata.insert(
            "steps_given_whole_context".into(),
            Value::Array(whole_context),
        );
    }
    if !constants.is_empty() {
        metadata.insert("string_constants".into(), Value::Array(constants));
    }
    metadata
}

/// The flow: linear when the layout says so, else a DAG whose steps name what they wait for.
pub(super) fn flow_definition(
    pattern: &Pattern,
    step_ids: &[String],
    evidence: &Evidence,
    layout: Layout,
    schemas: FlowSchemas,
    metadata: Map<String, Value>,
) -> FlowDefinition {
    let name = flow_name(&pattern.tools);
    let description = format!(
        "Mined: {} ({} occurrences in {} traces).",
        pattern.tools.join(" -> "),
        evidence.occurrences,
        evidence.support
    );
    let Layout {
        input_mappings,
        output_mappings,
        depends,
        linear,
    } = layout;
    let mapped = input_mappings.into_iter().zip(output_mappings);
    if linear {
        FlowDefinition::Linear(Flow {
            name,
            version: "1.0.0".into(),
            description,
            steps: pattern
                .tools
                .iter()
                .zip(mapped)
                .map(|(tool, (input_mapping, output_mapping))| {
                    let mut step = FlowStep::new(tool.clone(), input_mapping);
                    step.output_mapping = output_mapping;
                    step
                })
                .collect(),
            input_schema: Some(schemas.input),
            output_schema: Some(schemas.output),
            metadata,
        })
    } else {
        FlowDefinition::Dag(DagFlow {
            name,
            version: "1.0.0".into(),
            description,
            steps: mapped
                .enumerate()
                .map(|(s, (input_mapping, output_mapping))| {
                    let mut deps: Vec<usize> = depends[s].iter().copied().collect();
                    deps.sort_unstable();
                    DagFlowStep {
                        step_id: step_ids[s].clone(),
                        tool_name: pattern.tools[s].clone(),
                        depends_on: deps.iter().map(|&d| step_ids[d].clone()).collect(),
                        input_mapping,
                        output_mapping,
                        retry_policy: None,
                        on_error: Default::default(),
                        for_each: None,
                        input_templates: Default::default(),
                        output_key: None,
                    }
                })
                .collect(),
            input_schema: Some(schemas.input),
            output_schema: Some(schemas.output),
            metadata,
        })
    }
}
