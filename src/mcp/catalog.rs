//! Which registered flows `serve` exposes, and how each looks as an MCP tool (plain JSON, the
//! wire shape of a `Tool`).
//!
//! Exposure by default: ACTIVE flows whose effective safety is read-only without approval. The
//! effective safety is the flow's own declaration (`metadata.safety`), else one derived from its
//! tools only when every tool declared whether it is read-only. `--flow NAME` names flows
//! explicitly (any lifecycle but retired, any safety); `--lifecycle`, `--allow-side-effects` and
//! `--owner` widen or narrow the default.

use serde_json::{Map, Value, json};

use chainweaver_recorder::model::flow::{
    FlowDefinition, FlowServing, FlowStatus, OnError, RegisteredFlow, SafetyContract, SideEffects,
};

use crate::flow::{flow_description, flow_input_schema, step_views};
use crate::tool::{ToolRegistry, any_object_schema};

/// The key under which a served tool's `_meta` carries ChainWeaver's facts about the flow.
pub const META_KEY: &str = "chainweaver";

/// What `serve` exposes.
#[derive(Debug, Clone, Default)]
pub struct Exposure {
    /// Flow names given explicitly: only these, whatever their lifecycle (retired excepted) or
    /// safety.
    pub flows: Vec<String>,
    /// Lifecycles exposed (default: ACTIVE only).
    pub lifecycles: Vec<FlowStatus>,
    /// Also expose flows that write, need approval, or whose safety is unknown.
    pub allow_side_effects: bool,
    /// Only flows with one of these owners (empty: any owner).
    pub owners: Vec<String>,
    /// Served tool names become `PREFIX__flow`.
    pub prefix: Option<String>,
}

/// A flow chosen for serving, with its MCP tool descriptor.
#[derive(Debug, Clone)]
pub struct ServedFlow {
    /// The MCP tool name.
    pub tool_name: String,
    pub flow: FlowDefinition,
    pub status: FlowStatus,
    pub serving: FlowServing,
    /// The `Tool` object `tools/list` returns.
    pub descriptor: Value,
    /// True when the flow is a chain tool (answers in the chain output shape).
    pub is_chain: bool,
    /// True when a step's tool (or fallback) is a blocking function, which must not run on
    /// the server's runtime threads.
    pub calls_blocking_tools: bool,
}

/// The safety a flow runs with: its declaration, else one derived when every tool declared
/// one, else unknown.
pub fn effective_safety(
    flow: &FlowDefinition,
    serving: &FlowServing,
    tools: &ToolRegistry,
) -> Option<SafetyContract> {
    if let Some(declared) = serving.safety {
        return Some(declared);
    }
    let mut side_effects = SideEffects::None;
    for view in step_views(flow) {
        let read_only = tools.get(&view.step.tool_name)?.read_only()?;
        let effect = if read_only {
            SideEffects::Read
        } else {
            SideEffects::Write
        };
        side_effects = side_effects.max(effect);
    }
    Some(SafetyContract {
        side_effects,
        requires_approval: false,
    })
}

/// The served name of a flow.
pub fn served_name(prefix: Option<&str>, flow: &str) -> String {
    match prefix {
        Some(prefix) if !prefix.is_empty() => format!("{prefix}__{flow}"),
        _ => flow.to_string(),
    }
}

/// The flows to serve (newest qualifying version of each name), and a warning for each
/// explicitly named flow that is missing or would not be exposed by default.
pub fn select(
    flows: &[RegisteredFlow],
    tools: &ToolRegistry,
    exposure: &Exposure,
) -> (Vec<ServedFlow>, Vec<String>) {
    let mut warnings = Vec::new();
    let lifecycles = if exposure.lifecycles.is_empty() {
        vec![FlowStatus::Active]
    } else {
        exposure.lifecycles.clone()
    };
    let mut chosen: Vec<ServedFlow> = Vec::new();
    for name in &exposure.flows {
        if !flows.iter().any(|f| f.definition.name() == name) {
            warnings.push(format!("flow `{name}` is not registered in the store"));
        }
    }
    for registered in flows {
        let name = registered.definition.name();
        let explicit = exposure.flows.iter().any(|n| n == name);
        if !exposure.flows.is_empty() && !explicit {
            continue;
        }
        if registered.status == FlowStatus::Retired {
            continue;
        }
        let serving =
            FlowServing::from_metadata(flow_metadata(&registered.definition)).unwrap_or_default();
        let safety = effective_safety(&registered.definition, &serving, tools);
        let safe = safety.is_some_and(|s| s.is_read_only());
        let lifecycle_ok = lifecycles.contains(&registered.status);
        let owner_ok = exposure.owners.is_empty()
            || serving
                .owner
                .as_ref()
                .is_some_and(|o| exposure.owners.contains(o));
        if explicit {
            if !lifecycle_ok {
                warnings.push(format!(
                    "flow `{name}` {} is {}, served because it was named",
                    registered.definition.version(),
                    registered.status
                ));
            }
            if !safe {
                warnings.push(format!(
                    "flow `{name}` {} {}, served because it was named",
                    registered.definition.version(),
                    match safety {
                        None => "has no known safety contract".to_string(),
                        Some(s) => format!("has side effects {:?}", s.side_effects),
                    }
                ));
            }
        } else if !lifecycle_ok || !owner_ok || !(safe || exposure.allow_side_effects) {
            continue;
        }
        let candidate = served_flow(registered, tools, exposure.prefix.as_deref());
        // Keep the newest version of each name (flows come sorted oldest first).
        chosen.retain(|c| c.tool_name != candidate.tool_name);
        chosen.push(candidate);
    }
    (chosen, warnings)
}

