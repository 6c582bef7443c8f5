//! The fixture store the browser tests run on: deterministic traces, steps and documents
//! written through a real store.

use chainweaver_recorder::model::{ObservedStep, ObservedTrace, Timestamp};
use chainweaver_recorder::store::TraceStore;
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
/// order, plus a pattern, two candidates and a verdict.
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

    store
        .put_document(
            "pattern",
            "p-0001",
            &json!({
                "name": "get_user_details > get_order_details",
                "steps": ["get_user_details", "get_order_details"],
                "support": 9,
                "occurrences": [{"trace_id": "trace-000", "start": 0}, {"trace_id": "trace-005", "start": 0}]
            }),
        )
        .unwrap();
    store
        .put_document(
            "candidate",
            "c-0001",
            &json!({
                "name": "lookup_order",
                "support": 9,
                "steps": [{"tool_name": "get_user_details"}, {"tool_name": "get_order_details"}],
                "bindings": [
                    {"step": 0, "field": "user_id", "source": "input:user_id", "confidence": 1.0},
                    {"step": 1, "field": "order_id", "source": "/steps/0/outputs/orders/0", "confidence": 0.78}
                ],
                "round_trips_saved": 1
            }),
        )
        .unwrap();
    store
        .put_document(
            "candidate",
            "c-0002",
            &json!({"name": "cancel_then_calculate", "support": 4, "steps": ["cancel_pending_order", "calculate"]}),
        )
        .unwrap();
    store
        .put_document(
            "verdict",
            "c-0001",
            &json!({
                "candidate": "c-0001",
                "status": "partial",
                "occurrences_replayed": 5,
                "exact_matches": 4,
                "diffs": [{"step": 1, "pointer": "/items/0/price", "expected": 1183.68, "actual": 1183.7}]
            }),
        )
        .unwrap();
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
