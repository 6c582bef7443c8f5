//! Mined patterns, argument bindings, candidate flows and verdicts.
//!
//! - [`Pattern`] / [`Occurrence`]: a repeated tool sequence and where it was seen.
//! - [`Binding`] / [`BindingSource`]: where one input field of one step comes from.
//! - [`Candidate`] / [`Evidence`]: a pattern proposed as a flow, with the reasons to trust it.
//! - [`PatternSummary`]: a frequent pattern as a mining run stores it for browsing.
//! - [`Verdict`]: the outcome of verifying a candidate by replay, with its
//!   [`RejectionCause`] when rejected.
//!
//! Every enum here is externally tagged (`{"step_output": {...}}`): internally tagged, flattened
//! or untagged representations buffer JSON numbers and lose their exact text.

use std::collections::BTreeMap;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Number, Value};

use super::flow::FlowDefinition;
use super::split::Split;

/// Reads a float from the number's exact text with the standard library's correctly rounded
/// parser: serde_json's fast path can land one unit in the last place off, and stored
/// confidences and scores must read back exactly as written.
fn exact_f64<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    let number = Number::deserialize(deserializer)?;
    number.to_string().parse::<f64>().map_err(D::Error::custom)
}

fn exact_f64_option<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
    Option::<Number>::deserialize(deserializer)?
        .map(|n| n.to_string().parse::<f64>().map_err(D::Error::custom))
        .transpose()
}

/// A repeated tool sequence and the places it was seen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pattern {
    /// The tool names, in order.
    pub tools: Vec<String>,
    pub occurrences: Vec<Occurrence>,
    /// True when occurrences may skip steps between the pattern's tools.
    #[serde(default)]
    pub gapped: bool,
}

impl Pattern {
    /// A contiguous pattern.
    pub fn new(tools: Vec<String>, occurrences: Vec<Occurrence>) -> Self {
        Self {
            tools,
            occurrences,
            gapped: false,
        }
    }

    /// Number of steps.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// True for a pattern without steps.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Support: the number of distinct traces holding at least one occurrence.
    pub fn support(&self) -> usize {
        let mut traces: Vec<usize> = self.occurrences.iter().map(|o| o.trace).collect();
        traces.sort_unstable();
        traces.dedup();
        traces.len()
    }
}

/// One place a pattern was seen: a trace and the positions of its steps.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Occurrence {
    /// Index into the slice of traces the pattern was mined from.
    pub trace: usize,
    /// Positions (indices into that trace's `steps`) of the pattern's steps, increasing;
    /// contiguous or with gaps.
    pub steps: Vec<usize>,
}

/// A frequent tool sequence as a mining run reports and stores it, before candidates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatternSummary {
    pub tools: Vec<String>,
    /// Distinct traces containing it.
    pub support: u32,
    /// Occurrences in all (several per trace possible).
    pub occurrences: u64,
    /// `support x (length - 1)`.
    pub round_trips_saved: u64,
    /// Distinct supporting traces per UTC day (`YYYY-MM-DD`) the trace started, for traces with
    /// a start time; only for the best-ranked patterns.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub support_by_day: BTreeMap<String, u64>,
}

/// An occurrence named by stable ids, for storage (trace indices only mean something next to
/// the slice they index).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OccurrenceRef {
    pub trace_id: String,
    /// The `step_index` of each step of the occurrence.
    pub step_indices: Vec<u32>,
}

/// Where one input field of one pattern step comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Binding {
    /// Position of the step in the pattern (0-based).
    pub step: usize,
    pub tool_name: String,
    /// JSON pointer into the step's input (`/user_id`, `/filter/city`).
    pub field: String,
    /// The chosen source. When the evidence is too weak or ambiguous this is a
    /// [`BindingSource::FlowInput`] and `flags` say why.
    pub source: BindingSource,
    /// Share of the occurrences holding the field in which `source` explains its value.
    #[serde(deserialize_with = "exact_f64")]
    pub confidence: f64,
    /// Occurrences in which the step's input holds the field.
    pub observed: usize,
    /// Runner-up sources, best first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<Alternative>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<BindingFlag>,
}

impl Binding {
    /// True when the binding needs a reviewer's eye (flagged for any reason).
    pub fn is_flagged(&self) -> bool {
        !self.flags.is_empty()
    }
}

