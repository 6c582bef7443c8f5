//! Per-tool facts gathered in one pass over the traffic: inferred schemas and determinism.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};

use chainweaver_recorder::model::candidate::{ToolDeterminism, ToolSchema};
use chainweaver_recorder::model::{ObservedStep, TraceWithSteps};
use serde_json::{Value, json};

use super::schema::infer_schema;
use super::{CandidateConfig, even_positions};
use crate::infer::index::{FastMap, canonical_hash};
use crate::infer::normalized_output;
use crate::parallel;

/// A step and the `(trace, step)` key that orders the traffic and names it once.
pub(crate) type KeyedStep<'a> = ((usize, usize), &'a ObservedStep);

/// What the traffic shows about each tool, computed once and shared by every candidate.
#[derive(Debug, Clone, Default)]
pub struct ToolProfiles {
    tools: BTreeMap<String, (ToolSchema, ToolDeterminism)>,
}

/// Schemas and determinism of one tool from its successful calls: determinism over all of
/// them, schemas over at most `config.max_schema_calls` spread evenly.
fn profile(steps: &[&ObservedStep], config: &CandidateConfig) -> (ToolSchema, ToolDeterminism) {
    let max_payload_bytes = config.infer.max_payload_bytes;
    let mut g = Gathered {
        inputs: Vec::with_capacity(steps.len()),
        outputs: Vec::with_capacity(steps.len()),
        groups: FastMap::default(),
    };
    // Input hash of each call with an output, in the order of `g.outputs`.
    let mut input_hashes: Vec<u64> = Vec::with_capacity(steps.len());
    for step in steps {
        g.inputs.push(&step.inputs);
        let Some(output) = &step.outputs else {
            continue;
        };
        let normalized = match normalized_output(output, max_payload_bytes) {
            object @ Cow::Borrowed(Value::Object(_)) => object,
            Cow::Owned(object @ Value::Object(_)) => Cow::Owned(object),
            other => Cow::Owned(json!({ "result": other.into_owned() })),
        };
        let input_hash = canonical_hash(&step.inputs);
        g.groups.entry(input_hash).or_insert((None, 0, true)).1 += 1;
        input_hashes.push(input_hash);
        g.outputs.push(normalized);
    }
    // Outputs are hashed only where an input repeats (most inputs are unique).
    for (input_hash, output) in input_hashes.iter().zip(&g.outputs) {
        let Some(group) = g.groups.get_mut(input_hash).filter(|group| group.1 > 1) else {
            continue;
        };
        let output_hash = canonical_hash(output);
        match group.0 {
            None => group.0 = Some(output_hash),
            Some(first) => group.2 &= first == output_hash,
        }
    }
    let repeated: Vec<_> = g.groups.values().filter(|x| x.1 > 1).collect();
    let consistent = repeated.iter().filter(|x| x.2).count();
    let determinism = ToolDeterminism {
        calls: g.outputs.len(),
        repeated_inputs: repeated.len(),
        consistent,
        ratio: (!repeated.is_empty()).then(|| consistent as f64 / repeated.len() as f64),
    };
    let cap = config.max_schema_calls.unwrap_or(usize::MAX).max(1);
    let inputs: Vec<&Value> = even_positions(g.inputs.len(), cap)
        .map(|i| g.inputs[i])
        .collect();
    let outputs = even_positions(g.outputs.len(), cap).map(|i| g.outputs[i].as_ref());
    let schema = ToolSchema {
        calls: inputs.len(),
        input_schema: infer_schema(inputs.iter().copied(), config.max_enum_values),
        output_schema: infer_schema(outputs, config.max_enum_values),
    };
    (schema, determinism)
}

struct Gathered<'a> {
    inputs: Vec<&'a Value>,
    /// Normalized outputs, objects borrowed, anything else wrapped as `{"result": ...}`.
    outputs: Vec<Cow<'a, Value>>,
    /// input hash -> (first output hash, calls, all outputs equal so far)
    groups: FastMap<u64, (Option<u64>, usize, bool)>,
}

impl ToolProfiles {
    /// Profile every tool in `traces` (`only`: just these tools) from its successful calls, on
    /// up to `config.threads` threads (one tool at a time each; the result does not depend on
    /// the number). Outputs are seen normalized, non-object results wrapped as
    /// `{"result": ...}`.
    pub fn compute(
        traces: &[TraceWithSteps],
        only: Option<&HashSet<String>>,
        config: &CandidateConfig,
    ) -> Self {
        // Steps by tool, in traffic order; the tools not asked for are dropped once per tool.
        let mut by_tool: FastMap<&str, Vec<KeyedStep<'_>>> = FastMap::default();
        for (t, trace) in traces.iter().enumerate() {
            for (s, step) in trace.steps.iter().enumerate() {
                by_tool
                    .entry(step.tool_name.as_str())
                    .or_default()
                    .push(((t, s), step));
            }
        }
        let groups = by_tool
            .into_iter()
            .filter(|(tool, _)| only.is_none_or(|o| o.contains(*tool)))
            .collect();
        Self::compute_keyed(groups, config)
    }

    /// [`ToolProfiles::compute`] over the steps given per tool, each with a key that orders
    /// the traffic and names a step once (`(trace, step)` as the sequences number them): each
    /// tool's steps are sorted by key and a step given twice counts once.
    pub(crate) fn compute_keyed(
        mut groups: Vec<(&str, Vec<KeyedStep<'_>>)>,
        config: &CandidateConfig,
    ) -> Self {
        // Largest first, so the threads finish together.
        groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
        let threads = parallel::thread_count(config.threads);
        let profiles = parallel::map(&groups, threads, |(tool, keyed)| {
            let mut keyed = keyed.clone();
            keyed.sort_unstable_by_key(|(key, _)| *key);
            keyed.dedup_by_key(|(key, _)| *key);
            let steps: Vec<&ObservedStep> = keyed
                .into_iter()
                .map(|(_, step)| step)
                .filter(|step| !step.is_error() && step.tool_name == *tool)
                .collect();
            (!steps.is_empty()).then(|| profile(&steps, config))
        });
        let tools = groups
            .iter()
            .zip(profiles)
            .filter_map(|((tool, _), profile)| Some((tool.to_string(), profile?)))
            .collect();
        Self { tools }
    }

    /// The inferred schemas of a tool (`{}` schemas when it never succeeded).
    pub fn schema(&self, tool: &str) -> ToolSchema {
        self.tools
            .get(tool)
            .map(|(s, _)| s.clone())
            .unwrap_or_else(|| ToolSchema {
                input_schema: json!({}),
                output_schema: json!({}),
                calls: 0,
            })
    }

    /// How reproducible a tool's results were.
    pub fn determinism(&self, tool: &str) -> ToolDeterminism {
        self.tools
            .get(tool)
            .map(|(_, d)| d.clone())
            .unwrap_or(ToolDeterminism {
                calls: 0,
                repeated_inputs: 0,
                consistent: 0,
                ratio: None,
            })
    }
}
