//! The analyzer crate's one error type.

/// Everything that can go wrong in the analyzer crate, with enough context to act on.
#[derive(Debug, thiserror::Error)]
pub enum AnalyzerError {
    /// A pattern occurrence does not fit the traces it claims to index.
    #[error("pattern {pattern}, occurrence {occurrence}: {message}")]
    InvalidOccurrence {
        pattern: String,
        occurrence: usize,
        message: String,
    },
    /// A binding handed in from outside that does not fit its pattern.
    #[error("pattern {pattern}, step {step}, field {field}: {message}")]
    InvalidBinding {
        pattern: String,
        step: usize,
        field: String,
        message: String,
    },
    /// A pattern that cannot be analysed at all (no steps, no occurrences).
    #[error("pattern {pattern}: {message}")]
    InvalidPattern { pattern: String, message: String },
    /// The pattern miner failed (bad SPMF input, too many steps).
    #[error(transparent)]
    Mining(#[from] crate::spm::SpmError),
    /// Reading traces from a store failed (the streaming path).
    #[error(transparent)]
    Store(#[from] chainweaver_recorder::RecorderError),
    /// A query engine failed (`engine`): which engine, what it was reading, and its message.
    #[error("{engine} over {source_name}: {message}")]
    Engine {
        engine: &'static str,
        source_name: String,
        message: String,
    },
    /// A store changed while it was being analysed (a trace listed by the slim pass is gone).
    #[error("trace {trace_id}: {message}")]
    StoreChanged { trace_id: String, message: String },
}

/// The analyzer crate's result type.
pub type Result<T, E = AnalyzerError> = std::result::Result<T, E>;
