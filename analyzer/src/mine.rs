//! The [`ChainAnalyzer`]: mining, binding inference and candidates in one pass over traces.
//!
//! Tool names are interned into a [`SequenceDb`](crate::spm::SequenceDb); the spm engine finds
//! the frequent (closed) tool sequences; the best-ranked ones become [`Pattern`]s with their
//! occurrences, and each pattern becomes a [`Candidate`] with inferred bindings and evidence.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chainweaver_recorder::model::TraceWithSteps;
use chainweaver_recorder::model::candidate::{Candidate, Occurrence, Pattern};
use serde::{Deserialize, Serialize};

use crate::candidate::{CandidateConfig, build_candidates};
use crate::error::Result;
use crate::spm::{self, ContiguousOptions, GappedOptions, SequenceDb, SequenceDbBuilder};

/// What to mine and how many candidates to propose.
#[derive(Debug, Clone, PartialEq)]
pub struct MineConfig {
    /// A pattern must appear in at least this many distinct traces.
    pub min_support: u32,
    /// Shortest pattern proposed (a flow of one step saves nothing).
    pub min_length: usize,
    /// Longest pattern considered.
    pub max_length: usize,
    /// `None`: contiguous sequences. `Some(n)`: up to `n` unrelated calls may sit between two
    /// steps of a pattern.
    pub max_gap: Option<usize>,
    /// At most this many patterns become candidates (the best-ranked first).
    pub max_candidates: usize,
    /// Support per day is computed for this many best-ranked patterns.
    pub max_dated_patterns: usize,
    pub candidate: CandidateConfig,
}

impl Default for MineConfig {
    fn default() -> Self {
        Self {
            min_support: 3,
            min_length: 2,
            max_length: 10,
            max_gap: None,
            max_candidates: 50,
            max_dated_patterns: 1000,
            candidate: CandidateConfig::default(),
        }
    }
}

/// A frequent tool sequence as the miner reports it, before candidates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatternSummary {
    pub tools: Vec<String>,
    /// Distinct traces containing it.
    pub support: u32,
    /// Occurrences in all (several per trace possible).
    pub occurrences: u64,
    /// `support x (length - 1)`.
    pub round_trips_saved: u64,
    /// Distinct supporting traces per UTC day (`YYYY-MM-DD`) the trace started, for traces with
    /// a start time; only for the best-ranked patterns (`MineConfig::max_dated_patterns`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub support_by_day: BTreeMap<String, u64>,
}

/// Distinct traces per day among `trace_indices` (which may repeat).
fn support_by_day(
    traces: &[TraceWithSteps],
    trace_indices: impl Iterator<Item = usize>,
) -> BTreeMap<String, u64> {
    let mut seen = std::collections::HashSet::new();
    let mut days = BTreeMap::new();
    for index in trace_indices {
        if !seen.insert(index) {
            continue;
        }
        let trace = &traces[index];
        let started = trace
            .trace
            .started_at
            .or_else(|| trace.steps.iter().find_map(|s| s.started_at));
        if let Some(started) = started {
            *days
                .entry(started.format("%Y-%m-%d").to_string())
                .or_insert(0) += 1;
        }
    }
    days
}

/// Everything one analysis produced.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MineOutcome {
    pub traces: usize,
    pub steps: usize,
    pub distinct_tools: usize,
    /// Closed frequent patterns of at least `min_length` tools, best-ranked first.
    pub patterns: Vec<PatternSummary>,
    /// Candidates, highest score first.
    pub candidates: Vec<Candidate>,
    /// Patterns that could not become candidates, with the reason.
    pub skipped: Vec<(Vec<String>, String)>,
    pub mining_time: Duration,
    pub inference_time: Duration,
}

/// Finds repeated tool sequences and proposes them as flows.
#[derive(Debug, Clone, Default)]
pub struct ChainAnalyzer {
    pub config: MineConfig,
}

impl ChainAnalyzer {
    pub fn new(config: MineConfig) -> Self {
        Self { config }
    }

    /// The interned tool sequences of `traces`, one sequence a trace.
    pub fn sequence_db(traces: &[TraceWithSteps]) -> Result<SequenceDb> {
        let mut builder = SequenceDbBuilder::new();
        for trace in traces {
            builder.push_sequence(trace.steps.iter().map(|s| s.tool_name.as_str()))?;
        }
        Ok(builder.finish())
    }

