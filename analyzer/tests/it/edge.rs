//! Edge cases of the ChainAnalyzer: empty input, one trace, one very long trace, arguments that
//! are not objects, huge and deeply nested outputs, thousands of distinct tools.

use chainweaver_analyzer::candidate::{CandidateConfig, build_candidates};
use chainweaver_analyzer::mine::{ChainAnalyzer, MineConfig};
use chainweaver_analyzer::spm::{self, ContiguousOptions, SequenceDb};
use chainweaver_recorder::model::candidate::{BindingSource, Occurrence, Pattern};
use chainweaver_recorder::model::{ObservedStep, ObservedTrace, TraceWithSteps};
use serde_json::{Value, json};

/// A trace from `(tool, inputs, outputs)` calls.
fn trace(id: &str, calls: Vec<(&str, Value, Value)>) -> TraceWithSteps {
    TraceWithSteps {
        trace: ObservedTrace::new(id, "edge"),
        steps: calls
            .into_iter()
            .enumerate()
            .map(|(i, (tool, inputs, outputs))| {
                let mut step = ObservedStep::new(id, i as u32, tool, inputs);
                step.outputs = Some(outputs);
                step
            })
            .collect(),
    }
}

fn analyzer(min_support: u32) -> ChainAnalyzer {
    ChainAnalyzer::new(MineConfig {
        min_support,
        ..MineConfig::default()
    })
}

/// The only binding of `field` at `step` of the candidate for `tools`.
fn source_of<'a>(
    candidate: &'a chainweaver_recorder::model::candidate::Candidate,
    step: usize,
    field: &str,
) -> &'a BindingSource {
    let found: Vec<_> = candidate
        .bindings
        .iter()
        .filter(|b| b.step == step && b.field == field)
        .collect();
    assert_eq!(found.len(), 1, "{:#?}", candidate.bindings);
    &found[0].source
}

#[test]
fn empty_input_gives_an_empty_outcome() {
    let outcome = analyzer(1).analyze(&[]).unwrap();
    assert_eq!(
        (outcome.traces, outcome.steps, outcome.distinct_tools),
        (0, 0, 0)
    );
    assert!(outcome.patterns.is_empty());
    assert!(outcome.candidates.is_empty());
    assert!(outcome.skipped.is_empty());

    // Traces without steps count as traces and give nothing either.
    let empty = vec![trace("a", vec![]), trace("b", vec![])];
    let outcome = analyzer(1).analyze(&empty).unwrap();
    assert_eq!((outcome.traces, outcome.steps), (2, 0));
    assert!(outcome.patterns.is_empty() && outcome.candidates.is_empty());
}

fn lookup_trace(id: &str, n: usize) -> TraceWithSteps {
    trace(
        id,
        vec![
            (
                "find_user",
                json!({"name": format!("user {n}")}),
                json!({"user_id": format!("u-{n:05}")}),
            ),
            (
                "get_user",
                json!({"user_id": format!("u-{n:05}")}),
                json!({"email": format!("user{n}@example.com")}),
            ),
        ],
    )
}

#[test]
fn one_trace_needs_min_support_one_and_then_binds() {
    let one = vec![lookup_trace("only", 7)];
    // Default support (3 traces): nothing repeats, nothing is proposed.
    let outcome = ChainAnalyzer::default().analyze(&one).unwrap();
    assert_eq!(
        (outcome.traces, outcome.steps, outcome.distinct_tools),
        (1, 2, 2)
    );
    assert!(outcome.patterns.is_empty() && outcome.candidates.is_empty());

    let outcome = analyzer(1).analyze(&one).unwrap();
    assert_eq!(outcome.patterns.len(), 1);
    assert_eq!(outcome.patterns[0].tools, ["find_user", "get_user"]);
    assert_eq!(outcome.patterns[0].support, 1);
    let candidate = &outcome.candidates[0];
    assert_eq!(candidate.evidence.support, 1);
    // One occurrence: the user id is found in find_user's output.
    assert_eq!(
        source_of(candidate, 1, "/user_id"),
        &BindingSource::StepOutput {
            step: 0,
            pointer: "/user_id".into()
        }
    );
}

