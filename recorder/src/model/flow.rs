//! Flow definitions: linear [`Flow`]s and [`DagFlow`]s as plain serde data.
//!
//! The executor in the root crate interprets these; the store persists them; the miner emits
//! them. JSON and YAML files hold the same shapes.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

fn default_version() -> String {
    "1.0.0".to_string()
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// A named, versioned, ordered sequence of tool invocations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flow {
    pub name: String,
    #[serde(default = "default_version")]
    pub version: String,
    #[serde(default)]
    pub description: String,
    pub steps: Vec<FlowStep>,
    /// JSON Schema of the flow's initial input, when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// JSON Schema of the flow's final output, when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

/// One step of a linear flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowStep {
    pub tool_name: String,
    /// `{tool input field: source}`. A plain string source is a context key, a string starting
    /// with `/` is a JSON pointer into the context, any other value is a literal. Empty: the tool
    /// receives the whole context.
    #[serde(default)]
    pub input_mapping: Map<String, Value>,
    /// `{context key: output key}`: only these outputs merge into the context, renamed.
    /// Absent: every output key merges as is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_mapping: Option<Map<String, Value>>,
    /// `{tool input field: template}`: strings with `{{key}}` / `{{key.path}}` placeholders
    /// filled from the context (imported chain tools use these). A template that is exactly one
    /// placeholder yields the value itself, typed; a template without placeholders is a string
    /// literal.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub input_templates: BTreeMap<String, String>,
    /// Merge the whole output object into the context under this one key instead of key by key
    /// (applied after `output_mapping`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_policy: Option<RetryPolicy>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub on_error: OnError,
    /// Makes this a map step: the tool runs once per element of a list in the context (see
    /// [`ForEach`]). Absent: one call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_each: Option<ForEach>,
}

impl FlowStep {
    /// A step calling `tool_name` with the given input mapping and defaults elsewhere.
    pub fn new(tool_name: impl Into<String>, input_mapping: Map<String, Value>) -> Self {
        Self {
            tool_name: tool_name.into(),
            input_mapping,
            output_mapping: None,
            input_templates: BTreeMap::new(),
            output_key: None,
            retry_policy: None,
            on_error: OnError::Fail,
            for_each: None,
        }
    }
}

/// A named, versioned graph of tool invocations; steps of one topological level run concurrently.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DagFlow {
    pub name: String,
    #[serde(default = "default_version")]
    pub version: String,
    #[serde(default)]
    pub description: String,
    pub steps: Vec<DagFlowStep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

/// One step of a DAG flow: a [`FlowStep`]'s fields plus an id and dependencies.
///
/// The fields are spelled out rather than flattened: serde's flatten buffers values in a way
/// that loses exact numbers in literal mappings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DagFlowStep {
    pub step_id: String,
    pub tool_name: String,
    #[serde(default)]
    pub depends_on: Vec<String>,
    #[serde(default)]
    pub input_mapping: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_mapping: Option<Map<String, Value>>,
    /// `{tool input field: template}`: strings with `{{key}}` / `{{key.path}}` placeholders
    /// filled from the context (imported chain tools use these). A template that is exactly one
    /// placeholder yields the value itself, typed; a template without placeholders is a string
    /// literal.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub input_templates: BTreeMap<String, String>,
    /// Merge the whole output object into the context under this one key instead of key by key
    /// (applied after `output_mapping`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_policy: Option<RetryPolicy>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub on_error: OnError,
    /// Makes this a map step: the tool runs once per element of a list in the context (see
    /// [`ForEach`]). Absent: one call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_each: Option<ForEach>,
}

impl DagFlowStep {
    /// The step's tool invocation without its graph position.
    pub fn as_flow_step(&self) -> FlowStep {
        FlowStep {
            tool_name: self.tool_name.clone(),
            input_mapping: self.input_mapping.clone(),
            output_mapping: self.output_mapping.clone(),
            input_templates: self.input_templates.clone(),
            output_key: self.output_key.clone(),
            retry_policy: self.retry_policy.clone(),
            on_error: self.on_error.clone(),
            for_each: self.for_each.clone(),
        }
    }
}

fn default_item() -> String {
    "item".to_string()
}

fn default_concurrency() -> usize {
    1
}

