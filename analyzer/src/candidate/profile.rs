//! Per-tool facts gathered in one pass over the traffic: inferred schemas and determinism.

use std::collections::{BTreeMap, HashMap, HashSet};

use chainweaver_recorder::model::TraceWithSteps;
use chainweaver_recorder::model::candidate::{ToolDeterminism, ToolSchema};
use serde_json::{Value, json};

use super::schema::infer_schema;
use crate::infer::index::canonical_hash;
use crate::infer::normalize_output;

/// What the traffic shows about each tool, computed once and shared by every candidate.
#[derive(Debug, Clone, Default)]
pub struct ToolProfiles {
    tools: BTreeMap<String, (ToolSchema, ToolDeterminism)>,
}

#[derive(Default)]
struct Gathered<'a> {
    inputs: Vec<&'a Value>,
    outputs: Vec<Value>,
    /// input hash -> (first output hash, calls, all outputs equal so far)
    groups: HashMap<u64, (u64, usize, bool)>,
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
        let mut gathered: HashMap<&str, Gathered<'_>> = HashMap::new();
        for step in traces.iter().flat_map(|t| &t.steps) {
            if step.is_error() || only.is_some_and(|o| !o.contains(&step.tool_name)) {
                continue;
            }
            let entry = gathered.entry(step.tool_name.as_str()).or_default();
            entry.inputs.push(&step.inputs);
            let Some(output) = &step.outputs else {
                continue;
            };
            let normalized = match normalize_output(output, max_payload_bytes) {
                object @ Value::Object(_) => object,
                other => json!({ "result": other }),
            };
            let output_hash = canonical_hash(&normalized);
            let group =
                entry
                    .groups
                    .entry(canonical_hash(&step.inputs))
                    .or_insert((output_hash, 0, true));
            group.1 += 1;
            group.2 &= group.0 == output_hash;
            entry.outputs.push(normalized);
        }
        let tools = gathered
            .into_iter()
            .map(|(tool, g)| {
                let repeated: Vec<_> = g.groups.values().filter(|x| x.1 > 1).collect();
                let consistent = repeated.iter().filter(|x| x.2).count();
                let determinism = ToolDeterminism {
                    calls: g.outputs.len(),
                    repeated_inputs: repeated.len(),
                    consistent,
                    ratio: (!repeated.is_empty())
                        .then(|| consistent as f64 / repeated.len() as f64),
                };
                let schema = ToolSchema {
                    calls: g.inputs.len(),
                    input_schema: infer_schema(g.inputs.iter().copied(), max_enum_values),
                    output_schema: infer_schema(&g.outputs, max_enum_values),
                };
                (tool.to_string(), (schema, determinism))
            })
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
