//! Loops: one candidate with a map step for a behaviour mined once per loop count.
//!
//! Contiguous mining sees an agent that reads each of a user's orders as
//! `get_user_details -> get_order_details`, `... -> get_order_details x2`, `... x3`, each its
//! own pattern, each replaying only the occurrences of exactly that count. When the calls of
//! such a run take their argument from the elements of one earlier list (a `map` binding, or
//! the agent's choice among the list's elements), the behaviour is one flow with a map step:
//! `get_user_details -> each get_order_details`. This module builds that candidate from the
//! best-ranked unrolled one (its *template*) and counts its evidence over runs of any length.
//!
//! The map step iterates the whole list when the agent's runs took the elements in order and
//! covered the list (within [`COVERS_LIST`], judged from the unrolled candidates' `covers_list`); otherwise the flow
//! takes the agent's selection, the element indexes, as an input.
//!
//! Not looped: runs whose calls share no list (a retry or a polling loop stays a repeated call
//! with its counts, folded as loop counts) and candidates whose later steps read a run's
//! outputs. Patterns mined with gaps loop the same way, their runs counted with the same gaps
//! (other calls may sit between two iterations).

use std::collections::{BTreeMap, HashMap};

use chainweaver_recorder::model::candidate::{
    Binding, BindingFlag, BindingSource, Candidate, Selection,
};
use chainweaver_recorder::model::flow::{FlowDefinition, ForEach};
use chainweaver_recorder::store::TraceStore;
use serde_json::{Map, Value, json};

use crate::candidate::flow_name;
use crate::error::Result;
use crate::infer::index::escape_segment;
use crate::spm::SequenceDb;

/// A run of map bindings covering the whole list at least this share of the occurrences makes
/// a map step over the whole list; below it, the flow takes the selection as an input.
pub const COVERS_LIST: f64 = 0.9;

/// The run of a template that becomes the map step.
#[derive(Debug, Clone, PartialEq)]
struct Run {
    start: usize,
    len: usize,
    /// The list the run's calls take their elements from: source step, list pointer, item
    /// pointer.
    source: usize,
    list_pointer: String,
    item_pointer: String,
    /// Fields of the run's calls taking the element (top-level input keys).
    fields: Vec<String>,
    /// Whether the flow must take the agent's selection as an input: the calls did not take
    /// the elements in order, or (decided with the run counts) did not cover the whole list.
    chosen: bool,
}

/// A tool sequence with back-to-back repeats collapsed: (tool, times).
fn collapsed(tools: &[String]) -> Vec<(String, usize)> {
    crate::fold::runs(tools)
}

/// Add a loop candidate for each behaviour whose unrolled candidates loop over a list, ranked
/// among the others by score, its runs counted in `db`. Returns how many were added.
///
/// `max_gap` is the mining's: gapped candidates' runs are counted with up to that many other
/// calls between two calls.
pub fn add_loop_candidates(
    candidates: &mut Vec<Candidate>,
    db: &SequenceDb,
    max_gap: usize,
) -> usize {
    add_loop_candidates_counted(candidates, max_gap, &|shape| {
        count_runs(db, &shape.tools, shape.position, shape.max_gap)
    })
}

/// A loop shape whose runs a loop candidate counts: tools with back-to-back repeats collapsed,
/// the one at `position` repeating, up to `max_gap` other calls between two calls.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LoopShape {
    pub tools: Vec<String>,
    pub position: usize,
    pub max_gap: usize,
}

/// Every shape [`add_loop_candidates_counted`] may ask the counts of for `candidates`, each
/// once: a caller that counts runs in one pass over the store counts these.
pub fn loop_shapes(candidates: &[Candidate], max_gap: usize) -> Vec<LoopShape> {
    let repeated = repeated_steps(candidates);
    let mut shapes: Vec<LoopShape> = Vec::new();
    for candidate in candidates {
        if let Some((shape, _)) = loop_of(candidate, &repeated, max_gap)
            && !shapes.contains(&shape)
        {
            shapes.push(shape);
        }
    }
    shapes
}