/// A map step's iteration: run the step's tool once per element of a list.
///
/// During one iteration the context the step's `input_mapping` and `input_templates` read is
/// the flow context plus the current element under [`ForEach::item`]. Each iteration's output
/// goes through `output_mapping`; the results, one per run element in element order, are merged
/// as one JSON array under the step's `output_key` (which a map step must have). `retry_policy`
/// and `on_error` apply to each iteration on its own; an iteration skipped by `on_error: skip`
/// leaves `null` in its slot, so slots stay aligned with the elements that ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForEach {
    /// JSON pointer into the context naming the list to iterate (`/orders`, `/search/hits`).
    pub list: String,
    /// The context key under which the current element is visible to this step's input
    /// mapping: `{"order_id": "/item/order_id"}` or `{"order": "item"}`.
    #[serde(default = "default_item")]
    pub item: String,
    /// JSON pointer into the context to a list of element indexes (integers): only those
    /// elements run, in ascending index order. Absent: every element.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<String>,
    /// At most this many iterations run at once (1, the default: one after the other).
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
}

impl ForEach {
    /// Iterate the list at `list`, the element under `item`, one at a time, every element.
    pub fn new(list: impl Into<String>) -> Self {
        Self {
            list: list.into(),
            item: default_item(),
            select: None,
            concurrency: default_concurrency(),
        }
    }
}

/// How often and how patiently a failed step is tried again. Deterministic: no jitter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Attempts after the first.
    #[serde(default)]
    pub max_retries: u32,
    /// Wait before the first retry, in seconds.
    #[serde(default)]
    pub backoff_seconds: f64,
    /// Factor applied to the wait after each retry.
    #[serde(default = "default_multiplier")]
    pub backoff_multiplier: f64,
}

fn default_multiplier() -> f64 {
    1.0
}

/// What a step does when its tool fails after all retries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum OnError {
    /// Stop the flow (the default).
    #[default]
    Fail,
    /// Record the failure and go on without merging outputs.
    Skip,
    /// Run the named tool with the same resolved input.
    Fallback(String),
}

impl OnError {
    /// The textual form used in flow files: `fail`, `skip` or `fallback:<tool>`.
    pub fn as_text(&self) -> String {
        match self {
            OnError::Fail => "fail".to_string(),
            OnError::Skip => "skip".to_string(),
            OnError::Fallback(tool) => format!("fallback:{tool}"),
        }
    }

    /// Parse `fail`, `skip` or `fallback:<tool>`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "fail" => Ok(OnError::Fail),
            "skip" => Ok(OnError::Skip),
            other => match other.strip_prefix("fallback:") {
                Some(tool) if !tool.trim().is_empty() => {
                    Ok(OnError::Fallback(tool.trim().to_string()))
                }
                _ => Err(format!(
                    "on_error must be `fail`, `skip` or `fallback:<tool>`, not `{other}`"
                )),
            },
        }
    }
}

impl Serialize for OnError {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.as_text())
    }
}

impl<'de> Deserialize<'de> for OnError {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        OnError::parse(&text).map_err(D::Error::custom)
    }
}

/// Either kind of flow, as a flow file holds it. A file whose steps carry `step_id` or
/// `depends_on` is a DAG flow.
#[derive(Debug, Clone, PartialEq)]
pub enum FlowDefinition {
    Linear(Flow),
    Dag(DagFlow),
}

impl FlowDefinition {
    /// The position of the first map step (a step with `for_each`), if any.
    pub fn map_step(&self) -> Option<usize> {
        match self {
            FlowDefinition::Linear(flow) => flow.steps.iter().position(|s| s.for_each.is_some()),
            FlowDefinition::Dag(flow) => flow.steps.iter().position(|s| s.for_each.is_some()),
        }
    }

    pub fn name(&self) -> &str {
        match self {
            FlowDefinition::Linear(flow) => &flow.name,
            FlowDefinition::Dag(flow) => &flow.name,
        }
    }

    pub fn version(&self) -> &str {
        match self {
            FlowDefinition::Linear(flow) => &flow.version,
            FlowDefinition::Dag(flow) => &flow.version,
        }
    }

    /// Decide the kind from a parsed JSON value and read it.
    pub fn from_value(value: Value) -> Result<Self, serde_json::Error> {
        let is_dag = value
            .get("steps")
            .and_then(Value::as_array)
            .is_some_and(|steps| {
                steps
                    .iter()
                    .any(|step| step.get("step_id").is_some() || step.get("depends_on").is_some())
            });
        if is_dag {
            serde_json::from_value(value).map(FlowDefinition::Dag)
        } else {
            serde_json::from_value(value).map(FlowDefinition::Linear)
        }
    }
}

impl Serialize for FlowDefinition {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            FlowDefinition::Linear(flow) => flow.serialize(serializer),
            FlowDefinition::Dag(flow) => flow.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for FlowDefinition {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        FlowDefinition::from_value(value).map_err(D::Error::custom)
    }
}

