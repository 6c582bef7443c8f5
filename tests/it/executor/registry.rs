//! The flow registry persisted in a real SQLite store, and the `flows` commands over it.

use std::process::Command;

use chainweaver::recorder::store::{SqliteStore, TraceStore};
use chainweaver::registry::{FlowRegistry, FlowStatus};
use chainweaver_recorder::model::DocumentKind;
use serde_json::{Value, json};

use super::{datasets, flow};

#[test]
fn registry_state_survives_reopening_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("flows.db");
    {
        let mut registry = FlowRegistry::open(Box::new(SqliteStore::open(&db).unwrap())).unwrap();
        let literal: Value = serde_json::from_str(
            r#"{"name": "calc", "version": "1.0.0", "steps": [{"tool_name": "add", "input_mapping": {"a": 0.10, "b": 2}}]}"#,
        )
        .unwrap();
        registry
            .register(
                chainweaver::recorder::model::flow::FlowDefinition::from_value(literal).unwrap(),
                FlowStatus::Draft,
            )
            .unwrap();
        registry
            .set_status("calc", "1.0.0", FlowStatus::Active)
            .unwrap();
        registry
            .register(
                flow(json!({"name": "calc", "version": "2.0.0", "steps": [{"tool_name": "add"}]})),
                FlowStatus::Active,
            )
            .unwrap();
        registry
            .set_status("calc", "2.0.0", FlowStatus::Retired)
            .unwrap();
    }
    let store = SqliteStore::open(&db).unwrap();
    let keys: Vec<String> = store
        .list_documents(DocumentKind::Flow.as_str())
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(keys, vec!["calc@1.0.0", "calc@2.0.0"]);
    let registry = FlowRegistry::open(Box::new(store)).unwrap();
    assert_eq!(
        registry.get("calc", "1.0.0").unwrap().status,
        FlowStatus::Active
    );
    assert_eq!(
        registry.get("calc", "2.0.0").unwrap().status,
        FlowStatus::Retired
    );
    assert_eq!(
        registry.resolve("calc", None).unwrap().definition.version(),
        "1.0.0"
    );
    let text = serde_json::to_string(&registry.get("calc", "1.0.0").unwrap().definition).unwrap();
    assert!(
        text.contains("0.10"),
        "literal numbers survive the store exactly: {text}"
    );
}

#[test]
fn flows_register_list_show_and_run_by_name_from_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cw.db");
    let manifest = datasets().join("tools/calc_tools.toml");
    let cli = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_chainweaver"))
            .arg("--store")
            .arg(&db)
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    let calc = datasets().join("flows/calc.json");
    cli(&[
        "flows",
        "register",
        calc.to_str().unwrap(),
        "--tools",
        manifest.to_str().unwrap(),
    ]);
    let fanout = datasets().join("flows/fanout.yaml");
    cli(&[
        "flows",
        "register",
        fanout.to_str().unwrap(),
        "--status",
        "draft",
    ]);
    let listed: Value = serde_json::from_str(&cli(&["--format", "json", "flows", "list"])).unwrap();
    let rows: Vec<(String, String)> = listed["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("calc".into(), "ACTIVE".into()),
            ("fanout".into(), "DRAFT".into())
        ]
    );
    let shown = cli(&["flows", "show", "calc"]);
    assert!(
        shown.contains("calc 1.0.0 [ACTIVE]") && shown.contains("multiply"),
        "{shown}"
    );
    let ran: Value = serde_json::from_str(&cli(&[
        "--format",
        "json",
        "run",
        "calc",
        "--tools",
        manifest.to_str().unwrap(),
        "--input",
        r#"{"a": 1, "b": 1, "factor": 3}"#,
    ]))
    .unwrap();
    assert_eq!(ran["final_output"]["product"], json!(6));
}
