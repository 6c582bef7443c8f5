//! Compaction: the part files of many appends rewritten as a few large ones per partition,
//! committed as one manifest that supersedes every commit before it.
//!
//! A store filled by many small appends (a recorder's batches, an import in chunks) holds
//! thousands of small files; every read opens each one and decompresses each column chunk
//! apart. Compaction keeps every row as it is (the same `trace_seq` and `write_seq`, so
//! storage order and which trace row is newest do not change) but drops trace rows a later
//! row replaced. Crash safety is an append's: new parts under fresh names, then linking the
//! manifest into place is the commit point; the replaced files and manifests are deleted after
//! it, or by the next writer if the process dies first. An append committed meanwhile makes
//! the commit fail, and the compaction changes nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use arrow::array::{Array, ArrayRef, RecordBatch, RecordBatchReader, UInt32Array, UInt64Array};
use arrow::compute::interleave;
use arrow::datatypes::SchemaRef;

use super::columns::{TRACE_SEQ, WRITE_SEQ, step_schema, trace_schema};
use super::manifest::{Commit, PartInfo, commit_file_name};
use super::{COMMITS_DIR, ParquetStore, commit_new, io_error, nonce, parquet_error, sync_dir};
use crate::error::{RecorderError, Result};
use crate::store::CompactStats;

/// At most this many rows go to one compacted part, so a large partition still gives readers
/// several files to share out among cores.
pub(super) const COMPACT_PART_ROWS: u64 = 1 << 20;
/// Rows gathered per output batch when parts that overlap are merged.
const MERGE_BATCH_ROWS: usize = 64 * 1024;

/// A (batch, row) position in a group of batches read into memory.
type RowAt = (usize, usize);