/// A source that explains a field less well than the chosen one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alternative {
    pub source: BindingSource,
    #[serde(deserialize_with = "exact_f64")]
    pub confidence: f64,
}

/// Why a binding deserves attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BindingFlag {
    /// The best source explained too few occurrences; the field became a flow input.
    LowConfidence,
    /// Two different sources explained about as many occurrences; the field became a flow input.
    Ambiguous,
    /// The agent picked an element of a list without a rule the data shows; the flow takes the
    /// choice as an input.
    AgentChoice,
    /// The source is known but an `input_mapping` cannot express it (templates, nested fields
    /// with mixed sources, a last element); the flow takes the field as an input.
    NotExpressible,
    /// The field was missing from some occurrences.
    Optional,
}

impl BindingFlag {
    /// The words reviewers read: `low confidence`, `ambiguous`, `agent's choice`,
    /// `not expressible`, `optional`.
    pub fn describe(self) -> &'static str {
        match self {
            BindingFlag::LowConfidence => "low confidence",
            BindingFlag::Ambiguous => "ambiguous",
            BindingFlag::AgentChoice => "agent's choice",
            BindingFlag::NotExpressible => "not expressible",
            BindingFlag::Optional => "optional",
        }
    }
}

/// Where a value comes from. Pointers are RFC 6901 JSON pointers; an output pointer addresses
/// the step's *normalized* output (a string holding a JSON object or array is parsed, so `""`
/// is the whole output and `/orders` reaches inside a JSON-string result).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BindingSource {
    /// Supplied by the caller of the flow (the value first appears at this step).
    FlowInput { name: String },
    /// An earlier step's output at a pointer.
    StepOutput { step: usize, pointer: String },
    /// An earlier step's input at a pointer (the two steps share an argument).
    StepInput { step: usize, pointer: String },
    /// The same value in every occurrence.
    Constant { value: Value },
    /// A string embedding earlier values: `template` holds `{{slot}}` placeholders, each slot
    /// names its source.
    Template {
        template: String,
        slots: Vec<TemplateSlot>,
    },
    /// One element of a list in an earlier step's output.
    ListElement {
        step: usize,
        /// Pointer to the list in that step's output.
        list_pointer: String,
        /// Pointer inside the element (`""`: the element itself).
        item_pointer: String,
        selection: Selection,
    },
    /// Part of a run of consecutive calls to the same tool, one call per element of an earlier
    /// list, in list order: this call takes element `index`.
    Map {
        step: usize,
        list_pointer: String,
        item_pointer: String,
        index: usize,
        /// First pattern step of the run and the run's length.
        run_start: usize,
        run_len: usize,
        /// Share of occurrences in which the run covered the whole list.
        #[serde(deserialize_with = "exact_f64")]
        covers_list: f64,
    },
    /// A map step's field: each iteration takes the current element of a list in an earlier
    /// step's output. With `select_input`, the iterations run over the elements the caller
    /// picks (their indexes are that flow input); without, over the whole list.
    Each {
        step: usize,
        /// Pointer to the list in that step's output.
        list_pointer: String,
        /// Pointer inside the element (`""`: the element itself).
        item_pointer: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        select_input: Option<String>,
    },
}

