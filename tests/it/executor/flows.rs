//! Flow semantics: input mappings, pointers, literals, output mapping, retries, on_error paths,
//! fallbacks, dynamic parameters, flow files.

use std::time::{Duration, Instant};

use chainweaver::executor::{ExecutionResult, FlowExecutor, REDACTED, RunOptions};
use chainweaver::tool::{Tool, ToolFailure};
use serde_json::{Value, json};

use super::{Calls, add_tool, failing_tool, flow, obj, registry, schema};

/// A tool that returns its input under `got`.
fn echo(name: &str) -> Tool {
    Tool::sync(name, |input| Ok(json!({"got": input})))
        .build()
        .unwrap()
}

fn run(executor: &FlowExecutor, flow_value: Value, input: Value) -> ExecutionResult {
    executor
        .execute(&flow(flow_value), obj(input), &RunOptions::default())
        .unwrap()
}

#[test]
fn mappings_read_keys_pointers_and_literals() {
    let executor = FlowExecutor::new(registry(vec![echo("echo")]));
    // Parsed from text so the literal 10.50 keeps its exact spelling.
    let definition: Value = serde_json::from_str(
        r#"{"name": "m", "steps": [{"tool_name": "echo", "input_mapping": {
            "plain": "user_id",
            "city": "/user/address/city",
            "second_tag": "/user/tags/1",
            "escaped": "/odd~1key",
            "limit": 10.50,
            "flag": false,
            "nothing": null,
            "list": [1, "a"]
        }}]}"#,
    )
    .unwrap();
    let result = run(
        &executor,
        definition,
        json!({"user_id": 7, "user": {"address": {"city": "Oslo"}, "tags": ["a", "b"]}, "odd/key": "slash"}),
    );
    assert!(result.success, "{result:?}");
    let got = &result.execution_log[0].outputs.as_ref().unwrap()["got"];
    let expected: Value = serde_json::from_str(
        r#"{"plain": 7, "city": "Oslo", "second_tag": "b", "escaped": "slash", "limit": 10.50,
            "flag": false, "nothing": null, "list": [1, "a"]}"#,
    )
    .unwrap();
    assert_eq!(got, &expected);
    // The literal keeps its exact number text.
    assert!(serde_json::to_string(got).unwrap().contains("10.50"));
}

#[test]
fn an_empty_mapping_passes_the_whole_context_and_outputs_accumulate() {
    let calls = Calls::default();
    let executor = FlowExecutor::new(registry(vec![add_tool(&calls), echo("echo")]));
    let result = run(
        &executor,
        json!({"name": "acc", "steps": [
            {"tool_name": "add", "input_mapping": {"a": "x", "b": "y"}},
            {"tool_name": "echo"}
        ]}),
        json!({"x": 1, "y": 2}),
    );
    let got = &result.execution_log[1].outputs.as_ref().unwrap()["got"];
    assert_eq!(got, &json!({"x": 1, "y": 2, "sum": 3.0}));
    assert_eq!(result.final_output.unwrap()["got"]["sum"], json!(3.0));
}

#[test]
fn a_missing_key_or_pointer_fails_the_step_naming_field_and_source() {
    let executor = FlowExecutor::new(registry(vec![echo("echo")]));
    let result = run(
        &executor,
        json!({"name": "m", "steps": [{"tool_name": "echo", "input_mapping": {"city": "/user/address/zip"}}]}),
        json!({"user": {"address": {}}}),
    );
    assert!(!result.success);
    let record = &result.execution_log[0];
    assert_eq!(record.error_type.as_deref(), Some("InputMappingError"));
    let message = record.error_message.as_deref().unwrap();
    assert!(
        message.contains("city") && message.contains("/user/address/zip"),
        "{message}"
    );
    assert!(result.final_output.is_none());
}

#[test]
fn output_mapping_renames_prunes_and_a_missing_key_fails_but_keeps_raw_outputs() {
    let calls = Calls::default();
    let executor = FlowExecutor::new(registry(vec![add_tool(&calls), echo("echo")]));
    let result = run(
        &executor,
        json!({"name": "om", "steps": [
            {"tool_name": "add", "input_mapping": {"a": "x", "b": "y"}, "output_mapping": {"total": "sum"}},
            {"tool_name": "echo"}
        ]}),
        json!({"x": 1, "y": 2}),
    );
    let context = result.final_output.unwrap();
    assert_eq!(context["total"], json!(3.0));
    assert!(!context.contains_key("sum"), "unmapped outputs are pruned");

    let result = run(
        &executor,
        json!({"name": "om", "steps": [
            {"tool_name": "add", "input_mapping": {"a": "x", "b": "y"}, "output_mapping": {"total": "difference"}}
        ]}),
        json!({"x": 1, "y": 2}),
    );
    assert!(!result.success);
    let record = &result.execution_log[0];
    assert_eq!(record.error_type.as_deref(), Some("OutputMappingError"));
    assert!(
        record
            .error_message
            .as_deref()
            .unwrap()
            .contains("difference")
    );
    assert_eq!(
        record.outputs.as_ref().unwrap()["sum"],
        json!(3.0),
        "raw outputs still recorded"
    );
}

