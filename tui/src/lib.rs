//! # chainweaver-tui
//!
//! The reviewer's terminal browser over a ChainWeaver store: traces, patterns, candidates,
//! verdicts and replay diffs. It reads the store and never runs tools.

#![deny(clippy::print_stdout, clippy::print_stderr)]