/// [`add_loop_candidates`] with the runs of each shape counted by `counts`.
pub fn add_loop_candidates_counted(
    candidates: &mut Vec<Candidate>,
    max_gap: usize,
    counts: &dyn Fn(&LoopShape) -> RunCounts,
) -> usize {
    let repeated = repeated_steps(candidates);
    let mut made: Vec<Candidate> = Vec::new();
    let mut done: Vec<Vec<String>> = Vec::new();
    for candidate in candidates.iter() {
        let Some((shape, run)) = loop_of(candidate, &repeated, max_gap) else {
            continue;
        };
        if done.contains(&shape.tools) {
            continue;
        }
        if let Some(looped) = build(&candidates[..], candidate, &run, &shape, &counts(&shape)) {
            done.push(shape.tools);
            made.push(looped);
        }
    }
    let added = made.len();
    candidates.extend(made);
    crate::mine::sort_candidates(candidates);
    added
}

/// Per collapsed tool sequence: which of its steps repeat back to back in some candidate.
fn repeated_steps(candidates: &[Candidate]) -> HashMap<Vec<String>, Vec<bool>> {
    let mut repeated: HashMap<Vec<String>, Vec<bool>> = HashMap::new();
    for candidate in candidates {
        let runs = collapsed(&candidate.tools);
        let key: Vec<String> = runs.iter().map(|(t, _)| t.clone()).collect();
        let flags = repeated
            .entry(key)
            .or_insert_with(|| vec![false; runs.len()]);
        for (flag, (_, times)) in flags.iter_mut().zip(&runs) {
            *flag |= *times > 1;
        }
    }
    repeated
}

/// The loop shape `candidate` would template, and its run, when it loops over a list.
fn loop_of(
    candidate: &Candidate,
    repeated: &HashMap<Vec<String>, Vec<bool>>,
    max_gap: usize,
) -> Option<(LoopShape, Run)> {
    let runs = collapsed(&candidate.tools);
    let key: Vec<String> = runs.iter().map(|(t, _)| t.clone()).collect();
    let position = repeated.get(&key)?.iter().position(|&f| f)?;
    let start: usize = runs[..position].iter().map(|(_, n)| n).sum();
    let run = loop_run(candidate, start, runs[position].1)?;
    let shape = LoopShape {
        tools: key,
        position,
        max_gap: if candidate.gapped { max_gap } else { 0 },
    };
    Some((shape, run))
}

/// The run at `start..start + len` of `candidate` when it loops over one earlier list.
fn loop_run(candidate: &Candidate, start: usize, len: usize) -> Option<Run> {
    let end = start + len;
    let in_run = |s: usize| (start..end).contains(&s);
    // Nothing after the run may read the run's calls (a map step's results are one list).
    let later_reads_run = candidate
        .bindings
        .iter()
        .filter(|b| b.step >= end || in_run(b.step))
        .any(|b| b.source.source_steps().into_iter().any(in_run));
    if later_reads_run {
        return None;
    }
    let of_step = |s: usize| candidate.bindings.iter().filter(move |b| b.step == s);
    let mut list: Option<(usize, String, String)> = None;
    let mut fields = Vec::new();
    let mut chosen = false;
    for binding in of_step(start) {
        let key = top_field(&binding.field)?;
        let element = |b: &Binding| match &b.source {
            BindingSource::ListElement {
                step,
                list_pointer,
                item_pointer,
                ..
            }
            | BindingSource::Map {
                step,
                list_pointer,
                item_pointer,
                ..
            } => Some((*step, list_pointer.clone(), item_pointer.clone())),
            _ => None,
        };
        let members: Vec<&Binding> = (start..end)
            .filter_map(|s| of_step(s).find(|b| b.field == binding.field))
            .collect();
        if members.len() != len {
            return None;
        }
        match element(binding) {
            Some(source) if members.iter().all(|b| element(b).as_ref() == Some(&source)) => {
                if list.as_ref().is_some_and(|l| *l != source) {
                    return None;
                }
                chosen |= members
                    .iter()
                    .enumerate()
                    .any(|(r, b)| !takes_element(&b.source, r));
                list = Some(source);
                fields.push(key);
            }
            // Any other field must be the same in every call of the run.
            _ if members.iter().all(|b| b.source == binding.source) => {}
            _ => return None,
        }
    }
    let (source, list_pointer, item_pointer) = list?;
    Some(Run {
        start,
        len,
        source,
        list_pointer,
        item_pointer,
        fields,
        chosen,
    })
}

