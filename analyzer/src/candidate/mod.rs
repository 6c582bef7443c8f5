//! Candidates: a pattern plus its bindings, proposed as a runnable flow with evidence.
//!
//! # The flow a candidate proposes
//!
//! - **Flow inputs** are the fields bound to [`BindingSource::FlowInput`], named after the field
//!   (numbered when names repeat), plus any field whose known source an `input_mapping` cannot
//!   express: a template, a list element the agent chose or took last, a nested field with
//!   mixed sources, and a string constant (a string in `input_mapping` is a context reference,
//!   so a string constant becomes a flow input whose schema `default` is the constant).
//!   Non-string constants are literals.
//! - **Step ids** are the tool names, numbered from the second call of a tool (`get_order`,
//!   `get_order_2`).
//! - **Step outputs** land in the context under `<step id>.<output key>` through each step's
//!   `output_mapping`, holding only the keys later steps read, so no step clobbers another's
//!   values. Outputs are seen *normalized*: a string holding a JSON object or array is parsed,
//!   and a value that is not an object counts as `{"result": value}` (so a plain-string user id
//!   returned by `find_user` is `find_user.result`). The executor and the replay cassette must
//!   apply the same normalization to tool results.
//! - The last step of a linear flow has no `output_mapping`: its whole output merges into the
//!   context, which is the flow's final output. In a DAG flow the steps nothing depends on
//!   map every output key present in all occurrences under their step id (concurrent sinks
//!   must not overwrite each other).
//! - Steps observed without arguments get an empty `input_mapping`, which by the specification
//!   hands them the whole context; the flow's metadata lists them (`steps_given_whole_context`).
//! - **DAG or linear**: a step depends on the steps whose outputs its bindings read, wired or
//!   not (an element the agent chose from a list still waits for the list); a step with side
//!   effects (or unknown effects) depends on every earlier step, and every later step depends on
//!   it, so effects keep their observed order. When every topological level holds one step the
//!   flow is linear; otherwise it is a [`DagFlow`] whose levels run concurrently.
//!
//! # Score
//!
//! `score = round_trips_saved x success_rate x binding_quality x determinism x effect_factor
//! x data_flow²`
//!
//! - `round_trips_saved = support x (steps - 1)`;
//! - `binding_quality` = mean over bindings of their confidence, a flagged binding counting
//!   `0.25` (it needs an agent or a reviewer); `1` without bindings;
//! - `determinism` = mean over the pattern's steps of their tool's determinism ratio (`1` when no
//!   input was ever repeated);
//! - `data_flow` = share of the steps linked to another step by a binding (reading an earlier
//!   step, or read by a later one); squared, so a pattern padded with an unrelated call (an
//!   agent's `think`) ranks below the flow it contains, and tools that only happen to follow
//!   each other score 0;
//! - `effect_factor` = `1` for read-only flows, `0.75` when a step has (or may have) side
//!   effects: those need live verification and a careful review.
//!
//! [`DagFlow`]: chainweaver_recorder::model::flow::DagFlow

mod definition;
mod effects;
mod evidence;
mod layout;
mod profile;
mod replay;
mod schema;
mod stats;
mod wiring;

pub use profile::ToolProfiles;
pub use schema::infer_schema;
pub use stats::{DailySupport, support_by_day};

use std::collections::HashSet;

use chainweaver_recorder::model::TraceWithSteps;
use chainweaver_recorder::model::candidate::{
    Binding, BindingSource, Candidate, CandidateStatus, Pattern,
};
use serde_json::Map;

use crate::error::{AnalyzerError, Result};
use crate::infer::{
    InferConfig, OccurrenceView, index_occurrences, infer_from_views, occurrence_views,
    pattern_name, resolve_occurrences,
};
use crate::parallel;
use definition::{candidate_id, flow_definition, flow_metadata, flow_schemas, tool_schemas};
use effects::ToolBehaviour;
use evidence::evidence;
use layout::{Layout, is_linear, output_mappings, step_dependencies};
use replay::replay_mappings;
use wiring::{Builder, input_mappings, wire_bindings};

/// Tuning of candidate building.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateConfig {
    pub infer: InferConfig,
    /// String fields with at most this many distinct values may get an `enum`.
    pub max_enum_values: usize,
    /// Score factor for flows with (possible) side effects.
    pub side_effect_factor: f64,
    /// Weight of a flagged binding in the binding quality.
    pub flagged_binding_weight: f64,
    /// Threads [`build_candidates`] uses, one pattern (and one tool profile) at a time each;
    /// `0`: what the machine offers. Results do not depend on it.
    pub threads: usize,
    /// A tool's schemas are inferred from at most this many of its successful calls, spread
    /// evenly over them (`None`: all). Determinism still reads every call. Default: 1,000.
    pub max_schema_calls: Option<usize>,
}

