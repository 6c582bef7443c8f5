//! Verification: replay each mined candidate through the real executor against held-out
//! traffic, and decide a [`Verdict`].
//!
//! For every occurrence of the candidate's tool sequence in traces that mining did not see, the
//! candidate's flow runs through a [`FlowExecutor`] (the same one production runs use) with its
//! flow inputs taken from that occurrence. Each step's inputs and outputs are compared with what
//! the agent actually sent and got:
//!
//! - an input that differs means a binding is wrong ([`FailureMode::BindingWrong`]);
//! - the same input answered differently means the tool's output changed
//!   ([`FailureMode::ToolOutputChanged`]): a nondeterministic live tool, or one that changed;
//! - a tool that failed where the agent's call succeeded, or the other way round, is
//!   [`FailureMode::ToolFailed`].
//!
//! Tools are either recorded (a [`Cassette`] built from observed steps) or live (a command-tool
//! manifest; tools not marked `read_only` only with `allow_side_effects`). The verdict's status
//! follows [`VerdictThresholds`]: verified at or above the verified share of exact replays,
//! partial at or above the partial share, rejected below it, with too few held-out occurrences,
//! or when the candidate's steps share no data (a chain of unrelated calls only echoes the
//! agent's arguments back, so replaying it proves nothing).
//!
//! ```
//! use chainweaver::verify::{Split, trace_hash};
//!
//! // Mining and verification see disjoint traces, the same way on every run.
//! let split = Split::default(); // 80/20
//! let held_out = (0..1000).filter(|i| split.is_holdout(&format!("trace-{i}"))).count();
//! assert!(held_out > 150 && held_out < 250);
//! assert_eq!(trace_hash("t-1"), trace_hash("t-1"));
//! ```

pub mod cassette;
mod loops;

pub use cassette::{Cassette, IgnorePaths, Miss, Preference, RecordedOutcome, Recording};
pub use chainweaver_recorder::model::split::{Split, trace_hash};

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use chainweaver_recorder::model::candidate::{
    Candidate, FailureCounts, FailureMode, OccurrenceRef, RejectionCause, StepDiff as VerdictDiff,
    Verdict, VerdictStatus, VerdictThresholds,
};
use chainweaver_recorder::model::flow::FlowDefinition;
use chainweaver_recorder::model::{ObservedStep, TraceWithSteps};
use chainweaver_recorder::store::tool_sequences;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::executor::{ExecutionResult, FlowExecutor, RunOptions};
use crate::replay::{StepDiff, diff_objects};
use crate::tool::{JsonObject, ToolRegistry};

/// Where replayed tools come from.
#[derive(Clone)]
pub enum ToolSource {
    /// Answers from recorded calls.
    Recorded(Arc<Cassette>),
    /// Real tools (a command-tool manifest). Tools not marked `read_only` are refused unless
    /// `allow_side_effects`.
    Live {
        tools: ToolRegistry,
        allow_side_effects: bool,
        /// Volatile fields left out when comparing.
        ignore: IgnorePaths,
    },
}

impl std::fmt::Debug for ToolSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolSource::Recorded(_) => f.write_str("ToolSource::Recorded"),
            ToolSource::Live { tools, .. } => write!(f, "ToolSource::Live({} tools)", tools.len()),
        }
    }
}

impl ToolSource {
    /// `recorded` or `live`.
    pub fn mode(&self) -> &'static str {
        match self {
            ToolSource::Recorded(_) => "recorded",
            ToolSource::Live { .. } => "live",
        }
    }

    fn ignore(&self) -> &IgnorePaths {
        match self {
            ToolSource::Recorded(cassette) => cassette.ignore_paths(),
            ToolSource::Live { ignore, .. } => ignore,
        }
    }
}

/// Tuning of verification.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifyOptions {
    pub thresholds: VerdictThresholds,
    /// Replay at most this many held-out occurrences per candidate (the first found, in trace
    /// order).
    pub max_occurrences: usize,
    /// Keep at most this many step differences in a verdict.
    pub max_diffs: usize,
    /// For gapped candidates that do not record the gap they were mined with (stores written
    /// before they did): the most unrelated calls allowed between two steps.
    pub max_gap: usize,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        Self {
            thresholds: VerdictThresholds::default(),
            max_occurrences: 1_000,
            max_diffs: 20,
            max_gap: 3,
        }
    }
}

