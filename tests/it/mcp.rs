//! MCP with real peers: the Python example server (official `mcp` package) and the npm
//! "everything" server as tool sources; the official Python client driving `chainweaver serve`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use chainweaver::Error;
use chainweaver::tool::JsonObject;
use chainweaver::tool::command::load_manifest;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub(crate) fn script(name: &str) -> String {
    repo().join("scripts").join(name).display().to_string()
}

/// True when `python3` can import the official `mcp` package. Under CI a missing package fails
/// the test; elsewhere the test is skipped.
pub(crate) fn python_mcp() -> bool {
    crate::python_imports("mcp")
}

fn obj(value: Value) -> JsonObject {
    value.as_object().cloned().unwrap()
}

/// A manifest naming the Python example server, with extra TOML lines for the entry.
fn example_manifest(dir: &Path, extra: &str) -> PathBuf {
    let text = format!(
        "[[mcp_server]]\nname = \"example\"\ncommand = \"python3\"\nargs = [{:?}]\n{extra}\n",
        script("mcp_example_server.py")
    );
    let path = dir.join("tools.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn tools_of_a_python_mcp_server_are_tools_with_the_recorded_shapes() {
    if !python_mcp() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let manifest = example_manifest(
        dir.path(),
        "prefix = \"ex\"\ncacheable = [\"add\"]\ntimeout_seconds = 20",
    );
    let tools = load_manifest(&manifest).unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    for wanted in [
        "ex__lookup_user",
        "ex__add",
        "ex__greet",
        "ex__fail",
        "ex__slow",
    ] {
        assert!(names.contains(&wanted), "{wanted} missing from {names:?}");
    }
    let get = |name: &str| tools.get(name).unwrap();
    // Annotations map to safety; only the manifest's cacheable list is cacheable.
    assert_eq!(get("ex__lookup_user").read_only(), Some(true));
    assert_eq!(get("ex__delete_user").read_only(), Some(false));
    assert_eq!(get("ex__greet").read_only(), None);
    assert!(get("ex__add").cacheable());
    assert!(!get("ex__lookup_user").cacheable());

    // With an outputSchema: the structured content.
    let user = get("ex__lookup_user")
        .run(obj(json!({"user_id": "u1"})))
        .unwrap();
    assert_eq!(
        Value::Object(user),
        json!({"user_id": "u1", "name": "Ada", "email": "ada@example.com", "plan": "pro"})
    );
    // Without one: {content, structured, is_error}, as the recording proxy stores it.
    let greeting = get("ex__greet").run(obj(json!({"name": "Lin"}))).unwrap();
    assert_eq!(
        Value::Object(greeting),
        json!({"content": "Hello, Lin!", "structured": null, "is_error": false})
    );
    // isError is a failure carrying the server's message.
    let err = get("ex__fail")
        .run(obj(json!({"reason": "quota exceeded"})))
        .unwrap_err();
    assert!(
        matches!(&err, Error::ToolFailed { tool, message, .. } if tool == "ex__fail" && message.contains("quota exceeded")),
        "{err:?}"
    );
    // A bad argument never reaches the server: the input schema refuses it.
    let err = get("ex__add")
        .run(obj(json!({"a": "one", "b": 2})))
        .unwrap_err();
    assert!(
        matches!(&err, Error::SchemaValidation { stage, pointer, .. } if stage == "input" && pointer == "/a"),
        "{err:?}"
    );
}

#[test]
fn a_timeout_cancels_the_call_at_the_server() {
    if !python_mcp() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let manifest = example_manifest(
        dir.path(),
        &format!(
            "timeout_seconds = 1\nenv = {{ MCP_EXAMPLE_LOG = {:?} }}",
            log.display().to_string()
        ),
    );
    let tools = load_manifest(&manifest).unwrap();
    let err = tools
        .get("slow")
        .unwrap()
        .run(obj(json!({"seconds": 120})))
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("slow") && text.contains("timed out"),
        "{text}"
    );
    // The server saw `notifications/cancelled` and stopped the call (it logs the cancellation).
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = String::new();
    while Instant::now() < deadline {
        seen = std::fs::read_to_string(&log).unwrap_or_default();
        if seen.contains("cancelled 120") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(seen.contains("cancelled 120"), "server log: {seen:?}");
    // The session is still usable after a cancelled call.
    let sum = tools
        .get("add")
        .unwrap()
        .run(obj(json!({"a": 2, "b": 3})))
        .unwrap();
    assert_eq!(Value::Object(sum), json!({"total": 5}));
}

#[test]
fn a_server_that_exits_or_garbles_gives_clear_errors() {
    if !python_mcp() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let manifest = example_manifest(dir.path(), "timeout_seconds = 5");
    let tools = load_manifest(&manifest).unwrap();
    let err = tools
        .get("garble")
        .unwrap()
        .run(JsonObject::new())
        .unwrap_err();
    let text = err.to_string();
    // The line that is not JSON ends the call with a parse error naming it, not a timeout.
    assert!(
        text.contains("garble") && text.contains("that is not JSON") && text.contains("line "),
        "{text}"
    );
    assert!(!text.contains("timed out"), "{text}");

    let tools = load_manifest(&manifest).unwrap();
    let err = tools
        .get("exit_now")
        .unwrap()
        .run(JsonObject::new())
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("exit_now") && text.contains("example") && text.contains("closed"),
        "{text}"
    );
    // Later calls on the dead session fail the same clear way, without hanging.
    let err = tools
        .get("add")
        .unwrap()
        .run(obj(json!({"a": 1, "b": 1})))
        .unwrap_err();
    assert!(err.to_string().contains("closed"), "{err}");

    // A server that cannot start names the manifest entry.
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[[mcp_server]]\nname = \"ghost\"\ncommand = \"definitely-not-a-server-here\"\n",
    )
    .unwrap();
    let err = load_manifest(&bad).unwrap_err().to_string();
    assert!(err.contains("ghost") && err.contains("bad.toml"), "{err}");
}

