//! The fixture stores the browser tests run on, written through a real store: deterministic
//! hand-made traces for the trace views, and generated traffic mined by the real analyzer for
//! the pattern and candidate views.

use chainweaver_analyzer::mine::{ChainAnalyzer, MineConfig, MineOutcome, StreamConfig};
use chainweaver_recorder::model::candidate::{
    Candidate, FailureCounts, StepDiff, Verdict, VerdictStatus, VerdictThresholds,
};
use chainweaver_recorder::model::{ObservedStep, ObservedTrace, Timestamp};
use chainweaver_recorder::store::TraceStore;
use chainweaver_recorder::synth::{Generator, GeneratorConfig};
use chainweaver_recorder::workspace::Workspace;
use chrono::{TimeZone, Utc};
use serde_json::json;

pub fn at(minutes: i64, millis: i64) -> Timestamp {
    Utc.with_ymd_and_hms(2026, 11, 1, 9, 0, 0).unwrap()
        + chrono::Duration::minutes(minutes)
        + chrono::Duration::milliseconds(millis)
}

const TOOLS: [&str; 5] = [
    "get_user_details",
    "get_order_details",
    "list_user_orders",
    "cancel_pending_order",
    "calculate",
];

/// 40 timed traces (some with failed steps), one with durations only, one with nothing but
/// order.
pub fn write_fixture(store: &mut dyn TraceStore) {
    let mut traces = Vec::new();
    let mut steps = Vec::new();
    for t in 0..40i64 {
        let id = format!("trace-{t:03}");
        let source = if t % 3 == 0 {
            "recorder"
        } else {
            "tau-bench/retail"
        };
        let mut trace = ObservedTrace::new(&id, source);
        trace.started_at = Some(at(t * 7, 0));
        let count = 2 + (t % 4) as u32;
        let mut clock = 0i64;
        for i in 0..count {
            let tool = TOOLS[((t as usize) + i as usize * 2) % TOOLS.len()];
            let duration = 40 + ((t * 37 + i as i64 * 113) % 900);
            let mut step = ObservedStep::new(
                &id,
                i,
                tool,
                json!({"user_id": format!("user_{t}"), "order_id": format!("#W{:07}", t * 131 + i as i64), "amount": 10.50}),
            );
            step.call_id = Some(format!("call_{t}_{i}"));
            step.started_at = Some(at(t * 7, clock));
            step.ended_at = Some(at(t * 7, clock + duration));
            step.duration_ms = Some(duration as f64);
            if t % 5 == 2 && i == count - 1 {
                step.error_type = Some("ToolError".into());
                step.error_message = Some(format!("order #W{:07} is not pending", t * 131));
            } else {
                step.outputs = Some(json!({
                    "status": "ok",
                    "items": [{"item_id": "1008292230", "price": 1183.68}, {"item_id": "4983901480", "price": 262.47}],
                    "address": {"city": "Austin", "zip": "78701"}
                }));
            }
            clock += duration + 25;
            steps.push(step);
        }
        trace.ended_at = Some(at(t * 7, clock));
        traces.push(trace);
    }
    // Durations only.
    let mut durations_only = ObservedTrace::new("trace-durations", "openai-log");
    durations_only.metadata.insert("task".into(), json!(17));
    traces.push(durations_only);
    for (i, ms) in [120.0, 480.0, 60.0].into_iter().enumerate() {
        let mut step = ObservedStep::new("trace-durations", i as u32, TOOLS[i], json!({"n": i}));
        step.duration_ms = Some(ms);
        step.outputs = Some(json!({"ok": true}));
        steps.push(step);
    }
    // Neither timestamps nor durations.
    traces.push(ObservedTrace::new("trace-order", "python-jsonl"));
    for i in 0..3u32 {
        let mut step = ObservedStep::new("trace-order", i, TOOLS[4 - i as usize], json!({"q": i}));
        step.outputs = Some(json!([i, i + 1]));
        steps.push(step);
    }
    store.append(&traces, &steps).unwrap();
}