/// Whether a step of `flow` calls a blocking tool (its own or its fallback).
fn calls_blocking_tools(flow: &FlowDefinition, tools: &ToolRegistry) -> bool {
    let blocking = |name: &str| tools.get(name).is_some_and(|tool| !tool.is_async());
    step_views(flow).iter().any(|view| {
        blocking(&view.step.tool_name)
            || matches!(&view.step.on_error, OnError::Fallback(name) if blocking(name))
    })
}

/// A registered flow as a served tool, named `PREFIX__name` with a prefix.
pub fn served_flow(
    registered: &RegisteredFlow,
    tools: &ToolRegistry,
    prefix: Option<&str>,
) -> ServedFlow {
    let serving =
        FlowServing::from_metadata(flow_metadata(&registered.definition)).unwrap_or_default();
    let safety = effective_safety(&registered.definition, &serving, tools);
    let tool_name = served_name(prefix, registered.definition.name());
    ServedFlow {
        descriptor: descriptor(
            &tool_name,
            &registered.definition,
            registered.status,
            &serving,
            safety,
            tools,
        ),
        tool_name,
        flow: registered.definition.clone(),
        status: registered.status,
        is_chain: serving.chain_config.is_some(),
        calls_blocking_tools: calls_blocking_tools(&registered.definition, tools),
        serving,
    }
}

/// A flow's metadata map.
pub fn flow_metadata(flow: &FlowDefinition) -> &Map<String, Value> {
    match flow {
        FlowDefinition::Linear(flow) => &flow.metadata,
        FlowDefinition::Dag(flow) => &flow.metadata,
    }
}

/// The input schema a served flow advertises: the flow's, else its first step's tool's, else
/// any object.
pub fn input_schema(flow: &FlowDefinition, tools: &ToolRegistry) -> Value {
    if let Some(schema) = flow_input_schema(flow) {
        return schema.clone();
    }
    step_views(flow)
        .first()
        .and_then(|view| tools.get(&view.step.tool_name))
        .map(|tool| tool.input_schema().clone())
        .unwrap_or_else(any_object_schema)
}

/// The output schema a served flow advertises: the flow's, else the last step's (linear) or sole
/// sink's (DAG) tool output schema when that step merges its outputs as they are; else none.
pub fn output_schema(flow: &FlowDefinition, tools: &ToolRegistry) -> Option<Value> {
    let declared = match flow {
        FlowDefinition::Linear(flow) => flow.output_schema.as_ref(),
        FlowDefinition::Dag(flow) => flow.output_schema.as_ref(),
    };
    if let Some(schema) = declared {
        return Some(schema.clone());
    }
    let views = step_views(flow);
    let sinks: Vec<_> = views
        .iter()
        .filter(|view| {
            !views
                .iter()
                .any(|other| other.depends_on.contains(&view.id))
        })
        .collect();
    let [sink] = sinks.as_slice() else {
        return None;
    };
    if sink.step.output_mapping.is_some()
        || sink.step.output_key.is_some()
        || sink.step.for_each.is_some()
    {
        return None;
    }
    let schema = tools.get(&sink.step.tool_name)?.output_schema().clone();
    // The flow answers with its whole context: the sink's fields and more.
    Some(schema)
}

