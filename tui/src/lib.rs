//! # chainweaver-tui
//!
//! The reviewer's terminal browser over a ChainWeaver store: traces, patterns, candidates,
//! verdicts and replay diffs. It reads the store and never runs tools.
//!
//! The design is a functional core and an imperative shell:
//! - [`app`]: the state and a pure [`app::update`] from actions to effects;
//! - [`ui`]: views that only render from the state;
//! - [`review`]: what reviewers read about patterns, candidates and verdicts, from typed values;
//! - [`worker`]: store queries on a worker thread, tagged with generations so stale answers
//!   are dropped and keys stay live while a query runs;
//! - [`keymap`]: the keys as data, from which the hint bar, the help and `keymap.md` are drawn;
//! - `term`: the real terminal (raw mode, events, OSC 52 copy, restore on panic).

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod app;
pub mod browser;
pub mod error;
pub mod json_tree;
pub mod keymap;
pub mod query;
pub mod review;
pub mod sanitize;
mod term;
pub mod ui;
pub mod worker;

use std::path::{Path, PathBuf};

pub use browser::Browser;
pub use error::TuiError;
pub use term::{base64, osc52};

/// How `chainweaver tui` draws and behaves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TuiOptions {
    /// Draw with ASCII only (no box drawing or other symbols).
    pub ascii: bool,
    /// No colours (reverse video and bold still mark the selection and errors).
    pub no_color: bool,
    /// Leave the mouse to the terminal (no wheel scrolling, but native text selection).
    pub no_mouse: bool,
    /// Where `y` saves the copied JSON as well; default: `chainweaver-tui-selection.json` in
    /// the temporary directory.
    pub copy_file: Option<PathBuf>,
}

impl TuiOptions {
    /// These options with the environment applied: `CHAINWEAVER_ASCII` (any value but `0` or
    /// empty) turns ASCII on, `NO_COLOR` (any non-empty value) turns colours off.
    pub fn with_env(mut self) -> Self {
        let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0");
        self.ascii |= set("CHAINWEAVER_ASCII");
        self.no_color |= set("NO_COLOR");
        self
    }
}

/// Browse the store at `store_path` in the terminal until the reader quits. The store must
/// exist (the browser never creates one). The terminal is restored on return, on error and on
/// panic.
pub fn run(store_path: &Path, options: TuiOptions) -> Result<(), TuiError> {
    if !store_path.exists() {
        return Err(TuiError::StoreMissing {
            path: store_path.to_path_buf(),
        });
    }
    let store = chainweaver_recorder::store::open_store(store_path)?;
    term::run_terminal(store, store_path.display().to_string(), &options)
}
