//! Redaction on import: real-looking secrets put into a real file of each agent-log format
//! never reach the store. The check is a byte search of every file the store wrote (the SQLite
//! database and its journal; the Parquet files with their zstd pages decompressed), not a
//! query; the same search over an import with redaction off finds every secret, so a search
//! that finds nothing means something.

use std::io::Read;
use std::path::{Path, PathBuf};

use chainweaver_recorder::capture::RedactionPolicy;
use chainweaver_recorder::import::{ImportOptions, import_path};
use chainweaver_recorder::store::open_store;
use serde_json::{Map, Value};

use super::agent_logs::agent_logs;

/// One real file of each format.
const FILES: [&str; 8] = [
    "claude-code/tool_heavy.jsonl",
    "codex-cli/rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl",
    "tau2-bench/2025-10-07T07-44-20.888691_airline_relaxed_llm_agent_grok-4-fast-reasoning_user_simulator_grok-4-fast-reasoning.json",
    "toolbench/G1_answer_57_ChatGPT_DFS_woFilter_w2.json",
    "swe-agent/gpt4__swe-agent-test-repo__default_from_url__t-0.00__p-0.95__c-3.00__install-1__6e44b9__sweagenttestrepo-1c2844.traj",
    "swe-agent/ctf__pwn__warmup.traj",
    "mini-swe-agent/github_issue.traj.json",
    "openhands/basic_gui_mode.json",
];

/// Text with secrets the patterns must catch, appended to payload strings.
const SECRET_TEXT: &str = " curl -H 'Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0' \
    OPENAI_API_KEY=sk-proj-4fJq9XbLm2Tz7WvR8sKp3NcYd aws AKIAIOSFODNN7EXAMPLE \
    ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789 \
    github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv \
    https://deploy:Tr0ub4dor-3-horse@git.example.com/repo.git";

/// Secrets only their key gives away, put into argument objects.
const SECRET_KEYS: [(&str, &str); 3] = [
    ("api_key", "kv-7Hq2Lp9Zx4Wc"),
    ("password", "pw-Zebra-Lantern-88"),
    ("authorization", "Basic ZGVwbG95OmxldG1laW4"),
];

/// What must not be found on disk.
const NEEDLES: [&str; 9] = [
    "9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    "4fJq9XbLm2Tz7WvR8sKp3NcYd",
    "IOSFODNN7EXAMPLE",
    "aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
    "11ABCDEFG0123456789_abcdefghijklmnopqrstuv",
    "Tr0ub4dor-3-horse",
    "kv-7Hq2Lp9Zx4Wc",
    "pw-Zebra-Lantern-88",
    "ZGVwbG95OmxldG1laW4",
];

/// Keys whose string values are what a call carries (arguments, results, commands, text).
const PAYLOAD_KEYS: [&str; 8] = [
    "content",
    "text",
    "output",
    "observation",
    "action",
    "command",
    "thought",
    "input",
];

/// Keys whose object (or JSON text) values are a call's arguments.
const ARGUMENT_KEYS: [&str; 4] = ["input", "arguments", "args", "kwargs"];

fn add_secret_keys(map: &mut Map<String, Value>) {
    for (key, value) in SECRET_KEYS {
        map.insert(key.to_owned(), Value::from(value));
    }
}

/// Puts secrets into the payloads of a record, keeping its structure.
fn plant(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                let argument = ARGUMENT_KEYS.contains(&key.as_str());
                match child {
                    Value::Object(arguments) if argument => add_secret_keys(arguments),
                    // Arguments as JSON text (OpenAI's way); where the file's author replaced
                    // them by a marker, the marker becomes an argument of its own.
                    Value::String(text) if key == "arguments" => {
                        let mut arguments = match serde_json::from_str(text) {
                            Ok(Value::Object(arguments)) => arguments,
                            _ => {
                                Map::from_iter([("command".to_owned(), Value::from(text.as_str()))])
                            }
                        };
                        add_secret_keys(&mut arguments);
                        *text = Value::Object(arguments).to_string();
                    }
                    Value::String(text) if PAYLOAD_KEYS.contains(&key.as_str()) || argument => {
                        text.push_str(SECRET_TEXT);
                    }
                    _ => {}
                }
                plant(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(plant),
        _ => {}
    }
}

/// A copy of the real file with secrets planted in every record.
fn planted_copy(source: &Path, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(source).unwrap();
    let planted = match serde_json::from_str::<Value>(&text) {
        Ok(mut document) => {
            plant(&mut document);
            serde_json::to_string_pretty(&document).unwrap()
        }
        Err(_) => text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|line| {
                let mut record: Value = serde_json::from_str(line).unwrap();
                plant(&mut record);
                record.to_string() + "\n"
            })
            .collect(),
    };
    let target = dir.join(source.file_name().unwrap());
    std::fs::write(&target, planted).unwrap();
    target
}

/// Every file's bytes under `root`, with each zstd frame found in them decompressed too.
fn bytes_on_disk(root: &Path) -> Vec<u8> {
    let mut all = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        const MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
        for start in 0..bytes.len().saturating_sub(4) {
            if bytes[start..start + 4] == MAGIC
                && let Ok(decoder) = zstd::stream::read::Decoder::new(&bytes[start..])
            {
                let mut frame = Vec::new();
                // A false start (the magic inside other data) just fails to decode.
                let _ = decoder.single_frame().read_to_end(&mut frame);
                all.extend(frame);
            }
        }
        all.extend(bytes);
    }
    all
}

