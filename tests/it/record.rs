//! `chainweaver record`: a real MCP server (the official Python SDK) and a real client (the same
//! SDK's, scripted) talking through the proxy; the store read back.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::time::Duration;

use chainweaver::recorder::capture::RedactionPolicy;
use chainweaver::recorder::model::mcp::{self, error_type, step_meta, trace_meta};
use chainweaver::recorder::model::{ObservedStep, TraceWithSteps};
use chainweaver::recorder::store::{PageRequest, SqliteStore, TraceFilter, TraceStore};
use serde_json::{Value, json};

/// `python3` with the official MCP SDK, or `None` (skip); under CI a missing package fails.
fn python_with_mcp() -> Option<&'static str> {
    crate::mcp::python_mcp().then_some("python3")
}

use crate::mcp::script;

/// `chainweaver --store STORE record [extra] -- python3 scripts/mcp_record_server.py`.
fn record_command(store: &Path, extra: &[&str]) -> Vec<String> {
    let mut command = vec![
        env!("CARGO_BIN_EXE_chainweaver").to_owned(),
        "--store".to_owned(),
        store.display().to_string(),
        "record".to_owned(),
    ];
    command.extend(extra.iter().map(|s| (*s).to_owned()));
    command.extend([
        "--".to_owned(),
        "python3".to_owned(),
        script("mcp_record_server.py"),
    ]);
    command
}

/// Run the scripted SDK client with `plan` against `server`; returns the listed tools (name ->
/// declares an outputSchema) and one record per call, and the client's output.
fn run_client(
    dir: &Path,
    plan: &Value,
    mode: &str,
    concurrent: bool,
    server: &[String],
) -> (Value, Vec<Value>, Output) {
    let plan_path = dir.join(format!("plan-{mode}.json"));
    let out_path = dir.join(format!("results-{mode}.jsonl"));
    std::fs::write(&plan_path, plan.to_string()).unwrap();
    let mut command = Command::new("python3");
    command
        .arg(script("mcp_record_client.py"))
        .arg("--plan")
        .arg(&plan_path)
        .arg("--out")
        .arg(&out_path)
        .args(["--mode", mode]);
    if concurrent {
        command.arg("--concurrent");
    }
    let output = command
        .arg("--")
        .args(server)
        .current_dir(dir)
        .env_remove("CHAINWEAVER_STORE")
        .output()
        .expect("the client runs");
    assert!(
        output.status.success(),
        "the client failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(&out_path).unwrap();
    let mut lines = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap());
    let tools = lines.next().unwrap()["tools"].clone();
    (tools, lines.collect(), output)
}

fn traces(store: &Path) -> Vec<TraceWithSteps> {
    let store = SqliteStore::open(store).unwrap();
    let page = PageRequest {
        limit: 1000,
        ..PageRequest::default()
    };
    let listed = store.list_traces(&TraceFilter::default(), &page).unwrap();
    listed
        .traces
        .iter()
        .map(|summary| store.get_trace(&summary.trace.trace_id).unwrap().unwrap())
        .collect()
}

/// The step a client record should have become: outputs shaped as the recorder shapes them,
/// or the failure.
fn assert_step_matches(step: &ObservedStep, record: &Value, tools: &Value) {
    let tool = record["tool"].as_str().unwrap();
    assert_eq!(step.tool_name, tool);
    let result = &record["result"];
    let has_schema = tools[tool].as_bool().unwrap();
    match mcp::tool_outputs(result, has_schema) {
        Ok(outputs) => {
            assert_eq!(step.outputs, Some(Value::Object(outputs)), "step {step:?}");
            assert_eq!(step.error_type, None);
        }
        Err(failure) => {
            assert_eq!(step.outputs, None);
            assert_eq!(step.error_type.as_deref(), Some(failure.error_type()));
            assert_eq!(step.error_message.as_deref(), Some(failure.message()));
        }
    }
    assert!(step.started_at.is_some() && step.ended_at.is_some());
    assert!(step.duration_ms.is_some_and(|d| d >= 0.0));
    assert!(step.metadata.contains_key(step_meta::REQUEST_ID));
}

