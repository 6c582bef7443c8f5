//! `chainweaver serve`: registered flows as MCP tools, over stdio or streamable HTTP.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use serde_json::json;

use chainweaver::mcp::catalog::Exposure;
use chainweaver::mcp::dynamic::ChainPolicy;
use chainweaver::mcp::server::{FlowServer, ServeConfig};
use chainweaver::mcp::wire;
use chainweaver::registry::FlowStatus;

use super::run::{lib_failure, load_tools, open_registry};
use super::{Failure, Global, OutputFormat, exit};

/// The options of `serve` (its help text is on the command in `cli::Command`).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  chainweaver serve --tools tools.toml
  chainweaver serve --tools tools.toml --flow refund_order --prefix cw
  chainweaver serve --tools tools.toml --http 127.0.0.1:8765
  chainweaver serve --tools tools.toml --chain-tools --allow-tool lookup_user --allow-tool add
  chainweaver serve --tools tools.toml --list --format json

An MCP client configuration (stdio):
  {\"mcpServers\": {\"flows\": {\"command\": \"chainweaver\",
    \"args\": [\"--store\", \"/path/chainweaver.db\", \"serve\", \"--tools\", \"/path/tools.toml\"]}}}")]
pub struct ServeArgs {
    /// Tool manifests (command tools and [[mcp_server]] entries) the flows' steps call
    /// (repeatable).
    #[arg(long = "tools", value_name = "MANIFEST")]
    pub tools: Vec<PathBuf>,
    /// Serve streamable HTTP on this address (path /mcp) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Serve only this flow, whatever its lifecycle (retired excepted) or safety (repeatable).
    #[arg(long = "flow", value_name = "NAME")]
    pub flows: Vec<String>,
    /// Serve flows in this lifecycle (repeatable; default: active).
    #[arg(long = "lifecycle", value_name = "STATUS", value_parser = parse_status)]
    pub lifecycles: Vec<FlowStatus>,
    /// Also serve flows with side effects, that need approval, or whose safety is unknown.
    #[arg(long)]
    pub allow_side_effects: bool,
    /// Serve only flows with this owner (`metadata.owner`; repeatable).
    #[arg(long = "owner", value_name = "OWNER")]
    pub owners: Vec<String>,
    /// Name served tools PREFIX__flow.
    #[arg(long, value_name = "PREFIX")]
    pub prefix: Option<String>,
    /// Let agents manage chain tools at runtime (create_dynamic_tool, list_dynamic_tools,
    /// update_dynamic_tool, disable_dynamic_tool, delete_dynamic_tool); chains persist in the
    /// store as flows.
    #[arg(long)]
    pub chain_tools: bool,
    /// With --chain-tools: no create_dynamic_tool (existing chains can still be listed, run,
    /// updated, disabled and deleted).
    #[arg(long, requires = "chain_tools")]
    pub no_create: bool,
    /// With --chain-tools: a tool chains may call (repeatable; default: every tool of the
    /// manifests).
    #[arg(long = "allow-tool", value_name = "NAME", requires = "chain_tools")]
    pub allow_tools: Vec<String>,
    /// The server name announced to clients.
    #[arg(long, default_value = "chainweaver")]
    pub name: String,
    /// Print the tools that would be served and exit.
    #[arg(long)]
    pub list: bool,
}

fn parse_status(text: &str) -> Result<FlowStatus, String> {
    FlowStatus::parse(text).ok_or_else(|| "use draft, active, deprecated or retired".into())
}

pub fn run(args: ServeArgs, global: &Global) -> anyhow::Result<u8> {
    let tools = load_tools(&args.tools)?;
    let registry = open_registry(global)?;
    let config = ServeConfig {
        name: args.name.clone(),
        exposure: Exposure {
            flows: args.flows.clone(),
            lifecycles: args.lifecycles.clone(),
            allow_side_effects: args.allow_side_effects,
            owners: args.owners.clone(),
            prefix: args.prefix.clone(),
        },
        chain_tools: args.chain_tools.then(|| ChainPolicy {
            allow_create: !args.no_create,
            allowed_tools: args.allow_tools.clone(),
        }),
    };
    for name in &args.allow_tools {
        if tools.get(name).is_none() {
            return Err(Failure {
                code: exit::USAGE,
                message: format!("--allow-tool `{name}`: no such tool in the manifests"),
                hint: Some("name tools the --tools manifests declare".into()),
            }
            .into());
        }
    }
    let server = FlowServer::new(tools, registry, config);
    for warning in server.warnings() {
        eprintln!("warning: {warning}");
    }
    if args.list {
        return list(&server, global);
    }
    let Some(address) = args.http else {
        wire::serve_stdio_blocking(server).map_err(lib_failure)?;
        return Ok(exit::OK);
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the server's runtime")?;
    runtime
        .block_on(wire::serve_http(server, address, |bound| {
            eprintln!("serve: streamable HTTP on http://{bound}/mcp");
        }))
        .map_err(lib_failure)?;
    Ok(exit::OK)
}

fn list(server: &FlowServer, global: &Global) -> anyhow::Result<u8> {
    let tools = server.list_tools();
    let mut out = std::io::stdout().lock();
    if global.format == OutputFormat::Json {
        let document = json!({"schema_version": super::SCHEMA_VERSION, "tools": tools});
        serde_json::to_writer_pretty(&mut out, &document)?;
        writeln!(out)?;
        return Ok(exit::OK);
    }
    if tools.is_empty() {
        writeln!(
            out,
            "no flow would be served (see --help for what is served by default)"
        )?;
    }
    for tool in &tools {
        writeln!(
            out,
            "{}\n    {}",
            tool["name"].as_str().unwrap_or_default(),
            tool["description"].as_str().unwrap_or_default()
        )?;
    }
    Ok(exit::OK)
}