    /// Mine `traces` and propose candidates.
    pub fn analyze(&self, traces: &[TraceWithSteps]) -> Result<MineOutcome> {
        let config = &self.config;
        let started = Instant::now();
        let db = Self::sequence_db(traces)?;
        let mut found: Vec<(Vec<u32>, u32, u64)> = match config.max_gap {
            None => {
                let options = ContiguousOptions {
                    min_support: config.min_support.max(1),
                    min_length: config.min_length.max(1),
                    max_length: Some(config.max_length.max(1)),
                    closed_only: true,
                };
                spm::contiguous::mine(&db, &options)?
                    .into_iter()
                    .map(|p| (p.items, p.support, p.occurrences))
                    .collect()
            }
            Some(max_gap) => {
                let options = GappedOptions {
                    min_support: config.min_support.max(1),
                    min_length: config.min_length.max(1),
                    max_length: Some(config.max_length.max(1)),
                    max_gap: Some(u32::try_from(max_gap).unwrap_or(u32::MAX)),
                };
                let patterns = spm::gapped::mine(&db, &options)?;
                closed_gapped(patterns.into_iter().map(|p| (p.items, p.support)).collect())
                    .into_iter()
                    .map(|(items, support)| (items, support, u64::from(support)))
                    .collect()
            }
        };
        found.retain(|(items, _, _)| items.len() >= config.min_length);
        // Rank by the model round trips a flow would save, then by length, then by name.
        found.sort_by(|a, b| {
            let saved = |p: &(Vec<u32>, u32, u64)| u64::from(p.1) * (p.0.len() as u64 - 1);
            saved(b)
                .cmp(&saved(a))
                .then(b.0.len().cmp(&a.0.len()))
                .then(a.0.cmp(&b.0))
        });
        let names = |items: &[u32]| -> Vec<String> {
            items.iter().map(|&id| db.name(id).to_string()).collect()
        };
        // Occurrences, found once, for the patterns worth browsing (support per day) and the
        // best-ranked of those, which become candidates.
        let located: Vec<&Vec<u32>> = found
            .iter()
            .take(config.max_dated_patterns.max(config.max_candidates))
            .map(|(items, _, _)| items)
            .collect();
        let mut occurrence_lists = pattern_occurrences(&db, &located, config.max_gap);
        let mut by_day: Vec<BTreeMap<String, u64>> = occurrence_lists
            .iter()
            .take(config.max_dated_patterns)
            .map(|list| support_by_day(traces, list.iter().map(|o| o.trace)))
            .collect();
        by_day.resize(found.len(), BTreeMap::new());
        let patterns: Vec<PatternSummary> = found
            .iter()
            .zip(by_day)
            .map(
                |((items, support, occurrences), support_by_day)| PatternSummary {
                    tools: names(items),
                    support: *support,
                    occurrences: *occurrences,
                    round_trips_saved: u64::from(*support) * (items.len() as u64 - 1),
                    support_by_day,
                },
            )
            .collect();
        let mining_time = started.elapsed();

        let started = Instant::now();
        occurrence_lists.truncate(config.max_candidates);
        let chosen = &located[..occurrence_lists.len()];
        let chosen_patterns: Vec<Pattern> = chosen
            .iter()
            .zip(occurrence_lists)
            .map(|(items, occurrences)| {
                let mut pattern = Pattern::new(names(items), occurrences);
                pattern.gapped = config.max_gap.is_some_and(|gap| gap > 0);
                pattern
            })
            .collect();
        let mut candidates = Vec::new();
        let mut skipped = Vec::new();
        let built = build_candidates(traces, &chosen_patterns, &config.candidate);
        for (pattern, built) in chosen_patterns.iter().zip(built) {
            match built {
                Ok(candidate) => candidates.push(candidate),
                Err(err) => skipped.push((pattern.tools.clone(), err.to_string())),
            }
        }
        candidates.sort_by(|a, b| {
            b.evidence
                .score
                .total_cmp(&a.evidence.score)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(MineOutcome {
            traces: traces.len(),
            steps: db.num_steps(),
            distinct_tools: db.num_items(),
            patterns,
            candidates,
            skipped,
            mining_time,
            inference_time: started.elapsed(),
        })
    }
}

/// The occurrences of each pattern: contiguous positions, or (with a gap) the leftmost
/// non-overlapping matches.
fn pattern_occurrences(
    db: &SequenceDb,
    patterns: &[&Vec<u32>],
    max_gap: Option<usize>,
) -> Vec<Vec<Occurrence>> {
    match max_gap {
        None => spm::contiguous::occurrences(db, patterns)
            .into_iter()
            .zip(patterns)
            .map(|(list, items)| {
                list.into_iter()
                    .map(|o| Occurrence {
                        trace: o.sequence as usize,
                        steps: (o.start as usize..o.start as usize + items.len()).collect(),
                    })
                    .collect()
            })
            .collect(),
        Some(max_gap) => patterns
            .iter()
            .map(|items| gapped_occurrences(db, items, max_gap))
            .collect(),
    }
}

/// Keep the closed gapped patterns: drop one when a longer pattern that contains it as a
/// subsequence has the same support.
fn closed_gapped(mut patterns: Vec<(Vec<u32>, u32)>) -> Vec<(Vec<u32>, u32)> {
    patterns.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
    let mut kept: Vec<(Vec<u32>, u32)> = Vec::new();
    for (items, support) in patterns {
        let absorbed = kept.iter().any(|(longer, longer_support)| {
            *longer_support == support
                && longer.len() > items.len()
                && is_subsequence(&items, longer)
        });
        if !absorbed {
            kept.push((items, support));
        }
    }
    kept
}

fn is_subsequence(short: &[u32], long: &[u32]) -> bool {
    let mut rest = long.iter();
    short.iter().all(|item| rest.any(|other| other == item))
}

/// Non-overlapping occurrences of `items` in every sequence, each step at most `max_gap`
/// positions after the previous one, leftmost first.
fn gapped_occurrences(db: &SequenceDb, items: &[u32], max_gap: usize) -> Vec<Occurrence> {
    let mut out = Vec::new();
    for (index, sequence) in db.sequences().enumerate() {
        let mut from = 0;
        while from < sequence.len() {
            let Some(start) = sequence[from..]
                .iter()
                .position(|&x| x == items[0])
                .map(|p| p + from)
            else {
                break;
            };
            match match_from(sequence, items, start, max_gap) {
                Some(steps) => {
                    from = steps[steps.len() - 1] + 1;
                    out.push(Occurrence {
                        trace: index,
                        steps,
                    });
                }
                None => from = start + 1,
            }
        }
    }
    out
}

fn match_from(sequence: &[u32], items: &[u32], start: usize, max_gap: usize) -> Option<Vec<usize>> {
    let mut steps = vec![start];
    let mut position = start;
    for &item in &items[1..] {
        let end = (position + 2 + max_gap).min(sequence.len());
        let next = (position + 1..end).find(|&p| sequence[p] == item)?;
        steps.push(next);
        position = next;
    }
    Some(steps)
}
