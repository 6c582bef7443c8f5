//! Persistent command tools: one program answers many calls, a JSON line each.
//!
//! A `[[tool]]` with `persistent = true` starts its program at its first call and keeps it
//! running. Each call writes one line to the program's stdin and reads one line back:
//!
//! ```text
//! -> {"id": 7, "input": {"order_id": "W1"}}
//! <- {"id": 7, "output": {"status": "delivered"}}
//! <- {"id": 7, "error": "no such order"}          (or {"message": ..., "type": ...})
//! ```
//!
//! A program answers one call at a time, in order; `workers = K` lets up to K processes answer
//! calls in flight. A worker that exits, answers with anything else (a line that is not JSON,
//! another call's id, no `output` or `error`) or outlives the call's timeout is killed and its
//! call fails, naming the tool, the manifest and the end of the worker's stderr; the next call
//! starts a new one. An `error` answer fails only its call: the worker stays.
//!
//! The processes and their pipes live on the tools' background runtime, so a persistent tool
//! works from any caller (a blocking run makes a runtime per call; the workers outlive it).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::Semaphore;

use super::command::CommandSpec;
use crate::tool::{JsonObject, ToolFailure};

/// The longest answer line read from a worker when the tool sets no `max_output_size`.
const DEFAULT_MAX_LINE: usize = 64 << 20;

/// How much of a worker's stderr is kept for error messages.
const STDERR_KEPT: usize = 2048;

/// The processes of one persistent tool: idle ones, and a permit per process allowed.
pub(crate) struct WorkerPool {
    spec: Arc<CommandSpec>,
    idle: Mutex<Vec<Worker>>,
    permits: Semaphore,
    max_line: usize,
}

impl WorkerPool {
    /// A pool of at most `workers` processes (none started yet).
    pub(crate) fn new(
        spec: Arc<CommandSpec>,
        workers: usize,
        max_output_size: Option<usize>,
    ) -> Self {
        Self {
            spec,
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(workers),
            // The envelope around the output is small; the tool checks the output's own size.
            max_line: max_output_size.map_or(DEFAULT_MAX_LINE, |size| size.saturating_add(4096)),
        }
    }

    /// One call: an idle worker (or a new one) answers `input`, on the background runtime.
    pub(crate) async fn call(self: Arc<Self>, input: JsonObject) -> Result<Value, ToolFailure> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| self.failure("CommandFailed", "the tool's workers are shut down"))?;
        let runtime = super::background::runtime()
            .map_err(|err| self.failure("CommandFailed", &err.to_string()))?;
        let idle = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        let on_background = tokio::runtime::Handle::try_current()
            .is_ok_and(|current| current.id() == runtime.handle().id());
        if on_background {
            // Already where the workers' pipes live (`serve` runs here): no hand-off. A timeout
            // drops this future, and the worker with it.
            return Arc::clone(&self).answer_with(idle, input).await;
        }
        // Aborted when the caller stops waiting (a timeout): the worker is dropped mid-call,
        // which kills its process, since its next answer could be this call's.
        let pool = Arc::clone(&self);
        let mut task = AbortOnDrop(runtime.spawn(pool.answer_with(idle, input)));
        match (&mut task.0).await {
            Ok(result) => result,
            Err(err) => Err(self.failure("CommandFailed", &format!("the call was lost: {err}"))),
        }
    }

    /// Answer `input` with the `idle` worker or a new one, on the background runtime; the
    /// worker goes back to the idle ones when it answered properly.
    async fn answer_with(
        self: Arc<Self>,
        idle: Option<Worker>,
        input: JsonObject,
    ) -> Result<Value, ToolFailure> {
        let mut worker = match idle {
            Some(worker) => worker,
            None => Worker::start(&self.spec)
                .map_err(|broken| self.failure(broken.kind, &broken.message))?,
        };
        match worker.call(input, self.max_line).await {
            Ok(answer) => {
                if let Ok(mut idle) = self.idle.lock() {
                    idle.push(worker);
                }
                answer.map_err(|failure| self.failure(&failure.kind, &failure.message))
            }
            Err(broken) => Err(self.failure(broken.kind, &worker.broken(broken.message).await)),
        }
    }

    /// A failure of this tool, named as command tools' failures are.
    fn failure(&self, kind: &str, message: &str) -> ToolFailure {
        ToolFailure::of_kind(kind, format!("{}: {message}", self.spec.describe()))
    }
}

struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One running worker process.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_drain: tokio::task::JoinHandle<()>,
    next_id: u64,
    line: Vec<u8>,
    request: Vec<u8>,
}

/// Why a worker can answer no more calls: the error kind and what happened.
struct Broken {
    kind: &'static str,
    message: String,
}

impl Broken {
    fn new(kind: &'static str, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

impl Worker {
    /// Start the program (on the background runtime, whose reactor then owns its pipes).
    fn start(spec: &CommandSpec) -> Result<Self, Broken> {
        let mut child = spec
            .spawn()
            .map_err(|(kind, message)| Broken::new(kind, message))?;
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(Broken::new(
                "CommandFailed",
                "the worker's pipes could not be opened",
            ));
        };
        // Drained all along, so a chatty worker never blocks on a full pipe; the end is kept.
        let kept = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&kept);
        let stderr_drain = tokio::spawn(async move {
            let mut chunk = [0u8; 4096];
            while let Ok(read) = stderr.read(&mut chunk).await {
                if read == 0 {
                    break;
                }
                if let Ok(mut kept) = sink.lock() {
                    kept.extend_from_slice(&chunk[..read]);
                    if kept.len() > 2 * STDERR_KEPT {
                        let cut = kept.len() - STDERR_KEPT;
                        kept.drain(..cut);
                    }
                }
            }
        });
        Ok(Self {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            stderr: kept,
            stderr_drain,
            next_id: 0,
            line: Vec::new(),
            request: Vec::new(),
        })
    }

    /// Send one call and read its answer: `Ok` when the worker answered properly (with an
    /// output or its own error), `Err` when it can answer no more.
    async fn call(
        &mut self,
        input: JsonObject,
        max_line: usize,
    ) -> Result<Result<Value, ToolFailure>, Broken> {
        self.next_id += 1;
        let id = self.next_id;
        self.request.clear();
        self.request
            .extend_from_slice(format!("{{\"id\":{id},\"input\":").as_bytes());
        serde_json::to_writer(&mut self.request, &input)
            .map_err(|err| Broken::new("CommandFailed", format!("cannot send the input: {err}")))?;
        self.request.extend_from_slice(b"}\n");
        let written = async {
            self.stdin.write_all(&self.request).await?;
            self.stdin.flush().await
        };
        if let Err(err) = written.await {
            return Err(Broken::new(
                "CommandFailed",
                format!("the worker stopped reading its input ({err})"),
            ));
        }
        self.line.clear();
        let read = (&mut self.stdout)
            .take(max_line as u64 + 1)
            .read_until(b'\n', &mut self.line)
            .await
            .map_err(|err| {
                Broken::new("CommandFailed", format!("cannot read the answer: {err}"))
            })?;
        if read == 0 {
            return Err(Broken::new("CommandFailed", "the worker closed its stdout"));
        }
        if self.line.last() != Some(&b'\n') {
            return Err(Broken::new(
                "InvalidToolOutput",
                if self.line.len() > max_line {
                    format!("the answer is longer than {max_line} bytes")
                } else {
                    "the answer line has no end".to_string()
                },
            ));
        }
        answer(&self.line, id)
    }

    /// The message of a worker that can answer no more, with how it ended and its last
    /// stderr; consumes what is left of it (dropping it kills the process).
    async fn broken(mut self, message: String) -> String {
        // A worker that closed its stdout is usually exiting: wait a moment for its status.
        let status = tokio::time::timeout(Duration::from_millis(200), self.child.wait())
            .await
            .ok()
            .and_then(Result::ok);
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_millis(200), &mut self.stderr_drain).await;
        let stderr = self
            .stderr
            .lock()
            .map(|kept| String::from_utf8_lossy(&kept).into_owned())
            .unwrap_or_default();
        let stderr = super::command::tail(stderr.trim(), 400);
        let mut text = message;
        if let Some(status) = status {
            text.push_str(&format!(" (it exited with {status})"));
        }
        if !stderr.is_empty() {
            text.push_str(": ");
            text.push_str(stderr);
        }
        text
    }
}

