//! Map steps (`for_each`): one call of the step's tool per element of a list in the context.
//!
//! - The list is resolved from the context by `for_each.list`; `for_each.select`, when set,
//!   names the element indexes to run (ascending; an index out of range or given twice fails
//!   the step). A missing list, a value that is not a list or a bad selection fails the step
//!   before any call, with a record that has no `iteration`; `on_error: skip` lets the flow go
//!   on without merging anything.
//! - Each iteration reads the context plus the element under `for_each.item`, and has its own
//!   retries, fallback and step record (`iteration`: the element index).
//! - At most `for_each.concurrency` iterations run at once. Under `on_error: fail` the first
//!   failed iteration stops the step: no further iteration starts, those in flight finish, and
//!   the flow stops with that iteration's record (step and element index) as its failed step.
//! - The results, in element order whatever order the calls finished in, are merged as one
//!   array under `output_key`; an iteration skipped under `on_error: skip` leaves `null` in
//!   its slot. An empty list (or selection) gives `[]` and calls nothing.
//! - With checkpoints, each completed iteration is saved as it completes; a resumed run runs
//!   only the iterations of an unfinished map step that did not complete (a failed iteration
//!   under `on_error: fail` did not complete; one skipped under `on_error: skip` did).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use serde_json::{Map, Value};

use chainweaver_recorder::model::flow::{FlowStep, ForEach, OnError};

use super::{
    CallOutcome, CompletedIteration, FlowEvent, FlowExecutor, Merge, Progress, Records, Run,
    RunPlan, StepOutcome, new_record,
};
use crate::error::{Error, Result};
use crate::flow::mapping::{StepContext, resolve_pointer};
use crate::tool::JsonObject;

/// The checkpointed iterations of map steps not completed, by step then element index.
pub(super) fn restored_iterations(
    iterations: &[CompletedIteration],
    done: &HashSet<usize>,
) -> HashMap<usize, BTreeMap<usize, Value>> {
    let mut restored: HashMap<usize, BTreeMap<usize, Value>> = HashMap::new();
    for iteration in iterations {
        if !done.contains(&iteration.step_index) {
            restored
                .entry(iteration.step_index)
                .or_default()
                .insert(iteration.iteration, iteration.slot.clone());
        }
    }
    restored
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The elements a map step runs, `(element index, element)` in ascending index order.
pub(crate) fn map_elements<'c>(
    step: &FlowStep,
    index: usize,
    for_each: &ForEach,
    context: &'c JsonObject,
) -> Result<Vec<(usize, &'c Value)>> {
    let fail = |field: &str, message: String| Error::InputMapping {
        step: index,
        tool: step.tool_name.clone(),
        field: field.to_string(),
        message,
    };
    if step.output_key.is_none() {
        return Err(fail(
            "output_key",
            "a map step needs an output_key to collect its results under".into(),
        ));
    }
    let list = resolve_pointer(context, &for_each.list)
        .map_err(|message| fail("for_each.list", message))?;
    let Value::Array(items) = list else {
        return Err(fail(
            "for_each.list",
            format!("`{}` is {}, not a list", for_each.list, json_type(list)),
        ));
    };
    let Some(select) = &for_each.select else {
        return Ok(items.iter().enumerate().collect());
    };
    let chosen =
        resolve_pointer(context, select).map_err(|message| fail("for_each.select", message))?;
    let Value::Array(chosen) = chosen else {
        return Err(fail(
            "for_each.select",
            format!("`{select}` is {}, not a list of indexes", json_type(chosen)),
        ));
    };
    let mut indexes = Vec::with_capacity(chosen.len());
    for value in chosen {
        let Some(i) = value.as_u64().and_then(|i| usize::try_from(i).ok()) else {
            return Err(fail(
                "for_each.select",
                format!("`{select}` holds {value}, which is not an element index"),
            ));
        };
        if i >= items.len() {
            return Err(fail(
                "for_each.select",
                format!(
                    "`{select}` selects element {i}, but `{}` has {} elements",
                    for_each.list,
                    items.len()
                ),
            ));
        }
        indexes.push(i);
    }
    indexes.sort_unstable();
    if let Some(pair) = indexes.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(fail(
            "for_each.select",
            format!("`{select}` selects element {} more than once", pair[0]),
        ));
    }
    Ok(indexes.into_iter().map(|i| (i, &items[i])).collect())
}