fn found(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

/// Each store in a folder of its own, so a search of the folder covers every file the store
/// writes beside its main one (SQLite's journal, Parquet's parts).
const STORES: [(&str, &str); 2] = [("sqlite", "store.db"), ("parquet", "store.parquet")];

/// Imports the planted files into a SQLite and a Parquet store under `dir`, with `redaction`;
/// the secrets redacted per file.
fn import_planted(files: &[PathBuf], dir: &Path, redaction: &RedactionPolicy) -> Vec<u64> {
    let mut redacted = Vec::new();
    for (folder, store_name) in STORES {
        std::fs::create_dir_all(dir.join(folder)).unwrap();
        let mut store = open_store(&dir.join(folder).join(store_name)).unwrap();
        for file in files {
            let options = ImportOptions {
                redaction: redaction.clone(),
                ..ImportOptions::default()
            };
            let report = import_path(
                file,
                &options,
                &mut |batch| store.append(&batch.traces, &batch.steps).map(|_| ()),
                &mut |_| {},
            )
            .unwrap();
            assert!(report.rejects.is_empty(), "{:?}", report.rejects);
            assert!(report.steps > 0, "{}", file.display());
            redacted.push(report.redacted.secrets);
        }
        drop(store);
    }
    redacted
}

#[test]
fn planted_secrets_reach_neither_sqlite_nor_parquet() {
    let Some(root) = agent_logs() else {
        return;
    };
    let inputs = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = FILES
        .iter()
        .map(|name| planted_copy(&root.join(name), inputs.path()))
        .collect();
    // Pattern secrets go into every file; key secrets into every file whose calls have
    // argument objects (text actions, as SWE-agent's, have none).
    let texts: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    for (file, text) in files.iter().zip(&texts) {
        for needle in &NEEDLES[..6] {
            assert!(
                text.contains(needle),
                "{needle} was not planted in {}",
                file.display()
            );
        }
    }
    for needle in &NEEDLES[6..] {
        let planted = texts.iter().filter(|t| t.contains(needle)).count();
        assert!(planted >= 6, "{needle} is in only {planted} files");
    }

    // Redaction off: the byte search finds every secret in both stores.
    let open = tempfile::tempdir().unwrap();
    import_planted(&files, open.path(), &RedactionPolicy::none());
    for (store, _) in STORES {
        let bytes = bytes_on_disk(&open.path().join(store));
        for needle in NEEDLES {
            assert!(found(&bytes, needle), "{store}: the search misses {needle}");
        }
    }

    // Redaction on (the default): none of them, in any file either store wrote.
    let safe = tempfile::tempdir().unwrap();
    let redacted = import_planted(&files, safe.path(), &ImportOptions::default().redaction);
    assert!(redacted.iter().all(|&n| n > 0), "{redacted:?}");
    for (store, _) in STORES {
        let bytes = bytes_on_disk(&safe.path().join(store));
        assert!(!bytes.is_empty());
        for needle in NEEDLES {
            assert!(!found(&bytes, needle), "{store} holds the secret {needle}");
        }
    }
}

/// ChainWeaver's own export keeps its raw bulk path with redaction on: a line redaction cannot
/// change is stored as text, a line holding a secret is read as values and redacted.
#[test]
fn own_exports_are_redacted_line_by_line_on_the_bulk_path() {
    use chainweaver_recorder::import::import_path_raw;
    use chainweaver_recorder::model::{ObservedStep, ObservedTrace, TraceWithSteps};
    use chainweaver_recorder::store::{SqliteStore, TraceStore};

    let dir = tempfile::tempdir().unwrap();
    let line = |id: &str, inputs: Value| {
        let record = TraceWithSteps {
            trace: ObservedTrace::new(id, "export"),
            steps: vec![ObservedStep::new(id, 0, "deploy", inputs)],
        };
        serde_json::to_string(&record).unwrap()
    };
    let clean = serde_json::json!({"target": "staging", "replicas": 3});
    let secret = serde_json::json!({"target": "prod", "api_key": "kv-7Hq2Lp9Zx4Wc"});
    let path = dir.path().join("export.jsonl");
    std::fs::write(
        &path,
        format!(
            "{}\n{}\n",
            line("clean", clean.clone()),
            line("secret", secret)
        ),
    )
    .unwrap();
    let store_dir = dir.path().join("store");
    std::fs::create_dir(&store_dir).unwrap();
    let mut store = SqliteStore::open(&store_dir.join("s.db")).unwrap();
    let report = import_path_raw(
        &path,
        &ImportOptions::default(),
        &mut |batch| store.append_raw(&batch.traces, &batch.steps).map(|_| ()),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!((report.traces, report.redacted.secrets), (2, 1));
    let stored = |id: &str| {
        store.get_trace(id).unwrap().unwrap().steps[0]
            .inputs
            .clone()
    };
    assert_eq!(stored("clean"), clean);
    assert_eq!(stored("secret")["api_key"], "[REDACTED]");
    drop(store);
    assert!(!found(&bytes_on_disk(&store_dir), "kv-7Hq2Lp9Zx4Wc"));
}
