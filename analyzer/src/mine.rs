//! The [`ChainAnalyzer`]: mining, binding inference and candidates in one pass over traces.
//!
//! Tool names are interned into a [`SequenceDb`]; the spm engine finds
//! the frequent (closed) tool sequences; the best-ranked ones become [`Pattern`]s with their
//! occurrences, and each pattern becomes a [`Candidate`] with inferred bindings and evidence.

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use chainweaver_recorder::model::candidate::{
    Candidate, InferenceSample, Occurrence, Pattern, PatternSummary,
};
use chainweaver_recorder::model::split::Split;
use chainweaver_recorder::model::{Timestamp, TraceWithSteps};
use chainweaver_recorder::store::{
    SequenceSteps, StepRows, TraceFilter, TraceStore, tool_sequences,
};
use serde::{Deserialize, Serialize};

use crate::candidate::{
    Built, CandidateConfig, Probe, ReadOccurrences, build_candidates_profiled, build_if_unlinked,
    build_whole, each_in_parallel, even_positions, occurrence_profiles, probe_sample,
};
use crate::error::{AnalyzerError, Result};
use crate::parallel;
use crate::spm::{self, ContiguousOptions, GappedOptions, SequenceDb, SequenceDbBuilder};

mod occurrence_stream;
pub use occurrence_stream::{Matching, StreamedLocated, streamed_samples};

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
    /// Binding inference for a candidate reads at most this many of its pattern's occurrences,
    /// spread evenly over all of them (`None`: every occurrence). Default: 1,000, which keeps
    /// inference time flat however large the traffic (a share estimated from 1,000 evenly
    /// spaced occurrences is within about 2.5 points of the full share, 95% of the time).
    ///
    /// When a pattern is sampled: support, occurrence counts, round trips saved and support per
    /// day stay the full figures and the score is scaled to them; bindings' confidences, the
    /// success rate, determinism, schemas and the occurrence references come from the sample
    /// (tools are then profiled over the calls inference reads: for the probe, the probes' calls
    /// of every probed pattern; for the rest, the calls of the samples the probe let through and
    /// of the patterns too small to probe), and the candidate's metadata says
    /// `sampled_occurrences`. Patterns with fewer occurrences are read whole and come out exactly
    /// as without a cap. Overrides
    /// [`StreamConfig::max_occurrences_per_pattern`] when set.
    pub max_inference_occurrences: Option<usize>,
    /// A pattern with more occurrences than this is first probed: its bindings are inferred on
    /// this many of its (sampled) occurrences, spread evenly, and when a step then shows no
    /// link to any other step even at a loose bar (no source or runner-up reading or read by
    /// another step in half the occurrences), the candidate is built from the probe alone.
    /// Default: 64.
    ///
    /// Such a pattern is a flow padded with an unrelated call (an agent's `think` before or
    /// after it) or tools that merely follow each other: its data flow is below 1, it ranks
    /// below the flow it contains, and `verify` rejects it by default, so inference effort goes
    /// to the patterns that can be promoted. A link holding in 80% of the occurrences (the
    /// binding bar) shows in under half of 64 evenly spaced ones about once in a billion. The
    /// candidate's metadata lists the steps as `unlinked_in_probe`, and `sampled_occurrences`
    /// says what was read. `None`: no probe.
    pub probe_occurrences: Option<usize>,
}

/// Tuning of [`ChainAnalyzer::analyze_store`], the streaming path.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamConfig {
    /// Which traces of the store to analyse.
    pub filter: TraceFilter,
    /// Traces loaded whole for binding inference: at most this many occurrences of each
    /// candidate pattern, spread evenly over all of them (`None`: every occurrence, which loads
    /// every trace holding one). Used only when [`MineConfig::max_inference_occurrences`] is
    /// `None` (its default, 1,000, wins otherwise); see there for what the sample changes.
    /// Default: 2,000.
    pub max_occurrences_per_pattern: Option<usize>,
    /// Leave out the traces this split holds out (for verification to replay); `None` mines
    /// every trace the filter passes.
    pub split: Option<Split>,
    /// When no pattern is sampled and the mined traces hold at most this many steps, every
    /// mined trace is loaded and tools are profiled over all their calls, exactly as
    /// [`ChainAnalyzer::analyze`] does; above it only the traces of the occurrences are read.
    /// Default: 1,000,000.
    pub profile_every_call_up_to: usize,
}

impl Default for StreamConfig {
    fn default() -> Self {
        Self {
            filter: TraceFilter::default(),
            max_occurrences_per_pattern: Some(2_000),
            split: None,
            profile_every_call_up_to: 1_000_000,
        }
    }
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
            max_inference_occurrences: Some(1_000),
            probe_occurrences: Some(64),
        }
    }
}

/// The UTC day each trace started on, as an index into a table of `YYYY-MM-DD` names, so
/// support per day is counted without formatting a date per occurrence.
#[derive(Debug, Default)]
struct TraceDays {
    /// Per trace: index into `names`, `u32::MAX` when the trace carries no start time.
    day_of: Vec<u32>,
    names: Vec<String>,
}

const NO_DAY: u32 = u32::MAX;

impl TraceDays {
    /// Days of in-memory traces: the trace's `started_at`, else its first step's.
    fn from_traces(traces: &[TraceWithSteps]) -> Self {
        Self::from_starts(traces.iter().map(|trace| {
            trace
                .trace
                .started_at
                .or_else(|| trace.steps.iter().find_map(|s| s.started_at))
        }))
    }

    fn from_starts(starts: impl Iterator<Item = Option<Timestamp>>) -> Self {
        let mut days = Self::default();
        let mut ids = HashMap::new();
        for started in starts {
            let id = match started {
                Some(started) => *ids.entry(started.date_naive()).or_insert_with(|| {
                    days.names.push(started.format("%Y-%m-%d").to_string());
                    days.names.len() as u32 - 1
                }),
                None => NO_DAY,
            };
            days.day_of.push(id);
        }
        days
    }

