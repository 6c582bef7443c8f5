//! The flow executor: one async core on tokio, and a blocking API over it.
//!
//! - [`FlowExecutor::execute_async`] / [`FlowExecutor::execute`] run a flow definition;
//!   `execute_flow(_async)` run a registered flow by name and version.
//! - [`FlowExecutor::stream_flow`] sends [`FlowEvent`]s while the run goes on.
//! - With a [`CheckpointSink`], progress is saved after every completed step and
//!   [`FlowExecutor::resume_flow`] continues a crashed run without re-running completed steps.
//! - With a [`StepCache`], cacheable tools are memoized.
//! - A DAG's steps of one topological level run concurrently.
//!
//! The executor makes no network calls and uses no randomness: trace ids come from the clock, the
//! process id and a counter, or from a generator the caller injects.

pub mod cache;
pub mod checkpoint;
pub mod events;
mod map;
mod proof;
pub mod record;

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::{Map, Value};

use chainweaver_recorder::model::Timestamp;
use chainweaver_recorder::model::flow::{FlowDefinition, FlowStep, OnError};

use crate::error::{Error, Result};
use crate::flow::mapping::{
    Source, StepContext, build_input_from, check_output_mapping, mapped_outputs,
    merge_outputs_into, output_mapped,
};
use crate::flow::{compile_flow, flow_input_schema, levels, step_views};
use crate::registry::FlowRegistry;
use crate::tool::{JsonObject, Tool, ToolRegistry};

pub use cache::StepCache;
pub use checkpoint::{
    Checkpoint, CheckpointSink, CompletedIteration, CompletedStep, FileCheckpoints,
    MemoryCheckpoints,
};
pub use events::{EventSender, FlowEvent, FlowEventStream};
pub use record::{ExecutionResult, StepRecord};

/// The text that replaces dynamic parameter values in records.
pub const REDACTED: &str = "[REDACTED]";

/// Makes trace ids: `(flow name, run start) -> id`.
pub type IdGenerator = dyn Fn(&str, Timestamp) -> String + Send + Sync;

/// Owns the runtime behind the blocking API; shuts it down without waiting for stray blocking
/// work (a timed-out tool must not hold the caller).
struct OwnedRuntime(Option<tokio::runtime::Runtime>);

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// Flow name -> the version and input schema last validated, and its compiled validator.
type ValidatorCache = HashMap<String, (String, Value, Arc<jsonschema::Validator>)>;

/// Runs flows. Cheap to clone: clones share tools, flows, cache, checkpoints and runtime.
#[derive(Clone)]
pub struct FlowExecutor {
    tools: Arc<ToolRegistry>,
    flows: Arc<Mutex<FlowRegistry>>,
    cache: Option<Arc<StepCache>>,
    checkpoints: Option<Arc<dyn CheckpointSink>>,
    ids: Arc<IdGenerator>,
    runtime: Arc<OnceLock<OwnedRuntime>>,
    /// Compiled flow input schemas by flow name, with the version and schema they came from:
    /// compiling a schema costs more than running a short flow.
    input_validators: Arc<Mutex<ValidatorCache>>,
}

impl std::fmt::Debug for FlowExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowExecutor")
            .field("tools", &self.tools.len())
            .field("cache", &self.cache.is_some())
            .field("checkpoints", &self.checkpoints.is_some())
            .finish_non_exhaustive()
    }
}

static RUN_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The default trace id: 32 hex digits from the start time (ns), the process id and a counter.
pub fn default_trace_id(_flow: &str, started_at: Timestamp) -> String {
    let nanos = started_at.timestamp_nanos_opt().unwrap_or_default() as u64;
    let count = RUN_COUNTER.fetch_add(1, Ordering::Relaxed);
    // Written digit by digit: `format!` costs more than a short flow's step.
    let mut id = String::with_capacity(32);
    push_hex(&mut id, nanos, 16);
    push_hex(&mut id, u64::from(process_id()), 8);
    push_hex(&mut id, count & 0xffff_ffff, 8);
    id
}

/// This process's id, asked once: `getpid` is a system call each time, about a tenth of a
/// short flow's step.
fn process_id() -> u32 {
    static ID: OnceLock<u32> = OnceLock::new();
    *ID.get_or_init(std::process::id)
}

/// The low `digits` hex digits of `value`, zero-padded (`{:0digits$x}` for a value that fits).
fn push_hex(out: &mut String, value: u64, digits: u32) {
    for position in (0..digits).rev() {
        let nibble = (value >> (position * 4)) & 0xf;
        out.push(char::from_digit(nibble as u32, 16).unwrap_or('0'));
    }
}

/// Inputs of one run besides the flow.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Injected into the context after input validation; redacted from records.
    pub dynamic_params: JsonObject,
}

/// One step's result inside the core: its records (a map step has one per iteration).
struct StepOutcome {
    index: usize,
    records: Records,
    merge: Option<Merge>,
    /// The flow must stop.
    fatal: bool,
}

/// A step's records: an ordinary step has one, kept without a list of its own.
// Unboxed on purpose: `One` is the common case, and a box would be an allocation per step.
#[allow(clippy::large_enum_variant)]
enum Records {
    One(StepRecord),
    Many(Vec<StepRecord>),
}

impl Records {
    fn as_slice(&self) -> &[StepRecord] {
        match self {
            Records::One(record) => std::slice::from_ref(record),
            Records::Many(records) => records,
        }
    }

    fn append_to(self, log: &mut Vec<StepRecord>) {
        match self {
            Records::One(record) => log.push(record),
            // A map step's records are often the whole log: take the list, no copy.
            Records::Many(records) if log.is_empty() => *log = records,
            Records::Many(records) => log.extend(records),
        }
    }
}

/// What a call contributes to the context.
enum Merge {
    /// These entries (none for a failure `on_error: skip` let through).
    Object(JsonObject),
    /// The call record's outputs through the step's `output_mapping` and `output_key`, read
    /// from the record when merged: each value is copied once, straight into the context,
    /// instead of into a map of its own first. Only used when the record's outputs are not
    /// redacted, and only after the output mapping was checked.
    RecordOutputs,
}

impl Merge {
    /// The entries this merge puts into the context (as [`mapped_outputs`] gives them).
    fn to_object(&self, step: &FlowStep, index: usize, record: Option<&StepRecord>) -> JsonObject {
        match self {
            Merge::Object(object) => object.clone(),
            Merge::RecordOutputs => record
                .and_then(|record| record.outputs.as_ref())
                .and_then(|outputs| mapped_outputs(step, index, outputs).ok())
                .unwrap_or_default(),
        }
    }
}

/// One tool call's result (a step, or one iteration of a map step).
struct CallOutcome {
    record: StepRecord,
    settled: Settled,
}

