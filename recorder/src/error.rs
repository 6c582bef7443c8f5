//! The recorder crate's one error type.

use std::path::PathBuf;

/// Everything that can go wrong in the recorder crate, with enough context to act on.
#[derive(Debug, thiserror::Error)]
pub enum RecorderError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("SQLite store {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("Parquet store {path}: {message}")]
    Parquet { path: PathBuf, message: String },
    /// Another process committed to the same Parquet dataset while this one prepared its
    /// commit (two writers); this commit wrote nothing.
    #[error(
        "Parquet store {path}: another process committed to the dataset meanwhile; nothing was written, run it again (one process writes a dataset at a time)"
    )]
    ConcurrentCommit { path: PathBuf },
    /// Data read back from a store is not what the store writes (a damaged or foreign file).
    #[error("store {path}: corrupt data: {message}")]
    CorruptStore { path: PathBuf, message: String },
    #[error(
        "store {path} has schema version {found}, newer than this build understands ({supported})"
    )]
    SchemaTooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error("trace {trace_id}: {message}")]
    InvalidTrace { trace_id: String, message: String },
    #[error("trace {trace_id}, step {step_index}: {message}")]
    InvalidStep {
        trace_id: String,
        step_index: u32,
        message: String,
    },
    #[error("redaction pattern {pattern:?} is not a valid regular expression: {message}")]
    RedactionPattern { pattern: String, message: String },
    #[error("{path}:{line}: {message}")]
    Import {
        path: PathBuf,
        line: u64,
        message: String,
    },
    /// A stored result document does not read as its kind's type.
    #[error("stored {kind} `{key}` cannot be read: {message}")]
    Document {
        kind: &'static str,
        key: String,
        message: String,
    },
    /// A request to object storage failed, or what it holds cannot be used.
    #[error("{url}: {message}")]
    ObjectStore { url: String, message: String },
    #[error("statistics: {0}")]
    Stats(String),
    #[error("the recorder's background writer stopped: {0}")]
    WriterGone(String),
    /// Rows handed to the writer together were not all stored (the batch holding them failed,
    /// or a row of it was invalid).
    #[error("rows were not stored: {0}")]
    NotStored(String),
    #[error(
        "the recorder dropped {steps} steps and {traces} trace rows after {attempts} failed commits: {source}"
    )]
    BatchDiscarded {
        traces: u64,
        steps: u64,
        attempts: u32,
        #[source]
        source: Box<RecorderError>,
    },
}

/// The recorder crate's result type.
pub type Result<T, E = RecorderError> = std::result::Result<T, E>;
