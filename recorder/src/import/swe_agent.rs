//! `swe-agent` and `mini-swe-agent`: agents that act through a shell.
//!
//! **SWE-agent** `.traj` files are one JSON document `{environment, trajectory: [{action,
//! observation, thought, execution_time, ...}], history: [messages], info, replay_config}`, one
//! trace per file (named by the file). When the agent used function calling, `history` holds
//! OpenAI `tool_calls` (sometimes written as Python text) answered by `role: tool` messages
//! that name their calls in `tool_call_ids`; those calls are the steps (see
//! [`super::messages`]). Otherwise each `trajectory` entry is a step: its action's first word is
//! the tool (`open`, `edit`, `find_file`, `python`, `submit`, ...), the whole action text its
//! `command` input, the observation its output, and `execution_time` (seconds) its duration.
//! An observation reading `Error: ...` is a failed call. The trace keeps `environment` and
//! `info.exit_status`.
//!
//! **mini-swe-agent** logs are chat messages (a bare JSON array, or `{"messages": [...],
//! "trajectory_format": "mini-swe-agent-..."}`) without structured calls: the assistant's action
//! is the one shell command in a fenced code block (` ```bash ` or ` ```mswea_bash_command `),
//! a step named `bash` with the command as input. The next user message is its result
//! (`<returncode>N</returncode><output>...</output>`): the output text becomes the step's
//! output and a non-zero return code makes it failed. A reply with no block or several is a
//! format error the agent itself refuses, not an action; such replies are counted in the trace's
//! `format_errors`.

use serde_json::{Map, Value};

use super::messages::{Conversation, TOOL_ERROR, error_result};
use super::records::Handler as RecordHandler;
use super::values::{id_text, type_name};
use super::{Output, Position};
use crate::error::Result;
use crate::model::{ObservedStep, ObservedTrace};

/// Code-fence languages mini-swe-agent runs.
const BASH_FENCES: [&str; 2] = ["mswea_bash_command", "bash"];

/// The `swe-agent` handler.
pub(crate) struct SweAgentHandler;

impl RecordHandler for SweAgentHandler {
    fn record(
        &mut self,
        out: &mut Output<'_>,
        _at: Position,
        value: Value,
    ) -> Result<Result<(), String>> {
        out.emit_or_reject(swe_agent_trace(value, &out.stem))
    }
}

/// True when some history message makes structured calls.
fn has_structured_calls(history: &[Value]) -> bool {
    history
        .iter()
        .any(|message| match message.get("tool_calls") {
            None | Some(Value::Null) => false,
            Some(Value::Array(calls)) => !calls.is_empty(),
            Some(Value::String(text)) => !matches!(text.trim(), "" | "[]" | "None" | "null"),
            Some(_) => true,
        })
}

fn array_field(document: &mut Map<String, Value>, field: &str) -> Result<Vec<Value>, String> {
    match document.remove(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(format!(
            "`{field}` must be an array, got {}",
            type_name(&other)
        )),
    }
}

fn swe_agent_trace(value: Value, stem: &str) -> Result<(ObservedTrace, Vec<ObservedStep>), String> {
    let Value::Object(mut document) = value else {
        return Err(format!(
            "expected a SWE-agent trajectory document, got {}",
            type_name(&value)
        ));
    };
    let history = array_field(&mut document, "history")?;
    let trajectory = array_field(&mut document, "trajectory")?;
    let mut metadata = Map::new();
    if let Some(environment @ Value::String(_)) = document.get("environment") {
        metadata.insert("environment".to_owned(), environment.clone());
    }
    if let Some(status) = document
        .get("info")
        .and_then(|info| info.get("exit_status"))
    {
        metadata.insert("exit_status".to_owned(), status.clone());
    }
    let steps = if has_structured_calls(&history) {
        metadata.insert("actions".to_owned(), Value::from("tool_calls"));
        let mut conversation = Conversation::default();
        for (i, message) in history.into_iter().enumerate() {
            conversation
                .add(message)
                .map_err(|e| format!("history[{i}]: {e}"))?;
        }
        let (steps, notes) = conversation.finish();
        metadata.extend(notes);
        steps
    } else {
        metadata.insert("actions".to_owned(), Value::from("text"));
        trajectory
            .into_iter()
            .enumerate()
            .map(|(i, entry)| text_action(entry).map_err(|e| format!("trajectory[{i}]: {e}")))
            .collect::<Result<Vec<_>, String>>()?
    };
    let mut trace = ObservedTrace::new(stem.to_owned(), String::new());
    trace.agent = Some("swe-agent".to_owned());
    trace.metadata = metadata;
    Ok((trace, steps))
}

