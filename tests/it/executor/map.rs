//! Map steps (`for_each`): iteration, order, concurrency, error policies, selection, DAGs,
//! compile findings, flow files, checkpoints, replay and the cassette.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chainweaver::executor::{
    CheckpointSink, ExecutionResult, FileCheckpoints, FlowEvent, FlowExecutor, MemoryCheckpoints,
    RunOptions, StepRecord,
};
use chainweaver::flow::{CompileReport, Severity, compile_flow};
use chainweaver::recorder::model::TraceWithSteps;
use chainweaver::replay::ReplayMode;
use chainweaver::tool::{Tool, ToolFailure, ToolRegistry};
use chainweaver::verify::{Cassette, IgnorePaths, Preference};
use serde_json::{Value, json};

use super::{Calls, add_tool, failing_tool, flow, obj, registry, schema};

fn run(executor: &FlowExecutor, definition: Value, input: Value) -> ExecutionResult {
    executor
        .execute(&flow(definition), obj(input), &RunOptions::default())
        .unwrap()
}

/// A linear flow of one map step `add` over `/pairs`, summing each pair.
fn sums_flow(for_each: Value) -> Value {
    json!({"name": "sums", "steps": [{
        "tool_name": "add",
        "for_each": for_each,
        "input_mapping": {"a": "/item/a", "b": "/item/b"},
        "output_key": "sums"
    }]})
}

fn iterations(result: &ExecutionResult) -> Vec<Option<usize>> {
    result.execution_log.iter().map(|r| r.iteration).collect()
}

/// The final output's `key` (`null` when absent).
fn output(result: &ExecutionResult, key: &str) -> Value {
    result
        .final_output
        .as_ref()
        .unwrap_or_else(|| panic!("the run failed: {result:#?}"))
        .get(key)
        .cloned()
        .unwrap_or(Value::Null)
}

#[test]
fn an_empty_list_gives_an_empty_array_and_calls_nothing() {
    let calls = Calls::default();
    let executor = FlowExecutor::new(registry(vec![add_tool(&calls)]));
    let result = run(
        &executor,
        sums_flow(json!({"list": "/pairs"})),
        json!({"pairs": []}),
    );
    assert!(result.success, "{result:#?}");
    assert_eq!(output(&result, "sums"), json!([]));
    assert_eq!(calls.get(), 0);
    assert!(result.execution_log.is_empty(), "{result:#?}");
}

#[test]
fn one_element_runs_once_with_its_iteration_recorded() {
    let calls = Calls::default();
    let executor = FlowExecutor::new(registry(vec![add_tool(&calls)]));
    let result = run(
        &executor,
        sums_flow(json!({"list": "/pairs"})),
        json!({"pairs": [{"a": 1, "b": 2}]}),
    );
    assert!(result.success, "{result:#?}");
    assert_eq!(output(&result, "sums"), json!([{"sum": 3.0}]));
    assert_eq!(calls.get(), 1);
    let record = &result.execution_log[0];
    assert_eq!((record.step_index, record.iteration), (0, Some(0)));
    assert_eq!(
        Value::Object(record.inputs.clone()),
        json!({"a": 1, "b": 2})
    );
    let text = serde_json::to_value(record).unwrap();
    assert_eq!(text["iteration"], json!(0));

    // A whole element as the input, under another item key; the list the context holds
    // stays as it was.
    let echo = Tool::sync("echo", |input| Ok(json!({"got": input["order"].clone()})))
        .build()
        .unwrap();
    let executor = FlowExecutor::new(registry(vec![echo]));
    let result = run(
        &executor,
        json!({"name": "whole", "steps": [{"tool_name": "echo",
            "for_each": {"list": "/in/ids", "item": "id"},
            "input_mapping": {"order": "/id"}, "output_key": "echoed"}]}),
        json!({"in": {"ids": ["o-1"]}}),
    );
    assert_eq!(output(&result, "echoed"), json!([{"got": "o-1"}]));
    assert_eq!(output(&result, "in"), json!({"ids": ["o-1"]}));
    assert!(
        result.final_output.as_ref().unwrap().get("id").is_none(),
        "the item key is not merged into the context"
    );
}

/// `wait`: sleeps `ms` milliseconds (async), then answers `{id}`.
fn wait_tool() -> Tool {
    Tool::new_async("wait", |input| async move {
        let ms = input["ms"].as_u64().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(json!({"id": input["id"].clone()}))
    })
    .build()
    .unwrap()
}

