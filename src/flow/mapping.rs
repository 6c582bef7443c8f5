//! Building a step's input from the context, and merging its output back.
//!
//! `input_mapping` values: a plain string is a top-level context key, a string starting with `/`
//! is an RFC 6901 JSON pointer into the context, anything else is a literal. No mapping (and no
//! templates) passes the whole context. `input_templates` fill `{{key}}` / `{{key.path}}`
//! placeholders. `output_mapping` `{context key: output key}` renames and prunes outputs;
//! `output_key` nests the whole output under one key.

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::tool::JsonObject;

use chainweaver_recorder::model::flow::FlowStep;

/// Where one input field comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source<'a> {
    /// A top-level context key.
    Key(&'a str),
    /// A JSON pointer into the context.
    Pointer(&'a str),
    /// A constant.
    Literal(&'a Value),
}

impl<'a> Source<'a> {
    /// Classify one `input_mapping` value.
    pub fn of(value: &'a Value) -> Self {
        match value {
            Value::String(text) if text.starts_with('/') => Source::Pointer(text),
            Value::String(text) => Source::Key(text),
            other => Source::Literal(other),
        }
    }

    /// The top-level context key this source reads, if any.
    pub fn root_key(&self) -> Option<String> {
        match self {
            Source::Key(key) => Some((*key).to_string()),
            Source::Pointer(pointer) => pointer_tokens(pointer)
                .ok()
                .and_then(|tokens| tokens.into_iter().next()),
            Source::Literal(_) => None,
        }
    }
}

/// Split an RFC 6901 pointer into unescaped tokens; `Err` names what is wrong.
pub fn pointer_tokens(pointer: &str) -> Result<Vec<String>, String> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(format!("JSON pointer `{pointer}` must start with `/`"));
    };
    rest.split('/')
        .map(|token| {
            let mut out = String::with_capacity(token.len());
            let mut chars = token.chars();
            while let Some(c) = chars.next() {
                if c == '~' {
                    match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => {
                            return Err(format!(
                                "JSON pointer `{pointer}`: `~` must be followed by 0 or 1"
                            ));
                        }
                    }
                } else {
                    out.push(c);
                }
            }
            Ok(out)
        })
        .collect()
}

/// Escape one token for a JSON pointer.
pub fn escape_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Follow unescaped pointer tokens from `value`.
pub fn follow<'v>(value: &'v Value, tokens: &[String]) -> Option<&'v Value> {
    let mut current = value;
    for token in tokens {
        current = follow_token(current, token)?;
    }
    Some(current)
}

/// One pointer step: an object key, or an array index without sign or leading zero.
fn follow_token<'v>(current: &'v Value, token: &str) -> Option<&'v Value> {
    match current {
        Value::Object(map) => map.get(token),
        Value::Array(items) => {
            if token.starts_with('+') || (token.len() > 1 && token.starts_with('0')) {
                return None;
            }
            items.get(token.parse::<usize>().ok()?)
        }
        _ => None,
    }
}

/// Resolve a JSON pointer against the context object.
pub fn resolve_pointer<'c>(context: &'c JsonObject, pointer: &str) -> Result<&'c Value, String> {
    StepContext::Context(context).resolve_pointer(pointer)
}

/// Parsed `{{...}}` template pieces.
#[derive(Debug, Clone, PartialEq)]
pub enum TemplatePart {
    Text(String),
    /// A dotted path: first the context key, then object keys or array indexes.
    Placeholder(Vec<String>),
}

/// Split a template into text and placeholders; `Err` for an unclosed `{{`.
pub fn parse_template(template: &str) -> Result<Vec<TemplatePart>, String> {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        if open > 0 {
            parts.push(TemplatePart::Text(rest[..open].to_string()));
        }
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            return Err(format!("template `{template}` has an unclosed `{{{{`"));
        };
        let path = after[..close].trim();
        if path.is_empty() {
            return Err(format!("template `{template}` has an empty placeholder"));
        }
        parts.push(TemplatePart::Placeholder(
            path.split('.').map(|s| s.trim().to_string()).collect(),
        ));
        rest = &after[close + 2..];
    }
    if !rest.is_empty() {
        parts.push(TemplatePart::Text(rest.to_string()));
    }
    Ok(parts)
}

