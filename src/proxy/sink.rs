//! Storing the observed calls through the [`TraceRecorder`], failing open.
//!
//! The store is opened on the observer's thread, after the relay has started, so a store that
//! is slow to open (locked) or cannot be opened at all (read-only, missing folder) never holds
//! traffic back: the calls are then counted as not recorded and the reason is kept for the exit
//! summary. The recorder redacts every trace and step before they reach the store.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use chainweaver_recorder::RecorderError;
use chainweaver_recorder::capture::{
    RecorderConfig, StepBuilder, TraceHandle, TraceOptions, TraceRecorder,
};
use chainweaver_recorder::model::Timestamp;
use chainweaver_recorder::model::mcp::{self, step_meta, trace_meta};
use serde_json::Value;

use super::session::{Call, SessionInfo, TraceKey};

/// Where and how the calls are stored.
#[derive(Debug, Clone)]
pub struct SinkConfig {
    /// The store (a SQLite file or a Parquet dataset).
    pub store: PathBuf,
    /// The server's command line, kept on every trace.
    pub server_command: String,
    /// The recorder's batching and redaction.
    pub recorder: RecorderConfig,
    /// The longest wait for the last steps to be committed at exit.
    pub flush_timeout: Duration,
}

/// What became of the calls handed to the sink.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SinkReport {
    /// Calls observed.
    pub calls: u64,
    /// Traces started.
    pub traces: u64,
    /// Steps the store confirmed written.
    pub steps_stored: u64,
    /// Steps that were not stored (store unavailable, commits that failed, a flush that did not
    /// finish in time).
    pub steps_lost: u64,
    /// Why steps were lost (the first reason; later ones of the same run are usually alike).
    pub store_error: Option<String>,
}

/// Turns calls into steps (see the module docs).
pub struct Sink {
    config: SinkConfig,
    /// `None` once the store is known to be unusable.
    recorder: Option<TraceRecorder>,
    traces: HashMap<TraceKey, TraceHandle>,
    /// Wall-clock time of `origin`, to turn the relay's instants into timestamps.
    origin: (Instant, Timestamp),
    report: SinkReport,
    /// Steps never handed to a recorder.
    not_handed: u64,
}

impl Sink {
    /// Open the store (failing open: an error is kept for the report).
    pub fn open(config: SinkConfig, origin: (Instant, Timestamp)) -> Self {
        let mut report = SinkReport::default();
        let recorder = match TraceRecorder::open(&config.store, config.recorder.clone()) {
            Ok(recorder) => Some(recorder),
            Err(error) => {
                report.store_error = Some(format!(
                    "the store {} could not be opened: {error}",
                    config.store.display()
                ));
                None
            }
        };
        Self {
            config,
            recorder,
            traces: HashMap::new(),
            origin,
            report,
            not_handed: 0,
        }
    }

    fn timestamp(&self, at: Instant) -> Timestamp {
        let (instant, wall) = self.origin;
        let offset = at.saturating_duration_since(instant);
        wall + chrono::Duration::from_std(offset).unwrap_or_default()
    }

    /// Record one call as a step of its trace (starting the trace on its first call).
    pub fn record(&mut self, call: Call, info: &SessionInfo) {
        self.report.calls += 1;
        let Some(trace) = self.trace(&call.trace, info) else {
            self.not_handed += 1;
            return;
        };
        let started_at = self.timestamp(call.started);
        let ended_at = self.timestamp(call.ended);
        let duration = call.ended.saturating_duration_since(call.started);
        let mut step = StepBuilder::new(call.tool, call.arguments)
            .call_id(match &call.request_id {
                Value::String(id) => id.clone(),
                other => other.to_string(),
            })
            .started_at(started_at)
            .ended_at(ended_at)
            .duration_ms(duration.as_secs_f64() * 1000.0)
            .metadata(step_meta::REQUEST_ID, call.request_id);
        if let Some(version) = call.protocol_version {
            step = step.metadata(step_meta::PROTOCOL_VERSION, Value::String(version));
        }
        step = match call.outcome {
            Ok(outputs) => step.outputs(Value::Object(outputs)),
            Err((kind, message)) => step.error(kind, message),
        };
        match trace.record_step(step) {
            Ok(_) => {}
            Err(RecorderError::WriterGone(why)) => {
                self.not_handed += 1;
                self.store_failed(format!("the store writer stopped: {why}"));
                self.recorder = None;
                self.traces.clear();
            }
            // An earlier commit failed; this step was queued all the same.
            Err(error) => self.store_failed(error.to_string()),
        }
    }

    fn store_failed(&mut self, why: String) {
        self.report.store_error.get_or_insert(why);
    }

