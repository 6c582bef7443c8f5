//! Streaming reads that mining and verification run on a large dataset: the trace ids in
//! storage order, every step's tool (reading only the narrow columns), and a batch of whole
//! traces in one pass over the part files instead of one pass per trace.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use parquet::arrow::arrow_reader::ParquetRecordBatchReader;

use super::columns::{Columns, TRACE_SEQ, opt_timestamp};
use super::manifest::{Commit, PartInfo};
use super::{ParquetStore, parquet_error};
use crate::error::{RecorderError, Result};
use crate::model::{ObservedStep, Timestamp, TraceWithSteps};
use crate::store::StepTool;

/// One step as the tool walk reads it: only the narrow columns.
pub(super) struct ToolRow {
    step_index: u32,
    trace_id: String,
    tool_name: String,
    started_at: Option<Timestamp>,
}

/// The columns [`ToolRow`] reads.
const TOOL_COLUMNS: [&str; 5] = [
    TRACE_SEQ,
    "trace_id",
    "step_index",
    "tool_name",
    "started_at",
];

fn tool_rows(columns: &Columns<'_>) -> Result<Vec<(u64, ToolRow)>> {
    let seq = columns.u64s(TRACE_SEQ)?;
    let trace_id = columns.strings("trace_id")?;
    let index = columns.u32s("step_index")?;
    let tool = columns.strings("tool_name")?;
    let started = columns.timestamps("started_at")?;
    Ok((0..seq.len())
        .map(|i| {
            (
                seq.value(i),
                ToolRow {
                    step_index: index.value(i),
                    trace_id: trace_id.value(i).to_owned(),
                    tool_name: tool.value(i).to_owned(),
                    started_at: opt_timestamp(started, i),
                },
            )
        })
        .collect())
}

fn full_steps(columns: &Columns<'_>) -> Result<Vec<(u64, ObservedStep)>> {
    columns.steps()
}

