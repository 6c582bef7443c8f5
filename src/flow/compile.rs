//! `compile_flow`: every static check a flow can fail before it runs.
//!
//! Each [`Finding`] has a stable `code`, a severity, the step (index and id), the tool, the
//! input field and a JSON pointer into the flow document. Codes:
//!
//! | code | severity | meaning |
//! |---|---|---|
//! | `empty_flow` | warning | the flow has no steps |
//! | `duplicate_step_id` | error | two DAG steps share an id |
//! | `unknown_dependency` | error | `depends_on` names no step |
//! | `cycle` | error | the DAG's dependencies form a cycle |
//! | `invalid_retry_policy` | error | negative or non-finite backoff |
//! | `unknown_tool` | error | the step's tool is not registered |
//! | `unknown_fallback_tool` | error | `fallback:<tool>` names no registered tool |
//! | `invalid_json_pointer` | error | a mapping pointer is malformed |
//! | `invalid_template` | error | an input template is malformed |
//! | `unknown_input_field` | error | a mapped field is not on the tool's input schema |
//! | `missing_required_field` | error | a required input field is not supplied |
//! | `incompatible_mapped_type` | error | a mapped value's type cannot match the field's |
//! | `fallback_unknown_input_field`, `fallback_missing_required_field`, `fallback_incompatible_mapped_type` | error | the same checks against the fallback's input schema |
//! | `unavailable_context_key` | error | a mapping reads a key no ancestor step or flow input provides |
//! | `context_key_not_from_ancestor` | error / warning | the key comes only from a step that is not an ancestor (error when the flow declares its input schema) |
//! | `invalid_output_mapping` | error | an `output_mapping` value is not a string |
//! | `output_mapping_unknown_key` | error | `output_mapping` names an output the tool's schema does not declare |
//! | `fallback_output_missing_mapped_key` | error | the fallback's output lacks a key `output_mapping` needs |
//! | `fallback_output_shape_divergence` | warning | fallback and primary declare different output keys |
//! | `fallback_output_type_mismatch` | warning | a shared output key has incompatible types |
//! | `map_list_unavailable` | error | a map step's `for_each.list` reads a key no ancestor step or flow input provides |
//! | `map_list_not_array` | error | the schema of a map step's list says it is not an array |
//! | `map_select_unavailable` | error | `for_each.select` reads a key nothing provides |
//! | `map_select_not_array` | error | the schema of `for_each.select` says it is not an array |
//! | `map_missing_output_key` | error | a map step has no `output_key` to collect its results under |
//! | `map_invalid_concurrency` | error | `for_each.concurrency` is 0 |
//!
//! A map step's `for_each.list` and `for_each.select` that are not JSON pointers are
//! `invalid_json_pointer` findings. While its mapping is checked, the step's `item` key is in the
//! context, with the list's `items` schema when that is known.

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use chainweaver_recorder::model::flow::{FlowDefinition, FlowStep, ForEach, OnError};

use crate::flow::mapping::{Source, TemplatePart, escape_token, parse_template, pointer_tokens};
use crate::flow::{GraphProblem, StepView, ancestors, flow_input_schema, levels, step_views};
use crate::tool::{Tool, ToolRegistry};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
}

/// One result of a static check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable snake_case code.
    pub code: String,
    pub severity: Severity,
    /// Index of the step in the flow's `steps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The tool input field (or context / output key) concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// JSON pointer into the flow document, e.g. `/steps/2/input_mapping/url`.
    pub pointer: String,
    pub message: String,
}

impl Finding {
    /// True for a blocking finding.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(
            f,
            "{severity}[{}] {}: {}",
            self.code, self.pointer, self.message
        )
    }
}

/// Everything `compile_flow` found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompileReport {
    pub flow: String,
    pub version: String,
    pub findings: Vec<Finding>,
}