/// The npm "everything" server's entry point: `$CHAINWEAVER_MCP_EVERYTHING` (set by .ci/run).
#[allow(clippy::print_stderr)]
fn everything_server() -> Option<PathBuf> {
    let path = std::env::var_os("CHAINWEAVER_MCP_EVERYTHING").map(PathBuf::from);
    match path {
        Some(path) if path.is_file() => Some(path),
        other => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI is set but the npm everything server is missing ({other:?}); .ci/run installs it and sets CHAINWEAVER_MCP_EVERYTHING"
            );
            eprintln!("skipping: CHAINWEAVER_MCP_EVERYTHING is not set to the everything server");
            None
        }
    }
}

#[test]
fn tools_of_the_npm_everything_server() {
    let Some(server) = everything_server() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("tools.toml");
    std::fs::write(
        &manifest,
        format!(
            "[[mcp_server]]\nname = \"everything\"\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\nprefix = \"ev\"\ntimeout_seconds = 30\n",
            server.display().to_string()
        ),
    )
    .unwrap();
    check_everything_tools(&load_manifest(&manifest).unwrap(), "hi there");
}

/// The everything server's tools (prefixed `ev`) answer: echo echoes `message`, the adding
/// tool adds, and a bad argument is refused before it is sent.
fn check_everything_tools(tools: &chainweaver::tool::ToolRegistry, message: &str) {
    let echo = tools
        .get("ev__echo")
        .expect("the everything server has echo");
    let out = echo.run(obj(json!({ "message": message }))).unwrap();
    assert_eq!(out["is_error"], json!(false));
    assert!(
        out["content"].as_str().unwrap().contains(message),
        "{out:?}"
    );
    let sum_tool = tools
        .iter()
        .find(|t| t.name() == "ev__get-sum" || t.name() == "ev__add")
        .expect("the everything server has an adding tool");
    let out = sum_tool.run(obj(json!({"a": 2, "b": 40}))).unwrap();
    let text = serde_json::to_string(&out).unwrap();
    assert!(text.contains("42"), "{text}");
    assert!(echo.run(obj(json!({"message": 5}))).is_err());
}

/// Start a server and wait until its standard error says `ready` (then keep draining it, so
/// the server never blocks on a full pipe); killed when the result is dropped.
fn serve_until(mut command: Command, ready: &str) -> Served {
    use std::io::BufRead;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let served = Served(child);
    let mut lines = std::io::BufReader::new(stderr).lines();
    loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("the server ended before saying `{ready}`"))
            .unwrap();
        if line.contains(ready) {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    served
}

/// The same server over streamable HTTP, reached by `url` in the manifest: its tools work as
/// over stdio, and a bad argument is refused before it is sent.
#[test]
fn tools_of_the_npm_everything_server_over_http() {
    let Some(server) = everything_server() else {
        return;
    };
    let port = crate::free_port();
    let mut node = Command::new("node");
    node.arg(&server)
        .arg("streamableHttp")
        .env("PORT", port.to_string());
    let served = serve_until(node, "listening on port");
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("tools.toml");
    std::fs::write(
        &manifest,
        format!(
            "[[mcp_server]]\nname = \"everything\"\nurl = \"http://127.0.0.1:{port}/mcp\"\nprefix = \"ev\"\ntimeout_seconds = 30\n"
        ),
    )
    .unwrap();
    let tools = load_manifest(&manifest).unwrap();
    check_everything_tools(&tools, "over http");
    drop(tools);
    drop(served);

    // Nothing listens there any more: the error names the server, the URL and the manifest.
    let err = load_manifest(&manifest).unwrap_err().to_string();
    assert!(
        err.contains("everything")
            && err.contains(&format!("127.0.0.1:{port}"))
            && err.contains("tools.toml"),
        "{err}"
    );
}

