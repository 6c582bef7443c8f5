//! The `chainweaver` binary end to end: command tools from datasets/tools/, flows from
//! datasets/flows/, bad input with stable codes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::datasets;

fn chainweaver(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_chainweaver"))
        .args(args)
        .current_dir(dir)
        .env("CHAINWEAVER_STORE", dir.join("test.db"))
        .output()
        .expect("the binary runs")
}

fn path(p: PathBuf) -> String {
    p.to_string_lossy().into_owned()
}

fn manifest() -> String {
    path(datasets().join("tools/calc_tools.toml"))
}

fn stdout_json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "stdout is not JSON ({err}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

#[test]
fn a_command_tool_flow_runs_end_to_end_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("result.json");
    let output = chainweaver(
        &[
            "--format",
            "json",
            "run",
            &path(datasets().join("flows/calc.json")),
            "--tools",
            &manifest(),
            "--input",
            r#"{"a": 2, "b": 3, "factor": 4}"#,
            "--save",
            &path(saved.clone()),
        ],
        dir.path(),
    );
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result = stdout_json(&output);
    assert_eq!(result["success"], json!(true));
    assert_eq!(result["final_output"]["sum"], json!(5));
    assert_eq!(result["final_output"]["product"], json!(20));
    assert_eq!(
        result["final_output"]["text"],
        json!("2 plus 3, times 4 is 20")
    );
    assert_eq!(result["execution_log"].as_array().unwrap().len(), 3);

    let replay = chainweaver(
        &[
            "--format",
            "json",
            "replay",
            &path(saved.clone()),
            "--mode",
            "verify",
            "--tools",
            &manifest(),
            "--flow",
            &path(datasets().join("flows/calc.json")),
        ],
        dir.path(),
    );
    assert!(
        replay.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&replay.stderr)
    );
    assert_eq!(stdout_json(&replay)["all_steps_match"], json!(true));

    // Tamper with the recording: verify must notice, by pointer.
    let mut tampered: Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    tampered["execution_log"][1]["outputs"]["product"] = json!(21);
    std::fs::write(&saved, tampered.to_string()).unwrap();
    let replay = chainweaver(
        &[
            "--format",
            "json",
            "replay",
            &path(saved),
            "--tools",
            &manifest(),
            "--flow",
            &path(datasets().join("flows/calc.json")),
        ],
        dir.path(),
    );
    assert_eq!(replay.status.code(), Some(1));
    let report = stdout_json(&replay);
    assert_eq!(report["all_steps_match"], json!(false));
    assert!(
        report["diffs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["pointer"] == json!("/outputs/product") && d["step"] == json!(1))
    );
}

#[test]
fn a_dag_flow_and_a_chain_file_run_from_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let output = chainweaver(
        &[
            "--format",
            "json",
            "run",
            &path(datasets().join("flows/fanout.yaml")),
            "--tools",
            &manifest(),
            "--input",
            r#"{"x": 1, "y": 2}"#,
        ],
        dir.path(),
    );
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result = stdout_json(&output);
    assert_eq!(result["final_output"]["product"], json!(8));
    assert_eq!(result["final_output"]["text"], json!("the result is 8"));

    let output = chainweaver(
        &[
            "--format",
            "json",
            "run",
            &path(datasets().join("flows/stamp_chain.json")),
            "--tools",
            &manifest(),
            "--input",
            r#"{"a": 1, "b": 2, "env": "prod"}"#,
        ],
        dir.path(),
    );
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result = stdout_json(&output);
    assert_eq!(
        result["final_output"]["stamped"]["echo"]["note"],
        json!("Deployed to prod: 3")
    );
    assert_eq!(
        result["execution_log"][2]["outputs"]["text"],
        json!("stamped total is 3")
    );
}

#[test]
fn flows_validate_reports_codes_and_pointers() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"name": "bad", "steps": [
        {"tool_name": "add", "input_mapping": {"a": 1, "b": 2, "c": 3}},
        {"tool_name": "teleport"}
    ]}"#,
    )
    .unwrap();
    let output = chainweaver(
        &[
            "--format",
            "json",
            "flows",
            "validate",
            &path(bad),
            &path(datasets().join("flows/calc.json")),
            "--tools",
            &manifest(),
        ],
        dir.path(),
    );
    assert_eq!(output.status.code(), Some(1));
    let document = stdout_json(&output);
    assert_eq!(document["schema_version"], json!(1), "{document}");
    let reports = &document["files"];
    assert_eq!(reports[0]["ok"], json!(false));
    let findings = reports[0]["findings"].as_array().unwrap();
    assert!(
        findings
            .iter()
            .any(|f| f["code"] == json!("unknown_input_field")
                && f["pointer"] == json!("/steps/0/input_mapping/c")),
        "{findings:?}"
    );
    assert!(
        findings
            .iter()
            .any(|f| f["code"] == json!("unknown_tool") && f["step"] == json!(1)),
        "{findings:?}"
    );
    assert_eq!(reports[1]["ok"], json!(true), "{:?}", reports[1]);
}

