//! The command line: one module a command, errors mapped to exit codes in one place.

pub mod flows;
pub mod replay;
pub mod run;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

mod analyze;
mod datasets;
mod import;
mod mine;
mod output;
mod progress;
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
    /// dataset. Created when missing.
    #[arg(
        long,
        global = true,
        env = "CHAINWEAVER_STORE",
        default_value = "chainweaver.db"
    )]
    pub store: PathBuf,
    /// How results are printed: `table` for people, `json` for scripts. With `import`, an input
    /// format name (e.g. `spmf`, `tau-bench`) names the format of the files instead.
    #[arg(long = "format", global = true, value_name = "FORMAT", default_value = "table", value_parser = parse_format_choice)]
    pub format_choice: FormatChoice,
    /// Set from `format_choice`: how results are printed.
    #[arg(skip = OutputFormat::Table)]
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

/// What `--format` said: an output format, or (for `import`) the input files' format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatChoice {
    Output(OutputFormat),
    Input(chainweaver_recorder::import::ImportFormat),
}

fn parse_format_choice(text: &str) -> Result<FormatChoice, String> {
    match text {
        "table" => Ok(FormatChoice::Output(OutputFormat::Table)),
        "json" => Ok(FormatChoice::Output(OutputFormat::Json)),
        other => other.parse().map(FormatChoice::Input).map_err(|_| {
            let names: Vec<&str> = chainweaver_recorder::import::ImportFormat::ALL
                .iter()
                .map(|f| f.name())
                .collect();
            format!(
                "use `table` or `json` (or, with `import`, one of: {})",
                names.join(", ")
            )
        }),
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The main job: import agent logs, mine repeated tool sequences, and report candidate flows.
    Analyze(analyze::AnalyzeArgs),
    /// Import agent logs into the store (format detected, or named with --format).
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

fn run(mut cli: Cli) -> anyhow::Result<u8> {
    let input_format = match cli.global.format_choice {
        FormatChoice::Output(format) => {
            cli.global.format = format;
            None
        }
        FormatChoice::Input(format) => {
            if !matches!(cli.command, Command::Import(_)) {
                return Err(Failure {
                    code: exit::USAGE,
                    message: format!(
                        "--format {format} names an input format, which only `import` takes"
                    ),
                    hint: Some("use --format table or --format json".into()),
                }
                .into());
            }
            Some(format)
        }
    };
    let global = &cli.global;
    match cli.command {
        Command::Import(args) => import::run(args, input_format, global),
        Command::Analyze(args) => analyze::run(args, global),
        Command::Mine(args) => mine::run_mine(args, global),
        Command::Patterns(command) => mine::run_patterns(command, global),
        Command::Candidates(command) => mine::run_candidates(command, global),
        Command::Verify(args) => verify::run_verify(args, global),
        Command::Verdicts(command) => verify::run_verdicts(command, global),
        Command::Traces(command) => traces::run(command, global),
        Command::Datasets(command) => datasets::run(command, global),
        Command::Tui(args) => tui::run(args, global),
        Command::Run(args) => run::run(args, global),
        Command::Flows(args) => flows::run(args, global),
        Command::Replay(args) => replay::run(args, global),
    }
}