impl CompileReport {
    /// True when no finding blocks the flow.
    pub fn is_ok(&self) -> bool {
        !self.findings.iter().any(Finding::is_error)
    }
    pub fn errors(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.is_error())
    }
    pub fn warnings(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| !f.is_error())
    }
    /// The findings with a given code.
    pub fn with_code<'a>(&'a self, code: &'a str) -> impl Iterator<Item = &'a Finding> + 'a {
        self.findings.iter().filter(move |f| f.code == code)
    }
    /// `Err(FlowCompile)` when a finding blocks the flow.
    pub fn into_result(self) -> crate::error::Result<Self> {
        if self.is_ok() {
            Ok(self)
        } else {
            Err(crate::error::Error::FlowCompile {
                flow: self.flow,
                findings: self.findings,
            })
        }
    }
}

/// A JSON type set from a schema (`None`: unknown / anything).
type Types = Option<BTreeSet<String>>;

fn schema_types(schema: Option<&Value>) -> Types {
    let schema = schema?;
    match schema.get("type")? {
        Value::String(t) => Some(BTreeSet::from([t.clone()])),
        Value::Array(items) => Some(
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
        ),
        _ => None,
    }
}

fn literal_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn compatible(source: &Types, target: &Types) -> bool {
    let (Some(source), Some(target)) = (source, target) else {
        return true;
    };
    source.iter().any(|s| {
        target.iter().any(|t| {
            s == t || (s == "integer" && t == "number") || (s == "number" && t == "integer")
        })
    })
}

fn describe(types: &Types) -> String {
    match types {
        Some(set) => set.iter().cloned().collect::<Vec<_>>().join("|"),
        None => "any".into(),
    }
}

/// Declared properties of an object schema (`None`: not declared, anything goes).
fn properties(schema: &Value) -> Option<&serde_json::Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

fn required(schema: &Value) -> Vec<String> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Descend a schema along pointer tokens (properties / items); `None` when unknown.
fn sub_schema<'s>(schema: &'s Value, tokens: &[String]) -> Option<&'s Value> {
    let mut current = schema;
    for token in tokens {
        current = if let Some(prop) = properties(current).and_then(|p| p.get(token)) {
            prop
        } else if token.parse::<usize>().is_ok() {
            current.get("items")?
        } else {
            return None;
        };
    }
    Some(current)
}

/// What the context may hold at one step: key -> schema of its value (None: unknown schema).
#[derive(Debug, Default, Clone)]
struct ContextShape {
    keys: HashMap<String, Option<Value>>,
    /// Some producer's keys are not declared: any key may be present.
    open: bool,
}

impl ContextShape {
    fn add_outputs(&mut self, step: &FlowStep, tool: Option<&Tool>) {
        let Some(tool) = tool else {
            self.open = true;
            return;
        };
        let output_schema = tool.output_schema();
        let produced: Vec<(String, Option<Value>)> =
            match (&step.output_mapping, properties(output_schema)) {
                (Some(mapping), props) => mapping
                    .iter()
                    .map(|(context_key, output_key)| {
                        let schema = output_key
                            .as_str()
                            .and_then(|k| props.and_then(|p| p.get(k)))
                            .cloned();
                        (context_key.clone(), schema)
                    })
                    .collect(),
                (None, Some(props)) => props
                    .iter()
                    .map(|(k, s)| (k.clone(), Some(s.clone())))
                    .collect(),
                (None, None) => {
                    if step.output_key.is_none() {
                        self.open = true;
                    }
                    Vec::new()
                }
            };
        match &step.output_key {
            Some(key) => {
                let schema = if step.output_mapping.is_none() {
                    Some(output_schema.clone())
                } else {
                    None
                };
                // A map step collects one output object per element into an array.
                let schema = match (&step.for_each, schema) {
                    (None, schema) => schema,
                    (Some(_), Some(items)) => {
                        Some(serde_json::json!({"type": "array", "items": items}))
                    }
                    (Some(_), None) => Some(serde_json::json!({"type": "array"})),
                };
                self.keys.insert(key.clone(), schema);
            }
            None => {
                for (key, schema) in produced {
                    self.keys.insert(key, schema);
                }
            }
        }
    }

