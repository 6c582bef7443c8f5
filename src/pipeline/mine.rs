//! Mine a store: stream the traces a split leaves to mining, propose candidates, and replace
//! the stored results with them.

#[cfg(feature = "datafusion")]
use chainweaver_analyzer::engine::datafusion::Runner;
use chainweaver_analyzer::mine::{ChainAnalyzer, MineConfig, MineOutcome, StreamConfig};
use chainweaver_recorder::model::split::Split;
use chainweaver_recorder::store::TraceStore;
use chainweaver_recorder::workspace::Workspace;

use super::{Progress, Unit};
use crate::error::{Error, Result};

/// What to mine.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MineRequest {
    pub config: MineConfig,
    /// The traces held out of mining for verification (default: 20%).
    pub split: Split,
    /// Where the patterns are counted.
    pub miner: Miner,
}

/// Where mining counts the patterns; binding inference and candidates are built in-process
/// either way, from the occurrences the miner samples.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Miner {
    /// The built-in miner, over the tool sequences read into memory.
    #[default]
    InProcess,
    /// Apache DataFusion query plans over the store's step columns, embedded or on a Ballista
    /// cluster (whose chosen patterns' occurrences are then found over the tool names here).
    #[cfg(feature = "datafusion")]
    Engine(Runner),
}

/// Mine the store's traces that `split` leaves to mining, without the store's payloads in
/// memory ([`ChainAnalyzer::analyze_store`]), store the outcome (its patterns and
/// candidates replace those of an earlier run, in one change, and the old verdicts go), and
/// return it. Each candidate records the split, so `verify` replays only traffic mining did
/// not see.
pub fn mine_store(
    store: &mut dyn TraceStore,
    request: &MineRequest,
    progress: &dyn Progress,
) -> Result<MineOutcome> {
    let outcome = mine_split(
        &*store,
        &request.config,
        request.split,
        &request.miner,
        progress,
    )?;
    store.replace_mining_results(&outcome.patterns, &outcome.candidates)?;
    Ok(outcome)
}

/// Mine the traces `split` leaves to mining, each candidate stamped with the split; nothing is
/// stored.
pub(super) fn mine_split(
    store: &dyn TraceStore,
    config: &MineConfig,
    split: Split,
    miner: &Miner,
    progress: &dyn Progress,
) -> Result<MineOutcome> {
    if let Some(hint) = store
        .committed_step_files()?
        .and_then(|f| compaction_hint(&f))
    {
        progress.note(&hint);
    }
    let stream = StreamConfig {
        // `--sample all` reads every occurrence on this path too.
        max_occurrences_per_pattern: config.max_inference_occurrences,
        split: Some(split),
        ..StreamConfig::default()
    };
    let mut outcome = match miner {
        Miner::InProcess => {
            progress.begin("mining", None, Unit::Items);
            let outcome = ChainAnalyzer::new(config.clone()).analyze_store(store, &stream);
            progress.end();
            outcome?
        }
        #[cfg(feature = "datafusion")]
        Miner::Engine(runner) => engine_mine(store, config, &stream, split, runner, progress)?,
    };
    if outcome.traces == 0 {
        return Err(Error::NothingToMine {
            held_out: outcome.held_out_traces,
        });
    }
    for candidate in &mut outcome.candidates {
        candidate.split = Some(split);
    }
    Ok(outcome)
}

/// A Parquet store's steps parts past which a read pays noticeably for opening each one.
const MANY_STEP_PARTS: usize = 100;

/// A note suggesting `traces compact` when a Parquet store's steps are spread over many small
/// part files: more than [`MANY_STEP_PARTS`], and more than four a partition on average
/// (a store compacted once and appended to a little since is not worth a note).
fn compaction_hint(step_files: &[std::path::PathBuf]) -> Option<String> {
    let partitions: std::collections::HashSet<Option<&std::path::Path>> =
        step_files.iter().map(|f| f.parent()).collect();
    let many = step_files.len() > MANY_STEP_PARTS && step_files.len() > 4 * partitions.len();
    many.then(|| {
        format!(
            "the store's steps are in {} part files over {} partitions; \
             `chainweaver traces compact` merges them, and reads get faster",
            step_files.len(),
            partitions.len()
        )
    })
}