/// Decodes a batch of a steps part into (trace ordinal, row) pairs.
type Decode<R> = fn(&Columns<'_>) -> Result<Vec<(u64, R)>>;

/// A streaming cursor over one steps part, sorted by (trace ordinal, step index), decoding
/// rows of type `R`.
pub(super) struct StepCursor<R> {
    path: PathBuf,
    reader: ParquetRecordBatchReader,
    decode: Decode<R>,
    buffer: VecDeque<(u64, R)>,
    done: bool,
}

impl<R> StepCursor<R> {
    /// The trace ordinal of the next step, `None` at the end.
    fn head(&mut self) -> Result<Option<u64>> {
        while self.buffer.is_empty() && !self.done {
            match self.reader.next() {
                Some(batch) => {
                    let batch = batch.map_err(|e| parquet_error(&self.path, e))?;
                    let columns = Columns {
                        path: &self.path,
                        batch: &batch,
                    };
                    self.buffer.extend((self.decode)(&columns)?);
                }
                None => self.done = true,
            }
        }
        Ok(self.buffer.front().map(|(seq, _)| *seq))
    }
}

impl ParquetStore {
    /// Every trace's (storage ordinal, id), in storage order, reading only those two columns
    /// of the traces parts. A trace keeps its ordinal across rewrites and no two traces share
    /// one, so the rows are deduplicated by ordinal after a sort (near-linear: the parts come in
    /// ordinal order), with no set holding a second copy of every id.
    pub(super) fn trace_order(&self, commits: &[Arc<Commit>]) -> Result<Vec<(u64, String)>> {
        let mut order: Vec<(u64, String)> = Vec::new();
        for commit in commits {
            for part in &commit.trace_parts {
                self.scan(part, Some(&[TRACE_SEQ, "trace_id"]), None, &mut |columns| {
                    let seq = columns.u64s(TRACE_SEQ)?;
                    let id = columns.strings("trace_id")?;
                    order.extend((0..seq.len()).map(|i| (seq.value(i), id.value(i).to_owned())));
                    Ok(())
                })?;
            }
        }
        order.sort_by_key(|(seq, _)| *seq);
        order.dedup_by_key(|(seq, _)| *seq);
        Ok(order)
    }

    /// Walk the steps parts in trace order (`order`: ordinals, ascending) with a k-way merge:
    /// every part is sorted by (ordinal, step index), so the parts whose ordinal range covers
    /// the current trace yield its steps in turn. A part is opened when the walk reaches its
    /// first ordinal and dropped once exhausted. `visit` gets each trace's rows in step order.
    fn merge_steps<R>(
        &self,
        commits: &[Arc<Commit>],
        order: impl Iterator<Item = u64>,
        projection: Option<&[&str]>,
        decode: Decode<R>,
        step_index: fn(&R) -> u32,
        visit: &mut dyn FnMut(u64, Vec<R>) -> Result<()>,
    ) -> Result<()> {
        let mut parts: Vec<&PartInfo> = commits.iter().flat_map(|c| &c.step_parts).collect();
        parts.sort_by_key(|p| p.min_trace_seq);
        let mut next_part = 0;
        let mut open: Vec<StepCursor<R>> = Vec::new();
        for seq in order {
            while next_part < parts.len() && parts[next_part].min_trace_seq <= seq {
                let (path, reader) = self.reader(parts[next_part], projection, None)?;
                open.push(StepCursor {
                    path,
                    reader,
                    decode,
                    buffer: VecDeque::new(),
                    done: false,
                });
                next_part += 1;
            }
            let mut rows = Vec::new();
            for cursor in &mut open {
                while let Some(head) = cursor.head()? {
                    match head.cmp(&seq) {
                        Ordering::Equal => {
                            if let Some((_, row)) = cursor.buffer.pop_front() {
                                rows.push(row);
                            }
                        }
                        Ordering::Greater => break,
                        Ordering::Less => {
                            return Err(RecorderError::CorruptStore {
                                path: cursor.path.clone(),
                                message: format!(
                                    "steps of trace ordinal {head} have no trace row, or the \
                                     part is not sorted"
                                ),
                            });
                        }
                    }
                }
            }
            open.retain(|cursor| !(cursor.done && cursor.buffer.is_empty()));
            rows.sort_by_key(step_index);
            visit(seq, rows)?;
        }
        Ok(())
    }

    /// [`crate::store::TraceStore::for_each_trace`]: trace rows in memory (they are few next
    /// to steps), steps streamed.
    pub(super) fn stream_traces(
        &self,
        visit: &mut dyn FnMut(TraceWithSteps) -> Result<()>,
    ) -> Result<()> {
        let commits = self.commits()?;
        let mut traces = self.load_traces(&commits)?.into_iter();
        let order: Vec<u64> = traces.as_slice().iter().map(|t| t.trace_seq).collect();
        self.merge_steps(
            &commits,
            order.into_iter(),
            None,
            full_steps,
            |step| step.step_index,
            &mut |_, steps| {
                let Some(stored) = traces.next() else {
                    return Ok(());
                };
                visit(TraceWithSteps {
                    trace: stored.trace,
                    steps,
                })
            },
        )
    }

    /// [`crate::store::TraceStore::for_each_step_tool`]: only the trace id, ordinal, step
    /// index, tool name and start columns are read.
    pub(super) fn stream_step_tools(
        &self,
        visit: &mut dyn FnMut(StepTool<'_>) -> Result<()>,
    ) -> Result<()> {
        let commits = self.commits()?;
        let order = self.trace_order(&commits)?;
        self.merge_steps(
            &commits,
            order.into_iter().map(|(seq, _)| seq),
            Some(&TOOL_COLUMNS),
            tool_rows,
            |row| row.step_index,
            &mut |_, rows| {
                for row in &rows {
                    visit(StepTool {
                        trace_id: &row.trace_id,
                        tool_name: &row.tool_name,
                        started_at: row.started_at,
                    })?;
                }
                Ok(())
            },
        )
    }

    /// Some steps of some traces ([`crate::store::TraceStore::get_trace_steps`]): the step indexes of the
    /// traces asked for are read first (two integer columns), to learn which step each place
    /// names, and then only those steps' payloads are parsed.
    pub(super) fn load_some_steps(
        &self,
        wanted: &[(&str, &[usize])],
    ) -> Result<Vec<TraceWithSteps>> {
        let ids: Vec<&str> = wanted.iter().map(|(id, _)| *id).collect();
        let commits = self.commits()?;
        let (mut found, parts) = self.located(&commits, &ids)?;
        let seq_set: Arc<HashSet<u64>> = Arc::new(found.keys().copied().collect());
        let indexes = self.scan_parts(
            &parts,
            Some(&[TRACE_SEQ, "step_index"]),
            Some(Arc::clone(&seq_set)),
            &|columns, pairs| {
                let seq = columns.u64s(TRACE_SEQ)?;
                let index = columns.u32s("step_index")?;
                pairs.extend((0..seq.len()).map(|i| (seq.value(i), index.value(i))));
                Ok(())
            },
        )?;
        let mut by_trace: HashMap<u64, Vec<u32>> = HashMap::new();
        for (seq, index) in indexes.into_iter().flatten() {
            by_trace.entry(seq).or_default().push(index);
        }
        let places: HashMap<&str, &[usize]> = wanted.iter().copied().collect();
        let mut keep: HashSet<(u64, u32)> = HashSet::new();
        for (seq, mut indexes) in by_trace {
            indexes.sort_unstable();
            let asked = found
                .get(&seq)
                .and_then(|(id, _)| places.get(id.as_str()))
                .copied()
                .unwrap_or(&[]);
            keep.extend(
                asked
                    .iter()
                    .filter_map(|&p| indexes.get(p))
                    .map(|&i| (seq, i)),
            );
        }
        let gathered = self.scan_parts(&parts, None, Some(seq_set), &|columns, steps| {
            steps.extend(columns.steps_where(&|seq, index| keep.contains(&(seq, index)))?);
            Ok(())
        })?;
        for (seq, step) in gathered.into_iter().flatten() {
            if let Some((_, trace)) = found.get_mut(&seq) {
                trace.steps.push(step);
            }
        }
        Ok(in_asked_order(found, &ids))
    }

    /// The traces of `ids` the store holds, by storage ordinal (with their id, no steps yet),
    /// and the steps parts that may hold their steps.
    fn located<'c>(
        &self,
        commits: &'c [Arc<Commit>],
        ids: &[&str],
    ) -> Result<(FoundTraces, Vec<&'c PartInfo>)> {
        let wanted: HashSet<&str> = ids.iter().copied().collect();
        let mut found: FoundTraces = HashMap::new();
        let mut partitions: HashSet<String> = HashSet::new();
        for stored in self.load_traces_where(commits, &|id| wanted.contains(id))? {
            partitions.insert(stored.partition.clone());
            found.insert(
                stored.trace_seq,
                (
                    stored.trace.trace_id.clone(),
                    TraceWithSteps {
                        trace: stored.trace,
                        steps: Vec::new(),
                    },
                ),
            );
        }
        let mut seqs: Vec<u64> = found.keys().copied().collect();
        seqs.sort_unstable();
        let parts: Vec<&PartInfo> = commits
            .iter()
            .flat_map(|c| &c.step_parts)
            .filter(|part| {
                let first = seqs.partition_point(|&s| s < part.min_trace_seq);
                let overlaps = seqs.get(first).is_some_and(|&s| s <= part.max_trace_seq);
                overlaps && partitions.contains(&part.partition)
            })
            .collect();
        Ok((found, parts))
    }

    /// [`crate::store::TraceStore::get_traces`]: one read of the trace rows, then one pass
    /// over the steps parts that may hold a wanted trace, decoding only the wanted rows.
    pub(super) fn load_some(&self, ids: &[&str]) -> Result<Vec<TraceWithSteps>> {
        let commits = self.commits()?;
        let (mut found, parts) = self.located(&commits, ids)?;
        let seq_set: Arc<HashSet<u64>> = Arc::new(found.keys().copied().collect());
        let gathered = self.scan_parts(&parts, None, Some(seq_set), &|columns, steps| {
            steps.extend(columns.steps()?);
            Ok(())
        })?;
        for (seq, step) in gathered.into_iter().flatten() {
            if let Some((_, trace)) = found.get_mut(&seq) {
                trace.steps.push(step);
            }
        }
        Ok(in_asked_order(found, ids))
    }
}

/// Traces asked for, by storage ordinal: the id and the trace, its steps as read so far.
type FoundTraces = HashMap<u64, (String, TraceWithSteps)>;

/// The traces found, each with its steps in step order, in the order of `ids` (unknown ones
/// left out).
fn in_asked_order(found: FoundTraces, ids: &[&str]) -> Vec<TraceWithSteps> {
    let mut by_id: HashMap<String, TraceWithSteps> = found
        .into_values()
        .map(|(id, mut trace)| {
            trace.steps.sort_by_key(|s| s.step_index);
            (id, trace)
        })
        .collect();
    ids.iter().filter_map(|id| by_id.remove(*id)).collect()
}
