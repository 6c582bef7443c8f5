//! The trace store: one trait, two real backends.
//!
//! - [`SqliteStore`]: the embedded default, one file (`chainweaver.db`).
//! - [`ParquetStore`]: an append-only directory of Parquet part files, partitioned by day.
//!
//! Both keep inputs and outputs exact (key order and number text) and convert into each other
//! losslessly with [`copy_all`].

#[cfg(feature = "parquet")]
mod parquet;
mod raw;
mod sqlite;

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{RecorderError, Result};
use crate::model::{ObservedStep, ObservedTrace, Timestamp, TraceWithSteps};

#[cfg(feature = "parquet")]
pub use self::parquet::ParquetStore;
#[cfg(feature = "s3")]
pub use self::parquet::{Remote, StepObjects};
pub use self::raw::RawSteps;
pub(crate) use self::raw::{JsonText, MetadataText, RawStep, StepView};
pub use self::sqlite::SqliteStore;

/// Which traces a query returns. Every set field must hold (logical AND).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceFilter {
    /// The trace has at least one step calling exactly this tool.
    pub tool: Option<String>,
    /// The trace has at least one step whose tool name contains this text (case-insensitive).
    pub tool_contains: Option<String>,
    /// The trace's source equals this.
    pub source: Option<String>,
    /// The trace started at or after this instant.
    pub since: Option<Timestamp>,
    /// The trace started before this instant.
    pub until: Option<Timestamp>,
    /// `Some(true)`: only traces with a failed step; `Some(false)`: only traces without one.
    pub has_error: Option<bool>,
    /// The trace's duration is at least this many milliseconds.
    pub min_duration_ms: Option<f64>,
}

/// The column a trace listing is ordered by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceSort {
    /// Insertion order (the order traces were first stored).
    #[default]
    Stored,
    TraceId,
    StartedAt,
    Steps,
    Errors,
    Duration,
}

/// One page of a listing: `offset` rows skipped, at most `limit` returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageRequest {
    pub offset: u64,
    pub limit: u64,
    pub sort: TraceSort,
    pub descending: bool,
}

impl Default for PageRequest {
    fn default() -> Self {
        Self {
            offset: 0,
            limit: 50,
            sort: TraceSort::Stored,
            descending: false,
        }
    }
}

/// A trace as a listing shows it: the trace plus counts over its steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceSummary {
    pub trace: ObservedTrace,
    pub step_count: u64,
    pub error_count: u64,
    /// `ended_at - started_at` when both are known, else the sum of step durations, else `None`.
    pub duration_ms: Option<f64>,
}

/// A page of trace summaries and the number of traces matching the filter in all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TracePage {
    pub traces: Vec<TraceSummary>,
    pub total: u64,
}

/// How many rows a store holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreCounts {
    pub traces: u64,
    pub steps: u64,
    pub failed_steps: u64,
}

/// What one [`TraceStore::append`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendStats {
    /// Trace rows inserted or updated.
    pub traces: u64,
    /// Step rows inserted.
    pub steps: u64,
    /// Steps skipped because a step with the same (trace id, step index) was already stored.
    pub duplicate_steps: u64,
}

/// What compacting a store did: its files and bytes before and after.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactStats {
    pub files_before: u64,
    pub files_after: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Step rows written again (a Parquet dataset's partitions held in several parts).
    pub rows_rewritten: u64,
}

/// The slim per-step columns that statistics need, without payloads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepColumns {
    pub trace_id: Vec<String>,
    pub tool_name: Vec<String>,
    pub is_error: Vec<bool>,
    pub duration_ms: Vec<Option<f64>>,
    pub started_at: Vec<Option<Timestamp>>,
}

/// One step's tool, as mining and occurrence finding read it: no payloads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepTool<'a> {
    pub trace_id: &'a str,
    pub tool_name: &'a str,
    pub started_at: Option<Timestamp>,
}