    /// The schema of a key path, if known: `Ok(None)` unknown type, `Err(())` key unavailable.
    fn lookup(&self, tokens: &[String]) -> Result<Option<Value>, ()> {
        let Some((first, rest)) = tokens.split_first() else {
            return Ok(None);
        };
        match self.keys.get(first) {
            Some(Some(schema)) => Ok(sub_schema(schema, rest).cloned()),
            Some(None) => Ok(None),
            None if self.open => Ok(None),
            None => Err(()),
        }
    }
}

struct Checker {
    findings: Vec<Finding>,
}

impl Checker {
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        code: &str,
        severity: Severity,
        view: Option<&StepView>,
        tool: Option<&str>,
        field: Option<&str>,
        pointer: String,
        message: String,
    ) {
        self.findings.push(Finding {
            code: code.to_string(),
            severity,
            step: view.map(|v| v.index),
            step_id: view.filter(|v| v.is_dag).map(|v| v.id.clone()),
            tool: tool.map(str::to_string),
            field: field.map(str::to_string),
            pointer,
            message,
        });
    }
}

/// Run every static check of a flow against the registered tools.
pub fn compile_flow(flow: &FlowDefinition, tools: &ToolRegistry) -> CompileReport {
    let views = step_views(flow);
    let mut checker = Checker {
        findings: Vec::new(),
    };
    if views.is_empty() {
        checker.push(
            "empty_flow",
            Severity::Warning,
            None,
            None,
            None,
            "/steps".into(),
            "the flow has no steps".into(),
        );
    }
    let graph_ok = check_graph(&mut checker, &views);
    let ancestor_sets = if graph_ok {
        ancestors(&views)
    } else {
        // Without a sound graph, fall back to list order so the other checks still run.
        (0..views.len()).map(|i| (0..i).collect()).collect()
    };

    // What the flow input provides.
    let input_schema = flow_input_schema(flow);
    let declared_input = input_schema.is_some_and(|s| properties(s).is_some());
    let mut base = ContextShape::default();
    match input_schema.and_then(properties) {
        Some(props) => {
            for (key, schema) in props {
                base.keys.insert(key.clone(), Some(schema.clone()));
            }
        }
        None => base.open = true,
    }
    let metadata = match flow {
        FlowDefinition::Linear(f) => &f.metadata,
        FlowDefinition::Dag(f) => &f.metadata,
    };
    if let Some(params) = metadata.get("dynamic_params").and_then(Value::as_array) {
        for key in params.iter().filter_map(Value::as_str) {
            base.keys.insert(key.to_string(), None);
        }
    }

    for view in &views {
        let prefix = format!("/steps/{}", view.index);
        check_retry(&mut checker, view, &prefix);
        let tool = tools.get(&view.step.tool_name).map(|t| t.as_ref());
        if tool.is_none() {
            checker.push(
                "unknown_tool",
                Severity::Error,
                Some(view),
                Some(&view.step.tool_name),
                None,
                format!("{prefix}/tool_name"),
                format!("tool `{}` is not registered", view.step.tool_name),
            );
        }
        let fallback_name = match &view.step.on_error {
            OnError::Fallback(name) => Some(name.as_str()),
            _ => None,
        };
        let fallback = fallback_name.and_then(|n| tools.get(n)).map(|t| t.as_ref());
        if let (Some(name), None) = (fallback_name, fallback) {
            checker.push(
                "unknown_fallback_tool",
                Severity::Error,
                Some(view),
                Some(name),
                None,
                format!("{prefix}/on_error"),
                format!("fallback tool `{name}` is not registered"),
            );
        }

        // The context this step can read: flow input plus its ancestors' outputs.
        let mut shape = base.clone();
        for &ancestor in &ancestor_sets[view.index] {
            let producer = &views[ancestor];
            shape.add_outputs(
                &producer.step,
                tools.get(&producer.step.tool_name).map(|t| t.as_ref()),
            );
        }
        let mut others = ContextShape::default();
        for other in views
            .iter()
            .filter(|o| o.index != view.index && !ancestor_sets[view.index].contains(&o.index))
        {
            others.add_outputs(
                &other.step,
                tools.get(&other.step.tool_name).map(|t| t.as_ref()),
            );
        }
        if let Some(for_each) = &view.step.for_each {
            check_map(&mut checker, view, &prefix, for_each, &mut shape);
        }
        let sources = check_sources(&mut checker, view, &prefix, &shape, &others, declared_input);

        if let Some(tool) = tool {
            check_inputs(&mut checker, view, &prefix, tool, &sources, &shape, "");
            check_output_mapping(&mut checker, view, &prefix, tool);
        }
        if let Some(fallback) = fallback {
            check_inputs(
                &mut checker,
                view,
                &prefix,
                fallback,
                &sources,
                &shape,
                "fallback_",
            );
            if let Some(primary) = tool {
                check_fallback_outputs(&mut checker, view, &prefix, primary, fallback);
            }
        }
    }
    CompileReport {
        flow: flow.name().to_string(),
        version: flow.version().to_string(),
        findings: checker.findings,
    }
}

