//! Binding inference and candidates on the shared real traces, read with the real importers
//! (the traces `chainweaver import` gives users, Python-literal arguments included).

// Test code: a panic on unreadable test data is the right failure.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use chainweaver_analyzer::candidate::{CandidateConfig, build_candidate, build_candidates};
use chainweaver_analyzer::infer::{InferConfig, infer_bindings};
use chainweaver_recorder::model::TraceWithSteps;
use chainweaver_recorder::model::candidate::{
    Alternative, Binding, BindingFlag, BindingSource, Candidate, Occurrence, Pattern, Selection,
};
use chainweaver_recorder::model::flow::FlowDefinition;
use serde_json::{Map, Value};

use crate::{import_traces, shared_datasets, tau_bench_files};

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

#[test]
fn chainweaver_example_fetch_validate_transform() {
    let Some(datasets) = shared_datasets() else {
        return;
    };
    let traces = import_traces(&[datasets.join("chainweaver-examples/agent_tool_trace.jsonl")]);
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

/// The binding the data gives, with its runner-up sources.
fn expected_binding(
    step: usize,
    tool: &str,
    field: &str,
    (source, confidence, observed): (BindingSource, f64, usize),
    alternatives: Vec<(BindingSource, f64)>,
    flags: Vec<BindingFlag>,
) -> Binding {
    Binding {
        step,
        tool_name: tool.into(),
        field: field.into(),
        source,
        confidence,
        observed,
        alternatives: alternatives
            .into_iter()
            .map(|(source, confidence)| Alternative { source, confidence })
            .collect(),
        flags,
    }
}

/// `find_user_id_by_name_zip -> get_user_details (-> get_order_details)` on the 400 tau-bench
/// retail trajectories: 279 (263) occurrences, the user id flowing from the first call's result
/// (a plain string) into the second call, the order id chosen by the agent among the user's
/// orders. In 20 of them the agent looked up the same user (`mei_kovacs_8020`), the constant
/// runner-up.
#[test]
fn tau_bench_user_lookup_chain() {
    let Some(datasets) = shared_datasets() else {
        return;
    };
    let traces = import_traces(&tau_bench_files(&datasets));
    // 4 files of 100 records, 2,773 tool calls (the README's "about 2,839" counts loosely).
    assert_eq!(traces.len(), 400);
    assert_eq!(traces.iter().map(|t| t.steps.len()).sum::<usize>(), 2_773);

    let pattern = contiguous(&traces, &["find_user_id_by_name_zip", "get_user_details"]);
    assert_eq!(pattern.occurrences.len(), 279);
    let bindings = infer_bindings(&traces, &pattern, &InferConfig::default()).unwrap();
    let user_id = binding(&bindings, 1, "/user_id");
    let from_lookup = BindingSource::StepOutput {
        step: 0,
        pointer: String::new(),
    };
    let same_user = || BindingSource::Constant {
        value: Value::from("mei_kovacs_8020"),
    };
    assert_eq!(
        user_id,
        &expected_binding(
            1,
            "get_user_details",
            "/user_id",
            (from_lookup.clone(), 1.0, 279),
            vec![(same_user(), 20.0 / 279.0)],
            vec![],
        )
    );
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
    assert_eq!(
        (
            candidate.evidence.support,
            candidate.evidence.occurrences,
            candidate.evidence.round_trips_saved
        ),
        (279, 279, 279)
    );
    assert_eq!(candidate.evidence.reproduced, 1.0);
    assert_eq!(candidate.evidence.success_rate, 1.0);
    assert_eq!(candidate.evidence.score, 279.0);

    // One step further: the order id is one of the user's orders, chosen by the agent.
    let longer = contiguous(
        &traces,
        &[
            "find_user_id_by_name_zip",
            "get_user_details",
            "get_order_details",
        ],
    );
    assert_eq!(longer.occurrences.len(), 263);
    let bindings = infer_bindings(&traces, &longer, &InferConfig::default()).unwrap();
    assert_eq!(
        binding(&bindings, 1, "/user_id"),
        &expected_binding(
            1,
            "get_user_details",
            "/user_id",
            (from_lookup, 1.0, 263),
            vec![(same_user(), 20.0 / 263.0)],
            vec![],
        )
    );
    // 261 of 263 order ids are among the user's listed orders (which one is the agent's choice);
    // the runners-up: one order seen 20 times, and a flow input for the other 2.
    assert_eq!(
        binding(&bindings, 2, "/order_id"),
        &expected_binding(
            2,
            "get_order_details",
            "/order_id",
            (
                BindingSource::ListElement {
                    step: 1,
                    list_pointer: "/orders".into(),
                    item_pointer: String::new(),
                    selection: Selection::Chosen,
                },
                261.0 / 263.0,
                263
            ),
            vec![
                (
                    BindingSource::Constant {
                        value: Value::from("#W6390527")
                    },
                    20.0 / 263.0
                ),
                (
                    BindingSource::FlowInput {
                        name: "order_id".into()
                    },
                    2.0 / 263.0
                ),
            ],
            vec![BindingFlag::AgentChoice],
        )
    );

    // The flow takes the chosen order id as an input but keeps the observed order.
    let candidate = build_candidate(&traces, &longer, &CandidateConfig::default()).unwrap();
    let FlowDefinition::Linear(flow) = &candidate.flow else {
        panic!("expected a linear flow: {:#?}", candidate.flow)
    };
    assert_eq!(
        flow.steps[2].input_mapping["order_id"],
        Value::from("order_id")
    );
    assert_eq!(
        (
            candidate.evidence.support,
            candidate.evidence.occurrences,
            candidate.evidence.round_trips_saved
        ),
        (263, 263, 526)
    );
    assert_eq!(candidate.evidence.reproduced, 1.0);
    // Two occurrences hold a failed call; the agent's order choice is the one flagged binding.
    assert_eq!(candidate.evidence.success_rate, 261.0 / 263.0);
    assert_eq!(candidate.evidence.flagged_bindings, 1);
    // get_order_details answered 4 of its 113 repeated inputs differently (orders change).
    let orders = &candidate.evidence.determinism["get_order_details"];
    assert_eq!(
        (orders.calls, orders.repeated_inputs, orders.consistent),
        (823, 113, 109)
    );
    assert!(
        (candidate.evidence.score - 438.464_601_769_911_5).abs() < 1e-9,
        "{}",
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
    let traces = import_traces(&tau_bench_files(&datasets));
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
    assert_eq!(sequences.len(), 73);
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
