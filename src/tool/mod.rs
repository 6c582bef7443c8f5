//! Tools: named callables with a JSON Schema for their input and output.
//!
//! A [`Tool`] validates its input before its function runs and its output after, bounds the
//! caller's wait with `timeout_seconds`, caps the output size, and carries a `schema_hash` that
//! keys the step cache. [`command`] builds tools from a TOML manifest of external commands.

pub(crate) mod background;
pub mod command;
mod worker;

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// A JSON object: what tools take and return.
pub type JsonObject = Map<String, Value>;

/// The boxed future an async tool function returns.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<Value, ToolFailure>> + Send>>;

/// A tool function's own failure: a kind (the "error class") and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    /// Short class-like name, stored as a step's `error_type` (`ToolError` by default).
    pub kind: String,
    pub message: String,
}

impl ToolFailure {
    /// A failure of kind `ToolError`.
    pub fn new(message: impl Into<String>) -> Self {
        Self::of_kind("ToolError", message)
    }

    /// A failure of the given kind.
    pub fn of_kind(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            message: message.into(),
        }
    }
}

impl From<String> for ToolFailure {
    fn from(message: String) -> Self {
        Self::new(message)
    }
}

impl From<&str> for ToolFailure {
    fn from(message: &str) -> Self {
        Self::new(message)
    }
}

// A blocking function borrows its input: the executor keeps the input for the step's record,
// so lending it saves a copy per call.
type SyncFn = dyn Fn(&JsonObject) -> Result<Value, ToolFailure> + Send + Sync;
type AsyncFn = dyn Fn(JsonObject) -> ToolFuture + Send + Sync;

/// The callable behind a tool.
#[derive(Clone)]
pub enum ToolFn {
    /// A blocking function. Run inline, on a blocking thread inside a concurrent DAG level, or
    /// on its own thread when the tool has a timeout (so the caller's wait stays bounded).
    Sync(Arc<SyncFn>),
    /// An async function. A timeout drops (cancels) its future.
    Async(Arc<AsyncFn>),
}

impl fmt::Debug for ToolFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolFn::Sync(_) => f.write_str("ToolFn::Sync"),
            ToolFn::Async(_) => f.write_str("ToolFn::Async"),
        }
    }
}

/// A named, schema-validated callable.
pub struct Tool {
    name: String,
    description: String,
    input_schema: Value,
    output_schema: Value,
    input_validator: jsonschema::Validator,
    output_validator: jsonschema::Validator,
    function: ToolFn,
    timeout_seconds: Option<f64>,
    max_output_size: Option<usize>,
    schema_version: String,
    schema_hash: String,
    cacheable: bool,
    read_only: Option<bool>,
    /// What the executor can tell from the schemas without running the tool.
    input_shape: Shape,
    output_shape: Shape,
}

/// A top-level `properties` entry of a schema: its name and the sha256 of its own schema's
/// canonical JSON (equal digests: the same schema).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Property {
    pub name: String,
    pub digest: [u8; 32],
}

/// The top level of an object schema, for the executor's static reasoning about which values
/// are already known to satisfy which schema. Only filled for a schema without any `$` keyword
/// anywhere (no `$ref`, `$schema`, `$id`, ...): equal property schemas then mean the same thing,
/// whatever document they sit in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Shape {
    /// The schema was analysed (it is an object without `$` keywords).
    pub known: bool,
    /// Every keyword is one of `type: "object"`, `properties`, `required`, boolean
    /// `additionalProperties`, `title`, `description`: the schema says nothing else, so an
    /// object meets it when its required keys are there and each value meets its property's
    /// schema (and, when closed, it has no other key).
    pub exact: bool,
    pub properties: Vec<Property>,
    pub required: Vec<String>,
    /// `additionalProperties: false` without `patternProperties`: no key outside `properties`.
    pub closed: bool,
}

