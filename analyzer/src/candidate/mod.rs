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

mod effects;
mod profile;
mod schema;
mod stats;

pub use profile::ToolProfiles;
use schema::infer_object_schema;
pub use schema::infer_schema;
pub use stats::{DailySupport, support_by_day};

use std::collections::{BTreeMap, HashMap, HashSet};

use chainweaver_recorder::model::TraceWithSteps;
use chainweaver_recorder::model::candidate::{
    Binding, BindingFlag, BindingSource, Candidate, CandidateStatus, Effect, Evidence,
    OccurrenceRef, Pattern, Selection, StepEffect,
};
use chainweaver_recorder::model::flow::{DagFlow, DagFlowStep, Flow, FlowDefinition, FlowStep};
use serde_json::{Map, Value, json};

use crate::error::{AnalyzerError, Result};
use crate::fast_hash::KeyIndex;
use crate::infer::index::{escape_segment, lookup, member, split_first_segment, unescape_segment};
use crate::infer::{
    InferConfig, OccurrenceView, index_occurrences, infer_from_views, occurrence_views,
    pattern_name, resolve_occurrences,
};
use crate::parallel;

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
    build_candidates_profiled(traces, patterns, config, false, None)
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

/// [`build_candidates`], the tools profiled over the steps of the patterns' occurrences when
/// `profile_occurrences_only`, else over every step of `traces`, and patterns probed first
/// when `probe` says so (profiles do not depend on the probe).
pub(crate) fn build_candidates_profiled(
    traces: &[TraceWithSteps],
    patterns: &[Pattern],
    config: &CandidateConfig,
    profile_occurrences_only: bool,
    probe: Option<Probe>,
) -> Vec<Result<Built>> {
    // Only the patterns' tools are ever looked up.
    let tools: HashSet<String> = patterns
        .iter()
        .flat_map(|p| p.tools.iter().cloned())
        .collect();
    let threads = parallel::thread_count(config.threads);
    let profiles = if profile_occurrences_only {
        // Every step of every occurrence, grouped by tool without reading the steps (the
        // pattern names each position's tool); the tools' jobs sort and read their own.
        let mut names: Vec<&str> = tools.iter().map(String::as_str).collect();
        names.sort_unstable();
        let mut groups: Vec<Vec<(usize, usize)>> = vec![Vec::new(); names.len()];
        for pattern in patterns {
            let ids: Vec<Option<usize>> = pattern
                .tools
                .iter()
                .map(|tool| names.binary_search(&tool.as_str()).ok())
                .collect();
            for occurrence in &pattern.occurrences {
                for (&step, id) in occurrence.steps.iter().zip(&ids) {
                    if let Some(id) = *id {
                        groups[id].push((occurrence.trace, step));
                    }
                }
            }
        }
        ToolProfiles::compute_grouped(traces, names.into_iter().zip(groups).collect(), config)
    } else {
        ToolProfiles::compute(traces, Some(&tools), config)
    };
    // Costliest first (most occurrences), so the threads finish together.
    let mut order: Vec<usize> = (0..patterns.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(patterns[i].occurrences.len()));
    let built = parallel::map(&order, threads, |&i| {
        let pattern = &patterns[i];
        if let Some(probe) = probe
            && pattern.occurrences.len() > probe.occurrences.max(1)
        {
            let small = Pattern {
                tools: pattern.tools.clone(),
                occurrences: even_positions(pattern.occurrences.len(), probe.occurrences.max(1))
                    .map(|i| pattern.occurrences[i].clone())
                    .collect(),
                gapped: pattern.gapped,
            };
            if let Some(built) = build_if_unlinked(traces, &small, &profiles, config, probe)? {
                return Ok(built);
            }
        }
        Ok(Built {
            candidate: build_candidate_with(traces, pattern, &profiles, config)?,
            unlinked_in_probe: Vec::new(),
            read: pattern.occurrences.len(),
        })
    });
    let mut results: Vec<Option<Result<Built>>> = (0..patterns.len()).map(|_| None).collect();
    for (i, result) in order.into_iter().zip(built) {
        results[i] = Some(result);
    }
    results.into_iter().flatten().collect()
}

