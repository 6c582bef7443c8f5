//! MCP, both ways: the tools of MCP servers as [`Tool`]s (inbound,
//! [`client`]), and registered flows and runtime chain tools served as MCP tools (outbound,
//! [`server`] over [`wire`]). See `docs/mcp.md`.
//!
//! This is the only module that names the MCP library's (`rmcp`) types; what crosses into the
//! rest of the crate is `serde_json::Value`, and call results are shaped by
//! [`recorder::model::mcp::tool_outputs`](chainweaver_recorder::model::mcp::tool_outputs), as the
//! recording proxy stores them.
//!
//! Protocol eras: the client probes `server/discover` (2026-07-28, per-request `_meta`) and falls
//! back to the `initialize` handshake for older servers; the server answers both `initialize`
//! (up to 2025-11-25) and `server/discover` with per-request metadata, as rmcp 3.11 does. On a
//! 2026-07-28 session, list-change notifications go only to the session that made the change
//! (rmcp delivers the others through `subscriptions/listen`, which is not wired here).
//! Streamable HTTP servers as tool sources (`url` in a manifest) are not supported in this
//! build: rmcp's HTTP client needs an HTTP client crate this project does not carry.

pub mod catalog;
pub mod client;
pub mod dynamic;
pub mod manifest;
pub mod server;
pub mod wire;

use crate::error::Result;
use crate::tool::Tool;

pub use client::McpClient;
pub use manifest::{McpServerEntry, McpServerSpec};
pub use server::{FlowServer, ServeConfig};

/// Connect to the server of a manifest entry and build its tools (blocking).
pub fn connect_tools(spec: &McpServerSpec) -> Result<Vec<Tool>> {
    McpClient::connect(spec)?.tools()
}