/// A call's outcome besides its record, which [`FlowExecutor::finish_call`] settles in place
/// (on the hot path the record already sits in the run's log, and is not moved again).
struct Settled {
    /// When the call ended, on both clocks: the next call of a sequence that starts right
    /// after it can start from this reading instead of taking its own.
    ended: ClockReading,
    /// What the call contributes: the step's merge, or an iteration's mapped output (always a
    /// [`Merge::Object`]; `None` when fatal, empty for a failure `on_error: skip` let through).
    merge: Option<Merge>,
    fatal: bool,
}

/// One reading of the clocks: the monotonic instant and the wall-clock time it stands for.
type ClockReading = (Instant, Timestamp);

/// Mutable progress shared by the steps of a level.
struct Progress {
    completed: Vec<CompletedStep>,
    records: Vec<StepRecord>,
    /// Completed iterations of map steps still running.
    iterations: Vec<CompletedIteration>,
}

impl Progress {
    /// The checkpoint of this progress.
    fn snapshot(&self, run: &Run<'_>) -> Checkpoint {
        Checkpoint {
            flow_name: run.flow.name().to_string(),
            flow_version: run.flow.version().to_string(),
            trace_id: run.trace_id.clone(),
            started_at: run.started_at,
            initial_input: run.input.clone(),
            completed: self.completed.clone(),
            records: self.records.clone(),
            iterations: self.iterations.clone(),
        }
    }
}

/// A step to run and its DAG id.
type PlanStep<'a> = (Cow<'a, FlowStep>, Option<&'a str>);

/// The order steps run in: a linear flow's steps one per level, a DAG's topological levels.
enum Levels {
    /// `0..n`: each step is a level of its own (kept as a list so a level can be a slice).
    Linear(Vec<usize>),
    Dag(Vec<Vec<usize>>),
}

impl Levels {
    fn iter(&self) -> impl Iterator<Item = &[usize]> + '_ {
        let (linear, dag): (&[usize], &[Vec<usize>]) = match self {
            Levels::Linear(order) => (order.as_slice(), &[]),
            Levels::Dag(levels) => (&[], levels.as_slice()),
        };
        linear
            .iter()
            .map(std::slice::from_ref)
            .chain(dag.iter().map(Vec::as_slice))
    }
}

/// What the core needs for one run.
struct RunPlan<'a> {
    /// Each step, borrowed from the definition where possible, with its DAG id.
    steps: Vec<PlanStep<'a>>,
    is_dag: bool,
    levels: Levels,
    /// Each step's tool and fallback, borrowed from the registry (no reference counting per run).
    tools: Vec<(&'a Tool, Option<&'a Tool>)>,
    /// Per step: its input is proven to meet its tool's input schema (see [`proof`]); empty
    /// when nothing is proven (DAGs, resumed runs).
    proven: Vec<bool>,
}

impl FlowExecutor {
    /// An executor over `tools` with an empty flow registry, no cache and no checkpoints.
    pub fn new(tools: ToolRegistry) -> Self {
        Self {
            tools: Arc::new(tools),
            flows: Arc::new(Mutex::new(FlowRegistry::new())),
            cache: None,
            checkpoints: None,
            ids: Arc::new(default_trace_id),
            runtime: Arc::new(OnceLock::new()),
            input_validators: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Use this flow registry.
    pub fn with_registry(mut self, registry: FlowRegistry) -> Self {
        self.flows = Arc::new(Mutex::new(registry));
        self
    }

    /// Memoize cacheable tools in `cache`.
    pub fn with_cache(mut self, cache: Arc<StepCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Save a checkpoint after every completed step.
    pub fn with_checkpoints(mut self, sink: Arc<dyn CheckpointSink>) -> Self {
        self.checkpoints = Some(sink);
        self
    }

    /// Make trace ids with `generator` instead of the default.
    pub fn with_id_generator(
        mut self,
        generator: impl Fn(&str, Timestamp) -> String + Send + Sync + 'static,
    ) -> Self {
        self.ids = Arc::new(generator);
        self
    }

    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    pub fn cache(&self) -> Option<&Arc<StepCache>> {
        self.cache.as_ref()
    }

    /// Run `f` with the flow registry locked.
    pub fn with_flows<T>(&self, f: impl FnOnce(&mut FlowRegistry) -> T) -> Result<T> {
        let mut flows = self
            .flows
            .lock()
            .map_err(|_| Error::Runtime("flow registry lock poisoned".into()))?;
        Ok(f(&mut flows))
    }

    /// Compile `flow` against this executor's tools and register it (errors refuse it).
    pub fn register_flow(
        &self,
        flow: FlowDefinition,
        status: crate::registry::FlowStatus,
    ) -> Result<crate::flow::CompileReport> {
        let report = compile_flow(&flow, &self.tools).into_result()?;
        self.with_flows(|flows| flows.register(flow, status))??;
        Ok(report)
    }

    fn registered(&self, name: &str, version: Option<&str>) -> Result<FlowDefinition> {
        self.with_flows(|flows| flows.resolve(name, version).map(|f| f.definition.clone()))?
    }

    pub(crate) fn block_on<F: Future>(&self, future: F) -> Result<F::Output> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(Error::BlockingInAsync);
        }
        let runtime = match self.runtime.get() {
            Some(runtime) => runtime,
            None => {
                let built = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|err| Error::Runtime(err.to_string()))?;
                self.runtime.get_or_init(|| OwnedRuntime(Some(built)))
            }
        };
        match &runtime.0 {
            Some(runtime) => Ok(runtime.block_on(future)),
            None => Err(Error::Runtime("the runtime was shut down".into())),
        }
    }

    /// Run a flow definition (blocking).
    pub fn execute(
        &self,
        flow: &FlowDefinition,
        input: JsonObject,
        options: &RunOptions,
    ) -> Result<ExecutionResult> {
        self.block_on(self.execute_async(flow, input, options))?
    }

    /// Run a flow definition.
    pub async fn execute_async(
        &self,
        flow: &FlowDefinition,
        input: JsonObject,
        options: &RunOptions,
    ) -> Result<ExecutionResult> {
        self.run_core(flow, input, options, None, None).await
    }

    /// Run a registered flow (blocking). `version: None` picks the newest active version.
    pub fn execute_flow(
        &self,
        name: &str,
        version: Option<&str>,
        input: JsonObject,
        options: &RunOptions,
    ) -> Result<ExecutionResult> {
        let flow = self.registered(name, version)?;
        self.execute(&flow, input, options)
    }

    /// Run a registered flow.
    pub async fn execute_flow_async(
        &self,
        name: &str,
        version: Option<&str>,
        input: JsonObject,
        options: &RunOptions,
    ) -> Result<ExecutionResult> {
        let flow = self.registered(name, version)?;
        self.execute_async(&flow, input, options).await
    }

    /// Run a flow on a background thread and return its events as a blocking iterator. The
    /// last event is `flow_end`; a run that cannot start (unknown tool, cycle) sends no event,
    /// and [`FlowEventStream::finish`] returns its error.
    pub fn stream_flow(
        &self,
        flow: FlowDefinition,
        input: JsonObject,
        options: RunOptions,
    ) -> Result<FlowEventStream> {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        let executor = self.clone();
        let worker = std::thread::Builder::new()
            .name("chainweaver-stream".into())
            .spawn(move || {
                executor.block_on(executor.run_core(&flow, input, &options, None, Some(&sender)))?
            })
            .map_err(|err| Error::Runtime(err.to_string()))?;
        Ok(FlowEventStream {
            receiver,
            worker: Some(worker),
        })
    }