/// One place the candidate's tool sequence was found: a trace index and step positions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundOccurrence {
    pub trace: usize,
    pub steps: Vec<usize>,
}

/// Where each tool is called in a set of traces, by name only (no payloads): enough to find
/// a candidate's occurrences before any trace is loaded whole.
#[derive(Debug, Clone, Default)]
pub struct ToolIndex {
    /// Trace ids, in storage order.
    trace_ids: Vec<String>,
    /// Per trace, the tool of each step (an index into `names`).
    sequences: Vec<Vec<u32>>,
    names: HashMap<String, u32>,
    /// Per tool, `(trace index, step position)` of each call, in trace order.
    calls: Vec<Vec<(usize, usize)>>,
    /// Trace id -> trace index.
    by_id: HashMap<String, usize>,
}

impl ToolIndex {
    /// The index's ids of `tools`; `None` when the index never saw one of them.
    pub(crate) fn ids_of(&self, tools: &[String]) -> Option<Vec<u32>> {
        tools
            .iter()
            .map(|tool| self.names.get(tool.as_str()).copied())
            .collect()
    }

    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a trace: its id and its steps' tool names in step order.
    pub fn push<'n>(&mut self, trace_id: &str, tools: impl IntoIterator<Item = &'n str>) {
        let t = self.trace_ids.len();
        let mut sequence = Vec::new();
        for (i, name) in tools.into_iter().enumerate() {
            let id = match self.names.get(name) {
                Some(&id) => id,
                None => {
                    let id = self.calls.len() as u32;
                    self.names.insert(name.to_string(), id);
                    self.calls.push(Vec::new());
                    id
                }
            };
            self.calls[id as usize].push((t, i));
            sequence.push(id);
        }
        self.by_id.insert(trace_id.to_string(), t);
        self.trace_ids.push(trace_id.to_string());
        self.sequences.push(sequence);
    }

    /// The index of a store's traces that `keep` accepts (by trace id), in storage order,
    /// read from the tool-name stream ([`tool_sequences`]): no payloads.
    pub fn from_store(
        store: &dyn chainweaver_recorder::store::TraceStore,
        keep: &dyn Fn(&str) -> bool,
    ) -> chainweaver_recorder::Result<Self> {
        let read = tool_sequences(store, keep)?;
        let mut index = Self::new();
        for (t, id) in read.trace_ids.iter().enumerate() {
            index.push(id, read.tools(t));
        }
        Ok(index)
    }

    /// Number of traces.
    pub fn len(&self) -> usize {
        self.trace_ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.trace_ids.is_empty()
    }

    /// The id of trace `t`.
    pub fn trace_id(&self, t: usize) -> &str {
        &self.trace_ids[t]
    }

    /// The index of a trace id.
    pub fn position(&self, trace_id: &str) -> Option<usize> {
        self.by_id.get(trace_id).copied()
    }
}

/// Held-out traces: a [`ToolIndex`] to find occurrences in, and the traces themselves, whole,
/// for the occurrences that are replayed. Built from traces in memory ([`HeldOut::new`]), or
/// from an index over the whole held-out share and only the traces a replay needs
/// ([`HeldOut::with_loaded`]).
#[derive(Debug, Clone, Default)]
pub struct HeldOut<'a> {
    index: ToolIndex,
    /// Per index position, the trace when loaded.
    traces: Vec<Option<&'a TraceWithSteps>>,
}

impl<'a> HeldOut<'a> {
    /// Every trace in memory.
    pub fn new(traces: Vec<&'a TraceWithSteps>) -> Self {
        let mut index = ToolIndex::new();
        for trace in &traces {
            index.push(
                &trace.trace.trace_id,
                trace.steps.iter().map(|s| s.tool_name.as_str()),
            );
        }
        Self {
            index,
            traces: traces.into_iter().map(Some).collect(),
        }
    }

    /// An index of every held-out trace, with some of them loaded (matched by trace id; a
    /// loaded trace the index does not hold is ignored).
    pub fn with_loaded(index: ToolIndex, loaded: &'a [TraceWithSteps]) -> Self {
        let mut traces = vec![None; index.len()];
        for trace in loaded {
            if let Some(t) = index.position(&trace.trace.trace_id) {
                traces[t] = Some(trace);
            }
        }
        Self { index, traces }
    }

    /// The index of the held-out traces.
    pub fn index(&self) -> &ToolIndex {
        &self.index
    }

