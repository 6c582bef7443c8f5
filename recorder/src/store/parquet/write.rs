//! Writing: the writer's index of stored traces and steps, staging an append, writing its part
//! files and committing it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs::{self, File};
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use super::columns::{self, TRACE_SEQ, TraceRowOut};
use super::manifest::{Commit, PartInfo, commit_file_name};
use super::{
    COMMITS_DIR, ParquetStore, UNKNOWN_DATE, commit_new, io_error, nonce, parquet_error, sync_dir,
    temporary_beside,
};
use crate::error::{RecorderError, Result};
use crate::model::{ObservedTrace, Timestamp};
use crate::store::{AppendStats, StepView, merge_trace, validate_batch};

/// The step indices stored for one trace: all below `dense`, plus `sparse`.
#[derive(Debug, Default, Clone)]
pub(super) struct StepSet {
    dense: u32,
    sparse: BTreeSet<u32>,
}

impl StepSet {
    fn contains(&self, index: u32) -> bool {
        index < self.dense || self.sparse.contains(&index)
    }

    fn insert(&mut self, index: u32) {
        if self.contains(index) {
            return;
        }
        self.sparse.insert(index);
        while self.sparse.remove(&self.dense) {
            self.dense += 1;
        }
    }
}

/// What the writer keeps in memory to merge trace upserts and skip duplicate steps.
pub(super) struct WriterIndex {
    /// The newest committed append this index reflects.
    last_seq: u64,
    next_trace_seq: u64,
    traces: HashMap<String, IndexedTrace>,
}

struct IndexedTrace {
    trace_seq: u64,
    partition: String,
    trace: ObservedTrace,
    steps: StepSet,
}

/// A trace touched by the append being prepared.
struct Staged {
    trace_seq: u64,
    partition: String,
    /// The merged trace row to write, when the batch carried the trace.
    trace: Option<ObservedTrace>,
    is_new: bool,
    steps: HashSet<u32>,
}

/// The partition of a trace: the UTC day it started, or `unknown`.
fn partition_of(started_at: Option<&Timestamp>) -> String {
    match started_at {
        Some(at) => format!("date={}", at.format("%Y-%m-%d")),
        None => format!("date={UNKNOWN_DATE}"),
    }
}

impl ParquetStore {
    /// Build the writer's index from the committed dataset, and remove leftovers of appends
    /// that never committed.
    fn build_index(&self, commits: &[Arc<Commit>]) -> Result<WriterIndex> {
        let last_seq = commits.last().map_or(0, |c| c.seq);
        let mut traces: HashMap<String, IndexedTrace> = HashMap::new();
        let mut id_of: HashMap<u64, String> = HashMap::new();
        let mut next_trace_seq = 0;
        for stored in self.load_traces(commits)? {
            next_trace_seq = next_trace_seq.max(stored.trace_seq + 1);
            id_of.insert(stored.trace_seq, stored.trace.trace_id.clone());
            traces.insert(
                stored.trace.trace_id.clone(),
                IndexedTrace {
                    trace_seq: stored.trace_seq,
                    partition: stored.partition,
                    trace: stored.trace,
                    steps: StepSet::default(),
                },
            );
        }
        let projection = [TRACE_SEQ, "step_index"];
        for commit in commits {
            for part in &commit.step_parts {
                self.scan(part, Some(&projection), None, &mut |columns| {
                    let seq = columns.u64s(TRACE_SEQ)?;
                    let index = columns.u32s("step_index")?;
                    for i in 0..seq.len() {
                        let entry = id_of.get(&seq.value(i)).and_then(|id| traces.get_mut(id));
                        let Some(entry) = entry else {
                            return Err(RecorderError::CorruptStore {
                                path: columns.path.to_path_buf(),
                                message: format!(
                                    "a step refers to trace ordinal {} which has no trace row",
                                    seq.value(i)
                                ),
                            });
                        };
                        entry.steps.insert(index.value(i));
                    }
                    Ok(())
                })?;
            }
        }
        self.remove_leftovers()?;
        Ok(WriterIndex {
            last_seq,
            next_trace_seq,
            traces,
        })
    }

    /// Remove the files of appends that never committed and those a compaction replaced, but
    /// not while a compaction or another append runs (their parts are not committed yet), and
    /// against the manifests as they are once both locks are held: a commit made since the
    /// caller read them must not leave its parts passing for leftovers.
    fn remove_leftovers(&self) -> Result<()> {
        let Some(_compaction) = self.try_lock_compaction()? else {
            return Ok(());
        };
        let Some(_appends) = self.try_lock_appends()? else {
            return Ok(());
        };
        let now = self.commits()?;
        self.remove_uncommitted(&now, now.last().map_or(0, |c| c.seq))?;
        self.remove_superseded()
    }