/// Whether call `r` of a run takes element `r` of its list (in order, as a map does).
fn takes_element(source: &BindingSource, r: usize) -> bool {
    match source {
        BindingSource::Map { index, .. } => *index == r,
        BindingSource::ListElement { selection, .. } => match selection {
            Selection::First => r == 0,
            Selection::Index { index } => *index == r,
            Selection::Last | Selection::Chosen => false,
        },
        _ => false,
    }
}

/// Whether runs that take their list's elements in order also cover the whole list: each
/// unrolled candidate of `k` calls saw the list end after its `k`th call (`covers_list`) about
/// as often as the runs of at least `k` calls stop at `k`, which is what whole-list runs do.
/// `None` when no unrolled candidate tells.
fn covers_whole_list(
    candidates: &[Candidate],
    key: &[String],
    start: usize,
    lengths: &BTreeMap<usize, usize>,
) -> Option<bool> {
    let mut told = None;
    for candidate in candidates.iter() {
        let runs = collapsed(&candidate.tools);
        if runs.iter().map(|(t, _)| t).ne(key.iter()) {
            continue;
        }
        let Some((run_len, covers)) = candidate.bindings.iter().find_map(|b| match &b.source {
            BindingSource::Map {
                run_start,
                run_len,
                covers_list,
                ..
            } if *run_start == start => Some((*run_len, *covers_list)),
            _ => None,
        }) else {
            continue;
        };
        let at_least: usize = lengths.range(run_len..).map(|(_, n)| n).sum();
        if at_least == 0 {
            continue;
        }
        let stop_here = lengths.get(&run_len).copied().unwrap_or(0) as f64 / at_least as f64;
        let agrees = (covers - stop_here).abs() <= 1.0 - COVERS_LIST && covers > 0.0;
        told = Some(told.unwrap_or(true) && agrees);
    }
    told
}

/// The top-level input key a field pointer names, when it names one (`/order_id`).
fn top_field(field: &str) -> Option<String> {
    let rest = field.strip_prefix('/')?;
    (!rest.contains('/')).then(|| rest.replace("~1", "/").replace("~0", "~"))
}

/// The loop candidate built from `template`'s `run`, with the runs of its shape counted.
fn build(
    candidates: &[Candidate],
    template: &Candidate,
    run: &Run,
    shape: &LoopShape,
    counts: &RunCounts,
) -> Option<Candidate> {
    let (collapsed_tools, position) = (&shape.tools, shape.position);
    let end = run.start + run.len;
    let mut named: Vec<String> = collapsed_tools.to_vec();
    named[position] = format!("each_{}", collapsed_tools[position]);
    let name = flow_name(&named);
    let id = if template.gapped {
        format!("{name}~gapped")
    } else {
        name.clone()
    };
    if counts.occurrences == 0 {
        return None;
    }
    let mut run = run.clone();
    if !run.chosen {
        run.chosen = covers_whole_list(candidates, collapsed_tools, run.start, &counts.lengths)
            != Some(true);
    }
    let run = &run;
    let select_input = run.chosen.then(|| selection_input_name(&run.list_pointer));

    let bindings = loop_bindings(template, run, select_input.as_deref());
    let mut flow = template.flow.clone();
    loop_flow(&mut flow, template, run, select_input.as_deref(), &name)?;

    let mut evidence = template.evidence.clone();
    let template_saved = template.evidence.round_trips_saved.max(1) as f64;
    evidence.support = counts.support;
    evidence.occurrences = counts.occurrences;
    evidence.round_trips_saved = counts.round_trips_saved;
    evidence.loop_lengths = counts.lengths.clone();
    evidence.support_by_day = BTreeMap::new();
    evidence.flagged_bindings = bindings.iter().filter(|b| b.is_flagged()).count();
    // The template's quality factors carry over; the loop saves the round trips of every run.
    evidence.score = template.evidence.score * counts.round_trips_saved as f64 / template_saved;
    let mut tools = template.tools.clone();
    tools.drain(run.start + 1..end);
    Some(Candidate {
        id,
        tools,
        gapped: template.gapped,
        max_gap: template.max_gap,
        flow,
        bindings,
        tool_schemas: template.tool_schemas.clone(),
        evidence,
        status: Default::default(),
        split: template.split,
        sample: template.sample.clone(),
        behaviour: None,
        metadata: Map::new(),
    })
}