/// Fill a template from the context. Exactly one placeholder and nothing else yields the value
/// itself; otherwise the result is a string (strings inserted as is, other values as JSON).
pub fn render_template(template: &str, context: &JsonObject) -> Result<Value, String> {
    render_in(template, StepContext::Context(context))
}

fn render_in(template: &str, context: StepContext<'_>) -> Result<Value, String> {
    let parts = parse_template(template)?;
    let lookup = |path: &[String]| -> Result<Value, String> {
        let (first, rest) = path
            .split_first()
            .ok_or_else(|| "empty placeholder".to_string())?;
        let root = context
            .get(first)
            .ok_or_else(|| format!("`{{{{{}}}}}`: context has no key `{first}`", path.join(".")))?;
        follow(root, rest).cloned().ok_or_else(|| {
            format!(
                "`{{{{{}}}}}` matches nothing in the context",
                path.join(".")
            )
        })
    };
    if let [TemplatePart::Placeholder(path)] = parts.as_slice() {
        return lookup(path);
    }
    let mut out = String::new();
    for part in &parts {
        match part {
            TemplatePart::Text(text) => out.push_str(text),
            TemplatePart::Placeholder(path) => match lookup(path)? {
                Value::String(text) => out.push_str(&text),
                other => out.push_str(&other.to_string()),
            },
        }
    }
    Ok(Value::String(out))
}

/// What a step reads its input from: the flow's context, or, for one iteration of a map step,
/// the context with the current element under the item key. The element is looked up in place
/// rather than copied into a scoped context, so an iteration copies only what its input holds.
#[derive(Debug, Clone, Copy)]
pub enum StepContext<'a> {
    Context(&'a JsonObject),
    /// `context` with `element` under `item_key` (shadowing a context key of that name).
    Item {
        context: &'a JsonObject,
        item_key: &'a str,
        element: &'a Value,
    },
}

impl<'a> StepContext<'a> {
    /// The value of a top-level key.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        match *self {
            StepContext::Context(context) => context.get(key),
            StepContext::Item {
                context,
                item_key,
                element,
            } => {
                if key == item_key {
                    Some(element)
                } else {
                    context.get(key)
                }
            }
        }
    }

    /// Resolve a JSON pointer (as [`resolve_pointer`]).
    pub fn resolve_pointer(&self, pointer: &str) -> Result<&'a Value, String> {
        // Without `~` no token needs unescaping: walk the borrowed tokens (a step input is
        // resolved once per call, so this is on the hot path).
        if !pointer.contains('~')
            && let Some(rest) = pointer.strip_prefix('/')
        {
            let mut tokens = rest.split('/');
            let first = tokens.next().unwrap_or_default();
            let mut current = self
                .get(first)
                .ok_or_else(|| format!("JSON pointer `{pointer}`: context has no key `{first}`"))?;
            for token in tokens {
                current = follow_token(current, token).ok_or_else(|| {
                    format!("JSON pointer `{pointer}` matches nothing in the context")
                })?;
            }
            return Ok(current);
        }
        let tokens = pointer_tokens(pointer)?;
        let Some((first, rest)) = tokens.split_first() else {
            return Err("the empty pointer names the whole context, not a field".into());
        };
        let root = self
            .get(first)
            .ok_or_else(|| format!("JSON pointer `{pointer}`: context has no key `{first}`"))?;
        follow(root, rest)
            .ok_or_else(|| format!("JSON pointer `{pointer}` matches nothing in the context"))
    }

    /// The whole context as the tool's input, only the `declared` keys when given; the item
    /// where inserting it into a copy of the context would put it (last, unless it shadows a
    /// key).
    fn to_object(self, declared: Option<&JsonObject>) -> JsonObject {
        let keep = |key: &str| declared.is_none_or(|properties| properties.contains_key(key));
        match self {
            StepContext::Context(context) if declared.is_none() => context.clone(),
            StepContext::Context(context) => context
                .iter()
                .filter(|(key, _)| keep(key.as_str()))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
            StepContext::Item {
                context,
                item_key,
                element,
            } => {
                let mut object: JsonObject = context
                    .iter()
                    .filter(|(key, _)| keep(key.as_str()))
                    .map(|(key, value)| {
                        let value = if key.as_str() == item_key {
                            element.clone()
                        } else {
                            value.clone()
                        };
                        (key.clone(), value)
                    })
                    .collect();
                if keep(item_key) && !context.contains_key(item_key) {
                    object.insert(item_key.to_string(), element.clone());
                }
                object
            }
        }
    }
}

