//! The executor's machinery: step cache, checkpoints and resume, DAG concurrency, streamed
//! events, registry lookups, records and their JSON round trip.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use chainweaver::executor::{
    CheckpointSink, ExecutionResult, FileCheckpoints, FlowEvent, FlowExecutor, MemoryCheckpoints,
    RunOptions, StepCache, StepRecord,
};
use chainweaver::registry::FlowStatus;
use chainweaver::tool::Tool;
use serde_json::json;

use super::{Calls, add_tool, flow, obj, registry, schema};

fn cached_add(calls: &Calls) -> Tool {
    let calls = calls.clone();
    Tool::sync("add", move |input| {
        calls.bump();
        Ok(json!({"sum": input["a"].as_i64().unwrap_or(0) + input["b"].as_i64().unwrap_or(0)}))
    })
    .input_schema(schema(
        json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
        &["a", "b"],
    ))
    .cacheable(true)
    .build()
    .unwrap()
}

#[test]
fn cacheable_tools_hit_the_cache_by_canonical_input() {
    let calls = Calls::default();
    let cache = Arc::new(StepCache::new());
    let executor = FlowExecutor::new(registry(vec![cached_add(&calls)])).with_cache(cache.clone());
    let definition = flow(json!({"name": "c", "steps": [
        {"tool_name": "add", "input_mapping": {"a": "x", "b": "y"}},
        {"tool_name": "add", "input_mapping": {"b": "y", "a": "x"}}
    ]}));
    let result = executor
        .execute(
            &definition,
            obj(json!({"x": 1, "y": 2})),
            &RunOptions::default(),
        )
        .unwrap();
    assert_eq!(
        calls.get(),
        1,
        "the second step has the same input in another key order"
    );
    assert!(!result.execution_log[0].cache_hit);
    assert!(result.execution_log[1].cache_hit);
    assert_eq!(
        result.execution_log[1].outputs.as_ref().unwrap()["sum"],
        json!(3)
    );
    executor
        .execute(
            &definition,
            obj(json!({"x": 1, "y": 5})),
            &RunOptions::default(),
        )
        .unwrap();
    assert_eq!(calls.get(), 2, "another input misses");
    assert_eq!(cache.stats().0, 2);

    // Not cacheable: never cached.
    let plain_calls = Calls::default();
    let executor = FlowExecutor::new(registry(vec![add_tool(&plain_calls)]))
        .with_cache(Arc::new(StepCache::new()));
    executor
        .execute(
            &definition,
            obj(json!({"x": 1, "y": 2})),
            &RunOptions::default(),
        )
        .unwrap();
    assert_eq!(plain_calls.get(), 2);
}

/// Four steps; step 2's tool hangs until `release` is set, so the run can be "crashed" there.
fn crash_tools(calls: [&Calls; 4], hang: bool) -> chainweaver::tool::ToolRegistry {
    let mut tools = Vec::new();
    for (i, counter) in calls.into_iter().enumerate() {
        let counter = counter.clone();
        let name = format!("s{i}");
        tools.push(
            Tool::new_async(name, move |input| {
                let counter = counter.clone();
                async move {
                    counter.bump();
                    if hang && i == 2 {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                    }
                    let n = input.get("n").and_then(|v| v.as_i64()).unwrap_or(0);
                    Ok(json!({"n": n + 1, format!("seen_{i}"): true}))
                }
            })
            .build()
            .unwrap(),
        );
    }
    registry(tools)
}

