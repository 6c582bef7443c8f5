//! Layout: what each step waits for, whether the flow is linear, and where each step's outputs
//! land in the context.

use std::collections::HashSet;

use chainweaver_recorder::model::candidate::{Binding, BindingSource, Effect, StepEffect};
use serde_json::{Map, Value};

use super::wiring::Builder;
use crate::infer::OccurrenceView;

/// What each step waits for: the steps its wires read (`depends`), the steps its bindings
/// read (wired or not: a choice among an earlier step's results still waits for them), then
/// effect order (a step with effects follows every earlier step and precedes every later one).
pub(super) fn step_dependencies(
    mut depends: Vec<HashSet<usize>>,
    bindings: &[Binding],
    step_effects: &[StepEffect],
) -> Vec<HashSet<usize>> {
    let len = depends.len();
    for binding in bindings {
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
    depends
}

/// Whether the flow is linear: every topological level holds one step.
pub(super) fn is_linear(depends: &[HashSet<usize>]) -> bool {
    let len = depends.len();
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
    levels.len() == len
}

/// Each step's output mapping: the keys later steps read, under `<step id>.<output key>`; a DAG's
/// sinks also map every key present in all occurrences, and a linear flow's last step has none
/// (its whole output merges into the context).
pub(super) fn output_mappings(
    builder: &Builder<'_, '_>,
    depends: &[HashSet<usize>],
    linear: bool,
) -> Vec<Option<Map<String, Value>>> {
    let len = builder.step_ids.len();
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
            for output_key in always_present_keys(builder.views, step, builder.object_output[step])
            {
                let context_key = format!("{}.{output_key}", builder.step_ids[step]);
                mapping
                    .entry(context_key)
                    .or_insert(Value::String(output_key));
            }
        }
        output_mappings.push(Some(mapping));
    }
    output_mappings
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

/// The flow's shape: what each step is handed and where its outputs land, what it waits for,
/// and whether the steps run one after another.
pub(super) struct Layout {
    pub(super) input_mappings: Vec<Map<String, Value>>,
    pub(super) output_mappings: Vec<Option<Map<String, Value>>>,
    pub(super) depends: Vec<HashSet<usize>>,
    pub(super) linear: bool,
}
