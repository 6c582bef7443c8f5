//! The [`TraceRecorder`]: record traces and steps from a running program.

use std::fmt::{self, Display, Write as _};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use chrono::Utc;
use crossbeam_channel::Sender;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::received::ReceivedStep;
use super::redact::RedactionPolicy;
use super::sample::SampleRate;
use super::writer::{Command, Writer, WriterSettings};
use crate::error::{RecorderError, Result};
use crate::import::compact::Scratch;
use crate::model::{Metadata, ObservedStep, ObservedTrace, Timestamp};
use crate::store::{RawSteps, TraceStore, open_store};

/// The `error_type` of a step whose [`StepGuard`] was dropped without `finish` or `fail`.
pub const ABANDONED: &str = "abandoned";

/// The `error_type` of a step whose outputs could not be turned into JSON.
pub const OUTPUT_NOT_JSON: &str = "output_not_json";

/// The longest batch delay or retry delay the writer honours (longer ones are cut to this).
const LONGEST_WAIT: Duration = Duration::from_secs(30 * 24 * 3600);

/// How a [`TraceRecorder`] queues, batches, redacts and samples.
#[derive(Debug, Clone)]
pub struct RecorderConfig {
    /// How many traces and steps may wait for the writer; a caller blocks while it is full.
    pub channel_capacity: usize,
    /// A batch is committed once it holds this many rows (trace rows and steps).
    pub batch_size: usize,
    /// A batch is committed at the latest this long after its first row arrived (at most 30
    /// days).
    pub max_batch_delay: Duration,
    /// A batch whose commit failed this many times is dropped (and the loss reported).
    pub max_commit_attempts: u32,
    /// How long the writer waits before trying a failed batch again (a flush tries at once; at
    /// most 30 days).
    pub retry_delay: Duration,
    /// What is removed from every trace and step before it reaches the store.
    pub redaction: RedactionPolicy,
    /// The share of traces recorded, decided from each trace id.
    pub sample_rate: SampleRate,
    /// The `source` of traces started without one.
    pub source: String,
}

impl Default for RecorderConfig {
    fn default() -> Self {
        Self {
            channel_capacity: 4096,
            batch_size: 512,
            max_batch_delay: Duration::from_millis(50),
            max_commit_attempts: 3,
            retry_delay: Duration::from_millis(200),
            redaction: RedactionPolicy::default(),
            sample_rate: SampleRate::ALL,
            source: "recorder".to_owned(),
        }
    }
}

/// What a recorder has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecorderStats {
    /// Traces started and kept by sampling.
    pub traces_started: u64,
    /// Traces started and left out by sampling.
    pub traces_sampled_out: u64,
    /// Steps handed to the writer.
    pub steps_recorded: u64,
    /// Steps of sampled-out traces, dropped on the caller's side.
    pub steps_sampled_out: u64,
    /// Steps the store reports as written.
    pub steps_committed: u64,
    /// Steps the store skipped because it already held them.
    pub duplicate_steps: u64,
    /// Successful commits (store transactions).
    pub batches_committed: u64,
    /// Failed commit attempts.
    pub commit_failures: u64,
    /// Steps dropped after their batch could not be committed, or rejected by the store.
    pub steps_discarded: u64,
}

/// The counters behind [`RecorderStats`].
#[derive(Debug, Default)]
pub(crate) struct StatCounters {
    pub traces_started: AtomicU64,
    pub traces_sampled_out: AtomicU64,
    pub steps_recorded: AtomicU64,
    pub steps_sampled_out: AtomicU64,
    pub steps_committed: AtomicU64,
    pub duplicate_steps: AtomicU64,
    pub batches_committed: AtomicU64,
    pub commit_failures: AtomicU64,
    pub steps_discarded: AtomicU64,
}

impl StatCounters {
    fn snapshot(&self) -> RecorderStats {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        RecorderStats {
            traces_started: get(&self.traces_started),
            traces_sampled_out: get(&self.traces_sampled_out),
            steps_recorded: get(&self.steps_recorded),
            steps_sampled_out: get(&self.steps_sampled_out),
            steps_committed: get(&self.steps_committed),
            duplicate_steps: get(&self.duplicate_steps),
            batches_committed: get(&self.batches_committed),
            commit_failures: get(&self.commit_failures),
            steps_discarded: get(&self.steps_discarded),
        }
    }
}

/// State shared by callers and the writer: counters and the writer's unreported error.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub stats: StatCounters,
    error: Mutex<Option<RecorderError>>,
    /// Whether `error` holds something: lets the recording path skip the lock.
    has_error: AtomicBool,
}

impl Shared {
    fn lock_error(&self) -> MutexGuard<'_, Option<RecorderError>> {
        self.error.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keep `error` for the next caller. The oldest unreported error is kept, except that a
    /// loss of data (`BatchDiscarded`) replaces a mere failed attempt.
    pub(crate) fn report(&self, error: RecorderError) {
        let mut slot = self.lock_error();
        let replace = match &*slot {
            None => true,
            Some(RecorderError::BatchDiscarded { .. }) => false,
            Some(_) => matches!(error, RecorderError::BatchDiscarded { .. }),
        };
        if replace {
            *slot = Some(error);
            self.has_error.store(true, Ordering::Release);
        }
    }

    /// The unreported error, if any; it is reported once.
    pub(crate) fn take_error(&self) -> Option<RecorderError> {
        if !self.has_error.load(Ordering::Acquire) {
            return None;
        }
        let mut slot = self.lock_error();
        self.has_error.store(false, Ordering::Release);
        slot.take()
    }
}

/// Records traces and their steps into a [`TraceStore`] through one background writer thread.
///
/// Cheap to clone and to share between threads (clones share one writer). Callers hand finished
/// rows to the writer over a bounded channel and return at once (they block only while the
/// channel is full); the writer redacts them with the configured [`RedactionPolicy`] and commits
/// them in batches, one store transaction each. [`flush`](Self::flush) waits until everything
/// sent before it is committed. When the last clone and the last [`TraceHandle`] are dropped,
/// the writer commits what is left and the drop waits for it.
///
/// An error in the writer (a failed commit) is kept and returned, once, by the next
/// [`flush`](Self::flush) or record call ([`TraceHandle::record_step`], `finish`, `fail`,
/// `end_trace`). A failed batch is retried, then dropped with a
/// [`RecorderError::BatchDiscarded`].
///
/// ```
/// use chainweaver_recorder::capture::{RecorderConfig, StepBuilder, TraceOptions, TraceRecorder};
/// use chainweaver_recorder::store::{SqliteStore, TraceStore};
/// use serde_json::json;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("chainweaver.db");
/// let recorder = TraceRecorder::new(Box::new(SqliteStore::open(&path)?), RecorderConfig::default())?;
///
/// let trace = recorder.start_trace(TraceOptions::new().trace_id("t1").agent("support-bot"))?;
/// let user: Result<serde_json::Value, std::io::Error> =
///     trace.call("get_user", json!({"id": 7}), |_inputs| Ok(json!({"name": "Ann"})));
/// trace.record_step(StepBuilder::new("send_mail", json!({"to": "ann@example.com", "api_key": "k"})))?;
/// trace.end_trace()?;
/// recorder.flush()?;
///
/// let stored = SqliteStore::open(&path)?.get_trace("t1")?.expect("stored");
/// assert_eq!(stored.steps.len(), 2);
/// assert_eq!(stored.steps[1].inputs["api_key"], "[REDACTED]");
/// # let _ = user;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct TraceRecorder {
    inner: Arc<RecorderInner>,
}

