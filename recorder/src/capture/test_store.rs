//! A trace store over plain vectors for the capture unit tests, with switches to make appends
//! fail. The integration tests use the real SQLite store.

use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

use crate::error::{RecorderError, Result};
use crate::model::{ObservedStep, ObservedTrace, TraceWithSteps};
use crate::store::{
    AppendStats, PageRequest, StepColumns, StoreCounts, TraceFilter, TracePage, TraceStore,
    TraceSummary,
};

/// What the memory store holds and how it misbehaves.
#[derive(Debug, Default)]
pub(crate) struct MemoryState {
    pub traces: Vec<ObservedTrace>,
    pub steps: Vec<ObservedStep>,
    /// Successful appends, with the (traces, steps) each received.
    pub appends: Vec<(usize, usize)>,
    /// The next this-many appends fail with an I/O error.
    pub fail_next: usize,
    /// Appends containing this (trace id, step index) fail with `InvalidStep`.
    pub reject_step: Option<(String, u32)>,
    /// Appends containing a trace row with this id fail with `InvalidTrace`.
    pub reject_trace: Option<String>,
}

/// A shareable in-memory store: the test keeps one clone to look inside.
#[derive(Debug, Clone, Default)]
pub(crate) struct MemoryStore {
    pub state: Arc<Mutex<MemoryState>>,
}

impl MemoryStore {
    pub fn lock(&self) -> MutexGuard<'_, MemoryState> {
        self.state.lock().unwrap()
    }

    pub fn steps_of(&self, trace_id: &str) -> Vec<ObservedStep> {
        let mut steps: Vec<_> = self
            .lock()
            .steps
            .iter()
            .filter(|s| s.trace_id == trace_id)
            .cloned()
            .collect();
        steps.sort_by_key(|s| s.step_index);
        steps
    }

    pub fn trace(&self, trace_id: &str) -> Option<ObservedTrace> {
        self.lock()
            .traces
            .iter()
            .find(|t| t.trace_id == trace_id)
            .cloned()
    }
}

impl TraceStore for MemoryStore {
    fn append(&mut self, traces: &[ObservedTrace], steps: &[ObservedStep]) -> Result<AppendStats> {
        let mut state = self.lock();
        if state.fail_next > 0 {
            state.fail_next -= 1;
            return Err(RecorderError::Io {
                path: "memory".into(),
                source: std::io::Error::other("disk on fire"),
            });
        }
        if let Some((trace_id, step_index)) = state.reject_step.clone()
            && steps
                .iter()
                .any(|s| s.trace_id == trace_id && s.step_index == step_index)
        {
            return Err(RecorderError::InvalidStep {
                trace_id,
                step_index,
                message: "rejected by the test store".into(),
            });
        }
        if let Some(trace_id) = state.reject_trace.clone()
            && traces.iter().any(|t| t.trace_id == trace_id)
        {
            return Err(RecorderError::InvalidTrace {
                trace_id,
                message: "rejected by the test store".into(),
            });
        }
        let mut written = AppendStats::default();
        for trace in traces {
            match state
                .traces
                .iter_mut()
                .find(|t| t.trace_id == trace.trace_id)
            {
                Some(stored) => *stored = trace.clone(),
                None => state.traces.push(trace.clone()),
            }
            written.traces += 1;
        }
        for step in steps {
            let duplicate = state
                .steps
                .iter()
                .any(|s| s.trace_id == step.trace_id && s.step_index == step.step_index);
            if duplicate {
                written.duplicate_steps += 1;
            } else {
                state.steps.push(step.clone());
                written.steps += 1;
            }
        }
        state.appends.push((traces.len(), steps.len()));
        Ok(written)
    }

    fn list_traces(&self, _: &TraceFilter, page: &PageRequest) -> Result<TracePage> {
        let state = self.lock();
        let traces = state
            .traces
            .iter()
            .skip(page.offset as usize)
            .take(page.limit as usize)
            .map(|t| TraceSummary {
                trace: t.clone(),
                step_count: state
                    .steps
                    .iter()
                    .filter(|s| s.trace_id == t.trace_id)
                    .count() as u64,
                error_count: 0,
                duration_ms: None,
            })
            .collect();
        Ok(TracePage {
            traces,
            total: state.traces.len() as u64,
        })
    }

    fn get_trace(&self, trace_id: &str) -> Result<Option<TraceWithSteps>> {
        Ok(self.trace(trace_id).map(|trace| TraceWithSteps {
            steps: self.steps_of(trace_id),
            trace,
        }))
    }

    fn for_each_trace(&self, visit: &mut dyn FnMut(TraceWithSteps) -> Result<()>) -> Result<()> {
        let ids: Vec<String> = self
            .lock()
            .traces
            .iter()
            .map(|t| t.trace_id.clone())
            .collect();
        for id in ids {
            if let Some(trace) = self.get_trace(&id)? {
                visit(trace)?;
            }
        }
        Ok(())
    }

    fn step_columns(&self, _: &TraceFilter) -> Result<StepColumns> {
        let state = self.lock();
        let mut columns = StepColumns::default();
        for step in &state.steps {
            columns.trace_id.push(step.trace_id.clone());
            columns.tool_name.push(step.tool_name.clone());
            columns.is_error.push(step.is_error());
            columns.duration_ms.push(step.duration_ms);
            columns.started_at.push(step.started_at);
        }
        Ok(columns)
    }

    fn counts(&self) -> Result<StoreCounts> {
        let state = self.lock();
        Ok(StoreCounts {
            traces: state.traces.len() as u64,
            steps: state.steps.len() as u64,
            failed_steps: state.steps.iter().filter(|s| s.is_error()).count() as u64,
        })
    }

    fn put_document(&mut self, _: &str, _: &str, _: &Value) -> Result<()> {
        Err(unsupported())
    }

    fn get_document(&self, _: &str, _: &str) -> Result<Option<Value>> {
        Err(unsupported())
    }

    fn list_documents(&self, _: &str) -> Result<Vec<(String, Value)>> {
        Err(unsupported())
    }

    fn delete_document(&mut self, _: &str, _: &str) -> Result<bool> {
        Err(unsupported())
    }
}

fn unsupported() -> RecorderError {
    RecorderError::Io {
        path: "memory".into(),
        source: std::io::Error::other("the capture test store keeps no documents"),
    }
}
