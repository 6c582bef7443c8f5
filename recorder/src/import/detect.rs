//! Telling a file's format from its first bytes and its first record.

use std::cell::Cell;
use std::io::Read;
use std::ops::ControlFlow;
use std::path::Path;
use std::rc::Rc;

use serde_json::Value;

use super::ImportFormat;
use super::records::{Layout, for_each_element, open};
use super::values::{excerpt_bytes, json_error, type_name};
use crate::error::{RecorderError, Result};

/// How much of the file detection looks at before the first record.
const PREFIX_BYTES: usize = 1024 * 1024;
/// How many non-empty lines detection tries when looking for a JSON Lines record.
const PROBE_LINES: usize = 20;

/// Detects the format of the file at `path` without importing it.
pub fn detect_format(path: &Path) -> Result<ImportFormat> {
    detect(path).map(|(format, _)| format)
}

fn error(path: &Path, message: String) -> RecorderError {
    RecorderError::Import {
        path: path.to_owned(),
        line: 1,
        message,
    }
}

fn read_prefix(path: &Path) -> Result<Vec<u8>> {
    let mut prefix = Vec::new();
    open(path)?
        .take(PREFIX_BYTES as u64)
        .read_to_end(&mut prefix)
        .map_err(|source| RecorderError::Io {
            path: path.to_owned(),
            source,
        })?;
    if prefix.starts_with(b"\xEF\xBB\xBF") {
        prefix.drain(..3);
    }
    Ok(prefix)
}

fn first_significant(prefix: &[u8]) -> Option<u8> {
    prefix.iter().copied().find(|b| !b.is_ascii_whitespace())
}

/// The first few non-empty lines of the prefix, each parsed as JSON if it parses on its own.
fn probe_lines(prefix: &[u8]) -> impl Iterator<Item = Option<Value>> + '_ {
    prefix
        .split(|&b| b == b'\n')
        .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
        .take(PROBE_LINES)
        .map(|line| serde_json::from_slice::<Value>(line).ok())
}

/// A JSON document spread over lines starts with a line holding only `{`; a JSON Lines file
/// never does (even its first record, if broken, has more on its line).
fn pretty_printed(prefix: &[u8]) -> bool {
    prefix
        .split(|&b| b == b'\n')
        .find(|line| !line.iter().all(u8::is_ascii_whitespace))
        .is_some_and(|line| line.trim_ascii() == b"{")
}

/// How the records of a file whose format is known are laid out.
pub(crate) fn detect_layout(path: &Path, format: ImportFormat) -> Result<Layout> {
    if format == ImportFormat::Spmf {
        return Ok(Layout::Lines);
    }
    let prefix = read_prefix(path)?;
    Ok(match first_significant(&prefix) {
        Some(b'[') => Layout::Array,
        Some(b'{') if pretty_printed(&prefix) => Layout::Single,
        _ => Layout::Lines,
    })
}

/// Detects both the format and the layout.
pub(crate) fn detect(path: &Path) -> Result<(ImportFormat, Layout)> {
    let prefix = read_prefix(path)?;
    let known = ImportFormat::ALL.map(ImportFormat::name).join(", ");
    let Some(first) = first_significant(&prefix) else {
        return Err(error(
            path,
            "the file is empty: there is nothing to import and no format to detect".to_owned(),
        ));
    };
    let (layout, record) = match first {
        b'[' => (Layout::Array, first_array_element(path)?),
        b'{' if pretty_printed(&prefix) => (Layout::Single, single_document(path)?),
        b'{' => match probe_lines(&prefix).flatten().find(Value::is_object) {
            Some(record) => (Layout::Lines, record),
            None => (Layout::Single, single_document(path)?),
        },
        _ => {
            if looks_like_spmf(&prefix) {
                return Ok((ImportFormat::Spmf, Layout::Lines));
            }
            let start = prefix
                .iter()
                .position(|b| !b.is_ascii_whitespace())
                .unwrap_or(0);
            return Err(error(
                path,
                format!(
                    "unknown format: the file starts with {:?}, which is neither JSON (an object a \
                     line, an array, or one document) nor an SPMF sequence file; name the format \
                     (one of {known})",
                    excerpt_bytes(&prefix[start..start + 80.min(prefix.len() - start)])
                ),
            ));
        }
    };
    match classify(&record, &prefix) {
        Ok(format) => Ok((format, layout)),
        Err(why) => Err(error(
            path,
            format!("unknown format: {why}; name the format (one of {known})"),
        )),
    }
}

