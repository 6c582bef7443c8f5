//! The whole MCP loop with real peers: the official Python client calls the Python example
//! server through `chainweaver record`, the recorded traffic is analyzed, the verified flow is
//! promoted and served by `chainweaver serve`, and the same client calls the flow.

use std::path::Path;
use std::process::Command;

use chainweaver_recorder::model::mcp::tool_outputs;
use serde_json::{Value, json};

use crate::mcp::{python_client, python_mcp, script};

/// The users the example server knows, and their names.
const USERS: [(&str, &str); 2] = [("u1", "Ada"), ("u2", "Grace")];

/// How many times the agent repeats its behaviour, one conversation each.
const CONVERSATIONS: usize = 80;

/// An agent's repeated behaviour: look a user up, then greet them by the name it got back;
/// one conversation per repetition (the request's `_meta.conversation`).
fn agent_plan(conversations: usize) -> Value {
    let mut calls = Vec::new();
    for i in 0..conversations {
        let (user_id, name) = USERS[i % USERS.len()];
        let meta = json!({"conversation": format!("c-{i}")});
        calls.push(json!({"tool": "lookup_user", "arguments": {"user_id": user_id}, "meta": meta}));
        calls.push(json!({"tool": "greet", "arguments": {"name": name}, "meta": meta}));
    }
    Value::Array(calls)
}

fn run(dir: &Path, args: &[&str]) -> Value {
    let out = crate::chainweaver(dir, args);
    assert!(
        out.status.success(),
        "chainweaver {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

#[test]
fn recorded_mcp_traffic_becomes_a_served_flow_that_answers_as_the_tools_did() {
    if !python_mcp() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("traces.db");
    let store_arg = store.display().to_string();
    let bin = env!("CARGO_BIN_EXE_chainweaver");

    // 1. Record: the scripted SDK client talks to the example server through the proxy.
    let plan_path = dir.path().join("plan.json");
    let results_path = dir.path().join("results.jsonl");
    // Trace ids are random, so how many conversations fall in the 20% held out varies from run
    // to run; of 80, fewer than the 3 that promotion needs are held out 4 times in a million.
    std::fs::write(&plan_path, agent_plan(CONVERSATIONS).to_string()).unwrap();
    let recorded = Command::new("python3")
        .arg(script("mcp_record_client.py"))
        .arg("--plan")
        .arg(&plan_path)
        .arg("--out")
        .arg(&results_path)
        .args(["--", bin, "--store", &store_arg, "record"])
        .args(["--trace-by", "request-meta:conversation", "--", "python3"])
        .arg(script("mcp_example_server.py"))
        .current_dir(dir.path())
        .env_remove("CHAINWEAVER_STORE")
        .output()
        .unwrap();
    assert!(
        recorded.status.success(),
        "recording failed: {}",
        String::from_utf8_lossy(&recorded.stderr)
    );
    // What greet answered the client for each user, as the client received it.
    let answers: Vec<Value> = std::fs::read_to_string(&results_path)
        .unwrap()
        .lines()
        .skip(1)
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(answers.len(), 2 * CONVERSATIONS);
    let greeted = |name: &str| -> Value {
        answers
            .iter()
            .find(|a| a["tool"] == "greet" && a["arguments"]["name"] == name)
            .map(|a| a["result"].clone())
            .unwrap()
    };

    // 2. Analyze the store as recorded; the behaviour is verified on held-out conversations.
    let report = run(
        dir.path(),
        &["--store", &store_arg, "--format", "json", "analyze"],
    );
    let candidates = run(
        dir.path(),
        &[
            "--store",
            &store_arg,
            "--format",
            "json",
            "candidates",
            "list",
        ],
    );
    let listed = candidates["candidates"]
        .as_array()
        .or_else(|| candidates.as_array())
        .unwrap_or_else(|| panic!("candidates list: {candidates}\nanalyze: {report}"));
    let lead = listed
        .iter()
        .find(|c| c["tools"] == json!(["lookup_user", "greet"]))
        .unwrap_or_else(|| panic!("lookup_user -> greet is proposed: {candidates}"));
    let id = lead["id"].as_str().unwrap();

    // 3. Promote it: refused unless verified, so this also checks the verdict.
    run(dir.path(), &["--store", &store_arg, "flows", "promote", id]);
    let flows = run(
        dir.path(),
        &["--store", &store_arg, "--format", "json", "flows", "list"],
    );
    let flow_name = flows
        .get("flows")
        .and_then(Value::as_array)
        .and_then(|flows| flows.first())
        .and_then(|flow| flow["name"].as_str())
        .unwrap_or_else(|| panic!("one flow is registered: {flows}"))
        .to_owned();

    // 4. Serve it over stdio with the real server as its tool source; call it from the client.
    let manifest = dir.path().join("tools.toml");
    std::fs::write(
        &manifest,
        format!(
            "[[mcp_server]]\nname = \"example\"\ncommand = \"python3\"\nargs = [{:?}]\ntimeout_seconds = 20\n",
            script("mcp_example_server.py")
        ),
    )
    .unwrap();
    let operations = json!([
        {"op": "list_tools"},
        {"op": "call", "name": flow_name, "arguments": {"user_id": "u2"}},
        {"op": "call", "name": flow_name, "arguments": {"user_id": "u1"}}
    ]);
    let manifest_arg = manifest.display().to_string();
    let serve = [
        bin,
        "--store",
        &store_arg,
        "serve",
        "--tools",
        &manifest_arg,
        "--flow",
        &flow_name,
    ];
    let session = python_client("legacy", &serve, &operations);
    let results = session["results"].as_array().unwrap();
    let listed: Vec<&str> = results[0]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [flow_name.as_str()]);
    assert_eq!(
        results[0][0]["inputSchema"]["required"],
        json!(["user_id"]),
        "the flow takes the user id, as the agent's first call did"
    );

    // The flow answers with its context: every field greet answered the agent for that user,
    // in the recorded shape, beside the flow's input and the name the first call gave.
    for (result, (user_id, name)) in results[1..].iter().zip([USERS[1], USERS[0]]) {
        assert_ne!(result["isError"], json!(true), "{result}");
        let output = result
            .get("structuredContent")
            .and_then(Value::as_object)
            .unwrap_or_else(|| panic!("a flow answers structured content: {result}"));
        let expected = tool_outputs(&greeted(name), false).unwrap();
        assert!(!expected.is_empty());
        for (field, value) in &expected {
            assert_eq!(
                output.get(field),
                Some(value),
                "{field} for {name}: {result}"
            );
        }
        assert_eq!(output["content"], json!(format!("Hello, {name}!")));
        assert_eq!(output["user_id"], json!(user_id));
    }
}
