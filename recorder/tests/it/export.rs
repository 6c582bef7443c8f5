//! XES and OCEL 2.0 event logs, opened by PM4Py.

use std::collections::BTreeMap;
use std::process::Command;

use chainweaver_recorder::export::{LogFormat, LogWriter};
use chainweaver_recorder::model::TraceWithSteps;
use chainweaver_recorder::otlp::{ReadOptions, read_file};
use serde_json::Value;

use crate::otlp::{python_with_opentelemetry, run_agent};

/// `python3` with PM4Py, or `None` (skip) without it; under CI (`CI` set) it must be there.
#[allow(clippy::print_stderr)]
fn python_with_pm4py() -> Option<&'static str> {
    let found = Command::new("python3")
        .args(["-c", "import pm4py"])
        .output()
        .is_ok_and(|out| out.status.success());
    if found {
        return Some("python3");
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but python3 lacks pm4py (pip install -r .ci/requirements.txt)"
    );
    eprintln!("skipping: python3 has no pm4py");
    None
}

/// Reads a log with PM4Py and prints, per case, its activities in order and how many failed.
const READ_WITH_PM4PY: &str = r#"
import json, sys
import pm4py
kind, path = sys.argv[1], sys.argv[2]
cases = {}
if kind == "xes":
    frame = pm4py.read_xes(path)
    for _, row in frame.iterrows():
        case = cases.setdefault(row["case:concept:name"], {"activities": [], "failed": 0})
        case["activities"].append(row["concept:name"])
        case["failed"] += 1 if row["chainweaver:error"] else 0
else:
    ocel = pm4py.read_ocel2_json(path)
    events = ocel.events.sort_values(ocel.event_timestamp, kind="stable")
    failed = dict(zip(events[ocel.event_id_column], events.get("error", [False] * len(events))))
    relations = ocel.relations.merge(events[[ocel.event_id_column]], on=ocel.event_id_column)
    order = {e: i for i, e in enumerate(events[ocel.event_id_column])}
    relations = relations.assign(order=relations[ocel.event_id_column].map(order)).sort_values("order")
    for _, row in relations.iterrows():
        case = cases.setdefault(row[ocel.object_id_column], {"activities": [], "failed": 0})
        case["activities"].append(row[ocel.event_activity])
        case["failed"] += 1 if failed.get(row[ocel.event_id_column]) in (True, "True", "true") else 0
json.dump(cases, sys.stdout)
"#;

fn traces_from_the_agent() -> Option<(Vec<TraceWithSteps>, tempfile::TempDir)> {
    let python = python_with_opentelemetry()?;
    python_with_pm4py()?;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("spans.jsonl");
    run_agent(
        python,
        &["--json", file.to_str().unwrap(), "--conversations", "5"],
    );
    let mut traces = Vec::new();
    read_file(&file, &ReadOptions::default(), &mut |batch| {
        for trace in batch.traces {
            let steps = batch
                .steps
                .iter()
                .filter(|s| s.trace_id == trace.trace_id)
                .cloned()
                .collect();
            traces.push(TraceWithSteps { trace, steps });
        }
        Ok(())
    })
    .unwrap();
    Some((traces, dir))
}

fn expected(traces: &[TraceWithSteps]) -> BTreeMap<String, (Vec<String>, u64)> {
    traces
        .iter()
        .map(|t| {
            let tools = t.steps.iter().map(|s| s.tool_name.clone()).collect();
            let failed = t.steps.iter().filter(|s| s.is_error()).count() as u64;
            (t.trace.trace_id.clone(), (tools, failed))
        })
        .collect()
}

fn read_back(kind: &str, path: &std::path::Path) -> BTreeMap<String, (Vec<String>, u64)> {
    let out = Command::new("python3")
        .args(["-c", READ_WITH_PM4PY, kind])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pm4py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cases: BTreeMap<String, Value> = serde_json::from_slice(&out.stdout).unwrap();
    cases
        .into_iter()
        .map(|(id, case)| {
            let tools = case["activities"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_owned())
                .collect();
            (id, (tools, case["failed"].as_u64().unwrap()))
        })
        .collect()
}

fn export(traces: &[TraceWithSteps], format: LogFormat, path: &std::path::Path) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut writer = LogWriter::new(format, file, path).unwrap();
    for trace in traces {
        writer.write_trace(trace).unwrap();
    }
    writer.finish().unwrap();
}

#[test]
fn pm4py_reads_the_xes_export_as_the_same_cases_and_events() {
    let Some((traces, dir)) = traces_from_the_agent() else {
        return;
    };
    let path = dir.path().join("log.xes");
    export(&traces, LogFormat::Xes, &path);
    let wanted = expected(&traces);
    assert_eq!(wanted.len(), 5);
    assert!(wanted.values().any(|(_, failed)| *failed > 0));
    assert_eq!(read_back("xes", &path), wanted);
}

#[test]
fn pm4py_reads_the_ocel_export_as_the_same_cases_and_events() {
    let Some((traces, dir)) = traces_from_the_agent() else {
        return;
    };
    let path = dir.path().join("log.jsonocel");
    export(&traces, LogFormat::Ocel, &path);
    assert_eq!(read_back("ocel", &path), expected(&traces));
}
