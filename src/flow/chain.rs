//! Chain tools in the `chain_config` format, read and converted to flows. Running one (with an
//! executor) is in [`chain_tool`](crate::chain_tool).
//!
//! ```json
//! {"name": "deploy_and_notify", "tool_type": "chain",
//!  "input_schema": {"type": "object", "properties": {"environment": {"type": "string"}}},
//!  "chain_config": {
//!    "steps": [
//!      {"tool_name": "deploy", "input_mapping": {"env": "{{environment}}"}, "output_key": "deploy"},
//!      {"tool_name": "notify", "input_mapping": {"channel": "#deployments",
//!                                                "text": "Deployed to {{environment}}: {{deploy.url}}"}}
//!    ],
//!    "continue_on_error": false}}
//! ```
//!
//! String mapping values become input templates (`{{name}}` alone keeps the value's type, other
//! strings interpolate, strings without placeholders are literals); other values are literals.
//! `output_key` stores the step's whole output under that key; a step without one contributes
//! nothing to the context. `continue_on_error` makes every step `on_error: skip`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use chainweaver_recorder::model::flow::{Flow, FlowStep, OnError, serving_keys};

/// One step of a chain tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainStep {
    pub tool_name: String,
    pub input_mapping: Map<String, Value>,
    pub output_key: Option<String>,
}

/// A chain tool definition.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainTool {
    pub name: String,
    pub description: String,
    pub input_schema: Option<Value>,
    pub steps: Vec<ChainStep>,
    pub continue_on_error: bool,
}

impl ChainTool {
    /// Read a chain tool: either the whole tool (`name`, `chain_config`, ...) or a bare
    /// `chain_config` with a `name`. Errors name the step and field.
    pub fn from_value(value: Value) -> Result<Self, String> {
        let Value::Object(tool) = value else {
            return Err("a chain tool is a JSON object".into());
        };
        let name = tool
            .get("name")
            .and_then(Value::as_str)
            .ok_or("missing string field `name`")?
            .to_string();
        if let Some(kind) = tool.get("tool_type").and_then(Value::as_str)
            && kind != "chain"
        {
            return Err(format!("tool_type is `{kind}`, not `chain`"));
        }
        let config = match tool.get("chain_config") {
            Some(Value::Object(config)) => config,
            Some(_) => return Err("`chain_config` must be an object".into()),
            None => &tool,
        };
        let steps = config
            .get("steps")
            .and_then(Value::as_array)
            .ok_or("chain_config needs a `steps` list")?;
        let mut parsed = Vec::with_capacity(steps.len());
        for (index, step) in steps.iter().enumerate() {
            let tool_name = step
                .get("tool_name")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("step {index}: missing string field `tool_name`"))?;
            let input_mapping = match step.get("input_mapping") {
                None => Map::new(),
                Some(Value::Object(map)) => map.clone(),
                Some(_) => return Err(format!("step {index}: `input_mapping` must be an object")),
            };
            for (field, source) in &input_mapping {
                if let Value::String(text) = source {
                    super::mapping::parse_template(text)
                        .map_err(|err| format!("step {index}, input `{field}`: {err}"))?;
                }
            }
            let output_key = match step.get("output_key") {
                None | Some(Value::Null) => None,
                Some(Value::String(key)) if !key.is_empty() => Some(key.clone()),
                Some(_) => {
                    return Err(format!(
                        "step {index}: `output_key` must be a non-empty string"
                    ));
                }
            };
            parsed.push(ChainStep {
                tool_name: tool_name.to_string(),
                input_mapping,
                output_key,
            });
        }
        let continue_on_error = match config.get("continue_on_error") {
            None => false,
            Some(Value::Bool(flag)) => *flag,
            Some(_) => return Err("`continue_on_error` must be true or false".into()),
        };
        Ok(Self {
            name,
            description: tool
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            input_schema: tool.get("input_schema").cloned(),
            steps: parsed,
            continue_on_error,
        })
    }

    /// The equivalent linear flow.
    pub fn to_flow(&self) -> Flow {
        let steps = self
            .steps
            .iter()
            .map(|step| {
                let mut literals = Map::new();
                let mut templates = BTreeMap::new();
                for (field, source) in &step.input_mapping {
                    match source {
                        Value::String(text) => {
                            templates.insert(field.clone(), text.clone());
                        }
                        other => {
                            literals.insert(field.clone(), other.clone());
                        }
                    }
                }
                let mut flow_step = FlowStep::new(step.tool_name.clone(), literals);
                flow_step.input_templates = templates;
                flow_step.output_key = step.output_key.clone();
                if step.output_key.is_none() {
                    // Chain steps without an output key leave the context as it was.
                    flow_step.output_mapping = Some(Map::new());
                }
                if self.continue_on_error {
                    flow_step.on_error = OnError::Skip;
                }
                flow_step
            })
            .collect();
        let mut metadata = Map::new();
        metadata.insert(
            serving_keys::IMPORTED_FROM.into(),
            Value::String(serving_keys::FROM_CHAIN_CONFIG.into()),
        );
        Flow {
            name: self.name.clone(),
            version: "1.0.0".into(),
            description: self.description.clone(),
            steps,
            input_schema: self.input_schema.clone(),
            output_schema: None,
            metadata,
        }
    }
}
