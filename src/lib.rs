//! # chainweaver
//!
//! Tools, flows, the executor, replay and verification, over the recorder's data model.

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub use chainweaver_analyzer as analyzer;
pub use chainweaver_recorder as recorder;
