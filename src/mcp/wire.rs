//! The flow server on MCP transports (stdio, streamable HTTP), through `rmcp`. Only JSON
//! crosses into [`FlowServer`]; the rmcp types stay here.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rmcp::ErrorData;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ErrorCode, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer, ServiceExt};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;

use super::server::{CallRejected, FlowServer, serve_error};
use crate::error::Result;

/// The sessions that may hear about tool list changes.
type Peers = Arc<Mutex<Vec<Peer<RoleServer>>>>;

/// One session's handler: the shared server and the peers to notify.
#[derive(Clone)]
struct Handler {
    server: Arc<FlowServer>,
    peers: Peers,
}

impl Handler {
    fn remember(&self, peer: &Peer<RoleServer>) {
        if !self.server.chain_tools_enabled() {
            return;
        }
        if let Ok(mut peers) = self.peers.lock() {
            peers.push(peer.clone());
        }
    }

    /// Tell every live session that remembered itself (those that sent `initialized`), or the
    /// caller when none did (a 2026-07-28 session has no handshake).
    async fn announce_tool_list_change(&self, caller: &Peer<RoleServer>) {
        let peers: Vec<Peer<RoleServer>> = match self.peers.lock() {
            Ok(mut peers) => {
                peers.retain(|p| !p.is_transport_closed());
                peers.clone()
            }
            Err(_) => Vec::new(),
        };
        if peers.is_empty() {
            let _ = caller.notify_tool_list_changed().await;
        }
        for peer in peers {
            let _ = peer.notify_tool_list_changed().await;
        }
    }
}

fn protocol_error(message: String) -> ErrorData {
    ErrorData::new(ErrorCode::INTERNAL_ERROR, message, None)
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder().enable_tools();
        if self.server.chain_tools_enabled() {
            capabilities = capabilities.enable_tool_list_changed();
        }
        ServerConfig::new(capabilities.build()).with_server_info(Implementation::new(
            self.server.name().to_string(),
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.remember(&context.peer);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = Vec::new();
        for descriptor in self.server.list_tools() {
            let name = descriptor["name"].as_str().unwrap_or_default().to_string();
            let tool: Tool = serde_json::from_value(descriptor).map_err(|err| {
                protocol_error(format!("tool `{name}` has an invalid descriptor: {err}"))
            })?;
            tools.push(tool);
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let arguments: serde_json::Map<String, Value> = arguments.into_iter().collect();
        let call = self.server.call_tool(&request.name, arguments);
        let answer = tokio::select! {
            answer = call => answer,
            _ = context.ct.cancelled() => {
                return Err(ErrorData::new(ErrorCode::INTERNAL_ERROR, "the call was cancelled", None));
            }
        };
        let answer = match answer {
            Ok(answer) => answer,
            Err(rejected @ CallRejected::UnknownTool(_)) => {
                return Err(ErrorData::invalid_params(rejected.to_string(), None));
            }
        };
        if answer.tools_changed {
            self.announce_tool_list_change(&context.peer).await;
        }
        let result: CallToolResult = serde_json::from_value(answer.result)
            .map_err(|err| protocol_error(format!("the tool result is malformed: {err}")))?;
        Ok(CallToolResponse::Complete(result))
    }
}

/// Serve over stdin and stdout until the client closes the connection.
pub async fn serve_stdio(server: FlowServer) -> Result<()> {
    let handler = Handler {
        server: Arc::new(server),
        peers: Arc::default(),
    };
    let running = handler
        .serve((stdin_reader(), StdoutWriter(std::io::stdout())))
        .await
        .map_err(|err| serve_error(format!("the stdio session did not start: {err}")))?;
    running
        .waiting()
        .await
        .map_err(|err| serve_error(format!("the stdio session stopped: {err}")))?;
    Ok(())
}

/// [`serve_stdio`] on the runtime where command and MCP tools keep their connections (see
/// [`crate::tool`]), so a call reaches a persistent tool or an MCP server without a hand-off to
/// another thread. Blocks until the client closes the connection; not from inside a runtime.
pub fn serve_stdio_blocking(server: FlowServer) -> Result<()> {
    crate::tool::background::runtime()?.block_on(serve_stdio(server))
}

/// Stdin for the session: read through the runtime's reactor when it is a pipe (as when a
/// client starts the server), so a message wakes the session directly; otherwise (a file, a
/// terminal) through tokio's stdin, which reads on a blocking thread.
fn stdin_reader() -> Box<dyn tokio::io::AsyncRead + Send + Unpin> {
    use std::os::fd::AsFd;
    let pipe = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(|fd| tokio::net::unix::pipe::Receiver::from_owned_fd(fd).ok());
    match pipe {
        Some(pipe) => Box::new(pipe),
        None => Box::new(tokio::io::stdin()),
    }
}

/// Stdout for the session, written in place: an answer is a few kilobytes at most, which a
/// pipe takes at once, where tokio's stdout would hand each write to a blocking thread. A
/// client that stops reading stops the session either way.
struct StdoutWriter(std::io::Stdout);

impl tokio::io::AsyncWrite for StdoutWriter {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::task::Poll::Ready(std::io::Write::write(&mut self.0, buf))
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(std::io::Write::flush(&mut self.0))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.poll_flush(cx)
    }
}

/// Serve streamable HTTP at `http://ADDRESS/mcp` until the process is stopped; `bound` is told
/// the address actually bound (port 0 picks a free one).
pub async fn serve_http(
    server: FlowServer,
    address: SocketAddr,
    bound: impl FnOnce(SocketAddr),
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| crate::error::Error::Listen {
            address: address.to_string(),
            source,
        })?;
    let local = listener
        .local_addr()
        .map_err(|err| serve_error(err.to_string()))?;
    bound(local);
    let handler = Handler {
        server: Arc::new(server),
        peers: Arc::default(),
    };
    let mut config = StreamableHttpServerConfig::default();
    config
        .allowed_hosts
        .extend([local.ip().to_string(), local.to_string()]);
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(_) => continue,
        };
        let service = service.clone();
        tokio::spawn(async move {
            let http = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let service = service.clone();
                async move {
                    if request.uri().path() != "/mcp" {
                        return Ok::<_, Infallible>(not_found());
                    }
                    Ok(service.handle(request).await)
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), http)
                .await;
        });
    }
}

fn not_found() -> hyper::Response<BoxBody<Bytes, Infallible>> {
    let body = Full::new(Bytes::from_static(b"not found: the MCP endpoint is /mcp")).boxed();
    let mut response = hyper::Response::new(body);
    *response.status_mut() = hyper::StatusCode::NOT_FOUND;
    response
}
