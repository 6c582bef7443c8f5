//! Importers: the shared real datasets, the project's own fixtures, and a suite of bad input.

// The helpers below are test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use chainweaver_recorder::RecorderError;
use chainweaver_recorder::import::{
    ImportBatch, ImportFormat, ImportOptions, ImportProgress, ImportReport, RawImportBatch,
    RejectUnit, import_path, import_path_raw,
};
use chainweaver_recorder::model::{ObservedStep, ObservedTrace};
use chainweaver_recorder::store::{SqliteStore, TraceStore};
use serde_json::{Value, json};

use super::shared_datasets;

/// Everything one import produced.
struct Imported {
    report: ImportReport,
    batches: Vec<ImportBatch>,
    progress: Vec<ImportProgress>,
}

impl Imported {
    fn traces(&self) -> Vec<&ObservedTrace> {
        self.batches.iter().flat_map(|b| &b.traces).collect()
    }

    fn steps(&self) -> Vec<&ObservedStep> {
        self.batches.iter().flat_map(|b| &b.steps).collect()
    }

    fn steps_of(&self, trace_id: &str) -> Vec<&ObservedStep> {
        self.steps()
            .into_iter()
            .filter(|s| s.trace_id == trace_id)
            .collect()
    }

    fn tools_of(&self, trace_id: &str) -> Vec<String> {
        self.steps_of(trace_id)
            .iter()
            .map(|s| s.tool_name.clone())
            .collect()
    }
}

fn import_with(path: &Path, options: &ImportOptions) -> Result<Imported, RecorderError> {
    let mut batches = Vec::new();
    let mut progress = Vec::new();
    let report = import_path(
        path,
        options,
        &mut |batch| {
            batches.push(batch);
            Ok(())
        },
        &mut |p| progress.push(p),
    )?;
    check_batches(&batches);
    Ok(Imported {
        report,
        batches,
        progress,
    })
}

fn import(path: &Path) -> Imported {
    import_with(path, &ImportOptions::default()).unwrap()
}

/// Every batch holds whole traces: each step's trace is in the same batch, no trace is split
/// over batches, and steps are numbered 0, 1, 2, ... within their trace.
fn check_batches(batches: &[ImportBatch]) {
    let mut seen = HashSet::new();
    for batch in batches {
        let ids: HashSet<&str> = batch.traces.iter().map(|t| t.trace_id.as_str()).collect();
        for id in &ids {
            assert!(
                seen.insert(id.to_string()),
                "trace {id} appears in two batches"
            );
        }
        let mut next_index: BTreeMap<&str, u32> = BTreeMap::new();
        for step in &batch.steps {
            assert!(
                ids.contains(step.trace_id.as_str()),
                "step of {} outside its trace's batch",
                step.trace_id
            );
            let expected = next_index.entry(step.trace_id.as_str()).or_insert(0);
            assert_eq!(
                step.step_index, *expected,
                "step order in {}",
                step.trace_id
            );
            *expected += 1;
        }
    }
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../datasets/fixtures/import")
        .join(name)
}

fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::File::create(&path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
    path
}

// ---------------------------------------------------------------------------------------------
// The shared datasets
// ---------------------------------------------------------------------------------------------

#[test]
fn chainweaver_jsonl_example_gives_four_traces_and_eleven_steps() {
    let Some(datasets) = shared_datasets() else {
        return;
    };
    let path = datasets.join("chainweaver-examples/agent_tool_trace.jsonl");
    let imported = import(&path);
    assert_eq!(imported.report.format, ImportFormat::ChainweaverJsonl);
    assert!(
        imported.report.rejects.is_empty(),
        "{:?}",
        imported.report.rejects
    );

    // An independent count: lines, and distinct trace ids in order of appearance.
    let text = std::fs::read_to_string(&path).unwrap();
    let mut ids: Vec<String> = Vec::new();
    let mut lines = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        lines += 1;
        let id = serde_json::from_str::<Value>(line).unwrap()["trace_id"]
            .as_str()
            .unwrap()
            .to_owned();
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    assert_eq!((ids.len(), lines), (4, 11));
    assert_eq!(imported.report.traces, ids.len() as u64);
    assert_eq!(imported.report.steps, lines);
    let trace_ids: Vec<&str> = imported
        .traces()
        .iter()
        .map(|t| t.trace_id.as_str())
        .collect();
    assert_eq!(trace_ids, ids);
    assert_eq!(
        imported.tools_of("req-1"),
        ["fetch", "validate", "transform"]
    );
    assert_eq!(imported.tools_of("req-4"), ["fetch", "summarize"]);
    let first = imported.steps_of("req-1")[0];
    assert_eq!(
        first.inputs,
        json!({"url": "https://api.example.com/orders"})
    );
    assert_eq!(first.outputs, Some(json!({"body": "<json>"})));
    assert_eq!(
        imported.traces()[0].source,
        "import:chainweaver-jsonl:agent_tool_trace.jsonl"
    );
}

#[test]
fn execution_result_example_imports_despite_missing_fields() {
    let Some(datasets) = shared_datasets() else {
        return;
    };
    let imported = import(&datasets.join("chainweaver-examples/example_trace.json"));
    assert_eq!(imported.report.format, ImportFormat::ExecutionResult);
    assert!(
        imported.report.rejects.is_empty(),
        "{:?}",
        imported.report.rejects
    );
    let traces = imported.traces();
    assert_eq!(traces.len(), 1);
    let trace = traces[0];
    assert_eq!(trace.trace_id, "a1b2c3d4e5f60718192021222324252");
    assert_eq!(trace.metadata["flow_name"], json!("etl-pipeline"));
    assert!(trace.started_at.is_some());
    let trace_id = trace.trace_id.clone();
    assert_eq!(
        imported.tools_of(&trace_id),
        ["fetch_data", "transform_records", "store_results"]
    );
    let steps = imported.steps_of(&trace_id);
    assert_eq!(steps[0].duration_ms, Some(45.2));
    assert_eq!(steps[2].outputs, Some(json!({"stored_count": 3})));
    assert_eq!(imported.report.failed_steps, 0);
}

