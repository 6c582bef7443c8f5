//! The occurrences of gapped patterns counted elsewhere (a query engine), found in two streamed
//! passes over a store's tool names, one trace in memory at a time.
//!
//! A gapped pattern's occurrences are matched greedily along each trace (leftmost first, none
//! overlapping: [`greedy_gapped`]), which is sequential work per trace rather than a join, so
//! it runs here while the engine does the counting. The first pass counts each chosen
//! pattern's occurrences per trace and dates the traces holding each located pattern; the
//! second reads again only the traces holding a sampled occurrence. What comes out is what the
//! in-process miner finds from its sequences: the same occurrences in the same order, and the
//! same evenly spread sample of them.

use std::collections::{BTreeMap, HashMap};

use chainweaver_recorder::model::Timestamp;
use chainweaver_recorder::model::candidate::Occurrence;
use chainweaver_recorder::store::TraceStore;

use super::{ChosenSample, greedy_gapped};
use crate::candidate::even_positions;
use crate::error::{AnalyzerError, Result};

/// What [`gapped_samples`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GappedLocated {
    /// Distinct traces holding each located pattern, by the day of the trace's first timed
    /// step, in the order the patterns were given.
    pub by_day: Vec<BTreeMap<String, u64>>,
    /// The first `chosen` located patterns' occurrence counts and samples.
    pub chosen: Vec<ChosenSample>,
}

/// The patterns' tools as small numbers: every tool of a located pattern has its own, every
/// other tool shares one.
struct Numbering {
    numbers: HashMap<String, u32>,
    patterns: Vec<Vec<u32>>,
    other: u32,
}

impl Numbering {
    fn new(located: &[Vec<String>]) -> Self {
        let mut numbers: HashMap<String, u32> = HashMap::new();
        let patterns = located
            .iter()
            .map(|tools| {
                tools
                    .iter()
                    .map(|tool| {
                        let next = numbers.len() as u32;
                        *numbers.entry(tool.clone()).or_insert(next)
                    })
                    .collect()
            })
            .collect();
        let other = numbers.len() as u32;
        Self {
            numbers,
            patterns,
            other,
        }
    }

    fn number(&self, tool: &str) -> u32 {
        self.numbers.get(tool).copied().unwrap_or(self.other)
    }
}

/// What [`each_mined_sequence`] calls for each mined trace: its place among the mined traces,
/// its tools and the start of its first timed step.
type VisitSequence<'a> = dyn FnMut(usize, &[u32], Option<Timestamp>) + 'a;

/// Visit each mined trace's tool sequence (numbered by `numbering`), with its place among
/// `mined` and the start of its first timed step. Traces not in `mined` (held out) are skipped.
fn each_mined_sequence(
    store: &dyn TraceStore,
    mined: &HashMap<&str, usize>,
    numbering: &Numbering,
    visit: &mut VisitSequence<'_>,
) -> Result<()> {
    // The trace being read: its place among the mined traces (None: not mined).
    let mut current: Option<(String, Option<usize>)> = None;
    let mut sequence: Vec<u32> = Vec::new();
    let mut first_started: Option<Timestamp> = None;
    let mut seen = vec![false; mined.len()];
    // A trace whose steps came in two runs (the store broke its promise), by id.
    let mut split_trace: Option<String> = None;
    let mut finish = |current: &Option<(String, Option<usize>)>,
                      sequence: &mut Vec<u32>,
                      first_started: &mut Option<Timestamp>| {
        if let Some((id, Some(at))) = current {
            if std::mem::replace(&mut seen[*at], true) {
                split_trace.get_or_insert_with(|| id.clone());
            } else {
                visit(*at, sequence, *first_started);
            }
        }
        sequence.clear();
        *first_started = None;
    };
    store.for_each_step_tool(&mut |step| {
        if current.as_ref().is_none_or(|(id, _)| id != step.trace_id) {
            finish(&current, &mut sequence, &mut first_started);
            current = Some((step.trace_id.to_owned(), mined.get(step.trace_id).copied()));
        }
        if current.as_ref().is_some_and(|(_, at)| at.is_some()) {
            sequence.push(numbering.number(step.tool_name));
            if first_started.is_none() {
                first_started = step.started_at;
            }
        }
        Ok(())
    })?;
    finish(&current, &mut sequence, &mut first_started);
    match split_trace {
        Some(trace_id) => Err(AnalyzerError::StoreChanged {
            trace_id,
            message: "its steps were not listed together".into(),
        }),
        None => Ok(()),
    }
}