/// An `https://` server (the official Python SDK's server behind TLS, with a certificate made
/// for the test): reached when the system trusts the certificate (here through SSL_CERT_FILE),
/// refused with the reason and the way out when it does not.
#[test]
fn an_https_mcp_server_is_reached_when_its_certificate_is_trusted() {
    if !python_mcp() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=127.0.0.1"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl makes the test's certificate (.ci/run installs it)");
    assert!(made.success());
    let port = crate::free_port();
    let mut python = Command::new("python3");
    python
        .arg(script("mcp_example_server.py"))
        .arg("--https")
        .arg(port.to_string())
        .arg(&cert)
        .arg(&key);
    let _served = serve_until(python, "running on https://");
    let url = format!("https://127.0.0.1:{port}/mcp");
    std::fs::write(
        dir.path().join("tools.toml"),
        format!("[[mcp_server]]\nname = \"example\"\nurl = \"{url}\"\ntimeout_seconds = 30\n"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("add.json"),
        r#"{"name": "add_flow", "steps": [{"tool_name": "add", "input_mapping": {"a": "a", "b": "b"}}]}"#,
    )
    .unwrap();
    let run = |trusted: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_chainweaver"));
        command
            .current_dir(dir.path())
            .args([
                "-q",
                "--store",
                "cw.db",
                "run",
                "add.json",
                "--tools",
                "tools.toml",
            ])
            .args(["--input", r#"{"a": 2, "b": 40}"#, "--format", "json"])
            .env_remove("SSL_CERT_DIR");
        if trusted {
            command.env("SSL_CERT_FILE", &cert);
        } else {
            command.env_remove("SSL_CERT_FILE");
        }
        command.output().unwrap()
    };

    let trusted = run(true);
    assert!(
        trusted.status.success(),
        "{}",
        String::from_utf8_lossy(&trusted.stderr)
    );
    let result: Value = serde_json::from_slice(&trusted.stdout).unwrap();
    assert_eq!(result["success"], json!(true), "{result}");
    assert_eq!(result["final_output"]["total"], json!(42), "{result}");

    let untrusted = run(false);
    assert!(!untrusted.status.success());
    let err = String::from_utf8_lossy(&untrusted.stderr);
    assert!(
        err.contains("`example`") && err.contains(&url) && err.contains("SSL_CERT_FILE"),
        "{err}"
    );
}

/// A URL of another scheme is refused before any connection is tried, naming the server.
#[test]
fn an_mcp_server_url_must_be_http_or_https() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("tools.toml");
    std::fs::write(
        &manifest,
        "[[mcp_server]]\nname = \"remote\"\nurl = \"ftp://mcp.example.invalid/mcp\"\n",
    )
    .unwrap();
    let err = load_manifest(&manifest).unwrap_err().to_string();
    assert!(
        err.contains("`remote`")
            && err.contains("not an http(s) URL")
            && err.contains("tools.toml"),
        "{err}"
    );
}

