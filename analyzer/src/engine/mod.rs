//! Mining where the data is: the support counting as query plans of an engine that reads the
//! store's Parquet dataset, with binding inference fed by the occurrences the engine returns.
//!
//! - [`sql`]: the counting query, in SQL that DataFusion, DuckDB and Spark SQL run unchanged
//!   (`chainweaver mine --emit-sql` prints it).
//! - `datafusion` (feature `datafusion`): the same counts by Apache DataFusion over the store's
//!   Parquet files in place (or its tool-name stream), closedness decided in-process; embedded
//!   by extending occurrences with integer joins (`extend`), and with feature `ballista` on a
//!   Ballista cluster, one SQL query per length (gapped: over the ends the cluster wrote one
//!   length down).
//! - `ballista` (feature `ballista`): a Ballista cluster's scheduler and executors, as
//!   processes of their own or all in the calling process.

pub mod sql;

#[cfg(feature = "datafusion")]
pub mod datafusion;

#[cfg(feature = "datafusion")]
mod extend;

#[cfg(feature = "datafusion")]
pub(crate) use chainweaver_recorder::scratch::{scratch_folder, sweep_abandoned};

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
    rank(&mut summaries, tie);
    summaries
}

/// Put `summaries` in [`ranked_summaries`]' order, ties broken as `tie` says.
pub fn rank(
    summaries: &mut [PatternSummary],
    tie: impl Fn(&[String], &[String]) -> std::cmp::Ordering,
) {
    summaries.sort_by(|a, b| {
        b.round_trips_saved
            .cmp(&a.round_trips_saved)
            .then(b.tools.len().cmp(&a.tools.len()))
            .then_with(|| tie(&a.tools, &b.tools))
    });
}

/// Traffic for the gapped levels' tests, and what the in-process gapped miner finds in it.
#[cfg(all(test, feature = "datafusion"))]
pub(crate) mod gapped_fixture {
    use super::sql::CountedPattern;

    /// Repeats within reach of each other (so one end is reached more than one way), a trace
    /// longer than the widest gap, and traces the gap must not bridge.
    pub fn traces() -> Vec<Vec<&'static str>> {
        let long: Vec<&str> = ["a", "x", "x", "b", "x", "c"]
            .into_iter()
            .cycle()
            .take(60)
            .chain(["a"; 20])
            .chain(["b", "c"])
            .collect();
        vec![
            vec!["a", "b", "a", "b", "c", "a", "c"],
            vec!["a", "x", "b", "x", "x", "c"],
            vec!["b", "a", "a", "c", "b"],
            vec!["a"],
            vec!["b", "c", "x", "a", "x", "x", "x", "b"],
            long,
            vec!["c", "a", "b"],
        ]
    }

    /// Every frequent gapped pattern of `traces` with the in-process gapped miner's support
    /// (reported as the occurrences too), sorted; it has patterns of three tools or more.
    pub fn mined(
        traces: &[Vec<&str>],
        gap: u32,
        min_support: u32,
        min_length: usize,
        max_length: usize,
    ) -> Vec<CountedPattern> {
        let mut builder = crate::spm::SequenceDbBuilder::new();
        for trace in traces {
            builder
                .push_sequence(trace.iter().copied())
                .expect("a sequence");
        }
        let db = builder.finish();
        let options = crate::spm::GappedOptions {
            min_support,
            max_gap: Some(gap),
            min_length,
            max_length: Some(max_length),
        };
        let mut mined: Vec<CountedPattern> = crate::spm::gapped::mine(&db, &options)
            .expect("mined")
            .into_iter()
            .map(|p| CountedPattern {
                tools: p.items.iter().map(|&i| db.name(i).to_string()).collect(),
                support: u64::from(p.support),
                occurrences: u64::from(p.support),
            })
            .collect();
        mined.sort();
        assert!(
            mined.iter().any(|p| p.tools.len() >= 3),
            "gap {gap}: long patterns"
        );
        mined
    }
}