fn check_graph(checker: &mut Checker, views: &[StepView]) -> bool {
    let Err(problems) = levels(views) else {
        return true;
    };
    for problem in problems {
        match problem {
            GraphProblem::DuplicateStepId { index, id } => checker.push(
                "duplicate_step_id",
                Severity::Error,
                views.get(index),
                None,
                None,
                format!("/steps/{index}/step_id"),
                format!("step id `{id}` is used more than once"),
            ),
            GraphProblem::UnknownDependency {
                index,
                id,
                dependency,
            } => checker.push(
                "unknown_dependency",
                Severity::Error,
                views.get(index),
                None,
                Some(&dependency),
                format!("/steps/{index}/depends_on"),
                format!("step `{id}` depends on `{dependency}`, which is not a step"),
            ),
            GraphProblem::Cycle { ids } => checker.push(
                "cycle",
                Severity::Error,
                None,
                None,
                None,
                "/steps".into(),
                format!("the dependencies form a cycle through {}", ids.join(", ")),
            ),
        }
    }
    false
}

fn check_retry(checker: &mut Checker, view: &StepView, prefix: &str) {
    if let Some(policy) = &view.step.retry_policy {
        let bad = |x: f64| !x.is_finite() || x < 0.0;
        if bad(policy.backoff_seconds) || bad(policy.backoff_multiplier) {
            checker.push(
                "invalid_retry_policy",
                Severity::Error,
                Some(view),
                Some(&view.step.tool_name),
                None,
                format!("{prefix}/retry_policy"),
                "backoff_seconds and backoff_multiplier must be finite and not negative".into(),
            );
        }
    }
}

/// Check a map step's `for_each`, and make its `item` key visible in `shape` (typed by the
/// list's `items` schema when that is known).
fn check_map(
    checker: &mut Checker,
    view: &StepView,
    prefix: &str,
    for_each: &ForEach,
    shape: &mut ContextShape,
) {
    let tool = view.step.tool_name.as_str();
    let list_schema = check_map_pointer(checker, view, prefix, "list", &for_each.list, shape);
    if let Some(select) = &for_each.select {
        check_map_pointer(checker, view, prefix, "select", select, shape);
    }
    if view.step.output_key.is_none() {
        checker.push(
            "map_missing_output_key",
            Severity::Error,
            Some(view),
            Some(tool),
            None,
            format!("{prefix}/output_key"),
            format!(
                "map step {} (`{tool}`) needs an output_key to collect its results under",
                view.id
            ),
        );
    }
    if for_each.concurrency == 0 {
        checker.push(
            "map_invalid_concurrency",
            Severity::Error,
            Some(view),
            Some(tool),
            None,
            format!("{prefix}/for_each/concurrency"),
            format!(
                "map step {} (`{tool}`): concurrency must be at least 1",
                view.id
            ),
        );
    }
    let item_schema = list_schema.and_then(|schema| schema.get("items").cloned());
    shape.keys.insert(for_each.item.clone(), item_schema);
}