/// Build a step's tool input from the context. `input_schema` lets a whole-context input drop
/// keys a closed schema (`additionalProperties: false`) would reject.
pub fn build_input(
    step: &FlowStep,
    step_index: usize,
    context: &JsonObject,
    input_schema: &Value,
) -> Result<JsonObject> {
    build_input_from(
        step,
        step_index,
        StepContext::Context(context),
        input_schema,
    )
}

/// [`build_input`] over a [`StepContext`]: what a map step's iteration reads is exactly what
/// [`build_input`] would read from its [`iteration_context`].
pub fn build_input_from(
    step: &FlowStep,
    step_index: usize,
    context: StepContext<'_>,
    input_schema: &Value,
) -> Result<JsonObject> {
    let fail = |field: &str, message: String| Error::InputMapping {
        step: step_index,
        tool: step.tool_name.clone(),
        field: field.to_string(),
        message,
    };
    if step.input_mapping.is_empty() && step.input_templates.is_empty() {
        let closed = input_schema.get("additionalProperties") == Some(&Value::Bool(false));
        let declared = input_schema.get("properties").and_then(Value::as_object);
        return Ok(match (closed, declared) {
            (true, Some(properties)) => context.to_object(Some(properties)),
            _ => context.to_object(None),
        });
    }
    let mut input = Map::with_capacity(step.input_mapping.len() + step.input_templates.len());
    for (field, source) in &step.input_mapping {
        let value = match Source::of(source) {
            Source::Key(key) => context
                .get(key)
                .cloned()
                .ok_or_else(|| fail(field, format!("context has no key `{key}`")))?,
            Source::Pointer(pointer) => context
                .resolve_pointer(pointer)
                .cloned()
                .map_err(|message| fail(field, message))?,
            Source::Literal(value) => value.clone(),
        };
        input.insert(field.clone(), value);
    }
    for (field, template) in &step.input_templates {
        let value = render_in(template, context).map_err(|message| fail(field, message))?;
        input.insert(field.clone(), value);
    }
    Ok(input)
}

/// The context one iteration of a map step reads: the context keys the step's mapping and
/// templates read (all of them when it has neither: the tool gets the whole context), plus the
/// current element under `item_key`. Only the keys read are copied, so a long list is not
/// copied once per element.
pub fn iteration_context(
    step: &FlowStep,
    context: &JsonObject,
    item_key: &str,
    element: &Value,
) -> JsonObject {
    let mut scoped = if step.input_mapping.is_empty() && step.input_templates.is_empty() {
        context.clone()
    } else {
        let mut scoped = Map::new();
        let mut copy = |key: &str| {
            if key != item_key
                && !scoped.contains_key(key)
                && let Some(value) = context.get(key)
            {
                scoped.insert(key.to_string(), value.clone());
            }
        };
        for source in step.input_mapping.values() {
            if let Some(key) = Source::of(source).root_key() {
                copy(&key);
            }
        }
        for template in step.input_templates.values() {
            for part in parse_template(template).unwrap_or_default() {
                if let TemplatePart::Placeholder(path) = part
                    && let Some(key) = path.first()
                {
                    copy(key);
                }
            }
        }
        scoped
    };
    scoped.insert(item_key.to_string(), element.clone());
    scoped
}

/// What a step's outputs contribute to the context: `output_mapping` applied (a missing
/// output key is an [`Error::OutputMapping`]), then `output_key` nesting.
pub fn mapped_outputs(
    step: &FlowStep,
    step_index: usize,
    outputs: &JsonObject,
) -> Result<JsonObject> {
    let mapped = output_mapped(step, step_index, outputs)?;
    Ok(match &step.output_key {
        Some(key) => {
            let mut nested = Map::with_capacity(1);
            nested.insert(key.clone(), Value::Object(mapped));
            nested
        }
        None => mapped,
    })
}

