//! The ChainAnalyzer against synthetic traffic whose flows and bindings are known: planted flows
//! must be found, ranked above decoys and noise, and their bindings inferred exactly.

use std::collections::BTreeSet;

use chainweaver_analyzer::mine::{ChainAnalyzer, MineConfig};
use chainweaver_recorder::model::TraceWithSteps;
use chainweaver_recorder::model::candidate::{BindingSource, Candidate};
use chainweaver_recorder::synth::{Generator, GeneratorConfig, GroundTruth, PlantedSource};
use serde_json::Value;

fn traffic(traces: u64, seed: u64) -> (Vec<TraceWithSteps>, GroundTruth) {
    let mut generator = Generator::new(GeneratorConfig {
        traces,
        seed,
        ..GeneratorConfig::default()
    });
    let all: Vec<TraceWithSteps> = generator.by_ref().collect();
    (all, generator.ground_truth().clone())
}

/// The value a planted or inferred source yields in one occurrence (steps of the pattern).
fn planted_value(
    source: &PlantedSource,
    steps: &[&chainweaver_recorder::model::ObservedStep],
) -> Option<Value> {
    match source {
        PlantedSource::StepOutput { step, pointer } => output_at(steps[*step], pointer),
        PlantedSource::StepInput { step, pointer } => steps[*step].inputs.pointer(pointer).cloned(),
        _ => None,
    }
}

fn output_at(step: &chainweaver_recorder::model::ObservedStep, pointer: &str) -> Option<Value> {
    step.outputs
        .as_ref()
        .and_then(|o| o.pointer(pointer))
        .cloned()
}

fn inferred_value(
    source: &BindingSource,
    steps: &[&chainweaver_recorder::model::ObservedStep],
) -> Option<Value> {
    match source {
        BindingSource::StepOutput { step, pointer } => output_at(steps[*step], pointer),
        BindingSource::StepInput { step, pointer } => steps[*step].inputs.pointer(pointer).cloned(),
        _ => None,
    }
}

/// Exact: the same kind of source, and the same place, or (for data flow) a place that holds
/// the same value in every occurrence, which no data can tell apart.
fn binding_exact(
    planted: &PlantedSource,
    inferred: &BindingSource,
    occurrences: &[Vec<&chainweaver_recorder::model::ObservedStep>],
) -> bool {
    match (planted, inferred) {
        (PlantedSource::FlowInput { .. }, BindingSource::FlowInput { .. }) => true,
        (PlantedSource::Constant { value }, BindingSource::Constant { value: v }) => value == v,
        (PlantedSource::Template { .. }, BindingSource::Template { .. }) => true,
        (
            PlantedSource::ListElement { step, pointer },
            BindingSource::ListElement {
                step: s,
                list_pointer,
                ..
            },
        ) => step == s && pointer == list_pointer,
        (
            PlantedSource::StepOutput { .. } | PlantedSource::StepInput { .. },
            BindingSource::StepOutput { .. } | BindingSource::StepInput { .. },
        ) => occurrences.iter().all(|steps| {
            let expected = planted_value(planted, steps);
            expected.is_some() && expected == inferred_value(inferred, steps)
        }),
        _ => false,
    }
}