    /// Distinct traces per day for each list of occurrences (given by their traces), in order.
    fn support_by_day<L, T>(&self, lists: L) -> Vec<BTreeMap<String, u64>>
    where
        L: IntoIterator<Item = T>,
        T: IntoIterator<Item = usize>,
    {
        // `seen[trace]` holds the number (plus one) of the last list that counted the trace.
        let mut seen = vec![0u32; self.day_of.len()];
        let mut counts = vec![0u64; self.names.len()];
        let mut touched = Vec::new();
        let mut out = Vec::new();
        for (number, list) in lists.into_iter().enumerate() {
            let mark = number as u32 + 1;
            for trace in list {
                let Some(slot) = seen.get_mut(trace) else {
                    continue;
                };
                if *slot == mark {
                    continue;
                }
                *slot = mark;
                let day = self.day_of[trace];
                if day != NO_DAY {
                    if counts[day as usize] == 0 {
                        touched.push(day);
                    }
                    counts[day as usize] += 1;
                }
            }
            let mut by_day = BTreeMap::new();
            for day in touched.drain(..) {
                by_day.insert(
                    self.names[day as usize].clone(),
                    std::mem::take(&mut counts[day as usize]),
                );
            }
            out.push(by_day);
        }
        out
    }
}

/// [`TraceDays::support_by_day`] of `lists` (each seen as its traces by `traces`), the lists
/// split between `threads` threads.
fn support_by_day_threaded<'l, L, T>(
    days: &TraceDays,
    lists: &'l [L],
    threads: usize,
    traces: impl Fn(&'l L) -> T + Sync,
) -> Vec<BTreeMap<String, u64>>
where
    L: Sync,
    T: Iterator<Item = usize>,
{
    let chunks: Vec<&'l [L]> = lists.chunks(lists.len().div_ceil(threads).max(1)).collect();
    parallel::map(&chunks, threads, |chunk| {
        days.support_by_day(chunk.iter().map(&traces))
    })
    .into_iter()
    .flatten()
    .collect()
}

/// What mining found, before candidates.
struct Mined {
    /// Closed frequent patterns, best-ranked first.
    patterns: Vec<PatternSummary>,
    /// Interned tools of the first `max_candidates` patterns, with their occurrences.
    chosen: Vec<(Vec<u32>, Located)>,
}

/// Patterns counted outside the analyzer, with sampled occurrences of the best-ranked, for
/// [`ChainAnalyzer::candidates_from_counts`].
#[derive(Debug, Clone, Default)]
pub struct CountedElsewhere {
    /// The mined traces' ids, in storage order; occurrences name traces by their place here.
    pub mined: Vec<String>,
    pub held_out_traces: usize,
    /// Steps of the mined traces, and their distinct tools.
    pub steps: usize,
    pub distinct_tools: usize,
    /// The patterns, best-ranked first.
    pub patterns: Vec<PatternSummary>,
    /// Occurrences of the first `chosen.len()` patterns, which become candidates.
    pub chosen: Vec<ChosenSample>,
    pub mining_time: Duration,
}

/// A pattern's occurrence count and the occurrences inference reads (traces named by their
/// place among the mined ones), every one or at most [`inference_cap`] spread evenly (the first
/// at or past each of that many even marks, as the in-process miner samples), in storage order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChosenSample {
    pub total: usize,
    pub sample: Vec<Occurrence>,
    /// Distinct traces holding an occurrence, by the day of each trace's first timed step.
    pub support_by_day: BTreeMap<String, usize>,
}

/// How many occurrences of a pattern binding inference reads at most (`None`: all).
pub fn inference_cap(config: &MineConfig, stream: &StreamConfig) -> Option<usize> {
    config
        .max_inference_occurrences
        .or(stream.max_occurrences_per_pattern)
}

/// Everything one analysis produced. Durations serialize as seconds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MineOutcome {
    /// Traces mined.
    pub traces: usize,
    /// Traces the split held out of mining (streaming path only).
    #[serde(default)]
    pub held_out_traces: usize,
    pub steps: usize,
    pub distinct_tools: usize,
    /// Closed frequent patterns of at least `min_length` tools, best-ranked first.
    pub patterns: Vec<PatternSummary>,
    /// Candidates, highest score first.
    pub candidates: Vec<Candidate>,
    /// Patterns that could not become candidates, with the reason.
    pub skipped: Vec<(Vec<String>, String)>,
    #[serde(with = "seconds")]
    pub mining_time: Duration,
    #[serde(with = "seconds")]
    pub inference_time: Duration,
    /// Time spent reading a store ([`ChainAnalyzer::analyze_store`]); zero for in-memory input.
    #[serde(default, with = "seconds")]
    pub load_time: Duration,
}

