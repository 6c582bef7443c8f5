//! The occurrences of patterns counted elsewhere (a query engine), found in two streamed passes
//! over a store's tool names, one trace in memory at a time.
//!
//! An engine counts; where it cannot also return the occurrences inference reads, they are
//! found here. A gapped pattern's occurrences are matched greedily along each trace (leftmost
//! first, none overlapping: [`greedy_gapped`]), which is sequential work per trace rather than a
//! join. A cluster's executors see only the plan, not the list of mined traces this process
//! holds, so a contiguous pattern counted there is located here too (every start where the
//! tools follow one another, overlapping ones included). The first pass counts each chosen
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

/// How a pattern's steps sit in a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Matching {
    /// One after another; occurrences may overlap.
    Contiguous,
    /// Each step at most `max_gap` steps after the previous; occurrences matched greedily,
    /// leftmost first, none overlapping.
    Gapped { max_gap: usize },
}

impl Matching {
    /// Visit the occurrences of `items` in `sequence`, in order, as their step positions.
    fn visit(self, sequence: &[u32], items: &[u32], found: &mut dyn FnMut(Vec<usize>)) {
        match self {
            Matching::Contiguous => {
                if items.is_empty() {
                    return;
                }
                for (start, window) in sequence.windows(items.len()).enumerate() {
                    if window == items {
                        found((start..start + items.len()).collect());
                    }
                }
            }
            Matching::Gapped { max_gap } => greedy_gapped(sequence, items, max_gap, found),
        }
    }
}

/// What [`streamed_samples`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamedLocated {
    /// Distinct traces holding each located pattern, by the day of the trace's first timed
    /// step, in the order the patterns were given.
    pub by_day: Vec<BTreeMap<String, u64>>,
    /// The first `chosen` located patterns' occurrence counts and samples.
    pub chosen: Vec<ChosenSample>,
}

/// The occurrences of the `located` patterns (tool names, best-ranked first) among the `mined`
/// traces (ids in storage order; occurrences name traces by their place there), matched as
/// `matching` says: for each, its distinct traces per day, and for the first `chosen` its
/// occurrence count and the occurrences inference reads (all, or `cap` spread evenly over them
/// in storage order).
pub fn streamed_samples(
    store: &dyn TraceStore,
    mined: &[String],
    located: &[Vec<String>],
    chosen: usize,
    cap: Option<usize>,
    matching: Matching,
) -> Result<StreamedLocated> {
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
            matching.visit(sequence, items, &mut |_| count += 1);
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
                matching.visit(sequence, &patterns[*pattern], &mut |steps| {
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
    Ok(StreamedLocated { by_day, chosen })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spm::{SequenceDb, contiguous};
    use chainweaver_recorder::model::split::Split;

    /// Streamed, the occurrences and samples are the ones the in-process miner takes from its
    /// sequences: contiguous ones overlapping where a tool repeats, gapped ones greedily.
    #[test]
    fn streamed_occurrences_are_the_in_process_ones() {
        let dir = tempfile::tempdir().unwrap();
        let (store, traffic) = crate::test_traffic::stored_traffic(dir.path(), 11);
        let split = Split::Holdout { percent: 25 };
        let mined: Vec<String> = traffic
            .iter()
            .map(|t| t.trace.trace_id.clone())
            .filter(|id| !split.is_holdout(id))
            .collect();
        let db = SequenceDb::from_sequences(
            traffic
                .iter()
                .filter(|t| !split.is_holdout(&t.trace.trace_id))
                .map(|t| t.steps.iter().map(|s| s.tool_name.as_str())),
        )
        .unwrap();
        // Every pair and triple of the first mined trace, and each tool twice in a row.
        let first: Vec<u32> = db.sequence(0).to_vec();
        let mut patterns: Vec<Vec<u32>> = first.windows(2).map(<[u32]>::to_vec).collect();
        patterns.extend(first.windows(3).map(<[u32]>::to_vec));
        patterns.extend((0..db.num_items() as u32).map(|id| vec![id, id]));
        patterns.dedup();
        let named: Vec<Vec<String>> = patterns
            .iter()
            .map(|p| p.iter().map(|&id| db.name(id).to_string()).collect())
            .collect();
        let cap = Some(7);

        let in_process = contiguous::occurrences(&db, &patterns);
        let streamed = streamed_samples(
            &store,
            &mined,
            &named,
            patterns.len(),
            cap,
            Matching::Contiguous,
        )
        .unwrap();
        let mut overlapping = 0;
        for ((pattern, expected), found) in patterns.iter().zip(&in_process).zip(&streamed.chosen) {
            assert_eq!(found.total, expected.len(), "{pattern:?}");
            let sample: Vec<Occurrence> = even_positions(expected.len(), 7)
                .map(|i| Occurrence {
                    trace: expected[i].sequence as usize,
                    steps: (expected[i].start as usize..expected[i].start as usize + pattern.len())
                        .collect(),
                })
                .collect();
            assert_eq!(found.sample, sample, "{pattern:?}");
            overlapping += expected
                .windows(2)
                .filter(|w| w[0].sequence == w[1].sequence && w[1].start == w[0].start + 1)
                .count();
        }
        assert!(overlapping > 0, "no overlapping occurrence was exercised");

        for max_gap in [1, 3] {
            let streamed = streamed_samples(
                &store,
                &mined,
                &named,
                patterns.len(),
                None,
                Matching::Gapped { max_gap },
            )
            .unwrap();
            for (pattern, found) in patterns.iter().zip(&streamed.chosen) {
                let expected = super::super::gapped_occurrences(&db, pattern, max_gap);
                assert_eq!(found.total, expected.len(), "{pattern:?} gap {max_gap}");
                assert_eq!(found.sample, expected, "{pattern:?} gap {max_gap}");
            }
        }
    }
}