    /// Trace `t`, when loaded.
    pub fn trace(&self, t: usize) -> Option<&'a TraceWithSteps> {
        self.traces.get(t).copied().flatten()
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
}

/// Occurrences of `tools` in the indexed traces, left to right and not overlapping, skipping
/// the traces whose ids are in `exclude`. Contiguous unless `max_gap` is given (then up to that
/// many other calls may sit between two steps; the earliest match is taken).
pub fn find_occurrences(
    index: &ToolIndex,
    tools: &[String],
    max_gap: Option<usize>,
    exclude: &HashSet<&str>,
    limit: usize,
) -> Vec<FoundOccurrence> {
    let mut found = Vec::new();
    let Some(ids) = index.ids_of(tools) else {
        return found;
    };
    let starts = &index.calls[ids[0] as usize];
    let excluded: HashSet<usize> = exclude.iter().filter_map(|id| index.position(id)).collect();
    // Per trace, the first position a new occurrence may start at (no overlaps).
    let mut free_from: (usize, usize) = (usize::MAX, 0);
    for &(t, start) in starts {
        if found.len() >= limit {
            break;
        }
        if excluded.contains(&t) || (free_from.0 == t && start < free_from.1) {
            continue;
        }
        let steps = &index.sequences[t];
        let mut positions = Vec::with_capacity(ids.len());
        positions.push(start);
        let mut at = start;
        for &tool in &ids[1..] {
            let reach = match max_gap {
                None => at + 1,
                Some(gap) => at + 1 + gap,
            };
            let next =
                (at + 1..=reach.min(steps.len().saturating_sub(1))).find(|&i| steps[i] == tool);
            match next {
                Some(i) => {
                    positions.push(i);
                    at = i;
                }
                None => break,
            }
        }
        if positions.len() == ids.len() {
            free_from = (t, at + 1);
            found.push(FoundOccurrence {
                trace: t,
                steps: positions,
            });
        }
    }
    found
}

/// The flow inputs a caller would have passed to reproduce an occurrence: each input takes the
/// value of the first step field mapped straight from it (a schema `default` fills the rest).
pub fn flow_inputs(flow: &FlowDefinition, steps: &[&ObservedStep]) -> JsonObject {
    let (schema, mappings): (Option<&Value>, Vec<&Map<String, Value>>) = match flow {
        FlowDefinition::Linear(flow) => (
            flow.input_schema.as_ref(),
            flow.steps.iter().map(|s| &s.input_mapping).collect(),
        ),
        FlowDefinition::Dag(flow) => (
            flow.input_schema.as_ref(),
            flow.steps.iter().map(|s| &s.input_mapping).collect(),
        ),
    };
    let properties = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    let mut inputs = Map::new();
    let Some(properties) = properties else {
        return inputs;
    };
    for (mapping, step) in mappings.iter().zip(steps) {
        for (field, source) in mapping.iter() {
            let Some(name) = source.as_str() else {
                continue;
            };
            if !properties.contains_key(name) || inputs.contains_key(name) {
                continue;
            }
            if let Some(value) = step.inputs.get(field) {
                inputs.insert(name.to_string(), value.clone());
            }
        }
    }
    for (name, schema) in properties {
        if !inputs.contains_key(name)
            && let Some(default) = schema.get("default")
        {
            inputs.insert(name.clone(), default.clone());
        }
    }
    inputs
}

/// How one replayed occurrence compared with its recording.
#[derive(Debug, Clone, PartialEq)]
pub enum OccurrenceOutcome {
    /// Every step matched (or the flow failed exactly where the agent's call failed).
    Exact,
    /// The first differing step, why, and its differences (pointers into the step record).
    Differs {
        step: usize,
        mode: FailureMode,
        diffs: Vec<StepDiff>,
    },
}

/// Compare a replay with the occurrence it replayed (`recorded`: the agent's steps, in order,
/// one a flow step).
pub fn compare_replay(
    result: &ExecutionResult,
    recorded: &[&ObservedStep],
    ignore: &IgnorePaths,
) -> OccurrenceOutcome {
    let positions: Vec<(usize, Option<usize>)> = (0..recorded.len()).map(|s| (s, None)).collect();
    compare_aligned(result, recorded, &positions, ignore)
}