fn sequential_plan() -> Value {
    json!([
        {"tool": "add", "arguments": {"a": 2, "b": 3}},
        {"tool": "lookup_user", "arguments": {"user": "ann", "api_key": "sk-live-0123456789abcdefghij"}},
        {"tool": "echo", "arguments": {"text": "hello"}},
        {"tool": "fail", "arguments": {"message": "no such order"}},
        {"tool": "slow", "arguments": {"seconds": 0.2}},
        {"tool": "add", "arguments": {"a": 40, "b": 2}}
    ])
}

fn check_sequential_session(mode: &str, version: &str) {
    let Some(_) = python_with_mcp() else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("traces.db");
    let plan = sequential_plan();
    let (tools, records, output) =
        run_client(dir.path(), &plan, mode, false, &record_command(&store, &[]));
    assert_eq!(records.len(), 6);
    assert!(
        records.iter().all(|r| r.get("result").is_some()),
        "{records:?}"
    );
    assert_eq!(records[3]["result"]["isError"], true);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("record: 6 tool calls in 1 traces"),
        "summary: {stderr}"
    );

    let traces = traces(&store);
    assert_eq!(traces.len(), 1, "one trace per session");
    let trace = &traces[0];
    assert_eq!(trace.trace.source, mcp::SOURCE);
    assert_eq!(
        trace.trace.metadata[trace_meta::PROTOCOL_VERSION],
        json!(version)
    );
    assert_eq!(trace.trace.metadata[trace_meta::CLIENT_INFO]["name"], "mcp");
    assert_eq!(
        trace.trace.metadata[trace_meta::SERVER_INFO]["name"],
        "record-example"
    );
    assert!(
        trace.trace.metadata[trace_meta::SERVER_COMMAND]
            .as_str()
            .unwrap()
            .contains("mcp_record_server.py")
    );
    assert!(trace.trace.ended_at.is_some());
    assert_eq!(trace.steps.len(), 6);
    for (step, record) in trace.steps.iter().zip(&records) {
        assert_step_matches(step, record, &tools);
        assert_eq!(step.metadata[step_meta::PROTOCOL_VERSION], json!(version));
    }
    // Inputs are the arguments, with the secret redacted.
    assert_eq!(trace.steps[0].inputs, json!({"a": 2, "b": 3}));
    assert_eq!(
        trace.steps[1].inputs,
        json!({"user": "ann", "api_key": "[REDACTED]"})
    );
    assert_eq!(trace.steps[0].outputs, Some(json!({"sum": 5})));
    assert_eq!(
        trace.steps[1].outputs,
        Some(json!({"user": "ann", "plan": "pro"}))
    );
    assert_eq!(
        trace.steps[2].outputs,
        Some(json!({"content": "hello", "structured": null, "is_error": false}))
    );
    assert_eq!(
        trace.steps[3].error_type.as_deref(),
        Some(error_type::TOOL_ERROR)
    );
    assert!(
        trace.steps[3]
            .error_message
            .as_deref()
            .unwrap()
            .contains("no such order")
    );
    let raw = std::fs::read(&store).unwrap();
    assert!(
        !crate::holds_bytes(&raw, "sk-live-01"),
        "the secret reached the store file"
    );
}

#[test]
fn handshake_era_calls_are_stored_as_the_client_received_them() {
    check_sequential_session("legacy", "2025-11-25");
}

#[test]
fn era_2026_calls_are_stored_as_the_client_received_them() {
    check_sequential_session("2026-07-28", "2026-07-28");
}

