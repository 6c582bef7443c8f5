//! Commits: the dataset marker, the manifest of each committed append, reading the manifests,
//! and removing the leftovers of appends that never committed.

use std::collections::HashSet;
use std::fs::{self, File, TryLockError};
use std::io::ErrorKind;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{COMMITS_DIR, ParquetStore, io_error, open_lock_file};
use crate::error::{RecorderError, Result};

/// The format marker at the dataset root.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Marker {
    pub(super) format: String,
    pub(super) version: i64,
}

/// One part file of a commit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct PartInfo {
    /// Path relative to the dataset root, `/`-separated.
    pub(super) file: String,
    /// The partition directory name, e.g. `date=2026-01-02`.
    pub(super) partition: String,
    pub(super) rows: u64,
    pub(super) min_trace_seq: u64,
    pub(super) max_trace_seq: u64,
}

/// The manifest of one committed append.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Commit {
    /// The append's write sequence number: 1, 2, 3, ...
    pub(super) seq: u64,
    /// Traces first stored by this append.
    pub(super) new_traces: u64,
    pub(super) new_steps: u64,
    pub(super) new_failed_steps: u64,
    pub(super) trace_parts: Vec<PartInfo>,
    pub(super) step_parts: Vec<PartInfo>,
    /// Set on a compaction's manifest: every commit up to this sequence number is superseded
    /// (its rows are in this commit's parts, its totals in this commit's), and is not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) compacts_through: Option<u64>,
}

pub(super) fn commit_file_name(seq: u64) -> String {
    format!("{seq:020}.json")
}

/// A part file's write sequence number, from its name (`part-<seq>-...` or a temporary
/// `.part-<seq>-...`).
pub(super) fn part_seq(name: &str) -> Option<u64> {
    let rest = name
        .strip_prefix('.')
        .unwrap_or(name)
        .strip_prefix("part-")?;
    rest.split('-').next()?.parse().ok()
}

/// The file a compaction holds locked while it runs (an advisory lock, released when its
/// process ends however it ends).
const COMPACT_LOCK: &str = "_compact.lock";
/// The file appends hold locked, shared, while they write parts, and a writer removing
/// leftovers holds alone.
const APPEND_LOCK: &str = "_append.lock";
/// How many times a torn listing of the manifests is read again before it is taken for a
/// missing manifest.
const LISTING_ATTEMPTS: u32 = 100;

