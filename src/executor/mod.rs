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
use crate::flow::mapping::{Source, build_input, mapped_outputs, output_mapped};
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
    format!(
        "{nanos:016x}{:08x}{:08x}",
        std::process::id(),
        count & 0xffff_ffff
    )
}

/// Inputs of one run besides the flow.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Injected into the context after input validation; redacted from records.
    pub dynamic_params: JsonObject,
}

/// One step's result inside the core: its records (a map step has one per iteration).
struct StepOutcome {
    records: Vec<StepRecord>,
    merge: Option<JsonObject>,
    /// The flow must stop.
    fatal: bool,
}

/// One tool call's result (a step, or one iteration of a map step).
struct CallOutcome {
    record: StepRecord,
    /// What the call contributes: the step's merge, or an iteration's mapped output (`None`
    /// when fatal, empty for a failure `on_error: skip` let through).
    merge: Option<JsonObject>,
    fatal: bool,
}

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

/// What the core needs for one run.
struct RunPlan<'a> {
    /// Each step, borrowed from the definition where possible, with its DAG id.
    steps: Vec<PlanStep<'a>>,
    is_dag: bool,
    levels: Vec<Vec<usize>>,
    tools: Vec<(Arc<Tool>, Option<Arc<Tool>>)>,
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

    fn plan<'a>(&self, flow: &'a FlowDefinition) -> Result<RunPlan<'a>> {
        // Borrow linear steps (the hot path); DAG steps are converted once per run.
        let (steps, levels): (Vec<PlanStep<'a>>, Vec<Vec<usize>>) = match flow {
            FlowDefinition::Linear(linear) => (
                linear
                    .steps
                    .iter()
                    .map(|s| (Cow::Borrowed(s), None))
                    .collect(),
                (0..linear.steps.len()).map(|i| vec![i]).collect(),
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
                (steps, levels)
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
                    Some(Arc::clone(self.tools.get(name).ok_or_else(|| {
                        Error::UnknownTool {
                            tool: name.clone(),
                            step: Some(index),
                        }
                    })?))
                }
                _ => None,
            };
            tools.push((Arc::clone(tool), fallback));
        }
        Ok(RunPlan {
            steps,
            is_dag: matches!(flow, FlowDefinition::Dag(_)),
            levels,
            tools,
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
        let plan = self.plan(flow)?;
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
        let (trace_id, started_at) = match resume {
            Some(checkpoint) => (checkpoint.trace_id.clone(), checkpoint.started_at),
            None => {
                let now = Utc::now();
                ((self.ids)(flow.name(), now), now)
            }
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
        for level in &plan.levels {
            let offload = level.iter().filter(|i| !done.contains(i)).count() > 1;
            let outcomes: Vec<StepOutcome> = if offload {
                let context: &JsonObject = context;
                let futures = level
                    .iter()
                    .filter(|i| !done.contains(i))
                    .map(|&index| async move {
                        let outcome = self
                            .run_step(plan, run, progress, index, context, true)
                            .await;
                        self.save_progress(run, progress, index, &outcome);
                        outcome
                    });
                futures::future::join_all(futures).await
            } else if let Some(&index) = level.iter().find(|i| !done.contains(i)) {
                let outcome = self
                    .run_step(plan, run, progress, index, context, false)
                    .await;
                self.save_progress(run, progress, index, &outcome);
                vec![outcome]
            } else {
                continue;
            };
            for outcome in outcomes {
                if let Some(merge) = outcome.merge {
                    merge_into(context, merge);
                }
                failed |= outcome.fatal;
                records.extend(outcome.records);
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
        run: &Run<'_>,
        progress: &Mutex<Progress>,
        index: usize,
        outcome: &StepOutcome,
    ) {
        // A fatal step is not part of the resumable state: it runs again on resume.
        let Some(sink) = self.checkpoints.as_ref().filter(|_| !outcome.fatal) else {
            return;
        };
        let snapshot = {
            let Ok(mut progress) = progress.lock() else {
                return;
            };
            progress.records.extend(
                outcome
                    .records
                    .iter()
                    .filter(|r| r.iteration.is_none())
                    .cloned(),
            );
            progress.completed.push(CompletedStep {
                step_index: index,
                merged: outcome.merge.clone().unwrap_or_default(),
            });
            progress.iterations.retain(|i| i.step_index != index);
            progress.snapshot(run)
        };
        // A failed save must not fail the step: the run goes on, resumability degrades.
        let _ = sink.save(&snapshot);
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
            return self
                .run_map_step(plan, run, progress, index, for_each, context, offload)
                .await;
        }
        let call = self
            .call_step(plan, run, index, None, context, offload)
            .await;
        StepOutcome {
            records: vec![call.record],
            merge: call.merge,
            fatal: call.fatal,
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
        context: &JsonObject,
        offload: bool,
    ) -> CallOutcome {
        let (step, step_id) = &plan.steps[index];
        let step: &FlowStep = step;
        let (tool, fallback) = &plan.tools[index];
        let secrets = &run.secrets;
        run.emit(|| FlowEvent::StepStart {
            trace_id: run.trace_id.clone(),
            step_index: index,
            step_id: step_id.map(str::to_string),
            tool_name: step.tool_name.clone(),
            iteration,
        });
        let clock = Instant::now();
        let mut record = new_record(index, *step_id, &step.tool_name, iteration);
        let skip = step.on_error == OnError::Skip;
        let result: Result<JsonObject> =
            match build_input(step, index, context, tool.input_schema()) {
                Err(err) => Err(err),
                Ok(input) => {
                    record.inputs = secrets.redact_input(step, &input);
                    // The fallback gets the same resolved input; copy it only when there is one.
                    let fallback_input = fallback.as_ref().map(|_| input.clone());
                    let mut result = self
                        .call_with_retries(tool, step, input, offload, &mut record)
                        .await;
                    if result.is_err()
                        && let (Some(fallback), Some(input)) = (fallback, fallback_input)
                    {
                        record.fallback_used = true;
                        record.fallback_tool_name = Some(fallback.name().to_string());
                        result = self
                            .call_cached(fallback, input, offload, &mut record)
                            .await;
                    }
                    result
                }
            };
        let (merge, error) = match result {
            Ok(outputs) => {
                let merged = match iteration {
                    None => mapped_outputs(step, index, &outputs),
                    Some(_) => output_mapped(step, index, &outputs),
                };
                record.outputs = Some(secrets.redact_owned(outputs));
                match merged {
                    Ok(merge) => (Some(merge), None),
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
        record.ended_at = Utc::now();
        record.duration_ms = millis(clock.elapsed());
        run.emit(|| FlowEvent::StepEnd {
            trace_id: run.trace_id.clone(),
            record: Box::new(record.clone()),
        });
        CallOutcome {
            record,
            merge: if error.is_none() {
                merge
            } else {
                Some(Map::new())
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
        record: &mut StepRecord,
    ) -> Result<JsonObject> {
        let (retries, mut wait, factor) = match &step.retry_policy {
            Some(policy) => (
                policy.max_retries,
                policy.backoff_seconds.max(0.0),
                policy.backoff_multiplier.max(0.0),
            ),
            None => (0, 0.0, 1.0),
        };
        if retries == 0 {
            return self.call_cached(tool, input, offload, record).await;
        }
        let mut attempt = 0;
        loop {
            let result = self.call_cached(tool, input.clone(), offload, record).await;
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
        record: &mut StepRecord,
    ) -> Result<JsonObject> {
        let cache = self.cache.as_ref().filter(|_| tool.cacheable());
        let key = cache.map(|_| StepCache::key(tool, &input));
        if let (Some(cache), Some(key)) = (cache, &key)
            && let Some(outputs) = cache.get(key)
        {
            record.cache_hit = true;
            return Ok(outputs);
        }
        record.attempts += 1;
        let result = tool.run_with(input, offload).await;
        if let (Some(cache), Some(key), Ok(outputs)) = (cache, key, &result) {
            cache.put(key, outputs.clone());
        }
        result
    }
}

fn is_input_error(err: &Error) -> bool {
    matches!(err, Error::SchemaValidation { stage, .. } if stage == "input")
}

fn merge_into(context: &mut JsonObject, merge: JsonObject) {
    for (key, value) in merge {
        context.insert(key, value);
    }
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

    /// The run's result, announced as the flow's end.
    fn finish(
        self,
        success: bool,
        final_output: Option<JsonObject>,
        log: Vec<StepRecord>,
    ) -> ExecutionResult {
        let ended_at = Utc::now();
        let result = ExecutionResult {
            flow_name: self.flow.name().to_string(),
            flow_version: Some(self.flow.version().to_string()),
            success,
            final_output,
            execution_log: log,
            trace_id: self.trace_id.clone(),
            started_at: self.started_at,
            ended_at,
            total_duration_ms: millis(self.clock.elapsed()),
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
) -> StepRecord {
    let started_at = Utc::now();
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
        for level in &plan.levels {
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
        for level in &plan.levels {
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