#[test]
fn pipelined_calls_answered_out_of_order_are_paired_by_id() {
    let Some(_) = python_with_mcp() else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("traces.db");
    let plan = json!([
        {"tool": "slow", "arguments": {"seconds": 0.6}},
        {"tool": "slow", "arguments": {"seconds": 0.3}},
        {"tool": "echo", "arguments": {"text": "first back"}},
        {"tool": "add", "arguments": {"a": 1, "b": 1}},
        {"tool": "fail", "arguments": {"message": "boom"}},
        {"tool": "slow", "arguments": {"seconds": 0.1}}
    ]);
    let (tools, records, _) = run_client(
        dir.path(),
        &plan,
        "legacy",
        true,
        &record_command(&store, &[]),
    );
    let traces = traces(&store);
    assert_eq!(traces.len(), 1);
    let steps = &traces[0].steps;
    assert_eq!(steps.len(), records.len());
    for record in &records {
        let matching: Vec<&ObservedStep> = steps
            .iter()
            .filter(|s| s.inputs == record["arguments"] && s.tool_name == record["tool"])
            .collect();
        assert_eq!(matching.len(), 1, "one step for {record}");
        assert_step_matches(matching[0], record, &tools);
    }
    // Steps are numbered in the order the answers came: the longest call came back last.
    assert_eq!(steps.last().unwrap().inputs, json!({"seconds": 0.6}));
}

#[test]
fn trace_by_request_meta_gives_one_trace_per_value() {
    let Some(_) = python_with_mcp() else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("traces.db");
    let plan = json!([
        {"tool": "add", "arguments": {"a": 1, "b": 2}, "meta": {"conversation": "c-1"}},
        {"tool": "add", "arguments": {"a": 3, "b": 4}, "meta": {"conversation": "c-2"}},
        {"tool": "echo", "arguments": {"text": "x"}, "meta": {"conversation": "c-1"}},
        {"tool": "echo", "arguments": {"text": "no key"}}
    ]);
    let server = record_command(&store, &["--trace-by", "request-meta:conversation"]);
    run_client(dir.path(), &plan, "legacy", false, &server);
    let mut traces = traces(&store);
    traces.sort_by_key(|t| t.trace.session_id.clone());
    let shape: Vec<(Option<String>, Vec<String>)> = traces
        .iter()
        .map(|t| {
            (
                t.trace.session_id.clone(),
                t.steps.iter().map(|s| s.tool_name.clone()).collect(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            (None, vec!["echo".to_owned()]),
            (
                Some("c-1".to_owned()),
                vec!["add".to_owned(), "echo".to_owned()]
            ),
            (Some("c-2".to_owned()), vec!["add".to_owned()]),
        ]
    );
}

/// A raw JSON-RPC client over the proxy's stdio: what it writes and reads is kept, byte for byte.
struct RawClient {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<std::process::ChildStdout>,
    written: Vec<u8>,
    read: Vec<u8>,
}

impl RawClient {
    fn spawn(command: &[String], dir: &Path) -> Self {
        let mut child = Command::new(&command[0])
            .args(&command[1..])
            .current_dir(dir)
            .env_remove("CHAINWEAVER_STORE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the proxy starts");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            stdin,
            stdout,
            written: Vec::new(),
            read: Vec::new(),
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.stdin.as_mut().unwrap().write_all(bytes).unwrap();
        self.written.extend_from_slice(bytes);
    }

    /// Send a request and read lines until its answer.
    fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(format!("{request}\n").as_bytes());
        self.answer(id)
    }

    fn answer(&mut self, id: u64) -> Value {
        loop {
            let mut line = Vec::new();
            let n = self.stdout.read_until(b'\n', &mut line).unwrap();
            assert!(n > 0, "the proxy closed stdout before answering {id}");
            self.read.extend_from_slice(&line);
            if let Ok(message) = serde_json::from_slice::<Value>(&line)
                && message["id"] == json!(id)
            {
                return message;
            }
        }
    }

    fn handshake(&mut self) {
        let answer = self.call(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}),
        );
        assert_eq!(answer["result"]["serverInfo"]["name"], "record-example");
        self.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    }

    /// Close stdin, read to the end, and wait: the exit status and the proxy's stderr.
    fn close(mut self) -> (Option<i32>, String, Vec<u8>, Vec<u8>) {
        drop(self.stdin.take());
        self.stdout.read_to_end(&mut self.read).unwrap();
        let mut stderr = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        let status = self.child.wait().unwrap();
        (status.code(), stderr, self.written, self.read)
    }
}

