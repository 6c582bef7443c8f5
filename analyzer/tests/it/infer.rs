//! Binding inference and candidates on the shared real traces.
//!
//! The readers below are deliberately minimal stand-ins for the real importers: just enough of
//! the chainweaver JSONL and tau-bench result formats to build traces. Tool calls whose
//! arguments are not JSON (Python dict literals in some tau-bench files) are skipped.

// Test code: a panic on unreadable test data is the right failure.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::Path;

use chainweaver_analyzer::candidate::{CandidateConfig, build_candidate, build_candidates};
use chainweaver_analyzer::infer::{InferConfig, infer_bindings};
use chainweaver_recorder::model::candidate::{
    Binding, BindingFlag, BindingSource, Candidate, Occurrence, Pattern, Selection,
};
use chainweaver_recorder::model::flow::FlowDefinition;
use chainweaver_recorder::model::{ObservedStep, ObservedTrace, TraceWithSteps};
use serde_json::{Map, Value};

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
    let back: Candidate = serde_json::from_str(&text).unwrap();
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

/// (step id, tool, input mapping, output mapping, ancestor positions)
type WiredStep = (
    String,
    String,
    Map<String, Value>,
    Option<Map<String, Value>>,
    Vec<usize>,
);

/// Static wiring check, in the spirit of `compile_flow`: every mapped field exists on the tool's
/// inferred input schema, every required field is mapped, every context reference names a flow
/// input or an output an earlier (ancestor) step maps, every mapped output key exists.
fn check_wiring(candidate: &Candidate) -> Result<(), String> {
    let properties = |schema: &Value| -> Vec<String> {
        schema["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    };
    let inputs: Vec<String> = match &candidate.flow {
        FlowDefinition::Linear(flow) => properties(flow.input_schema.as_ref().unwrap()),
        FlowDefinition::Dag(flow) => properties(flow.input_schema.as_ref().unwrap()),
    };
    let steps: Vec<WiredStep> = match &candidate.flow {
        FlowDefinition::Linear(flow) => flow
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (
                    i.to_string(),
                    s.tool_name.clone(),
                    s.input_mapping.clone(),
                    s.output_mapping.clone(),
                    (0..i).collect(),
                )
            })
            .collect(),
        FlowDefinition::Dag(flow) => {
            let ids: Vec<&str> = flow.steps.iter().map(|s| s.step_id.as_str()).collect();
            let mut ancestors: Vec<Vec<usize>> = Vec::new();
            for step in &flow.steps {
                let mut mine: Vec<usize> = Vec::new();
                for dep in &step.depends_on {
                    let d = ids
                        .iter()
                        .position(|id| id == dep)
                        .ok_or("unknown dependency")?;
                    if d >= ancestors.len() {
                        return Err(format!("{} depends on a later step", step.step_id));
                    }
                    mine.push(d);
                    mine.extend(ancestors[d].iter().copied());
                }
                ancestors.push(mine);
            }
            flow.steps
                .iter()
                .zip(ancestors)
                .map(|(s, a)| {
                    (
                        s.step_id.clone(),
                        s.tool_name.clone(),
                        s.input_mapping.clone(),
                        s.output_mapping.clone(),
                        a,
                    )
                })
                .collect()
        }
    };
    let produced: Vec<Vec<String>> = steps
        .iter()
        .map(|(_, tool, _, output_mapping, _)| match output_mapping {
            Some(mapping) => mapping.keys().cloned().collect(),
            None => properties(&candidate.tool_schemas[tool].output_schema),
        })
        .collect();
    for (id, tool, input_mapping, output_mapping, ancestors) in &steps {
        let schema = &candidate.tool_schemas[tool];
        let accepted = properties(&schema.input_schema);
        for (field, source) in input_mapping {
            if !accepted.contains(field) {
                return Err(format!("step {id}: {field} is not an input of {tool}"));
            }
            let Value::String(reference) = source else {
                continue;
            };
            let key = match reference.strip_prefix('/') {
                Some(pointer) => pointer
                    .split('/')
                    .next()
                    .unwrap()
                    .replace("~1", "/")
                    .replace("~0", "~"),
                None => reference.clone(),
            };
            let available =
                inputs.contains(&key) || ancestors.iter().any(|&a| produced[a].contains(&key));
            if !available {
                return Err(format!(
                    "step {id}: {field} reads `{key}`, which nothing provides"
                ));
            }
        }
        for required in schema.input_schema["required"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if !input_mapping.contains_key(required.as_str().unwrap()) {
                return Err(format!("step {id}: required {required} is not mapped"));
            }
        }
        let outputs = properties(&schema.output_schema);
        for output_key in output_mapping.iter().flat_map(|m| m.values()) {
            if !outputs.contains(&output_key.as_str().unwrap().to_string()) {
                return Err(format!("step {id}: {tool} has no output {output_key}"));
            }
        }
    }
    Ok(())
}

#[test]
fn every_repeated_tau_bench_sequence_gives_a_well_wired_candidate() {
    let Some(datasets) = shared_datasets() else {
        return;
    };
    let traces = read_tau_bench(&datasets.join("tau-bench-retail"));
    let mut counts: HashMap<Vec<&str>, usize> = HashMap::new();
    for trace in &traces {
        for len in 2..=3 {
            for window in trace.steps.windows(len) {
                *counts
                    .entry(window.iter().map(|s| s.tool_name.as_str()).collect())
                    .or_default() += 1;
            }
        }
    }
    let mut sequences: Vec<Vec<&str>> = counts
        .into_iter()
        .filter(|(_, n)| *n >= 10)
        .map(|(tools, _)| tools)
        .collect();
    sequences.sort();
    assert!(sequences.len() >= 30, "{} sequences", sequences.len());
    let patterns: Vec<Pattern> = sequences.iter().map(|t| contiguous(&traces, t)).collect();
    let candidates = build_candidates(&traces, &patterns, &CandidateConfig::default());
    for (tools, candidate) in sequences.iter().zip(candidates) {
        let candidate = candidate.unwrap();
        check_wiring(&candidate).unwrap_or_else(|e| panic!("{tools:?}: {e}"));
        for b in &candidate.bindings {
            assert!((0.0..=1.0).contains(&b.confidence), "{tools:?}: {b:?}");
            if b.flags.contains(&BindingFlag::LowConfidence)
                || b.flags.contains(&BindingFlag::Ambiguous)
            {
                assert!(
                    matches!(b.source, BindingSource::FlowInput { .. }),
                    "{tools:?}: {b:?}"
                );
            }
        }
        let text = serde_json::to_string(&candidate).unwrap();
        let back: Candidate = serde_json::from_str(&text).unwrap();
        assert_eq!(back, candidate, "{tools:?}");
    }
}