/// The store's trace ids `split` leaves to mining, in storage order, and the ones it holds out.
#[cfg(feature = "datafusion")]
fn split_trace_ids(
    store: &dyn TraceStore,
    split: Split,
) -> Result<(Vec<String>, std::collections::HashSet<String>)> {
    let (held, mined): (Vec<String>, Vec<String>) = store
        .trace_ids()?
        .into_iter()
        .partition(|id| split.is_holdout(id));
    Ok((mined, held.into_iter().collect()))
}

/// [`mine_split`] with the patterns counted and the chosen ones' occurrences sampled by
/// DataFusion over the store's step columns; candidates are built in-process from the sample.
#[cfg(feature = "datafusion")]
fn engine_mine(
    store: &dyn TraceStore,
    config: &MineConfig,
    stream: &StreamConfig,
    split: Split,
    runner: &Runner,
    progress: &dyn Progress,
) -> Result<MineOutcome> {
    use chainweaver_analyzer::engine::datafusion::{self, Choose, MinedTraces};
    use chainweaver_analyzer::engine::sql::Reported;
    use chainweaver_analyzer::mine::{ChosenSample, CountedElsewhere, Matching, inference_cap};
    use chainweaver_recorder::model::candidate::Occurrence;
    let started = std::time::Instant::now();
    let (mined, held_out) = split_trace_ids(store, split)?;
    let query = counting_query(config);
    let choose = Choose {
        max_candidates: config.max_candidates,
        max_dated: config.max_dated_patterns,
        cap: inference_cap(config, stream),
    };
    // The embedded engine samples contiguous patterns' occurrences itself; a cluster's
    // executors do not hold the list of mined traces, and a gapped pattern's occurrences are
    // no join, so those are found over the tool names once the engine has counted.
    let matching = match config.max_gap {
        Some(max_gap) => Some(Matching::Gapped { max_gap }),
        None if runner.is_remote() => Some(Matching::Contiguous),
        None => None,
    };
    progress.begin("counting patterns", None, Unit::Items);
    let found = datafusion::mine(
        store,
        &query,
        Reported::Closed,
        MinedTraces {
            mined: &mined,
            held_out: &held_out,
        },
        runner,
        matching.is_none().then_some(choose),
    );
    progress.end();
    let mut found = found?;
    for retry in &found.retried {
        progress.warn(&format!(
            "the query counting patterns of length {} lost an endpoint and ran again ({})",
            retry.length, retry.error
        ));
    }
    let to_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    let chosen: Vec<ChosenSample> = match matching {
        // The engine sampled the occurrences, as (trace, first step).
        None => found
            .chosen
            .into_iter()
            .zip(&found.patterns)
            .map(|(c, pattern)| ChosenSample {
                total: to_usize(c.total),
                sample: c
                    .sample
                    .into_iter()
                    .map(|(trace, start)| {
                        let start = start as usize;
                        Occurrence {
                            trace: to_usize(trace),
                            steps: (start..start + pattern.tools.len()).collect(),
                        }
                    })
                    .collect(),
                support_by_day: c
                    .support_by_day
                    .into_iter()
                    .map(|(day, n)| (day, to_usize(n)))
                    .collect(),
            })
            .collect(),
        Some(matching) => streamed_chosen(
            store,
            &mined,
            &mut found.patterns,
            &choose,
            matching,
            progress,
        )?,
    };
    let counted = CountedElsewhere {
        held_out_traces: held_out.len(),
        steps: to_usize(found.steps),
        distinct_tools: to_usize(found.distinct_tools),
        patterns: found.patterns,
        chosen,
        mined,
        mining_time: started.elapsed(),
    };
    progress.begin("inferring bindings", None, Unit::Items);
    let outcome = ChainAnalyzer::new(config.clone()).candidates_from_counts(store, counted, stream);
    progress.end();
    Ok(outcome?)
}