    fn trace(&mut self, key: &TraceKey, info: &SessionInfo) -> Option<TraceHandle> {
        if let Some(trace) = self.traces.get(key) {
            return Some(trace.clone());
        }
        let recorder = self.recorder.as_ref()?;
        let mut options = TraceOptions::new().source(mcp::SOURCE).metadata(
            trace_meta::SERVER_COMMAND,
            Value::String(self.config.server_command.clone()),
        );
        if let Some(key) = &key.key {
            options = options
                .session_id(key.clone())
                .metadata(trace_meta::TRACE_KEY, Value::String(key.clone()));
        }
        if let Some(agent) = info
            .client_info
            .as_ref()
            .and_then(|c| c.get("name"))
            .and_then(Value::as_str)
        {
            options = options.agent(agent);
        }
        options = with_info(options, info);
        match recorder.start_trace(options) {
            Ok(trace) => {
                self.report.traces += 1;
                self.traces.insert(key.clone(), trace.clone());
                Some(trace)
            }
            Err(error) => {
                self.store_failed(error.to_string());
                if matches!(error, RecorderError::WriterGone(_)) {
                    self.recorder = None;
                }
                None
            }
        }
    }

    /// A session is over: write its traces' ends, with what the session said about itself.
    pub fn end_session(&mut self, session: u32, info: &SessionInfo) {
        let keys: Vec<TraceKey> = self
            .traces
            .keys()
            .filter(|k| k.session == session)
            .cloned()
            .collect();
        for key in keys {
            if let Some(trace) = self.traces.remove(&key) {
                set_info(&trace, info);
                if let Err(error) = trace.end_trace() {
                    self.store_failed(error.to_string());
                }
            }
        }
    }

    /// End every trace, wait (at most the flush timeout) for the commits, and report.
    pub fn close(mut self, info: &SessionInfo) -> SinkReport {
        for (_, trace) in std::mem::take(&mut self.traces) {
            set_info(&trace, info);
            if let Err(error) = trace.end_trace() {
                self.store_failed(error.to_string());
            }
        }
        let mut report = std::mem::take(&mut self.report);
        let Some(recorder) = self.recorder.take() else {
            report.steps_lost = report.calls;
            return report;
        };
        let (done, wait) = crossbeam_channel::bounded(1);
        let flushing = recorder.clone();
        let flushed = std::thread::Builder::new()
            .name("chainweaver-record-flush".to_owned())
            .spawn(move || {
                let outcome = flushing.flush();
                let _ = done.send(outcome);
                // Dropping the last recorder waits for the writer to stop.
                drop(flushing);
            });
        let finished = match flushed {
            Ok(_) => match wait.recv_timeout(self.config.flush_timeout) {
                Ok(Ok(())) => true,
                Ok(Err(error)) => {
                    report.store_error.get_or_insert(error.to_string());
                    true
                }
                Err(_) => {
                    report.store_error.get_or_insert(format!(
                        "the store did not confirm the last writes within {} s",
                        self.config.flush_timeout.as_secs_f64()
                    ));
                    false
                }
            },
            Err(error) => {
                report
                    .store_error
                    .get_or_insert(format!("could not flush the store: {error}"));
                false
            }
        };
        let stats = recorder.stats();
        report.steps_stored = stats.steps_committed + stats.duplicate_steps;
        report.steps_lost = if finished {
            self.not_handed + stats.steps_discarded
        } else {
            report.calls.saturating_sub(report.steps_stored)
        };
        if !finished {
            // The writer may be stuck in the store; do not wait for it at exit.
            std::mem::forget(recorder);
        }
        report
    }
}

fn with_info(mut options: TraceOptions, info: &SessionInfo) -> TraceOptions {
    if let Some(version) = &info.protocol_version {
        options = options.metadata(trace_meta::PROTOCOL_VERSION, Value::String(version.clone()));
    }
    if let Some(client) = &info.client_info {
        options = options.metadata(trace_meta::CLIENT_INFO, client.clone());
    }
    if let Some(server) = &info.server_info {
        options = options.metadata(trace_meta::SERVER_INFO, server.clone());
    }
    options
}

fn set_info(trace: &TraceHandle, info: &SessionInfo) {
    if let Some(version) = &info.protocol_version {
        trace.set_metadata(trace_meta::PROTOCOL_VERSION, Value::String(version.clone()));
    }
    if let Some(client) = &info.client_info {
        trace.set_metadata(trace_meta::CLIENT_INFO, client.clone());
    }
    if let Some(server) = &info.server_info {
        trace.set_metadata(trace_meta::SERVER_INFO, server.clone());
    }
}
