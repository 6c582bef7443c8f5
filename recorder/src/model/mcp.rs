//! What an MCP tool call is, once recorded: one shape shared by everything that reads or makes MCP calls.
//!
//! The recording proxy stores what a server answered to `tools/call`; the inbound adapter returns what a
//! server answers when a flow calls it. Replaying a recorded flow against the live server (`verify --live`)
//! compares the two, so both shape a `CallToolResult` here, the same way:
//!
//! - a tool that declares an `outputSchema`: its `structuredContent`, or its text content parsed as a JSON
//!   object when the server sent no structured content;
//! - a tool without one: an object `{content, structured, is_error}` holding the text content joined by
//!   newlines, the structured content (or null) and `false`;
//! - `isError: true`: a failure carrying the server's text, never an output.

use serde_json::{Map, Value};

/// The fields of the object an MCP tool without an `outputSchema` returns.
pub mod unstructured {
    /// The call's text content, joined by newlines.
    pub const CONTENT: &str = "content";
    /// The call's `structuredContent`, or null.
    pub const STRUCTURED: &str = "structured";
    /// Always false: a failed call is a failure, not an output.
    pub const IS_ERROR: &str = "is_error";
}

/// The step metadata keys a recorded MCP call carries.
pub mod step_meta {
    /// The JSON-RPC id of the `tools/call` request, as the client sent it.
    pub const REQUEST_ID: &str = "mcp.request_id";
    /// The protocol version the session negotiated (or the request's `_meta` declared).
    pub const PROTOCOL_VERSION: &str = "mcp.protocol_version";
}

/// The trace metadata keys a recorded MCP session carries.
pub mod trace_meta {
    /// The command line of the server the session talked to.
    pub const SERVER_COMMAND: &str = "mcp.server_command";
    /// The server's name and version from its `initialize` (or `server/discover`) answer.
    pub const SERVER_INFO: &str = "mcp.server_info";
    /// The client's name and version from its `initialize` request (or a request's `_meta`).
    pub const CLIENT_INFO: &str = "mcp.client_info";
    /// The protocol version the session used: negotiated by `initialize`, or declared in the
    /// requests' `_meta` (2026-07-28 and later).
    pub const PROTOCOL_VERSION: &str = "mcp.protocol_version";
    /// What the calls of the trace share under the proxy's `--trace-by` rule: the client's name
    /// and version, or the value of the request `_meta` key it names.
    pub const TRACE_KEY: &str = "mcp.trace_key";
}

/// The `error_type` of a recorded MCP call that did not produce an output.
pub mod error_type {
    /// The server answered with `isError: true`.
    pub const TOOL_ERROR: &str = "mcp_tool_error";
    /// The result was not a `CallToolResult` of the shape its tool declares.
    pub const MALFORMED_RESULT: &str = "mcp_malformed_result";
    /// The server answered with a JSON-RPC error.
    pub const JSONRPC_ERROR: &str = "mcp_jsonrpc_error";
    /// The requester cancelled the call (`notifications/cancelled`).
    pub const CANCELLED: &str = "mcp_cancelled";
    /// The session ended (or the server exited) before the call was answered.
    pub const NO_RESPONSE: &str = "mcp_no_response";
}

/// The `_meta` keys of the 2026-07-28 protocol, carried by every request and result.
pub mod wire_meta {
    /// The protocol version a request is made in.
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// The client's name and version.
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    /// The server's name and version, on results.
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
}

/// The source name of traces recorded from MCP traffic.
pub const SOURCE: &str = "mcp";

/// An MCP call that did not produce an output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallFailure {
    /// The server answered with `isError: true`; the message is its text content.
    ToolError(String),
    /// The result is not a `CallToolResult` of the shape its tool declares.
    Malformed(String),
}

impl CallFailure {
    /// The `error_type` a step recording this failure carries.
    pub fn error_type(&self) -> &'static str {
        match self {
            CallFailure::ToolError(_) => error_type::TOOL_ERROR,
            CallFailure::Malformed(_) => error_type::MALFORMED_RESULT,
        }
    }

    /// The message alone (the server's text, or what is wrong with the result).
    pub fn message(&self) -> &str {
        match self {
            CallFailure::ToolError(message) | CallFailure::Malformed(message) => message,
        }
    }
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallFailure::ToolError(message) => write!(f, "tool error: {message}"),
            CallFailure::Malformed(message) => write!(f, "malformed tool result: {message}"),
        }
    }
}