#[test]
fn relayed_bytes_are_identical_on_both_sides_with_malformed_and_huge_messages() {
    let Some(_) = python_with_mcp() else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("traces.db");
    let tap = dir.path().join("tap");
    let command = vec![
        env!("CARGO_BIN_EXE_chainweaver").to_owned(),
        "--store".to_owned(),
        store.display().to_string(),
        "record".to_owned(),
        "--".to_owned(),
        "python3".to_owned(),
        script("mcp_tap.py"),
        tap.display().to_string(),
        "--".to_owned(),
        "python3".to_owned(),
        script("mcp_record_server.py"),
    ];
    let mut client = RawClient::spawn(&command, dir.path());
    client.handshake();
    client.send(b"{this is not json\n");
    client.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/unknown_kind\",\"params\":{\"x\":[1,2]}}\r\n");
    let list = client.call(2, "tools/list", json!({}));
    assert!(list["result"]["tools"].as_array().unwrap().len() >= 5);
    let sum = client.call(
        3,
        "tools/call",
        json!({"name": "add", "arguments": {"a": 1, "b": 2}}),
    );
    assert_eq!(sum["result"]["structuredContent"], json!({"sum": 3}));
    // A 20 MB argument one way, a 30 MB answer the other.
    let long_text = "y".repeat(20 * 1024 * 1024);
    let echoed = client.call(
        4,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": &long_text}}),
    );
    assert_eq!(
        echoed["result"]["content"][0]["text"]
            .as_str()
            .map(str::len),
        Some(long_text.len())
    );
    let big = client.call(
        5,
        "tools/call",
        json!({"name": "big", "arguments": {"size": 30_000_000}}),
    );
    assert_eq!(
        big["result"]["content"][0]["text"].as_str().map(str::len),
        Some(30_000_000)
    );
    let (code, stderr, written, read) = client.close();
    assert_eq!(code, Some(0), "stderr: {stderr}");
    let server_got = std::fs::read(tap.join("stdin.bin")).unwrap();
    let server_sent = std::fs::read(tap.join("stdout.bin")).unwrap();
    assert!(
        server_got == written,
        "the server did not receive what the client sent"
    );
    assert!(
        server_sent == read,
        "the client did not receive what the server sent"
    );
    assert!(
        stderr.contains("1 lines were not JSON-RPC"),
        "stderr: {stderr}"
    );

    let traces = traces(&store);
    assert_eq!(traces.len(), 1);
    let steps = &traces[0].steps;
    let tools: Vec<&str> = steps.iter().map(|s| s.tool_name.as_str()).collect();
    assert_eq!(tools, ["add", "echo", "big"]);
    assert_eq!(steps[0].outputs, Some(json!({"sum": 3})));
    // Huge values are stored as the recorder stores every value: cut to its size cap.
    let mut expected =
        json!({"content": "x".repeat(30_000_000), "structured": null, "is_error": false});
    RedactionPolicy::default().redact_value(&mut expected);
    assert_eq!(steps[2].outputs, Some(expected));
    let mut expected_inputs = json!({"text": long_text});
    RedactionPolicy::default().redact_value(&mut expected_inputs);
    assert_eq!(steps[1].inputs, expected_inputs);
    assert_eq!(
        traces[0].trace.metadata[trace_meta::CLIENT_INFO]["name"],
        "raw"
    );
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn a_server_dying_mid_call_ends_the_proxy_with_its_code_and_keeps_the_steps() {
    let Some(_) = python_with_mcp() else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("traces.db");
    let mut client = RawClient::spawn(&record_command(&store, &[]), dir.path());
    client.handshake();
    let sum = client.call(
        2,
        "tools/call",
        json!({"name": "add", "arguments": {"a": 5, "b": 6}}),
    );
    assert_eq!(sum["result"]["structuredContent"]["sum"], 11);
    // The server exits with 7 while the call is under way; the client keeps stdin open.
    client.send(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"exit_now\",\"arguments\":{\"code\":7}}}\n");
    let mut rest = Vec::new();
    client.stdout.read_to_end(&mut rest).unwrap();
    let status = client.child.wait().unwrap();
    assert_eq!(status.code(), Some(7));
    let traces = traces(&store);
    assert_eq!(traces.len(), 1);
    let steps = &traces[0].steps;
    assert_eq!(steps.len(), 2);
    // This client never listed the tools, so the proxy cannot know `add` declares an
    // outputSchema: the call is stored in the shape of a tool without one.
    assert_eq!(
        steps[0].outputs,
        Some(
            json!({"content": "{\n  \"sum\": 11\n}", "structured": {"sum": 11}, "is_error": false})
        )
    );
    assert_eq!(steps[1].tool_name, "exit_now");
    assert_eq!(
        steps[1].error_type.as_deref(),
        Some(error_type::NO_RESPONSE)
    );
}

