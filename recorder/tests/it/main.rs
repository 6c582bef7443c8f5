//! Integration tests of the recorder crate, one module a topic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent_logs;
mod capture;
mod export;
mod import;
mod import_fuzz;
mod import_redaction;
mod otlp;
mod parquet;
mod sqlite;
mod workspace;

use std::path::PathBuf;

/// The shared real-trace datasets, `../shared/datasets` beside the workspace root (or
/// `CHAINWEAVER_DATASETS`). `None` skips a test on a developer machine without them; under CI
/// (`CI` set) a missing folder fails the test instead.
#[allow(dead_code, clippy::print_stderr)]
pub fn shared_datasets() -> Option<PathBuf> {
    let dir = std::env::var_os("CHAINWEAVER_DATASETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("../shared/datasets")
        });
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but the shared datasets folder {} is missing",
        dir.display()
    );
    eprintln!("skipping: no shared datasets at {}", dir.display());
    None
}
