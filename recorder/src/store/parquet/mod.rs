//! The Parquet backend: an append-only dataset directory for large volumes and other engines.
//!
//! ```text
//! <dir>/_chainweaver.json                          format marker and version
//! <dir>/_commits/<seq>.json                        one manifest per committed append
//! <dir>/traces/date=YYYY-MM-DD/part-<seq>-<nonce>.parquet
//! <dir>/steps/date=YYYY-MM-DD/part-<seq>-<nonce>.parquet
//! <dir>/documents/<kind>/<key>.json
//! ```
//!
//! Every append writes at most one traces part and one steps part per partition, each to a
//! hidden temporary name, fsynced, then renamed; the append becomes visible to this crate when
//! its manifest is renamed into `_commits/` (the commit point), so an append that fails or
//! crashes half way is never read. Files are never rewritten. The column layout, partitioning
//! and read rules are documented in `docs/parquet-schema.md`.
//!
//! One process writes a dataset at a time; any number may read it meanwhile.

mod columns;
mod documents;

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use arrow::array::{Array, RecordBatch, UInt64Array};
use arrow::error::ArrowError;
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowPredicateFn, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder, RowFilter,
};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use self::columns::{Columns, TRACE_SEQ, TraceRowOut, opt_timestamp};
use self::documents::Documents;
use crate::error::{RecorderError, Result};
use crate::model::{ObservedStep, ObservedTrace, Timestamp, TraceWithSteps};
use crate::store::{
    AppendStats, PageRequest, RawSteps, StepColumns, StepView, StoreCounts, TraceFilter, TracePage,
    TraceSort, TraceStore, TraceSummary, merge_trace, summary_duration_ms, timestamp_nanos,
    validate_batch,
};

/// The dataset layout version this build writes and understands.
pub const FORMAT_VERSION: i64 = 1;
const FORMAT_NAME: &str = "chainweaver-parquet";
const MARKER_FILE: &str = "_chainweaver.json";
const COMMITS_DIR: &str = "_commits";
/// The partition of traces without a start time.
const UNKNOWN_DATE: &str = "unknown";
/// Rows decoded at a time while streaming.
const READ_BATCH_ROWS: usize = 1024;

pub(super) fn io_error(path: &Path, source: std::io::Error) -> RecorderError {
    RecorderError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn parquet_error(path: &Path, error: impl std::fmt::Display) -> RecorderError {
    RecorderError::Parquet {
        path: path.to_path_buf(),
        message: error.to_string(),
    }
}

/// A name part that no other writer picks at the same time: process id and clock.
fn nonce() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}{:x}", std::process::id(), nanos & 0xffff_ffff_ffff)
}

/// Make a directory's entries (a rename) durable.
fn sync_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_error(dir, e))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Write `bytes` to `path` atomically: a temporary file beside it, fsync, rename, fsync the
/// directory. Readers see the old content or the new, never a mix.
pub(super) fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| parquet_error(path, "a file path needs a directory"))?;
    fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.tmp-{}", nonce()));
    let written = File::create(&temp)
        .and_then(|mut file| {
            file.write_all(bytes)?;
            file.sync_all()
        })
        .and_then(|()| fs::rename(&temp, path));
    if let Err(e) = written {
        let _ = fs::remove_file(&temp);
        return Err(io_error(path, e));
    }
    sync_dir(dir)
}

/// The format marker at the dataset root.
#[derive(Debug, Serialize, Deserialize)]
struct Marker {
    format: String,
    version: i64,
}

/// One part file of a commit.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PartInfo {
    /// Path relative to the dataset root, `/`-separated.
    file: String,
    /// The partition directory name, e.g. `date=2026-01-02`.
    partition: String,
    rows: u64,
    min_trace_seq: u64,
    max_trace_seq: u64,
}

/// The manifest of one committed append.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Commit {
    /// The append's write sequence number: 1, 2, 3, ...
    seq: u64,
    /// Traces first stored by this append.
    new_traces: u64,
    new_steps: u64,
    new_failed_steps: u64,
    trace_parts: Vec<PartInfo>,
    step_parts: Vec<PartInfo>,
}

