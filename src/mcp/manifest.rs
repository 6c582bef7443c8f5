//! `[[mcp_server]]` entries of a tool manifest: MCP servers whose tools join the manifest's.
//!
//! ```toml
//! [[mcp_server]]
//! name = "users"                       # names the server in errors
//! command = "python3"                  # spawned, spoken to over stdio ...
//! args = ["servers/users.py"]          # relative paths resolve against the manifest's folder
//! env = { USERS_DB = "users.db" }
//! # url = "http://127.0.0.1:8000/mcp"  # ... or a streamable HTTP endpoint (not both)
//! prefix = "users"                     # tools are registered as users__<tool> (default: no prefix)
//! cacheable = ["lookup_user"]          # tools the step cache may memoize (default: none)
//! timeout_seconds = 30                 # per call; on timeout the call is cancelled at the server
//! tools = ["lookup_user", "add"]       # only these of the server's tools (default: all)
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The default per-call timeout of an MCP tool.
pub const DEFAULT_TIMEOUT_SECONDS: f64 = 60.0;

/// One `[[mcp_server]]` table, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerEntry {
    pub name: String,
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub prefix: Option<String>,
    #[serde(default)]
    pub cacheable: Vec<String>,
    #[serde(default)]
    pub timeout_seconds: Option<f64>,
    #[serde(default)]
    pub tools: Option<Vec<String>>,
}

/// How to reach a server.
#[derive(Debug, Clone, PartialEq)]
pub enum Endpoint {
    /// Spawn this program (with these arguments and extra environment, in `dir`) and speak
    /// over its stdin and stdout.
    Command {
        program: PathBuf,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        dir: PathBuf,
    },
    /// A streamable HTTP endpoint.
    Url(String),
}

/// True for the URLs a streamable HTTP server is reached by: `http://` and `https://`.
pub(crate) fn is_http_url(url: &str) -> bool {
    url.starts_with("http://") || url.starts_with("https://")
}

/// A checked `[[mcp_server]]` entry.
#[derive(Debug, Clone)]
pub struct McpServerSpec {
    pub name: String,
    pub endpoint: Endpoint,
    pub prefix: Option<String>,
    pub cacheable: Vec<String>,
    pub timeout_seconds: f64,
    pub only: Option<Vec<String>>,
    /// The manifest that declared it, for messages.
    pub manifest: PathBuf,
}

impl McpServerEntry {
    /// Check the entry; `dir` (not empty: [`parse_manifest`](crate::tool::command::parse_manifest)
    /// makes a bare manifest name's `.`) anchors relative paths in `command` and `args`.
    pub fn into_spec(self, manifest: &Path, dir: &Path) -> Result<McpServerSpec, String> {
        let name = self.name.trim().to_string();
        if name.is_empty() {
            return Err("an [[mcp_server]] has an empty name".into());
        }
        let endpoint = match (self.command, self.url) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "mcp_server `{name}`: give `command` or `url`, not both"
                ));
            }
            (None, None) => {
                return Err(format!(
                    "mcp_server `{name}`: give `command` (and `args`) or `url`"
                ));
            }
            (Some(command), None) => {
                let program = PathBuf::from(&command);
                let program = if program.components().count() > 1 && program.is_relative() {
                    dir.join(program)
                } else {
                    program
                };
                Endpoint::Command {
                    program,
                    args: self.args,
                    env: self.env,
                    dir: dir.to_path_buf(),
                }
            }
            (None, Some(url)) => {
                if !is_http_url(&url) {
                    return Err(format!(
                        "mcp_server `{name}`: url `{url}` is not an http(s) URL"
                    ));
                }
                Endpoint::Url(url)
            }
        };
        let timeout_seconds = self.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS);
        if !(timeout_seconds.is_finite() && timeout_seconds > 0.0) {
            return Err(format!(
                "mcp_server `{name}`: timeout_seconds must be a positive number"
            ));
        }
        Ok(McpServerSpec {
            name,
            endpoint,
            prefix: self.prefix.filter(|p| !p.is_empty()),
            cacheable: self.cacheable,
            timeout_seconds,
            only: self.tools,
            manifest: manifest.to_path_buf(),
        })
    }
}

/// The registered name of a server's tool.
pub fn prefixed(prefix: Option<&str>, tool: &str) -> String {
    match prefix {
        Some(prefix) => format!("{prefix}__{tool}"),
        None => tool.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str) -> Result<McpServerSpec, String> {
        let entry: McpServerEntry = toml::from_str(text).map_err(|e| e.to_string())?;
        entry.into_spec(Path::new("m.toml"), Path::new("/srv"))
    }

    #[test]
    fn entries_resolve_paths_and_refuse_ambiguity() {
        let spec = entry("name = \"u\"\ncommand = \"bin/server\"\nprefix = \"u\"\n").unwrap();
        assert_eq!(
            spec.endpoint,
            Endpoint::Command {
                program: PathBuf::from("/srv/bin/server"),
                args: vec![],
                env: BTreeMap::new(),
                dir: PathBuf::from("/srv"),
            }
        );
        assert_eq!(prefixed(spec.prefix.as_deref(), "get"), "u__get");
        let err = entry("name = \"u\"\ncommand = \"x\"\nurl = \"http://h/mcp\"\n").unwrap_err();
        assert!(err.contains("not both"), "{err}");
        let err = entry("name = \"u\"\n").unwrap_err();
        assert!(err.contains("command"), "{err}");
        let err = entry("name = \"u\"\nurl = \"ftp://h\"\n").unwrap_err();
        assert!(err.contains("http"), "{err}");
        assert!(entry("name = \"u\"\ncommand = \"x\"\nargv = []\n").is_err());
    }
}
