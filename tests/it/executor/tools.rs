//! Tools: timeouts (sync and async), output size, schema validation, command tools.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chainweaver::Error;
use chainweaver::executor::{FlowEvent, FlowExecutor, RunOptions, StepCache};
use chainweaver::tool::Tool;
use serde_json::json;

use super::{obj, registry};

/// Holds a tool inside its call until the test opens it, so a test can tell whether control
/// came back while the call was still running. A minute after the call starts it lets go by
/// itself, so a broken timeout fails the test (the call is `finished`) instead of hanging it.
#[derive(Clone, Default)]
struct Gate {
    open: Arc<AtomicBool>,
    finished: Arc<AtomicBool>,
}

const GATE_LIMIT: Duration = Duration::from_secs(60);
const GATE_POLL: Duration = Duration::from_millis(5);

impl Gate {
    /// The blocking tool's body: wait for the gate.
    fn pass_blocking(&self) {
        let limit = Instant::now() + GATE_LIMIT;
        while !self.open.load(Ordering::SeqCst) && Instant::now() < limit {
            std::thread::sleep(GATE_POLL);
        }
        self.finished.store(true, Ordering::SeqCst);
    }

    /// The async tool's body: wait for the gate.
    async fn pass(&self) {
        let limit = Instant::now() + GATE_LIMIT;
        while !self.open.load(Ordering::SeqCst) && Instant::now() < limit {
            tokio::time::sleep(GATE_POLL).await;
        }
        self.finished.store(true, Ordering::SeqCst);
    }

    fn open(&self) {
        self.open.store(true, Ordering::SeqCst);
    }

    fn finished(&self) -> bool {
        self.finished.load(Ordering::SeqCst)
    }

    /// After `open`: wait until the call held by a blocking tool has run to its end.
    fn wait_finished(&self) {
        let limit = Instant::now() + GATE_LIMIT;
        while !self.finished() {
            assert!(Instant::now() < limit, "the held call never finished");
            std::thread::sleep(GATE_POLL);
        }
    }
}

fn held_sync(gate: &Gate, timeout: f64) -> Tool {
    let gate = gate.clone();
    Tool::sync("held", move |_| {
        gate.pass_blocking();
        Ok(json!({"late": true}))
    })
    .timeout_seconds(Some(timeout))
    .cacheable(true)
    .build()
    .unwrap()
}

fn held_async(gate: &Gate, timeout: f64) -> Tool {
    let gate = gate.clone();
    Tool::new_async("held", move |_| {
        let gate = gate.clone();
        async move {
            gate.pass().await;
            Ok(json!({"late": true}))
        }
    })
    .timeout_seconds(Some(timeout))
    .cacheable(true)
    .build()
    .unwrap()
}

#[test]
fn a_sync_tool_past_its_limit_returns_control_while_it_still_runs() {
    let gate = Gate::default();
    let err = held_sync(&gate, 0.2).run(obj(json!({}))).unwrap_err();
    assert!(!gate.finished(), "the call returned only when the tool did");
    gate.open();
    gate.wait_finished();
    match err {
        Error::ToolTimeout {
            tool,
            timeout_seconds,
        } => {
            assert_eq!(tool, "held");
            assert_eq!(timeout_seconds, 0.2);
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
}

#[test]
fn an_async_tool_past_its_limit_returns_control_while_it_still_runs() {
    let gate = Gate::default();
    let err = held_async(&gate, 0.2).run(obj(json!({}))).unwrap_err();
    assert!(!gate.finished(), "the call returned only when the tool did");
    gate.open();
    assert_eq!(err.code(), "tool_timeout");
}

#[test]
fn a_timed_out_flow_step_ends_the_run_and_its_late_result_reaches_nothing() {
    for blocking in [true, false] {
        let gate = Gate::default();
        let tool = if blocking {
            held_sync(&gate, 0.2)
        } else {
            held_async(&gate, 0.2)
        };
        let cache = Arc::new(StepCache::new());
        let executor = FlowExecutor::new(registry(vec![tool])).with_cache(cache.clone());
        let flow = super::flow(json!({"name": "slow", "steps": [{"tool_name": "held"}]}));
        let events: Vec<FlowEvent> = executor
            .stream_flow(flow, obj(json!({})), RunOptions::default())
            .unwrap()
            .collect();
        assert!(
            !gate.finished(),
            "blocking {blocking}: the run ended only when the tool did"
        );
        // Let the abandoned call finish; its result must not appear anywhere. (An async call
        // was dropped at its timeout and never finishes.)
        gate.open();
        if blocking {
            gate.wait_finished();
        }
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

/// The state `ps` reports for process `pid` (`Z` a zombie), or `None` once it is gone.
fn process_state(pid: &str) -> Option<String> {
    let output = std::process::Command::new("ps")
        .args(["-o", "stat=", "-p", pid])
        .output()
        .expect("ps runs");
    let state = String::from_utf8_lossy(&output.stdout).trim().to_string();
    (output.status.success() && !state.is_empty()).then_some(state)
}

#[test]
fn manifest_command_tools_time_out_and_are_killed() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("slow.toml");
    let pid_file = dir.path().join("pid");
    let gate = dir.path().join("gate");
    let marker = dir.path().join("finished");
    // The command notes its pid, then waits for the gate file (a minute at most, so a child
    // that is not killed ends by itself), then leaves a marker.
    let script = format!(
        "echo $$ > '{}'; i=0; while [ ! -e '{}' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; touch '{}'; echo '{{}}'",
        pid_file.display(),
        gate.display(),
        marker.display()
    );
    std::fs::write(
        &manifest,
        format!(
            "[[tool]]\nname = \"slow\"\nargv = [\"sh\", \"-c\", {script:?}]\ntimeout_seconds = 1.0\n"
        ),
    )
    .unwrap();
    let tools = chainweaver::tool::command::load_manifest(&manifest).unwrap();
    let err = tools.get("slow").unwrap().run(obj(json!({}))).unwrap_err();
    assert_eq!(err.code(), "tool_timeout");
    assert!(
        !marker.exists(),
        "the call returned only when the command did"
    );
    // The kill is on its way: the child dies (is gone, or a zombie nobody reaped yet) while it
    // would still be waiting for the gate. A generous limit guards against a hang.
    let pid = std::fs::read_to_string(&pid_file).expect("the command started");
    let limit = Instant::now() + Duration::from_secs(10);
    let mut state = process_state(pid.trim());
    while state.as_deref().is_some_and(|s| !s.starts_with('Z')) && Instant::now() < limit {
        std::thread::sleep(Duration::from_millis(10));
        state = process_state(pid.trim());
    }
    // Open the gate either way, so a surviving child ends now.
    std::fs::write(&gate, "").unwrap();
    assert!(
        state.as_deref().is_none_or(|s| s.starts_with('Z')),
        "the timed-out child is still running: {state:?}"
    );
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
