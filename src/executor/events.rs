//! Events a streamed run emits: `flow_start`, `step_start`, `step_end`, `flow_end`.

use serde::{Deserialize, Serialize};

use chainweaver_recorder::model::Timestamp;

use crate::executor::record::{ExecutionResult, StepRecord};

/// One event of a streamed run. A step's `step_end` is sent only once its result is final: a
/// result arriving after a timeout never produces one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum FlowEvent {
    FlowStart {
        trace_id: String,
        flow_name: String,
        flow_version: String,
        started_at: Timestamp,
        /// True when the run resumes from a checkpoint.
        resumed: bool,
    },
    StepStart {
        trace_id: String,
        step_index: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step_id: Option<String>,
        tool_name: String,
        /// A map step's iteration: the element index this call runs for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        iteration: Option<usize>,
    },
    StepEnd {
        trace_id: String,
        record: Box<StepRecord>,
    },
    FlowEnd {
        trace_id: String,
        success: bool,
        result: Box<ExecutionResult>,
    },
}

/// Where the executor sends events.
pub type EventSender = tokio::sync::mpsc::UnboundedSender<FlowEvent>;

/// The receiving end of a streamed run, usable from blocking code as an iterator.
#[derive(Debug)]
pub struct FlowEventStream {
    pub(crate) receiver: tokio::sync::mpsc::UnboundedReceiver<FlowEvent>,
    pub(crate) worker: Option<std::thread::JoinHandle<crate::error::Result<ExecutionResult>>>,
}

impl FlowEventStream {
    /// The next event, waiting for it; `None` once the run is over.
    pub fn next_event(&mut self) -> Option<FlowEvent> {
        self.receiver.blocking_recv()
    }

    /// Wait for the run to end (dropping events not yet read) and return its result, or the
    /// error that stopped it before it started (unknown tool, cycle, ...).
    pub fn finish(mut self) -> crate::error::Result<ExecutionResult> {
        while self.receiver.blocking_recv().is_some() {}
        match self.worker.take().map(std::thread::JoinHandle::join) {
            Some(Ok(result)) => result,
            _ => Err(crate::error::Error::Runtime(
                "the streaming run's thread stopped".into(),
            )),
        }
    }
}

impl Iterator for FlowEventStream {
    type Item = FlowEvent;

    fn next(&mut self) -> Option<FlowEvent> {
        self.next_event()
    }
}
