//! The flow server: registered flows (and, with chain tools on, chains managed at runtime)
//! answered as MCP tools. Everything here is plain JSON; [`wire`](super::wire) puts it on an MCP
//! transport.
//!
//! A served flow runs in the executor's async lane with the tools of `--tools` manifests. Its
//! arguments are the flow input's top-level fields. Success: `structuredContent` is the flow's
//! final output (and the text content its JSON). Failure: `isError: true`, with a text naming
//! the step that failed and `_meta.chainweaver.failed_step`. A chain tool answers in the chain
//! output shape (`success`, `steps`, `final_result`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::{Map, Value, json};

use chainweaver_recorder::model::flow::{FlowDefinition, FlowServing, FlowStatus, RegisteredFlow};

use super::catalog::{self, Exposure, META_KEY, ServedFlow};
use super::dynamic::{self, ChainPolicy};
use crate::chain_tool::chain_output;
use crate::error::{Error, Result};
use crate::executor::{ExecutionResult, FlowExecutor, RunOptions};
use crate::flow::chain::ChainTool;
use crate::registry::FlowRegistry;
use crate::tool::ToolRegistry;

/// How `serve` is set up.
#[derive(Debug, Clone, Default)]
pub struct ServeConfig {
    /// The server's name in `initialize` / `server/discover`.
    pub name: String,
    pub exposure: Exposure,
    /// Chain tools at runtime: on when set.
    pub chain_tools: Option<ChainPolicy>,
}

/// A request the server cannot answer with a tool result (a protocol error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallRejected {
    UnknownTool(String),
}

impl std::fmt::Display for CallRejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallRejected::UnknownTool(name) => write!(f, "no tool `{name}` is served"),
        }
    }
}

/// A tool result, and whether the tool list changed because of the call.
#[derive(Debug, Clone)]
pub struct CallAnswer {
    /// A `CallToolResult`, as the wire spells it.
    pub result: Value,
    pub tools_changed: bool,
}

/// Flows served as MCP tools.
pub struct FlowServer {
    config: ServeConfig,
    executor: Arc<FlowExecutor>,
    registry: Mutex<FlowRegistry>,
    served: RwLock<BTreeMap<String, ServedFlow>>,
    warnings: Vec<String>,
}

impl std::fmt::Debug for FlowServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowServer")
            .field("name", &self.config.name)
            .finish_non_exhaustive()
    }
}

impl FlowServer {
    /// A server over the flows of `registry` (usually the store's), running them with `tools`.
    pub fn new(tools: ToolRegistry, registry: FlowRegistry, config: ServeConfig) -> Self {
        let flows: Vec<RegisteredFlow> = registry.list().into_iter().cloned().collect();
        let (_, warnings) = catalog::select(&flows, &tools, &config.exposure);
        let server = Self {
            config,
            executor: Arc::new(FlowExecutor::new(tools)),
            registry: Mutex::new(registry),
            served: RwLock::new(BTreeMap::new()),
            warnings,
        };
        server.refresh();
        server
    }

    /// Warnings about the exposure (flows named but missing, or named despite their metadata).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Whether chain tools are on (the server then announces list changes).
    pub fn chain_tools_enabled(&self) -> bool {
        self.config.chain_tools.is_some()
    }

    fn tools(&self) -> &ToolRegistry {
        self.executor.tools()
    }

    fn refresh(&self) {
        let flows: Vec<RegisteredFlow> = match self.registry.lock() {
            Ok(registry) => registry.list().into_iter().cloned().collect(),
            Err(_) => return,
        };
        let (chosen, _) = catalog::select(&flows, self.tools(), &self.config.exposure);
        let mut served: BTreeMap<String, ServedFlow> = chosen
            .into_iter()
            .map(|f| (f.tool_name.clone(), f))
            .collect();
        if self.config.chain_tools.is_some() {
            for registered in &flows {
                if registered.status != FlowStatus::Active || !is_chain(&registered.definition) {
                    continue;
                }
                let flow = catalog::served_flow(registered, self.tools(), None);
                let newer = served
                    .get(&flow.tool_name)
                    .is_some_and(|old| old.is_chain && newer_version(&old.flow, &flow.flow));
                if !newer {
                    served.insert(flow.tool_name.clone(), flow);
                }
            }
        }
        if let Ok(mut slot) = self.served.write() {
            *slot = served;
        }
    }

    /// The `Tool` objects of `tools/list`.
    pub fn list_tools(&self) -> Vec<Value> {
        let mut tools: Vec<Value> = match &self.config.chain_tools {
            Some(policy) => dynamic::management_descriptors(policy),
            None => Vec::new(),
        };
        if let Ok(served) = self.served.read() {
            tools.extend(served.values().map(|f| f.descriptor.clone()));
        }
        tools
    }

