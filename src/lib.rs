//! # chainweaver
//!
//! Tools, flows, the executor, replay and verification, over the recorder's data model.
//!
//! - [`tool`]: [`Tool`](tool::Tool) (schema-validated callables) and command tools from a TOML
//!   manifest.
//! - [`flow`]: flow files (JSON / YAML) and chain tools read as flows, input and output
//!   mappings, and [`compile_flow`](flow::compile_flow) with its stable finding codes.
//! - [`executor`]: [`FlowExecutor`](executor::FlowExecutor), its records, events, step cache and
//!   checkpoints.
//! - [`registry`]: [`FlowRegistry`](registry::FlowRegistry), versions and lifecycle.
//! - [`replay`]: replay in verify and execute modes.
//! - [`chain_tool`]: chain tools (`chain_config`) run by the executor; reading them and their
//!   conversion to flows is in [`flow::chain`].
//! - [`mcp`]: MCP servers' tools as tools (inbound), flows and chain tools served over MCP
//!   (outbound); the only module that knows the MCP library.
//! - [`proxy`]: the MCP recording proxy (`chainweaver record`): relay a server's stdio and
//!   record its `tools/call` traffic as traces.
//! - [`verify`]: replay mined candidates against held-out traffic with recorded (cassette) or
//!   live tools, and decide their verdicts.

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub use chainweaver_analyzer as analyzer;
pub use chainweaver_recorder as recorder;

pub mod chain_tool;
pub mod collect;
pub mod error;
pub mod executor;
pub mod flow;
pub mod mcp;
pub mod pipeline;
pub mod proxy;
pub mod registry;
pub mod replay;
pub mod tool;
pub mod verify;

pub use error::{Error, Result};
