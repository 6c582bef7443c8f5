//! `chainweaver flows`: validate flow files, and list, show and register flows in the store.

use std::io::Write;
use std::path::PathBuf;

use serde_json::{Value, json};

use chainweaver::flow::{CompileReport, compile_flow, load_flow_file, step_views};
use chainweaver::registry::FlowStatus;
use chainweaver::tool::ToolRegistry;

use chainweaver_recorder::model::candidate::{CandidateStatus, VerdictStatus};

use chainweaver_recorder::workspace::Workspace;

use super::mine::find_candidate;
use super::run::{lib_failure, load_tools, open_registry};
use super::store::open_existing;
use super::verify::check_promotable;
use super::{Failure, Global, OutputFormat, exit};

/// Validate, list, show and register flows.
#[derive(Debug, clap::Args)]
pub struct FlowsArgs {
    #[command(subcommand)]
    pub command: FlowsCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum FlowsCommand {
    /// Check flow files: structure always; tools, mappings, types and fallbacks with --tools.
    Validate {
        /// Flow files (JSON or YAML).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Command-tool manifests declaring the tools the flows call.
        #[arg(long = "tools", value_name = "MANIFEST")]
        tools: Vec<PathBuf>,
    },
    /// List the flows registered in the store.
    List,
    /// Show one registered flow (the newest active version unless --version).
    Show {
        name: String,
        #[arg(long, value_name = "VERSION")]
        flow_version: Option<String>,
    },
    /// Register a flow file in the store (compiled first when --tools is given).
    Register {
        file: PathBuf,
        #[arg(long = "tools", value_name = "MANIFEST")]
        tools: Vec<PathBuf>,
        /// Lifecycle status: draft, active, deprecated or retired.
        #[arg(long, default_value = "active")]
        status: String,
    },
    /// Register a verified candidate's flow as an active flow (refused for an unverified one
    /// unless --force).
    Promote {
        /// A candidate id, or its rank in `candidates list`.
        candidate: String,
        /// Promote even without a `verified` verdict.
        #[arg(long)]
        force: bool,
    },
}

/// Without tools only the structural checks apply: drop findings that need the tools.
fn structural(report: CompileReport) -> CompileReport {
    const NEEDS_TOOLS: &[&str] = &["unknown_tool", "unknown_fallback_tool"];
    CompileReport {
        findings: report
            .findings
            .into_iter()
            .filter(|f| !NEEDS_TOOLS.contains(&f.code.as_str()))
            .collect(),
        ..report
    }
}

/// Run the command.
pub fn run(args: FlowsArgs, global: &Global) -> anyhow::Result<u8> {
    let mut out = std::io::stdout().lock();
    match args.command {
        FlowsCommand::Validate { files, tools } => {
            let registry = load_tools(&tools)?;
            let mut reports = Vec::new();
            let mut all_ok = true;
            for file in &files {
                let entry = match load_flow_file(file) {
                    Err(err) => {
                        all_ok = false;
                        json!({"file": file, "ok": false, "error": {"code": err.code(), "message": err.to_string()}})
                    }
                    Ok(flow) => {
                        let report = compile_flow(&flow, &registry);
                        let report = if tools.is_empty() {
                            structural(report)
                        } else {
                            report
                        };
                        all_ok &= report.is_ok();
                        json!({"file": file, "ok": report.is_ok(), "flow": report.flow, "version": report.version, "findings": report.findings})
                    }
                };
                reports.push(entry);
            }
            if global.format == OutputFormat::Json {
                let document = json!({"schema_version": super::SCHEMA_VERSION, "files": reports});
                serde_json::to_writer_pretty(&mut out, &document)?;
                writeln!(out)?;
            } else {
                for entry in &reports {
                    let status = if entry["ok"] == json!(true) {
                        "ok"
                    } else {
                        "INVALID"
                    };
                    writeln!(out, "{}: {status}", entry["file"].as_str().unwrap_or("?"))?;
                    if let Some(error) = entry.get("error") {
                        writeln!(
                            out,
                            "  error[{}] {}",
                            error["code"].as_str().unwrap_or(""),
                            error["message"].as_str().unwrap_or("")
                        )?;
                    }
                    for finding in entry["findings"].as_array().into_iter().flatten() {
                        writeln!(
                            out,
                            "  {}[{}] {}: {}",
                            finding["severity"].as_str().unwrap_or(""),
                            finding["code"].as_str().unwrap_or(""),
                            finding["pointer"].as_str().unwrap_or(""),
                            finding["message"].as_str().unwrap_or("")
                        )?;
                    }
                }
            }
            Ok(if all_ok { exit::OK } else { exit::FAILED })
        }
        FlowsCommand::List => {
            let registry = open_registry(global)?;
            let flows = registry.list();
            if global.format == OutputFormat::Json {
                let rows: Vec<Value> = flows
                    .iter()
                    .map(|f| {
                        json!({
                            "name": f.definition.name(),
                            "version": f.definition.version(),
                            "status": f.status,
                            "steps": step_views(&f.definition).len(),
                            "registered_at": f.registered_at,
                            "updated_at": f.updated_at,
                        })
                    })
                    .collect();
                // Versioned like every other listing, so scripts can tell versions apart.
                let document = json!({"schema_version": super::SCHEMA_VERSION, "flows": rows});
                serde_json::to_writer_pretty(&mut out, &document)?;
                writeln!(out)?;
            } else if flows.is_empty() {
                writeln!(out, "no flows registered in {}", global.store.display())?;
            } else {
                writeln!(
                    out,
                    "{:<32} {:<12} {:<11} {:>5}",
                    "NAME", "VERSION", "STATUS", "STEPS"
                )?;
                for f in flows {
                    writeln!(
                        out,
                        "{:<32} {:<12} {:<11} {:>5}",
                        f.definition.name(),
                        f.definition.version(),
                        f.status.to_string(),
                        step_views(&f.definition).len()
                    )?;
                }
            }
            Ok(exit::OK)
        }
        FlowsCommand::Show { name, flow_version } => {
            let registry = open_registry(global)?;
            let flow = registry
                .resolve(&name, flow_version.as_deref())
                .map_err(lib_failure)?;
            if global.format == OutputFormat::Json {
                serde_json::to_writer_pretty(&mut out, flow)?;
                writeln!(out)?;
            } else {
                writeln!(
                    out,
                    "{} {} [{}]",
                    flow.definition.name(),
                    flow.definition.version(),
                    flow.status
                )?;
                let description = chainweaver::flow::flow_description(&flow.definition);
                if !description.is_empty() {
                    writeln!(out, "{description}")?;
                }
                for view in step_views(&flow.definition) {
                    let deps = if view.is_dag && !view.depends_on.is_empty() {
                        format!("  after {}", view.depends_on.join(", "))
                    } else {
                        String::new()
                    };
                    writeln!(
                        out,
                        "  {:>2}. {:<16} {}{}",
                        view.index,
                        if view.is_dag { view.id.as_str() } else { "" },
                        view.step.tool_name,
                        deps
                    )?;
                }
            }
            Ok(exit::OK)
        }
        FlowsCommand::Register {
            file,
            tools,
            status,
        } => {
            let Some(status) = FlowStatus::parse(&status) else {
                return Err(Failure {
                    code: exit::USAGE,
                    message: format!(
                        "--status `{status}` is not draft, active, deprecated or retired"
                    ),
                    hint: None,
                }
                .into());
            };
            let flow = load_flow_file(&file).map_err(lib_failure)?;
            if !tools.is_empty() {
                let registry: ToolRegistry = load_tools(&tools)?;
                compile_flow(&flow, &registry)
                    .into_result()
                    .map_err(lib_failure)?;
            }
            let mut registry = open_registry(global)?;
            let (name, version) = (flow.name().to_string(), flow.version().to_string());
            registry.register(flow, status).map_err(lib_failure)?;
            if global.format == OutputFormat::Json {
                serde_json::to_writer_pretty(
                    &mut out,
                    &json!({"name": name, "version": version, "status": status}),
                )?;
                writeln!(out)?;
            } else {
                writeln!(out, "registered {name} {version} as {status}")?;
            }
            Ok(exit::OK)
        }
        FlowsCommand::Promote { candidate, force } => {
            let mut store = open_existing(&global.store)?;
            let mut candidate = find_candidate(store.as_ref(), &candidate, global)?;
            let verdict = check_promotable(store.as_ref(), &candidate, force)?;
            let (name, version) = (
                candidate.flow.name().to_string(),
                candidate.flow.version().to_string(),
            );
            {
                let mut registry = open_registry(global)?;
                registry
                    .register(candidate.flow.clone(), FlowStatus::Active)
                    .map_err(lib_failure)?;
            }
            candidate.status = CandidateStatus::Promoted;
            store.put_candidate(&candidate)?;
            let evidence = verdict.as_ref().map(|v| {
                format!(
                    "{}: {}/{} held-out replays exact",
                    v.status.as_str(),
                    v.exact_matches,
                    v.occurrences_replayed
                )
            });
            if global.format == OutputFormat::Json {
                serde_json::to_writer_pretty(
                    &mut out,
                    &json!({"candidate": candidate.id, "name": name, "version": version, "status": FlowStatus::Active, "verdict": verdict, "forced": force && verdict.as_ref().is_none_or(|v| v.status != VerdictStatus::Verified)}),
                )?;
                writeln!(out)?;
            } else {
                writeln!(
                    out,
                    "promoted {} to flow {name} {version} (active){}",
                    candidate.id,
                    match evidence {
                        Some(e) => format!("; {e}"),
                        None => "; forced without a verdict".into(),
                    }
                )?;
                writeln!(
                    out,
                    "run it: chainweaver run {name} --tools MANIFEST --input '{{...}}'"
                )?;
            }
            Ok(exit::OK)
        }
    }
}