#[test]
fn planted_flows_are_found_ranked_first_and_bound_exactly() {
    let (traces, truth) = traffic(3000, 11);
    let analyzer = ChainAnalyzer::new(MineConfig {
        min_support: 5,
        ..MineConfig::default()
    });
    let outcome = analyzer.analyze(&traces).unwrap();

    let proposed: Vec<&Vec<String>> = outcome.candidates.iter().map(|c| &c.tools).collect();
    // Recall: every planted flow is proposed.
    let planted: BTreeSet<&Vec<String>> = truth.flows.iter().map(|f| &f.tools).collect();
    assert_eq!(truth.flows.len(), 6);
    for flow in &planted {
        assert!(
            proposed.contains(flow),
            "{flow:?} not proposed: {proposed:?}"
        );
    }
    // Ranking: the planted flows, and only they, take the first places.
    let top: BTreeSet<&Vec<String>> = proposed[..planted.len()].iter().copied().collect();
    assert_eq!(
        top,
        planted,
        "top {:?}",
        outcome.candidates[..planted.len()]
            .iter()
            .map(|c| (&c.tools, c.evidence.score))
            .collect::<Vec<_>>()
    );
    // The decoy (same tools each time, unrelated arguments) is mined and proposed, and its
    // candidate shows no data flow, scores nothing and ranks below every planted flow.
    let decoy = &truth.decoys[0];
    let position = proposed
        .iter()
        .position(|tools| *tools == decoy)
        .unwrap_or_else(|| panic!("decoy {decoy:?} not proposed: {proposed:?}"));
    assert!(position >= planted.len(), "decoy ranked {position}");
    let decoy_candidate = &outcome.candidates[position];
    assert_eq!(decoy_candidate.evidence.data_flow, 0.0);
    assert_eq!(decoy_candidate.evidence.score, 0.0);

    // Bindings: every planted binding inferred exactly.
    let mut total = 0;
    let mut exact = 0;
    let mut misses = Vec::new();
    for flow in &truth.flows {
        let Some(candidate) = outcome.candidates.iter().find(|c| c.tools == flow.tools) else {
            continue;
        };
        let occurrences: Vec<Vec<&chainweaver_recorder::model::ObservedStep>> = candidate
            .evidence
            .occurrence_refs
            .iter()
            .filter_map(|r| {
                let trace = traces.iter().find(|t| t.trace.trace_id == r.trace_id)?;
                let steps: Vec<_> = r
                    .step_indices
                    .iter()
                    .map(|&i| &trace.steps[i as usize])
                    .collect();
                steps.iter().all(|s| !s.is_error()).then_some(steps)
            })
            .collect();
        for planted in &flow.bindings {
            total += 1;
            let inferred = candidate
                .bindings
                .iter()
                .find(|b| b.step == planted.step && b.field == planted.field);
            match inferred {
                Some(b) if binding_exact(&planted.source, &b.source, &occurrences) => exact += 1,
                other => misses.push(format!(
                    "{} step {} {}: planted {:?}, inferred {:?}",
                    flow.name,
                    planted.step,
                    planted.field,
                    planted.source,
                    other.map(|b| (&b.source, b.confidence, &b.flags, &b.alternatives))
                )),
            }
        }
    }
    assert_eq!(total, 27);
    assert_eq!(exact, total, "planted bindings not exact: {misses:#?}");
}

/// The Python ChainWeaver's own example: at minimum support 3 it reports exactly one candidate,
/// `fetch -> validate -> transform`, seen 3 times; so must we, with the bodies bound as the data
/// shows.
#[test]
fn chainweaver_example_gives_exactly_the_python_candidate() {
    let Some(datasets) = crate::shared_datasets() else {
        return;
    };
    let traces =
        crate::import_traces(&[datasets.join("chainweaver-examples/agent_tool_trace.jsonl")]);
    assert_eq!(
        (
            traces.len(),
            traces.iter().map(|t| t.steps.len()).sum::<usize>()
        ),
        (4, 11)
    );
    let outcome = ChainAnalyzer::new(MineConfig {
        min_support: 3,
        ..MineConfig::default()
    })
    .analyze(&traces)
    .unwrap();
    let proposed: Vec<&Vec<String>> = outcome.candidates.iter().map(|c| &c.tools).collect();
    assert_eq!(
        proposed,
        [&vec![
            "fetch".to_string(),
            "validate".into(),
            "transform".into()
        ]]
    );
    let candidate = &outcome.candidates[0];
    assert_eq!(candidate.evidence.support, 3);
    assert_eq!(candidate.evidence.occurrences, 3);
    for step in [1, 2] {
        let body = candidate
            .bindings
            .iter()
            .find(|b| b.step == step && b.field == "/body")
            .unwrap();
        assert_eq!(
            body.source,
            BindingSource::StepOutput {
                step: 0,
                pointer: "/body".into()
            },
            "step {step} reads fetch's body"
        );
    }
}