/// What an independent walk of one tau-bench file finds, trajectory by trajectory: each tool
/// call's name and whether its result says the call failed.
fn walk_tau_bench(path: &Path) -> Vec<Vec<(String, bool)>> {
    let records: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    records
        .iter()
        .map(|record| {
            let traj = record["traj"].as_array().unwrap();
            let mut calls = Vec::new();
            for (i, message) in traj.iter().enumerate() {
                let Some(tool_calls) = message.get("tool_calls").and_then(Value::as_array) else {
                    continue;
                };
                for (k, call) in tool_calls.iter().enumerate() {
                    let name = call["function"]["name"].as_str().unwrap().to_owned();
                    // In these files every call is answered by the message that follows, in order.
                    let result = traj.get(i + 1 + k).filter(|m| m["role"] == "tool");
                    let content = result.and_then(|m| m["content"].as_str()).unwrap_or("");
                    let failed = content.starts_with("Error:")
                        || (content.starts_with("# var_") && content.contains("= \"Error:"));
                    calls.push((name, failed));
                }
            }
            calls
        })
        .collect()
}

#[test]
fn tau_bench_retail_imports_every_trajectory_and_tool_call() {
    let Some(datasets) = shared_datasets() else {
        return;
    };
    let dir = datasets.join("tau-bench-retail");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 4);

    let (mut trajectories, mut calls, mut failed, mut plain_errors) = (0u64, 0u64, 0u64, 0u64);
    let (mut imported_traces, mut imported_steps, mut imported_failed) = (0u64, 0u64, 0u64);
    let mut python_arguments = 0u64;
    let mut first_call_by_file = Vec::new();
    for file in &files {
        let expected = walk_tau_bench(file);
        let raw = std::fs::read_to_string(file).unwrap();
        plain_errors += raw.matches(r#""content": "Error:"#).count() as u64;
        trajectories += expected.len() as u64;
        calls += expected.iter().map(Vec::len).sum::<usize>() as u64;
        failed += expected.iter().flatten().filter(|(_, f)| *f).count() as u64;

        // Small batches, so that the batch invariants are exercised across many batches.
        let options = ImportOptions {
            batch_steps: 50,
            ..ImportOptions::default()
        };
        let imported = import_with(file, &options).unwrap();
        assert_eq!(
            imported.report.format,
            ImportFormat::TauBench,
            "{}",
            file.display()
        );
        assert!(
            imported.report.rejects.is_empty(),
            "{:?}",
            imported.report.rejects
        );
        assert!(imported.batches.len() > 1);
        imported_traces += imported.report.traces;
        imported_steps += imported.report.steps;
        imported_failed += imported.report.failed_steps;

        // Trajectory by trajectory, call by call: same tools, same failures.
        let traces = imported.traces();
        assert_eq!(traces.len(), expected.len());
        for (trace, expected_calls) in traces.iter().zip(&expected) {
            let got: Vec<(String, bool)> = imported
                .steps_of(&trace.trace_id)
                .iter()
                .map(|s| (s.tool_name.clone(), s.is_error()))
                .collect();
            assert_eq!(&got, expected_calls, "{}", trace.trace_id);
            assert!(trace.metadata.contains_key("reward"));
            assert!(trace.metadata.contains_key("task_id"));
            // Crashed runs have no steps and keep their error.
            assert_eq!(
                expected_calls.is_empty(),
                trace.metadata.contains_key("run_error")
            );
        }
        for step in imported.steps() {
            assert!(
                step.inputs.is_object(),
                "{}#{}: {}",
                step.trace_id,
                step.step_index,
                step.inputs
            );
            assert!(!step.metadata.contains_key("arguments_unparsed"));
            assert!(!step.metadata.contains_key("result_missing"));
            if step.metadata.get("arguments_syntax") == Some(&json!("python")) {
                python_arguments += 1;
            }
            if step.is_error() {
                assert_eq!(step.error_type.as_deref(), Some("ToolError"));
                assert!(step.error_message.as_deref().unwrap().starts_with("Error"));
                assert_eq!(step.outputs, None);
            } else {
                assert!(step.outputs.is_some());
            }
        }
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        first_call_by_file.push(imported.steps_of(&format!("{stem}/0/0"))[0].clone());
        let last = imported.progress.last().unwrap();
        assert_eq!(last.bytes_read, last.total_bytes);
    }
    assert_eq!(imported_traces, trajectories);
    assert_eq!(imported_steps, calls);
    assert_eq!(imported_failed, failed);
    // The figures the independent walk gives for these files (the dataset README rounds them
    // differently; see the import module's report).
    assert_eq!((trajectories, calls, plain_errors), (400, 2_773, 59));
    assert!(python_arguments > 1_000);
    // Task 0 starts with the same lookup in every run: Python-literal arguments (the assertions
    // files) parse to exactly the JSON the tool-calling files wrote.
    for step in &first_call_by_file {
        assert_eq!(step.tool_name, "find_user_id_by_name_zip");
        assert_eq!(
            step.inputs,
            json!({"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"})
        );
    }
    assert_ne!(
        first_call_by_file[0].metadata.get("arguments_syntax"),
        first_call_by_file[2].metadata.get("arguments_syntax")
    );
}

#[test]
fn spmf_sign_imports_one_trace_per_sequence() {
    let Some(datasets) = shared_datasets() else {
        return;
    };
    let path = datasets.join("spm/SIGN.txt");
    let text = std::fs::read_to_string(&path).unwrap();
    let sequences = text.lines().filter(|l| !l.trim().is_empty()).count() as u64;
    let items = text
        .split_whitespace()
        .filter(|t| *t != "-1" && *t != "-2")
        .count() as u64;
    let imported = import(&path);
    assert_eq!(imported.report.format, ImportFormat::Spmf);
    assert!(imported.report.rejects.is_empty());
    assert_eq!(
        (imported.report.traces, imported.report.steps),
        (sequences, items)
    );
    assert_eq!((sequences, items), (730, 37_958));
    let first_line: Vec<&str> = text
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .filter(|t| *t != "-1" && *t != "-2")
        .collect();
    assert_eq!(imported.tools_of("SIGN:1"), first_line);
    assert!(imported.steps().iter().all(|s| s.inputs == json!({})));
}