fn first_array_element(path: &Path) -> Result<Value> {
    let mut first = None;
    let (_, parse_error) = for_each_element(path, Rc::new(Cell::new(0)), &mut |value| {
        first = Some(value);
        Ok(ControlFlow::Break(()))
    })?;
    match (first, parse_error) {
        (Some(value), _) => Ok(value),
        (None, Some(e)) => Err(error(
            path,
            format!(
                "cannot read the first record of the JSON array: {}",
                json_error(&e, false)
            ),
        )),
        (None, None) => Err(error(
            path,
            "the file is an empty JSON array: there is nothing to import and no format to detect"
                .to_owned(),
        )),
    }
}

fn single_document(path: &Path) -> Result<Value> {
    let reader = std::io::BufReader::new(open(path)?);
    serde_json::from_reader(reader).map_err(|e| RecorderError::Import {
        path: path.to_owned(),
        line: e.line() as u64,
        message: format!(
            "cannot detect the format: the file starts like JSON but neither a line nor the whole \
             file parses ({})",
            json_error(&e, false)
        ),
    })
}

/// An SPMF sequence file: its first data line is integers with `-1` / `-2` separators.
fn looks_like_spmf(prefix: &[u8]) -> bool {
    // Lossy: a bad byte further down is that line's problem, not the format's.
    let text = String::from_utf8_lossy(prefix);
    let Some(line) = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with(['#', '%', '@']))
    else {
        return false;
    };
    let tokens: Vec<&str> = line.split_whitespace().collect();
    tokens.iter().all(|t| t.parse::<i64>().is_ok())
        && tokens.iter().any(|t| *t == "-1" || *t == "-2")
}

/// Which format a first record belongs to.
pub(crate) fn classify(record: &Value, prefix: &[u8]) -> Result<ImportFormat, String> {
    let Value::Object(map) = record else {
        return Err(format!(
            "the first record is {}, not a JSON object",
            type_name(record)
        ));
    };
    let has = |key: &str| map.contains_key(key);
    if has("resourceSpans") || has("resource_spans") {
        return Ok(ImportFormat::Otlp);
    }
    if let Some(format) = classify_agent_log(map, prefix) {
        return Ok(format);
    }
    if map.get("trace").is_some_and(Value::is_object)
        && map.get("steps").is_some_and(Value::is_array)
    {
        return Ok(ImportFormat::ChainweaverTraces);
    }
    if has("execution_log") {
        return Ok(ImportFormat::ExecutionResult);
    }
    if map.get("traj").is_some_and(Value::is_array) {
        return Ok(ImportFormat::TauBench);
    }
    if map.get("messages").is_some_and(Value::is_array) || has("role") {
        return Ok(message_dialect(prefix));
    }
    let event_kind = map
        .get("event")
        .and_then(Value::as_str)
        .is_some_and(|e| e == "tool_call" || e == "model_call");
    if event_kind
        || has("result_status")
        || has("latency_ms")
        || (has("session_id") && !has("trace_id"))
        || (has("args") && !has("inputs"))
    {
        return Ok(ImportFormat::ChainweaverEvents);
    }
    if has("tool") || has("tool_name") {
        return Ok(ImportFormat::ChainweaverJsonl);
    }
    let keys: Vec<&str> = map.keys().take(12).map(String::as_str).collect();
    Err(format!(
        "the first record has the keys [{}], which match no known format",
        keys.join(", ")
    ))
}

/// Claude Code entry types.
const CLAUDE_CODE_TYPES: [&str; 7] = [
    "user",
    "assistant",
    "progress",
    "system",
    "file-history-snapshot",
    "queue-operation",
    "summary",
];