/// The flow input holding the agent's selection: `selected_orders` for `/orders`.
fn selection_input_name(list_pointer: &str) -> String {
    let last = list_pointer.rsplit('/').next().unwrap_or_default();
    let cleaned: String = last
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { '_' })
        .collect();
    if cleaned.is_empty() {
        "selected_indexes".to_string()
    } else {
        format!("selected_{cleaned}")
    }
}

/// The template's bindings with the run's calls as one step: the list fields bound to each
/// element, the steps after the run renumbered.
fn loop_bindings(template: &Candidate, run: &Run, select_input: Option<&str>) -> Vec<Binding> {
    let end = run.start + run.len;
    let shift = run.len - 1;
    let mut out = Vec::new();
    for binding in &template.bindings {
        if binding.step > run.start && binding.step < end {
            continue;
        }
        let mut binding = binding.clone();
        if binding.step == run.start
            && top_field(&binding.field).is_some_and(|f| run.fields.contains(&f))
        {
            binding.source = BindingSource::Each {
                step: run.source,
                list_pointer: run.list_pointer.clone(),
                item_pointer: run.item_pointer.clone(),
                select_input: select_input.map(str::to_string),
            };
            binding.flags.retain(|f| *f != BindingFlag::AgentChoice);
            binding.alternatives.clear();
        }
        if binding.step >= end {
            binding.step -= shift;
            shift_sources(&mut binding.source, end, shift);
        }
        out.push(binding);
    }
    out
}

/// Renumber the steps a source reads from when steps before them were folded away.
fn shift_sources(source: &mut BindingSource, from: usize, by: usize) {
    match source {
        BindingSource::StepOutput { step, .. }
        | BindingSource::StepInput { step, .. }
        | BindingSource::ListElement { step, .. }
        | BindingSource::Map { step, .. }
        | BindingSource::Each { step, .. } => {
            if *step >= from {
                *step -= by;
            }
        }
        BindingSource::Template { slots, .. } => {
            for slot in slots {
                shift_sources(&mut slot.source, from, by);
            }
        }
        BindingSource::FlowInput { .. } | BindingSource::Constant { .. } => {}
    }
}

/// The step ids the candidate builder gives a tool sequence (`tool`, `tool_2`, ...).
fn step_ids(tools: &[String]) -> Vec<String> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    tools
        .iter()
        .map(|tool| {
            let n = seen.entry(tool.as_str()).or_insert(0);
            *n += 1;
            if *n == 1 {
                tool.clone()
            } else {
                format!("{tool}_{n}")
            }
        })
        .collect()
}

