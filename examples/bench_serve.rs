//! The FlowServer benchmark's Rust side as a library user writes it: the benchmark's trivial
//! flow (one step, `echo`, returning the `n` it is given) over an in-process tool, served over
//! stdio by `chainweaver::mcp::server::FlowServer`. It is the counterpart of
//! `scripts/bench_serve_python.py`, where the Python FlowServer serves the same flow over a
//! Python function; `chainweaver serve` can only run command tools (a process per call) or MCP
//! servers, so the binary is measured too, but this is the like-for-like comparison. Run by
//! `scripts/bench_serve.sh`.

#![allow(clippy::print_stderr)]

use std::process::ExitCode;

use chainweaver::mcp::catalog::Exposure;
use chainweaver::mcp::server::{FlowServer, ServeConfig};
use chainweaver::mcp::wire;
use chainweaver::recorder::model::flow::{FlowDefinition, FlowStatus};
use chainweaver::registry::FlowRegistry;
use chainweaver::tool::{Tool, ToolRegistry};
use serde_json::json;

// The allocator the `chainweaver` binary uses.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    match serve() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bench_serve: {err}");
            ExitCode::FAILURE
        }
    }
}

fn serve() -> Result<(), Box<dyn std::error::Error>> {
    let schema =
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let echo = Tool::sync("echo", |input| Ok(json!({"n": input.get("n").cloned()})))
        .description("Return n")
        .input_schema(schema.clone())
        .output_schema(schema)
        .read_only(Some(true))
        .build()?;
    let mut tools = ToolRegistry::new();
    tools.register(echo);
    let flow = FlowDefinition::from_value(json!({
        "name": "echo_flow",
        "description": "The benchmark's trivial flow",
        "steps": [{"tool_name": "echo", "input_mapping": {"n": "n"}}]
    }))?;
    let mut registry = FlowRegistry::new();
    registry.register(flow, FlowStatus::Active)?;
    let config = ServeConfig {
        name: "bench".into(),
        exposure: Exposure {
            flows: vec!["echo_flow".into()],
            ..Exposure::default()
        },
        chain_tools: None,
    };
    let server = FlowServer::new(tools, registry, config);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(wire::serve_stdio(server))?;
    Ok(())
}
