//! Binding inference: for every input field of every step of a pattern, where its value comes
//! from, decided across all the pattern's occurrences.
//!
//! # How a field is decided
//!
//! For each occurrence the payloads of the pattern's steps are indexed once (canonical hash of
//! every JSON node -> its locations, see the `index` module), so looking up where a value appeared earlier
//! is a hash probe. For one field, every occurrence contributes the *source keys* that explain
//! its value there:
//!
//! - an earlier step's output at a pointer, or an element of a list in an earlier output (the
//!   list pointer, with the element's position kept aside to find a selection rule);
//! - an earlier step's input at a pointer;
//! - a template: a string made of literal text and earlier values;
//! - "first appears here" (a flow input) when nothing earlier equals it;
//! - the most common value (a constant), counted across occurrences.
//!
//! A key's confidence is the share of the occurrences holding the field in which it explains the
//! value. Keys are ranked by confidence, then by kind (outputs, then inputs, templates,
//! constants, flow inputs), then by distance (nearest earlier step first), then by whether the
//! source's last pointer segment names the field, then by the shorter pointer.
//!
//! Coincidences: a field whose value is the same in every occurrence is a constant unless data
//! flow explains it, which needs an *informative* value (a string or number of three characters
//! or more, a non-empty container) or a source named like the field; `true` appearing in an
//! earlier output explains nothing.
//!
//! Never guessed silently: when the best key explains fewer than
//! [`InferConfig::min_confidence`] of the occurrences the field becomes a flow input flagged
//! [`BindingFlag::LowConfidence`]; when a different key, true in other occurrences, comes within
//! [`InferConfig::ambiguity_margin`] of the best one, it becomes a flow input flagged
//! [`BindingFlag::Ambiguous`]. A list element chosen without a consistent rule is reported as
//! such and flagged [`BindingFlag::AgentChoice`].
//!
//! Output normalization: a step output that is a string holding a JSON object or array is
//! parsed (see [`normalize_output`]), so pointers reach inside tool results that arrive as JSON
//! text; any other string is a value at the root pointer `""`.
//!
//! [`BindingFlag::LowConfidence`]: chainweaver_recorder::model::candidate::BindingFlag::LowConfidence
//! [`BindingFlag::Ambiguous`]: chainweaver_recorder::model::candidate::BindingFlag::Ambiguous
//! [`BindingFlag::AgentChoice`]: chainweaver_recorder::model::candidate::BindingFlag::AgentChoice

mod field;
pub(crate) mod index;
mod template;

use std::borrow::Cow;
use std::collections::HashSet;

use chainweaver_recorder::model::candidate::{Binding, BindingSource, Pattern};
use chainweaver_recorder::model::{ObservedStep, TraceWithSteps};
use serde_json::Value;

use crate::error::{AnalyzerError, Result};
use crate::fast_hash::KeyIndex;
use field::{Inferred, infer_field};
use index::{
    FastMap, OccurrenceIndex, OccurrenceSpan, Side, ValueIndex, canonical_hash, last_segment,
};

/// Tuning of binding inference.
#[derive(Debug, Clone, PartialEq)]
pub struct InferConfig {
    /// Below this share of occurrences a source is not trusted: the field becomes a flagged
    /// flow input.
    pub min_confidence: f64,
    /// A different source within this share of the best one makes the field ambiguous.
    pub ambiguity_margin: f64,
    /// A constant needs at least this many occurrences.
    pub min_constant_occurrences: usize,
    /// String outputs longer than this are not parsed as JSON.
    pub max_payload_bytes: usize,
    /// At most this many JSON nodes of each step input or output are indexed.
    pub max_nodes_per_payload: usize,
    /// At most this many earlier locations are considered for one value in one occurrence.
    pub max_locations_per_value: usize,
    /// Earlier values shorter than this (in bytes) are not taken as template slots.
    pub min_template_part: usize,
    /// Strings longer than this are not searched for templates.
    pub max_template_len: usize,
}

