//! Verification by replay: mined candidates run through the executor against held-out traffic,
//! with recorded tools (real tau-bench logs, synthetic traffic with planted flows) and with live
//! command tools (real child processes).

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chainweaver::tool::command::parse_manifest;
use chainweaver::verify::{
    Cassette, HeldOut, IgnorePaths, Split, ToolSource, Verifier, VerifyOptions,
};
use chainweaver_analyzer::mine::{ChainAnalyzer, MineConfig};
use chainweaver_recorder::import::{ImportOptions, import_path};
use chainweaver_recorder::model::candidate::{
    Candidate, FailureMode, RejectionCause, VerdictStatus,
};
use chainweaver_recorder::model::flow::FlowDefinition;
use chainweaver_recorder::model::{ObservedStep, ObservedTrace, TraceWithSteps};
use chainweaver_recorder::synth::{Generator, GeneratorConfig};
use serde_json::{Value, json};

use crate::{chainweaver, shared_datasets};

/// Import files with the real importers into traces, in file order.
fn import(paths: &[PathBuf]) -> Vec<TraceWithSteps> {
    let mut traces: Vec<TraceWithSteps> = Vec::new();
    for path in paths {
        let mut sink = |batch: chainweaver_recorder::import::ImportBatch| {
            for trace in batch.traces {
                traces.push(TraceWithSteps {
                    trace,
                    steps: Vec::new(),
                });
            }
            for step in batch.steps {
                let owner = traces
                    .iter_mut()
                    .rev()
                    .find(|t| t.trace.trace_id == step.trace_id)
                    .expect("a batch's steps belong to its traces");
                owner.steps.push(step);
            }
            Ok(())
        };
        import_path(path, &ImportOptions::default(), &mut sink, &mut |_| {}).unwrap();
    }
    traces
}

fn tau_bench() -> Option<Vec<TraceWithSteps>> {
    let dir = shared_datasets()?.join("tau-bench-retail");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    Some(import(&files))
}

fn recorded(traces: &[TraceWithSteps]) -> Verifier {
    let cassette = Cassette::from_traces(traces, IgnorePaths::default());
    Verifier::new(
        ToolSource::Recorded(Arc::new(cassette)),
        VerifyOptions::default(),
    )
}

fn mine(traces: &[TraceWithSteps]) -> Vec<Candidate> {
    ChainAnalyzer::new(MineConfig::default())
        .analyze(traces)
        .unwrap()
        .candidates
}

fn input_mapping(flow: &mut FlowDefinition, step: usize) -> &mut serde_json::Map<String, Value> {
    match flow {
        FlowDefinition::Linear(flow) => &mut flow.steps[step].input_mapping,
        FlowDefinition::Dag(flow) => &mut flow.steps[step].input_mapping,
    }
}

#[test]
fn tau_bench_user_lookup_is_verified_and_an_altered_binding_is_rejected_with_its_pointer() {
    let Some(traces) = tau_bench() else {
        return;
    };
    assert_eq!(traces.len(), 400);
    let split = Split::default();
    let (mined, held_out) = split.partition(traces.clone(), |t| t.trace.trace_id.as_str());
    assert_eq!((mined.len(), held_out.len()), (315, 85));
    let candidates = mine(&mined);
    let candidate = candidates
        .iter()
        .find(|c| c.tools == ["find_user_id_by_name_zip", "get_user_details"])
        .expect("the user lookup chain is mined");
    let verifier = recorded(&traces);
    let held = HeldOut::new(held_out.iter().collect());
    let verdict = verifier.verify(candidate, &held).unwrap();
    assert_eq!(verdict.status, VerdictStatus::Verified, "{verdict:#?}");
    // 59 of the 85 held-out trajectories hold the chain; every one replays exactly.
    assert_eq!(
        (verdict.occurrences_replayed, verdict.exact_matches),
        (59, 59),
        "{verdict:#?}"
    );
    assert_eq!(verdict.exact_rate, 1.0);
    assert_eq!(
        verdict.reason,
        "59/59 held-out occurrences replayed exactly (100.0%)"
    );
    // Held out means held out: no replayed occurrence comes from a mined trace.
    let mined_ids: HashSet<&str> = mined.iter().map(|t| t.trace.trace_id.as_str()).collect();
    assert!(
        verdict
            .diffs
            .iter()
            .all(|d| !mined_ids.contains(d.occurrence.trace_id.as_str()))
    );

    // Bind get_user_details.user_id to the zip code instead of the first step's output.
    let mut altered = candidate.clone();
    let mapping = input_mapping(&mut altered.flow, 1);
    assert!(mapping.contains_key("user_id"), "{mapping:?}");
    mapping.insert("user_id".into(), json!("zip"));
    let verdict = verifier.verify(&altered, &held).unwrap();
    assert_eq!(verdict.status, VerdictStatus::Rejected, "{verdict:#?}");
    assert_eq!(verdict.exact_matches, 0);
    assert_eq!(verdict.failures.binding_wrong, verdict.occurrences_replayed);
    let diff = &verdict.diffs[0];
    assert_eq!(diff.step, 1);
    assert_eq!(diff.tool_name, "get_user_details");
    assert_eq!(diff.pointer, "/inputs/user_id");
    assert_ne!(diff.expected, diff.actual);
    assert!(
        verdict.reason.contains("binding wrong"),
        "{}",
        verdict.reason
    );
}

