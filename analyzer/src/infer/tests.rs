use super::*;
use chainweaver_recorder::model::candidate::{Alternative, BindingFlag, Occurrence, Selection};
use chainweaver_recorder::model::{ObservedStep, ObservedTrace};
use serde_json::json;

/// Traces from `(tool, inputs, outputs)` triples; an output of `null` marks a failed call.
pub(crate) fn traces_of(specs: Vec<Vec<(&str, Value, Value)>>) -> Vec<TraceWithSteps> {
    specs
        .into_iter()
        .enumerate()
        .map(|(t, steps)| {
            let id = format!("t{t}");
            TraceWithSteps {
                trace: ObservedTrace::new(id.clone(), "test"),
                steps: steps
                    .into_iter()
                    .enumerate()
                    .map(|(i, (tool, inputs, outputs))| {
                        let mut step = ObservedStep::new(id.clone(), i as u32, tool, inputs);
                        if outputs.is_null() {
                            step.error_message = Some("failed".into());
                        } else {
                            step.outputs = Some(outputs);
                        }
                        step
                    })
                    .collect(),
            }
        })
        .collect()
}

/// Every contiguous occurrence of `tools` (a test helper, not a miner).
pub(crate) fn contiguous(traces: &[TraceWithSteps], tools: &[&str]) -> Pattern {
    let mut occurrences = Vec::new();
    for (t, trace) in traces.iter().enumerate() {
        if trace.steps.len() < tools.len() {
            continue;
        }
        for start in 0..=trace.steps.len() - tools.len() {
            if tools
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

fn infer(traces: &[TraceWithSteps], tools: &[&str]) -> Vec<Binding> {
    let pattern = contiguous(traces, tools);
    infer_bindings(traces, &pattern, &InferConfig::default()).unwrap()
}

fn binding<'a>(bindings: &'a [Binding], step: usize, field: &str) -> &'a Binding {
    bindings
        .iter()
        .find(|b| b.step == step && b.field == field)
        .unwrap_or_else(|| panic!("no binding for step {step} {field}: {bindings:#?}"))
}

#[test]
fn output_data_flow_prefers_the_earliest_step_and_parses_json_text() {
    let traces = traces_of(
        (0..4)
            .map(|k| {
                let id = format!("id-{k}");
                vec![
                    ("a", json!({"q": format!("query {k}")}), json!(id.clone())),
                    (
                        "b",
                        json!({"id": id.clone()}),
                        json!(json!({"id": id.clone(), "n": format!("n-{k}")}).to_string()),
                    ),
                    (
                        "c",
                        json!({"id": id.clone(), "n": format!("n-{k}")}),
                        json!({}),
                    ),
                ]
            })
            .collect(),
    );
    let bindings = infer(&traces, &["a", "b", "c"]);
    let q = binding(&bindings, 0, "/q");
    assert!(matches!(&q.source, BindingSource::FlowInput { name } if name == "q"));
    assert_eq!(q.confidence, 1.0);
    let b_id = binding(&bindings, 1, "/id");
    assert_eq!(
        b_id.source,
        BindingSource::StepOutput {
            step: 0,
            pointer: String::new()
        }
    );
    // b's output only echoes the id a produced: a is the cause, b an alternative.
    let c_id = binding(&bindings, 2, "/id");
    assert_eq!(
        c_id.source,
        BindingSource::StepOutput {
            step: 0,
            pointer: String::new()
        }
    );
    assert_eq!(c_id.confidence, 1.0);
    assert!(c_id.alternatives.iter().any(|a| a.source
        == BindingSource::StepOutput {
            step: 1,
            pointer: "/id".into()
        }));
    // b's output is JSON text: parsed, so /n reaches inside it.
    let c_n = binding(&bindings, 2, "/n");
    assert_eq!(
        c_n.source,
        BindingSource::StepOutput {
            step: 1,
            pointer: "/n".into()
        }
    );
    assert!(bindings.iter().all(|b| b.flags.is_empty()), "{bindings:#?}");
}

#[test]
fn an_echoing_step_is_never_the_source() {
    // Step b echoes the query a was given; c reads the query: its source is a's input (the
    // flow input), not b's copy.
    let traces = traces_of(
        (0..5)
            .map(|k| {
                let query = format!("query {k}");
                vec![
                    ("a", json!({"query": query.clone()}), json!({"hits": k})),
                    (
                        "b",
                        json!({"hits": k}),
                        json!({"query": query.clone(), "hits": k}),
                    ),
                    ("c", json!({"query": query.clone()}), json!({})),
                ]
            })
            .collect(),
    );
    let bindings = infer(&traces, &["a", "b", "c"]);
    let c_query = binding(&bindings, 2, "/query");
    assert_eq!(
        c_query.source,
        BindingSource::StepInput {
            step: 0,
            pointer: "/query".into()
        },
        "{c_query:#?}"
    );
    let b_hits = binding(&bindings, 1, "/hits");
    assert_eq!(
        b_hits.source,
        BindingSource::StepOutput {
            step: 0,
            pointer: "/hits".into()
        }
    );
}

#[test]
fn constants_and_coincidences() {
    let traces = traces_of(
        (0..3)
            .map(|k| {
                vec![
                    (
                        "a",
                        json!({"key": k}),
                        json!({"ok": true, "body": "<payload>", "limit": 25}),
                    ),
                    (
                        "b",
                        // `force: true` equals a.ok by coincidence; `body` is informative.
                        serde_json::from_str(
                            r#"{"force": true, "body": "<payload>", "env": "prod", "size": 10.50}"#,
                        )
                        .unwrap(),
                        json!({}),
                    ),
                ]
            })
            .collect(),
    );
    let bindings = infer(&traces, &["a", "b"]);
    assert_eq!(
        binding(&bindings, 1, "/force").source,
        BindingSource::Constant { value: json!(true) }
    );
    assert!(binding(&bindings, 1, "/force").alternatives.iter().any(
        |a| matches!(&a.source, BindingSource::StepOutput { pointer, .. } if pointer == "/ok")
    ));
    assert_eq!(
        binding(&bindings, 1, "/body").source,
        BindingSource::StepOutput {
            step: 0,
            pointer: "/body".into()
        }
    );
    assert_eq!(
        binding(&bindings, 1, "/env").source,
        BindingSource::Constant {
            value: json!("prod")
        }
    );
    let size = binding(&bindings, 1, "/size");
    let BindingSource::Constant { value } = &size.source else {
        panic!("{size:?}")
    };
    assert_eq!(value.to_string(), "10.50", "exact number text kept");
}

#[test]
fn templates_embed_earlier_values() {
    let envs = ["production", "staging", "development"];
    let traces = traces_of(
        envs.iter()
            .map(|env| {
                vec![
                    (
                        "deploy",
                        json!({"env": env, "ref": "main"}),
                        json!({"ok": true}),
                    ),
                    (
                        "notify",
                        json!({"message": format!("Deployed to {env}!")}),
                        json!({}),
                    ),
                ]
            })
            .collect(),
    );
    let bindings = infer(&traces, &["deploy", "notify"]);
    let message = binding(&bindings, 1, "/message");
    let BindingSource::Template { template, slots } = &message.source else {
        panic!("{message:#?}")
    };
    assert_eq!(template, "Deployed to {{env}}!");
    assert_eq!(
        slots[0].source,
        BindingSource::StepInput {
            step: 0,
            pointer: "/env".into()
        }
    );
    assert_eq!(message.confidence, 1.0);
}

#[test]
fn list_elements_report_the_list_and_the_selection_rule() {
    // `pick` takes the element chosen by the agent; `first` always takes element 0.
    let chosen = [1, 0, 2, 1];
    let traces = traces_of(
        chosen
            .iter()
            .enumerate()
            .map(|(k, &c)| {
                // Lists of different lengths, so "last" is not a fixed index.
                let len = 3 + k % 2;
                let items: Vec<Value> = (0..len)
                    .map(|i| json!({"id": format!("item-{k}-{i}"), "n": i}))
                    .collect();
                vec![
                    ("list_items", json!({"page": k}), json!({"items": items})),
                    (
                        "pick",
                        json!({"item_id": format!("item-{k}-{c}"), "first": format!("item-{k}-0"), "last": format!("item-{k}-{}", len - 1)}),
                        json!({}),
                    ),
                ]
            })
            .collect(),
    );
    let bindings = infer(&traces, &["list_items", "pick"]);
    let item = binding(&bindings, 1, "/item_id");
    assert_eq!(
        item.source,
        BindingSource::ListElement {
            step: 0,
            list_pointer: "/items".into(),
            item_pointer: "/id".into(),
            selection: Selection::Chosen
        }
    );
    assert_eq!(item.flags, vec![BindingFlag::AgentChoice]);
    assert!(matches!(
        binding(&bindings, 1, "/first").source,
        BindingSource::ListElement {
            selection: Selection::First,
            ..
        }
    ));
    assert!(matches!(
        binding(&bindings, 1, "/last").source,
        BindingSource::ListElement {
            selection: Selection::Last,
            ..
        }
    ));
}

#[test]
fn consecutive_calls_over_a_list_are_a_map() {
    let traces = traces_of(
        (0..3)
            .map(|k| {
                let orders = vec![format!("#A{k}"), format!("#B{k}")];
                vec![
                    ("get_user", json!({"user": k}), json!({"orders": orders})),
                    ("get_order", json!({"order_id": orders[0]}), json!({})),
                    ("get_order", json!({"order_id": orders[1]}), json!({})),
                ]
            })
            .collect(),
    );
    let bindings = infer(&traces, &["get_user", "get_order", "get_order"]);
    for (r, step) in [1, 2].into_iter().enumerate() {
        let order = binding(&bindings, step, "/order_id");
        assert_eq!(
            order.source,
            BindingSource::Map {
                step: 0,
                list_pointer: "/orders".into(),
                item_pointer: String::new(),
                index: r,
                run_start: 1,
                run_len: 2,
                covers_list: 1.0
            }
        );
    }
}

#[test]
fn inputs_shared_between_steps_and_whole_objects() {
    let traces = traces_of(
        (0..3)
            .map(|k| {
                let address = json!({"city": format!("City {k}"), "zip": format!("{k}0000")});
                vec![
                    (
                        "lookup",
                        json!({"account": format!("acct-{k}")}),
                        json!({"address": address.clone(), "status": "ok"}),
                    ),
                    (
                        "update",
                        json!({"account": format!("acct-{k}"), "address": address}),
                        json!({"done": true}),
                    ),
                ]
            })
            .collect(),
    );
    let bindings = infer(&traces, &["lookup", "update"]);
    assert_eq!(
        binding(&bindings, 1, "/account").source,
        BindingSource::StepInput {
            step: 0,
            pointer: "/account".into()
        }
    );
    assert_eq!(
        binding(&bindings, 1, "/address").source,
        BindingSource::StepOutput {
            step: 0,
            pointer: "/address".into()
        }
    );
    assert!(
        !bindings.iter().any(|b| b.field == "/address/city"),
        "copied whole, not leaf by leaf: {bindings:#?}"
    );
}

#[test]
fn ambiguous_sources_become_flagged_flow_inputs() {
    // 14 occurrences where a.p == a.q == x, 3 where only p matches, 3 where only q does.
    let traces = traces_of(
        (0..20)
            .map(|k| {
                let x = format!("value-{k}");
                let (p, q) = match k {
                    0..14 => (x.clone(), x.clone()),
                    14..17 => (x.clone(), format!("other-{k}")),
                    _ => (format!("other-{k}"), x.clone()),
                };
                vec![
                    ("a", json!({"k": k}), json!({"p": p, "q": q})),
                    ("b", json!({"x": x}), json!({})),
                ]
            })
            .collect(),
    );
    let bindings = infer(&traces, &["a", "b"]);
    let x = binding(&bindings, 1, "/x");
    assert!(
        matches!(x.source, BindingSource::FlowInput { .. }),
        "{x:#?}"
    );
    assert_eq!(x.flags, vec![BindingFlag::Ambiguous]);
    let alternatives: Vec<f64> = x.alternatives.iter().map(|a| a.confidence).collect();
    assert_eq!(alternatives[..2], [0.85, 0.85]);
}

#[test]
fn low_confidence_sources_become_flagged_flow_inputs() {
    // b.x comes from a's output in 6 of 10 occurrences.
    let traces = traces_of(
        (0..10)
            .map(|k| {
                let x = format!("value-{k}");
                let out = if k < 6 {
                    x.clone()
                } else {
                    format!("else-{k}")
                };
                vec![
                    ("a", json!({"k": k}), json!({"p": out})),
                    ("b", json!({"x": x}), json!({})),
                ]
            })
            .collect(),
    );
    let bindings = infer(&traces, &["a", "b"]);
    let x = binding(&bindings, 1, "/x");
    assert!(matches!(&x.source, BindingSource::FlowInput { name } if name == "x"));
    assert_eq!(x.flags, vec![BindingFlag::LowConfidence]);
    assert!((x.confidence - 0.4).abs() < 1e-9);
    assert_eq!(
        x.alternatives[0],
        Alternative {
            source: BindingSource::StepOutput {
                step: 0,
                pointer: "/p".into()
            },
            confidence: 0.6
        }
    );
    // With a lower threshold the same data binds.
    let pattern = contiguous(&traces, &["a", "b"]);
    let lenient = InferConfig {
        min_confidence: 0.5,
        ..InferConfig::default()
    };
    let bindings = infer_bindings(&traces, &pattern, &lenient).unwrap();
    assert!(matches!(
        binding(&bindings, 1, "/x").source,
        BindingSource::StepOutput { .. }
    ));
}

#[test]
fn failed_steps_and_bad_occurrences() {
    let traces = traces_of(vec![
        vec![
            ("a", json!({"k": 1}), json!("u1")),
            ("b", json!({"id": "u1"}), json!({})),
        ],
        vec![
            ("a", json!({"k": 2}), Value::Null),
            ("b", json!({"id": "u2"}), json!({})),
        ],
    ]);
    let bindings = infer(&traces, &["a", "b"]);
    let id = binding(&bindings, 1, "/id");
    // Only one of two occurrences explains it: below the threshold.
    assert!(matches!(id.source, BindingSource::FlowInput { .. }));
    assert!(id.flags.contains(&BindingFlag::LowConfidence));

    let mut pattern = contiguous(&traces, &["a", "b"]);
    pattern.occurrences[1].steps = vec![1, 0];
    let err = infer_bindings(&traces, &pattern, &InferConfig::default()).unwrap_err();
    assert!(err.to_string().contains("occurrence 1"), "{err}");
    pattern.occurrences[1] = Occurrence {
        trace: 9,
        steps: vec![0, 1],
    };
    let err = infer_bindings(&traces, &pattern, &InferConfig::default()).unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");
}

#[test]
fn gapped_occurrences_and_payload_caps() {
    let traces = traces_of(
        (0..3)
            .map(|k| {
                let id = format!("id-{k}");
                vec![
                    (
                        "a",
                        json!({"k": k}),
                        json!(json!({"id": id.clone()}).to_string()),
                    ),
                    ("noise", json!({"x": k}), json!({"id": "unrelated"})),
                    ("b", json!({"id": id}), json!({})),
                ]
            })
            .collect(),
    );
    let pattern = Pattern {
        tools: vec!["a".into(), "b".into()],
        occurrences: (0..3)
            .map(|t| Occurrence {
                trace: t,
                steps: vec![0, 2],
            })
            .collect(),
        gapped: true,
    };
    let bindings = infer_bindings(&traces, &pattern, &InferConfig::default()).unwrap();
    assert_eq!(
        binding(&bindings, 1, "/id").source,
        BindingSource::StepOutput {
            step: 0,
            pointer: "/id".into()
        }
    );
    // JSON text longer than the cap stays text: nothing inside it is found.
    let capped = InferConfig {
        max_payload_bytes: 8,
        ..InferConfig::default()
    };
    let bindings = infer_bindings(&traces, &pattern, &capped).unwrap();
    assert!(matches!(
        binding(&bindings, 1, "/id").source,
        BindingSource::FlowInput { .. }
    ));
}