/// Codex CLI rollout line types.
const CODEX_TYPES: [&str; 5] = [
    "session_meta",
    "response_item",
    "event_msg",
    "turn_context",
    "compacted",
];

/// Responses API item types that only that API writes.
const RESPONSES_ITEM_TYPES: [&str; 9] = [
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "web_search_call",
    "local_shell_call",
    "local_shell_call_output",
    "reasoning",
    "file_search_call",
];

fn contains(prefix: &[u8], needle: &[u8]) -> bool {
    prefix.windows(needle.len()).any(|w| w == needle)
}

/// The agent log formats, told by the container each agent writes around its calls.
fn classify_agent_log(map: &serde_json::Map<String, Value>, prefix: &[u8]) -> Option<ImportFormat> {
    let has = |key: &str| map.contains_key(key);
    let kind = map.get("type").and_then(Value::as_str);
    if has("payload") && kind.is_some_and(|k| CODEX_TYPES.contains(&k)) {
        return Some(ImportFormat::CodexRollout);
    }
    let claude_entry = has("sessionId") || has("parentUuid") || has("messageId") || has("leafUuid");
    if claude_entry && kind.is_some_and(|k| CLAUDE_CODE_TYPES.contains(&k)) {
        return Some(ImportFormat::ClaudeCode);
    }
    if kind.is_some_and(|k| RESPONSES_ITEM_TYPES.contains(&k))
        || (map.get("object").and_then(Value::as_str) == Some("response")
            && map.get("output").is_some_and(Value::is_array))
        || (kind == Some("message")
            && (contains(prefix, b"\"output_text\"") || contains(prefix, b"\"input_text\"")))
    {
        return Some(ImportFormat::OpenaiResponses);
    }
    if map.get("simulations").is_some_and(Value::is_array) {
        return Some(ImportFormat::Tau2Bench);
    }
    if has("id") && map.get("inference_log").is_some_and(Value::is_array) {
        return Some(ImportFormat::Bfcl);
    }
    if map.get("answer_generation").is_some_and(Value::is_object) {
        return Some(ImportFormat::Toolbench);
    }
    if map
        .get("trajectory_format")
        .and_then(Value::as_str)
        .is_some_and(|f| f.starts_with("mini-swe-agent"))
    {
        return Some(ImportFormat::MiniSweAgent);
    }
    if !has("messages")
        && (map.get("trajectory").is_some_and(Value::is_array)
            || map.get("history").is_some_and(Value::is_array))
    {
        return Some(ImportFormat::SweAgent);
    }
    if has("source") && has("id") && (has("action") || has("observation")) {
        return Some(ImportFormat::Openhands);
    }
    None
}