impl Default for InferConfig {
    fn default() -> Self {
        Self {
            min_confidence: 0.8,
            ambiguity_margin: 0.05,
            min_constant_occurrences: 2,
            max_payload_bytes: 1 << 20,
            max_nodes_per_payload: 20_000,
            max_locations_per_value: 64,
            min_template_part: 3,
            max_template_len: 2_000,
        }
    }
}

/// The output as binding pointers see it: a string holding a JSON object or array (at most
/// `max_bytes` long) is parsed; anything else is kept as is.
pub fn normalize_output(output: &Value, max_bytes: usize) -> Value {
    normalized_output(output, max_bytes).into_owned()
}

/// [`normalize_output`] without copying: borrowed unless a string was parsed.
pub(crate) fn normalized_output(output: &Value, max_bytes: usize) -> Cow<'_, Value> {
    if let Value::String(text) = output {
        let trimmed = text.trim_start();
        if text.len() <= max_bytes
            && (trimmed.starts_with('{') || trimmed.starts_with('['))
            && let Ok(parsed @ (Value::Object(_) | Value::Array(_))) =
                serde_json::from_str::<Value>(text)
        {
            return Cow::Owned(parsed);
        }
    }
    Cow::Borrowed(output)
}

/// One occurrence of a pattern, resolved against its trace, with its outputs normalized. The
/// parsed outputs live here so that the [`OccurrenceView`]s (and their indexes) can borrow them.
#[derive(Debug)]
pub(crate) struct ResolvedOccurrence<'t> {
    trace: &'t TraceWithSteps,
    steps: Vec<&'t ObservedStep>,
    /// Normalized outputs; `None` for a failed step or one without a result.
    outputs: Vec<Option<Cow<'t, Value>>>,
}

/// One occurrence of a pattern as inference reads it.
#[derive(Debug)]
pub(crate) struct OccurrenceView<'a> {
    pub trace: &'a TraceWithSteps,
    pub steps: &'a [&'a ObservedStep],
    /// Normalized outputs; `None` for a failed step or one without a result.
    pub outputs: Vec<Option<&'a Value>>,
    pub index: OccurrenceIndex<'a, 'a>,
}

/// The pattern's name in messages: its tools joined by ` -> `.
pub(crate) fn pattern_name(pattern: &Pattern) -> String {
    pattern.tools.join(" -> ")
}

/// A step's output as inference reads it: `None` when the call failed or returned nothing.
fn normalized_step_output<'t>(
    step: &'t ObservedStep,
    config: &InferConfig,
) -> Option<Cow<'t, Value>> {
    if step.is_error() {
        None
    } else {
        step.outputs
            .as_ref()
            .map(|o| normalized_output(o, config.max_payload_bytes))
    }
}

/// Resolve and check every occurrence, and normalize its outputs.
pub(crate) fn resolve_occurrences<'t>(
    traces: &'t [TraceWithSteps],
    pattern: &Pattern,
    config: &InferConfig,
) -> Result<Vec<ResolvedOccurrence<'t>>> {
    let name = || pattern_name(pattern);
    if pattern.is_empty() {
        return Err(AnalyzerError::InvalidPattern {
            pattern: name(),
            message: "the pattern has no steps".into(),
        });
    }
    let mut views = Vec::with_capacity(pattern.occurrences.len());
    for (number, occurrence) in pattern.occurrences.iter().enumerate() {
        let invalid = |message: String| AnalyzerError::InvalidOccurrence {
            pattern: name(),
            occurrence: number,
            message,
        };
        let trace = traces.get(occurrence.trace).ok_or_else(|| {
            invalid(format!(
                "trace index {} is out of range ({} traces)",
                occurrence.trace,
                traces.len()
            ))
        })?;
        if occurrence.steps.len() != pattern.len() {
            return Err(invalid(format!(
                "trace {}: {} step positions for a pattern of {} tools",
                trace.trace.trace_id,
                occurrence.steps.len(),
                pattern.len()
            )));
        }
        let mut steps = Vec::with_capacity(pattern.len());
        for (position, (&at, tool)) in occurrence.steps.iter().zip(&pattern.tools).enumerate() {
            let step = trace.steps.get(at).ok_or_else(|| {
                invalid(format!(
                    "trace {}: step position {at} is out of range ({} steps)",
                    trace.trace.trace_id,
                    trace.steps.len()
                ))
            })?;
            if &step.tool_name != tool {
                return Err(invalid(format!(
                    "trace {}, step {}: tool `{}` where the pattern has `{tool}`",
                    trace.trace.trace_id, step.step_index, step.tool_name
                )));
            }
            if position > 0 && at <= occurrence.steps[position - 1] {
                return Err(invalid(format!(
                    "trace {}: step positions are not increasing",
                    trace.trace.trace_id
                )));
            }
            steps.push(step);
        }
        let outputs: Vec<Option<Cow<'t, Value>>> = steps
            .iter()
            .map(|step| normalized_step_output(step, config))
            .collect();
        views.push(ResolvedOccurrence {
            trace,
            steps,
            outputs,
        });
    }
    Ok(views)
}

