//! # chainweaver-analyzer
//!
//! Mining: the tool sequences agents repeat, where each argument comes from, and the candidate
//! flows that follow. Everything here is a pure function over recorder model data.
//!
//! - [`spm`]: exact sequential pattern mining over interned tool sequences: contiguous patterns
//!   (with support per trace, occurrence counts, closed patterns and occurrence positions) and
//!   gapped patterns (any gap or a bounded `max_gap`), plus an SPMF reader for the standard
//!   benchmark data sets.
//! - [`infer`]: binding inference, where every input field of every pattern step comes from.
//! - [`candidate`]: a pattern plus its bindings proposed as a flow, with schemas and evidence.
//! - [`mine`]: the [`ChainAnalyzer`](mine::ChainAnalyzer), which runs all three over traces in
//!   memory ([`analyze`](mine::ChainAnalyzer::analyze)) or streamed from a trace store
//!   ([`analyze_store`](mine::ChainAnalyzer::analyze_store): mining reads only the tool
//!   columns, and only the traces of the sampled occurrences are loaded whole). Large patterns
//!   are read through an evenly spaced sample (`MineConfig::max_inference_occurrences`), and a
//!   pattern whose probe shows a step linked to no other is built from the probe alone
//!   (`MineConfig::probe_occurrences`): inference time goes to the flows that can be promoted.
//!
//! ```
//! use chainweaver_analyzer::mine::{ChainAnalyzer, MineConfig};
//! use chainweaver_recorder::model::{ObservedStep, ObservedTrace, TraceWithSteps};
//! use serde_json::json;
//!
//! // Three traces in which `find_user`'s output feeds `get_user`.
//! let traces: Vec<TraceWithSteps> = (0..3)
//!     .map(|i| {
//!         let id = format!("t{i}");
//!         let mut find = ObservedStep::new(&id, 0, "find_user", json!({"name": format!("n{i}")}));
//!         find.outputs = Some(json!({"user_id": format!("u{i}")}));
//!         let mut get = ObservedStep::new(&id, 1, "get_user", json!({"user_id": format!("u{i}")}));
//!         get.outputs = Some(json!({"email": format!("e{i}")}));
//!         TraceWithSteps { trace: ObservedTrace::new(&id, "example"), steps: vec![find, get] }
//!     })
//!     .collect();
//! let outcome = ChainAnalyzer::new(MineConfig::default()).analyze(&traces).unwrap();
//! assert_eq!(outcome.candidates[0].tools, ["find_user", "get_user"]);
//! ```

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod candidate;
pub mod engine;
pub mod error;
mod fast_hash;
pub mod fold;
pub mod infer;
pub mod loops;
pub mod mine;
mod parallel;
pub mod spm;
#[cfg(test)]
mod test_traffic;
mod tool_stream;

pub use error::{AnalyzerError, Result};