/// An iteration's result slot: its mapped output, or `null` for a skipped failure.
fn slot(call: &CallOutcome) -> Value {
    match (&call.settled.merge, call.record.success) {
        (Some(Merge::Object(merge)), true) => Value::Object(merge.clone()),
        _ => Value::Null,
    }
}

/// What one iteration reads: the context with the element under the item key, looked up in
/// place (as the context [`crate::flow::mapping::iteration_context`] builds, without copying).
fn scope<'a>(
    context: &'a JsonObject,
    for_each: &'a ForEach,
    element: &'a Value,
) -> StepContext<'a> {
    StepContext::Item {
        context,
        item_key: &for_each.item,
        element,
    }
}

/// What every concurrent iteration of one map step shares.
#[derive(Clone, Copy)]
struct Iteration<'p, 'a> {
    plan: &'a RunPlan<'p>,
    run: &'a Run<'p>,
    progress: &'a Mutex<Progress>,
    index: usize,
    for_each: &'a ForEach,
    context: &'a JsonObject,
    offload: bool,
    stop: &'a AtomicBool,
    pending: &'a [(usize, &'a Value)],
}

impl FlowExecutor {
    /// Run a map step: its iterations (those a resumed run has not restored), at most
    /// `concurrency` at once, then the array of results under `output_key`.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn run_map_step(
        &self,
        plan: &RunPlan<'_>,
        run: &Run<'_>,
        progress: &Mutex<Progress>,
        index: usize,
        for_each: &ForEach,
        context: &JsonObject,
        offload: bool,
    ) -> StepOutcome {
        let (step, _) = &plan.steps[index];
        let step: &FlowStep = step;
        let elements = match map_elements(step, index, for_each, context) {
            Ok(elements) => elements,
            Err(err) => return self.map_failure(plan, run, index, &err),
        };
        let restored = run.restored.get(&index);
        let pending: Vec<(usize, &Value)> = elements
            .iter()
            .filter(|(i, _)| restored.is_none_or(|r| !r.contains_key(i)))
            .copied()
            .collect();
        let concurrency = for_each.concurrency.max(1);
        // Several calls at once: blocking tools go to threads, as in a DAG level.
        let offload = offload || (concurrency > 1 && pending.len() > 1);
        let stop = AtomicBool::new(false);
        let stop = &stop;
        // One slot per element that runs, in element order (`elements` is sorted by index).
        let position = |element_index: usize| {
            elements
                .binary_search_by_key(&element_index, |(i, _)| *i)
                .ok()
        };
        let mut slots: Vec<Option<Value>> = vec![None; elements.len()];
        for (element_index, value) in restored.into_iter().flatten() {
            if let Some(at) = position(*element_index) {
                slots[at] = Some(value.clone());
            }
        }
        let mut records = Vec::with_capacity(pending.len());
        let mut fatal = false;
        // Each call straight into its slot and the records, as it completes.
        let mut settle = |element_index: usize, mut call: CallOutcome| {
            fatal |= call.settled.fatal;
            // The slot takes the mapped output; nothing reads the call's copy after this.
            let value = match (call.settled.merge.take(), call.record.success) {
                (Some(Merge::Object(merge)), true) => Value::Object(merge),
                _ => Value::Null,
            };
            if let Some(at) = position(element_index) {
                slots[at] = Some(value);
            }
            records.push(call.record);
        };
        if concurrency == 1 {
            // One at a time: a plain loop, without the stream machinery per element, and
            // without a future per call when the tool runs inline.
            let inline = Self::calls_inline(plan, index, offload);
            // As for back-to-back steps: one iteration's end is the next one's start, unless
            // a checkpoint is saved or an event sent between them.
            let chain = inline && run.events.is_none() && self.checkpoints.is_none();
            let mut previous_end = None;
            for (element_index, element) in pending {
                let scoped = scope(context, for_each, element);
                let call = if inline {
                    let start = previous_end.take();
                    let call =
                        self.call_step_inline(plan, run, index, Some(element_index), scoped, start);
                    previous_end = chain.then_some(call.settled.ended);
                    call
                } else {
                    Box::pin(self.call_step(plan, run, index, Some(element_index), scoped, offload))
                        .await
                };
                self.save_iteration(run, progress, index, element_index, &call);
                let stop = call.settled.fatal;
                settle(element_index, call);
                if stop {
                    break;
                }
            }
        } else {
            let iteration = Iteration {
                plan,
                run,
                progress,
                index,
                for_each,
                context,
                offload,
                stop,
                pending: &pending,
            };
            let iteration = &iteration;
            // Positions in `pending`, not its references: a closure taking a reference trips
            // the compiler's proof that the run's future is `Send` (which the MCP server needs).
            let calls: Vec<Option<(usize, CallOutcome)>> = futures::stream::iter(
                (0..pending.len()).map(|at| self.run_iteration(iteration, at)),
            )
            .buffer_unordered(concurrency)
            .collect()
            .await;
            for (element_index, call) in calls.into_iter().flatten() {
                settle(element_index, call);
            }
        }
        records.sort_by_key(|r| r.iteration);
        if fatal {
            return StepOutcome {
                index,
                records: Records::Many(records),
                merge: None,
                fatal: true,
            };
        }
        let results: Vec<Value> = slots
            .into_iter()
            .map(|slot| slot.unwrap_or(Value::Null))
            .collect();
        let mut merge = Map::with_capacity(1);
        if let Some(key) = &step.output_key {
            merge.insert(key.clone(), Value::Array(results));
        }
        StepOutcome {
            index,
            records: Records::Many(records),
            merge: Some(Merge::Object(merge)),
            fatal: false,
        }
    }

    /// The iteration of the `at`th pending element of a map step whose iterations run at once;
    /// `None` when a fatal failure came first.
    async fn run_iteration(
        &self,
        iteration: &Iteration<'_, '_>,
        at: usize,
    ) -> Option<(usize, CallOutcome)> {
        let Iteration {
            plan, run, index, ..
        } = *iteration;
        // After a fatal failure no further iteration starts.
        if iteration.stop.load(Ordering::SeqCst) {
            return None;
        }
        let (element_index, element) = *iteration.pending.get(at)?;
        let scoped = scope(iteration.context, iteration.for_each, element);
        let call = self
            .call_step_fast(
                plan,
                run,
                index,
                Some(element_index),
                scoped,
                iteration.offload,
            )
            .await;
        if call.settled.fatal {
            iteration.stop.store(true, Ordering::SeqCst);
        }
        self.save_iteration(run, iteration.progress, index, element_index, &call);
        Some((element_index, call))
    }

    /// A map step that failed before any iteration (its list, selection or output key): one
    /// record without `iteration`; fatal unless `on_error: skip`, which merges nothing.
    fn map_failure(
        &self,
        plan: &RunPlan<'_>,
        run: &Run<'_>,
        index: usize,
        err: &Error,
    ) -> StepOutcome {
        let (step, step_id) = &plan.steps[index];
        run.emit(|| FlowEvent::StepStart {
            trace_id: run.trace_id.clone(),
            step_index: index,
            step_id: step_id.map(str::to_string),
            tool_name: step.tool_name.clone(),
            iteration: None,
        });
        let skip = step.on_error == OnError::Skip;
        let mut record = new_record(
            index,
            *step_id,
            &step.tool_name,
            None,
            run.wall_time(std::time::Instant::now()),
        );
        record.error_type = Some(err.type_name());
        record.error_message = Some(run.secrets.redact_text(&err.to_string()));
        record.error_code = Some(err.code().to_string());
        record.skipped = skip;
        run.emit(|| FlowEvent::StepEnd {
            trace_id: run.trace_id.clone(),
            record: Box::new(record.clone()),
        });
        StepOutcome {
            index,
            records: Records::One(record),
            merge: skip.then(|| Merge::Object(Map::new())),
            fatal: !skip,
        }
    }

    /// Put a completed iteration in the resumable state and save a checkpoint (when a sink is
    /// set). A fatal iteration is not completed: it runs again on resume.
    fn save_iteration(
        &self,
        run: &Run<'_>,
        progress: &Mutex<Progress>,
        index: usize,
        element_index: usize,
        call: &CallOutcome,
    ) {
        let Some(sink) = self.checkpoints.as_ref().filter(|_| !call.settled.fatal) else {
            return;
        };
        let snapshot = {
            let Ok(mut progress) = progress.lock() else {
                return;
            };
            progress.records.push(call.record.clone());
            progress.iterations.push(CompletedIteration {
                step_index: index,
                iteration: element_index,
                slot: slot(call),
            });
            progress.snapshot(run)
        };
        // As for steps: a failed save degrades resumability, it does not fail the iteration.
        let _ = sink.save(&snapshot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap_or_default()
    }

    fn map_step(for_each: ForEach) -> FlowStep {
        let mut step = FlowStep::new("t", Map::new());
        step.output_key = Some("out".into());
        step.for_each = Some(for_each);
        step
    }

    fn indexes(result: Result<Vec<(usize, &Value)>>) -> Vec<usize> {
        result
            .map(|elements| elements.into_iter().map(|(i, _)| i).collect())
            .unwrap_or_else(|err| panic!("{err}"))
    }

    #[test]
    fn elements_are_the_list_or_the_selected_indexes_in_ascending_order() {
        let context = ctx(json!({"in": {"xs": ["a", "b", "c", "d"]}, "pick": [3, 1]}));
        let every = ForEach::new("/in/xs");
        assert_eq!(
            indexes(map_elements(&map_step(every.clone()), 0, &every, &context)),
            vec![0, 1, 2, 3]
        );
        let mut picked = ForEach::new("/in/xs");
        picked.select = Some("/pick".into());
        let elements = map_elements(&map_step(picked.clone()), 0, &picked, &context).unwrap();
        assert_eq!(elements, vec![(1, &json!("b")), (3, &json!("d"))]);
    }

    #[test]
    fn a_bad_list_or_selection_is_an_error_naming_step_and_field() {
        let context =
            ctx(json!({"xs": [1, 2], "s": "x", "far": [2], "twice": [1, 1], "neg": [-1]}));
        let message = |list: &str, select: Option<&str>| {
            let mut for_each = ForEach::new(list);
            for_each.select = select.map(str::to_string);
            map_elements(&map_step(for_each.clone()), 4, &for_each, &context)
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        let missing = message("/nope", None);
        assert!(
            missing.contains("step 4 (`t`)") && missing.contains("for_each.list"),
            "{missing}"
        );
        assert!(message("/s", None).contains("is a string, not a list"));
        assert!(message("/xs", Some("/far")).contains("selects element 2, but `/xs` has 2"));
        assert!(message("/xs", Some("/twice")).contains("more than once"));
        assert!(message("/xs", Some("/neg")).contains("not an element index"));
        assert!(message("/xs", Some("/s")).contains("not a list of indexes"));

        let for_each = ForEach::new("/xs");
        let mut no_key = map_step(for_each.clone());
        no_key.output_key = None;
        let err = map_elements(&no_key, 0, &for_each, &context).unwrap_err();
        assert!(err.to_string().contains("output_key"), "{err}");
    }
}
