//! The root crate's one error type.
//!
//! Every variant has a stable machine-readable [`Error::code`] (snake_case, used by the CLI's
//! JSON output and by scripts) and a [`Error::type_name`] (the `error_type` a
//! [`StepRecord`](crate::executor::StepRecord) stores).

use std::path::PathBuf;

use crate::flow::compile::Finding;

/// Everything that can go wrong in tools, flows, the executor and replay, with context.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A value failed a tool's (or the flow's) input or output JSON Schema.
    #[error("tool `{tool}`: {stage} failed its schema at `{pointer}`: {message}")]
    SchemaValidation {
        tool: String,
        /// `input` or `output` (or `flow input`).
        stage: String,
        /// JSON pointer of the offending value inside the input or output.
        pointer: String,
        message: String,
    },
    /// A tool declared a schema that is not valid JSON Schema.
    #[error("tool `{tool}`: its {which} schema is invalid: {message}")]
    InvalidSchema {
        tool: String,
        which: String,
        message: String,
    },
    /// The tool did not answer within its `timeout_seconds`; any late result is discarded.
    #[error("tool `{tool}` timed out after {timeout_seconds} s")]
    ToolTimeout { tool: String, timeout_seconds: f64 },
    /// The tool's output, as JSON, exceeded its `max_output_size`.
    #[error("tool `{tool}`: output is {size} JSON bytes, over its limit of {limit}")]
    ToolOutputSize {
        tool: String,
        size: usize,
        limit: usize,
    },
    /// The tool's own function failed (returned an error, panicked, printed bad output, ...).
    #[error("tool `{tool}` failed ({kind}): {message}")]
    ToolFailed {
        tool: String,
        /// What kind of failure the tool reported (`ToolError`, `CommandNotFound`, ...).
        kind: String,
        message: String,
    },
    /// A flow step (or a fallback) names a tool nobody registered.
    #[error("{}unknown tool `{tool}`", step_prefix(*.step))]
    UnknownTool { tool: String, step: Option<usize> },
    /// A command-tool manifest could not be read or is malformed.
    #[error("tool manifest {}: {message}", path.display())]
    Manifest { path: PathBuf, message: String },
    /// A step's input could not be built from the context.
    #[error("step {step} (`{tool}`), input field `{field}`: {message}")]
    InputMapping {
        step: usize,
        tool: String,
        field: String,
        message: String,
    },
    /// A step's `output_mapping` names an output key the tool did not produce.
    #[error(
        "step {step} (`{tool}`): output_mapping wants output key `{output_key}`, which the tool did not produce"
    )]
    OutputMapping {
        step: usize,
        tool: String,
        output_key: String,
    },
    /// A flow or chain file could not be read or parsed.
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    FlowFile {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },
    /// Static checks found errors in a flow.
    #[error("flow `{flow}` does not compile: {}", summarize(findings))]
    FlowCompile {
        flow: String,
        findings: Vec<Finding>,
    },
    /// No flow with that name (and version) is registered.
    #[error("no flow `{name}`{} is registered", version.as_ref().map(|v| format!(" version {v}")).unwrap_or_default())]
    FlowNotFound {
        name: String,
        version: Option<String>,
    },
    /// A registry operation broke a rule (version already registered, bad lifecycle move, ...).
    #[error("flow `{name}` version {version}: {message}")]
    Registry {
        name: String,
        version: String,
        message: String,
    },
    /// A checkpoint could not be saved, loaded or applied.
    #[error("checkpoint for trace {trace_id}: {message}")]
    Checkpoint { trace_id: String, message: String },
    /// A replay could not start (recorded result and flow do not fit together, ...).
    #[error("replay of trace {trace_id}: {message}")]
    Replay { trace_id: String, message: String },
    /// A candidate could not be verified (no recordings, a tool missing from the manifest, a
    /// side-effecting tool without permission, ...).
    #[error("{}{message}", candidate_prefix(candidate))]
    Verify { candidate: String, message: String },
    /// A blocking API was called from inside an async runtime.
    #[error(
        "the blocking executor API was called inside an async runtime; use the `_async` method"
    )]
    BlockingInAsync,
    /// The async runtime behind the blocking API could not start.
    #[error("could not start the executor runtime: {0}")]
    Runtime(String),
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The trace receiver could not listen on its address.
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: String,
        #[source]
        source: std::io::Error,
    },
    /// The recording proxy could not start the MCP server it stands in front of.
    #[error("cannot start the MCP server `{command}`: {source}")]
    ProxySpawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] chainweaver_recorder::RecorderError),
    /// Mining failed.
    #[error(transparent)]
    Analyzer(#[from] chainweaver_analyzer::AnalyzerError),
    /// Importing a file stopped (what it stored before stays stored).
    #[error("import of {} stopped: {source}", path.display())]
    ImportStopped {
        path: PathBuf,
        #[source]
        source: chainweaver_recorder::RecorderError,
    },
    /// No trace is left to mine: the store is empty, or the split held every trace out.
    #[error("{}", nothing_to_mine(*held_out))]
    NothingToMine { held_out: usize },
    /// The store holds no candidates to verify.
    #[error("the store holds no candidates to verify")]
    NoCandidates,
    /// An MCP server could not be reached, spoke out of turn, or failed a request; or `serve`
    /// could not start.
    #[error("MCP server `{server}`: {message}")]
    Mcp { server: String, message: String },
    /// No stored candidate has this id or rank.
    #[error("no candidate `{wanted}` among the {stored} stored")]
    UnknownCandidate { wanted: String, stored: usize },
}