/// [`compare_replay`] where the agent's calls and the flow's steps need not be one to one:
/// `positions[p]` is the flow step the agent's call `p` stands for and, for a map step, the
/// element index of its iteration. A map step iteration the agent never made is a difference.
pub fn compare_aligned(
    result: &ExecutionResult,
    recorded: &[&ObservedStep],
    positions: &[(usize, Option<usize>)],
    ignore: &IgnorePaths,
) -> OccurrenceOutcome {
    if let Some(rejected) = result
        .execution_log
        .iter()
        .find(|r| r.step_index < 0 && !r.success)
    {
        return OccurrenceOutcome::Differs {
            step: 0,
            mode: FailureMode::BindingWrong,
            diffs: vec![StepDiff {
                step: Some(0),
                pointer: String::new(),
                expected: result.initial_input.clone().map(Value::Object),
                actual: rejected
                    .error_message
                    .clone()
                    .map(|m| Value::String(format!("flow input rejected: {m}"))),
            }],
        };
    }
    let empty = JsonObject::new();
    for (s, expected) in recorded.iter().enumerate() {
        let tool = expected.tool_name.as_str();
        let one = |mode, pointer: &str, expected: Option<Value>, actual: Option<Value>| {
            OccurrenceOutcome::Differs {
                step: s,
                mode,
                diffs: vec![StepDiff {
                    step: Some(s),
                    pointer: pointer.into(),
                    expected,
                    actual,
                }],
            }
        };
        let Some(&(flow_step, iteration)) = positions.get(s) else {
            let call = Value::String(format!("a call of `{tool}`"));
            return one(FailureMode::ToolFailed, "", Some(call), None);
        };
        let Some(record) = result.execution_log.iter().find(|r| {
            usize::try_from(r.step_index).is_ok_and(|i| i == flow_step)
                && (iteration.is_none() || r.iteration == iteration)
        }) else {
            let call = Value::String(format!("a call of `{tool}`"));
            return one(FailureMode::ToolFailed, "", Some(call), None);
        };
        // Compared as borrowed; ignored fields are dropped from the differences (the same as
        // removing them from both sides first, without copying either).
        let mut diffs = Vec::new();
        match &expected.inputs {
            Value::Object(sent) => diff_objects(Some(s), "", sent, &record.inputs, &mut diffs),
            other => diffs.push(StepDiff {
                step: Some(s),
                pointer: String::new(),
                expected: Some(other.clone()),
                actual: Some(Value::Object(record.inputs.clone())),
            }),
        }
        if let Some(outcome) = differs(s, FailureMode::BindingWrong, "/inputs", diffs, tool, ignore)
        {
            return outcome;
        }
        match (expected.is_error(), record.success) {
            (true, false) => return OccurrenceOutcome::Exact,
            (false, false) => {
                let message = record.error_message.clone().map(Value::String);
                return one(FailureMode::ToolFailed, "/error_message", None, message);
            }
            (true, true) => {
                let (was, is) = (Some(Value::Bool(false)), Some(Value::Bool(true)));
                return one(FailureMode::ToolFailed, "/success", was, is);
            }
            (false, true) => {}
        }
        let expected_output =
            cassette::normalized_output(expected.outputs.as_ref().unwrap_or(&Value::Null));
        let actual_output = record.outputs.as_ref().unwrap_or(&empty);
        let mut diffs = Vec::new();
        diff_objects(Some(s), "", &expected_output, actual_output, &mut diffs);
        if let Some(outcome) = differs(
            s,
            FailureMode::ToolOutputChanged,
            "/outputs",
            diffs,
            tool,
            ignore,
        ) {
            return outcome;
        }
    }
    if let Some(outcome) = extra_iterations(result, positions) {
        return outcome;
    }
    OccurrenceOutcome::Exact
}

/// A map step's iteration for an element the agent did not call the tool for.
fn extra_iterations(
    result: &ExecutionResult,
    positions: &[(usize, Option<usize>)],
) -> Option<OccurrenceOutcome> {
    let expected: HashSet<(usize, usize)> = positions
        .iter()
        .filter_map(|&(step, iteration)| Some((step, iteration?)))
        .collect();
    if expected.is_empty() {
        return None;
    }
    let extra = result.execution_log.iter().find(|r| {
        let (Ok(step), Some(iteration)) = (usize::try_from(r.step_index), r.iteration) else {
            return false;
        };
        positions.iter().any(|&(s, i)| s == step && i.is_some())
            && !expected.contains(&(step, iteration))
    })?;
    let step = usize::try_from(extra.step_index).ok()?;
    let at = positions.iter().position(|&(s, _)| s == step).unwrap_or(0);
    Some(OccurrenceOutcome::Differs {
        step: at,
        mode: FailureMode::BindingWrong,
        diffs: vec![StepDiff {
            step: Some(at),
            pointer: "/iteration".into(),
            expected: None,
            actual: extra.iteration.map(Value::from),
        }],
    })
}