/// Where a flow version is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FlowStatus {
    Draft,
    Active,
    Deprecated,
    Retired,
}

impl FlowStatus {
    /// Whether a flow may move from `self` to `to`.
    pub fn can_become(self, to: FlowStatus) -> bool {
        use FlowStatus::*;
        self == to
            || matches!(
                (self, to),
                (Draft, Active) | (Active, Deprecated) | (Deprecated, Active) | (_, Retired)
            ) && self != Retired
    }

    /// Parse `draft`, `active`, `deprecated` or `retired` (any case).
    pub fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "draft" => Some(FlowStatus::Draft),
            "active" => Some(FlowStatus::Active),
            "deprecated" => Some(FlowStatus::Deprecated),
            "retired" => Some(FlowStatus::Retired),
            _ => None,
        }
    }
}

impl fmt::Display for FlowStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FlowStatus::Draft => "DRAFT",
            FlowStatus::Active => "ACTIVE",
            FlowStatus::Deprecated => "DEPRECATED",
            FlowStatus::Retired => "RETIRED",
        })
    }
}

/// A flow version in the registry, as the store keeps it (kind `flow`, key `name@version`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisteredFlow {
    pub status: FlowStatus,
    pub registered_at: super::Timestamp,
    pub updated_at: super::Timestamp,
    pub definition: FlowDefinition,
}

/// What a flow declares about being served as a tool: who owns it, what it may do, what it
/// replaces. Kept in the flow's `metadata` (a flow file writes these keys beside its steps);
/// [`FlowServing::from_metadata`] reads them, [`FlowServing::write_into`] writes them, and other
/// metadata keys are left alone.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowServing {
    /// The team or person answerable for the flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The flow's own safety declaration; without one, it is derived from its tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety: Option<SafetyContract>,
    /// The tools one call of the flow stands in for (default: its steps' tools).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaces_tools: Vec<String>,
    /// Model round trips one call saves (default: steps - 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_trips_saved: Option<u64>,
    /// Set on flows created as chain tools at runtime: the `chain_config` they were created
    /// with, as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_config: Option<Value>,
}

/// The metadata keys [`FlowServing`] owns.
pub mod serving_keys {
    pub const OWNER: &str = "owner";
    pub const SAFETY: &str = "safety";
    pub const REPLACES_TOOLS: &str = "replaces_tools";
    pub const ROUND_TRIPS_SAVED: &str = "round_trips_saved";
    pub const CHAIN_CONFIG: &str = "chain_config";
    /// Set by chain-tool import (`chain_config`): where a flow came from.
    pub const IMPORTED_FROM: &str = "imported_from";
    /// The value of [`IMPORTED_FROM`] for chain tools.
    pub const FROM_CHAIN_CONFIG: &str = "chain_config";
}

impl FlowServing {
    /// Read the serving keys of a flow's metadata; a key holding the wrong shape is an error
    /// naming it.
    pub fn from_metadata(metadata: &Map<String, Value>) -> Result<Self, String> {
        let mut own = Map::new();
        for key in [
            serving_keys::OWNER,
            serving_keys::SAFETY,
            serving_keys::REPLACES_TOOLS,
            serving_keys::ROUND_TRIPS_SAVED,
            serving_keys::CHAIN_CONFIG,
        ] {
            if let Some(value) = metadata.get(key) {
                own.insert(key.to_string(), value.clone());
            }
        }
        serde_json::from_value(Value::Object(own)).map_err(|err| format!("flow metadata: {err}"))
    }

    /// Write the set fields into a flow's metadata (unset ones are removed).
    pub fn write_into(&self, metadata: &mut Map<String, Value>) {
        for key in [
            serving_keys::OWNER,
            serving_keys::SAFETY,
            serving_keys::REPLACES_TOOLS,
            serving_keys::ROUND_TRIPS_SAVED,
            serving_keys::CHAIN_CONFIG,
        ] {
            metadata.remove(key);
        }
        if let Ok(Value::Object(own)) = serde_json::to_value(self) {
            metadata.extend(own);
        }
    }
}

/// What a flow (or tool) may do to the world, and whether a person must approve a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SafetyContract {
    pub side_effects: SideEffects,
    #[serde(default)]
    pub requires_approval: bool,
}

impl SafetyContract {
    /// Safe to expose without asking: no side effects beyond reading, no approval needed.
    pub fn is_read_only(&self) -> bool {
        matches!(self.side_effects, SideEffects::None | SideEffects::Read)
            && !self.requires_approval
    }
}