#[test]
fn retries_are_counted_and_back_off_deterministically() {
    let calls = Calls::default();
    let counter = calls.clone();
    let flaky = Tool::sync("flaky", move |_| {
        counter.bump();
        if counter.get() < 3 {
            Err(ToolFailure::new("not yet"))
        } else {
            Ok(json!({"ok": true}))
        }
    })
    .build()
    .unwrap();
    let executor = FlowExecutor::new(registry(vec![flaky]));
    let start = Instant::now();
    let result = run(
        &executor,
        json!({"name": "r", "steps": [{"tool_name": "flaky",
            "retry_policy": {"max_retries": 3, "backoff_seconds": 0.05, "backoff_multiplier": 2.0}}]}),
        json!({}),
    );
    assert!(result.success, "{result:?}");
    assert_eq!(calls.get(), 3);
    assert_eq!(result.execution_log[0].attempts, 3);
    // 0.05 + 0.10 seconds of backoff before the third try.
    assert!(
        start.elapsed() >= Duration::from_millis(150),
        "{:?}",
        start.elapsed()
    );

    let calls = Calls::default();
    let executor = FlowExecutor::new(registry(vec![failing_tool("down", "still down", &calls)]));
    let result = run(
        &executor,
        json!({"name": "r", "steps": [{"tool_name": "down", "retry_policy": {"max_retries": 2}}]}),
        json!({}),
    );
    assert!(!result.success);
    assert_eq!(calls.get(), 3, "one try and two retries");
    assert_eq!(
        result.execution_log[0].error_type.as_deref(),
        Some("ValueError")
    );
}

#[test]
fn input_schema_failures_are_not_retried() {
    let calls = Calls::default();
    let executor = FlowExecutor::new(registry(vec![add_tool(&calls)]));
    let result = run(
        &executor,
        json!({"name": "r", "steps": [{"tool_name": "add", "input_mapping": {"a": "x", "b": "x"},
            "retry_policy": {"max_retries": 5}}]}),
        json!({"x": "not a number"}),
    );
    assert_eq!(calls.get(), 0);
    let record = &result.execution_log[0];
    assert_eq!(record.error_type.as_deref(), Some("SchemaValidationError"));
    assert!(
        record.error_message.as_deref().unwrap().contains("/a"),
        "{record:?}"
    );
}

#[test]
fn on_error_fail_stops_the_flow() {
    let calls = Calls::default();
    let after = Calls::default();
    let executor = FlowExecutor::new(registry(vec![
        failing_tool("down", "boom", &calls),
        add_tool(&after),
    ]));
    let result = run(
        &executor,
        json!({"name": "f", "steps": [{"tool_name": "down"}, {"tool_name": "add", "input_mapping": {"a": 1, "b": 2}}]}),
        json!({}),
    );
    assert!(!result.success);
    assert_eq!(result.execution_log.len(), 1);
    assert_eq!(after.get(), 0);
    assert!(result.final_output.is_none());
}

#[test]
fn on_error_skip_records_the_failure_and_goes_on() {
    let calls = Calls::default();
    let after = Calls::default();
    let executor = FlowExecutor::new(registry(vec![
        failing_tool("down", "boom", &calls),
        add_tool(&after),
    ]));
    let result = run(
        &executor,
        json!({"name": "s", "steps": [
            {"tool_name": "down", "on_error": "skip"},
            {"tool_name": "add", "input_mapping": {"a": 1, "b": 2}}
        ]}),
        json!({}),
    );
    assert!(result.success);
    assert_eq!(result.execution_log.len(), 2);
    let skipped = &result.execution_log[0];
    assert!(!skipped.success && skipped.skipped);
    assert_eq!(
        skipped.error_message.as_deref(),
        Some("tool `down` failed (ValueError): boom")
    );
    assert_eq!(after.get(), 1);
    assert_eq!(result.final_output.unwrap()["sum"], json!(3.0));
}