/// A store of observed traces.
///
/// `append` is atomic: a batch is stored whole or not at all, and data already stored is never
/// touched by a failed append. A trace appended again (same id) updates its trace row (the
/// recorder writes a trace when it starts and again when it ends); steps are identified by
/// (trace id, step index) and a second copy of a stored step is skipped and counted.
///
/// Both backends share these rules:
/// - A trace appended again is merged into the stored one by [`merge_trace`]: every optional
///   field the new copy sets wins, unset ones keep the stored value, a non-empty `source` wins,
///   and metadata keys are merged (new values win, stored keys keep their position). The same
///   id twice in one batch merges in batch order.
/// - A step must belong to a trace that is in the same batch or already stored; otherwise the
///   whole append fails with [`RecorderError::InvalidStep`].
///   A step with a non-finite `duration_ms`, or a timestamp outside what 64-bit nanoseconds
///   since 1970 hold (years 1677 to 2262), fails the append the same way.
/// - The first copy of a (trace id, step index) wins, also within one batch.
/// - Listings break ties by storage order, in the direction asked, so a descending listing is
///   exactly the ascending one reversed. Missing values (`started_at`, duration) sort first in
///   ascending order.
/// - [`TraceStore::step_columns`] returns every step of every trace matching the filter.
pub trait TraceStore: Send {
    /// Store traces and steps as one atomic batch.
    fn append(&mut self, traces: &[ObservedTrace], steps: &[ObservedStep]) -> Result<AppendStats>;

    /// [`TraceStore::append`] of steps whose payloads are already compact JSON text: the same
    /// rules, and the same stored rows as appending those steps as [`ObservedStep`]s. Bulk
    /// imports use it to skip building and serializing payload `Value`s. The default converts
    /// the steps back into the data model; the SQLite and Parquet stores write the text as is.
    fn append_raw(&mut self, traces: &[ObservedTrace], steps: &RawSteps) -> Result<AppendStats> {
        let steps = steps.to_steps()?;
        self.append(traces, &steps)
    }

    /// Announce a bulk load: many appends in a row, then [`TraceStore::end_bulk_load`]. A store
    /// may prepare to take them faster, within the same rules (every append atomic and durable,
    /// nothing already stored touched by a failed one). The default does nothing.
    fn begin_bulk_load(&mut self) -> Result<()> {
        Ok(())
    }

    /// End a bulk load begun with [`TraceStore::begin_bulk_load`], also after a failed append.
    /// The default does nothing.
    fn end_bulk_load(&mut self) -> Result<()> {
        Ok(())
    }

    /// Announce a long-lived writer (a recorder, a trace receiver): from now on a store that
    /// keeps a write-ahead log may fold it into the main file on a thread of its own, so an
    /// append's commit does not wait for that work. The default does nothing.
    fn checkpoint_in_background(&mut self) -> Result<()> {
        Ok(())
    }

    /// Summaries of the traces matching `filter`, one page at a time.
    fn list_traces(&self, filter: &TraceFilter, page: &PageRequest) -> Result<TracePage>;

    /// One trace with all its steps in step order, or `None` when the id is unknown.
    fn get_trace(&self, trace_id: &str) -> Result<Option<TraceWithSteps>>;

    /// The traces with these ids, each with all its steps in step order, in the order of `ids`;
    /// unknown ids are left out and a repeated id is returned once. Verification and inference
    /// load their traces through it; the default calls [`TraceStore::get_trace`] for each id,
    /// the Parquet store reads its part files once for the whole batch.
    fn get_traces(&self, ids: &[&str]) -> Result<Vec<TraceWithSteps>> {
        let mut seen = std::collections::HashSet::new();
        let mut traces = Vec::with_capacity(ids.len());
        for id in ids {
            if seen.insert(*id)
                && let Some(trace) = self.get_trace(id)?
            {
                traces.push(trace);
            }
        }
        Ok(traces)
    }