#[test]
fn resume_after_a_simulated_crash_does_not_rerun_completed_steps() {
    let dir = tempfile::tempdir().unwrap();
    let sink: Arc<dyn CheckpointSink> = Arc::new(FileCheckpoints::new(dir.path()).unwrap());
    let definition = flow(json!({"name": "crashy", "steps": [
        {"tool_name": "s0", "input_mapping": {"n": "n"}},
        {"tool_name": "s1", "input_mapping": {"n": "n"}},
        {"tool_name": "s2", "input_mapping": {"n": "n"}},
        {"tool_name": "s3", "input_mapping": {"n": "n"}}
    ]}));
    let first: [Calls; 4] = Default::default();
    let executor = FlowExecutor::new(crash_tools(
        [&first[0], &first[1], &first[2], &first[3]],
        true,
    ))
    .with_checkpoints(sink.clone())
    .with_id_generator(|_, _| "run-1".to_string());
    // The crash: the run is dropped mid-flight while step 2 hangs (as if the process died).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let crashed = runtime.block_on(async {
        tokio::time::timeout(
            Duration::from_millis(300),
            executor.execute_async(&definition, obj(json!({"n": 0})), &RunOptions::default()),
        )
        .await
    });
    assert!(crashed.is_err(), "the run should have been cut off");
    assert_eq!(
        first.iter().map(Calls::get).collect::<Vec<_>>(),
        vec![1, 1, 1, 0]
    );
    let checkpoint = sink.load("run-1").unwrap().expect("a checkpoint on disk");
    assert_eq!(checkpoint.completed.len(), 2);

    // A new process: fresh tools that do not hang, the checkpoint from disk.
    let second: [Calls; 4] = Default::default();
    let executor = FlowExecutor::new(crash_tools(
        [&second[0], &second[1], &second[2], &second[3]],
        false,
    ))
    .with_checkpoints(Arc::new(FileCheckpoints::new(dir.path()).unwrap()));
    let result = executor
        .resume_trace(&definition, "run-1", &RunOptions::default())
        .unwrap();
    assert!(result.success, "{result:?}");
    assert_eq!(
        second.iter().map(Calls::get).collect::<Vec<_>>(),
        vec![0, 0, 1, 1]
    );
    assert_eq!(result.trace_id, "run-1");
    assert_eq!(result.execution_log.len(), 4);
    assert_eq!(result.final_output.as_ref().unwrap()["n"], json!(4));
    assert_eq!(result.final_output.as_ref().unwrap()["seen_0"], json!(true));
    assert!(
        sink.load("run-1").unwrap().is_none(),
        "a finished run clears its checkpoint"
    );
}

/// True when every step of `records` was running at one moment: the latest start comes
/// before the earliest end (intervals that pairwise overlap share a point).
fn ran_at_once(records: &[&StepRecord]) -> bool {
    let latest_start = records.iter().map(|r| r.started_at).max();
    let earliest_end = records.iter().map(|r| r.ended_at).min();
    matches!((latest_start, earliest_end), (Some(start), Some(end)) if start < end)
}

/// Each step's id and time span, for failure messages.
fn spans(records: &[&StepRecord]) -> Vec<(String, String, String)> {
    records
        .iter()
        .map(|r| {
            (
                r.step_id
                    .clone()
                    .unwrap_or_else(|| r.step_index.to_string()),
                r.started_at.format("%H:%M:%S%.6f").to_string(),
                r.ended_at.format("%H:%M:%S%.6f").to_string(),
            )
        })
        .collect()
}

#[test]
fn a_dag_level_of_8_sleeping_async_tools_runs_concurrently() {
    let sleeper = Tool::new_async("sleep200", |input| async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        Ok(json!({ input["key"].as_str().unwrap_or("k").to_string(): true }))
    })
    .build()
    .unwrap();
    let collect = Tool::sync("collect", |input| Ok(json!({"count": input.len()})))
        .build()
        .unwrap();
    let executor = FlowExecutor::new(registry(vec![sleeper, collect]));
    let mut steps: Vec<serde_json::Value> = (0..8)
        .map(|i| json!({"step_id": format!("s{i}"), "tool_name": "sleep200", "input_templates": {"key": format!("k{i}")}}))
        .collect();
    steps.push(json!({"step_id": "all", "tool_name": "collect",
        "depends_on": (0..8).map(|i| format!("s{i}")).collect::<Vec<_>>()}));
    let definition = flow(json!({"name": "fan", "steps": steps}));
    let result = executor
        .execute(&definition, obj(json!({})), &RunOptions::default())
        .unwrap();
    assert!(result.success, "{result:?}");
    assert_eq!(result.final_output.as_ref().unwrap()["count"], json!(8));
    let order: Vec<&str> = result
        .execution_log
        .iter()
        .map(|r| r.step_id.as_deref().unwrap())
        .collect();
    assert_eq!(
        order,
        vec!["s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "all"]
    );
    // The first level's 8 steps were all running at once; the last level started after them.
    let level: Vec<&StepRecord> = result.execution_log[..8].iter().collect();
    assert!(ran_at_once(&level), "not concurrent: {:?}", spans(&level));
    let last = &result.execution_log[8];
    assert!(
        level.iter().all(|r| r.ended_at <= last.started_at),
        "`all` started before its dependencies ended: {:?}",
        spans(&result.execution_log.iter().collect::<Vec<_>>())
    );

    // The same tool in a linear flow: one step after the other, no overlap.
    let linear = flow(json!({"name": "line", "steps": [
        {"tool_name": "sleep200", "input_mapping": {"key": "a"}},
        {"tool_name": "sleep200", "input_mapping": {"key": "b"}}
    ]}));
    let result = executor
        .execute(
            &linear,
            obj(json!({"a": "x", "b": "y"})),
            &RunOptions::default(),
        )
        .unwrap();
    assert!(result.success, "{result:?}");
    let steps: Vec<&StepRecord> = result.execution_log.iter().collect();
    assert!(
        steps[0].ended_at <= steps[1].started_at,
        "a linear flow's steps overlapped: {:?}",
        spans(&steps)
    );
}