impl Shape {
    fn of(schema: &Value) -> Self {
        let Some(object) = schema.as_object().filter(|_| !has_dollar_key(schema)) else {
            return Self::default();
        };
        let properties: Vec<Property> = object
            .get("properties")
            .and_then(Value::as_object)
            .map(|properties| {
                properties
                    .iter()
                    .map(|(name, schema)| Property {
                        name: name.clone(),
                        digest: digest_of(schema),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let required: Option<Vec<String>> = match object.get("required") {
            None => Some(Vec::new()),
            Some(Value::Array(names)) => names
                .iter()
                .map(|name| name.as_str().map(str::to_string))
                .collect(),
            Some(_) => None,
        };
        let closed = object.get("additionalProperties") == Some(&Value::Bool(false))
            && !object.contains_key("patternProperties");
        let exact = required.is_some()
            && object
                .iter()
                .all(|(keyword, value)| match keyword.as_str() {
                    "type" => *value == "object",
                    "properties" => value.is_object(),
                    "required" | "title" | "description" => true,
                    "additionalProperties" => value.is_boolean(),
                    _ => false,
                });
        Self {
            known: true,
            exact,
            properties,
            required: required.unwrap_or_default(),
            closed,
        }
    }

    /// The digest of property `name`'s schema.
    pub fn property(&self, name: &str) -> Option<&[u8; 32]> {
        self.properties
            .iter()
            .find(|p| p.name == name)
            .map(|p| &p.digest)
    }

    pub fn requires(&self, name: &str) -> bool {
        self.required.iter().any(|r| r == name)
    }
}

/// sha256 of a schema's canonical JSON.
fn digest_of(schema: &Value) -> [u8; 32] {
    let mut digest = [0; 32];
    digest.copy_from_slice(&Sha256::digest(canonical_json(schema).as_bytes()));
    digest
}

/// True when an object anywhere in `value` has a key starting with `$`.
fn has_dollar_key(value: &Value) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(key, value)| key.starts_with('$') || has_dollar_key(value)),
        Value::Array(items) => items.iter().any(has_dollar_key),
        _ => false,
    }
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .field("function", &self.function)
            .field("timeout_seconds", &self.timeout_seconds)
            .field("max_output_size", &self.max_output_size)
            .field("schema_hash", &self.schema_hash)
            .field("cacheable", &self.cacheable)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Tool`]; schemas are compiled once, in [`ToolBuilder::build`].
#[derive(Debug)]
pub struct ToolBuilder {
    name: String,
    description: String,
    input_schema: Value,
    output_schema: Value,
    function: ToolFn,
    timeout_seconds: Option<f64>,
    max_output_size: Option<usize>,
    schema_version: String,
    cacheable: bool,
    read_only: Option<bool>,
}

/// The schema accepting any JSON object.
pub fn any_object_schema() -> Value {
    serde_json::json!({"type": "object"})
}

impl ToolBuilder {
    /// JSON Schema of the input (default: any object).
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.input_schema = schema;
        self
    }
    /// JSON Schema of the output (default: any object).
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = schema;
        self
    }
    /// Human-readable summary.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }
    /// Bound the caller's wait; `None` waits as long as the tool runs.
    pub fn timeout_seconds(mut self, seconds: Option<f64>) -> Self {
        self.timeout_seconds = seconds;
        self
    }
    /// Cap the output's size in JSON bytes.
    pub fn max_output_size(mut self, bytes: Option<usize>) -> Self {
        self.max_output_size = bytes;
        self
    }
    /// Free-form schema version; part of the schema hash.
    pub fn schema_version(mut self, version: impl Into<String>) -> Self {
        self.schema_version = version.into();
        self
    }
    /// Whether the step cache may memoize this tool (default false).
    pub fn cacheable(mut self, cacheable: bool) -> Self {
        self.cacheable = cacheable;
        self
    }
    /// Whether the tool only reads (`Some(true)`), has side effects (`Some(false)`) or did not
    /// say (`None`).
    pub fn read_only(mut self, read_only: Option<bool>) -> Self {
        self.read_only = read_only;
        self
    }

    /// Compile both schemas and compute the schema hash.
    pub fn build(self) -> Result<Tool> {
        let compile = |schema: &Value, which: &str| {
            jsonschema::validator_for(schema).map_err(|err| Error::InvalidSchema {
                tool: self.name.clone(),
                which: which.to_string(),
                message: err.to_string(),
            })
        };
        let input_validator = compile(&self.input_schema, "input")?;
        let output_validator = compile(&self.output_schema, "output")?;
        if let Some(seconds) = self.timeout_seconds
            && !(seconds.is_finite() && seconds > 0.0)
        {
            return Err(Error::InvalidSchema {
                tool: self.name,
                which: "timeout".into(),
                message: format!("timeout_seconds must be a positive number, not {seconds}"),
            });
        }
        let schema_hash = schema_hash(
            &self.input_schema,
            &self.output_schema,
            &self.schema_version,
        );
        let input_shape = Shape::of(&self.input_schema);
        let output_shape = Shape::of(&self.output_schema);
        Ok(Tool {
            name: self.name,
            description: self.description,
            input_schema: self.input_schema,
            output_schema: self.output_schema,
            input_validator,
            output_validator,
            function: self.function,
            timeout_seconds: self.timeout_seconds,
            max_output_size: self.max_output_size,
            schema_version: self.schema_version,
            schema_hash,
            cacheable: self.cacheable,
            read_only: self.read_only,
            input_shape,
            output_shape,
        })
    }
}

/// sha256 (hex) over the canonical JSON of both schemas and the schema version.
pub fn schema_hash(input_schema: &Value, output_schema: &Value, schema_version: &str) -> String {
    let document = serde_json::json!({
        "input_schema": input_schema,
        "output_schema": output_schema,
        "schema_version": schema_version,
    });
    hex_sha256(canonical_json(&document).as_bytes())
}

/// Lower-case hex sha256 of `bytes`.
pub fn hex_sha256(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// Canonical JSON text: object keys sorted, no whitespace, numbers and strings as serde_json
/// writes them. Two equal values (up to key order) give the same text.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::with_capacity(128);
    write_canonical(value, &mut out);
    // Only serde_json's own UTF-8 output and ASCII punctuation were written.
    String::from_utf8(out).unwrap_or_default()
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut sorted: Vec<(&String, &Value)> = map.iter().collect();
            sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (key, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                // Writing to a Vec cannot fail; escaping is serde_json's.
                let _ = serde_json::to_writer(&mut *out, key);
                out.push(b':');
                write_canonical(item, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        other => {
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

impl Tool {
    /// Start building a tool around a blocking function. It borrows its input.
    pub fn sync<F>(name: impl Into<String>, function: F) -> ToolBuilder
    where
        F: Fn(&JsonObject) -> Result<Value, ToolFailure> + Send + Sync + 'static,
    {
        Self::builder(name, ToolFn::Sync(Arc::new(function)))
    }

    /// Start building a tool around an async function.
    pub fn new_async<F, Fut>(name: impl Into<String>, function: F) -> ToolBuilder
    where
        F: Fn(JsonObject) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolFailure>> + Send + 'static,
    {
        Self::builder(
            name,
            ToolFn::Async(Arc::new(move |input| Box::pin(function(input)))),
        )
    }

    /// Start building a tool around a [`ToolFn`].
    pub fn builder(name: impl Into<String>, function: ToolFn) -> ToolBuilder {
        ToolBuilder {
            name: name.into(),
            description: String::new(),
            input_schema: any_object_schema(),
            output_schema: any_object_schema(),
            function,
            timeout_seconds: None,
            max_output_size: None,
            schema_version: "1".into(),
            cacheable: false,
            read_only: None,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn description(&self) -> &str {
        &self.description
    }
    pub fn input_schema(&self) -> &Value {
        &self.input_schema
    }
    pub fn output_schema(&self) -> &Value {
        &self.output_schema
    }
    pub fn timeout_seconds(&self) -> Option<f64> {
        self.timeout_seconds
    }
    pub fn max_output_size(&self) -> Option<usize> {
        self.max_output_size
    }
    pub fn schema_version(&self) -> &str {
        &self.schema_version
    }
    /// sha256 over the canonical JSON of both schemas and the schema version.
    pub fn schema_hash(&self) -> &str {
        &self.schema_hash
    }
    pub fn cacheable(&self) -> bool {
        self.cacheable
    }
    pub fn read_only(&self) -> Option<bool> {
        self.read_only
    }
    /// True when the function is async.
    pub fn is_async(&self) -> bool {
        matches!(self.function, ToolFn::Async(_))
    }
    pub(crate) fn input_shape(&self) -> &Shape {
        &self.input_shape
    }
    pub(crate) fn output_shape(&self) -> &Shape {
        &self.output_shape
    }

    /// Validate `input` against the input schema.
    pub fn validate_input(&self, input: &JsonObject) -> Result<()> {
        let value = Value::Object(input.clone());
        validate(&self.input_validator, &value, &self.name, "input")
    }

    /// Validate, call and check: the whole contract of one call, awaiting an async function and
    /// running a blocking one inline (or on its own thread when a timeout is set).
    pub async fn run_async(&self, input: JsonObject) -> Result<JsonObject> {
        self.run_with(input, false).await
    }

    /// Like [`Tool::run_async`]; `offload` runs a blocking function on a blocking thread so
    /// several can proceed at once.
    pub(crate) async fn run_with(&self, input: JsonObject, offload: bool) -> Result<JsonObject> {
        self.run_checked(input, offload, true).await
    }

    /// Like [`Tool::run_with`]; `check_input: false` skips the input schema check, for an
    /// input the executor proved meets it (see `executor::proof`). The output is always checked.
    pub(crate) async fn run_checked(
        &self,
        input: JsonObject,
        offload: bool,
        check_input: bool,
    ) -> Result<JsonObject> {
        let input = self.checked_input(input, check_input)?;
        let output = self.call(input, offload).await?;
        self.check_output(output)
    }

    /// True when [`Tool::run_inline`] can run it: a blocking function without a timeout, and
    /// the caller does not want it offloaded.
    pub(crate) fn runs_inline(&self, offload: bool) -> bool {
        !offload
            && matches!(
                (&self.function, self.timeout_seconds),
                (ToolFn::Sync(_), None)
            )
    }

    /// [`Tool::run_checked`] of a tool that [`Tool::runs_inline`], without a future: the
    /// executor's hot path calls it directly. The input is lent (the caller records it); `&mut`
    /// only so that the schema check can look at it as a JSON value without a copy.
    pub(crate) fn run_inline(
        &self,
        input: &mut JsonObject,
        check_input: bool,
    ) -> Result<JsonObject> {
        if check_input {
            self.check_input_in_place(input)?;
        }
        let output = self.call_inline(input)?;
        self.check_output(output)
    }

    fn checked_input(&self, input: JsonObject, check_input: bool) -> Result<JsonObject> {
        if !check_input {
            return Ok(input);
        }
        let input_value = Value::Object(input);
        validate(&self.input_validator, &input_value, &self.name, "input")?;
        match input_value {
            Value::Object(input) => Ok(input),
            _ => unreachable_object(),
        }
    }

    /// The input schema check of a borrowed input: the map is moved into a JSON value for the
    /// check and back, whatever its outcome.
    fn check_input_in_place(&self, input: &mut JsonObject) -> Result<()> {
        let value = Value::Object(std::mem::take(input));
        let checked = validate(&self.input_validator, &value, &self.name, "input");
        if let Value::Object(map) = value {
            *input = map;
        }
        checked
    }

    /// Blocking form of [`Tool::run_async`].
    pub fn run(&self, input: JsonObject) -> Result<JsonObject> {
        if self.runs_inline(false) {
            let mut input = input;
            return self.run_inline(&mut input, true);
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| Error::Runtime(err.to_string()))?;
        runtime.block_on(self.run_async(input))
    }

    fn call_inline(&self, input: &JsonObject) -> Result<Value> {
        let ToolFn::Sync(function) = &self.function else {
            return Err(self.failed("ToolError", "not a blocking tool".into()));
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| function(input))) {
            Ok(result) => result.map_err(|f| self.failed(&f.kind, f.message)),
            Err(panic) => Err(self.failed("ToolPanic", panic_message(&panic))),
        }
    }

    async fn call(&self, input: JsonObject, offload: bool) -> Result<Value> {
        match (&self.function, self.timeout_seconds) {
            (ToolFn::Sync(_), None) if !offload => self.call_inline(&input),
            (ToolFn::Sync(function), None) => {
                let function = Arc::clone(function);
                let joined = tokio::task::spawn_blocking(move || {
                    std::panic::catch_unwind(AssertUnwindSafe(|| function(&input)))
                })
                .await;
                self.settle_thread_result(joined.ok())
            }
            (ToolFn::Sync(function), Some(seconds)) => {
                // A thread of its own, not the runtime's blocking pool: a tool that outlives its
                // timeout must not hold the runtime (or the process) open when it shuts down.
                let function = Arc::clone(function);
                let (sender, receiver) = tokio::sync::oneshot::channel();
                let spawned = std::thread::Builder::new()
                    .name(format!("tool-{}", self.name))
                    .spawn(move || {
                        let result =
                            std::panic::catch_unwind(AssertUnwindSafe(|| function(&input)));
                        let _ = sender.send(result);
                    });
                if let Err(err) = spawned {
                    return Err(self.failed("ToolError", format!("could not start: {err}")));
                }
                match tokio::time::timeout(Duration::from_secs_f64(seconds), receiver).await {
                    Ok(received) => self.settle_thread_result(received.ok()),
                    Err(_) => Err(self.timed_out(seconds)),
                }
            }
            (ToolFn::Async(function), None) => function(input)
                .await
                .map_err(|f| self.failed(&f.kind, f.message)),
            (ToolFn::Async(function), Some(seconds)) => {
                match tokio::time::timeout(Duration::from_secs_f64(seconds), function(input)).await
                {
                    Ok(result) => result.map_err(|f| self.failed(&f.kind, f.message)),
                    Err(_) => Err(self.timed_out(seconds)),
                }
            }
        }
    }

    fn settle_thread_result(
        &self,
        joined: Option<std::thread::Result<Result<Value, ToolFailure>>>,
    ) -> Result<Value> {
        match joined {
            Some(Ok(result)) => result.map_err(|f| self.failed(&f.kind, f.message)),
            Some(Err(panic)) => Err(self.failed("ToolPanic", panic_message(&panic))),
            None => Err(self.failed("ToolPanic", "the tool's thread stopped".into())),
        }
    }

    fn check_output(&self, output: Value) -> Result<JsonObject> {
        if !output.is_object() {
            return Err(self.failed(
                "InvalidToolOutput",
                format!("returned {} instead of a JSON object", kind_of(&output)),
            ));
        }
        if let Some(limit) = self.max_output_size {
            let size = serde_json::to_vec(&output)
                .map(|v| v.len())
                .unwrap_or(usize::MAX);
            if size > limit {
                return Err(Error::ToolOutputSize {
                    tool: self.name.clone(),
                    size,
                    limit,
                });
            }
        }
        validate(&self.output_validator, &output, &self.name, "output")?;
        match output {
            Value::Object(map) => Ok(map),
            _ => unreachable_object(),
        }
    }

    fn failed(&self, kind: &str, message: String) -> Error {
        Error::ToolFailed {
            tool: self.name.clone(),
            kind: kind.to_string(),
            message,
        }
    }

    fn timed_out(&self, seconds: f64) -> Error {
        Error::ToolTimeout {
            tool: self.name.clone(),
            timeout_seconds: seconds,
        }
    }
}

fn unreachable_object<T>() -> Result<T> {
    Err(Error::Runtime("a JSON object changed kind".into()))
}

/// The JSON kind of a value, for messages.
pub fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        format!("panicked: {text}")
    } else if let Some(text) = panic.downcast_ref::<String>() {
        format!("panicked: {text}")
    } else {
        "panicked".into()
    }
}

fn validate(
    validator: &jsonschema::Validator,
    value: &Value,
    tool: &str,
    stage: &str,
) -> Result<()> {
    if validator.is_valid(value) {
        return Ok(());
    }
    match validator.validate(value) {
        Ok(()) => Ok(()),
        Err(err) => Err(Error::SchemaValidation {
            tool: tool.to_string(),
            stage: stage.to_string(),
            pointer: err.instance_path().as_str().to_string(),
            message: err.to_string(),
        }),
    }
}

/// Tools by name.
#[derive(Debug, Default, Clone)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<Tool>>,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add (or replace) a tool.
    pub fn register(&mut self, tool: Tool) -> &mut Self {
        self.tools.insert(tool.name.clone(), Arc::new(tool));
        self
    }

    /// Add (or replace) a tool another registry shares.
    pub fn insert_shared(&mut self, tool: Arc<Tool>) -> &mut Self {
        self.tools.insert(tool.name.clone(), tool);
        self
    }

    /// Add every tool of another registry (replacing same-named ones).
    pub fn extend(&mut self, other: ToolRegistry) {
        self.tools.extend(other.tools);
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Tool>> {
        self.tools.get(name)
    }

    /// Every tool, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Tool>> {
        self.tools.values()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn validates_input_and_output_and_names_the_pointer() {
        let tool = Tool::sync("double", |input| {
            let n = input["n"].as_i64().unwrap_or(0);
            Ok(json!({"n": n * 2, "bad": if n == 3 { json!("x") } else { json!(1) }}))
        })
        .input_schema(
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        )
        .output_schema(json!({"type": "object", "properties": {"bad": {"type": "integer"}}}))
        .build()
        .unwrap();
        assert_eq!(tool.run(obj(json!({"n": 2}))).unwrap()["n"], json!(4));
        let err = tool.run(obj(json!({"n": "two"}))).unwrap_err();
        assert!(
            matches!(&err, Error::SchemaValidation { stage, pointer, .. } if stage == "input" && pointer == "/n"),
            "{err:?}"
        );
        let err = tool.run(obj(json!({"n": 3}))).unwrap_err();
        assert!(
            matches!(&err, Error::SchemaValidation { stage, pointer, .. } if stage == "output" && pointer == "/bad"),
            "{err:?}"
        );
        assert!(
            tool.run(obj(json!({"n": 2.5}))).is_err(),
            "2.5 is not an integer"
        );
    }

    #[test]
    fn schema_hash_ignores_key_order_and_tracks_version() {
        let a = schema_hash(&json!({"a": 1, "b": 2}), &json!({}), "1");
        let b = schema_hash(&json!({"b": 2, "a": 1}), &json!({}), "1");
        let c = schema_hash(&json!({"b": 2, "a": 1}), &json!({}), "2");
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn non_object_output_panics_and_size_are_errors() {
        let tool = Tool::sync("list", |_| Ok(json!([1]))).build().unwrap();
        assert!(
            matches!(tool.run(JsonObject::new()), Err(Error::ToolFailed { kind, .. }) if kind == "InvalidToolOutput")
        );
        let tool = Tool::sync("boom", |_| panic!("kaput")).build().unwrap();
        assert!(
            matches!(tool.run(JsonObject::new()), Err(Error::ToolFailed { kind, message, .. }) if kind == "ToolPanic" && message.contains("kaput"))
        );
        let tool = Tool::sync("big", |_| Ok(json!({"text": "x".repeat(100)})))
            .max_output_size(Some(50))
            .build()
            .unwrap();
        assert!(
            matches!(tool.run(JsonObject::new()), Err(Error::ToolOutputSize { size, limit: 50, .. }) if size > 100)
        );
    }
}
