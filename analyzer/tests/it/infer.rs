//! Binding inference and candidates on the shared real traces.
//!
//! The readers below are deliberately minimal stand-ins for the real importers: just enough of
//! the chainweaver JSONL and tau-bench result formats to build traces. Tool calls whose
//! arguments are not JSON (Python dict literals in some tau-bench files) are skipped.

// Test code: a panic on unreadable test data is the right failure.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::Path;

use chainweaver_analyzer::candidate::{CandidateConfig, build_candidate};
use chainweaver_analyzer::infer::{InferConfig, infer_bindings};
use chainweaver_recorder::model::candidate::{
    Binding, BindingSource, Occurrence, Pattern, Selection,
};
use chainweaver_recorder::model::flow::FlowDefinition;
use chainweaver_recorder::model::{ObservedStep, ObservedTrace, TraceWithSteps};
use serde_json::Value;

use crate::shared_datasets;

/// Every contiguous occurrence of `tools` (a test helper, not a miner).
fn contiguous(traces: &[TraceWithSteps], tools: &[&str]) -> Pattern {
    let mut occurrences = Vec::new();
    for (t, trace) in traces.iter().enumerate() {
        for start in 0..trace.steps.len() {
            if start + tools.len() <= trace.steps.len()
                && tools
                    .iter()
                    .enumerate()
                    .all(|(i, tool)| trace.steps[start + i].tool_name == *tool)
            {
                occurrences.push(Occurrence {
                    trace: t,
                    steps: (start..start + tools.len()).collect(),
                });
            }
        }
    }
    Pattern::new(tools.iter().map(|t| t.to_string()).collect(), occurrences)
}

fn binding<'a>(bindings: &'a [Binding], step: usize, field: &str) -> &'a Binding {
    bindings
        .iter()
        .find(|b| b.step == step && b.field == field)
        .unwrap_or_else(|| panic!("no binding for step {step} {field}: {bindings:#?}"))
}

/// The chainweaver JSONL format: one call a line, grouped by `trace_id` in file order.
fn read_chainweaver_jsonl(path: &Path) -> Vec<TraceWithSteps> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut traces: Vec<TraceWithSteps> = Vec::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let record: Value = serde_json::from_str(line).unwrap();
        let trace_id = record["trace_id"].as_str().unwrap().to_string();
        let at = *by_id.entry(trace_id.clone()).or_insert_with(|| {
            traces.push(TraceWithSteps {
                trace: ObservedTrace::new(trace_id.clone(), "chainweaver-jsonl"),
                steps: Vec::new(),
            });
            traces.len() - 1
        });
        let tool = record
            .get("tool")
            .or_else(|| record.get("tool_name"))
            .and_then(Value::as_str)
            .unwrap();
        let steps = &mut traces[at].steps;
        let mut step =
            ObservedStep::new(trace_id, steps.len() as u32, tool, record["inputs"].clone());
        step.outputs = record.get("outputs").cloned();
        steps.push(step);
    }
    traces
}