/// A step's outputs with `output_mapping` applied (a missing output key is an
/// [`Error::OutputMapping`]) and no `output_key` nesting: one map step iteration's result.
pub fn output_mapped(
    step: &FlowStep,
    step_index: usize,
    outputs: &JsonObject,
) -> Result<JsonObject> {
    Ok(match &step.output_mapping {
        None => outputs.clone(),
        Some(mapping) => {
            let mut mapped = Map::with_capacity(mapping.len());
            for (context_key, output_key) in mapping {
                let output_key = output_key.as_str().unwrap_or_default();
                let value = outputs
                    .get(output_key)
                    .ok_or_else(|| Error::OutputMapping {
                        step: step_index,
                        tool: step.tool_name.clone(),
                        output_key: output_key.to_string(),
                    })?;
                mapped.insert(context_key.clone(), value.clone());
            }
            mapped
        }
    })
}

/// The error [`output_mapped`] gives for these outputs, without copying them.
pub fn check_output_mapping(
    step: &FlowStep,
    step_index: usize,
    outputs: &JsonObject,
) -> Result<()> {
    let Some(mapping) = &step.output_mapping else {
        return Ok(());
    };
    for output_key in mapping.values() {
        let output_key = output_key.as_str().unwrap_or_default();
        if !outputs.contains_key(output_key) {
            return Err(Error::OutputMapping {
                step: step_index,
                tool: step.tool_name.clone(),
                output_key: output_key.to_string(),
            });
        }
    }
    Ok(())
}