/// How far a call reaches beyond reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SideEffects {
    #[serde(alias = "none")]
    None,
    #[serde(alias = "read")]
    Read,
    #[serde(alias = "write")]
    Write,
    #[serde(alias = "destructive")]
    Destructive,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn linear_and_dag_are_told_apart_and_round_trip() {
        // Parsed from text: `json!` would turn the literal 10.50 into an f64 and lose its spelling.
        let linear: Value = serde_json::from_str(
            r#"{"name": "etl", "steps": [
                {"tool_name": "fetch", "input_mapping": {"url": "url", "limit": 10.50}},
                {"tool_name": "store", "on_error": "fallback:store_backup"}
            ]}"#,
        )
        .unwrap();
        let parsed = FlowDefinition::from_value(linear).unwrap();
        let FlowDefinition::Linear(flow) = &parsed else {
            panic!("expected a linear flow, got {parsed:?}")
        };
        assert_eq!(flow.version, "1.0.0");
        assert_eq!(
            flow.steps[1].on_error,
            OnError::Fallback("store_backup".into())
        );
        let text = serde_json::to_string(&parsed).unwrap();
        assert!(text.contains("10.50"), "literal number text kept: {text}");

        let dag = json!({"name": "fan", "steps": [
            {"step_id": "a", "tool_name": "fetch_a"},
            {"step_id": "m", "tool_name": "merge", "depends_on": ["a"]}
        ]});
        assert!(matches!(
            FlowDefinition::from_value(dag).unwrap(),
            FlowDefinition::Dag(_)
        ));
    }

    #[test]
    fn for_each_takes_defaults_and_is_absent_from_steps_without_it() {
        let flow: Flow = serde_json::from_value(json!({"name": "m", "steps": [
            {"tool_name": "get", "output_key": "all", "for_each": {"list": "/orders"}},
            {"tool_name": "put"}
        ]}))
        .unwrap();
        assert_eq!(flow.steps[0].for_each, Some(ForEach::new("/orders")));
        let for_each = flow.steps[0].for_each.as_ref().unwrap();
        assert_eq!((for_each.item.as_str(), for_each.concurrency), ("item", 1));
        assert_eq!(flow.steps[1].for_each, None);
        let text = serde_json::to_string(&flow.steps[1]).unwrap();
        assert!(!text.contains("for_each"), "{text}");

        let dag: DagFlowStep = serde_json::from_value(json!({
            "step_id": "a", "tool_name": "get", "output_key": "all",
            "for_each": {"list": "/xs", "item": "x", "select": "/pick", "concurrency": 4}
        }))
        .unwrap();
        let expected = ForEach {
            list: "/xs".into(),
            item: "x".into(),
            select: Some("/pick".into()),
            concurrency: 4,
        };
        assert_eq!(dag.as_flow_step().for_each, Some(expected));
        let typo = serde_json::from_value::<FlowStep>(json!({
            "tool_name": "get", "for_each": {"list": "/xs", "concurency": 2}
        }));
        assert!(typo.unwrap_err().to_string().contains("concurency"));
    }

    #[test]
    fn bad_on_error_is_rejected_with_the_value() {
        let err = OnError::parse("retry").unwrap_err();
        assert!(err.contains("`retry`"), "{err}");
        assert!(OnError::parse("fallback:").is_err());
    }

    #[test]
    fn serving_metadata_reads_writes_and_names_bad_keys() {
        let mut metadata = json!({"mined_candidate": "c1", "owner": "payments",
            "safety": {"side_effects": "read"}, "round_trips_saved": 2})
        .as_object()
        .cloned()
        .unwrap();
        let mut serving = FlowServing::from_metadata(&metadata).unwrap();
        assert_eq!(serving.owner.as_deref(), Some("payments"));
        assert!(serving.safety.unwrap().is_read_only());
        serving.safety = Some(SafetyContract {
            side_effects: SideEffects::Write,
            requires_approval: false,
        });
        serving.owner = None;
        serving.write_into(&mut metadata);
        assert_eq!(metadata["mined_candidate"], json!("c1"));
        assert_eq!(metadata["safety"]["side_effects"], json!("WRITE"));
        assert!(!metadata.contains_key("owner"));
        let bad = json!({"safety": {"side_effects": "maybe"}});
        let err = FlowServing::from_metadata(bad.as_object().unwrap()).unwrap_err();
        assert!(err.contains("maybe"), "{err}");
    }
}