/// Check one of a map step's list pointers (`list` or `select`): well formed, available, and
/// an array when its schema is known. The pointed value's schema, when known.
fn check_map_pointer(
    checker: &mut Checker,
    view: &StepView,
    prefix: &str,
    which: &str,
    pointer: &str,
    shape: &ContextShape,
) -> Option<Value> {
    let tool = view.step.tool_name.as_str();
    let at = format!("{prefix}/for_each/{which}");
    let problem = match pointer_tokens(pointer) {
        Ok(tokens) if !tokens.is_empty() => Ok(tokens),
        Ok(_) => Err(format!(
            "map step {} (`{tool}`): for_each.{which} must point at a field, not the whole context",
            view.id
        )),
        Err(message) => Err(format!(
            "map step {} (`{tool}`), for_each.{which}: {message}",
            view.id
        )),
    };
    let tokens = match problem {
        Ok(tokens) => tokens,
        Err(message) => {
            checker.push(
                "invalid_json_pointer",
                Severity::Error,
                Some(view),
                Some(tool),
                Some(which),
                at,
                message,
            );
            return None;
        }
    };
    match shape.lookup(&tokens) {
        Err(()) => {
            checker.push(
                &format!("map_{which}_unavailable"),
                Severity::Error,
                Some(view),
                Some(tool),
                Some(which),
                at,
                format!(
                    "map step {} (`{tool}`): for_each.{which} `{pointer}` reads context key `{}`, \
                     which is neither a flow input nor an output of an earlier step",
                    view.id, tokens[0]
                ),
            );
            None
        }
        Ok(schema) => {
            let types = schema_types(schema.as_ref());
            if types.as_ref().is_some_and(|t| !t.contains("array")) {
                checker.push(
                    &format!("map_{which}_not_array"),
                    Severity::Error,
                    Some(view),
                    Some(tool),
                    Some(which),
                    at,
                    format!(
                        "map step {} (`{tool}`): for_each.{which} `{pointer}` is {}, not an array",
                        view.id,
                        describe(&types)
                    ),
                );
            }
            schema
        }
    }
}

/// One mapped field's source as the checks see it.
struct MappedField {
    field: String,
    pointer: String,
    types: Types,
}