/// Turn the template's flow into the loop's: the run's first step becomes the map step, the
/// others go, the list's source step puts the list in the context, and the flow inputs only
/// the run's list fields took give way to the selection input. `None` when the flow has a
/// shape this cannot rewrite.
fn loop_flow(
    flow: &mut FlowDefinition,
    template: &Candidate,
    run: &Run,
    select_input: Option<&str>,
    id: &str,
) -> Option<()> {
    let end = run.start + run.len;
    let ids = step_ids(&template.tools);
    // The list's place in the context, as the builder names an output it wires.
    let first_segment = run
        .list_pointer
        .get(1..)
        .and_then(|rest| rest.split('/').next())
        .map(|key| key.replace("~1", "/").replace("~0", "~"));
    let object_output = first_segment.as_ref().is_some_and(|key| {
        template
            .tool_schemas
            .get(&template.tools[run.source])
            .and_then(|s| s.output_schema.get("properties"))
            .and_then(Value::as_object)
            .is_some_and(|properties| properties.contains_key(key))
    });
    let (output_key, tail) = if object_output {
        let rest = &run.list_pointer[1..];
        match rest.split_once('/') {
            Some((key, tail)) => (
                key.replace("~1", "/").replace("~0", "~"),
                format!("/{tail}"),
            ),
            None => (rest.replace("~1", "/").replace("~0", "~"), String::new()),
        }
    } else {
        ("result".to_string(), run.list_pointer.clone())
    };
    let list_key = format!("{}.{output_key}", ids[run.source]);
    let for_each = ForEach {
        list: format!("/{}{tail}", escape_segment(&list_key)),
        item: "item".into(),
        select: select_input.map(|name| format!("/{}", escape_segment(name))),
        concurrency: 1,
    };
    let item_value = if run.item_pointer.is_empty() {
        Value::String("item".into())
    } else {
        Value::String(format!("/item{}", run.item_pointer))
    };
    let results_key = format!("{}.each", ids[run.start]);

    let map_step = MapStepParts {
        fields: &run.fields,
        item_value,
        for_each,
        results_key,
        list_key,
        output_key,
    };
    // Flow inputs the run's list fields took (the agent's choices), to drop.
    let (dropped_inputs, steps_mappings, input_schema) = match flow {
        FlowDefinition::Linear(linear) => {
            let run_steps = linear.steps.get(run.start..end)?;
            let dropped = taken_inputs(run_steps.iter().map(|s| &s.input_mapping), &run.fields);
            linear.steps.drain(run.start + 1..end);
            let step = linear.steps.get_mut(run.start)?;
            map_step.apply_to_step(
                &mut step.input_mapping,
                &mut step.for_each,
                &mut step.output_key,
            );
            map_step.apply_to_source(&mut linear.steps.get_mut(run.source)?.output_mapping);
            linear.name = id.to_string();
            let mappings: Vec<_> = linear
                .steps
                .iter()
                .map(|s| s.input_mapping.clone())
                .collect();
            (dropped, mappings, &mut linear.input_schema)
        }
        FlowDefinition::Dag(dag) => {
            let run_steps = dag.steps.get(run.start..end)?;
            let dropped = taken_inputs(run_steps.iter().map(|s| &s.input_mapping), &run.fields);
            let removed: Vec<String> = run_steps[1..].iter().map(|s| s.step_id.clone()).collect();
            let kept_id = run_steps[0].step_id.clone();
            dag.steps.drain(run.start + 1..end);
            for step in &mut dag.steps {
                let mut depends: Vec<String> = Vec::new();
                for d in step.depends_on.drain(..) {
                    let d = if removed.contains(&d) {
                        kept_id.clone()
                    } else {
                        d
                    };
                    if d != step.step_id && !depends.contains(&d) {
                        depends.push(d);
                    }
                }
                step.depends_on = depends;
            }
            let step = dag.steps.get_mut(run.start)?;
            map_step.apply_to_step(
                &mut step.input_mapping,
                &mut step.for_each,
                &mut step.output_key,
            );
            map_step.apply_to_source(&mut dag.steps.get_mut(run.source)?.output_mapping);
            dag.name = id.to_string();
            let mappings: Vec<_> = dag.steps.iter().map(|s| s.input_mapping.clone()).collect();
            (dropped, mappings, &mut dag.input_schema)
        }
    };
    rewrite_input_schema(input_schema, &dropped_inputs, &steps_mappings, select_input);
    let description = loop_description(template, run, select_input.is_some());
    match flow {
        FlowDefinition::Linear(f) => {
            f.description = description;
            f.metadata
                .insert("mined_candidate".into(), Value::String(id.to_string()));
        }
        FlowDefinition::Dag(f) => {
            f.description = description;
            f.metadata
                .insert("mined_candidate".into(), Value::String(id.to_string()));
        }
    }
    Some(())
}

