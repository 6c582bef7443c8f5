//! `tau2-bench`: tau2-bench result documents, one JSON document
//! `{timestamp, info, tasks, simulations: [{id, task_id, trial, seed, start_time, end_time,
//! reward_info, termination_reason, messages}]}`.
//!
//! Each simulation is one trace, named by its `id`. Its messages are chat messages (see
//! [`super::messages`]) in tau2's own variant: calls are `{id, name, arguments, requestor}`
//! without a `function` wrapper, results are `role: tool` messages keyed by `id` with
//! `error: true` on failure, and every message has a `timestamp`, which times the calls. The
//! trace keeps the task id, trial, seed, reward, termination reason and costs, its start and end
//! time, and the task's gold actions (`evaluation_criteria.actions`) when the task lists them.
//! A simulation that cannot be read is rejected on its own (`simulations[i]: ...`); the others
//! are still imported.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::messages::Conversation;
use super::records::Handler as RecordHandler;
use super::values::{excerpt_value, id_text, timestamp, type_name};
use super::{Output, Position};
use crate::error::Result;
use crate::model::ObservedTrace;

/// Simulation fields copied into the trace's metadata.
const SIMULATION_FIELDS: [&str; 7] = [
    "task_id",
    "trial",
    "seed",
    "termination_reason",
    "duration",
    "agent_cost",
    "user_cost",
];

/// The `tau2-bench` handler.
pub(crate) struct Handler;

impl RecordHandler for Handler {
    fn record(
        &mut self,
        out: &mut Output<'_>,
        at: Position,
        value: Value,
    ) -> Result<Result<(), String>> {
        let Value::Object(mut document) = value else {
            return Ok(Err(format!(
                "expected a tau2-bench results document, got {}",
                type_name(&value)
            )));
        };
        let simulations = match document.remove("simulations") {
            Some(Value::Array(simulations)) => simulations,
            Some(other) => {
                return Ok(Err(format!(
                    "`simulations` must be an array, got {}",
                    type_name(&other)
                )));
            }
            None => return Ok(Err("missing `simulations`".to_owned())),
        };
        let gold = gold_actions(document.get("tasks"));
        let domain = document
            .get("info")
            .and_then(|info| info.get("environment_info"))
            .and_then(|env| env.get("domain_name"))
            .cloned();
        for (i, simulation) in simulations.into_iter().enumerate() {
            let excerpt = excerpt_value(&simulation);
            match convert(simulation, &out.stem, i, &gold) {
                Ok(mut trace_and_steps) => {
                    if let Some(domain) = &domain {
                        trace_and_steps
                            .0
                            .metadata
                            .insert("domain".to_owned(), domain.clone());
                    }
                    out.emit(trace_and_steps.0, trace_and_steps.1)?;
                }
                Err(reason) => out.reject(at, format!("simulations[{i}]: {reason}"), excerpt),
            }
        }
        Ok(Ok(()))
    }
}

/// Each task's gold actions, by task id.
fn gold_actions(tasks: Option<&Value>) -> HashMap<String, Value> {
    let mut gold = HashMap::new();
    for task in tasks.and_then(Value::as_array).into_iter().flatten() {
        let actions = task
            .get("evaluation_criteria")
            .and_then(|criteria| criteria.get("actions"));
        if let (Some(id), Some(actions @ Value::Array(_))) = (id_text(task.get("id")), actions) {
            gold.insert(id, actions.clone());
        }
    }
    gold
}

fn convert(
    simulation: Value,
    stem: &str,
    index: usize,
    gold: &HashMap<String, Value>,
) -> Result<(ObservedTrace, Vec<crate::model::ObservedStep>), String> {
    let Value::Object(mut simulation) = simulation else {
        return Err(format!(
            "a simulation must be an object, got {}",
            type_name(&simulation)
        ));
    };
    let messages = match simulation.remove("messages") {
        Some(Value::Array(messages)) => messages,
        Some(other) => {
            return Err(format!(
                "`messages` must be an array, got {}",
                type_name(&other)
            ));
        }
        None => return Err("missing `messages`".to_owned()),
    };
    let trace_id = id_text(simulation.get("id")).unwrap_or_else(|| format!("{stem}#{index}"));
    let mut trace = ObservedTrace::new(trace_id, String::new());
    trace.started_at = simulation.get("start_time").and_then(timestamp);
    trace.ended_at = simulation.get("end_time").and_then(timestamp);
    let mut metadata = Map::new();
    for field in SIMULATION_FIELDS {
        if let Some(value) = simulation.get(field) {
            metadata.insert(field.to_owned(), value.clone());
        }
    }
    if let Some(reward) = simulation.get("reward_info").and_then(|r| r.get("reward")) {
        metadata.insert("reward".to_owned(), reward.clone());
    }
    if let Some(actions) = id_text(simulation.get("task_id")).and_then(|id| gold.get(&id)) {
        metadata.insert("gold_actions".to_owned(), actions.clone());
    }
    let mut conversation = Conversation::default();
    for (i, message) in messages.into_iter().enumerate() {
        conversation
            .add(message)
            .map_err(|e| format!("messages[{i}]: {e}"))?;
    }
    let (steps, notes) = conversation.finish();
    metadata.extend(notes);
    trace.metadata = metadata;
    Ok((trace, steps))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_simulation_pairs_flat_calls_with_results_keyed_by_id() {
        let (trace, steps) = convert(
            json!({"id": "sim", "task_id": "3", "trial": 0, "reward_info": {"reward": 1.0},
                "messages": [
                    {"role": "assistant", "timestamp": "2025-01-01T00:00:00",
                     "tool_calls": [{"id": "c1", "name": "f", "arguments": {"x": 1}, "requestor": "assistant"}]},
                    {"role": "tool", "id": "c1", "content": "nope", "error": true,
                     "timestamp": "2025-01-01T00:00:02"}
                ]}),
            "run",
            0,
            &HashMap::from([("3".to_owned(), json!([{"name": "f"}]))]),
        )
        .unwrap();
        assert_eq!(trace.trace_id, "sim");
        assert_eq!(trace.metadata["reward"], json!(1.0));
        assert_eq!(trace.metadata["gold_actions"], json!([{"name": "f"}]));
        assert_eq!(steps[0].inputs, json!({"x": 1}));
        assert!(steps[0].is_error());
        assert_eq!(steps[0].duration_ms, Some(2000.0));
    }

    #[test]
    fn a_simulation_without_messages_is_named() {
        let err = convert(json!({"id": "s"}), "run", 0, &HashMap::new()).unwrap_err();
        assert!(err.contains("messages"), "{err}");
    }
}