struct RecorderInner {
    commands: Sender<Command>,
    writer: Mutex<Option<JoinHandle<()>>>,
    shared: Arc<Shared>,
    sample_rate: SampleRate,
    source: String,
    /// The writer's policy, for rows [`TraceRecorder::submit`] redacts on the caller's thread.
    redaction: RedactionPolicy,
}

impl fmt::Debug for TraceRecorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceRecorder")
            .field("sample_rate", &self.inner.sample_rate)
            .field("source", &self.inner.source)
            .field("stats", &self.stats())
            .finish()
    }
}

impl TraceRecorder {
    /// Start the writer thread over `store`.
    pub fn new(mut store: Box<dyn TraceStore>, config: RecorderConfig) -> Result<Self> {
        store.checkpoint_in_background()?;
        let (commands, received) = crossbeam_channel::bounded(config.channel_capacity);
        let shared = Arc::new(Shared::default());
        let writer = Writer::new(
            store,
            received,
            Arc::clone(&shared),
            WriterSettings {
                batch_size: config.batch_size,
                // Clamped so that adding them to an instant cannot overflow.
                max_batch_delay: config.max_batch_delay.min(LONGEST_WAIT),
                max_commit_attempts: config.max_commit_attempts,
                retry_delay: config.retry_delay.min(LONGEST_WAIT),
                redaction: config.redaction.clone(),
            },
        );
        let handle = std::thread::Builder::new()
            .name("chainweaver-recorder".to_owned())
            .spawn(move || writer.run())
            .map_err(|e| RecorderError::WriterGone(format!("could not start it: {e}")))?;
        Ok(Self {
            inner: Arc::new(RecorderInner {
                commands,
                writer: Mutex::new(Some(handle)),
                shared,
                sample_rate: config.sample_rate,
                source: config.source,
                redaction: config.redaction,
            }),
        })
    }

    /// A recorder over the store at `path` (a SQLite file, or a Parquet dataset directory; see
    /// [`crate::store::open_store`]). A dataset in object storage is refused at once:
    /// it takes no appends, and a recorder that failed on each would lose every call quietly.
    pub fn open(path: &Path, config: RecorderConfig) -> Result<Self> {
        if crate::store::is_object_storage(path) {
            return Err(RecorderError::ObjectStore {
                url: path.to_string_lossy().into_owned(),
                message: "a dataset in object storage takes no recorded traffic: record into a \
                          local store, then upload it"
                    .into(),
            });
        }
        Self::new(open_store(path)?, config)
    }

    /// Start a trace (`started_at` now) and write its row. A trace left out by sampling gets a
    /// handle that records nothing.
    pub fn start_trace(&self, options: TraceOptions) -> Result<TraceHandle> {
        let trace_id = match options.trace_id {
            Some(id) if id.is_empty() => {
                return Err(RecorderError::InvalidTrace {
                    trace_id: id,
                    message: "a trace id must not be empty".into(),
                });
            }
            Some(id) => id,
            None => generate_trace_id(),
        };
        let stats = &self.inner.shared.stats;
        let sampled = self.inner.sample_rate.keeps(&trace_id);
        let row = if sampled {
            let row = ObservedTrace {
                trace_id: trace_id.clone(),
                session_id: options.session_id,
                source: options.source.unwrap_or_else(|| self.inner.source.clone()),
                agent: options.agent,
                started_at: Some(Utc::now()),
                ended_at: None,
                metadata: options.metadata,
            };
            self.inner.send(Command::Trace(Box::new(row.clone())))?;
            stats.traces_started.fetch_add(1, Ordering::Relaxed);
            Some(Mutex::new(row))
        } else {
            stats.traces_sampled_out.fetch_add(1, Ordering::Relaxed);
            None
        };
        Ok(TraceHandle {
            inner: Arc::new(TraceInner {
                recorder: Arc::clone(&self.inner),
                trace_id,
                row,
                next_index: AtomicU32::new(0),
                ended: AtomicBool::new(false),
            }),
        })
    }

    /// Hand complete traces and steps to the writer as they are (ids, indices and times set by
    /// the caller), for a source that receives finished calls rather than making them, such as
    /// a trace receiver. They are redacted, batched and committed like every other row;
    /// `committed` is called once, on the writer thread, when they are stored (`Ok`) or when
    /// they, or rows of the same batch, could not be (`Err`), so a caller can acknowledge only
    /// what is durable. Since a caller waits, they do not wait out the batch delay: the writer
    /// commits as soon as nothing else is queued, and rows that come meanwhile go in the next
    /// commit. Rows of traces that sampling leaves out are dropped here. Blocks while the
    /// writer's queue is full.
    ///
    /// Steps may be [`ObservedStep`]s or [`ReceivedStep`]s whose payloads are still the text
    /// they arrived as; such text is stored as it is when redaction cannot change it, and read
    /// into a value first otherwise, so both store the same rows.
    pub fn submit<S: Into<ReceivedStep>>(
        &self,
        mut traces: Vec<ObservedTrace>,
        steps: Vec<S>,
        committed: impl FnOnce(Result<()>) + Send + 'static,
    ) -> Result<()> {
        let rate = self.inner.sample_rate;
        let stats = &self.inner.shared.stats;
        let before = steps.len();
        traces.retain(|trace| rate.keeps(&trace.trace_id));
        let steps: Vec<ReceivedStep> = steps
            .into_iter()
            .map(Into::into)
            .filter(|received: &ReceivedStep| rate.keeps(&received.step.trace_id))
            .collect();
        stats
            .steps_sampled_out
            .fetch_add((before - steps.len()) as u64, Ordering::Relaxed);
        stats
            .steps_recorded
            .fetch_add(steps.len() as u64, Ordering::Relaxed);
        // Redacted and serialized here, and the parsed payloads freed here: many callers share
        // that work, where the one writer would do it all.
        let redaction = &self.inner.redaction;
        for trace in &mut traces {
            redaction.redact_trace(trace);
        }
        let mut raw = RawSteps::new();
        let mut scratch = Scratch::default();
        for mut received in steps {
            redaction.redact_step(&mut received.step);
            raw.push_received(&received, redaction, &mut scratch);
        }
        let steps = raw;
        self.inner.send(Command::Rows {
            traces,
            steps,
            committed: Box::new(committed),
        })
    }

    /// Wait until everything sent before this call is committed. Returns the writer's
    /// unreported error, if any (a failed or dropped batch).
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// What the recorder has done so far.
    pub fn stats(&self) -> RecorderStats {
        self.inner.shared.stats.snapshot()
    }
}

impl RecorderInner {
    fn send(&self, command: Command) -> Result<()> {
        self.commands
            .send(command)
            .map_err(|_| RecorderError::WriterGone("it no longer accepts rows".into()))
    }

