//! A store's traces as small-number tool sequences, one trace in memory at a time: for the
//! work an engine's mining does over the traces after counting (loop runs, occurrences the
//! engine does not sample, what a cluster does not report), which needs the tool names in
//! order and never the whole store.

use std::collections::HashMap;

use chainweaver_recorder::model::Timestamp;
use chainweaver_recorder::store::TraceStore;

use crate::error::Result;

/// Numbers for the tools some patterns name, in order of first appearance; every other tool
/// shares one number none of them has.
pub(crate) struct ToolNumbers {
    numbers: HashMap<String, u32>,
    other: u32,
}

impl ToolNumbers {
    pub(crate) fn new<'a>(tools: impl IntoIterator<Item = &'a str>) -> Self {
        let mut numbers: HashMap<String, u32> = HashMap::new();
        for tool in tools {
            let next = numbers.len() as u32;
            numbers.entry(tool.to_owned()).or_insert(next);
        }
        let other = numbers.len() as u32;
        Self { numbers, other }
    }

    pub(crate) fn of(&self, tool: &str) -> u32 {
        self.numbers.get(tool).copied().unwrap_or(self.other)
    }

    /// `tools` numbered (each one of those given to [`ToolNumbers::new`]).
    pub(crate) fn spell(&self, tools: &[String]) -> Vec<u32> {
        tools.iter().map(|tool| self.of(tool)).collect()
    }
}

/// What [`for_each_sequence`] calls for each trace: the place `place` gave it, its tools and
/// the start of its first timed step.
pub(crate) type VisitSequence<'a> = dyn FnMut(usize, &[u32], Option<Timestamp>) + 'a;

/// Visit the tool sequence of each trace `place` gives a place (by id), numbered by `numbers`,
/// in the store's order ([`TraceStore::for_each_step_tool`] lists a trace's steps together).
pub(crate) fn for_each_sequence(
    store: &dyn TraceStore,
    place: &dyn Fn(&str) -> Option<usize>,
    numbers: &ToolNumbers,
    visit: &mut VisitSequence<'_>,
) -> Result<()> {
    // The trace being read and its place (None: not visited).
    let mut current: Option<(String, Option<usize>)> = None;
    let mut sequence: Vec<u32> = Vec::new();
    let mut first_started: Option<Timestamp> = None;
    let mut finish = |current: &Option<(String, Option<usize>)>,
                      sequence: &mut Vec<u32>,
                      first_started: &mut Option<Timestamp>| {
        if let Some((_, Some(at))) = current {
            visit(*at, sequence, *first_started);
        }
        sequence.clear();
        *first_started = None;
    };
    store.for_each_step_tool(&mut |step| {
        if current.as_ref().is_none_or(|(id, _)| id != step.trace_id) {
            finish(&current, &mut sequence, &mut first_started);
            current = Some((step.trace_id.to_owned(), place(step.trace_id)));
        }
        if current.as_ref().is_some_and(|(_, at)| at.is_some()) {
            sequence.push(numbers.of(step.tool_name));
            if first_started.is_none() {
                first_started = step.started_at;
            }
        }
        Ok(())
    })?;
    finish(&current, &mut sequence, &mut first_started);
    Ok(())
}

/// What one pass over the mined traces' tool names says about them as a whole.
#[cfg(feature = "datafusion")]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ToolTotals {
    /// Steps of the mined traces.
    pub(crate) steps: u64,
    /// Their distinct tools in order of first appearance (storage order): the order in which
    /// the in-process miner numbers tools, which breaks its ranking's ties.
    pub(crate) first_seen: Vec<String>,
}

/// [`ToolTotals`] of the traces `mined` says are mined (by id).
#[cfg(feature = "datafusion")]
pub(crate) fn tool_totals(
    store: &dyn TraceStore,
    mined: &dyn Fn(&str) -> bool,
) -> Result<ToolTotals> {
    let mut totals = ToolTotals::default();
    let mut seen: std::collections::HashSet<String> = Default::default();
    // The trace being read, and whether it is mined.
    let mut current: Option<(String, bool)> = None;
    store.for_each_step_tool(&mut |step| {
        if current.as_ref().is_none_or(|(id, _)| id != step.trace_id) {
            current = Some((step.trace_id.to_owned(), mined(step.trace_id)));
        }
        if current.as_ref().is_some_and(|(_, is_mined)| *is_mined) {
            totals.steps += 1;
            if !seen.contains(step.tool_name) {
                seen.insert(step.tool_name.to_owned());
                totals.first_seen.push(step.tool_name.to_owned());
            }
        }
        Ok(())
    })?;
    Ok(totals)
}