/// Anthropic messages carry `tool_use` / `tool_result` blocks; mini-swe-agent's act through
/// shell blocks in their text and make no structured calls; anything else is OpenAI's.
fn message_dialect(prefix: &[u8]) -> ImportFormat {
    let structured = [
        &b"\"tool_calls\""[..],
        b"\"function_call\"",
        b"\"tool_use\"",
        b"\"tool_result\"",
    ]
    .iter()
    .any(|needle| contains(prefix, needle));
    if contains(prefix, b"```mswea_bash_command") || (!structured && contains(prefix, b"```bash")) {
        return ImportFormat::MiniSweAgent;
    }
    let anthropic = [&b"\"tool_use\""[..], b"\"tool_result\"", b"\"tool_use_id\""]
        .iter()
        .any(|needle| prefix.windows(needle.len()).any(|w| w == *needle));
    if anthropic {
        ImportFormat::AnthropicMessages
    } else {
        ImportFormat::OpenaiMessages
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classifies_first_records() {
        let cases = [
            (
                json!({"trace_id": "t", "tool": "a", "inputs": {}}),
                ImportFormat::ChainweaverJsonl,
            ),
            (json!({"tool_name": "a"}), ImportFormat::ChainweaverJsonl),
            (
                json!({"session_id": "s", "event": "tool_call", "tool": "a", "args": {}}),
                ImportFormat::ChainweaverEvents,
            ),
            (
                json!({"event": "model_call", "input_tokens": 3}),
                ImportFormat::ChainweaverEvents,
            ),
            (
                json!({"flow_name": "f", "execution_log": []}),
                ImportFormat::ExecutionResult,
            ),
            (json!({"task_id": 1, "traj": []}), ImportFormat::TauBench),
            (
                json!({"trace": {"trace_id": "t", "source": "s"}, "steps": []}),
                ImportFormat::ChainweaverTraces,
            ),
            (
                json!({"role": "user", "content": "hi"}),
                ImportFormat::OpenaiMessages,
            ),
            (json!({"messages": []}), ImportFormat::OpenaiMessages),
        ];
        for (record, expected) in cases {
            assert_eq!(classify(&record, b"").unwrap(), expected, "{record}");
        }
        assert_eq!(
            classify(&json!({"role": "user"}), br#"{"type": "tool_result"}"#).unwrap(),
            ImportFormat::AnthropicMessages
        );
        let err = classify(&json!({"foo": 1, "bar": 2}), b"").unwrap_err();
        assert!(err.contains("foo, bar"), "{err}");
        assert!(classify(&json!([1]), b"").unwrap_err().contains("an array"));
    }

    #[test]
    fn classifies_agent_log_containers() {
        let cases = [
            (
                json!({"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}),
                ImportFormat::ClaudeCode,
            ),
            (
                json!({"type": "user", "sessionId": "s", "parentUuid": null, "message": {}}),
                ImportFormat::ClaudeCode,
            ),
            (
                json!({"timestamp": "t", "type": "session_meta", "payload": {"id": "x"}}),
                ImportFormat::CodexRollout,
            ),
            (
                json!({"type": "function_call", "name": "f", "arguments": "{}", "call_id": "c"}),
                ImportFormat::OpenaiResponses,
            ),
            (
                json!({"id": "r", "object": "response", "output": []}),
                ImportFormat::OpenaiResponses,
            ),
            (
                json!({"timestamp": "t", "info": {}, "tasks": [], "simulations": []}),
                ImportFormat::Tau2Bench,
            ),
            (
                json!({"id": "multi_turn_base_0", "result": [], "inference_log": []}),
                ImportFormat::Bfcl,
            ),
            (
                json!({"win": true, "tree": {}, "answer_generation": {}}),
                ImportFormat::Toolbench,
            ),
            (
                json!({"environment": "e", "trajectory": [], "history": [], "info": {}}),
                ImportFormat::SweAgent,
            ),
            (json!({"history": []}), ImportFormat::SweAgent),
            (
                json!({"info": {}, "messages": [], "trajectory_format": "mini-swe-agent-1"}),
                ImportFormat::MiniSweAgent,
            ),
            (
                json!({"id": 0, "timestamp": "t", "source": "user", "action": "message"}),
                ImportFormat::Openhands,
            ),
        ];
        for (record, expected) in cases {
            assert_eq!(classify(&record, b"").unwrap(), expected, "{record}");
        }
        let system = json!({"role": "system", "content": "reply in a block"});
        assert_eq!(
            classify(&system, b"```mswea_bash_command\nls\n```").unwrap(),
            ImportFormat::MiniSweAgent
        );
        assert_eq!(
            classify(&system, b"```bash\nls\n``` \"tool_calls\"").unwrap(),
            ImportFormat::OpenaiMessages
        );
    }

    #[test]
    fn spmf_lines_are_recognised() {
        assert!(looks_like_spmf(b"1 -1 2 -1 3 -1 -2\n4 -1 -2\n"));
        assert!(looks_like_spmf(
            b"@CONVERTED_FROM_TEXT\n@ITEM=1=a\n1 -1 -2\n"
        ));
        assert!(!looks_like_spmf(b"hello world\n"));
        assert!(!looks_like_spmf(b"1 2 3\n"));
    }
}