    /// Write one part file atomically (temporary name, fsync, rename). Records every path it
    /// created in `created` so a failed append can remove them.
    fn write_part(
        &self,
        relative: &str,
        batch: &RecordBatch,
        created: &mut Vec<PathBuf>,
    ) -> Result<()> {
        let mut part = self.create_part(relative, &batch.schema(), created)?;
        part.write(batch)?;
        part.finish(created)
    }

    /// Start writing the part file `relative` (under a temporary name until
    /// [`PartFile::finish`]); the temporary path goes to `created`.
    pub(super) fn create_part(
        &self,
        relative: &str,
        schema: &SchemaRef,
        created: &mut Vec<PathBuf>,
    ) -> Result<PartFile> {
        let path = relative
            .split('/')
            .fold(self.root.clone(), |p, s| p.join(s));
        let (_, temp) = temporary_beside(&path, "")?;
        // A fresh name (see `nonce`); never another writer's file half written, which is not
        // this writer's to remove either.
        let file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(|e| io_error(&temp, e))?;
        created.push(temp.clone());
        let properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_max_row_group_row_count(Some(64 * 1024))
            .build();
        let writer = ArrowWriter::try_new(file, Arc::clone(schema), Some(properties))
            .map_err(|e| parquet_error(&temp, e))?;
        Ok(PartFile {
            writer,
            temp,
            path,
            rows: 0,
        })
    }

