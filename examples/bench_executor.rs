//! Executor overhead per step: a 10-step linear flow of a trivial in-process tool
//! (`{"value": n} -> {"value": n + 1}`, input and output schemas validated), run many times
//! through the blocking API. Prints one JSON line. Run by `scripts/bench_executor.sh`.

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
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50_000);
    let schema = json!({"type": "object", "properties": {"value": {"type": "integer"}}, "required": ["value"]});
    let inc = Tool::sync("inc", |input| {
        let value = input.get("value").and_then(|v| v.as_i64()).unwrap_or(0);
        Ok(json!({"value": value + 1}))
    })
    .input_schema(schema.clone())
    .output_schema(schema)
    .build()
    .unwrap();
    let mut tools = ToolRegistry::new();
    tools.register(inc);
    let executor = FlowExecutor::new(tools);
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