    /// Run a flow, sending its events to `events` as they happen.
    pub async fn stream_flow_async(
        &self,
        flow: &FlowDefinition,
        input: JsonObject,
        options: &RunOptions,
        events: &EventSender,
    ) -> Result<ExecutionResult> {
        self.run_core(flow, input, options, None, Some(events))
            .await
    }

    /// Continue a run from a checkpoint (blocking): completed steps are not run again.
    pub fn resume_flow(
        &self,
        flow: &FlowDefinition,
        checkpoint: Checkpoint,
        options: &RunOptions,
    ) -> Result<ExecutionResult> {
        self.block_on(self.resume_flow_async(flow, checkpoint, options))?
    }

    /// Continue a run from a checkpoint.
    pub async fn resume_flow_async(
        &self,
        flow: &FlowDefinition,
        checkpoint: Checkpoint,
        options: &RunOptions,
    ) -> Result<ExecutionResult> {
        if checkpoint.flow_name != flow.name() || checkpoint.flow_version != flow.version() {
            return Err(Error::Checkpoint {
                trace_id: checkpoint.trace_id,
                message: format!(
                    "it belongs to flow `{}` {}, not `{}` {}",
                    checkpoint.flow_name,
                    checkpoint.flow_version,
                    flow.name(),
                    flow.version()
                ),
            });
        }
        let input = checkpoint.initial_input.clone();
        self.run_core(flow, input, options, Some(checkpoint), None)
            .await
    }

    /// Resume the run `trace_id` from this executor's checkpoint sink (blocking).
    pub fn resume_trace(
        &self,
        flow: &FlowDefinition,
        trace_id: &str,
        options: &RunOptions,
    ) -> Result<ExecutionResult> {
        let checkpoint = self.load_checkpoint(trace_id)?;
        self.resume_flow(flow, checkpoint, options)
    }

    /// The saved checkpoint of `trace_id`.
    pub fn load_checkpoint(&self, trace_id: &str) -> Result<Checkpoint> {
        let missing = |message: &str| Error::Checkpoint {
            trace_id: trace_id.to_string(),
            message: message.to_string(),
        };
        let sink = self
            .checkpoints
            .as_ref()
            .ok_or_else(|| missing("this executor has no checkpoint sink"))?;
        sink.load(trace_id)?
            .ok_or_else(|| missing("no checkpoint saved"))
    }

    /// `prove`: work out which inputs need no check (not for a resumed run, whose context holds
    /// what a checkpoint restored).
    fn plan<'a>(&'a self, flow: &'a FlowDefinition, prove: bool) -> Result<RunPlan<'a>> {
        // Borrow linear steps (the hot path); DAG steps are converted once per run.
        let (steps, levels): (Vec<PlanStep<'a>>, Levels) = match flow {
            FlowDefinition::Linear(linear) => (
                linear
                    .steps
                    .iter()
                    .map(|s| (Cow::Borrowed(s), None))
                    .collect(),
                Levels::Linear((0..linear.steps.len()).collect()),
            ),
            FlowDefinition::Dag(dag) => {
                let levels = levels(&step_views(flow)).map_err(|_| Error::FlowCompile {
                    flow: flow.name().to_string(),
                    findings: compile_flow(flow, &self.tools).findings,
                })?;
                let steps = dag
                    .steps
                    .iter()
                    .map(|s| (Cow::Owned(s.as_flow_step()), Some(s.step_id.as_str())))
                    .collect();
                (steps, Levels::Dag(levels))
            }
        };
        let mut tools = Vec::with_capacity(steps.len());
        for (index, (step, _)) in steps.iter().enumerate() {
            let tool = self
                .tools
                .get(&step.tool_name)
                .ok_or_else(|| Error::UnknownTool {
                    tool: step.tool_name.clone(),
                    step: Some(index),
                })?;
            let fallback = match &step.on_error {
                OnError::Fallback(name) => {
                    Some(self.tools.get(name).ok_or_else(|| Error::UnknownTool {
                        tool: name.clone(),
                        step: Some(index),
                    })?)
                }
                _ => None,
            };
            tools.push((&**tool, fallback.map(|tool| &**tool)));
        }
        let is_dag = matches!(flow, FlowDefinition::Dag(_));
        let proven = if prove && !is_dag {
            proof::proven_inputs(&steps, &tools, self.cache.is_some())
        } else {
            Vec::new()
        };
        Ok(RunPlan {
            steps,
            is_dag,
            levels,
            tools,
            proven,
        })
    }

    /// The one core every API goes through: plan, check the input, restore what a resumed run
    /// completed, run the levels, then order the log and answer.
    async fn run_core(
        &self,
        flow: &FlowDefinition,
        input: JsonObject,
        options: &RunOptions,
        resume: Option<Checkpoint>,
        events: Option<&EventSender>,
    ) -> Result<ExecutionResult> {
        let plan = self.plan(flow, resume.is_none())?;
        let mut run = self.start_run(flow, input, options, resume.as_ref(), events);
        if resume.is_none()
            && let Some(schema) = flow_input_schema(flow)
            && let Err(err) = self.validate_flow_input(flow, schema, &run.input)
        {
            let record = input_failure_record(flow, &err, &run.secrets, &run.input);
            run.emit(|| FlowEvent::StepEnd {
                trace_id: run.trace_id.clone(),
                record: Box::new(record.clone()),
            });
            return Ok(run.finish(false, None, vec![record]));
        }
        let (completed, mut records, iterations) = match resume {
            Some(checkpoint) => (
                checkpoint.completed,
                checkpoint.records,
                checkpoint.iterations,
            ),
            None => (Vec::new(), Vec::with_capacity(plan.steps.len()), Vec::new()),
        };
        let mut context = initial_context(&run.input, options, &plan, &completed);
        let done: HashSet<usize> = completed.iter().map(|c| c.step_index).collect();
        run.restored = map::restored_iterations(&iterations, &done);
        // Only kept when checkpoints are saved: the resumable state so far.
        let saving = self.checkpoints.is_some();
        let progress = Mutex::new(Progress {
            completed,
            records: if saving { records.clone() } else { Vec::new() },
            iterations: if saving { iterations } else { Vec::new() },
        });
        let failed = self
            .run_levels(&plan, &run, &progress, &done, &mut context, &mut records)
            .await;
        order_log(&plan, &mut records);
        if !failed && let Some(sink) = &self.checkpoints {
            sink.clear(&run.trace_id)?;
        }
        let final_output = if failed {
            None
        } else {
            Some(run.secrets.redact_context(context))
        };
        Ok(run.finish(!failed, final_output, records))
    }