    fn flush(&self) -> Result<()> {
        let (reply, answer) = crossbeam_channel::bounded(1);
        self.send(Command::Flush(reply))?;
        answer
            .recv()
            .map_err(|_| RecorderError::WriterGone("it stopped before answering a flush".into()))?
    }

    /// The writer's unreported error, as the result of a record call.
    fn pending(&self) -> Result<()> {
        self.shared.take_error().map_or(Ok(()), Err)
    }
}

impl Drop for RecorderInner {
    fn drop(&mut self) {
        // No clone and no trace handle is left, so nothing can follow the shutdown command.
        let _ = self.commands.send(Command::Shutdown);
        let handle = self
            .writer
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            // A writer that panicked (a store implementation's bug) has nothing left to commit.
            let _ = handle.join();
        }
    }
}

/// A fresh trace id: 32 hex digits hashed from the time, the process and a counter.
fn generate_trace_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let mut hasher = Sha256::new();
    hasher.update(nanos.to_le_bytes());
    hasher.update(std::process::id().to_le_bytes());
    hasher.update(count.to_le_bytes());
    let digest = hasher.finalize();
    let mut id = String::with_capacity(32);
    for byte in &digest[..16] {
        let _ = write!(id, "{byte:02x}");
    }
    id
}

/// What a trace is started with. Everything is optional: the id is generated and the source is
/// the recorder's unless given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceOptions {
    trace_id: Option<String>,
    source: Option<String>,
    session_id: Option<String>,
    agent: Option<String>,
    metadata: Metadata,
}

impl TraceOptions {
    /// No options: generated id, the recorder's source.
    pub fn new() -> Self {
        Self::default()
    }

    /// Use this trace id (it must not be empty).
    pub fn trace_id(mut self, id: impl Into<String>) -> Self {
        self.trace_id = Some(id.into());
        self
    }

    /// Where the trace comes from (default: the recorder's configured source).
    pub fn source(mut self, source: impl Into<String>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// The agent's conversation or session id.
    pub fn session_id(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(session_id.into());
        self
    }

    /// The agent making the calls.
    pub fn agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }

    /// One metadata entry (redacted like everything else).
    pub fn metadata(mut self, key: impl Into<String>, value: Value) -> Self {
        self.metadata.insert(key.into(), value);
        self
    }
}

/// One trace being recorded. Cheap to clone; clones record into the same trace and may be used
/// from several threads at once (step indices are handed out in call order, without gaps).
///
/// [`end_trace`](Self::end_trace), or dropping the last clone, writes `ended_at`. Steps recorded
/// after the end are still stored.
#[derive(Clone)]
pub struct TraceHandle {
    inner: Arc<TraceInner>,
}

struct TraceInner {
    recorder: Arc<RecorderInner>,
    trace_id: String,
    /// The trace row, or `None` when sampling left the trace out.
    row: Option<Mutex<ObservedTrace>>,
    next_index: AtomicU32,
    ended: AtomicBool,
}

impl fmt::Debug for TraceHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceHandle")
            .field("trace_id", &self.inner.trace_id)
            .field("sampled", &self.is_sampled())
            .field("steps", &self.inner.next_index.load(Ordering::Relaxed))
            .finish()
    }
}

impl TraceInner {
    fn next_index(&self) -> Result<u32> {
        self.next_index
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(1))
            .map_err(|_| RecorderError::InvalidTrace {
                trace_id: self.trace_id.clone(),
                message: "the trace has more steps than a step index can number".into(),
            })
    }

    fn send_step(&self, step: ObservedStep) -> Result<()> {
        self.recorder.send(Command::Step(Box::new(step)))?;
        self.recorder
            .shared
            .stats
            .steps_recorded
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn sampled_out_step(&self) {
        self.recorder
            .shared
            .stats
            .steps_sampled_out
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Write the trace row with `ended_at` once; later calls do nothing.
    fn end(&self) -> Result<()> {
        let Some(row) = &self.row else {
            return Ok(());
        };
        if self.ended.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let row = {
            let mut row = row.lock().unwrap_or_else(PoisonError::into_inner);
            row.ended_at = Some(Utc::now());
            row.clone()
        };
        self.recorder.send(Command::Trace(Box::new(row)))
    }
}

impl Drop for TraceInner {
    fn drop(&mut self) {
        // Nobody is left to hear about an error here; the next flush reports writer errors.
        let _ = self.end();
    }
}

impl TraceHandle {
    /// The trace's id.
    pub fn trace_id(&self) -> &str {
        &self.inner.trace_id
    }

    /// False when sampling left this trace out (nothing of it is recorded).
    pub fn is_sampled(&self) -> bool {
        self.inner.row.is_some()
    }

    /// Set a metadata entry of the trace; it is written with the trace's end.
    pub fn set_metadata(&self, key: impl Into<String>, value: Value) {
        if let Some(row) = &self.inner.row {
            row.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .metadata
                .insert(key.into(), value);
        }
    }

    /// Record a finished step and return its index. When both times are given and no duration
    /// is, the duration is computed from them.
    ///
    /// An `Err` other than [`RecorderError::WriterGone`] reports an earlier failure of the writer
    /// (once); this step has been queued all the same.
    pub fn record_step(&self, step: StepBuilder) -> Result<u32> {
        let index = self.inner.next_index()?;
        if !self.is_sampled() {
            self.inner.sampled_out_step();
            return Ok(index);
        }
        self.inner
            .send_step(step.into_step(&self.inner.trace_id, index))?;
        self.inner.recorder.pending()?;
        Ok(index)
    }

    /// Start a step now; the guard records it when finished, failed or dropped.
    pub fn begin_step(&self, tool: impl Into<String>, inputs: Value) -> StepGuard {
        let index = self.inner.next_index();
        StepGuard {
            trace: Arc::clone(&self.inner),
            index,
            tool_name: tool.into(),
            inputs,
            call_id: None,
            metadata: Metadata::new(),
            started_at: Utc::now(),
            started: Instant::now(),
            done: false,
        }
    }

    /// Run `call` with `inputs`, timing it, and record it as a step: its outputs on success, or
    /// its error (`error_type` is the Rust type name of `E`, `error_message` its `Display`).
    /// Returns what `call` returned. A recording problem is kept for the next flush or record
    /// call instead of being mixed into the call's result.
    pub fn call<T, E, F>(&self, tool: impl Into<String>, inputs: Value, call: F) -> Result<T, E>
    where
        T: Serialize,
        E: Display,
        F: FnOnce(&Value) -> Result<T, E>,
    {
        self.call_with_kind(
            tool,
            inputs,
            |_: &E| std::any::type_name::<E>().to_owned(),
            call,
        )
    }

    /// [`call`](Self::call) with the `error_type` of a failure chosen by `kind`.
    pub fn call_with_kind<T, E, K, F>(
        &self,
        tool: impl Into<String>,
        inputs: Value,
        kind: K,
        call: F,
    ) -> Result<T, E>
    where
        T: Serialize,
        E: Display,
        K: FnOnce(&E) -> String,
        F: FnOnce(&Value) -> Result<T, E>,
    {
        let guard = self.begin_step(tool, inputs);
        let result = call(guard.inputs());
        let recorded = match &result {
            Ok(outputs) => guard.finish_serialized(outputs),
            Err(error) => guard.fail(kind(error), error.to_string()),
        };
        if let Err(error) = recorded {
            // Give the error back to the next flush or record call.
            self.inner.recorder.shared.report(error);
        }
        result
    }

    /// Write the trace's `ended_at` (once; dropping the last handle does it too). Returns the
    /// writer's unreported error, if any.
    pub fn end_trace(self) -> Result<()> {
        self.inner.end()?;
        self.inner.recorder.pending()
    }

    /// Wait until everything recorded so far (by any trace of this recorder) is committed.
    pub fn flush(&self) -> Result<()> {
        self.inner.recorder.flush()
    }
}

/// A step whose call is in progress. Record it with [`finish`](Self::finish) or
/// [`fail`](Self::fail); dropped without either, it is recorded as failed with error type
/// [`ABANDONED`] (for example when the call panicked or returned early).
pub struct StepGuard {
    trace: Arc<TraceInner>,
    index: Result<u32>,
    tool_name: String,
    inputs: Value,
    call_id: Option<String>,
    metadata: Metadata,
    started_at: Timestamp,
    started: Instant,
    done: bool,
}

impl fmt::Debug for StepGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StepGuard")
            .field("trace_id", &self.trace.trace_id)
            .field("index", &self.index.as_ref().ok())
            .field("tool_name", &self.tool_name)
            .finish()
    }
}

