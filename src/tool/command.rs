//! Command tools: external programs declared in a TOML manifest.
//!
//! ```toml
//! [[tool]]
//! name = "add"
//! description = "Add two numbers"
//! argv = ["python3", "add.py"]          # relative paths resolve against the manifest's folder
//! timeout_seconds = 5
//! read_only = true
//! persistent = false                    # true: one process answers many calls (see below)
//! workers = 1                           # persistent tools: processes for calls in flight
//! input_schema = { type = "object", properties = { a = { type = "number" } }, required = ["a"] }
//! output_schema = { type = "object" }
//! ```
//!
//! `[[mcp_server]]` tables add the tools of MCP servers (see [`crate::mcp::manifest`]).
//!
//! The program gets the validated input as one JSON object on stdin and answers one JSON object
//! on stdout. A non-zero exit, a missing program or output that is not JSON fails the call with
//! a message naming the tool and the manifest. On timeout the child is killed. A tool without
//! `timeout_seconds` gets [`DEFAULT_TIMEOUT_SECONDS`], so a stuck program never hangs a run.
//!
//! Starting a process per call costs about a millisecond. A tool called often can be
//! `persistent`: its program starts once and answers each call as one JSON line (the
//! protocol is in docs/mcp.md, "Persistent command tools", and in the module `worker`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use crate::error::{Error, Result};
use crate::tool::worker::WorkerPool;
use crate::tool::{JsonObject, Tool, ToolFailure, ToolFn, ToolRegistry, any_object_schema};

/// The timeout of a command tool whose manifest entry does not set one.
pub const DEFAULT_TIMEOUT_SECONDS: f64 = 60.0;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    #[serde(default)]
    tool: Vec<ManifestTool>,
    #[serde(default)]
    mcp_server: Vec<crate::mcp::manifest::McpServerEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestTool {
    name: String,
    #[serde(default)]
    description: String,
    argv: Vec<String>,
    #[serde(default)]
    input_schema: Option<toml::Value>,
    #[serde(default)]
    output_schema: Option<toml::Value>,
    #[serde(default)]
    timeout_seconds: Option<f64>,
    #[serde(default)]
    read_only: Option<bool>,
    #[serde(default)]
    cacheable: bool,
    #[serde(default)]
    max_output_size: Option<usize>,
    #[serde(default)]
    schema_version: Option<String>,
    #[serde(default)]
    persistent: bool,
    #[serde(default)]
    workers: Option<usize>,
}

/// How one command tool is started.
#[derive(Debug, Clone)]
pub(crate) struct CommandSpec {
    pub(crate) tool: String,
    pub(crate) manifest: PathBuf,
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<String>,
    pub(crate) dir: PathBuf,
}

impl CommandSpec {
    /// `tool `NAME` (manifest PATH)`, how errors name the tool.
    pub(crate) fn describe(&self) -> String {
        format!(
            "tool `{}` (manifest {})",
            self.tool,
            self.manifest.display()
        )
    }

    /// Start the program with its stdin, stdout and stderr piped, killed when its handle is
    /// dropped (a timeout drops the call; the child must not outlive it). `Err`: the error
    /// kind (`CommandNotFound` or `CommandFailed`) and why.
    pub(crate) fn spawn(&self) -> Result<tokio::process::Child, (&'static str, String)> {
        tokio::process::Command::new(&self.program)
            .args(&self.args)
            .current_dir(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| {
                let kind = if err.kind() == std::io::ErrorKind::NotFound {
                    "CommandNotFound"
                } else {
                    "CommandFailed"
                };
                (
                    kind,
                    format!("cannot start `{}`: {err}", self.program.display()),
                )
            })
    }
}

/// Read a manifest file and build its tools.
pub fn load_manifest(path: &Path) -> Result<ToolRegistry> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let dir = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    parse_manifest(&text, path, &dir)
}