// ---------------------------------------------------------------------------------------------
// The project's fixtures
// ---------------------------------------------------------------------------------------------

#[test]
fn chainweaver_events_group_by_session() {
    let imported = import(&fixture("events.jsonl"));
    assert_eq!(imported.report.format, ImportFormat::ChainweaverEvents);
    assert!(imported.report.rejects.is_empty());
    assert_eq!(
        (
            imported.report.traces,
            imported.report.steps,
            imported.report.failed_steps
        ),
        (2, 5, 1)
    );
    assert_eq!(
        imported.tools_of("s1"),
        ["search_code", "read_file", "edit_file"]
    );
    assert_eq!(imported.tools_of("s2"), ["search_code", "read_file"]);
    let s1 = imported
        .traces()
        .into_iter()
        .find(|t| t.trace_id == "s1")
        .unwrap()
        .clone();
    assert_eq!(s1.metadata["model_calls"], json!(2));
    assert_eq!(s1.metadata["input_tokens"], json!(2700));
    assert!(s1.started_at.unwrap() < s1.ended_at.unwrap());
    let edit = imported.steps_of("s1")[2];
    assert!(edit.is_error());
    assert_eq!(edit.duration_ms, Some(7.0));
    assert_eq!(
        edit.inputs,
        json!({"path": "src/config.rs", "patch": "..."})
    );
}

#[test]
fn openai_message_list_pairs_calls_with_results() {
    let imported = import(&fixture("openai_messages.json"));
    assert_eq!(imported.report.format, ImportFormat::OpenaiMessages);
    assert_eq!(
        (
            imported.report.traces,
            imported.report.steps,
            imported.report.failed_steps
        ),
        (1, 4, 1)
    );
    let steps = imported.steps_of("openai_messages");
    assert_eq!(steps[0].outputs, Some(json!("ana_lima_1")));
    assert_eq!(
        serde_json::to_string(steps[1].outputs.as_ref().unwrap()).unwrap(),
        r##"{"orders":["#W1","#W2"],"balance":10.50}"##
    );
    assert_eq!(
        steps[2].inputs,
        json!({"order_id": "#W1", "verbose": true, "limit": null})
    );
    assert_eq!(
        steps[2].error_message.as_deref(),
        Some("Error: order not found")
    );
    assert_eq!(steps[3].outputs, None);
    assert_eq!(steps[3].metadata["result_missing"], json!(true));
}

#[test]
fn openai_conversation_lines_reject_only_the_bad_one() {
    let imported = import(&fixture("openai_conversations.jsonl"));
    assert_eq!(imported.report.format, ImportFormat::OpenaiMessages);
    assert_eq!(imported.report.traces, 2);
    let rejects = &imported.report.rejects;
    assert_eq!(rejects.len(), 1);
    assert_eq!((rejects[0].line, rejects[0].unit), (2, RejectUnit::Line));
    assert!(
        rejects[0].reason.contains("messages[0]: tool_calls[0]"),
        "{}",
        rejects[0].reason
    );
    assert!(rejects[0].excerpt.contains("conv-b"));
    assert_eq!(
        imported.steps_of("conv-a")[0].outputs,
        Some(json!({"temp_c": 21}))
    );
    assert_eq!(imported.traces()[0].metadata["model"], json!("gpt-4o"));
    // The legacy function_call / role function pair.
    assert_eq!(
        imported.steps_of("openai_conversations:3")[0].outputs,
        Some(json!({"temp_c": 18}))
    );
}

#[test]
fn anthropic_messages_use_tool_use_and_tool_result_blocks() {
    let imported = import(&fixture("anthropic_messages.jsonl"));
    assert_eq!(imported.report.format, ImportFormat::AnthropicMessages);
    let steps = imported.steps_of("anthropic_messages");
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].call_id.as_deref(), Some("toolu_01"));
    assert_eq!(
        serde_json::to_string(steps[0].outputs.as_ref().unwrap()).unwrap(),
        r#"{"order_id":17,"total":99.90}"#
    );
    assert_eq!(
        serde_json::to_string(&steps[1].inputs).unwrap(),
        r#"{"order_id":17,"amount":99.90}"#
    );
    assert_eq!(
        steps[1].error_message.as_deref(),
        Some("refunds are disabled")
    );
    assert_eq!(imported.report.failed_steps, 1);
}

#[test]
fn named_format_overrides_detection_and_options_apply() {
    let dir = tempfile::tempdir().unwrap();
    // Two ids collide; the prefix applies to both and the second gets a suffix.
    let path = write_file(
        dir.path(),
        "runs.jsonl",
        br#"{"trace_id": "r", "execution_log": [{"tool_name": "a"}]}
{"trace_id": "r", "execution_log": [{"tool_name": "b"}]}
"#,
    );
    let options = ImportOptions {
        format: Some(ImportFormat::ExecutionResult),
        source: Some("nightly".to_owned()),
        trace_id_prefix: Some("n1/".to_owned()),
        ..ImportOptions::default()
    };
    let imported = import_with(&path, &options).unwrap();
    let ids: Vec<&str> = imported
        .traces()
        .iter()
        .map(|t| t.trace_id.as_str())
        .collect();
    assert_eq!(ids, ["n1/r", "n1/r~2"]);
    assert_eq!(
        imported.traces()[1].metadata["original_trace_id"],
        json!("r")
    );
    assert!(imported.traces().iter().all(|t| t.source == "nightly"));
    assert_eq!(imported.tools_of("n1/r~2"), ["b"]);
    assert_eq!(
        "tau-bench".parse::<ImportFormat>().unwrap(),
        ImportFormat::TauBench
    );
    assert!(
        "csv"
            .parse::<ImportFormat>()
            .unwrap_err()
            .contains("chainweaver-jsonl")
    );
    for format in ImportFormat::ALL {
        assert_eq!(format.name().parse::<ImportFormat>().unwrap(), format);
    }
}

#[test]
fn sink_errors_stop_the_import() {
    let mut calls = 0;
    let err = import_path(
        &fixture("events.jsonl"),
        &ImportOptions::default(),
        &mut |_| {
            calls += 1;
            Err(RecorderError::WriterGone("store closed".to_owned()))
        },
        &mut |_| {},
    )
    .unwrap_err();
    assert!(matches!(err, RecorderError::WriterGone(_)));
    assert_eq!(calls, 1);
}