/// tau-bench result files: each record's `traj` of OpenAI messages is one trace; a tool call is
/// paired with its `role: tool` result by `tool_call_id`, or by order when ids are missing.
fn read_tau_bench(dir: &Path) -> Vec<TraceWithSteps> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut traces = Vec::new();
    for file in files {
        let stem = file.file_stem().unwrap().to_string_lossy().to_string();
        let records: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        for (r, record) in records.iter().enumerate() {
            let trace_id = format!("{stem}#{r}");
            // Pending calls: (id, name, parsed arguments or None when unparseable).
            let mut pending: Vec<(Option<String>, String, Option<Value>)> = Vec::new();
            let mut steps: Vec<ObservedStep> = Vec::new();
            for message in record["traj"].as_array().into_iter().flatten() {
                match message["role"].as_str() {
                    Some("assistant") => {
                        for call in message["tool_calls"].as_array().into_iter().flatten() {
                            let arguments = call["function"]["arguments"]
                                .as_str()
                                .and_then(|a| serde_json::from_str::<Value>(a).ok());
                            pending.push((
                                call["id"].as_str().map(str::to_string),
                                call["function"]["name"].as_str().unwrap_or("").to_string(),
                                arguments,
                            ));
                        }
                    }
                    Some("tool") => {
                        let id = message["tool_call_id"].as_str();
                        let at = match id {
                            Some(id) => pending.iter().position(|p| p.0.as_deref() == Some(id)),
                            None if !pending.is_empty() => Some(0),
                            None => None,
                        };
                        let Some(at) = at else { continue };
                        let (call_id, name, arguments) = pending.remove(at);
                        let Some(arguments) = arguments else { continue };
                        let content = message["content"].as_str().unwrap_or("").to_string();
                        let mut step =
                            ObservedStep::new(&trace_id, steps.len() as u32, name, arguments);
                        step.call_id = call_id;
                        if content.starts_with("Error") {
                            step.error_message = Some(content);
                        } else {
                            step.outputs = Some(Value::String(content));
                        }
                        steps.push(step);
                    }
                    _ => {}
                }
            }
            traces.push(TraceWithSteps {
                trace: ObservedTrace::new(trace_id, "tau-bench"),
                steps,
            });
        }
    }
    traces
}

#[test]
fn chainweaver_example_fetch_validate_transform() {
    let Some(datasets) = shared_datasets() else {
        return;
    };
    let traces =
        read_chainweaver_jsonl(&datasets.join("chainweaver-examples/agent_tool_trace.jsonl"));
    let pattern = contiguous(&traces, &["fetch", "validate", "transform"]);
    assert_eq!(pattern.occurrences.len(), 3);
    let bindings = infer_bindings(&traces, &pattern, &InferConfig::default()).unwrap();
    // The url differs between requests: a flow input.
    let url = binding(&bindings, 0, "/url");
    assert!(
        matches!(&url.source, BindingSource::FlowInput { name } if name == "url"),
        "{url:#?}"
    );
    // The body is the same text every time, but fetch's output explains it: data flow, not a
    // constant; transform takes it from fetch (validate only passed it along).
    for step in [1, 2] {
        let body = binding(&bindings, step, "/body");
        assert_eq!(
            body.source,
            BindingSource::StepOutput {
                step: 0,
                pointer: "/body".into()
            },
            "{body:#?}"
        );
        assert_eq!(body.confidence, 1.0);
        assert!(body.flags.is_empty());
    }

    let candidate = build_candidate(&traces, &pattern, &CandidateConfig::default()).unwrap();
    let FlowDefinition::Linear(flow) = &candidate.flow else {
        panic!("expected a linear flow: {:#?}", candidate.flow)
    };
    assert_eq!(
        flow.steps[1].input_mapping["body"],
        Value::from("fetch.body")
    );
    assert_eq!(
        flow.steps[2].input_mapping["body"],
        Value::from("fetch.body")
    );
    assert_eq!(candidate.evidence.support, 3);
    assert_eq!(candidate.evidence.round_trips_saved, 6);
    assert_eq!(candidate.evidence.reproduced, 1.0);
    // transform gave different records for the same body: not deterministic.
    assert_eq!(candidate.evidence.determinism["transform"].ratio, Some(0.0));
    let text = serde_json::to_string_pretty(&candidate).unwrap();
    let back: chainweaver_recorder::model::candidate::Candidate =
        serde_json::from_str(&text).unwrap();
    assert_eq!(back, candidate);
}

