//! The real agent logs in `../shared/datasets/agent-logs/`: every file imports by detection
//! alone, and per folder the traces, calls and failures equal the counts its README gives
//! (made by independent scripts). Where a README count and the importer's rule differ on what a
//! call is, the test says which the importer follows and why. Pairing is checked against the
//! files themselves: each test reads the raw JSON here and looks up every imported call's own
//! result by its id.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use chainweaver_recorder::import::{ImportFormat, ImportOptions, ImportReport, import_path};
use chainweaver_recorder::model::{ObservedStep, ObservedTrace};
use serde_json::Value;

use super::shared_datasets;

/// What importing one folder gave.
#[derive(Default)]
pub struct Folder {
    pub reports: Vec<ImportReport>,
    pub traces: Vec<ObservedTrace>,
    pub steps: Vec<ObservedStep>,
}

impl Folder {
    fn sum(&self, field: impl Fn(&ImportReport) -> u64) -> u64 {
        self.reports.iter().map(field).sum()
    }

    fn steps_of(&self, trace_id: &str) -> Vec<&ObservedStep> {
        self.steps
            .iter()
            .filter(|s| s.trace_id == trace_id)
            .collect()
    }
}

/// The agent-logs folder, when the shared datasets are there.
pub fn agent_logs() -> Option<PathBuf> {
    shared_datasets().map(|d| d.join("agent-logs"))
}

/// The log files of a folder (its licence files are not logs).
pub fn log_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("json" | "jsonl" | "traj")
            )
        })
        .collect();
    files.sort();
    files
}

