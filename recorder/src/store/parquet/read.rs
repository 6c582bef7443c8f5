//! Reading: streaming part files, the traces in their latest state, step counters, filtering,
//! and the cursor that merges steps parts.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

use arrow::array::{Array, BooleanArray, RecordBatch, UInt64Array};
use arrow::error::ArrowError;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowPredicateFn, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder, RowFilter,
};

use super::columns::{Columns, TRACE_SEQ};
use super::manifest::{Commit, PartInfo};
use super::{ParquetStore, READ_BATCH_ROWS, io_error, parquet_error};
use crate::error::Result;
use crate::model::ObservedTrace;
use crate::store::{TraceFilter, summary_duration_ms, timestamp_nanos};

/// A trace's current state as read from the dataset.
pub(super) struct StoredTrace {
    pub(super) trace_seq: u64,
    pub(super) partition: String,
    pub(super) trace: ObservedTrace,
}

/// Counters over a trace's steps.
#[derive(Default, Clone, Copy)]
pub(super) struct StepTotals {
    pub(super) steps: u64,
    pub(super) errors: u64,
    pub(super) duration_ms: Option<f64>,
}

/// Step counters keyed by trace storage ordinal.
pub(super) type StepTotalsByTrace = HashMap<u64, StepTotals>;

impl ParquetStore {
    pub(super) fn part_path(&self, part: &PartInfo) -> PathBuf {
        part.file
            .split('/')
            .fold(self.root.clone(), |p, s| p.join(s))
    }