impl BindingSource {
    /// A short name for the kind of source (`step_output`, `template`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            BindingSource::FlowInput { .. } => "flow_input",
            BindingSource::StepOutput { .. } => "step_output",
            BindingSource::StepInput { .. } => "step_input",
            BindingSource::Constant { .. } => "constant",
            BindingSource::Template { .. } => "template",
            BindingSource::ListElement { .. } => "list_element",
            BindingSource::Map { .. } => "map",
            BindingSource::Each { .. } => "each",
        }
    }

    /// Every earlier step this source reads from (a template may read several).
    pub fn source_steps(&self) -> Vec<usize> {
        match self {
            BindingSource::Template { slots, .. } => slots
                .iter()
                .flat_map(|slot| slot.source.source_steps())
                .collect(),
            other => other.source_step().into_iter().collect(),
        }
    }

    /// The source as a short phrase for people: `input user_id`, `constant 20`,
    /// `step 1 output /orders[*] (agent's choice)`, `template "item {name} ready"`.
    pub fn describe(&self) -> String {
        match self {
            BindingSource::FlowInput { name } => format!("input {name}"),
            BindingSource::StepOutput { step, pointer } => {
                format!("step {step} output {}", whole_if_empty(pointer))
            }
            BindingSource::StepInput { step, pointer } => {
                format!("step {step} input {}", whole_if_empty(pointer))
            }
            BindingSource::Constant { value } => format!("constant {value}"),
            BindingSource::Template { template, .. } => {
                format!(
                    "template \"{}\"",
                    template.replace("{{", "{").replace("}}", "}")
                )
            }
            BindingSource::ListElement {
                step,
                list_pointer,
                item_pointer,
                selection,
            } => {
                let (at, note) = match selection {
                    Selection::First => ("0".to_string(), ""),
                    Selection::Last => ("-1".to_string(), " (the last)"),
                    Selection::Index { index } => (index.to_string(), ""),
                    Selection::Chosen => ("*".to_string(), " (agent's choice)"),
                };
                format!("step {step} output {list_pointer}[{at}]{item_pointer}{note}")
            }
            BindingSource::Map {
                step,
                list_pointer,
                item_pointer,
                index,
                ..
            } => format!(
                "step {step} output {list_pointer}[{index}]{item_pointer} (a loop over the list)"
            ),
            BindingSource::Each {
                step,
                list_pointer,
                item_pointer,
                select_input,
            } => match select_input {
                Some(input) => format!(
                    "step {step} output {list_pointer}[each]{item_pointer} (the elements input {input} picks)"
                ),
                None => format!("step {step} output {list_pointer}[each]{item_pointer}"),
            },
        }
    }

    /// The earlier step this source reads from, if any.
    pub fn source_step(&self) -> Option<usize> {
        match self {
            BindingSource::StepOutput { step, .. }
            | BindingSource::StepInput { step, .. }
            | BindingSource::ListElement { step, .. }
            | BindingSource::Map { step, .. }
            | BindingSource::Each { step, .. } => Some(*step),
            _ => None,
        }
    }
}

/// A pointer for people: the empty pointer is the whole value.
fn whole_if_empty(pointer: &str) -> &str {
    if pointer.is_empty() {
        "(whole)"
    } else {
        pointer
    }
}

/// One placeholder of a template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TemplateSlot {
    /// The placeholder's name as written in the template (`{{name}}`).
    pub name: String,
    pub source: BindingSource,
}

/// Which element of a list the agent took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Selection {
    First,
    Last,
    Index {
        index: usize,
    },
    /// Different elements in different occurrences: the agent chose.
    Chosen,
}

/// Whether a tool changes the world, guessed from its name and behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    ReadOnly,
    SideEffect,
    Unknown,
}

/// The side-effect guess for one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepEffect {
    pub step: usize,
    pub tool_name: String,
    pub effect: Effect,
    /// What the guess rests on.
    pub reason: String,
}

/// How reproducible one tool's results were across the observed traffic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDeterminism {
    /// Successful calls observed.
    pub calls: usize,
    /// Distinct inputs that were called more than once.
    pub repeated_inputs: usize,
    /// Of those, how many always gave the same output.
    pub consistent: usize,
    /// `consistent / repeated_inputs`, `None` without repeated inputs.
    #[serde(default, deserialize_with = "exact_f64_option")]
    pub ratio: Option<f64>,
}

/// Inferred JSON Schemas of one tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    pub input_schema: Value,
    /// Schema of the normalized output (see [`BindingSource`]).
    pub output_schema: Value,
    /// Successful calls the schemas were inferred from.
    pub calls: usize,
}