    /// A run's identity (a resumed run keeps its own) and secrets, announced as the flow's start.
    fn start_run<'a>(
        &self,
        flow: &'a FlowDefinition,
        input: JsonObject,
        options: &RunOptions,
        resume: Option<&Checkpoint>,
        events: Option<&'a EventSender>,
    ) -> Run<'a> {
        let clock = Instant::now();
        let now = Utc::now();
        let (trace_id, started_at) = match resume {
            Some(checkpoint) => (checkpoint.trace_id.clone(), checkpoint.started_at),
            None => ((self.ids)(flow.name(), now), now),
        };
        emit(events, || FlowEvent::FlowStart {
            trace_id: trace_id.clone(),
            flow_name: flow.name().to_string(),
            flow_version: flow.version().to_string(),
            started_at,
            resumed: resume.is_some(),
        });
        Run {
            flow,
            trace_id,
            started_at,
            clock,
            wall: now,
            wall_day_nanos: day_nanos(now),
            events,
            secrets: Secrets::new(&options.dynamic_params),
            input,
            restored: HashMap::new(),
        }
    }

    /// Run the levels in order, the steps of a level concurrently (those not `done` already),
    /// merging their outputs into `context` and their records into `records`; stops after a
    /// level with a fatal failure. True when one failed.
    async fn run_levels(
        &self,
        plan: &RunPlan<'_>,
        run: &Run<'_>,
        progress: &Mutex<Progress>,
        done: &HashSet<usize>,
        context: &mut JsonObject,
        records: &mut Vec<StepRecord>,
    ) -> bool {
        let mut failed = false;
        // Back-to-back inline steps share a clock reading: one step's end is the next one's
        // start (the merge between them is counted in the next step), which halves the clock
        // reads of the hot path. Not when a checkpoint is saved or an event is sent between
        // them: that time is not the step's.
        let chain = run.events.is_none() && self.checkpoints.is_none();
        let mut previous_end: Option<ClockReading> = None;
        for level in plan.levels.iter() {
            let start = previous_end.take();
            let offload = level.iter().filter(|i| !done.contains(i)).count() > 1;
            if offload {
                let shared: &JsonObject = context;
                let futures = level
                    .iter()
                    .filter(|i| !done.contains(i))
                    .map(|&index| async move {
                        let outcome = self
                            .run_step(plan, run, progress, index, shared, true)
                            .await;
                        self.save_progress(plan, run, progress, &outcome);
                        outcome
                    });
                let outcomes = futures::future::join_all(futures).await;
                for outcome in outcomes {
                    failed |= absorb(plan, outcome, context, records);
                }
            } else if let Some(&index) = level.iter().find(|i| !done.contains(i)) {
                if plan.steps[index].0.for_each.is_none() && Self::calls_inline(plan, index, false)
                {
                    // The hot path: no future, and the record goes straight into the log.
                    let (fatal, ended) =
                        self.run_inline_step(plan, run, progress, index, context, records, start);
                    failed |= fatal;
                    previous_end = chain.then_some(ended);
                } else {
                    let outcome = self
                        .run_step(plan, run, progress, index, context, false)
                        .await;
                    self.save_progress(plan, run, progress, &outcome);
                    failed |= absorb(plan, outcome, context, records);
                }
            } else {
                continue;
            }
            if failed {
                break;
            }
        }
        failed
    }

    /// Record a finished step in the resumable state and save a checkpoint (when a sink is set).
    /// A map step's iteration records are already there (each went in as it completed).
    fn save_progress(
        &self,
        plan: &RunPlan<'_>,
        run: &Run<'_>,
        progress: &Mutex<Progress>,
        outcome: &StepOutcome,
    ) {
        self.save_step(
            plan,
            run,
            progress,
            outcome.index,
            outcome.records.as_slice(),
            outcome.merge.as_ref(),
            outcome.fatal,
        );
    }

    /// [`FlowExecutor::save_progress`] of a step's parts.
    #[allow(clippy::too_many_arguments)]
    fn save_step(
        &self,
        plan: &RunPlan<'_>,
        run: &Run<'_>,
        progress: &Mutex<Progress>,
        index: usize,
        records: &[StepRecord],
        merge: Option<&Merge>,
        fatal: bool,
    ) {
        // A fatal step is not part of the resumable state: it runs again on resume.
        let Some(sink) = self.checkpoints.as_ref().filter(|_| !fatal) else {
            return;
        };
        let snapshot = {
            let Ok(mut progress) = progress.lock() else {
                return;
            };
            progress
                .records
                .extend(records.iter().filter(|r| r.iteration.is_none()).cloned());
            let merged = merge
                .map(|merge| merge.to_object(&plan.steps[index].0, index, records.first()))
                .unwrap_or_default();
            progress.completed.push(CompletedStep {
                step_index: index,
                merged,
            });
            progress.iterations.retain(|i| i.step_index != index);
            progress.snapshot(run)
        };
        // A failed save must not fail the step: the run goes on, resumability degrades.
        let _ = sink.save(&snapshot);
    }

    /// Run an ordinary step whose calls run inline, as [`FlowExecutor::run_step`],
    /// [`FlowExecutor::save_progress`] and [`absorb`] would; true when it was fatal.
    /// `start`: the reading the call starts from (the previous step's end), if any. Returns
    /// whether the step failed fatally, and when it ended.
    #[allow(clippy::too_many_arguments)]
    fn run_inline_step(
        &self,
        plan: &RunPlan<'_>,
        run: &Run<'_>,
        progress: &Mutex<Progress>,
        index: usize,
        context: &mut JsonObject,
        log: &mut Vec<StepRecord>,
        start: Option<ClockReading>,
    ) -> (bool, ClockReading) {
        let first = log.len();
        log.push(blank_record(plan, run, index, None));
        // The record is made and settled where it will stay, in the log.
        let Settled {
            ended,
            merge,
            fatal,
        } = self.settle_inline(
            plan,
            run,
            index,
            None,
            StepContext::Context(context),
            start,
            &mut log[first],
        );
        let records = &log[first..];
        self.save_step(plan, run, progress, index, records, merge.as_ref(), fatal);
        match merge {
            Some(Merge::Object(merge)) => merge_into(context, merge),
            Some(Merge::RecordOutputs) => {
                if let Some(outputs) = records.first().and_then(|r| r.outputs.as_ref()) {
                    merge_outputs_into(context, &plan.steps[index].0, outputs);
                }
            }
            None => {}
        }
        (fatal, ended)
    }

    /// Run one step: one call, or a map step's iterations.
    async fn run_step(
        &self,
        plan: &RunPlan<'_>,
        run: &Run<'_>,
        progress: &Mutex<Progress>,
        index: usize,
        context: &JsonObject,
        offload: bool,
    ) -> StepOutcome {
        let (step, _) = &plan.steps[index];
        if let Some(for_each) = &step.for_each {
            // Boxed: its future is large, and ordinary steps would move it around.
            return Box::pin(
                self.run_map_step(plan, run, progress, index, for_each, context, offload),
            )
            .await;
        }
        let call = self
            .call_step_fast(
                plan,
                run,
                index,
                None,
                StepContext::Context(context),
                offload,
            )
            .await;
        StepOutcome {
            index,
            records: Records::One(call.record),
            merge: call.settled.merge,
            fatal: call.settled.fatal,
        }
    }

    /// True when a step's calls can all run inline, without a future: a blocking tool (and
    /// fallback) without timeout, not offloaded, without retries. Awaiting costs more than such
    /// a call (the futures of the call chain are moved into each other's state), so the hot
    /// path does not create them.
    fn calls_inline(plan: &RunPlan<'_>, index: usize, offload: bool) -> bool {
        let (step, _) = &plan.steps[index];
        let (tool, fallback) = &plan.tools[index];
        retry_settings(step).0 == 0
            && tool.runs_inline(offload)
            && fallback.is_none_or(|fallback| fallback.runs_inline(offload))
    }

    /// [`FlowExecutor::call_step`], inline when [`FlowExecutor::calls_inline`].
    async fn call_step_fast(
        &self,
        plan: &RunPlan<'_>,
        run: &Run<'_>,
        index: usize,
        iteration: Option<usize>,
        context: StepContext<'_>,
        offload: bool,
    ) -> CallOutcome {
        if Self::calls_inline(plan, index, offload) {
            self.call_step_inline(plan, run, index, iteration, context, None)
        } else {
            Box::pin(self.call_step(plan, run, index, iteration, context, offload)).await
        }
    }

    /// One call of a step's tool with the step's input mapping over `context`, retries and
    /// `on_error` applied. `iteration`: the element index of a map step's iteration, whose
    /// contribution is its output after `output_mapping`, not nested under `output_key`.
    async fn call_step(
        &self,
        plan: &RunPlan<'_>,
        run: &Run<'_>,
        index: usize,
        iteration: Option<usize>,
        context: StepContext<'_>,
        offload: bool,
    ) -> CallOutcome {
        let mut record = blank_record(plan, run, index, iteration);
        let (call, input) =
            self.start_call(plan, run, index, iteration, context, None, &mut record);
        let (step, _) = &plan.steps[index];
        let (tool, fallback) = plan.tools[index];
        let result = match input {
            Err(err) => Err(err),
            Ok(input) => {
                record.inputs = run.secrets.redact_input(step, &input);
                // The fallback gets the same resolved input; copy it only when there is one.
                let fallback_input = fallback.map(|_| input.clone());
                let mut result = self
                    .call_with_retries(tool, step, input, offload, call.check_input, &mut record)
                    .await;
                if result.is_err()
                    && let (Some(fallback), Some(input)) = (fallback, fallback_input)
                {
                    record.fallback_used = true;
                    record.fallback_tool_name = Some(fallback.name().to_string());
                    result = self
                        .call_cached(fallback, input, offload, true, &mut record)
                        .await;
                }
                result
            }
        };
        let settled = self.finish_call(plan, run, index, iteration, call, result, &mut record);
        CallOutcome { record, settled }
    }

    /// [`FlowExecutor::call_step`] for calls that [`FlowExecutor::calls_inline`]. `start`: the
    /// clock reading the call starts from when it follows another call directly.
    fn call_step_inline(
        &self,
        plan: &RunPlan<'_>,
        run: &Run<'_>,
        index: usize,
        iteration: Option<usize>,
        context: StepContext<'_>,
        start: Option<ClockReading>,
    ) -> CallOutcome {
        let mut record = blank_record(plan, run, index, iteration);
        let settled = self.settle_inline(plan, run, index, iteration, context, start, &mut record);
        CallOutcome { record, settled }
    }

    /// Make an inline call of step `index` from start to finish, settled in `record` (a
    /// [`blank_record`], wherever it lives: the run's log on the hot path).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn settle_inline(
        &self,
        plan: &RunPlan<'_>,
        run: &Run<'_>,
        index: usize,
        iteration: Option<usize>,
        context: StepContext<'_>,
        start: Option<ClockReading>,
        record: &mut StepRecord,
    ) -> Settled {
        let (call, input) = self.start_call(plan, run, index, iteration, context, start, record);
        let result = match input {
            Ok(mut input) => {
                let result =
                    self.call_tools_inline(plan, index, &mut input, call.check_input, record);
                // The tools only borrowed the input: the record takes it without a copy.
                record.inputs = run.secrets.redact_input_owned(&plan.steps[index].0, input);
                result
            }
            Err(err) => Err(err),
        };
        self.finish_call(plan, run, index, iteration, call, result, record)
    }

    /// The inline call of a step's tool on `input` (its fallback's after a failure), recorded
    /// in `record`.
    #[inline(always)]
    fn call_tools_inline(
        &self,
        plan: &RunPlan<'_>,
        index: usize,
        input: &mut JsonObject,
        check_input: bool,
        record: &mut StepRecord,
    ) -> Result<JsonObject> {
        let (tool, fallback) = plan.tools[index];
        let mut result = self.call_cached_inline(tool, input, check_input, record);
        if result.is_err()
            && let Some(fallback) = fallback
        {
            record.fallback_used = true;
            record.fallback_tool_name = Some(fallback.name().to_string());
            result = self.call_cached_inline(fallback, input, true, record);
        }
        result
    }

    /// Announce a call, start its `record` (a [`blank_record`]) and build its input (the caller
    /// records it, redacted). `start`: the clock reading to start from; `None` reads the clocks.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn start_call(
        &self,
        plan: &RunPlan<'_>,
        run: &Run<'_>,
        index: usize,
        iteration: Option<usize>,
        context: StepContext<'_>,
        start: Option<ClockReading>,
        record: &mut StepRecord,
    ) -> (StartedCall, Result<JsonObject>) {
        let (step, step_id) = &plan.steps[index];
        let step: &FlowStep = step;
        let (tool, _) = plan.tools[index];
        run.emit(|| FlowEvent::StepStart {
            trace_id: run.trace_id.clone(),
            step_index: index,
            step_id: step_id.map(str::to_string),
            tool_name: step.tool_name.clone(),
            iteration,
        });
        let (clock, started_at) = start.unwrap_or_else(|| {
            let clock = Instant::now();
            (clock, run.wall_time(clock))
        });
        record.started_at = started_at;
        record.ended_at = started_at;
        let input = build_input_from(step, index, context, tool.input_schema());
        let call = StartedCall {
            clock,
            // An iteration reads its element, which nothing proves.
            check_input: iteration.is_some() || !plan.proven.get(index).copied().unwrap_or(false),
        };
        (call, input)
    }

    /// Settle a call's `record` and contribution from its result.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn finish_call(
        &self,
        plan: &RunPlan<'_>,
        run: &Run<'_>,
        index: usize,
        iteration: Option<usize>,
        call: StartedCall,
        result: Result<JsonObject>,
        record: &mut StepRecord,
    ) -> Settled {
        let (step, _) = &plan.steps[index];
        let step: &FlowStep = step;
        let secrets = &run.secrets;
        let skip = step.on_error == OnError::Skip;
        let clock = call.clock;
        let (merge, error) = match result {
            // A step's outputs kept as they are: the context copies them from the record later.
            Ok(outputs) if iteration.is_none() && secrets.is_empty() => {
                let checked = check_output_mapping(step, index, &outputs);
                record.outputs = Some(outputs);
                match checked {
                    Ok(()) => (Some(Merge::RecordOutputs), None),
                    Err(err) => (None, Some(err)),
                }
            }
            Ok(outputs) => {
                let merged = match iteration {
                    None => mapped_outputs(step, index, &outputs),
                    Some(_) => output_mapped(step, index, &outputs),
                };
                record.outputs = Some(secrets.redact_owned(outputs));
                match merged {
                    Ok(merge) => (Some(Merge::Object(merge)), None),
                    Err(err) => (None, Some(err)),
                }
            }
            Err(err) => (None, Some(err)),
        };
        let fatal = error.is_some() && !skip;
        match &error {
            None => record.success = true,
            Some(err) => {
                record.error_type = Some(err.type_name());
                record.error_message = Some(secrets.redact_text(&err.to_string()));
                record.error_code = Some(err.code().to_string());
                record.skipped = skip;
            }
        }
        let end = Instant::now();
        record.ended_at = run.wall_time(end);
        record.duration_ms = millis(end.saturating_duration_since(clock));
        run.emit(|| FlowEvent::StepEnd {
            trace_id: run.trace_id.clone(),
            record: Box::new(record.clone()),
        });
        Settled {
            ended: (end, record.ended_at),
            merge: if error.is_none() {
                merge
            } else {
                Some(Merge::Object(Map::new()))
            }
            .filter(|_| !fatal),
            fatal,
        }
    }

    async fn call_with_retries(
        &self,
        tool: &Tool,
        step: &FlowStep,
        input: JsonObject,
        offload: bool,
        check_input: bool,
        record: &mut StepRecord,
    ) -> Result<JsonObject> {
        let (retries, mut wait, factor) = retry_settings(step);
        if retries == 0 {
            return self
                .call_cached(tool, input, offload, check_input, record)
                .await;
        }
        let mut attempt = 0;
        loop {
            let result = self
                .call_cached(tool, input.clone(), offload, check_input, record)
                .await;
            attempt += 1;
            let retryable = matches!(&result, Err(err) if !is_input_error(err));
            if !retryable || attempt > retries {
                return result;
            }
            if wait > 0.0 && wait.is_finite() {
                tokio::time::sleep(Duration::from_secs_f64(wait)).await;
            }
            wait *= factor;
        }
    }

    async fn call_cached(
        &self,
        tool: &Tool,
        input: JsonObject,
        offload: bool,
        check_input: bool,
        record: &mut StepRecord,
    ) -> Result<JsonObject> {
        let key = match self.cache_lookup(tool, &input, record) {
            Ok(key) => key,
            Err(outputs) => return Ok(outputs),
        };
        record.attempts += 1;
        let result = tool.run_checked(input, offload, check_input).await;
        self.cache_store(key, &result);
        result
    }

    /// [`FlowExecutor::call_cached`] of a tool that runs inline, on a lent input.
    fn call_cached_inline(
        &self,
        tool: &Tool,
        input: &mut JsonObject,
        check_input: bool,
        record: &mut StepRecord,
    ) -> Result<JsonObject> {
        let key = match self.cache_lookup(tool, input, record) {
            Ok(key) => key,
            Err(outputs) => return Ok(outputs),
        };
        record.attempts += 1;
        let result = tool.run_inline(input, check_input);
        self.cache_store(key, &result);
        result
    }

    /// The cache key of a call of a cacheable tool (`Ok(None)` without cache), or `Err` with the
    /// cached outputs of a hit.
    fn cache_lookup(
        &self,
        tool: &Tool,
        input: &JsonObject,
        record: &mut StepRecord,
    ) -> std::result::Result<Option<(&StepCache, String)>, JsonObject> {
        let Some(cache) = self.cache.as_deref().filter(|_| tool.cacheable()) else {
            return Ok(None);
        };
        let key = StepCache::key(tool, input);
        match cache.get(&key) {
            Some(outputs) => {
                record.cache_hit = true;
                Err(outputs)
            }
            None => Ok(Some((cache, key))),
        }
    }

    fn cache_store(&self, key: Option<(&StepCache, String)>, result: &Result<JsonObject>) {
        if let (Some((cache, key)), Ok(outputs)) = (key, result) {
            cache.put(key, outputs.clone());
        }
    }
}