/// One trace of 100,000 steps: a repeated pair, mined and bound. (How long it takes is for the
/// mining benchmark to measure.)
#[test]
fn one_trace_of_100k_steps_is_mined_and_bound() {
    // (find_user get_user) 50,000 times, each pair with its own user.
    let mut steps = Vec::with_capacity(100_000);
    for n in 0..50_000 {
        let pair = lookup_trace("long", n);
        steps.extend(pair.steps);
    }
    for (i, step) in steps.iter_mut().enumerate() {
        step.step_index = i as u32;
    }
    let long = vec![TraceWithSteps {
        trace: ObservedTrace::new("long", "edge"),
        steps,
    }];

    // Every contiguous pattern up to 10 tools has support 1 and a longer one with the same
    // support, so no pattern is closed: nothing to propose, and no blowup finding that out.
    let outcome = analyzer(1).analyze(&long).unwrap();
    assert_eq!((outcome.traces, outcome.steps), (1, 100_000));
    assert!(
        outcome.patterns.is_empty(),
        "{:?}",
        outcome.patterns.first()
    );

    // All patterns (not only closed ones): for each length 1..=10, the two rotations of the
    // pair; a pattern of length L fits at 100,000 - L + 1 positions, half of them its own.
    let db = ChainAnalyzer::sequence_db(&long).unwrap();
    let patterns = spm::contiguous::mine(
        &db,
        &ContiguousOptions {
            min_support: 1,
            min_length: 1,
            max_length: Some(10),
            closed_only: false,
        },
    )
    .unwrap();
    assert_eq!(patterns.len(), 20);
    for pattern in &patterns {
        let len = pattern.items.len() as u64;
        let fits = 100_000 - len + 1;
        let starts_with_find = pattern.items[0] == db.id_of("find_user").unwrap();
        // Starting positions of the pattern's first tool among the fits: even ones for
        // find_user, odd ones for get_user.
        let expected = if starts_with_find {
            fits.div_ceil(2)
        } else {
            fits / 2
        };
        assert_eq!(pattern.occurrences, expected, "{:?}", pattern.items);
        assert_eq!(pattern.support, 1);
    }

    // Binding inference over all 50,000 occurrences of the pair in that one trace.
    let pair = [
        db.id_of("find_user").unwrap(),
        db.id_of("get_user").unwrap(),
    ];
    let found = spm::contiguous::occurrences(&db, &[pair]);
    assert_eq!(found[0].len(), 50_000);
    let pattern = Pattern::new(
        vec!["find_user".into(), "get_user".into()],
        found[0]
            .iter()
            .map(|o| Occurrence {
                trace: o.sequence as usize,
                steps: vec![o.start as usize, o.start as usize + 1],
            })
            .collect(),
    );
    let candidate = build_candidates(&long, &[pattern], &CandidateConfig::default())
        .pop()
        .unwrap()
        .unwrap();
    assert_eq!(candidate.evidence.occurrences, 50_000);
    assert_eq!(candidate.evidence.support, 1);
    let binding = candidate
        .bindings
        .iter()
        .find(|b| b.step == 1 && b.field == "/user_id")
        .unwrap();
    assert_eq!(
        binding.source,
        BindingSource::StepOutput {
            step: 0,
            pointer: "/user_id".into()
        }
    );
    assert_eq!(binding.confidence, 1.0);
    assert_eq!(candidate.evidence.reproduced, 1.0);
}

