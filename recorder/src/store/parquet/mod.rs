//! The Parquet backend: an append-only dataset directory for large volumes and other engines.
//!
//! ```text
//! <dir>/_chainweaver.json                          format marker and version
//! <dir>/_commits/<seq>.json                        one manifest per append or compaction
//! <dir>/traces/date=YYYY-MM-DD/part-<seq>-<nonce>.parquet
//! <dir>/steps/date=YYYY-MM-DD/part-<seq>-<nonce>.parquet
//! <dir>/documents/<kind>/<key>.json
//! <dir>/documents/<kind>/_pack.jsonl                 a kind's documents a batch replaced it with
//! ```
//!
//! Every append writes at most one traces part and one steps part per partition, each to a
//! hidden temporary name, fsynced, then renamed; the append becomes visible to this crate when
//! its manifest is linked into `_commits/` (the commit point), so an append that fails or
//! crashes half way is never read. Files are never rewritten; compaction (`compact.rs`) writes
//! new ones in place of many and commits them the same way. The column layout, partitioning
//! and read rules are documented in `docs/parquet-schema.md`.
//!
//! Several processes may append to a dataset at once, and a compaction may be started beside
//! them (it fails, changing nothing, if an append commits first); any number may read it
//! meanwhile. Manifests are committed by a link that fails when the sequence number is taken,
//! so two writers never replace each other's commit.

mod columns;
mod compact;
mod documents;
mod manifest;
mod read;
#[cfg(feature = "s3")]
mod remote;
mod stream;
mod write;

#[cfg(feature = "s3")]
pub use self::remote::{Remote, StepObjects};

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use arrow::array::Array;
use serde_json::Value;

use self::columns::{TRACE_SEQ, opt_timestamp};
use self::documents::Documents;
use self::manifest::{Commit, Marker};
use self::read::{StepTotals, StoredTrace, cmp_option, duration_of};
use self::write::WriterIndex;
use crate::error::{RecorderError, Result};
use crate::model::{ObservedStep, ObservedTrace, Timestamp, TraceWithSteps};
use crate::store::{
    AppendStats, PageRequest, RawSteps, StepColumns, StepTool, StepView, StoreCounts, TraceFilter,
    TracePage, TraceSort, TraceStore, TraceSummary,
};

/// The newest dataset layout version this build understands. Version 2 adds compaction
/// manifests (`compacts_through`), which a build knowing only version 1 would misread; version 3
/// adds document packs (`documents/<kind>/_pack.jsonl`), in which a build knowing only version 2
/// would find no documents.
pub const FORMAT_VERSION: i64 = 3;
/// The version a new dataset is marked with: a dataset is raised to [`FORMAT_VERSION`] when
/// first compacted or given a document pack, so one never so written stays readable by builds
/// that know version 1.
const CREATED_FORMAT_VERSION: i64 = 1;
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

/// A name part no other writer picks: the process id, the clock and a count within the
/// process. Two handles in one process (a compaction beside an append, two recorders) can read
/// the same clock; without the count they named their parts alike, and one writer's rename
/// replaced the other's committed part, which its cleanup then deleted.
pub(super) fn nonce() -> String {
    static TAKEN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let count = TAKEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(
        "{:08x}{:012x}{count:08x}",
        std::process::id(),
        nanos & 0xffff_ffff_ffff
    )
}

/// Make a directory's entries (a rename) durable.
pub(super) fn sync_dir(dir: &Path) -> Result<()> {
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
    let (dir, temp) = write_beside(path, bytes)?;
    if let Err(e) = fs::rename(&temp, path) {
        let _ = fs::remove_file(&temp);
        return Err(io_error(path, e));
    }
    sync_dir(&dir)
}

/// Mark the dataset at `root` with [`FORMAT_VERSION`], unless it is already: done before
/// something only this version reads becomes visible. Every writer raises to the same
/// version, so writers at once never lower it.
pub(super) fn raise_marker(root: &Path) -> Result<()> {
    let path = root.join(MARKER_FILE);
    match read_marker(&path)? {
        Some(marker) if marker.version >= FORMAT_VERSION => Ok(()),
        _ => write_marker(&path, FORMAT_VERSION),
    }
}