/// The occurrences of the `located` gapped patterns (tool names, best-ranked first) among the
/// `mined` traces (ids in storage order; occurrences name traces by their place there), each
/// step at most `max_gap` steps after the previous: for each, its distinct traces per day, and
/// for the first `chosen` its occurrence count and the occurrences inference reads (all, or
/// `cap` spread evenly over them in storage order).
pub fn gapped_samples(
    store: &dyn TraceStore,
    mined: &[String],
    located: &[Vec<String>],
    chosen: usize,
    cap: Option<usize>,
    max_gap: usize,
) -> Result<GappedLocated> {
    let chosen = chosen.min(located.len());
    let numbering = Numbering::new(located);
    let places: HashMap<&str, usize> = mined
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();

    // Pass 1: per chosen pattern, (trace, occurrences there); per located pattern, its traces
    // by day.
    let mut per_trace: Vec<Vec<(usize, usize)>> = vec![Vec::new(); chosen];
    let mut by_day: Vec<BTreeMap<String, u64>> = vec![BTreeMap::new(); located.len()];
    each_mined_sequence(store, &places, &numbering, &mut |at, sequence, started| {
        let day = started.map(|t| t.format("%Y-%m-%d").to_string());
        for (i, items) in numbering.patterns.iter().enumerate() {
            let mut count = 0;
            greedy_gapped(sequence, items, max_gap, &mut |_| count += 1);
            if count == 0 {
                continue;
            }
            if let Some(day) = &day {
                *by_day[i].entry(day.clone()).or_default() += 1;
            }
            if i < chosen {
                per_trace[i].push((at, count));
            }
        }
    })?;

    // Which occurrences each pattern reads: by trace, the ordinals (within the trace) taken.
    let mut totals = Vec::with_capacity(chosen);
    let mut taken_counts = Vec::with_capacity(chosen);
    let mut wanted: HashMap<usize, Vec<(usize, Vec<usize>)>> = HashMap::new();
    for (pattern, traces) in per_trace.iter_mut().enumerate() {
        traces.sort_unstable();
        let total: usize = traces.iter().map(|&(_, n)| n).sum();
        totals.push(total);
        let taken: Box<dyn Iterator<Item = usize>> = match cap {
            Some(cap) if total > cap.max(1) => Box::new(even_positions(total, cap.max(1))),
            _ => Box::new(0..total),
        };
        // Walk the taken positions and the traces' cumulative counts together.
        let mut traces = traces.iter();
        let (mut trace, mut before, mut count) = (0, 0, 0);
        let mut taken_count = 0;
        for position in taken {
            taken_count += 1;
            while position >= before + count {
                before += count;
                match traces.next() {
                    Some(&(at, n)) => (trace, count) = (at, n),
                    None => {
                        return Err(AnalyzerError::StoreChanged {
                            trace_id: String::new(),
                            message: "fewer occurrences were found than counted".into(),
                        });
                    }
                }
            }
            let entry = wanted.entry(trace).or_default();
            match entry.iter_mut().find(|(p, _)| *p == pattern) {
                Some((_, ordinals)) => ordinals.push(position - before),
                None => entry.push((pattern, vec![position - before])),
            }
        }
        taken_counts.push(taken_count);
    }

    // Pass 2: the taken occurrences, from the traces holding them.
    let mut samples: Vec<Vec<Occurrence>> = vec![Vec::new(); chosen];
    if !wanted.is_empty() {
        each_mined_sequence(store, &places, &numbering, &mut |at, sequence, _| {
            let Some(patterns) = wanted.get(&at) else {
                return;
            };
            for (pattern, ordinals) in patterns {
                let mut ordinal = 0;
                let mut taken = ordinals.iter().peekable();
                greedy_gapped(
                    sequence,
                    &numbering.patterns[*pattern],
                    max_gap,
                    &mut |steps| {
                        if taken.peek() == Some(&&ordinal) {
                            taken.next();
                            samples[*pattern].push(Occurrence { trace: at, steps });
                        }
                        ordinal += 1;
                    },
                );
            }
        })?;
    }
    if samples
        .iter()
        .zip(&taken_counts)
        .any(|(s, &n)| s.len() != n)
    {
        return Err(AnalyzerError::StoreChanged {
            trace_id: String::new(),
            message: "a trace read again holds other steps than when its occurrences were counted"
                .into(),
        });
    }
    let chosen = samples
        .into_iter()
        .zip(totals)
        .zip(&by_day)
        .map(|((mut sample, total), by_day)| {
            // Storage order, as the in-process miner lists them.
            sample.sort_by(|a, b| (a.trace, &a.steps).cmp(&(b.trace, &b.steps)));
            ChosenSample {
                total,
                sample,
                support_by_day: by_day
                    .iter()
                    .map(|(day, n)| (day.clone(), usize::try_from(*n).unwrap_or(usize::MAX)))
                    .collect(),
            }
        })
        .collect();
    Ok(GappedLocated { by_day, chosen })
}