impl ParquetStore {
    /// Rewrite every partition held in more than one part file as parts of up to 2^20 rows
    /// (`COMPACT_PART_ROWS`), and commit them in place of every commit so far. Fails
    /// with [`RecorderError::ConcurrentCommit`], changing nothing, when an append commits
    /// while it runs.
    /// `progress` gets the number of step rows rewritten as they are written.
    pub fn compact(&mut self, progress: &mut dyn FnMut(u64)) -> Result<CompactStats> {
        self.local_only("compaction")?;
        // Held until the end: writers leave the uncommitted files alone meanwhile, so the
        // parts being written here are not taken for an append's leftovers.
        let _lock = self.lock_compaction()?;
        let commits = self.commits()?;
        let last_seq = commits.last().map_or(0, |c| c.seq);
        let trace_parts = by_partition(commits.iter().flat_map(|c| &c.trace_parts));
        let step_parts = by_partition(commits.iter().flat_map(|c| &c.step_parts));
        let before: Vec<&PartInfo> = commits
            .iter()
            .flat_map(|c| c.trace_parts.iter().chain(&c.step_parts))
            .collect();
        let (files_before, bytes_before) = self.sizes(before.iter().copied())?;
        let worth_it = trace_parts
            .values()
            .chain(step_parts.values())
            .any(|p| p.len() > 1);
        if !worth_it {
            return Ok(CompactStats {
                files_before,
                files_after: files_before,
                bytes_before,
                bytes_after: bytes_before,
                rows_rewritten: 0,
            });
        }
        let mut commit = Commit {
            seq: last_seq + 1,
            new_traces: commits.iter().map(|c| c.new_traces).sum(),
            new_steps: commits.iter().map(|c| c.new_steps).sum(),
            new_failed_steps: commits.iter().map(|c| c.new_failed_steps).sum(),
            trace_parts: Vec::new(),
            step_parts: Vec::new(),
            compacts_through: Some(last_seq),
        };
        let mut created = Vec::new();
        let mut rows_rewritten = 0;
        let written = self
            .write_compacted(
                &trace_parts,
                &step_parts,
                &mut commit,
                &mut created,
                &mut |rows| {
                    rows_rewritten += rows;
                    progress(rows);
                },
            )
            .and_then(|()| self.commit_compaction(&commit));
        if let Err(e) = written {
            for path in created.iter().rev() {
                let _ = fs::remove_file(path);
            }
            return Err(e);
        }
        // Committed: what it replaced can go. The writer's index is rebuilt on the next append.
        self.index = None;
        self.remove_superseded()?;
        let kept: HashSet<&str> = commit
            .trace_parts
            .iter()
            .chain(&commit.step_parts)
            .map(|p| p.file.as_str())
            .collect();
        for part in before.iter().filter(|p| !kept.contains(p.file.as_str())) {
            let path = self.part_path(part);
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(io_error(&path, e)),
            }
        }
        let after: Vec<&PartInfo> = commit
            .trace_parts
            .iter()
            .chain(&commit.step_parts)
            .collect();
        let (files_after, bytes_after) = self.sizes(after.into_iter())?;
        Ok(CompactStats {
            files_before,
            files_after,
            bytes_before,
            bytes_after,
            rows_rewritten,
        })
    }

    /// Commit the compaction's manifest as the number after the last commit it read. When an
    /// append has taken that number meanwhile, the commit fails
    /// ([`RecorderError::ConcurrentCommit`]) and the compaction changes nothing: superseding
    /// only when nothing was committed since it read the manifests is what makes sure no
    /// commit is superseded unread.
    fn commit_compaction(&self, commit: &Commit) -> Result<()> {
        // A build that knows only version 1 would read the superseded commits too.
        super::raise_marker(&self.root)?;
        let manifest = self
            .root
            .join(COMMITS_DIR)
            .join(commit_file_name(commit.seq));
        let text = serde_json::to_string_pretty(commit).map_err(|e| parquet_error(&manifest, e))?;
        // Not in `created`: when this fails, the file there is another writer's commit.
        commit_new(&manifest, text.as_bytes())
    }

    /// Write the compacted parts and list them in `commit`.
    fn write_compacted(
        &self,
        trace_parts: &BTreeMap<String, Vec<&PartInfo>>,
        step_parts: &BTreeMap<String, Vec<&PartInfo>>,
        commit: &mut Commit,
        created: &mut Vec<PathBuf>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<()> {
        let mut dirs = BTreeSet::new();
        for (partition, parts) in trace_parts {
            if let [only] = parts.as_slice() {
                commit.trace_parts.push((*only).clone());
                continue;
            }
            let mut sink = PartSink::new(self, "traces", partition, commit.seq, trace_schema());
            self.compact_traces(parts, &mut sink, created)?;
            commit.trace_parts.extend(sink.finish(created)?);
            dirs.insert(format!("traces/{partition}"));
        }
        for (partition, parts) in step_parts {
            if let [only] = parts.as_slice() {
                commit.step_parts.push((*only).clone());
                continue;
            }
            let mut sink = PartSink::new(self, "steps", partition, commit.seq, step_schema());
            self.compact_steps(parts, &mut sink, created, progress)?;
            commit.step_parts.extend(sink.finish(created)?);
            dirs.insert(format!("steps/{partition}"));
        }
        for dir in &dirs {
            sync_dir(&dir.split('/').fold(self.root.clone(), |p, s| p.join(s)))?;
        }
        Ok(())
    }

    /// One partition's trace rows, the newest row of each trace only, in storage order.
    fn compact_traces(
        &self,
        parts: &[&PartInfo],
        sink: &mut PartSink<'_>,
        created: &mut Vec<PathBuf>,
    ) -> Result<()> {
        let at = sink.dir();
        let batches = self.read_parts(parts, &sink.schema)?;
        // Parts in commit order, rows in file order: the last row of the highest write
        // sequence wins, as when the store reads them.
        let mut newest: HashMap<&str, (u64, u64, RowAt)> = HashMap::new();
        for (b, batch) in batches.iter().enumerate() {
            let ids = string_column(batch, "trace_id", &at)?;
            let trace_seq = u64_column(batch, TRACE_SEQ, &at)?;
            let write_seq = u64_column(batch, WRITE_SEQ, &at)?;
            for row in 0..batch.num_rows() {
                let entry = (write_seq.value(row), trace_seq.value(row), (b, row));
                let id = ids.value(row);
                if newest.get(id).is_none_or(|seen| entry.0 >= seen.0) {
                    newest.insert(id, entry);
                }
            }
        }
        let mut rows: Vec<(u64, RowAt)> = newest
            .into_values()
            .map(|(_, trace_seq, at)| (trace_seq, at))
            .collect();
        rows.sort_unstable_by_key(|(trace_seq, _)| *trace_seq);
        let order: Vec<RowAt> = rows.into_iter().map(|(_, at)| at).collect();
        for chunk in order.chunks(MERGE_BATCH_ROWS) {
            sink.write(&gather(&batches, chunk, &sink.schema, &at)?, created)?;
        }
        Ok(())
    }

    /// One partition's step rows in `(trace_seq, step_index)` order. Parts whose ordinal
    /// ranges do not overlap are copied batch by batch; those that do are merged in memory,
    /// a group of overlapping parts at a time.
    fn compact_steps(
        &self,
        parts: &[&PartInfo],
        sink: &mut PartSink<'_>,
        created: &mut Vec<PathBuf>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<()> {
        let at = sink.dir();
        for group in overlapping_groups(parts) {
            if let [only] = group.as_slice() {
                let (path, reader) = self.reader(only, None, None)?;
                for batch in reader {
                    let batch = batch.map_err(|e| parquet_error(&path, e))?;
                    check_columns(&path, &batch.schema(), &sink.schema)?;
                    let batch = RecordBatch::try_new(sink.schema.clone(), batch.columns().to_vec())
                        .map_err(|e| parquet_error(&path, e))?;
                    sink.write(&batch, created)?;
                    progress(batch.num_rows() as u64);
                }
                continue;
            }
            let batches = self.read_parts(&group, &sink.schema)?;
            let mut order: Vec<((u64, u32), RowAt)> = Vec::new();
            for (b, batch) in batches.iter().enumerate() {
                let trace_seq = u64_column(batch, TRACE_SEQ, &at)?;
                let step_index = u32_column(batch, "step_index", &at)?;
                order.extend(
                    (0..batch.num_rows())
                        .map(|row| ((trace_seq.value(row), step_index.value(row)), (b, row))),
                );
            }
            order.sort_unstable_by_key(|(key, _)| *key);
            let order: Vec<RowAt> = order.into_iter().map(|(_, at)| at).collect();
            for chunk in order.chunks(MERGE_BATCH_ROWS) {
                sink.write(&gather(&batches, chunk, &sink.schema, &at)?, created)?;
                progress(chunk.len() as u64);
            }
        }
        Ok(())
    }

    /// Every batch of `parts`, in order, checked against the table's columns.
    fn read_parts(&self, parts: &[&PartInfo], schema: &SchemaRef) -> Result<Vec<RecordBatch>> {
        let mut batches = Vec::new();
        for part in parts {
            let (path, reader) = self.reader(part, None, None)?;
            check_columns(&path, &reader.schema(), schema)?;
            for batch in reader {
                batches.push(batch.map_err(|e| parquet_error(&path, e))?);
            }
        }
        Ok(batches)
    }

    /// How many files `parts` are and their bytes on disk.
    fn sizes<'a>(&self, parts: impl Iterator<Item = &'a PartInfo>) -> Result<(u64, u64)> {
        let (mut files, mut bytes) = (0, 0);
        for part in parts {
            let path = self.part_path(part);
            let metadata = fs::metadata(&path).map_err(|e| io_error(&path, e))?;
            files += 1;
            bytes += metadata.len();
        }
        Ok((files, bytes))
    }
}