/// The dataset marker at `path`, `None` when there is none; a marker of another format or
/// not a marker at all is a corrupt store.
fn read_marker(path: &Path) -> Result<Option<Marker>> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(path, e)),
    };
    let marker: Marker = serde_json::from_str(&text).map_err(|e| RecorderError::CorruptStore {
        path: path.to_path_buf(),
        message: format!("not a dataset marker: {e}"),
    })?;
    if marker.format != FORMAT_NAME {
        return Err(RecorderError::CorruptStore {
            path: path.to_path_buf(),
            message: format!("unknown dataset format {:?}", marker.format),
        });
    }
    Ok(Some(marker))
}

/// Mark the dataset with layout `version`, atomically.
fn write_marker(path: &Path, version: i64) -> Result<()> {
    let marker = Marker {
        format: FORMAT_NAME.into(),
        version,
    };
    let text = serde_json::to_string_pretty(&marker).map_err(|e| parquet_error(path, e))?;
    atomic_write(path, text.as_bytes())
}

/// `path`'s directory (created when missing) and the hidden temporary name beside it that a
/// writer fills before renaming or linking it into place: `.NAME.tmp` then `suffix`.
pub(super) fn temporary_beside(path: &Path, suffix: &str) -> Result<(PathBuf, PathBuf)> {
    let dir = path
        .parent()
        .ok_or_else(|| parquet_error(path, "a file path needs a directory"))?;
    fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok((dir.to_path_buf(), dir.join(format!(".{name}.tmp{suffix}"))))
}

/// Open (creating it when missing) a file that serves as an advisory lock.
pub(super) fn open_lock_file(path: &Path) -> Result<File> {
    fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| io_error(path, e))
}

/// Write `bytes` to a fresh temporary file in `path`'s directory (created when missing) and
/// fsync it; the directory and the temporary file's path.
fn write_beside(path: &Path, bytes: &[u8]) -> Result<(PathBuf, PathBuf)> {
    let (dir, temp) = temporary_beside(path, &format!("-{}", nonce()))?;
    let written = File::create(&temp).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    if let Err(e) = written {
        let _ = fs::remove_file(&temp);
        return Err(io_error(path, e));
    }
    Ok((dir, temp))
}

/// Commit a manifest: write `bytes` under a temporary name beside `path`, fsync, then link it
/// to `path` only if no file is there, and fsync the directory. A rename would replace a
/// manifest another writer committed under the same sequence number in the meantime, and
/// that commit's parts would then be unlisted and deleted; a link fails instead
/// ([`RecorderError::ConcurrentCommit`]) and this commit writes nothing.
pub(super) fn commit_new(path: &Path, bytes: &[u8]) -> Result<()> {
    let (dir, temp) = write_beside(path, bytes)?;
    let linked = match fs::hard_link(&temp, path) {
        // A file system without links (some network mounts): check, then rename. Another
        // writer could still slip in between; on local disks the link above rules that out.
        Err(e) if e.kind() != ErrorKind::AlreadyExists && !path.exists() => fs::rename(&temp, path),
        other => other,
    };
    let _ = fs::remove_file(&temp);
    match linked {
        Ok(()) => sync_dir(&dir),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Err(RecorderError::ConcurrentCommit {
            path: path.to_path_buf(),
        }),
        Err(e) => Err(io_error(path, e)),
    }
}

/// A [`TraceStore`] in a directory of Parquet part files.
pub struct ParquetStore {
    root: PathBuf,
    /// Built on the first append, refreshed when another handle committed meanwhile.
    index: Option<WriterIndex>,
    /// Parsed commit manifests by sequence number.
    manifests: Mutex<HashMap<u64, Arc<Commit>>>,
    /// A dataset in object storage: `root` is the local copy of its small files.
    #[cfg(feature = "s3")]
    remote: Option<Arc<remote::RemoteDataset>>,
}

