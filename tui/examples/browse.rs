//! Open a store in the terminal browser, as `chainweaver tui` will:
//!
//! ```text
//! cargo run -p chainweaver-tui --example browse -- path/to/chainweaver.db [--ascii] [--no-color] [--no-mouse]
//! cargo run -p chainweaver-tui --example browse -- --fixture path/to/new.db   # write a demo store first
//! ```

#![allow(clippy::print_stdout, clippy::print_stderr)] // an example binary reports on the console

use std::path::PathBuf;
use std::process::ExitCode;

use chainweaver_analyzer::mine::{ChainAnalyzer, MineConfig, StreamConfig};
use chainweaver_recorder::store::{SqliteStore, TraceStore};
use chainweaver_recorder::synth::{Generator, GeneratorConfig};
use chainweaver_recorder::workspace::Workspace;
use chainweaver_tui::{TuiOptions, run};

/// A demo store: generated agent traffic (planted flows among noise and failures), with the
/// patterns and candidates the analyzer mines from it. `chainweaver verify` adds verdicts.
fn demo_store(path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let mut store = SqliteStore::open(path)?;
    let mut generator = Generator::new(GeneratorConfig {
        traces: 300,
        ..GeneratorConfig::default()
    });
    let (mut traces, mut steps) = (Vec::new(), Vec::new());
    while let Some(trace) = generator.next_trace() {
        traces.push(trace.trace);
        steps.extend(trace.steps);
    }
    store.append(&traces, &steps)?;
    let outcome = ChainAnalyzer::new(MineConfig::default())
        .analyze_store(&store, &StreamConfig::default())?;
    store.replace_mining_results(&outcome.patterns, &outcome.candidates)?;
    Ok(())
}

fn main() -> ExitCode {
    let mut options = TuiOptions::default().with_env();
    let mut path = None;
    let mut fixture = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--ascii" => options.ascii = true,
            "--no-color" => options.no_color = true,
            "--no-mouse" => options.no_mouse = true,
            "--fixture" => fixture = true,
            other => path = Some(PathBuf::from(other)),
        }
    }
    let Some(path) = path else {
        eprintln!("usage: browse [--fixture] STORE [--ascii] [--no-color] [--no-mouse]");
        return ExitCode::from(2);
    };
    if fixture
        && !path.exists()
        && let Err(e) = demo_store(&path)
    {
        eprintln!("error: writing the demo store {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    match run(&path, options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
