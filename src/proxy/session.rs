//! Reading the relayed JSON-RPC messages: which `tools/call` got which answer, in which session.
//!
//! [`Observer`] is pure: it is given each message line with the direction it travelled and the
//! instant the proxy received it, and returns the tool calls that completed. Requests and
//! responses are paired by JSON-RPC id, requests from either side, answered in any order,
//! pipelined or in batches; a response seen before its request (the two directions are relayed
//! by separate threads) waits for it. What the session says about itself (protocol version,
//! client and server info) is taken from the `initialize` handshake or, in the 2026-07-28 era,
//! from the `_meta` every request and result carries.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use chainweaver_recorder::model::mcp::{self, error_type, wire_meta};
use serde_json::{Map, Value};

/// Which way a message travelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the client (the proxy's stdin) to the server (the child's stdin).
    ToServer,
    /// From the server (the child's stdout) to the client (the proxy's stdout).
    ToClient,
}

impl Direction {
    fn opposite(self) -> Self {
        match self {
            Direction::ToServer => Direction::ToClient,
            Direction::ToClient => Direction::ToServer,
        }
    }
}

/// How calls are grouped into traces.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum TraceBy {
    /// One trace per client session (a proxy run, or each `initialize` on it).
    #[default]
    Session,
    /// One trace per client name and version (per session).
    Client,
    /// One trace per value of this key in the `tools/call` request's `_meta` (per session);
    /// calls without it go to the session's trace.
    RequestMeta(String),
}

/// The trace a call belongs to: its session, and the value of the `--trace-by` rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TraceKey {
    /// The session's number in this proxy run (0 first).
    pub session: u32,
    /// The rule's value (client info, a `_meta` value), or `None` for the session's own trace.
    pub key: Option<String>,
}

/// What the session has said about itself so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionInfo {
    /// The protocol version negotiated or declared.
    pub protocol_version: Option<String>,
    /// The client's `clientInfo`.
    pub client_info: Option<Value>,
    /// The server's `serverInfo`.
    pub server_info: Option<Value>,
}

/// A `tools/call` that ended: answered, failed, cancelled or never answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The trace it belongs to.
    pub trace: TraceKey,
    /// The tool's name.
    pub tool: String,
    /// The arguments as the client sent them.
    pub arguments: Value,
    /// The JSON-RPC id.
    pub request_id: Value,
    /// The protocol version of the request (its `_meta`, else the session's).
    pub protocol_version: Option<String>,
    /// When the proxy received the request.
    pub started: Instant,
    /// When the proxy received the answer (or the cancellation, or the end of the session).
    pub ended: Instant,
    /// The outputs (shaped by [`mcp::tool_outputs`]), or the failure's `error_type` and message.
    pub outcome: Result<Map<String, Value>, (&'static str, String)>,
}

/// What the observer has counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObserverCounts {
    /// Messages read (batch elements counted one by one).
    pub messages: u64,
    /// Lines that are not JSON-RPC messages (not JSON, or not an object or a batch).
    pub malformed_lines: u64,
    /// Responses whose request was never seen.
    pub unmatched_responses: u64,
}

/// The requests the observer waits to see answered.
#[derive(Debug)]
enum Pending {
    ToolCall(Box<PendingCall>),
    ToolsList,
    Initialize,
    Discover,
}

#[derive(Debug)]
struct PendingCall {
    trace: TraceKey,
    tool: String,
    arguments: Value,
    request_id: Value,
    protocol_version: Option<String>,
    started: Instant,
}

/// A response that arrived before its request.
#[derive(Debug)]
struct EarlyResponse {
    message: Map<String, Value>,
    at: Instant,
}

/// Responses kept while their request may still be on its way; older ones are dropped.
const MAX_EARLY_RESPONSES: usize = 1024;

