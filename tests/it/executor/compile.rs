//! compile_flow: every finding code, each provoked by a flow that has exactly that problem.

use chainweaver::flow::{CompileReport, Severity, compile_flow};
use chainweaver::tool::{Tool, ToolRegistry};
use serde_json::{Value, json};

use super::{flow, registry, schema};

fn tool(name: &str, input: Value, output: Value) -> Tool {
    Tool::sync(name, |_| Ok(json!({})))
        .input_schema(input)
        .output_schema(output)
        .build()
        .unwrap()
}

/// fetch {url: string} -> {data: object, status: integer}; store {records: array} -> {count:
/// integer}; fetch_cache like fetch with a different output; num {n: number} -> {}.
fn tools() -> ToolRegistry {
    registry(vec![
        tool(
            "fetch",
            schema(json!({"url": {"type": "string"}}), &["url"]),
            schema(
                json!({"data": {"type": "object"}, "status": {"type": "integer"}}),
                &[],
            ),
        ),
        tool(
            "fetch_cache",
            schema(json!({"url": {"type": "string"}}), &["url"]),
            schema(
                json!({"data": {"type": "object"}, "status": {"type": "string"}, "age": {"type": "integer"}}),
                &[],
            ),
        ),
        tool(
            "fetch_strict",
            schema(
                json!({"url": {"type": "string"}, "token": {"type": "string"}}),
                &["url", "token"],
            ),
            schema(json!({"data": {"type": "object"}}), &[]),
        ),
        tool(
            "fetch_int",
            schema(json!({"url": {"type": "integer"}}), &["url"]),
            schema(
                json!({"data": {"type": "object"}, "status": {"type": "integer"}}),
                &[],
            ),
        ),
        tool(
            "store",
            schema(json!({"records": {"type": "array"}}), &["records"]),
            schema(json!({"count": {"type": "integer"}}), &[]),
        ),
        tool(
            "num",
            schema(json!({"n": {"type": "number"}}), &["n"]),
            schema(json!({"out": {"type": "number"}}), &[]),
        ),
    ])
}

const INPUT: &str = r#"{"type": "object", "properties": {"url": {"type": "string"}, "items": {"type": "array"}, "count": {"type": "integer"}}}"#;

fn check(steps: Value) -> CompileReport {
    let input: Value = serde_json::from_str(INPUT).unwrap();
    compile_flow(
        &flow(json!({"name": "f", "input_schema": input, "steps": steps})),
        &tools(),
    )
}

fn codes(report: &CompileReport) -> Vec<&str> {
    report.findings.iter().map(|f| f.code.as_str()).collect()
}

/// Assert `report` holds exactly one finding, with this code, severity and pointer.
fn only(report: &CompileReport, code: &str, severity: Severity, pointer: &str) {
    assert_eq!(codes(report), vec![code], "{:#?}", report.findings);
    let finding = &report.findings[0];
    assert_eq!(finding.severity, severity, "{finding:?}");
    assert_eq!(finding.pointer, pointer, "{finding:?}");
}

#[test]
fn a_sound_flow_has_no_findings() {
    let report = check(json!([
        {"tool_name": "fetch", "input_mapping": {"url": "url"}},
        {"tool_name": "store", "input_mapping": {"records": "items"}, "on_error": "skip"}
    ]));
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
    assert!(report.is_ok());
}

#[test]
fn tool_and_fallback_registration() {
    let report = check(json!([{"tool_name": "nope"}]));
    only(
        &report,
        "unknown_tool",
        Severity::Error,
        "/steps/0/tool_name",
    );
    assert_eq!(report.findings[0].step, Some(0));
    let report = check(
        json!([{"tool_name": "fetch", "input_mapping": {"url": "url"}, "on_error": "fallback:ghost"}]),
    );
    only(
        &report,
        "unknown_fallback_tool",
        Severity::Error,
        "/steps/0/on_error",
    );
}

