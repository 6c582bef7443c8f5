//! Chain tools managed at runtime through MCP (the `chain_config` format of
//! [`flow::chain`](crate::flow::chain)): the management tools' names and descriptors, and the
//! checks a chain passes before it is accepted.
//!
//! A chain is refused, with a message naming the step, when a step names a tool that is not
//! registered or not on the operator's allow-list, names the chain itself or another chain tool
//! (a cycle, or a chain of chains), or has a template whose first key is neither an input
//! property nor the `output_key` of an earlier step; and when the converted flow fails the
//! static checks.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::flow::chain::ChainTool;
use crate::flow::compile_flow;
use crate::flow::mapping::{TemplatePart, parse_template};
use crate::tool::ToolRegistry;
use chainweaver_recorder::model::flow::FlowDefinition;

pub const CREATE: &str = "create_dynamic_tool";
pub const LIST: &str = "list_dynamic_tools";
pub const UPDATE: &str = "update_dynamic_tool";
pub const DISABLE: &str = "disable_dynamic_tool";
pub const DELETE: &str = "delete_dynamic_tool";

/// Every management tool name.
pub const MANAGEMENT_TOOLS: [&str; 5] = [CREATE, LIST, UPDATE, DISABLE, DELETE];

/// What the operator allows chains to do.
#[derive(Debug, Clone, Default)]
pub struct ChainPolicy {
    /// `create_dynamic_tool` is offered.
    pub allow_create: bool,
    /// Tools a chain may use (empty: every registered tool).
    pub allowed_tools: Vec<String>,
}

/// Check a chain before it is accepted. `chain_tools` names the chain tools that exist (other
/// than this one).
pub fn check_chain(
    chain: &ChainTool,
    tools: &ToolRegistry,
    policy: &ChainPolicy,
    chain_tools: &BTreeSet<String>,
    reserved: &BTreeSet<String>,
) -> Result<(), String> {
    if chain.name.trim().is_empty() {
        return Err("a chain tool needs a non-empty `name`".into());
    }
    if reserved.contains(&chain.name) {
        return Err(format!(
            "`{}` is already the name of a served tool that is not a chain tool",
            chain.name
        ));
    }
    if chain.steps.is_empty() {
        return Err("chain_config.steps is empty".into());
    }
    let input_keys: Option<BTreeSet<String>> = chain
        .input_schema
        .as_ref()
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect());
    let output_keys: Vec<Option<&str>> = chain
        .steps
        .iter()
        .map(|s| s.output_key.as_deref())
        .collect();
    for (index, step) in chain.steps.iter().enumerate() {
        let name = &step.tool_name;
        let here = format!("step {index} (`{name}`)");
        if *name == chain.name {
            return Err(format!(
                "{here}: cycle: the step calls the chain tool `{name}` itself"
            ));
        }
        if chain_tools.contains(name) {
            return Err(format!(
                "{here}: `{name}` is a chain tool; a chain calls underlying tools only (no chains of chains, which could form a cycle)"
            ));
        }
        if tools.get(name).is_none() {
            return Err(format!("{here}: unknown tool `{name}`"));
        }
        if !policy.allowed_tools.is_empty() && !policy.allowed_tools.iter().any(|t| t == name) {
            return Err(format!(
                "{here}: tool `{name}` is not on the operator's allow-list ({})",
                policy.allowed_tools.join(", ")
            ));
        }
        for (field, source) in &step.input_mapping {
            let Value::String(template) = source else {
                continue;
            };
            let parts = parse_template(template)
                .map_err(|err| format!("{here}, input `{field}`: {err}"))?;
            for part in parts {
                let TemplatePart::Placeholder(path) = part else {
                    continue;
                };
                let Some(key) = path.first() else { continue };
                let earlier = output_keys[..index].contains(&Some(key.as_str()));
                let from_input = input_keys.as_ref().is_none_or(|keys| keys.contains(key));
                if earlier || from_input {
                    continue;
                }
                let later = output_keys[index..]
                    .iter()
                    .position(|k| *k == Some(key.as_str()));
                return Err(match later {
                    Some(offset) => format!(
                        "{here}, input `{field}`: template `{template}` names `{key}`, which only step {} produces, after this one",
                        index + offset
                    ),
                    None => format!(
                        "{here}, input `{field}`: template `{template}` names `{key}`, which is neither an input_schema property nor an earlier step's output_key"
                    ),
                });
            }
        }
    }
    let flow = FlowDefinition::Linear(chain.to_flow());
    let report = compile_flow(&flow, tools);
    if let Some(finding) = report.errors().next() {
        return Err(finding.to_string());
    }
    Ok(())
}