/// Pairs requests with responses and tells the calls that ended (see the module docs).
#[derive(Debug)]
pub struct Observer {
    trace_by: TraceBy,
    /// Whether each tool seen in a `tools/list` answer declares an `outputSchema`.
    output_schemas: HashMap<String, bool>,
    /// Requests waiting for an answer, by the direction they travelled and their id.
    pending: HashMap<(Direction, String), Pending>,
    /// Responses waiting for their request, by the direction of that request and its id.
    early: HashMap<(Direction, String), EarlyResponse>,
    early_order: VecDeque<(Direction, String)>,
    session: u32,
    /// Whether the current session has made any request (a later `initialize` starts a new one).
    session_used: bool,
    info: SessionInfo,
    /// Sessions that ended (a later `initialize` began), with what they said about themselves.
    ended: Vec<(u32, SessionInfo)>,
    counts: ObserverCounts,
}

impl Observer {
    /// An observer grouping calls into traces by `trace_by`.
    pub fn new(trace_by: TraceBy) -> Self {
        Self {
            trace_by,
            output_schemas: HashMap::new(),
            pending: HashMap::new(),
            early: HashMap::new(),
            early_order: VecDeque::new(),
            session: 0,
            session_used: false,
            info: SessionInfo::default(),
            ended: Vec::new(),
            counts: ObserverCounts::default(),
        }
    }

    /// What the current session has said about itself.
    pub fn info(&self) -> &SessionInfo {
        &self.info
    }

    /// The current session's number.
    pub fn session(&self) -> u32 {
        self.session
    }

    /// The sessions that ended since the last call (a later `initialize` began a new one), each
    /// with what it said about itself.
    pub fn take_ended(&mut self) -> Vec<(u32, SessionInfo)> {
        std::mem::take(&mut self.ended)
    }

    /// What was counted so far.
    pub fn counts(&self) -> ObserverCounts {
        self.counts
    }