fn nothing_to_mine(held_out: usize) -> String {
    if held_out == 0 {
        "the store holds no traces with tool calls".into()
    } else {
        format!("all {held_out} traces were held out, none is left to mine")
    }
}

fn step_prefix(step: Option<usize>) -> String {
    step.map(|s| format!("step {s}: ")).unwrap_or_default()
}

fn candidate_prefix(candidate: &str) -> String {
    if candidate.is_empty() {
        String::new()
    } else {
        format!("candidate `{candidate}`: ")
    }
}

fn summarize(findings: &[Finding]) -> String {
    let errors: Vec<String> = findings
        .iter()
        .filter(|f| f.is_error())
        .map(|f| f.to_string())
        .collect();
    errors.join("; ")
}

impl Error {
    /// Stable snake_case code for scripts and JSON output.
    pub fn code(&self) -> &'static str {
        match self {
            Error::SchemaValidation { .. } => "schema_validation",
            Error::InvalidSchema { .. } => "invalid_schema",
            Error::ToolTimeout { .. } => "tool_timeout",
            Error::ToolOutputSize { .. } => "tool_output_size",
            Error::ToolFailed { .. } => "tool_failed",
            Error::UnknownTool { .. } => "unknown_tool",
            Error::Manifest { .. } => "invalid_manifest",
            Error::InputMapping { .. } => "input_mapping",
            Error::OutputMapping { .. } => "output_mapping",
            Error::FlowFile { .. } => "invalid_flow_file",
            Error::FlowCompile { .. } => "flow_compile",
            Error::FlowNotFound { .. } => "flow_not_found",
            Error::Registry { .. } => "registry",
            Error::Checkpoint { .. } => "checkpoint",
            Error::Replay { .. } => "replay",
            Error::Verify { .. } => "verify",
            Error::BlockingInAsync => "blocking_in_async",
            Error::Runtime(_) => "runtime",
            Error::Io { .. } => "io",
            Error::Listen { .. } => "listen",
            Error::ProxySpawn { .. } => "proxy_spawn",
            Error::Store(_) => "store",
            Error::Analyzer(_) => "mine",
            Error::ImportStopped { .. } => "import",
            Error::NothingToMine { .. } => "nothing_to_mine",
            Error::NoCandidates => "no_candidates",
            Error::UnknownCandidate { .. } => "unknown_candidate",
            Error::Mcp { .. } => "mcp",
        }
    }

    /// The error class name a [`StepRecord`](crate::executor::StepRecord) stores as `error_type`.
    pub fn type_name(&self) -> String {
        match self {
            Error::SchemaValidation { .. } => "SchemaValidationError".into(),
            Error::InvalidSchema { .. } => "InvalidSchemaError".into(),
            Error::ToolTimeout { .. } => "ToolTimeoutError".into(),
            Error::ToolOutputSize { .. } => "ToolOutputSizeError".into(),
            Error::ToolFailed { kind, .. } => kind.clone(),
            Error::UnknownTool { .. } => "ToolNotFoundError".into(),
            Error::InputMapping { .. } => "InputMappingError".into(),
            Error::OutputMapping { .. } => "OutputMappingError".into(),
            Error::Checkpoint { .. } => "CheckpointError".into(),
            _ => "FlowExecutionError".into(),
        }
    }
}

/// The root crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