/// The text content of a `CallToolResult`, its text blocks joined by newlines.
pub fn text_content(result: &Value) -> String {
    let Some(blocks) = result.get("content").and_then(Value::as_array) else {
        return String::new();
    };
    let texts: Vec<&str> = blocks
        .iter()
        .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|block| block.get("text").and_then(Value::as_str))
        .collect();
    texts.join("\n")
}

/// Whether a `CallToolResult` reports a tool failure.
pub fn is_error(result: &Value) -> bool {
    result.get("isError").and_then(Value::as_bool) == Some(true)
}

/// The output a `CallToolResult` stands for, shaped by whether its tool declares an `outputSchema`.
pub fn tool_outputs(
    result: &Value,
    has_output_schema: bool,
) -> Result<Map<String, Value>, CallFailure> {
    if !result.is_object() {
        return Err(CallFailure::Malformed(format!(
            "expected an object, got {}",
            kind_name(result)
        )));
    }
    if is_error(result) {
        return Err(CallFailure::ToolError(text_content(result)));
    }
    let structured = result.get("structuredContent").filter(|v| !v.is_null());
    if has_output_schema {
        return match structured {
            Some(Value::Object(object)) => Ok(object.clone()),
            Some(other) => Err(CallFailure::Malformed(format!(
                "structuredContent is {}, not an object",
                kind_name(other)
            ))),
            None => {
                let text = text_content(result);
                match serde_json::from_str::<Value>(&text) {
                    Ok(Value::Object(object)) => Ok(object),
                    Ok(other) => Err(CallFailure::Malformed(format!(
                        "no structuredContent, and the text content is {}, not an object",
                        kind_name(&other)
                    ))),
                    Err(error) => Err(CallFailure::Malformed(format!(
                        "no structuredContent, and the text content is not JSON: {error}"
                    ))),
                }
            }
        };
    }
    let mut object = Map::new();
    object.insert(
        unstructured::CONTENT.into(),
        Value::String(text_content(result)),
    );
    object.insert(
        unstructured::STRUCTURED.into(),
        structured.cloned().unwrap_or(Value::Null),
    );
    object.insert(unstructured::IS_ERROR.into(), Value::Bool(false));
    Ok(object)
}

fn kind_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_with_an_output_schema_returns_its_structured_content() {
        let result = json!({"content": [{"type": "text", "text": "{\"n\": 1}"}], "structuredContent": {"n": 2}});
        assert_eq!(
            tool_outputs(&result, true).unwrap(),
            json!({"n": 2}).as_object().unwrap().clone()
        );
    }

    #[test]
    fn without_structured_content_the_text_is_parsed_as_json() {
        let result = json!({"content": [{"type": "text", "text": "{\"n\": 1}"}]});
        assert_eq!(
            tool_outputs(&result, true).unwrap(),
            json!({"n": 1}).as_object().unwrap().clone()
        );
        let not_json = json!({"content": [{"type": "text", "text": "n is 1"}]});
        assert!(
            matches!(tool_outputs(&not_json, true), Err(CallFailure::Malformed(m)) if m.contains("not JSON"))
        );
    }

    #[test]
    fn a_tool_without_an_output_schema_returns_text_structured_and_is_error() {
        let result = json!({"content": [
            {"type": "text", "text": "one"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "text", "text": "two"}
        ]});
        assert_eq!(
            Value::Object(tool_outputs(&result, false).unwrap()),
            json!({"content": "one\ntwo", "structured": null, "is_error": false})
        );
    }

    #[test]
    fn is_error_is_a_failure_with_the_servers_text() {
        let result =
            json!({"isError": true, "content": [{"type": "text", "text": "no such user"}]});
        assert_eq!(
            tool_outputs(&result, false),
            Err(CallFailure::ToolError("no such user".into()))
        );
        assert!(matches!(
            tool_outputs(&json!([1]), false),
            Err(CallFailure::Malformed(_))
        ));
    }
}