/// The differences of one side of a step that are not ignored, under `prefix`, as an outcome
/// (`None`: nothing left, the side matched).
fn differs(
    step: usize,
    mode: FailureMode,
    prefix: &str,
    mut diffs: Vec<StepDiff>,
    tool: &str,
    ignore: &IgnorePaths,
) -> Option<OccurrenceOutcome> {
    diffs.retain(|d| !ignore.ignores(tool, &d.pointer));
    if diffs.is_empty() {
        return None;
    }
    for diff in &mut diffs {
        diff.pointer = format!("{prefix}{}", diff.pointer);
    }
    Some(OccurrenceOutcome::Differs { step, mode, diffs })
}

/// Replays candidates against held-out traces.
#[derive(Debug, Clone)]
pub struct Verifier {
    source: ToolSource,
    options: VerifyOptions,
}

impl Verifier {
    pub fn new(source: ToolSource, options: VerifyOptions) -> Self {
        Self { source, options }
    }

    pub fn options(&self) -> &VerifyOptions {
        &self.options
    }

    /// The tools one candidate replays with: an error naming the candidate when a tool has no
    /// recordings, is missing from the manifest, or may have side effects without permission.
    fn tools_for(
        &self,
        candidate: &Candidate,
        prefer: &Arc<Mutex<Preference>>,
    ) -> Result<ToolRegistry> {
        let fail = |message: String| Error::Verify {
            candidate: candidate.id.clone(),
            message,
        };
        match &self.source {
            ToolSource::Recorded(cassette) => {
                cassette
                    .registry(&candidate.tools, prefer)
                    .map_err(|err| match err {
                        Error::Verify { message, .. } => fail(message),
                        other => other,
                    })
            }
            ToolSource::Live {
                tools,
                allow_side_effects,
                ..
            } => {
                let mut registry = ToolRegistry::new();
                for name in &candidate.tools {
                    let Some(tool) = tools.get(name) else {
                        return Err(fail(format!("the tool manifest declares no tool `{name}`")));
                    };
                    if tool.read_only() != Some(true) && !allow_side_effects {
                        return Err(fail(format!(
                            "tool `{name}` is not marked `read_only = true` in the manifest; replaying it live may change the world (pass --allow-side-effects to allow it)"
                        )));
                    }
                    if registry.get(name).is_none() {
                        registry.insert_shared(Arc::clone(tool));
                    }
                }
                Ok(registry)
            }
        }
    }

    /// The held-out occurrences of `candidate` in `index` (traces it was mined from, by its
    /// evidence, are skipped): all of them, of which the first
    /// [`max_occurrences`](VerifyOptions::max_occurrences) are replayed.
    pub fn occurrences(&self, candidate: &Candidate, index: &ToolIndex) -> Vec<FoundOccurrence> {
        let mined = mined_traces(candidate);
        if let Some(map_step) = candidate.flow.map_step() {
            return loops::find_loop_occurrences(
                index,
                &candidate.tools,
                map_step,
                self.gap_of(candidate).unwrap_or(0),
                &mined,
                usize::MAX,
            );
        }
        find_occurrences(
            index,
            &candidate.tools,
            self.gap_of(candidate),
            &mined,
            usize::MAX,
        )
    }

    /// The gap `candidate`'s occurrences are found with: none for a contiguous candidate; for a
    /// gapped one, the gap it was mined with, or (in stores that did not record it)
    /// [`VerifyOptions::max_gap`].
    fn gap_of(&self, candidate: &Candidate) -> Option<usize> {
        candidate
            .gapped
            .then(|| candidate.max_gap.unwrap_or(self.options.max_gap))
    }