/// Run a Python client script against a command (stdio) and return its JSON document.
pub(crate) fn python_client(mode: &str, server: &[&str], operations: &Value) -> Value {
    let mut child = Command::new("python3")
        .arg(script("mcp_client.py"))
        .args(["--mode", mode, "--"])
        .args(server)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(operations.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "client output is not JSON ({err}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// A store with flows over the example server's tools, and the manifest they run with.
fn flows_fixture(dir: &Path) -> PathBuf {
    let manifest = example_manifest(dir, "timeout_seconds = 20");
    let flows = [
        json!({"name": "user_total", "version": "1.0.0",
        "description": "Look a user up and add two numbers",
        "steps": [
            {"tool_name": "lookup_user", "input_mapping": {"user_id": "user_id"}},
            {"tool_name": "add", "input_mapping": {"a": "a", "b": "b"}}
        ]}),
        json!({"name": "failing", "version": "1.0.0",
               "steps": [
                   {"tool_name": "add", "input_mapping": {"a": "a", "b": "b"}},
                   {"tool_name": "lookup_user", "input_mapping": {"user_id": "user_id"}}
               ],
               "metadata": {"safety": {"side_effects": "READ"}}}),
        json!({"name": "remover", "version": "1.0.0",
               "steps": [{"tool_name": "delete_user", "input_mapping": {"user_id": "user_id"}}]}),
    ];
    for flow in flows {
        let name = flow["name"].as_str().unwrap().to_string();
        register(dir, &name, &flow, &manifest);
    }
    manifest
}

/// Write `flow` to `<dir>/<name>.json` and register it in the store of `dir`.
fn register(dir: &Path, name: &str, flow: &Value, manifest: &Path) {
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, flow.to_string()).unwrap();
    flows_succeeds(dir, "register", &path, manifest);
}

/// `chainweaver flows VERB FLOW --tools MANIFEST` in `dir`, which must succeed.
fn flows_succeeds(dir: &Path, verb: &str, flow: &Path, manifest: &Path) {
    let out = crate::chainweaver(
        dir,
        &[
            "flows",
            verb,
            flow.to_str().unwrap(),
            "--tools",
            manifest.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "flows {verb}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn run_and_validate_a_flow_whose_tools_are_mcp_tools() {
    if !python_mcp() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let manifest = flows_fixture(dir.path());
    let flow = dir.path().join("user_total.json");
    flows_succeeds(dir.path(), "validate", &flow, &manifest);
    let out = crate::chainweaver(
        dir.path(),
        &[
            "--format",
            "json",
            "run",
            flow.to_str().unwrap(),
            "--tools",
            manifest.to_str().unwrap(),
            "--input",
            r#"{"user_id": "u2", "a": 20, "b": 22}"#,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let saved: Value = serde_json::from_slice(&out.stdout).unwrap();
    let output = &saved["final_output"];
    assert_eq!(output["name"], json!("Grace"));
    assert_eq!(output["total"], json!(42));
}

#[test]
fn serve_flows_to_the_python_client_in_both_eras() {
    if !python_mcp() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let manifest = flows_fixture(dir.path());
    let store = dir.path().join("chainweaver.db");
    let serve = [
        env!("CARGO_BIN_EXE_chainweaver"),
        "--store",
        store.to_str().unwrap(),
        "serve",
        "--tools",
        manifest.to_str().unwrap(),
    ];
    let operations = json!([
        {"op": "list_tools"},
        {"op": "call", "name": "user_total", "arguments": {"user_id": "u1", "a": 1, "b": 2}},
        {"op": "call", "name": "failing", "arguments": {"user_id": "nobody", "a": 1, "b": 2}},
        {"op": "call", "name": "remover", "arguments": {"user_id": "u1"}}
    ]);
    for mode in ["legacy", "auto"] {
        let document = python_client(mode, &serve, &operations);
        let results = &document["results"];
        let names: Vec<&str> = results[0]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        // Read-only flows are served; the one with a destructive tool is not.
        assert_eq!(names, ["failing", "user_total"], "{mode}");
        let listed = &results[0][1];
        assert_eq!(listed["inputSchema"]["required"], json!(["user_id"]));
        let meta = &listed["_meta"]["chainweaver"];
        assert_eq!(meta["version"], json!("1.0.0"));
        assert_eq!(meta["lifecycle"], json!("ACTIVE"));
        assert_eq!(meta["replaces_tools"], json!(["lookup_user", "add"]));
        assert_eq!(meta["round_trips_saved"], json!(1));
        // The flow's result is what the two tool calls returned.
        let called = &results[1];
        assert_eq!(called["isError"], json!(false), "{mode}: {called}");
        let output = &called["structuredContent"];
        assert_eq!(output["email"], json!("ada@example.com"));
        assert_eq!(output["total"], json!(3));
        // A failing flow is a tool error naming the step.
        let failed = &results[2];
        assert_eq!(failed["isError"], json!(true), "{mode}: {failed}");
        let text = failed["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("step 1") && text.contains("lookup_user") && text.contains("nobody"),
            "{text}"
        );
        assert_eq!(failed["_meta"]["chainweaver"]["failed_step"], json!(1));
        // An unserved flow is a protocol error.
        assert!(results[3]["error"].is_string(), "{mode}: {}", results[3]);
    }
}

/// `serve` over a persistent command tool: one worker process answers every call of the served
/// flow (it reports its pid), and a worker's own error answer is the flow's tool error.
#[test]
fn serve_a_flow_over_a_persistent_command_tool() {
    if !python_mcp() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("worker.py"),
        r#"import json, os, sys
for line in sys.stdin:
    call = json.loads(line)
    n = call["input"]["n"]
    if n < 0:
        answer = {"id": call["id"], "error": {"type": "NegativeN", "message": f"n is {n}"}}
    else:
        answer = {"id": call["id"], "output": {"n": n, "pid": os.getpid()}}
    print(json.dumps(answer), flush=True)
"#,
    )
    .unwrap();
    let manifest = dir.path().join("tools.toml");
    std::fs::write(
        &manifest,
        r#"[[tool]]
name = "count"
argv = ["python3", "./worker.py"]
persistent = true
read_only = true
input_schema = { type = "object", properties = { n = { type = "integer" } }, required = ["n"] }
"#,
    )
    .unwrap();
    let flow =
        json!({"name": "counted", "steps": [{"tool_name": "count", "input_mapping": {"n": "n"}}]});
    register(dir.path(), "counted", &flow, &manifest);
    let store = dir.path().join("chainweaver.db");
    let serve = [
        env!("CARGO_BIN_EXE_chainweaver"),
        "--store",
        store.to_str().unwrap(),
        "serve",
        "--tools",
        manifest.to_str().unwrap(),
    ];
    let calls: Vec<Value> = [1, 2, -3, 4]
        .iter()
        .map(|n| json!({"op": "call", "name": "counted", "arguments": {"n": n}}))
        .collect();
    let document = python_client("auto", &serve, &Value::Array(calls));
    let results = document["results"].as_array().unwrap();
    let answered: Vec<(i64, i64)> = [0, 1, 3]
        .iter()
        .map(|&at| {
            let output = &results[at]["structuredContent"];
            assert_eq!(results[at]["isError"], json!(false), "{}", results[at]);
            (
                output["n"].as_i64().unwrap(),
                output["pid"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        answered.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        [1, 2, 4]
    );
    let pid = answered[0].1;
    assert!(answered.iter().all(|(_, p)| *p == pid), "{answered:?}");
    let failed = &results[2];
    assert_eq!(failed["isError"], json!(true), "{failed}");
    let text = failed["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("n is -3") && text.contains("count"), "{text}");
}

#[test]
fn chain_tools_are_managed_through_mcp_in_both_eras() {
    if !python_mcp() {
        return;
    }
    for mode in ["legacy", "auto"] {
        chain_tools_session(mode);
    }
}

fn chain_tools_session(mode: &str) {
    let dir = tempfile::tempdir().unwrap();
    let manifest = example_manifest(dir.path(), "timeout_seconds = 20");
    let store = dir.path().join("chainweaver.db");
    let serve = [
        env!("CARGO_BIN_EXE_chainweaver"),
        "--store",
        store.to_str().unwrap(),
        "serve",
        "--tools",
        manifest.to_str().unwrap(),
        "--chain-tools",
        "--allow-tool",
        "lookup_user",
        "--allow-tool",
        "add",
        "--allow-tool",
        "greet",
    ];
    let create = json!({
        "name": "user_greeting", "description": "Look a user up and greet them",
        "tool_type": "chain",
        "input_schema": {"type": "object", "properties": {"user_id": {"type": "string"}},
                         "required": ["user_id"]},
        "chain_config": {"steps": [
            {"tool_name": "lookup_user", "input_mapping": {"user_id": "{{user_id}}"}, "output_key": "user"},
            {"tool_name": "greet", "input_mapping": {"name": "{{user.name}}"}, "output_key": "greeting"}
        ]},
        "activate": true
    });
    let tolerant = json!({
        "name": "tolerant", "tool_type": "chain",
        "input_schema": {"type": "object", "properties": {"user_id": {"type": "string"}}},
        "chain_config": {"continue_on_error": true, "steps": [
            {"tool_name": "lookup_user", "input_mapping": {"user_id": "{{user_id}}"}, "output_key": "user"},
            {"tool_name": "add", "input_mapping": {"a": 2, "b": 3}, "output_key": "sum"}
        ]}
    });
    let bad_template = json!({
        "name": "broken", "tool_type": "chain",
        "input_schema": {"type": "object", "properties": {"user_id": {"type": "string"}}},
        "chain_config": {"steps": [
            {"tool_name": "lookup_user", "input_mapping": {"user_id": "{{user_id}}"}},
            {"tool_name": "greet", "input_mapping": {"name": "{{usr.name}}"}}
        ]}
    });
    let not_allowed = json!({
        "name": "deleter", "tool_type": "chain",
        "chain_config": {"steps": [{"tool_name": "delete_user", "input_mapping": {"user_id": "u1"}}]}
    });
    let unknown = json!({
        "name": "ghostly", "tool_type": "chain",
        "chain_config": {"steps": [{"tool_name": "add", "input_mapping": {"a": 1, "b": 2}},
                                   {"tool_name": "no_such_tool"}]}
    });
    let operations = json!([
        {"op": "call", "name": "create_dynamic_tool", "arguments": create},
        {"op": "wait_notification", "method": "notifications/tools/list_changed", "seconds": 10},
        {"op": "list_tools"},
        {"op": "call", "name": "user_greeting", "arguments": {"user_id": "u2"}},
        {"op": "call", "name": "create_dynamic_tool", "arguments": tolerant},
        {"op": "call", "name": "tolerant", "arguments": {"user_id": "nobody"}},
        {"op": "call", "name": "create_dynamic_tool", "arguments": bad_template},
        {"op": "call", "name": "create_dynamic_tool", "arguments": not_allowed},
        {"op": "call", "name": "create_dynamic_tool", "arguments": unknown},
        {"op": "call", "name": "list_dynamic_tools", "arguments": {}},
        {"op": "call", "name": "update_dynamic_tool", "arguments": {
            "name": "user_greeting",
            "chain_config": {"steps": [
                {"tool_name": "lookup_user", "input_mapping": {"user_id": "{{user_id}}"}, "output_key": "user"},
                {"tool_name": "greet", "input_mapping": {"name": "{{user.email}}"}, "output_key": "greeting"}
            ]}}},
        {"op": "call", "name": "user_greeting", "arguments": {"user_id": "u2"}},
        {"op": "call", "name": "delete_dynamic_tool", "arguments": {"name": "user_greeting"}},
        {"op": "list_tools"},
        {"op": "call", "name": "user_greeting", "arguments": {"user_id": "u2"}}
    ]);
    let document = python_client(mode, &serve, &operations);
    let r = &document["results"];
    assert_eq!(r[0]["isError"], json!(false), "{}", r[0]);
    assert_eq!(r[1]["seen"], json!(true), "list_changed after create");
    let names: Vec<&str> = r[2]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"user_greeting"), "{names:?}");
    assert!(names.contains(&"create_dynamic_tool"), "{names:?}");
    // The chain output shape of spec 004.
    let out = &r[3]["structuredContent"];
    assert_eq!(out["success"], json!(true), "{}", r[3]);
    assert_eq!(out["steps"][0]["tool"], json!("lookup_user"));
    assert_eq!(out["steps"][0]["result"]["name"], json!("Grace"));
    assert_eq!(
        out["final_result"]["content"],
        json!("Hello, Grace!"),
        "{out}"
    );
    // continue_on_error: the failed step is reported and the next one still runs.
    assert_eq!(r[4]["isError"], json!(false), "{}", r[4]);
    let out = &r[5]["structuredContent"];
    assert_eq!(r[5]["isError"], json!(false), "{}", r[5]);
    assert_eq!(out["success"], json!(false));
    assert_eq!(out["steps"][0]["success"], json!(false));
    assert!(
        out["steps"][0]["error"]
            .as_str()
            .unwrap()
            .contains("nobody")
    );
    assert_eq!(out["steps"][1]["success"], json!(true));
    assert_eq!(out["final_result"]["total"], json!(5), "{out}");
    // Bad chains are refused with a tool error naming the step.
    for (index, needles) in [
        (6, vec!["step 1", "usr"]),
        (7, vec!["step 0", "allow-list"]),
        (8, vec!["step 1", "no_such_tool"]),
    ] {
        assert_eq!(r[index]["isError"], json!(true), "{}", r[index]);
        let text = r[index]["content"][0]["text"].as_str().unwrap();
        for needle in needles {
            assert!(text.contains(needle), "{text}");
        }
    }
    let listed = &r[9]["structuredContent"]["tools"];
    let listed_names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed_names, ["tolerant", "user_greeting"]);
    // Updated: a new version, used at once.
    assert_eq!(
        r[10]["structuredContent"]["version"],
        json!("2.0.0"),
        "{}",
        r[10]
    );
    assert_eq!(
        r[11]["structuredContent"]["final_result"]["content"],
        json!("Hello, grace@example.com!")
    );
    // Deleted: gone from the list, and calling it is a protocol error.
    assert_eq!(r[12]["isError"], json!(false), "{}", r[12]);
    let names: Vec<&str> = r[13]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"user_greeting"), "{names:?}");
    assert!(r[14]["error"].is_string(), "{}", r[14]);

    // Chains persist in the store as flows with their lifecycle.
    let out = crate::chainweaver(
        dir.path(),
        &[
            "--store",
            store.to_str().unwrap(),
            "--format",
            "json",
            "flows",
            "list",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("tolerant") && text.contains("RETIRED"),
        "{text}"
    );

    // --no-create: no create tool, and the persisted chain is still served.
    let mut no_create: Vec<&str> = serve.to_vec();
    no_create.push("--no-create");
    let document = python_client(
        mode,
        &no_create,
        &json!([{"op": "list_tools"}, {"op": "call", "name": "tolerant", "arguments": {"user_id": "u1"}}]),
    );
    let names: Vec<&str> = document["results"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"create_dynamic_tool"), "{names:?}");
    assert!(names.contains(&"tolerant"), "{names:?}");
    assert_eq!(
        document["results"][1]["structuredContent"]["success"],
        json!(true)
    );
}

/// Kills the served child when the test ends, however it ends.
struct Served(std::process::Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn serve_over_streamable_http() {
    if !python_mcp() {
        return;
    }
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let manifest = flows_fixture(dir.path());
    let store = dir.path().join("chainweaver.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_chainweaver"))
        .args(["--store", store.to_str().unwrap(), "serve", "--tools"])
        .arg(&manifest)
        .args(["--http", "127.0.0.1:0", "--prefix", "cw"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let served = Served(child);
    let mut lines = std::io::BufReader::new(stderr).lines();
    let url = loop {
        let line = lines.next().expect("serve printed its address").unwrap();
        if let Some(rest) = line.strip_prefix("serve: streamable HTTP on ") {
            break rest.trim().to_string();
        }
    };
    // Keep draining stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    for mode in ["legacy", "auto"] {
        let mut client = Command::new("python3")
            .arg(script("mcp_client.py"))
            .args(["--mode", mode, "--url", &url])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let operations = json!([
            {"op": "list_tools"},
            {"op": "call", "name": "cw__user_total", "arguments": {"user_id": "u2", "a": 5, "b": 6}}
        ]);
        client
            .stdin
            .take()
            .unwrap()
            .write_all(operations.to_string().as_bytes())
            .unwrap();
        let output = client.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let document: Value = serde_json::from_slice(&output.stdout).unwrap();
        let names: Vec<&str> = document["results"][0]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["cw__failing", "cw__user_total"], "{mode}");
        let output = &document["results"][1]["structuredContent"];
        assert_eq!(output["name"], json!("Grace"), "{mode}: {document}");
        assert_eq!(output["total"], json!(11));
    }
    // And our own client, through a manifest `url`: the served flow is a tool again.
    let remote = dir.path().join("remote.toml");
    std::fs::write(
        &remote,
        format!("[[mcp_server]]\nname = \"served\"\nurl = \"{url}\"\n"),
    )
    .unwrap();
    let tools = load_manifest(&remote).unwrap();
    let total = tools
        .get("cw__user_total")
        .expect("the served flow is listed");
    let out = total
        .run(obj(json!({"user_id": "u2", "a": 5, "b": 6})))
        .unwrap();
    assert_eq!(out["name"], json!("Grace"), "{out:?}");
    assert_eq!(out["total"], json!(11), "{out:?}");
    drop(tools);
    drop(served);
}

/// Ten recorded traces of `lookup_user(user_id) -> greet(name = lookup_user.name)`, with the
/// outputs shaped as the recording proxy stores them; the tenth greets with a stale answer.
fn greeting_traces() -> Vec<chainweaver_recorder::model::TraceWithSteps> {
    use chainweaver_recorder::model::mcp::tool_outputs;
    use chainweaver_recorder::model::{ObservedStep, ObservedTrace, TraceWithSteps};
    (0..10)
        .map(|i| {
            let id = format!("{}-{i}", if i < 5 { "mined" } else { "held" });
            let (user, name, email, plan) = if i % 2 == 0 {
                ("u1", "Ada", "ada@example.com", "pro")
            } else {
                ("u2", "Grace", "grace@example.com", "free")
            };
            let mut lookup = ObservedStep::new(&id, 0, "lookup_user", json!({"user_id": user}));
            let structured = json!({"user_id": user, "name": name, "email": email, "plan": plan});
            let answer = json!({"content": [{"type": "text", "text": structured.to_string()}],
                                "structuredContent": structured});
            lookup.outputs = Some(Value::Object(tool_outputs(&answer, true).unwrap()));
            let greeting = if i == 9 {
                "Hi, Grace."
            } else {
                &format!("Hello, {name}!")
            };
            let mut greet = ObservedStep::new(&id, 1, "greet", json!({"name": name}));
            let answer = json!({"content": [{"type": "text", "text": greeting}]});
            greet.outputs = Some(Value::Object(tool_outputs(&answer, false).unwrap()));
            TraceWithSteps {
                trace: ObservedTrace::new(&id, "mcp"),
                steps: vec![lookup, greet],
            }
        })
        .collect()
}

#[test]
fn verify_live_replays_against_a_real_mcp_server() {
    use chainweaver::verify::{HeldOut, IgnorePaths, ToolSource, Verifier, VerifyOptions};
    use chainweaver_analyzer::mine::{ChainAnalyzer, MineConfig};
    use chainweaver_recorder::model::candidate::VerdictStatus;
    if !python_mcp() {
        return;
    }
    let traces = greeting_traces();
    let candidate = ChainAnalyzer::new(MineConfig::default())
        .analyze(&traces[..5])
        .unwrap()
        .candidates
        .into_iter()
        .find(|c| c.tools == ["lookup_user", "greet"])
        .expect("lookup_user -> greet is mined");
    let dir = tempfile::tempdir().unwrap();
    let manifest = example_manifest(dir.path(), "timeout_seconds = 20");
    let verifier = |allow_side_effects: bool| {
        Verifier::new(
            ToolSource::Live {
                tools: load_manifest(&manifest).unwrap(),
                allow_side_effects,
                ignore: IgnorePaths::default(),
            },
            VerifyOptions::default(),
        )
    };
    // `greet` declares no annotations, so its safety is unknown: refused without permission.
    let err = verifier(false)
        .verify(&candidate, &HeldOut::new(traces[5..].iter().collect()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("greet"), "{err}");
    let verdict = verifier(true)
        .verify(&candidate, &HeldOut::new(traces[5..9].iter().collect()))
        .unwrap();
    assert_eq!(verdict.mode, "live");
    assert_eq!(verdict.status, VerdictStatus::Verified, "{verdict:#?}");
    assert_eq!(
        (verdict.exact_matches, verdict.occurrences_replayed),
        (4, 4)
    );
    // The stale recording differs from what the live server answers now, at the pointer.
    let verdict = verifier(true)
        .verify(&candidate, &HeldOut::new(traces[5..].iter().collect()))
        .unwrap();
    assert_eq!(verdict.exact_matches, 4, "{verdict:#?}");
    let diff = &verdict.diffs[0];
    assert_eq!((diff.step, diff.tool_name.as_str()), (1, "greet"));
    assert_eq!(diff.pointer, "/outputs/content");
}

#[test]
fn serve_list_shows_what_the_exposure_flags_choose() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("tools.toml");
    std::fs::write(
        &manifest,
        "[[tool]]\nname = \"get\"\nargv = [\"cat\"]\nread_only = true\n\n\
         [[tool]]\nname = \"put\"\nargv = [\"cat\"]\nread_only = false\n",
    )
    .unwrap();
    for (name, tool, status, owner) in [
        ("reads", "get", "active", "support"),
        ("writes", "put", "active", "support"),
        ("drafted", "get", "draft", "billing"),
    ] {
        let path = dir.path().join(format!("{name}.json"));
        let flow =
            json!({"name": name, "steps": [{"tool_name": tool}], "metadata": {"owner": owner}});
        std::fs::write(&path, flow.to_string()).unwrap();
        let out = crate::chainweaver(
            dir.path(),
            &[
                "flows",
                "register",
                path.to_str().unwrap(),
                "--status",
                status,
            ],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let listed = |extra: &[&str]| -> Vec<String> {
        let mut args = vec![
            "--format",
            "json",
            "serve",
            "--tools",
            manifest.to_str().unwrap(),
            "--list",
        ];
        args.extend_from_slice(extra);
        let out = crate::chainweaver(dir.path(), &args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let document: Value = serde_json::from_slice(&out.stdout).unwrap();
        document["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(listed(&[]), ["reads"]);
    assert_eq!(listed(&["--allow-side-effects"]), ["reads", "writes"]);
    assert_eq!(
        listed(&[
            "--lifecycle",
            "draft",
            "--lifecycle",
            "active",
            "--owner",
            "billing"
        ]),
        ["drafted"]
    );
    assert_eq!(
        listed(&["--flow", "writes", "--prefix", "cw"]),
        ["cw__writes"]
    );
    assert_eq!(
        listed(&["--chain-tools", "--no-create"]),
        [
            "list_dynamic_tools",
            "update_dynamic_tool",
            "disable_dynamic_tool",
            "delete_dynamic_tool",
            "reads"
        ]
    );
    let out = crate::chainweaver(
        dir.path(),
        &[
            "serve",
            "--tools",
            manifest.to_str().unwrap(),
            "--chain-tools",
            "--allow-tool",
            "nope",
            "--list",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));
}

#[test]
fn a_flow_whose_tool_server_dies_answers_a_tool_error() {
    if !python_mcp() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let manifest = example_manifest(dir.path(), "timeout_seconds = 20");
    let path = dir.path().join("crasher.json");
    std::fs::write(
        &path,
        json!({"name": "crasher", "steps": [{"tool_name": "exit_now"}]}).to_string(),
    )
    .unwrap();
    let out = crate::chainweaver(dir.path(), &["flows", "register", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = dir.path().join("chainweaver.db");
    let serve = [
        env!("CARGO_BIN_EXE_chainweaver"),
        "--store",
        store.to_str().unwrap(),
        "serve",
        "--tools",
        manifest.to_str().unwrap(),
        "--flow",
        "crasher",
    ];
    let call = json!({"op": "call", "name": "crasher", "arguments": {}});
    let document = python_client("legacy", &serve, &json!([call, call]));
    for result in document["results"].as_array().unwrap() {
        assert_eq!(result["isError"], json!(true), "{result}");
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("step 0") && text.contains("exit_now") && text.contains("closed"),
            "{text}"
        );
    }
}
