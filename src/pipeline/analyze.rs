//! The main job: import, mine, verify by replay, and a ranked report.

use std::collections::BTreeMap;

use chainweaver_analyzer::fold::{FoldConfig, FoldInput, TraceRuns, exact_shape, fold};
use chainweaver_analyzer::mine::{MineConfig, MineOutcome, sort_candidates};
use chainweaver_recorder::model::candidate::{
    Behaviour, Candidate, RejectionCause, ShapeStep, Verdict, VerdictStatus,
};
use chainweaver_recorder::model::split::Split;
use chainweaver_recorder::store::{TraceStore, tool_sequences};
use chainweaver_recorder::workspace::Workspace;
use serde::Serialize;

use super::import::{ImportRequest, ImportSummary, import_files};
use super::mine::mine_split;
use super::verify::{Checked, VerifyRequest, verify_split};
use super::{MineRequest, Miner, Progress, mine_store};
use crate::error::{Error, Result};
use crate::verify::decide;

/// What `analyze` does.
#[derive(Debug, Clone)]
pub struct AnalyzeRequest {
    /// Logs to import first; `None` (or no paths) analyzes the store as it is.
    pub import: Option<ImportRequest>,
    pub mine: MineConfig,
    /// Where the patterns are counted.
    pub miner: Miner,
    /// Percent of the traces held out for verification (ignored with `folds`).
    pub holdout: u8,
    /// Cross-validate over this many folds instead of one hold-out.
    pub folds: Option<u32>,
    /// How candidates are replayed (its `candidates` and `holdout` are not used).
    pub verify: VerifyRequest,
    /// How verified candidates fold into behaviours.
    pub fold: FoldConfig,
}

impl Default for AnalyzeRequest {
    fn default() -> Self {
        Self {
            import: None,
            mine: MineConfig::default(),
            miner: Miner::default(),
            holdout: 20,
            folds: None,
            verify: VerifyRequest::default(),
            fold: FoldConfig::default(),
        }
    }
}

/// One row of the report: a candidate and its verdict (or why it has none).
#[derive(Debug, Clone, Serialize)]
pub struct ReportEntry {
    pub candidate: Candidate,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Rejected candidates by cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RejectedCounts {
    /// Steps that share no data.
    pub unlinked: usize,
    /// Too few held-out occurrences.
    pub too_few_occurrences: usize,
    /// Replays that did not match.
    pub replays_differ: usize,
}

impl RejectedCounts {
    pub fn total(&self) -> usize {
        self.unlinked + self.too_few_occurrences + self.replays_differ
    }
}

/// What `analyze` found.
#[derive(Debug, Clone, Serialize)]
pub struct AnalyzeReport {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub import: Option<ImportSummary>,
    /// How mining and verification traffic were split (`80/20 hold-out`, ...).
    pub split: String,
    pub mined_traces: usize,
    pub held_out_traces: usize,
    pub mine: MineOutcome,
    /// Verified first, then partial, then rejected, then unverified; by score within each.
    pub report: Vec<ReportEntry>,
    /// Candidates verified by replay.
    pub verified: usize,
    pub rejected: RejectedCounts,
    /// The verified and partial candidates folded into one proposal per behaviour, best
    /// first (each behaviour's lead is its best-ranked candidate).
    pub behaviours: Vec<Behaviour>,
    pub coverage: Coverage,
}

/// How much of the held-out traffic the proposals cover.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Coverage {
    /// Tool calls in the held-out traces (every trace with folds).
    pub calls: usize,
    /// Calls inside an occurrence of a behaviour whose lead is verified.
    pub by_verified_behaviours: usize,
    /// Calls inside an occurrence of any verified candidate, unfolded.
    pub by_verified_candidates: usize,
    /// Behaviours whose lead is verified.
    pub verified_behaviours: usize,
    /// Model round trips the verified behaviours would save on the held-out calls, each call
    /// counted once (overlapping occurrences: the longest first).
    pub round_trips_saved_by_verified_behaviours: usize,
    /// The same for every verified candidate, unfolded.
    pub round_trips_saved_by_verified_candidates: usize,
}