    /// The ids of the traces replaying `candidate` reads whole: those of the occurrences
    /// [`Verifier::verify`] replays.
    pub fn traces_to_load<'i>(&self, candidate: &Candidate, index: &'i ToolIndex) -> Vec<&'i str> {
        let mut traces: Vec<usize> = self
            .occurrences(candidate, index)
            .iter()
            .take(self.options.max_occurrences)
            .map(|o| o.trace)
            .collect();
        traces.dedup();
        traces.into_iter().map(|t| index.trace_id(t)).collect()
    }

    /// Replay `candidate` on its occurrences in `held_out` (traces the candidate was mined from,
    /// by its evidence, are skipped) and decide its verdict. The traces of the replayed
    /// occurrences must be loaded ([`Verifier::traces_to_load`]).
    pub fn verify(&self, candidate: &Candidate, held_out: &HeldOut<'_>) -> Result<Verdict> {
        let prefer = Arc::new(Mutex::new(Preference::default()));
        let mined = mined_traces(candidate);
        let mined_here = mined
            .iter()
            .filter(|id| held_out.index.position(id).is_some())
            .count();
        let found = self.occurrences(candidate, &held_out.index);
        // With no held-out occurrence, recorded tools have nothing to answer from and nothing
        // is replayed: that is a verdict (too few occurrences), not an error. Live tools are
        // still checked, since a missing or unsafe tool is the user's to fix either way.
        let tools = if found.is_empty() && matches!(self.source, ToolSource::Recorded(_)) {
            ToolRegistry::new()
        } else {
            self.tools_for(candidate, &prefer)?
        };
        let executor = FlowExecutor::new(tools);
        let ignore = self.source.ignore();
        let mut verdict = Verdict {
            candidate_id: candidate.id.clone(),
            status: VerdictStatus::Rejected,
            occurrences_replayed: 0,
            exact_matches: 0,
            exact_rate: 0.0,
            failures: FailureCounts::default(),
            mode: self.source.mode().to_string(),
            reason: String::new(),
            cause: None,
            thresholds: Some(self.options.thresholds),
            holdout_traces: held_out.len() - mined_here,
            occurrences_found: found.len(),
            verified_at: Some(chrono::Utc::now().to_rfc3339()),
            diffs: Vec::new(),
        };
        let options = RunOptions::default();
        for occurrence in found.iter().take(self.options.max_occurrences) {
            let Some(trace) = held_out.trace(occurrence.trace) else {
                return Err(Error::Verify {
                    candidate: candidate.id.clone(),
                    message: format!(
                        "held-out trace {} was not loaded for replay",
                        held_out.index.trace_id(occurrence.trace)
                    ),
                });
            };
            let steps: Vec<&ObservedStep> =
                occurrence.steps.iter().map(|&i| &trace.steps[i]).collect();
            let step_indices: Vec<u32> = steps.iter().map(|s| s.step_index).collect();
            if let Ok(mut preference) = prefer.lock() {
                preference.trace_id.clone_from(&trace.trace.trace_id);
                preference.step_indices.clone_from(&step_indices);
            }
            let (input, positions) = match candidate.flow.map_step() {
                Some(map_step) => loops::aligned_inputs(candidate, &steps, map_step),
                None => (
                    flow_inputs(&candidate.flow, &steps),
                    (0..steps.len()).map(|s| (s, None)).collect(),
                ),
            };
            let result = executor
                .execute(&candidate.flow, input, &options)
                .map_err(|err| Error::Verify {
                    candidate: candidate.id.clone(),
                    message: format!(
                        "the flow cannot run (trace {}): {err}",
                        trace.trace.trace_id
                    ),
                })?;
            verdict.occurrences_replayed += 1;
            match compare_aligned(&result, &steps, &positions, ignore) {
                OccurrenceOutcome::Exact => verdict.exact_matches += 1,
                OccurrenceOutcome::Differs { step, mode, diffs } => {
                    verdict.failures.add(mode);
                    let reference = OccurrenceRef {
                        trace_id: trace.trace.trace_id.clone(),
                        step_indices: step_indices.clone(),
                    };
                    for diff in diffs {
                        if verdict.diffs.len() >= self.options.max_diffs {
                            break;
                        }
                        verdict.diffs.push(VerdictDiff {
                            occurrence: reference.clone(),
                            step,
                            tool_name: steps
                                .get(step)
                                .map(|s| s.tool_name.clone())
                                .unwrap_or_default(),
                            pointer: diff.pointer,
                            expected: diff.expected,
                            actual: diff.actual,
                        });
                    }
                }
            }
        }
        decide(&mut verdict, candidate);
        Ok(verdict)
    }

    /// Verify several candidates, each against its own held-out traces, on up to `threads`
    /// threads; `on_done` is called after each. One result a job, in order.
    pub fn verify_many(
        &self,
        jobs: &[(&Candidate, &HeldOut<'_>)],
        threads: usize,
        on_done: &(dyn Fn() + Sync),
    ) -> Vec<Result<Verdict>> {
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results: Vec<Mutex<Option<Result<Verdict>>>> =
            jobs.iter().map(|_| Mutex::new(None)).collect();
        std::thread::scope(|scope| {
            for _ in 0..threads.clamp(1, jobs.len().max(1)) {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((candidate, held_out)) = jobs.get(i) else {
                            break;
                        };
                        let verdict = self.verify(candidate, held_out);
                        if let Ok(mut slot) = results[i].lock() {
                            *slot = Some(verdict);
                        }
                        on_done();
                    }
                });
            }
        });
        results
            .into_iter()
            .zip(jobs)
            .map(|(slot, (candidate, _))| {
                slot.into_inner().ok().flatten().unwrap_or_else(|| {
                    Err(Error::Verify {
                        candidate: candidate.id.clone(),
                        message: "verification stopped unexpectedly".into(),
                    })
                })
            })
            .collect()
    }
}