    /// Some steps of some traces: for each `(trace id, positions)`, the trace with only the steps
    /// at those positions (0-based places in the trace's step order, ascending), in the order of
    /// `wanted`; unknown ids and positions past the last step are left out. Binding inference
    /// reads the steps of sampled occurrences through it, so a store need not parse payloads no
    /// occurrence holds. The default loads each trace whole with [`TraceStore::get_traces`].
    fn get_trace_steps(&self, wanted: &[(&str, &[usize])]) -> Result<Vec<TraceWithSteps>> {
        let ids: Vec<&str> = wanted.iter().map(|(id, _)| *id).collect();
        let positions: std::collections::HashMap<&str, &[usize]> =
            wanted.iter().map(|(id, at)| (*id, *at)).collect();
        let mut traces = self.get_traces(&ids)?;
        for trace in &mut traces {
            let keep = positions
                .get(trace.trace.trace_id.as_str())
                .copied()
                .unwrap_or(&[]);
            trace.steps = keep_positions(std::mem::take(&mut trace.steps), keep);
        }
        Ok(traces)
    }

    /// [`TraceStore::get_trace_steps`] of traces [`TraceStore::read_tool_sequences`] read,
    /// each with where the store said it keeps the trace's steps. A store that kept them there
    /// reads the steps without looking them up by trace id and position, and leaves out a
    /// step no longer at its place (the store changed since); the default ignores the places.
    fn get_sequence_steps(&self, wanted: &[SequenceSteps<'_>]) -> Result<Vec<TraceWithSteps>> {
        let plain: Vec<(&str, &[usize])> =
            wanted.iter().map(|w| (w.trace_id, w.positions)).collect();
        self.get_trace_steps(&plain)
    }

    /// The Parquet files holding every committed step, for a query engine to read in place
    /// (the layout of `docs/parquet-schema.md`); `None` for a store that keeps its steps
    /// otherwise. Only files an append committed are listed, never a crashed append's parts.
    fn committed_step_files(&self) -> Result<Option<Vec<std::path::PathBuf>>> {
        Ok(None)
    }

    /// [`TraceStore::committed_step_files`] of a dataset in object storage: the parts' URLs
    /// and the client that reads them; `None` for any other store.
    #[cfg(feature = "s3")]
    fn committed_step_objects(&self) -> Result<Option<StepObjects>> {
        Ok(None)
    }

    /// Visit every trace with its steps, one trace at a time, in storage order, without loading
    /// the whole store. Stops at the first error `visit` returns.
    fn for_each_trace(&self, visit: &mut dyn FnMut(TraceWithSteps) -> Result<()>) -> Result<()>;

    /// Slim columns of every step (matching `filter`) for statistics.
    fn step_columns(&self, filter: &TraceFilter) -> Result<StepColumns>;

    /// Visit every step's trace id, tool name and start time, each trace's steps together and
    /// in step order, without holding them all (mining reads this). The default reads
    /// [`TraceStore::step_columns`].
    fn for_each_step_tool(&self, visit: &mut dyn FnMut(StepTool<'_>) -> Result<()>) -> Result<()> {
        let columns = self.step_columns(&TraceFilter::default())?;
        let rows = columns.trace_id.len().min(columns.tool_name.len());
        for i in 0..rows {
            visit(StepTool {
                trace_id: &columns.trace_id[i],
                tool_name: &columns.tool_name[i],
                started_at: columns.started_at.get(i).copied().flatten(),
            })?;
        }
        Ok(())
    }

    /// Every trace's tool sequence, interned, for the traces `keep` accepts (by id): what
    /// [`tool_sequences`] returns. The default walks [`TraceStore::for_each_step_tool`]; a store
    /// that can read its tool column faster (SQLite: one index holding every step's tool and
    /// start in step order, no per-step join) overrides it with the same result.
    fn read_tool_sequences(&self, keep: &dyn Fn(&str) -> bool) -> Result<ToolSequences> {
        tool_sequences_from_walk(self, keep)
    }

    /// Every trace id, in storage order (the order [`TraceStore::for_each_trace`] visits),
    /// including traces without steps. The default pages through [`TraceStore::list_traces`].
    fn trace_ids(&self) -> Result<Vec<String>> {
        let page = PageRequest {
            offset: 0,
            limit: self.counts()?.traces,
            sort: TraceSort::Stored,
            descending: false,
        };
        Ok(self
            .list_traces(&TraceFilter::default(), &page)?
            .traces
            .into_iter()
            .map(|summary| summary.trace.trace_id)
            .collect())
    }

    /// Row counts.
    fn counts(&self) -> Result<StoreCounts>;

    /// Store a JSON document (a flow, candidate, verdict, flow run, ...) under `(kind, key)`,
    /// replacing any earlier one atomically.
    fn put_document(&mut self, kind: &str, key: &str, document: &Value) -> Result<()>;

    /// The document stored under `(kind, key)`, if any.
    fn get_document(&self, kind: &str, key: &str) -> Result<Option<Value>>;

    /// Every `(key, document)` of one kind, ordered by key.
    fn list_documents(&self, kind: &str) -> Result<Vec<(String, Value)>>;

    /// Remove a document; true when one was there.
    fn delete_document(&mut self, kind: &str, key: &str) -> Result<bool>;

    /// Remove every document of each kind in `clear`, then store each `(kind, key, document)`
    /// of `put`, as one change: SQLite commits it in one transaction (all or nothing, one
    /// durable write); a Parquet dataset replaces each cleared kind's folder by a rename, so
    /// every kind is either all old or all new. The default applies the changes one by one.
    fn write_documents(&mut self, clear: &[&str], put: &[(&str, &str, &Value)]) -> Result<()> {
        for kind in clear {
            for (key, _) in self.list_documents(kind)? {
                self.delete_document(kind, &key)?;
            }
        }
        for (kind, key, document) in put {
            self.put_document(kind, key, document)?;
        }
        Ok(())
    }
}

/// Every trace's tool sequence, as mining and occurrence finding read them: tool names
/// interned to indexes into `names`, no payloads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolSequences {
    /// The kept traces' ids, in storage order (traces without steps included).
    pub trace_ids: Vec<String>,
    /// Per kept trace, its steps' tools in step order.
    pub sequences: Vec<Vec<u32>>,
    /// Per kept trace, the start time of its first timed step.
    pub first_started: Vec<Option<Timestamp>>,
    /// Tool names by index.
    pub names: Vec<String>,
    /// Traces `keep` left out.
    pub left_out: usize,
    /// Per kept trace, where the store keeps its steps, when it can say
    /// ([`TraceStore::get_sequence_steps`] then reads them without looking them up); empty
    /// when the store keeps no such places.
    pub rows: Vec<Option<StepRows>>,
}

/// Where a store keeps one trace's steps: the trace's row and its first step's, the others
/// following in step order. Only the store that read it ([`TraceStore::read_tool_sequences`])
/// makes sense of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepRows {
    pub(crate) trace_row: i64,
    pub(crate) first_step_row: i64,
}

