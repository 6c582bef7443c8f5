//! Mine a store: stream the traces a split leaves to mining, propose candidates, and replace
//! the stored results with them.

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
    let outcome = mine_split(&*store, &request.config, request.split, progress)?;
    store.replace_mining_results(&outcome.patterns, &outcome.candidates)?;
    Ok(outcome)
}

/// Mine the traces `split` leaves to mining, each candidate stamped with the split; nothing is
/// stored.
pub(super) fn mine_split(
    store: &dyn TraceStore,
    config: &MineConfig,
    split: Split,
    progress: &dyn Progress,
) -> Result<MineOutcome> {
    let stream = StreamConfig {
        // `--sample all` reads every occurrence on this path too.
        max_occurrences_per_pattern: config.max_inference_occurrences,
        split: Some(split),
        ..StreamConfig::default()
    };
    progress.begin("mining", None, Unit::Items);
    let outcome = ChainAnalyzer::new(config.clone()).analyze_store(store, &stream);
    progress.end();
    let mut outcome = outcome?;
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

/// The closed (or, as `reported` says, all frequent) contiguous patterns of the traces `split`
/// leaves to mining, counted by Apache DataFusion over the store's Parquet files in place (any
/// other store through its tool-name stream), embedded or on a Ballista cluster as `runner`
/// says, best-ranked first; nothing is stored and no candidate is built.
#[cfg(feature = "datafusion")]
pub fn engine_patterns(
    store: &dyn TraceStore,
    request: &MineRequest,
    reported: chainweaver_analyzer::engine::sql::Reported,
    runner: &chainweaver_analyzer::engine::datafusion::Runner,
    progress: &dyn Progress,
) -> Result<EnginePatterns> {
    use chainweaver_analyzer::engine::{self, sql::CountingQuery};
    let config = &request.config;
    let query = CountingQuery::new(config.min_support, config.min_length, config.max_length);
    let held_out: std::collections::HashSet<String> = store
        .trace_ids()?
        .into_iter()
        .filter(|id| request.split.is_holdout(id))
        .collect();
    progress.begin("counting patterns", None, Unit::Items);
    let counted = engine::datafusion::count_patterns(store, &query, reported, &held_out, runner);
    progress.end();
    Ok(EnginePatterns {
        held_out_traces: held_out.len(),
        patterns: engine::ranked_summaries(counted?),
    })
}

/// What [`engine_patterns`] found.
#[cfg(feature = "datafusion")]
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EnginePatterns {
    pub held_out_traces: usize,
    pub patterns: Vec<chainweaver_recorder::model::candidate::PatternSummary>,
}