/// `n` chainweaver-traces lines, each a trace of two steps with a payload of `payload` bytes.
fn traces_lines(n: usize, payload: usize) -> String {
    let mut text = String::new();
    for i in 0..n {
        let trace = json!({
            "trace": {"trace_id": format!("t{i}"), "source": "test"},
            "steps": [
                {"trace_id": format!("t{i}"), "step_index": 0, "tool_name": "a",
                 "inputs": {"blob": "x".repeat(payload), "n": "NUMBER"}, "duration_ms": 2.5},
                {"trace_id": format!("t{i}"), "step_index": 1, "tool_name": "b",
                 "inputs": {}, "outputs": {"ok": true}},
            ],
        });
        // `json!` cannot write `1.50`; put the number text in by hand.
        text.push_str(&trace.to_string().replace(r#""NUMBER""#, "1.50"));
        text.push('\n');
    }
    text
}

#[test]
fn batches_close_on_input_bytes_as_well_as_steps() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path(), "big.jsonl", traces_lines(40, 1_000).as_bytes());
    let options = ImportOptions {
        batch_steps: 1_000_000,
        batch_bytes: 5_000,
        ..ImportOptions::default()
    };
    let imported = import_with(&path, &options).unwrap();
    assert_eq!(imported.report.steps, 80);
    assert!(imported.report.rejects.is_empty());
    // Each line is about 1.2 kB: a batch closes after about five traces.
    assert!(
        imported.batches.len() >= 6,
        "{} batches",
        imported.batches.len()
    );
    for batch in &imported.batches {
        assert!(batch.traces.len() <= 6, "{} traces", batch.traces.len());
    }
    // Traces arrive in file order across batches, payload numbers as written.
    let ids: Vec<String> = imported
        .traces()
        .iter()
        .map(|t| t.trace_id.clone())
        .collect();
    let expected: Vec<String> = (0..40).map(|i| format!("t{i}")).collect();
    assert_eq!(ids, expected);
    assert_eq!(
        imported.steps()[0].inputs["n"].to_string(),
        "1.50",
        "number text kept"
    );
    // The last progress report covers the whole file and every step.
    let last = imported.progress.last().unwrap();
    assert_eq!(last.bytes_read, last.total_bytes);
    assert_eq!(last.steps, 80);
}

#[test]
fn a_sink_error_mid_file_stops_the_parser_and_is_returned() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path(), "many.jsonl", traces_lines(2_000, 10).as_bytes());
    let options = ImportOptions {
        batch_steps: 100,
        ..ImportOptions::default()
    };
    let mut calls = 0;
    let err = import_path(
        &path,
        &options,
        &mut |batch| {
            calls += 1;
            assert_eq!(batch.steps.len(), 100);
            if calls == 3 {
                return Err(RecorderError::WriterGone("disk full".to_owned()));
            }
            Ok(())
        },
        &mut |_| {},
    )
    .unwrap_err();
    assert!(
        matches!(&err, RecorderError::WriterGone(m) if m == "disk full"),
        "{err}"
    );
    assert_eq!(calls, 3, "no batch is handed over after the sink failed");
}

// ---------------------------------------------------------------------------------------------
// Bad input
// ---------------------------------------------------------------------------------------------

#[test]
fn bad_lines_are_rejected_with_their_line_and_good_ones_kept() {
    let dir = tempfile::tempdir().unwrap();
    let huge = "x".repeat(5 * 1024 * 1024);
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    let mut bytes = Vec::new();
    bytes.extend_from_slice(b"{\"trace_id\": \"t\", \"tool\": \"first\", \"inputs\": {}}\n"); // 1
    bytes.extend_from_slice(b"{\"trace_id\": \"t\", \"tool\": \"trunc\", \"inputs\": {\n"); // 2
    bytes.extend_from_slice(b"{\"trace_id\": \"t\", \"tool\": 42, \"inputs\": {}}\n"); // 3
    bytes.extend_from_slice(
        b"{\"trace_id\": \"t\", \"tool\": \"s\", \"inputs\": \"not an object\"}\n",
    ); // 4
    bytes.extend_from_slice(
        format!(
            "{{\"trace_id\": \"t\", \"tool\": \"huge\", \"inputs\": {{\"blob\": \"{huge}\"}}}}\n"
        )
        .as_bytes(),
    ); // 5
    bytes.extend_from_slice(
        b"{\"trace_id\": \"t\", \"tool\": \"bad\xff\xfeutf8\", \"inputs\": {}}\n",
    ); // 6
    bytes.extend_from_slice(
        format!("{{\"trace_id\": \"t\", \"tool\": \"deep\", \"inputs\": {{\"d\": {deep}}}}}\n")
            .as_bytes(),
    ); // 7
    bytes.extend_from_slice(b"[1, 2]\n"); // 8
    bytes.extend_from_slice(b"{\"trace_id\": {\"x\": 1}, \"tool\": \"t\"}\n"); // 9
    bytes.extend_from_slice(b"{\"trace_id\": \"t\", \"tool\": \"last\", \"inputs\": {}}\r\n"); // 10
    bytes.extend_from_slice(b"\n"); // 11: a trailing empty line
    let path = write_file(dir.path(), "mixed.jsonl", &bytes);

    let imported = import(&path);
    assert_eq!(imported.report.format, ImportFormat::ChainweaverJsonl);
    assert_eq!(imported.tools_of("t"), ["first", "huge", "last"]);
    assert_eq!(
        imported.steps_of("t")[1].inputs["blob"]
            .as_str()
            .unwrap()
            .len(),
        huge.len()
    );
    let rejects: Vec<(u64, &str)> = imported
        .report
        .rejects
        .iter()
        .map(|r| (r.line, r.reason.as_str()))
        .collect();
    let lines: Vec<u64> = rejects.iter().map(|(l, _)| *l).collect();
    assert_eq!(lines, [2, 3, 4, 6, 7, 8, 9], "{rejects:#?}");
    assert!(
        rejects[0].1.starts_with("truncated JSON"),
        "{}",
        rejects[0].1
    );
    assert!(
        rejects[1]
            .1
            .contains("`tool` must be a string, got a number")
    );
    assert!(
        rejects[2]
            .1
            .contains("`inputs` must be a JSON object, got a string")
    );
    assert!(rejects[3].1.contains("invalid UTF-8 at byte"));
    assert!(rejects[4].1.contains("recursion limit"), "{}", rejects[4].1);
    assert!(rejects[5].1.contains("got an array"));
    assert!(
        rejects[6]
            .1
            .contains("`trace_id` must be a string or a number")
    );
    for reject in &imported.report.rejects {
        assert_eq!(reject.unit, RejectUnit::Line);
        assert!(reject.excerpt.chars().count() <= 201);
        assert!(
            reject
                .to_string()
                .starts_with(&format!("{}:{}: ", path.display(), reject.line))
        );
    }
    assert!(imported.report.rejects[3].excerpt.contains('\u{FFFD}'));
}

