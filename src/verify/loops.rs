//! Replaying a flow with a map step: its occurrences are runs of any length, and the agent's
//! calls of the run line up with the map step's iterations by element index.

use std::collections::HashSet;

use chainweaver_recorder::model::ObservedStep;
use chainweaver_recorder::model::candidate::{BindingSource, Candidate};
use serde_json::Value;

use super::{FoundOccurrence, ToolIndex, cassette, flow_inputs};
use crate::tool::JsonObject;

/// Occurrences of `tools` where the tool at `map_step` runs one or more times (back to back,
/// or with up to `max_gap` other calls between two calls), left to right and not overlapping,
/// skipping the traces in `exclude`.
pub(super) fn find_loop_occurrences(
    index: &ToolIndex,
    tools: &[String],
    map_step: usize,
    max_gap: usize,
    exclude: &HashSet<&str>,
    limit: usize,
) -> Vec<FoundOccurrence> {
    let mut found = Vec::new();
    let Some(ids) = index.ids_of(tools) else {
        return found;
    };
    for (t, sequence) in index.sequences.iter().enumerate() {
        if exclude.contains(index.trace_id(t)) {
            continue;
        }
        let mut at = 0;
        while at < sequence.len() && found.len() < limit {
            match chainweaver_analyzer::loops::match_run(sequence, at, &ids, map_step, max_gap) {
                Some(run) => {
                    at = run.end();
                    found.push(FoundOccurrence {
                        trace: t,
                        steps: run.calls,
                    });
                }
                None => at += 1,
            }
        }
    }
    found
}

/// The flow inputs that reproduce a loop occurrence (with the agent's selection of elements,
/// when the flow takes it) and, per agent call, its flow step and element index.
pub(super) fn aligned_inputs(
    candidate: &Candidate,
    steps: &[&ObservedStep],
    map_step: usize,
) -> (JsonObject, Vec<(usize, Option<usize>)>) {
    let run_len = (steps.len() + 1)
        .saturating_sub(candidate.tools.len())
        .max(1);
    let run_end = map_step + run_len;
    let firsts: Vec<&ObservedStep> = steps
        .iter()
        .enumerate()
        .filter(|(p, _)| *p <= map_step || *p >= run_end)
        .map(|(_, s)| *s)
        .collect();
    let mut inputs = flow_inputs(&candidate.flow, &firsts);
    let selection = candidate.bindings.iter().find_map(|b| match &b.source {
        BindingSource::Each {
            step,
            list_pointer,
            item_pointer,
            select_input: Some(name),
        } if b.step == map_step => Some((b, *step, list_pointer, item_pointer, name)),
        _ => None,
    });
    let iterations: Vec<usize> = match selection {
        None => (0..run_len).collect(),
        Some((binding, source, list_pointer, item_pointer, name)) => {
            let list = firsts
                .get(source)
                .and_then(|s| list_at(s, list_pointer))
                .unwrap_or_default();
            let picked: Vec<usize> = steps[map_step..run_end.min(steps.len())]
                .iter()
                .map(|call| {
                    let value = call.inputs.pointer(&binding.field);
                    list.iter()
                        .position(|element| {
                            value.is_some() && element.pointer(item_pointer) == value
                        })
                        // No element holds the value: an iteration the flow never runs.
                        .unwrap_or(usize::MAX)
                })
                .collect();
            let mut chosen: Vec<usize> = picked
                .iter()
                .copied()
                .filter(|&i| i != usize::MAX)
                .collect();
            chosen.sort_unstable();
            chosen.dedup();
            inputs.insert(
                name.clone(),
                Value::Array(chosen.into_iter().map(Value::from).collect()),
            );
            picked
        }
    };
    let positions = (0..steps.len())
        .map(|p| {
            if p < map_step {
                (p, None)
            } else if p < run_end {
                (map_step, iterations.get(p - map_step).copied())
            } else {
                (p + 1 - run_len, None)
            }
        })
        .collect();
    (inputs, positions)
}

/// The list at `pointer` in a recorded step's normalized output.
fn list_at(step: &ObservedStep, pointer: &str) -> Option<Vec<Value>> {
    let output = Value::Object(cassette::normalized_output(step.outputs.as_ref()?));
    let found = output
        .pointer(pointer)
        .or_else(|| output.get("result").and_then(|r| r.pointer(pointer)))?;
    found.as_array().cloned()
}
