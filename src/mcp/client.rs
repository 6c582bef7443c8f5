//! Inbound: an MCP server's tools as [`Tool`]s.
//!
//! [`McpClient::connect`] starts the server (or reaches its URL), negotiates the protocol era
//! (`server/discover` first, the `initialize` handshake when the server is of the older era),
//! and lists its tools; [`McpClient::tools`] turns each into a [`Tool`] whose async function
//! calls it. The connection lives on the tools' background runtime (one thread for every client),
//! so tools built here work from any caller, blocking or async.

use std::process::Stdio;
use std::sync::{Arc, Mutex};

use rmcp::RoleClient;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::process::{Child, ChildStdout};

use chainweaver_recorder::model::mcp::{CallFailure, tool_outputs, unstructured};

use super::manifest::{Endpoint, McpServerSpec, is_http_url, prefixed};
use crate::error::{Error, Result};
use crate::tool::{JsonObject, Tool, ToolFailure, ToolFn};

/// Run `future` to completion on the background runtime, from any context (a caller inside another
/// runtime included).
fn block_on_mcp<F, T>(future: F) -> Result<T>
where
    F: Future<Output = Result<T>> + Send + 'static,
    T: Send + 'static,
{
    let runtime = crate::tool::background::runtime()?;
    let handle = runtime.spawn(future);
    let joined = std::thread::scope(|scope| {
        scope
            .spawn(|| runtime.block_on(handle))
            .join()
            .map_err(|_| Error::Runtime("the MCP connection thread panicked".into()))
    })?;
    joined.map_err(|err| Error::Runtime(format!("the MCP connection task failed: {err}")))?
}

/// One connection to an MCP server.
pub struct McpClient {
    spec: McpServerSpec,
    service: RunningService<RoleClient, ClientConfig>,
    /// The server's tools, as `tools/list` returned them.
    listed: Vec<Value>,
    /// Why the server's output was cut off, when it wrote a line that is not JSON.
    broken: Arc<Mutex<Option<String>>>,
    /// The server process (killed when the client is dropped).
    _child: Option<Child>,
}

/// The server's stdout as rmcp reads it, checked line by line on the way: rmcp skips a line
/// that is not JSON, so a call answered with one would wait for its timeout. Such a line ends
/// the session at once instead (rmcp then sees the stream close), and its reason is kept in
/// `broken` for the calls' errors.
fn checked_lines(stdout: ChildStdout, broken: Arc<Mutex<Option<String>>>) -> DuplexStream {
    let (reader, mut writer) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdout);
        let mut line = Vec::new();
        let mut number: u64 = 0;
        loop {
            line.clear();
            match lines.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => number += 1,
            }
            let text = line.trim_ascii();
            if !text.is_empty()
                && let Err(err) = serde_json::from_slice::<serde::de::IgnoredAny>(text)
            {
                if let Ok(mut slot) = broken.lock() {
                    *slot = Some(format!(
                        "the server wrote line {number} of its output that is not JSON ({err})"
                    ));
                }
                break;
            }
            if writer.write_all(&line).await.is_err() {
                break;
            }
        }
    });
    reader
}

fn broken_reason(broken: &Mutex<Option<String>>) -> Option<String> {
    broken.lock().ok().and_then(|slot| slot.clone())
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("server", &self.spec.name)
            .field("tools", &self.listed.len())
            .finish_non_exhaustive()
    }
}

fn mcp_error(spec: &McpServerSpec, message: String) -> Error {
    Error::Mcp {
        server: spec.name.clone(),
        message: format!("{message} (manifest {})", spec.manifest.display()),
    }
}

impl McpClient {
    /// Connect and list the server's tools (blocking).
    pub fn connect(spec: &McpServerSpec) -> Result<Arc<Self>> {
        let spec = spec.clone();
        block_on_mcp(async move { Self::connect_async(spec).await.map(Arc::new) })
    }

