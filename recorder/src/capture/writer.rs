//! The recorder's background writer: one thread that owns the store, redacts what it receives
//! (rows handed over together with `submit` come redacted and serialized by the caller) and
//! commits it in batches.
//!
//! A batch is committed (one [`TraceStore::append`], one transaction) when it holds
//! `batch_size` rows, when its oldest row has waited `max_batch_delay`, on a flush and at
//! shutdown. A failed batch is kept and retried (after `retry_delay`, or at the next flush) up to
//! `max_commit_attempts` times, then dropped and reported. A row the store rejects as invalid
//! (`InvalidTrace` / `InvalidStep` naming a row of the batch) is dropped alone and reported at
//! once, so one bad row never holds back the rest.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chrono::Utc;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::recorder::Shared;
use super::redact::RedactionPolicy;
use crate::error::{RecorderError, Result};
use crate::model::{ObservedStep, ObservedTrace};
use crate::store::{RawSteps, TraceStore};

/// What callers send to the writer.
pub(crate) enum Command {
    /// A trace row, sent when the trace starts and again when it ends (the store updates it).
    Trace(Box<ObservedTrace>),
    /// A finished step.
    Step(Box<ObservedStep>),
    /// Complete rows handed over together, already redacted by the caller (so that work is
    /// spread over the callers' threads, not the writer's), told once they are committed.
    Rows {
        traces: Vec<ObservedTrace>,
        steps: RawSteps,
        committed: Committed,
    },
    /// Commit everything received so far, then answer with the pending error, if any.
    Flush(Sender<Result<()>>),
    /// Commit everything and stop.
    Shutdown,
}

/// Called once with the outcome of rows handed over with [`Command::Rows`]: `Ok` when they are
/// committed, an error when they (or rows committed with them) were not stored.
pub type Committed = Box<dyn FnOnce(Result<()>) + Send>;

/// How the writer batches and retries.
#[derive(Debug, Clone)]
pub(crate) struct WriterSettings {
    pub batch_size: usize,
    pub max_batch_delay: Duration,
    pub max_commit_attempts: u32,
    pub retry_delay: Duration,
    pub redaction: RedactionPolicy,
}

/// The rows waiting for the next commit.
#[derive(Default)]
struct Batch {
    traces: Vec<ObservedTrace>,
    /// Where each trace id sits in `traces`: a trace sent twice before a commit (started and
    /// ended) is stored once, in its latest form.
    trace_slots: HashMap<String, usize>,
    /// Payloads as the stores write them: serialized when received, and freed as one buffer.
    steps: RawSteps,
    /// When the oldest row arrived.
    opened_at: Option<Instant>,
    /// Failed commits of this batch so far.
    attempts: u32,
    /// No commit before this instant (set after a failure), except on flush or shutdown.
    retry_at: Option<Instant>,
    /// Who waits to hear that rows of this batch are committed.
    waiting: Vec<Committed>,
    /// Why rows of this batch were dropped as invalid, told to `waiting` after the commit.
    dropped: Option<String>,
}

impl Batch {
    fn len(&self) -> usize {
        self.traces.len() + self.steps.len()
    }

    fn is_empty(&self) -> bool {
        self.traces.is_empty() && self.steps.is_empty()
    }

    fn add_trace(&mut self, trace: ObservedTrace) {
        self.opened_at.get_or_insert_with(Instant::now);
        match self.trace_slots.get(&trace.trace_id) {
            Some(&slot) => self.traces[slot] = trace,
            None => {
                self.trace_slots
                    .insert(trace.trace_id.clone(), self.traces.len());
                self.traces.push(trace);
            }
        }
    }

    fn add_step(&mut self, step: &ObservedStep) {
        self.opened_at.get_or_insert_with(Instant::now);
        self.steps.push_step(step);
    }

