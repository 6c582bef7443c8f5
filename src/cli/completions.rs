//! `chainweaver completions SHELL`: shell completions generated from the command definition.

use std::io::Write;

use clap::CommandFactory;
use clap_complete::Shell;

use super::{Cli, exit};

/// Print a completion script for a shell, e.g. `chainweaver completions bash >
/// ~/.local/share/bash-completion/completions/chainweaver`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Run the command.
pub fn run(args: CompletionsArgs) -> anyhow::Result<u8> {
    // Generated into memory first: the generators panic on a failed write, and a closed stdout
    // must end like any other command's (quietly, see `super::main`).
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "chainweaver", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(exit::OK)
}
