//! Tools: timeouts (sync and async), output size, schema validation, command tools.

use std::time::{Duration, Instant};

use chainweaver::Error;
use chainweaver::executor::{FlowEvent, FlowExecutor, RunOptions, StepCache};
use chainweaver::tool::Tool;
use serde_json::json;

use super::{obj, registry};

fn sleepy_sync(seconds: f64, timeout: f64) -> Tool {
    Tool::sync("sleepy", move |_| {
        std::thread::sleep(Duration::from_secs_f64(seconds));
        Ok(json!({"late": true}))
    })
    .timeout_seconds(Some(timeout))
    .cacheable(true)
    .build()
    .unwrap()
}

fn sleepy_async(seconds: f64, timeout: f64) -> Tool {
    Tool::new_async("sleepy", move |_| async move {
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
        Ok(json!({"late": true}))
    })
    .timeout_seconds(Some(timeout))
    .cacheable(true)
    .build()
    .unwrap()
}

#[test]
fn a_sync_tool_sleeping_10s_with_a_02s_limit_returns_control_quickly() {
    let tool = sleepy_sync(10.0, 0.2);
    let start = Instant::now();
    let err = tool.run(obj(json!({}))).unwrap_err();
    let waited = start.elapsed();
    assert!(waited < Duration::from_secs(1), "waited {waited:?}");
    match err {
        Error::ToolTimeout {
            tool,
            timeout_seconds,
        } => {
            assert_eq!(tool, "sleepy");
            assert_eq!(timeout_seconds, 0.2);
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
}

#[test]
fn an_async_tool_sleeping_10s_with_a_02s_limit_returns_control_quickly() {
    let tool = sleepy_async(10.0, 0.2);
    let start = Instant::now();
    let err = tool.run(obj(json!({}))).unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "waited {:?}",
        start.elapsed()
    );
    assert_eq!(err.code(), "tool_timeout");
}

#[test]
fn a_timed_out_flow_step_returns_quickly_and_its_late_result_reaches_nothing() {
    for tool in [sleepy_sync(0.5, 0.2), sleepy_async(0.5, 0.2)] {
        let cache = std::sync::Arc::new(StepCache::new());
        let executor = FlowExecutor::new(registry(vec![tool])).with_cache(cache.clone());
        let flow = super::flow(json!({"name": "slow", "steps": [{"tool_name": "sleepy"}]}));
        let start = Instant::now();
        let events: Vec<FlowEvent> = executor
            .stream_flow(flow, obj(json!({})), RunOptions::default())
            .unwrap()
            .collect();
        assert!(
            start.elapsed() < Duration::from_millis(450),
            "took {:?}",
            start.elapsed()
        );
        // Give the abandoned call time to finish; its result must not appear anywhere.
        std::thread::sleep(Duration::from_millis(500));
        assert!(cache.is_empty(), "a late result reached the cache");
        let Some(FlowEvent::FlowEnd {
            result, success, ..
        }) = events.last()
        else {
            panic!("no flow_end: {events:?}")
        };
        assert!(!success);
        let record = &result.execution_log[0];
        assert_eq!(record.error_type.as_deref(), Some("ToolTimeoutError"));
        assert!(record.outputs.is_none());
        let step_ends = events
            .iter()
            .filter(|e| matches!(e, FlowEvent::StepEnd { record, .. } if record.outputs.is_some()))
            .count();
        assert_eq!(step_ends, 0, "no step_end carries the late output");
    }
}

#[test]
fn output_over_max_size_is_an_error_naming_size_and_limit() {
    let tool = Tool::sync("big", |_| Ok(json!({"blob": "y".repeat(200)})))
        .max_output_size(Some(100))
        .build()
        .unwrap();
    let err = tool.run(obj(json!({}))).unwrap_err();
    assert!(
        matches!(err, Error::ToolOutputSize { ref tool, limit: 100, size } if tool == "big" && size > 200),
        "{err:?}"
    );
    let small = Tool::sync("small", |_| Ok(json!({"blob": "y"})))
        .max_output_size(Some(100))
        .build()
        .unwrap();
    assert!(small.run(obj(json!({}))).is_ok());
}

#[test]
fn an_invalid_schema_is_refused_when_the_tool_is_built() {
    let err = Tool::sync("bad", |_| Ok(json!({})))
        .input_schema(json!({"type": "no-such-type"}))
        .build()
        .unwrap_err();
    assert_eq!(err.code(), "invalid_schema");
    assert!(err.to_string().contains("bad"));
}

#[test]
fn manifest_command_tools_time_out_and_are_killed() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("slow.toml");
    let marker = dir.path().join("finished");
    std::fs::write(
        &manifest,
        format!(
            "[[tool]]\nname = \"slow\"\nargv = [\"sh\", \"-c\", \"sleep 2; touch '{}'; echo '{{}}'\"]\ntimeout_seconds = 0.3\n",
            marker.display()
        ),
    )
    .unwrap();
    let tools = chainweaver::tool::command::load_manifest(&manifest).unwrap();
    let start = Instant::now();
    let err = tools.get("slow").unwrap().run(obj(json!({}))).unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(err.code(), "tool_timeout");
    std::thread::sleep(Duration::from_millis(2500));
    assert!(!marker.exists(), "the timed-out child kept running");
}

#[test]
fn a_missing_manifest_command_is_named_with_tool_and_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("ghost.toml");
    std::fs::write(
        &manifest,
        "[[tool]]\nname = \"ghost\"\nargv = [\"./no-such-script.sh\"]\n",
    )
    .unwrap();
    let tools = chainweaver::tool::command::load_manifest(&manifest).unwrap();
    let err = tools.get("ghost").unwrap().run(obj(json!({}))).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("ghost") && text.contains("ghost.toml"),
        "{text}"
    );
    assert_eq!(err.type_name(), "CommandNotFound");
}