/// The probe: infer `small`'s bindings and, when a step is linked to no other even loosely,
/// the candidate built from them; `None` when every step is linked.
fn build_if_unlinked(
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

// ----------------------------------------------------------------------------------------

/// Where a mapped value comes from in the flow's context.
#[derive(Debug, Clone, PartialEq)]
enum Wire {
    /// A context key, plus a pointer inside its value.
    Context {
        key: String,
        suffix: String,
    },
    Literal(Value),
}

#[derive(Debug, Default)]
struct FlowInput<'v> {
    /// Per occurrence, the value the caller would have passed.
    values: Vec<Option<&'v Value>>,
    default: Option<Value>,
}

struct Builder<'a, 'v> {
    views: &'a [OccurrenceView<'v>],
    step_ids: Vec<String>,
    /// Output is an object in the occurrences (else it is wrapped as `{"result": ...}`).
    object_output: Vec<bool>,
    inputs: Vec<(String, FlowInput<'v>)>,
    used_names: HashSet<String>,
    /// Per step: context key -> output key.
    output_keys: Vec<Vec<(String, String)>>,
    depends: Vec<HashSet<usize>>,
}

impl<'v> Builder<'_, 'v> {
    fn field_values(&self, step: usize, pointer: &str) -> Vec<Option<&'v Value>> {
        self.views
            .iter()
            .map(|v| {
                let steps: &'v [&'v chainweaver_recorder::model::ObservedStep] = v.steps;
                lookup(&steps[step].inputs, pointer)
            })
            .collect()
    }

    fn fresh_input(&mut self, base: &str, values: Vec<Option<&'v Value>>) -> String {
        let base = if base.is_empty() { "input" } else { base };
        let mut name = base.to_string();
        let mut n = 2;
        while self.used_names.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        self.used_names.insert(name.clone());
        self.inputs.push((
            name.clone(),
            FlowInput {
                values,
                default: None,
            },
        ));
        name
    }

    fn named_input(&mut self, name: &str, values: Vec<Option<&'v Value>>) {
        if !self.inputs.iter().any(|(n, _)| n == name) {
            self.used_names.insert(name.to_string());
            self.inputs.push((
                name.to_string(),
                FlowInput {
                    values,
                    default: None,
                },
            ));
        }
    }

    /// Wire a value at `pointer` of step `from`'s normalized output into step `to`.
    fn output_wire(&mut self, to: usize, from: usize, pointer: &str) -> Option<Wire> {
        let step_id = &self.step_ids[from];
        let (output_key, suffix) = if self.object_output[from] {
            let (key, tail) = split_first_segment(pointer)?;
            (key.into_owned(), tail.to_string())
        } else {
            ("result".to_string(), pointer.to_string())
        };
        let context_key = format!("{step_id}.{output_key}");
        if !self.output_keys[from]
            .iter()
            .any(|(c, _)| *c == context_key)
        {
            self.output_keys[from].push((context_key.clone(), output_key));
        }
        self.depends[to].insert(from);
        Some(Wire::Context {
            key: context_key,
            suffix,
        })
    }
}

fn with_index(list_pointer: &str, index: usize, item_pointer: &str) -> String {
    format!("{list_pointer}/{index}{item_pointer}")
}

fn wire_to_mapping(wire: &Wire) -> Value {
    match wire {
        Wire::Context { key, suffix } if suffix.is_empty() && !key.starts_with('/') => {
            Value::String(key.clone())
        }
        Wire::Context { key, suffix } => Value::String(format!("/{}{suffix}", escape_segment(key))),
        Wire::Literal(value) => value.clone(),
    }
}

fn set_pointer(target: &mut Value, pointer: &str, value: Value) {
    let mut node = target;
    let segments: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|s| unescape_segment(s).into_owned())
        .collect();
    for (i, segment) in segments.iter().enumerate() {
        if !node.is_object() {
            *node = Value::Object(Map::new());
        }
        let Value::Object(map) = node else { return };
        if i + 1 == segments.len() {
            map.insert(segment.clone(), value);
            return;
        }
        node = map
            .entry(segment.clone())
            .or_insert(Value::Object(Map::new()));
    }
}

