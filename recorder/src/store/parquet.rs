//! Placeholder: the ParquetStore backend.

use std::path::{Path, PathBuf};

use crate::error::{RecorderError, Result};
use crate::model::{ObservedStep, ObservedTrace, TraceWithSteps};
use crate::store::{
    AppendStats, PageRequest, StepColumns, StoreCounts, TraceFilter, TracePage, TraceStore,
};

/// A store backend (not yet written).
#[derive(Debug)]
pub struct ParquetStore {
    path: PathBuf,
}

impl ParquetStore {
    /// Open or create the store at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        Ok(Self {
            path: path.to_path_buf(),
        })
    }

    fn missing(&self) -> RecorderError {
        RecorderError::Parquet {
            path: self.path.clone(),
            message: "not implemented".into(),
        }
    }
}

impl TraceStore for ParquetStore {
    fn append(&mut self, _: &[ObservedTrace], _: &[ObservedStep]) -> Result<AppendStats> {
        Err(self.missing())
    }
    fn list_traces(&self, _: &TraceFilter, _: &PageRequest) -> Result<TracePage> {
        Err(self.missing())
    }
    fn get_trace(&self, _: &str) -> Result<Option<TraceWithSteps>> {
        Err(self.missing())
    }
    fn for_each_trace(&self, _: &mut dyn FnMut(TraceWithSteps) -> Result<()>) -> Result<()> {
        Err(self.missing())
    }
    fn step_columns(&self, _: &TraceFilter) -> Result<StepColumns> {
        Err(self.missing())
    }
    fn counts(&self) -> Result<StoreCounts> {
        Err(self.missing())
    }
    fn put_document(&mut self, _: &str, _: &str, _: &serde_json::Value) -> Result<()> {
        Err(self.missing())
    }
    fn get_document(&self, _: &str, _: &str) -> Result<Option<serde_json::Value>> {
        Err(self.missing())
    }
    fn list_documents(&self, _: &str) -> Result<Vec<(String, serde_json::Value)>> {
        Err(self.missing())
    }
    fn delete_document(&mut self, _: &str, _: &str) -> Result<bool> {
        Err(self.missing())
    }
}
