//! The runtime that tools' long-lived connections run on.
//!
//! An MCP server's session and a persistent command tool's processes outlive any one call, and
//! a blocking caller makes a runtime per call: their pipes and tasks live here instead (one
//! background thread for all of them), so such tools work from any caller, blocking or async.

use std::sync::OnceLock;

use crate::error::{Error, Result};

/// The background runtime, started at its first use.
pub(crate) fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> =
        OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("tool-io")
                .enable_all()
                .build()
                .map_err(|err| err.to_string())
        })
        .as_ref()
        .map_err(|message| Error::Runtime(message.clone()))
}