/// Some steps of a trace [`TraceStore::read_tool_sequences`] read, for
/// [`TraceStore::get_sequence_steps`].
#[derive(Debug, Clone, Copy)]
pub struct SequenceSteps<'a> {
    pub trace_id: &'a str,
    /// 0-based places in the trace's step order, ascending.
    pub positions: &'a [usize],
    /// Where the store keeps the trace's steps, as [`ToolSequences::rows`] says.
    pub rows: Option<StepRows>,
}

impl ToolSequences {
    /// The traces `keep` accepts (by id), sharing the tool names; the others count as left out.
    pub fn keep(&self, keep: &dyn Fn(&str) -> bool) -> ToolSequences {
        let mut out = ToolSequences {
            names: self.names.clone(),
            left_out: self.left_out,
            ..ToolSequences::default()
        };
        for (t, ((id, sequence), started)) in self
            .trace_ids
            .iter()
            .zip(&self.sequences)
            .zip(&self.first_started)
            .enumerate()
        {
            if keep(id) {
                out.trace_ids.push(id.clone());
                out.sequences.push(sequence.clone());
                out.first_started.push(*started);
                if let Some(rows) = self.rows.get(t) {
                    out.rows.push(*rows);
                }
            } else {
                out.left_out += 1;
            }
        }
        out
    }

