//! `chainweaver run`: run a flow file (or a registered flow) with command tools.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use serde_json::{Map, Value};

use chainweaver::executor::{FileCheckpoints, FlowExecutor, RunOptions};
use chainweaver::flow::{compile_flow, load_flow_file};
use chainweaver::recorder::model::flow::FlowDefinition;
use chainweaver::registry::FlowRegistry;
use chainweaver::replay::SavedRun;
use chainweaver::tool::ToolRegistry;
use chainweaver::tool::command::load_manifest;

use super::{Failure, Global, OutputFormat, exit};

/// Run a flow with the tools of one or more command-tool manifests.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// A flow file (`.json`, `.yaml`, `.yml`; a chain tool file works too), or the name of a
    /// flow registered in the store.
    pub flow: String,
    /// With a registered flow name: the version to run (default: the newest active one).
    #[arg(long, value_name = "VERSION")]
    pub flow_version: Option<String>,
    /// The flow's initial input: a JSON object, or `@FILE` to read it from a file.
    #[arg(long, default_value = "{}")]
    pub input: String,
    /// A TOML manifest of command tools (repeatable).
    #[arg(long = "tools", value_name = "MANIFEST")]
    pub tools: Vec<PathBuf>,
    /// A dynamic parameter `KEY=VALUE` (VALUE as JSON when it parses, else as text). Reaches
    /// every step, never stored in the result.
    #[arg(long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// Save a checkpoint after every step in this folder (resume with `--resume`).
    #[arg(long, value_name = "DIR")]
    pub checkpoint_dir: Option<PathBuf>,
    /// Resume the run with this trace id from `--checkpoint-dir`.
    #[arg(long, value_name = "TRACE_ID", requires = "checkpoint_dir")]
    pub resume: Option<String>,
    /// Also write the execution result and the flow that ran (JSON) to this file, for
    /// `chainweaver replay`.
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// Also store the run as a trace (source `flow`) in the store.
    #[arg(long)]
    pub record: bool,
}

/// Turn a library error into a [`Failure`] with its stable code and a hint.
pub(crate) fn lib_failure(err: chainweaver::Error) -> anyhow::Error {
    let hint = match &err {
        chainweaver::Error::UnknownTool { .. } => {
            Some("declare the tool in a manifest passed with --tools".to_string())
        }
        chainweaver::Error::FlowCompile { .. } => {
            Some("`chainweaver flows validate FILE --tools MANIFEST` lists every finding".into())
        }
        chainweaver::Error::Manifest { .. } => {
            Some("a manifest holds [[tool]] tables with name, argv and schemas".into())
        }
        _ => None,
    };
    let mut message = format!("[{}] {err}", err.code());
    if let chainweaver::Error::FlowCompile { findings, .. } = &err {
        message = format!("[{}] flow does not compile:", err.code());
        for finding in findings {
            message.push_str(&format!("\n  {finding}"));
        }
    }
    Failure {
        code: exit::FAILED,
        message,
        hint,
    }
    .into()
}

/// Load every manifest into one tool registry.
pub(crate) fn load_tools(manifests: &[PathBuf]) -> anyhow::Result<ToolRegistry> {
    let mut tools = ToolRegistry::new();
    for manifest in manifests {
        tools.extend(load_manifest(manifest).map_err(lib_failure)?);
    }
    Ok(tools)
}

/// Parse `--input`: a JSON object or `@FILE`.
pub(crate) fn parse_object(text: &str, what: &str) -> anyhow::Result<Map<String, Value>> {
    let (text, origin) = match text.strip_prefix('@') {
        Some(path) => (
            std::fs::read_to_string(path).with_context(|| format!("reading {what} from {path}"))?,
            path.to_string(),
        ),
        None => (text.to_string(), format!("--{what}")),
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(Failure {
            code: exit::USAGE,
            message: format!("{origin}: the {what} must be a JSON object"),
            hint: Some(r#"for example --input '{"number": 5}'"#.into()),
        }
        .into()),
        Err(err) => Err(Failure {
            code: exit::USAGE,
            message: format!("{origin}: the {what} is not valid JSON: {err}"),
            hint: None,
        }
        .into()),
    }
}

/// Parse `--param KEY=VALUE` pairs.
pub(crate) fn parse_params(params: &[String]) -> anyhow::Result<Map<String, Value>> {
    let mut map = Map::new();
    for param in params {
        let Some((key, value)) = param.split_once('=') else {
            return Err(Failure {
                code: exit::USAGE,
                message: format!("--param `{param}` is not KEY=VALUE"),
                hint: None,
            }
            .into());
        };
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.into()));
        map.insert(key.to_string(), value);
    }
    Ok(map)
}