/// `block`: a blocking tool that waits until all `of` calls of it are inside it at once (or a
/// generous 60 s passed, so a serial executor fails the step instead of hanging the test).
fn rendezvous_tool(of: usize) -> Tool {
    let arrived = Arc::new((Mutex::new(0usize), Condvar::new()));
    Tool::sync("block", move |_| {
        let (count, all_in) = &*arrived;
        let mut inside = count.lock().map_err(|_| "poisoned")?;
        *inside += 1;
        all_in.notify_all();
        let (inside, wait) = all_in
            .wait_timeout_while(inside, Duration::from_secs(60), |n| *n < of)
            .map_err(|_| "poisoned")?;
        if wait.timed_out() {
            return Err(format!("only {} of {of} calls ran at once", *inside).into());
        }
        Ok(json!({}))
    })
    .build()
    .unwrap()
}

#[test]
fn blocking_tools_in_a_dag_level_also_run_concurrently() {
    let executor = FlowExecutor::new(registry(vec![rendezvous_tool(4)]));
    let steps: Vec<serde_json::Value> = (0..4)
        .map(|i| json!({"step_id": format!("b{i}"), "tool_name": "block"}))
        .collect();
    let result = executor
        .execute(
            &flow(json!({"name": "fan", "steps": steps})),
            obj(json!({})),
            &RunOptions::default(),
        )
        .unwrap();
    // Each call returned only once all 4 were inside the tool together.
    assert!(result.success, "{:#?}", result.execution_log);
    let level: Vec<&StepRecord> = result.execution_log.iter().collect();
    assert!(ran_at_once(&level), "not concurrent: {:?}", spans(&level));
}

#[test]
fn stream_flow_sends_events_in_order() {
    let calls = Calls::default();
    let executor = FlowExecutor::new(registry(vec![add_tool(&calls)]));
    let definition = flow(json!({"name": "st", "steps": [
        {"tool_name": "add", "input_mapping": {"a": 1, "b": 2}},
        {"tool_name": "add", "input_mapping": {"a": "sum", "b": 1}}
    ]}));
    let events: Vec<FlowEvent> = executor
        .stream_flow(definition, obj(json!({})), RunOptions::default())
        .unwrap()
        .collect();
    let kinds: Vec<String> = events
        .iter()
        .map(|e| {
            serde_json::to_value(e).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            "flow_start",
            "step_start",
            "step_end",
            "step_start",
            "step_end",
            "flow_end"
        ]
    );
    let FlowEvent::FlowEnd { result, .. } = events.last().unwrap() else {
        unreachable!()
    };
    assert_eq!(result.final_output.as_ref().unwrap()["sum"], json!(4.0));

    // A run that cannot start sends nothing and says why.
    let broken = flow(json!({"name": "st", "steps": [{"tool_name": "ghost"}]}));
    let mut stream = executor
        .stream_flow(broken, obj(json!({})), RunOptions::default())
        .unwrap();
    assert!(stream.next_event().is_none());
    assert_eq!(stream.finish().unwrap_err().code(), "unknown_tool");
}

