//! Executor overhead per step: a 10-step linear flow of a trivial in-process tool
//! (`{"value": n} -> {"value": n + 1}`, input and output schemas validated), run many times
//! through the blocking API. Prints one JSON line. Run by `scripts/bench_executor.sh`.
//!
//! `bench_executor map [runs]`: the same tool as a map step over a list of 1,000 elements
//! (sequential), per iteration, to compare with a linear step.

#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::time::Instant;

use chainweaver::executor::{FlowExecutor, RunOptions};
use chainweaver::recorder::model::flow::FlowDefinition;
use chainweaver::tool::{Tool, ToolRegistry};
use serde_json::json;

// The allocator the `chainweaver` binary uses, so the figures are the command's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const STEPS: usize = 10;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("map") {
        let runs = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(200);
        map_step(runs);
        return;
    }
    let iterations: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let inc = inc_tool();
    let executor = FlowExecutor::new(registry(inc));
    let steps: Vec<_> = (0..STEPS)
        .map(|_| json!({"tool_name": "inc", "input_mapping": {"value": "value"}}))
        .collect();
    let flow = FlowDefinition::from_value(json!({"name": "ten", "steps": steps})).unwrap();
    let input = json!({"value": 0}).as_object().cloned().unwrap();
    let options = RunOptions::default();
    let check = executor.execute(&flow, input.clone(), &options).unwrap();
    assert!(check.success);
    assert_eq!(check.final_output.unwrap()["value"], json!(STEPS));
    for _ in 0..iterations.min(2_000) {
        executor.execute(&flow, input.clone(), &options).unwrap();
    }
    let mut runs = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        for _ in 0..iterations / 5 {
            let result = executor.execute(&flow, input.clone(), &options).unwrap();
            std::hint::black_box(result);
        }
        runs.push(start.elapsed().as_secs_f64() / (iterations / 5) as f64);
    }
    runs.sort_by(|a, b| a.total_cmp(b));
    let per_flow = runs[runs.len() / 2];
    println!(
        "{}",
        json!({"impl": "rust chainweaver", "steps": STEPS,
               "per_flow_us": per_flow * 1e6, "per_step_us": per_flow * 1e6 / STEPS as f64})
    );
}

/// `{"value": n} -> {"value": n + 1}`, input and output schemas validated.
fn inc_tool() -> Tool {
    let schema = json!({"type": "object", "properties": {"value": {"type": "integer"}}, "required": ["value"]});
    Tool::sync("inc", |input| {
        let value = input.get("value").and_then(|v| v.as_i64()).unwrap_or(0);
        Ok(json!({"value": value + 1}))
    })
    .input_schema(schema.clone())
    .output_schema(schema)
    .build()
    .unwrap()
}

fn registry(tool: Tool) -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    tools.register(tool);
    tools
}

const ELEMENTS: usize = 1_000;

/// One map step over 1,000 elements, per iteration.
fn map_step(runs: usize) {
    let executor = FlowExecutor::new(registry(inc_tool()));
    let flow = FlowDefinition::from_value(json!({
        "name": "each",
        "steps": [{
            "tool_name": "inc",
            "input_mapping": {"value": "/item"},
            "output_key": "incremented",
            "for_each": {"list": "/values"}
        }]
    }))
    .unwrap();
    let values: Vec<usize> = (0..ELEMENTS).collect();
    let input = json!({"values": values}).as_object().cloned().unwrap();
    let options = RunOptions::default();
    let check = executor.execute(&flow, input.clone(), &options).unwrap();
    assert!(check.success);
    assert_eq!(
        check.final_output.unwrap()["incremented"][ELEMENTS - 1]["value"],
        json!(ELEMENTS)
    );
    for _ in 0..runs.min(20) {
        executor.execute(&flow, input.clone(), &options).unwrap();
    }
    let mut times = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        for _ in 0..runs / 5 {
            let result = executor.execute(&flow, input.clone(), &options).unwrap();
            std::hint::black_box(result);
        }
        times.push(start.elapsed().as_secs_f64() / (runs / 5) as f64);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    let per_flow = times[times.len() / 2];
    println!(
        "{}",
        json!({"impl": "rust chainweaver map step", "elements": ELEMENTS,
               "per_flow_us": per_flow * 1e6, "per_iteration_us": per_flow * 1e6 / ELEMENTS as f64})
    );
}