/// The first word of a shell-style action: the command it runs.
fn command_name(action: &str) -> &str {
    action.split_whitespace().next().unwrap_or("")
}

/// One trajectory entry as a step.
fn text_action(entry: Value) -> Result<ObservedStep, String> {
    let Value::Object(entry) = entry else {
        return Err(format!(
            "an entry must be an object, got {}",
            type_name(&entry)
        ));
    };
    let action = match entry.get("action") {
        Some(Value::String(action)) => action.clone(),
        Some(other) => {
            return Err(format!(
                "`action` must be a string, got {}",
                type_name(other)
            ));
        }
        None => return Err("missing `action`".to_owned()),
    };
    let name = match command_name(&action) {
        "" => "empty_action".to_owned(),
        name => name.to_owned(),
    };
    let mut step = ObservedStep::new(
        String::new(),
        0,
        name,
        serde_json::json!({ "command": action.trim_end() }),
    );
    let observation = match entry.get("observation") {
        Some(Value::String(text)) => text.clone(),
        None | Some(Value::Null) => String::new(),
        Some(other) => other.to_string(),
    };
    match error_result(&observation) {
        Some(message) => {
            step.error_type = Some(TOOL_ERROR.to_owned());
            step.error_message = Some(message);
        }
        None => step.outputs = Some(Value::String(observation)),
    }
    step.duration_ms = entry
        .get("execution_time")
        .and_then(Value::as_f64)
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|seconds| seconds * 1000.0);
    Ok(step)
}

/// The `mini-swe-agent` handler: messages one a record (a bare array), or documents with
/// `messages`.
#[derive(Default)]
pub(crate) struct MiniSweAgentHandler {
    loose: Option<Shell>,
}

impl RecordHandler for MiniSweAgentHandler {
    fn record(
        &mut self,
        out: &mut Output<'_>,
        _at: Position,
        value: Value,
    ) -> Result<Result<(), String>> {
        match value {
            Value::Object(mut document) if document.contains_key("messages") => {
                let messages = match array_field(&mut document, "messages") {
                    Ok(messages) => messages,
                    Err(reason) => return Ok(Err(reason)),
                };
                let mut shell = Shell::default();
                for (i, message) in messages.into_iter().enumerate() {
                    if let Err(e) = shell.message(message) {
                        return Ok(Err(format!("messages[{i}]: {e}")));
                    }
                }
                let mut trace = ObservedTrace::new(trace_name(&out.stem), String::new());
                if let Some(format) = document.get("trajectory_format") {
                    trace
                        .metadata
                        .insert("trajectory_format".to_owned(), format.clone());
                }
                shell.emit(out, trace)?;
                Ok(Ok(()))
            }
            message => Ok(self
                .loose
                .get_or_insert_with(Shell::default)
                .message(message)),
        }
    }

    fn finish(&mut self, out: &mut Output<'_>) -> Result<()> {
        if let Some(shell) = self.loose.take() {
            let trace = ObservedTrace::new(trace_name(&out.stem), String::new());
            shell.emit(out, trace)?;
        }
        Ok(())
    }
}

/// `name.traj` (from `name.traj.json`) without its `.traj`.
fn trace_name(stem: &str) -> String {
    stem.strip_suffix(".traj").unwrap_or(stem).to_owned()
}

/// A conversation whose actions are shell commands in the assistant's text.
#[derive(Default)]
struct Shell {
    conversation: Conversation,
    format_errors: u64,
}

impl Shell {
    fn message(&mut self, message: Value) -> Result<(), String> {
        let Value::Object(message) = message else {
            return Err(format!(
                "a message must be an object, got {}",
                type_name(&message)
            ));
        };
        let content = match message.get("content") {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
            None | Some(Value::Null) => String::new(),
            Some(other) => {
                return Err(format!("`content` must be text, got {}", type_name(other)));
            }
        };
        match message.get("role").and_then(Value::as_str) {
            Some("assistant") => match fenced_commands(&content).as_slice() {
                [command] => {
                    let mut step = ObservedStep::new(
                        String::new(),
                        0,
                        "bash",
                        serde_json::json!({ "command": command }),
                    );
                    step.call_id = id_text(message.get("id"));
                    self.conversation.push_call(step);
                }
                _ => self.format_errors += 1,
            },
            Some("user") if self.conversation.calls() > 0 => self.result(&content),
            _ => {}
        }
        Ok(())
    }

