//! Replay: verify detects changed nested fields, truncated runs and different tools; execute
//! only runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chainweaver::executor::{FlowExecutor, RunOptions};
use chainweaver::replay::ReplayMode;
use chainweaver::tool::{Tool, ToolFailure, ToolRegistry};
use serde_json::json;

use super::{flow, obj, registry};

/// `profile` returns a nested user whose city depends on `moved`; `notify` fails when `broken`.
fn tools(moved: Arc<AtomicBool>, broken: Arc<AtomicBool>) -> ToolRegistry {
    let profile = Tool::sync("profile", move |input| {
        let city = if moved.load(Ordering::SeqCst) {
            "Bergen"
        } else {
            "Oslo"
        };
        Ok(json!({"user": {"id": input["id"], "address": {"city": city, "zip": "0150"}}}))
    })
    .build()
    .unwrap();
    let notify = Tool::sync("notify", move |input| {
        if broken.load(Ordering::SeqCst) {
            return Err(ToolFailure::new("smtp down"));
        }
        Ok(json!({"sent_to": input["city"]}))
    })
    .build()
    .unwrap();
    let other = Tool::sync("other", |_| Ok(json!({"sent_to": "Oslo"})))
        .build()
        .unwrap();
    registry(vec![profile, notify, other])
}

fn definition(second_tool: &str) -> chainweaver::recorder::model::flow::FlowDefinition {
    flow(json!({"name": "greet", "steps": [
        {"tool_name": "profile", "input_mapping": {"id": "id"}},
        {"tool_name": second_tool, "input_mapping": {"city": "/user/address/city"}}
    ]}))
}

#[test]
fn verify_matches_an_unchanged_run_and_survives_a_json_round_trip() {
    let executor = FlowExecutor::new(tools(Default::default(), Default::default()));
    let recorded = executor
        .execute(
            &definition("notify"),
            obj(json!({"id": 7})),
            &RunOptions::default(),
        )
        .unwrap();
    let recorded: chainweaver::executor::ExecutionResult =
        serde_json::from_str(&serde_json::to_string(&recorded).unwrap()).unwrap();
    let report = executor
        .replay_flow(
            &definition("notify"),
            &recorded,
            ReplayMode::Verify,
            &RunOptions::default(),
        )
        .unwrap();
    assert!(report.all_steps_match, "{:#?}", report.diffs);
    assert!(report.diffs.is_empty());
    assert_ne!(report.replay.trace_id, recorded.trace_id);
}

#[test]
fn verify_reports_a_changed_nested_field_by_pointer() {
    let moved = Arc::new(AtomicBool::new(false));
    let executor = FlowExecutor::new(tools(moved.clone(), Default::default()));
    let recorded = executor
        .execute(
            &definition("notify"),
            obj(json!({"id": 7})),
            &RunOptions::default(),
        )
        .unwrap();
    moved.store(true, Ordering::SeqCst);
    let report = executor
        .replay_flow(
            &definition("notify"),
            &recorded,
            ReplayMode::parse("strict").unwrap(),
            &RunOptions::default(),
        )
        .unwrap();
    assert!(!report.all_steps_match);
    let pointers: Vec<(Option<usize>, &str)> = report
        .diffs
        .iter()
        .map(|d| (d.step, d.pointer.as_str()))
        .collect();
    assert!(
        pointers.contains(&(Some(0), "/outputs/user/address/city")),
        "{pointers:?}"
    );
    assert!(
        pointers.contains(&(Some(1), "/inputs/city")),
        "{pointers:?}"
    );
    let diff = report
        .diffs
        .iter()
        .find(|d| d.pointer == "/outputs/user/address/city")
        .unwrap();
    assert_eq!(diff.expected, Some(json!("Oslo")));
    assert_eq!(diff.actual, Some(json!("Bergen")));
    assert!(report.step_count_matches && report.success_matches);
}

#[test]
fn verify_rejects_a_truncated_run_and_different_tools() {
    let broken = Arc::new(AtomicBool::new(false));
    let executor = FlowExecutor::new(tools(Default::default(), broken.clone()));
    let three = flow(json!({"name": "greet", "steps": [
        {"tool_name": "profile", "input_mapping": {"id": "id"}},
        {"tool_name": "notify", "input_mapping": {"city": "/user/address/city"}},
        {"tool_name": "profile", "input_mapping": {"id": "id"}}
    ]}));
    let recorded = executor
        .execute(&three, obj(json!({"id": 7})), &RunOptions::default())
        .unwrap();
    broken.store(true, Ordering::SeqCst);
    let report = executor
        .replay_flow(
            &three,
            &recorded,
            ReplayMode::Verify,
            &RunOptions::default(),
        )
        .unwrap();
    assert!(!report.all_steps_match);
    assert!(
        !report.step_count_matches,
        "the replay stopped after step 1"
    );
    assert!(!report.success_matches);
    assert!(
        report
            .diffs
            .iter()
            .any(|d| d.step == Some(2) && d.pointer.is_empty() && d.actual.is_none())
    );

    broken.store(false, Ordering::SeqCst);
    let recorded = executor
        .execute(
            &definition("notify"),
            obj(json!({"id": 7})),
            &RunOptions::default(),
        )
        .unwrap();
    let report = executor
        .replay_flow(
            &definition("other"),
            &recorded,
            ReplayMode::Verify,
            &RunOptions::default(),
        )
        .unwrap();
    assert!(!report.all_steps_match, "same outputs, different tool");
    assert!(
        report
            .diffs
            .iter()
            .any(|d| d.step == Some(1) && d.pointer == "/tool_name")
    );
}

#[test]
fn execute_mode_runs_without_comparing() {
    let moved = Arc::new(AtomicBool::new(false));
    let executor = FlowExecutor::new(tools(moved.clone(), Default::default()));
    let recorded = executor
        .execute(
            &definition("notify"),
            obj(json!({"id": 7})),
            &RunOptions::default(),
        )
        .unwrap();
    moved.store(true, Ordering::SeqCst);
    let mode = ReplayMode::parse("skip_validation").unwrap();
    let report = executor
        .replay_flow(
            &definition("notify"),
            &recorded,
            mode,
            &RunOptions::default(),
        )
        .unwrap();
    assert_eq!(report.mode, ReplayMode::Execute);
    assert!(
        report.all_steps_match,
        "execute mode only asks whether the tools still complete"
    );
    assert!(report.diffs.is_empty());
    let err = executor
        .replay_flow(
            &flow(json!({"name": "other_flow", "steps": []})),
            &recorded,
            ReplayMode::Verify,
            &RunOptions::default(),
        )
        .unwrap_err();
    assert_eq!(err.code(), "replay");
}
