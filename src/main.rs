//! The `chainweaver` command. Everything lives in [`cli`]; this maps errors to exit codes.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