#[test]
fn lines_over_the_size_limit_are_rejected_unread() {
    let dir = tempfile::tempdir().unwrap();
    let big = format!(
        "{{\"tool\": \"big\", \"inputs\": {{\"s\": \"{}\"}}}}\n",
        "y".repeat(10_000)
    );
    let path = write_file(
        dir.path(),
        "big.jsonl",
        format!("{{\"tool\": \"a\"}}\n{big}{{\"tool\": \"b\"}}\n").as_bytes(),
    );
    let options = ImportOptions {
        max_record_bytes: 1_000,
        ..ImportOptions::default()
    };
    let imported = import_with(&path, &options).unwrap();
    assert_eq!(imported.tools_of("big:default"), ["a", "b"]);
    assert_eq!(imported.report.rejects.len(), 1);
    assert_eq!(imported.report.rejects[0].line, 2);
    assert!(
        imported.report.rejects[0]
            .reason
            .contains("longer than the 1000 byte limit")
    );
}

#[test]
fn empty_and_unknown_files_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let empty = write_file(dir.path(), "empty.jsonl", b"");
    let blank = write_file(dir.path(), "blank.json", b"  \n\n");
    for path in [&empty, &blank] {
        let message = import_with(path, &ImportOptions::default())
            .err()
            .unwrap()
            .to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert!(message.contains("empty"), "{message}");
    }
    // With the format named, an empty file is simply nothing to import.
    let options = ImportOptions {
        format: Some(ImportFormat::ChainweaverJsonl),
        ..ImportOptions::default()
    };
    let imported = import_with(&empty, &options).unwrap();
    assert_eq!(
        (imported.report.traces, imported.report.rejects.len()),
        (0, 0)
    );

    let csv = write_file(dir.path(), "calls.csv", b"tool,inputs\nfetch,{}\n");
    let message = import_with(&csv, &ImportOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(message.contains("calls.csv"), "{message}");
    assert!(message.contains("tool,inputs"), "{message}");
    assert!(message.contains("unknown format"), "{message}");

    let other_json = write_file(
        dir.path(),
        "other.jsonl",
        b"{\"temperature\": 3, \"unit\": \"C\"}\n",
    );
    let message = import_with(&other_json, &ImportOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(
        message.contains("other.jsonl") && message.contains("temperature, unit"),
        "{message}"
    );

    let empty_array = write_file(dir.path(), "empty.json", b"[]");
    let message = import_with(&empty_array, &ImportOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(message.contains("empty JSON array"), "{message}");

    let missing = dir.path().join("missing.jsonl");
    let message = import_with(&missing, &ImportOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(message.contains("missing.jsonl"), "{message}");
}

#[test]
fn truncated_array_keeps_the_records_before_the_break() {
    let dir = tempfile::tempdir().unwrap();
    let record = |task: u32| {
        json!({"task_id": task, "trial": 0, "reward": 0.0, "traj": [
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "{}"}
        ]})
        .to_string()
    };
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    let text = format!(
        "[{},\n{},\n{{\"task_id\": 2, \"traj\": 7}},\n{{\"traj\": {deep}}},\n{}\n",
        record(0),
        record(1),
        record(3)
    );
    let path = write_file(dir.path(), "results.json", text.as_bytes());
    let imported = import(&path);
    assert_eq!(imported.report.format, ImportFormat::TauBench);
    let ids: Vec<&str> = imported
        .traces()
        .iter()
        .map(|t| t.trace_id.as_str())
        .collect();
    assert_eq!(ids, ["results/0/0", "results/1/0"]);
    let rejects = &imported.report.rejects;
    assert_eq!(rejects.len(), 2, "{rejects:#?}");
    assert_eq!((rejects[0].line, rejects[0].unit), (3, RejectUnit::Record));
    assert!(rejects[0].reason.contains("`traj` must be an array"));
    assert_eq!(rejects[1].line, 4);
    assert!(
        rejects[1].reason.contains("recursion limit"),
        "{}",
        rejects[1].reason
    );
    assert!(rejects[1].to_string().contains("record 4"));

    let two = format!("[{},\n{}]", record(0), record(1));
    let path = write_file(dir.path(), "cut.json", &two.as_bytes()[..two.len() - 20]);
    let imported = import(&path);
    assert_eq!(imported.report.traces, 1);
    assert!(
        imported.report.rejects[0]
            .reason
            .starts_with("truncated JSON"),
        "{:?}",
        imported.report.rejects
    );
}

#[test]
fn wrong_named_format_rejects_lines_instead_of_guessing() {
    let options = ImportOptions {
        format: Some(ImportFormat::Spmf),
        ..ImportOptions::default()
    };
    let imported = import_with(&fixture("events.jsonl"), &options).unwrap();
    assert_eq!(imported.report.traces, 0);
    assert_eq!(imported.report.rejects.len(), 7);
    assert!(imported.report.rejects[0].reason.contains("is not an item"));

    let options = ImportOptions {
        format: Some(ImportFormat::TauBench),
        ..ImportOptions::default()
    };
    let imported = import_with(&fixture("events.jsonl"), &options).unwrap();
    assert_eq!(imported.report.rejects.len(), 7);
    assert!(imported.report.rejects[0].reason.contains("missing `traj`"));
}

#[test]
fn spmf_bad_lines_and_a_missing_final_newline() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(
        dir.path(),
        "seq.txt",
        b"1 -1 2 -1 -2\n\n3 -1 x -1 -2\n\xff -1 -2\n4 -1 5 -1 -2",
    );
    let imported = import(&path);
    assert_eq!(imported.report.format, ImportFormat::Spmf);
    assert_eq!(imported.tools_of("seq:1"), ["1", "2"]);
    assert_eq!(imported.tools_of("seq:5"), ["4", "5"]);
    let lines: Vec<u64> = imported.report.rejects.iter().map(|r| r.line).collect();
    assert_eq!(lines, [3, 4]);
}

#[test]
fn byte_order_marks_and_a_missing_final_newline_are_fine() {
    let dir = tempfile::tempdir().unwrap();
    let lines = write_file(
        dir.path(),
        "bom.jsonl",
        b"\xEF\xBB\xBF{\"trace_id\": \"a\", \"tool\": \"x\"}\n{\"trace_id\": \"a\", \"tool\": \"y\"}",
    );
    let imported = import(&lines);
    assert_eq!(imported.report.format, ImportFormat::ChainweaverJsonl);
    assert_eq!(imported.tools_of("a"), ["x", "y"]);
    assert!(imported.report.rejects.is_empty());

    let array = write_file(
        dir.path(),
        "bom.json",
        b"\xEF\xBB\xBF[\n  {\"trace_id\": \"b\", \"tool\": \"x\"},\n  {\"trace_id\": \"b\", \"tool\": \"z\"}\n]\n",
    );
    let imported = import(&array);
    assert_eq!(imported.tools_of("b"), ["x", "z"]);
    assert!(imported.report.rejects.is_empty());

    // A pretty-printed single document.
    let single = write_file(
        dir.path(),
        "run.json",
        b"{\n  \"trace_id\": \"c\",\n  \"execution_log\": [\n    {\"tool_name\": \"q\"}\n  ]\n}",
    );
    let imported = import(&single);
    assert_eq!(imported.report.format, ImportFormat::ExecutionResult);
    assert_eq!(imported.tools_of("c"), ["q"]);
}

#[test]
fn interleaved_lines_group_by_trace_id_in_order_of_appearance() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(
        dir.path(),
        "interleaved.jsonl",
        br#"{"trace_id": "b", "tool": "b1", "inputs": {"n": 1}}
{"trace_id": "a", "tool": "a1"}
{"trace_id": "b", "tool_name": "b2", "outputs": {"ok": true}, "error_type": "Timeout", "error_message": "slow"}
{"tool": "loose"}
{"trace_id": "a", "tool": "a2", "step_index": 5, "session_id": "sess-a"}
{"trace_id": 7, "tool": "n1"}
"#,
    );
    let imported = import(&path);
    let ids: Vec<&str> = imported
        .traces()
        .iter()
        .map(|t| t.trace_id.as_str())
        .collect();
    assert_eq!(ids, ["b", "a", "interleaved:default", "7"]);
    assert_eq!(imported.tools_of("b"), ["b1", "b2"]);
    assert_eq!(imported.tools_of("a"), ["a1", "a2"]);
    assert_eq!(
        imported.steps_of("a")[1].metadata["source_step_index"],
        json!(5)
    );
    assert_eq!(imported.traces()[1].session_id.as_deref(), Some("sess-a"));
    let b2 = imported.steps_of("b")[1];
    assert_eq!(b2.error_type.as_deref(), Some("Timeout"));
    assert_eq!(b2.error_message.as_deref(), Some("slow"));
    assert_eq!(imported.report.failed_steps, 1);
}