#[tokio::test]
async fn async_api_works_inside_a_runtime_and_the_blocking_api_refuses_politely() {
    let calls = Calls::default();
    let executor = FlowExecutor::new(registry(vec![add_tool(&calls)]));
    let definition = flow(
        json!({"name": "a", "steps": [{"tool_name": "add", "input_mapping": {"a": 1, "b": 2}}]}),
    );
    let result = executor
        .execute_async(&definition, obj(json!({})), &RunOptions::default())
        .await
        .unwrap();
    assert!(result.success);
    let err = executor
        .execute(&definition, obj(json!({})), &RunOptions::default())
        .unwrap_err();
    assert_eq!(err.code(), "blocking_in_async");
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    executor
        .stream_flow_async(&definition, obj(json!({})), &RunOptions::default(), &sender)
        .await
        .unwrap();
    drop(sender);
    let mut count = 0;
    while receiver.recv().await.is_some() {
        count += 1;
    }
    assert_eq!(count, 4);
}

#[test]
fn registered_flows_run_by_name_and_version() {
    let calls = Calls::default();
    let executor = FlowExecutor::new(registry(vec![add_tool(&calls)]));
    let v1 = flow(
        json!({"name": "calc", "version": "1.0.0", "steps": [{"tool_name": "add", "input_mapping": {"a": "n", "b": 1}}]}),
    );
    let v2 = flow(
        json!({"name": "calc", "version": "2.0.0", "steps": [{"tool_name": "add", "input_mapping": {"a": "n", "b": 100}}]}),
    );
    executor.register_flow(v1, FlowStatus::Active).unwrap();
    executor.register_flow(v2, FlowStatus::Draft).unwrap();
    let run = |version: Option<&str>| {
        executor
            .execute_flow(
                "calc",
                version,
                obj(json!({"n": 5})),
                &RunOptions::default(),
            )
            .unwrap()
    };
    assert_eq!(
        run(None).final_output.unwrap()["sum"],
        json!(6.0),
        "drafts are not picked by default"
    );
    assert_eq!(
        run(Some("2.0.0")).final_output.unwrap()["sum"],
        json!(105.0)
    );
    executor
        .with_flows(|flows| flows.set_status("calc", "2.0.0", FlowStatus::Active))
        .unwrap()
        .unwrap();
    assert_eq!(run(None).final_output.unwrap()["sum"], json!(105.0));
    let err = executor
        .execute_flow("nope", None, obj(json!({})), &RunOptions::default())
        .unwrap_err();
    assert_eq!(err.code(), "flow_not_found");
}

#[test]
fn results_round_trip_exactly_through_json_and_convert_to_traces() {
    let calls = Calls::default();
    let executor = FlowExecutor::new(registry(vec![
        add_tool(&calls),
        super::failing_tool("down", "no", &calls),
    ]))
    .with_id_generator(|name, _| format!("{name}-trace"));
    let definition = flow(json!({"name": "rt", "version": "3.1.0", "steps": [
        {"tool_name": "add", "input_mapping": {"a": "x", "b": 0.1}},
        {"tool_name": "down", "on_error": "skip"}
    ]}));
    let result = executor
        .execute(
            &definition,
            obj(json!({"x": 12345678901234567890_u64})),
            &RunOptions::default(),
        )
        .unwrap();
    let text = serde_json::to_string_pretty(&result).unwrap();
    let back: ExecutionResult = serde_json::from_str(&text).unwrap();
    assert_eq!(back, result);
    assert_eq!(serde_json::to_string_pretty(&back).unwrap(), text);
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    for field in [
        "flow_name",
        "success",
        "final_output",
        "execution_log",
        "trace_id",
        "started_at",
        "ended_at",
        "total_duration_ms",
    ] {
        assert!(value.get(field).is_some(), "missing {field}");
    }
    for field in [
        "step_index",
        "tool_name",
        "inputs",
        "outputs",
        "error_type",
        "error_message",
        "success",
        "started_at",
        "ended_at",
        "duration_ms",
        "fallback_used",
        "fallback_tool_name",
    ] {
        assert!(
            value["execution_log"][0].get(field).is_some(),
            "missing step field {field}"
        );
    }
    assert!(
        text.contains("12345678901234567890"),
        "big integers keep their digits"
    );

    let (trace, steps) = result.to_observed();
    assert_eq!(trace.trace_id, "rt-trace");
    assert_eq!(trace.metadata["flow_version"], json!("3.1.0"));
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].tool_name, "add");
    assert!(steps[1].is_error());
    assert_eq!(steps[1].error_type.as_deref(), Some("ValueError"));
}