/// The `tools/list` entries of the management tools.
pub fn management_descriptors(policy: &ChainPolicy) -> Vec<Value> {
    let name_only = json!({"type": "object", "properties": {"name": {"type": "string"}},
                           "required": ["name"]});
    let definition = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "description": {"type": "string"},
            "tool_type": {"type": "string", "enum": ["chain"]},
            "input_schema": {"type": "object"},
            "chain_config": {
                "type": "object",
                "properties": {
                    "steps": {"type": "array", "items": {"type": "object"}},
                    "continue_on_error": {"type": "boolean"}
                },
                "required": ["steps"]
            },
            "activate": {"type": "boolean"}
        },
        "required": ["name", "chain_config"]
    });
    let mut update = definition.clone();
    if let Some(required) = update.get_mut("required") {
        *required = json!(["name"]);
    }
    let mut out = Vec::new();
    let mut push = |name: &str, description: &str, schema: Value, read_only: bool| {
        let mut tool = Map::new();
        tool.insert("name".into(), Value::String(name.into()));
        tool.insert("description".into(), Value::String(description.into()));
        tool.insert("inputSchema".into(), schema);
        tool.insert("annotations".into(), json!({"readOnlyHint": read_only}));
        out.push(Value::Object(tool));
    };
    if policy.allow_create {
        push(
            CREATE,
            "Create a chain tool: steps that call existing tools in order, with {{name}} / {{key.path}} templates over the input and earlier steps' output_key values. It appears in tools/list at once.",
            definition,
            false,
        );
    }
    push(
        LIST,
        "List the chain tools: name, version, lifecycle, description, input schema and chain_config.",
        json!({"type": "object"}),
        true,
    );
    push(
        UPDATE,
        "Replace a chain tool's description, input_schema or chain_config (a new version), or re-activate it with activate: true.",
        update,
        false,
    );
    push(
        DISABLE,
        "Disable a chain tool: it leaves tools/list but stays in the store (update it with activate: true to bring it back).",
        name_only.clone(),
        false,
    );
    push(
        DELETE,
        "Delete a chain tool: every version is retired for good.",
        name_only,
        false,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::Tool;

    fn tools() -> ToolRegistry {
        let mut tools = ToolRegistry::new();
        for name in ["fetch", "notify"] {
            tools.register(
                Tool::sync(name, |input| Ok(Value::Object(input.clone())))
                    .build()
                    .unwrap(),
            );
        }
        tools
    }

    fn chain(steps: Value) -> ChainTool {
        ChainTool::from_value(json!({
            "name": "pipeline", "tool_type": "chain",
            "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}},
            "chain_config": {"steps": steps}
        }))
        .unwrap()
    }

    fn check(steps: Value, policy: &ChainPolicy, others: &[&str]) -> Result<(), String> {
        let others: BTreeSet<String> = others.iter().map(|s| s.to_string()).collect();
        check_chain(&chain(steps), &tools(), policy, &others, &BTreeSet::new())
    }

    #[test]
    fn good_chains_pass_and_bad_ones_name_the_step() {
        let open = ChainPolicy {
            allow_create: true,
            allowed_tools: vec![],
        };
        check(
            json!([{"tool_name": "fetch", "input_mapping": {"u": "{{url}}"}, "output_key": "raw"},
                   {"tool_name": "notify", "input_mapping": {"text": "got {{raw.body}}"}}]),
            &open,
            &[],
        )
        .unwrap();
        let err = check(json!([{"tool_name": "nope"}]), &open, &[]).unwrap_err();
        assert!(
            err.contains("step 0") && err.contains("unknown tool `nope`"),
            "{err}"
        );
        let err = check(
            json!([{"tool_name": "fetch", "input_mapping": {"u": "{{raw.x}}"}},
                   {"tool_name": "notify", "output_key": "raw"}]),
            &open,
            &[],
        )
        .unwrap_err();
        assert!(
            err.contains("step 0") && err.contains("only step 1"),
            "{err}"
        );
        let err = check(
            json!([{"tool_name": "fetch"}, {"tool_name": "notify", "input_mapping": {"t": "{{missing}}"}}]),
            &open,
            &[],
        )
        .unwrap_err();
        assert!(err.contains("step 1") && err.contains("`missing`"), "{err}");
        let err = check(json!([{"tool_name": "pipeline"}]), &open, &[]).unwrap_err();
        assert!(err.contains("step 0") && err.contains("cycle"), "{err}");
        let err = check(
            json!([{"tool_name": "fetch"}, {"tool_name": "other"}]),
            &open,
            &["other"],
        )
        .unwrap_err();
        assert!(
            err.contains("step 1") && err.contains("chain tool"),
            "{err}"
        );
        let narrow = ChainPolicy {
            allow_create: true,
            allowed_tools: vec!["fetch".into()],
        };
        let err = check(json!([{"tool_name": "notify"}]), &narrow, &[]).unwrap_err();
        assert!(err.contains("allow-list"), "{err}");
    }
}