impl ParquetStore {
    /// Lock the dataset for a compaction. A writer removing leftovers holds the lock for a
    /// moment, so this waits a few seconds before it fails, as it does while another
    /// compaction runs.
    pub(super) fn lock_compaction(&self) -> Result<File> {
        let waited = std::time::Instant::now();
        loop {
            if let Some(lock) = self.try_lock_compaction()? {
                return Ok(lock);
            }
            if waited.elapsed() > std::time::Duration::from_secs(5) {
                return Err(RecorderError::Parquet {
                    path: self.root.join(COMPACT_LOCK),
                    message: "another process is compacting this dataset; run it again once \
                              that is done"
                        .into(),
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// The compaction lock, or `None` while a compaction holds it. A writer removes leftover
    /// files only while holding it: a running compaction's parts are not committed yet.
    pub(super) fn try_lock_compaction(&self) -> Result<Option<File>> {
        self.try_lock(COMPACT_LOCK, File::try_lock)
    }

    /// Hold the append lock shared while this writer's parts are not committed yet: several
    /// appends hold it at once, and no writer removes leftovers meanwhile. Waits while one
    /// does (a listing and a few deletions).
    pub(super) fn lock_appending(&self) -> Result<File> {
        let (path, file) = self.lock_file(APPEND_LOCK)?;
        file.lock_shared().map_err(|e| io_error(&path, e))?;
        Ok(file)
    }

    /// The append lock held alone, or `None` while an append is writing parts (which would
    /// pass for leftovers until it commits).
    pub(super) fn try_lock_appends(&self) -> Result<Option<File>> {
        self.try_lock(APPEND_LOCK, File::try_lock)
    }

    fn try_lock(
        &self,
        name: &str,
        lock: fn(&File) -> std::result::Result<(), TryLockError>,
    ) -> Result<Option<File>> {
        let (path, file) = self.lock_file(name)?;
        match lock(&file) {
            Ok(()) => Ok(Some(file)),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(io_error(&path, e)),
        }
    }

    fn lock_file(&self, name: &str) -> Result<(std::path::PathBuf, File)> {
        let path = self.root.join(name);
        let file = open_lock_file(&path)?;
        Ok((path, file))
    }

    /// The commits that make up the dataset, oldest first: every committed append since the
    /// last compaction, which comes first.
    pub(super) fn commits(&self) -> Result<Vec<Arc<Commit>>> {
        let mut commits = self.every_commit()?;
        if let Some(through) = commits.iter().filter_map(|c| c.compacts_through).max() {
            commits.retain(|c| c.seq > through);
        }
        Ok(commits)
    }

    /// Every manifest in `_commits/`, superseded ones included, oldest first.
    ///
    /// A listing is not a snapshot: made while another process commits, or while a compaction
    /// removes the manifests it superseded, it can hold a manifest and miss the one committed
    /// just before it, or name one that is gone when read. So it is read again until the live
    /// commits' numbers run without a gap from the one after the newest `compacts_through`
    /// and every manifest it names was read.
    pub(super) fn every_commit(&self) -> Result<Vec<Arc<Commit>>> {
        for _ in 0..LISTING_ATTEMPTS {
            if let Some(commits) = self.list_commits()? {
                let through = commits
                    .iter()
                    .filter_map(|c| c.compacts_through)
                    .max()
                    .unwrap_or(0);
                let whole = commits
                    .iter()
                    .filter(|c| c.seq > through)
                    .zip(through + 1..)
                    .all(|(c, expected)| c.seq == expected);
                if whole {
                    return Ok(commits);
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        Err(RecorderError::CorruptStore {
            path: self.root.join(COMMITS_DIR),
            message: "a commit manifest is missing: the commit numbers have a gap".into(),
        })
    }

    /// One listing of `_commits/`, sorted; `None` when a manifest it named was gone when read.
    fn list_commits(&self) -> Result<Option<Vec<Arc<Commit>>>> {
        let dir = self.root.join(COMMITS_DIR);
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Some(Vec::new())),
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
            let text = match fs::read_to_string(&file) {
                Ok(text) => text,
                Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(io_error(&file, e)),
            };
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
        Ok(Some(commits))
    }

    /// Delete the manifests a compaction superseded (it deletes them itself once committed;
    /// this finishes the job after a crash).
    pub(super) fn remove_superseded(&self) -> Result<()> {
        let every = self.every_commit()?;
        let Some(through) = every.iter().filter_map(|c| c.compacts_through).max() else {
            return Ok(());
        };
        let mut cache = self
            .manifests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for commit in every.iter().filter(|c| c.seq <= through) {
            let file = self
                .root
                .join(COMMITS_DIR)
                .join(commit_file_name(commit.seq));
            match fs::remove_file(&file) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(io_error(&file, e)),
            }
            cache.remove(&commit.seq);
        }
        Ok(())
    }

    /// Delete part files no live manifest lists whose write sequence is not newer than the last
    /// commit: leftovers of an append that failed or crashed before its commit point, and the
    /// parts a compaction replaced.
    pub(super) fn remove_uncommitted(&self, commits: &[Arc<Commit>], last_seq: u64) -> Result<()> {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_names_carry_their_sequence() {
        assert_eq!(part_seq("part-000000000012-abc.parquet"), Some(12));
        assert_eq!(part_seq(".part-000000000003-abc.parquet.tmp"), Some(3));
        assert_eq!(part_seq("other.parquet"), None);
    }
}