/// The payloads of every resolved occurrence in one shared index (all steps but the last: its
/// payloads never explain anything, nothing comes after it), with each occurrence's part.
pub(crate) fn index_occurrences<'a>(
    resolved: &'a [ResolvedOccurrence<'_>],
    config: &InferConfig,
) -> (ValueIndex<'a>, Vec<OccurrenceSpan>) {
    let mut index = ValueIndex::default();
    let mut spans = Vec::with_capacity(resolved.len());
    let max = config.max_nodes_per_payload;
    for (at, occurrence) in resolved.iter().enumerate() {
        if at == 1 {
            // Occurrences of one pattern are alike: room for all, as the first needed, so the
            // vectors are not copied over and over as they grow.
            index.reserve_for(resolved.len() - 1);
        }
        index.begin_occurrence();
        let indexed = occurrence.steps.len().saturating_sub(1);
        for (position, (step, output)) in occurrence
            .steps
            .iter()
            .zip(&occurrence.outputs)
            .enumerate()
            .take(indexed)
        {
            index.add(position, Side::Input, &step.inputs, max);
            if let Some(output) = output {
                index.add(position, Side::Output, output, max);
            }
        }
        spans.push(index.occurrence_span());
    }
    (index, spans)
}

/// Views of resolved occurrences, reading `indexed` (from [`index_occurrences`] over the same
/// occurrences) when given; without it the views index nothing.
pub(crate) fn occurrence_views<'a>(
    resolved: &'a [ResolvedOccurrence<'_>],
    indexed: Option<&'a (ValueIndex<'a>, Vec<OccurrenceSpan>)>,
) -> Vec<OccurrenceView<'a>> {
    resolved
        .iter()
        .enumerate()
        .map(|(at, occurrence)| OccurrenceView {
            trace: occurrence.trace,
            steps: &occurrence.steps,
            outputs: occurrence.outputs.iter().map(|o| o.as_deref()).collect(),
            index: match indexed {
                Some((index, spans)) => OccurrenceIndex::new(index, spans[at].clone()),
                None => OccurrenceIndex::default(),
            },
        })
        .collect()
}

/// Infer a binding for every input field of every step of `pattern`.
///
/// `pattern.occurrences` index into `traces`. Bindings come out in step order, fields in the
/// order they first appear. Errors name the occurrence that does not fit the traces.
pub fn infer_bindings(
    traces: &[TraceWithSteps],
    pattern: &Pattern,
    config: &InferConfig,
) -> Result<Vec<Binding>> {
    let resolved = resolve_occurrences(traces, pattern, config)?;
    let indexed = index_occurrences(&resolved, config);
    let views = occurrence_views(&resolved, Some(&indexed));
    Ok(infer_from_views(&views, pattern, config))
}

