//! Mined candidates are real flows: with the tool schemas inferred from the traces, every
//! candidate the analyzer proposes on the sample traffic passes `compile_flow`.

use chainweaver::flow::compile_flow;
use chainweaver::tool::{Tool, ToolRegistry};
use chainweaver_analyzer::mine::{ChainAnalyzer, MineConfig};
use chainweaver_recorder::model::TraceWithSteps;
use chainweaver_recorder::model::flow::FlowDefinition;
use chainweaver_recorder::synth::{Generator, GeneratorConfig};

#[test]
fn every_candidate_compiles_against_its_inferred_tool_schemas() {
    let mut generator = Generator::new(GeneratorConfig {
        traces: 800,
        seed: 3,
        ..GeneratorConfig::default()
    });
    let traces: Vec<TraceWithSteps> = generator.by_ref().collect();
    let outcome = ChainAnalyzer::new(MineConfig::default())
        .analyze(&traces)
        .unwrap();
    // As many candidates as the miner proposes at most, the planted flows among them.
    assert_eq!(
        outcome.candidates.len(),
        MineConfig::default().max_candidates
    );
    for planted in &generator.ground_truth().flows {
        assert!(
            outcome.candidates.iter().any(|c| c.tools == planted.tools),
            "{:?} not proposed",
            planted.tools
        );
    }
    for candidate in &outcome.candidates {
        let mut tools = ToolRegistry::new();
        for (name, schema) in &candidate.tool_schemas {
            let tool = Tool::sync(name.clone(), |_| Ok(serde_json::json!({})))
                .input_schema(schema.input_schema.clone())
                .output_schema(schema.output_schema.clone())
                .build()
                .unwrap_or_else(|e| panic!("{}: tool {name}: {e}", candidate.id));
            tools.register(tool);
        }
        let report = compile_flow(&candidate.flow, &tools);
        assert!(
            report.is_ok(),
            "{} does not compile: {:#?}",
            candidate.id,
            report.findings
        );

        // The check has teeth: a mapping onto a field the tool does not take is refused.
        let mut broken = candidate.flow.clone();
        let mapping = match &mut broken {
            FlowDefinition::Linear(flow) => &mut flow.steps[0].input_mapping,
            FlowDefinition::Dag(flow) => &mut flow.steps[0].input_mapping,
        };
        mapping.insert("no_such_field".into(), serde_json::json!("x"));
        assert!(
            !compile_flow(&broken, &tools).is_ok(),
            "{}: a bogus target compiles",
            candidate.id
        );
    }
}
