//! Which traces the receiver has seen: the next step index of each and the span ids it holds,
//! so that spans of one trace arriving in several requests land in one trace, numbered on, and
//! a span sent twice (an exporter's retry) is stored once.

use std::collections::{HashMap, HashSet};

use chainweaver_recorder::capture::ReceivedStep;
use chainweaver_recorder::model::{ObservedTrace, otel};
use chainweaver_recorder::otlp::{AssembledTrace, widen};
use chainweaver_recorder::store::TraceStore;
use serde_json::Value;

use crate::error::Result;

/// One trace as the receiver knows it.
struct Known {
    /// The trace row as stored after the rows handed over so far.
    row: ObservedTrace,
    next_index: u32,
    span_ids: HashSet<String>,
    /// Hand-overs of this trace not yet committed: the entry may be forgotten only at 0, so that
    /// reading it back from the store gives the same state.
    in_flight: u32,
    /// A hand-over failed: read the trace again from the store once nothing is in flight.
    stale: bool,
    last_used: u64,
}

/// Rows ready for the writer, and the trace ids to release once they are committed.
#[derive(Debug, Default)]
pub struct Prepared {
    pub traces: Vec<ObservedTrace>,
    /// Payloads that came as text are still text, for the recorder to store as they are.
    pub steps: Vec<ReceivedStep>,
    pub duplicate_spans: u64,
}

/// The known traces, at most `capacity` of them (those with nothing in flight are forgotten,
/// least recently used first, and read back from the store when they come again).
pub struct TraceTable {
    known: HashMap<String, Known>,
    capacity: usize,
    clock: u64,
    reader: Box<dyn TraceStore>,
    source: String,
}

impl TraceTable {
    pub fn new(reader: Box<dyn TraceStore>, capacity: usize, source: String) -> Self {
        Self {
            known: HashMap::new(),
            capacity: capacity.max(1),
            clock: 0,
            reader,
            source,
        }
    }

    /// True when `traces` new traces can be taken without going over capacity, after
    /// forgetting what may be forgotten.
    pub fn has_room(&mut self, traces: &[AssembledTrace]) -> bool {
        let new = traces
            .iter()
            .filter(|t| !self.known.contains_key(&t.trace.trace_id))
            .count();
        if self.known.len() + new <= self.capacity {
            return true;
        }
        self.forget_idle(new);
        self.known.len() + new <= self.capacity
    }

    /// Number the steps of `traces` after what each trace already holds, leave out spans it
    /// already holds, and mark the traces in flight. Call [`TraceTable::release`] with the
    /// returned rows' trace ids once the writer has answered.
    pub fn prepare(&mut self, traces: Vec<AssembledTrace>) -> Result<Prepared> {
        self.clock += 1;
        let mut prepared = Prepared::default();
        for AssembledTrace { trace, steps } in traces {
            let key = trace.trace_id.clone();
            if !self.known.contains_key(&key) {
                let known = self.load(&trace)?;
                self.known.insert(key.clone(), known);
            }
            let Some(known) = self.known.get_mut(&key) else {
                continue;
            };
            known.last_used = self.clock;
            let mut kept = 0;
            for mut received in steps {
                let step = &mut received.step;
                let span_id = match step.metadata.get(otel::SPAN_ID) {
                    Some(Value::String(id)) => id.clone(),
                    _ => String::new(),
                };
                if !span_id.is_empty() && !known.span_ids.insert(span_id) {
                    prepared.duplicate_spans += 1;
                    continue;
                }
                step.step_index = known.next_index;
                known.next_index = known.next_index.saturating_add(1);
                widen(&mut known.row, step);
                prepared.steps.push(received);
                kept += 1;
            }
            if kept == 0 {
                continue;
            }
            if known.row.agent.is_none() {
                known.row.agent = trace.agent;
            }
            if known.row.session_id.is_none() {
                known.row.session_id = trace.session_id;
            }
            for (k, v) in trace.metadata {
                known.row.metadata.entry(k).or_insert(v);
            }
            known.in_flight += 1;
            prepared.traces.push(known.row.clone());
        }
        Ok(prepared)
    }

    /// The writer answered for rows of these traces; `stored` says whether they are durable.
    pub fn release<'a>(&mut self, trace_ids: impl IntoIterator<Item = &'a str>, stored: bool) {
        for id in trace_ids {
            let forget = match self.known.get_mut(id) {
                Some(known) => {
                    known.in_flight = known.in_flight.saturating_sub(1);
                    known.stale |= !stored;
                    known.stale && known.in_flight == 0
                }
                None => false,
            };
            if forget {
                self.known.remove(id);
            }
        }
    }

    /// A trace the table does not know: as stored, or new.
    fn load(&self, trace: &ObservedTrace) -> Result<Known> {
        let stored = self.reader.get_trace(&trace.trace_id)?;
        Ok(match stored {
            Some(stored) => Known {
                next_index: stored
                    .steps
                    .iter()
                    .map(|s| s.step_index.saturating_add(1))
                    .max()
                    .unwrap_or(0),
                span_ids: stored
                    .steps
                    .iter()
                    .filter_map(|s| match s.metadata.get(otel::SPAN_ID) {
                        Some(Value::String(id)) => Some(id.clone()),
                        _ => None,
                    })
                    .collect(),
                row: stored.trace,
                in_flight: 0,
                stale: false,
                last_used: self.clock,
            },
            None => {
                let mut row = ObservedTrace::new(trace.trace_id.clone(), self.source.clone());
                row.session_id.clone_from(&trace.session_id);
                Known {
                    row,
                    next_index: 0,
                    span_ids: HashSet::new(),
                    in_flight: 0,
                    stale: false,
                    last_used: self.clock,
                }
            }
        })
    }

    /// Forget idle traces, least recently used first, until `room` more fit (or down to three
    /// quarters of capacity, so this runs seldom).
    fn forget_idle(&mut self, room: usize) {
        let target = (self.capacity * 3 / 4).min(self.capacity.saturating_sub(room));
        let mut idle: Vec<(u64, String)> = self
            .known
            .iter()
            .filter(|(_, k)| k.in_flight == 0)
            .map(|(id, k)| (k.last_used, id.clone()))
            .collect();
        idle.sort_unstable();
        for (_, id) in idle {
            if self.known.len() <= target {
                break;
            }
            self.known.remove(&id);
        }
    }
}