/// The server's pid, from the `pid` tool.
fn server_pid(client: &mut RawClient, id: u64) -> u32 {
    let answer = client.call(id, "tools/call", json!({"name": "pid", "arguments": {}}));
    answer["result"]["content"][0]["text"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {answer}"))
}

#[test]
fn closing_stdin_or_signalling_the_proxy_leaves_no_server_behind() {
    let Some(_) = python_with_mcp() else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("traces.db");

    // The client closes stdin: the server exits on its own, the proxy with its code.
    let mut client = RawClient::spawn(&record_command(&store, &[]), dir.path());
    client.handshake();
    let pid = server_pid(&mut client, 2);
    assert!(alive(pid));
    let (code, stderr, _, _) = client.close();
    assert_eq!(code, Some(0), "stderr: {stderr}");
    assert!(!alive(pid), "the server outlived the proxy");

    // SIGTERM to the proxy while the client still holds stdin open, in the middle of a call.
    let mut client = RawClient::spawn(
        &record_command(&store, &["--shutdown-grace", "2"]),
        dir.path(),
    );
    client.handshake();
    let pid = server_pid(&mut client, 2);
    client.send(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"slow\",\"arguments\":{\"seconds\":30}}}\n");
    std::thread::sleep(Duration::from_millis(300));
    let killed = Command::new("kill")
        .args(["-TERM", &client.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = client.child.wait().unwrap();
    // Python ends on SIGTERM by the signal: 128 + 15.
    assert_eq!(status.code(), Some(143));
    assert!(!alive(pid), "the server outlived the proxy");
    let traces = traces(&store);
    assert_eq!(traces.len(), 2);
    let slow: Vec<&ObservedStep> = traces
        .iter()
        .flat_map(|t| &t.steps)
        .filter(|s| s.tool_name == "slow")
        .collect();
    assert_eq!(slow.len(), 1);
    assert_eq!(slow[0].error_type.as_deref(), Some(error_type::NO_RESPONSE));
}

#[test]
fn an_unusable_store_does_not_stop_the_traffic_and_the_loss_is_reported() {
    let Some(_) = python_with_mcp() else { return };
    let dir = tempfile::tempdir().unwrap();
    // A store under a regular file can be neither opened nor created, by any user.
    let blocker = dir.path().join("not-a-folder");
    std::fs::write(&blocker, "x").unwrap();
    let store = blocker.join("traces.db");
    let plan = sequential_plan();
    let (_, records, output) = run_client(
        dir.path(),
        &plan,
        "legacy",
        false,
        &record_command(&store, &[]),
    );
    assert_eq!(records.len(), 6);
    assert!(
        records.iter().all(|r| r.get("result").is_some()),
        "{records:?}"
    );
    assert_eq!(records[0]["result"]["structuredContent"], json!({"sum": 5}));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("6 of 6 tool calls were NOT recorded"),
        "stderr: {stderr}"
    );
    assert!(stderr.contains("could not be opened"), "stderr: {stderr}");
}

#[test]
fn a_locked_store_does_not_hold_the_traffic_back() {
    let Some(_) = python_with_mcp() else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("traces.db");
    drop(SqliteStore::open(&store).unwrap());
    // Another program holds the store locked for the whole session.
    let lock = rusqlite::Connection::open(&store).unwrap();
    lock.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let plan = sequential_plan();
    let (_, records, output) = run_client(
        dir.path(),
        &plan,
        "legacy",
        false,
        &record_command(&store, &[]),
    );
    assert_eq!(records.len(), 6);
    assert!(
        records.iter().all(|r| r.get("result").is_some()),
        "{records:?}"
    );
    assert_eq!(
        records[5]["result"]["structuredContent"],
        json!({"sum": 42})
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("may NOT be recorded") || stderr.contains("were NOT recorded"),
        "stderr: {stderr}"
    );
    lock.execute_batch("ROLLBACK").unwrap();
}

#[test]
fn a_missing_server_command_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = crate::chainweaver(
        dir.path(),
        &["record", "--", "./no-such-mcp-server", "--flag"],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot start the MCP server `./no-such-mcp-server --flag`"),
        "stderr: {stderr}"
    );
    let out = crate::chainweaver(dir.path(), &["record"]);
    assert_eq!(out.status.code(), Some(2));
}

/// The npm "everything" server's executable, installed by `.ci/run` under
/// `$CHAINWEAVER_MCP_PEERS` (default `$CARGO_TARGET_DIR/mcp-peers`); `None` (skip) when it is
/// missing, except under CI.
#[allow(clippy::print_stderr)]
fn everything_server() -> Option<PathBuf> {
    let peers = std::env::var_os("CHAINWEAVER_MCP_PEERS")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR").map(|t| PathBuf::from(t).join("mcp-peers"))
        })
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/mcp-peers"));
    let server = peers.join("node_modules/.bin/mcp-server-everything");
    if server.exists() {
        return Some(server);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but the npm everything server is missing at {} (.ci/run installs it)",
        server.display()
    );
    eprintln!("skipping: no npm everything server at {}", server.display());
    None
}