/// Traces of generated agent traffic (with planted flows) in the store, and the patterns and
/// candidates the real analyzer mines from them, stored as `mine` stores them. One candidate
/// gets a verdict built from its own occurrences (see [`replay_verdict`]); the others have
/// none, as after `mine` without `verify`.
pub fn write_analyzed(store: &mut dyn TraceStore) -> MineOutcome {
    let mut generator = Generator::new(GeneratorConfig {
        traces: 150,
        seed: 11,
        ..GeneratorConfig::default()
    });
    let mut traces = Vec::new();
    let mut steps = Vec::new();
    while let Some(trace) = generator.next_trace() {
        traces.push(trace.trace);
        steps.extend(trace.steps);
    }
    store.append(&traces, &steps).unwrap();
    let outcome = ChainAnalyzer::new(MineConfig::default())
        .analyze_store(&*store, &StreamConfig::default())
        .unwrap();
    store
        .replace_mining_results(&outcome.patterns, &outcome.candidates)
        .unwrap();
    let verdict = replay_verdict(&*store, &outcome.candidates);
    store.put_verdicts(&[verdict]).unwrap();
    outcome
}

/// A partial verdict for the best candidate whose last step takes an input from an earlier
/// step: five of its real occurrences replayed, the first with that input replayed wrong. The
/// difference names the occurrence's trace, the step and the pointer, and its recorded value
/// is the one in the stored trace, so jumping to it lands on that call.
pub fn replay_verdict(store: &dyn TraceStore, candidates: &[Candidate]) -> Verdict {
    let (candidate, binding) = candidates
        .iter()
        .find_map(|c| {
            c.bindings
                .iter()
                .rev()
                .find(|b| b.step > 0 && b.source.source_step().is_some())
                .map(|b| (c, b))
        })
        .expect("a candidate with a linked binding");
    let occurrence = candidate.evidence.occurrence_refs[0].clone();
    let step_index = occurrence.step_indices[binding.step];
    let trace = store.get_trace(&occurrence.trace_id).unwrap().unwrap();
    let step = trace
        .steps
        .iter()
        .find(|s| s.step_index == step_index)
        .unwrap();
    assert_eq!(step.tool_name, binding.tool_name);
    let recorded = step.inputs.pointer(&binding.field).cloned();
    let replayed = candidate.evidence.occurrence_refs.len().min(5);
    Verdict {
        candidate_id: candidate.id.clone(),
        status: VerdictStatus::Partial,
        occurrences_replayed: replayed,
        exact_matches: replayed - 1,
        exact_rate: (replayed - 1) as f64 / replayed as f64,
        failures: FailureCounts {
            binding_wrong: 1,
            ..FailureCounts::default()
        },
        mode: "recorded".into(),
        reason: format!(
            "{} of {replayed} replays matched their recording",
            replayed - 1
        ),
        cause: None,
        thresholds: Some(VerdictThresholds::default()),
        holdout_traces: 30,
        occurrences_found: replayed,
        verified_at: None,
        diffs: vec![StepDiff {
            occurrence,
            step: binding.step,
            tool_name: binding.tool_name.clone(),
            pointer: format!("/inputs{}", binding.field),
            expected: recorded,
            actual: Some(json!("replayed-wrong")),
        }],
    }
}

/// A trace whose payloads try to drive the terminal: ESC sequences, NUL, CR and a 1 MB line.
pub fn write_hostile_trace(store: &mut dyn TraceStore) {
    let trace = ObservedTrace::new("trace-\u{1b}[2Jevil", "hostile\r\u{0}");
    let mut step = ObservedStep::new(
        "trace-\u{1b}[2Jevil",
        0,
        "tool\u{1b}]52;c;aGk=\u{7}",
        json!({"cmd": "\u{1b}[31mred\u{1b}[0m\u{0}nul\rcr", "long": "A".repeat(1 << 20)}),
    );
    step.outputs = Some(json!({"raw": "B".repeat(1 << 20) + "\u{1b}[?1049l"}));
    step.error_message = Some("boom\u{1b}[2J".into());
    store.append(&[trace], &[step]).unwrap();
}