impl StepGuard {
    /// The step's index in its trace, or `None` when the trace ran out of indices.
    pub fn index(&self) -> Option<u32> {
        self.index.as_ref().ok().copied()
    }

    /// The inputs the step was started with.
    pub fn inputs(&self) -> &Value {
        &self.inputs
    }

    /// The id the agent gave the call.
    pub fn set_call_id(&mut self, call_id: impl Into<String>) {
        self.call_id = Some(call_id.into());
    }

    /// One metadata entry of the step.
    pub fn set_metadata(&mut self, key: impl Into<String>, value: Value) {
        self.metadata.insert(key.into(), value);
    }

    /// Record the step as successful with these outputs.
    pub fn finish(mut self, outputs: Value) -> Result<()> {
        self.complete(Some(outputs), None)
    }

    /// Record the step as failed.
    pub fn fail(mut self, error_type: impl Into<String>, message: impl Into<String>) -> Result<()> {
        self.complete(None, Some((error_type.into(), message.into())))
    }

    fn finish_serialized<T: Serialize>(mut self, outputs: &T) -> Result<()> {
        if self.trace.row.is_none() {
            // Sampled out: not worth converting the outputs.
            return self.complete(None, None);
        }
        match serde_json::to_value(outputs) {
            Ok(outputs) => self.complete(Some(outputs), None),
            Err(error) => self.complete(
                None,
                Some((
                    OUTPUT_NOT_JSON.to_owned(),
                    format!("the call succeeded but its output is not JSON: {error}"),
                )),
            ),
        }
    }

    fn complete(&mut self, outputs: Option<Value>, error: Option<(String, String)>) -> Result<()> {
        self.done = true;
        let index = match &self.index {
            Ok(index) => *index,
            Err(_) => {
                return Err(RecorderError::InvalidTrace {
                    trace_id: self.trace.trace_id.clone(),
                    message: "the trace has more steps than a step index can number".into(),
                });
            }
        };
        if self.trace.row.is_none() {
            self.trace.sampled_out_step();
            return Ok(());
        }
        let elapsed = self.started.elapsed();
        let (error_type, error_message) = match error {
            Some((kind, message)) => (Some(kind), Some(message)),
            None => (None, None),
        };
        let step = ObservedStep {
            trace_id: self.trace.trace_id.clone(),
            step_index: index,
            call_id: self.call_id.take(),
            tool_name: std::mem::take(&mut self.tool_name),
            inputs: std::mem::take(&mut self.inputs),
            outputs,
            error_type,
            error_message,
            started_at: Some(self.started_at),
            ended_at: Some(
                self.started_at + chrono::Duration::from_std(elapsed).unwrap_or_default(),
            ),
            duration_ms: Some(elapsed.as_secs_f64() * 1000.0),
            recorded_at: None,
            metadata: std::mem::take(&mut self.metadata),
        };
        self.trace.send_step(step)?;
        self.trace.recorder.pending()
    }
}

impl Drop for StepGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let message = if std::thread::panicking() {
            "the call panicked before the step was finished"
        } else {
            "the step guard was dropped without finish or fail"
        };
        if let Err(error) = self.complete(None, Some((ABANDONED.to_owned(), message.to_owned()))) {
            self.trace.recorder.shared.report(error);
        }
    }
}

/// A finished step to record with [`TraceHandle::record_step`].
#[derive(Debug, Clone, PartialEq)]
pub struct StepBuilder {
    tool_name: String,
    inputs: Value,
    outputs: Option<Value>,
    error: Option<(String, String)>,
    call_id: Option<String>,
    started_at: Option<Timestamp>,
    ended_at: Option<Timestamp>,
    duration_ms: Option<f64>,
    metadata: Metadata,
}

impl StepBuilder {
    /// A call of `tool` with `inputs`.
    pub fn new(tool: impl Into<String>, inputs: Value) -> Self {
        Self {
            tool_name: tool.into(),
            inputs,
            outputs: None,
            error: None,
            call_id: None,
            started_at: None,
            ended_at: None,
            duration_ms: None,
            metadata: Metadata::new(),
        }
    }

    /// What the call returned.
    pub fn outputs(mut self, outputs: Value) -> Self {
        self.outputs = Some(outputs);
        self
    }

    /// The call failed with this error kind and message.
    pub fn error(mut self, error_type: impl Into<String>, message: impl Into<String>) -> Self {
        self.error = Some((error_type.into(), message.into()));
        self
    }

    /// The id the agent gave the call.
    pub fn call_id(mut self, call_id: impl Into<String>) -> Self {
        self.call_id = Some(call_id.into());
        self
    }

    /// When the call started.
    pub fn started_at(mut self, at: Timestamp) -> Self {
        self.started_at = Some(at);
        self
    }

    /// When the call ended.
    pub fn ended_at(mut self, at: Timestamp) -> Self {
        self.ended_at = Some(at);
        self
    }

    /// How long the call took (otherwise computed from the start and end when both are given).
    pub fn duration_ms(mut self, duration_ms: f64) -> Self {
        self.duration_ms = Some(duration_ms);
        self
    }

    /// One metadata entry of the step.
    pub fn metadata(mut self, key: impl Into<String>, value: Value) -> Self {
        self.metadata.insert(key.into(), value);
        self
    }