#[test]
fn on_synthetic_traffic_the_verified_candidates_are_the_planted_flows() {
    let mut generator = Generator::new(GeneratorConfig {
        traces: 2000,
        seed: 5,
        ..GeneratorConfig::default()
    });
    let traces: Vec<TraceWithSteps> = generator.by_ref().collect();
    let truth = generator.ground_truth().clone();
    let (mined, held_out) =
        Split::default().partition(traces.clone(), |t| t.trace.trace_id.as_str());
    let candidates = mine(&mined);
    let verifier = recorded(&traces);
    let held = HeldOut::new(held_out.iter().collect());
    let mut verified = BTreeSet::new();
    let mut rejected = BTreeSet::new();
    for candidate in &candidates {
        let verdict = verifier.verify(candidate, &held).unwrap();
        match verdict.status {
            VerdictStatus::Verified => verified.insert(candidate.tools.clone()),
            _ => rejected.insert(candidate.tools.clone()),
        };
    }
    let planted: BTreeSet<Vec<String>> = truth.flows.iter().map(|f| f.tools.clone()).collect();
    assert_eq!(verified, planted);
    // The decoys (the same tools called with unrelated arguments) were proposed, and rejected.
    assert!(!truth.decoys.is_empty());
    for decoy in &truth.decoys {
        assert!(
            rejected.contains(decoy),
            "decoy {decoy:?} was not even proposed"
        );
    }
}

/// Ten traces of `find_id(name) -> get_info(id)`, recorded with a fixed `stamp` of 1.
fn lookup_traces() -> Vec<TraceWithSteps> {
    (0..10)
        .map(|i| {
            let id = format!("{}-{i}", if i < 5 { "mined" } else { "held" });
            let name = format!("user{i}");
            let mut find = ObservedStep::new(&id, 0, "find_id", json!({"name": name}));
            find.outputs = Some(json!({"id": format!("id-{name}")}));
            let mut get =
                ObservedStep::new(&id, 1, "get_info", json!({"id": format!("id-{name}")}));
            get.outputs = Some(json!({"id": format!("id-{name}"), "stamp": 1}));
            TraceWithSteps {
                trace: ObservedTrace::new(&id, "test"),
                steps: vec![find, get],
            }
        })
        .collect()
}

/// A manifest of real command tools: `find_id` is deterministic, `get_info` prints `stamp` from
/// `get_info_stamp` (a Python expression) within `timeout` seconds, and may be left writable.
/// Generous timeouts: the machine may be busy, and a slow start is not what is tested.
fn manifest(dir: &Path, get_info_stamp: &str, get_info_read_only: bool, timeout: f64) -> String {
    let find = dir.join("find_id.py");
    std::fs::write(
        &find,
        "import json, sys\nd = json.load(sys.stdin)\nprint(json.dumps({'id': 'id-' + d['name']}))\n",
    )
    .unwrap();
    let get = dir.join("get_info.py");
    std::fs::write(
        &get,
        format!(
            "import json, sys, time, random\nd = json.load(sys.stdin)\nprint(json.dumps({{'id': d['id'], 'stamp': {get_info_stamp}}}))\n"
        ),
    )
    .unwrap();
    format!(
        "[[tool]]\nname = \"find_id\"\nargv = [\"python3\", \"{}\"]\nread_only = true\n\n[[tool]]\nname = \"get_info\"\nargv = [\"python3\", \"{}\"]\nread_only = {get_info_read_only}\ntimeout_seconds = {timeout:?}\n",
        find.display(),
        get.display()
    )
}

fn live(dir: &Path, manifest_text: &str, allow_side_effects: bool) -> Verifier {
    let path = dir.join("tools.toml");
    let tools = parse_manifest(manifest_text, &path, dir).unwrap();
    Verifier::new(
        ToolSource::Live {
            tools,
            allow_side_effects,
            ignore: IgnorePaths::default(),
        },
        VerifyOptions::default(),
    )
}