    /// Answer a `tools/call`.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<CallAnswer, CallRejected> {
        if let Some(policy) = &self.config.chain_tools
            && dynamic::MANAGEMENT_TOOLS.contains(&name)
        {
            if name == dynamic::CREATE && !policy.allow_create {
                return Err(CallRejected::UnknownTool(name.to_string()));
            }
            return Ok(self.manage(name, arguments, policy));
        }
        let served = self
            .served
            .read()
            .ok()
            .and_then(|s| s.get(name).cloned())
            .ok_or_else(|| CallRejected::UnknownTool(name.to_string()))?;
        let outcome = if served.calls_blocking_tools {
            // A blocking tool runs inline in the executor: on a blocking thread of the
            // runtime, driven by its handle, so it never holds a runtime thread.
            let executor = Arc::clone(&self.executor);
            let flow = served.flow.clone();
            let handle = tokio::runtime::Handle::current();
            tokio::task::spawn_blocking(move || {
                handle.block_on(executor.execute_async(&flow, arguments, &RunOptions::default()))
            })
            .await
            .unwrap_or_else(|err| Err(Error::Runtime(format!("the flow's task failed: {err}"))))
        } else {
            // Only async tools (commands, MCP servers): the run is awaited here, without a
            // thread hand-off per call.
            self.executor
                .execute_async(&served.flow, arguments, &RunOptions::default())
                .await
        };
        let result = match (outcome, served.is_chain) {
            (Ok(result), true) => chain_result(&result),
            (Ok(result), false) => flow_result(&result),
            (Err(err), _) => tool_error(&format!("flow `{}`: {err}", served.flow.name()), None),
        };
        Ok(CallAnswer {
            result,
            tools_changed: false,
        })
    }

    fn manage(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        policy: &ChainPolicy,
    ) -> CallAnswer {
        let outcome = match name {
            dynamic::CREATE => self.create(arguments, policy),
            dynamic::LIST => Ok((self.list_chains(), false)),
            dynamic::UPDATE => self.update(arguments, policy),
            dynamic::DISABLE => self.disable(arguments),
            _ => self.delete(arguments),
        };
        match outcome {
            Ok((document, changed)) => {
                if changed {
                    self.refresh();
                }
                CallAnswer {
                    result: ok_result(document),
                    tools_changed: changed,
                }
            }
            Err(message) => CallAnswer {
                result: tool_error(&format!("{name}: {message}"), None),
                tools_changed: false,
            },
        }
    }

    /// Every non-retired version of each chain tool, newest last.
    fn chain_versions(&self) -> Vec<RegisteredFlow> {
        match self.registry.lock() {
            Ok(registry) => registry
                .list()
                .into_iter()
                .filter(|f| f.status != FlowStatus::Retired && is_chain(&f.definition))
                .cloned()
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    fn newest_chain(&self, name: &str) -> Option<RegisteredFlow> {
        self.chain_versions()
            .into_iter()
            .filter(|f| f.definition.name() == name)
            .max_by_key(|f| crate::flow::version_key(f.definition.version()))
    }

    fn check(&self, chain: &ChainTool, policy: &ChainPolicy) -> Result<(), String> {
        let others: BTreeSet<String> = self
            .chain_versions()
            .into_iter()
            .map(|f| f.definition.name().to_string())
            .filter(|n| *n != chain.name)
            .collect();
        let mut reserved: BTreeSet<String> = dynamic::MANAGEMENT_TOOLS
            .iter()
            .map(|s| s.to_string())
            .collect();
        if let Ok(served) = self.served.read() {
            reserved.extend(
                served
                    .values()
                    .filter(|f| !f.is_chain)
                    .map(|f| f.tool_name.clone()),
            );
        }
        dynamic::check_chain(chain, self.tools(), policy, &others, &reserved)
    }

    fn register_chain(
        &self,
        definition: &Map<String, Value>,
        version: String,
        status: FlowStatus,
        policy: &ChainPolicy,
    ) -> Result<RegisteredFlow, String> {
        let chain = ChainTool::from_value(Value::Object(definition.clone()))?;
        self.check(&chain, policy)?;
        let mut flow = chain.to_flow();
        flow.version = version;
        let serving = FlowServing {
            chain_config: definition.get("chain_config").cloned(),
            ..FlowServing::default()
        };
        serving.write_into(&mut flow.metadata);
        let definition = FlowDefinition::Linear(flow);
        let mut registry = self
            .registry
            .lock()
            .map_err(|_| "the flow registry is unavailable".to_string())?;
        registry
            .register(definition.clone(), status)
            .map_err(|err| err.to_string())?;
        registry
            .get(definition.name(), definition.version())
            .cloned()
            .ok_or_else(|| "the chain tool was not stored".to_string())
    }

    fn create(
        &self,
        arguments: Map<String, Value>,
        policy: &ChainPolicy,
    ) -> Result<(Value, bool), String> {
        let name = required_name(&arguments)?;
        if self.newest_chain(&name).is_some() {
            return Err(format!(
                "a chain tool `{name}` exists; change it with {}",
                dynamic::UPDATE
            ));
        }
        let activate = activate_flag(&arguments)?.unwrap_or(true);
        let version = next_version(self.retired_versions(&name));
        let status = if activate {
            FlowStatus::Active
        } else {
            FlowStatus::Draft
        };
        let mut definition = arguments;
        definition.remove("activate");
        let stored = self.register_chain(&definition, version, status, policy)?;
        Ok((describe_chain(&stored, "created"), activate))
    }

    fn retired_versions(&self, name: &str) -> Option<String> {
        let registry = self.registry.lock().ok()?;
        registry
            .versions(name)
            .last()
            .map(|f| f.definition.version().to_string())
    }

    fn update(
        &self,
        arguments: Map<String, Value>,
        policy: &ChainPolicy,
    ) -> Result<(Value, bool), String> {
        let name = required_name(&arguments)?;
        let current = self
            .newest_chain(&name)
            .ok_or_else(|| format!("no chain tool `{name}`"))?;
        let activate = activate_flag(&arguments)?;
        let changes_definition = ["description", "input_schema", "chain_config", "tool_type"]
            .iter()
            .any(|k| arguments.contains_key(*k));
        if !changes_definition {
            let Some(activate) = activate else {
                return Err(
                    "nothing to update: give description, input_schema, chain_config or activate"
                        .into(),
                );
            };
            let status = if activate {
                FlowStatus::Active
            } else {
                FlowStatus::Deprecated
            };
            self.set_status(&current, status)?;
            let stored = self.newest_chain(&name).unwrap_or(current);
            return Ok((describe_chain(&stored, "updated"), true));
        }
        let mut definition = chain_definition(&current);
        for (key, value) in arguments {
            if key != "activate" {
                definition.insert(key, value);
            }
        }
        let status = match activate {
            Some(true) => FlowStatus::Active,
            Some(false) => FlowStatus::Draft,
            None if current.status == FlowStatus::Active => FlowStatus::Active,
            None => FlowStatus::Draft,
        };
        let version = next_version(Some(current.definition.version().to_string()));
        let stored = self.register_chain(&definition, version, status, policy)?;
        for old in self.chain_versions() {
            if old.definition.name() == name
                && old.definition.version() != stored.definition.version()
            {
                self.set_status(&old, FlowStatus::Retired)?;
            }
        }
        Ok((describe_chain(&stored, "updated"), true))
    }

    fn set_status(&self, flow: &RegisteredFlow, status: FlowStatus) -> Result<(), String> {
        let mut registry = self
            .registry
            .lock()
            .map_err(|_| "the flow registry is unavailable".to_string())?;
        let (name, version) = (flow.definition.name(), flow.definition.version());
        // A draft is disabled by leaving it a draft.
        if flow.status == FlowStatus::Draft && status == FlowStatus::Deprecated {
            return Ok(());
        }
        registry
            .set_status(name, version, status)
            .map_err(|err| err.to_string())
    }

    fn disable(&self, arguments: Map<String, Value>) -> Result<(Value, bool), String> {
        let name = required_name(&arguments)?;
        let current = self
            .newest_chain(&name)
            .ok_or_else(|| format!("no chain tool `{name}`"))?;
        self.set_status(&current, FlowStatus::Deprecated)?;
        let stored = self.newest_chain(&name).unwrap_or(current);
        Ok((describe_chain(&stored, "disabled"), true))
    }

    fn delete(&self, arguments: Map<String, Value>) -> Result<(Value, bool), String> {
        let name = required_name(&arguments)?;
        let versions: Vec<RegisteredFlow> = self
            .chain_versions()
            .into_iter()
            .filter(|f| f.definition.name() == name)
            .collect();
        if versions.is_empty() {
            return Err(format!("no chain tool `{name}`"));
        }
        for flow in &versions {
            self.set_status(flow, FlowStatus::Retired)?;
        }
        let retired: Vec<&str> = versions.iter().map(|f| f.definition.version()).collect();
        Ok((json!({"deleted": name, "versions": retired}), true))
    }

    fn list_chains(&self) -> Value {
        let mut newest: BTreeMap<String, RegisteredFlow> = BTreeMap::new();
        for flow in self.chain_versions() {
            newest.insert(flow.definition.name().to_string(), flow);
        }
        let tools: Vec<Value> = newest
            .values()
            .map(|flow| {
                let mut entry = chain_definition(flow);
                entry.insert("version".into(), json!(flow.definition.version()));
                entry.insert("lifecycle".into(), json!(flow.status));
                entry.insert("listed".into(), json!(flow.status == FlowStatus::Active));
                Value::Object(entry)
            })
            .collect();
        json!({ "tools": tools })
    }
}

fn is_chain(flow: &FlowDefinition) -> bool {
    FlowServing::from_metadata(catalog::flow_metadata(flow))
        .map(|s| s.chain_config.is_some())
        .unwrap_or(false)
}

fn newer_version(old: &FlowDefinition, new: &FlowDefinition) -> bool {
    crate::flow::version_key(old.version()) > crate::flow::version_key(new.version())
}

/// `N+1.0.0` after version `N.x.y` (1.0.0 when there is none).
fn next_version(last: Option<String>) -> String {
    let major = last
        .as_deref()
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u64>().ok());
    match major {
        Some(major) => format!("{}.0.0", major + 1),
        None => "1.0.0".into(),
    }
}