/// The loop flow's input schema: the flow inputs only the run's list fields took are gone, the
/// selection input (if any) is added, and no property keeps an `enum`: the template saw the
/// occurrences of one loop count only, so the values it listed say nothing about other runs.
fn rewrite_input_schema(
    input_schema: &mut Option<Value>,
    dropped_inputs: &[String],
    steps_mappings: &[Map<String, Value>],
    select_input: Option<&str>,
) {
    let still_used = |name: &str| {
        steps_mappings
            .iter()
            .any(|m| m.values().any(|v| v.as_str() == Some(name)))
    };
    let Some(Value::Object(schema)) = input_schema else {
        return;
    };
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for name in dropped_inputs.iter().filter(|n| !still_used(n)) {
            properties.remove(name);
        }
        for property in properties.values_mut() {
            if let Value::Object(property) = property {
                property.remove("enum");
            }
        }
        if let Some(name) = select_input {
            properties.insert(
                name.to_string(),
                json!({"type": "array", "items": {"type": "integer", "minimum": 0},
                    "description": "indexes of the list elements to run the map step for"}),
            );
        }
    }
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|r| {
            r.as_str()
                .is_none_or(|n| !dropped_inputs.iter().any(|d| d == n) || still_used(n))
        });
        if let Some(name) = select_input {
            required.push(Value::String(name.to_string()));
        }
    }
}

/// The loop flow's description: its steps, the map step as `each TOOL`.
fn loop_description(template: &Candidate, run: &Run, selected: bool) -> String {
    let end = run.start + run.len;
    let steps: Vec<String> = template.tools[..run.start]
        .iter()
        .cloned()
        .chain(std::iter::once(format!(
            "each {}",
            template.tools[run.start]
        )))
        .chain(template.tools[end..].iter().cloned())
        .collect();
    format!(
        "Mined: {} with a map step ({}).",
        steps.join(" -> "),
        if selected {
            "the agent's selection is an input"
        } else {
            "over the whole list"
        }
    )
}

/// What turns the run's first step into the map step, for either kind of flow step.
struct MapStepParts<'r> {
    fields: &'r [String],
    item_value: Value,
    for_each: ForEach,
    results_key: String,
    /// The list's context key, and the source step's output key holding it.
    list_key: String,
    output_key: String,
}

impl MapStepParts<'_> {
    fn apply_to_step(
        &self,
        input_mapping: &mut Map<String, Value>,
        for_each: &mut Option<ForEach>,
        output_key: &mut Option<String>,
    ) {
        for field in self.fields {
            input_mapping.insert(field.clone(), self.item_value.clone());
        }
        *for_each = Some(self.for_each.clone());
        *output_key = Some(self.results_key.clone());
    }

    fn apply_to_source(&self, output_mapping: &mut Option<Map<String, Value>>) {
        output_mapping.get_or_insert_with(Map::new).insert(
            self.list_key.clone(),
            Value::String(self.output_key.clone()),
        );
    }
}

/// The flow inputs the run's list fields took (the agent's choices, one input a call).
fn taken_inputs<'m>(
    mappings: impl Iterator<Item = &'m Map<String, Value>>,
    fields: &[String],
) -> Vec<String> {
    let mut taken = Vec::new();
    for mapping in mappings {
        for field in fields {
            if let Some(Value::String(name)) = mapping.get(field)
                && !name.starts_with('/')
            {
                taken.push(name.clone());
            }
        }
    }
    taken
}

/// Run-level counts of a loop shape: the collapsed tools, the one at `position` repeated one
/// or more times back to back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunCounts {
    pub support: usize,
    pub occurrences: usize,
    /// Sum over occurrences of (calls - 1).
    pub round_trips_saved: usize,
    /// Occurrences by the number of calls the loop made.
    pub lengths: BTreeMap<usize, usize>,
}

/// Count, in every sequence, the non-overlapping occurrences of `tools` where the tool at
/// `position` may repeat (greedily, one or more calls), with up to `max_gap` other calls
/// between two of an occurrence's calls (0: back to back).
pub fn count_runs(db: &SequenceDb, tools: &[String], position: usize, max_gap: usize) -> RunCounts {
    let mut counts = RunCounts::default();
    let Some(ids) = tools
        .iter()
        .map(|t| db.id_of(t))
        .collect::<Option<Vec<u32>>>()
    else {
        return counts;
    };
    for sequence in db.sequences() {
        counts.add_sequence(sequence, &ids, position, max_gap);
    }
    counts
}