pub(crate) fn infer_from_views(
    views: &[OccurrenceView<'_>],
    pattern: &Pattern,
    config: &InferConfig,
) -> Vec<Binding> {
    let mut inferred = Vec::new();
    for step in 0..pattern.len() {
        for field in discover_fields(views, step, config) {
            if let Some(found) = infer_field(views, pattern, step, &field, config) {
                inferred.push(found);
            }
        }
    }
    detect_maps(&mut inferred, pattern);
    let mut bindings: Vec<Binding> = inferred.into_iter().map(|i| i.binding).collect();
    name_flow_inputs(&mut bindings);
    bindings
}

// ----------------------------------------------------------------------------------------
// Fields

/// An input field of one step, with its value in every occurrence that has it.
#[derive(Debug)]
struct Field<'v> {
    pointer: String,
    /// `(occurrence, value, canonical hash)`, in occurrence order.
    values: Vec<(usize, &'v Value, u64)>,
}

/// A node of the tree of input keys seen at one step, across occurrences.
#[derive(Debug, Default)]
struct FieldStat<'v> {
    pointer: String,
    objects: usize,
    found_whole: usize,
    hashes: FastMap<u64, usize>,
    values: Vec<(usize, &'v Value, u64)>,
    /// Child ids, in first-seen order; `child_keys` in the same order.
    children: Vec<usize>,
    child_keys: KeyIndex<&'v str>,
}

/// The id of `parent`'s child `key`, created (in first-seen order) when new.
fn child_stat<'v>(stats: &mut Vec<FieldStat<'v>>, parent: usize, key: &'v str) -> usize {
    if let Some(at) = stats[parent].child_keys.position(key) {
        return stats[parent].children[at];
    }
    let id = stats.len();
    let pointer = format!("{}/{}", stats[parent].pointer, index::escape_segment(key));
    stats.push(FieldStat {
        pointer,
        ..FieldStat::default()
    });
    let parent_stat = &mut stats[parent];
    parent_stat.children.push(id);
    parent_stat.child_keys.push(key);
    id
}

/// Record `value` (an input at the field `stat`) of occurrence `at`; returns its hash.
/// Objects are descended (their keys become fields) down to [`index::MAX_RECURSION_DEPTH`].
fn visit_field<'v>(
    stats: &mut Vec<FieldStat<'v>>,
    view: &OccurrenceView<'_>,
    step: usize,
    at: usize,
    id: usize,
    value: &'v Value,
    depth: usize,
) -> u64 {
    let hash = match value {
        Value::Object(map) if depth < index::MAX_RECURSION_DEPTH => {
            let mut entries = Vec::with_capacity(map.len());
            for (key, item) in map {
                let child = child_stat(stats, id, key);
                let child_hash = visit_field(stats, view, step, at, child, item, depth + 1);
                entries.push((index::key_hash(key), child_hash));
            }
            stats[id].objects += 1;
            index::combine_object(entries)
        }
        _ => canonical_hash(value),
    };
    let stat = &mut stats[id];
    *stat.hashes.entry(hash).or_default() += 1;
    if matches!(value, Value::Object(_) | Value::Array(_)) {
        let found = view.index.candidates(hash).any(|loc| {
            let location = view.index.location(loc);
            location.step < step && location.value == value
        });
        if found {
            stat.found_whole += 1;
        }
    }
    stat.values.push((at, value, hash));
    hash
}

/// The input fields of one step: leaves, plus containers that are copied whole from earlier
/// data (or constant as a whole). Objects are descended; arrays are taken whole.
fn discover_fields<'v>(
    views: &[OccurrenceView<'v>],
    step: usize,
    config: &InferConfig,
) -> Vec<Field<'v>> {
    // Node 0 stands for the inputs object itself; fields are its descendants.
    let mut stats: Vec<FieldStat<'v>> = vec![FieldStat::default()];
    for (at, view) in views.iter().enumerate() {
        let steps: &'v [&'v ObservedStep] = view.steps;
        let Value::Object(map) = &steps[step].inputs else {
            continue;
        };
        for (key, value) in map {
            let id = child_stat(&mut stats, 0, key);
            visit_field(&mut stats, view, step, at, id, value, 1);
        }
    }
    let mut fields = Vec::new();
    let mut stack: Vec<usize> = stats[0].children.iter().rev().copied().collect();
    while let Some(id) = stack.pop() {
        let stat = &stats[id];
        let present = stat.values.len();
        let whole_share = stat.found_whole as f64 / present as f64;
        let constant = present >= config.min_constant_occurrences.max(2) && stat.hashes.len() == 1;
        let descend = stat.objects == present
            && !stat.children.is_empty()
            && whole_share < config.min_confidence
            && !constant;
        if descend {
            stack.extend(stat.children.iter().rev());
        } else {
            let stat = &mut stats[id];
            fields.push(Field {
                pointer: std::mem::take(&mut stat.pointer),
                values: std::mem::take(&mut stat.values),
            });
        }
    }
    fields
}