/// Import (when asked), mine, verify every candidate on held-out traffic, store everything,
/// and rank the candidates by verdict.
pub fn analyze(
    store: &mut dyn TraceStore,
    request: &AnalyzeRequest,
    progress: &dyn Progress,
) -> Result<AnalyzeReport> {
    // Gapped candidates fold with the gap they were mined with (they replay with it too: each
    // candidate records it).
    let gapped_request;
    let request = match request.mine.max_gap {
        Some(gap) if gap != request.fold.max_gap => {
            let mut changed = request.clone();
            changed.fold.max_gap = gap;
            gapped_request = changed;
            &gapped_request
        }
        _ => request,
    };
    let import = match &request.import {
        Some(import) if !import.paths.is_empty() => Some(import_files(store, import, progress)?),
        _ => None,
    };
    let (outcome, checked, split, mined_traces, held_out_traces) = match request.folds {
        None => {
            let split = Split::Holdout {
                percent: request.holdout,
            };
            let mine = MineRequest {
                config: request.mine.clone(),
                split,
                miner: request.miner.clone(),
            };
            let outcome = mine_store(store, &mine, progress)?;
            let checked = verify_split(
                &*store,
                &outcome.candidates,
                split,
                &request.verify,
                progress,
            )?;
            let counts = (outcome.traces, outcome.held_out_traces);
            (outcome, checked, split.describe(), counts.0, counts.1)
        }
        Some(folds) => {
            let (outcome, checked) = cross_validate(store, folds, request, progress)?;
            let total = outcome.traces + outcome.held_out_traces;
            let text = format!("{folds}-fold cross-validation");
            (outcome, checked, text, total, total)
        }
    };
    let verdicts: Vec<Verdict> = checked.iter().filter_map(|c| c.verdict.clone()).collect();
    let mut report = ranked(&outcome.candidates, checked);
    let verified = report
        .iter()
        .filter(|e| {
            e.verdict
                .as_ref()
                .is_some_and(|v| v.status == VerdictStatus::Verified)
        })
        .count();
    let mut rejected = RejectedCounts::default();
    for verdict in report.iter().filter_map(|e| e.verdict.as_ref()) {
        match verdict.cause {
            Some(RejectionCause::Unlinked) => rejected.unlinked += 1,
            Some(RejectionCause::TooFewOccurrences) => rejected.too_few_occurrences += 1,
            Some(RejectionCause::ReplaysDiffer) => rejected.replays_differ += 1,
            None => {}
        }
    }
    let held_out = match request.folds {
        None => Some(Split::Holdout {
            percent: request.holdout,
        }),
        Some(_) => None,
    };
    let (behaviours, coverage) = behaviours(&*store, &report, held_out, &request.fold)?;
    // Each folded candidate records its behaviour, for `candidates list|show` and the TUI.
    let roles: BTreeMap<&str, _> = behaviours.iter().flat_map(Behaviour::roles).collect();
    for entry in &mut report {
        entry.candidate.behaviour = roles.get(entry.candidate.id.as_str()).cloned();
    }
    let candidates: Vec<Candidate> = report.iter().map(|e| e.candidate.clone()).collect();
    store.put_reviewed(&candidates, &verdicts)?;
    Ok(AnalyzeReport {
        import,
        split,
        mined_traces,
        held_out_traces,
        mine: outcome,
        report,
        verified,
        rejected,
        behaviours,
        coverage,
    })
}

/// Fold the report's verified and partial candidates into behaviours, and count what they
/// cover of the held-out traffic (`held_out`: the hold-out split; `None`: every trace).
fn behaviours(
    store: &dyn TraceStore,
    report: &[ReportEntry],
    held_out: Option<Split>,
    config: &FoldConfig,
) -> Result<(Vec<Behaviour>, Coverage)> {
    let is_proposal = |entry: &&ReportEntry| {
        entry
            .verdict
            .as_ref()
            .is_some_and(|v| matches!(v.status, VerdictStatus::Verified | VerdictStatus::Partial))
    };
    let proposals: Vec<&ReportEntry> = report.iter().filter(is_proposal).collect();
    let inputs: Vec<FoldInput<'_>> = proposals
        .iter()
        .map(|entry| FoldInput {
            id: &entry.candidate.id,
            tools: &entry.candidate.tools,
            gapped: entry.candidate.gapped,
            map_step: entry.candidate.flow.map_step(),
        })
        .collect();
    let all = tool_sequences(store, &|_| true)?;
    let behaviours = fold(&inputs, &all, config);
    let held = all.keep(&|id| held_out.is_none_or(|split| split.is_holdout(id)));

    let is_verified = |id: &str| {
        proposals.iter().any(|entry| {
            entry.candidate.id == id
                && entry
                    .verdict
                    .as_ref()
                    .is_some_and(|v| v.status == VerdictStatus::Verified)
        })
    };
    let runs = TraceRuns::with_gap(&held, config.max_gap);
    let verified_shapes: Vec<&[ShapeStep]> = behaviours
        .iter()
        .filter(|b| is_verified(&b.lead))
        .map(|b| b.shape.as_slice())
        .collect();
    let candidate_shapes: Vec<Vec<ShapeStep>> = proposals
        .iter()
        .filter(|entry| is_verified(&entry.candidate.id))
        .map(|entry| exact_shape(&entry.candidate.tools))
        .collect();
    let candidate_refs: Vec<&[ShapeStep]> = candidate_shapes.iter().map(Vec::as_slice).collect();
    let by_behaviours = runs.coverage(&verified_shapes);
    let by_candidates = runs.coverage(&candidate_refs);
    let coverage = Coverage {
        calls: by_behaviours.calls,
        by_verified_behaviours: by_behaviours.covered,
        by_verified_candidates: by_candidates.covered,
        verified_behaviours: verified_shapes.len(),
        round_trips_saved_by_verified_behaviours: by_behaviours.round_trips_saved,
        round_trips_saved_by_verified_candidates: by_candidates.round_trips_saved,
    };
    Ok((behaviours, coverage))
}