#[test]
fn mapped_targets_required_fields_and_types() {
    let report =
        check(json!([{"tool_name": "fetch", "input_mapping": {"url": "url", "verbose": true}}]));
    only(
        &report,
        "unknown_input_field",
        Severity::Error,
        "/steps/0/input_mapping/verbose",
    );
    assert_eq!(report.findings[0].field.as_deref(), Some("verbose"));

    let report = check(json!([{"tool_name": "fetch", "input_mapping": {}, "input_templates": {}}]));
    assert!(
        report.findings.is_empty(),
        "url comes from the whole context: {:#?}",
        report.findings
    );
    let report = check(json!([{"tool_name": "store", "input_mapping": {}}]));
    only(
        &report,
        "missing_required_field",
        Severity::Error,
        "/steps/0/input_mapping",
    );
    let report = check(
        json!([{"tool_name": "fetch", "input_mapping": {"url": "url"}},
                              {"tool_name": "store", "input_mapping": {"records": "items", "x": 1}}]),
    );
    assert_eq!(codes(&report), vec!["unknown_input_field"]);

    let report = check(json!([{"tool_name": "fetch", "input_mapping": {"url": "count"}}]));
    only(
        &report,
        "incompatible_mapped_type",
        Severity::Error,
        "/steps/0/input_mapping/url",
    );
    let report = check(json!([{"tool_name": "num", "input_mapping": {"n": "count"}}]));
    assert!(
        report.findings.is_empty(),
        "integer fits number: {:#?}",
        report.findings
    );
    let report =
        check(json!([{"tool_name": "num", "input_mapping": {"n": "literal text is a key"}}]));
    only(
        &report,
        "unavailable_context_key",
        Severity::Error,
        "/steps/0/input_mapping/n",
    );
    let report = check(json!([{"tool_name": "num", "input_mapping": {"n": true}}]));
    only(
        &report,
        "incompatible_mapped_type",
        Severity::Error,
        "/steps/0/input_mapping/n",
    );
    let report = check(
        json!([{"tool_name": "fetch", "input_mapping": {"url": "url"}},
                              {"tool_name": "num", "input_mapping": {"n": "/data"}}]),
    );
    only(
        &report,
        "incompatible_mapped_type",
        Severity::Error,
        "/steps/1/input_mapping/n",
    );
}

#[test]
fn pointers_templates_and_context_availability() {
    let report = check(json!([{"tool_name": "fetch", "input_mapping": {"url": "/url~9"}}]));
    only(
        &report,
        "invalid_json_pointer",
        Severity::Error,
        "/steps/0/input_mapping/url",
    );
    let report = check(json!([{"tool_name": "fetch", "input_templates": {"url": "{{url"}}]));
    only(
        &report,
        "invalid_template",
        Severity::Error,
        "/steps/0/input_templates/url",
    );
    let report =
        check(json!([{"tool_name": "fetch", "input_templates": {"url": "https://x/{{count}}"}}]));
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
    // A key produced only by a later step is not available yet.
    let report = check(json!([
        {"tool_name": "store", "input_mapping": {"records": "/data/list"}},
        {"tool_name": "fetch", "input_mapping": {"url": "url"}}
    ]));
    only(
        &report,
        "context_key_not_from_ancestor",
        Severity::Error,
        "/steps/0/input_mapping/records",
    );
    let report = check(json!([{"tool_name": "fetch", "input_mapping": {"url": "/missing/x"}}]));
    only(
        &report,
        "unavailable_context_key",
        Severity::Error,
        "/steps/0/input_mapping/url",
    );
}

#[test]
fn dag_context_is_the_union_of_transitive_ancestors() {
    let input: Value = serde_json::from_str(INPUT).unwrap();
    let dag = |depends: Value| {
        compile_flow(
            &flow(json!({"name": "d", "input_schema": input, "steps": [
                {"step_id": "f", "tool_name": "fetch", "input_mapping": {"url": "url"}},
                {"step_id": "mid", "tool_name": "num", "input_mapping": {"n": "count"}, "depends_on": ["f"]},
                {"step_id": "sibling", "tool_name": "num", "input_mapping": {"n": "count"}},
                {"step_id": "s", "tool_name": "store", "input_mapping": {"records": "/data/rows"}, "depends_on": depends}
            ]})),
            &tools(),
        )
    };
    assert!(
        dag(json!(["mid"])).findings.is_empty(),
        "fetch is a transitive ancestor"
    );
    // Without a declared flow input the key might come from the input: a warning.
    let open = compile_flow(
        &flow(json!({"name": "d", "steps": [
            {"step_id": "f", "tool_name": "fetch", "input_mapping": {"url": "url"}},
            {"step_id": "s", "tool_name": "store", "input_mapping": {"records": "/data/rows"}}
        ]})),
        &tools(),
    );
    only(
        &open,
        "context_key_not_from_ancestor",
        Severity::Warning,
        "/steps/1/input_mapping/records",
    );
    let report = dag(json!(["sibling"]));
    only(
        &report,
        "context_key_not_from_ancestor",
        Severity::Error,
        "/steps/3/input_mapping/records",
    );
    assert_eq!(report.findings[0].step_id.as_deref(), Some("s"));
}

