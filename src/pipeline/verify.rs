//! Verify candidates by replay on the traces their mining run held out, and store the
//! verdicts.

use std::collections::HashSet;
use std::sync::Arc;

use chainweaver_recorder::model::TraceWithSteps;
use chainweaver_recorder::model::candidate::{Candidate, Verdict};
use chainweaver_recorder::model::split::Split;
use chainweaver_recorder::store::TraceStore;
use chainweaver_recorder::workspace::Workspace;
use serde::Serialize;

use super::{Progress, Unit};
use crate::error::{Error, Result};
use crate::tool::ToolRegistry;
use crate::verify::{
    Cassette, HeldOut, IgnorePaths, ToolIndex, ToolSource, Verifier, VerifyOptions,
};

/// Which tools a replay calls.
#[derive(Clone, Default)]
pub enum ReplayTools {
    /// The recorded calls of the held-out traces (a cassette).
    #[default]
    Recorded,
    /// Real tools; those not marked read-only only with `allow_side_effects`.
    Live {
        tools: ToolRegistry,
        allow_side_effects: bool,
    },
}

impl std::fmt::Debug for ReplayTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayTools::Recorded => f.write_str("Recorded"),
            ReplayTools::Live { tools, .. } => write!(f, "Live({} tools)", tools.len()),
        }
    }
}

/// What to verify and how.
#[derive(Debug, Clone, Default)]
pub struct VerifyRequest {
    /// Candidate ids, or ranks in the stored listing (1-based); empty: every stored candidate.
    pub candidates: Vec<String>,
    pub options: VerifyOptions,
    pub tools: ReplayTools,
    /// Volatile fields left out when matching recordings and comparing replays.
    pub ignore: IgnorePaths,
    /// Replay the traces this percent-hold-out split sets aside instead of each candidate's
    /// own split.
    pub holdout: Option<u8>,
}

/// One candidate's verification: its verdict, or why it could not be verified.
#[derive(Debug, Clone, Serialize)]
pub struct Checked {
    pub candidate: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A candidate by id, or by its rank in `candidates` (1-based).
pub fn find_candidate<'c>(candidates: &'c [Candidate], wanted: &str) -> Result<&'c Candidate> {
    let by_rank = wanted
        .parse::<usize>()
        .ok()
        .and_then(|rank| rank.checked_sub(1))
        .and_then(|i| candidates.get(i));
    by_rank
        .or_else(|| candidates.iter().find(|c| c.id == wanted))
        .ok_or_else(|| Error::UnknownCandidate {
            wanted: wanted.to_string(),
            stored: candidates.len(),
        })
}

/// Replay the request's candidates on the traffic their mining run did not see and store a
/// verdict for each, in one change.
///
/// Held-out occurrences are found from the store's tool-name columns; only the traces of the
/// occurrences replayed are loaded whole, and the cassette of recorded answers is built from
/// them.
pub fn verify_store(
    store: &mut dyn TraceStore,
    request: &VerifyRequest,
    progress: &dyn Progress,
) -> Result<Vec<Checked>> {
    let stored = store.candidates()?;
    let candidates: Vec<Candidate> = if request.candidates.is_empty() {
        stored
    } else {
        request
            .candidates
            .iter()
            .map(|wanted| find_candidate(&stored, wanted).cloned())
            .collect::<Result<_>>()?
    };
    if candidates.is_empty() {
        return Err(Error::NoCandidates);
    }
    let splits: Vec<Split> = candidates
        .iter()
        .map(|candidate| split_of(candidate, request.holdout))
        .collect();
    let checked = verify_splits(&*store, &candidates, &splits, request, progress)?;
    let verdicts: Vec<Verdict> = checked.iter().filter_map(|c| c.verdict.clone()).collect();
    store.put_verdicts(&verdicts)?;
    Ok(checked)
}

/// The split a candidate was mined with, unless overridden by a percent.
fn split_of(candidate: &Candidate, holdout: Option<u8>) -> Split {
    match holdout {
        Some(percent) => Split::Holdout { percent },
        None => candidate.split.unwrap_or_default(),
    }
}

/// Verify candidates all mined with one split against the traces it holds out; nothing is
/// stored.
pub(super) fn verify_split(
    store: &dyn TraceStore,
    candidates: &[Candidate],
    split: Split,
    request: &VerifyRequest,
    progress: &dyn Progress,
) -> Result<Vec<Checked>> {
    let splits = vec![split; candidates.len()];
    verify_splits(store, candidates, &splits, request, progress)
}

