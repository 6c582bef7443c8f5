//! Chain tools (`chain_config`) imported as flows, and their output format.

use chainweaver::chain_tool::ChainTool;
use chainweaver::executor::FlowExecutor;
use chainweaver::tool::{Tool, ToolFailure};
use serde_json::{Value, json};

use super::{obj, registry};

fn tools() -> chainweaver::tool::ToolRegistry {
    let deploy = Tool::sync("cloudflare_deploy", |input| {
        Ok(json!({"url": format!("https://{}.example", input["env"].as_str().unwrap_or("?")), "number": 42}))
    })
    .build()
    .unwrap();
    let notify = Tool::sync("slack_notify", |input| Ok(json!({"posted": input})))
        .build()
        .unwrap();
    let fail = Tool::sync("flaky", |_| Err(ToolFailure::new("nope")))
        .build()
        .unwrap();
    registry(vec![deploy, notify, fail])
}

fn chain(continue_on_error: bool, middle: Option<&str>) -> Value {
    let mut steps = vec![
        json!({"tool_name": "cloudflare_deploy", "input_mapping": {"env": "{{environment}}"}, "output_key": "deploy"}),
    ];
    if let Some(tool) = middle {
        steps.push(json!({"tool_name": tool}));
    }
    steps.push(json!({"tool_name": "slack_notify", "input_mapping": {
        "channel": "#deployments",
        "text": "Deployed to {{environment}}: {{message}}",
        "pr_number": "{{deploy.number}}",
        "link": "{{deploy.url}}",
        "priority": 2
    }}));
    json!({"name": "deploy_and_notify", "tool_type": "chain",
        "input_schema": {"type": "object", "properties": {"environment": {"type": "string"}, "message": {"type": "string"}}, "required": ["environment"]},
        "chain_config": {"steps": steps, "continue_on_error": continue_on_error}})
}

#[test]
fn a_chain_runs_with_typed_and_interpolated_templates() {
    let tool = ChainTool::from_value(chain(false, None)).unwrap();
    let executor = FlowExecutor::new(tools());
    let output = tool
        .run(
            &executor,
            obj(json!({"environment": "prod", "message": "v2 is live"})),
        )
        .unwrap();
    assert_eq!(output["success"], json!(true));
    assert_eq!(output["steps"].as_array().unwrap().len(), 2);
    assert_eq!(output["steps"][0]["tool"], json!("cloudflare_deploy"));
    assert_eq!(
        output["steps"][0]["result"]["url"],
        json!("https://prod.example")
    );
    assert_eq!(
        output["final_result"]["posted"],
        json!({"priority": 2, "channel": "#deployments", "link": "https://prod.example",
               "pr_number": 42, "text": "Deployed to prod: v2 is live"})
    );
}

#[test]
fn a_failing_step_stops_the_chain_unless_continue_on_error() {
    let executor = FlowExecutor::new(tools());
    let input = obj(json!({"environment": "dev", "message": "m"}));
    let stopped = ChainTool::from_value(chain(false, Some("flaky")))
        .unwrap()
        .run(&executor, input.clone())
        .unwrap();
    assert_eq!(stopped["success"], json!(false));
    assert_eq!(stopped["steps"].as_array().unwrap().len(), 2);
    assert_eq!(stopped["steps"][1]["success"], json!(false));
    assert!(
        stopped["steps"][1]["error"]
            .as_str()
            .unwrap()
            .contains("nope")
    );

    let went_on = ChainTool::from_value(chain(true, Some("flaky")))
        .unwrap()
        .run(&executor, input)
        .unwrap();
    assert_eq!(went_on["steps"].as_array().unwrap().len(), 3);
    assert_eq!(went_on["steps"][2]["success"], json!(true));
    assert_eq!(
        went_on["success"],
        json!(false),
        "a failed step makes the chain unsuccessful"
    );
    assert_eq!(
        went_on["final_result"]["posted"]["text"],
        json!("Deployed to dev: m")
    );
}

#[test]
fn a_chain_file_loads_as_a_flow_and_bad_chains_name_the_step() {
    let flow = chainweaver::flow::load_flow_file(&super::datasets().join("flows/stamp_chain.json"))
        .unwrap();
    assert_eq!(flow.name(), "stamp_and_describe");
    let mut bad = chain(false, None);
    bad["chain_config"]["steps"][1]["input_mapping"]["text"] = json!("{{unclosed");
    let err = ChainTool::from_value(bad).unwrap_err();
    assert!(err.contains("step 1") && err.contains("text"), "{err}");
}