/// Merge a step's outputs into the context as merging [`mapped_outputs`] would, copying each
/// value once and reusing the context's keys. Outputs the mapping names but that are missing
/// are left out ([`check_output_mapping`] is what reports them).
pub fn merge_outputs_into(context: &mut JsonObject, step: &FlowStep, outputs: &JsonObject) {
    fn set(context: &mut JsonObject, key: &str, value: Value) {
        match context.get_mut(key) {
            Some(slot) => *slot = value,
            None => {
                context.insert(key.to_string(), value);
            }
        }
    }
    match (&step.output_key, &step.output_mapping) {
        (None, None) => {
            for (key, value) in outputs {
                set(context, key, value.clone());
            }
        }
        (None, Some(mapping)) => {
            for (context_key, output_key) in mapping {
                if let Some(value) = outputs.get(output_key.as_str().unwrap_or_default()) {
                    set(context, context_key, value.clone());
                }
            }
        }
        (Some(key), None) => set(context, key, Value::Object(outputs.clone())),
        (Some(key), Some(mapping)) => {
            let nested: JsonObject = mapping
                .iter()
                .filter_map(|(context_key, output_key)| {
                    outputs
                        .get(output_key.as_str().unwrap_or_default())
                        .map(|value| (context_key.clone(), value.clone()))
                })
                .collect();
            set(context, key, Value::Object(nested));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn pointers_unescape_and_reject_bad_escapes() {
        assert_eq!(pointer_tokens("/a~1b/c~0d").unwrap(), vec!["a/b", "c~d"]);
        assert!(pointer_tokens("/a~2").is_err());
        let context = ctx(json!({"user": {"tags": ["x", "y"]}}));
        assert_eq!(
            resolve_pointer(&context, "/user/tags/1").unwrap(),
            &json!("y")
        );
        assert!(resolve_pointer(&context, "/user/tags/01").is_err());
        assert!(resolve_pointer(&context, "/nobody").is_err());
    }

    #[test]
    fn an_iteration_context_holds_the_keys_the_mapping_reads_and_the_item() {
        let context =
            ctx(json!({"orders": [1, 2, 3], "region": "eu", "user": {"id": 7}, "big": "x"}));
        let mut step = FlowStep::new(
            "t",
            ctx(json!({"order": "/item/id", "region": "region", "n": 3})),
        );
        step.input_templates
            .insert("who".into(), "user {{user.id}} in {{region}}".into());
        let scoped = iteration_context(&step, &context, "item", &json!({"id": 2}));
        assert_eq!(
            Value::Object(scoped),
            json!({"item": {"id": 2}, "region": "eu", "user": {"id": 7}})
        );
        // No mapping: the whole context, the item added (and shadowing a key of that name).
        let whole = FlowStep::new("t", Map::new());
        let scoped = iteration_context(&whole, &context, "big", &json!(1));
        assert_eq!(scoped.len(), 4);
        assert_eq!(scoped["big"], json!(1));
    }

    #[test]
    fn an_item_context_reads_what_the_iteration_context_holds() {
        let context = ctx(json!({"orders": [1, 2], "region": "eu", "item": "shadowed", "n": 1}));
        let element = json!({"id": 2, "tags": ["a"]});
        let item = StepContext::Item {
            context: &context,
            item_key: "item",
            element: &element,
        };
        let mut templated = FlowStep::new(
            "t",
            ctx(json!({"order": "/item/id", "tag": "/item/tags/0", "region": "region", "k": 3})),
        );
        templated
            .input_templates
            .insert("who".into(), "{{item.id}} in {{region}}".into());
        let whole = FlowStep::new("t", Map::new());
        let missing = FlowStep::new("t", ctx(json!({"x": "/item/nope"})));
        let open = json!({"type": "object"});
        let closed = json!({"type": "object", "properties": {"item": {}, "n": {}},
                            "additionalProperties": false});
        for step in [&templated, &whole, &missing] {
            for schema in [&open, &closed] {
                let scoped = iteration_context(step, &context, "item", &element);
                let expected = build_input(step, 0, &scoped, schema).map_err(|e| e.to_string());
                let got = build_input_from(step, 0, item, schema).map_err(|e| e.to_string());
                assert_eq!(got, expected);
                // Same keys in the same order, too.
                if let (Ok(got), Ok(expected)) = (got, expected) {
                    assert!(got.keys().eq(expected.keys()));
                }
            }
        }
        // An item key the context lacks goes last.
        let fresh = StepContext::Item {
            context: &context,
            item_key: "new",
            element: &element,
        };
        let input = build_input_from(&whole, 0, fresh, &open).unwrap();
        assert_eq!(input.keys().next_back().map(String::as_str), Some("new"));
    }

    #[test]
    fn merging_from_outputs_matches_merging_the_mapped_outputs() {
        let outputs = ctx(json!({"a": 1, "b": {"c": 2}, "d": 3}));
        let context = ctx(json!({"z": 0, "a": "old", "x": 9}));
        let mut steps = vec![FlowStep::new("t", Map::new())];
        let mut mapped = FlowStep::new("t", Map::new());
        mapped.output_mapping = ctx(json!({"x": "b", "new": "a"})).into();
        steps.push(mapped.clone());
        let mut keyed = FlowStep::new("t", Map::new());
        keyed.output_key = Some("z".into());
        steps.push(keyed.clone());
        keyed.output_mapping = mapped.output_mapping.clone();
        steps.push(keyed);
        for step in &steps {
            let mut expected = context.clone();
            for (key, value) in mapped_outputs(step, 0, &outputs).unwrap() {
                expected.insert(key, value);
            }
            let mut got = context.clone();
            merge_outputs_into(&mut got, step, &outputs);
            assert_eq!(got, expected);
            assert!(got.keys().eq(expected.keys()));
        }
        let mut missing = FlowStep::new("t", Map::new());
        missing.output_mapping = ctx(json!({"x": "nope"})).into();
        assert_eq!(
            check_output_mapping(&missing, 2, &outputs).map_err(|e| e.to_string()),
            output_mapped(&missing, 2, &outputs)
                .map(|_| ())
                .map_err(|e| e.to_string())
        );
        assert!(check_output_mapping(&mapped, 2, &outputs).is_ok());
    }

    #[test]
    fn templates_keep_types_for_a_lone_placeholder_and_interpolate_otherwise() {
        let context = ctx(json!({"env": "prod", "n": 3, "pr": {"number": 12}}));
        assert_eq!(render_template("{{n}}", &context).unwrap(), json!(3));
        assert_eq!(
            render_template("{{ pr.number }}", &context).unwrap(),
            json!(12)
        );
        assert_eq!(
            render_template("Deployed to {{env}}: #{{pr.number}}", &context).unwrap(),
            json!("Deployed to prod: #12")
        );
        assert_eq!(
            render_template("#general", &context).unwrap(),
            json!("#general")
        );
        assert!(render_template("{{missing}}", &context).is_err());
        assert!(render_template("{{open", &context).is_err());
    }
}