fn required_name(arguments: &Map<String, Value>) -> Result<String, String> {
    match arguments.get("name") {
        Some(Value::String(name)) if !name.trim().is_empty() => Ok(name.clone()),
        _ => Err("missing string argument `name`".into()),
    }
}

fn activate_flag(arguments: &Map<String, Value>) -> Result<Option<bool>, String> {
    match arguments.get("activate") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(flag)) => Ok(Some(*flag)),
        Some(_) => Err("`activate` must be true or false".into()),
    }
}

/// The chain tool definition a stored chain flow was made from.
fn chain_definition(flow: &RegisteredFlow) -> Map<String, Value> {
    let serving =
        FlowServing::from_metadata(catalog::flow_metadata(&flow.definition)).unwrap_or_default();
    let mut entry = Map::new();
    entry.insert("name".into(), json!(flow.definition.name()));
    entry.insert(
        "description".into(),
        json!(crate::flow::flow_description(&flow.definition)),
    );
    entry.insert("tool_type".into(), json!("chain"));
    if let Some(schema) = crate::flow::flow_input_schema(&flow.definition) {
        entry.insert("input_schema".into(), schema.clone());
    }
    entry.insert(
        "chain_config".into(),
        serving.chain_config.unwrap_or(Value::Null),
    );
    entry
}