/// The streaming path over a real SQLite store agrees with the in-memory path on the same
/// traffic, and a sample keeps the full figures.
#[test]
fn analyze_store_streams_and_agrees_with_analyze() {
    use chainweaver_analyzer::mine::StreamConfig;
    use chainweaver_recorder::store::SqliteStore;

    let (traces, truth) = traffic(600, 5);
    let dir = tempfile::tempdir().unwrap();
    let store = holding(
        SqliteStore::open(&dir.path().join("traces.db")).unwrap(),
        &traces,
    );

    // Without a sample both read every occurrence: the same patterns and candidates.
    let exact = MineConfig {
        min_support: 5,
        max_inference_occurrences: None,
        ..MineConfig::default()
    };
    let all = StreamConfig {
        max_occurrences_per_pattern: None,
        ..StreamConfig::default()
    };
    let in_memory = ChainAnalyzer::new(exact.clone()).analyze(&traces).unwrap();
    let streamed = ChainAnalyzer::new(exact)
        .analyze_store(&store, &all)
        .unwrap();
    assert_eq!(streamed.steps, in_memory.steps);
    // Every trace counts, with or without steps, as in memory.
    assert_eq!(streamed.traces, in_memory.traces);
    assert_eq!(streamed.traces, traces.len());
    let tools = |o: &chainweaver_analyzer::mine::MineOutcome| -> Vec<(Vec<String>, u32, u64)> {
        o.patterns
            .iter()
            .map(|p| (p.tools.clone(), p.support, p.occurrences))
            .collect()
    };
    assert_eq!(tools(&streamed), tools(&in_memory));
    assert_eq!(streamed.candidates.len(), in_memory.candidates.len());
    for (s, m) in streamed.candidates.iter().zip(&in_memory.candidates) {
        assert_eq!(s.tools, m.tools);
        assert_eq!(s.bindings, m.bindings);
        assert_eq!(s.evidence.support, m.evidence.support);
        assert_eq!(s.evidence.occurrences, m.evidence.occurrences);
        // Nothing is sampled in a small store: tools are profiled over every call, as in
        // memory, so schemas, determinism and scores agree too.
        assert_eq!(s.tool_schemas, m.tool_schemas);
        assert_eq!(s.evidence.determinism, m.evidence.determinism);
        assert_eq!(s.evidence.score.to_bits(), m.evidence.score.to_bits());
    }

    // With a sample of 40 occurrences: full support and counts, bindings of the planted
    // flows unchanged, and the sample size recorded.
    let sampled = ChainAnalyzer::new(MineConfig {
        min_support: 5,
        max_inference_occurrences: Some(40),
        ..MineConfig::default()
    })
    .analyze_store(&store, &StreamConfig::default())
    .unwrap();
    // The streaming path reads only the sampled occurrences' steps from the store, yet comes
    // to exactly what the in-memory path does with the same sample over whole traces.
    let sampled_in_memory = ChainAnalyzer::new(MineConfig {
        min_support: 5,
        max_inference_occurrences: Some(40),
        ..MineConfig::default()
    })
    .analyze(&traces)
    .unwrap();
    assert!(sampled.candidates.iter().any(|c| c.sample.is_some()));
    assert_eq!(sampled.candidates, sampled_in_memory.candidates);
    for flow in &truth.flows {
        let full = in_memory
            .candidates
            .iter()
            .find(|c| c.tools == flow.tools)
            .unwrap();
        let part = sampled
            .candidates
            .iter()
            .find(|c| c.tools == flow.tools)
            .unwrap();
        assert_eq!(part.evidence.support, full.evidence.support);
        assert_eq!(part.evidence.occurrences, full.evidence.occurrences);
        assert_eq!(
            part.evidence.round_trips_saved,
            full.evidence.round_trips_saved
        );
        assert!(full.evidence.occurrences > 40);
        assert_eq!(part.evidence.occurrence_refs.len(), 40);
        assert_eq!(part.sample.as_ref().map(|s| s.read), Some(40));
        // Every field bound in every occurrence is still bound in every sampled occurrence
        // (the source may differ where two sources hold in all 40 but not in all 600).
        let certain = |c: &Candidate| -> Vec<(usize, String)> {
            c.bindings
                .iter()
                .filter(|b| b.confidence == 1.0)
                .map(|b| (b.step, b.field.clone()))
                .collect()
        };
        for field in certain(full) {
            assert!(
                certain(part).contains(&field),
                "{:?}: {field:?} not certain in the sampled candidate",
                flow.tools
            );
        }
    }
}

/// Steps a candidate's chosen bindings link to another step (the evidence's data-flow rule).
fn linked_steps(candidate: &Candidate) -> Vec<bool> {
    let len = candidate.tools.len();
    let mut linked = vec![false; len];
    for binding in &candidate.bindings {
        for source in binding.source.source_steps() {
            if source < len && source != binding.step {
                linked[source] = true;
                linked[binding.step] = true;
            }
        }
    }
    linked
}

