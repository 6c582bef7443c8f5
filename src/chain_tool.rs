//! Chain tools run by the executor, answering in the chain output format. Reading a chain tool
//! and converting it to a flow is in [`flow::chain`](crate::flow::chain), which needs no
//! executor.

use serde_json::{Map, Value};

use chainweaver_recorder::model::flow::FlowDefinition;

use crate::error::Result;
use crate::executor::{ExecutionResult, FlowExecutor, RunOptions};
use crate::tool::JsonObject;

pub use crate::flow::chain::{ChainStep, ChainTool};

impl ChainTool {
    /// Run the chain and answer in the chain output format.
    pub fn run(&self, executor: &FlowExecutor, input: JsonObject) -> Result<Value> {
        let flow = FlowDefinition::Linear(self.to_flow());
        let result = executor.execute(&flow, input, &RunOptions::default())?;
        Ok(chain_output(&result))
    }

    /// Async form of [`ChainTool::run`].
    pub async fn run_async(&self, executor: &FlowExecutor, input: JsonObject) -> Result<Value> {
        let flow = FlowDefinition::Linear(self.to_flow());
        let result = executor
            .execute_async(&flow, input, &RunOptions::default())
            .await?;
        Ok(chain_output(&result))
    }
}

/// `{success, steps: [{tool, success, result[, error]}], final_result}` from a run: the final
/// result is the last successful step's output.
pub fn chain_output(result: &ExecutionResult) -> Value {
    let steps: Vec<Value> = result
        .execution_log
        .iter()
        .filter(|r| r.step_index >= 0 || !r.success)
        .map(|record| {
            let mut step = Map::new();
            step.insert("tool".into(), Value::String(record.tool_name.clone()));
            step.insert("success".into(), Value::Bool(record.success));
            step.insert(
                "result".into(),
                record
                    .outputs
                    .clone()
                    .map(Value::Object)
                    .unwrap_or(Value::Null),
            );
            if let Some(message) = &record.error_message {
                step.insert("error".into(), Value::String(message.clone()));
            }
            Value::Object(step)
        })
        .collect();
    let final_result = result
        .execution_log
        .iter()
        .rev()
        .find(|r| r.success)
        .and_then(|r| r.outputs.clone())
        .map(Value::Object)
        .unwrap_or(Value::Null);
    let all_ok = result.success && result.execution_log.iter().all(|r| r.success);
    serde_json::json!({
        "success": all_ok,
        "steps": steps,
        "final_result": final_result,
    })
}