/// A duration as a number of seconds, the way every JSON output of the project writes one.
mod seconds {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(duration.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        let seconds = f64::deserialize(deserializer)?;
        Duration::try_from_secs_f64(seconds).map_err(serde::de::Error::custom)
    }
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
        let steps: usize = traces.iter().map(|t| t.steps.len()).sum();
        let threads = parallel::mining_threads(steps);
        // Consecutive chunks interned on their own threads, then appended in order: the same
        // ids as one pass (reading every step's name is what costs, not the merge).
        let chunks: Vec<&[TraceWithSteps]> = traces
            .chunks(traces.len().div_ceil(threads).max(1))
            .collect();
        let built = parallel::map(&chunks, threads, |chunk| {
            let mut builder = SequenceDbBuilder::new();
            for trace in *chunk {
                builder.push_sequence(trace.steps.iter().map(|s| s.tool_name.as_str()))?;
            }
            Ok::<_, AnalyzerError>(builder)
        });
        let mut builder = SequenceDbBuilder::new();
        for chunk in built {
            builder.append(chunk?)?;
        }
        Ok(builder.finish())
    }

    /// Mine `traces` and propose candidates.
    pub fn analyze(&self, traces: &[TraceWithSteps]) -> Result<MineOutcome> {
        let config = &self.config;
        let started = Instant::now();
        let db = Self::sequence_db(traces)?;
        let days = TraceDays::from_traces(traces);
        let mined = self.mine_db(&db, &days)?;
        let mining_time = started.elapsed();

        let started = Instant::now();
        let chosen = self.chosen_patterns(&db, mined.chosen, config.max_inference_occurrences);
        // With a sample, tools are profiled over the calls it reads (as the streaming path
        // does), so inference costs the same however large the traffic.
        let sampled = chosen.iter().any(|c| c.sampled);
        let (mut candidates, skipped) = build_chosen(
            &StepSource::InMemory(traces),
            chosen,
            &days,
            config,
            sampled,
        )?;
        crate::loops::add_loop_candidates(&mut candidates, &db, config.max_gap.unwrap_or(0));
        Ok(MineOutcome {
            traces: traces.len(),
            held_out_traces: 0,
            steps: db.num_steps(),
            distinct_tools: db.num_items(),
            patterns: mined.patterns,
            candidates,
            skipped,
            mining_time,
            inference_time: started.elapsed(),
            load_time: Duration::ZERO,
        })
    }

    /// Mine the traces of a store without holding their payloads: the tool sequences come from
    /// the store's slim step columns ([`TraceStore::step_columns`], no inputs or outputs), and
    /// only the traces holding the sampled occurrences of the patterns that become candidates
    /// are then loaded whole ([`TraceStore::get_trace`]).
    ///
    /// Over the same traces it proposes what [`ChainAnalyzer::analyze`] proposes when no
    /// pattern is sampled and the store is small ([`StreamConfig::profile_every_call_up_to`]).
    /// Otherwise, as documented in [`StreamConfig`]: binding inference, tool profiles and the
    /// candidate's occurrence references read the sample; support, occurrence counts, round
    /// trips saved and support per day are the full figures and the score is scaled to the full
    /// round trips saved. A trace is dated by its first timed step; with a filter, traces
    /// without a matching step are not counted.
    pub fn analyze_store(
        &self,
        store: &dyn TraceStore,
        stream: &StreamConfig,
    ) -> Result<MineOutcome> {
        let config = &self.config;
        let started = Instant::now();
        let Sequences {
            db,
            trace_ids,
            rows,
            days,
            held_out_traces,
        } = read_sequences(store, stream)?;
        let load_columns = started.elapsed();

        let started = Instant::now();
        let mined = self.mine_db(&db, &days)?;
        let mining_time = started.elapsed();

        let started = Instant::now();
        let chosen = self.chosen_patterns(&db, mined.chosen, inference_cap(config, stream));
        let mined_traces = MinedTraces {
            trace_ids: &trace_ids,
            rows: &rows,
            steps: db.num_steps(),
        };
        let ((mut candidates, skipped), loading) =
            build_from_store(store, stream, &mined_traces, chosen, &days, config, started)?;
        let load_time = load_columns + loading;
        crate::loops::add_loop_candidates(&mut candidates, &db, config.max_gap.unwrap_or(0));
        Ok(MineOutcome {
            traces: db.len(),
            held_out_traces,
            steps: db.num_steps(),
            distinct_tools: db.num_items(),
            patterns: mined.patterns,
            candidates,
            skipped,
            mining_time,
            inference_time: started.elapsed().saturating_sub(loading),
            load_time,
        })
    }

    /// Candidates for patterns counted elsewhere (a query engine over the store's step
    /// columns), from the occurrences it sampled: the rest is [`ChainAnalyzer::analyze_store`]'s,
    /// with the same rules for what is loaded and how tools are profiled, and loop candidates'
    /// runs counted in one pass over the mined traces' tool names. Where a sample stands for a
    /// pattern, its support per day is the one counted with the pattern.
    pub fn candidates_from_counts(
        &self,
        store: &dyn TraceStore,
        counted: CountedElsewhere,
        stream: &StreamConfig,
    ) -> Result<MineOutcome> {
        let config = &self.config;
        let started = Instant::now();
        let CountedElsewhere {
            mined,
            held_out_traces,
            steps,
            distinct_tools,
            patterns,
            chosen,
            mining_time,
        } = counted;
        let chosen: Vec<ChosenPattern> = patterns
            .iter()
            .zip(chosen)
            .map(|(pattern, found)| {
                let mut sample = Pattern::new(pattern.tools.clone(), found.sample);
                sample.gapped = config.max_gap.is_some_and(|gap| gap > 0);
                ChosenPattern {
                    sampled: sample.occurrences.len() < found.total,
                    sample,
                    total: found.total,
                    support: pattern.support as usize,
                    traces: Vec::new(),
                    support_by_day: Some(found.support_by_day),
                }
            })
            .collect();
        if let Some(beyond) = chosen
            .iter()
            .flat_map(|c| &c.sample.occurrences)
            .find(|o| o.trace >= mined.len())
        {
            return Err(AnalyzerError::StoreChanged {
                trace_id: String::new(),
                message: format!(
                    "an occurrence names trace {} of {} mined",
                    beyond.trace,
                    mined.len()
                ),
            });
        }
        let mined_traces = MinedTraces {
            trace_ids: &mined,
            rows: &[],
            steps,
        };
        let days = TraceDays::default();
        let ((mut candidates, skipped), loading) =
            build_from_store(store, stream, &mined_traces, chosen, &days, config, started)?;
        let max_gap = config.max_gap.unwrap_or(0);
        let shapes = crate::loops::loop_shapes(&candidates, max_gap);
        let split = stream.split;
        let keep = move |id: &str| !split.is_some_and(|split| split.is_holdout(id));
        let runs = crate::loops::count_runs_in_store(store, &keep, &shapes)?;
        crate::loops::add_loop_candidates_counted(&mut candidates, max_gap, &|shape| {
            shapes
                .iter()
                .position(|s| s == shape)
                .map(|i| runs[i].clone())
                .unwrap_or_default()
        });
        Ok(MineOutcome {
            traces: mined.len(),
            held_out_traces,
            steps,
            distinct_tools,
            patterns,
            candidates,
            skipped,
            mining_time,
            inference_time: started.elapsed().saturating_sub(loading),
            load_time: loading,
        })
    }

    /// Mine the interned sequences: closed frequent patterns, ranked, with support per day for
    /// the best-ranked and occurrences for those that become candidates.
    fn mine_db(&self, db: &SequenceDb, days: &TraceDays) -> Result<Mined> {
        let config = &self.config;
        let mut found: Vec<(Vec<u32>, u32, u64)> = match config.max_gap {
            None => {
                let options = ContiguousOptions {
                    min_support: config.min_support.max(1),
                    min_length: config.min_length.max(1),
                    max_length: Some(config.max_length.max(1)),
                    closed_only: true,
                };
                spm::contiguous::mine(db, &options)?
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
                let patterns = spm::gapped::mine(db, &options)?;
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
        // Occurrences, found once, for the patterns worth browsing (support per day) and the
        // best-ranked of those, which become candidates.
        let located: Vec<&Vec<u32>> = found
            .iter()
            .take(config.max_dated_patterns.max(config.max_candidates))
            .map(|(items, _, _)| items)
            .collect();
        let dated = located.len().min(config.max_dated_patterns);
        let threads = parallel::mining_threads(db.num_steps());
        // Only the candidates' occurrences are spelled out step by step; the rest are needed
        // for their traces alone.
        let (mut by_day, occurrence_lists): (_, Vec<Located>) = match config.max_gap {
            None => {
                let mut lists = spm::contiguous::occurrences(db, &located);
                let by_day = support_by_day_threaded(days, &lists[..dated], threads, |list| {
                    list.iter().map(|o| o.sequence as usize)
                });
                lists.truncate(config.max_candidates);
                let chosen = lists
                    .into_iter()
                    .zip(&located)
                    .map(|(list, items)| Located::Contiguous {
                        len: items.len(),
                        list,
                    })
                    .collect();
                (by_day, chosen)
            }
            Some(max_gap) => {
                let mut lists: Vec<Vec<Occurrence>> = located
                    .iter()
                    .map(|items| gapped_occurrences(db, items, max_gap))
                    .collect();
                let by_day = support_by_day_threaded(days, &lists[..dated], threads, |list| {
                    list.iter().map(|o| o.trace)
                });
                lists.truncate(config.max_candidates);
                (by_day, lists.into_iter().map(Located::Gapped).collect())
            }
        };
        by_day.resize(found.len(), BTreeMap::new());
        let chosen: Vec<(Vec<u32>, Located)> = located
            .iter()
            .zip(occurrence_lists)
            .map(|(items, list)| ((*items).clone(), list))
            .collect();
        let patterns: Vec<PatternSummary> = found
            .into_iter()
            .zip(by_day)
            .map(
                |((items, support, occurrences), support_by_day)| PatternSummary {
                    tools: items.iter().map(|&id| db.name(id).to_string()).collect(),
                    support,
                    occurrences,
                    round_trips_saved: u64::from(support) * (items.len() as u64 - 1),
                    support_by_day,
                },
            )
            .collect();
        Ok(Mined { patterns, chosen })
    }

    /// The patterns that become candidates, each with the occurrences inference reads: all of
    /// them, or at most `cap` spread evenly over them.
    fn chosen_patterns(
        &self,
        db: &SequenceDb,
        chosen: Vec<(Vec<u32>, Located)>,
        cap: Option<usize>,
    ) -> Vec<ChosenPattern> {
        let gapped = self.config.max_gap.is_some_and(|gap| gap > 0);
        chosen
            .into_iter()
            .map(|(items, located)| {
                let tools: Vec<String> = items.iter().map(|&id| db.name(id).to_string()).collect();
                let total = located.len();
                let traces: Vec<usize> = (0..total).map(|i| located.trace(i)).collect();
                let support = distinct(&traces);
                let sample: Vec<Occurrence> = match cap {
                    Some(cap) if total > cap.max(1) => even_positions(total, cap.max(1))
                        .map(|i| located.occurrence(i))
                        .collect(),
                    _ => (0..total).map(|i| located.occurrence(i)).collect(),
                };
                let sampled = sample.len() < total;
                // The probe may shrink the sample later, so its traces are kept then too.
                let may_shrink = self
                    .config
                    .probe_occurrences
                    .is_some_and(|probe| sample.len() > probe);
                let mut pattern = Pattern::new(tools, sample);
                pattern.gapped = gapped;
                ChosenPattern {
                    sample: pattern,
                    sampled,
                    total,
                    support,
                    traces: if sampled || may_shrink {
                        traces
                    } else {
                        Vec::new()
                    },
                    support_by_day: None,
                }
            })
            .collect()
    }
}

/// The interned tool sequences of a store's mined traces, from its step columns.
struct Sequences {
    db: SequenceDb,
    /// Trace id of each sequence.
    trace_ids: Vec<String>,
    /// Where the store keeps each sequence's steps, when it says (else empty).
    rows: Vec<Option<StepRows>>,
    days: TraceDays,
    held_out_traces: usize,
}

/// Read the store's tool-name columns into sequences, leaving out the traces the split holds
/// out. With no filter, every trace counts in storage order, also one without steps (as when
/// mining traces in memory); with a filter, the traces with a matching step.
fn read_sequences(store: &dyn TraceStore, stream: &StreamConfig) -> Result<Sequences> {
    if stream.filter != TraceFilter::default() {
        return read_filtered_sequences(store, stream);
    }
    let split = stream.split;
    let keep = move |id: &str| !split.is_some_and(|split| split.is_holdout(id));
    let read = tool_sequences(store, &keep)?;
    let mut builder = SequenceDbBuilder::new();
    for t in 0..read.trace_ids.len() {
        builder.push_sequence(read.tools(t))?;
    }
    Ok(Sequences {
        db: builder.finish(),
        days: TraceDays::from_starts(read.first_started.into_iter()),
        trace_ids: read.trace_ids,
        rows: read.rows,
        held_out_traces: read.left_out,
    })
}

/// [`read_sequences`] of the traces with a step matching the filter, from the step columns.
fn read_filtered_sequences(store: &dyn TraceStore, stream: &StreamConfig) -> Result<Sequences> {
    let columns = store.step_columns(&stream.filter)?;
    let rows = columns.trace_id.len().min(columns.tool_name.len());
    let mut builder = SequenceDbBuilder::new();
    let mut trace_ids = Vec::new();
    let mut starts = Vec::new();
    let mut held_out_traces = 0;
    let mut from = 0;
    for end in 1..=rows {
        if end < rows && columns.trace_id[end] == columns.trace_id[from] {
            continue;
        }
        let id = &columns.trace_id[from];
        if stream.split.is_some_and(|split| split.is_holdout(id)) {
            held_out_traces += 1;
        } else {
            builder.push_sequence(columns.tool_name[from..end].iter())?;
            starts.push(
                columns
                    .started_at
                    .get(from..end)
                    .and_then(|s| s.iter().find_map(|t| *t)),
            );
            trace_ids.push(id.clone());
        }
        from = end;
    }
    Ok(Sequences {
        db: builder.finish(),
        trace_ids,
        rows: Vec::new(),
        days: TraceDays::from_starts(starts.into_iter()),
        held_out_traces,
    })
}

/// The mined traces of a store as the streaming paths know them.
struct MinedTraces<'a> {
    /// Trace id of each sequence, in storage order.
    trace_ids: &'a [String],
    /// Where the store keeps each sequence's steps, when it says (else empty).
    rows: &'a [Option<StepRows>],
    /// Steps of the mined traces.
    steps: usize,
}