    /// Read one message line; push the calls it ended to `calls`. A session that ended (a
    /// second `initialize` began) is reported by [`take_ended`](Self::take_ended).
    pub fn line(&mut self, direction: Direction, line: &[u8], at: Instant, calls: &mut Vec<Call>) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(Value::Object(message)) => self.message(direction, message, at, calls),
            Ok(Value::Array(batch)) if !batch.is_empty() => {
                for element in batch {
                    match element {
                        Value::Object(message) => self.message(direction, message, at, calls),
                        _ => self.counts.malformed_lines += 1,
                    }
                }
            }
            _ => self.counts.malformed_lines += 1,
        }
    }

    /// The session is over: every call still waiting is recorded as never answered.
    pub fn finish(&mut self, at: Instant, calls: &mut Vec<Call>) {
        let mut open: Vec<PendingCall> = self
            .pending
            .drain()
            .filter_map(|(_, pending)| match pending {
                Pending::ToolCall(call) => Some(*call),
                _ => None,
            })
            .collect();
        open.sort_by_key(|call| call.started);
        for call in open {
            calls.push(call.end(
                at,
                Err((
                    error_type::NO_RESPONSE,
                    "the session ended before the server answered".to_owned(),
                )),
            ));
        }
    }

    fn message(
        &mut self,
        direction: Direction,
        message: Map<String, Value>,
        at: Instant,
        calls: &mut Vec<Call>,
    ) {
        self.counts.messages += 1;
        let method = message.get("method").and_then(Value::as_str);
        let id = message.get("id").filter(|id| !id.is_null());
        match (method, id) {
            (Some(_), Some(_)) => self.request(direction, message, at, calls),
            (Some(method), None) => {
                if method == "notifications/cancelled" {
                    self.cancelled(direction, &message, at, calls);
                }
            }
            (None, Some(id)) => {
                let key = (direction.opposite(), id_key(id));
                match self.pending.remove(&key) {
                    Some(pending) => self.answered(pending, &message, at, calls),
                    None => self.keep_early(key, message, at),
                }
            }
            (None, None) => {}
        }
    }

    fn request(
        &mut self,
        direction: Direction,
        message: Map<String, Value>,
        at: Instant,
        calls: &mut Vec<Call>,
    ) {
        let Some(id) = message.get("id") else { return };
        let method = message.get("method").and_then(Value::as_str).unwrap_or("");
        let params = message.get("params").and_then(Value::as_object);
        let meta = params
            .and_then(|p| p.get("_meta"))
            .and_then(Value::as_object);
        if direction == Direction::ToServer && method == "initialize" {
            if self.session_used {
                let info = std::mem::take(&mut self.info);
                self.ended.push((self.session, info));
                self.session += 1;
            }
            if let Some(params) = params {
                self.learn_string(params.get("protocolVersion"), |info| {
                    &mut info.protocol_version
                });
                if let Some(client) = params.get("clientInfo") {
                    self.info.client_info = Some(client.clone());
                }
            }
        }
        self.session_used = true;
        if direction == Direction::ToServer
            && let Some(meta) = meta
        {
            if let Some(Value::String(version)) = meta.get(wire_meta::PROTOCOL_VERSION) {
                self.info.protocol_version = Some(version.clone());
            }
            if let Some(client) = meta.get(wire_meta::CLIENT_INFO) {
                self.info.client_info = Some(client.clone());
            }
        }
        let pending = match method {
            "tools/call" => {
                let Some(tool) = params.and_then(|p| p.get("name")).and_then(Value::as_str) else {
                    return;
                };
                let protocol_version = meta
                    .and_then(|m| m.get(wire_meta::PROTOCOL_VERSION))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .or_else(|| self.info.protocol_version.clone());
                Pending::ToolCall(Box::new(PendingCall {
                    trace: self.trace_key(meta),
                    tool: tool.to_owned(),
                    arguments: params
                        .and_then(|p| p.get("arguments"))
                        .cloned()
                        .unwrap_or_else(|| Value::Object(Map::new())),
                    request_id: id.clone(),
                    protocol_version,
                    started: at,
                }))
            }
            "tools/list" => Pending::ToolsList,
            "initialize" if direction == Direction::ToServer => Pending::Initialize,
            "server/discover" if direction == Direction::ToServer => Pending::Discover,
            _ => return,
        };
        let key = (direction, id_key(id));
        match self.early.remove(&key) {
            Some(early) => {
                self.early_order.retain(|k| *k != key);
                self.answered(pending, &early.message, early.at, calls);
            }
            None => {
                self.pending.insert(key, pending);
            }
        }
    }

    fn trace_key(&self, meta: Option<&Map<String, Value>>) -> TraceKey {
        let key = match &self.trace_by {
            TraceBy::Session => None,
            TraceBy::Client => self.info.client_info.as_ref().map(client_label),
            TraceBy::RequestMeta(name) => meta.and_then(|m| m.get(name)).map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            }),
        };
        TraceKey {
            session: self.session,
            key,
        }
    }

    fn learn_string(
        &mut self,
        value: Option<&Value>,
        field: impl FnOnce(&mut SessionInfo) -> &mut Option<String>,
    ) {
        if let Some(Value::String(text)) = value {
            *field(&mut self.info) = Some(text.clone());
        }
    }

    fn answered(
        &mut self,
        pending: Pending,
        response: &Map<String, Value>,
        at: Instant,
        calls: &mut Vec<Call>,
    ) {
        let result = response.get("result");
        if let Some(server) = result
            .and_then(|r| r.get("_meta"))
            .and_then(|m| m.get(wire_meta::SERVER_INFO))
        {
            self.info.server_info = Some(server.clone());
        }
        match pending {
            Pending::ToolCall(call) => {
                let outcome = match (result, response.get("error")) {
                    (Some(result), _) => {
                        let has_schema = self.output_schemas.get(&call.tool).copied();
                        mcp::tool_outputs(result, has_schema.unwrap_or(false))
                            .map_err(|failure| (failure.error_type(), failure.message().to_owned()))
                    }
                    (None, Some(error)) => Err((error_type::JSONRPC_ERROR, rpc_error(error))),
                    (None, None) => Err((
                        error_type::MALFORMED_RESULT,
                        "the response has neither a result nor an error".to_owned(),
                    )),
                };
                calls.push(call.end(at, outcome));
            }
            Pending::ToolsList => {
                let tools = result
                    .and_then(|r| r.get("tools"))
                    .and_then(Value::as_array);
                for tool in tools.into_iter().flatten() {
                    if let Some(name) = tool.get("name").and_then(Value::as_str) {
                        let declared = tool.get("outputSchema").is_some_and(Value::is_object);
                        self.output_schemas.insert(name.to_owned(), declared);
                    }
                }
            }
            Pending::Initialize => {
                if let Some(result) = result {
                    self.learn_string(result.get("protocolVersion"), |info| {
                        &mut info.protocol_version
                    });
                    if let Some(server) = result.get("serverInfo") {
                        self.info.server_info = Some(server.clone());
                    }
                }
            }
            Pending::Discover => {}
        }
    }

    fn cancelled(
        &mut self,
        direction: Direction,
        message: &Map<String, Value>,
        at: Instant,
        calls: &mut Vec<Call>,
    ) {
        let params = message.get("params");
        let Some(id) = params.and_then(|p| p.get("requestId")) else {
            return;
        };
        // The requester cancels its own request: it travelled the same way.
        let key = (direction, id_key(id));
        if !matches!(self.pending.get(&key), Some(Pending::ToolCall(_))) {
            return;
        }
        let Some(Pending::ToolCall(call)) = self.pending.remove(&key) else {
            return;
        };
        let reason = params
            .and_then(|p| p.get("reason"))
            .and_then(Value::as_str)
            .map_or_else(
                || "cancelled by the requester".to_owned(),
                |r| format!("cancelled by the requester: {r}"),
            );
        calls.push(call.end(at, Err((error_type::CANCELLED, reason))));
    }

    fn keep_early(&mut self, key: (Direction, String), message: Map<String, Value>, at: Instant) {
        if self.early_order.len() >= MAX_EARLY_RESPONSES
            && let Some(oldest) = self.early_order.pop_front()
        {
            self.early.remove(&oldest);
            self.counts.unmatched_responses += 1;
        }
        self.early_order.push_back(key.clone());
        self.early.insert(key, EarlyResponse { message, at });
    }
}