/// Why a candidate deserves (or does not deserve) promotion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Distinct traces holding the pattern.
    pub support: usize,
    /// Share of the pattern's steps linked to another step by data flow (they read an earlier
    /// step's values or a later step reads theirs). Tools that merely follow each other, with
    /// unrelated arguments, score 0 here: repetition without data flow is no flow.
    #[serde(default)]
    pub data_flow: f64,
    /// Occurrences, possibly several a trace.
    pub occurrences: usize,
    pub occurrence_refs: Vec<OccurrenceRef>,
    /// Share of occurrences in which every step succeeded.
    #[serde(deserialize_with = "exact_f64")]
    pub success_rate: f64,
    /// Mean confidence over all bindings.
    #[serde(deserialize_with = "exact_f64")]
    pub mean_confidence: f64,
    /// Bindings flagged for review.
    pub flagged_bindings: usize,
    /// Share of occurrences whose observed inputs the flow's mappings reproduce exactly, given
    /// the flow inputs taken from that occurrence.
    #[serde(deserialize_with = "exact_f64")]
    pub reproduced: f64,
    /// Per tool of the pattern.
    pub determinism: BTreeMap<String, ToolDeterminism>,
    /// `support x (steps - 1)`: agent-model round trips a flow call would have replaced.
    pub round_trips_saved: usize,
    pub effects: Vec<StepEffect>,
    /// True when no step is guessed to have side effects.
    pub read_only: bool,
    /// Distinct supporting traces per UTC day (`YYYY-MM-DD`), when steps carry timestamps.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub support_by_day: BTreeMap<String, usize>,
    /// A loop candidate's occurrences by the number of times the loop ran (empty for a
    /// candidate without a map step).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub loop_lengths: BTreeMap<usize, usize>,
    /// Ranking score; see the analyzer's candidate module for the formula.
    #[serde(deserialize_with = "exact_f64")]
    pub score: f64,
}

impl Evidence {
    /// A loop candidate's runs for people: `1 x120, 2 x48, 3 x9` (calls x occurrences);
    /// `None` without a map step.
    pub fn loop_runs(&self) -> Option<String> {
        if self.loop_lengths.is_empty() {
            return None;
        }
        let runs: Vec<String> = self
            .loop_lengths
            .iter()
            .map(|(calls, occurrences)| format!("{calls} x{occurrences}"))
            .collect();
        Some(runs.join(", "))
    }
}

/// Review state of a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CandidateStatus {
    #[default]
    Proposed,
    Promoted,
    Rejected,
}

/// Which of a pattern's occurrences its bindings were inferred from, when not all of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InferenceSample {
    /// Occurrences read (spread evenly over all of them).
    pub read: usize,
    /// Steps the probe found linked to no other step, so no more occurrences were read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unlinked_in_probe: Vec<usize>,
}

/// A pattern proposed as a flow, with its bindings and evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Stable id: the flow name, plus `~gapped` for gapped patterns.
    pub id: String,
    /// The pattern's tool sequence.
    pub tools: Vec<String>,
    #[serde(default)]
    pub gapped: bool,
    /// For a gapped candidate: the most unrelated calls mining allowed between two of its steps,
    /// so verification and folding find its occurrences as mining did. Absent in stores written
    /// before it was recorded (verification then uses its own default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_gap: Option<usize>,
    pub flow: FlowDefinition,
    pub bindings: Vec<Binding>,
    /// Inferred schemas of every tool the flow calls, by name.
    pub tool_schemas: BTreeMap<String, ToolSchema>,
    pub evidence: Evidence,
    #[serde(default)]
    pub status: CandidateStatus,
    /// The split of the mining run that proposed it: verification replays the traces it held
    /// out. `None`: mined from every trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<Split>,
    /// Set when the bindings come from part of the occurrences only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<InferenceSample>,
    /// The behaviour `analyze` folded this candidate into, when it is verified or partial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behaviour: Option<BehaviourRole>,
    /// Free-form annotations; nothing this project reads back lives here.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

/// Metadata keys that versions before the typed fields wrote, read by [`Candidate::upgrade`].
const LEGACY_SPLIT: &str = "split";
const LEGACY_SAMPLED: &str = "sampled_occurrences";
const LEGACY_UNLINKED: &str = "unlinked_in_probe";

impl Candidate {
    /// The steps as reviewers read them, one label a drawn step: a map step, and a run of
    /// calls a `Map` binding explains (one call per element of an earlier list), are drawn
    /// once as `each TOOL`. The one place a step kind turns into its label.
    pub fn step_labels(&self) -> Vec<String> {
        if let Some(map_step) = self.flow.map_step() {
            return self
                .tools
                .iter()
                .enumerate()
                .map(|(s, tool)| {
                    if s == map_step {
                        format!("each {tool}")
                    } else {
                        tool.clone()
                    }
                })
                .collect();
        }
        let runs: Vec<(usize, usize)> = self
            .bindings
            .iter()
            .filter_map(|b| match &b.source {
                BindingSource::Map {
                    run_start, run_len, ..
                } if *run_len > 1 => Some((*run_start, *run_len)),
                _ => None,
            })
            .collect();
        let mut labels = Vec::new();
        let mut step = 0;
        while step < self.tools.len() {
            let tool = &self.tools[step];
            match runs.iter().find(|(start, _)| *start == step) {
                Some((_, len)) => {
                    labels.push(format!("each {tool}"));
                    step += len;
                }
                None => {
                    labels.push(tool.clone());
                    step += 1;
                }
            }
        }
        labels
    }