impl std::fmt::Debug for ParquetStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetStore")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl ParquetStore {
    /// Open the dataset directory at `path`, creating it when missing. A dataset written by a
    /// newer layout version fails with [`RecorderError::SchemaTooNew`].
    pub fn open(path: &Path) -> Result<Self> {
        fs::create_dir_all(path).map_err(|e| io_error(path, e))?;
        let marker_path = path.join(MARKER_FILE);
        match read_marker(&marker_path)? {
            Some(marker) if marker.version > FORMAT_VERSION => {
                return Err(RecorderError::SchemaTooNew {
                    path: path.to_path_buf(),
                    found: marker.version,
                    supported: FORMAT_VERSION,
                });
            }
            Some(_) => {}
            None => write_marker(&marker_path, CREATED_FORMAT_VERSION)?,
        }
        Ok(Self {
            root: path.to_path_buf(),
            index: None,
            manifests: Mutex::new(HashMap::new()),
            #[cfg(feature = "s3")]
            remote: None,
        })
    }

    /// Open the dataset in object storage at `url` (`s3://BUCKET/PREFIX`, see
    /// [`Remote::connect`] for the connection `settings` and the environment). It is read where
    /// it lives and takes documents, not appends; a URL without a dataset is an error.
    #[cfg(feature = "s3")]
    pub fn open_remote(url: &str, settings: &[(&str, &str)]) -> Result<Self> {
        let dataset = remote::RemoteDataset::open(url, settings)?;
        let marker = read_marker(&dataset.copy.path().join(MARKER_FILE))?;
        if let Some(marker) = marker
            && marker.version > FORMAT_VERSION
        {
            return Err(RecorderError::SchemaTooNew {
                path: PathBuf::from(dataset.remote.url()),
                found: marker.version,
                supported: FORMAT_VERSION,
            });
        }
        let mut store = Self::open(dataset.copy.path())?;
        store.remote = Some(Arc::new(dataset));
        Ok(store)
    }

    /// Refuse what only a local dataset does.
    fn local_only(&self, what: &str) -> Result<()> {
        #[cfg(feature = "s3")]
        if let Some(dataset) = &self.remote {
            return Err(RecorderError::ObjectStore {
                url: dataset.remote.url().to_string(),
                message: format!(
                    "a dataset in object storage is read where it lives and takes results, but \
                     {what} runs on a local store: do it there, then upload the folder"
                ),
            });
        }
        let _ = what;
        Ok(())
    }

    /// Change the documents of `kinds` with `change`, and upload those kinds where the dataset
    /// lives in object storage.
    fn change_documents<T>(
        &self,
        kinds: &[&str],
        change: impl FnOnce(&Documents<'_>) -> Result<T>,
    ) -> Result<T> {
        let documents = Documents { root: &self.root };
        #[cfg(feature = "s3")]
        if let Some(dataset) = &self.remote {
            let kinds = remote::distinct(kinds.iter().copied());
            let pack = |kind: &str| documents.pack_of(kind);
            dataset.before_change(&kinds, &pack)?;
            let changed = change(&documents)?;
            dataset.after_change(&kinds, &pack)?;
            return Ok(changed);
        }
        let _ = kinds;
        change(&documents)
    }

    /// The dataset directory.
    pub fn path(&self) -> &Path {
        &self.root
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
        Ok(self.load_some(&[trace_id])?.pop())
    }

    fn for_each_trace(&self, visit: &mut dyn FnMut(TraceWithSteps) -> Result<()>) -> Result<()> {
        self.stream_traces(visit)
    }

    fn get_traces(&self, ids: &[&str]) -> Result<Vec<TraceWithSteps>> {
        self.load_some(ids)
    }

    fn get_trace_steps(&self, wanted: &[(&str, &[usize])]) -> Result<Vec<TraceWithSteps>> {
        self.load_some_steps(wanted)
    }

    fn for_each_step_tool(&self, visit: &mut dyn FnMut(StepTool<'_>) -> Result<()>) -> Result<()> {
        self.stream_step_tools(visit)
    }

    fn committed_step_files(&self) -> Result<Option<Vec<PathBuf>>> {
        // The parts of a dataset in object storage are no local files.
        #[cfg(feature = "s3")]
        if self.remote.is_some() {
            return Ok(None);
        }
        let commits = self.commits()?;
        Ok(Some(
            commits
                .iter()
                .flat_map(|commit| commit.step_parts.iter().map(|part| self.part_path(part)))
                .collect(),
        ))
    }

    #[cfg(feature = "s3")]
    fn committed_step_objects(&self) -> Result<Option<StepObjects>> {
        let Some(dataset) = &self.remote else {
            return Ok(None);
        };
        let parts = self
            .commits()?
            .iter()
            .flat_map(|commit| commit.step_parts.iter().map(|part| part.file.clone()))
            .collect();
        Ok(Some(StepObjects::new(dataset, parts)))
    }

    fn trace_ids(&self) -> Result<Vec<String>> {
        let commits = self.commits()?;
        Ok(self
            .trace_order(&commits)?
            .into_iter()
            .map(|(_, id)| id)
            .collect())
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
        self.change_documents(&[kind], |documents| documents.put(kind, key, document))
    }

    fn get_document(&self, kind: &str, key: &str) -> Result<Option<Value>> {
        Documents { root: &self.root }.get(kind, key)
    }

    fn list_documents(&self, kind: &str) -> Result<Vec<(String, Value)>> {
        Documents { root: &self.root }.list(kind)
    }

    fn delete_document(&mut self, kind: &str, key: &str) -> Result<bool> {
        self.change_documents(&[kind], |documents| documents.delete(kind, key))
    }

    fn write_documents(&mut self, clear: &[&str], put: &[(&str, &str, &Value)]) -> Result<()> {
        let kinds: Vec<&str> = clear
            .iter()
            .copied()
            .chain(put.iter().map(|(kind, _, _)| *kind))
            .collect();
        self.change_documents(&kinds, |documents| documents.write_batch(clear, put))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_marker_is_raised_once_and_a_damaged_one_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        ParquetStore::open(root).unwrap();
        let path = root.join(MARKER_FILE);
        assert_eq!(
            read_marker(&path).unwrap().unwrap().version,
            CREATED_FORMAT_VERSION
        );
        raise_marker(root).unwrap();
        assert_eq!(read_marker(&path).unwrap().unwrap().version, FORMAT_VERSION);
        for damaged in ["{\"format\": \"other\", \"version\": 1}", "not json"] {
            fs::write(&path, damaged).unwrap();
            let err = raise_marker(root).unwrap_err();
            assert!(matches!(err, RecorderError::CorruptStore { .. }), "{err}");
            assert_eq!(fs::read_to_string(&path).unwrap(), damaged);
        }
    }

    #[test]
    fn nonces_taken_at_once_by_many_threads_differ() {
        let taken: Vec<String> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| (0..20_000).map(|_| nonce()).collect::<Vec<_>>()))
                .collect();
            threads
                .into_iter()
                .flat_map(|t| t.join().unwrap())
                .collect()
        });
        let distinct: HashSet<&String> = taken.iter().collect();
        assert_eq!(distinct.len(), taken.len());
    }

    #[test]
    fn a_commit_never_replaces_a_manifest_already_there() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = dir
            .path()
            .join("_commits")
            .join("00000000000000000001.json");
        commit_new(&manifest, b"first").unwrap();
        let err = commit_new(&manifest, b"second").unwrap_err();
        assert!(
            matches!(err, RecorderError::ConcurrentCommit { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("run it again"), "{err}");
        assert_eq!(fs::read(&manifest).unwrap(), b"first");
        let left: Vec<_> = fs::read_dir(dir.path().join("_commits"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 1, "no temporary file is left: {left:?}");
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
