//! The data model: everything ChainWeaver persists is defined here, once.
//!
//! - [`ObservedTrace`] / [`ObservedStep`]: recorded agent traffic.
//! - [`flow`]: flow definitions (plain data the executor interprets).
//! - [`candidate`]: mined patterns, bindings, candidates and verdicts.

pub mod candidate;
pub mod flow;
mod trace;

pub use trace::{Metadata, ObservedStep, ObservedTrace, Timestamp, TraceWithSteps};
