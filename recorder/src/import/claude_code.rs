//! `claude-code`: Claude Code session logs, one JSON entry a line. Entries of `type` `user` and
//! `assistant` carry an Anthropic message under `message` (`tool_use` blocks in assistant
//! content, `tool_result` blocks with `is_error` in user content); the other entry types
//! (`progress`, `system`, `file-history-snapshot`, `queue-operation`, `summary`) hold no calls and
//! are passed over.
//!
//! One trace per session (`sessionId`). A subagent's session is written to its own file with the
//! parent's `sessionId`, `isSidechain: true` and its `agentId`; it becomes its own trace,
//! `<sessionId>/agent-<agentId>`, whose metadata names the parent trace (`parent_trace_id`). In
//! the parent, the call that started the subagent (its result's `toolUseResult.agentId`) notes
//! the subagent's trace in `subagent_trace_id`. Each entry's `timestamp` times the calls it
//! makes (`started_at`) and the results it carries (`ended_at`, and so the duration); the
//! trace's span is its first and last entry. The working directory, branch, version and slug
//! of the session go to the trace's metadata.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::messages::Conversation;
use super::records::Handler as RecordHandler;
use super::values::{id_text, timestamp, type_name};
use super::{Output, Position};
use crate::error::Result;
use crate::model::{ObservedTrace, Timestamp};

/// Entry types that hold a message.
const MESSAGE_TYPES: [&str; 2] = ["user", "assistant"];

/// Entry fields kept in the trace's metadata, under these names.
const SESSION_FIELDS: [(&str, &str); 4] = [
    ("cwd", "cwd"),
    ("gitBranch", "git_branch"),
    ("version", "claude_code_version"),
    ("slug", "slug"),
];

/// One session being read.
#[derive(Default)]
struct Session {
    conversation: Conversation,
    metadata: Map<String, Value>,
    started_at: Option<Timestamp>,
    ended_at: Option<Timestamp>,
}

/// The `claude-code` handler: sessions in order of first appearance.
#[derive(Default)]
pub(crate) struct Handler {
    order: Vec<String>,
    sessions: HashMap<String, Session>,
}

impl RecordHandler for Handler {
    fn record(
        &mut self,
        _out: &mut Output<'_>,
        _at: Position,
        value: Value,
    ) -> Result<Result<(), String>> {
        Ok(self.entry(value))
    }

    fn finish(&mut self, out: &mut Output<'_>) -> Result<()> {
        for trace_id in std::mem::take(&mut self.order) {
            let Some(session) = self.sessions.remove(&trace_id) else {
                continue;
            };
            let (steps, notes) = session.conversation.finish();
            let mut trace = ObservedTrace::new(trace_id, String::new());
            trace.session_id = session
                .metadata
                .get("session_id")
                .and_then(Value::as_str)
                .map(str::to_owned);
            trace.started_at = session.started_at;
            trace.ended_at = session.ended_at;
            trace.agent = Some("claude-code".to_owned());
            trace.metadata = session.metadata;
            trace.metadata.extend(notes);
            out.emit(trace, steps)?;
        }
        Ok(())
    }
}

impl Handler {
    fn entry(&mut self, value: Value) -> Result<(), String> {
        let Value::Object(mut entry) = value else {
            return Err(format!(
                "a session entry must be an object, got {}",
                type_name(&value)
            ));
        };
        let kind = entry
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if !MESSAGE_TYPES.contains(&kind.as_str()) {
            return Ok(());
        }
        let Some(session_id) = id_text(entry.get("sessionId")) else {
            return Err(format!("a `{kind}` entry without `sessionId`"));
        };
        let agent_id = match entry.get("isSidechain") {
            Some(Value::Bool(true)) => id_text(entry.get("agentId")),
            _ => None,
        };
        let trace_id = match &agent_id {
            Some(agent) => subagent_trace_id(&session_id, agent),
            None => session_id.clone(),
        };
        let at = entry.get("timestamp").and_then(timestamp);
        let message = match entry.remove("message") {
            Some(message @ Value::Object(_)) => message,
            Some(other) => {
                return Err(format!(
                    "`message` must be an object, got {}",
                    type_name(&other)
                ));
            }
            None => return Err(format!("a `{kind}` entry without `message`")),
        };
        if !self.sessions.contains_key(&trace_id) {
            self.order.push(trace_id.clone());
        }
        let session = self.sessions.entry(trace_id).or_default();
        if session.metadata.is_empty() {
            session.metadata = session_metadata(&entry, &session_id, agent_id.as_deref());
        }
        if let Some(at) = at {
            session.started_at = Some(session.started_at.map_or(at, |s| s.min(at)));
            session.ended_at = Some(session.ended_at.map_or(at, |e| e.max(at)));
        }
        session.conversation.add_at(message.clone(), at)?;
        link_subagent(&mut session.conversation, &entry, &message, &session_id);
        Ok(())
    }
}

fn subagent_trace_id(session_id: &str, agent_id: &str) -> String {
    format!("{session_id}/agent-{agent_id}")
}

fn session_metadata(
    entry: &Map<String, Value>,
    session_id: &str,
    agent_id: Option<&str>,
) -> Map<String, Value> {
    let mut metadata = Map::new();
    metadata.insert("session_id".to_owned(), Value::from(session_id));
    for (field, name) in SESSION_FIELDS {
        if let Some(value @ Value::String(_)) = entry.get(field) {
            metadata.insert(name.to_owned(), value.clone());
        }
    }
    if let Some(agent) = agent_id {
        metadata.insert("agent_id".to_owned(), Value::from(agent));
        metadata.insert("parent_trace_id".to_owned(), Value::from(session_id));
    }
    metadata
}

/// A result entry whose `toolUseResult` names an `agentId` answers the call that started that
/// subagent: note the subagent's trace on the call.
fn link_subagent(
    conversation: &mut Conversation,
    entry: &Map<String, Value>,
    message: &Value,
    session_id: &str,
) {
    let Some(agent) = entry
        .get("toolUseResult")
        .and_then(|result| id_text(result.get("agentId")))
    else {
        return;
    };
    let Some(Value::Array(blocks)) = message.get("content") else {
        return;
    };
    for block in blocks {
        if let Some(call_id) = id_text(block.get("tool_use_id"))
            && let Some(step) = conversation.call_mut(&call_id)
        {
            step.metadata.insert(
                "subagent_trace_id".to_owned(),
                Value::from(subagent_trace_id(session_id, &agent)),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn entries_without_messages_are_passed_over_and_bad_ones_named() {
        let mut handler = Handler::default();
        assert!(
            handler
                .entry(json!({"type": "progress", "data": {}}))
                .is_ok()
        );
        let err = handler
            .entry(json!({"type": "user", "message": {"role": "user"}}))
            .unwrap_err();
        assert!(err.contains("sessionId"), "{err}");
        let err = handler
            .entry(json!({"type": "assistant", "sessionId": "s", "message": "hi"}))
            .unwrap_err();
        assert!(err.contains("`message` must be an object"), "{err}");
        assert!(handler.entry(json!([1])).is_err());
    }

    #[test]
    fn sidechain_entries_form_their_own_session() {
        let mut handler = Handler::default();
        handler
            .entry(
                json!({"type": "assistant", "sessionId": "s", "isSidechain": true,
                "agentId": "a1", "message": {"role": "assistant", "content": []}}),
            )
            .unwrap();
        assert_eq!(handler.order, vec!["s/agent-a1".to_owned()]);
        let session = &handler.sessions["s/agent-a1"];
        assert_eq!(session.metadata["parent_trace_id"], json!("s"));
    }
}
