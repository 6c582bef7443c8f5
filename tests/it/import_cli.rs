//! `chainweaver import` through the real binary: the whole agent-logs folder in one command,
//! a per-file report, skipped and rejected files, exit codes and redaction flags.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::{chainweaver, holds_bytes, shared_datasets};

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn json_of(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}): {}\n{}", stdout(output), stderr(output)))
}

/// `traces show ID` of the default store in `dir`: the trace's steps, and their tool names in
/// order.
fn shown_steps(dir: &Path, id: &str) -> (Vec<Value>, Vec<String>) {
    let shown = chainweaver(dir, &["--format", "json", "traces", "show", id]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    let steps = json_of(&shown)["steps"].as_array().unwrap().clone();
    let tools = steps
        .iter()
        .map(|s| s["tool_name"].as_str().unwrap().to_owned())
        .collect();
    (steps, tools)
}

fn total_calls(dir: &Path, store: &str) -> u64 {
    let output = chainweaver(
        dir,
        &["--store", store, "--format", "json", "traces", "stats"],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    json_of(&output)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["calls"].as_u64().unwrap())
        .sum()
}

/// The README's traces and calls per folder, as the importer counts them (see the recorder's
/// agent-log tests for the SWE-agent folder: 227 text actions less the 40 in files whose
/// structured calls are used instead, plus those 44 calls).
const EXPECTED: [(&str, u64, u64); 7] = [
    ("claude-code", 6, 449),
    ("codex-cli", 5, 740),
    ("tau2-bench", 8, 49),
    ("toolbench", 15, 50),
    ("swe-agent", 22, 231),
    ("mini-swe-agent", 2, 12),
    ("openhands", 4, 11),
];

#[test]
fn the_whole_agent_logs_folder_imports_in_one_command() {
    let Some(shared) = shared_datasets() else {
        return;
    };
    let logs = shared.join("agent-logs");
    let dir = tempfile::tempdir().unwrap();
    let logs_arg = logs.to_str().unwrap();

    let output = chainweaver(dir.path(), &["--store", "all.db", "import", logs_arg]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&output),
        stderr(&output)
    );
    let table = stdout(&output);
    for (folder, _, _) in EXPECTED {
        for entry in std::fs::read_dir(logs.join(folder)).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            let line = table
                .lines()
                .find(|l| l.contains(&name))
                .unwrap_or_else(|| panic!("{name} is not in the table:\n{table}"));
            let expected = if name.starts_with("LICENSE") {
                "skipped"
            } else {
                "imported"
            };
            assert!(line.contains(expected), "{name}: {line}");
        }
    }
    let traces: u64 = EXPECTED.iter().map(|e| e.1).sum();
    let calls: u64 = EXPECTED.iter().map(|e| e.2).sum();
    assert!(
        table.contains(&format!("{traces} traces (")),
        "no total of {traces} traces:\n{table}"
    );
    assert_eq!(total_calls(dir.path(), "all.db"), calls);

    // The same per file as JSON, into a Parquet store.
    let output = chainweaver(
        dir.path(),
        &[
            "--store",
            "all.parquet",
            "--format",
            "json",
            "import",
            logs_arg,
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report = json_of(&output);
    assert_eq!(report["schema_version"], 1);
    let files = report["files"].as_array().unwrap();
    for (folder, traces, calls) in EXPECTED {
        let of_folder: Vec<&Value> = files
            .iter()
            .filter(|f| {
                f["status"] == "imported"
                    && Path::new(f["path"].as_str().unwrap())
                        .parent()
                        .is_some_and(|p| p.ends_with(folder))
            })
            .collect();
        let sum =
            |field: &str| -> u64 { of_folder.iter().map(|f| f[field].as_u64().unwrap()).sum() };
        assert_eq!((sum("traces"), sum("steps")), (traces, calls), "{folder}");
    }
    let skipped: Vec<&str> = files
        .iter()
        .filter(|f| f["status"] == "skipped")
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(skipped.len(), 7, "six licences and the README: {skipped:?}");
    assert!(files.iter().all(|f| f["status"] != "rejected"));
    assert_eq!(report["totals"]["calls_without_result"], 10 + 3);
    assert_eq!(report["totals"]["traces_without_calls"], 2 + 1);
    assert_eq!(total_calls(dir.path(), "all.parquet"), calls);
}

#[test]
fn bad_files_are_reported_and_the_run_goes_on() {
    let Some(shared) = shared_datasets() else {
        return;
    };
    let logs = shared.join("agent-logs");
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    std::fs::create_dir(&input).unwrap();
    // A real session, a copy of it with one line cut short, and two files that are not logs.
    let session = std::fs::read_to_string(logs.join("claude-code/short.jsonl")).unwrap();
    std::fs::write(input.join("a-good.jsonl"), &session).unwrap();
    let mut lines: Vec<&str> = session.lines().collect();
    let cut = &lines[5][..lines[5].len() / 2];
    lines[5] = cut;
    std::fs::write(input.join("b-cut.jsonl"), lines.join("\n")).unwrap();
    std::fs::write(input.join("c-notes.txt"), "remember to rotate the keys\n").unwrap();
    std::fs::write(input.join("d-picture.png"), [0x89, b'P', b'N', b'G']).unwrap();
    std::fs::copy(
        logs.join("openhands/basic.json"),
        input.join("e-openhands.json"),
    )
    .unwrap();

    let output = chainweaver(dir.path(), &["--format", "json", "import", "input"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let report = json_of(&output);
    let status = |name: &str| -> (String, Value) {
        let file = report["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"].as_str().unwrap().ends_with(name))
            .unwrap_or_else(|| panic!("{name} not reported: {report}"));
        (file["status"].as_str().unwrap().to_owned(), file.clone())
    };
    assert_eq!(status("a-good.jsonl").0, "imported");
    let (cut_status, cut_file) = status("b-cut.jsonl");
    assert_eq!(cut_status, "imported");
    let rejects = cut_file["rejects"].as_array().unwrap();
    assert_eq!(rejects.len(), 1);
    assert_eq!(rejects[0]["line"], 6);
    assert!(
        rejects[0]["path"]
            .as_str()
            .unwrap()
            .ends_with("b-cut.jsonl")
    );
    for name in ["c-notes.txt", "d-picture.png"] {
        let (st, file) = status(name);
        assert_eq!(st, "skipped", "{file}");
        assert!(!file["reason"].as_str().unwrap().is_empty());
    }
    // The file after the bad ones was still read.
    assert_eq!(status("e-openhands.json").0, "imported");
    assert_eq!(status("e-openhands.json").1["steps"], 2);

    // A file named on its own that is not a log is rejected, not skipped; the others go on.
    let output = chainweaver(
        dir.path(),
        &[
            "--store",
            "two.db",
            "import",
            "input/c-notes.txt",
            "input/a-good.jsonl",
        ],
    );
    assert_eq!(output.status.code(), Some(3));
    let table = stdout(&output);
    assert!(table.contains("rejected: input/c-notes.txt"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.contains("a-good.jsonl") && l.contains("imported"))
    );
}

#[test]
fn redaction_flags_add_rules_or_turn_it_off() {
    let Some(shared) = shared_datasets() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // A real tau2-bench document whose first call gets a ticket reference and a custom token.
    let source = shared.join(
        "agent-logs/tau2-bench/2025-10-07T07-44-20.888691_airline_relaxed_llm_agent_grok-4-fast-reasoning_user_simulator_grok-4-fast-reasoning.json",
    );
    let mut document: Value = serde_json::from_slice(&std::fs::read(source).unwrap()).unwrap();
    let call = document
        .pointer_mut("/simulations/0/messages")
        .and_then(Value::as_array_mut)
        .unwrap()
        .iter_mut()
        .find_map(|m| m.get_mut("tool_calls").and_then(Value::as_array_mut))
        .unwrap();
    call[0]["arguments"]["ticket_ref"] = Value::from("TKT-credential-4471");
    call[0]["arguments"]["note"] =
        Value::from("internal id ZX-99-ALPHA-7 and sk-live-9u8y7t6r5e4w3q2a1s0d");
    std::fs::write(dir.path().join("sim.json"), document.to_string()).unwrap();

    let db_bytes = |store: &str| std::fs::read(dir.path().join(store)).unwrap();

    let output = chainweaver(
        dir.path(),
        &["--store", "off.db", "import", "--no-redact", "sim.json"],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let off = db_bytes("off.db");
    for needle in [
        "TKT-credential-4471",
        "ZX-99-ALPHA-7",
        "9u8y7t6r5e4w3q2a1s0d",
    ] {
        assert!(holds_bytes(&off, needle), "--no-redact keeps {needle}");
    }

    let output = chainweaver(
        dir.path(),
        &[
            "--store",
            "on.db",
            "import",
            "--redact-key",
            "ticket-ref",
            "--redact-pattern",
            r"ZX-\d+-[A-Z]+-\d",
            "sim.json",
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("secret values redacted"),
        "{}",
        stdout(&output)
    );
    let on = db_bytes("on.db");
    for needle in [
        "TKT-credential-4471",
        "ZX-99-ALPHA-7",
        "9u8y7t6r5e4w3q2a1s0d",
    ] {
        assert!(!holds_bytes(&on, needle), "redaction leaves {needle}");
    }

    let output = chainweaver(
        dir.path(),
        &["import", "--no-redact", "--redact-key", "x", "sim.json"],
    );
    assert!(
        !output.status.success(),
        "--no-redact with rules is a usage error"
    );
    let output = chainweaver(dir.path(), &["import", "--redact-pattern", "(", "sim.json"]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("redaction pattern"),
        "{}",
        stderr(&output)
    );
}

/// A BFCL multi-turn result file as the harness writes it (a `state_info` snapshot, then a turn
/// of `step_N` lists), detected and imported through the binary; a single-turn line is rejected
/// with its reason, and a token in a call's arguments is redacted.
#[test]
fn bfcl_results_import_by_detection_with_failures_and_rejects() {
    let dir = tempfile::tempdir().unwrap();
    let line = |id: &str, token: &str| {
        serde_json::json!({
            "id": id,
            "result": [[["cd(folder='document')", "post(token='x')"]]],
            "inference_log": [
                [{"role": "state_info", "class_name": "GorillaFileSystem", "content": {"root": {}}}],
                {"begin_of_turn_query": [{"role": "user", "content": "go to document and post"}],
                 "step_0": [
                    {"role": "assistant", "content": [{"cd": "{\"folder\": \"document\"}"}]},
                    {"role": "handler_log", "content": "Successfully decoded model response.",
                     "model_response_decoded": ["cd(folder='document')",
                                                format!("authenticate_twitter(username='ada', password='{token}')"),
                                                "mv(source='a.txt')"]},
                    {"role": "tool", "content": "{\"current_working_directory\": \"document\"}"},
                    {"role": "tool", "content": "{\"authentication_status\": true}"},
                    {"role": "tool", "content": "Error during execution: mv() missing 1 required positional argument: 'destination'"}
                 ],
                 "step_1": [
                    {"role": "assistant", "content": "Done."},
                    {"role": "handler_log", "content": "Successfully decoded model response.", "model_response_decoded": []}
                 ]}
            ],
            "latency": [[0.8, 0.3]]
        })
        .to_string()
    };
    let text = format!(
        "{}\n{}\n{}\n",
        line("multi_turn_base_0", "hunter2-very-secret"),
        line("multi_turn_base_1", "hunter3-very-secret"),
        r#"{"id": "simple_0", "result": "[calculate_area(base=10, height=5)]"}"#
    );
    std::fs::write(dir.path().join("BFCL_v3_multi_turn_base_result.json"), text).unwrap();

    let output = chainweaver(
        dir.path(),
        &[
            "--format",
            "json",
            "import",
            "BFCL_v3_multi_turn_base_result.json",
        ],
    );
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let file = &json_of(&output)["files"][0];
    assert_eq!(file["format"], "bfcl");
    assert_eq!(file["traces"], 2);
    assert_eq!(file["steps"], 6);
    assert_eq!(file["failed_steps"], 2);
    assert_eq!(file["rejects"][0]["line"], 3);
    assert!(
        file["rejects"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("inference_log"),
        "{file}"
    );
    assert!(file["redacted"]["secrets"].as_u64().unwrap() >= 2, "{file}");

    let (steps, tools) = shown_steps(dir.path(), "multi_turn_base_0");
    let text = Value::Array(steps.clone()).to_string();
    assert!(
        !text.contains("hunter2"),
        "the password is redacted: {text}"
    );
    assert_eq!(tools, ["cd", "authenticate_twitter", "mv"]);
    assert_eq!(
        steps[0]["inputs"],
        serde_json::json!({"folder": "document"})
    );
    assert_eq!(
        steps[0]["outputs"],
        serde_json::json!({"current_working_directory": "document"})
    );
    assert_eq!(steps[1]["inputs"]["username"], "ada");
    assert!(
        steps[2]["error_message"]
            .as_str()
            .unwrap()
            .contains("missing 1 required positional argument")
    );
}

/// A result file the BFCL harness itself wrote (`datasets/fixtures/bfcl`, made with its own
/// backends executing every call): imported by detection with the counts its README gives
/// (counted there without the importer), each call paired with its own result, and the
/// passwords its calls pass found nowhere in the store's bytes.
#[test]
fn a_result_file_the_bfcl_harness_wrote_imports_with_its_counts() {
    let dir = tempfile::tempdir().unwrap();
    let name = "BFCL_v4_multi_turn_base_result.json";
    std::fs::copy(
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("datasets/fixtures/bfcl")
            .join(name),
        dir.path().join(name),
    )
    .unwrap();
    let output = chainweaver(dir.path(), &["--format", "json", "import", name]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let file = &json_of(&output)["files"][0];
    assert_eq!(file["format"], "bfcl", "{file}");
    assert_eq!(file["traces"], 30, "{file}");
    assert_eq!(file["steps"], 197, "{file}");
    assert_eq!(file["failed_steps"], 26, "{file}");
    assert_eq!(file["calls_without_result"], 0, "{file}");
    assert_eq!(file["rejects"], serde_json::json!([]), "{file}");

    // Every store file: the SQLite database and its WAL, if one is left.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("chainweaver.db")
        {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !holds_bytes(&bytes, "securePass123"),
                "a password reached {}",
                path.display()
            );
        }
    }

    let (steps, tools) = shown_steps(dir.path(), "multi_turn_base_0");
    assert_eq!(
        tools,
        [
            "cd", "mkdir", "mv", "cd", "grep", "cd", "sort", "cd", "mv", "cd", "diff"
        ]
    );
    assert_eq!(
        steps[2]["outputs"]["result"],
        "'final_report.pdf' moved to 'temp/final_report.pdf'"
    );
    assert_eq!(steps[4]["inputs"]["pattern"], "budget analysis");
    assert_eq!(
        steps[5]["inputs"],
        serde_json::json!({"folder": "no_such_folder"})
    );
    assert_eq!(
        steps[5]["error_message"],
        "cd: 'no_such_folder': No such file or directory"
    );
    assert_eq!(
        steps[10]["inputs"],
        serde_json::json!({"file_name1": "final_report.pdf", "file_name2": "previous_report.pdf"})
    );
}
