//! Per-tool facts gathered in one pass over the traffic: inferred schemas and determinism.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

use chainweaver_recorder::model::candidate::{ToolDeterminism, ToolSchema};
use chainweaver_recorder::model::{ObservedStep, TraceWithSteps};
use serde_json::{Value, json};

use super::schema::infer_schema;
use crate::infer::index::{FastMap, canonical_hash};
use crate::infer::normalized_output;
use crate::parallel;

/// What the traffic shows about each tool, computed once and shared by every candidate.
#[derive(Debug, Clone, Default)]
pub struct ToolProfiles {
    tools: BTreeMap<String, (ToolSchema, ToolDeterminism)>,
}

/// Schemas and determinism of one tool from its successful calls.
fn profile(
    steps: &[&ObservedStep],
    max_payload_bytes: usize,
    max_enum_values: usize,
) -> (ToolSchema, ToolDeterminism) {
    let mut g = Gathered::default();
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
        let output_hash = canonical_hash(&normalized);
        let group = g
            .groups
            .entry(canonical_hash(&step.inputs))
            .or_insert((output_hash, 0, true));
        group.1 += 1;
        group.2 &= group.0 == output_hash;
        g.outputs.push(normalized);
    }
    let repeated: Vec<_> = g.groups.values().filter(|x| x.1 > 1).collect();
    let consistent = repeated.iter().filter(|x| x.2).count();
    let determinism = ToolDeterminism {
        calls: g.outputs.len(),
        repeated_inputs: repeated.len(),
        consistent,
        ratio: (!repeated.is_empty()).then(|| consistent as f64 / repeated.len() as f64),
    };
    let schema = ToolSchema {
        calls: g.inputs.len(),
        input_schema: infer_schema(g.inputs.iter().copied(), max_enum_values),
        output_schema: infer_schema(g.outputs.iter().map(AsRef::as_ref), max_enum_values),
    };
    (schema, determinism)
}

#[derive(Default)]
struct Gathered<'a> {
    inputs: Vec<&'a Value>,
    /// Normalized outputs, objects borrowed, anything else wrapped as `{"result": ...}`.
    outputs: Vec<Cow<'a, Value>>,
    /// input hash -> (first output hash, calls, all outputs equal so far)
    groups: FastMap<u64, (u64, usize, bool)>,
}

impl ToolProfiles {
    /// Profile every tool in `traces` (`only`: just these tools) from its successful calls.
    /// Outputs are seen normalized, non-object results wrapped as `{"result": ...}`.
    pub fn compute(
        traces: &[TraceWithSteps],
        only: Option<&HashSet<String>>,
        max_payload_bytes: usize,
        max_enum_values: usize,
    ) -> Self {
        Self::compute_threaded(traces, only, max_payload_bytes, max_enum_values, 1)
    }

    /// [`ToolProfiles::compute`] on up to `threads` threads (0: what the machine offers), one
    /// tool at a time each; the result is the same.
    pub fn compute_threaded(
        traces: &[TraceWithSteps],
        only: Option<&HashSet<String>>,
        max_payload_bytes: usize,
        max_enum_values: usize,
        threads: usize,
    ) -> Self {
        Self::compute_over(
            traces.iter().flat_map(|t| &t.steps),
            only,
            max_payload_bytes,
            max_enum_values,
            threads,
        )
    }

    /// [`ToolProfiles::compute_threaded`] over some of the steps.
    pub(crate) fn compute_over<'t>(
        steps: impl Iterator<Item = &'t ObservedStep>,
        only: Option<&HashSet<String>>,
        max_payload_bytes: usize,
        max_enum_values: usize,
        threads: usize,
    ) -> Self {
        // Steps by tool, in traffic order.
        let mut by_tool: HashMap<&str, Vec<&ObservedStep>> = HashMap::new();
        for step in steps {
            if step.is_error() || only.is_some_and(|o| !o.contains(&step.tool_name)) {
                continue;
            }
            by_tool
                .entry(step.tool_name.as_str())
                .or_default()
                .push(step);
        }
        let mut jobs: Vec<(&str, Vec<&ObservedStep>)> = by_tool.into_iter().collect();
        // Largest first, so the threads finish together.
        jobs.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
        let profiles = parallel::map(&jobs, parallel::thread_count(threads), |(_, steps)| {
            profile(steps, max_payload_bytes, max_enum_values)
        });
        let tools = jobs
            .iter()
            .zip(profiles)
            .map(|((tool, _), profile)| (tool.to_string(), profile))
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