/// A step's `(retries, first wait in seconds, wait multiplier)`.
fn retry_settings(step: &FlowStep) -> (u32, f64, f64) {
    match &step.retry_policy {
        Some(policy) => (
            policy.max_retries,
            policy.backoff_seconds.max(0.0),
            policy.backoff_multiplier.max(0.0),
        ),
        None => (0, 0.0, 1.0),
    }
}

/// A call between [`FlowExecutor::start_call`] and [`FlowExecutor::finish_call`].
struct StartedCall {
    clock: Instant,
    check_input: bool,
}

fn is_input_error(err: &Error) -> bool {
    matches!(err, Error::SchemaValidation { stage, .. } if stage == "input")
}

fn merge_into(context: &mut JsonObject, merge: JsonObject) {
    for (key, value) in merge {
        context.insert(key, value);
    }
}

/// Merge a finished step into the context and its records into the log; true when it was fatal.
fn absorb(
    plan: &RunPlan<'_>,
    outcome: StepOutcome,
    context: &mut JsonObject,
    log: &mut Vec<StepRecord>,
) -> bool {
    match outcome.merge {
        Some(Merge::Object(merge)) => merge_into(context, merge),
        Some(Merge::RecordOutputs) => {
            if let Some(outputs) = outcome
                .records
                .as_slice()
                .first()
                .and_then(|record| record.outputs.as_ref())
            {
                merge_outputs_into(context, &plan.steps[outcome.index].0, outputs);
            }
        }
        None => {}
    }
    outcome.records.append_to(log);
    outcome.fatal
}

