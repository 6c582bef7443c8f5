//! `chainweaver tui`: the reviewer's terminal browser.

use std::path::PathBuf;

use chainweaver_tui::TuiOptions;

use super::{Failure, Global, exit};

/// Browse the store in the terminal: traces (filter with `/`, e.g.
/// `tool=get_order_details error dur>2s`), a trace's steps as a waterfall with their JSON,
/// per-tool statistics, patterns, and candidates with their bindings, verdicts and replay
/// differences (Enter on a difference opens its trace). `?` lists every key. It reads the store
/// and never runs tools.
#[derive(Debug, clap::Args)]
pub struct TuiArgs {
    /// Draw with ASCII only (also: CHAINWEAVER_ASCII=1).
    #[arg(long)]
    ascii: bool,
    /// No colours (also: NO_COLOR=1).
    #[arg(long)]
    no_color: bool,
    /// Leave the mouse to the terminal (native text selection, no wheel scrolling).
    #[arg(long)]
    no_mouse: bool,
    /// Where `y` also saves the copied JSON.
    #[arg(long)]
    copy_file: Option<PathBuf>,
}

pub fn run(args: TuiArgs, global: &Global) -> anyhow::Result<u8> {
    if !super::store::exists(&global.store) {
        return Err(Failure {
            code: exit::FAILED,
            message: format!("no store at {}", global.store.display()),
            hint: Some("import or analyze some traces first, or name a store with --store".into()),
        }
        .into());
    }
    let options = TuiOptions {
        ascii: args.ascii,
        no_color: args.no_color,
        no_mouse: args.no_mouse,
        copy_file: args.copy_file,
    }
    .with_env();
    chainweaver_tui::run(&global.store, options)?;
    Ok(exit::OK)
}