    /// Move what earlier versions kept in `metadata` (the split, the inference sample) into
    /// the typed fields. Stores written before those fields existed read through this; a
    /// candidate that has the typed fields is left as it is.
    pub fn upgrade(&mut self) {
        if let Some(value) = self.metadata.shift_remove(LEGACY_SPLIT)
            && self.split.is_none()
        {
            self.split = serde_json::from_value(value).ok();
        }
        let sampled = self.metadata.shift_remove(LEGACY_SAMPLED);
        let unlinked = self.metadata.shift_remove(LEGACY_UNLINKED);
        if self.sample.is_none()
            && let Some(read) = sampled.as_ref().and_then(Value::as_u64)
        {
            self.sample = Some(InferenceSample {
                read: read as usize,
                unlinked_in_probe: unlinked
                    .as_ref()
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_u64)
                    .map(|step| step as usize)
                    .collect(),
            });
        }
    }

    /// Best first: highest score, ties by id (the order candidates are listed and proposed in).
    pub fn rank_order(a: &Candidate, b: &Candidate) -> std::cmp::Ordering {
        b.evidence
            .score
            .total_cmp(&a.evidence.score)
            .then_with(|| a.id.cmp(&b.id))
    }
}

/// Outcome of verifying a candidate by replay. Ordered best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictStatus {
    Verified,
    Partial,
    Rejected,
}

impl VerdictStatus {
    /// The word reports and the stored form use: `verified`, `partial`, `rejected`.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictStatus::Verified => "verified",
            VerdictStatus::Partial => "partial",
            VerdictStatus::Rejected => "rejected",
        }
    }
}

/// One difference between a replayed step and its recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepDiff {
    pub occurrence: OccurrenceRef,
    /// Position of the step in the candidate's flow (0-based).
    pub step: usize,
    /// The step's tool.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tool_name: String,
    /// Pointer into the step record where they differ: `/inputs/user_id`, `/outputs/total`,
    /// `/success` (or the empty pointer for the whole step).
    pub pointer: String,
    /// What the agent's recorded call held (`None`: absent).
    pub expected: Option<Value>,
    /// What the replay produced (`None`: absent).
    pub actual: Option<Value>,
}

/// Why a replayed occurrence did not match its recording (the first differing step decides).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureMode {
    /// The flow computed a step input the agent did not send: a binding is wrong.
    BindingWrong,
    /// The same input gave a different output than recorded: the tool is not deterministic
    /// (or changed since the recording).
    ToolOutputChanged,
    /// The tool failed where the recording succeeded (or the other way round).
    ToolFailed,
}

impl FailureMode {
    /// The words reports use: `binding wrong`, `tool output changed`, `tool failed`.
    pub fn describe(self) -> &'static str {
        match self {
            FailureMode::BindingWrong => "binding wrong",
            FailureMode::ToolOutputChanged => "tool output changed",
            FailureMode::ToolFailed => "tool failed",
        }
    }
}

/// Occurrences that failed, by [`FailureMode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FailureCounts {
    pub binding_wrong: usize,
    pub tool_output_changed: usize,
    pub tool_failed: usize,
}

impl FailureCounts {
    /// Count one failed occurrence.
    pub fn add(&mut self, mode: FailureMode) {
        match mode {
            FailureMode::BindingWrong => self.binding_wrong += 1,
            FailureMode::ToolOutputChanged => self.tool_output_changed += 1,
            FailureMode::ToolFailed => self.tool_failed += 1,
        }
    }

    /// Failed occurrences in all.
    pub fn total(&self) -> usize {
        self.binding_wrong + self.tool_output_changed + self.tool_failed
    }
}