#[test]
fn the_npm_everything_server_is_recorded_as_its_client_saw_it() {
    let Some(_) = python_with_mcp() else { return };
    let Some(everything) = everything_server() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("traces.db");
    let server = vec![
        env!("CARGO_BIN_EXE_chainweaver").to_owned(),
        "--store".to_owned(),
        store.display().to_string(),
        "record".to_owned(),
        "--".to_owned(),
        everything.display().to_string(),
        "stdio".to_owned(),
    ];
    let plan = json!([
        {"tool": "echo", "arguments": {"message": "hello everything"}},
        {"tool": "get-sum", "arguments": {"a": 2, "b": 40}},
        {"tool": "get-structured-content", "arguments": {"location": "Chicago"}},
        {"tool": "trigger-long-running-operation", "arguments": {"duration": 0.3, "steps": 3}}
    ]);
    let (tools, records, _) = run_client(dir.path(), &plan, "legacy", false, &server);
    assert_eq!(tools["get-structured-content"], true);
    assert_eq!(records.len(), 4);
    assert!(
        records.iter().all(|r| r.get("result").is_some()),
        "{records:?}"
    );
    let traces = traces(&store);
    assert_eq!(traces.len(), 1);
    let trace = &traces[0];
    assert_eq!(trace.steps.len(), 4);
    for (step, record) in trace.steps.iter().zip(&records) {
        assert_step_matches(step, record, &tools);
        assert_eq!(step.inputs, record["arguments"]);
    }
    assert!(
        trace.steps[2]
            .outputs
            .as_ref()
            .unwrap()
            .get("temperature")
            .is_some_and(Value::is_number),
        "structured content: {:?}",
        trace.steps[2].outputs
    );
    assert_eq!(
        trace.trace.metadata[trace_meta::SERVER_INFO]["name"],
        json!("mcp-servers/everything")
    );
}
