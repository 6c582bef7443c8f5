use chainweaver_recorder::model::candidate::{BindingFlag, Effect};
use chainweaver_recorder::model::flow::{Flow, FlowDefinition};
use serde_json::{Value, json};

use super::replay::{Context, resolve, resolves_to};
use super::*;
use crate::infer::tests::{contiguous, traces_of};

fn candidate(traces: &[TraceWithSteps], tools: &[&str]) -> Candidate {
    build_candidate(
        traces,
        &contiguous(traces, tools),
        &CandidateConfig::default(),
    )
    .unwrap()
}

fn linear(candidate: &Candidate) -> &Flow {
    match &candidate.flow {
        FlowDefinition::Linear(flow) => flow,
        FlowDefinition::Dag(flow) => panic!("expected a linear flow: {flow:#?}"),
    }
}

#[test]
fn linear_flow_wires_outputs_through_step_keys_and_reproduces_inputs() {
    let traces = traces_of(
        (0..4)
            .map(|k| {
                let user = format!("user_{k}");
                let details = json!({"name": format!("N{k}"), "orders": [format!("#{k}a"), format!("#{k}b")]});
                vec![
                    ("find_user", json!({"first_name": format!("F{k}"), "zip": format!("{k}1234")}), json!(user.clone())),
                    ("get_user_details", json!({"user_id": user}), json!(details.to_string())),
                    ("get_order_details", json!({"order_id": format!("#{k}a"), "verbose": false}), json!({"status": "pending"})),
                ]
            })
            .collect(),
    );
    let found = candidate(
        &traces,
        &["find_user", "get_user_details", "get_order_details"],
    );
    let flow = linear(&found);
    assert_eq!(
        flow.name,
        "find_user_then_get_user_details_then_get_order_details"
    );
    assert_eq!(
        flow.steps[0].input_mapping["first_name"],
        json!("first_name")
    );
    assert_eq!(
        flow.steps[1].input_mapping["user_id"],
        json!("find_user.result")
    );
    assert_eq!(
        flow.steps[0].output_mapping,
        Some(
            json!({"find_user.result": "result"})
                .as_object()
                .unwrap()
                .clone()
        )
    );
    assert_eq!(
        flow.steps[2].input_mapping["order_id"],
        json!("/get_user_details.orders/0")
    );
    assert_eq!(flow.steps[2].input_mapping["verbose"], json!(false));
    assert_eq!(flow.steps[2].output_mapping, None);
    let schema = flow.input_schema.as_ref().unwrap();
    assert_eq!(schema["required"], json!(["first_name", "zip"]));
    assert_eq!(found.evidence.reproduced, 1.0);
    assert_eq!(found.evidence.support, 4);
    assert_eq!(found.evidence.round_trips_saved, 8);
    assert!(found.evidence.read_only);
    assert_eq!(
        flow.output_schema.as_ref().unwrap()["properties"]["status"]["enum"],
        json!(["pending"])
    );
    assert_eq!(
        found.tool_schemas["get_user_details"].output_schema["properties"]["orders"]["type"],
        "array"
    );
    // Score = round trips x success x quality x determinism x effects.
    assert!(
        (found.evidence.score - 8.0).abs() < 1e-9,
        "{}",
        found.evidence.score
    );

    // JSON round trip, as the store and flow files hold it.
    let text = serde_json::to_string(&found).unwrap();
    let back: Candidate = serde_json::from_str(&text).unwrap();
    assert_eq!(back, found);
}

#[test]
fn independent_reads_become_a_dag_and_side_effects_keep_order() {
    let reads = traces_of(
        (0..3)
            .map(|k| {
                let id = format!("acct-{k}");
                vec![
                    (
                        "get_account",
                        json!({"email": format!("{k}@x.io")}),
                        json!({"id": id.clone()}),
                    ),
                    (
                        "get_orders",
                        json!({"account": id.clone()}),
                        json!({"n": k}),
                    ),
                    ("get_invoices", json!({"account": id}), json!({"m": k})),
                ]
            })
            .collect(),
    );
    let found = candidate(&reads, &["get_account", "get_orders", "get_invoices"]);
    let FlowDefinition::Dag(dag) = &found.flow else {
        panic!("expected a DAG: {:#?}", found.flow)
    };
    assert_eq!(dag.steps[1].depends_on, vec!["get_account"]);
    assert_eq!(dag.steps[2].depends_on, vec!["get_account"]);
    // get_invoices reads the same argument get_orders did: wired to the same output.
    assert_eq!(
        dag.steps[2].input_mapping["account"],
        json!("get_account.id")
    );
    assert_eq!(found.evidence.reproduced, 1.0);
    // Sinks map their outputs under their step ids.
    assert_eq!(
        dag.steps[2].output_mapping.as_ref().unwrap()["get_invoices.m"],
        json!("m")
    );

    let writes = traces_of(
        (0..3)
            .map(|k| {
                let id = format!("acct-{k}");
                vec![
                    (
                        "get_account",
                        json!({"email": format!("{k}@x.io")}),
                        json!({"id": id.clone()}),
                    ),
                    (
                        "cancel_subscription",
                        json!({"account": id.clone()}),
                        json!({"ok": true}),
                    ),
                    ("get_invoices", json!({"account": id}), json!({"m": k})),
                ]
            })
            .collect(),
    );
    let found = candidate(
        &writes,
        &["get_account", "cancel_subscription", "get_invoices"],
    );
    linear(&found);
    assert!(!found.evidence.read_only);
    assert_eq!(found.evidence.effects[1].effect, Effect::SideEffect);
}

