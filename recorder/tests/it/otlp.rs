//! OTLP trace exports from the official OpenTelemetry Python SDK, read as tool calls.

use std::path::{Path, PathBuf};
use std::process::Command;

use chainweaver_recorder::capture::{RecorderConfig, TraceRecorder};
use chainweaver_recorder::import::{ImportBatch, RejectUnit};
use chainweaver_recorder::model::{ObservedStep, ObservedTrace, otel};
use chainweaver_recorder::otlp::{FileEncoding, ReadOptions, read_file};
use chainweaver_recorder::store::{SqliteStore, TraceStore};
use serde_json::{Value, json};

/// `python3` with the OpenTelemetry SDK and its OTLP exporter, or `None` (skip) on a machine
/// without them; under CI (`CI` set) missing packages fail the test.
#[allow(clippy::print_stderr)]
pub fn python_with_opentelemetry() -> Option<&'static str> {
    let found = Command::new("python3")
        .args([
            "-c",
            "import opentelemetry.sdk, opentelemetry.exporter.otlp.proto.http",
        ])
        .output()
        .is_ok_and(|out| out.status.success());
    if found {
        return Some("python3");
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but python3 lacks opentelemetry-sdk / opentelemetry-exporter-otlp-proto-http \
         (pip install -r .ci/requirements.txt)"
    );
    eprintln!("skipping: python3 has no OpenTelemetry SDK");
    None
}

fn agent_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/otel_agent.py")
}

/// Runs the instrumented agent with `args`; returns its summary of what it did.
pub fn run_agent(python: &str, args: &[&str]) -> Value {
    let out = Command::new(python)
        .arg(agent_script())
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "the agent failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the agent prints its summary")
}

fn read_all(
    path: &Path,
) -> (
    Vec<ObservedTrace>,
    Vec<ObservedStep>,
    chainweaver_recorder::otlp::OtlpReport,
) {
    let mut batches: Vec<ImportBatch> = Vec::new();
    let report = read_file(path, &ReadOptions::default(), &mut |batch| {
        batches.push(batch);
        Ok(())
    })
    .expect("the export reads");
    let traces = batches.iter().flat_map(|b| b.traces.clone()).collect();
    let steps = batches.into_iter().flat_map(|b| b.steps).collect();
    (traces, steps, report)
}

/// The stored traces hold exactly the calls the agent says it made, in its order.
fn assert_matches_summary(traces: &[ObservedTrace], steps: &[ObservedStep], summary: &Value) {
    let conversations = summary["conversations"].as_object().expect("conversations");
    assert_eq!(traces.len(), conversations.len());
    for (conversation, calls) in conversations {
        let trace = traces
            .iter()
            .find(|t| t.trace_id == *conversation)
            .unwrap_or_else(|| panic!("no trace for {conversation}"));
        assert_eq!(trace.session_id.as_deref(), Some(conversation.as_str()));
        assert_eq!(trace.agent.as_deref(), Some("refund-agent"));
        let mine: Vec<&ObservedStep> = steps
            .iter()
            .filter(|s| s.trace_id == *conversation)
            .collect();
        let calls = calls.as_array().expect("calls");
        assert_eq!(mine.len(), calls.len(), "{conversation}");
        for (index, (step, call)) in mine.iter().zip(calls).enumerate() {
            assert_eq!(step.step_index as usize, index);
            assert_eq!(step.tool_name, call["tool"].as_str().expect("tool"));
            assert_eq!(step.call_id.as_deref(), call["call_id"].as_str());
            assert_eq!(
                !step.is_error(),
                call["ok"].as_bool().expect("ok"),
                "{conversation} {index}"
            );
            assert!(
                step.inputs.is_object(),
                "arguments are parsed: {:?}",
                step.inputs
            );
            assert!(step.duration_ms.is_some_and(|d| d >= 0.0));
            assert!(step.metadata.contains_key(otel::SPAN_ID));
            if step.is_error() {
                assert_eq!(step.error_type.as_deref(), Some("ValueError"));
                let message = step.error_message.as_deref().unwrap_or_default();
                assert!(message.contains("past the refund window"), "{message}");
                assert_eq!(step.outputs, None);
            } else {
                assert!(
                    step.outputs.is_some(),
                    "{conversation} {index} has a result"
                );
            }
        }
        let starts: Vec<_> = mine.iter().map(|s| s.started_at).collect();
        assert!(
            starts.windows(2).all(|w| w[0] <= w[1]),
            "ordered by start time"
        );
    }
    let failed = steps.iter().filter(|s| s.is_error()).count() as u64;
    assert_eq!(failed, summary["failed"].as_u64().expect("failed"));
}

