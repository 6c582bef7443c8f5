//! Checkpoints: the state of a run after each completed step (and each completed iteration of a
//! map step), so a crashed run resumes without running completed steps or iterations again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use chainweaver_recorder::model::Timestamp;

use crate::error::{Error, Result};
use crate::executor::record::StepRecord;
use crate::tool::JsonObject;

/// What one completed step contributed to the context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletedStep {
    pub step_index: usize,
    /// The outputs merged into the context (empty for a skipped failure).
    pub merged: JsonObject,
}

/// One completed iteration of a map step that has not completed as a whole yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletedIteration {
    pub step_index: usize,
    /// The element index in the step's list.
    pub iteration: usize,
    /// The iteration's result slot: its output after `output_mapping`, or `null` for a failure
    /// `on_error: skip` let through.
    pub slot: Value,
}

/// A run's progress. Dynamic parameters are not in it: pass them again to resume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub flow_name: String,
    pub flow_version: String,
    pub trace_id: String,
    pub started_at: Timestamp,
    pub initial_input: JsonObject,
    /// Completed steps in completion order.
    pub completed: Vec<CompletedStep>,
    /// Their records (same order), and those of the iterations in `iterations`.
    pub records: Vec<StepRecord>,
    /// Completed iterations of map steps not completed yet: a resumed run runs only the
    /// other iterations of such a step. Empty (and absent from the JSON) outside map steps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub iterations: Vec<CompletedIteration>,
}

/// Where checkpoints go. Implementations must make `save` atomic: a crash during a save leaves
/// the previous checkpoint readable.
pub trait CheckpointSink: Send + Sync {
    fn save(&self, checkpoint: &Checkpoint) -> Result<()>;
    fn load(&self, trace_id: &str) -> Result<Option<Checkpoint>>;
    /// Forget a trace's checkpoint (after the run completed).
    fn clear(&self, trace_id: &str) -> Result<()>;
}

/// Checkpoints in memory.
#[derive(Debug, Default)]
pub struct MemoryCheckpoints {
    saved: Mutex<HashMap<String, Checkpoint>>,
}

impl MemoryCheckpoints {
    pub fn new() -> Self {
        Self::default()
    }
    /// Trace ids with a checkpoint.
    pub fn trace_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .saved
            .lock()
            .map(|s| s.keys().cloned().collect())
            .unwrap_or_default();
        ids.sort();
        ids
    }
}

fn poisoned(trace_id: &str) -> Error {
    Error::Checkpoint {
        trace_id: trace_id.to_string(),
        message: "checkpoint store lock poisoned".into(),
    }
}

impl CheckpointSink for MemoryCheckpoints {
    fn save(&self, checkpoint: &Checkpoint) -> Result<()> {
        self.saved
            .lock()
            .map_err(|_| poisoned(&checkpoint.trace_id))?
            .insert(checkpoint.trace_id.clone(), checkpoint.clone());
        Ok(())
    }
    fn load(&self, trace_id: &str) -> Result<Option<Checkpoint>> {
        Ok(self
            .saved
            .lock()
            .map_err(|_| poisoned(trace_id))?
            .get(trace_id)
            .cloned())
    }
    fn clear(&self, trace_id: &str) -> Result<()> {
        self.saved
            .lock()
            .map_err(|_| poisoned(trace_id))?
            .remove(trace_id);
        Ok(())
    }
}

/// Checkpoints as JSON files `<dir>/<trace id>.json`, replaced atomically (write, then rename).
#[derive(Debug, Clone)]
pub struct FileCheckpoints {
    dir: PathBuf,
}

impl FileCheckpoints {
    /// Use (and create) `dir`.
    pub fn new(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(Self {
            dir: dir.to_path_buf(),
        })
    }

    fn path(&self, trace_id: &str) -> Result<PathBuf> {
        if trace_id.is_empty()
            || !trace_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(Error::Checkpoint {
                trace_id: trace_id.to_string(),
                message: "trace ids of file checkpoints may hold only letters, digits, - and _"
                    .into(),
            });
        }
        Ok(self.dir.join(format!("{trace_id}.json")))
    }
}

impl CheckpointSink for FileCheckpoints {
    fn save(&self, checkpoint: &Checkpoint) -> Result<()> {
        let path = self.path(&checkpoint.trace_id)?;
        let temp = path.with_extension("json.tmp");
        let text = serde_json::to_vec_pretty(checkpoint).map_err(|err| Error::Checkpoint {
            trace_id: checkpoint.trace_id.clone(),
            message: err.to_string(),
        })?;
        let io = |source| Error::Io {
            path: path.clone(),
            source,
        };
        std::fs::write(&temp, text).map_err(io)?;
        std::fs::rename(&temp, &path).map_err(io)
    }

    fn load(&self, trace_id: &str) -> Result<Option<Checkpoint>> {
        let path = self.path(trace_id)?;
        let text = match std::fs::read(&path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(Error::Io { path, source }),
        };
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|err| Error::Checkpoint {
                trace_id: trace_id.to_string(),
                message: format!("{}: {err}", path.display()),
            })
    }

    fn clear(&self, trace_id: &str) -> Result<()> {
        let path = self.path(trace_id)?;
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(Error::Io { path, source }),
        }
    }
}