#[test]
fn unexpressible_sources_become_flagged_flow_inputs() {
    let traces = traces_of(
        (0..3)
            .map(|k| {
                let env = ["prod", "stage", "dev"][k];
                vec![
                    ("get_env", json!({"env": env, "channel": "#ops"}), json!({"hosts": (0..k + 2).map(|i| format!("h{k}-{i}")).collect::<Vec<_>>()})),
                    (
                        "notify",
                        json!({"message": format!("Deploying to {env} now"), "host": format!("h{k}-{}", k + 1), "channel": "#ops"}),
                        json!({}),
                    ),
                ]
            })
            .collect(),
    );
    let found = candidate(&traces, &["get_env", "notify"]);
    let flow = linear(&found);
    let message = found
        .bindings
        .iter()
        .find(|b| b.field == "/message")
        .unwrap();
    assert!(matches!(message.source, BindingSource::Template { .. }));
    assert!(message.flags.contains(&BindingFlag::NotExpressible));
    assert_eq!(flow.steps[1].input_mapping["message"], json!("message"));
    assert_eq!(
        flow.metadata["templates"][0]["template"],
        json!("Deploying to {{env}} now")
    );
    // The last host each time: expressible as a binding, not as a pointer.
    assert_eq!(flow.steps[1].input_mapping["host"], json!("host"));
    // A string constant rides in as a flow input with a default.
    assert_eq!(flow.steps[1].input_mapping["channel"], json!("channel"));
    let schema = flow.input_schema.as_ref().unwrap();
    assert_eq!(schema["properties"]["channel"]["default"], json!("#ops"));
    assert!(
        !schema["required"]
            .as_array()
            .unwrap()
            .contains(&json!("channel"))
    );
    assert_eq!(found.evidence.reproduced, 1.0);
    assert!(found.evidence.flagged_bindings >= 2);
    assert_eq!(
        flow.metadata["string_constants"].as_array().unwrap().len(),
        1
    );
}

#[test]
fn bindings_from_outside_are_checked() {
    let traces = traces_of(vec![vec![
        ("a", json!({"k": 1}), json!({"id": "x"})),
        ("b", json!({"id": "x"}), json!({})),
    ]]);
    let pattern = contiguous(&traces, &["a", "b"]);
    let config = CandidateConfig::default();
    let mut bindings = crate::infer::infer_bindings(&traces, &pattern, &config.infer).unwrap();
    assert!(candidate_from_bindings(&traces, &pattern, bindings.clone(), &config).is_ok());
    bindings[1].source = BindingSource::StepOutput {
        step: 1,
        pointer: "/id".into(),
    };
    let err = candidate_from_bindings(&traces, &pattern, bindings.clone(), &config).unwrap_err();
    assert!(err.to_string().contains("not an earlier step"), "{err}");
    bindings[1].step = 7;
    let err = candidate_from_bindings(&traces, &pattern, bindings, &config).unwrap_err();
    assert!(err.to_string().contains("has 2 steps"), "{err}");
}

#[test]
fn resolves_to_agrees_with_resolving_then_comparing() {
    let context: Map<String, Value> = serde_json::from_str(
        r#"{"a": 1, "find.user": {"id": "u1", "tags": ["x", "y"]}, "a/b": {"c~d": 2}, "s": "t"}"#,
    )
    .unwrap();
    let mappings: Vec<Map<String, Value>> = [
        r#"{}"#,
        r#"{"x": "a"}"#,
        r#"{"x": "a", "y": "missing"}"#,
        r#"{"id": "/find.user/id", "tag": "/find.user/tags/1"}"#,
        r#"{"v": "/a~1b/c~0d"}"#,
        r#"{"n": 5, "s": "s"}"#,
        r#"{"bad": "/find.user/tags/9"}"#,
    ]
    .iter()
    .map(|m| serde_json::from_str(m).unwrap())
    .collect();
    let inputs: Vec<Value> = [
        serde_json::to_string(&context).unwrap().as_str(),
        r#"{"x": 1}"#,
        r#"{"x": 1, "y": null}"#,
        r#"{"id": "u1", "tag": "y"}"#,
        r#"{"v": 2}"#,
        r#"{"n": 5, "s": "t"}"#,
        r#"{}"#,
        r#"[1]"#,
        r#""text""#,
    ]
    .iter()
    .map(|i| serde_json::from_str(i).unwrap())
    .collect();
    let mut agreed_true = 0;
    for mapping in &mappings {
        for input in &inputs {
            let expected = resolve(mapping, &context) == *input;
            let mut borrowed = Context::default();
            for (key, value) in &context {
                borrowed.insert(key, value);
            }
            assert_eq!(
                resolves_to(mapping, &borrowed, input),
                expected,
                "{mapping:?} {input:?}"
            );
            agreed_true += usize::from(expected);
        }
    }
    // Each mapping reproduces exactly one of the inputs (the bad pointer resolves to `{}`).
    assert_eq!(agreed_true, mappings.len());
}