/// The probe spares inference only where the full inference finds no link either: on the same
/// traffic with and without it, the same patterns become candidates, the ones it let through are
/// identical, and every step it called unlinked is unlinked in the full inference too.
#[test]
fn the_probe_hides_no_link_the_full_inference_finds() {
    let (traces, _) = traffic(4000, 23);
    let config = MineConfig {
        min_support: 5,
        ..MineConfig::default()
    };
    let probed = ChainAnalyzer::new(config.clone()).analyze(&traces).unwrap();
    let full = ChainAnalyzer::new(MineConfig {
        probe_occurrences: None,
        ..config
    })
    .analyze(&traces)
    .unwrap();
    assert_eq!(probed.candidates.len(), full.candidates.len());
    let mut probed_down = 0;
    for candidate in &probed.candidates {
        let whole = full
            .candidates
            .iter()
            .find(|c| c.tools == candidate.tools)
            .unwrap_or_else(|| panic!("{:?} missing without the probe", candidate.tools));
        let Some(sample) = candidate
            .sample
            .as_ref()
            .filter(|s| !s.unlinked_in_probe.is_empty())
        else {
            assert_eq!(candidate, whole);
            continue;
        };
        probed_down += 1;
        assert_eq!(sample.read, 64);
        assert_eq!(candidate.evidence.occurrence_refs.len(), 64);
        assert!(whole.evidence.occurrence_refs.len() > 64);
        assert_eq!(candidate.evidence.support, whole.evidence.support);
        assert_eq!(candidate.evidence.occurrences, whole.evidence.occurrences);
        assert_eq!(candidate.tool_schemas, whole.tool_schemas);
        assert!(whole.evidence.data_flow < 1.0, "{:?}", whole.tools);
        let linked = linked_steps(whole);
        for &step in &sample.unlinked_in_probe {
            assert!(
                !linked[step],
                "{:?}: step {step} is linked in the full inference",
                whole.tools
            );
        }
    }
    // The traffic has flows padded with unrelated calls often enough to be probed: 43 times.
    assert_eq!(probed_down, 43);
}

/// `store` holding `traces`, appended in one batch.
fn holding<S: chainweaver_recorder::store::TraceStore>(
    mut store: S,
    traces: &[TraceWithSteps],
) -> S {
    let trace_rows: Vec<_> = traces.iter().map(|t| t.trace.clone()).collect();
    let step_rows: Vec<_> = traces.iter().flat_map(|t| t.steps.clone()).collect();
    store.append(&trace_rows, &step_rows).unwrap();
    store
}

mod counting {
    use std::cell::RefCell;
    use std::collections::BTreeSet;

    use chainweaver_recorder::error::Result;
    use chainweaver_recorder::model::{ObservedStep, ObservedTrace, TraceWithSteps};
    use chainweaver_recorder::store::{
        AppendStats, PageRequest, SequenceSteps, StepColumns, StepTool, StoreCounts, ToolSequences,
        TraceFilter, TracePage, TraceStore,
    };
    use serde_json::Value;

    /// A real store that notes which steps each `get_trace_steps` or `get_sequence_steps`
    /// call asks for; the other calls pass through.
    pub(super) struct CountingStore {
        inner: Box<dyn TraceStore>,
        /// The `(trace id, position)` pairs of each read, in order.
        pub reads: RefCell<Vec<BTreeSet<(String, usize)>>>,
    }

    impl CountingStore {
        pub fn over(inner: impl TraceStore + 'static) -> Self {
            Self {
                inner: Box::new(inner),
                reads: RefCell::default(),
            }
        }
    }