/// Imports every log file of `agent-logs/<name>` by detection, asserting each is `format`.
fn import_folder(name: &str, format: ImportFormat) -> Option<Folder> {
    let dir = agent_logs()?.join(name);
    let mut folder = Folder::default();
    let files = log_files(&dir);
    assert!(!files.is_empty(), "no logs in {}", dir.display());
    for file in files {
        let report = import_path(
            &file,
            &ImportOptions::default(),
            &mut |batch| {
                folder.traces.extend(batch.traces);
                folder.steps.extend(batch.steps);
                Ok(())
            },
            &mut |_| {},
        )
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert_eq!(report.format, format, "{} detected as", file.display());
        assert!(
            report.rejects.is_empty(),
            "{}: {:?}",
            file.display(),
            report.rejects
        );
        folder.reports.push(report);
    }
    Some(folder)
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn read_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Text of a message content: a string, or the text of its text parts.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.as_str().or_else(|| p.get("text").and_then(Value::as_str)))
            .collect(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// What a step holds of its result, as text: the output (as JSON text unless it is a
/// string) or the error message.
fn result_text(step: &ObservedStep) -> Option<String> {
    if let Some(message) = &step.error_message {
        return Some(message.clone());
    }
    match step.outputs.as_ref()? {
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// Asserts the step's result is `expected` (text as in the file): the same text, or the same
/// JSON once both are parsed.
fn assert_same_result(step: &ObservedStep, expected: &str) {
    let got = result_text(step).unwrap_or_else(|| panic!("{} has no result", step.tool_name));
    let same = got == expected
        || matches!(
            (serde_json::from_str::<Value>(&got), serde_json::from_str::<Value>(expected)),
            (Ok(a), Ok(b)) if a == b
        );
    assert!(
        same,
        "call {:?} ({}) has another call's result:\n got {got:.200}\nwant {expected:.200}",
        step.call_id, step.tool_name
    );
}

#[test]
fn claude_code_sessions_match_the_readme_and_pair_by_tool_use_id() {
    let Some(folder) = import_folder("claude-code", ImportFormat::ClaudeCode) else {
        return;
    };
    // README: 6 sessions, 449 tool_use, 449 tool_result (27 is_error).
    assert_eq!(folder.sum(|r| r.traces), 6);
    assert_eq!(folder.sum(|r| r.steps), 449);
    assert_eq!(folder.sum(|r| r.failed_steps), 27);
    assert_eq!(folder.sum(|r| r.calls_without_result), 0);

    // Each call's result, straight from the files, by tool_use_id.
    let mut results: HashMap<String, (String, bool)> = HashMap::new();
    for file in log_files(&agent_logs().unwrap().join("claude-code")) {
        for entry in read_lines(&file) {
            let blocks = entry
                .pointer("/message/content")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for block in blocks {
                if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                    let id = block["tool_use_id"].as_str().unwrap().to_owned();
                    let failed = block.get("is_error") == Some(&Value::Bool(true));
                    results.insert(id, (text_of(&block["content"]), failed));
                }
            }
        }
    }
    for step in &folder.steps {
        let id = step.call_id.as_deref().expect("every tool_use has an id");
        let (text, failed) = &results[id];
        assert_eq!(step.is_error(), *failed, "{id}");
        assert_same_result(step, text);
        // Timestamps: the call's entry starts it, the result's entry ends it.
        let (started, ended) = (step.started_at.unwrap(), step.ended_at.unwrap());
        assert!(ended >= started, "{id}");
        assert!(step.duration_ms.is_some(), "{id}");
    }

    // The subagent session is its own trace, linked to its parent both ways.
    let parent = "4d5611e5-241a-462a-8d15-5122611a9569";
    let child = format!("{parent}/agent-a2898e3");
    let sub = folder
        .traces
        .iter()
        .find(|t| t.trace_id == child)
        .expect("the subagent trace");
    assert_eq!(sub.metadata["parent_trace_id"], Value::from(parent));
    assert_eq!(folder.steps_of(&child).len(), 33);
    let starter = folder
        .steps_of(parent)
        .into_iter()
        .filter(|s| s.metadata.get("subagent_trace_id") == Some(&Value::from(child.as_str())))
        .count();
    assert_eq!(starter, 1, "one call in the parent started the subagent");
}

#[test]
fn codex_rollouts_match_the_readme_and_pair_by_call_id() {
    let Some(folder) = import_folder("codex-cli", ImportFormat::CodexRollout) else {
        return;
    };
    // README: 5 rollouts, 740 calls, 730 outputs. The 10 calls without an output are the 8
    // web searches (whose results go to the model, not the log) and 2 calls cut off by the end
    // of their session.
    assert_eq!(folder.sum(|r| r.traces), 5);
    assert_eq!(folder.sum(|r| r.steps), 740);
    assert_eq!(folder.sum(|r| r.calls_without_result), 10);
    let searches = folder
        .steps
        .iter()
        .filter(|s| s.tool_name == "web_search")
        .count();
    assert_eq!(searches, 8);

    let mut outputs: HashMap<String, String> = HashMap::new();
    for file in log_files(&agent_logs().unwrap().join("codex-cli")) {
        for line in read_lines(&file) {
            let payload = &line["payload"];
            let kind = payload["type"].as_str().unwrap_or("");
            if kind.ends_with("_call_output") {
                outputs.insert(
                    payload["call_id"].as_str().unwrap().to_owned(),
                    text_of(&payload["output"]),
                );
            }
        }
    }
    let mut paired = 0;
    for step in folder.steps.iter().filter(|s| s.tool_name != "web_search") {
        let id = step.call_id.as_deref().expect("calls have a call_id");
        match outputs.get(id) {
            Some(text) => {
                assert_same_result(step, text);
                paired += 1;
            }
            None => assert_eq!(
                step.metadata.get("result_missing"),
                Some(&Value::Bool(true))
            ),
        }
        assert!(step.started_at.is_some(), "{id}");
    }
    assert_eq!(paired, 730);
}

#[test]
fn tau2_simulations_match_the_readme_and_pair_by_id() {
    let Some(folder) = import_folder("tau2-bench", ImportFormat::Tau2Bench) else {
        return;
    };
    // README: 8 simulations, 49 calls, 49 results (1 `error: true`).
    assert_eq!(folder.sum(|r| r.traces), 8);
    assert_eq!(folder.sum(|r| r.steps), 49);
    assert_eq!(folder.sum(|r| r.failed_steps), 1);
    assert_eq!(folder.sum(|r| r.calls_without_result), 0);
    let mut results: HashMap<String, (String, bool)> = HashMap::new();
    for file in log_files(&agent_logs().unwrap().join("tau2-bench")) {
        for simulation in read_json(&file)["simulations"].as_array().unwrap() {
            for message in simulation["messages"].as_array().unwrap() {
                if message["role"] == "tool" {
                    results.insert(
                        message["id"].as_str().unwrap().to_owned(),
                        (
                            text_of(&message["content"]),
                            message["error"] == Value::Bool(true),
                        ),
                    );
                }
            }
        }
    }
    for step in &folder.steps {
        let (text, failed) = &results[step.call_id.as_deref().unwrap()];
        assert_eq!(step.is_error(), *failed);
        assert_same_result(step, text);
        assert!(
            step.duration_ms.is_some(),
            "per-message timestamps time the calls"
        );
    }
    for trace in &folder.traces {
        assert!(trace.started_at.is_some() && trace.metadata.contains_key("reward"));
    }
}

#[test]
fn toolbench_answers_match_the_readme_and_finish_is_marked() {
    let Some(folder) = import_folder("toolbench", ImportFormat::Toolbench) else {
        return;
    };
    // README: 15 queries (13 with train_messages), 50 calls in the final conversations. The
    // 50 include the 13 `Finish` pseudo-calls; the importer keeps them, marked, so the steps
    // are every call the model made.
    assert_eq!(folder.sum(|r| r.traces), 15);
    assert_eq!(folder.sum(|r| r.traces_without_calls), 2);
    assert_eq!(folder.sum(|r| r.steps), 50);
    let finishes: Vec<_> = folder
        .steps
        .iter()
        .filter(|s| s.tool_name == "Finish")
        .collect();
    assert_eq!(finishes.len(), 13);
    assert!(
        finishes
            .iter()
            .all(|s| s.metadata.get("pseudo_tool") == Some(&Value::Bool(true)))
    );
    assert_eq!(folder.sum(|r| r.calls_without_result), 0);

    // Failures: a tool answer whose JSON has a non-empty `error`, counted from the files.
    let mut failed = 0;
    for file in log_files(&agent_logs().unwrap().join("toolbench")) {
        let document = read_json(&file);
        let Some(last) = document
            .pointer("/answer_generation/train_messages")
            .and_then(Value::as_array)
            .and_then(|c| c.last())
        else {
            continue;
        };
        for message in last.as_array().unwrap() {
            if message["role"] == "function" {
                let answer: Value =
                    serde_json::from_str(message["content"].as_str().unwrap()).unwrap_or_default();
                if answer
                    .get("error")
                    .and_then(Value::as_str)
                    .is_some_and(|e| !e.is_empty())
                {
                    failed += 1;
                }
            }
        }
    }
    assert!(failed > 0, "the sample has failing tools");
    assert_eq!(folder.sum(|r| r.failed_steps), failed);
}

#[test]
fn swe_agent_trajectories_match_the_readme() {
    let Some(folder) = import_folder("swe-agent", ImportFormat::SweAgent) else {
        return;
    };
    // README: 22 trajectories, 227 actions, 44 structured calls. A trajectory whose history
    // has structured calls is imported from those (they carry the tools' own names and
    // arguments, and their results by id); the others from their text actions. The 5
    // structured files hold 40 of the 227 actions (one has no `trajectory` at all, one logs a
    // final `submit` outside its calls), so the steps are 227 - 40 + 44 = 231.
    assert_eq!(folder.sum(|r| r.traces), 22);
    let by_kind = |kind: &str| {
        let traces: Vec<&str> = folder
            .traces
            .iter()
            .filter(|t| t.metadata["actions"] == kind)
            .map(|t| t.trace_id.as_str())
            .collect();
        let steps = folder
            .steps
            .iter()
            .filter(|s| traces.contains(&s.trace_id.as_str()))
            .count();
        (traces.len(), steps)
    };
    assert_eq!(by_kind("tool_calls"), (5, 44));
    assert_eq!(by_kind("text"), (17, 227 - 40));
    assert_eq!(folder.sum(|r| r.steps), 231);

    // Structured calls pair with the tool message that lists their id.
    let file = agent_logs()
        .unwrap()
        .join("swe-agent/function_calling_simple.traj");
    let history = read_json(&file)["history"].as_array().unwrap().clone();
    let steps = folder.steps_of("function_calling_simple");
    assert_eq!(steps.len(), 5);
    for step in steps {
        let id = step.call_id.as_deref().unwrap();
        let answer = history
            .iter()
            .find(|m| {
                m["role"] == "tool"
                    && m["tool_call_ids"].as_array().unwrap()[0].as_str() == Some(id)
            })
            .unwrap();
        assert_same_result(step, &text_of(&answer["content"]));
    }
    // Text actions are named by their command.
    let warmup: Vec<String> = folder
        .steps_of("ctf__pwn__warmup")
        .iter()
        .map(|s| s.tool_name.clone())
        .collect();
    assert_eq!(
        warmup,
        [
            "disassemble",
            "disassemble",
            "create",
            "edit",
            "edit",
            "python",
            "submit"
        ]
    );
}

#[test]
fn mini_swe_agent_logs_match_the_readme() {
    let Some(folder) = import_folder("mini-swe-agent", ImportFormat::MiniSweAgent) else {
        return;
    };
    // README: 2 logs, 12 actions.
    assert_eq!(folder.sum(|r| r.traces), 2);
    assert_eq!(folder.sum(|r| r.steps), 12);
    assert!(folder.steps.iter().all(|s| s.tool_name == "bash"));
    // github_issue: the first `cat` and the division by zero exit with 1.
    let failed: Vec<&str> = folder
        .steps_of("github_issue")
        .iter()
        .filter(|s| s.is_error())
        .map(|s| s.inputs["command"].as_str().unwrap())
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(failed[0].starts_with("cat "));
    let local = folder.steps_of("local");
    assert_eq!(local[0].outputs, Some(Value::from("hello world")));
}

#[test]
fn openhands_streams_match_the_readme_and_pair_by_cause() {
    let Some(folder) = import_folder("openhands", ImportFormat::Openhands) else {
        return;
    };
    // README: 4 streams, 11 actions, 8 observations; the 3 unanswered actions are `finish`.
    assert_eq!(folder.sum(|r| r.traces), 4);
    assert_eq!(folder.sum(|r| r.steps), 11);
    assert_eq!(folder.sum(|r| r.calls_without_result), 3);
    let unanswered: Vec<&str> = folder
        .steps
        .iter()
        .filter(|s| s.metadata.contains_key("result_missing"))
        .map(|s| s.tool_name.as_str())
        .collect();
    assert_eq!(unanswered, ["finish"; 3]);
    for file in log_files(&agent_logs().unwrap().join("openhands")) {
        let events = read_json(&file);
        let events = events.as_array().unwrap();
        for observation in events.iter().filter(|e| e.get("cause").is_some()) {
            let Some(call_id) = observation.pointer("/tool_call_metadata/tool_call_id") else {
                continue;
            };
            let cause = &observation["cause"];
            let action = events.iter().find(|e| &e["id"] == cause).unwrap();
            assert_eq!(
                action.pointer("/tool_call_metadata/tool_call_id"),
                Some(call_id)
            );
            let step = folder
                .steps
                .iter()
                .find(|s| s.call_id.as_deref() == call_id.as_str())
                .unwrap();
            assert_same_result(step, observation["content"].as_str().unwrap());
        }
    }
}