/// The traces a candidate was mined from (by its evidence): never replayed.
fn mined_traces(candidate: &Candidate) -> HashSet<&str> {
    candidate
        .evidence
        .occurrence_refs
        .iter()
        .map(|r| r.trace_id.as_str())
        .collect()
}

/// Set a verdict's rate, status, reason and rejection cause from its counts and the
/// candidate's data flow. The one place a verdict is decided.
pub fn decide(verdict: &mut Verdict, candidate: &Candidate) {
    let thresholds = verdict.thresholds.unwrap_or_default();
    let replayed = verdict.occurrences_replayed;
    verdict.exact_rate = if replayed == 0 {
        0.0
    } else {
        verdict.exact_matches as f64 / replayed as f64
    };
    let percent = verdict.exact_rate * 100.0;
    let data_flow = candidate.evidence.data_flow;
    let (status, cause, reason) = if data_flow < thresholds.min_data_flow {
        let steps = candidate.tools.len();
        let linked = (data_flow * steps as f64).round() as usize;
        let what = if linked == 0 {
            "its steps share no data".to_string()
        } else {
            format!(
                "only {linked} of its {steps} steps exchange data; the rest are unrelated calls"
            )
        };
        (
            VerdictStatus::Rejected,
            Some(RejectionCause::Unlinked),
            format!(
                "{what} (data flow {data_flow:.2} < {:.2}): replaying unrelated calls only echoes the agent's arguments",
                thresholds.min_data_flow
            ),
        )
    } else if replayed < thresholds.min_occurrences {
        (
            VerdictStatus::Rejected,
            Some(RejectionCause::TooFewOccurrences),
            format!(
                "{replayed} held-out occurrence{} replayed, fewer than the {} required",
                if replayed == 1 { "" } else { "s" },
                thresholds.min_occurrences
            ),
        )
    } else if verdict.exact_rate >= thresholds.verified {
        (
            VerdictStatus::Verified,
            None,
            format!(
                "{}/{replayed} held-out occurrences replayed exactly ({percent:.1}%)",
                verdict.exact_matches
            ),
        )
    } else {
        let mut causes = Vec::new();
        for (count, mode) in [
            (verdict.failures.binding_wrong, FailureMode::BindingWrong),
            (
                verdict.failures.tool_output_changed,
                FailureMode::ToolOutputChanged,
            ),
            (verdict.failures.tool_failed, FailureMode::ToolFailed),
        ] {
            if count > 0 {
                causes.push(format!("{count} {}", mode.describe()));
            }
        }
        let (status, cause) = if verdict.exact_rate >= thresholds.partial {
            (VerdictStatus::Partial, None)
        } else {
            (VerdictStatus::Rejected, Some(RejectionCause::ReplaysDiffer))
        };
        (
            status,
            cause,
            format!(
                "{}/{replayed} held-out occurrences replayed exactly ({percent:.1}%); {}",
                verdict.exact_matches,
                causes.join(", ")
            ),
        )
    };
    verdict.status = status;
    verdict.cause = cause;
    verdict.reason = reason;
}

#[cfg(test)]
mod tests {
    use super::*;
    use chainweaver_recorder::model::ObservedTrace;
    use serde_json::json;