impl PendingCall {
    fn end(
        self,
        ended: Instant,
        outcome: Result<Map<String, Value>, (&'static str, String)>,
    ) -> Call {
        Call {
            trace: self.trace,
            tool: self.tool,
            arguments: self.arguments,
            request_id: self.request_id,
            protocol_version: self.protocol_version,
            started: self.started,
            ended,
            outcome,
        }
    }
}

/// A JSON-RPC id as a map key: its JSON text, so `1` and `"1"` stay different.
fn id_key(id: &Value) -> String {
    id.to_string()
}

/// "name version" of a `clientInfo` (or its JSON when it has no name).
fn client_label(info: &Value) -> String {
    match (
        info.get("name").and_then(Value::as_str),
        info.get("version").and_then(Value::as_str),
    ) {
        (Some(name), Some(version)) if !version.is_empty() => format!("{name} {version}"),
        (Some(name), _) => name.to_owned(),
        _ => info.to_string(),
    }
}

/// A JSON-RPC error's message and code.
fn rpc_error(error: &Value) -> String {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("(no message)");
    match error.get("code") {
        Some(code) => format!("{message} (JSON-RPC error {code})"),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    struct Feed {
        observer: Observer,
        start: Instant,
        tick: u64,
        calls: Vec<Call>,
    }

    impl Feed {
        fn new(trace_by: TraceBy) -> Self {
            Self {
                observer: Observer::new(trace_by),
                start: Instant::now(),
                tick: 0,
                calls: Vec::new(),
            }
        }

        fn send(&mut self, direction: Direction, message: Value) -> &mut Self {
            self.raw(direction, message.to_string().as_bytes())
        }

        fn raw(&mut self, direction: Direction, line: &[u8]) -> &mut Self {
            self.tick += 1;
            let at = self.start + Duration::from_millis(self.tick);
            self.observer.line(direction, line, at, &mut self.calls);
            self
        }

        fn finish(&mut self) -> &mut Self {
            self.tick += 1;
            let at = self.start + Duration::from_millis(self.tick);
            self.observer.finish(at, &mut self.calls);
            self
        }
    }

    fn call(id: Value, tool: &str, arguments: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
    }

    fn result(id: Value, result: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": result})
    }

    fn text(text: &str) -> Value {
        json!({"content": [{"type": "text", "text": text}]})
    }

    fn tools_list() -> Value {
        json!({"tools": [
            {"name": "add", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}},
            {"name": "echo", "inputSchema": {"type": "object"}}
        ]})
    }

    use Direction::{ToClient, ToServer};

    #[test]
    fn pipelined_calls_answered_out_of_order_pair_by_id() {
        let mut feed = Feed::new(TraceBy::Session);
        feed.send(
            ToServer,
            json!({"jsonrpc": "2.0", "id": 0, "method": "tools/list"}),
        )
        .send(ToClient, result(json!(0), tools_list()))
        .send(ToServer, call(json!(1), "add", json!({"a": 1})))
        .send(ToServer, call(json!("1"), "echo", json!({"t": "x"})))
        .send(ToClient, result(json!("1"), text("x")))
        .send(
            ToClient,
            result(
                json!(1),
                json!({"structuredContent": {"sum": 3}, "content": []}),
            ),
        );
        let calls = &feed.calls;
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].tool, "echo");
        assert_eq!(calls[0].request_id, json!("1"));
        assert_eq!(
            Value::Object(calls[0].outcome.clone().unwrap()),
            json!({"content": "x", "structured": null, "is_error": false})
        );
        assert_eq!(calls[1].tool, "add");
        assert_eq!(
            Value::Object(calls[1].outcome.clone().unwrap()),
            json!({"sum": 3})
        );
        assert_eq!(calls[1].arguments, json!({"a": 1}));
        assert!(calls[1].ended > calls[1].started);
    }

    #[test]
    fn a_tool_not_listed_gets_the_unstructured_shape() {
        let mut feed = Feed::new(TraceBy::Session);
        feed.send(ToServer, call(json!(1), "add", json!({}))).send(
            ToClient,
            result(
                json!(1),
                json!({"structuredContent": {"sum": 3}, "content": []}),
            ),
        );
        assert_eq!(
            Value::Object(feed.calls[0].outcome.clone().unwrap()),
            json!({"content": "", "structured": {"sum": 3}, "is_error": false})
        );
    }

    #[test]
    fn batches_errors_and_is_error_are_failed_calls() {
        let mut feed = Feed::new(TraceBy::Session);
        feed.send(ToServer, json!([call(json!(1), "a", json!({})), call(json!(2), "b", json!({}))]))
            .send(
                ToClient,
                json!([
                    {"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "bad args"}},
                    result(json!(1), json!({"isError": true, "content": [{"type": "text", "text": "no such user"}]}))
                ]),
            );
        let calls = &feed.calls;
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].tool, "b");
        assert_eq!(
            calls[0].outcome,
            Err((
                error_type::JSONRPC_ERROR,
                "bad args (JSON-RPC error -32602)".into()
            ))
        );
        assert_eq!(
            calls[1].outcome,
            Err((error_type::TOOL_ERROR, "no such user".into()))
        );
        assert_eq!(feed.observer.counts().messages, 4);
    }

    #[test]
    fn a_response_seen_before_its_request_is_paired_when_the_request_arrives() {
        let mut feed = Feed::new(TraceBy::Session);
        feed.send(ToClient, result(json!(7), text("early")));
        assert!(feed.calls.is_empty());
        feed.send(ToServer, call(json!(7), "echo", json!({})));
        assert_eq!(feed.calls.len(), 1);
        assert_eq!(feed.calls[0].outcome.as_ref().unwrap()["content"], "early");
    }

    #[test]
    fn server_requests_pair_with_client_answers() {
        let mut feed = Feed::new(TraceBy::Session);
        // The same id in both directions names two different requests.
        feed.send(ToServer, call(json!(1), "client_side", json!({})))
            .send(ToClient, call(json!(1), "server_side", json!({})))
            .send(ToServer, result(json!(1), text("to the server")))
            .send(ToClient, result(json!(1), text("to the client")));
        assert_eq!(feed.calls.len(), 2);
        assert_eq!(feed.calls[0].tool, "server_side");
        assert_eq!(
            feed.calls[0].outcome.as_ref().unwrap()["content"],
            "to the server"
        );
        assert_eq!(feed.calls[1].tool, "client_side");
    }

    #[test]
    fn cancelled_and_unanswered_calls_are_failed_steps() {
        let mut feed = Feed::new(TraceBy::Session);
        feed.send(ToServer, call(json!(1), "slow", json!({})))
            .send(ToServer, call(json!(2), "slow", json!({})))
            .send(
                ToServer,
                json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "user stop"}}),
            )
            // A late answer to the cancelled call is not a second step.
            .send(ToClient, result(json!(1), text("late")))
            .finish();
        let calls = &feed.calls;
        assert_eq!(calls.len(), 2);
        assert_eq!(
            calls[0].outcome,
            Err((
                error_type::CANCELLED,
                "cancelled by the requester: user stop".into()
            ))
        );
        assert_eq!(calls[1].request_id, json!(2));
        assert_eq!(
            calls[1].outcome.as_ref().unwrap_err().0,
            error_type::NO_RESPONSE
        );
    }

    #[test]
    fn malformed_lines_and_unknown_messages_are_counted_not_fatal() {
        let mut feed = Feed::new(TraceBy::Session);
        feed.raw(ToServer, b"{not json")
            .raw(ToServer, b"42")
            .raw(ToServer, b"[]")
            .raw(ToServer, b"   ")
            .send(
                ToClient,
                json!({"jsonrpc": "2.0", "method": "notifications/whatever", "params": {"x": 1}}),
            )
            .send(
                ToServer,
                json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {}}),
            )
            .send(ToServer, call(json!(4), "echo", json!({})))
            .send(ToClient, result(json!(4), text("ok")));
        assert_eq!(feed.observer.counts().malformed_lines, 3);
        assert_eq!(feed.calls.len(), 1);
    }

    #[test]
    fn the_handshake_era_records_version_and_infos() {
        let mut feed = Feed::new(TraceBy::Session);
        feed.send(
            ToServer,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "agent", "version": "1"}}}),
        )
        .send(
            ToClient,
            result(json!(1), json!({"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "srv", "version": "2"}})),
        )
        .send(ToServer, call(json!(2), "echo", json!({})))
        .send(ToClient, result(json!(2), text("ok")));
        let info = feed.observer.info();
        assert_eq!(info.protocol_version.as_deref(), Some("2025-06-18"));
        assert_eq!(
            info.client_info,
            Some(json!({"name": "agent", "version": "1"}))
        );
        assert_eq!(
            info.server_info,
            Some(json!({"name": "srv", "version": "2"}))
        );
        assert_eq!(
            feed.calls[0].protocol_version.as_deref(),
            Some("2025-06-18")
        );
        assert_eq!(
            feed.calls[0].trace,
            TraceKey {
                session: 0,
                key: None
            }
        );
        // A second initialize starts a new session.
        feed.send(ToServer, json!({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}));
        assert_eq!(feed.observer.session(), 1);
        assert_eq!(feed.observer.info().client_info, None);
        let ended = feed.observer.take_ended();
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].0, 0);
        assert_eq!(
            ended[0].1.server_info,
            Some(json!({"name": "srv", "version": "2"}))
        );
    }

    #[test]
    fn the_2026_era_takes_version_and_client_from_meta() {
        let meta = json!({
            wire_meta::PROTOCOL_VERSION: "2026-07-28",
            wire_meta::CLIENT_INFO: {"name": "agent", "version": "3"},
            "conversation": "c-9"
        });
        let mut feed = Feed::new(TraceBy::RequestMeta("conversation".into()));
        feed.send(ToServer, json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}))
            .send(ToClient, result(json!(1), json!({"supportedVersions": ["2026-07-28"], "_meta": {wire_meta::SERVER_INFO: {"name": "srv"}}})))
            .send(ToServer, json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {}, "_meta": meta}}))
            .send(ToClient, result(json!(2), text("ok")));
        let info = feed.observer.info();
        assert_eq!(info.protocol_version.as_deref(), Some("2026-07-28"));
        assert_eq!(
            info.client_info,
            Some(json!({"name": "agent", "version": "3"}))
        );
        assert_eq!(info.server_info, Some(json!({"name": "srv"})));
        assert_eq!(feed.calls[0].trace.key.as_deref(), Some("c-9"));
        assert_eq!(
            feed.calls[0].protocol_version.as_deref(),
            Some("2026-07-28")
        );

        let mut by_client = Feed::new(TraceBy::Client);
        by_client
            .send(ToServer, json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "_meta": meta}}))
            .send(ToClient, result(json!(2), text("ok")));
        assert_eq!(by_client.calls[0].trace.key.as_deref(), Some("agent 3"));
        assert_eq!(by_client.calls[0].arguments, json!({}));
    }
}