/// K-fold: mine on all folds but one, verify on that one; a candidate found in several folds
/// sums its replays. The stored candidates are the union (the first fold's copy of each).
fn cross_validate(
    store: &mut dyn TraceStore,
    folds: u32,
    request: &AnalyzeRequest,
    progress: &dyn Progress,
) -> Result<(MineOutcome, Vec<Checked>)> {
    let mut union: Option<MineOutcome> = None;
    let mut merged: BTreeMap<String, (Verdict, usize)> = BTreeMap::new();
    let mut errors: BTreeMap<String, String> = BTreeMap::new();
    for fold in 0..folds {
        let split = Split::Fold { folds, fold };
        let outcome = mine_split(&*store, &request.mine, split, &request.miner, progress)?;
        let checked = verify_split(
            &*store,
            &outcome.candidates,
            split,
            &request.verify,
            progress,
        )?;
        for check in checked {
            match check.verdict {
                Some(verdict) => match merged.get_mut(&check.candidate) {
                    None => {
                        merged.insert(check.candidate, (verdict, 1));
                    }
                    Some((sum, found_in)) => {
                        *found_in += 1;
                        sum.merge(verdict, request.verify.options.max_diffs);
                    }
                },
                None => {
                    if let Some(error) = check.error {
                        errors.entry(check.candidate).or_insert(error);
                    }
                }
            }
        }
        match &mut union {
            None => union = Some(outcome),
            Some(all) => {
                for candidate in outcome.candidates {
                    if !all.candidates.iter().any(|c| c.id == candidate.id) {
                        all.candidates.push(candidate);
                    }
                }
            }
        }
    }
    let Some(mut outcome) = union else {
        return Err(Error::NothingToMine { held_out: 0 });
    };
    sort_candidates(&mut outcome.candidates);
    store.replace_mining_results(&outcome.patterns, &outcome.candidates)?;
    let mut checked = Vec::new();
    for candidate in &outcome.candidates {
        if let Some((mut verdict, found_in)) = merged.remove(&candidate.id) {
            decide(&mut verdict, candidate);
            verdict.reason = format!("{} (over {found_in} of {folds} folds)", verdict.reason);
            checked.push(Checked {
                candidate: candidate.id.clone(),
                verdict: Some(verdict),
                error: None,
            });
        } else {
            checked.push(Checked {
                candidate: candidate.id.clone(),
                verdict: None,
                error: errors.remove(&candidate.id),
            });
        }
    }
    Ok((outcome, checked))
}

/// Verified first, then partial, rejected, and candidates without a verdict last; by score
/// within each.
fn ranked(candidates: &[Candidate], checked: Vec<Checked>) -> Vec<ReportEntry> {
    let mut by_id: BTreeMap<String, Checked> = checked
        .into_iter()
        .map(|c| (c.candidate.clone(), c))
        .collect();
    let mut entries: Vec<ReportEntry> = candidates
        .iter()
        .map(|candidate| {
            let check = by_id.remove(&candidate.id);
            let (verdict, error) = check.map_or((None, None), |c| (c.verdict, c.error));
            ReportEntry {
                candidate: candidate.clone(),
                verdict,
                error,
            }
        })
        .collect();
    let rank = |e: &ReportEntry| (e.verdict.is_none(), e.verdict.as_ref().map(|v| v.status));
    entries.sort_by(|a, b| {
        rank(a).cmp(&rank(b)).then(
            b.candidate
                .evidence
                .score
                .total_cmp(&a.candidate.evidence.score),
        )
    });
    entries
}