/// Candidates for the chosen patterns of a store's mined traces, and the time spent reading
/// since `started`. When nothing is sampled in a store small enough, every mined trace is
/// loaded, so tools are profiled over all their calls exactly as the in-memory path does;
/// otherwise only the steps of the occurrences inference reads are read, as it asks for them.
fn build_from_store(
    store: &dyn TraceStore,
    stream: &StreamConfig,
    mined: &MinedTraces<'_>,
    chosen: Vec<ChosenPattern>,
    days: &TraceDays,
    config: &MineConfig,
    started: Instant,
) -> Result<((Vec<Candidate>, Skipped), Duration)> {
    let whole_store = !chosen.iter().any(|c| c.sampled)
        && stream.filter == TraceFilter::default()
        && mined.steps <= stream.profile_every_call_up_to;
    if whole_store {
        let loaded = load_mined(store, stream.split, mined.trace_ids.len())?;
        let loading = started.elapsed();
        let built = build_chosen(&StepSource::InMemory(&loaded), chosen, days, config, false);
        parallel::drop_in_background(loaded);
        Ok((built?, loading))
    } else {
        let source = StepSource::Store {
            store,
            trace_ids: mined.trace_ids,
            rows: mined.rows,
            loading: Cell::new(Duration::ZERO),
        };
        let built = build_chosen(&source, chosen, days, config, true)?;
        Ok((built, source.loading()))
    }
}