/// The thresholds a verdict's status was decided by.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VerdictThresholds {
    /// Share of exact replays at or above which a candidate is verified.
    #[serde(deserialize_with = "exact_f64")]
    pub verified: f64,
    /// Share of exact replays at or above which a candidate is partial (below: rejected).
    #[serde(deserialize_with = "exact_f64")]
    pub partial: f64,
    /// Fewer held-out occurrences than this: rejected for lack of evidence.
    pub min_occurrences: usize,
    /// Share of steps linked by data flow below which a candidate is rejected whatever its
    /// replays: a step that shares no value with the others only echoes the agent's
    /// arguments, so replaying it proves nothing (1: every step must read from or feed
    /// another).
    #[serde(deserialize_with = "exact_f64")]
    pub min_data_flow: f64,
}

impl Default for VerdictThresholds {
    fn default() -> Self {
        Self {
            verified: 0.9,
            partial: 0.5,
            min_occurrences: 3,
            min_data_flow: 1.0,
        }
    }
}

/// Why a candidate was rejected, in the order the verifier checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectionCause {
    /// Its steps share too little data: replaying unrelated calls proves nothing.
    Unlinked,
    /// Too few held-out occurrences were replayed to judge it.
    TooFewOccurrences,
    /// Too few replays matched their recordings.
    ReplaysDiffer,
}

impl RejectionCause {
    /// The words reports use for why a candidate was rejected.
    pub fn describe(self) -> &'static str {
        match self {
            RejectionCause::Unlinked => "steps share too little data",
            RejectionCause::TooFewOccurrences => "too few held-out occurrences",
            RejectionCause::ReplaysDiffer => "too few replays matched",
        }
    }
}

/// How a folded candidate relates to the behaviour it was folded into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VariantKind {
    /// The lead itself.
    Lead,
    /// The same steps with a loop run a different number of times.
    LoopCount,
    /// The same steps after another, interchangeable first step.
    FirstStep,
    /// A part of the behaviour (a prefix, a suffix or a middle) that mostly occurs inside it.
    Part,
}

impl VariantKind {
    /// The words reports use.
    pub fn describe(self) -> &'static str {
        match self {
            VariantKind::Lead => "the behaviour's lead",
            VariantKind::LoopCount => "another loop count",
            VariantKind::FirstStep => "another first step",
            VariantKind::Part => "a part seen mostly inside it",
        }
    }
}

/// A candidate's place in its [`Behaviour`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BehaviourRole {
    /// The behaviour's name.
    pub name: String,
    /// The behaviour's lead candidate (this one's id when it leads).
    pub lead: String,
    pub kind: VariantKind,
    /// Share of this candidate's occurrences inside the behaviour's.
    #[serde(deserialize_with = "exact_f64")]
    pub inside: f64,
}

impl BehaviourRole {
    /// `lead of NAME`, `another loop count of NAME`, ...
    pub fn describe(&self) -> String {
        match self.kind {
            VariantKind::Lead => format!("leads {}", self.name),
            VariantKind::Part => format!(
                "part of {} ({:.0}% of its occurrences inside it)",
                self.name,
                self.inside * 100.0
            ),
            kind => format!("{} of {}", kind.describe(), self.name),
        }
    }
}

impl Behaviour {
    /// The role of each of its candidates: (candidate id, role).
    pub fn roles(&self) -> impl Iterator<Item = (&str, BehaviourRole)> + '_ {
        self.variants.iter().map(|variant| {
            (
                variant.candidate_id.as_str(),
                BehaviourRole {
                    name: self.name.clone(),
                    lead: self.lead.clone(),
                    kind: variant.kind,
                    inside: variant.inside,
                },
            )
        })
    }
}

/// One candidate of a [`Behaviour`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BehaviourVariant {
    pub candidate_id: String,
    pub kind: VariantKind,
    /// The candidate's tool sequence.
    pub tools: Vec<String>,
    /// Share of the candidate's occurrences that lie inside an occurrence of the behaviour
    /// (1 for the lead, loop counts and first steps).
    #[serde(deserialize_with = "exact_f64")]
    pub inside: f64,
}

/// One behaviour the agents repeat: a lead candidate and the candidates folded into it
/// (other loop counts, other first steps, parts that mostly occur inside it). Reports show one
/// proposal per behaviour.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Behaviour {
    /// Short and unique within a run: first and last step, `each` before a repeated one.
    pub name: String,
    /// The candidate the behaviour is proposed as.
    pub lead: String,
    /// The steps as elements: each lists the tools seen there (more than one for an
    /// interchangeable first step) and whether the agent repeated it back to back.
    pub shape: Vec<ShapeStep>,
    /// Every candidate of the behaviour, the lead first.
    pub variants: Vec<BehaviourVariant>,
    /// Traces holding an occurrence of the behaviour.
    pub traces: usize,
}