fn wait_flow(concurrency: usize) -> Value {
    json!({"name": "waits", "steps": [{
        "tool_name": "wait",
        "for_each": {"list": "/jobs", "concurrency": concurrency},
        "input_mapping": {"id": "/item/id", "ms": "/item/ms"},
        "output_key": "done"
    }]})
}

/// The most records running at one moment, from their start and end timestamps.
fn max_overlap(records: &[StepRecord]) -> usize {
    records
        .iter()
        .map(|probe| {
            records
                .iter()
                .filter(|r| r.started_at <= probe.started_at && probe.started_at < r.ended_at)
                .count()
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn results_keep_element_order_when_later_iterations_finish_first() {
    let executor = FlowExecutor::new(registry(vec![wait_tool()]));
    let jobs =
        json!([{"id": "slow", "ms": 400}, {"id": "mid", "ms": 200}, {"id": "fast", "ms": 10}]);
    let result = run(&executor, wait_flow(3), json!({"jobs": jobs}));
    assert!(result.success, "{result:#?}");
    assert_eq!(
        output(&result, "done"),
        json!([{"id": "slow"}, {"id": "mid"}, {"id": "fast"}])
    );
    assert_eq!(iterations(&result), vec![Some(0), Some(1), Some(2)]);
    let log = &result.execution_log;
    assert_eq!(max_overlap(log), 3, "all three ran at once: {log:#?}");
    assert!(
        log[2].ended_at < log[1].ended_at && log[1].ended_at < log[0].ended_at,
        "the later elements finished first: {log:#?}"
    );
}

#[test]
fn never_more_iterations_at_once_than_the_concurrency() {
    let executor = FlowExecutor::new(registry(vec![wait_tool()]));
    let jobs: Vec<Value> = (0..6).map(|i| json!({"id": i, "ms": 60})).collect();
    for (concurrency, expected) in [(2, 2), (1, 1), (10, 6)] {
        let result = run(&executor, wait_flow(concurrency), json!({"jobs": jobs}));
        assert!(result.success, "{result:#?}");
        let ids: Vec<Value> = (0..6).map(|i| json!({"id": i})).collect();
        assert_eq!(output(&result, "done"), Value::Array(ids));
        assert_eq!(
            max_overlap(&result.execution_log),
            expected,
            "concurrency {concurrency}: {:#?}",
            result.execution_log
        );
    }
}

#[test]
fn blocking_tools_also_run_concurrently_in_a_map() {
    // In-flight counter inside a blocking tool: proves the calls overlap on threads.
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (a, b) = (Arc::clone(&inside), Arc::clone(&most));
    let block = Tool::sync("block", move |_| {
        let now = a.fetch_add(1, Ordering::SeqCst) + 1;
        b.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(80));
        a.fetch_sub(1, Ordering::SeqCst);
        Ok(json!({}))
    })
    .build()
    .unwrap();
    let executor = FlowExecutor::new(registry(vec![block]));
    let result = run(
        &executor,
        json!({"name": "b", "steps": [{"tool_name": "block", "input_mapping": {"i": "item"},
            "for_each": {"list": "/xs", "concurrency": 3}, "output_key": "out"}]}),
        json!({"xs": [1, 2, 3, 4, 5, 6]}),
    );
    assert!(result.success, "{result:#?}");
    assert_eq!(most.load(Ordering::SeqCst), 3);
    assert_eq!(max_overlap(&result.execution_log), 3);
}

/// `check`: answers `{ok: id}`, and fails for the ids in `bad`.
fn check_tool(name: &str, bad: &'static [i64], calls: &Calls) -> Tool {
    let calls = calls.clone();
    Tool::sync(name, move |input| {
        calls.bump();
        let id = input["id"].as_i64().ok_or("no id")?;
        if bad.contains(&id) {
            return Err(ToolFailure::of_kind(
                "ValueError",
                format!("id {id} is bad"),
            ));
        }
        Ok(json!({"ok": id}))
    })
    .build()
    .unwrap()
}

fn check_flow(on_error: &str) -> Value {
    json!({"name": "checks", "steps": [
        {"tool_name": "check", "for_each": {"list": "/ids"}, "input_mapping": {"id": "item"},
         "output_key": "checked", "on_error": on_error},
        {"tool_name": "after", "input_mapping": {"id": 0}}
    ]})
}

#[test]
fn a_failing_element_under_on_error_fail_stops_the_flow_naming_step_and_element() {
    let (calls, after) = (Calls::default(), Calls::default());
    let executor = FlowExecutor::new(registry(vec![
        check_tool("check", &[1], &calls),
        check_tool("after", &[], &after),
    ]));
    let result = run(&executor, check_flow("fail"), json!({"ids": [0, 1, 2]}));
    assert!(!result.success);
    assert_eq!(result.final_output, None);
    let failed = result.failed_step().unwrap();
    assert_eq!((failed.step_index, failed.iteration), (0, Some(1)));
    assert!(
        failed
            .error_message
            .as_deref()
            .unwrap()
            .contains("id 1 is bad"),
        "{failed:?}"
    );
    assert_eq!(calls.get(), 2, "no element starts after the failure");
    assert_eq!(after.get(), 0, "the flow stopped");
    assert_eq!(iterations(&result), vec![Some(0), Some(1)]);
}

#[test]
fn a_failing_element_under_on_error_skip_leaves_null_in_its_slot() {
    let (calls, after) = (Calls::default(), Calls::default());
    let executor = FlowExecutor::new(registry(vec![
        check_tool("check", &[1], &calls),
        check_tool("after", &[], &after),
    ]));
    let result = run(&executor, check_flow("skip"), json!({"ids": [0, 1, 2]}));
    assert!(result.success, "{result:#?}");
    assert_eq!(
        output(&result, "checked"),
        json!([{"ok": 0}, null, {"ok": 2}])
    );
    assert_eq!(calls.get(), 3);
    assert_eq!(after.get(), 1);
    let skipped = &result.execution_log[1];
    assert!(skipped.skipped && !skipped.success, "{skipped:?}");
    assert_eq!(skipped.iteration, Some(1));
}

#[test]
fn a_failing_element_under_fallback_runs_the_fallback_for_that_element_only() {
    let (calls, backup) = (Calls::default(), Calls::default());
    let backup_tool = {
        let backup = backup.clone();
        Tool::sync("backup", move |input| {
            backup.bump();
            Ok(json!({"ok": format!("backup {}", input["id"])}))
        })
        .build()
        .unwrap()
    };
    let executor = FlowExecutor::new(registry(vec![
        check_tool("check", &[1], &calls),
        check_tool("after", &[], &Calls::default()),
        backup_tool,
    ]));
    let result = run(
        &executor,
        check_flow("fallback:backup"),
        json!({"ids": [0, 1, 2]}),
    );
    assert!(result.success, "{result:#?}");
    assert_eq!(
        output(&result, "checked"),
        json!([{"ok": 0}, {"ok": "backup 1"}, {"ok": 2}])
    );
    assert_eq!(backup.get(), 1);
    let used: Vec<bool> = result.execution_log[..3]
        .iter()
        .map(|r| r.fallback_used)
        .collect();
    assert_eq!(used, vec![false, true, false]);
}

#[test]
fn retries_apply_to_each_iteration_on_its_own() {
    // Fails the first call for every id, then succeeds.
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let flaky = Tool::sync("flaky", move |input| {
        let id = input["id"].as_i64().ok_or("no id")?;
        if seen.lock().map_err(|_| "poisoned")?.insert(id) {
            return Err(ToolFailure::of_kind("Flaky", "first try"));
        }
        Ok(json!({"id": id}))
    })
    .build()
    .unwrap();
    let executor = FlowExecutor::new(registry(vec![flaky]));
    let result = run(
        &executor,
        json!({"name": "r", "steps": [{"tool_name": "flaky", "for_each": {"list": "/ids"},
            "input_mapping": {"id": "item"}, "output_key": "out",
            "retry_policy": {"max_retries": 1}}]}),
        json!({"ids": [5, 6, 7]}),
    );
    assert!(result.success, "{result:#?}");
    let attempts: Vec<u32> = result.execution_log.iter().map(|r| r.attempts).collect();
    assert_eq!(attempts, vec![2, 2, 2]);
    assert_eq!(
        output(&result, "out"),
        json!([{"id": 5}, {"id": 6}, {"id": 7}])
    );
}

#[test]
fn select_runs_only_the_chosen_elements_in_element_order() {
    let calls = Calls::default();
    let executor = FlowExecutor::new(registry(vec![add_tool(&calls)]));
    let pairs = json!([{"a": 1, "b": 0}, {"a": 2, "b": 0}, {"a": 3, "b": 0}, {"a": 4, "b": 0}]);
    let result = run(
        &executor,
        sums_flow(json!({"list": "/pairs", "select": "/looked_at"})),
        json!({"pairs": pairs, "looked_at": [3, 1]}),
    );
    assert!(result.success, "{result:#?}");
    assert_eq!(calls.get(), 2);
    assert_eq!(output(&result, "sums"), json!([{"sum": 2.0}, {"sum": 4.0}]));
    assert_eq!(iterations(&result), vec![Some(1), Some(3)]);

    // An index past the end fails the step before any call, naming it.
    let result = run(
        &executor,
        sums_flow(json!({"list": "/pairs", "select": "/looked_at"})),
        json!({"pairs": pairs, "looked_at": [0, 9]}),
    );
    assert!(!result.success);
    assert_eq!(calls.get(), 2);
    let failed = result.failed_step().unwrap();
    assert_eq!((failed.step_index, failed.iteration), (0, None));
    let message = failed.error_message.as_deref().unwrap();
    assert!(
        message.contains("step 0 (`add`)") && message.contains("selects element 9"),
        "{message}"
    );
}

#[test]
fn a_missing_or_non_list_value_fails_the_step_unless_skipped() {
    let calls = Calls::default();
    let executor = FlowExecutor::new(registry(vec![add_tool(&calls)]));
    for (input, wanted) in [
        (json!({}), "context has no key `pairs`"),
        (
            json!({"pairs": {"a": 1}}),
            "`/pairs` is an object, not a list",
        ),
    ] {
        let result = run(&executor, sums_flow(json!({"list": "/pairs"})), input);
        assert!(!result.success);
        let failed = result.failed_step().unwrap();
        let message = failed.error_message.as_deref().unwrap();
        assert!(message.contains(wanted), "{message}");
        assert!(message.contains("for_each.list"), "{message}");
        assert_eq!(failed.error_code.as_deref(), Some("input_mapping"));
    }
    let mut skipping = sums_flow(json!({"list": "/pairs"}));
    skipping["steps"][0]["on_error"] = json!("skip");
    let result = run(&executor, skipping, json!({}));
    assert!(result.success, "{result:#?}");
    assert!(result.execution_log[0].skipped);
    assert!(output(&result, "sums").is_null(), "nothing merged");
    assert_eq!(calls.get(), 0);
}

#[test]
fn a_map_step_in_a_dag_runs_beside_its_level_and_feeds_the_next() {
    let lookup = Tool::new_async("lookup", |input| async move {
        let id = input["order_id"].as_str().unwrap_or("").to_string();
        // Later orders answer sooner.
        let ms = 150 - 50 * id.trim_start_matches('o').parse::<u64>().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(json!({"status": format!("{id} shipped")}))
    })
    .build()
    .unwrap();
    let list = Tool::sync("list_orders", |_| {
        Ok(json!({"orders": [{"order_id": "o0"}, {"order_id": "o1"}, {"order_id": "o2"}]}))
    })
    .build()
    .unwrap();
    let count = Tool::sync("count", |input| {
        Ok(json!({"count": input["details"].as_array().map_or(0, Vec::len)}))
    })
    .build()
    .unwrap();
    let calls = Calls::default();
    let executor = FlowExecutor::new(registry(vec![lookup, list, count, add_tool(&calls)]));
    let result = run(
        &executor,
        json!({"name": "orders", "steps": [
            {"step_id": "list", "tool_name": "list_orders"},
            {"step_id": "lookup", "tool_name": "lookup", "depends_on": ["list"],
             "for_each": {"list": "/orders", "concurrency": 3},
             "input_mapping": {"order_id": "/item/order_id"}, "output_key": "details"},
            {"step_id": "side", "tool_name": "add", "depends_on": ["list"],
             "input_mapping": {"a": 1, "b": 2}},
            {"step_id": "total", "tool_name": "count", "depends_on": ["lookup"],
             "input_mapping": {"details": "/details"}}
        ]}),
        json!({}),
    );
    assert!(result.success, "{result:#?}");
    assert_eq!(
        output(&result, "details"),
        json!([{"status": "o0 shipped"}, {"status": "o1 shipped"}, {"status": "o2 shipped"}])
    );
    assert_eq!(output(&result, "count"), json!(3));
    let order: Vec<(&str, Option<usize>)> = result
        .execution_log
        .iter()
        .map(|r| (r.step_id.as_deref().unwrap(), r.iteration))
        .collect();
    assert_eq!(
        order,
        vec![
            ("list", None),
            ("lookup", Some(0)),
            ("lookup", Some(1)),
            ("lookup", Some(2)),
            ("side", None),
            ("total", None)
        ]
    );
    let lookups = &result.execution_log[1..4];
    assert_eq!(max_overlap(lookups), 3, "{lookups:#?}");
    let total = &result.execution_log[5];
    assert!(lookups.iter().all(|r| r.ended_at <= total.started_at));
}

#[test]
fn streamed_events_carry_the_iteration() {
    let calls = Calls::default();
    let executor = FlowExecutor::new(registry(vec![add_tool(&calls)]));
    let events: Vec<FlowEvent> = executor
        .stream_flow(
            flow(sums_flow(json!({"list": "/pairs"}))),
            obj(json!({"pairs": [{"a": 1, "b": 1}, {"a": 2, "b": 2}]})),
            RunOptions::default(),
        )
        .unwrap()
        .collect();
    let starts: Vec<Option<usize>> = events
        .iter()
        .filter_map(|e| match e {
            FlowEvent::StepStart { iteration, .. } => Some(*iteration),
            _ => None,
        })
        .collect();
    assert_eq!(starts, vec![Some(0), Some(1)]);
}

// --- compile_flow -------------------------------------------------------------------------

fn compile_tools() -> ToolRegistry {
    let tool = |name: &str, input: Value, output: Value| {
        Tool::sync(name, |_| Ok(json!({})))
            .input_schema(input)
            .output_schema(output)
            .build()
            .unwrap()
    };
    registry(vec![
        tool(
            "fetch",
            schema(json!({"url": {"type": "string"}}), &["url"]),
            schema(json!({"status": {"type": "integer"}}), &[]),
        ),
        tool(
            "store",
            schema(json!({"records": {"type": "array"}}), &["records"]),
            schema(json!({}), &[]),
        ),
        tool(
            "num",
            schema(json!({"n": {"type": "number"}}), &["n"]),
            schema(json!({}), &[]),
        ),
    ])
}

fn compile(steps: Value) -> CompileReport {
    let input = schema(
        json!({
            "pages": {"type": "array", "items": schema(
                json!({"url": {"type": "string"}, "n": {"type": "integer"}}), &[])},
            "count": {"type": "integer"},
            "picked": {"type": "array"}
        }),
        &[],
    );
    compile_flow(
        &flow(json!({"name": "f", "input_schema": input, "steps": steps})),
        &compile_tools(),
    )
}

fn codes(report: &CompileReport) -> Vec<&str> {
    report.findings.iter().map(|f| f.code.as_str()).collect()
}

/// The map step used by the compile tests, with `for_each` and extra fields replaced.
fn fetch_each(for_each: Value) -> Value {
    json!({"tool_name": "fetch", "for_each": for_each, "input_mapping": {"url": "/item/url"},
           "output_key": "fetched"})
}

#[test]
fn a_sound_map_step_compiles_with_item_pointers_typed_by_the_list_items() {
    let report = compile(json!([
        fetch_each(json!({"list": "/pages", "select": "/picked", "concurrency": 4})),
        // The collected results are an array.
        {"tool_name": "store", "input_mapping": {"records": "fetched"}}
    ]));
    assert!(report.findings.is_empty(), "{:#?}", report.findings);

    // `/item/n` is an integer in the list's items schema: the wrong type for `url`.
    let mut wrong = fetch_each(json!({"list": "/pages"}));
    wrong["input_mapping"]["url"] = json!("/item/n");
    let report = compile(json!([wrong]));
    assert_eq!(codes(&report), vec!["incompatible_mapped_type"]);
    // The results array is not a number.
    let report = compile(json!([
        fetch_each(json!({"list": "/pages"})),
        {"tool_name": "num", "input_mapping": {"n": "fetched"}}
    ]));
    assert_eq!(codes(&report), vec!["incompatible_mapped_type"]);
    assert_eq!(report.findings[0].step, Some(1));
    // Without for_each, `item` is just an unavailable key.
    let mut plain = fetch_each(json!({"list": "/pages"}));
    plain.as_object_mut().unwrap().remove("for_each");
    assert_eq!(
        codes(&compile(json!([plain]))),
        vec!["unavailable_context_key"]
    );
}

#[test]
fn map_compile_findings_name_the_step() {
    let one = |step: Value, code: &str, pointer: &str| {
        let report = compile(json!([{"tool_name": "num", "input_mapping": {"n": 1}}, step]));
        assert_eq!(codes(&report), vec![code], "{:#?}", report.findings);
        let finding = &report.findings[0];
        assert_eq!(finding.severity, Severity::Error);
        assert_eq!(finding.step, Some(1));
        assert_eq!(finding.pointer, pointer);
        assert!(finding.message.contains("step_1"), "{finding:?}");
        assert!(!report.is_ok());
    };
    one(
        fetch_each(json!({"list": "/nowhere"})),
        "map_list_unavailable",
        "/steps/1/for_each/list",
    );
    one(
        fetch_each(json!({"list": "/count"})),
        "map_list_not_array",
        "/steps/1/for_each/list",
    );
    one(
        fetch_each(json!({"list": "pages"})),
        "invalid_json_pointer",
        "/steps/1/for_each/list",
    );
    one(
        fetch_each(json!({"list": "/pages", "select": "/count"})),
        "map_select_not_array",
        "/steps/1/for_each/select",
    );
    one(
        fetch_each(json!({"list": "/pages", "select": "/gone"})),
        "map_select_unavailable",
        "/steps/1/for_each/select",
    );
    one(
        fetch_each(json!({"list": "/pages", "concurrency": 0})),
        "map_invalid_concurrency",
        "/steps/1/for_each/concurrency",
    );
    let mut no_key = fetch_each(json!({"list": "/pages"}));
    no_key.as_object_mut().unwrap().remove("output_key");
    one(no_key, "map_missing_output_key", "/steps/1/output_key");
}

// --- flow files ---------------------------------------------------------------------------

#[test]
fn yaml_and_json_flow_files_with_a_map_step_read_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("m.json");
    std::fs::write(
        &json_path,
        r#"{"name": "m", "steps": [
            {"step_id": "get", "tool_name": "fetch"},
            {"step_id": "each", "tool_name": "fetch", "depends_on": ["get"],
             "for_each": {"list": "/pages", "item": "page", "select": "/picked", "concurrency": 3},
             "input_mapping": {"url": "/page/url"}, "output_key": "fetched", "on_error": "skip"}
        ]}"#,
    )
    .unwrap();
    let yaml_path = dir.path().join("m.yaml");
    std::fs::write(
        &yaml_path,
        "name: m\nsteps:\n  - step_id: get\n    tool_name: fetch\n  - step_id: each\n    \
         tool_name: fetch\n    depends_on: [get]\n    for_each:\n      list: /pages\n      \
         item: page\n      select: /picked\n      concurrency: 3\n    input_mapping: {url: \
         /page/url}\n    output_key: fetched\n    on_error: skip\n",
    )
    .unwrap();
    let from_json = chainweaver::flow::load_flow_file(&json_path).unwrap();
    let from_yaml = chainweaver::flow::load_flow_file(&yaml_path).unwrap();
    assert_eq!(from_json, from_yaml);
    let views = chainweaver::flow::step_views(&from_json);
    let for_each = views[1].step.for_each.as_ref().unwrap();
    assert_eq!(
        (
            for_each.list.as_str(),
            for_each.item.as_str(),
            for_each.select.as_deref(),
            for_each.concurrency
        ),
        ("/pages", "page", Some("/picked"), 3)
    );
    assert_eq!(views[0].step.for_each, None);
    // Steps without for_each write no for_each.
    let text = serde_json::to_string(&from_json).unwrap();
    assert_eq!(text.matches("for_each").count(), 1, "{text}");

    // A misspelt for_each field names the step.
    std::fs::write(
        &yaml_path,
        "name: m\nsteps:\n  - tool_name: fetch\n    for_each: {lst: /pages}\n",
    )
    .unwrap();
    let err = chainweaver::flow::load_flow_file(&yaml_path).unwrap_err();
    assert!(
        err.to_string().contains("step 0") && err.to_string().contains("lst"),
        "{err}"
    );
}