    impl TraceStore for CountingStore {
        fn append(
            &mut self,
            traces: &[ObservedTrace],
            steps: &[ObservedStep],
        ) -> Result<AppendStats> {
            self.inner.append(traces, steps)
        }
        fn list_traces(&self, filter: &TraceFilter, page: &PageRequest) -> Result<TracePage> {
            self.inner.list_traces(filter, page)
        }
        fn get_trace(&self, trace_id: &str) -> Result<Option<TraceWithSteps>> {
            self.inner.get_trace(trace_id)
        }
        fn get_trace_steps(&self, wanted: &[(&str, &[usize])]) -> Result<Vec<TraceWithSteps>> {
            self.reads.borrow_mut().push(
                wanted
                    .iter()
                    .flat_map(|(id, at)| at.iter().map(|&s| (id.to_string(), s)))
                    .collect(),
            );
            self.inner.get_trace_steps(wanted)
        }
        fn get_sequence_steps(&self, wanted: &[SequenceSteps<'_>]) -> Result<Vec<TraceWithSteps>> {
            self.reads.borrow_mut().push(
                wanted
                    .iter()
                    .flat_map(|w| w.positions.iter().map(|&s| (w.trace_id.to_string(), s)))
                    .collect(),
            );
            self.inner.get_sequence_steps(wanted)
        }
        fn for_each_trace(
            &self,
            visit: &mut dyn FnMut(TraceWithSteps) -> Result<()>,
        ) -> Result<()> {
            self.inner.for_each_trace(visit)
        }
        fn step_columns(&self, filter: &TraceFilter) -> Result<StepColumns> {
            self.inner.step_columns(filter)
        }
        fn for_each_step_tool(
            &self,
            visit: &mut dyn FnMut(StepTool<'_>) -> Result<()>,
        ) -> Result<()> {
            self.inner.for_each_step_tool(visit)
        }
        fn read_tool_sequences(&self, keep: &dyn Fn(&str) -> bool) -> Result<ToolSequences> {
            self.inner.read_tool_sequences(keep)
        }
        fn trace_ids(&self) -> Result<Vec<String>> {
            self.inner.trace_ids()
        }
        fn counts(&self) -> Result<StoreCounts> {
            self.inner.counts()
        }
        fn put_document(&mut self, kind: &str, key: &str, document: &Value) -> Result<()> {
            self.inner.put_document(kind, key, document)
        }
        fn get_document(&self, kind: &str, key: &str) -> Result<Option<Value>> {
            self.inner.get_document(kind, key)
        }
        fn list_documents(&self, kind: &str) -> Result<Vec<(String, Value)>> {
            self.inner.list_documents(kind)
        }
        fn delete_document(&mut self, kind: &str, key: &str) -> Result<bool> {
            self.inner.delete_document(kind, key)
        }
    }
}

/// With a sample larger than the probe, the streaming path reads a store in two rounds: the
/// probes' steps, then the whole samples of the patterns the probe let through. A padded flow
/// costs its probe: fewer steps are read than without the probe, every step read is one the
/// run without the probe reads too, the flows built from whole samples come out as without the
/// probe, and the in-memory path over the same traffic proposes exactly the same candidates.
#[test]
fn the_store_is_read_probe_first() {
    use chainweaver_analyzer::mine::StreamConfig;
    use chainweaver_recorder::store::{ParquetStore, SqliteStore};
    use counting::CountingStore;

    let (traces, truth) = traffic(4000, 23);
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(&dir.path().join("traces.db")).unwrap();
    let store = CountingStore::over(holding(sqlite, &traces));
    let config = MineConfig {
        min_support: 5,
        max_inference_occurrences: Some(400),
        probe_occurrences: Some(32),
        ..MineConfig::default()
    };
    let probed = ChainAnalyzer::new(config.clone())
        .analyze_store(&store, &StreamConfig::default())
        .unwrap();
    let rounds = store.reads.take();
    let unprobed = ChainAnalyzer::new(MineConfig {
        probe_occurrences: None,
        ..config.clone()
    })
    .analyze_store(&store, &StreamConfig::default())
    .unwrap();
    let without_probe = store.reads.take();

    assert_eq!(
        rounds.len(),
        2,
        "one read for the probes, one for the whole samples"
    );
    assert_eq!(without_probe.len(), 1);
    let read: BTreeSet<(String, usize)> = rounds.iter().flatten().cloned().collect();
    assert!(read.is_subset(&without_probe[0]));
    assert!(read.len() < without_probe[0].len());

    let decided_by_probe = |c: &Candidate| {
        c.sample
            .as_ref()
            .is_some_and(|s| !s.unlinked_in_probe.is_empty())
    };
    assert!(probed.candidates.iter().any(decided_by_probe));
    for flow in &truth.flows {
        let with = probed
            .candidates
            .iter()
            .find(|c| c.tools == flow.tools)
            .unwrap();
        let without = unprobed
            .candidates
            .iter()
            .find(|c| c.tools == flow.tools)
            .unwrap();
        assert!(!decided_by_probe(with), "{:?}", flow.tools);
        assert_eq!(with.bindings, without.bindings, "{:?}", flow.tools);
        assert_eq!(
            with.evidence.occurrence_refs,
            without.evidence.occurrence_refs
        );
    }

    let in_memory = ChainAnalyzer::new(config.clone()).analyze(&traces).unwrap();
    assert_eq!(probed.candidates, in_memory.candidates);

    // A Parquet store is asked for the same steps in the same two reads, and the same
    // candidates come out.
    let parquet = ParquetStore::open(&dir.path().join("pq")).unwrap();
    let parquet = CountingStore::over(holding(parquet, &traces));
    let from_parquet = ChainAnalyzer::new(config)
        .analyze_store(&parquet, &StreamConfig::default())
        .unwrap();
    assert_eq!(parquet.reads.take(), rounds);
    assert_eq!(from_parquet.candidates, probed.candidates);
}