// ---------------------------------------------------------------------------------------------
// The raw import path (payloads as text) against the Value path
// ---------------------------------------------------------------------------------------------

/// A `chainweaver-traces` file whose lines exercise what a copy of the payload text could get
/// wrong, and the rejects. Returns the text; the comments give the line numbers.
fn tricky_traces_file() -> String {
    let long = "0.000000000000000000000000000000000000000000000000000000000000000000000000000000000000000013016738788002335";
    let deep = format!("{}1{}", "[".repeat(110), "]".repeat(110));
    let lines = [
        // 1: compact, as `traces export` writes it.
        r#"{"trace":{"trace_id":"plain","source":"s","started_at":"2026-11-14T12:56:47Z","metadata":{"seed":1}},"steps":[{"trace_id":"plain","step_index":0,"call_id":"c0","tool_name":"calc","inputs":{"b":1.50,"a":"x"},"outputs":{"value":782},"started_at":"2026-11-14T12:56:47Z","ended_at":"2026-11-14T12:56:47.365Z","duration_ms":365.0},{"trace_id":"plain","step_index":1,"tool_name":"fail","inputs":{},"error_type":"E","error_message":"boom","metadata":{"k":[1,2]}}]}"#.to_owned(),
        // 2: whitespace everywhere, an upper-case exponent.
        r#"{ "trace" : { "trace_id" : "spaced" , "source" : "s" } , "steps" : [ { "trace_id" : "spaced" , "step_index" : 0 , "tool_name" : "t" , "inputs" : { "a" : [ 1 , 2 ] , "b" : { } , "c" : [ ] } , "outputs" : { "x" : 1E5 , "y" : 2.5e-3 } , "metadata" : { "k" : "v" } } ] }"#.to_owned(),
        // 3: escapes in payload strings and keys, in the step's own strings.
        r#"{"trace":{"trace_id":"esc","source":"s"},"steps":[{"trace_id":"esc","step_index":0,"call_id":"c\u0031","tool_name":"t\u00e9","inputs":{"\u0041":"\u00e9\/\ud83d\ude00\u0001\u001f\t\"\\"},"outputs":"line\nbreak","error_message":"said \"no\""}]}"#.to_owned(),
        // 4: number text a parse into f64 would change.
        format!(r#"{{"trace":{{"trace_id":"nums","source":"s"}},"steps":[{{"trace_id":"nums","step_index":0,"tool_name":"t","inputs":{{"z":-0,"zz":-0.0,"big":1e400,"long":{long},"int":123456789012345678901234567890}},"outputs":[1.0,10E-2]}}]}}"#),
        // 5: a repeated key in a payload: a Value keeps one, so the line goes the Value way.
        r#"{"trace":{"trace_id":"dup","source":"s"},"steps":[{"trace_id":"dup","step_index":0,"tool_name":"t","inputs":{"a":1,"b":2,"a":3}}]}"#.to_owned(),
        // 6: empty metadata written three ways, null outputs, no outputs.
        r#"{"trace":{"trace_id":"empty","source":"s"},"steps":[{"trace_id":"empty","step_index":0,"tool_name":"t","inputs":null,"outputs":null,"metadata":{}},{"trace_id":"empty","step_index":1,"tool_name":"t","inputs":[],"metadata":{ }},{"trace_id":"empty","step_index":2,"tool_name":"t","inputs":"s"}]}"#.to_owned(),
        // 7: nesting deeper than the text path takes, shallower than the Value parser's limit.
        format!(r#"{{"trace":{{"trace_id":"deep","source":"s"}},"steps":[{{"trace_id":"deep","step_index":0,"tool_name":"t","inputs":{deep}}}]}}"#),
        // 8: malformed.
        r#"{"trace":{"trace_id":"broken","source":"s"},"steps":[{"trace_id":"broken""#.to_owned(),
        // 9: a repeated top-level key: the general path keeps the last one.
        r#"{"trace":{"trace_id":"twice","source":"s"},"steps":[],"steps":[{"trace_id":"twice","step_index":0,"tool_name":"t","inputs":{}}]}"#.to_owned(),
        // 10: a wrong type.
        r#"{"trace":{"trace_id":"wrong","source":"s"},"steps":[{"trace_id":"wrong","step_index":"0","tool_name":"t","inputs":{}}]}"#.to_owned(),
        // 11: a step of another trace.
        r#"{"trace":{"trace_id":"mine","source":"s"},"steps":[{"trace_id":"other","step_index":4,"tool_name":"t","inputs":{}}]}"#.to_owned(),
        // 12: null metadata, which the model refuses.
        r#"{"trace":{"trace_id":"nullmeta","source":"s"},"steps":[{"trace_id":"nullmeta","step_index":0,"tool_name":"t","inputs":{},"metadata":null}]}"#.to_owned(),
        // 13: a lone surrogate in a payload string.
        r#"{"trace":{"trace_id":"lone","source":"s"},"steps":[{"trace_id":"lone","step_index":0,"tool_name":"t","inputs":{"s":"\ud800"}}]}"#.to_owned(),
        // 14: the id of line 1 again (renamed `plain~2`), steps numbered from the line's own.
        r#"{"trace":{"trace_id":"plain","source":""},"steps":[{"trace_id":"plain","step_index":5,"tool_name":"calc","inputs":{"n":1}},{"trace_id":"plain","step_index":9,"tool_name":"calc","inputs":{"n":2},"duration_ms":1e2}]}"#.to_owned(),
        // 15: a trace without steps.
        r#"{"trace":{"trace_id":"nosteps","source":"s","metadata":{"a":{"b":[]}}},"steps":[]}"#.to_owned(),
    ];
    lines.join("\n") + "\n"
}

fn import_raw_with(
    path: &Path,
    options: &ImportOptions,
) -> Result<(ImportReport, Vec<RawImportBatch>), RecorderError> {
    let mut batches = Vec::new();
    let report = import_path_raw(
        path,
        options,
        &mut |batch| {
            batches.push(batch);
            Ok(())
        },
        &mut |_| {},
    )?;
    Ok((report, batches))
}

/// Every row of a SQLite store as text, in storage order.
fn sqlite_rows(path: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut rows = Vec::new();
    for query in [
        "SELECT id, trace_id, session_id, source, agent, started_at, ended_at, metadata, \
         step_count, error_count, step_duration_ms FROM traces ORDER BY id",
        "SELECT s.id, t.trace_id, s.step_index, s.call_id, tools.name, s.inputs, s.outputs, \
         s.error_type, s.error_message, s.started_at, s.ended_at, s.duration_ms, s.recorded_at, \
         s.metadata, s.is_error FROM steps s JOIN traces t ON t.id = s.trace_key \
         JOIN tools ON tools.id = s.tool_id ORDER BY s.id",
    ] {
        let mut stmt = conn.prepare(query).unwrap();
        let columns = stmt.column_count();
        let mut result = stmt.query([]).unwrap();
        while let Some(row) = result.next().unwrap() {
            let cells: Vec<String> = (0..columns)
                .map(|i| format!("{:?}", row.get::<_, rusqlite::types::Value>(i).unwrap()))
                .collect();
            rows.push(cells.join(" | "));
        }
    }
    rows
}

/// The inputs text stored for the first step of `trace_id`.
fn stored_inputs(path: &Path, trace_id: &str, column: &str) -> Option<String> {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row(
        &format!(
            "SELECT s.{column} FROM steps s JOIN traces t ON t.id = s.trace_key \
             WHERE t.trace_id = ?1 ORDER BY s.step_index LIMIT 1"
        ),
        [trace_id],
        |row| row.get(0),
    )
    .unwrap()
}

#[test]
fn the_raw_path_stores_byte_identical_rows_and_the_same_rejects() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path(), "tricky.jsonl", tricky_traces_file().as_bytes());
    // Small batches, so traces cross batch boundaries both ways.
    let options = ImportOptions {
        batch_steps: 3,
        ..ImportOptions::default()
    };
    let values = import_with(&path, &options).unwrap();
    let (raw_report, raw_batches) = import_raw_with(&path, &options).unwrap();
    assert_eq!(raw_report, values.report, "same counts and rejects");
    assert_eq!(raw_batches.len(), values.batches.len());

    // The rejects, as `file:line: reason`.
    let rejected: Vec<u64> = raw_report.rejects.iter().map(|r| r.line).collect();
    assert_eq!(rejected, [8, 10, 11, 12, 13], "{:#?}", raw_report.rejects);
    assert!(
        raw_report.rejects[2]
            .reason
            .contains("step 4 belongs to trace `other`, not `mine`")
    );
    for reject in &raw_report.rejects {
        assert!(
            reject
                .to_string()
                .starts_with(&format!("{}:{}: ", path.display(), reject.line))
        );
    }
    assert_eq!(raw_report.traces, 10);
    assert_eq!(raw_report.failed_steps, 2);

    // The same data model either way.
    for (raw, value) in raw_batches.iter().zip(&values.batches) {
        assert_eq!(raw.traces, value.traces);
        assert_eq!(raw.steps.to_steps().unwrap(), value.steps);
    }

    // The same bytes in SQLite: `append` of the Value batches, `append_raw` of the raw ones.
    let by_value = dir.path().join("value.db");
    let by_text = dir.path().join("raw.db");
    let mut store = SqliteStore::open(&by_value).unwrap();
    for batch in &values.batches {
        store.append(&batch.traces, &batch.steps).unwrap();
    }
    let mut store = SqliteStore::open(&by_text).unwrap();
    for batch in &raw_batches {
        store.append_raw(&batch.traces, &batch.steps).unwrap();
    }
    let expected = sqlite_rows(&by_value);
    assert_eq!(expected.len(), 10 + 13);
    assert_eq!(sqlite_rows(&by_text), expected);

    // And what those bytes are: compact, escapes as serde_json writes them, number text kept.
    let inputs = |trace: &str| stored_inputs(&by_text, trace, "inputs").unwrap();
    assert_eq!(inputs("plain"), r#"{"b":1.50,"a":"x"}"#);
    assert_eq!(inputs("spaced"), r#"{"a":[1,2],"b":{},"c":[]}"#);
    assert_eq!(
        stored_inputs(&by_text, "spaced", "outputs").unwrap(),
        r#"{"x":1e+5,"y":2.5e-3}"#
    );
    assert_eq!(
        stored_inputs(&by_text, "spaced", "metadata").unwrap(),
        r#"{"k":"v"}"#
    );
    assert_eq!(inputs("esc"), "{\"A\":\"é/😀\\u0001\\u001f\\t\\\"\\\\\"}");
    assert_eq!(
        stored_inputs(&by_text, "esc", "outputs").unwrap(),
        r#""line\nbreak""#
    );
    assert!(inputs("nums").starts_with(r#"{"z":-0,"zz":-0.0,"big":1e+400,"long":0.0000"#));
    assert!(inputs("nums").ends_with(r#"2335,"int":123456789012345678901234567890}"#));
    assert_eq!(inputs("dup"), r#"{"a":3,"b":2}"#);
    assert_eq!(inputs("empty"), "null");
    assert_eq!(stored_inputs(&by_text, "empty", "metadata").unwrap(), "{}");
    assert_eq!(stored_inputs(&by_text, "empty", "outputs"), None);
    assert_eq!(inputs("twice"), "{}");
    assert_eq!(inputs("plain~2"), r#"{"n":1}"#);
}

#[test]
fn the_raw_path_stores_the_same_parquet_columns() {
    use arrow::array::{Array, StringArray, UInt32Array};
    use chainweaver_recorder::store::ParquetStore;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    /// (trace id, step index, call id, tool, inputs, outputs, error type, message, metadata) of
    /// every step row in the dataset, sorted.
    fn step_rows(root: &Path) -> Vec<Vec<Option<String>>> {
        let mut rows = Vec::new();
        let mut dirs = vec![root.join("steps")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                let reader =
                    ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap())
                        .unwrap()
                        .build()
                        .unwrap();
                for batch in reader {
                    let batch = batch.unwrap();
                    let text = |name: &str, i: usize| {
                        let column = batch
                            .column_by_name(name)
                            .unwrap()
                            .as_any()
                            .downcast_ref::<StringArray>()
                            .unwrap();
                        (!column.is_null(i)).then(|| column.value(i).to_owned())
                    };
                    let index = batch
                        .column_by_name("step_index")
                        .unwrap()
                        .as_any()
                        .downcast_ref::<UInt32Array>()
                        .unwrap();
                    for i in 0..batch.num_rows() {
                        let mut row = vec![text("trace_id", i), Some(index.value(i).to_string())];
                        for name in [
                            "call_id",
                            "tool_name",
                            "inputs",
                            "outputs",
                            "error_type",
                            "error_message",
                            "metadata",
                        ] {
                            row.push(text(name, i));
                        }
                        rows.push(row);
                    }
                }
            }
        }
        rows.sort();
        rows
    }

    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path(), "tricky.jsonl", tricky_traces_file().as_bytes());
    let values = import(&path);
    let (_, raw_batches) = import_raw_with(&path, &ImportOptions::default()).unwrap();
    let mut by_value = ParquetStore::open(&dir.path().join("value.parquet")).unwrap();
    for batch in &values.batches {
        by_value.append(&batch.traces, &batch.steps).unwrap();
    }
    let mut by_text = ParquetStore::open(&dir.path().join("raw.parquet")).unwrap();
    for batch in &raw_batches {
        by_text.append_raw(&batch.traces, &batch.steps).unwrap();
    }
    let expected = step_rows(&dir.path().join("value.parquet"));
    assert_eq!(expected.len(), 13);
    assert_eq!(step_rows(&dir.path().join("raw.parquet")), expected);
    let spaced = expected
        .iter()
        .find(|row| row[0].as_deref() == Some("spaced"))
        .unwrap();
    assert_eq!(spaced[4].as_deref(), Some(r#"{"a":[1,2],"b":{},"c":[]}"#));
}

#[test]
fn other_formats_go_the_raw_way_with_the_same_result() {
    let path = fixture("events.jsonl");
    let values = import(&path);
    assert_eq!(values.report.format, ImportFormat::ChainweaverEvents);
    let (report, batches) = import_raw_with(&path, &ImportOptions::default()).unwrap();
    assert_eq!(report, values.report);
    let steps: Vec<ObservedStep> = batches
        .iter()
        .flat_map(|b| b.steps.to_steps().unwrap())
        .collect();
    let expected: Vec<ObservedStep> = values.steps().into_iter().cloned().collect();
    assert!(!expected.is_empty());
    assert_eq!(steps, expected);
}
