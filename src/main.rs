//! The `chainweaver` command. Everything lives in [`cli`]; this maps errors to exit codes.

mod cli;

use std::process::ExitCode;

// JSON payloads are trees of small allocations; mimalloc handles them faster than the system
// allocator (the benchmarks run with the same one).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    cli::main()
}