#[test]
fn the_example_map_flow_runs_with_the_command_tools() {
    let tools =
        chainweaver::tool::command::load_manifest(&super::datasets().join("tools/calc_tools.toml"))
            .unwrap();
    let definition =
        chainweaver::flow::load_flow_file(&super::datasets().join("flows/map_sums.yaml")).unwrap();
    let report = compile_flow(&definition, &tools);
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
    let executor = FlowExecutor::new(tools);
    let result = executor
        .execute(
            &definition,
            obj(json!({"pairs": [{"a": 1, "b": 2}, {"a": 10, "b": 20}, {"a": 0.5, "b": 0.25}]})),
            &RunOptions::default(),
        )
        .unwrap();
    assert!(result.success, "{result:#?}");
    assert_eq!(
        output(&result, "sums"),
        json!([{"sum": 3}, {"sum": 30}, {"sum": 0.75}])
    );
    assert_eq!(
        output(&result, "descriptions"),
        json!([
            {"text": "the result is 3"},
            {"text": "the result is 30"},
            {"text": "the result is 0.75"}
        ])
    );
    assert_eq!(result.execution_log.len(), 6);
}

// --- checkpoints ----------------------------------------------------------------------------

/// `item`: answers `{n: 10 * id}`, counting calls; hangs on id `hang_on` when set.
fn hanging_tool(calls: &Calls, hang_on: Option<i64>) -> Tool {
    let calls = calls.clone();
    Tool::new_async("item", move |input| {
        let calls = calls.clone();
        async move {
            calls.bump();
            let id = input["id"].as_i64().unwrap_or(-1);
            if Some(id) == hang_on {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            Ok(json!({"n": 10 * id}))
        }
    })
    .build()
    .unwrap()
}

#[test]
fn a_run_resumed_in_the_middle_of_a_map_runs_only_the_iterations_that_did_not_complete() {
    let dir = tempfile::tempdir().unwrap();
    let sink: Arc<dyn CheckpointSink> = Arc::new(FileCheckpoints::new(dir.path()).unwrap());
    let definition = flow(json!({"name": "half", "steps": [
        {"tool_name": "item", "input_mapping": {"id": 0}, "output_mapping": {"first": "n"}},
        {"tool_name": "item", "for_each": {"list": "/ids"}, "input_mapping": {"id": "item"},
         "output_key": "all"}
    ]}));
    let first = Calls::default();
    let executor = FlowExecutor::new(registry(vec![hanging_tool(&first, Some(3))]))
        .with_checkpoints(sink.clone())
        .with_id_generator(|_, _| "map-run".to_string());
    // The crash: the run is dropped while element 2 (id 3) hangs.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let crashed = runtime.block_on(async {
        tokio::time::timeout(
            Duration::from_millis(300),
            executor.execute_async(
                &definition,
                obj(json!({"ids": [1, 2, 3, 4]})),
                &RunOptions::default(),
            ),
        )
        .await
    });
    assert!(crashed.is_err(), "the run should have been cut off");
    assert_eq!(
        first.get(),
        4,
        "step 0, then elements 0, 1 and the hanging 2"
    );
    let checkpoint = sink.load("map-run").unwrap().expect("a checkpoint on disk");
    assert_eq!(checkpoint.completed.len(), 1);
    let done: Vec<(usize, usize)> = checkpoint
        .iterations
        .iter()
        .map(|i| (i.step_index, i.iteration))
        .collect();
    assert_eq!(done, vec![(1, 0), (1, 1)]);
    assert_eq!(checkpoint.records.len(), 3);

    let second = Calls::default();
    let executor = FlowExecutor::new(registry(vec![hanging_tool(&second, None)]))
        .with_checkpoints(Arc::new(FileCheckpoints::new(dir.path()).unwrap()));
    let result = executor
        .resume_trace(&definition, "map-run", &RunOptions::default())
        .unwrap();
    assert!(result.success, "{result:#?}");
    assert_eq!(second.get(), 2, "only elements 2 and 3 ran again");
    assert_eq!(
        output(&result, "all"),
        json!([{"n": 10}, {"n": 20}, {"n": 30}, {"n": 40}])
    );
    assert_eq!(output(&result, "first"), json!(0));
    let log: Vec<(i64, Option<usize>)> = result
        .execution_log
        .iter()
        .map(|r| (r.step_index, r.iteration))
        .collect();
    assert_eq!(
        log,
        vec![
            (0, None),
            (1, Some(0)),
            (1, Some(1)),
            (1, Some(2)),
            (1, Some(3))
        ]
    );
    assert!(sink.load("map-run").unwrap().is_none());
}