fn top_key(field: &str) -> String {
    let rest = field.strip_prefix('/').unwrap_or(field);
    unescape_segment(rest.split('/').next().unwrap_or("")).into_owned()
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn assemble(
    traces: &[TraceWithSteps],
    pattern: &Pattern,
    views: &[OccurrenceView<'_>],
    mut bindings: Vec<Binding>,
    profiles: &ToolProfiles,
    config: &CandidateConfig,
) -> Candidate {
    let len = pattern.len();
    let mut step_ids = Vec::with_capacity(len);
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for tool in &pattern.tools {
        let n = seen.entry(tool.as_str()).or_insert(0);
        *n += 1;
        step_ids.push(if *n == 1 {
            tool.clone()
        } else {
            format!("{tool}_{n}")
        });
    }
    let object_output = (0..len)
        .map(|s| {
            views
                .iter()
                .find_map(|v| v.outputs[s])
                .is_none_or(Value::is_object)
        })
        .collect();
    let mut builder = Builder {
        views,
        step_ids,
        object_output,
        inputs: Vec::new(),
        used_names: bindings
            .iter()
            .filter_map(|b| match &b.source {
                BindingSource::FlowInput { name } => Some(name.clone()),
                _ => None,
            })
            .collect(),
        output_keys: vec![Vec::new(); len],
        depends: vec![HashSet::new(); len],
    };

    // Wires, binding by binding; `wires[i]` is `None` when the source is not expressible.
    let mut wires: Vec<Option<Wire>> = Vec::with_capacity(bindings.len());
    let mut templates = Vec::new();
    for i in 0..bindings.len() {
        let binding = &bindings[i];
        let wire = match &binding.source {
            BindingSource::FlowInput { name } => {
                let values = builder.field_values(binding.step, &binding.field);
                builder.named_input(name, values);
                Some(Wire::Context {
                    key: name.clone(),
                    suffix: String::new(),
                })
            }
            BindingSource::StepOutput { step, pointer } => {
                builder.output_wire(binding.step, *step, pointer)
            }
            BindingSource::StepInput { step, pointer } => {
                // Same value as an earlier step's argument: wire it like that argument.
                let earlier = bindings[..i].iter().zip(&wires).find_map(|(b, w)| {
                    let suffix = pointer.strip_prefix(b.field.as_str())?;
                    (b.step == *step && (suffix.is_empty() || suffix.starts_with('/')))
                        .then_some((w.clone(), suffix.to_string()))
                });
                match earlier {
                    Some((Some(Wire::Context { key, suffix }), more)) => {
                        let origin = builder
                            .output_keys
                            .iter()
                            .position(|keys| keys.iter().any(|(c, _)| *c == key));
                        if let Some(origin) = origin {
                            builder.depends[binding.step].insert(origin);
                        }
                        Some(Wire::Context {
                            key,
                            suffix: format!("{suffix}{more}"),
                        })
                    }
                    Some((Some(Wire::Literal(value)), more)) => {
                        let inner = if more.is_empty() {
                            Some(value)
                        } else {
                            lookup(&value, &more).cloned()
                        };
                        inner.map(Wire::Literal)
                    }
                    _ => None,
                }
            }
            BindingSource::Constant { value } => Some(Wire::Literal(value.clone())),
            BindingSource::ListElement {
                step,
                list_pointer,
                item_pointer,
                selection,
            } => match selection {
                Selection::First => builder.output_wire(
                    binding.step,
                    *step,
                    &with_index(list_pointer, 0, item_pointer),
                ),
                Selection::Index { index } => builder.output_wire(
                    binding.step,
                    *step,
                    &with_index(list_pointer, *index, item_pointer),
                ),
                Selection::Last | Selection::Chosen => None,
            },
            BindingSource::Map {
                step,
                list_pointer,
                item_pointer,
                index,
                ..
            } => builder.output_wire(
                binding.step,
                *step,
                &with_index(list_pointer, *index, item_pointer),
            ),
            BindingSource::Template { template, .. } => {
                templates.push(json!({
                    "step": builder.step_ids[binding.step],
                    "field": binding.field,
                    "template": template,
                }));
                None
            }
        };
        wires.push(wire);
    }

    // Input mappings, top-level key by top-level key.
    let mut mappings: Vec<Map<String, Value>> = vec![Map::new(); len];
    let mut constants = Vec::new();
    let mut string_constants: HashMap<(String, String), String> = HashMap::new();
    for (step, mapping) in mappings.iter_mut().enumerate() {
        let members: Vec<usize> = (0..bindings.len())
            .filter(|&i| bindings[i].step == step)
            .collect();
        let mut keys: Vec<String> = Vec::new();
        for &i in &members {
            let key = top_key(&bindings[i].field);
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        for key in keys {
            let group: Vec<usize> = members
                .iter()
                .copied()
                .filter(|&i| top_key(&bindings[i].field) == key)
                .collect();
            let whole = format!("/{}", escape_segment(&key));
            let single = group.len() == 1 && bindings[group[0]].field == whole;
            let mapped = if single {
                let i = group[0];
                match (&wires[i], &bindings[i].source) {
                    (Some(Wire::Literal(Value::String(text))), _) => {
                        // A string in input_mapping is a context reference: carry the
                        // constant as a flow input with a default (one input per field name
                        // and value, however many steps take it).
                        let name = match string_constants.get(&(key.clone(), text.clone())) {
                            Some(name) => name.clone(),
                            None => {
                                let values = builder.field_values(step, &whole);
                                let name = builder.fresh_input(&sanitize(&key), values);
                                if let Some((_, input)) = builder.inputs.last_mut() {
                                    input.default = Some(Value::String(text.clone()));
                                }
                                constants.push(json!({"input": name, "value": text}));
                                string_constants.insert((key.clone(), text.clone()), name.clone());
                                name
                            }
                        };
                        Some(Wire::Context {
                            key: name,
                            suffix: String::new(),
                        })
                    }
                    (Some(wire), _) => Some(wire.clone()),
                    (None, _) => None,
                }
            } else if group
                .iter()
                .all(|&i| matches!(wires[i], Some(Wire::Literal(_))))
            {
                let mut object = Value::Object(Map::new());
                for &i in &group {
                    if let Some(Wire::Literal(value)) = &wires[i] {
                        let inner = &bindings[i].field[whole.len()..];
                        set_pointer(&mut object, inner, value.clone());
                    }
                }
                Some(Wire::Literal(object))
            } else {
                None
            };
            let wire = match mapped {
                Some(wire) => wire,
                None => {
                    for &i in &group {
                        if !bindings[i].flags.contains(&BindingFlag::AgentChoice)
                            && !bindings[i].flags.contains(&BindingFlag::NotExpressible)
                        {
                            bindings[i].flags.push(BindingFlag::NotExpressible);
                        }
                    }
                    let values = builder.field_values(step, &whole);
                    let name = builder.fresh_input(&sanitize(&key), values);
                    Wire::Context {
                        key: name,
                        suffix: String::new(),
                    }
                }
            };
            mapping.insert(key, wire_to_mapping(&wire));
        }
    }

    // Effects and determinism.
    let mut determinism = BTreeMap::new();
    for tool in &pattern.tools {
        if !determinism.contains_key(tool) {
            determinism.insert(tool.clone(), profiles.determinism(tool));
        }
    }
    let step_effects: Vec<StepEffect> = pattern
        .tools
        .iter()
        .enumerate()
        .map(|(step, tool)| {
            let (effect, reason) = effects::guess_effect(tool, determinism.get(tool));
            StepEffect {
                step,
                tool_name: tool.clone(),
                effect,
                reason,
            }
        })
        .collect();
    let read_only = step_effects.iter().all(|e| e.effect == Effect::ReadOnly);

    // Dependencies: data (wired or not: a choice among an earlier step's results still waits
    // for them), then effect order.
    let mut depends = builder.depends.clone();
    for binding in &bindings {
        match &binding.source {
            BindingSource::StepOutput { step, .. }
            | BindingSource::ListElement { step, .. }
            | BindingSource::Map { step, .. } => {
                depends[binding.step].insert(*step);
            }
            BindingSource::Template { slots, .. } => {
                for slot in slots {
                    if let BindingSource::StepOutput { step, .. } = slot.source {
                        depends[binding.step].insert(step);
                    }
                }
            }
            _ => {}
        }
    }
    for step in 0..len {
        if step_effects[step].effect != Effect::ReadOnly {
            for deps in depends.iter_mut().skip(step + 1) {
                deps.insert(step);
            }
            depends[step].extend(0..step);
        }
    }
    let mut level = vec![0usize; len];
    for step in 0..len {
        level[step] = depends[step]
            .iter()
            .map(|&d| level[d] + 1)
            .max()
            .unwrap_or(0);
    }
    let mut levels: Vec<usize> = level.clone();
    levels.sort_unstable();
    levels.dedup();
    let linear = levels.len() == len;

    // Output mappings.
    let mut output_mappings: Vec<Option<Map<String, Value>>> = Vec::with_capacity(len);
    for step in 0..len {
        let last_of_linear = linear && step + 1 == len;
        if last_of_linear {
            output_mappings.push(None);
            continue;
        }
        let mut mapping = Map::new();
        for (context_key, output_key) in &builder.output_keys[step] {
            mapping.insert(context_key.clone(), Value::String(output_key.clone()));
        }
        let is_sink = !linear && !depends.iter().any(|d| d.contains(&step));
        if is_sink {
            for output_key in always_present_keys(views, step, builder.object_output[step]) {
                let context_key = format!("{}.{output_key}", builder.step_ids[step]);
                mapping
                    .entry(context_key)
                    .or_insert(Value::String(output_key));
            }
        }
        output_mappings.push(Some(mapping));
    }

    // Replay the mappings over the occurrences: reproduction and the final contexts.
    let mut reproduced = 0;
    let mut final_contexts = Vec::with_capacity(views.len());
    for (o, view) in views.iter().enumerate() {
        let mut context = Context::default();
        for (name, input) in &builder.inputs {
            if let Some(value) = input.values[o].or(input.default.as_ref()) {
                context.insert(name, value);
            }
        }
        let mut all_equal = true;
        for step in 0..len {
            if !resolves_to(&mappings[step], &context, &view.steps[step].inputs) {
                all_equal = false;
            }
            if let Some(output) = view.outputs[step] {
                // Outputs that are not objects are seen as `{"result": output}`.
                let wrapped_get = |key: &str| match output {
                    Value::Object(map) => member(map, key),
                    other => (key == "result").then_some(other),
                };
                match &output_mappings[step] {
                    None => match output {
                        Value::Object(map) => {
                            for (key, value) in map {
                                context.insert(key, value);
                            }
                        }
                        other => context.insert("result", other),
                    },
                    Some(mapping) => {
                        for (context_key, output_key) in mapping {
                            if let Some(value) = output_key.as_str().and_then(wrapped_get) {
                                context.insert(context_key, value);
                            }
                        }
                    }
                }
            }
        }
        if all_equal {
            reproduced += 1;
        }
        final_contexts.push(context);
    }

    // Schemas.
    let max_enum = config.max_enum_values;
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (name, input) in &builder.inputs {
        let observed: Vec<&Value> = input.values.iter().flatten().copied().collect();
        let mut schema = infer_schema(observed.iter().copied(), max_enum);
        if let (Some(default), Value::Object(map)) = (&input.default, &mut schema) {
            map.insert("default".into(), default.clone());
        }
        if input.default.is_none() && observed.len() == views.len() {
            required.push(Value::String(name.clone()));
        }
        properties.insert(name.clone(), schema);
    }
    let input_schema = json!({"type": "object", "properties": properties, "required": required});
    let output_schema = infer_object_schema(final_contexts.iter().map(Context::entries), max_enum);
    let mut tool_schemas = BTreeMap::new();
    for tool in &pattern.tools {
        if !tool_schemas.contains_key(tool) {
            tool_schemas.insert(tool.clone(), profiles.schema(tool));
        }
    }

    // Evidence and score.
    let n = views.len().max(1) as f64;
    let success = views
        .iter()
        .filter(|v| v.steps.iter().all(|s| !s.is_error()))
        .count();
    let success_rate = success as f64 / n;
    let support = pattern.support();
    let round_trips_saved = support * len.saturating_sub(1);
    let mean_confidence = if bindings.is_empty() {
        1.0
    } else {
        bindings.iter().map(|b| b.confidence).sum::<f64>() / bindings.len() as f64
    };
    let binding_quality = if bindings.is_empty() {
        1.0
    } else {
        bindings
            .iter()
            .map(|b| {
                if b.is_flagged() && b.flags != [BindingFlag::Optional] {
                    config.flagged_binding_weight
                } else {
                    b.confidence
                }
            })
            .sum::<f64>()
            / bindings.len() as f64
    };
    let determinism_factor = pattern
        .tools
        .iter()
        .map(|t| determinism.get(t).and_then(|d| d.ratio).unwrap_or(1.0))
        .sum::<f64>()
        / len.max(1) as f64;
    let effect_factor = if read_only {
        1.0
    } else {
        config.side_effect_factor
    };
    let linked = linked_steps(len, bindings.iter().map(|b| (b.step, &b.source)));
    let data_flow = linked.iter().filter(|&&l| l).count() as f64 / len.max(1) as f64;
    let score = round_trips_saved as f64
        * data_flow
        * data_flow
        * success_rate
        * binding_quality
        * determinism_factor
        * effect_factor;
    let evidence = Evidence {
        support,
        data_flow,
        occurrences: views.len(),
        occurrence_refs: views
            .iter()
            .map(|v| OccurrenceRef {
                trace_id: v.trace.trace.trace_id.clone(),
                step_indices: v.steps.iter().map(|s| s.step_index).collect(),
            })
            .collect(),
        success_rate,
        mean_confidence,
        flagged_bindings: bindings.iter().filter(|b| b.is_flagged()).count(),
        reproduced: reproduced as f64 / n,
        determinism,
        round_trips_saved,
        effects: step_effects,
        read_only,
        support_by_day: support_by_day(traces, pattern).by_day,
        score,
    };

    // The flow.
    let name = flow_name(&pattern.tools);
    let id = if pattern.gapped {
        format!("{name}~gapped")
    } else {
        name.clone()
    };
    let description = format!(
        "Mined: {} ({} occurrences in {} traces).",
        pattern.tools.join(" -> "),
        views.len(),
        support
    );
    let mut metadata = Map::new();
    metadata.insert("mined_candidate".into(), Value::String(id.clone()));
    metadata.insert(
        "output_normalization".into(),
        Value::String(
            "JSON text results are parsed; a result that is not an object is {\"result\": value}"
                .into(),
        ),
    );
    if !templates.is_empty() {
        metadata.insert("templates".into(), Value::Array(templates));
    }
    // An empty input_mapping hands a tool the whole context: flag the steps observed with no
    // arguments, which a mapping cannot express.
    let whole_context: Vec<Value> = (0..len)
        .filter(|&s| mappings[s].is_empty())
        .map(|s| Value::String(builder.step_ids[s].clone()))
        .collect();
    if !whole_context.is_empty() {
        metadata.insert(
            "steps_given_whole_context".into(),
            Value::Array(whole_context),
        );
    }
    if !constants.is_empty() {
        metadata.insert("string_constants".into(), Value::Array(constants));
    }
    let flow = if linear {
        FlowDefinition::Linear(Flow {
            name: name.clone(),
            version: "1.0.0".into(),
            description,
            steps: (0..len)
                .map(|s| {
                    let mut step = FlowStep::new(pattern.tools[s].clone(), mappings[s].clone());
                    step.output_mapping = output_mappings[s].clone();
                    step
                })
                .collect(),
            input_schema: Some(input_schema),
            output_schema: Some(output_schema),
            metadata,
        })
    } else {
        FlowDefinition::Dag(DagFlow {
            name: name.clone(),
            version: "1.0.0".into(),
            description,
            steps: (0..len)
                .map(|s| {
                    let mut deps: Vec<usize> = depends[s].iter().copied().collect();
                    deps.sort_unstable();
                    DagFlowStep {
                        step_id: builder.step_ids[s].clone(),
                        tool_name: pattern.tools[s].clone(),
                        depends_on: deps.iter().map(|&d| builder.step_ids[d].clone()).collect(),
                        input_mapping: mappings[s].clone(),
                        output_mapping: output_mappings[s].clone(),
                        retry_policy: None,
                        on_error: Default::default(),
                        input_templates: Default::default(),
                        output_key: None,
                    }
                })
                .collect(),
            input_schema: Some(input_schema),
            output_schema: Some(output_schema),
            metadata,
        })
    };
    Candidate {
        id,
        tools: pattern.tools.clone(),
        gapped: pattern.gapped,
        flow,
        bindings,
        tool_schemas,
        evidence,
        status: CandidateStatus::Proposed,
        metadata: Map::new(),
    }
}

/// Output keys present in every successful occurrence of a step (`result` for wrapped ones).
fn always_present_keys(views: &[OccurrenceView<'_>], step: usize, object: bool) -> Vec<String> {
    if !object {
        return vec!["result".to_string()];
    }
    let mut keys: Option<Vec<String>> = None;
    for view in views {
        let Some(Value::Object(map)) = view.outputs[step] else {
            continue;
        };
        keys = Some(match keys {
            None => map.keys().cloned().collect(),
            Some(previous) => previous
                .into_iter()
                .filter(|k| map.contains_key(k))
                .collect(),
        });
    }
    keys.unwrap_or_default()
}

/// A flow context during the mapping replay: keys in insertion order, values borrowed from the
/// occurrences and the candidate (payloads are never copied).
#[derive(Debug, Default)]
struct Context<'c> {
    keys: KeyIndex<&'c str>,
    values: Vec<&'c Value>,
}

impl<'c> Context<'c> {
    fn get(&self, key: &str) -> Option<&'c Value> {
        self.keys.position(key).map(|at| self.values[at])
    }

    /// Like a map insert: an existing key keeps its place and takes the new value.
    fn insert(&mut self, key: &'c str, value: &'c Value) {
        match self.keys.position(key) {
            Some(at) => self.values[at] = value,
            None => {
                self.keys.push(key);
                self.values.push(value);
            }
        }
    }

    /// The entries in insertion order.
    fn entries(&self) -> impl Iterator<Item = (&'c str, &'c Value)> + '_ {
        self.keys
            .keys()
            .iter()
            .copied()
            .zip(self.values.iter().copied())
    }

    /// Equal as JSON objects (key order does not matter).
    fn equals(&self, map: &Map<String, Value>) -> bool {
        self.values.len() == map.len() && self.entries().all(|(k, v)| member(map, k) == Some(v))
    }
}

/// Whether `mapping` resolved against `context` gives exactly `inputs`: [`resolve`] followed
/// by a comparison, without copying the context or the resolved values.
fn resolves_to(mapping: &Map<String, Value>, context: &Context<'_>, inputs: &Value) -> bool {
    let Value::Object(inputs) = inputs else {
        return false;
    };
    if mapping.is_empty() {
        return context.equals(inputs);
    }
    let mut resolved = 0;
    for (field, source) in mapping {
        let value = match source {
            Value::String(s) if s.starts_with('/') => context_pointer(context, s),
            Value::String(s) => context.get(s),
            literal => Some(literal),
        };
        if let Some(value) = value {
            resolved += 1;
            if member(inputs, field) != Some(value) {
                return false;
            }
        }
    }
    resolved == inputs.len()
}

/// `pointer` (starting with `/`) resolved in the context seen as one object.
fn context_pointer<'c>(context: &Context<'c>, pointer: &str) -> Option<&'c Value> {
    let (key, tail) = split_first_segment(pointer)?;
    lookup(context.get(&key)?, tail)
}

/// What an input mapping hands a tool, given a context (the specification's semantics).
#[cfg(test)]
fn resolve(mapping: &Map<String, Value>, context: &Map<String, Value>) -> Value {
    if mapping.is_empty() {
        return Value::Object(context.clone());
    }
    let whole = Value::Object(context.clone());
    let mut resolved = Map::new();
    for (field, source) in mapping {
        let value = match source {
            Value::String(s) if s.starts_with('/') => whole.pointer(s).cloned(),
            Value::String(s) => context.get(s).cloned(),
            literal => Some(literal.clone()),
        };
        if let Some(value) = value {
            resolved.insert(field.clone(), value);
        }
    }
    Value::Object(resolved)
}

#[cfg(test)]
mod tests;