fn millis(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1000.0
}

impl FlowExecutor {
    /// Check a flow's input against its schema, compiling the schema once per flow version
    /// (and again only if the schema changed).
    fn validate_flow_input(
        &self,
        flow: &FlowDefinition,
        schema: &Value,
        input: &JsonObject,
    ) -> Result<()> {
        // Looked up by name without allocating; a hit must match version and schema.
        let cached = self.input_validators.lock().ok().and_then(|cache| {
            cache
                .get(flow.name())
                .filter(|(version, source, _)| version == flow.version() && source == schema)
                .map(|(_, _, validator)| Arc::clone(validator))
        });
        let validator = match cached {
            Some(validator) => validator,
            None => {
                let compiled = Arc::new(jsonschema::validator_for(schema).map_err(|err| {
                    Error::InvalidSchema {
                        tool: format!("flow {}", flow.name()),
                        which: "input".into(),
                        message: err.to_string(),
                    }
                })?);
                if let Ok(mut cache) = self.input_validators.lock() {
                    cache.insert(
                        flow.name().to_string(),
                        (
                            flow.version().to_string(),
                            schema.clone(),
                            Arc::clone(&compiled),
                        ),
                    );
                }
                compiled
            }
        };
        let value = Value::Object(input.clone());
        match validator.validate(&value) {
            Ok(()) => Ok(()),
            Err(err) => Err(Error::SchemaValidation {
                tool: format!("flow {}", flow.name()),
                stage: "flow input".into(),
                pointer: err.instance_path().as_str().to_string(),
                message: err.to_string(),
            }),
        }
    }
}

