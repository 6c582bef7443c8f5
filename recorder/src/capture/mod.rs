//! Capture from a running program: the [`TraceRecorder`], redaction and sampling.
//!
//! - [`TraceRecorder`] / [`TraceHandle`] / [`StepGuard`]: record traces and steps through a
//!   background writer that commits in batches.
//! - [`redact`]: the [`RedactionPolicy`] applied to everything before it reaches a store.
//! - [`sample`]: deterministic sampling by trace id ([`SampleRate`]).

mod received;
mod recorder;
pub mod redact;
pub mod sample;
mod writer;

pub use self::received::{ReceivedStep, payload_from_text};
pub use self::recorder::{
    ABANDONED, OUTPUT_NOT_JSON, RecorderConfig, RecorderStats, StepBuilder, StepGuard, TraceHandle,
    TraceOptions, TraceRecorder,
};
pub use self::redact::{REDACTED, RedactionCounts, RedactionPolicy};
pub use self::sample::SampleRate;
#[cfg(test)]
mod test_store;
