//! # chainweaver-recorder
//!
//! The foundation of ChainWeaver: the data model, the trace stores and the ways traffic gets in.
//!
//! - [`model`]: [`ObservedTrace`](model::ObservedTrace) and [`ObservedStep`](model::ObservedStep)
//!   (what agents did), flow definitions, candidates and verdicts. Everything ChainWeaver persists
//!   is defined here once.
//! - [`store`]: the [`TraceStore`](store::TraceStore) trait with a SQLite backend (the embedded
//!   default) and a Parquet dataset backend, lossless between each other; with feature `s3`, a
//!   Parquet dataset in S3-compatible object storage (`ParquetStore::open_remote`).
//! - [`capture`]: the [`TraceRecorder`](capture::TraceRecorder), which records tool calls from a
//!   running program through a background writer, redacting secrets first.
//! - [`import`]: importers for the logs agents already write.
//! - `otlp`: OpenTelemetry trace exports (GenAI and OpenInference tool spans) read as tool calls
//!   (feature `otlp`, on by default).
//! - [`export`]: event logs for process-mining tools (XES, OCEL 2.0 JSON).
//! - [`stats`]: per-tool statistics computed with polars.
//!
//! ```
//! use chainweaver_recorder::model::{ObservedStep, ObservedTrace};
//! use chainweaver_recorder::store::{SqliteStore, TraceStore};
//! use serde_json::json;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let mut store = SqliteStore::open(&dir.path().join("chainweaver.db"))?;
//! let trace = ObservedTrace::new("t1", "example");
//! let step = ObservedStep::new("t1", 0, "get_user", json!({"id": 7}));
//! store.append(&[trace], &[step])?;
//! assert_eq!(store.counts()?.steps, 1);
//! # Ok(())
//! # }
//! ```

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod capture;
pub mod error;
pub mod export;
pub mod import;
pub mod model;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod scratch;
#[cfg(feature = "polars")]
pub mod stats;
pub mod store;
pub mod synth;
pub mod workspace;

pub use error::{RecorderError, Result};