/// One element of a [`Behaviour`]'s shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShapeStep {
    pub tools: Vec<String>,
    /// Called one or more times back to back.
    pub repeated: bool,
}

/// The result of replaying a candidate against held-out occurrences.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub candidate_id: String,
    pub status: VerdictStatus,
    pub occurrences_replayed: usize,
    pub exact_matches: usize,
    /// `exact_matches / occurrences_replayed` (0 without occurrences).
    #[serde(default, deserialize_with = "exact_f64")]
    pub exact_rate: f64,
    /// Failed occurrences by cause.
    #[serde(default)]
    pub failures: FailureCounts,
    /// `recorded` (the cassette) or `live` (real tools).
    #[serde(default)]
    pub mode: String,
    /// Why the status is what it is, in a sentence.
    #[serde(default)]
    pub reason: String,
    /// Set on a rejected verdict: which check rejected it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<RejectionCause>,
    #[serde(default)]
    pub thresholds: Option<VerdictThresholds>,
    /// Held-out traces searched for occurrences.
    #[serde(default)]
    pub holdout_traces: usize,
    /// Held-out occurrences found (some may not have been replayed when capped).
    #[serde(default)]
    pub occurrences_found: usize,
    /// When the verdict was reached (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_at: Option<String>,
    /// The first differences found (capped), each naming the occurrence, step and pointer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diffs: Vec<StepDiff>,
}