#[test]
fn bad_input_fails_with_a_code_and_never_hangs() {
    let dir = tempfile::tempdir().unwrap();
    let calc = path(datasets().join("flows/calc.json"));
    let cases: Vec<(Vec<String>, &str)> = vec![
        // Input failing the flow's input schema: the run fails, naming the field.
        (
            vec![
                "run".into(),
                calc.clone(),
                "--tools".into(),
                manifest(),
                "--input".into(),
                r#"{"a": "two", "b": 3, "factor": 1}"#.into(),
            ],
            "/a",
        ),
        // A tool the manifest does not declare.
        (vec!["run".into(), calc.clone()], "unknown_tool"),
        // A malformed flow file.
        (
            vec![
                "run".into(),
                path(dir.path().join("broken.json")),
                "--tools".into(),
                manifest(),
            ],
            "invalid_flow_file",
        ),
        // A cycle.
        (
            vec![
                "run".into(),
                path(dir.path().join("cycle.json")),
                "--tools".into(),
                manifest(),
            ],
            "cycle",
        ),
        // Manifest commands that are missing or print non-JSON.
        (
            vec![
                "run".into(),
                path(dir.path().join("one.json")),
                "--tools".into(),
                path(dir.path().join("ghost.toml")),
            ],
            "ghost.toml",
        ),
        (
            vec![
                "run".into(),
                path(dir.path().join("one.json")),
                "--tools".into(),
                path(dir.path().join("chatty.toml")),
            ],
            "not JSON",
        ),
    ];
    std::fs::write(
        dir.path().join("broken.json"),
        "{\"name\": \"b\", \"steps\": [",
    )
    .unwrap();
    std::fs::write(dir.path().join("cycle.json"), r#"{"name": "c", "steps": [
        {"step_id": "a", "tool_name": "add", "depends_on": ["b"], "input_mapping": {"a": 1, "b": 1}},
        {"step_id": "b", "tool_name": "add", "depends_on": ["a"], "input_mapping": {"a": 1, "b": 1}}]}"#).unwrap();
    std::fs::write(
        dir.path().join("one.json"),
        r#"{"name": "one", "steps": [{"tool_name": "t"}]}"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("ghost.toml"),
        "[[tool]]\nname = \"t\"\nargv = [\"./missing-tool.sh\"]\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("chatty.toml"),
        "[[tool]]\nname = \"t\"\nargv = [\"sh\", \"-c\", \"echo hello there\"]\n",
    )
    .unwrap();
    for (args, expected) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let start = Instant::now();
        let output = chainweaver(&args, dir.path());
        assert!(start.elapsed() < Duration::from_secs(20));
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            all.contains(expected),
            "{args:?}: expected `{expected}` in:\n{all}"
        );
        assert!(!all.contains("panicked"), "{all}");
    }
}

#[test]
fn a_saved_run_replays_on_its_own_and_a_bare_result_names_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let calc = path(datasets().join("flows/calc.json"));
    let run = chainweaver(
        &[
            "run",
            &calc,
            "--tools",
            &manifest(),
            "--input",
            r#"{"a": 2, "b": 3, "factor": 4}"#,
            "--save",
            "run.json",
        ],
        dir.path(),
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("run.json")).unwrap())
            .unwrap();
    assert_eq!(saved["flow"]["name"], json!("calc"));

    // No --flow and nothing registered: the flow saved with the run is replayed.
    let replay = chainweaver(
        &[
            "replay",
            "run.json",
            "--mode",
            "verify",
            "--tools",
            &manifest(),
        ],
        dir.path(),
    );
    let text = String::from_utf8_lossy(&replay.stdout);
    assert!(
        replay.status.success(),
        "stdout: {text}\nstderr: {}",
        String::from_utf8_lossy(&replay.stderr)
    );
    let trace_id = saved["trace_id"].as_str().unwrap();
    assert_eq!(
        text,
        format!(
            "replay (verify) of trace {trace_id}, flow calc 1.0.0 (saved with the run): MATCH; \
             3 recorded steps, 3 replayed\n"
        )
    );
    assert!(
        !dir.path().join("test.db").exists(),
        "a self-contained run needs no store"
    );

    // A result without its flow, and a store that does not register it: the error says so.
    let mut bare = saved.clone();
    bare.as_object_mut().unwrap().remove("flow");
    std::fs::write(dir.path().join("bare.json"), bare.to_string()).unwrap();
    let replay = chainweaver(&["replay", "bare.json", "--tools", &manifest()], dir.path());
    assert_eq!(replay.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&replay.stderr),
        format!(
            "error: [replay] bare.json: replay of trace {trace_id}: the result does not carry \
             the flow it ran, and no flow `calc` version 1.0.0 is registered\n\
             hint: pass the flow file it ran with --flow FILE, or register it in {} with \
             `chainweaver flows register FILE`\n",
            dir.path().join("test.db").display()
        )
    );
    assert!(
        !dir.path().join("test.db").exists(),
        "looking for a registered flow creates no store"
    );

    // Registered, it is found there.
    let register = chainweaver(&["flows", "register", &calc], dir.path());
    assert!(
        register.status.success(),
        "{}",
        String::from_utf8_lossy(&register.stderr)
    );
    let replay = chainweaver(&["replay", "bare.json", "--tools", &manifest()], dir.path());
    assert!(
        String::from_utf8_lossy(&replay.stdout).contains("(registered in the store): MATCH"),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&replay.stdout),
        String::from_utf8_lossy(&replay.stderr)
    );
}