/// Every mined trace, whole, in storage order (the order of the sequences).
fn load_mined(
    store: &dyn TraceStore,
    split: Option<Split>,
    expected: usize,
) -> Result<Vec<TraceWithSteps>> {
    let mut loaded = Vec::with_capacity(expected);
    store.for_each_trace(&mut |trace| {
        if !split.is_some_and(|split| split.is_holdout(&trace.trace.trace_id)) {
            loaded.push(trace);
        }
        Ok(())
    })?;
    if loaded.len() != expected {
        return Err(AnalyzerError::StoreChanged {
            trace_id: String::new(),
            message: format!(
                "{expected} traces were counted but {} were read",
                loaded.len()
            ),
        });
    }
    Ok(loaded)
}

/// Where [`build_chosen`] reads the steps of the occurrences it infers from.
enum StepSource<'a> {
    /// Whole traces in memory, in the order of the sequences.
    InMemory(&'a [TraceWithSteps]),
    /// A store, read as inference asks; `trace_ids` names the sequences' traces and `rows`
    /// says where the store keeps their steps.
    Store {
        store: &'a dyn TraceStore,
        trace_ids: &'a [String],
        rows: &'a [Option<StepRows>],
        /// Time spent reading so far.
        loading: Cell<Duration>,
    },
}

impl<'a> StepSource<'a> {
    /// The traces holding `patterns`' occurrences, the occurrences renumbered to index them
    /// where they are read from a store.
    fn load(&self, patterns: &mut [Pattern]) -> Result<Cow<'a, [TraceWithSteps]>> {
        match self {
            StepSource::InMemory(traces) => Ok(Cow::Borrowed(traces)),
            StepSource::Store {
                store,
                trace_ids,
                rows,
                loading,
            } => {
                let started = Instant::now();
                let loaded = load_steps(*store, patterns, trace_ids, rows);
                loading.set(loading.get() + started.elapsed());
                Ok(Cow::Owned(loaded?))
            }
        }
    }

    fn loading(&self) -> Duration {
        match self {
            StepSource::InMemory(_) => Duration::ZERO,
            StepSource::Store { loading, .. } => loading.get(),
        }
    }
}

/// Let go of traces [`StepSource::load`] read, on another thread.
fn release(traces: Cow<'_, [TraceWithSteps]>) {
    if let Cow::Owned(traces) = traces {
        parallel::drop_in_background(traces);
    }
}

/// The steps `patterns`' occurrences hold, each trace once with only those steps, in storage
/// order; the occurrences are renumbered to index the loaded traces and their steps. Inference
/// and the tool profiles read nothing else on this path, so payloads no occurrence holds are
/// never read.
fn load_steps(
    store: &dyn TraceStore,
    patterns: &mut [Pattern],
    trace_ids: &[String],
    rows: &[Option<StepRows>],
) -> Result<Vec<TraceWithSteps>> {
    let mut needed: Vec<(usize, usize)> = patterns
        .iter()
        .flat_map(|p| {
            p.occurrences
                .iter()
                .flat_map(|o| o.steps.iter().map(move |&s| (o.trace, s)))
        })
        .collect();
    needed.sort_unstable();
    needed.dedup();
    // Per trace (ascending): its index and the range of its positions in `needed`.
    let mut groups: Vec<(usize, std::ops::Range<usize>)> = Vec::new();
    for (i, &(trace, _)) in needed.iter().enumerate() {
        match groups.last_mut() {
            Some((last, range)) if *last == trace => range.end = i + 1,
            _ => groups.push((trace, i..i + 1)),
        }
    }
    let positions: Vec<usize> = needed.iter().map(|&(_, s)| s).collect();
    let wanted: Vec<SequenceSteps<'_>> = groups
        .iter()
        .map(|(trace, range)| SequenceSteps {
            trace_id: trace_ids[*trace].as_str(),
            positions: &positions[range.clone()],
            rows: rows.get(*trace).copied().flatten(),
        })
        .collect();
    let loaded = store.get_sequence_steps(&wanted)?;
    let complete = loaded.len() == wanted.len()
        && loaded
            .iter()
            .zip(&wanted)
            .all(|(t, w)| t.trace.trace_id == w.trace_id && t.steps.len() == w.positions.len());
    if !complete {
        let missing = wanted
            .iter()
            .find(|w| {
                !loaded
                    .iter()
                    .any(|t| t.trace.trace_id == w.trace_id && t.steps.len() == w.positions.len())
            })
            .map_or("", |w| w.trace_id);
        return Err(AnalyzerError::StoreChanged {
            trace_id: missing.to_string(),
            message: "the steps were listed by the step columns but cannot be read".into(),
        });
    }
    let traces: Vec<usize> = groups.iter().map(|(trace, _)| *trace).collect();
    for pattern in patterns {
        for occurrence in &mut pattern.occurrences {
            // `groups` is sorted by trace and holds every sampled step of every sampled trace.
            let group = traces.partition_point(|&t| t < occurrence.trace);
            let range = &groups[group].1;
            let at = &positions[range.clone()];
            for step in &mut occurrence.steps {
                *step = at.partition_point(|&p| p < *step);
            }
            occurrence.trace = group;
        }
    }
    Ok(loaded)
}

