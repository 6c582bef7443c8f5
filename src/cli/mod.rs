//! The command line: one module a command, errors mapped to exit codes in one place.

pub mod flows;
pub mod replay;
pub mod run;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

mod analyze;
mod cluster;
mod collect;
mod completions;
mod datasets;
mod document;
mod failure;
mod import;
mod mine;
mod output;
mod progress;
mod record;
mod serve;
mod store;
mod traces;
mod tui;
mod verify;

/// Record agent tool calls, mine the sequences they repeat, and run them as replay-verified
/// flows.
///
/// Everything is kept in one store: a SQLite file (`chainweaver.db` by default) or a Parquet
/// dataset directory (`--store traces/` or `--store traces.parquet`).
#[derive(Debug, Parser)]
#[command(
    name = "chainweaver",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Clone, clap::Args)]
pub struct Global {
    /// The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet
    /// dataset. Created when missing. A build with feature `s3` also opens a Parquet dataset
    /// uploaded to S3-compatible object storage, `s3://BUCKET/PREFIX` (endpoint and credentials
    /// from the `AWS_*` environment variables); it takes results, not imports.
    #[arg(
        long,
        global = true,
        env = "CHAINWEAVER_STORE",
        default_value = "chainweaver.db"
    )]
    pub store: PathBuf,
    /// How results are printed: `table` for people, `json` for scripts (documented field
    /// names, durations in seconds, a `schema_version`).
    #[arg(long, global = true, value_name = "FORMAT", default_value = "table", value_parser = parse_output_format)]
    pub format: OutputFormat,
    /// No progress bars.
    #[arg(long, short, global = true)]
    pub quiet: bool,
}