/// Verify each candidate against the traces its split holds out; nothing is stored.
fn verify_splits(
    store: &dyn TraceStore,
    candidates: &[Candidate],
    splits: &[Split],
    request: &VerifyRequest,
    progress: &dyn Progress,
) -> Result<Vec<Checked>> {
    let mut distinct: Vec<Split> = Vec::new();
    for split in splits {
        if !distinct.contains(split) {
            distinct.push(*split);
        }
    }
    let indexes: Vec<ToolIndex> = distinct
        .iter()
        .map(|split| ToolIndex::from_store(store, &|id| split.is_holdout(id)))
        .collect::<chainweaver_recorder::Result<_>>()?;
    let at = |split: &Split| distinct.iter().position(|d| d == split).unwrap_or(0);

    // Load the traces the replays read, once each, in storage order (the cassette keeps
    // recordings in the order it reads them).
    let planner = Verifier::new(
        ToolSource::Recorded(Arc::default()),
        request.options.clone(),
    );
    let mut wanted: Vec<Vec<bool>> = indexes.iter().map(|i| vec![false; i.len()]).collect();
    for (candidate, split) in candidates.iter().zip(splits) {
        let index = &indexes[at(split)];
        for id in planner.traces_to_load(candidate, index) {
            if let Some(t) = index.position(id) {
                wanted[at(split)][t] = true;
            }
        }
    }
    let mut seen: HashSet<&str> = HashSet::new();
    let mut ids: Vec<&str> = Vec::new();
    for (index, wanted) in indexes.iter().zip(&wanted) {
        for (t, _) in wanted.iter().enumerate().filter(|(_, w)| **w) {
            let id = index.trace_id(t);
            if seen.insert(id) {
                ids.push(id);
            }
        }
    }
    let loaded = load_traces(store, &ids, progress)?;

    let source = match &request.tools {
        ReplayTools::Recorded => ToolSource::Recorded(Arc::new(Cassette::from_traces(
            &loaded,
            request.ignore.clone(),
        ))),
        ReplayTools::Live {
            tools,
            allow_side_effects,
        } => ToolSource::Live {
            tools: tools.clone(),
            allow_side_effects: *allow_side_effects,
            ignore: request.ignore.clone(),
        },
    };
    let verifier = Verifier::new(source, request.options.clone());
    let held_outs: Vec<HeldOut<'_>> = indexes
        .into_iter()
        .map(|index| HeldOut::with_loaded(index, &loaded))
        .collect();
    let jobs: Vec<(&Candidate, &HeldOut<'_>)> = candidates
        .iter()
        .zip(splits)
        .map(|(candidate, split)| (candidate, &held_outs[at(split)]))
        .collect();
    Ok(run_jobs(&verifier, &jobs, progress))
}

/// The traces with these ids, in this order, read as one batch (one pass over a Parquet
/// dataset).
fn load_traces(
    store: &dyn TraceStore,
    ids: &[&str],
    progress: &dyn Progress,
) -> Result<Vec<TraceWithSteps>> {
    progress.begin("loading traces", None, Unit::Items);
    let loaded = store.get_traces(ids);
    progress.end();
    Ok(loaded?)
}

/// Verify every job on the machine's cores, one [`Checked`] a job, in order.
pub(super) fn run_jobs(
    verifier: &Verifier,
    jobs: &[(&Candidate, &HeldOut<'_>)],
    progress: &dyn Progress,
) -> Vec<Checked> {
    progress.begin("verifying", Some(jobs.len() as u64), Unit::Items);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let results = verifier.verify_many(jobs, threads, &|| progress.advance());
    progress.end();
    jobs.iter()
        .zip(results)
        .map(|((candidate, held_out), result)| match result {
            Ok(mut verdict) => {
                if held_out.is_empty() {
                    verdict.reason = format!(
                        "{}; no held-out traffic: the candidate was mined from every trace (mine with --holdout 20, or run `analyze`)",
                        verdict.reason
                    );
                }
                Checked {
                    candidate: candidate.id.clone(),
                    verdict: Some(verdict),
                    error: None,
                }
            }
            Err(err) => Checked {
                candidate: candidate.id.clone(),
                verdict: None,
                error: Some(err.to_string()),
            },
        })
        .collect()
}