    /// A streaming reader over one part file: only `projection` columns (all when `None`), only
    /// rows of the traces (by storage ordinal) in `only_traces` when given; the other rows are
    /// skipped without decoding the projected columns.
    pub(super) fn reader(
        &self,
        part: &PartInfo,
        projection: Option<&[&str]>,
        only_traces: Option<Arc<HashSet<u64>>>,
    ) -> Result<(PathBuf, ParquetRecordBatchReader)> {
        #[cfg(feature = "s3")]
        if let Some(dataset) = &self.remote {
            let remote =
                super::remote::RemotePart::open(&dataset.remote, &part.file, &dataset.footers)?;
            let path = remote.url();
            let builder = ParquetRecordBatchReaderBuilder::try_new(remote.clone())
                .map_err(|e| parquet_error(&path, e))?;
            // The column chunks the read decodes, fetched together ahead of it.
            let wanted = |name: &str| {
                projection.is_none_or(|names| names.contains(&name))
                    || (only_traces.is_some() && name == TRACE_SEQ)
            };
            let ranges = builder
                .metadata()
                .row_groups()
                .iter()
                .flat_map(|group| group.columns())
                .filter(|column| wanted(column.column_descr().path().parts()[0].as_str()))
                .map(|column| {
                    let (start, length) = column.byte_range();
                    start..start + length
                })
                .collect();
            remote.fetch(ranges)?;
            return self.configured(path, builder, projection, only_traces);
        }
        let path = self.part_path(part);
        let file = File::open(&path).map_err(|e| io_error(&path, e))?;
        let builder =
            ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| parquet_error(&path, e))?;
        self.configured(path, builder, projection, only_traces)
    }

    /// [`ParquetStore::reader`]'s reader from a part's builder.
    fn configured<T: parquet::file::reader::ChunkReader + 'static>(
        &self,
        path: PathBuf,
        builder: ParquetRecordBatchReaderBuilder<T>,
        projection: Option<&[&str]>,
        only_traces: Option<Arc<HashSet<u64>>>,
    ) -> Result<(PathBuf, ParquetRecordBatchReader)> {
        let mut builder = builder.with_batch_size(READ_BATCH_ROWS);
        if let Some(names) = projection {
            let mask = ProjectionMask::columns(builder.parquet_schema(), names.iter().copied());
            builder = builder.with_projection(mask);
        }
        if let Some(seqs) = only_traces {
            let mask = ProjectionMask::columns(builder.parquet_schema(), [TRACE_SEQ]);
            let predicate = ArrowPredicateFn::new(mask, move |batch: RecordBatch| {
                let column = batch
                    .column(0)
                    .as_any()
                    .downcast_ref::<UInt64Array>()
                    .ok_or_else(|| {
                        ArrowError::InvalidArgumentError(format!("{TRACE_SEQ} is not UInt64"))
                    })?;
                Ok(column
                    .iter()
                    .map(|seq| Some(seq.is_some_and(|seq| seqs.contains(&seq))))
                    .collect::<BooleanArray>())
            });
            builder = builder.with_row_filter(RowFilter::new(vec![Box::new(predicate)]));
        }
        let reader = builder.build().map_err(|e| parquet_error(&path, e))?;
        Ok((path, reader))
    }

    /// Call `each` with every record batch of a part file.
    pub(super) fn scan(
        &self,
        part: &PartInfo,
        projection: Option<&[&str]>,
        only_traces: Option<Arc<HashSet<u64>>>,
        each: &mut dyn FnMut(&Columns<'_>) -> Result<()>,
    ) -> Result<()> {
        let (path, reader) = self.reader(part, projection, only_traces)?;
        for batch in reader {
            let batch = batch.map_err(|e| parquet_error(&path, e))?;
            each(&Columns {
                path: &path,
                batch: &batch,
            })?;
        }
        Ok(())
    }

    /// [`ParquetStore::scan`] of each of `parts`, the parts shared out among the machine's
    /// cores (a part at a time to whichever is free): what `each` gathered from each part's
    /// batches, in the order of `parts`, so a caller folds them as a scan in that order would.
    /// Reading a sample spread over the whole store decompresses nearly every part, and the
    /// parts are independent. The first failing part in that order gives the error.
    pub(super) fn scan_parts<T: Send>(
        &self,
        parts: &[&PartInfo],
        projection: Option<&[&str]>,
        only_traces: Option<Arc<HashSet<u64>>>,
        each: &(dyn Fn(&Columns<'_>, &mut Vec<T>) -> Result<()> + Sync),
    ) -> Result<Vec<Vec<T>>> {
        let scan_one = |part: &PartInfo| -> Result<Vec<T>> {
            let mut gathered = Vec::new();
            self.scan(part, projection, only_traces.clone(), &mut |columns| {
                each(columns, &mut gathered)
            })?;
            Ok(gathered)
        };
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(parts.len());
        if threads <= 1 {
            return parts.iter().map(|part| scan_one(part)).collect();
        }
        let next = AtomicUsize::new(0);
        let mut done: Vec<(usize, Result<Vec<T>>)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut done = Vec::new();
                        loop {
                            let at = next.fetch_add(1, AtomicOrdering::Relaxed);
                            let Some(part) = parts.get(at) else {
                                break;
                            };
                            done.push((at, scan_one(part)));
                        }
                        done
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|worker| match worker.join() {
                    Ok(done) => done,
                    // A worker that panicked: the panic goes on in this thread.
                    Err(panic) => std::panic::resume_unwind(panic),
                })
                .collect()
        });
        done.sort_unstable_by_key(|(at, _)| *at);
        done.into_iter().map(|(_, gathered)| gathered).collect()
    }

    /// Every trace in its latest state, in storage order. Of the rows of one trace, the one
    /// written last (highest write sequence) wins.
    pub(super) fn load_traces(&self, commits: &[Arc<Commit>]) -> Result<Vec<StoredTrace>> {
        self.load_traces_where(commits, &|_| true)
    }

    /// [`ParquetStore::load_traces`] of the traces whose id `keep` accepts; the other rows are
    /// skipped without decoding their metadata.
    pub(super) fn load_traces_where(
        &self,
        commits: &[Arc<Commit>],
        keep: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<Vec<StoredTrace>> {
        let parts: Vec<&PartInfo> = commits.iter().flat_map(|c| &c.trace_parts).collect();
        let gathered = self.scan_parts(&parts, None, None, &|columns, rows| {
            rows.extend(columns.traces_where(keep)?);
            Ok(())
        })?;
        let mut latest: HashMap<String, (u64, StoredTrace)> = HashMap::new();
        for (part, rows) in parts.iter().zip(gathered) {
            for (trace_seq, write_seq, trace) in rows {
                let newer = latest
                    .get(&trace.trace_id)
                    .is_none_or(|(seen, _)| write_seq >= *seen);
                if newer {
                    latest.insert(
                        trace.trace_id.clone(),
                        (
                            write_seq,
                            StoredTrace {
                                trace_seq,
                                partition: part.partition.clone(),
                                trace,
                            },
                        ),
                    );
                }
            }
        }
        let mut traces: Vec<StoredTrace> = latest.into_values().map(|(_, t)| t).collect();
        traces.sort_by_key(|t| t.trace_seq);
        Ok(traces)
    }

    /// Step counters per trace (by storage ordinal), and the traces the filter's tool
    /// conditions accept (`None` when the filter has none).
    pub(super) fn step_totals(
        &self,
        commits: &[Arc<Commit>],
        filter: &TraceFilter,
    ) -> Result<(StepTotalsByTrace, Option<HashSet<u64>>)> {
        let needle = filter.tool_contains.as_ref().map(|t| t.to_lowercase());
        let has_tool_condition = filter.tool.is_some() || needle.is_some();
        let mut totals: HashMap<u64, StepTotals> = HashMap::new();
        let mut with_tool: HashSet<u64> = HashSet::new();
        let mut with_match: HashSet<u64> = HashSet::new();
        // Tool names repeat; fold case once per distinct name.
        let mut contains_cache: HashMap<String, bool> = HashMap::new();
        let projection = [TRACE_SEQ, "tool_name", "is_error", "duration_ms"];
        for commit in commits {
            for part in &commit.step_parts {
                self.scan(part, Some(&projection), None, &mut |columns| {
                    let seq = columns.u64s(TRACE_SEQ)?;
                    let tool = columns.strings("tool_name")?;
                    let is_error = columns.bools("is_error")?;
                    let duration = columns.f64s("duration_ms")?;
                    for i in 0..seq.len() {
                        let trace = seq.value(i);
                        let entry = totals.entry(trace).or_default();
                        entry.steps += 1;
                        entry.errors += u64::from(is_error.value(i));
                        if !duration.is_null(i) {
                            entry.duration_ms =
                                Some(entry.duration_ms.unwrap_or(0.0) + duration.value(i));
                        }
                        if !has_tool_condition {
                            continue;
                        }
                        let name = tool.value(i);
                        if filter.tool.as_deref() == Some(name) {
                            with_tool.insert(trace);
                        }
                        if let Some(needle) = &needle {
                            let matched = match contains_cache.get(name) {
                                Some(m) => *m,
                                None => {
                                    let m = name.to_lowercase().contains(needle.as_str());
                                    contains_cache.insert(name.to_owned(), m);
                                    m
                                }
                            };
                            if matched {
                                with_match.insert(trace);
                            }
                        }
                    }
                    Ok(())
                })?;
            }
        }
        let accepted = match (&filter.tool, &needle) {
            (None, None) => None,
            (Some(_), None) => Some(with_tool),
            (None, Some(_)) => Some(with_match),
            (Some(_), Some(_)) => Some(with_tool.intersection(&with_match).copied().collect()),
        };
        Ok((totals, accepted))
    }

    /// The traces matching `filter`, with their step counters, in storage order.
    pub(super) fn matching(
        &self,
        commits: &[Arc<Commit>],
        filter: &TraceFilter,
    ) -> Result<Vec<(StoredTrace, StepTotals)>> {
        let traces = self.load_traces(commits)?;
        let (totals, accepted) = self.step_totals(commits, filter)?;
        let mut rows = Vec::new();
        for stored in traces {
            let totals = totals.get(&stored.trace_seq).copied().unwrap_or_default();
            if accepted
                .as_ref()
                .is_some_and(|set| !set.contains(&stored.trace_seq))
            {
                continue;
            }
            let trace = &stored.trace;
            if filter.source.as_ref().is_some_and(|s| s != &trace.source) {
                continue;
            }
            if let Some(since) = &filter.since
                && trace.started_at.is_none_or(|at| at < *since)
            {
                continue;
            }
            if let Some(until) = &filter.until
                && trace.started_at.is_none_or(|at| at >= *until)
            {
                continue;
            }
            if filter
                .has_error
                .is_some_and(|want| want != (totals.errors > 0))
            {
                continue;
            }
            if let Some(min) = filter.min_duration_ms
                && duration_of(trace, &totals).is_none_or(|d| d < min || min.is_nan())
            {
                continue;
            }
            rows.push((stored, totals));
        }
        Ok(rows)
    }
}

/// A trace's duration as listings report it.
pub(super) fn duration_of(trace: &ObservedTrace, totals: &StepTotals) -> Option<f64> {
    summary_duration_ms(
        trace.started_at.as_ref().and_then(timestamp_nanos),
        trace.ended_at.as_ref().and_then(timestamp_nanos),
        totals.duration_ms,
    )
}

/// Missing values first, then by value (the order SQLite gives `NULL`s).
pub(super) fn cmp_option<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}