/// A chosen pattern's occurrences as mining found them; contiguous ones are kept as a trace and
/// a start, and spelled out step by step only for the occurrences inference reads.
enum Located {
    Contiguous {
        len: usize,
        list: Vec<spm::contiguous::Occurrence>,
    },
    Gapped(Vec<Occurrence>),
}

impl Located {
    fn len(&self) -> usize {
        match self {
            Located::Contiguous { list, .. } => list.len(),
            Located::Gapped(list) => list.len(),
        }
    }

    fn trace(&self, i: usize) -> usize {
        match self {
            Located::Contiguous { list, .. } => list[i].sequence as usize,
            Located::Gapped(list) => list[i].trace,
        }
    }

    fn occurrence(&self, i: usize) -> Occurrence {
        match self {
            Located::Contiguous { len, list } => {
                let start = list[i].start as usize;
                Occurrence {
                    trace: list[i].sequence as usize,
                    steps: (start..start + len).collect(),
                }
            }
            Located::Gapped(list) => list[i].clone(),
        }
    }
}

/// Candidates for the chosen patterns, ranked, their evidence corrected to the full counts
/// where inference read a sample; the patterns that could not become one, with why.
fn build_chosen(
    source: &StepSource<'_>,
    mut chosen: Vec<ChosenPattern>,
    days: &TraceDays,
    config: &MineConfig,
    profile_occurrences_only: bool,
) -> Result<(Vec<Candidate>, Skipped)> {
    let mut candidates = Vec::new();
    let mut skipped = Vec::new();
    let probe = config.probe_occurrences.map(|occurrences| Probe {
        occurrences,
        link_share: PROBE_LINK_SHARE,
    });
    // The occurrences move to the builder; the tools stay for the report.
    let mut patterns: Vec<Pattern> = chosen
        .iter_mut()
        .map(|c| Pattern {
            tools: c.sample.tools.clone(),
            occurrences: std::mem::take(&mut c.sample.occurrences),
            gapped: c.sample.gapped,
        })
        .collect();
    let built = if profile_occurrences_only {
        build_probe_first(source, patterns, &config.candidate, probe)?
    } else {
        let traces = source.load(&mut patterns)?;
        let built = build_candidates_profiled(&traces, &patterns, &config.candidate, probe);
        release(traces);
        built
    };
    for (chosen, built) in chosen.iter().zip(built) {
        match built {
            Ok(Built {
                mut candidate,
                unlinked_in_probe,
                read,
            }) => {
                chosen.correct_evidence(&mut candidate, days, read, &unlinked_in_probe);
                if candidate.gapped {
                    candidate.max_gap = config.max_gap;
                }
                candidates.push(candidate);
            }
            Err(err) => skipped.push((chosen.sample.tools.clone(), err.to_string())),
        }
    }
    sort_candidates(&mut candidates);
    Ok((candidates, skipped))
}

/// Candidates for sampled patterns, the tools profiled over the calls inference reads, in two
/// rounds. First every pattern with more occurrences than the probe is probed: only the
/// probes' steps are read, and the tools are profiled over them. Then the patterns the probe
/// let through and those too small to probe are built from their whole samples, whose steps
/// are read then, the tools profiled over the calls of both rounds. A store's payloads are
/// read only for what each round infers from, so a padded flow costs its probe and no more.
fn build_probe_first(
    source: &StepSource<'_>,
    mut patterns: Vec<Pattern>,
    config: &CandidateConfig,
    probe: Option<Probe>,
) -> Result<Vec<Result<Built>>> {
    let mut built: Vec<Option<Result<Built>>> = (0..patterns.len()).map(|_| None).collect();
    // The probes as read (renumbered to index the traces read for them) and as numbered in the
    // sequences, kept for the second round's profiles.
    let mut first_round: Option<FirstRound<'_>> = None;
    if let Some(probe) = probe {
        let (probed, at): (Vec<usize>, Vec<Pattern>) = patterns
            .iter()
            .enumerate()
            .filter_map(|(i, pattern)| Some((i, probe_sample(pattern, probe)?)))
            .unzip();
        if !at.is_empty() {
            let mut probes = at.clone();
            let traces = source.load(&mut probes)?;
            let read = [ReadOccurrences {
                traces: &traces,
                read: &probes,
                at: &at,
            }];
            let profiles = occurrence_profiles(&read, config);
            let outcomes = each_in_parallel(&probes, config, |small| {
                build_if_unlinked(&traces, small, &profiles, config, probe)
            });
            for (i, outcome) in probed.into_iter().zip(outcomes) {
                // Ok(None): every step linked, so the whole sample decides.
                built[i] = outcome.transpose();
            }
            first_round = Some((traces, probes, at));
        }
    }
    let rest: Vec<usize> = (0..patterns.len())
        .filter(|&i| built[i].is_none())
        .collect();
    if !rest.is_empty() {
        let at: Vec<Pattern> = rest
            .iter()
            .map(|&i| std::mem::replace(&mut patterns[i], Pattern::new(Vec::new(), Vec::new())))
            .collect();
        let mut whole = at.clone();
        let traces = source.load(&mut whole)?;
        let mut read = vec![ReadOccurrences {
            traces: &traces,
            read: &whole,
            at: &at,
        }];
        if let Some((traces, probes, at)) = &first_round {
            read.push(ReadOccurrences {
                traces,
                read: probes,
                at,
            });
        }
        let profiles = occurrence_profiles(&read, config);
        let outcomes = each_in_parallel(&whole, config, |pattern| {
            build_whole(&traces, pattern, &profiles, config)
        });
        release(traces);
        for (i, outcome) in rest.into_iter().zip(outcomes) {
            built[i] = Some(outcome);
        }
    }
    if let Some((traces, _, _)) = first_round {
        release(traces);
    }
    // Every slot is filled: by the probe, or by the second round.
    Ok(built.into_iter().flatten().collect())
}