/// Parts grouped by partition, each group in commit order.
fn by_partition<'a>(
    parts: impl Iterator<Item = &'a PartInfo>,
) -> BTreeMap<String, Vec<&'a PartInfo>> {
    let mut grouped: BTreeMap<String, Vec<&PartInfo>> = BTreeMap::new();
    for part in parts {
        grouped
            .entry(part.partition.clone())
            .or_default()
            .push(part);
    }
    grouped
}

/// Steps parts ordered by their first ordinal and grouped where their ordinal ranges overlap
/// (a trace whose steps came in several appends), in commit order within a group.
fn overlapping_groups<'a>(parts: &[&'a PartInfo]) -> Vec<Vec<&'a PartInfo>> {
    let mut ordered: Vec<(usize, &PartInfo)> = parts.iter().copied().enumerate().collect();
    ordered.sort_by_key(|(commit_order, part)| (part.min_trace_seq, *commit_order));
    let mut groups: Vec<(u64, Vec<(usize, &PartInfo)>)> = Vec::new();
    for (commit_order, part) in ordered {
        match groups.last_mut() {
            Some((max, group)) if part.min_trace_seq <= *max => {
                *max = (*max).max(part.max_trace_seq);
                group.push((commit_order, part));
            }
            _ => groups.push((part.max_trace_seq, vec![(commit_order, part)])),
        }
    }
    groups
        .into_iter()
        .map(|(_, mut group)| {
            group.sort_by_key(|(commit_order, _)| *commit_order);
            group.into_iter().map(|(_, part)| part).collect()
        })
        .collect()
}

/// The rows at `order` gathered from `batches` into one batch.
fn gather(
    batches: &[RecordBatch],
    order: &[RowAt],
    schema: &SchemaRef,
    at: &Path,
) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> = (0..schema.fields().len())
        .map(|c| {
            let arrays: Vec<&dyn Array> = batches.iter().map(|b| b.column(c).as_ref()).collect();
            interleave(&arrays, order)
        })
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| parquet_error(at, format!("cannot merge rows: {e}")))?;
    RecordBatch::try_new(schema.clone(), columns)
        .map_err(|e| parquet_error(at, format!("cannot merge rows: {e}")))
}