    /// The tool names of trace `t`.
    pub fn tools(&self, t: usize) -> impl Iterator<Item = &str> + '_ {
        self.sequences[t]
            .iter()
            .map(|&i| self.names[i as usize].as_str())
    }
}

/// The tool sequences of the store's traces that `keep` accepts (by id), in storage order
/// (traces without steps included), tools interned in order of first appearance; memory holds
/// the interned sequences only ([`TraceStore::read_tool_sequences`]).
pub fn tool_sequences(
    store: &dyn TraceStore,
    keep: &dyn Fn(&str) -> bool,
) -> Result<ToolSequences> {
    store.read_tool_sequences(keep)
}

/// [`tool_sequences`] streamed through [`TraceStore::for_each_step_tool`].
pub(crate) fn tool_sequences_from_walk<S: TraceStore + ?Sized>(
    store: &S,
    keep: &dyn Fn(&str) -> bool,
) -> Result<ToolSequences> {
    let ids = store.trace_ids()?;
    let position: std::collections::HashMap<&str, usize> = ids
        .iter()
        .enumerate()
        .filter(|(_, id)| keep(id))
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    let mut sequences: Vec<Option<Vec<u32>>> = vec![None; ids.len()];
    let mut first_started: Vec<Option<Timestamp>> = vec![None; ids.len()];
    let mut interned: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
    let mut names: Vec<String> = Vec::new();
    // The trace the last step belonged to, and its position (None: not kept).
    let mut current: (String, Option<usize>) = (String::new(), None);
    store.for_each_step_tool(&mut |step| {
        if step.trace_id != current.0 {
            current = (
                step.trace_id.to_owned(),
                position.get(step.trace_id).copied(),
            );
        }
        let Some(at) = current.1 else {
            return Ok(());
        };
        let tool = match interned.get(step.tool_name) {
            Some(&tool) => tool,
            None => {
                let tool = names.len() as u32;
                interned.insert(step.tool_name.to_owned(), tool);
                names.push(step.tool_name.to_owned());
                tool
            }
        };
        sequences[at].get_or_insert_with(Vec::new).push(tool);
        if first_started[at].is_none() {
            first_started[at] = step.started_at;
        }
        Ok(())
    })?;
    drop(position);
    let mut out = ToolSequences {
        names,
        ..ToolSequences::default()
    };
    for ((id, sequence), started) in ids.into_iter().zip(sequences).zip(first_started) {
        if keep(&id) {
            out.trace_ids.push(id);
            out.sequences.push(sequence.unwrap_or_default());
            out.first_started.push(started);
        } else {
            out.left_out += 1;
        }
    }
    Ok(out)
}

/// The items of `steps` at `positions` (ascending; repeats and positions past the end are
/// ignored), in order.
pub(crate) fn keep_positions<T>(steps: Vec<T>, positions: &[usize]) -> Vec<T> {
    let mut wanted = positions.iter().peekable();
    let mut kept = Vec::with_capacity(positions.len().min(steps.len()));
    for (at, step) in steps.into_iter().enumerate() {
        while wanted.next_if(|&&p| p < at).is_some() {}
        if wanted.next_if(|&&p| p == at).is_some() {
            kept.push(step);
        }
    }
    kept
}