/// The counting `config` asks an engine for.
#[cfg(feature = "datafusion")]
fn counting_query(config: &MineConfig) -> chainweaver_analyzer::engine::sql::CountingQuery {
    let max_gap = config
        .max_gap
        .map(|gap| u32::try_from(gap).unwrap_or(u32::MAX));
    chainweaver_analyzer::engine::sql::CountingQuery::new(
        config.min_support,
        config.min_length,
        config.max_length,
    )
    .with_max_gap(max_gap)
}

/// The chosen patterns' occurrences among the `mined` traces, matched as `matching` says over
/// the store's tool names after an engine counted `patterns` (best-ranked first); the
/// best-ranked are dated by day as `choose` says.
#[cfg(feature = "datafusion")]
fn streamed_chosen(
    store: &dyn TraceStore,
    mined: &[String],
    patterns: &mut [chainweaver_recorder::model::candidate::PatternSummary],
    choose: &chainweaver_analyzer::engine::datafusion::Choose,
    matching: chainweaver_analyzer::mine::Matching,
    progress: &dyn Progress,
) -> Result<Vec<chainweaver_analyzer::mine::ChosenSample>> {
    progress.begin("finding occurrences", None, Unit::Items);
    let located: Vec<Vec<String>> = patterns
        .iter()
        .take(choose.max_dated.max(choose.max_candidates))
        .map(|p| p.tools.clone())
        .collect();
    let sampled = chainweaver_analyzer::mine::streamed_samples(
        store,
        mined,
        &located,
        choose.max_candidates,
        choose.cap,
        matching,
    );
    progress.end();
    let sampled = sampled?;
    for (pattern, by_day) in patterns
        .iter_mut()
        .zip(sampled.by_day)
        .take(choose.max_dated)
    {
        pattern.support_by_day = by_day;
    }
    Ok(sampled.chosen)
}

/// The closed (or, as `reported` says, all frequent) contiguous patterns of the traces `split`
/// leaves to mining, counted by Apache DataFusion over the store's Parquet files in place (any
/// other store through its tool-name stream), embedded or on a Ballista cluster as `runner`
/// says, best-ranked first; nothing is stored and no candidate is built.
#[cfg(feature = "datafusion")]
pub fn engine_patterns(
    store: &dyn TraceStore,
    request: &MineRequest,
    reported: chainweaver_analyzer::engine::sql::Reported,
    runner: &Runner,
    progress: &dyn Progress,
) -> Result<EnginePatterns> {
    use chainweaver_analyzer::engine::datafusion::{self, MinedTraces};
    let config = &request.config;
    let query = counting_query(config);
    let (mined, held_out) = split_trace_ids(store, request.split)?;
    progress.begin("counting patterns", None, Unit::Items);
    let traces = MinedTraces {
        mined: &mined,
        held_out: &held_out,
    };
    let counted = datafusion::mine(store, &query, reported, traces, runner, None);
    progress.end();
    let counted = counted?;
    Ok(EnginePatterns {
        held_out_traces: held_out.len(),
        patterns: counted.patterns,
        retried: counted.retried,
    })
}

/// What [`engine_patterns`] found.
#[cfg(feature = "datafusion")]
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EnginePatterns {
    pub held_out_traces: usize,
    pub patterns: Vec<chainweaver_recorder::model::candidate::PatternSummary>,
    /// A cluster's queries run again after they lost an executor.
    pub retried: Vec<chainweaver_analyzer::engine::datafusion::RetriedQuery>,
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::compaction_hint;

    fn parts(partitions: usize, each: usize) -> Vec<PathBuf> {
        (0..partitions)
            .flat_map(|p| {
                (0..each).map(move |i| PathBuf::from(format!("s/steps/date={p}/part-{i}.parquet")))
            })
            .collect()
    }

    #[test]
    fn many_small_parts_get_a_note_and_a_compacted_store_none() {
        let note = compaction_hint(&parts(14, 21)).unwrap();
        assert!(note.contains("294 part files over 14 partitions"), "{note}");
        assert!(note.contains("traces compact"), "{note}");
        // Few files in all, or a few a partition over many days: nothing to gain.
        assert_eq!(compaction_hint(&parts(2, 40)), None);
        assert_eq!(compaction_hint(&parts(200, 2)), None);
        assert_eq!(compaction_hint(&parts(28, 4)), None);
    }
}