#[test]
fn tau_bench_user_lookup_chain() {
    let Some(datasets) = shared_datasets() else {
        return;
    };
    let traces = read_tau_bench(&datasets.join("tau-bench-retail"));
    assert!(traces.len() >= 400, "{} traces", traces.len());

    let pattern = contiguous(&traces, &["find_user_id_by_name_zip", "get_user_details"]);
    assert!(
        pattern.occurrences.len() >= 100,
        "{} occurrences",
        pattern.occurrences.len()
    );
    let bindings = infer_bindings(&traces, &pattern, &InferConfig::default()).unwrap();
    let user_id = binding(&bindings, 1, "/user_id");
    eprintln!(
        "find_user_id_by_name_zip -> get_user_details: {} occurrences, user_id {:?} at {:.4}, alternatives {:?}",
        pattern.occurrences.len(),
        user_id.source,
        user_id.confidence,
        user_id.alternatives
    );
    assert_eq!(
        user_id.source,
        BindingSource::StepOutput {
            step: 0,
            pointer: String::new()
        }
    );
    assert!(user_id.confidence >= 0.95, "{user_id:#?}");
    for field in ["/first_name", "/last_name", "/zip"] {
        let b = binding(&bindings, 0, field);
        assert!(
            matches!(&b.source, BindingSource::FlowInput { name } if *name == field[1..]),
            "{b:#?}"
        );
    }

    let candidate = build_candidate(&traces, &pattern, &CandidateConfig::default()).unwrap();
    let FlowDefinition::Linear(flow) = &candidate.flow else {
        panic!("expected a linear flow")
    };
    assert_eq!(
        flow.steps[1].input_mapping["user_id"],
        Value::from("find_user_id_by_name_zip.result")
    );
    assert!(candidate.evidence.read_only);
    eprintln!(
        "candidate: support {}, reproduced {:.4}, success {:.4}, score {:.2}",
        candidate.evidence.support,
        candidate.evidence.reproduced,
        candidate.evidence.success_rate,
        candidate.evidence.score
    );
    assert!(candidate.evidence.reproduced >= 0.95);

    // One step further: the order id is one of the user's orders, chosen by the agent.
    let longer = contiguous(
        &traces,
        &[
            "find_user_id_by_name_zip",
            "get_user_details",
            "get_order_details",
        ],
    );
    let bindings = infer_bindings(&traces, &longer, &InferConfig::default()).unwrap();
    let order_id = binding(&bindings, 2, "/order_id");
    eprintln!(
        "... -> get_order_details: {} occurrences, order_id {:?} at {:.4} flags {:?}, alternatives {:?}",
        longer.occurrences.len(),
        order_id.source,
        order_id.confidence,
        order_id.flags,
        order_id.alternatives
    );
    let list_element = std::iter::once(&order_id.source)
        .chain(order_id.alternatives.iter().map(|a| &a.source))
        .find_map(|s| match s {
            BindingSource::ListElement {
                step,
                list_pointer,
                item_pointer,
                selection,
            } => Some((
                *step,
                list_pointer.as_str(),
                item_pointer.as_str(),
                *selection,
            )),
            _ => None,
        });
    let (step, list_pointer, item_pointer, selection) =
        list_element.expect("order_id reported as an element of the user's orders");
    assert_eq!((step, list_pointer, item_pointer), (1, "/orders", ""));
    assert!(
        !matches!(order_id.source, BindingSource::StepOutput { .. }),
        "not a fixed pointer: {order_id:#?}"
    );
    eprintln!("order_id selection: {selection:?}");
    assert!(order_id.confidence > 0.5);
    let user_id = binding(&bindings, 1, "/user_id");
    assert!(user_id.confidence >= 0.95, "{user_id:#?}");
    if matches!(order_id.source, BindingSource::ListElement { .. }) {
        assert_eq!(selection, Selection::Chosen);
    }

    // The flow takes the chosen order id as an input but keeps the observed order.
    let candidate = build_candidate(&traces, &longer, &CandidateConfig::default()).unwrap();
    let FlowDefinition::Linear(flow) = &candidate.flow else {
        panic!("expected a linear flow: {:#?}", candidate.flow)
    };
    assert_eq!(
        flow.steps[2].input_mapping["order_id"],
        Value::from("order_id")
    );
    assert!(candidate.evidence.reproduced >= 0.95);
    eprintln!(
        "3-step candidate: support {}, reproduced {:.4}, success {:.4}, score {:.2}",
        candidate.evidence.support,
        candidate.evidence.reproduced,
        candidate.evidence.success_rate,
        candidate.evidence.score
    );
}
