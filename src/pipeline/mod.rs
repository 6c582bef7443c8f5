//! The workflow behind `analyze`, `mine` and `verify`, as library code: import agent logs,
//! mine the traces a split leaves to mining, replay every candidate on the traces it holds out,
//! and report. The command-line modules only parse flags, call these and render the typed
//! results; tests call them directly.
//!
//! Every step streams from the store: mining reads the tool-name columns and loads whole
//! traces only for the occurrences binding inference samples; verification finds held-out
//! occurrences by tool name and loads only the traces it replays. Results are written through
//! the typed [`Workspace`](chainweaver_recorder::workspace::Workspace), a mining run's in one
//! change.
//!
//! ```
//! use chainweaver::pipeline::{self, MineRequest, NoProgress, ReplayTools, VerifyRequest};
//! use chainweaver_recorder::store::{SqliteStore, TraceStore};
//! use chainweaver_recorder::synth::{Generator, GeneratorConfig};
//! use chainweaver_recorder::workspace::Workspace;
//!
//! let dir = tempfile::tempdir().expect("temp dir");
//! let mut store = SqliteStore::open(&dir.path().join("chainweaver.db")).expect("store");
//! let traffic: Vec<_> =
//!     Generator::new(GeneratorConfig { traces: 400, seed: 7, ..GeneratorConfig::default() })
//!         .collect();
//! let steps: Vec<_> = traffic.iter().flat_map(|t| t.steps.clone()).collect();
//! let traces: Vec<_> = traffic.iter().map(|t| t.trace.clone()).collect();
//! store.append(&traces, &steps).expect("append");
//!
//! // Mine 80% of the traces, then replay every candidate on the other 20%.
//! let mined = pipeline::mine_store(&mut store, &MineRequest::default(), &NoProgress)
//!     .expect("mine");
//! let checked = pipeline::verify_store(&mut store, &VerifyRequest::default(), &NoProgress)
//!     .expect("verify");
//! assert_eq!(checked.len(), mined.candidates.len());
//! assert_eq!(store.verdicts().expect("verdicts").len(), checked.len());
//! ```

mod analyze;
mod import;
mod mine;
mod verify;

pub use analyze::{AnalyzeReport, AnalyzeRequest, Coverage, RejectedCounts, ReportEntry, analyze};
pub use import::{
    FileOutcome, FileStatus, ImportRequest, ImportSummary, ImportTotals, LOG_EXTENSIONS,
    import_files,
};
#[cfg(feature = "datafusion")]
pub use mine::{EnginePatterns, engine_patterns};
pub use mine::{MineRequest, Miner, mine_store};
pub use verify::{Checked, ReplayTools, VerifyRequest, find_candidate, verify_store};

/// What a long step reports as it goes, for a progress bar. Every method has a default that
/// does nothing ([`NoProgress`]).
pub trait Progress: Sync {
    /// A phase begins: `what` it does, and its `total` in `unit`s when known.
    fn begin(&self, what: &str, total: Option<u64>, unit: Unit) {
        let _ = (what, total, unit);
    }
    /// Work done so far in the current phase.
    fn position(&self, done: u64) {
        let _ = done;
    }
    /// One more unit done in the current phase.
    fn advance(&self) {}
    /// The current phase is over.
    fn end(&self) {}
    /// Something worth telling a person as it happens (a rejected record, ...).
    fn note(&self, text: &str) {
        let _ = text;
    }
    /// Something went wrong and was recovered from (a query ran again, ...): a person should
    /// hear of it even when the output is for a script.
    fn warn(&self, text: &str) {
        let _ = text;
    }
}

/// What a phase counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Bytes,
    Items,
}

/// A [`Progress`] that reports nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {}