#[test]
fn arguments_that_are_not_objects() {
    // search takes a bare string, fetch an array, log null; outputs are objects, a string and
    // an array.
    let traces: Vec<TraceWithSteps> = (0..4)
        .map(|n| {
            trace(
                &format!("t{n}"),
                vec![
                    (
                        "search",
                        json!(format!("query {n}")),
                        json!({"doc_id": format!("doc-{n:04}")}),
                    ),
                    (
                        "fetch",
                        json!([format!("doc-{n:04}"), 1]),
                        json!("plain text"),
                    ),
                    ("log", Value::Null, json!([1, 2, 3])),
                ],
            )
        })
        .collect();
    let outcome = analyzer(3).analyze(&traces).unwrap();
    assert!(outcome.skipped.is_empty(), "{:?}", outcome.skipped);
    let candidate = outcome
        .candidates
        .iter()
        .find(|c| c.tools == ["search", "fetch", "log"])
        .unwrap();
    assert_eq!(candidate.evidence.support, 4);
    assert_eq!(candidate.evidence.occurrences, 4);
    // Only object arguments have fields to bind.
    assert!(candidate.bindings.is_empty(), "{:#?}", candidate.bindings);
    // A mapping cannot express a non-object argument: those steps are flagged, and replaying
    // the mappings reproduces no occurrence.
    assert_eq!(
        candidate.flow_metadata()["steps_given_whole_context"],
        json!(["search", "fetch", "log"])
    );
    assert_eq!(candidate.evidence.reproduced, 0.0);
    // Non-object outputs are profiled wrapped as {"result": ...}.
    assert_eq!(
        candidate.tool_schemas["fetch"].output_schema["properties"]["result"]["type"],
        "string"
    );
    assert_eq!(
        candidate.tool_schemas["log"].output_schema["properties"]["result"]["type"],
        "array"
    );
    assert_eq!(
        candidate.tool_schemas["search"].input_schema["type"],
        "string"
    );
    assert_eq!(candidate.tool_schemas["log"].input_schema["type"], "null");
}

/// Read the flow's metadata whatever its shape.
trait FlowMetadata {
    fn flow_metadata(&self) -> Value;
}

impl FlowMetadata for chainweaver_recorder::model::candidate::Candidate {
    fn flow_metadata(&self) -> Value {
        let flow = serde_json::to_value(&self.flow).unwrap();
        flow["metadata"].clone()
    }
}

#[test]
fn huge_outputs_are_bounded_and_still_bind() {
    // Each report carries 4 MB of text and a 50,000-element list; the next step reads its id.
    let blob = "x".repeat(4 << 20);
    let traces: Vec<TraceWithSteps> = (0..3)
        .map(|n| {
            trace(
                &format!("t{n}"),
                vec![
                    (
                        "get_report",
                        json!({"name": format!("report {n}")}),
                        json!({
                            "body": blob,
                            "rows": (0..50_000).collect::<Vec<u32>>(),
                            "report_id": format!("rep-{n:04}"),
                        }),
                    ),
                    (
                        "archive_report",
                        json!({"report_id": format!("rep-{n:04}")}),
                        json!({"archived": true}),
                    ),
                ],
            )
        })
        .collect();
    let outcome = analyzer(3).analyze(&traces).unwrap();
    let candidate = outcome
        .candidates
        .iter()
        .find(|c| c.tools == ["get_report", "archive_report"])
        .unwrap();
    // The id sits after 50,000 list nodes, beyond the default node cap of 20,000 per payload:
    // it is not indexed, so it is a flow input, flagged neither ambiguous nor low-confidence.
    let source = source_of(candidate, 1, "/report_id");
    assert!(
        matches!(source, BindingSource::FlowInput { .. }),
        "{source:?}"
    );
    // With a larger cap the same data binds to the output.
    let mut config = MineConfig {
        min_support: 3,
        ..MineConfig::default()
    };
    config.candidate.infer.max_nodes_per_payload = 100_000;
    let outcome = ChainAnalyzer::new(config).analyze(&traces).unwrap();
    let candidate = &outcome.candidates[0];
    assert_eq!(
        source_of(candidate, 1, "/report_id"),
        &BindingSource::StepOutput {
            step: 0,
            pointer: "/report_id".into()
        }
    );
    assert_eq!(
        candidate.tool_schemas["get_report"].output_schema["properties"]["rows"]["items"]["type"],
        "integer"
    );
}

/// An object nested `depth` levels deep under `"child"`, built without recursion.
fn nested(depth: usize) -> Value {
    // Moved in level by level: `json!` would serialize (recursively) the value it wraps.
    let mut value = json!("leaf");
    for _ in 0..depth {
        let mut map = serde_json::Map::new();
        map.insert("child".into(), value);
        value = Value::Object(map);
    }
    value
}