/// A flow argument: a file when one exists at that path, else a registered flow name.
pub(crate) fn load_flow_arg(
    flow: &str,
    version: Option<&str>,
    global: &Global,
) -> anyhow::Result<FlowDefinition> {
    let path = Path::new(flow);
    if path.is_file() {
        return load_flow_file(path).map_err(lib_failure);
    }
    let looks_like_file = [".json", ".yaml", ".yml"]
        .iter()
        .any(|ext| flow.to_ascii_lowercase().ends_with(ext));
    if looks_like_file {
        return Err(Failure {
            code: exit::FAILED,
            message: format!("flow file {flow} does not exist"),
            hint: None,
        }
        .into());
    }
    let registry = open_registry(global)?;
    let found = registry.resolve(flow, version).map_err(lib_failure)?;
    Ok(found.definition.clone())
}

/// The flow registry kept in the store.
pub(crate) fn open_registry(global: &Global) -> anyhow::Result<FlowRegistry> {
    let store = chainweaver::recorder::store::open_store(&global.store)
        .with_context(|| format!("opening the store {}", global.store.display()))?;
    FlowRegistry::open(store).map_err(lib_failure)
}

/// Print the run: a summary for people, or with `--format json` the saved run `--save` writes.
fn write_result(saved: &SavedRun, global: &Global) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if global.format == OutputFormat::Json {
        serde_json::to_writer_pretty(&mut out, saved)?;
        writeln!(out)?;
        return Ok(());
    }
    let result = &saved.result;
    writeln!(
        out,
        "flow {} ({}): {} in {:.1} ms, trace {}",
        result.flow_name,
        result.flow_version.as_deref().unwrap_or("?"),
        if result.success {
            "succeeded"
        } else {
            "FAILED"
        },
        result.total_duration_ms,
        result.trace_id
    )?;
    for record in &result.execution_log {
        let status = if record.success {
            "ok".to_string()
        } else if record.skipped {
            "skipped".to_string()
        } else {
            "failed".to_string()
        };
        let mut line = format!(
            "  step {:>2}  {:<24} {:<8} {:>9.1} ms",
            record.step_index, record.tool_name, status, record.duration_ms
        );
        if record.cache_hit {
            line.push_str("  (cached)");
        }
        if let Some(fallback) = &record.fallback_tool_name {
            line.push_str(&format!("  (fallback {fallback})"));
        }
        if let Some(message) = &record.error_message {
            line.push_str(&format!("\n           {message}"));
        }
        writeln!(out, "{line}")?;
    }
    if let Some(output) = &result.final_output {
        writeln!(out, "output: {}", Value::Object(output.clone()))?;
    }
    Ok(())
}

/// Run the command.
pub fn run(args: RunArgs, global: &Global) -> anyhow::Result<u8> {
    let tools = load_tools(&args.tools)?;
    let flow = load_flow_arg(&args.flow, args.flow_version.as_deref(), global)?;
    compile_flow(&flow, &tools)
        .into_result()
        .map_err(lib_failure)?;
    let input = parse_object(&args.input, "input")?;
    let options = RunOptions {
        dynamic_params: parse_params(&args.params)?,
    };
    let mut executor = FlowExecutor::new(tools);
    if let Some(dir) = &args.checkpoint_dir {
        executor =
            executor.with_checkpoints(Arc::new(FileCheckpoints::new(dir).map_err(lib_failure)?));
    }
    let result = match &args.resume {
        Some(trace_id) => executor.resume_trace(&flow, trace_id, &options),
        None => executor.execute(&flow, input, &options),
    }
    .map_err(lib_failure)?;
    // The flow goes with the result, so `replay` needs neither the flow file nor a registry.
    let saved = SavedRun::new(result, flow);
    let result = &saved.result;
    if let Some(path) = &args.save {
        let text = serde_json::to_string_pretty(&saved)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    if args.record {
        let (trace, steps) = result.to_observed();
        let mut store = chainweaver::recorder::store::open_store(&global.store)
            .with_context(|| format!("opening the store {}", global.store.display()))?;
        store.append(&[trace], &steps).with_context(|| {
            format!(
                "storing trace {} in {}",
                result.trace_id,
                global.store.display()
            )
        })?;
    }
    write_result(&saved, global)?;
    Ok(if result.success {
        exit::OK
    } else {
        exit::FAILED
    })
}
