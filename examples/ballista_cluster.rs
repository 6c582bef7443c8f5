//! A Ballista cluster on this machine for `chainweaver mine --engine ballista`: one scheduler
//! and EXECUTORS executors (default 2) of one task slot each, in this process, until Ctrl-C.
//! Prints the scheduler's URL on stdout, as `--scheduler` takes it.
//!
//!     cargo run --release --features ballista --example ballista_cluster [EXECUTORS]

#![allow(clippy::print_stdout, clippy::print_stderr)]

#[cfg(feature = "ballista")]
fn main() -> std::process::ExitCode {
    let executors = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(2);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start a runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        match chainweaver_analyzer::engine::ballista::start_local_cluster(executors, 1).await {
            Ok(scheduler) => println!("{scheduler}"),
            Err(e) => {
                eprintln!("{e}");
                return std::process::ExitCode::FAILURE;
            }
        }
        let _ = tokio::signal::ctrl_c().await;
        std::process::ExitCode::SUCCESS
    })
}

#[cfg(not(feature = "ballista"))]
fn main() -> std::process::ExitCode {
    eprintln!("build with `--features ballista`");
    std::process::ExitCode::FAILURE
}
