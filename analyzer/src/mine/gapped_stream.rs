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

use chainweaver_recorder::model::candidate::Occurrence;
use chainweaver_recorder::store::TraceStore;

use super::{ChosenSample, greedy_gapped};
use crate::candidate::even_positions;
use crate::error::{AnalyzerError, Result};
use crate::tool_stream::{ToolNumbers, for_each_sequence};

/// What [`gapped_samples`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GappedLocated {
    /// Distinct traces holding each located pattern, by the day of the trace's first timed
    /// step, in the order the patterns were given.
    pub by_day: Vec<BTreeMap<String, u64>>,
    /// The first `chosen` located patterns' occurrence counts and samples.
    pub chosen: Vec<ChosenSample>,
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
    let numbers = ToolNumbers::new(located.iter().flatten().map(String::as_str));
    let patterns: Vec<Vec<u32>> = located.iter().map(|tools| numbers.spell(tools)).collect();
    let places: HashMap<&str, usize> = mined
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    let place = |id: &str| places.get(id).copied();

    // Pass 1: per chosen pattern, (trace, occurrences there); per located pattern, its traces
    // by day.
    let mut per_trace: Vec<Vec<(usize, usize)>> = vec![Vec::new(); chosen];
    let mut by_day: Vec<BTreeMap<String, u64>> = vec![BTreeMap::new(); located.len()];
    for_each_sequence(store, &place, &numbers, &mut |at, sequence, started| {
        let day = started.map(|t| t.format("%Y-%m-%d").to_string());
        for (i, items) in patterns.iter().enumerate() {
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
        // With no cap, or one past the total, every position is taken.
        let taken = even_positions(total, cap.map_or(total, |cap| cap.max(1)));
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
        for_each_sequence(store, &place, &numbers, &mut |at, sequence, _| {
            let Some(taken_here) = wanted.get(&at) else {
                return;
            };
            for (pattern, ordinals) in taken_here {
                let mut ordinal = 0;
                let mut taken = ordinals.iter().peekable();
                greedy_gapped(sequence, &patterns[*pattern], max_gap, &mut |steps| {
                    if taken.peek() == Some(&&ordinal) {
                        taken.next();
                        samples[*pattern].push(Occurrence { trace: at, steps });
                    }
                    ordinal += 1;
                });
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
