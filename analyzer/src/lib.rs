//! # chainweaver-analyzer
//!
//! Mining: the tool sequences agents repeat, where each argument comes from, and the candidate
//! flows that follow. Everything here is a pure function over recorder model data.

#![deny(clippy::print_stdout, clippy::print_stderr)]