/// Patterns that could not become a candidate, with why.
type Skipped = Vec<(Vec<String>, String)>;

/// The traces read for the probes, the probes as read, and as the sequences number them.
type FirstRound<'a> = (Cow<'a, [TraceWithSteps]>, Vec<Pattern>, Vec<Pattern>);

/// A pattern that becomes a candidate: the occurrences inference reads and the full figures.
struct ChosenPattern {
    sample: Pattern,
    /// True when `sample` holds fewer occurrences than the pattern has.
    sampled: bool,
    total: usize,
    support: usize,
    /// Trace of every occurrence (kept only when sampled or when the probe may sample it, for
    /// support per day).
    traces: Vec<usize>,
    /// Support per day counted elsewhere (an engine), instead of from `traces`.
    support_by_day: Option<BTreeMap<String, usize>>,
}

/// Loose link share the probe asks of a source: well under `InferConfig::min_confidence`, so
/// sampling noise in the probe does not hide a link the full inference would bind.
const PROBE_LINK_SHARE: f64 = 0.5;

impl ChosenPattern {
    /// Put the full figures into the evidence of a candidate built from `read` of the
    /// pattern's occurrences (a sample, or the probe's when it found `unlinked` steps).
    fn correct_evidence(
        &self,
        candidate: &mut Candidate,
        days: &TraceDays,
        read: usize,
        unlinked: &[usize],
    ) {
        if read >= self.total {
            return;
        }
        let evidence = &mut candidate.evidence;
        let steps = self.sample.len().saturating_sub(1);
        let full_saved = self.support * steps;
        if evidence.round_trips_saved > 0 {
            evidence.score *= full_saved as f64 / evidence.round_trips_saved as f64;
        }
        evidence.support = self.support;
        evidence.occurrences = self.total;
        evidence.round_trips_saved = full_saved;
        evidence.support_by_day = match &self.support_by_day {
            Some(by_day) => by_day.clone(),
            None => days
                .support_by_day([self.traces.iter().copied()])
                .pop()
                .unwrap_or_default()
                .into_iter()
                .map(|(day, n)| (day, n as usize))
                .collect(),
        };
        candidate.sample = Some(InferenceSample {
            read,
            unlinked_in_probe: unlinked.to_vec(),
        });
    }
}

/// Distinct values of `traces`.
fn distinct(traces: &[usize]) -> usize {
    // Occurrence lists come sorted by trace; count changes, then fall back when unsorted.
    if traces.windows(2).all(|w| w[0] <= w[1]) {
        traces
            .iter()
            .enumerate()
            .filter(|&(i, &t)| i == 0 || traces[i - 1] != t)
            .count()
    } else {
        let mut sorted = traces.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        sorted.len()
    }
}

/// Best first: highest score, ties by id (the order `analyze` returns candidates in).
pub fn sort_candidates(candidates: &mut [Candidate]) {
    candidates.sort_by(Candidate::rank_order);
}

/// Keep the closed gapped patterns: drop one when a longer pattern that contains it as a
/// subsequence has the same support. Kept in order of length, longest first (the order the
/// patterns came in among those of one length).
///
/// A longer pattern holding a pattern as a subsequence holds each pair of its consecutive
/// tools in that order. So the kept patterns are indexed by support and by every ordered pair
/// of their tools, and a pattern is compared only with the kept ones listed under its rarest
/// pair (under its tool, for one tool), not with every kept one: with few distinct tools a
/// tool alone selects little, and this runs on hundreds of thousands of patterns.
pub(crate) fn closed_gapped(mut patterns: Vec<(Vec<u32>, u32)>) -> Vec<(Vec<u32>, u32)> {
    patterns.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
    let mut kept: Vec<(Vec<u32>, u32)> = Vec::new();
    // Per (support, tool, later tool), and per (support, tool, tool) for a single tool: the
    // places in `kept` of the patterns of that support holding it.
    let mut holding: HashMap<(u32, u32, u32), Vec<usize>> = HashMap::new();
    // Kept patterns enter the index once every pattern of their length is decided: only a
    // longer one can absorb, so lists hold nothing a pattern need be compared with in vain.
    let mut unindexed = 0;
    for (items, support) in patterns {
        if kept
            .get(unindexed)
            .is_some_and(|(k, _)| k.len() > items.len())
        {
            for (at, (longer, longer_support)) in kept.iter().enumerate().skip(unindexed) {
                let mut pairs: Vec<(u32, u32, u32)> = Vec::new();
                for (i, &a) in longer.iter().enumerate() {
                    pairs.push((*longer_support, a, a));
                    pairs.extend(longer[i + 1..].iter().map(|&b| (*longer_support, a, b)));
                }
                pairs.sort_unstable();
                pairs.dedup();
                for pair in pairs {
                    holding.entry(pair).or_default().push(at);
                }
            }
            unindexed = kept.len();
        }
        let keys: Vec<(u32, u32, u32)> = match items.as_slice() {
            [only] => vec![(support, *only, *only)],
            _ => items.windows(2).map(|w| (support, w[0], w[1])).collect(),
        };
        let lists: Option<Vec<&Vec<usize>>> = keys.iter().map(|key| holding.get(key)).collect();
        let absorbed = lists
            .and_then(|lists| lists.into_iter().min_by_key(|list| list.len()))
            .is_some_and(|rarest| rarest.iter().any(|&k| is_subsequence(&items, &kept[k].0)));
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
        greedy_gapped(sequence, items, max_gap, &mut |steps| {
            out.push(Occurrence {
                trace: index,
                steps,
            });
        });
    }
    out
}