#[test]
fn memory_checkpoints_hold_progress_of_a_failed_run() {
    let calls = Calls::default();
    let sink = Arc::new(MemoryCheckpoints::new());
    let executor = FlowExecutor::new(registry(vec![
        add_tool(&calls),
        super::failing_tool("down", "no", &calls),
    ]))
    .with_checkpoints(sink.clone())
    .with_id_generator(|_, _| "t".into());
    let definition = flow(json!({"name": "cp", "steps": [
        {"tool_name": "add", "input_mapping": {"a": 1, "b": 2}},
        {"tool_name": "down"}
    ]}));
    let result = executor
        .execute(&definition, obj(json!({})), &RunOptions::default())
        .unwrap();
    assert!(!result.success);
    let checkpoint = sink.load("t").unwrap().unwrap();
    assert_eq!(checkpoint.completed.len(), 1);
    assert_eq!(checkpoint.completed[0].merged["sum"], json!(3.0));
    assert_eq!(
        checkpoint.records.len(),
        1,
        "the failed step is not part of the resumable state"
    );
}

#[test]
fn a_dag_resumes_inside_a_half_finished_level() {
    let sink = Arc::new(MemoryCheckpoints::new());
    // s0 and s2 share the first level; s2 hangs in the first run. s3 waits for both.
    let definition = flow(json!({"name": "dag_crash", "steps": [
        {"step_id": "a", "tool_name": "s0", "input_mapping": {"n": 10}, "output_mapping": {"from_a": "n"}},
        {"step_id": "b", "tool_name": "s2", "input_mapping": {"n": 20}, "output_mapping": {"from_b": "n"}},
        {"step_id": "c", "tool_name": "s3", "input_mapping": {"n": "from_a"}, "depends_on": ["a", "b"]}
    ]}));
    let first: [Calls; 4] = Default::default();
    let executor = FlowExecutor::new(crash_tools(
        [&first[0], &first[1], &first[2], &first[3]],
        true,
    ))
    .with_checkpoints(sink.clone())
    .with_id_generator(|_, _| "dag-1".to_string());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let crashed = runtime.block_on(async {
        tokio::time::timeout(
            Duration::from_millis(300),
            executor.execute_async(&definition, obj(json!({})), &RunOptions::default()),
        )
        .await
    });
    assert!(crashed.is_err());
    let checkpoint = sink.load("dag-1").unwrap().unwrap();
    assert_eq!(
        checkpoint
            .completed
            .iter()
            .map(|c| c.step_index)
            .collect::<Vec<_>>(),
        vec![0]
    );

    let second: [Calls; 4] = Default::default();
    let executor = FlowExecutor::new(crash_tools(
        [&second[0], &second[1], &second[2], &second[3]],
        false,
    ))
    .with_checkpoints(sink.clone());
    let result = executor
        .resume_flow(&definition, checkpoint, &RunOptions::default())
        .unwrap();
    assert!(result.success, "{result:?}");
    assert_eq!(
        second.iter().map(Calls::get).collect::<Vec<_>>(),
        vec![0, 0, 1, 1]
    );
    let output = result.final_output.unwrap();
    assert_eq!(
        (
            output["from_a"].clone(),
            output["from_b"].clone(),
            output["n"].clone()
        ),
        (json!(11), json!(21), json!(12))
    );
    let ids: Vec<&str> = result
        .execution_log
        .iter()
        .map(|r| r.step_id.as_deref().unwrap())
        .collect();
    assert_eq!(ids, vec!["a", "b", "c"]);
}