    fn add_rows(&mut self, traces: Vec<ObservedTrace>, steps: RawSteps, committed: Committed) {
        for trace in traces {
            self.add_trace(trace);
        }
        self.opened_at.get_or_insert_with(Instant::now);
        self.steps.append(steps);
        self.waiting.push(committed);
    }

    /// Tell everyone waiting on this batch how it went: `lost` says why rows were not stored.
    fn settle(&mut self, lost: Option<String>) {
        let lost = lost.or_else(|| self.dropped.take());
        for committed in self.waiting.drain(..) {
            committed(
                lost.clone()
                    .map_or(Ok(()), |why| Err(RecorderError::NotStored(why))),
            );
        }
    }

    fn clear(&mut self) {
        self.settle(None);
        *self = Batch::default();
    }

    /// Remove the rows `error` blames, if it names rows of this batch; returns (traces, steps)
    /// removed.
    fn remove_rejected(&mut self, error: &RecorderError) -> Option<(u64, u64)> {
        let (traces, steps) = match error {
            RecorderError::InvalidStep {
                trace_id,
                step_index,
                ..
            } => {
                let removed = self
                    .steps
                    .retain(|s| !(s.trace_id == trace_id && s.step_index == *step_index));
                (0, removed)
            }
            RecorderError::InvalidTrace { trace_id, .. } => {
                let traces_before = self.traces.len();
                self.traces.retain(|t| t.trace_id != *trace_id);
                let steps = self.steps.retain(|s| s.trace_id != trace_id);
                (traces_before - self.traces.len(), steps)
            }
            _ => return None,
        };
        if traces == 0 && steps == 0 {
            return None;
        }
        self.trace_slots = self
            .traces
            .iter()
            .enumerate()
            .map(|(slot, t)| (t.trace_id.clone(), slot))
            .collect();
        Some((traces as u64, steps as u64))
    }
}

/// The writer thread's state.
pub(crate) struct Writer {
    store: Box<dyn TraceStore>,
    commands: Receiver<Command>,
    shared: Arc<Shared>,
    settings: WriterSettings,
    batch: Batch,
}

impl Writer {
    pub(crate) fn new(
        store: Box<dyn TraceStore>,
        commands: Receiver<Command>,
        shared: Arc<Shared>,
        settings: WriterSettings,
    ) -> Self {
        Self {
            store,
            commands,
            shared,
            settings,
            batch: Batch::default(),
        }
    }

    /// Receive and commit until told to stop or every sender is gone.
    pub(crate) fn run(mut self) {
        loop {
            let received = match self.wake_at() {
                None => self
                    .commands
                    .recv()
                    .map_err(|_| RecvTimeoutError::Disconnected),
                Some(at) => self.commands.recv_deadline(at),
            };
            match received {
                Ok(Command::Trace(mut trace)) => {
                    self.settings.redaction.redact_trace(&mut trace);
                    self.batch.add_trace(*trace);
                }
                Ok(Command::Step(mut step)) => {
                    self.settings.redaction.redact_step(&mut step);
                    self.batch.add_step(&step);
                }
                Ok(Command::Rows {
                    traces,
                    steps,
                    committed,
                }) => {
                    self.batch.add_rows(traces, steps, committed);
                    // A caller waits for these rows' commit (to acknowledge them). With nothing
                    // else queued, waiting out the batch delay only delays it: commit now, and
                    // what arrives meanwhile forms the next batch (group commit).
                    if self.commands.is_empty() && self.may_retry_now() {
                        self.commit();
                        continue;
                    }
                }
                Ok(Command::Flush(reply)) => {
                    self.commit();
                    // The caller may have stopped waiting; nothing to do then.
                    let _ = reply.send(self.shared.take_error().map_or(Ok(()), Err));
                    continue;
                }
                Ok(Command::Shutdown) | Err(RecvTimeoutError::Disconnected) => {
                    self.shutdown();
                    return;
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.commit();
                    continue;
                }
            }
            if self.batch.len() >= self.settings.batch_size.max(1) && self.may_retry_now() {
                self.commit();
            }
        }
    }

