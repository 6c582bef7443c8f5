//! # chainweaver-analyzer
//!
//! Mining: the tool sequences agents repeat, where each argument comes from, and the candidate
//! flows that follow. Everything here is a pure function over recorder model data.
//!
//! - [`infer`]: binding inference, where every input field of every pattern step comes from.
//! - [`candidate`]: a pattern plus its bindings proposed as a flow, with schemas and evidence.

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod candidate;
pub mod error;
pub mod infer;

pub use error::{AnalyzerError, Result};
