//! Errors of the sequential pattern miner.

use std::path::PathBuf;

/// Everything that can go wrong while loading or mining sequences.
#[derive(Debug, thiserror::Error)]
pub enum SpmError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A line of SPMF input is not a sequence of single-item itemsets.
    #[error("{source_name}:{line}: {message}")]
    Spmf {
        /// The file name, or `<input>` for in-memory text.
        source_name: String,
        /// 1-based line number.
        line: u64,
        /// What is wrong with the line.
        message: String,
    },
    /// The database holds more steps than 32-bit positions can address.
    #[error("too many steps for the miner: {steps} (the limit is {limit})")]
    TooLarge {
        /// Steps (plus one per sequence) that were asked for.
        steps: u64,
        /// The largest number supported.
        limit: u64,
    },
    /// An item label is not a number where a numeric label is needed.
    #[error("item label {label:?} is not a non-negative integer")]
    NonNumericLabel {
        /// The label.
        label: String,
    },
    /// A miner option is out of range.
    #[error("invalid mining option: {0}")]
    InvalidOption(String),
}