/// Check every source a step reads; return the mapped fields with their known types.
fn check_sources(
    checker: &mut Checker,
    view: &StepView,
    prefix: &str,
    shape: &ContextShape,
    others: &ContextShape,
    declared_input: bool,
) -> Vec<MappedField> {
    let mut fields = Vec::new();
    let check_path = |checker: &mut Checker,
                      field: &str,
                      pointer: &str,
                      tokens: &[String]|
     -> Types {
        let key = tokens.first().cloned().unwrap_or_default();
        if !shape.keys.contains_key(&key) && others.keys.contains_key(&key) {
            // Only a step this one does not wait for produces the key. Certain trouble when
            // nothing else could supply it; a warning when the flow input (or an ancestor with
            // undeclared outputs) might.
            let certain = declared_input && !shape.open;
            checker.push(
                "context_key_not_from_ancestor",
                if certain {
                    Severity::Error
                } else {
                    Severity::Warning
                },
                Some(view),
                Some(&view.step.tool_name),
                Some(field),
                pointer.to_string(),
                format!(
                    "context key `{key}` is produced only by a step this one does not depend on"
                ),
            );
            return None;
        }
        match shape.lookup(tokens) {
            Ok(schema) => schema_types(schema.as_ref()),
            Err(()) => {
                checker.push(
                    "unavailable_context_key",
                    Severity::Error,
                    Some(view),
                    Some(&view.step.tool_name),
                    Some(field),
                    pointer.to_string(),
                    format!("context key `{key}` is neither a flow input nor an output of an earlier step"),
                );
                None
            }
        }
    };
    for (field, source) in &view.step.input_mapping {
        let pointer = format!("{prefix}/input_mapping/{}", escape_token(field));
        let types = match Source::of(source) {
            Source::Literal(value) => Some(BTreeSet::from([literal_type(value).to_string()])),
            Source::Key(key) => check_path(checker, field, &pointer, &[key.to_string()]),
            Source::Pointer(text) => match pointer_tokens(text) {
                Ok(tokens) => check_path(checker, field, &pointer, &tokens),
                Err(message) => {
                    checker.push(
                        "invalid_json_pointer",
                        Severity::Error,
                        Some(view),
                        Some(&view.step.tool_name),
                        Some(field),
                        pointer.clone(),
                        message,
                    );
                    None
                }
            },
        };
        fields.push(MappedField {
            field: field.clone(),
            pointer,
            types,
        });
    }
    for (field, template) in &view.step.input_templates {
        let pointer = format!("{prefix}/input_templates/{}", escape_token(field));
        let types = match parse_template(template) {
            Err(message) => {
                checker.push(
                    "invalid_template",
                    Severity::Error,
                    Some(view),
                    Some(&view.step.tool_name),
                    Some(field),
                    pointer.clone(),
                    message,
                );
                None
            }
            Ok(parts) => {
                let mut lone = None;
                for part in &parts {
                    if let TemplatePart::Placeholder(path) = part {
                        lone = Some(check_path(checker, field, &pointer, path));
                    }
                }
                match (parts.len(), lone) {
                    (1, Some(types)) => types,
                    _ => Some(BTreeSet::from(["string".to_string()])),
                }
            }
        };
        fields.push(MappedField {
            field: field.clone(),
            pointer,
            types,
        });
    }
    fields
}

fn check_inputs(
    checker: &mut Checker,
    view: &StepView,
    prefix: &str,
    tool: &Tool,
    fields: &[MappedField],
    shape: &ContextShape,
    code_prefix: &str,
) {
    let schema = tool.input_schema();
    let props = properties(schema);
    let whole_context = view.step.input_mapping.is_empty() && view.step.input_templates.is_empty();
    let role = if code_prefix.is_empty() {
        "tool"
    } else {
        "fallback tool"
    };
    for mapped in fields {
        match props.map(|p| p.get(&mapped.field)) {
            Some(None) => checker.push(
                &format!("{code_prefix}unknown_input_field"),
                Severity::Error,
                Some(view),
                Some(tool.name()),
                Some(&mapped.field),
                mapped.pointer.clone(),
                format!(
                    "{role} `{}` has no input field `{}`",
                    tool.name(),
                    mapped.field
                ),
            ),
            Some(Some(target)) => {
                let target_types = schema_types(Some(target));
                if !compatible(&mapped.types, &target_types) {
                    checker.push(
                        &format!("{code_prefix}incompatible_mapped_type"),
                        Severity::Error,
                        Some(view),
                        Some(tool.name()),
                        Some(&mapped.field),
                        mapped.pointer.clone(),
                        format!(
                            "{role} `{}` wants {} for `{}` but the mapping gives {}",
                            tool.name(),
                            describe(&target_types),
                            mapped.field,
                            describe(&mapped.types)
                        ),
                    );
                }
            }
            None => {}
        }
    }
    for name in required(schema) {
        let supplied = if whole_context {
            shape.lookup(std::slice::from_ref(&name)).is_ok()
        } else {
            fields.iter().any(|f| f.field == name)
        };
        if !supplied {
            checker.push(
                &format!("{code_prefix}missing_required_field"),
                Severity::Error,
                Some(view),
                Some(tool.name()),
                Some(&name),
                format!("{prefix}/input_mapping"),
                format!(
                    "{role} `{}` requires input field `{name}`, which nothing supplies",
                    tool.name()
                ),
            );
        }
    }
}