impl Default for CandidateConfig {
    fn default() -> Self {
        Self {
            infer: InferConfig::default(),
            max_enum_values: 5,
            side_effect_factor: 0.75,
            flagged_binding_weight: 0.25,
            threads: 0,
            max_schema_calls: Some(1_000),
        }
    }
}

/// Infer the bindings of `pattern` and propose it as a flow.
pub fn build_candidate(
    traces: &[TraceWithSteps],
    pattern: &Pattern,
    config: &CandidateConfig,
) -> Result<Candidate> {
    let tools: HashSet<String> = pattern.tools.iter().cloned().collect();
    let profiles = ToolProfiles::compute(traces, Some(&tools), config);
    build_candidate_with(traces, pattern, &profiles, config)
}

/// Candidates for many patterns, profiling the tools once. One result a pattern, in order.
pub fn build_candidates(
    traces: &[TraceWithSteps],
    patterns: &[Pattern],
    config: &CandidateConfig,
) -> Vec<Result<Candidate>> {
    build_candidates_profiled(traces, patterns, config, None)
        .into_iter()
        .map(|built| built.map(|b| b.candidate))
        .collect()
}

/// The miner's probe of patterns with many occurrences: inference first reads `occurrences` of
/// them (spread evenly), and when a step shows no link to any other step at the loose bar
/// `link_share` (see `loosely_linked_steps`), the candidate is built from those alone.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe {
    pub occurrences: usize,
    pub link_share: f64,
}

/// A candidate and what the probe decided for it.
pub(crate) struct Built {
    pub candidate: Candidate,
    /// Steps the probe found linked to no other; empty when the probe let the pattern through
    /// (or did not run) and the candidate read the whole sample.
    pub unlinked_in_probe: Vec<usize>,
    /// Occurrences inference read.
    pub read: usize,
}

/// [`build_candidates`] with the tools profiled over every step of `traces`, and patterns
/// probed first when `probe` says so (profiles do not depend on the probe).
pub(crate) fn build_candidates_profiled(
    traces: &[TraceWithSteps],
    patterns: &[Pattern],
    config: &CandidateConfig,
    probe: Option<Probe>,
) -> Vec<Result<Built>> {
    // Only the patterns' tools are ever looked up.
    let tools: HashSet<String> = patterns
        .iter()
        .flat_map(|p| p.tools.iter().cloned())
        .collect();
    let profiles = ToolProfiles::compute(traces, Some(&tools), config);
    each_in_parallel(patterns, config, |pattern| {
        if let Some(probe) = probe
            && let Some(small) = probe_sample(pattern, probe)
            && let Some(built) = build_if_unlinked(traces, &small, &profiles, config, probe)?
        {
            return Ok(built);
        }
        build_whole(traces, pattern, &profiles, config)
    })
}

/// Occurrences read from a set of traces, for [`occurrence_profiles`].
pub(crate) struct ReadOccurrences<'a> {
    pub traces: &'a [TraceWithSteps],
    /// The occurrences, indexing `traces`.
    pub read: &'a [Pattern],
    /// The same occurrences as the sequences number them (the same as `read` when `traces`
    /// are the sequences' traces), which names a step across sets.
    pub at: &'a [Pattern],
}