/// Merge a trace appended again into the stored copy (the upsert rule of [`TraceStore`]).
pub fn merge_trace(stored: &mut ObservedTrace, update: &ObservedTrace) {
    if update.session_id.is_some() {
        stored.session_id.clone_from(&update.session_id);
    }
    if !update.source.is_empty() {
        stored.source.clone_from(&update.source);
    }
    if update.agent.is_some() {
        stored.agent.clone_from(&update.agent);
    }
    if update.started_at.is_some() {
        stored.started_at = update.started_at;
    }
    if update.ended_at.is_some() {
        stored.ended_at = update.ended_at;
    }
    for (key, value) in &update.metadata {
        // With `preserve_order`, inserting an existing key keeps its position.
        stored.metadata.insert(key.clone(), value.clone());
    }
}

/// A timestamp as nanoseconds since the Unix epoch, `None` when out of the i64 range.
pub(crate) fn timestamp_nanos(at: &Timestamp) -> Option<i64> {
    at.timestamp_nanos_opt()
}

/// The timestamp `nanos` nanoseconds after the Unix epoch.
pub(crate) fn timestamp_from_nanos(nanos: i64) -> Timestamp {
    chrono::DateTime::from_timestamp_nanos(nanos)
}

/// A trace's duration as listings report it: `ended_at - started_at` when both are known, else
/// the sum of its step durations (`None` when no step has one). SQLite computes the same in SQL.
#[cfg_attr(not(feature = "parquet"), allow(dead_code))]
pub(crate) fn summary_duration_ms(
    started_at: Option<i64>,
    ended_at: Option<i64>,
    step_duration_sum: Option<f64>,
) -> Option<f64> {
    match (started_at, ended_at) {
        // The same arithmetic SQLite does: an integer difference, then a float division.
        (Some(start), Some(end)) => Some(end.wrapping_sub(start) as f64 / 1_000_000.0),
        _ => step_duration_sum,
    }
}

/// Check what both backends refuse before anything is written: timestamps that 64-bit
/// nanoseconds cannot hold and non-finite durations.
pub(crate) fn validate_batch(traces: &[ObservedTrace], steps: &[StepView<'_>]) -> Result<()> {
    for trace in traces {
        for (name, at) in [
            ("started_at", &trace.started_at),
            ("ended_at", &trace.ended_at),
        ] {
            if let Some(at) = at
                && timestamp_nanos(at).is_none()
            {
                return Err(RecorderError::InvalidTrace {
                    trace_id: trace.trace_id.clone(),
                    message: format!("{name} {at} is outside the storable range (1677..2262)"),
                });
            }
        }
    }
    for step in steps {
        let invalid = |message: String| RecorderError::InvalidStep {
            trace_id: step.trace_id.to_owned(),
            step_index: step.step_index,
            message,
        };
        for (name, at) in [
            ("started_at", step.started_at),
            ("ended_at", step.ended_at),
            ("recorded_at", step.recorded_at),
        ] {
            if let Some(at) = at
                && timestamp_nanos(at).is_none()
            {
                return Err(invalid(format!(
                    "{name} {at} is outside the storable range (1677..2262)"
                )));
            }
        }
        if let Some(duration) = step.duration_ms
            && !duration.is_finite()
        {
            return Err(invalid(format!(
                "duration_ms {duration} is not a finite number"
            )));
        }
    }
    Ok(())
}

/// Copy every trace and step from `from` into `to`, in batches of about `batch_steps` steps.
/// Returns what was written.
pub fn copy_all(
    from: &dyn TraceStore,
    to: &mut dyn TraceStore,
    batch_steps: usize,
    progress: &mut dyn FnMut(u64),
) -> Result<AppendStats> {
    let mut total = AppendStats::default();
    let mut traces = Vec::new();
    let mut steps: Vec<ObservedStep> = Vec::new();
    let mut flush = |traces: &mut Vec<ObservedTrace>,
                     steps: &mut Vec<ObservedStep>,
                     to: &mut dyn TraceStore|
     -> Result<()> {
        let written = to.append(traces, steps)?;
        total.traces += written.traces;
        total.steps += written.steps;
        total.duplicate_steps += written.duplicate_steps;
        progress(written.steps);
        traces.clear();
        steps.clear();
        Ok(())
    };
    from.for_each_trace(&mut |t| {
        traces.push(t.trace);
        steps.extend(t.steps);
        if steps.len() >= batch_steps {
            flush(&mut traces, &mut steps, to)?;
        }
        Ok(())
    })?;
    if !traces.is_empty() || !steps.is_empty() {
        flush(&mut traces, &mut steps, to)?;
    }
    Ok(total)
}

/// The kind of store a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreKind {
    Sqlite,
    Parquet,
}