fn commit_file_name(seq: u64) -> String {
    format!("{seq:020}.json")
}

/// A trace's current state as read from the dataset.
struct StoredTrace {
    trace_seq: u64,
    partition: String,
    trace: ObservedTrace,
}

/// Counters over a trace's steps.
#[derive(Default, Clone, Copy)]
struct StepTotals {
    steps: u64,
    errors: u64,
    duration_ms: Option<f64>,
}

/// Step counters keyed by trace storage ordinal.
type StepTotalsByTrace = HashMap<u64, StepTotals>;

/// The step indices stored for one trace: all below `dense`, plus `sparse`.
#[derive(Debug, Default, Clone)]
struct StepSet {
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
struct WriterIndex {
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

/// A [`TraceStore`] in a directory of Parquet part files.
pub struct ParquetStore {
    root: PathBuf,
    /// Built on the first append, refreshed when another handle committed meanwhile.
    index: Option<WriterIndex>,
    /// Parsed commit manifests by sequence number.
    manifests: Mutex<HashMap<u64, Arc<Commit>>>,
}

impl std::fmt::Debug for ParquetStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetStore")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// The partition of a trace: the UTC day it started, or `unknown`.
fn partition_of(started_at: Option<&Timestamp>) -> String {
    match started_at {
        Some(at) => format!("date={}", at.format("%Y-%m-%d")),
        None => format!("date={UNKNOWN_DATE}"),
    }
}

/// A part file's write sequence number, from its name (`part-<seq>-...` or a temporary
/// `.part-<seq>-...`).
fn part_seq(name: &str) -> Option<u64> {
    let rest = name
        .strip_prefix('.')
        .unwrap_or(name)
        .strip_prefix("part-")?;
    rest.split('-').next()?.parse().ok()
}

impl ParquetStore {
    /// Open the dataset directory at `path`, creating it when missing. A dataset written by a
    /// newer layout version fails with [`RecorderError::SchemaTooNew`].
    pub fn open(path: &Path) -> Result<Self> {
        fs::create_dir_all(path).map_err(|e| io_error(path, e))?;
        let marker_path = path.join(MARKER_FILE);
        match fs::read_to_string(&marker_path) {
            Ok(text) => {
                let marker: Marker =
                    serde_json::from_str(&text).map_err(|e| RecorderError::CorruptStore {
                        path: marker_path.clone(),
                        message: format!("not a dataset marker: {e}"),
                    })?;
                if marker.format != FORMAT_NAME {
                    return Err(RecorderError::CorruptStore {
                        path: marker_path,
                        message: format!("unknown dataset format {:?}", marker.format),
                    });
                }
                if marker.version > FORMAT_VERSION {
                    return Err(RecorderError::SchemaTooNew {
                        path: path.to_path_buf(),
                        found: marker.version,
                        supported: FORMAT_VERSION,
                    });
                }
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {
                let marker = Marker {
                    format: FORMAT_NAME.into(),
                    version: FORMAT_VERSION,
                };
                let text = serde_json::to_string_pretty(&marker)
                    .map_err(|e| parquet_error(&marker_path, e))?;
                atomic_write(&marker_path, text.as_bytes())?;
            }
            Err(e) => return Err(io_error(&marker_path, e)),
        }
        Ok(Self {
            root: path.to_path_buf(),
            index: None,
            manifests: Mutex::new(HashMap::new()),
        })
    }

    /// The dataset directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Every committed append, oldest first.
    fn commits(&self) -> Result<Vec<Arc<Commit>>> {
        let dir = self.root.join(COMMITS_DIR);
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error(&dir, e)),
        };
        // Manifests never change once committed: parse each one once per handle.
        let mut cache = self
            .manifests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut commits = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_error(&dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some(stem) = name.strip_suffix(".json") else {
                continue;
            };
            if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let Ok(seq) = stem.parse::<u64>() else {
                continue;
            };
            if let Some(commit) = cache.get(&seq) {
                commits.push(Arc::clone(commit));
                continue;
            }
            let file = entry.path();
            let text = fs::read_to_string(&file).map_err(|e| io_error(&file, e))?;
            let commit: Commit =
                serde_json::from_str(&text).map_err(|e| RecorderError::CorruptStore {
                    path: file.clone(),
                    message: format!("not a commit manifest: {e}"),
                })?;
            let commit = Arc::new(commit);
            cache.insert(seq, Arc::clone(&commit));
            commits.push(commit);
        }
        commits.sort_by_key(|c| c.seq);
        Ok(commits)
    }

