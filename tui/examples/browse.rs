//! Open a store in the terminal browser, as `chainweaver tui` will:
//!
//! ```text
//! cargo run -p chainweaver-tui --example browse -- path/to/chainweaver.db [--ascii] [--no-color] [--no-mouse]
//! cargo run -p chainweaver-tui --example browse -- --fixture path/to/new.db   # write a demo store first
//! ```

#![allow(clippy::print_stdout, clippy::print_stderr)] // an example binary reports on the console

use std::path::PathBuf;
use std::process::ExitCode;

use chainweaver_recorder::model::{ObservedStep, ObservedTrace};
use chainweaver_recorder::store::{SqliteStore, TraceStore};
use chainweaver_tui::{TuiOptions, run};
use chrono::{TimeZone, Utc};
use serde_json::json;

fn demo_store(path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let mut store = SqliteStore::open(path)?;
    let t0 = Utc
        .with_ymd_and_hms(2026, 11, 1, 9, 0, 0)
        .single()
        .ok_or("bad date")?;
    let tools = [
        "get_user_details",
        "get_order_details",
        "cancel_pending_order",
        "calculate",
    ];
    let mut traces = Vec::new();
    let mut steps = Vec::new();
    for t in 0..300i64 {
        let id = format!("demo-{t:04}");
        let mut trace = ObservedTrace::new(
            &id,
            if t % 2 == 0 {
                "tau-bench/retail"
            } else {
                "recorder"
            },
        );
        let start = t0 + chrono::Duration::minutes(t * 3);
        trace.started_at = Some(start);
        let mut clock = 0;
        for i in 0..(2 + t % 5) {
            let ms = 30 + (t * 53 + i * 101) % 1_500;
            let mut step = ObservedStep::new(
                &id,
                i as u32,
                tools[((t + i) % 4) as usize],
                json!({"user_id": format!("user_{t}"), "note": "line\u{1b}[31m escaped"}),
            );
            step.started_at = Some(start + chrono::Duration::milliseconds(clock));
            step.ended_at = Some(start + chrono::Duration::milliseconds(clock + ms));
            step.duration_ms = Some(ms as f64);
            if t % 7 == 3 && i == 1 {
                step.error_message = Some("order is not pending".into());
            } else {
                step.outputs = Some(json!({"ok": true, "items": [1, 2, 3]}));
            }
            clock += ms + 20;
            steps.push(step);
        }
        trace.ended_at = Some(start + chrono::Duration::milliseconds(clock));
        traces.push(trace);
    }
    store.append(&traces, &steps)?;
    store.put_document("pattern", "p1", &json!({"name": "lookup", "steps": ["get_user_details", "get_order_details"], "support": 60}))?;
    store.put_document("candidate", "c1", &json!({"name": "lookup_order", "support": 60, "steps": ["get_user_details", "get_order_details"], "bindings": [{"step": 1, "field": "user_id", "source": "/steps/0/inputs/user_id", "confidence": 0.98}]}))?;
    store.put_document("verdict", "c1", &json!({"candidate": "c1", "status": "verified", "occurrences_replayed": 12, "exact_matches": 12}))?;
    Ok(())
}

fn main() -> ExitCode {
    let mut options = TuiOptions::default().with_env();
    let mut path = None;
    let mut fixture = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--ascii" => options.ascii = true,
            "--no-color" => options.no_color = true,
            "--no-mouse" => options.no_mouse = true,
            "--fixture" => fixture = true,
            other => path = Some(PathBuf::from(other)),
        }
    }
    let Some(path) = path else {
        eprintln!("usage: browse [--fixture] STORE [--ascii] [--no-color] [--no-mouse]");
        return ExitCode::from(2);
    };
    if fixture
        && !path.exists()
        && let Err(e) = demo_store(&path)
    {
        eprintln!("error: writing the demo store {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    match run(&path, options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
