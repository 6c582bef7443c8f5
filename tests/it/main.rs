//! End-to-end tests of the `chainweaver` binary and the executor, one module a topic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod candidates;
mod cli;
mod collect;
mod engines;
mod executor;
mod import_cli;
mod mcp;
mod mcp_loop;
#[cfg(feature = "s3")]
mod object_storage;
mod outputs;
mod readme;
mod record;
mod tui;
mod verify;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Run the `chainweaver` binary in `dir` with the default store (`chainweaver.db` there).
pub fn chainweaver(dir: &Path, args: &[&str]) -> Output {
    chainweaver_with_env(dir, args, &[])
}

/// [`chainweaver`] with environment variables set for it.
pub fn chainweaver_with_env(dir: &Path, args: &[&str], env: &[(&str, &Path)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_chainweaver"))
        .args(args)
        .current_dir(dir)
        .env_remove("CHAINWEAVER_STORE")
        .envs(env.iter().copied())
        .output()
        .expect("the chainweaver binary runs")
}

/// A port nothing listens on now (bound and freed).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// True when `needle` occurs in `bytes`: a byte search of a store's files, which finds what a
/// query of the store would not (a freed page, the write-ahead log).
pub fn holds_bytes(bytes: &[u8], needle: &str) -> bool {
    bytes
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

/// True when `python3` can run `import MODULES` (a peer a test drives). `None`-like skip on a
/// developer machine without it; under CI (`CI` set) a missing package fails the test.
#[allow(dead_code)]
pub fn python_imports(modules: &str) -> bool {
    let found = Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|out| out.status.success());
    peer_present(
        found,
        &format!("python3 cannot import {modules} (pip install -r .ci/requirements.txt)"),
    )
}

/// `found`, for a peer a test needs; when it is missing, `missing` says why: the test is
/// skipped on a developer machine and fails under CI (`CI` set).
#[allow(dead_code, clippy::print_stderr)]
pub fn peer_present(found: bool, missing: &str) -> bool {
    assert!(
        found || std::env::var_os("CI").is_none(),
        "CI is set but {missing}"
    );
    if !found {
        eprintln!("skipping: {missing}");
    }
    found
}

/// The shared real-trace datasets, `../shared/datasets` beside the workspace root (or
/// `CHAINWEAVER_DATASETS`). `None` skips a test on a developer machine without them; under CI
/// (`CI` set) a missing folder fails the test instead.
#[allow(dead_code, clippy::print_stderr)]
pub fn shared_datasets() -> Option<PathBuf> {
    let dir = std::env::var_os("CHAINWEAVER_DATASETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/datasets"));
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
