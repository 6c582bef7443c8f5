//! Mining where the data is: the support counting as query plans of an engine that reads the
//! store's Parquet dataset, with binding inference fed by the occurrences the engine returns.
//!
//! - [`sql`]: the counting query, in SQL that DataFusion, DuckDB and Spark SQL run unchanged
//!   (`chainweaver mine --emit-sql` prints it).
//! - `datafusion` (feature `datafusion`): the same counts by Apache DataFusion over the store's
//!   Parquet files in place (or its tool-name stream), closedness decided in-process; embedded
//!   by extending occurrences with integer joins (`extend`), and with feature `ballista` on a
//!   Ballista cluster, one SQL query per length.
//! - `ballista` (feature `ballista`): a Ballista cluster's scheduler and executors, as
//!   processes of their own or all in the calling process.

pub mod sql;

#[cfg(feature = "datafusion")]
pub mod datafusion;

#[cfg(feature = "datafusion")]
mod extend;

#[cfg(feature = "ballista")]
pub mod ballista;

use chainweaver_recorder::model::candidate::PatternSummary;

use self::sql::CountedPattern;

/// Counted patterns as `mine` stores them, best-ranked first: by the round trips a flow would
/// save (`support x (length - 1)`), then longer first, then by the tools as `tie` orders them
/// (the in-process miner: by the order each tool first appears in the mined traces). Support
/// per day is left empty (the embedded engine adds it for the best-ranked).
pub fn ranked_summaries(
    counted: Vec<CountedPattern>,
    tie: impl Fn(&[String], &[String]) -> std::cmp::Ordering,
) -> Vec<PatternSummary> {
    let mut summaries: Vec<PatternSummary> = counted
        .into_iter()
        .map(|pattern| {
            let support = u32::try_from(pattern.support).unwrap_or(u32::MAX);
            let saved = pattern.tools.len().saturating_sub(1) as u64;
            PatternSummary {
                round_trips_saved: u64::from(support) * saved,
                tools: pattern.tools,
                support,
                occurrences: pattern.occurrences,
                support_by_day: Default::default(),
            }
        })
        .collect();
    summaries.sort_by(|a, b| {
        b.round_trips_saved
            .cmp(&a.round_trips_saved)
            .then(b.tools.len().cmp(&a.tools.len()))
            .then_with(|| tie(&a.tools, &b.tools))
    });
    summaries
}