/// Read one answer line for call `id`.
fn answer(line: &[u8], id: u64) -> Result<Result<Value, ToolFailure>, Broken> {
    let shown = || super::command::tail(String::from_utf8_lossy(line).trim(), 200).to_string();
    let invalid = |why: &str| {
        Broken::new(
            "InvalidToolOutput",
            format!("{why} instead of an answer to call {id}: {:?}", shown()),
        )
    };
    let Ok(Value::Object(mut answer)) = serde_json::from_slice::<Value>(line) else {
        return Err(invalid("wrote a line that is not a JSON object"));
    };
    if answer.get("id").and_then(Value::as_u64) != Some(id) {
        return Err(invalid("answered with another id"));
    }
    if let Some(error) = answer.remove("error") {
        let (kind, message) = match error {
            Value::String(message) => ("ToolError".to_string(), message),
            Value::Object(mut error) => (
                match error.remove("type") {
                    Some(Value::String(kind)) if !kind.is_empty() => kind,
                    _ => "ToolError".to_string(),
                },
                match error.remove("message") {
                    Some(Value::String(message)) => message,
                    _ => Value::Object(error).to_string(),
                },
            ),
            other => ("ToolError".to_string(), other.to_string()),
        };
        return Ok(Err(ToolFailure::of_kind(kind, message)));
    }
    match answer.remove("output") {
        Some(output) => Ok(Ok(output)),
        None => Err(invalid("answered with neither `output` nor `error`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::command::parse_manifest;
    use serde_json::json;

    #[test]
    fn an_answer_is_its_output_or_its_error_for_the_call_asked() {
        let output = answer(br#"{"id": 3, "output": {"n": 1}}"#, 3);
        assert!(matches!(output, Ok(Ok(value)) if value == json!({"n": 1})));
        let Ok(Err(failure)) = answer(br#"{"id": 3, "error": "no such order"}"#, 3) else {
            panic!("an error answer is the call's failure");
        };
        assert_eq!(
            (failure.kind.as_str(), failure.message.as_str()),
            ("ToolError", "no such order")
        );
        let Ok(Err(failure)) = answer(
            br#"{"id": 3, "error": {"type": "NotFound", "message": "gone"}}"#,
            3,
        ) else {
            panic!("a typed error answer is the call's failure");
        };
        assert_eq!(
            (failure.kind.as_str(), failure.message.as_str()),
            ("NotFound", "gone")
        );
        for (line, why) in [
            (&br#"{"id": 2, "output": {}}"#[..], "another id"),
            (&b"hello"[..], "not a JSON object"),
            (&br#"{"id": 3}"#[..], "neither"),
        ] {
            let Err(broken) = answer(line, 3) else {
                panic!("{line:?} is no answer");
            };
            assert_eq!(broken.kind, "InvalidToolOutput");
            assert!(broken.message.contains(why), "{}", broken.message);
        }
    }
    /// A worker that answers by `n`: its pid and `n`, or an error answer (n < 0), a line that
    /// is not JSON (7), an exit with a message on stderr (13), a pause (5: 0.3 s, 99: 30 s).
    const WORKER: &str = r#"
import json, os, sys, time
for line in sys.stdin:
    call = json.loads(line)
    n = call["input"].get("n", 0)
    if n == 13:
        sys.stderr.write("boom at 13\n")
        sys.stderr.flush()
        sys.exit(3)
    if n == 7:
        print("not json", flush=True)
        continue
    if n < 0:
        print(json.dumps({"id": call["id"], "error": "negative n"}), flush=True)
        continue
    time.sleep({5: 0.3, 99: 30}.get(n, 0))
    print(json.dumps({"id": call["id"], "output": {"n": n, "pid": os.getpid()}}), flush=True)
"#;

    fn worker_tool(settings: &str) -> Arc<crate::tool::Tool> {
        let text = format!(
            "[[tool]]\nname = \"counter\"\nargv = [\"python3\", \"-c\", '''{WORKER}''']\npersistent = true\n{settings}\n"
        );
        let tools = parse_manifest(&text, "w.toml".as_ref(), ".".as_ref()).unwrap();
        Arc::clone(tools.get("counter").unwrap())
    }

    fn call(tool: &crate::tool::Tool, n: i64) -> crate::error::Result<(i64, u64)> {
        let output = tool.run(json!({"n": n}).as_object().cloned().unwrap())?;
        Ok((
            output["n"].as_i64().unwrap(),
            output["pid"].as_u64().unwrap(),
        ))
    }

    #[test]
    fn one_process_answers_many_calls_and_a_broken_one_is_replaced() {
        let tool = worker_tool("");
        // Each blocking call runs on a runtime of its own; the worker outlives them all.
        let (_, pid) = call(&tool, 1).unwrap();
        for n in 2..6 {
            assert_eq!(call(&tool, n).unwrap(), (n, pid));
        }
        // The worker's own error fails its call only.
        let err = call(&tool, -1).unwrap_err();
        assert_eq!(err.type_name(), "ToolError");
        let text = err.to_string();
        assert!(
            text.contains("negative n") && text.contains("counter"),
            "{text}"
        );
        assert_eq!(call(&tool, 2).unwrap(), (2, pid));
        // An exit fails the call with its status and stderr; the next call starts a new worker.
        let text = call(&tool, 13).unwrap_err().to_string();
        for part in ["counter", "w.toml", "exited", "boom at 13"] {
            assert!(text.contains(part), "{part}: {text}");
        }
        let (_, second) = call(&tool, 3).unwrap();
        assert_ne!(second, pid);
        // So does a line that is not an answer.
        let err = call(&tool, 7).unwrap_err();
        assert_eq!(err.type_name(), "InvalidToolOutput");
        assert!(err.to_string().contains("not json"), "{err}");
        let (_, third) = call(&tool, 3).unwrap();
        assert_ne!(third, second);
    }

    /// Gone, or dead and not yet reaped.
    fn is_dead(pid: u64) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        }
    }

    #[test]
    fn a_worker_that_outlives_its_timeout_is_killed() {
        let tool = worker_tool("timeout_seconds = 1");
        let (_, pid) = call(&tool, 1).unwrap();
        let err = call(&tool, 99).unwrap_err();
        assert_eq!(err.code(), "tool_timeout", "{err}");
        let dead = (0..100).any(|_| {
            let dead = is_dead(pid);
            if !dead {
                std::thread::sleep(Duration::from_millis(50));
            }
            dead
        });
        assert!(dead, "worker {pid} still runs after its call timed out");
        assert_ne!(call(&tool, 2).unwrap().1, pid);
    }

    #[test]
    fn calls_in_flight_get_a_worker_each_up_to_workers() {
        for (workers, processes) in [(1, 1), (2, 2)] {
            let tool = worker_tool(&format!("workers = {workers}"));
            let runtime = tokio::runtime::Runtime::new().unwrap();
            let outputs = runtime.block_on(async {
                let calls =
                    (0..2).map(|_| tool.run_async(json!({"n": 5}).as_object().cloned().unwrap()));
                futures::future::join_all(calls).await
            });
            let mut pids: Vec<u64> = outputs
                .into_iter()
                .map(|output| output.unwrap()["pid"].as_u64().unwrap())
                .collect();
            pids.dedup();
            assert_eq!(pids.len(), processes, "workers = {workers}");
        }
    }

    #[test]
    fn workers_belong_to_persistent_tools() {
        let refusal = |settings: &str| {
            let text = format!("[[tool]]\nname = \"t\"\nargv = [\"cat\"]\n{settings}\n");
            parse_manifest(&text, "w.toml".as_ref(), ".".as_ref())
                .err()
                .map(|err| err.to_string())
                .unwrap_or_default()
        };
        assert!(refusal("workers = 2").contains("persistent = true"));
        assert!(refusal("persistent = true\nworkers = 0").contains("at least 1"));
        assert_eq!(refusal("persistent = true\nworkers = 2"), "");
    }
}