fn lookup_candidate(traces: &[TraceWithSteps]) -> Candidate {
    let mined: Vec<TraceWithSteps> = traces[..5].to_vec();
    let candidate = mine(&mined)
        .into_iter()
        .find(|c| c.tools == ["find_id", "get_info"])
        .expect("find_id -> get_info is mined");
    assert_eq!(
        input_mapping(&mut candidate.flow.clone(), 1).get("id"),
        Some(&json!("find_id.id")),
        "get_info.id is bound to find_id's output"
    );
    candidate
}

#[test]
fn live_replay_reports_a_tool_that_became_nondeterministic() {
    let dir = tempfile::tempdir().unwrap();
    let traces = lookup_traces();
    let candidate = lookup_candidate(&traces);
    let held = HeldOut::new(traces[5..].iter().collect());

    // Still deterministic: every held-out occurrence replays exactly.
    let steady = live(dir.path(), &manifest(dir.path(), "1", true, 30.0), false);
    let verdict = steady.verify(&candidate, &held).unwrap();
    assert_eq!(verdict.mode, "live");
    assert_eq!(
        (verdict.exact_matches, verdict.occurrences_replayed),
        (5, 5),
        "{verdict:#?}"
    );
    assert_eq!(verdict.status, VerdictStatus::Verified);

    // Now get_info stamps the time: the same input, another output.
    let drifting = live(
        dir.path(),
        &manifest(
            dir.path(),
            "time.time_ns() + random.randint(2, 10**6)",
            true,
            30.0,
        ),
        false,
    );
    let verdict = drifting.verify(&candidate, &held).unwrap();
    assert_eq!(verdict.status, VerdictStatus::Rejected, "{verdict:#?}");
    assert_eq!(verdict.failures.tool_output_changed, 5);
    assert!(
        verdict.reason.contains("tool output changed"),
        "{}",
        verdict.reason
    );
    let diff = &verdict.diffs[0];
    assert_eq!((diff.step, diff.tool_name.as_str()), (1, "get_info"));
    assert_eq!(diff.pointer, "/outputs/stamp");
    assert_eq!(diff.expected, Some(json!(1)));
    assert_eq!(
        FailureMode::ToolOutputChanged.describe(),
        "tool output changed"
    );
}

#[test]
fn live_replay_refuses_side_effects_missing_tools_and_survives_a_hanging_tool() {
    let dir = tempfile::tempdir().unwrap();
    let traces = lookup_traces();
    let candidate = lookup_candidate(&traces);
    let held = HeldOut::new(traces[5..].iter().collect());

    // get_info is not marked read-only: refused, unless side effects are allowed.
    let text = manifest(dir.path(), "1", false, 30.0);
    let err = live(dir.path(), &text, false)
        .verify(&candidate, &held)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("get_info") && err.contains("--allow-side-effects"),
        "{err}"
    );
    assert!(err.contains(&candidate.id), "{err}");
    let verdict = live(dir.path(), &text, true)
        .verify(&candidate, &held)
        .unwrap();
    assert_eq!(verdict.exact_matches, 5);

    // A manifest without the tool: an error naming it.
    let only_find = format!(
        "[[tool]]\nname = \"find_id\"\nargv = [\"python3\", \"{}\"]\nread_only = true\n",
        dir.path().join("find_id.py").display()
    );
    let err = live(dir.path(), &only_find, false)
        .verify(&candidate, &held)
        .unwrap_err()
        .to_string();
    assert!(err.contains("declares no tool `get_info`"), "{err}");

    // A tool that hangs past its timeout fails its step; the verdict still comes back.
    let hanging = manifest(dir.path(), "time.sleep(30)", true, 1.0);
    let verdict = live(dir.path(), &hanging, false)
        .verify(&candidate, &held)
        .unwrap();
    assert_eq!(verdict.failures.tool_failed, 5, "{verdict:#?}");
    assert_eq!(verdict.status, VerdictStatus::Rejected);
}

#[test]
fn recorded_replay_errors_name_the_tool_without_recordings() {
    let traces = lookup_traces();
    let candidate = lookup_candidate(&traces);
    // A cassette of find_id only.
    let only_find: Vec<TraceWithSteps> = traces
        .iter()
        .map(|t| TraceWithSteps {
            trace: t.trace.clone(),
            steps: t.steps[..1].to_vec(),
        })
        .collect();
    let err = recorded(&only_find)
        .verify(&candidate, &HeldOut::new(traces.iter().collect()))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("get_info") && err.contains("no recordings"),
        "{err}"
    );
}