    /// The user message after an action: its return code and output.
    fn result(&mut self, content: &str) {
        let Some(step) = self.conversation.last_call_mut() else {
            return;
        };
        if step.outputs.is_some() || step.is_error() {
            return;
        }
        let code = tagged(content, "returncode").and_then(|c| c.trim().parse::<i64>().ok());
        let output = tagged(content, "output")
            .unwrap_or(content)
            .trim_matches('\n');
        if let Some(code) = code {
            step.metadata
                .insert("returncode".to_owned(), Value::from(code));
        }
        if code.is_some_and(|c| c != 0) {
            step.error_type = Some(TOOL_ERROR.to_owned());
            step.error_message = Some(output.to_owned());
        } else {
            step.outputs = Some(Value::String(output.to_owned()));
        }
    }

    fn emit(self, out: &mut Output<'_>, mut trace: ObservedTrace) -> Result<()> {
        let (mut steps, notes) = self.conversation.finish();
        // Results are matched in place above, so the conversation's own bookkeeping still
        // lists every call as waiting: only calls without an answer are missing one.
        for step in &mut steps {
            if step.outputs.is_some() || step.is_error() {
                step.metadata.remove(super::messages::RESULT_MISSING);
            }
        }
        trace.agent = Some("mini-swe-agent".to_owned());
        trace.metadata.extend(notes);
        if self.format_errors > 0 {
            trace
                .metadata
                .insert("format_errors".to_owned(), Value::from(self.format_errors));
        }
        out.emit(trace, steps)
    }
}

/// The text between `<tag>` and `</tag>`.
fn tagged<'a>(text: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = text.find(&open)? + open.len();
    let end = text[start..].find(&close)? + start;
    Some(&text[start..end])
}

/// The commands in the text's fenced code blocks of a shell language.
fn fenced_commands(text: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let Some(line_end) = after.find('\n') else {
            break;
        };
        let language = after[..line_end].trim();
        let body = &after[line_end + 1..];
        let Some(close) = body.find("```") else {
            break;
        };
        if BASH_FENCES.contains(&language) {
            commands.push(body[..close].trim_end().to_owned());
        }
        rest = &body[close + 3..];
    }
    commands
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_actions_are_named_by_their_command() {
        let step = text_action(json!({"action": "open \"a.py\"\n", "observation": "[File]",
            "execution_time": 0.5}))
        .unwrap();
        assert_eq!(step.tool_name, "open");
        assert_eq!(step.inputs, json!({"command": "open \"a.py\""}));
        assert_eq!(step.outputs, Some(json!("[File]")));
        assert_eq!(step.duration_ms, Some(500.0));
        let failed = text_action(json!({"action": "x", "observation": "Error: no"})).unwrap();
        assert!(failed.is_error());
        assert!(
            text_action(json!({"action": 3}))
                .unwrap_err()
                .contains("string")
        );
    }

    #[test]
    fn fenced_bash_blocks_are_found() {
        let text = "Let me look.\n\n```bash\nls -la\n```\nand\n```python\nx\n```";
        assert_eq!(fenced_commands(text), vec!["ls -la".to_owned()]);
        assert!(fenced_commands("no code").is_empty());
        assert_eq!(
            fenced_commands("```mswea_bash_command\necho hi\n```").len(),
            1
        );
    }

    #[test]
    fn return_codes_decide_failure() {
        let mut shell = Shell::default();
        for message in [
            json!({"role": "user", "content": "task"}),
            json!({"role": "assistant", "content": "```bash\nfalse\n```"}),
            json!({"role": "user", "content": "<returncode>1</returncode>\n<output>\nboom\n</output>"}),
            json!({"role": "assistant", "content": "two\n```bash\na\n```\n```bash\nb\n```"}),
            json!({"role": "assistant", "content": "```bash\ntrue\n```"}),
            json!({"role": "user", "content": "<returncode>0</returncode>\n<output>\nfine\n</output>"}),
        ] {
            shell.message(message).unwrap();
        }
        assert_eq!(shell.format_errors, 1);
        let (steps, _) = shell.conversation.finish();
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].error_message.as_deref(), Some("boom"));
        assert_eq!(steps[1].outputs, Some(json!("fine")));
    }
}