#[test]
fn graph_errors() {
    let report = check(json!([
        {"step_id": "a", "tool_name": "num", "input_mapping": {"n": 1}, "depends_on": ["b"]},
        {"step_id": "b", "tool_name": "num", "input_mapping": {"n": 1}, "depends_on": ["a"]}
    ]));
    assert_eq!(codes(&report), vec!["cycle"]);
    assert!(report.findings[0].message.contains("a, b"));
    let report = check(
        json!([{"step_id": "a", "tool_name": "num", "input_mapping": {"n": 1}, "depends_on": ["zz"]}]),
    );
    only(
        &report,
        "unknown_dependency",
        Severity::Error,
        "/steps/0/depends_on",
    );
    let report = check(json!([
        {"step_id": "a", "tool_name": "num", "input_mapping": {"n": 1}},
        {"step_id": "a", "tool_name": "num", "input_mapping": {"n": 2}}
    ]));
    only(
        &report,
        "duplicate_step_id",
        Severity::Error,
        "/steps/1/step_id",
    );
    let report = check(json!([]));
    only(&report, "empty_flow", Severity::Warning, "/steps");
    assert!(report.is_ok(), "a warning does not block");
}

#[test]
fn retry_and_output_mapping_checks() {
    let report = check(json!([{"tool_name": "num", "input_mapping": {"n": 1},
        "retry_policy": {"max_retries": 2, "backoff_seconds": -1}}]));
    only(
        &report,
        "invalid_retry_policy",
        Severity::Error,
        "/steps/0/retry_policy",
    );
    let report =
        check(json!([{"tool_name": "num", "input_mapping": {"n": 1}, "output_mapping": {"x": 5}}]));
    only(
        &report,
        "invalid_output_mapping",
        Severity::Error,
        "/steps/0/output_mapping/x",
    );
    let report = check(
        json!([{"tool_name": "num", "input_mapping": {"n": 1}, "output_mapping": {"x": "nope"}}]),
    );
    only(
        &report,
        "output_mapping_unknown_key",
        Severity::Error,
        "/steps/0/output_mapping/x",
    );
}

#[test]
fn fallback_input_contract() {
    let report = check(
        json!([{"tool_name": "fetch", "input_mapping": {"url": "url"}, "on_error": "fallback:fetch_strict",
        "output_mapping": {"data": "data"}}]),
    );
    only(
        &report,
        "fallback_missing_required_field",
        Severity::Error,
        "/steps/0/input_mapping",
    );
    assert_eq!(report.findings[0].tool.as_deref(), Some("fetch_strict"));
    let report = check(
        json!([{"tool_name": "fetch", "input_mapping": {"url": "url"}, "on_error": "fallback:fetch_int"}]),
    );
    only(
        &report,
        "fallback_incompatible_mapped_type",
        Severity::Error,
        "/steps/0/input_mapping/url",
    );
    let report = check(
        json!([{"tool_name": "num", "input_mapping": {"n": 1}, "on_error": "fallback:store",
        "output_mapping": {}}]),
    );
    assert_eq!(
        codes(&report),
        vec![
            "fallback_unknown_input_field",
            "fallback_missing_required_field"
        ]
    );
}

#[test]
fn fallback_output_shape() {
    let report = check(
        json!([{"tool_name": "fetch", "input_mapping": {"url": "url"}, "on_error": "fallback:fetch_strict",
        "output_mapping": {}}]),
    );
    assert_eq!(codes(&report), vec!["fallback_missing_required_field"]);
    let report = check(
        json!([{"tool_name": "fetch", "input_mapping": {"url": "url"}, "on_error": "fallback:fetch_cache",
        "output_mapping": {"payload": "data", "code": "status"}}]),
    );
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
    let report = check(
        json!([{"tool_name": "fetch_cache", "input_mapping": {"url": "url"}, "on_error": "fallback:fetch",
        "output_mapping": {"how_old": "age"}}]),
    );
    only(
        &report,
        "fallback_output_missing_mapped_key",
        Severity::Error,
        "/steps/0/output_mapping/how_old",
    );
    let report = check(
        json!([{"tool_name": "fetch", "input_mapping": {"url": "url"}, "on_error": "fallback:fetch_cache"}]),
    );
    assert_eq!(
        codes(&report),
        vec![
            "fallback_output_shape_divergence",
            "fallback_output_type_mismatch"
        ]
    );
    assert!(
        report
            .findings
            .iter()
            .all(|f| f.severity == Severity::Warning)
    );
    assert_eq!(report.findings[1].field.as_deref(), Some("status"));
    assert!(report.is_ok());
}

#[test]
fn compile_errors_block_registration() {
    let executor = chainweaver::executor::FlowExecutor::new(tools());
    let err = executor
        .register_flow(
            flow(json!({"name": "bad", "steps": [{"tool_name": "nope"}]})),
            chainweaver::registry::FlowStatus::Active,
        )
        .unwrap_err();
    assert_eq!(err.code(), "flow_compile");
    assert!(err.to_string().contains("unknown_tool"), "{err}");
}
