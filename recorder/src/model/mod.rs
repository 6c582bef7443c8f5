//! The data model: everything ChainWeaver persists is defined here, once.
//!
//! - [`ObservedTrace`] / [`ObservedStep`]: recorded agent traffic.
//! - [`flow`]: flow definitions (plain data the executor interprets).
//! - [`candidate`]: mined patterns, bindings, candidates and verdicts.
//! - [`mcp`]: the shape of a recorded MCP tool call, shared by the recording proxy and the MCP adapter.
//! - [`otel`]: the metadata keys of traces and steps read from OpenTelemetry spans.
//! - [`split`]: which traces mining sees and which verification replays.
//! - [`dataset`]: the table and column names of the Parquet dataset that query engines read.
//! - [`DocumentKind`]: the kinds of result document a store keeps beside its traces; the typed
//!   [`Workspace`](crate::workspace::Workspace) reads and writes them.

pub mod candidate;
pub mod dataset;
mod document;
pub mod flow;
pub mod mcp;
pub mod otel;
pub mod split;
mod trace;

pub use document::DocumentKind;

pub use trace::{Metadata, ObservedStep, ObservedTrace, Timestamp, TraceWithSteps};