    fn into_step(self, trace_id: &str, step_index: u32) -> ObservedStep {
        let duration_ms = self.duration_ms.or_else(|| {
            let (start, end) = (self.started_at?, self.ended_at?);
            let nanos = (end - start).num_nanoseconds()?;
            Some(nanos as f64 / 1e6)
        });
        let (error_type, error_message) = match self.error {
            Some((kind, message)) => (Some(kind), Some(message)),
            None => (None, None),
        };
        ObservedStep {
            trace_id: trace_id.to_owned(),
            step_index,
            call_id: self.call_id,
            tool_name: self.tool_name,
            inputs: self.inputs,
            outputs: self.outputs,
            error_type,
            error_message,
            started_at: self.started_at,
            ended_at: self.ended_at,
            duration_ms,
            recorded_at: None,
            metadata: self.metadata,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::redact::REDACTED;
    use crate::capture::test_store::MemoryStore;
    use serde_json::json;
    use std::collections::HashSet;

    fn recorder_with(config: RecorderConfig) -> (TraceRecorder, MemoryStore) {
        let store = MemoryStore::default();
        let recorder = TraceRecorder::new(Box::new(store.clone()), config).unwrap();
        (recorder, store)
    }

    fn recorder() -> (TraceRecorder, MemoryStore) {
        recorder_with(RecorderConfig::default())
    }

    /// A configuration that only commits on flush, shutdown or a full batch.
    fn slow_config() -> RecorderConfig {
        RecorderConfig {
            max_batch_delay: Duration::from_secs(3600),
            batch_size: 1_000_000,
            retry_delay: Duration::from_millis(1),
            ..RecorderConfig::default()
        }
    }

    fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn trace(recorder: &TraceRecorder, id: &str) -> TraceHandle {
        recorder
            .start_trace(TraceOptions::new().trace_id(id))
            .unwrap()
    }

    #[test]
    fn the_public_types_can_be_shared_between_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<TraceRecorder>();
        shareable::<TraceHandle>();
        shareable::<StepGuard>();
        shareable::<RecorderConfig>();
    }

    #[test]
    fn steps_get_indices_in_order_and_reach_the_store_on_flush() {
        let (recorder, store) = recorder_with(slow_config());
        let t = recorder
            .start_trace(
                TraceOptions::new()
                    .trace_id("t1")
                    .source("unit")
                    .session_id("s1")
                    .agent("bot")
                    .metadata("task", json!(42)),
            )
            .unwrap();
        for i in 0..5 {
            let index = t
                .record_step(StepBuilder::new("tool", json!({"i": i})))
                .unwrap();
            assert_eq!(index, i);
        }
        assert!(store.steps_of("t1").is_empty(), "committed before flush");
        recorder.flush().unwrap();
        let steps = store.steps_of("t1");
        assert_eq!(steps.len(), 5);
        for (i, step) in steps.iter().enumerate() {
            assert_eq!(step.step_index as usize, i);
            assert_eq!(step.inputs, json!({"i": i}));
            assert!(step.recorded_at.is_some());
        }
        let row = store.trace("t1").unwrap();
        assert_eq!(row.source, "unit");
        assert_eq!(row.session_id.as_deref(), Some("s1"));
        assert_eq!(row.agent.as_deref(), Some("bot"));
        assert_eq!(row.metadata["task"], json!(42));
        assert!(row.started_at.is_some());
        assert!(row.ended_at.is_none());
        let stats = recorder.stats();
        assert_eq!(stats.traces_started, 1);
        assert_eq!(stats.steps_recorded, 5);
        assert_eq!(stats.steps_committed, 5);
        assert_eq!(stats.batches_committed, 1);
    }

    #[test]
    fn the_default_source_is_the_recorders() {
        let (recorder, store) = recorder_with(RecorderConfig {
            source: "my-app".into(),
            ..RecorderConfig::default()
        });
        let t = recorder.start_trace(TraceOptions::new()).unwrap();
        let id = t.trace_id().to_owned();
        recorder.flush().unwrap();
        assert_eq!(store.trace(&id).unwrap().source, "my-app");
    }

    #[test]
    fn generated_trace_ids_are_unique_hex() {
        let (recorder, _store) = recorder();
        let mut seen = HashSet::new();
        for _ in 0..1000 {
            let t = recorder.start_trace(TraceOptions::new()).unwrap();
            let id = t.trace_id().to_owned();
            assert_eq!(id.len(), 32);
            assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
            assert!(seen.insert(id));
        }
    }

    #[test]
    fn an_empty_trace_id_is_refused() {
        let (recorder, _store) = recorder();
        let error = recorder
            .start_trace(TraceOptions::new().trace_id(""))
            .unwrap_err();
        assert!(
            matches!(error, RecorderError::InvalidTrace { .. }),
            "{error}"
        );
    }

    #[test]
    fn record_step_keeps_every_field_and_computes_the_duration() {
        let (recorder, store) = recorder();
        let t = trace(&recorder, "t");
        let start = Utc::now();
        let end = start + chrono::Duration::milliseconds(1500);
        t.record_step(
            StepBuilder::new("search", json!({"q": "x"}))
                .outputs(json!([1, 2]))
                .call_id("call-1")
                .started_at(start)
                .ended_at(end)
                .metadata("model", json!("m")),
        )
        .unwrap();
        t.record_step(
            StepBuilder::new("fetch", json!({}))
                .error("Timeout", "took too long")
                .duration_ms(12.5),
        )
        .unwrap();
        recorder.flush().unwrap();
        let steps = store.steps_of("t");
        assert_eq!(steps[0].tool_name, "search");
        assert_eq!(steps[0].outputs, Some(json!([1, 2])));
        assert_eq!(steps[0].call_id.as_deref(), Some("call-1"));
        assert_eq!(steps[0].started_at, Some(start));
        assert_eq!(steps[0].ended_at, Some(end));
        assert_eq!(steps[0].duration_ms, Some(1500.0));
        assert_eq!(steps[0].metadata["model"], json!("m"));
        assert!(!steps[0].is_error());
        assert_eq!(steps[1].error_type.as_deref(), Some("Timeout"));
        assert_eq!(steps[1].error_message.as_deref(), Some("took too long"));
        assert_eq!(steps[1].outputs, None);
        assert_eq!(steps[1].duration_ms, Some(12.5));
        assert_eq!(steps[1].started_at, None);
    }

    #[test]
    fn call_times_the_call_and_records_its_outputs() {
        let (recorder, store) = recorder();
        let t = trace(&recorder, "t");
        let before = Utc::now();
        let result: Result<Value, std::io::Error> = t.call("add", json!({"a": 1, "b": 2}), |i| {
            std::thread::sleep(Duration::from_millis(20));
            let sum = i["a"].as_i64().unwrap() + i["b"].as_i64().unwrap();
            Ok(json!({"sum": sum}))
        });
        let after = Utc::now();
        assert_eq!(result.unwrap(), json!({"sum": 3}));
        recorder.flush().unwrap();
        let step = &store.steps_of("t")[0];
        assert_eq!(step.tool_name, "add");
        assert_eq!(step.inputs, json!({"a": 1, "b": 2}));
        assert_eq!(step.outputs, Some(json!({"sum": 3})));
        assert!(!step.is_error());
        let (start, end) = (step.started_at.unwrap(), step.ended_at.unwrap());
        assert!(before <= start && start <= end && end <= after);
        let duration = step.duration_ms.unwrap();
        assert!(duration >= 20.0, "{duration}");
        let span = (end - start).num_microseconds().unwrap() as f64 / 1000.0;
        assert!((span - duration).abs() < 0.01, "{span} vs {duration}");
    }

    #[test]
    fn call_outputs_may_be_any_serializable_type() {
        #[derive(Serialize)]
        struct User {
            name: String,
            age: u8,
        }
        let (recorder, store) = recorder();
        let t = trace(&recorder, "t");
        let user = t
            .call("get_user", json!({"id": 1}), |_| {
                Ok::<_, String>(User {
                    name: "Ann".into(),
                    age: 40,
                })
            })
            .unwrap();
        assert_eq!(user.name, "Ann");
        recorder.flush().unwrap();
        assert_eq!(
            store.steps_of("t")[0].outputs,
            Some(json!({"name": "Ann", "age": 40}))
        );
    }

    #[test]
    fn a_failed_call_records_the_error_type_and_message() {
        let (recorder, store) = recorder();
        let t = trace(&recorder, "t");
        let result: Result<Value, std::io::Error> = t.call("read", json!({"path": "/x"}), |_| {
            Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such file",
            ))
        });
        assert_eq!(result.unwrap_err().kind(), std::io::ErrorKind::NotFound);
        let custom: Result<Value, String> = t.call_with_kind(
            "write",
            json!({}),
            |e: &String| format!("kind:{}", e.len()),
            |_| Err("denied".to_owned()),
        );
        assert_eq!(custom.unwrap_err(), "denied");
        recorder.flush().unwrap();
        let steps = store.steps_of("t");
        assert_eq!(
            steps[0].error_type.as_deref(),
            Some(std::any::type_name::<std::io::Error>())
        );
        assert_eq!(steps[0].error_message.as_deref(), Some("no such file"));
        assert_eq!(steps[0].outputs, None);
        assert!(steps[0].duration_ms.is_some());
        assert_eq!(steps[1].error_type.as_deref(), Some("kind:6"));
        assert_eq!(steps[1].error_message.as_deref(), Some("denied"));
    }

    #[test]
    fn guards_record_finish_fail_and_abandonment() {
        let (recorder, store) = recorder();
        let t = trace(&recorder, "t");
        let mut ok = t.begin_step("a", json!({"n": 1}));
        ok.set_call_id("c1");
        ok.set_metadata("retry", json!(0));
        assert_eq!(ok.index(), Some(0));
        assert_eq!(ok.inputs(), &json!({"n": 1}));
        let failed = t.begin_step("b", json!({}));
        let dropped = t.begin_step("c", json!({}));
        // Finished out of order: the indices follow the order the steps began.
        failed.fail("Refused", "nope").unwrap();
        ok.finish(json!("done")).unwrap();
        drop(dropped);
        recorder.flush().unwrap();
        let steps = store.steps_of("t");
        assert_eq!(steps.len(), 3);
        assert_eq!(
            (steps[0].tool_name.as_str(), steps[0].outputs.clone()),
            ("a", Some(json!("done")))
        );
        assert_eq!(steps[0].call_id.as_deref(), Some("c1"));
        assert_eq!(steps[0].metadata["retry"], json!(0));
        assert_eq!(steps[1].tool_name, "b");
        assert_eq!(steps[1].error_type.as_deref(), Some("Refused"));
        assert_eq!(steps[1].error_message.as_deref(), Some("nope"));
        assert_eq!(steps[2].tool_name, "c");
        assert_eq!(steps[2].error_type.as_deref(), Some(ABANDONED));
        assert!(
            steps[2]
                .error_message
                .as_deref()
                .unwrap()
                .contains("without finish or fail")
        );
        for step in &steps {
            assert!(step.started_at.is_some() && step.ended_at.is_some());
            assert!(step.duration_ms.is_some());
        }
    }

    #[test]
    fn a_call_that_panics_is_recorded_as_abandoned() {
        let (recorder, store) = recorder();
        let t = trace(&recorder, "t");
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _: Result<Value, String> = t.call("boom", json!({"x": 1}), |_| panic!("kaboom"));
        }));
        assert!(outcome.is_err());
        recorder.flush().unwrap();
        let step = &store.steps_of("t")[0];
        assert_eq!(step.tool_name, "boom");
        assert_eq!(step.inputs, json!({"x": 1}));
        assert_eq!(step.error_type.as_deref(), Some(ABANDONED));
        assert!(step.error_message.as_deref().unwrap().contains("panicked"));
    }

    #[test]
    fn end_trace_and_dropping_the_last_handle_write_ended_at() {
        let (recorder, store) = recorder_with(slow_config());
        let ended = trace(&recorder, "ended");
        ended.set_metadata("reward", json!(1.0));
        ended.end_trace().unwrap();
        let dropped = trace(&recorder, "dropped");
        let clone = dropped.clone();
        drop(dropped);
        recorder.flush().unwrap();
        // A clone is still alive: the trace has not ended.
        assert!(store.trace("dropped").unwrap().ended_at.is_none());
        drop(clone);
        recorder.flush().unwrap();
        let row = store.trace("ended").unwrap();
        assert!(row.ended_at.is_some() && row.ended_at >= row.started_at);
        assert_eq!(row.metadata["reward"], json!(1.0));
        assert!(store.trace("dropped").unwrap().ended_at.is_some());
        // Start and end arrived in one batch: the store got the trace row once.
        let appends = store.lock().appends.clone();
        assert_eq!(appends[0], (2, 0), "{appends:?}");
    }

    #[test]
    fn a_full_batch_is_committed_without_a_flush() {
        let (recorder, store) = recorder_with(RecorderConfig {
            batch_size: 10,
            ..slow_config()
        });
        let t = trace(&recorder, "t");
        for i in 0..24 {
            t.record_step(StepBuilder::new("x", json!(i))).unwrap();
        }
        // 1 trace row + 24 steps: two full batches of 10 rows, 5 rows still waiting.
        wait_until("two batches", || store.lock().appends.len() == 2);
        assert_eq!(store.lock().appends, vec![(1, 9), (0, 10)]);
        assert_eq!(store.steps_of("t").len(), 19);
        recorder.flush().unwrap();
        assert_eq!(store.steps_of("t").len(), 24);
        assert_eq!(recorder.stats().batches_committed, 3);
    }

    #[test]
    fn a_waiting_batch_is_committed_after_the_delay() {
        let (recorder, store) = recorder_with(RecorderConfig {
            max_batch_delay: Duration::from_millis(10),
            batch_size: 1_000_000,
            ..RecorderConfig::default()
        });
        let t = trace(&recorder, "t");
        t.record_step(StepBuilder::new("x", json!(1))).unwrap();
        wait_until("the delayed commit", || store.steps_of("t").len() == 1);
        assert_eq!(recorder.stats().batches_committed, 1);
    }

    #[test]
    fn dropping_the_recorder_commits_everything() {
        let store = MemoryStore::default();
        {
            let recorder = TraceRecorder::new(Box::new(store.clone()), slow_config()).unwrap();
            let t = trace(&recorder, "t");
            for i in 0..100 {
                t.record_step(StepBuilder::new("x", json!(i))).unwrap();
            }
            let other = recorder.clone();
            drop(recorder);
            // A clone and a trace handle keep the writer alive.
            t.record_step(StepBuilder::new("late", json!(null)))
                .unwrap();
            drop(other);
            assert!(store.steps_of("t").is_empty());
        }
        let steps = store.steps_of("t");
        assert_eq!(steps.len(), 101);
        assert_eq!(steps[100].tool_name, "late");
        assert!(store.trace("t").unwrap().ended_at.is_some());
    }

    #[test]
    fn a_failed_commit_is_reported_by_flush_and_retried() {
        let (recorder, store) = recorder_with(slow_config());
        let t = trace(&recorder, "t");
        t.record_step(StepBuilder::new("x", json!(1))).unwrap();
        store.lock().fail_next = 1;
        let error = recorder.flush().unwrap_err();
        assert!(error.to_string().contains("disk on fire"), "{error}");
        assert!(store.steps_of("t").is_empty());
        // Reported once; the batch was kept and the next flush commits it.
        recorder.flush().unwrap();
        assert_eq!(store.steps_of("t").len(), 1);
        let stats = recorder.stats();
        assert_eq!(stats.commit_failures, 1);
        assert_eq!(stats.steps_committed, 1);
        assert_eq!(stats.steps_discarded, 0);
    }

    #[test]
    fn a_full_batch_that_failed_is_retried_without_a_flush() {
        let (recorder, store) = recorder_with(RecorderConfig {
            batch_size: 5,
            retry_delay: Duration::from_millis(5),
            ..slow_config()
        });
        store.lock().fail_next = 1;
        let t = trace(&recorder, "t");
        for i in 0..4 {
            t.record_step(StepBuilder::new("x", json!(i))).unwrap();
        }
        // 1 trace row + 4 steps fill the batch; its first commit fails and nothing else arrives,
        // so only the retry timer can commit it.
        wait_until("the retried commit", || store.steps_of("t").len() == 4);
        let stats = recorder.stats();
        assert_eq!((stats.commit_failures, stats.batches_committed), (1, 1));
        // The failure is still reported once.
        assert!(recorder.flush().is_err());
        recorder.flush().unwrap();
    }

    #[test]
    fn endless_delays_do_not_break_the_writer() {
        let (recorder, store) = recorder_with(RecorderConfig {
            max_batch_delay: Duration::MAX,
            retry_delay: Duration::MAX,
            ..RecorderConfig::default()
        });
        let t = trace(&recorder, "t");
        t.record_step(StepBuilder::new("x", json!(1))).unwrap();
        store.lock().fail_next = 1;
        assert!(recorder.flush().is_err());
        recorder.flush().unwrap();
        assert_eq!(store.steps_of("t").len(), 1);
    }

    #[test]
    fn a_writer_error_is_surfaced_by_the_next_record_call() {
        let (recorder, store) = recorder_with(RecorderConfig {
            retry_delay: Duration::from_secs(3600),
            ..slow_config()
        });
        let t = trace(&recorder, "t");
        t.record_step(StepBuilder::new("x", json!(1))).unwrap();
        store.lock().fail_next = 1;
        let (reply, answer) = crossbeam_channel::bounded(1);
        // Make the writer try once, without taking the error the way flush would.
        recorder.inner.send(Command::Flush(reply)).unwrap();
        let flushed: Result<()> = answer.recv().unwrap();
        recorder.inner.shared.report(flushed.unwrap_err());
        let error = t.record_step(StepBuilder::new("y", json!(2))).unwrap_err();
        assert!(error.to_string().contains("disk on fire"), "{error}");
        // The failing record call still queued its step; the error is not reported twice.
        recorder.flush().unwrap();
        let steps = store.steps_of("t");
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[1].tool_name, "y");
    }

    #[test]
    fn a_batch_that_keeps_failing_is_dropped_and_reported() {
        let (recorder, store) = recorder_with(RecorderConfig {
            max_commit_attempts: 2,
            ..slow_config()
        });
        let t = trace(&recorder, "t");
        for i in 0..3 {
            t.record_step(StepBuilder::new("x", json!(i))).unwrap();
        }
        store.lock().fail_next = 100;
        let first = recorder.flush().unwrap_err();
        assert!(matches!(first, RecorderError::Io { .. }), "{first}");
        let second = recorder.flush().unwrap_err();
        match second {
            RecorderError::BatchDiscarded {
                traces,
                steps,
                attempts,
                ..
            } => assert_eq!((traces, steps, attempts), (1, 3, 2)),
            other => panic!("expected BatchDiscarded, got {other}"),
        }
        assert_eq!(recorder.stats().steps_discarded, 3);
        // The store recovers: new steps are committed again.
        store.lock().fail_next = 0;
        t.record_step(StepBuilder::new("after", json!(null)))
            .unwrap();
        recorder.flush().unwrap();
        assert_eq!(store.steps_of("t").len(), 1);
        assert_eq!(store.steps_of("t")[0].step_index, 3);
    }

    #[test]
    fn a_row_the_store_rejects_is_dropped_alone() {
        let (recorder, store) = recorder_with(slow_config());
        store.lock().reject_step = Some(("t".into(), 1));
        let t = trace(&recorder, "t");
        for i in 0..4 {
            t.record_step(StepBuilder::new("x", json!(i))).unwrap();
        }
        let error = recorder.flush().unwrap_err();
        match &error {
            RecorderError::BatchDiscarded { steps, source, .. } => {
                assert_eq!(*steps, 1);
                assert!(matches!(
                    **source,
                    RecorderError::InvalidStep { step_index: 1, .. }
                ));
            }
            other => panic!("expected BatchDiscarded, got {other}"),
        }
        let indices: Vec<u32> = store.steps_of("t").iter().map(|s| s.step_index).collect();
        assert_eq!(indices, vec![0, 2, 3]);

        store.lock().reject_trace = Some("bad".into());
        let bad = trace(&recorder, "bad");
        bad.record_step(StepBuilder::new("x", json!(0))).unwrap();
        t.record_step(StepBuilder::new("x", json!(4))).unwrap();
        let error = recorder.flush().unwrap_err();
        assert!(
            matches!(
                error,
                RecorderError::BatchDiscarded {
                    traces: 1,
                    steps: 1,
                    ..
                }
            ),
            "{error}"
        );
        assert!(store.trace("bad").is_none());
        assert_eq!(store.steps_of("t").len(), 4);
    }

    #[test]
    fn submitted_rows_are_redacted_and_a_rejected_one_is_dropped_alone() {
        let (recorder, store) = recorder_with(slow_config());
        store.lock().reject_step = Some(("t".into(), 1));
        let mut trace = ObservedTrace::new("t", "receiver");
        trace.metadata.insert("api_key".into(), json!("k-1"));
        let steps: Vec<ObservedStep> = (0..3)
            .map(|i| ObservedStep::new("t", i, "x", json!({"password": "p", "n": i})))
            .collect();
        let (told, outcome) = crossbeam_channel::bounded(1);
        recorder
            .submit(vec![trace], steps, move |result| {
                let _ = told.send(result.map_err(|e| e.to_string()));
            })
            .unwrap();
        let _ = recorder.flush();
        let outcome = outcome.recv().unwrap();
        assert!(
            outcome.as_ref().is_err_and(|e| e.contains("step 1")),
            "{outcome:?}"
        );
        let stored = store.steps_of("t");
        let indices: Vec<u32> = stored.iter().map(|s| s.step_index).collect();
        assert_eq!(indices, vec![0, 2]);
        assert_eq!(stored[1].inputs, json!({"password": "[REDACTED]", "n": 2}));
        assert!(stored.iter().all(|s| s.recorded_at.is_some()));
        assert_eq!(
            store.trace("t").unwrap().metadata["api_key"],
            json!("[REDACTED]")
        );
    }

    #[test]
    fn a_sampled_out_trace_sends_nothing() {
        let (recorder, store) = recorder_with(RecorderConfig {
            sample_rate: SampleRate::NONE,
            ..RecorderConfig::default()
        });
        let t = trace(&recorder, "t");
        assert!(!t.is_sampled());
        assert_eq!(t.record_step(StepBuilder::new("x", json!(1))).unwrap(), 0);
        let out: Result<i32, String> = t.call("y", json!({}), |_| Ok(7));
        assert_eq!(out.unwrap(), 7);
        t.begin_step("z", json!({})).finish(json!(1)).unwrap();
        drop(t.begin_step("w", json!({})));
        t.end_trace().unwrap();
        recorder.flush().unwrap();
        assert!(store.lock().traces.is_empty());
        assert!(store.lock().steps.is_empty());
        assert!(store.lock().appends.is_empty());
        let stats = recorder.stats();
        assert_eq!(stats.traces_sampled_out, 1);
        assert_eq!(stats.steps_sampled_out, 4);
        assert_eq!(stats.steps_recorded, 0);
        assert_eq!(stats.traces_started, 0);
    }

    #[test]
    fn sampling_follows_the_trace_id() {
        let rate = SampleRate::new(0.5).unwrap();
        let (recorder, store) = recorder_with(RecorderConfig {
            sample_rate: rate,
            ..RecorderConfig::default()
        });
        let ids: Vec<String> = (0..200).map(|i| format!("trace-{i}")).collect();
        for id in &ids {
            let t = trace(&recorder, id);
            assert_eq!(t.is_sampled(), rate.keeps(id));
            t.record_step(StepBuilder::new("x", json!(1))).unwrap();
        }
        recorder.flush().unwrap();
        let kept: HashSet<String> = store
            .lock()
            .traces
            .iter()
            .map(|t| t.trace_id.clone())
            .collect();
        let expected: HashSet<String> = ids.iter().filter(|id| rate.keeps(id)).cloned().collect();
        assert_eq!(kept, expected);
        assert!(!kept.is_empty() && kept.len() < ids.len());
        let stats = recorder.stats();
        assert_eq!(stats.steps_recorded + stats.steps_sampled_out, 200);
        assert_eq!(stats.steps_recorded as usize, expected.len());
    }

    #[test]
    fn redaction_is_applied_before_the_store() {
        let (recorder, store) = recorder();
        let t = recorder
            .start_trace(
                TraceOptions::new()
                    .trace_id("t")
                    .metadata("api_key", json!("k-123"))
                    .metadata("note", json!("Bearer abcdef")),
            )
            .unwrap();
        t.record_step(
            StepBuilder::new("login", json!({"user": "ann", "password": "hunter2"}))
                .outputs(json!({"session": {"token": "tok-999"}}))
                .metadata("cookie", json!("sid=1")),
        )
        .unwrap();
        let _: Result<Value, String> = t.call("fetch", json!({}), |_| {
            Err("401 for key sk-abcdefghijklmnopqrstu".to_owned())
        });
        recorder.flush().unwrap();
        let steps = store.steps_of("t");
        assert_eq!(
            steps[0].inputs,
            json!({"user": "ann", "password": REDACTED})
        );
        assert_eq!(
            steps[0].outputs,
            Some(json!({"session": {"token": REDACTED}}))
        );
        assert_eq!(steps[0].metadata["cookie"], json!(REDACTED));
        assert_eq!(
            steps[1].error_message.as_deref(),
            Some("401 for key [REDACTED]")
        );
        let row = store.trace("t").unwrap();
        assert_eq!(row.metadata["api_key"], json!(REDACTED));
        assert_eq!(row.metadata["note"], json!("Bearer [REDACTED]"));
        let everything = format!("{:?}", store.lock());
        for secret in ["hunter2", "tok-999", "sid=1", "k-123", "abcdef", "sk-abc"] {
            assert!(!everything.contains(secret), "{secret} reached the store");
        }
    }

    #[test]
    fn redaction_can_be_turned_off() {
        let (recorder, store) = recorder_with(RecorderConfig {
            redaction: RedactionPolicy::none(),
            ..RecorderConfig::default()
        });
        let t = trace(&recorder, "t");
        t.record_step(StepBuilder::new("login", json!({"password": "hunter2"})))
            .unwrap();
        recorder.flush().unwrap();
        assert_eq!(
            store.steps_of("t")[0].inputs,
            json!({"password": "hunter2"})
        );
    }

    #[test]
    fn threads_sharing_one_trace_get_distinct_gapless_indices() {
        let (recorder, store) = recorder_with(RecorderConfig {
            channel_capacity: 8,
            batch_size: 16,
            ..RecorderConfig::default()
        });
        let t = trace(&recorder, "shared");
        let threads = 8;
        let per_thread = 250;
        std::thread::scope(|scope| {
            for thread in 0..threads {
                let t = t.clone();
                scope.spawn(move || {
                    let mut last = None;
                    for seq in 0..per_thread {
                        let index = if seq % 2 == 0 {
                            t.record_step(StepBuilder::new(
                                "x",
                                json!({"thread": thread, "seq": seq}),
                            ))
                            .unwrap()
                        } else {
                            let guard = t.begin_step("y", json!({"thread": thread, "seq": seq}));
                            let index = guard.index().unwrap();
                            guard.finish(json!(null)).unwrap();
                            index
                        };
                        assert!(last < Some(index));
                        last = Some(index);
                    }
                });
            }
        });
        recorder.flush().unwrap();
        let steps = store.steps_of("shared");
        assert_eq!(steps.len(), threads * per_thread);
        for (i, step) in steps.iter().enumerate() {
            assert_eq!(step.step_index as usize, i);
        }
        let stats = recorder.stats();
        assert_eq!(stats.steps_recorded, (threads * per_thread) as u64);
        assert_eq!(stats.steps_committed, (threads * per_thread) as u64);
    }

    #[test]
    fn a_dataset_in_object_storage_is_refused_before_anything_is_recorded() {
        let path = Path::new("s3://bucket/traces.parquet");
        let Err(error) = TraceRecorder::open(path, RecorderConfig::default()) else {
            panic!("a recorder was opened over object storage");
        };
        let message = error.to_string();
        assert!(
            message.starts_with("s3://bucket/traces.parquet: "),
            "{message}"
        );
        assert!(message.contains("record into a local store"), "{message}");
    }
}