    fn part_path(&self, part: &PartInfo) -> PathBuf {
        part.file
            .split('/')
            .fold(self.root.clone(), |p, s| p.join(s))
    }

    /// A streaming reader over one part file: only `projection` columns (all when `None`), only
    /// rows of trace `only_trace_seq` when given.
    fn reader(
        &self,
        part: &PartInfo,
        projection: Option<&[&str]>,
        only_trace_seq: Option<u64>,
    ) -> Result<(PathBuf, ParquetRecordBatchReader)> {
        let path = self.part_path(part);
        let file = File::open(&path).map_err(|e| io_error(&path, e))?;
        let mut builder = ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(|e| parquet_error(&path, e))?
            .with_batch_size(READ_BATCH_ROWS);
        if let Some(names) = projection {
            let mask = ProjectionMask::columns(builder.parquet_schema(), names.iter().copied());
            builder = builder.with_projection(mask);
        }
        if let Some(seq) = only_trace_seq {
            let mask = ProjectionMask::columns(builder.parquet_schema(), [TRACE_SEQ]);
            let predicate = ArrowPredicateFn::new(mask, move |batch: RecordBatch| {
                let column = batch
                    .column(0)
                    .as_any()
                    .downcast_ref::<UInt64Array>()
                    .ok_or_else(|| {
                        ArrowError::InvalidArgumentError(format!("{TRACE_SEQ} is not UInt64"))
                    })?;
                arrow::compute::kernels::cmp::eq(column, &UInt64Array::new_scalar(seq))
            });
            builder = builder.with_row_filter(RowFilter::new(vec![Box::new(predicate)]));
        }
        let reader = builder.build().map_err(|e| parquet_error(&path, e))?;
        Ok((path, reader))
    }