impl StoreKind {
    /// A directory (existing, or a path ending in `/` or `.parquet`) is a Parquet dataset;
    /// anything else is a SQLite file.
    pub fn detect(path: &Path) -> Self {
        let as_text = path.to_string_lossy();
        if is_object_storage(path)
            || path.is_dir()
            || as_text.ends_with('/')
            || as_text.ends_with(".parquet")
        {
            StoreKind::Parquet
        } else {
            StoreKind::Sqlite
        }
    }
}

/// Whether `path` names a dataset in object storage (`s3://BUCKET/PREFIX`), which opens only in
/// a build with feature `s3`.
pub fn is_object_storage(path: &Path) -> bool {
    path.to_string_lossy().starts_with(OBJECT_STORAGE_SCHEME)
}

/// How a dataset in object storage is named: `s3://BUCKET/PREFIX`.
pub const OBJECT_STORAGE_SCHEME: &str = "s3://";

/// Compact the existing store at `path`: a Parquet dataset's part files merged into a few per
/// partition ([`ParquetStore::compact`]), a SQLite file vacuumed ([`SqliteStore::compact`]).
/// What is stored and how it reads do not change. `progress` gets step rows as they are
/// rewritten.
pub fn compact_store(path: &Path, progress: &mut dyn FnMut(u64)) -> Result<CompactStats> {
    if is_object_storage(path) {
        return Err(RecorderError::ObjectStore {
            url: path.to_string_lossy().into_owned(),
            message: "compaction rewrites a local store: compact it there, then upload the folder"
                .into(),
        });
    }
    match StoreKind::detect(path) {
        StoreKind::Sqlite => SqliteStore::open(path)?.compact(),
        #[cfg(feature = "parquet")]
        StoreKind::Parquet => ParquetStore::open(path)?.compact(progress),
        #[cfg(not(feature = "parquet"))]
        StoreKind::Parquet => {
            let _ = progress;
            Err(RecorderError::Parquet {
                path: path.to_path_buf(),
                message: "this build has no Parquet support (feature `parquet`)".into(),
            })
        }
    }
}

/// Open (creating when missing) the store at `path`, of the kind [`StoreKind::detect`] names.
pub fn open_store(path: &Path) -> Result<Box<dyn TraceStore>> {
    if is_object_storage(path) {
        #[cfg(feature = "s3")]
        return Ok(Box::new(ParquetStore::open_remote(
            &path.to_string_lossy(),
            &[],
        )?));
        #[cfg(not(feature = "s3"))]
        return Err(RecorderError::ObjectStore {
            url: path.to_string_lossy().into_owned(),
            message: "this build reads no object storage (build with feature `s3`)".into(),
        });
    }
    Ok(match StoreKind::detect(path) {
        StoreKind::Sqlite => Box::new(SqliteStore::open(path)?),
        #[cfg(feature = "parquet")]
        StoreKind::Parquet => Box::new(ParquetStore::open(path)?),
        #[cfg(not(feature = "parquet"))]
        StoreKind::Parquet => {
            return Err(RecorderError::Parquet {
                path: path.to_path_buf(),
                message: "this build has no Parquet support (feature `parquet`)".into(),
            });
        }
    })
}
