//! Store queries off the UI thread.
//!
//! The UI sends [`Request`]s tagged with a slot (what the answer is for) and a generation. The
//! worker owns the store, runs requests in order, and skips a queued request when a newer one
//! for the same slot is already waiting. The UI drops answers whose generation is no longer the
//! one it waits for, so a slow stale answer never overwrites a newer view.

use std::collections::HashMap;
use std::thread::JoinHandle;

use chainweaver_recorder::model::TraceWithSteps;
use chainweaver_recorder::model::candidate::{Candidate, PatternSummary, Verdict};
use chainweaver_recorder::stats::{ToolStats, tool_stats};
use chainweaver_recorder::store::{PageRequest, TraceFilter, TracePage, TraceStore};
use chainweaver_recorder::workspace::Workspace;
use crossbeam_channel::{Receiver, Sender, TryRecvError};

/// What an answer is for. One answer per slot is awaited at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Slot {
    Traces,
    Detail,
    CompareLeft,
    CompareRight,
    Tools,
    Patterns,
    Candidates,
    Verdicts,
}

/// A store query.
#[derive(Debug, Clone, PartialEq)]
pub enum Query {
    /// One page of trace summaries.
    Traces {
        filter: TraceFilter,
        page: PageRequest,
    },
    /// One trace with its steps.
    Trace { trace_id: String },
    /// Per-tool statistics over the steps of the traces matching the filter.
    ToolStats { filter: TraceFilter },
    /// The stored patterns, best-ranked first.
    Patterns,
    /// The stored candidates, best first.
    Candidates,
    /// Every stored verdict.
    Verdicts,
}

/// A query with its slot and generation.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub slot: Slot,
    pub generation: u64,
    pub query: Query,
}

/// A query's result.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Traces(TracePage),
    Trace(Option<Box<TraceWithSteps>>),
    ToolStats(Vec<ToolStats>),
    Patterns(Vec<PatternSummary>),
    Candidates(Vec<Candidate>),
    Verdicts(Vec<Verdict>),
}

/// The answer to a [`Request`]; a store error arrives as its message.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub slot: Slot,
    pub generation: u64,
    pub result: Result<Reply, String>,
}

/// Run one query against the store.
pub fn execute(store: &dyn TraceStore, query: &Query) -> Result<Reply, String> {
    match query {
        Query::Traces { filter, page } => store
            .list_traces(filter, page)
            .map(Reply::Traces)
            .map_err(|e| e.to_string()),
        Query::Trace { trace_id } => store
            .get_trace(trace_id)
            .map(|t| Reply::Trace(t.map(Box::new)))
            .map_err(|e| e.to_string()),
        Query::ToolStats { filter } => store
            .step_columns(filter)
            .and_then(|columns| tool_stats(&columns))
            .map(Reply::ToolStats)
            .map_err(|e| e.to_string()),
        Query::Patterns => store
            .patterns()
            .map(Reply::Patterns)
            .map_err(|e| e.to_string()),
        Query::Candidates => store
            .candidates()
            .map(Reply::Candidates)
            .map_err(|e| e.to_string()),
        Query::Verdicts => store
            .verdicts()
            .map(Reply::Verdicts)
            .map_err(|e| e.to_string()),
    }
}

/// The thread that owns the store.
pub struct Worker {
    requests: Option<Sender<Request>>,
    responses: Receiver<Response>,
    handle: Option<JoinHandle<()>>,
}

impl Worker {
    /// Start the worker thread over `store`.
    pub fn spawn(store: Box<dyn TraceStore>) -> std::io::Result<Self> {
        let (request_tx, request_rx) = crossbeam_channel::unbounded::<Request>();
        let (response_tx, response_rx) = crossbeam_channel::unbounded::<Response>();
        let handle = std::thread::Builder::new()
            .name("chainweaver-tui-store".into())
            .spawn(move || serve(store, request_rx, response_tx))?;
        Ok(Self {
            requests: Some(request_tx),
            responses: response_rx,
            handle: Some(handle),
        })
    }

    /// Queue a request. False when the worker has stopped.
    pub fn send(&self, request: Request) -> bool {
        self.requests
            .as_ref()
            .is_some_and(|tx| tx.send(request).is_ok())
    }

    /// The channel answers arrive on.
    pub fn responses(&self) -> &Receiver<Response> {
        &self.responses
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Closing the request channel ends the worker's loop once its current query is done.
        // A finished worker is joined; a busy one is left to finish on its own, so quitting
        // never waits for a long query.
        self.requests.take();
        if let Some(handle) = self.handle.take()
            && handle.is_finished()
        {
            let _ = handle.join();
        }
    }
}

fn serve(store: Box<dyn TraceStore>, requests: Receiver<Request>, responses: Sender<Response>) {
    while let Ok(first) = requests.recv() {
        // Take everything queued, keep only the newest request of each slot.
        let mut batch = vec![first];
        loop {
            match requests.try_recv() {
                Ok(next) => batch.push(next),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
        for request in latest_per_slot(batch) {
            let result = execute(store.as_ref(), &request.query);
            let response = Response {
                slot: request.slot,
                generation: request.generation,
                result,
            };
            if responses.send(response).is_err() {
                return;
            }
        }
    }
}

/// The newest request of each slot, in the order they were sent.
pub fn latest_per_slot(batch: Vec<Request>) -> Vec<Request> {
    let mut newest: HashMap<Slot, u64> = HashMap::new();
    for request in &batch {
        let entry = newest.entry(request.slot).or_insert(request.generation);
        *entry = (*entry).max(request.generation);
    }
    batch
        .into_iter()
        .filter(|r| newest.get(&r.slot) == Some(&r.generation))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(slot: Slot, generation: u64) -> Request {
        Request {
            slot,
            generation,
            query: Query::Candidates,
        }
    }

    #[test]
    fn only_the_newest_request_per_slot_runs() {
        let kept = latest_per_slot(vec![
            request(Slot::Traces, 1),
            request(Slot::Tools, 2),
            request(Slot::Traces, 3),
            request(Slot::Traces, 4),
        ]);
        let kept: Vec<(Slot, u64)> = kept.iter().map(|r| (r.slot, r.generation)).collect();
        assert_eq!(kept, [(Slot::Tools, 2), (Slot::Traces, 4)]);
    }
}