    async fn connect_async(spec: McpServerSpec) -> Result<Self> {
        let config = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("chainweaver", env!("CARGO_PKG_VERSION")),
        );
        let lifecycle = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        };
        let broken = Arc::new(Mutex::new(None));
        let child: Option<Child>;
        let service = match &spec.endpoint {
            Endpoint::Command {
                program,
                args,
                env,
                dir,
            } => {
                let mut command = tokio::process::Command::new(program);
                command
                    .args(args)
                    .envs(env)
                    .current_dir(dir)
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::inherit())
                    .kill_on_drop(true);
                let cannot_start = |err: &dyn std::fmt::Display| {
                    mcp_error(
                        &spec,
                        format!("cannot start `{}`: {err}", program.display()),
                    )
                };
                let mut spawned = command.spawn().map_err(|err| cannot_start(&err))?;
                let (Some(stdin), Some(stdout)) = (spawned.stdin.take(), spawned.stdout.take())
                else {
                    return Err(cannot_start(&"its stdin or stdout is not a pipe"));
                };
                child = Some(spawned);
                let stdout = checked_lines(stdout, Arc::clone(&broken));
                let started = config
                    .serve_with_lifecycle((stdout, stdin), lifecycle)
                    .await;
                started.map_err(|err| {
                    let reason = broken_reason(&broken).unwrap_or_else(|| err.to_string());
                    mcp_error(&spec, format!("the session did not start: {reason}"))
                })?
            }
            Endpoint::Url(url) => {
                child = None;
                // Checked when a manifest is read; a spec built in code is checked here.
                if !is_http_url(url) {
                    return Err(mcp_error(
                        &spec,
                        format!("url `{url}` is not an http(s) URL"),
                    ));
                }
                let transport = StreamableHttpClientTransport::from_uri(url.as_str());
                config
                    .serve_with_lifecycle(transport, lifecycle)
                    .await
                    .map_err(|err| {
                        mcp_error(
                            &spec,
                            format!(
                                "url `{url}`: the session did not start: {err}{}",
                                if url.starts_with("https://") {
                                    "; the server's certificate must be trusted by this system (for a private authority, point SSL_CERT_FILE at its PEM file)"
                                } else {
                                    ""
                                }
                            ),
                        )
                    })?
            }
        };
        let tools = service
            .peer()
            .list_all_tools()
            .await
            .map_err(|err| mcp_error(&spec, format!("tools/list failed: {err}")))?;
        let listed = tools
            .into_iter()
            .filter_map(|tool| serde_json::to_value(tool).ok())
            .collect();
        Ok(Self {
            spec,
            service,
            listed,
            broken,
            _child: child,
        })
    }

    /// The server's name in the manifest.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The server's tools as `tools/list` returned them.
    pub fn listed_tools(&self) -> &[Value] {
        &self.listed
    }

    /// The protocol version the session runs, as the server's answer named it.
    pub fn protocol_version(&self) -> Option<String> {
        let info = self.service.peer().peer_info()?;
        serde_json::to_value(&*info)
            .ok()?
            .get("protocolVersion")?
            .as_str()
            .map(str::to_string)
    }

    /// Send one `tools/call` and return the `CallToolResult` as JSON. A dropped future
    /// cancels the request at the server (`notifications/cancelled`).
    pub async fn call(&self, tool: &str, arguments: JsonObject) -> Result<Value, ServiceError> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = Some(arguments.into_iter().collect());
        let result = self.service.peer().call_tool(params).await?;
        Ok(serde_json::to_value(result).unwrap_or(Value::Null))
    }

    /// Each listed tool (or those the manifest names) as a [`Tool`].
    pub fn tools(self: &Arc<Self>) -> Result<Vec<Tool>> {
        let mut tools = Vec::new();
        if let Some(only) = &self.spec.only {
            for name in only {
                if !self.listed.iter().any(|t| t["name"] == json!(name)) {
                    return Err(mcp_error(
                        &self.spec,
                        format!("the server has no tool `{name}` (manifest `tools`)"),
                    ));
                }
            }
        }
        for listed in &self.listed {
            let Some(remote) = listed.get("name").and_then(Value::as_str) else {
                continue;
            };
            if let Some(only) = &self.spec.only
                && !only.iter().any(|n| n == remote)
            {
                continue;
            }
            tools.push(self.tool(remote, listed)?);
        }
        Ok(tools)
    }

    fn tool(self: &Arc<Self>, remote: &str, listed: &Value) -> Result<Tool> {
        let name = prefixed(self.spec.prefix.as_deref(), remote);
        let input_schema = listed
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(crate::tool::any_object_schema);
        let declared_output = listed
            .get("outputSchema")
            .filter(|s| s.is_object())
            .cloned();
        let has_output_schema = declared_output.is_some();
        let output_schema = declared_output.unwrap_or_else(unstructured_schema);
        let client = Arc::clone(self);
        let remote_name = remote.to_string();
        let function = ToolFn::Async(Arc::new(move |input: JsonObject| {
            let client = Arc::clone(&client);
            let remote = remote_name.clone();
            Box::pin(async move { client.invoke(&remote, input, has_output_schema).await })
        }));
        Tool::builder(name.clone(), function)
            .description(
                listed
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            )
            .input_schema(strip_meta_schema(input_schema))
            .output_schema(strip_meta_schema(output_schema))
            .timeout_seconds(Some(self.spec.timeout_seconds))
            .cacheable(
                self.spec
                    .cacheable
                    .iter()
                    .any(|c| c == remote || *c == name),
            )
            .read_only(read_only_from_annotations(listed.get("annotations")))
            .build()
            .map_err(|err| mcp_error(&self.spec, format!("tool `{remote}`: {err}")))
    }

    async fn invoke(
        &self,
        tool: &str,
        input: JsonObject,
        has_output_schema: bool,
    ) -> Result<Value, ToolFailure> {
        let server = &self.spec.name;
        let result = self.call(tool, input).await.map_err(|err| match err {
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                match broken_reason(&self.broken) {
                    Some(reason) => ToolFailure::of_kind(
                        "McpMalformedMessage",
                        format!("MCP server `{server}` during `{tool}`: {reason}"),
                    ),
                    None => ToolFailure::of_kind(
                        "McpConnectionClosed",
                        format!(
                            "MCP server `{server}` closed the connection during `{tool}` (did it exit?)"
                        ),
                    ),
                }
            }
            ServiceError::McpError(error) => ToolFailure::of_kind(
                "McpProtocolError",
                format!(
                    "MCP server `{server}` refused `{tool}`: {} (code {})",
                    error.message, error.code.0
                ),
            ),
            other => ToolFailure::of_kind(
                "McpError",
                format!("MCP server `{server}`, tool `{tool}`: {other}"),
            ),
        })?;
        match tool_outputs(&result, has_output_schema) {
            Ok(outputs) => Ok(Value::Object(outputs)),
            Err(CallFailure::ToolError(message)) => Err(ToolFailure::of_kind(
                "McpToolError",
                format!("MCP server `{server}`: {message}"),
            )),
            Err(CallFailure::Malformed(message)) => Err(ToolFailure::of_kind(
                "McpMalformedResult",
                format!("MCP server `{server}`, tool `{tool}`: {message}"),
            )),
        }
    }
}

