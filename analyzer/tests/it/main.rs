//! Integration tests of the analyzer crate, one module a topic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod edge;
mod ground_truth;
mod infer;
mod spm;

use std::path::{Path, PathBuf};

use chainweaver_recorder::import::{ImportOptions, import_path};
use chainweaver_recorder::model::TraceWithSteps;

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

/// The traces `chainweaver import` makes of `paths`, read with the real importers (format
/// detected, default options), in file order. The shared files are fixed, so none of their
/// records may be rejected.
#[allow(dead_code)]
pub fn import_traces(paths: &[PathBuf]) -> Vec<TraceWithSteps> {
    let mut traces: Vec<TraceWithSteps> = Vec::new();
    for path in paths {
        let report = import_path(
            path,
            &ImportOptions::default(),
            &mut |batch| {
                // A batch holds complete traces, their steps trace by trace.
                let mut steps = batch.steps.into_iter().peekable();
                for trace in batch.traces {
                    let mut own = Vec::new();
                    while let Some(step) = steps.next_if(|s| s.trace_id == trace.trace_id) {
                        own.push(step);
                    }
                    traces.push(TraceWithSteps { trace, steps: own });
                }
                Ok(())
            },
            &mut |_| {},
        )
        .unwrap_or_else(|e| panic!("importing {}: {e}", path.display()));
        assert!(
            report.rejects.is_empty(),
            "{}: {:?}",
            path.display(),
            report.rejects
        );
    }
    traces
}

/// The tau-bench retail result files of `datasets`, in name order.
#[allow(dead_code)]
pub fn tau_bench_files(datasets: &Path) -> Vec<PathBuf> {
    let dir = datasets.join("tau-bench-retail");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}