#[test]
fn a_json_lines_export_from_the_python_sdk_reads_as_the_agent_ran() {
    let Some(python) = python_with_opentelemetry() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("spans.jsonl");
    let summary = run_agent(python, &["--json", file.to_str().unwrap()]);
    let (traces, steps, report) = read_all(&file);
    assert_eq!(report.encoding, FileEncoding::JsonLines);
    assert!(report.rejects.is_empty(), "{:?}", report.rejects);
    // Each conversation has an agent span, a chat span and its tool spans; only tools are read.
    let calls = summary["calls"].as_u64().unwrap();
    let conversations = summary["conversations"].as_object().unwrap().len() as u64;
    assert_eq!(report.spans, calls + 2 * conversations);
    assert_eq!(report.tool_spans, calls);
    assert_eq!(report.steps, calls);
    assert_matches_summary(&traces, &steps, &summary);
    // A GenAI result and an OpenInference result are both parsed JSON.
    let lookup = steps
        .iter()
        .find(|s| s.call_id.as_deref() == Some("conv-0-call-0"))
        .unwrap();
    assert_eq!(lookup.inputs, json!({"user_id": 7}));
    assert_eq!(lookup.outputs, Some(json!({"name": "Ann", "tier": "gold"})));
    let last = format!("conv-{}-call-1", conversations - 1);
    let openinference = steps
        .iter()
        .find(|s| s.call_id.as_deref() == Some(&last))
        .unwrap();
    assert!(openinference.outputs.as_ref().is_some_and(Value::is_array));
}

#[test]
fn a_protobuf_export_from_the_python_sdk_reads_the_same() {
    let Some(python) = python_with_opentelemetry() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("spans.pb");
    let summary = run_agent(python, &["--protobuf", file.to_str().unwrap()]);
    let (traces, steps, report) = read_all(&file);
    assert_eq!(report.encoding, FileEncoding::ProtobufFramed);
    assert!(report.rejects.is_empty(), "{:?}", report.rejects);
    assert_matches_summary(&traces, &steps, &summary);
}

#[test]
fn a_broken_line_and_a_cut_off_end_are_rejected_by_line_and_the_rest_is_read() {
    let Some(python) = python_with_opentelemetry() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("spans.jsonl");
    let summary = run_agent(python, &["--json", file.to_str().unwrap()]);
    let text = std::fs::read_to_string(&file).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(2, "{\"resourceSpans\": [oops]}");
    let whole = lines.join("\n");
    // A writer killed mid-line leaves the start of a document behind.
    let cut = format!("{whole}\n{}", &lines[3][..lines[3].len() / 2]);
    std::fs::write(&file, cut).unwrap();

    let (traces, steps, report) = read_all(&file);
    assert_eq!(report.rejects.len(), 2, "{:?}", report.rejects);
    assert_eq!(report.rejects[0].line, 3);
    assert_eq!(report.rejects[0].unit, RejectUnit::Line);
    assert_eq!(report.rejects[1].line, lines.len() as u64 + 1);
    assert!(report.rejects[0].to_string().contains("spans.jsonl:3"));
    assert_matches_summary(&traces, &steps, &summary);
}

#[test]
fn submitted_rows_are_acknowledged_once_committed_and_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chainweaver.db");
    let recorder = TraceRecorder::new(
        Box::new(SqliteStore::open(&path).unwrap()),
        RecorderConfig::default(),
    )
    .unwrap();
    let trace = ObservedTrace::new("conv-9", "collect:otlp");
    let mut step = ObservedStep::new(
        "conv-9",
        0,
        "send_mail",
        json!({"to": "a@example.com", "api_key": "sk-live-0123456789abcdef0123"}),
    );
    step.outputs = Some(json!({"ok": true}));
    let (tell, told) = std::sync::mpsc::channel();
    recorder
        .submit(vec![trace], vec![step], move |outcome| {
            let _ = tell.send(outcome.is_ok());
        })
        .unwrap();
    assert!(told.recv().unwrap(), "the commit is acknowledged");
    // Acknowledged means committed: a second connection sees the row at once.
    let stored = SqliteStore::open(&path)
        .unwrap()
        .get_trace("conv-9")
        .unwrap()
        .unwrap();
    assert_eq!(stored.steps.len(), 1);
    assert_eq!(stored.steps[0].inputs["api_key"], "[REDACTED]");
    let bytes = std::fs::read(&path).unwrap();
    let wal = std::fs::read(dir.path().join("chainweaver.db-wal")).unwrap_or_default();
    let needle = b"sk-live-0123456789abcdef0123";
    assert!(!bytes.windows(needle.len()).any(|w| w == needle));
    assert!(!wal.windows(needle.len()).any(|w| w == needle));
}

/// Submitted rows have a caller waiting for their commit, so the writer does not hold them for
/// the batch delay (here 30 days, which no test would outlive) once nothing else is queued.
#[test]
fn submitted_rows_are_committed_without_waiting_out_the_batch_delay() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = TraceRecorder::new(
        Box::new(SqliteStore::open(&dir.path().join("chainweaver.db")).unwrap()),
        RecorderConfig {
            batch_size: 1_000_000,
            max_batch_delay: std::time::Duration::from_secs(30 * 24 * 3600),
            ..RecorderConfig::default()
        },
    )
    .unwrap();
    for round in 0..3 {
        let id = format!("conv-{round}");
        let trace = ObservedTrace::new(id.as_str(), "collect:otlp");
        let step = ObservedStep::new(id.as_str(), 0, "lookup", json!({"round": round}));
        let (tell, told) = std::sync::mpsc::channel();
        recorder
            .submit(vec![trace], vec![step], move |outcome| {
                let _ = tell.send(outcome.is_ok());
            })
            .unwrap();
        let acknowledged = told.recv_timeout(std::time::Duration::from_secs(120));
        assert_eq!(acknowledged, Ok(true), "round {round} is committed");
    }
    assert_eq!(recorder.stats().steps_committed, 3);
}