    /// When the writer must wake up without a command: when the batch's delay is over, or when
    /// a full batch may be retried. `None` when the batch is empty.
    fn wake_at(&self) -> Option<Instant> {
        let opened = self.batch.opened_at?;
        if self.batch.len() >= self.settings.batch_size.max(1) {
            return Some(self.batch.retry_at.unwrap_or_else(Instant::now));
        }
        let due = opened + self.settings.max_batch_delay;
        Some(match self.batch.retry_at {
            Some(retry) => due.max(retry),
            None => due,
        })
    }

    fn may_retry_now(&self) -> bool {
        self.batch.retry_at.is_none_or(|at| Instant::now() >= at)
    }

    /// Try to commit the batch once (dropping rows the store rejects as invalid first).
    fn commit(&mut self) {
        while !self.batch.is_empty() {
            self.batch.steps.set_recorded_at(Utc::now());
            match self.store.append_raw(&self.batch.traces, &self.batch.steps) {
                Ok(written) => {
                    let stats = &self.shared.stats;
                    stats
                        .steps_committed
                        .fetch_add(written.steps, Ordering::Relaxed);
                    stats
                        .duplicate_steps
                        .fetch_add(written.duplicate_steps, Ordering::Relaxed);
                    stats.batches_committed.fetch_add(1, Ordering::Relaxed);
                    self.batch.clear();
                    return;
                }
                Err(error) => {
                    self.shared
                        .stats
                        .commit_failures
                        .fetch_add(1, Ordering::Relaxed);
                    if let Some((traces, steps)) = self.batch.remove_rejected(&error) {
                        self.batch.dropped.get_or_insert_with(|| error.to_string());
                        self.discarded(traces, steps, 1, error);
                        continue;
                    }
                    self.batch.attempts += 1;
                    if self.batch.attempts >= self.settings.max_commit_attempts.max(1) {
                        let traces = self.batch.traces.len() as u64;
                        let steps = self.batch.steps.len() as u64;
                        let attempts = self.batch.attempts;
                        self.batch.settle(Some(error.to_string()));
                        self.batch.clear();
                        self.discarded(traces, steps, attempts, error);
                    } else {
                        self.batch.retry_at = Some(Instant::now() + self.settings.retry_delay);
                        self.shared.report(error);
                    }
                    return;
                }
            }
        }
        self.batch.clear();
    }

    fn discarded(&self, traces: u64, steps: u64, attempts: u32, source: RecorderError) {
        self.shared
            .stats
            .steps_discarded
            .fetch_add(steps, Ordering::Relaxed);
        self.shared.report(RecorderError::BatchDiscarded {
            traces,
            steps,
            attempts,
            source: Box::new(source),
        });
    }

    /// Commit what is left, retrying until it is stored or given up.
    fn shutdown(&mut self) {
        // `Shutdown` is sent when the last sender is being dropped, so nothing should follow it;
        // anything that still does is committed all the same.
        let mut replies = Vec::new();
        while let Ok(command) = self.commands.try_recv() {
            match command {
                Command::Trace(mut trace) => {
                    self.settings.redaction.redact_trace(&mut trace);
                    self.batch.add_trace(*trace);
                }
                Command::Step(mut step) => {
                    self.settings.redaction.redact_step(&mut step);
                    self.batch.add_step(&step);
                }
                Command::Rows {
                    traces,
                    steps,
                    committed,
                } => self.batch.add_rows(traces, steps, committed),
                Command::Flush(reply) => replies.push(reply),
                Command::Shutdown => {}
            }
        }
        while !self.batch.is_empty() {
            if let Some(at) = self.batch.retry_at {
                std::thread::sleep(at.saturating_duration_since(Instant::now()));
            }
            self.commit();
        }
        for reply in replies {
            let _ = reply.send(self.shared.take_error().map_or(Ok(()), Err));
        }
    }
}