/// Take a deeply nested value apart level by level (serde_json drops values recursively).
fn dismantle(value: Value) {
    let mut rest = value;
    while let Value::Object(mut map) = rest {
        match map.remove("child") {
            Some(inner) => rest = inner,
            None => break,
        }
    }
}

#[test]
fn deeply_nested_outputs_do_not_overflow_the_stack() {
    // Run where a main thread would: 8 MiB of stack. serde_json itself clones, compares and
    // drops values recursively, so a depth-10,000 value needs a few MiB whatever the analyzer
    // does; the analyzer's own walks stop recursing at a fixed depth.
    let handle = std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(|| {
            let mut traces: Vec<TraceWithSteps> = (0..3)
                .map(|n| {
                    trace(
                        &format!("t{n}"),
                        vec![
                            ("get_tree", json!({"root": format!("node-{n:04}")}), {
                                let mut output = serde_json::Map::new();
                                output.insert("tree".into(), nested(10_000));
                                output.insert("tree_id".into(), json!(format!("tree-{n:04}")));
                                Value::Object(output)
                            }),
                            (
                                "render_tree",
                                json!({"tree_id": format!("tree-{n:04}")}),
                                json!({"svg": "<svg/>"}),
                            ),
                        ],
                    )
                })
                .collect();
            let outcome = analyzer(3).analyze(&traces).unwrap();
            let candidate = outcome
                .candidates
                .iter()
                .find(|c| c.tools == ["get_tree", "render_tree"])
                .unwrap()
                .clone();
            drop(outcome);
            // Take the deep values apart before they drop.
            for trace in &mut traces {
                if let Some(Value::Object(mut output)) = trace.steps[0].outputs.take()
                    && let Some(tree) = output.remove("tree")
                {
                    dismantle(tree);
                }
            }
            candidate
        })
        .unwrap();
    let candidate = handle.join().unwrap();
    assert_eq!(
        source_of(&candidate, 1, "/tree_id"),
        &BindingSource::StepOutput {
            step: 0,
            pointer: "/tree_id".into()
        }
    );
    // The schema describes the first 64 levels and stops there.
    let mut schema = &candidate.tool_schemas["get_tree"].output_schema["properties"]["tree"];
    let mut levels = 0;
    while let Some(child) = schema.get("properties").and_then(|p| p.get("child")) {
        schema = child;
        levels += 1;
    }
    assert_eq!(levels, 63);
    assert_eq!(schema["type"], "object");
}

#[test]
fn five_thousand_distinct_tools() {
    // 2,500 pairs of distinct tools (5,000 tools), each pair in three traces, the second tool
    // reading the first one's output.
    let mut traces = Vec::new();
    for pair in 0..2_500 {
        for copy in 0..3 {
            let id = format!("p{pair}-c{copy}");
            traces.push(trace(
                &id,
                vec![
                    (
                        &format!("open_{pair:04}"),
                        json!({"n": copy}),
                        json!({"handle": format!("h-{pair}-{copy}")}),
                    ),
                    (
                        &format!("read_{pair:04}"),
                        json!({"handle": format!("h-{pair}-{copy}")}),
                        json!({"ok": true}),
                    ),
                ],
            ));
        }
    }
    let outcome = analyzer(3).analyze(&traces).unwrap();
    assert_eq!(outcome.distinct_tools, 5_000);
    assert_eq!(outcome.steps, 15_000);
    assert_eq!(outcome.patterns.len(), 2_500);
    assert!(
        outcome
            .patterns
            .iter()
            .all(|p| p.support == 3 && p.tools.len() == 2)
    );
    assert_eq!(
        outcome.candidates.len(),
        MineConfig::default().max_candidates
    );
    for candidate in &outcome.candidates {
        let pair = &candidate.tools[0]["open_".len()..];
        assert_eq!(candidate.tools[1], format!("read_{pair}"));
        assert_eq!(
            source_of(candidate, 1, "/handle"),
            &BindingSource::StepOutput {
                step: 0,
                pointer: "/handle".into()
            }
        );
    }
    // The same through the SPMF-free database API: 5,000 names interned.
    let db: SequenceDb = ChainAnalyzer::sequence_db(&traces).unwrap();
    assert_eq!(db.num_items(), 5_000);
}