fn descriptor(
    tool_name: &str,
    flow: &FlowDefinition,
    status: FlowStatus,
    serving: &FlowServing,
    safety: Option<SafetyContract>,
    tools: &ToolRegistry,
) -> Value {
    let views = step_views(flow);
    let replaces: Vec<String> = if serving.replaces_tools.is_empty() {
        views.iter().map(|v| v.step.tool_name.clone()).collect()
    } else {
        serving.replaces_tools.clone()
    };
    let round_trips = serving
        .round_trips_saved
        .unwrap_or_else(|| views.len().saturating_sub(1) as u64);
    let base = flow_description(flow);
    let mut description = if base.is_empty() {
        format!("Flow {}", flow.name())
    } else {
        base.to_string()
    };
    description.push_str(&format!(
        " [flow {} v{}, {}; replaces {}; saves {} round trip{}{}]",
        flow.name(),
        flow.version(),
        status,
        replaces.join(" -> "),
        round_trips,
        if round_trips == 1 { "" } else { "s" },
        serving
            .owner
            .as_ref()
            .map(|o| format!("; owner {o}"))
            .unwrap_or_default(),
    ));
    let mut tool = Map::new();
    tool.insert("name".into(), Value::String(tool_name.to_string()));
    tool.insert("description".into(), Value::String(description));
    tool.insert("inputSchema".into(), input_schema(flow, tools));
    if serving.chain_config.is_none()
        && let Some(schema) = output_schema(flow, tools)
    {
        tool.insert("outputSchema".into(), schema);
    }
    if let Some(safety) = safety {
        let read_only = matches!(safety.side_effects, SideEffects::None | SideEffects::Read);
        let mut annotations = Map::new();
        annotations.insert("readOnlyHint".into(), Value::Bool(read_only));
        if !read_only {
            annotations.insert(
                "destructiveHint".into(),
                Value::Bool(safety.side_effects == SideEffects::Destructive),
            );
        }
        tool.insert("annotations".into(), Value::Object(annotations));
    }
    let mut meta = Map::new();
    meta.insert(
        META_KEY.into(),
        json!({
            "flow": flow.name(),
            "version": flow.version(),
            "lifecycle": status,
            "owner": serving.owner,
            "replaces_tools": replaces,
            "round_trips_saved": round_trips,
            "safety": safety,
        }),
    );
    tool.insert("_meta".into(), Value::Object(meta));
    Value::Object(tool)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{Tool, ToolRegistry};
    use chrono::Utc;

    fn tools() -> ToolRegistry {
        let mut tools = ToolRegistry::new();
        for (name, read_only) in [("get", Some(true)), ("put", Some(false)), ("odd", None)] {
            tools.register(
                Tool::sync(name, |input| Ok(Value::Object(input.clone())))
                    .read_only(read_only)
                    .build()
                    .unwrap(),
            );
        }
        tools
    }

    fn registered(value: Value, status: FlowStatus) -> RegisteredFlow {
        RegisteredFlow {
            status,
            registered_at: Utc::now(),
            updated_at: Utc::now(),
            definition: FlowDefinition::from_value(value).unwrap(),
        }
    }

    #[test]
    fn default_exposure_is_active_read_only_and_declared_safety_wins() {
        let flows = vec![
            registered(
                json!({"name": "reads", "steps": [{"tool_name": "get"}, {"tool_name": "get"}]}),
                FlowStatus::Active,
            ),
            registered(
                json!({"name": "writes", "steps": [{"tool_name": "get"}, {"tool_name": "put"}]}),
                FlowStatus::Active,
            ),
            registered(
                json!({"name": "unknown", "steps": [{"tool_name": "odd"}]}),
                FlowStatus::Active,
            ),
            registered(
                json!({"name": "declared", "steps": [{"tool_name": "odd"}],
                       "metadata": {"safety": {"side_effects": "READ"}, "owner": "ops"}}),
                FlowStatus::Active,
            ),
            registered(
                json!({"name": "draft", "steps": [{"tool_name": "get"}]}),
                FlowStatus::Draft,
            ),
        ];
        let names = |exposure: &Exposure| -> Vec<String> {
            select(&flows, &tools(), exposure)
                .0
                .into_iter()
                .map(|f| f.tool_name)
                .collect()
        };
        assert_eq!(names(&Exposure::default()), ["reads", "declared"]);
        let wide = Exposure {
            allow_side_effects: true,
            lifecycles: vec![FlowStatus::Active, FlowStatus::Draft],
            prefix: Some("cw".into()),
            ..Exposure::default()
        };
        assert_eq!(
            names(&wide),
            [
                "cw__reads",
                "cw__writes",
                "cw__unknown",
                "cw__declared",
                "cw__draft"
            ]
        );
        let owners = Exposure {
            owners: vec!["ops".into()],
            ..Exposure::default()
        };
        assert_eq!(names(&owners), ["declared"]);
        let named = Exposure {
            flows: vec!["writes".into(), "ghost".into()],
            ..Exposure::default()
        };
        let (chosen, warnings) = select(&flows, &tools(), &named);
        assert_eq!(chosen.len(), 1);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        let descriptor = &chosen[0].descriptor;
        assert_eq!(descriptor["annotations"]["readOnlyHint"], json!(false));
        assert_eq!(descriptor["_meta"][META_KEY]["round_trips_saved"], json!(1));
        assert_eq!(
            descriptor["_meta"][META_KEY]["replaces_tools"],
            json!(["get", "put"])
        );
    }
}