impl Global {
    /// Progress bars only for people watching a terminal.
    pub fn show_progress(&self) -> bool {
        !self.quiet && self.format == OutputFormat::Table && std::io::stderr().is_terminal()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Table,
    Json,
}

/// The version of the JSON documents commands print with `--format json`; it changes when a
/// field is renamed or removed (new fields may appear without a change).
pub const SCHEMA_VERSION: u32 = 1;

fn parse_output_format(text: &str) -> Result<OutputFormat, String> {
    match text {
        "table" => Ok(OutputFormat::Table),
        "json" => Ok(OutputFormat::Json),
        other
            if other
                .parse::<chainweaver_recorder::import::ImportFormat>()
                .is_ok() =>
        {
            Err(format!(
                "`{other}` is an input format: name it with --input-format {other}"
            ))
        }
        _ => Err("use `table` or `json`".into()),
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The main job: import agent logs, mine repeated tool sequences, and report candidate flows.
    // Boxed: by far the largest arguments, and the command is parsed once.
    Analyze(Box<analyze::AnalyzeArgs>),
    /// Import agent logs into the store (format detected, or named with --input-format).
    ///
    /// Each file's format is detected from its first records unless `--input-format NAME`
    /// names it.
    ///
    /// Formats: claude-code (session JSONL, subagents included), codex-rollout (Codex CLI rollouts),
    /// openai-responses (Responses API items), openai-messages (chat messages and their variants),
    /// anthropic-messages, tau2-bench, tau-bench, swe-agent (.traj), mini-swe-agent, openhands
    /// (event streams), toolbench (answer files), bfcl (BFCL multi-turn results), otlp
    /// (OpenTelemetry trace exports: JSON, or protobuf as `.pb` or when named), chainweaver-jsonl,
    /// chainweaver-traces (the `traces export` output), chainweaver-events, execution-result, spmf.
    ///
    /// Folders are read recursively. Every file gets a line in the report: its format, traces
    /// (and how many had no tool call), steps, failed calls, calls without a result, redacted
    /// values and rejected records; files in a folder that are not logs (other extensions, or a
    /// format that cannot be told) are listed as skipped with the reason, and the run goes on.
    ///
    /// Secrets are redacted before anything is stored, with the recorder's rules (secret-named keys
    /// such as api_key, password, token, authorization; bearer tokens, provider keys, cloud and
    /// GitHub tokens, passwords in URLs, ...); add rules with --redact-key and --redact-pattern,
    /// or turn redaction off with --no-redact.
    ///
    /// Records that cannot be read are reported as `file:line: reason`, written to the rejects
    /// file, and skipped; the rest of the file is imported. Each batch of complete traces is stored
    /// atomically, so nothing already stored is touched by a bad file. Exit status: 0 when every
    /// file was imported or skipped, 3 when a file or record was rejected.
    Import(import::ImportArgs),
    /// Mine the stored traces for repeated tool sequences and propose candidate flows.
    Mine(mine::MineArgs),
    /// The patterns the last `mine` found.
    #[command(subcommand)]
    Patterns(mine::PatternsCommand),
    /// Candidate flows: list, show, export.
    #[command(subcommand)]
    Candidates(mine::CandidatesCommand),
    /// Replay candidates against held-out traffic and record their verdicts.
    Verify(verify::VerifyArgs),
    /// Verdicts of verified candidates: list, show.
    #[command(subcommand)]
    Verdicts(verify::VerdictsCommand),
    /// Receive OpenTelemetry traces over OTLP/HTTP and store their tool calls.
    Collect(collect::CollectArgs),
    /// Stand in front of an MCP server (stdio) and record the tool calls it answers.
    ///
    /// Put `chainweaver record --` in front of the server's command in the MCP client's
    /// configuration. The client's messages reach the server, and the server's the client, byte
    /// for byte; the server's stderr is passed on. Each `tools/call` is paired with its answer and
    /// stored as a step (arguments as inputs, the result as outputs, an `isError` result or a
    /// JSON-RPC error as a failed step), redacted like every recorded step. Both protocol eras are
    /// read: the `initialize` handshake and 2026-07-28 requests carrying `_meta`.
    ///
    /// Recording never holds traffic back: if the store is slow, locked or cannot be written, the
    /// calls still flow, and what was not recorded is reported on stderr at exit. The summary goes
    /// to stderr (stdout is the client's); `--format json` prints it as JSON, `--quiet` only when
    /// something was lost.
    ///
    /// The exit status is the server's (128 + n when a signal n ended it). When the client closes
    /// stdin the server gets `--shutdown-grace` seconds to exit, then SIGTERM, then SIGKILL;
    /// SIGTERM, SIGINT and SIGHUP sent to the proxy are passed on to the server.
    Record(record::RecordArgs),
    /// Inspect stored traces: list, show, stats, export, convert.
    #[command(subcommand)]
    Traces(traces::TracesCommand),
    /// Browse traces, tools, patterns and candidates in the terminal.
    Tui(tui::TuiArgs),
    /// Generate synthetic agent traffic with planted flows.
    #[command(subcommand)]
    Datasets(datasets::DatasetsCommand),
    /// Run a flow file (or a registered flow) with command tools.
    Run(run::RunArgs),
    /// Validate flow files; list, show and register flows in the store.
    Flows(flows::FlowsArgs),
    /// Replay a saved execution result and compare it step by step.
    Replay(replay::ReplayArgs),
    /// Serve registered flows, and chain tools made at runtime, as MCP tools.
    ///
    /// Each served flow is one tool an agent calls instead of the calls it stands for. By
    /// default the ACTIVE flows that are safe to call without asking are served: those declaring
    /// a read-only safety contract without approval (`metadata.safety`), or whose every tool
    /// declared itself read-only. `--flow` names flows explicitly; `--lifecycle`,
    /// `--allow-side-effects` and `--owner` widen or narrow the default. A tool's arguments are
    /// the flow input's top-level fields; a failed flow answers `isError: true` naming the step
    /// that failed. The flows' tools come from `--tools` manifests: command tools and MCP
    /// servers (`[[mcp_server]]`).
    ///
    /// With stdio, stdout carries the protocol and messages go to stderr. See docs/mcp.md.
    Serve(serve::ServeArgs),
    /// Run a Ballista cluster's scheduler or an executor, for `mine --engine ballista`.
    ///
    /// Built with the `ballista` feature. The parts come from the same build as the client, so
    /// their Ballista and DataFusion versions match the plans it sends. See docs/engines.md.
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
    /// Print shell completions (bash, zsh, fish, elvish, powershell).
    Completions(completions::CompletionsArgs),
}

/// A failure the user can act on, with the exit code it maps to and an optional hint.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
    pub hint: Option<String>,
}

/// Exit codes, documented in `--help` and the README.
pub mod exit {
    /// Everything worked.
    pub const OK: u8 = 0;
    /// The command failed.
    pub const FAILED: u8 = 1;
    /// The command line was wrong (clap's own code).
    pub const USAGE: u8 = 2;
    /// The work was done, but some input records were rejected (see the rejects file).
    pub const PARTIAL: u8 = 3;
}

/// Parse the command line, run the command, and turn any error into `error:` / `hint:` lines
/// and an exit code. This is the one place errors become exit codes.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        // The reader of the output went away (`| head`): it has what it wanted, so end quietly
        // and successfully, as a pipeline under `set -o pipefail` expects.
        Err(err) if output::is_broken_pipe(&err) => ExitCode::from(exit::OK),
        Err(err) => {
            let (code, hint) = match err.downcast_ref::<Failure>() {
                Some(failure) => (failure.code, failure.hint.clone()),
                None => (exit::FAILED, None),
            };
            eprintln!("error: {err:#}");
            if let Some(hint) = hint {
                eprintln!("hint: {hint}");
            }
            ExitCode::from(code)
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

fn run(cli: Cli) -> anyhow::Result<u8> {
    let global = &cli.global;
    match cli.command {
        Command::Import(args) => import::run(args, global),
        Command::Analyze(args) => analyze::run(*args, global),
        Command::Mine(args) => mine::run_mine(args, global),
        Command::Patterns(command) => mine::run_patterns(command, global),
        Command::Candidates(command) => mine::run_candidates(command, global),
        Command::Verify(args) => verify::run_verify(args, global),
        Command::Verdicts(command) => verify::run_verdicts(command, global),
        Command::Collect(args) => collect::run(args, global),
        Command::Record(args) => record::run(args, global),
        Command::Traces(command) => traces::run(command, global),
        Command::Datasets(command) => datasets::run(command, global),
        Command::Tui(args) => tui::run(args, global),
        Command::Run(args) => run::run(args, global),
        Command::Flows(args) => flows::run(args, global),
        Command::Replay(args) => replay::run(args, global),
        Command::Serve(args) => serve::run(args, global),
        Command::Cluster(command) => cluster::run(command, global),
        Command::Completions(args) => completions::run(args),
    }
}
