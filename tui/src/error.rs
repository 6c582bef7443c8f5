//! The TUI crate's one error type.

use std::path::PathBuf;

use chainweaver_recorder::RecorderError;

/// What can stop the browser.
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    #[error("no store at {path} (create one with an import or the recorder, or pass --store)")]
    StoreMissing { path: PathBuf },
    #[error(transparent)]
    Store(#[from] RecorderError),
    #[error("terminal: {context}: {source}")]
    Terminal {
        context: &'static str,
        #[source]
        source: std::io::Error,
    },
}

impl TuiError {
    pub(crate) fn terminal(context: &'static str) -> impl FnOnce(std::io::Error) -> TuiError {
        move |source| TuiError::Terminal { context, source }
    }
}