impl RunCounts {
    /// Add the runs of the shape `ids` (the step at `position` repeating) in one sequence.
    fn add_sequence(&mut self, sequence: &[u32], ids: &[u32], position: usize, max_gap: usize) {
        let mut found = false;
        let mut at = 0;
        while at < sequence.len() {
            match match_run(sequence, at, ids, position, max_gap) {
                Some(run) => {
                    found = true;
                    self.occurrences += 1;
                    self.round_trips_saved += run.calls.len() - 1;
                    *self.lengths.entry(run.loop_len).or_insert(0) += 1;
                    at = run.end();
                }
                None => at += 1,
            }
        }
        self.support += usize::from(found);
    }
}

/// [`count_runs`] of every shape, in one pass over the tool names of the store's traces that
/// `keep` accepts (by id), one trace in memory at a time: for mining that never holds the
/// store's sequences (an engine's).
pub fn count_runs_in_store(
    store: &dyn TraceStore,
    keep: &dyn Fn(&str) -> bool,
    shapes: &[LoopShape],
) -> Result<Vec<RunCounts>> {
    let mut counts = vec![RunCounts::default(); shapes.len()];
    if shapes.is_empty() {
        return Ok(counts);
    }
    // Only the shapes' tools get numbers; every other tool is one number none of them has.
    let numbers = crate::tool_stream::ToolNumbers::new(
        shapes.iter().flat_map(|s| &s.tools).map(String::as_str),
    );
    let ids: Vec<Vec<u32>> = shapes.iter().map(|s| numbers.spell(&s.tools)).collect();
    let place = |id: &str| keep(id).then_some(0);
    crate::tool_stream::for_each_sequence(store, &place, &numbers, &mut |_, sequence, _| {
        for ((shape, ids), counts) in shapes.iter().zip(&ids).zip(counts.iter_mut()) {
            counts.add_sequence(sequence, ids, shape.position, shape.max_gap);
        }
    })?;
    Ok(counts)
}

/// One occurrence of a loop shape in a sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopMatch {
    /// The positions of the occurrence's calls, in order (the calls in gaps are not among
    /// them).
    pub calls: Vec<usize>,
    /// How many calls the repeated step made.
    pub loop_len: usize,
}

impl LoopMatch {
    /// The position after the occurrence's last call.
    pub fn end(&self) -> usize {
        self.calls.last().map_or(0, |last| last + 1)
    }
}

