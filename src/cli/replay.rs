//! `chainweaver replay`: run a saved execution result's flow again and compare.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context as _;

use chainweaver::executor::{ExecutionResult, FlowExecutor, RunOptions};
use chainweaver::flow::{compile_flow, load_flow_file, tools_used};
use chainweaver::replay::ReplayMode;

use super::run::{lib_failure, load_tools, open_registry, parse_params};
use super::{Failure, Global, OutputFormat, exit};

/// Replay a saved execution result (from `chainweaver run --save` or `--format json`).
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The execution result JSON file.
    pub result: PathBuf,
    /// `verify` compares every step with the recording (alias `strict`); `execute` only runs
    /// (alias `skip_validation`).
    #[arg(long, default_value = "verify")]
    pub mode: String,
    /// Command-tool manifests declaring the flow's tools.
    #[arg(long = "tools", value_name = "MANIFEST")]
    pub tools: Vec<PathBuf>,
    /// The flow file; without it the flow is looked up in the store by the result's name and
    /// version.
    #[arg(long)]
    pub flow: Option<PathBuf>,
    /// Dynamic parameters (`KEY=VALUE`) the original run had; they are never recorded.
    #[arg(long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// Allow tools whose manifest does not declare `read_only = true`.
    #[arg(long)]
    pub allow_side_effects: bool,
}

/// Run the command.
pub fn run(args: ReplayArgs, global: &Global) -> anyhow::Result<u8> {
    let Some(mode) = ReplayMode::parse(&args.mode) else {
        return Err(Failure {
            code: exit::USAGE,
            message: format!(
                "--mode `{}` is not verify, execute, strict or skip_validation",
                args.mode
            ),
            hint: None,
        }
        .into());
    };
    let text = std::fs::read_to_string(&args.result)
        .with_context(|| format!("reading {}", args.result.display()))?;
    let recorded: ExecutionResult = serde_json::from_str(&text).map_err(|err| Failure {
        code: exit::FAILED,
        message: format!(
            "[invalid_result_file] {}:{}: not an execution result: {err}",
            args.result.display(),
            err.line()
        ),
        hint: Some("save one with `chainweaver run FLOW --save RESULT.json`".into()),
    })?;
    let tools = load_tools(&args.tools)?;
    let flow = match &args.flow {
        Some(path) => load_flow_file(path).map_err(lib_failure)?,
        None => open_registry(global)?
            .resolve(&recorded.flow_name, recorded.flow_version.as_deref())
            .map_err(lib_failure)?
            .definition
            .clone(),
    };
    compile_flow(&flow, &tools)
        .into_result()
        .map_err(lib_failure)?;
    if !args.allow_side_effects {
        let unsafe_tools: Vec<String> = tools_used(&flow)
            .into_keys()
            .filter(|name| tools.get(name).is_some_and(|t| t.read_only() != Some(true)))
            .collect();
        if !unsafe_tools.is_empty() {
            return Err(Failure {
                code: exit::FAILED,
                message: format!(
                    "[side_effects] tools not declared read_only: {}",
                    unsafe_tools.join(", ")
                ),
                hint: Some("pass --allow-side-effects to run them anyway".into()),
            }
            .into());
        }
    }
    let options = RunOptions {
        dynamic_params: parse_params(&args.params)?,
    };
    let executor = FlowExecutor::new(tools);
    let report = executor
        .replay_flow(&flow, &recorded, mode, &options)
        .map_err(lib_failure)?;
    let mut out = std::io::stdout().lock();
    if global.format == OutputFormat::Json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        let verdict = match (mode, report.all_steps_match) {
            (ReplayMode::Verify, true) => "MATCH",
            (ReplayMode::Verify, false) => "MISMATCH",
            (ReplayMode::Execute, true) => "SUCCEEDED",
            (ReplayMode::Execute, false) => "FAILED",
        };
        writeln!(
            out,
            "replay ({mode}) of trace {}: {verdict}; {} recorded steps, {} replayed",
            report.recorded_trace_id,
            recorded.execution_log.len(),
            report.replay.execution_log.len()
        )?;
        for diff in &report.diffs {
            let show = |v: &Option<serde_json::Value>| {
                v.as_ref()
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "(absent)".into())
            };
            let step = diff
                .step
                .map(|s| format!("step {s}"))
                .unwrap_or_else(|| "run".into());
            writeln!(
                out,
                "  {step} {}: expected {}, got {}",
                if diff.pointer.is_empty() {
                    "(whole step)"
                } else {
                    &diff.pointer
                },
                show(&diff.expected),
                show(&diff.actual)
            )?;
        }
    }
    Ok(if report.all_steps_match {
        exit::OK
    } else {
        exit::FAILED
    })
}