// ----------------------------------------------------------------------------------------
// Maps and names

/// Runs of consecutive calls to one tool that take successive elements of one earlier list
/// (call `r` of the run takes element `r`) become map bindings.
fn detect_maps(inferred: &mut [Inferred], pattern: &Pattern) {
    let mut start = 0;
    while start < pattern.len() {
        let mut end = start + 1;
        while end < pattern.len() && pattern.tools[end] == pattern.tools[start] {
            end += 1;
        }
        let run_len = end - start;
        if run_len >= 2 {
            let fields: Vec<String> = inferred
                .iter()
                .filter(|i| i.binding.step == start)
                .map(|i| i.binding.field.clone())
                .collect();
            for field in fields {
                let members: Vec<usize> = (start..end)
                    .filter_map(|s| {
                        inferred
                            .iter()
                            .position(|i| i.binding.step == s && i.binding.field == field)
                    })
                    .collect();
                if members.len() != run_len {
                    continue;
                }
                let first = match &inferred[members[0]].binding.source {
                    BindingSource::ListElement {
                        step,
                        list_pointer,
                        item_pointer,
                        ..
                    } => (*step, list_pointer.clone(), item_pointer.clone()),
                    _ => continue,
                };
                let all_in_order = members.iter().enumerate().all(|(r, &m)| {
                    matches!(&inferred[m].binding.source,
                        BindingSource::ListElement { step, list_pointer, item_pointer, .. }
                        if (*step, list_pointer, item_pointer) == (first.0, &first.1, &first.2))
                        && !inferred[m].positions.is_empty()
                        && inferred[m].positions.iter().all(|&(index, _)| index == r)
                });
                if !all_in_order {
                    continue;
                }
                let positions = &inferred[members[0]].positions;
                let covers_list = if positions.is_empty() {
                    0.0
                } else {
                    positions.iter().filter(|&&(_, len)| len == run_len).count() as f64
                        / positions.len() as f64
                };
                for (r, &m) in members.iter().enumerate() {
                    let binding = &mut inferred[m].binding;
                    binding.source = BindingSource::Map {
                        step: first.0,
                        list_pointer: first.1.clone(),
                        item_pointer: first.2.clone(),
                        index: r,
                        run_start: start,
                        run_len,
                        covers_list,
                    };
                }
            }
        }
        start = end;
    }
}

fn sanitize(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if cleaned.is_empty() {
        "input".to_string()
    } else {
        cleaned
    }
}

/// Flow inputs are named after their field's last segment, numbered when names repeat.
fn name_flow_inputs(bindings: &mut [Binding]) {
    let mut used: HashSet<String> = HashSet::new();
    for binding in bindings.iter_mut() {
        if let BindingSource::FlowInput { name } = &mut binding.source {
            let base = sanitize(&last_segment(&binding.field));
            let mut candidate = base.clone();
            let mut n = 2;
            while used.contains(&candidate) {
                candidate = format!("{base}_{n}");
                n += 1;
            }
            used.insert(candidate.clone());
            *name = candidate;
        }
        let base = sanitize(&last_segment(&binding.field));
        for alternative in &mut binding.alternatives {
            if let BindingSource::FlowInput { name } = &mut alternative.source {
                name.clone_from(&base);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