    /// Call `each` with every record batch of a part file.
    fn scan(
        &self,
        part: &PartInfo,
        projection: Option<&[&str]>,
        only_trace_seq: Option<u64>,
        each: &mut dyn FnMut(&Columns<'_>) -> Result<()>,
    ) -> Result<()> {
        let (path, reader) = self.reader(part, projection, only_trace_seq)?;
        for batch in reader {
            let batch = batch.map_err(|e| parquet_error(&path, e))?;
            each(&Columns {
                path: &path,
                batch: &batch,
            })?;
        }
        Ok(())
    }

    /// Every trace in its latest state, in storage order. Of the rows of one trace, the one
    /// written last (highest write sequence) wins.
    fn load_traces(&self, commits: &[Arc<Commit>]) -> Result<Vec<StoredTrace>> {
        let mut latest: HashMap<String, (u64, StoredTrace)> = HashMap::new();
        for commit in commits {
            for part in &commit.trace_parts {
                self.scan(part, None, None, &mut |columns| {
                    for (trace_seq, write_seq, trace) in columns.traces()? {
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
                    Ok(())
                })?;
            }
        }
        let mut traces: Vec<StoredTrace> = latest.into_values().map(|(_, t)| t).collect();
        traces.sort_by_key(|t| t.trace_seq);
        Ok(traces)
    }

    /// Step counters per trace (by storage ordinal), and the traces the filter's tool
    /// conditions accept (`None` when the filter has none).
    fn step_totals(
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
    fn matching(
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
        self.remove_uncommitted(commits, last_seq)?;
        Ok(WriterIndex {
            last_seq,
            next_trace_seq,
            traces,
        })
    }

    /// Delete part files no manifest lists whose write sequence is not newer than the last
    /// commit: leftovers of an append that failed or crashed before its commit point.
    fn remove_uncommitted(&self, commits: &[Arc<Commit>], last_seq: u64) -> Result<()> {
        let listed: HashSet<&str> = commits
            .iter()
            .flat_map(|c| c.trace_parts.iter().chain(&c.step_parts))
            .map(|p| p.file.as_str())
            .collect();
        for table in ["traces", "steps"] {
            let table_dir = self.root.join(table);
            let Ok(partitions) = fs::read_dir(&table_dir) else {
                continue;
            };
            for partition in partitions.flatten() {
                let Ok(files) = fs::read_dir(partition.path()) else {
                    continue;
                };
                let partition_name = partition.file_name().to_string_lossy().into_owned();
                for file in files.flatten() {
                    let name = file.file_name().to_string_lossy().into_owned();
                    let relative = format!("{table}/{partition_name}/{name}");
                    let stale = part_seq(&name).is_some_and(|seq| seq <= last_seq)
                        && !listed.contains(relative.as_str());
                    if stale {
                        let path = file.path();
                        fs::remove_file(&path).map_err(|e| io_error(&path, e))?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Write one part file atomically (temporary name, fsync, rename). Records every path it
    /// created in `created` so a failed append can remove them.
    fn write_part(
        &self,
        relative: &str,
        batch: &RecordBatch,
        created: &mut Vec<PathBuf>,
    ) -> Result<()> {
        let path = relative
            .split('/')
            .fold(self.root.clone(), |p, s| p.join(s));
        let dir = path
            .parent()
            .ok_or_else(|| parquet_error(&path, "a part needs a directory"))?
            .to_path_buf();
        fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let temp = dir.join(format!(".{name}.tmp"));
        created.push(temp.clone());
        let file = File::create(&temp).map_err(|e| io_error(&temp, e))?;
        let properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_max_row_group_row_count(Some(64 * 1024))
            .build();
        let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(properties))
            .map_err(|e| parquet_error(&temp, e))?;
        writer.write(batch).map_err(|e| parquet_error(&temp, e))?;
        let file = writer.into_inner().map_err(|e| parquet_error(&temp, e))?;
        file.sync_all().map_err(|e| io_error(&temp, e))?;
        created.push(path.clone());
        fs::rename(&temp, &path).map_err(|e| io_error(&path, e))?;
        Ok(())
    }

    /// Write the parts and the manifest of one append; the manifest's rename is the commit.
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
        created.push(manifest.clone());
        atomic_write(&manifest, text.as_bytes())
    }
}

/// A trace's duration as listings report it.
fn duration_of(trace: &ObservedTrace, totals: &StepTotals) -> Option<f64> {
    summary_duration_ms(
        trace.started_at.as_ref().and_then(timestamp_nanos),
        trace.ended_at.as_ref().and_then(timestamp_nanos),
        totals.duration_ms,
    )
}

/// Missing values first, then by value (the order SQLite gives `NULL`s).
fn cmp_option<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// A streaming cursor over one steps part, sorted by (trace ordinal, step index).
struct StepCursor {
    path: PathBuf,
    reader: ParquetRecordBatchReader,
    buffer: VecDeque<(u64, ObservedStep)>,
    done: bool,
}

impl StepCursor {
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
                    self.buffer.extend(columns.steps()?);
                }
                None => self.done = true,
            }
        }
        Ok(self.buffer.front().map(|(seq, _)| *seq))
    }
}

impl ParquetStore {
    /// [`TraceStore::append`] of steps as the store writes them, from either kind of batch.
    fn append_views(
        &mut self,
        traces: &[ObservedTrace],
        steps: &[StepView<'_>],
    ) -> Result<AppendStats> {
        validate_batch(traces, steps)?;
        let commits = self.commits()?;
        let last_seq = commits.last().map_or(0, |c| c.seq);
        let stale = self.index.as_ref().is_none_or(|i| i.last_seq != last_seq);
        if stale {
            self.index = Some(self.build_index(&commits)?);
        }
        let Some(index) = self.index.as_ref() else {
            return Err(parquet_error(&self.root, "the writer index is missing"));
        };

        // Stage everything in memory first: nothing is written unless the whole batch is valid.
        let mut stats = AppendStats::default();
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
        let mut step_rows: BTreeMap<String, Vec<(u64, &StepView<'_>)>> = BTreeMap::new();
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
        let mut trace_rows: BTreeMap<String, Vec<TraceRowOut<'_>>> = BTreeMap::new();
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
        drop(trace_rows);
        drop(step_rows);

        // Committed: bring the index up to date.
        let Some(index) = self.index.as_mut() else {
            return Ok(stats);
        };
        for (trace_id, entry) in staged {
            match index.traces.get_mut(trace_id) {
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
                    index.traces.insert(
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
        index.next_trace_seq = next_trace_seq;
        index.last_seq = seq;
        Ok(stats)
    }
}

impl TraceStore for ParquetStore {
    fn append(&mut self, traces: &[ObservedTrace], steps: &[ObservedStep]) -> Result<AppendStats> {
        let views: Vec<StepView<'_>> = steps.iter().map(StepView::from).collect();
        self.append_views(traces, &views)
    }

    fn append_raw(&mut self, traces: &[ObservedTrace], steps: &RawSteps) -> Result<AppendStats> {
        self.append_views(traces, &steps.views())
    }

    fn list_traces(&self, filter: &TraceFilter, page: &PageRequest) -> Result<TracePage> {
        let commits = self.commits()?;
        let mut rows = self.matching(&commits, filter)?;
        let total = rows.len() as u64;
        let primary = |a: &(StoredTrace, StepTotals), b: &(StoredTrace, StepTotals)| match page.sort
        {
            TraceSort::Stored => Ordering::Equal,
            TraceSort::TraceId => a.0.trace.trace_id.cmp(&b.0.trace.trace_id),
            TraceSort::StartedAt => a.0.trace.started_at.cmp(&b.0.trace.started_at),
            TraceSort::Steps => a.1.steps.cmp(&b.1.steps),
            TraceSort::Errors => a.1.errors.cmp(&b.1.errors),
            TraceSort::Duration => {
                cmp_option(duration_of(&a.0.trace, &a.1), duration_of(&b.0.trace, &b.1))
            }
        };
        rows.sort_by(|a, b| {
            let order = primary(a, b).then(a.0.trace_seq.cmp(&b.0.trace_seq));
            if page.descending {
                order.reverse()
            } else {
                order
            }
        });
        let offset = usize::try_from(page.offset).unwrap_or(usize::MAX);
        let limit = usize::try_from(page.limit).unwrap_or(usize::MAX);
        let traces = rows
            .into_iter()
            .skip(offset)
            .take(limit)
            .map(|(stored, totals)| TraceSummary {
                duration_ms: duration_of(&stored.trace, &totals),
                trace: stored.trace,
                step_count: totals.steps,
                error_count: totals.errors,
            })
            .collect();
        Ok(TracePage { traces, total })
    }

    fn get_trace(&self, trace_id: &str) -> Result<Option<TraceWithSteps>> {
        let commits = self.commits()?;
        let Some(stored) = self
            .load_traces(&commits)?
            .into_iter()
            .find(|t| t.trace.trace_id == trace_id)
        else {
            return Ok(None);
        };
        let seq = stored.trace_seq;
        let mut steps = Vec::new();
        for commit in &commits {
            for part in &commit.step_parts {
                let may_hold = part.partition == stored.partition
                    && part.min_trace_seq <= seq
                    && seq <= part.max_trace_seq;
                if !may_hold {
                    continue;
                }
                self.scan(part, None, Some(seq), &mut |columns| {
                    steps.extend(columns.steps()?.into_iter().map(|(_, step)| step));
                    Ok(())
                })?;
            }
        }
        steps.sort_by_key(|s| s.step_index);
        Ok(Some(TraceWithSteps {
            trace: stored.trace,
            steps,
        }))
    }

    fn for_each_trace(&self, visit: &mut dyn FnMut(TraceWithSteps) -> Result<()>) -> Result<()> {
        // Traces are held in memory (they are few next to steps); steps stream: every steps part
        // is sorted by (trace ordinal, step index), so a k-way merge over the parts whose
        // ordinal range covers the current trace yields each trace's steps in turn. A part is
        // opened when the walk reaches its first ordinal and dropped once exhausted.
        let commits = self.commits()?;
        let traces = self.load_traces(&commits)?;
        let mut parts: Vec<&PartInfo> = commits.iter().flat_map(|c| &c.step_parts).collect();
        parts.sort_by_key(|p| p.min_trace_seq);
        let mut next_part = 0;
        let mut open: Vec<StepCursor> = Vec::new();
        for stored in traces {
            let seq = stored.trace_seq;
            while next_part < parts.len() && parts[next_part].min_trace_seq <= seq {
                let (path, reader) = self.reader(parts[next_part], None, None)?;
                open.push(StepCursor {
                    path,
                    reader,
                    buffer: VecDeque::new(),
                    done: false,
                });
                next_part += 1;
            }
            let mut steps = Vec::new();
            for cursor in &mut open {
                while let Some(head) = cursor.head()? {
                    match head.cmp(&seq) {
                        Ordering::Equal => {
                            if let Some((_, step)) = cursor.buffer.pop_front() {
                                steps.push(step);
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
            steps.sort_by_key(|s| s.step_index);
            visit(TraceWithSteps {
                trace: stored.trace,
                steps,
            })?;
        }
        Ok(())
    }

    fn step_columns(&self, filter: &TraceFilter) -> Result<StepColumns> {
        let commits = self.commits()?;
        let accepted: HashSet<u64> = self
            .matching(&commits, filter)?
            .into_iter()
            .map(|(stored, _)| stored.trace_seq)
            .collect();
        struct Row {
            key: (u64, u32),
            trace_id: String,
            tool_name: String,
            is_error: bool,
            duration_ms: Option<f64>,
            started_at: Option<Timestamp>,
        }
        let mut rows: Vec<Row> = Vec::new();
        let projection = [
            TRACE_SEQ,
            "trace_id",
            "step_index",
            "tool_name",
            "is_error",
            "duration_ms",
            "started_at",
        ];
        for commit in &commits {
            for part in &commit.step_parts {
                self.scan(part, Some(&projection), None, &mut |columns| {
                    let seq = columns.u64s(TRACE_SEQ)?;
                    let trace_id = columns.strings("trace_id")?;
                    let index = columns.u32s("step_index")?;
                    let tool = columns.strings("tool_name")?;
                    let is_error = columns.bools("is_error")?;
                    let duration = columns.f64s("duration_ms")?;
                    let started = columns.timestamps("started_at")?;
                    for i in 0..seq.len() {
                        if !accepted.contains(&seq.value(i)) {
                            continue;
                        }
                        rows.push(Row {
                            key: (seq.value(i), index.value(i)),
                            trace_id: trace_id.value(i).to_owned(),
                            tool_name: tool.value(i).to_owned(),
                            is_error: is_error.value(i),
                            duration_ms: (!duration.is_null(i)).then(|| duration.value(i)),
                            started_at: opt_timestamp(started, i),
                        });
                    }
                    Ok(())
                })?;
            }
        }
        // The order SQLite gives: storage order of traces, then step order.
        rows.sort_by_key(|r| r.key);
        let mut columns = StepColumns::default();
        for row in rows {
            columns.trace_id.push(row.trace_id);
            columns.tool_name.push(row.tool_name);
            columns.is_error.push(row.is_error);
            columns.duration_ms.push(row.duration_ms);
            columns.started_at.push(row.started_at);
        }
        Ok(columns)
    }

    fn counts(&self) -> Result<StoreCounts> {
        let mut counts = StoreCounts::default();
        for commit in self.commits()? {
            counts.traces += commit.new_traces;
            counts.steps += commit.new_steps;
            counts.failed_steps += commit.new_failed_steps;
        }
        Ok(counts)
    }

    fn put_document(&mut self, kind: &str, key: &str, document: &Value) -> Result<()> {
        Documents { root: &self.root }.put(kind, key, document)
    }

    fn get_document(&self, kind: &str, key: &str) -> Result<Option<Value>> {
        Documents { root: &self.root }.get(kind, key)
    }

    fn list_documents(&self, kind: &str) -> Result<Vec<(String, Value)>> {
        Documents { root: &self.root }.list(kind)
    }

    fn delete_document(&mut self, kind: &str, key: &str) -> Result<bool> {
        Documents { root: &self.root }.delete(kind, key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    #[test]
    fn part_names_carry_their_sequence() {
        assert_eq!(part_seq("part-000000000012-abc.parquet"), Some(12));
        assert_eq!(part_seq(".part-000000000003-abc.parquet.tmp"), Some(3));
        assert_eq!(part_seq("other.parquet"), None);
    }

    #[test]
    fn one_append_writes_one_part_per_partition_and_a_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = ParquetStore::open(dir.path()).unwrap();
        let mut traces = Vec::new();
        let mut steps = Vec::new();
        for t in 0..30 {
            let mut trace = ObservedTrace::new(format!("t{t}"), "test");
            if t % 3 != 0 {
                trace.started_at =
                    chrono::DateTime::from_timestamp(1_767_225_600 + (t % 3) * 86_400, 0);
            }
            for s in 0..10 {
                steps.push(ObservedStep::new(
                    format!("t{t}"),
                    s,
                    "tool",
                    json!({"s": s}),
                ));
            }
            traces.push(trace);
        }
        store.append(&traces, &steps).unwrap();
        let commits = store.commits().unwrap();
        assert_eq!(commits.len(), 1);
        let mut partitions: Vec<&str> = commits[0]
            .step_parts
            .iter()
            .map(|p| p.partition.as_str())
            .collect();
        partitions.sort_unstable();
        assert_eq!(
            partitions,
            ["date=2026-01-02", "date=2026-01-03", "date=unknown"]
        );
        assert_eq!(commits[0].trace_parts.len(), 3);
        assert_eq!(
            commits[0].step_parts.iter().map(|p| p.rows).sum::<u64>(),
            300
        );
        for part in commits[0].step_parts.iter().chain(&commits[0].trace_parts) {
            assert!(store.part_path(part).is_file(), "{}", part.file);
        }
    }

    #[test]
    fn uncommitted_parts_are_ignored_and_cleaned_up() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = ParquetStore::open(dir.path()).unwrap();
        let trace = ObservedTrace::new("t", "test");
        store
            .append(
                std::slice::from_ref(&trace),
                &[ObservedStep::new("t", 0, "a", json!({}))],
            )
            .unwrap();
        // A crashed append: its part is in place but its manifest never landed.
        let commits = store.commits().unwrap();
        let source = store.part_path(&commits[0].step_parts[0]);
        let orphan = source.with_file_name("part-000000000002-dead.parquet");
        fs::copy(&source, &orphan).unwrap();
        let reader = ParquetStore::open(dir.path()).unwrap();
        assert_eq!(reader.counts().unwrap().steps, 1);
        assert_eq!(reader.get_trace("t").unwrap().unwrap().steps.len(), 1);
        // The next appends reuse sequence 2 and then 3; the orphan goes once it is older than
        // the last commit.
        let mut writer = ParquetStore::open(dir.path()).unwrap();
        writer
            .append(&[], &[ObservedStep::new("t", 1, "a", json!({}))])
            .unwrap();
        writer.index = None;
        writer
            .append(&[], &[ObservedStep::new("t", 2, "a", json!({}))])
            .unwrap();
        assert!(!orphan.exists());
        assert_eq!(writer.get_trace("t").unwrap().unwrap().steps.len(), 3);
    }
}