/// Visit the non-overlapping occurrences of `items` in `sequence`, leftmost first, each step
/// at most `max_gap` positions after the previous one: what a gapped pattern's occurrences are,
/// wherever they are found.
pub(crate) fn greedy_gapped(
    sequence: &[u32],
    items: &[u32],
    max_gap: usize,
    found: &mut dyn FnMut(Vec<usize>),
) {
    let Some(&first) = items.first() else {
        return;
    };
    let mut from = 0;
    while from < sequence.len() {
        let Some(start) = sequence[from..]
            .iter()
            .position(|&x| x == first)
            .map(|p| p + from)
        else {
            break;
        };
        match match_from(sequence, items, start, max_gap) {
            Some(steps) => {
                from = steps[steps.len() - 1] + 1;
                found(steps);
            }
            None => from = start + 1,
        }
    }
}

/// The earliest occurrence of `items` starting at `start` (each step at most `max_gap` positions
/// after the previous), earliest by its steps in order. A step that matches but leaves the
/// rest unmatchable is given up for a later one, so a trace holding the pattern from `start`
/// always yields it; the positions found to lead nowhere are remembered, which keeps the search
/// linear in the window for each item.
fn match_from(sequence: &[u32], items: &[u32], start: usize, max_gap: usize) -> Option<Vec<usize>> {
    if sequence.get(start) != items.first() {
        return None;
    }
    let mut steps = vec![start];
    // (position, index of the item matched there) known not to complete the pattern.
    let mut dead: std::collections::HashSet<(usize, usize)> = std::collections::HashSet::new();
    // Per depth, the next position to try for the following item.
    let mut next_try: Vec<usize> = vec![start + 1];
    while steps.len() < items.len() {
        let depth = steps.len();
        let last = steps[depth - 1];
        let end = last
            .saturating_add(2)
            .saturating_add(max_gap)
            .min(sequence.len());
        let from = next_try[depth - 1];
        let found =
            (from..end).find(|&p| sequence[p] == items[depth] && !dead.contains(&(p, depth)));
        match found {
            Some(p) => {
                next_try[depth - 1] = p + 1;
                steps.push(p);
                next_try.push(p + 1);
            }
            None => {
                // Nothing completes the pattern from here: give up this step.
                if depth == 1 {
                    return None;
                }
                dead.insert((last, depth - 1));
                steps.pop();
                next_try.pop();
            }
        }
    }
    Some(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn occurrences(sequence: &[u32], items: &[u32], max_gap: usize) -> Vec<Vec<usize>> {
        let mut found = Vec::new();
        greedy_gapped(sequence, items, max_gap, &mut |steps| found.push(steps));
        found
    }

    #[test]
    fn a_step_that_leads_nowhere_is_given_up_for_a_later_one() {
        // a b b x c: the first b leaves c out of reach with a gap of 1, the second does not.
        assert_eq!(
            occurrences(&[0, 1, 1, 9, 2], &[0, 1, 2], 1),
            vec![vec![0, 2, 4]]
        );
        // Two levels of giving up: a b b c c x d needs the second b and the second c.
        assert_eq!(
            occurrences(&[0, 1, 1, 2, 2, 9, 3], &[0, 1, 2, 3], 1),
            vec![vec![0, 2, 4, 6]]
        );
        // Out of reach however chosen: a b x b c (the second b is two steps after a).
        assert!(occurrences(&[0, 1, 9, 1, 2], &[0, 1, 2], 1).is_empty());
        // Nothing completes: no occurrence, and the search goes on after the start.
        assert!(occurrences(&[0, 1, 9, 9, 2], &[0, 1, 2], 1).is_empty());
    }

    #[test]
    fn closed_gapped_keeps_what_comparing_with_every_longer_pattern_keeps() {
        // Every pattern of up to 4 tools over 3 tools, with supports from a small hash: many
        // share a support, and some are subsequences of others.
        let mut patterns: Vec<(Vec<u32>, u32)> = Vec::new();
        for len in 1..=4u32 {
            for code in 0..3u32.pow(len) {
                let items: Vec<u32> = (0..len).map(|i| code / 3u32.pow(i) % 3).collect();
                let support = (code * 7 + len * 3) % 4 + 1;
                patterns.push((items, support));
            }
        }
        let plain = |patterns: &[(Vec<u32>, u32)]| -> Vec<(Vec<u32>, u32)> {
            let mut sorted = patterns.to_vec();
            sorted.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
            sorted
                .iter()
                .filter(|(items, support)| {
                    !sorted.iter().any(|(longer, s)| {
                        s == support && longer.len() > items.len() && is_subsequence(items, longer)
                    })
                })
                .cloned()
                .collect()
        };
        let expected = plain(&patterns);
        assert!(expected.len() < patterns.len() && expected.len() > 3 * 9);
        assert_eq!(closed_gapped(patterns), expected);
    }

    #[test]
    fn occurrences_are_leftmost_and_do_not_overlap() {
        // a a b b with a gap of 1: a(0) b(2), then a(1) is before the end, so the next search
        // starts at 3 and finds no a.
        assert_eq!(occurrences(&[0, 0, 1, 1], &[0, 1], 1), vec![vec![0, 2]]);
        assert_eq!(
            occurrences(&[0, 1, 0, 1, 0, 9, 9, 1], &[0, 1], 0),
            vec![vec![0, 1], vec![2, 3]]
        );
        // Every trace holding a gapped pattern yields an occurrence of it: the support the
        // occurrences give is the pattern's support.
        let traces: [&[u32]; 4] = [
            &[0, 1, 1, 9, 2],
            &[0, 9, 1, 9, 2],
            &[0, 1, 1, 1, 2],
            &[2, 1, 0],
        ];
        let holding: Vec<bool> = traces
            .iter()
            .map(|t| !occurrences(t, &[0, 1, 2], 1).is_empty())
            .collect();
        assert_eq!(holding, vec![true, true, true, false]);
    }
}
