//! # chainweaver-analyzer
//!
//! Mining: the tool sequences agents repeat, where each argument comes from, and the candidate
//! flows that follow. Everything here is a pure function over recorder model data.
//!
//! - [`spm`]: exact sequential pattern mining over interned tool sequences: contiguous patterns
//!   (with support per trace, occurrence counts, closed patterns and occurrence positions) and
//!   gapped patterns (any gap or a bounded `max_gap`), plus an SPMF reader for the standard
//!   benchmark data sets.

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod spm;
