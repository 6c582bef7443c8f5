//! `chainweaver replay`: run a saved execution result's flow again and compare.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context as _;

use chainweaver::executor::{FlowExecutor, RunOptions};
use chainweaver::flow::{compile_flow, load_flow_file, tools_used};
use chainweaver::registry::FlowRegistry;
use chainweaver::replay::{ReplayMode, SavedRun};

use super::run::{lib_failure, load_tools, parse_params};
use super::{Failure, Global, OutputFormat, exit};

/// Replay a saved run (from `chainweaver run --save` or `--format json`).
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
    /// The flow file to replay with; without it, the flow saved with the run (`run --save`
    /// keeps it), else the registered flow of the result's name and version.
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
    let saved = SavedRun::from_json(&text).map_err(|err| Failure {
        code: exit::FAILED,
        message: format!(
            "[invalid_result_file] {}{}: not an execution result: {err}",
            args.result.display(),
            if err.line() > 0 {
                format!(":{}", err.line())
            } else {
                String::new()
            }
        ),
        hint: Some("save one with `chainweaver run FLOW --save RESULT.json`".into()),
    })?;
    let recorded = &saved.result;
    let tools = load_tools(&args.tools)?;
    let given = match &args.flow {
        Some(path) => Some(load_flow_file(path).map_err(lib_failure)?),
        None => None,
    };
    let registry = || -> chainweaver::Result<FlowRegistry> {
        // A missing store registers nothing; looking there must not create one.
        if !super::store::exists(&global.store) {
            return Ok(FlowRegistry::new());
        }
        let store = chainweaver::recorder::store::open_store(&global.store)?;
        FlowRegistry::open(store)
    };
    let (flow, source) = saved
        .flow_for_replay(given, registry)
        .map_err(|err| match err {
            chainweaver::Error::Replay { .. } => Failure {
                code: exit::FAILED,
                message: format!("[{}] {}: {err}", err.code(), args.result.display()),
                hint: Some(format!(
                    "pass the flow file it ran with --flow FILE, or register it in {} with \
                     `chainweaver flows register FILE`",
                    global.store.display()
                )),
            }
            .into(),
            other => lib_failure(other),
        })?;
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
        .replay_flow(&flow, recorded, mode, &options)
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
            "replay ({mode}) of trace {}, flow {} {} ({source}): {verdict}; {} recorded steps, \
             {} replayed",
            report.recorded_trace_id,
            flow.name(),
            flow.version(),
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