/// One run's fixed facts, shared by its phases.
struct Run<'a> {
    flow: &'a FlowDefinition,
    trace_id: String,
    started_at: Timestamp,
    clock: Instant,
    /// The wall-clock time when `clock` was read (a resumed run's `started_at` is older).
    wall: Timestamp,
    /// `wall`'s time of day in nanoseconds (its leap-second nanos, if any, excluded).
    wall_day_nanos: u64,
    events: Option<&'a EventSender>,
    secrets: Secrets,
    input: JsonObject,
    /// Per map step (index) not completed, the result slots of the iterations a checkpoint
    /// holds, by element index: a resumed run does not run them again.
    restored: HashMap<usize, BTreeMap<usize, Value>>,
}

impl Run<'_> {
    fn emit(&self, make: impl FnOnce() -> FlowEvent) {
        emit(self.events, make);
    }

    /// The wall-clock time at `instant`, from the run's one reading of both clocks: a monotonic
    /// reading per timestamp instead of a second, wall-clock one (on Linux the wall clock is the
    /// monotonic one plus an offset, which only moves when someone sets the time).
    fn wall_time(&self, instant: Instant) -> Timestamp {
        let since = instant.saturating_duration_since(self.clock);
        // Within the day the run started on (nearly always), the time of day is a sum: no
        // calendar arithmetic.
        let nanos = u64::try_from(since.as_nanos())
            .ok()
            .and_then(|since| since.checked_add(self.wall_day_nanos))
            .filter(|nanos| *nanos < NANOS_PER_DAY);
        let time = nanos.and_then(|nanos| {
            let seconds = u32::try_from(nanos / 1_000_000_000).ok()?;
            let fraction = u32::try_from(nanos % 1_000_000_000).ok()?;
            chrono::NaiveTime::from_num_seconds_from_midnight_opt(seconds, fraction)
        });
        match time {
            Some(time) => self.wall.date_naive().and_time(time).and_utc(),
            None => chrono::TimeDelta::from_std(since)
                .ok()
                .and_then(|delta| self.wall.checked_add_signed(delta))
                .unwrap_or_else(Utc::now),
        }
    }

    /// The run's result, announced as the flow's end.
    fn finish(
        self,
        success: bool,
        final_output: Option<JsonObject>,
        log: Vec<StepRecord>,
    ) -> ExecutionResult {
        let end = Instant::now();
        let ended_at = self.wall_time(end);
        let result = ExecutionResult {
            flow_name: self.flow.name().to_string(),
            flow_version: Some(self.flow.version().to_string()),
            success,
            final_output,
            execution_log: log,
            trace_id: self.trace_id.clone(),
            started_at: self.started_at,
            ended_at,
            total_duration_ms: millis(end.saturating_duration_since(self.clock)),
            initial_input: Some(self.input),
        };
        emit(self.events, || FlowEvent::FlowEnd {
            trace_id: self.trace_id,
            success,
            result: Box::new(result.clone()),
        });
        result
    }
}

const NANOS_PER_DAY: u64 = 86_400 * 1_000_000_000;

/// Nanoseconds since midnight of a time (a leap second's extra nanos count as none).
fn day_nanos(time: Timestamp) -> u64 {
    use chrono::Timelike;
    u64::from(time.num_seconds_from_midnight()) * 1_000_000_000
        + u64::from(time.nanosecond().min(999_999_999))
}

/// Send an event when someone listens (the event is only made then).
fn emit(events: Option<&EventSender>, make: impl FnOnce() -> FlowEvent) {
    if let Some(events) = events {
        let _ = events.send(make());
    }
}

/// The record of a flow input that failed its schema: the run's only step, index -1.
fn input_failure_record(
    flow: &FlowDefinition,
    err: &Error,
    secrets: &Secrets,
    input: &JsonObject,
) -> StepRecord {
    let now = Utc::now();
    StepRecord {
        step_index: -1,
        step_id: None,
        tool_name: format!("<{} input>", flow.name()),
        inputs: secrets.redact_object(input),
        outputs: None,
        error_type: Some(err.type_name()),
        error_message: Some(err.to_string()),
        success: false,
        started_at: now,
        ended_at: now,
        duration_ms: 0.0,
        fallback_used: false,
        fallback_tool_name: None,
        error_code: Some(err.code().to_string()),
        attempts: 0,
        cache_hit: false,
        skipped: false,
        iteration: None,
    }
}

/// The record of a call about to start: no input, output or outcome yet.
fn new_record(
    index: usize,
    step_id: Option<&str>,
    tool_name: &str,
    iteration: Option<usize>,
    started_at: Timestamp,
) -> StepRecord {
    StepRecord {
        step_index: index as i64,
        step_id: step_id.map(str::to_string),
        tool_name: tool_name.to_string(),
        inputs: Map::new(),
        outputs: None,
        error_type: None,
        error_message: None,
        success: false,
        started_at,
        ended_at: started_at,
        duration_ms: 0.0,
        fallback_used: false,
        fallback_tool_name: None,
        error_code: None,
        attempts: 0,
        cache_hit: false,
        skipped: false,
        iteration,
    }
}

/// The record of a call of step `index` about to start, made where it will stay (the run's log,
/// on the hot path); [`FlowExecutor::start_call`] sets its start.
fn blank_record(
    plan: &RunPlan<'_>,
    run: &Run<'_>,
    index: usize,
    iteration: Option<usize>,
) -> StepRecord {
    let (step, step_id) = &plan.steps[index];
    new_record(index, *step_id, &step.tool_name, iteration, run.started_at)
}

/// The context a run starts from: the input, then the dynamic parameters, then what completed
/// steps merged, in flow order (level, then declaration) as the original run did.
fn initial_context(
    input: &JsonObject,
    options: &RunOptions,
    plan: &RunPlan<'_>,
    completed: &[CompletedStep],
) -> JsonObject {
    let mut context = input.clone();
    for (key, value) in &options.dynamic_params {
        context.insert(key.clone(), value.clone());
    }
    if !completed.is_empty() {
        for level in plan.levels.iter() {
            for &index in level {
                if let Some(step) = completed.iter().find(|c| c.step_index == index) {
                    merge_into(&mut context, step.merged.clone());
                }
            }
        }
    }
    context
}

