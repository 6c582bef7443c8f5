//! Fuzzing the agent-log importers with proptest: arbitrary bytes, and mutations of the real
//! files in `../shared/datasets/agent-logs/` (cut short, bytes flipped, a field deleted). Every
//! import must return (no panic), and every rejection must name the file and a line or record
//! number. Cases are few and seeds small, so the whole set runs in seconds.

use std::path::{Path, PathBuf};

use chainweaver_recorder::RecorderError;
use chainweaver_recorder::import::{ImportFormat, ImportOptions, import_path};
use proptest::prelude::*;
use serde_json::Value;

use super::agent_logs::agent_logs;

/// The formats under test, each with a small real file of its folder as the seed.
const SEEDS: [(ImportFormat, &str); 8] = [
    (ImportFormat::ClaudeCode, "claude-code/short.jsonl"),
    (
        ImportFormat::CodexRollout,
        "codex-cli/rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl",
    ),
    (
        ImportFormat::Tau2Bench,
        "tau2-bench/2025-10-07T07-44-20.888691_airline_relaxed_llm_agent_grok-4-fast-reasoning_user_simulator_grok-4-fast-reasoning.json",
    ),
    (
        ImportFormat::Toolbench,
        "toolbench/G1_answer_10_ChatGPT_DFS_woFilter_w2.json",
    ),
    (
        ImportFormat::SweAgent,
        "swe-agent/function_calling_simple.traj",
    ),
    (ImportFormat::MiniSweAgent, "mini-swe-agent/local.traj.json"),
    (ImportFormat::Openhands, "openhands/basic_interactions.json"),
    (
        ImportFormat::OpenaiMessages,
        "mini-swe-agent/github_issue.traj.json",
    ),
];

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 12,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The seed files' bytes, with tau2's document cut to one simulation to keep cases fast.
fn seeds() -> Option<Vec<(ImportFormat, Vec<u8>)>> {
    let root = agent_logs()?;
    Some(
        SEEDS
            .iter()
            .map(|(format, name)| {
                let bytes = std::fs::read(root.join(name)).unwrap();
                let bytes = if *format == ImportFormat::Tau2Bench {
                    let mut document: Value = serde_json::from_slice(&bytes).unwrap();
                    document["simulations"].as_array_mut().unwrap().truncate(1);
                    document["tasks"].as_array_mut().unwrap().truncate(1);
                    serde_json::to_vec_pretty(&document).unwrap()
                } else {
                    bytes
                };
                (*format, bytes)
            })
            .collect(),
    )
}

/// Imports `bytes` as a file, detected and as every seed format, and checks the outcome: no
/// panic, and every reject or error names the file and a line or record.
fn import_everyway(dir: &Path, name: &str, bytes: &[u8]) {
    let path: PathBuf = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    let formats = std::iter::once(None).chain(SEEDS.iter().map(|(f, _)| Some(*f)));
    for format in formats {
        let options = ImportOptions {
            format,
            ..ImportOptions::default()
        };
        match import_path(&path, &options, &mut |_| Ok(()), &mut |_| {}) {
            Ok(report) => {
                for reject in &report.rejects {
                    assert_eq!(reject.path, path, "{reject}");
                    assert!(
                        reject.line >= 1,
                        "{format:?}: a reject without a line: {reject}"
                    );
                    assert!(!reject.reason.is_empty());
                }
            }
            Err(RecorderError::Import { path: named, .. }) => assert_eq!(named, path),
            Err(RecorderError::Io { path: named, .. }) => assert_eq!(named, path),
            Err(other) => panic!("{format:?}: an error that names no file: {other}"),
        }
    }
}

/// Deletes the `n`th object field (depth first) of `value`, if it has that many.
fn delete_field(value: &mut Value, n: &mut usize) -> bool {
    match value {
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                if *n == 0 {
                    map.remove(&key);
                    return true;
                }
                *n -= 1;
                if let Some(child) = map.get_mut(&key)
                    && delete_field(child, n)
                {
                    return true;
                }
            }
            false
        }
        Value::Array(items) => items.iter_mut().any(|item| delete_field(item, n)),
        _ => false,
    }
}

/// The seed with its `n`th field deleted, line by line for JSON Lines.
fn without_field(bytes: &[u8], n: usize) -> Vec<u8> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(mut document) => {
            let mut n = n % 4000;
            delete_field(&mut document, &mut n);
            serde_json::to_vec(&document).unwrap()
        }
        Err(_) => {
            let text = String::from_utf8_lossy(bytes);
            let lines: Vec<&str> = text.lines().collect();
            let target = n % lines.len().max(1);
            let mut out = Vec::new();
            for (i, line) in lines.iter().enumerate() {
                match serde_json::from_str::<Value>(line) {
                    Ok(mut record) if i == target => {
                        let mut k = n / lines.len().max(1) % 64;
                        delete_field(&mut record, &mut k);
                        out.extend(serde_json::to_vec(&record).unwrap());
                    }
                    _ => out.extend(line.as_bytes()),
                }
                out.push(b'\n');
            }
            out
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let dir = tempfile::tempdir().unwrap();
        import_everyway(dir.path(), "noise.json", &bytes);
    }

    #[test]
    fn real_files_cut_short_never_panic(cut in any::<prop::sample::Index>()) {
        let Some(seeds) = seeds() else { return Ok(()); };
        let dir = tempfile::tempdir().unwrap();
        for (_, bytes) in &seeds {
            import_everyway(dir.path(), "cut.json", &bytes[..cut.index(bytes.len())]);
        }
    }

    #[test]
    fn real_files_with_flipped_bytes_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let Some(seeds) = seeds() else { return Ok(()); };
        let dir = tempfile::tempdir().unwrap();
        for (_, seed) in &seeds {
            let mut bytes = seed.clone();
            for (at, byte) in &flips {
                let i = at.index(bytes.len());
                bytes[i] ^= byte | 1;
            }
            import_everyway(dir.path(), "flipped.json", &bytes);
        }
    }

    #[test]
    fn real_files_with_a_field_deleted_never_panic(n in any::<usize>()) {
        let Some(seeds) = seeds() else { return Ok(()); };
        let dir = tempfile::tempdir().unwrap();
        for (_, seed) in &seeds {
            import_everyway(dir.path(), "deleted.json", &without_field(seed, n));
        }
    }
}