fn describe_chain(flow: &RegisteredFlow, what: &str) -> Value {
    json!({
        what: flow.definition.name(),
        "version": flow.definition.version(),
        "lifecycle": flow.status,
        "listed": flow.status == FlowStatus::Active,
    })
}

/// A successful `CallToolResult` with a JSON object as structured and text content.
fn ok_result(document: Value) -> Value {
    let text = serde_json::to_string(&document).unwrap_or_default();
    json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": document,
        "isError": false,
        // Cleared by the MCP library for sessions older than 2026-07-28.
        "resultType": "complete",
    })
}

/// A `CallToolResult` with `isError: true`.
fn tool_error(message: &str, meta: Option<Value>) -> Value {
    let mut result = json!({
        "content": [{"type": "text", "text": message}],
        "isError": true,
        "resultType": "complete",
    });
    if let (Some(meta), Some(object)) = (meta, result.as_object_mut()) {
        object.insert("_meta".into(), json!({ META_KEY: meta }));
    }
    result
}

/// A flow run as a tool result: the final output, or the failed step.
pub fn flow_result(result: &ExecutionResult) -> Value {
    if result.success {
        let output = Value::Object(result.final_output.clone().unwrap_or_default());
        return ok_result(output);
    }
    let failed = result
        .execution_log
        .iter()
        .find(|r| !r.success && !r.skipped);
    match failed {
        Some(record) => {
            let message = format!(
                "flow `{}` failed at step {} (`{}`): {}",
                result.flow_name,
                record.step_index,
                record.tool_name,
                record.error_message.as_deref().unwrap_or("no message")
            );
            tool_error(
                &message,
                Some(json!({
                    "failed_step": record.step_index,
                    "tool": record.tool_name,
                    "error_type": record.error_type,
                    "trace_id": result.trace_id,
                })),
            )
        }
        None => tool_error(&format!("flow `{}` failed", result.flow_name), None),
    }
}

/// A chain run as a tool result in the chain output shape; `isError` when the chain stopped.
pub fn chain_result(result: &ExecutionResult) -> Value {
    let output = chain_output(result);
    let mut answer = ok_result(output);
    if !result.success
        && let Some(object) = answer.as_object_mut()
    {
        object.insert("isError".into(), Value::Bool(true));
    }
    answer
}

/// Build the error for a server that could not start.
pub fn serve_error(message: impl Into<String>) -> Error {
    Error::Mcp {
        server: "serve".into(),
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_bump_the_major() {
        assert_eq!(next_version(None), "1.0.0");
        assert_eq!(next_version(Some("1.0.0".into())), "2.0.0");
        assert_eq!(next_version(Some("7.3.1".into())), "8.0.0");
    }
}