#[test]
fn a_failed_iteration_is_not_checkpointed_and_a_skipped_one_completes_the_step() {
    for (on_error, reruns) in [("fail", 2), ("skip", 0)] {
        let sink = Arc::new(MemoryCheckpoints::new());
        let executor = FlowExecutor::new(registry(vec![
            check_tool("check", &[1], &Calls::default()),
            failing_tool("never", "no", &Calls::default()),
        ]))
        .with_checkpoints(sink.clone())
        .with_id_generator(|_, _| "cp".into());
        let mut definition = check_flow(on_error);
        // A failing step after the map step, so a skipping run stops too and keeps its
        // checkpoint.
        definition["steps"][1]["tool_name"] = json!("never");
        let result = run(&executor, definition.clone(), json!({"ids": [0, 1, 2]}));
        assert!(!result.success);
        let checkpoint = sink.load("cp").unwrap().unwrap();
        if on_error == "fail" {
            // Element 0 completed; element 1 failed and is not part of the resumable state.
            let saved: Vec<usize> = checkpoint.iterations.iter().map(|i| i.iteration).collect();
            assert_eq!(saved, vec![0]);
            assert!(checkpoint.completed.is_empty());
            assert_eq!(checkpoint.records.len(), 1);
        } else {
            // The map step completed: its iterations are folded into the completed step.
            assert!(checkpoint.iterations.is_empty());
            assert_eq!(
                Value::Object(checkpoint.completed[0].merged.clone()),
                json!({"checked": [{"ok": 0}, null, {"ok": 2}]})
            );
            assert_eq!(checkpoint.records.len(), 3);
        }
        // Resume with tools that no longer fail: only what did not complete runs.
        let again = Calls::default();
        let executor = FlowExecutor::new(registry(vec![
            check_tool("check", &[], &again),
            check_tool("never", &[], &Calls::default()),
        ]));
        let resumed = executor
            .resume_flow(&flow(definition), checkpoint, &RunOptions::default())
            .unwrap();
        assert!(resumed.success, "{resumed:#?}");
        assert_eq!(again.get(), reruns, "{on_error}");
        let expected = if on_error == "fail" {
            json!([{"ok": 0}, {"ok": 1}, {"ok": 2}])
        } else {
            json!([{"ok": 0}, null, {"ok": 2}])
        };
        assert_eq!(output(&resumed, "checked"), expected, "{on_error}");
        assert_eq!(resumed.execution_log.len(), 4, "{on_error}");
    }
}