#[test]
fn on_error_fallback_gets_the_same_input_and_keeps_the_primary_name() {
    let calls = Calls::default();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let seen_in = seen.clone();
    let backup = Tool::sync("add_backup", move |input| {
        *seen_in.lock().unwrap() = Some(input.clone());
        Ok(json!({"sum": -1}))
    })
    .input_schema(schema(
        json!({"a": {"type": "number"}, "b": {"type": "number"}}),
        &["a", "b"],
    ))
    .build()
    .unwrap();
    let executor = FlowExecutor::new(registry(vec![
        failing_tool("add", "primary down", &calls),
        backup,
    ]));
    let result = run(
        &executor,
        json!({"name": "fb", "steps": [{"tool_name": "add", "input_mapping": {"a": "x", "b": 4},
            "on_error": "fallback:add_backup", "retry_policy": {"max_retries": 1}}]}),
        json!({"x": 3}),
    );
    assert!(result.success, "{result:?}");
    assert_eq!(calls.get(), 2, "the primary exhausts its attempts first");
    let record = &result.execution_log[0];
    assert_eq!(record.tool_name, "add");
    assert!(record.fallback_used);
    assert_eq!(record.fallback_tool_name.as_deref(), Some("add_backup"));
    assert_eq!(
        seen.lock().unwrap().clone().unwrap(),
        obj(json!({"a": 3, "b": 4}))
    );
    assert_eq!(result.final_output.unwrap()["sum"], json!(-1));
}

#[test]
fn a_fallback_schema_failure_is_attributed_to_the_fallback() {
    let calls = Calls::default();
    let strict_backup = Tool::sync("strict_backup", |_| Ok(json!({"sum": 0})))
        .input_schema(schema(json!({"a": {"type": "string"}}), &["a"]))
        .build()
        .unwrap();
    let executor = FlowExecutor::new(registry(vec![
        failing_tool("add", "down", &calls),
        strict_backup,
    ]));
    let result = run(
        &executor,
        json!({"name": "fb", "steps": [{"tool_name": "add", "input_mapping": {"a": 3},
            "on_error": "fallback:strict_backup"}]}),
        json!({}),
    );
    assert!(!result.success);
    let record = &result.execution_log[0];
    assert_eq!(record.tool_name, "add");
    assert!(record.fallback_used);
    assert_eq!(record.error_type.as_deref(), Some("SchemaValidationError"));
    let message = record.error_message.as_deref().unwrap();
    assert!(message.starts_with("tool `strict_backup`"), "{message}");
}

#[test]
fn dynamic_params_reach_every_step_skip_validation_and_are_redacted() {
    let token_seen = Calls::default();
    let counter = token_seen.clone();
    let auth = Tool::sync("auth", move |input| {
        if input.get("token") == Some(&json!("s3cret-token")) {
            counter.bump();
        }
        Ok(json!({"echo": input.get("token").cloned().unwrap_or(Value::Null)}))
    })
    .build()
    .unwrap();
    let executor = FlowExecutor::new(registry(vec![auth]));
    let definition = flow(json!({"name": "dp",
    "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": false},
    "steps": [
        {"tool_name": "auth", "input_mapping": {"token": "token", "q": "q"}, "output_mapping": {"first": "echo"}},
        {"tool_name": "auth", "input_mapping": {"token": "/token"}}
    ]}));
    let options = RunOptions {
        dynamic_params: obj(json!({"token": "s3cret-token"})),
    };
    let result = executor
        .execute(&definition, obj(json!({"q": "x"})), &options)
        .unwrap();
    assert!(result.success, "{result:?}");
    assert_eq!(token_seen.get(), 2, "both steps received the real token");
    let text = serde_json::to_string(&result).unwrap();
    assert!(
        !text.contains("s3cret-token"),
        "the secret leaked into the trace: {text}"
    );
    assert_eq!(result.execution_log[0].inputs["token"], json!(REDACTED));
    assert_eq!(
        result.final_output.as_ref().unwrap()["token"],
        json!(REDACTED)
    );
    // Passing the secret as flow input instead fails the closed input schema: dynamic params
    // are not part of it.
    let result = executor
        .execute(
            &definition,
            obj(json!({"q": "x", "token": "s3cret-token"})),
            &RunOptions::default(),
        )
        .unwrap();
    assert!(!result.success);
    assert_eq!(result.execution_log[0].step_index, -1);
}

#[test]
fn flow_files_in_json_and_yaml_load_and_bad_ones_name_the_problem() {
    let flows = super::datasets().join("flows");
    let calc = chainweaver::flow::load_flow_file(&flows.join("calc.json")).unwrap();
    assert_eq!(calc.name(), "calc");
    let fanout = chainweaver::flow::load_flow_file(&flows.join("fanout.yaml")).unwrap();
    assert!(matches!(
        fanout,
        chainweaver::recorder::model::flow::FlowDefinition::Dag(_)
    ));

    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\n  \"name\": \"x\",\n  \"steps\": [\n}").unwrap();
    let err = chainweaver::flow::load_flow_file(&broken).unwrap_err();
    assert_eq!(err.code(), "invalid_flow_file");
    assert!(err.to_string().contains("broken.json:4"), "{err}");
    let yaml = dir.path().join("bad.yaml");
    std::fs::write(
        &yaml,
        "name: x\nsteps:\n  - tool_name: a\n    on_error: explode\n",
    )
    .unwrap();
    let err = chainweaver::flow::load_flow_file(&yaml).unwrap_err();
    assert!(
        err.to_string().contains("step 0") && err.to_string().contains("explode"),
        "{err}"
    );
}