fn check_output_mapping(checker: &mut Checker, view: &StepView, prefix: &str, tool: &Tool) {
    let Some(mapping) = &view.step.output_mapping else {
        return;
    };
    let props = properties(tool.output_schema());
    for (context_key, output_key) in mapping {
        let pointer = format!("{prefix}/output_mapping/{}", escape_token(context_key));
        let Some(output_key) = output_key.as_str() else {
            checker.push(
                "invalid_output_mapping",
                Severity::Error,
                Some(view),
                Some(tool.name()),
                Some(context_key),
                pointer,
                "output_mapping values must be output key names (strings)".into(),
            );
            continue;
        };
        if props.is_some_and(|p| !p.contains_key(output_key)) {
            checker.push(
                "output_mapping_unknown_key",
                Severity::Error,
                Some(view),
                Some(tool.name()),
                Some(output_key),
                pointer,
                format!("tool `{}` declares no output `{output_key}`", tool.name()),
            );
        }
    }
}

fn check_fallback_outputs(
    checker: &mut Checker,
    view: &StepView,
    prefix: &str,
    primary: &Tool,
    fallback: &Tool,
) {
    let fallback_props = properties(fallback.output_schema());
    if let Some(mapping) = &view.step.output_mapping {
        for (context_key, output_key) in mapping {
            let Some(output_key) = output_key.as_str() else {
                continue;
            };
            if fallback_props.is_some_and(|p| !p.contains_key(output_key)) {
                checker.push(
                    "fallback_output_missing_mapped_key",
                    Severity::Error,
                    Some(view),
                    Some(fallback.name()),
                    Some(output_key),
                    format!("{prefix}/output_mapping/{}", escape_token(context_key)),
                    format!(
                        "fallback tool `{}` does not produce `{output_key}`, which output_mapping needs",
                        fallback.name()
                    ),
                );
            }
        }
        return;
    }
    let (Some(primary_props), Some(fallback_props)) =
        (properties(primary.output_schema()), fallback_props)
    else {
        return;
    };
    let primary_keys: BTreeSet<&String> = primary_props.keys().collect();
    let fallback_keys: BTreeSet<&String> = fallback_props.keys().collect();
    if primary_keys != fallback_keys {
        let only_primary: Vec<&str> = primary_keys
            .difference(&fallback_keys)
            .map(|k| k.as_str())
            .collect();
        let only_fallback: Vec<&str> = fallback_keys
            .difference(&primary_keys)
            .map(|k| k.as_str())
            .collect();
        checker.push(
            "fallback_output_shape_divergence",
            Severity::Warning,
            Some(view),
            Some(fallback.name()),
            None,
            format!("{prefix}/on_error"),
            format!(
                "outputs differ: only `{}` gives [{}], only `{}` gives [{}]",
                primary.name(),
                only_primary.join(", "),
                fallback.name(),
                only_fallback.join(", ")
            ),
        );
    }
    for key in primary_keys.intersection(&fallback_keys) {
        let a = schema_types(primary_props.get(*key));
        let b = schema_types(fallback_props.get(*key));
        if !compatible(&a, &b) {
            checker.push(
                "fallback_output_type_mismatch",
                Severity::Warning,
                Some(view),
                Some(fallback.name()),
                Some(key),
                format!("{prefix}/on_error"),
                format!(
                    "output `{key}` is {} from `{}` but {} from `{}`",
                    describe(&a),
                    primary.name(),
                    describe(&b),
                    fallback.name()
                ),
            );
        }
    }
}