/// A part file's columns must be the table's, by name and type, in order.
fn check_columns(path: &Path, found: &SchemaRef, expected: &SchemaRef) -> Result<()> {
    let same = found.fields().len() == expected.fields().len()
        && found
            .fields()
            .iter()
            .zip(expected.fields())
            .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
    if same {
        return Ok(());
    }
    let names: Vec<&str> = found.fields().iter().map(|f| f.name().as_str()).collect();
    Err(RecorderError::CorruptStore {
        path: path.to_path_buf(),
        message: format!(
            "its columns ({}) are not the table's; compaction leaves the store as it was",
            names.join(", ")
        ),
    })
}

fn column<'b, T: 'static>(batch: &'b RecordBatch, name: &str, at: &Path) -> Result<&'b T> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| parquet_error(at, format!("column {name} is missing or of another type")))
}

fn u64_column<'b>(batch: &'b RecordBatch, name: &str, at: &Path) -> Result<&'b UInt64Array> {
    column(batch, name, at)
}

fn u32_column<'b>(batch: &'b RecordBatch, name: &str, at: &Path) -> Result<&'b UInt32Array> {
    column(batch, name, at)
}

fn string_column<'b>(
    batch: &'b RecordBatch,
    name: &str,
    at: &Path,
) -> Result<&'b arrow::array::StringArray> {
    column(batch, name, at)
}

/// Where one partition's compacted rows go: part files of up to [`COMPACT_PART_ROWS`] rows,
/// a new one started when the current one is full.
struct PartSink<'s> {
    store: &'s ParquetStore,
    table: &'static str,
    partition: String,
    seq: u64,
    schema: SchemaRef,
    current: Option<(super::write::PartFile, PartInfo)>,
    done: Vec<PartInfo>,
}

impl<'s> PartSink<'s> {
    fn new(
        store: &'s ParquetStore,
        table: &'static str,
        partition: &str,
        seq: u64,
        schema: SchemaRef,
    ) -> Self {
        Self {
            store,
            table,
            partition: partition.to_owned(),
            seq,
            schema,
            current: None,
            done: Vec::new(),
        }
    }

    /// The partition's folder, which errors about its rows name.
    fn dir(&self) -> PathBuf {
        self.store.root.join(self.table).join(&self.partition)
    }

    fn write(&mut self, batch: &RecordBatch, created: &mut Vec<PathBuf>) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let seqs = u64_column(batch, TRACE_SEQ, &self.dir())?;
        if self
            .current
            .as_ref()
            .is_some_and(|(file, _)| file.rows >= COMPACT_PART_ROWS)
        {
            self.close(created)?;
        }
        let (file, info) = match &mut self.current {
            Some(open) => open,
            None => {
                let relative = format!(
                    "{}/{}/part-{:012}-{}.parquet",
                    self.table,
                    self.partition,
                    self.seq,
                    nonce()
                );
                let file = self.store.create_part(&relative, &self.schema, created)?;
                let info = PartInfo {
                    file: relative,
                    partition: self.partition.clone(),
                    rows: 0,
                    min_trace_seq: u64::MAX,
                    max_trace_seq: 0,
                };
                self.current.insert((file, info))
            }
        };
        if let Some(min) = arrow::compute::min(seqs) {
            info.min_trace_seq = info.min_trace_seq.min(min);
        }
        if let Some(max) = arrow::compute::max(seqs) {
            info.max_trace_seq = info.max_trace_seq.max(max);
        }
        file.write(batch)
    }

    fn close(&mut self, created: &mut Vec<PathBuf>) -> Result<()> {
        if let Some((file, mut info)) = self.current.take() {
            info.rows = file.rows;
            file.finish(created)?;
            self.done.push(info);
        }
        Ok(())
    }

    fn finish(mut self, created: &mut Vec<PathBuf>) -> Result<Vec<PartInfo>> {
        self.close(created)?;
        Ok(self.done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(name: &str, min: u64, max: u64) -> PartInfo {
        PartInfo {
            file: name.into(),
            partition: "date=2026-11-01".into(),
            rows: 1,
            min_trace_seq: min,
            max_trace_seq: max,
        }
    }

    #[test]
    fn parts_group_where_their_ordinal_ranges_overlap_and_keep_commit_order_inside() {
        let a = part("a", 0, 9);
        let b = part("b", 20, 29);
        let c = part("c", 5, 12);
        let d = part("d", 30, 30);
        let e = part("e", 13, 19);
        let groups = overlapping_groups(&[&a, &b, &c, &d, &e]);
        let names: Vec<Vec<&str>> = groups
            .iter()
            .map(|g| g.iter().map(|p| p.file.as_str()).collect())
            .collect();
        assert_eq!(names, [vec!["a", "c"], vec!["e"], vec!["b"], vec!["d"]]);
    }
}