/// The tools of the patterns in `sets`, each profiled over the steps their occurrences hold,
/// a step held by several occurrences or sets counted once (the pattern names each
/// position's tool, so the steps are grouped without being read).
pub(crate) fn occurrence_profiles(
    sets: &[ReadOccurrences<'_>],
    config: &CandidateConfig,
) -> ToolProfiles {
    let mut names: Vec<&str> = sets
        .iter()
        .flat_map(|set| set.read.iter())
        .flat_map(|p| p.tools.iter().map(String::as_str))
        .collect();
    names.sort_unstable();
    names.dedup();
    let mut groups: Vec<Vec<profile::KeyedStep<'_>>> = vec![Vec::new(); names.len()];
    for set in sets {
        for (pattern, at) in set.read.iter().zip(set.at) {
            let ids: Vec<Option<usize>> = pattern
                .tools
                .iter()
                .map(|tool| names.binary_search(&tool.as_str()).ok())
                .collect();
            for (occurrence, key) in pattern.occurrences.iter().zip(&at.occurrences) {
                let Some(trace) = set.traces.get(occurrence.trace) else {
                    continue;
                };
                for ((&step, &key_step), id) in occurrence.steps.iter().zip(&key.steps).zip(&ids) {
                    if let (Some(id), Some(step)) = (*id, trace.steps.get(step)) {
                        groups[id].push(((key.trace, key_step), step));
                    }
                }
            }
        }
    }
    ToolProfiles::compute_keyed(names.into_iter().zip(groups).collect(), config)
}

/// `pattern` cut to the probe's occurrences (spread evenly), when it has more than those.
pub(crate) fn probe_sample(pattern: &Pattern, probe: Probe) -> Option<Pattern> {
    let cap = probe.occurrences.max(1);
    (pattern.occurrences.len() > cap).then(|| Pattern {
        tools: pattern.tools.clone(),
        occurrences: even_positions(pattern.occurrences.len(), cap)
            .map(|i| pattern.occurrences[i].clone())
            .collect(),
        gapped: pattern.gapped,
    })
}

/// `f` of each of `patterns` on up to `config.threads` threads, the costliest (most
/// occurrences) first so the threads finish together; the results in pattern order.
pub(crate) fn each_in_parallel<R: Send>(
    patterns: &[Pattern],
    config: &CandidateConfig,
    f: impl Fn(&Pattern) -> R + Sync,
) -> Vec<R> {
    parallel::map_indices_with(
        patterns.len(),
        parallel::thread_count(config.threads),
        |i| patterns[i].occurrences.len(),
        || (),
        |(), i| f(&patterns[i]),
    )
}

/// A candidate for `pattern` from all its occurrences.
pub(crate) fn build_whole(
    traces: &[TraceWithSteps],
    pattern: &Pattern,
    profiles: &ToolProfiles,
    config: &CandidateConfig,
) -> Result<Built> {
    Ok(Built {
        candidate: build_candidate_with(traces, pattern, profiles, config)?,
        unlinked_in_probe: Vec::new(),
        read: pattern.occurrences.len(),
    })
}

/// The probe: infer `small`'s bindings and, when a step is linked to no other even loosely,
/// the candidate built from them; `None` when every step is linked.
pub(crate) fn build_if_unlinked(
    traces: &[TraceWithSteps],
    small: &Pattern,
    profiles: &ToolProfiles,
    config: &CandidateConfig,
    probe: Probe,
) -> Result<Option<Built>> {
    let resolved = resolve_occurrences(traces, small, &config.infer)?;
    let indexed = index_occurrences(&resolved, &config.infer);
    let views = occurrence_views(&resolved, Some(&indexed));
    let bindings = infer_from_views(&views, small, &config.infer);
    let linked = loosely_linked_steps(&bindings, small.len(), probe.link_share);
    let unlinked: Vec<usize> = (0..linked.len()).filter(|&s| !linked[s]).collect();
    if unlinked.is_empty() {
        return Ok(None);
    }
    Ok(Some(Built {
        candidate: assemble(traces, small, &views, bindings, profiles, config),
        unlinked_in_probe: unlinked,
        read: small.occurrences.len(),
    }))
}

/// Which of a pattern's `len` steps its bindings could link to another step, judged loosely: a
/// step counts as linked when the chosen source of a field, or a runner-up, reads another step
/// (or is read by one) in at least `min_share` of the occurrences holding the field. A step
/// unlinked at a bar well below [`InferConfig::min_confidence`] stays unlinked in an inference
/// over more occurrences, barring sampling noise (the miner's probe relies on this).
fn loosely_linked_steps(bindings: &[Binding], len: usize, min_share: f64) -> Vec<bool> {
    linked_steps(
        len,
        bindings.iter().flat_map(|binding| {
            std::iter::once((&binding.source, binding.confidence))
                .chain(
                    binding
                        .alternatives
                        .iter()
                        .map(|a| (&a.source, a.confidence)),
                )
                .filter(move |&(_, share)| share >= min_share)
                .map(move |(source, _)| (binding.step, source))
        }),
    )
}

/// Which of `len` steps the `(step, source)` links join to another step: both ends of a
/// source read by a different step count.
fn linked_steps<'b>(
    len: usize,
    links: impl Iterator<Item = (usize, &'b BindingSource)>,
) -> Vec<bool> {
    let mut linked = vec![false; len];
    for (step, source) in links {
        for from in source.source_steps() {
            if from < len && step < len && from != step {
                linked[from] = true;
                linked[step] = true;
            }
        }
    }
    linked
}

/// Positions of `cap` items spread evenly over `total` (the first one included), in order.
pub(crate) fn even_positions(total: usize, cap: usize) -> impl Iterator<Item = usize> {
    let mut taken = 0usize;
    // Item `i` is taken when it is the first at or past the k-th even mark.
    (0..total).filter(move |&i| {
        let take = taken < cap && i * cap >= taken * total;
        taken += usize::from(take);
        take
    })
}

/// Infer the bindings of `pattern` and propose it as a flow, with tool profiles computed once
/// by the caller ([`ToolProfiles::compute`]).
pub fn build_candidate_with(
    traces: &[TraceWithSteps],
    pattern: &Pattern,
    profiles: &ToolProfiles,
    config: &CandidateConfig,
) -> Result<Candidate> {
    let resolved = resolve_occurrences(traces, pattern, &config.infer)?;
    let indexed = index_occurrences(&resolved, &config.infer);
    let views = occurrence_views(&resolved, Some(&indexed));
    let bindings = infer_from_views(&views, pattern, &config.infer);
    Ok(assemble(
        traces, pattern, &views, bindings, profiles, config,
    ))
}

/// Propose `pattern` as a flow with bindings inferred (or edited) elsewhere.
pub fn candidate_from_bindings(
    traces: &[TraceWithSteps],
    pattern: &Pattern,
    bindings: Vec<Binding>,
    config: &CandidateConfig,
) -> Result<Candidate> {
    let resolved = resolve_occurrences(traces, pattern, &config.infer)?;
    let views = occurrence_views(&resolved, None);
    for binding in &bindings {
        check_binding(pattern, binding)?;
    }
    let tools: HashSet<String> = pattern.tools.iter().cloned().collect();
    let profiles = ToolProfiles::compute(traces, Some(&tools), config);
    Ok(assemble(
        traces, pattern, &views, bindings, &profiles, config,
    ))
}

/// A binding from outside must name a step of the pattern and read only earlier steps.
fn check_binding(pattern: &Pattern, binding: &Binding) -> Result<()> {
    let invalid = |message: String| AnalyzerError::InvalidBinding {
        pattern: pattern_name(pattern),
        step: binding.step,
        field: binding.field.clone(),
        message,
    };
    if binding.step >= pattern.len() {
        return Err(invalid(format!("the pattern has {} steps", pattern.len())));
    }
    if !binding.field.starts_with('/') {
        return Err(invalid(
            "the field must be a JSON pointer starting with `/`".into(),
        ));
    }
    let mut reads: Vec<usize> = binding.source.source_step().into_iter().collect();
    if let BindingSource::Template { slots, .. } = &binding.source {
        reads.extend(slots.iter().filter_map(|slot| slot.source.source_step()));
    }
    if let Some(late) = reads.into_iter().find(|&s| s >= binding.step) {
        return Err(invalid(format!(
            "the source reads step {late}, which is not an earlier step"
        )));
    }
    Ok(())
}

/// The flow's name for a tool sequence: the tools joined by `_then_`.
pub fn flow_name(tools: &[String]) -> String {
    tools.join("_then_")
}

/// Propose `pattern` as a flow from its occurrences and bindings, in phases: wire each binding,
/// build the input mappings, lay the steps out, replay the mappings over the occurrences, then
/// infer the schemas and weigh the evidence.
fn assemble(
    traces: &[TraceWithSteps],
    pattern: &Pattern,
    views: &[OccurrenceView<'_>],
    mut bindings: Vec<Binding>,
    profiles: &ToolProfiles,
    config: &CandidateConfig,
) -> Candidate {
    let mut builder = Builder::new(views, &pattern.tools, &bindings);
    let (wires, templates) = wire_bindings(&mut builder, &bindings);
    let (input_mappings, constants) = input_mappings(&mut builder, &mut bindings, &wires);
    let behaviour = ToolBehaviour::of(&pattern.tools, profiles);
    let depends = step_dependencies(
        std::mem::take(&mut builder.depends),
        &bindings,
        &behaviour.effects,
    );
    let linear = is_linear(&depends);
    let output_mappings = output_mappings(&builder, &depends, linear);
    let replay = replay_mappings(&builder, &input_mappings, &output_mappings);
    let schemas = flow_schemas(&builder, &replay.final_contexts, config.max_enum_values);
    let tool_schemas = tool_schemas(&pattern.tools, profiles);
    let evidence = evidence(
        traces,
        pattern,
        views,
        &bindings,
        behaviour,
        replay.reproduced,
        config,
    );
    let id = candidate_id(pattern);
    let metadata = flow_metadata(
        &id,
        &builder.step_ids,
        &input_mappings,
        templates,
        constants,
    );
    let layout = Layout {
        input_mappings,
        output_mappings,
        depends,
        linear,
    };
    let flow = flow_definition(
        pattern,
        &builder.step_ids,
        &evidence,
        layout,
        schemas,
        metadata,
    );
    Candidate {
        id,
        tools: pattern.tools.clone(),
        gapped: pattern.gapped,
        max_gap: None,
        flow,
        bindings,
        tool_schemas,
        evidence,
        status: CandidateStatus::Proposed,
        split: None,
        sample: None,
        behaviour: None,
        metadata: Map::new(),
    }
}

#[cfg(test)]
mod tests;