/// The output schema of a tool without an `outputSchema`: `{content, structured, is_error}`.
fn unstructured_schema() -> Value {
    let mut properties = Map::new();
    properties.insert(unstructured::CONTENT.into(), json!({"type": "string"}));
    properties.insert(unstructured::STRUCTURED.into(), json!({}));
    properties.insert(unstructured::IS_ERROR.into(), json!({"type": "boolean"}));
    json!({"type": "object", "properties": properties})
}

/// Drop a `$schema` the validator may not know (servers write draft-07 or 2020-12 URIs).
fn strip_meta_schema(mut schema: Value) -> Value {
    if let Some(object) = schema.as_object_mut() {
        object.remove("$schema");
    }
    schema
}

/// `readOnlyHint` decides when present; otherwise `destructiveHint` or `idempotentHint` (both
/// only meaningful for a tool that writes) mark side effects; no annotation: unknown.
pub fn read_only_from_annotations(annotations: Option<&Value>) -> Option<bool> {
    let annotations = annotations?;
    if let Some(read_only) = annotations.get("readOnlyHint").and_then(Value::as_bool) {
        return Some(read_only);
    }
    let writes = ["destructiveHint", "idempotentHint"]
        .iter()
        .any(|hint| annotations.get(*hint).and_then(Value::as_bool).is_some());
    writes.then_some(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_map_to_read_only() {
        assert_eq!(read_only_from_annotations(None), None);
        assert_eq!(read_only_from_annotations(Some(&json!({}))), None);
        let read = json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true});
        assert_eq!(read_only_from_annotations(Some(&read)), Some(true));
        let destroys = json!({"destructiveHint": true});
        assert_eq!(read_only_from_annotations(Some(&destroys)), Some(false));
        let idempotent = json!({"idempotentHint": true});
        assert_eq!(read_only_from_annotations(Some(&idempotent)), Some(false));
        let writes = json!({"readOnlyHint": false});
        assert_eq!(read_only_from_annotations(Some(&writes)), Some(false));
    }
}