#[test]
fn records_and_checkpoints_without_map_steps_serialize_as_before() {
    let calls = Calls::default();
    let sink = Arc::new(MemoryCheckpoints::new());
    let executor = FlowExecutor::new(registry(vec![
        add_tool(&calls),
        failing_tool("down", "no", &calls),
    ]))
    .with_checkpoints(sink.clone())
    .with_id_generator(|_, _| "plain".into());
    let result = run(
        &executor,
        json!({"name": "p", "steps": [{"tool_name": "add", "input_mapping": {"a": 1, "b": 2}},
            {"tool_name": "down"}]}),
        json!({}),
    );
    let text = serde_json::to_string(&result).unwrap();
    assert!(!text.contains("iteration"), "{text}");
    let checkpoint = serde_json::to_string(&sink.load("plain").unwrap().unwrap()).unwrap();
    assert!(!checkpoint.contains("iteration"), "{checkpoint}");
}

// --- replay and the cassette ----------------------------------------------------------------

#[test]
fn a_map_run_replays_and_answers_from_its_own_cassette() {
    let calls = Calls::default();
    let live = FlowExecutor::new(registry(vec![add_tool(&calls)]));
    let definition = flow(sums_flow(json!({"list": "/pairs", "concurrency": 2})));
    let input = obj(json!({"pairs": [{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"a": 5, "b": 6}]}));
    let recorded = live
        .execute(&definition, input.clone(), &RunOptions::default())
        .unwrap();
    assert!(recorded.success);

    // Replayed live: every iteration compared, in element order.
    let report = live
        .replay_flow(
            &definition,
            &recorded,
            ReplayMode::Verify,
            &RunOptions::default(),
        )
        .unwrap();
    assert!(report.all_steps_match, "{:#?}", report.diffs);

    // Each iteration is a call of `add` with its own input in the trace, and the cassette
    // answers each one like any call.
    let (trace, steps) = recorded.to_observed();
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[2].metadata["iteration"], json!(2));
    let traces = vec![TraceWithSteps { trace, steps }];
    let cassette = Arc::new(Cassette::from_traces(&traces, IgnorePaths::default()));
    let prefer = Arc::new(Mutex::new(Preference::default()));
    let tools = cassette.registry(&["add".into()], &prefer).unwrap();
    let answered = FlowExecutor::new(tools);
    let report = answered
        .replay_flow(
            &definition,
            &recorded,
            ReplayMode::Verify,
            &RunOptions::default(),
        )
        .unwrap();
    assert!(report.all_steps_match, "{:#?}", report.diffs);
    assert_eq!(
        calls.get(),
        6,
        "the cassette answered without the live tool"
    );

    // An element the recording never saw is a miss for that iteration only.
    let mut changed = recorded.clone();
    changed
        .initial_input
        .as_mut()
        .unwrap()
        .insert("pairs".into(), json!([{"a": 1, "b": 2}, {"a": 9, "b": 9}]));
    let replay = answered
        .execute(
            &definition,
            changed.initial_input.clone().unwrap(),
            &RunOptions::default(),
        )
        .unwrap();
    let failed = replay.failed_step().unwrap();
    assert_eq!(failed.iteration, Some(1));
    assert_eq!(failed.error_type.as_deref(), Some("NoRecording"));
}
