//! Which steps of a linear flow have an input the schemas already prove valid, so that their
//! tool skips the input check (the output of every call is still checked).
//!
//! A step whose input maps each field from a context key (no template, literal or deeper
//! pointer) gives its tool exactly the values the context holds under those keys. When the last
//! earlier step that can write such a key
//! - surely writes it when the flow goes on (`on_error: fail`, and its output schema requires
//!   the key, or its `output_mapping` takes it from an output, which fails the step when absent),
//! - has outputs that were surely validated (not served from a step cache, which takes entries
//!   from anyone), and
//! - declares that output with the same schema (same canonical JSON, no `$` keyword in either
//!   document) as the reader's input field,
//!
//! then the value already passed that schema. If the reader's input schema says nothing but
//! `type: object`, `properties`, `required` and a boolean `additionalProperties`, and every
//! required field is mapped and every mapped field is proven (or is free under an open schema),
//! its check cannot fail. Anything else is checked as before: a key that comes from the flow
//! input, a writer that may skip, fall back or hit the cache, a map step, a DAG, a resumed run.

use chainweaver_recorder::model::flow::{FlowStep, OnError};

use super::PlanStep;
use crate::flow::mapping::Source;
use crate::tool::Tool;

/// What a step does to one context key when the flow goes on after it.
enum Write<'t> {
    /// Leaves it alone.
    Never,
    /// Sets it to a value valid under the schema with this digest.
    Proven(&'t [u8; 32]),
    /// May set it, to a value not known to be valid under anything in particular.
    Maybe,
}