/// Put the log in flow order (level, then declaration; a map step's iterations by element
/// index), whatever order steps finished in.
fn order_log(plan: &RunPlan<'_>, records: &mut [StepRecord]) {
    if plan.is_dag {
        let mut position = vec![0; plan.steps.len()];
        let mut next = 0;
        for level in plan.levels.iter() {
            for &index in level {
                position[index] = next;
                next += 1;
            }
        }
        records.sort_by_key(|r| {
            let position = usize::try_from(r.step_index)
                .map(|i| position.get(i).copied().unwrap_or(i))
                .unwrap_or(0);
            (position, r.iteration)
        });
    } else {
        records.sort_by_key(|r| (r.step_index, r.iteration));
    }
}

/// Dynamic parameters to keep out of records.
struct Secrets {
    keys: HashSet<String>,
    strings: Vec<String>,
}

impl Secrets {
    fn new(params: &JsonObject) -> Self {
        Self {
            keys: params.keys().cloned().collect(),
            strings: params
                .values()
                .filter_map(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
        }
    }

    fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    fn redact_value(&self, value: &Value) -> Value {
        match value {
            Value::String(text) if self.strings.iter().any(|s| s == text) => {
                Value::String(REDACTED.into())
            }
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.redact_value(v)).collect())
            }
            Value::Object(map) => Value::Object(self.redact_object(map)),
            other => other.clone(),
        }
    }

    /// Like [`Secrets::redact_object`], without a copy when there is nothing to redact.
    fn redact_owned(&self, map: JsonObject) -> JsonObject {
        if self.is_empty() {
            map
        } else {
            self.redact_object(&map)
        }
    }

    fn redact_object(&self, map: &JsonObject) -> JsonObject {
        if self.is_empty() {
            return map.clone();
        }
        map.iter()
            .map(|(k, v)| (k.clone(), self.redact_value(v)))
            .collect()
    }

    /// Like [`Secrets::redact_input`], without a copy when there is nothing to redact.
    fn redact_input_owned(&self, step: &FlowStep, input: JsonObject) -> JsonObject {
        if self.is_empty() {
            input
        } else {
            self.redact_input(step, &input)
        }
    }

    /// A step's input: fields mapped from a dynamic parameter are redacted whatever their type.
    fn redact_input(&self, step: &FlowStep, input: &JsonObject) -> JsonObject {
        if self.is_empty() {
            return input.clone();
        }
        let whole_context = step.input_mapping.is_empty() && step.input_templates.is_empty();
        input
            .iter()
            .map(|(field, value)| {
                let from_secret = if whole_context {
                    self.keys.contains(field)
                } else {
                    step.input_mapping
                        .get(field)
                        .and_then(|source| Source::of(source).root_key())
                        .is_some_and(|key| self.keys.contains(&key))
                };
                let value = if from_secret {
                    Value::String(REDACTED.into())
                } else {
                    self.redact_value(value)
                };
                (field.clone(), value)
            })
            .collect()
    }

    /// The final context: dynamic parameter keys redacted.
    fn redact_context(&self, context: JsonObject) -> JsonObject {
        if self.is_empty() {
            return context;
        }
        context
            .into_iter()
            .map(|(key, value)| {
                let value = if self.keys.contains(&key) {
                    Value::String(REDACTED.into())
                } else {
                    self.redact_value(&value)
                };
                (key, value)
            })
            .collect()
    }

    fn redact_text(&self, text: &str) -> String {
        let mut text = text.to_string();
        for secret in &self.strings {
            if secret.len() >= 4 {
                text = text.replace(secret.as_str(), REDACTED);
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_times_are_the_run_start_plus_the_monotonic_time_since() {
        let executor = FlowExecutor::new(ToolRegistry::new());
        let flow = FlowDefinition::from_value(serde_json::json!({"name": "f", "steps": []}))
            .unwrap_or_else(|err| panic!("{err}"));
        let mut run = executor.start_run(&flow, Map::new(), &RunOptions::default(), None, None);
        for wall in [
            "2026-12-03T08:00:00.123456789Z",
            "2026-12-31T23:59:59.999999999Z",
            "2024-02-28T23:59:59.5Z",
        ] {
            run.wall = wall.parse().unwrap_or_else(|err| panic!("{err}"));
            run.wall_day_nanos = day_nanos(run.wall);
            for since in [
                0,
                1,
                499_999_999,
                500_000_000,
                1_000_000_001,
                90_000_000_000_000,
            ] {
                let since = Duration::from_nanos(since);
                let expected = run.wall + chrono::TimeDelta::from_std(since).unwrap_or_default();
                assert_eq!(
                    run.wall_time(run.clock + since),
                    expected,
                    "{wall} + {since:?}"
                );
            }
        }
    }

    #[test]
    fn back_to_back_calls_share_a_clock_reading() {
        let mut tools = ToolRegistry::new();
        tools.register(
            Tool::sync("nap", |input| {
                std::thread::sleep(Duration::from_millis(2));
                Ok(Value::Object(input.clone()))
            })
            .build()
            .unwrap_or_else(|err| panic!("{err}")),
        );
        let executor = FlowExecutor::new(tools);
        let flow = FlowDefinition::from_value(serde_json::json!({
            "name": "naps",
            "steps": [
                {"tool_name": "nap"},
                {"tool_name": "nap"},
                {"tool_name": "nap", "output_key": "each", "for_each": {"list": "/items"}},
            ]
        }))
        .unwrap_or_else(|err| panic!("{err}"));
        let input = serde_json::json!({"items": [1, 2, 3]});
        let input = input.as_object().cloned().unwrap_or_default();
        let result = executor
            .execute(&flow, input, &RunOptions::default())
            .unwrap_or_else(|err| panic!("{err}"));
        assert!(result.success, "{result:?}");
        let log = &result.execution_log;
        assert_eq!(log.len(), 5, "two steps and three iterations");
        for record in log {
            // Each call slept 2 ms, so a start taken from the wrong reading shows.
            assert!(record.ended_at - record.started_at >= chrono::TimeDelta::milliseconds(2));
        }
        // The second step starts where the first ended; the map's iterations follow each
        // other the same way (the map step's own start is read afresh).
        assert_eq!(log[1].started_at, log[0].ended_at);
        assert_eq!(log[3].started_at, log[2].ended_at);
        assert_eq!(log[4].started_at, log[3].ended_at);
    }

    #[test]
    fn trace_ids_are_written_as_format_would() {
        for (value, digits) in [
            (0_u64, 8),
            (0xabc, 8),
            (u64::MAX, 16),
            (0x1234_5678_9abc_def0, 16),
        ] {
            let mut out = String::new();
            push_hex(&mut out, value, digits);
            assert_eq!(out, format!("{value:0width$x}", width = digits as usize));
        }
        let started_at = Utc::now();
        let id = default_trace_id("f", started_at);
        let nanos = started_at.timestamp_nanos_opt().unwrap_or_default() as u64;
        assert_eq!(id.len(), 32);
        assert_eq!(&id[..16], format!("{nanos:016x}"));
        assert_eq!(&id[16..24], format!("{:08x}", std::process::id()));
    }
}