    fn trace(id: &str, tools: &[&str]) -> TraceWithSteps {
        TraceWithSteps {
            trace: ObservedTrace::new(id, "test"),
            steps: tools
                .iter()
                .enumerate()
                .map(|(i, t)| ObservedStep::new(id, i as u32, *t, json!({})))
                .collect(),
        }
    }

    #[test]
    fn occurrences_are_found_left_to_right_without_overlap() {
        let owned = [
            trace("a", &["x", "y", "x", "y", "z"]),
            trace("b", &["x", "think", "y"]),
            trace("c", &["x", "y"]),
        ];
        let held_out = HeldOut::new(owned.iter().collect());
        let traces = held_out.index();
        let tools = vec!["x".to_string(), "y".to_string()];
        let exclude: HashSet<&str> = ["c"].into_iter().collect();
        let found = find_occurrences(traces, &tools, None, &exclude, usize::MAX);
        assert_eq!(
            found,
            vec![
                FoundOccurrence {
                    trace: 0,
                    steps: vec![0, 1]
                },
                FoundOccurrence {
                    trace: 0,
                    steps: vec![2, 3]
                },
            ]
        );
        let gapped = find_occurrences(traces, &tools, Some(1), &HashSet::new(), usize::MAX);
        assert_eq!(gapped.len(), 4);
        assert_eq!(gapped[2].steps, vec![0, 2]);
        assert_eq!(
            find_occurrences(traces, &tools, None, &HashSet::new(), 1).len(),
            1
        );
    }

    #[test]
    fn a_gapped_candidate_is_replayed_with_the_gap_it_was_mined_with() {
        use chainweaver_analyzer::mine::{ChainAnalyzer, MineConfig};
        // Mined with a gap of 1: `x y` repeats with a different call between, so it is a
        // closed gapped pattern.
        let mined: Vec<TraceWithSteps> = (0..4)
            .map(|i| {
                let between = if i % 2 == 0 { "think" } else { "plan" };
                trace(&format!("m{i}"), &["x", between, "y"])
            })
            .collect();
        let analyzer = ChainAnalyzer::new(MineConfig {
            max_gap: Some(1),
            ..MineConfig::default()
        });
        let outcome = analyzer.analyze(&mined).unwrap();
        let candidate = outcome
            .candidates
            .iter()
            .find(|c| c.tools == ["x", "y"])
            .expect("x y is mined as a gapped pattern");
        assert!(candidate.gapped);
        assert_eq!(candidate.max_gap, Some(1));

        // Held out: one occurrence with one call between, one with two between.
        let owned = [
            trace("h1", &["x", "think", "y"]),
            trace("h2", &["x", "think", "plan", "y"]),
        ];
        let held_out = HeldOut::new(owned.iter().collect());
        let verifier = Verifier::new(
            ToolSource::Recorded(Arc::new(Cassette::from_traces(
                owned.iter(),
                IgnorePaths::default(),
            ))),
            VerifyOptions::default(),
        );
        let found = verifier.occurrences(candidate, held_out.index());
        assert_eq!(found.len(), 1, "gap 1 finds only h1: {found:?}");
        assert_eq!(found[0].trace, 0);

        // A stored candidate that did not record its gap falls back to the verifier's (3).
        let mut unrecorded = candidate.clone();
        unrecorded.max_gap = None;
        assert_eq!(verifier.occurrences(&unrecorded, held_out.index()).len(), 2);
    }

    #[test]
    fn flow_inputs_come_from_the_first_field_mapped_from_them() {
        let flow: FlowDefinition = FlowDefinition::from_value(json!({
            "name": "f",
            "version": "1.0.0",
            "steps": [
                {"tool_name": "find", "input_mapping": {"name": "name", "zip": "zip"}},
                {"tool_name": "get", "input_mapping": {"id": "find.result", "mode": "mode"}}
            ],
            "input_schema": {"type": "object", "properties": {
                "name": {"type": "string"}, "zip": {"type": "string"},
                "mode": {"type": "string", "default": "full"}
            }}
        }))
        .unwrap();
        let a = ObservedStep::new("t", 0, "find", json!({"name": "Ann", "zip": "1"}));
        let b = ObservedStep::new("t", 1, "get", json!({"id": "u1"}));
        let inputs = flow_inputs(&flow, &[&a, &b]);
        assert_eq!(
            Value::Object(inputs),
            json!({"name": "Ann", "zip": "1", "mode": "full"})
        );
    }
}