/// The occurrence of the loop shape `ids` (the step at `position` repeated) whose first call
/// is at `at`, with up to `max_gap` other calls between two of its calls. Each next call is
/// the first call of its tool within reach; the loop takes another call of its tool while one
/// comes within reach before the next step's tool does.
pub fn match_run(
    sequence: &[u32],
    at: usize,
    ids: &[u32],
    position: usize,
    max_gap: usize,
) -> Option<LoopMatch> {
    if sequence.get(at) != ids.first() {
        return None;
    }
    let within = |from: usize, wanted: &dyn Fn(u32) -> bool| {
        (from + 1..=(from + 1 + max_gap).min(sequence.len().saturating_sub(1)))
            .find(|&i| wanted(sequence[i]))
    };
    let mut calls = vec![at];
    let mut loop_len = usize::from(position == 0);
    let mut last = at;
    for (p, &id) in ids.iter().enumerate() {
        if p > 0 {
            last = within(last, &|tool| tool == id)?;
            calls.push(last);
            if p == position {
                loop_len = 1;
            }
        }
        if p == position {
            let next = ids.get(p + 1).copied();
            while next != Some(id) {
                match within(last, &|tool| tool == id || Some(tool) == next) {
                    Some(i) if sequence[i] == id => {
                        calls.push(i);
                        last = i;
                        loop_len += 1;
                    }
                    _ => break,
                }
            }
        }
    }
    Some(LoopMatch { calls, loop_len })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(sequences: &[&[&str]]) -> SequenceDb {
        SequenceDb::from_sequences(sequences.iter().map(|s| s.iter().copied())).unwrap()
    }

    #[test]
    fn runs_of_any_length_count_once_each() {
        let db = db(&[
            &["u", "o", "o", "o", "x"],
            &["u", "o"],
            &["x", "u", "o", "o", "u", "o"],
            &["o", "o"],
        ]);
        let tools = vec!["u".to_string(), "o".to_string()];
        let counts = count_runs(&db, &tools, 1, 0);
        assert_eq!(counts.support, 3);
        assert_eq!(counts.occurrences, 4);
        assert_eq!(counts.lengths, BTreeMap::from([(1, 2), (2, 1), (3, 1)]));
        // (4 - 1) + (2 - 1) + (3 - 1) + (2 - 1)
        assert_eq!(counts.round_trips_saved, 7);
    }

    #[test]
    fn a_loop_before_the_same_tool_leaves_it_one_call() {
        let ids = [1, 2, 2];
        let found = match_run(&[1, 2, 2, 2], 0, &ids, 1, 0).unwrap();
        assert_eq!((found.calls, found.loop_len), (vec![0, 1, 2], 1));
        assert_eq!(match_run(&[1, 3], 0, &ids, 1, 0), None);
    }

    #[test]
    fn with_gaps_the_loop_skips_other_calls_and_stops_at_the_next_step() {
        // u x o o y o v: a loop of o with other calls between, then v.
        let (u, o, v, x, y) = (1, 2, 3, 8, 9);
        let sequence = [u, x, o, o, y, o, v];
        let found = match_run(&sequence, 0, &[u, o, v], 1, 1).unwrap();
        assert_eq!((found.calls, found.loop_len), (vec![0, 2, 3, 5, 6], 3));
        // Back to back only, the other calls break it.
        assert_eq!(match_run(&sequence, 0, &[u, o, v], 1, 0), None);
        // Two other calls are past a gap of one.
        assert_eq!(match_run(&[u, x, y, o], 0, &[u, o], 1, 1), None);
        // The next step's tool within reach ends the loop even when the loop's tool follows.
        let found = match_run(&[u, o, v, o], 0, &[u, o, v], 1, 2).unwrap();
        assert_eq!((found.calls, found.loop_len), (vec![0, 1, 2], 1));
        let db = db(&[&["u", "x", "o", "y", "o"], &["u", "o"]]);
        let tools = vec!["u".to_string(), "o".to_string()];
        let counts = count_runs(&db, &tools, 1, 1);
        assert_eq!(counts.lengths, BTreeMap::from([(1, 1), (2, 1)]));
        assert_eq!(counts.round_trips_saved, 2 + 1);
    }

    #[test]
    fn runs_counted_in_a_store_pass_equal_runs_counted_in_the_sequences() {
        use chainweaver_recorder::model::split::Split;

        let dir = tempfile::tempdir().unwrap();
        let (store, traffic) = crate::test_traffic::stored_traffic(dir.path(), 3);
        // Mine 70%: the held-out traces are left out of both counts.
        let split = Split::Holdout { percent: 30 };
        let keep = |id: &str| !split.is_holdout(id);
        let db = SequenceDb::from_sequences(
            traffic
                .iter()
                .filter(|t| keep(&t.trace.trace_id))
                .map(|t| t.steps.iter().map(|s| s.tool_name.as_str())),
        )
        .unwrap();
        let tools: Vec<String> = (0..db.num_items() as u32)
            .map(|id| db.name(id).to_string())
            .collect();
        let mut shapes = Vec::new();
        for a in &tools {
            for b in &tools {
                for (position, max_gap) in [(0, 0), (1, 0), (1, 2)] {
                    shapes.push(LoopShape {
                        tools: vec![a.clone(), b.clone()],
                        position,
                        max_gap,
                    });
                }
            }
        }
        shapes.push(LoopShape {
            tools: vec!["no_such_tool".into(), tools[0].clone()],
            position: 1,
            max_gap: 0,
        });
        let streamed = count_runs_in_store(&store, &keep, &shapes).unwrap();
        let mut looped = 0;
        for (shape, streamed) in shapes.iter().zip(&streamed) {
            let expected = count_runs(&db, &shape.tools, shape.position, shape.max_gap);
            assert_eq!(*streamed, expected, "{shape:?}");
            looped += usize::from(expected.lengths.keys().any(|&n| n > 1));
        }
        assert!(looped > 0, "some shape repeats in the generated traffic");
    }

    #[test]
    fn selection_inputs_are_named_after_the_list() {
        assert_eq!(selection_input_name("/orders"), "selected_orders");
        assert_eq!(
            selection_input_name("/user/order-ids"),
            "selected_order_ids"
        );
        assert_eq!(selection_input_name(""), "selected_indexes");
    }
}