#[test]
fn a_candidate_absent_from_held_out_traffic_is_rejected_for_too_few_occurrences() {
    let traces = lookup_traces();
    let candidate = lookup_candidate(&traces);
    // Held-out traffic that never calls the candidate's tools: nothing to replay, and the
    // cassette has no recordings of them. That is a rejection with its cause, not an error.
    let unrelated: Vec<TraceWithSteps> = traces
        .iter()
        .map(|t| {
            let mut t = t.clone();
            for step in &mut t.steps {
                step.tool_name = format!("other_{}", step.tool_name);
            }
            t
        })
        .collect();
    let verdict = recorded(&unrelated)
        .verify(&candidate, &HeldOut::new(unrelated.iter().collect()))
        .unwrap();
    assert_eq!(verdict.status, VerdictStatus::Rejected);
    assert_eq!(verdict.cause, Some(RejectionCause::TooFewOccurrences));
    assert_eq!(verdict.occurrences_found, 0);
    assert_eq!(verdict.occurrences_replayed, 0);
}

/// Run the binary with `--format json`, check it succeeded, and parse what it printed.
fn json_ok(dir: &Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    let output = chainweaver(dir, &all);
    assert!(
        output.status.success(),
        "chainweaver {all:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The tools of the flows planted in the sample traffic, from its ground-truth file.
fn planted_flows(sample: &Path) -> BTreeSet<Vec<String>> {
    let truth: Value = serde_json::from_str(
        &std::fs::read_to_string(sample.with_file_name("support-agent.truth.json")).unwrap(),
    )
    .unwrap();
    truth["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| serde_json::from_value(f["tools"].clone()).unwrap())
        .collect()
}

#[test]
fn analyze_verifies_and_promote_registers_only_verified_flows() {
    let dir = tempfile::tempdir().unwrap();
    let sample =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("datasets/sample/support-agent.jsonl");
    let sample = sample.to_str().unwrap();

    // A store with traces but no candidates: a clear error with a hint.
    json_ok(dir.path(), &["-q", "import", sample]);
    let empty = chainweaver(dir.path(), &["verify"]);
    assert_eq!(empty.status.code(), Some(1));
    let message = String::from_utf8_lossy(&empty.stderr);
    assert!(
        message.contains("no candidates") && message.contains("analyze"),
        "{message}"
    );

    let outcome = json_ok(
        dir.path(),
        &["-q", "analyze", sample, "--report", "report.md"],
    );
    let report = outcome["report"].as_array().unwrap();
    let status = |e: &Value| e["verdict"]["status"].as_str().unwrap_or("").to_string();
    let verified: Vec<&Value> = report.iter().filter(|e| status(e) == "verified").collect();
    // Exactly the 6 planted flows are verified.
    let planted = planted_flows(Path::new(sample));
    assert_eq!(planted.len(), 6);
    let verified_tools: BTreeSet<Vec<String>> = verified
        .iter()
        .map(|e| serde_json::from_value(e["candidate"]["tools"].clone()).unwrap())
        .collect();
    assert_eq!(verified_tools, planted);
    assert_eq!(verified.len(), planted.len());
    // Verified flows come first.
    let first_other = report.iter().position(|e| status(e) != "verified").unwrap();
    assert_eq!(first_other, verified.len());
    let markdown = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(markdown.contains("**Verdict: verified**"), "{markdown}");

    // Verdicts are in the store.
    let verdicts = json_ok(dir.path(), &["verdicts", "list"]);
    assert_eq!(verdicts["verdicts"].as_array().unwrap().len(), report.len());

    // Promotion: a rejected candidate is refused, then forced; a verified one is registered.
    let rejected = report
        .iter()
        .find(|e| status(e) == "rejected")
        .map(|e| e["candidate"]["id"].as_str().unwrap().to_string())
        .unwrap();
    let refused = chainweaver(dir.path(), &["flows", "promote", &rejected]);
    assert_eq!(refused.status.code(), Some(1));
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        message.contains("rejected") && message.contains("--force"),
        "{message}"
    );
    assert!(
        chainweaver(dir.path(), &["flows", "promote", &rejected, "--force"])
            .status
            .success()
    );
    let good = verified[0]["candidate"]["id"].as_str().unwrap();
    let promoted = chainweaver(dir.path(), &["flows", "promote", good]);
    assert!(
        promoted.status.success(),
        "{}",
        String::from_utf8_lossy(&promoted.stderr)
    );
    let flows = json_ok(dir.path(), &["flows", "list"]);
    assert_eq!(flows["schema_version"], json!(1), "{flows:#}");
    let status_of = |name: &str| {
        flows["flows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .map(|f| f["status"].clone())
    };
    assert_eq!(status_of(good), Some(json!("ACTIVE")), "{flows:#}");
    assert_eq!(status_of(&rejected), Some(json!("ACTIVE")), "{flows:#}");

    // Verifying one candidate again by id gives the same verdict.
    let again = json_ok(dir.path(), &["verify", good]);
    assert_eq!(again["verified"][0]["verdict"]["status"], "verified");
    assert_eq!(
        again["verified"][0]["verdict"]["exact_matches"],
        verified[0]["verdict"]["exact_matches"]
    );
}

#[test]
fn cross_validated_analyze_verifies_the_planted_flows_across_folds() {
    let dir = tempfile::tempdir().unwrap();
    let sample =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("datasets/sample/support-agent.jsonl");
    let outcome = json_ok(
        dir.path(),
        &["-q", "analyze", sample.to_str().unwrap(), "--folds", "3"],
    );
    assert_eq!(outcome["split"], "3-fold cross-validation");
    let planted = planted_flows(&sample);
    let verified: BTreeSet<Vec<String>> = outcome["report"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["verdict"]["status"] == "verified")
        .map(|e| serde_json::from_value(e["candidate"]["tools"].clone()).unwrap())
        .collect();
    assert_eq!(verified, planted);
    // Every trace was replayed once: the folds' held-out occurrences add up over the folds.
    let top = &outcome["report"][0]["verdict"];
    assert!(
        top["reason"].as_str().unwrap().contains("of 3 folds"),
        "{top}"
    );
    assert_eq!(top["holdout_traces"], 400, "{top}");
    assert_eq!(
        (&top["occurrences_replayed"], &top["exact_matches"]),
        (&json!(81), &json!(81)),
        "{top}"
    );
}

/// `analyze` on tau-bench retail proposes one flow per behaviour: the loop over a user's orders
/// once, whatever its count and whichever lookup starts it, its parts folded in, and the
/// proposals cover at least 90% of what the unfolded verified candidates cover.
#[test]
fn tau_bench_proposals_fold_into_distinct_behaviours() {
    let Some(shared) = shared_datasets() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut store =
        chainweaver_recorder::store::SqliteStore::open(&dir.path().join("tau.db")).unwrap();
    let request = chainweaver::pipeline::AnalyzeRequest {
        import: Some(chainweaver::pipeline::ImportRequest {
            paths: vec![shared.join("tau-bench-retail")],
            rejects: dir.path().join("rejects.jsonl"),
            ..Default::default()
        }),
        ..Default::default()
    };
    let report =
        chainweaver::pipeline::analyze(&mut store, &request, &chainweaver::pipeline::NoProgress)
            .unwrap();
    let behaviours = &report.behaviours;
    assert!(
        (2..=8).contains(&behaviours.len()),
        "{:#?}",
        behaviours.iter().map(|b| &b.name).collect::<Vec<_>>()
    );
    // Every verified or partial candidate belongs to exactly one behaviour.
    let proposed: Vec<&str> = report
        .report
        .iter()
        .filter(|e| {
            e.verdict.as_ref().is_some_and(|v| {
                matches!(v.status, VerdictStatus::Verified | VerdictStatus::Partial)
            })
        })
        .map(|e| e.candidate.id.as_str())
        .collect();
    let mut folded: Vec<&str> = behaviours
        .iter()
        .flat_map(|b| b.variants.iter().map(|v| v.candidate_id.as_str()))
        .collect();
    folded.sort_unstable();
    let mut expected = proposed.clone();
    expected.sort_unstable();
    assert_eq!(folded, expected);
    // Names are unique.
    let names: HashSet<&str> = behaviours.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names.len(), behaviours.len());
    // The order loop after the user lookup is one behaviour, with both lookups as its first
    // step and several loop counts folded in.
    let loops: Vec<_> = behaviours
        .iter()
        .filter(|b| {
            let tools: Vec<Vec<&str>> = b
                .shape
                .iter()
                .map(|s| s.tools.iter().map(String::as_str).collect())
                .collect();
            tools.len() == 3
                && tools[1] == ["get_user_details"]
                && tools[2] == ["get_order_details"]
                && b.shape[2].repeated
        })
        .collect();
    assert_eq!(loops.len(), 1, "{behaviours:#?}");
    let order_loop = loops[0];
    assert_eq!(
        order_loop.shape[0].tools,
        ["find_user_id_by_name_zip", "find_user_id_by_email"]
    );
    assert_eq!(
        order_loop.name,
        "find_user_id_by_name_zip -> get_user_details -> each get_order_details"
    );
    let loop_counts: BTreeSet<usize> = order_loop
        .variants
        .iter()
        .filter(|v| {
            v.tools[0] == "find_user_id_by_name_zip"
                && v.kind != chainweaver_recorder::model::candidate::VariantKind::Part
        })
        .map(|v| v.tools.len() - 2)
        .collect();
    assert!(loop_counts.len() >= 3, "{loop_counts:?}");
    // Its lead is one flow with a map step over the user's orders: the agent read some of
    // them, so its selection is an input; verified on held-out runs of several lengths.
    let lead = report
        .report
        .iter()
        .find(|e| e.candidate.id == order_loop.lead)
        .unwrap();
    let map_step = lead.candidate.flow.map_step();
    assert_eq!(map_step, Some(2), "{:#?}", lead.candidate.flow);
    let binding = lead
        .candidate
        .bindings
        .iter()
        .find(|b| b.step == 2 && b.field == "/order_id")
        .unwrap();
    assert_eq!(
        binding.source,
        chainweaver_recorder::model::candidate::BindingSource::Each {
            step: 1,
            list_pointer: "/orders".into(),
            item_pointer: String::new(),
            select_input: Some("selected_orders".into()),
        }
    );
    let verdict = lead.verdict.as_ref().unwrap();
    assert_eq!(verdict.status, VerdictStatus::Verified, "{verdict:#?}");
    let held_out_lengths: BTreeSet<usize> = lead
        .candidate
        .evidence
        .loop_lengths
        .keys()
        .copied()
        .collect();
    assert!(held_out_lengths.len() >= 3, "{held_out_lengths:?}");
    // The replays covered runs of more than one length: count them in the held-out traces.
    let held_out =
        chainweaver::verify::ToolIndex::from_store(&store, &|id| Split::default().is_holdout(id))
            .unwrap();
    let verifier = Verifier::new(ToolSource::Recorded(Default::default()), Default::default());
    let replayed_lengths: BTreeSet<usize> = verifier
        .occurrences(&lead.candidate, &held_out)
        .iter()
        .map(|o| o.steps.len() - 2)
        .collect();
    assert!(replayed_lengths.len() >= 2, "{replayed_lengths:?}");
    assert_eq!(
        verdict.exact_matches, verdict.occurrences_replayed,
        "{verdict:#?}"
    );
    // No other behaviour is just `get_user_details -> get_order_details` again.
    assert!(!behaviours.iter().any(|b| b.shape.len() == 2
        && b.shape[0].tools == ["get_user_details"]
        && b.shape[1].tools == ["get_order_details"]));
    // Coverage of the held-out calls: folding loses at most a tenth of it.
    let coverage = report.coverage;
    assert!(coverage.calls > 0);
    assert!(
        coverage.by_verified_behaviours * 10 >= coverage.by_verified_candidates * 9,
        "{coverage:?}"
    );
    // And the round trips the proposals save on it, each call counted once: at least 90% of
    // what every verified candidate unfolded (the flood of near-duplicates) would save.
    assert!(coverage.round_trips_saved_by_verified_candidates > 0);
    assert!(
        coverage.round_trips_saved_by_verified_behaviours * 10
            >= coverage.round_trips_saved_by_verified_candidates * 9,
        "{coverage:?}"
    );
}

/// Traces of an agent that lists a folder and reads every file in it, in order (1 to 4 files),
/// and traces where it starts a job and polls it with the same argument 1 to 3 times.
fn folder_traces(count: usize) -> Vec<TraceWithSteps> {
    (0..count)
        .map(|i| {
            let id = format!("folder-{i}");
            let folder = format!("dir-{i}");
            let files: Vec<String> = (0..1 + i % 4).map(|f| format!("{folder}/f{f}")).collect();
            let mut steps = Vec::new();
            let mut list = ObservedStep::new(&id, 0, "list_folder", json!({"folder": folder}));
            list.outputs = Some(json!({"files": files}));
            steps.push(list);
            for file in &files {
                let index = steps.len() as u32;
                let mut read = ObservedStep::new(&id, index, "read_file", json!({"path": file}));
                read.outputs = Some(json!({"text": format!("text of {file}")}));
                steps.push(read);
            }
            TraceWithSteps {
                trace: ObservedTrace::new(&id, "test"),
                steps,
            }
        })
        .chain((0..count).map(|i| {
            let id = format!("poll-{i}");
            let job = format!("job-{i}");
            let mut start = ObservedStep::new(&id, 0, "start_job", json!({"task": i}));
            start.outputs = Some(json!({"job": job}));
            let mut steps = vec![start];
            for _ in 0..1 + i % 3 {
                let index = steps.len() as u32;
                let mut poll = ObservedStep::new(&id, index, "poll_job", json!({"job": job}));
                poll.outputs = Some(json!({"state": "running"}));
                steps.push(poll);
            }
            TraceWithSteps {
                trace: ObservedTrace::new(&id, "test"),
                steps,
            }
        }))
        .collect()
}

/// A loop that covers its whole list becomes one map step over the list, with no selection
/// input, verified on held-out runs of every length; a loop over no list (polling) does not.
#[test]
fn a_loop_over_a_whole_list_is_one_map_step_verified_on_every_length() {
    let traces = folder_traces(200);
    let split = Split::default();
    let (held, mined): (Vec<&TraceWithSteps>, Vec<&TraceWithSteps>) = traces
        .iter()
        .partition(|t| split.is_holdout(&t.trace.trace_id));
    let mined: Vec<TraceWithSteps> = mined.into_iter().cloned().collect();
    let candidates = mine(&mined);
    let looped: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| c.flow.map_step().is_some())
        .collect();
    assert_eq!(
        looped.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        ["list_folder_then_each_read_file"],
        "{:?}",
        candidates.iter().map(|c| &c.id).collect::<Vec<_>>()
    );
    let candidate = looped[0];
    assert_eq!(candidate.step_labels(), ["list_folder", "each read_file"]);
    assert_eq!(
        candidate.bindings[1].source,
        chainweaver_recorder::model::candidate::BindingSource::Each {
            step: 0,
            list_pointer: "/files".into(),
            item_pointer: String::new(),
            select_input: None,
        }
    );
    let lengths: Vec<usize> = candidate.evidence.loop_lengths.keys().copied().collect();
    assert_eq!(lengths, [1, 2, 3, 4]);
    let mined_folders = mined
        .iter()
        .filter(|t| t.trace.trace_id.starts_with("folder"))
        .count();
    assert_eq!(
        candidate.evidence.loop_lengths.values().sum::<usize>(),
        mined_folders
    );
    // The polling loop is still mined, unrolled, but is no map step.
    assert!(
        candidates
            .iter()
            .any(|c| c.tools == ["start_job", "poll_job", "poll_job"])
    );

    let verifier = recorded(&traces);
    let held_out = HeldOut::new(held);
    let verdict = verifier.verify(candidate, &held_out).unwrap();
    assert_eq!(verdict.status, VerdictStatus::Verified, "{verdict:#?}");
    assert_eq!(verdict.exact_matches, verdict.occurrences_replayed);
    let replayed: BTreeSet<usize> = verifier
        .occurrences(candidate, held_out.index())
        .iter()
        .map(|o| o.steps.len() - 1)
        .collect();
    assert_eq!(replayed, BTreeSet::from([1, 2, 3, 4]));

    // A map step that iterates a selection nobody passes no longer replays the agent's runs.
    let mut short = candidate.clone();
    let for_each = match &mut short.flow {
        FlowDefinition::Linear(flow) => flow.steps[1].for_each.as_mut(),
        FlowDefinition::Dag(flow) => flow.steps[1].for_each.as_mut(),
    };
    for_each.unwrap().select = Some("/pick".into());
    let verdict = verifier.verify(&short, &held_out).unwrap();
    assert_eq!(verdict.exact_matches, 0, "{verdict:#?}");
    assert_eq!(verdict.status, VerdictStatus::Rejected, "{verdict:#?}");
}

/// Whether a mined binding source says what a planted one says (kind and source; flow input
/// names and template texts are the miner's own words, so only their kind is compared).
fn planted_source_matches(
    planted: &chainweaver_recorder::synth::PlantedSource,
    mined: &chainweaver_recorder::model::candidate::BindingSource,
) -> bool {
    use chainweaver_recorder::model::candidate::{BindingSource as M, Selection};
    use chainweaver_recorder::synth::PlantedSource as P;
    match (planted, mined) {
        (P::FlowInput { .. }, M::FlowInput { .. }) => true,
        (
            P::StepOutput { step, pointer },
            M::StepOutput {
                step: s,
                pointer: p,
            },
        ) => step == s && pointer == p,
        (
            P::StepInput { step, pointer },
            M::StepInput {
                step: s,
                pointer: p,
            },
        ) => step == s && pointer == p,
        (P::Constant { value }, M::Constant { value: v }) => value == v,
        (P::Template { .. }, M::Template { .. }) => true,
        (
            P::ListElement { step, pointer },
            M::ListElement {
                step: s,
                list_pointer,
                selection: Selection::First,
                ..
            },
        ) => step == s && pointer == list_pointer,
        (
            P::Each {
                step,
                list_pointer,
                item_pointer,
                selected,
            },
            M::Each {
                step: s,
                list_pointer: l,
                item_pointer: i,
                select_input,
            },
        ) => {
            step == s
                && list_pointer == l
                && item_pointer == i
                && *selected == select_input.is_some()
        }
        _ => false,
    }
}

/// On generated traffic with hard behaviours planted (loops over a whole list and over the
/// agent's picks, two interchangeable first steps, an echoing step, failures that cut
/// instances short), `analyze` proposes each planted behaviour once: recall >= 0.95 and
/// precision >= 0.90 over the verified and partial proposals, and >= 0.98 of the planted
/// bindings inferred exactly (kind and source) in the proposals' lead flows.
#[test]
fn planted_behaviours_are_proposed_once_each_and_bound_exactly() {
    planted_behaviours_found(0.0, None);
}

#[test]
fn planted_behaviours_with_unrelated_calls_inside_are_proposed_once_each_with_gaps() {
    planted_behaviours_found(0.2, Some(2));
}

/// Recall and precision of the proposals over planted behaviours, and how exactly their
/// bindings were recovered, on 2,000 generated traces with `interleave` of unrelated calls
/// inside flow instances, mined with `max_gap`.
fn planted_behaviours_found(interleave: f64, max_gap: Option<usize>) {
    let mut generator = Generator::new(GeneratorConfig {
        traces: 2000,
        seed: 11,
        behaviours: true,
        interleave,
        ..GeneratorConfig::default()
    });
    let traces: Vec<TraceWithSteps> = generator.by_ref().collect();
    let truth = generator.ground_truth().clone();
    assert!(truth.flows.iter().any(|f| f.loop_step.is_some()));
    let dir = tempfile::tempdir().unwrap();
    let mut store =
        chainweaver_recorder::store::SqliteStore::open(&dir.path().join("b.db")).unwrap();
    {
        use chainweaver_recorder::store::TraceStore;
        let (heads, steps): (Vec<_>, Vec<Vec<_>>) =
            traces.into_iter().map(|t| (t.trace, t.steps)).unzip();
        let steps: Vec<ObservedStep> = steps.into_iter().flatten().collect();
        store.append(&heads, &steps).unwrap();
    }
    let mut request = chainweaver::pipeline::AnalyzeRequest::default();
    request.mine.max_gap = max_gap;
    let report =
        chainweaver::pipeline::analyze(&mut store, &request, &chainweaver::pipeline::NoProgress)
            .unwrap();

    // A behaviour is a planted flow when its steps are the flow's (the first step's
    // alternatives included) and its loop is the flow's loop.
    let is_planted = |b: &chainweaver_recorder::model::candidate::Behaviour,
                      f: &chainweaver_recorder::synth::PlantedFlow| {
        b.shape.len() == f.tools.len()
            && b.shape.iter().enumerate().all(|(s, step)| {
                let mut expected: Vec<&String> = if s == 0 && !f.first_steps.is_empty() {
                    f.first_steps.iter().collect()
                } else {
                    vec![&f.tools[s]]
                };
                let mut seen: Vec<&String> = step.tools.iter().collect();
                expected.sort();
                seen.sort();
                seen == expected && (f.loop_step == Some(s)) == step.repeated
            })
    };
    let behaviours = &report.behaviours;
    let found = truth
        .flows
        .iter()
        .filter(|f| behaviours.iter().any(|b| is_planted(b, f)))
        .count();
    let true_proposals = behaviours
        .iter()
        .filter(|b| truth.flows.iter().any(|f| is_planted(b, f)))
        .count();
    let recall = found as f64 / truth.flows.len() as f64;
    let precision = true_proposals as f64 / behaviours.len().max(1) as f64;
    let names: Vec<&str> = behaviours.iter().map(|b| b.name.as_str()).collect();
    assert!(recall >= 0.95, "recall {recall}: {names:#?}");
    assert!(precision >= 0.90, "precision {precision}: {names:#?}");

    // Bindings of each found flow's lead candidate, step by step.
    let (mut total, mut exact, mut misses) = (0, 0, Vec::new());
    for flow in &truth.flows {
        let Some(behaviour) = behaviours.iter().find(|b| is_planted(b, flow)) else {
            continue;
        };
        let lead = &report
            .report
            .iter()
            .find(|e| e.candidate.id == behaviour.lead)
            .unwrap()
            .candidate;
        if flow.loop_step.is_some() {
            assert_eq!(lead.flow.map_step(), flow.loop_step, "{}", lead.id);
        }
        for planted in &flow.bindings {
            // The lead may start with the other first step, whose arguments differ.
            if planted.step == 0 && lead.tools[0] != flow.tools[0] {
                continue;
            }
            total += 1;
            let mined = lead
                .bindings
                .iter()
                .find(|b| b.step == planted.step && b.field == planted.field);
            match mined {
                Some(b) if planted_source_matches(&planted.source, &b.source) => exact += 1,
                other => misses.push((
                    lead.id.clone(),
                    planted.clone(),
                    other.map(|b| b.source.clone()),
                )),
            }
        }
    }
    assert!(
        exact as f64 >= 0.98 * total as f64,
        "{exact}/{total} planted bindings exact: {misses:#?}"
    );
}