/// Per step: true when its input is proven to meet its tool's input schema.
pub(super) fn proven_inputs(
    steps: &[PlanStep<'_>],
    tools: &[(&Tool, Option<&Tool>)],
    cache: bool,
) -> Vec<bool> {
    (0..steps.len().min(tools.len()))
        .map(|index| input_proven(steps, tools, cache, index))
        .collect()
}

fn input_proven(
    steps: &[PlanStep<'_>],
    tools: &[(&Tool, Option<&Tool>)],
    cache: bool,
    index: usize,
) -> bool {
    let step: &FlowStep = &steps[index].0;
    let shape = tools[index].0.input_shape();
    if !shape.exact
        || step.for_each.is_some()
        || !step.input_templates.is_empty()
        || step.input_mapping.is_empty()
    {
        return false;
    }
    let mapped = |name: &str| step.input_mapping.iter().any(|(field, _)| field == name);
    if !shape.required.iter().all(|name| mapped(name)) {
        return false;
    }
    step.input_mapping
        .iter()
        .all(|(field, source)| match shape.property(field) {
            // Not a declared property: free unless the schema is closed.
            None => !shape.closed,
            Some(digest) => source_key(source).is_some_and(|key| {
                matches!(last_write(steps, tools, cache, index, key), Write::Proven(d) if d == digest)
            }),
        })
}

/// The context key a source reads as a whole: a key, or a one-token pointer without escapes.
fn source_key(source: &serde_json::Value) -> Option<&str> {
    match Source::of(source) {
        Source::Key(key) => Some(key),
        Source::Pointer(pointer) => pointer
            .strip_prefix('/')
            .filter(|rest| !rest.contains(['/', '~'])),
        Source::Literal(_) => None,
    }
}

/// What the steps before `index` leave under `key`: the last one that may write it decides.
fn last_write<'t>(
    steps: &[PlanStep<'_>],
    tools: &[(&'t Tool, Option<&'t Tool>)],
    cache: bool,
    index: usize,
    key: &str,
) -> Write<'t> {
    for writer in (0..index).rev() {
        let (tool, fallback) = tools[writer];
        match write_of(&steps[writer].0, tool, fallback, cache, key) {
            Write::Never => continue,
            decided => return decided,
        }
    }
    // Only the flow input or a dynamic parameter can hold it: not proven.
    Write::Maybe
}

fn write_of<'t>(
    step: &FlowStep,
    tool: &'t Tool,
    fallback: Option<&'t Tool>,
    cache: bool,
    key: &str,
) -> Write<'t> {
    // A map step, or a step nesting its output under `output_key`, writes that one key.
    if step.for_each.is_some() || step.output_key.is_some() {
        return if step.output_key.as_deref() == Some(key) {
            Write::Maybe
        } else {
            Write::Never
        };
    }
    let cached = |tool: &Tool| cache && tool.cacheable();
    // The outputs are the tool's own, validated, and the flow stops when there are none.
    let sure = step.on_error == OnError::Fail && !cached(tool) && tool.output_shape().known;
    let shape = tool.output_shape();
    if let Some(mapping) = &step.output_mapping {
        let Some((_, output)) = mapping.iter().find(|(context_key, _)| *context_key == key) else {
            return Write::Never;
        };
        return match shape.property(output.as_str().unwrap_or_default()) {
            Some(digest) if sure => Write::Proven(digest),
            _ => Write::Maybe,
        };
    }
    if sure && shape.requires(key) {
        return match shape.property(key) {
            Some(digest) => Write::Proven(digest),
            None => Write::Maybe,
        };
    }
    // Every output key merges: the key is left alone only if no possible output holds it.
    let never_outputs = |tool: &Tool| {
        let shape = tool.output_shape();
        !cached(tool) && shape.known && shape.closed && shape.property(key).is_none()
    };
    let fallback_never = match (&step.on_error, fallback) {
        (OnError::Fallback(_), Some(fallback)) => never_outputs(fallback),
        (OnError::Fallback(_), None) => false,
        _ => true,
    };
    if never_outputs(tool) && fallback_never {
        Write::Never
    } else {
        Write::Maybe
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use serde_json::{Value, json};

    use super::*;

    fn tool(name: &str, input: Value, output: Value) -> Tool {
        Tool::sync(name, |input| Ok(Value::Object(input.clone())))
            .input_schema(input)
            .output_schema(output)
            .build()
            .unwrap()
    }

    fn int_schema() -> Value {
        json!({"type": "object", "properties": {"value": {"type": "integer"}}, "required": ["value"]})
    }

    fn step(tool: &str, mapping: Value) -> FlowStep {
        FlowStep::new(tool, mapping.as_object().cloned().unwrap())
    }

    fn proven(steps: Vec<FlowStep>, tools: &[&Tool], cache: bool) -> Vec<bool> {
        let plan: Vec<PlanStep<'_>> = steps.into_iter().map(|s| (Cow::Owned(s), None)).collect();
        let tools: Vec<(&Tool, Option<&Tool>)> = tools.iter().map(|t| (*t, None)).collect();
        proven_inputs(&plan, &tools, cache)
    }

    #[test]
    fn a_key_the_previous_step_must_output_with_the_same_schema_is_proven() {
        let inc = tool("inc", int_schema(), int_schema());
        let steps = vec![
            step("inc", json!({"value": "value"})),
            step("inc", json!({"value": "/value"})),
        ];
        // The first step reads the flow input: checked. The second reads step 0's output.
        assert_eq!(proven(steps, &[&inc, &inc], false), vec![false, true]);
    }

    #[test]
    fn a_weaker_or_unreliable_writer_proves_nothing() {
        let inc = tool("inc", int_schema(), int_schema());
        let number = json!({"type": "object", "properties": {"value": {"type": "number"}}, "required": ["value"]});
        let loose = tool("loose", int_schema(), number);
        let optional = tool(
            "optional",
            int_schema(),
            json!({"type": "object", "properties": {"value": {"type": "integer"}}}),
        );
        let reads = || step("inc", json!({"value": "value"}));
        // A number is not proven an integer.
        assert_eq!(
            proven(
                vec![step("loose", json!({})), reads()],
                &[&loose, &inc],
                false
            ),
            vec![false, false]
        );
        // Not required: the older value (the flow input's) may still be there.
        assert_eq!(
            proven(
                vec![step("optional", json!({})), reads()],
                &[&optional, &inc],
                false
            ),
            vec![false, false]
        );
        // A skipped failure writes nothing; a cache may serve anything.
        let mut skipping = step("inc", json!({"value": "value"}));
        skipping.on_error = OnError::Skip;
        assert_eq!(
            proven(vec![skipping, reads()], &[&inc, &inc], false),
            vec![false, false]
        );
        let cacheable = Tool::sync("inc", |input| Ok(Value::Object(input.clone())))
            .input_schema(int_schema())
            .output_schema(int_schema())
            .cacheable(true)
            .build()
            .unwrap();
        assert_eq!(
            proven(vec![reads(), reads()], &[&cacheable, &inc], true),
            vec![false, false]
        );
        assert_eq!(
            proven(vec![reads(), reads()], &[&cacheable, &inc], false),
            vec![false, true]
        );
    }

    #[test]
    fn an_open_step_in_between_may_overwrite_the_key() {
        let inc = tool("inc", int_schema(), int_schema());
        let open = tool("open", json!({"type": "object"}), json!({"type": "object"}));
        let closed = tool(
            "closed",
            json!({"type": "object"}),
            json!({"type": "object", "properties": {"other": {}}, "additionalProperties": false}),
        );
        let reads = || step("inc", json!({"value": "value"}));
        assert_eq!(
            proven(
                vec![reads(), step("open", json!({})), reads()],
                &[&inc, &open, &inc],
                false
            ),
            vec![false, false, false]
        );
        assert_eq!(
            proven(
                vec![reads(), step("closed", json!({})), reads()],
                &[&inc, &closed, &inc],
                false
            ),
            vec![false, false, true]
        );
        // An output_key elsewhere leaves the key alone; under the key itself it nests.
        let mut nested = step("open", json!({}));
        nested.output_key = Some("box".into());
        assert_eq!(
            proven(
                vec![reads(), nested.clone(), reads()],
                &[&inc, &open, &inc],
                false
            ),
            vec![false, false, true]
        );
        nested.output_key = Some("value".into());
        assert_eq!(
            proven(vec![reads(), nested, reads()], &[&inc, &open, &inc], false),
            vec![false, false, false]
        );
    }

    #[test]
    fn output_mapping_renames_and_input_schemas_must_be_plain() {
        let inc = tool("inc", int_schema(), int_schema());
        let mut renamed = step("inc", json!({"value": "value"}));
        renamed.output_mapping = json!({"count": "value"}).as_object().cloned();
        let reads_count = step("inc", json!({"value": "count"}));
        assert_eq!(
            proven(vec![renamed, reads_count], &[&inc, &inc], false),
            vec![false, true]
        );
        // A literal, a template or an extra keyword (here `minProperties`) is checked.
        let strict = tool(
            "strict",
            json!({"type": "object", "properties": {"value": {"type": "integer"}}, "required": ["value"], "minProperties": 1}),
            int_schema(),
        );
        assert_eq!(
            proven(
                vec![
                    step("inc", json!({"value": "value"})),
                    step("strict", json!({"value": "value"}))
                ],
                &[&inc, &strict],
                false
            ),
            vec![false, false]
        );
        assert_eq!(
            proven(
                vec![
                    step("inc", json!({"value": "value"})),
                    step("inc", json!({"value": 3}))
                ],
                &[&inc, &inc],
                false
            ),
            vec![false, false]
        );
        // A `$ref` anywhere makes the schemas opaque.
        let refs = json!({"type": "object", "properties": {"value": {"$ref": "#/$defs/n"}},
                          "required": ["value"], "$defs": {"n": {"type": "integer"}}});
        let by_ref = tool("by_ref", refs.clone(), refs);
        assert_eq!(
            proven(
                vec![
                    step("by_ref", json!({"value": "value"})),
                    step("by_ref", json!({"value": "value"}))
                ],
                &[&by_ref, &by_ref],
                false
            ),
            vec![false, false]
        );
    }

    /// Runs a flow of two steps: `scale` (`value -> scale(value)`, its output schema declaring
    /// `value` as `first_output`), then `inc`, whose input requires an integer.
    fn run_two(first_output: Value, scale: fn(i64) -> Value) -> crate::executor::ExecutionResult {
        use crate::executor::{FlowExecutor, RunOptions};
        use chainweaver_recorder::model::flow::FlowDefinition;
        let scale = Tool::sync("scale", move |input| {
            let value = input.get("value").and_then(Value::as_i64).unwrap_or(0);
            Ok(json!({"value": scale(value)}))
        })
        .input_schema(int_schema())
        .output_schema(first_output)
        .build()
        .unwrap();
        let mut tools = crate::tool::ToolRegistry::new();
        tools.register(scale);
        tools.register(tool("inc", int_schema(), int_schema()));
        let flow = FlowDefinition::from_value(json!({"name": "two", "steps": [
            {"tool_name": "scale", "input_mapping": {"value": "value"}},
            {"tool_name": "inc", "input_mapping": {"value": "value"}}
        ]}))
        .unwrap();
        let input = json!({"value": 3}).as_object().cloned().unwrap();
        FlowExecutor::new(tools)
            .execute(&flow, input, &RunOptions::default())
            .unwrap()
    }

    #[test]
    fn an_input_the_schemas_do_not_prove_is_still_checked_where_it_was() {
        // `number` does not prove `integer`: 1.5 fails step 1's input check, as without proofs.
        let number = json!({"type": "object", "properties": {"value": {"type": "number"}}, "required": ["value"]});
        let result = run_two(number, |v| json!(v as f64 / 2.0));
        assert!(!result.success);
        let failed = &result.execution_log[1];
        assert_eq!(failed.step_index, 1);
        assert_eq!(failed.error_type.as_deref(), Some("SchemaValidationError"));
        assert!(
            failed
                .error_message
                .as_deref()
                .unwrap_or_default()
                .contains("`inc`: input failed"),
            "{failed:?}"
        );
        assert_eq!(failed.inputs["value"], json!(1.5));
        // With an integer output schema the bad value is caught one step earlier, by the
        // writer's own output check, which a proof never skips.
        let result = run_two(int_schema(), |v| json!(v as f64 / 2.0));
        assert!(!result.success);
        assert_eq!(result.execution_log.len(), 1);
        let failed = &result.execution_log[0];
        assert_eq!(failed.error_type.as_deref(), Some("SchemaValidationError"));
        assert!(
            failed
                .error_message
                .as_deref()
                .unwrap_or_default()
                .contains("`scale`: output failed"),
            "{failed:?}"
        );
        // And a proven input runs as before.
        let result = run_two(int_schema(), |v| json!(v * 2));
        assert!(result.success, "{result:?}");
        assert_eq!(result.final_output.unwrap()["value"], json!(6));
    }
}