impl Verdict {
    /// Add the replays of another verdict of the same candidate (another fold of a
    /// cross-validation): counts sum, differences are kept up to `max_diffs`. The status,
    /// rate and reason are the verifier's to decide again afterwards.
    pub fn merge(&mut self, other: Verdict, max_diffs: usize) {
        self.occurrences_replayed += other.occurrences_replayed;
        self.exact_matches += other.exact_matches;
        self.occurrences_found += other.occurrences_found;
        self.holdout_traces += other.holdout_traces;
        self.failures.binding_wrong += other.failures.binding_wrong;
        self.failures.tool_output_changed += other.failures.tool_output_changed;
        self.failures.tool_failed += other.failures.tool_failed;
        let room = max_diffs.saturating_sub(self.diffs.len());
        self.diffs.extend(other.diffs.into_iter().take(room));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confidences_read_back_exactly() {
        for value in [
            0.46153846153846156,
            0.1 + 0.2,
            1.0 / 3.0,
            243.34285714285713,
        ] {
            let alternative = Alternative {
                source: BindingSource::FlowInput { name: "x".into() },
                confidence: value,
            };
            let text = serde_json::to_string(&alternative).unwrap();
            let back: Alternative = serde_json::from_str(&text).unwrap();
            assert_eq!(back.confidence.to_bits(), value.to_bits(), "{text}");
        }
    }

    #[test]
    fn support_counts_distinct_traces() {
        let pattern = Pattern::new(
            vec!["a".into(), "b".into()],
            vec![
                Occurrence {
                    trace: 0,
                    steps: vec![0, 1],
                },
                Occurrence {
                    trace: 0,
                    steps: vec![4, 5],
                },
                Occurrence {
                    trace: 3,
                    steps: vec![1, 2],
                },
            ],
        );
        assert_eq!(pattern.support(), 2);
        assert_eq!(pattern.len(), 2);
    }

    #[test]
    fn binding_sources_round_trip_with_exact_numbers() {
        let sources = vec![
            BindingSource::Constant {
                value: serde_json::from_str(r#"{"limit": 10.50, "big": 12345678901234567890123}"#)
                    .unwrap(),
            },
            BindingSource::Constant {
                value: serde_json::from_str("1.000").unwrap(),
            },
            BindingSource::Template {
                template: "Deployed to {{env}}".into(),
                slots: vec![TemplateSlot {
                    name: "env".into(),
                    source: BindingSource::StepInput {
                        step: 0,
                        pointer: "/env".into(),
                    },
                }],
            },
            BindingSource::ListElement {
                step: 1,
                list_pointer: "/orders".into(),
                item_pointer: String::new(),
                selection: Selection::Chosen,
            },
        ];
        let text = serde_json::to_string(&sources).unwrap();
        assert!(
            text.contains("10.50")
                && text.contains("1.000")
                && text.contains("12345678901234567890123"),
            "{text}"
        );
        let back: Vec<BindingSource> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, sources);
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
    }

    fn candidate_with_metadata(metadata: Value) -> Candidate {
        serde_json::from_value(serde_json::json!({
            "id": "a_then_b",
            "tools": ["a", "b"],
            "flow": {"name": "a_then_b", "steps": [{"tool_name": "a"}, {"tool_name": "b"}]},
            "bindings": [],
            "tool_schemas": {},
            "evidence": {
                "support": 3, "occurrences": 4, "occurrence_refs": [], "success_rate": 1.0,
                "mean_confidence": 1.0, "flagged_bindings": 0, "reproduced": 1.0,
                "determinism": {}, "round_trips_saved": 3, "effects": [], "read_only": true,
                "score": 2.5
            },
            "metadata": metadata
        }))
        .unwrap()
    }

    #[test]
    fn sources_read_as_phrases() {
        let cases = [
            (
                BindingSource::FlowInput {
                    name: "user_id".into(),
                },
                "input user_id",
            ),
            (
                BindingSource::Constant {
                    value: serde_json::json!(20),
                },
                "constant 20",
            ),
            (
                BindingSource::ListElement {
                    step: 1,
                    list_pointer: "/reservations".into(),
                    item_pointer: String::new(),
                    selection: Selection::Chosen,
                },
                "step 1 output /reservations[*] (agent's choice)",
            ),
            (
                BindingSource::Template {
                    template: "item {{name}} ready".into(),
                    slots: Vec::new(),
                },
                "template \"item {name} ready\"",
            ),
            (
                BindingSource::StepOutput {
                    step: 0,
                    pointer: String::new(),
                },
                "step 0 output (whole)",
            ),
        ];
        for (source, phrase) in cases {
            assert_eq!(source.describe(), phrase);
        }
    }

    #[test]
    fn legacy_metadata_moves_into_typed_fields() {
        let mut candidate = candidate_with_metadata(serde_json::json!({
            "split": {"kind": "holdout", "percent": 20},
            "sampled_occurrences": 64,
            "unlinked_in_probe": [1],
            "note": "kept"
        }));
        assert_eq!(candidate.split, None);
        candidate.upgrade();
        assert_eq!(candidate.split, Some(Split::Holdout { percent: 20 }));
        assert_eq!(
            candidate.sample,
            Some(InferenceSample {
                read: 64,
                unlinked_in_probe: vec![1]
            })
        );
        assert_eq!(candidate.metadata.len(), 1, "{:?}", candidate.metadata);
        let again = candidate.clone();
        candidate.upgrade();
        assert_eq!(candidate, again);
        let text = serde_json::to_string(&candidate).unwrap();
        let back: Candidate = serde_json::from_str(&text).unwrap();
        assert_eq!(back, candidate);
    }

    #[test]
    fn verdicts_merge_counts_and_cap_diffs() {
        let diff = |step| StepDiff {
            occurrence: OccurrenceRef {
                trace_id: "t".into(),
                step_indices: vec![0],
            },
            step,
            tool_name: "a".into(),
            pointer: "/inputs/x".into(),
            expected: None,
            actual: None,
        };
        let verdict = |exact, replayed, diffs: Vec<StepDiff>| Verdict {
            candidate_id: "c".into(),
            status: VerdictStatus::Rejected,
            occurrences_replayed: replayed,
            exact_matches: exact,
            exact_rate: 0.0,
            failures: FailureCounts {
                binding_wrong: replayed - exact,
                ..FailureCounts::default()
            },
            mode: "recorded".into(),
            reason: String::new(),
            cause: None,
            thresholds: None,
            holdout_traces: 10,
            occurrences_found: replayed,
            verified_at: None,
            diffs,
        };
        let mut sum = verdict(3, 4, vec![diff(0)]);
        sum.merge(verdict(5, 7, vec![diff(1), diff(2)]), 2);
        assert_eq!(
            (
                sum.exact_matches,
                sum.occurrences_replayed,
                sum.holdout_traces
            ),
            (8, 11, 20)
        );
        assert_eq!(sum.failures.binding_wrong, 3);
        assert_eq!(
            sum.diffs.iter().map(|d| d.step).collect::<Vec<_>>(),
            vec![0, 1]
        );
    }
}