/// Build the tools of a manifest's text; `path` names it in errors, `dir` anchors relative
/// paths.
pub fn parse_manifest(text: &str, path: &Path, dir: &Path) -> Result<ToolRegistry> {
    // A manifest named without a folder (`tools.toml`) has the empty path as its parent, which
    // no child process can start in: command tools and MCP servers alike start in `.` then.
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let manifest_error = |message: String| Error::Manifest {
        path: path.to_path_buf(),
        message,
    };
    let manifest: Manifest = toml::from_str(text).map_err(|err| manifest_error(err.to_string()))?;
    if manifest.tool.is_empty() && manifest.mcp_server.is_empty() {
        return Err(manifest_error(
            "declares no [[tool]] and no [[mcp_server]]".into(),
        ));
    }
    let mut registry = ToolRegistry::new();
    for entry in manifest.tool {
        if entry.name.trim().is_empty() {
            return Err(manifest_error("a tool has an empty name".into()));
        }
        if registry.get(&entry.name).is_some() {
            return Err(manifest_error(format!(
                "tool `{}` is declared twice",
                entry.name
            )));
        }
        let Some((program, args)) = entry.argv.split_first() else {
            return Err(manifest_error(format!(
                "tool `{}`: argv is empty",
                entry.name
            )));
        };
        let program = PathBuf::from(program);
        let program = if program.components().count() > 1 && program.is_relative() {
            dir.join(program)
        } else {
            program
        };
        let to_json = |schema: Option<toml::Value>, which: &str| -> Result<Value> {
            match schema {
                None => Ok(any_object_schema()),
                Some(value) => serde_json::to_value(value).map_err(|err| {
                    manifest_error(format!("tool `{}`: {which}_schema: {err}", entry.name))
                }),
            }
        };
        let input_schema = to_json(entry.input_schema, "input")?;
        let output_schema = to_json(entry.output_schema, "output")?;
        let spec = Arc::new(CommandSpec {
            tool: entry.name.clone(),
            manifest: path.to_path_buf(),
            program,
            args: args.to_vec(),
            dir: dir.to_path_buf(),
        });
        let function = match (entry.persistent, entry.workers) {
            (false, Some(_)) => {
                return Err(manifest_error(format!(
                    "tool `{}`: `workers` is for persistent tools (set `persistent = true`)",
                    entry.name
                )));
            }
            (true, Some(0)) => {
                return Err(manifest_error(format!(
                    "tool `{}`: `workers` must be at least 1",
                    entry.name
                )));
            }
            (true, workers) => {
                let pool = Arc::new(WorkerPool::new(
                    spec,
                    workers.unwrap_or(1),
                    entry.max_output_size,
                ));
                ToolFn::Async(Arc::new(move |input: JsonObject| {
                    Box::pin(Arc::clone(&pool).call(input))
                }))
            }
            (false, None) => ToolFn::Async(Arc::new(move |input: JsonObject| {
                let spec = Arc::clone(&spec);
                Box::pin(async move { run_command(&spec, input).await })
            })),
        };
        let tool = Tool::builder(entry.name.clone(), function)
            .description(entry.description)
            .input_schema(input_schema)
            .output_schema(output_schema)
            .timeout_seconds(Some(
                entry.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS),
            ))
            .max_output_size(entry.max_output_size)
            .schema_version(entry.schema_version.unwrap_or_else(|| "1".into()))
            .cacheable(entry.cacheable)
            .read_only(entry.read_only)
            .build()
            .map_err(|err| manifest_error(err.to_string()))?;
        registry.register(tool);
    }
    for entry in manifest.mcp_server {
        let spec = entry.into_spec(path, dir).map_err(manifest_error)?;
        for tool in crate::mcp::connect_tools(&spec)? {
            if registry.get(tool.name()).is_some() {
                return Err(manifest_error(format!(
                    "tool `{}` of mcp_server `{}` is declared twice (set a `prefix`)",
                    tool.name(),
                    spec.name
                )));
            }
            registry.register(tool);
        }
    }
    Ok(registry)
}

async fn run_command(spec: &CommandSpec, input: JsonObject) -> Result<Value, ToolFailure> {
    let mut child = spec.spawn().map_err(|(kind, message)| {
        ToolFailure::of_kind(kind, format!("{}: {message}", spec.describe()))
    })?;
    let payload = serde_json::to_vec(&Value::Object(input))
        .map_err(|err| ToolFailure::new(format!("{}: {err}", spec.describe())))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A program that exits without reading its input is not an error by itself.
        let _ = stdin.write_all(&payload).await;
        let _ = stdin.shutdown().await;
    }
    let output = child.wait_with_output().await.map_err(|err| {
        ToolFailure::of_kind("CommandFailed", format!("{}: {err}", spec.describe()))
    })?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stderr_tail = tail(stderr.trim(), 400);
    if !output.status.success() {
        return Err(ToolFailure::of_kind(
            "CommandFailed",
            format!(
                "{}: `{}` exited with {}{}",
                spec.describe(),
                spec.program.display(),
                output.status,
                if stderr_tail.is_empty() {
                    String::new()
                } else {
                    format!(": {stderr_tail}")
                }
            ),
        ));
    }
    serde_json::from_slice::<Value>(&output.stdout).map_err(|err| {
        let stdout = String::from_utf8_lossy(&output.stdout);
        ToolFailure::of_kind(
            "InvalidToolOutput",
            format!(
                "{}: stdout is not JSON ({err}): {:?}",
                spec.describe(),
                tail(stdout.trim(), 200)
            ),
        )
    })
}

/// The last `max` bytes of `text` (fewer, to start on a character).
pub(crate) fn tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn manifest_errors_name_the_file() {
        let path = Path::new("tools.toml");
        let err = parse_manifest("[[tool]]\nname = \"x\"\n", path, Path::new(".")).unwrap_err();
        assert!(err.to_string().contains("tools.toml"), "{err}");
        assert!(err.to_string().contains("argv"), "{err}");
        let err = parse_manifest("nonsense = [", path, Path::new(".")).unwrap_err();
        assert_eq!(err.code(), "invalid_manifest");
    }

    #[test]
    fn a_command_tool_runs_and_bad_commands_name_the_tool() {
        let text = r#"
[[tool]]
name = "echo"
argv = ["sh", "-c", "cat"]
input_schema = { type = "object", properties = { n = { type = "integer" } } }

[[tool]]
name = "ghost"
argv = ["definitely-not-a-command-here"]

[[tool]]
name = "chatty"
argv = ["sh", "-c", "echo hello"]
"#;
        let path = Path::new("m.toml");
        let tools = parse_manifest(text, path, Path::new(".")).unwrap();
        let echo = tools.get("echo").unwrap();
        let out = echo
            .run(json!({"n": 12}).as_object().cloned().unwrap())
            .unwrap();
        assert_eq!(Value::Object(out), json!({"n": 12}));
        let err = tools
            .get("ghost")
            .unwrap()
            .run(JsonObject::new())
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("ghost") && text.contains("m.toml"), "{text}");
        assert_eq!(err.type_name(), "CommandNotFound");
        let err = tools
            .get("chatty")
            .unwrap()
            .run(JsonObject::new())
            .unwrap_err();
        assert!(
            err.to_string().contains("not JSON") && err.to_string().contains("chatty"),
            "{err}"
        );
    }
}