    /// Write the parts and the manifest of one append; linking the manifest into place is the
    /// commit.
    fn commit(
        &self,
        seq: u64,
        trace_rows: &BTreeMap<String, Vec<TraceRowOut<'_>>>,
        step_rows: &BTreeMap<String, Vec<(u64, &StepView<'_>)>>,
        counts: (u64, u64, u64),
        created: &mut Vec<PathBuf>,
    ) -> Result<()> {
        let mut commit = Commit {
            seq,
            new_traces: counts.0,
            new_steps: counts.1,
            new_failed_steps: counts.2,
            trace_parts: Vec::new(),
            step_parts: Vec::new(),
            compacts_through: None,
        };
        let mut dirs = BTreeSet::new();
        for (partition, rows) in trace_rows {
            let relative = format!("traces/{partition}/part-{seq:012}-{}.parquet", nonce());
            let batch = columns::trace_batch(&self.root, rows, seq)?;
            self.write_part(&relative, &batch, created)?;
            dirs.insert(format!("traces/{partition}"));
            commit.trace_parts.push(PartInfo {
                file: relative,
                partition: partition.clone(),
                rows: rows.len() as u64,
                min_trace_seq: rows.iter().map(|r| r.trace_seq).min().unwrap_or(0),
                max_trace_seq: rows.iter().map(|r| r.trace_seq).max().unwrap_or(0),
            });
        }
        for (partition, rows) in step_rows {
            let relative = format!("steps/{partition}/part-{seq:012}-{}.parquet", nonce());
            let batch = columns::step_batch(&self.root, rows, seq)?;
            self.write_part(&relative, &batch, created)?;
            dirs.insert(format!("steps/{partition}"));
            commit.step_parts.push(PartInfo {
                file: relative,
                partition: partition.clone(),
                rows: rows.len() as u64,
                min_trace_seq: rows.iter().map(|r| r.0).min().unwrap_or(0),
                max_trace_seq: rows.iter().map(|r| r.0).max().unwrap_or(0),
            });
        }
        for dir in &dirs {
            sync_dir(&dir.split('/').fold(self.root.clone(), |p, s| p.join(s)))?;
        }
        let manifest = self.root.join(COMMITS_DIR).join(commit_file_name(seq));
        let text =
            serde_json::to_string_pretty(&commit).map_err(|e| parquet_error(&manifest, e))?;
        // Not in `created`: when this fails, the file there is another writer's commit.
        commit_new(&manifest, text.as_bytes())
    }
}

/// How many times an append stages again when another writer takes its sequence number, or
/// reads the manifests again when a compaction removed parts they listed.
const COMMIT_ATTEMPTS: u32 = 100;

/// A part file being written: rows go to a temporary file, renamed into place when finished.
pub(super) struct PartFile {
    writer: ArrowWriter<File>,
    temp: PathBuf,
    path: PathBuf,
    pub(super) rows: u64,
}

impl PartFile {
    pub(super) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.writer
            .write(batch)
            .map_err(|e| parquet_error(&self.temp, e))?;
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    /// Flush, fsync and rename into place (the final path goes to `created`).
    pub(super) fn finish(self, created: &mut Vec<PathBuf>) -> Result<()> {
        let file = self
            .writer
            .into_inner()
            .map_err(|e| parquet_error(&self.temp, e))?;
        file.sync_all().map_err(|e| io_error(&self.temp, e))?;
        created.push(self.path.clone());
        fs::rename(&self.temp, &self.path).map_err(|e| io_error(&self.path, e))
    }
}

/// The rows of one append, by partition.
type TraceRows<'a> = BTreeMap<String, Vec<TraceRowOut<'a>>>;
type StepRows<'a> = BTreeMap<String, Vec<(u64, &'a StepView<'a>)>>;

impl ParquetStore {
    /// [`TraceStore::append`](crate::store::TraceStore::append) of steps as the store writes
    /// them, from either kind of batch: stage the batch in memory (nothing is written unless all
    /// of it is valid), commit it, then bring the writer's index up to date.
    pub(super) fn append_views(
        &mut self,
        traces: &[ObservedTrace],
        steps: &[StepView<'_>],
    ) -> Result<AppendStats> {
        self.local_only("appending traffic")?;
        validate_batch(traces, steps)?;
        let mut attempts = 0;
        loop {
            match self.append_once(traces, steps) {
                // Another writer (a compaction) took the sequence number: nothing was written;
                // stage again against what it committed.
                Err(RecorderError::ConcurrentCommit { .. }) if attempts < COMMIT_ATTEMPTS => {
                    attempts += 1;
                }
                done => return done,
            }
        }
    }

    /// One try of [`ParquetStore::append_views`] at the next sequence number.
    fn append_once(
        &mut self,
        traces: &[ObservedTrace],
        steps: &[StepView<'_>],
    ) -> Result<AppendStats> {
        let last_seq = self.refresh_index()?;
        let Some(index) = self.index.as_ref() else {
            return Err(parquet_error(&self.root, "the writer index is missing"));
        };
        let mut stats = AppendStats::default();
        let (mut staged, next_trace_seq) = stage_traces(index, traces, &mut stats);
        let (mut step_rows, failed_steps) = stage_steps(index, &mut staged, steps, &mut stats)?;
        let mut trace_rows = trace_rows(&staged);
        if trace_rows.is_empty() && step_rows.is_empty() {
            return Ok(stats);
        }
        // Sorted parts let readers merge them as streams.
        for rows in trace_rows.values_mut() {
            rows.sort_by_key(|r| r.trace_seq);
        }
        for rows in step_rows.values_mut() {
            rows.sort_by_key(|(seq, step)| (*seq, step.step_index));
        }
        let new_traces = staged.values().filter(|s| s.is_new).count() as u64;
        let seq = last_seq + 1;
        let mut created = Vec::new();
        // Until the parts are listed by a manifest or removed again.
        let appending = self.lock_appending()?;
        let committed = self.commit(
            seq,
            &trace_rows,
            &step_rows,
            (new_traces, stats.steps, failed_steps),
            &mut created,
        );
        if let Err(e) = committed {
            for path in created.iter().rev() {
                let _ = fs::remove_file(path);
            }
            return Err(e);
        }
        drop(appending);
        drop(trace_rows);
        drop(step_rows);
        if let Some(index) = self.index.as_mut() {
            index.record_commit(staged, next_trace_seq, seq);
        }
        Ok(stats)
    }

    /// Rebuild the writer's index unless it reflects the newest commit (another handle may
    /// have committed meanwhile); the newest commit's sequence number.
    fn refresh_index(&mut self) -> Result<u64> {
        let mut attempts = 0;
        loop {
            let commits = self.commits()?;
            let last_seq = commits.last().map_or(0, |c| c.seq);
            let stale = self.index.as_ref().is_none_or(|i| i.last_seq != last_seq);
            if !stale {
                return Ok(last_seq);
            }
            match self.build_index(&commits) {
                Ok(index) => {
                    self.index = Some(index);
                    return Ok(last_seq);
                }
                // A compaction committed after the manifests were read and removed the parts
                // they list: read them again (a compaction running in a loop beside this
                // writer can do that several times in a row).
                Err(RecorderError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound
                        && attempts < COMMIT_ATTEMPTS =>
                {
                    attempts += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Stage the batch's traces: each merged into its stored state (or into what the batch staged
/// for it already); a new trace takes the next storage ordinal. Also the next free ordinal.
fn stage_traces<'a>(
    index: &WriterIndex,
    traces: &'a [ObservedTrace],
    stats: &mut AppendStats,
) -> (HashMap<&'a str, Staged>, u64) {
    let mut staged: HashMap<&str, Staged> = HashMap::new();
    let mut next_trace_seq = index.next_trace_seq;
    for trace in traces {
        stats.traces += 1;
        if let Some(entry) = staged.get_mut(trace.trace_id.as_str()) {
            let merged = entry.trace.get_or_insert_with(|| {
                index
                    .traces
                    .get(&trace.trace_id)
                    .map(|t| t.trace.clone())
                    .unwrap_or_else(|| trace.clone())
            });
            merge_trace(merged, trace);
            continue;
        }
        let entry = match index.traces.get(&trace.trace_id) {
            Some(stored) => {
                let mut merged = stored.trace.clone();
                merge_trace(&mut merged, trace);
                Staged {
                    trace_seq: stored.trace_seq,
                    partition: stored.partition.clone(),
                    trace: Some(merged),
                    is_new: false,
                    steps: HashSet::new(),
                }
            }
            None => {
                next_trace_seq += 1;
                Staged {
                    trace_seq: next_trace_seq - 1,
                    partition: partition_of(trace.started_at.as_ref()),
                    trace: Some(trace.clone()),
                    is_new: true,
                    steps: HashSet::new(),
                }
            }
        };
        staged.insert(&trace.trace_id, entry);
    }
    (staged, next_trace_seq)
}

/// Stage the batch's steps under their traces, by partition; a step stored already or repeated
/// in the batch counts as a duplicate. Also the number of failed steps staged. Fails for a step
/// whose trace is neither in the batch nor in the store.
fn stage_steps<'a>(
    index: &WriterIndex,
    staged: &mut HashMap<&'a str, Staged>,
    steps: &'a [StepView<'a>],
    stats: &mut AppendStats,
) -> Result<(StepRows<'a>, u64)> {
    let mut step_rows: StepRows<'a> = BTreeMap::new();
    let mut failed_steps = 0;
    for step in steps {
        let stored = index.traces.get(step.trace_id);
        let entry = match staged.get_mut(step.trace_id) {
            Some(entry) => entry,
            None => {
                let Some(stored) = stored else {
                    return Err(RecorderError::InvalidStep {
                        trace_id: step.trace_id.to_owned(),
                        step_index: step.step_index,
                        message: "no trace with this id in the batch or the store".into(),
                    });
                };
                staged.entry(step.trace_id).or_insert(Staged {
                    trace_seq: stored.trace_seq,
                    partition: stored.partition.clone(),
                    trace: None,
                    is_new: false,
                    steps: HashSet::new(),
                })
            }
        };
        let stored_already = stored.is_some_and(|t| t.steps.contains(step.step_index));
        if stored_already || !entry.steps.insert(step.step_index) {
            stats.duplicate_steps += 1;
            continue;
        }
        stats.steps += 1;
        failed_steps += u64::from(step.is_error());
        // Looked up by `&str` first: a `String` key per step would be an allocation each.
        match step_rows.get_mut(entry.partition.as_str()) {
            Some(rows) => rows.push((entry.trace_seq, step)),
            None => {
                step_rows.insert(entry.partition.clone(), vec![(entry.trace_seq, step)]);
            }
        }
    }
    Ok((step_rows, failed_steps))
}

/// The trace rows to write, by partition: the staged traces the batch carried.
fn trace_rows<'a>(staged: &'a HashMap<&str, Staged>) -> TraceRows<'a> {
    let mut trace_rows: TraceRows<'a> = BTreeMap::new();
    for entry in staged.values() {
        if let Some(trace) = &entry.trace {
            trace_rows
                .entry(entry.partition.clone())
                .or_default()
                .push(TraceRowOut {
                    trace,
                    trace_seq: entry.trace_seq,
                });
        }
    }
    trace_rows
}

impl WriterIndex {
    /// Take in a committed append: its staged traces and steps, the next free ordinal, and its
    /// sequence number.
    fn record_commit(&mut self, staged: HashMap<&str, Staged>, next_trace_seq: u64, seq: u64) {
        for (trace_id, entry) in staged {
            match self.traces.get_mut(trace_id) {
                Some(stored) => {
                    if let Some(trace) = entry.trace {
                        stored.trace = trace;
                    }
                    for step in entry.steps {
                        stored.steps.insert(step);
                    }
                }
                None => {
                    let mut steps = StepSet::default();
                    for step in entry.steps {
                        steps.insert(step);
                    }
                    let Some(trace) = entry.trace else { continue };
                    self.traces.insert(
                        trace_id.to_owned(),
                        IndexedTrace {
                            trace_seq: entry.trace_seq,
                            partition: entry.partition,
                            trace,
                            steps,
                        },
                    );
                }
            }
        }
        self.next_trace_seq = next_trace_seq;
        self.last_seq = seq;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_set_tracks_dense_and_sparse_indices() {
        let mut set = StepSet::default();
        for i in [0, 1, 5, 2, 3] {
            set.insert(i);
        }
        assert_eq!(set.dense, 4);
        assert!(set.contains(5) && set.contains(0) && !set.contains(4));
        set.insert(4);
        assert_eq!(set.dense, 6);
        assert!(set.sparse.is_empty());
    }
}
