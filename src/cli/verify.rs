//! `chainweaver verify` and `chainweaver verdicts`: replay candidates against held-out traffic
//! and keep the verdicts in the store.

use std::path::PathBuf;

use anyhow::Context;
use chainweaver::verify::{
    Cassette, HeldOut, IgnorePaths, Split, ToolSource, Verifier, VerifyOptions,
};
use chainweaver_recorder::model::TraceWithSteps;
use chainweaver_recorder::model::candidate::{
    Candidate, Verdict, VerdictStatus, VerdictThresholds,
};
use chainweaver_recorder::store::TraceStore;
use clap::Subcommand;
use serde::Serialize;

use super::mine::{VERDICT_KIND, find_candidate, load_traces, stored_candidates};
use super::output::{Table, emit, one_line};
use super::run::load_tools;
use super::store::open_existing;
use super::{Failure, Global, exit, progress};

/// How candidates are replayed and judged (shared by `verify` and `analyze`).
#[derive(Debug, Clone, clap::Args)]
pub struct VerifyFlags {
    /// Replay with live tools from this command-tool manifest instead of the recorded calls.
    #[arg(long, value_name = "MANIFEST")]
    pub live: Option<PathBuf>,
    /// With --live: also run tools not marked `read_only = true` (they may change the world).
    #[arg(long, requires = "live")]
    pub allow_side_effects: bool,
    /// A volatile field left out when matching recorded calls and comparing replays: a JSON
    /// pointer, optionally for one tool (`/request_id`, `search:/nonce`, `/items/*/ts`).
    /// Repeatable.
    #[arg(long = "ignore", value_name = "[TOOL:]POINTER")]
    pub ignore: Vec<String>,
    /// Share of exact replays at or above which a candidate is verified.
    #[arg(long, default_value_t = 0.9, value_name = "SHARE")]
    pub min_exact: f64,
    /// Share of exact replays at or above which a candidate is partial (below: rejected).
    #[arg(long, default_value_t = 0.5, value_name = "SHARE")]
    pub min_partial: f64,
    /// Fewer held-out occurrences than this and a candidate is rejected for lack of evidence.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub min_occurrences: usize,
    /// Reject candidates whose share of steps linked by data flow is below this. The default
    /// 1 asks every step to read from or feed another: unrelated calls that merely repeat
    /// together (or an agent's `think` padding a flow) replay trivially and prove nothing.
    #[arg(long, default_value_t = 1.0, value_name = "SHARE")]
    pub min_data_flow: f64,
    /// Replay at most this many held-out occurrences per candidate.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub max_occurrences: usize,
}

impl VerifyFlags {
    pub fn options(&self) -> anyhow::Result<VerifyOptions> {
        let share_ok = |v: f64| (0.0..=1.0).contains(&v);
        if !share_ok(self.min_exact)
            || !share_ok(self.min_partial)
            || !share_ok(self.min_data_flow)
            || self.min_partial > self.min_exact
        {
            return Err(Failure {
                code: exit::USAGE,
                message: format!(
                    "thresholds must be shares between 0 and 1 with --min-partial ({}) <= --min-exact ({})",
                    self.min_partial, self.min_exact
                ),
                hint: None,
            }
            .into());
        }
        Ok(VerifyOptions {
            thresholds: VerdictThresholds {
                verified: self.min_exact,
                partial: self.min_partial,
                min_occurrences: self.min_occurrences,
                min_data_flow: self.min_data_flow,
            },
            max_occurrences: self.max_occurrences,
            ..VerifyOptions::default()
        })
    }

    /// The tools replays use: the manifest's (live) or a cassette of every trace (recorded).
    pub fn source<'a>(
        &self,
        traces: impl IntoIterator<Item = &'a TraceWithSteps>,
    ) -> anyhow::Result<ToolSource> {
        let ignore = IgnorePaths::parse(&self.ignore).map_err(|err| Failure {
            code: exit::USAGE,
            message: err.to_string(),
            hint: None,
        })?;
        Ok(match &self.live {
            Some(manifest) => ToolSource::Live {
                tools: load_tools(std::slice::from_ref(manifest))?,
                allow_side_effects: self.allow_side_effects,
                ignore,
            },
            None => {
                ToolSource::Recorded(std::sync::Arc::new(Cassette::from_traces(traces, ignore)))
            }
        })
    }
}

/// Replay candidates against traffic mining did not see, and store a verdict for each.
///
/// Each candidate's flow runs through the executor once per held-out occurrence of its tool
/// sequence, with the flow inputs that occurrence used; every step's inputs and outputs are
/// compared with what the agent did. Tools answer from the recorded calls unless `--live` names
/// a command-tool manifest. The held-out traces are those the candidate's mining run set aside
/// (`analyze`, or `mine --holdout`), never the traces it was mined from.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Candidates to verify, by id or by rank in `candidates list` (default: all).
    pub candidates: Vec<String>,
    #[command(flatten)]
    pub flags: VerifyFlags,
    /// Replay the traces this percent-hold-out split sets aside, instead of the split each
    /// candidate was mined with.
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u8).range(0..=100))]
    pub holdout: Option<u8>,
}

#[derive(Debug, Subcommand)]
pub enum VerdictsCommand {
    /// List the stored verdicts, verified first.
    List,
    /// Show one verdict with its step differences (pointer, recorded, replayed).
    Show {
        /// A candidate id, or its rank in `candidates list`.
        candidate: String,
    },
}

/// One candidate's verification: its verdict, or why it could not be verified.
#[derive(Debug, Serialize)]
pub struct Checked {
    pub candidate: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The split a candidate was mined with (its metadata), unless overridden.
pub fn split_of(candidate: &Candidate, holdout: Option<u8>) -> Split {
    if let Some(percent) = holdout {
        return Split::Holdout { percent };
    }
    candidate
        .metadata
        .get("split")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

/// Verify `jobs` (each with its held-out traces), store every verdict (one write each, so an
/// interrupted run leaves whole verdicts), and return the outcome per candidate.
pub fn verify_and_store(
    store: &mut dyn TraceStore,
    verifier: &Verifier,
    jobs: &[(&Candidate, &HeldOut<'_>)],
    global: &Global,
) -> anyhow::Result<Vec<Checked>> {
    let bar = progress::bar(global, jobs.len() as u64, "verifying");
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let results = verifier.verify_many(jobs, threads, &|| bar.inc(1));
    bar.finish_and_clear();
    let mut checked = Vec::with_capacity(jobs.len());
    for ((candidate, held_out), result) in jobs.iter().zip(results) {
        match result {
            Ok(mut verdict) => {
                if held_out.is_empty() {
                    verdict.reason = format!(
                        "{}; no held-out traffic: the candidate was mined from every trace (mine with --holdout 20, or run `analyze`)",
                        verdict.reason
                    );
                }
                checked.push(store_verdict(store, verdict)?);
            }
            Err(err) => checked.push(Checked {
                candidate: candidate.id.clone(),
                verdict: None,
                error: Some(err.to_string()),
            }),
        }
    }
    Ok(checked)
}

/// Store a verdict (one write, under its candidate's id) and report it.
pub fn store_verdict(store: &mut dyn TraceStore, verdict: Verdict) -> anyhow::Result<Checked> {
    store.put_document(
        VERDICT_KIND,
        &verdict.candidate_id,
        &serde_json::to_value(&verdict)?,
    )?;
    Ok(Checked {
        candidate: verdict.candidate_id.clone(),
        verdict: Some(verdict),
        error: None,
    })
}

/// The table `verify` and `analyze` print, one row a candidate.
pub fn checked_table(checked: &[Checked]) -> String {
    let mut table = Table::new(&[
        "candidate",
        "verdict",
        ">exact",
        ">binding wrong",
        ">output changed",
        ">tool failed",
    ]);
    let mut errors = String::new();
    for entry in checked {
        match (&entry.verdict, &entry.error) {
            (Some(v), _) => table.row(vec![
                entry.candidate.clone(),
                v.status.as_str().into(),
                format!("{}/{}", v.exact_matches, v.occurrences_replayed),
                v.failures.binding_wrong.to_string(),
                v.failures.tool_output_changed.to_string(),
                v.failures.tool_failed.to_string(),
            ]),
            (None, error) => {
                table.row(vec![
                    entry.candidate.clone(),
                    "error".into(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                ]);
                errors.push_str(&format!(
                    "error: {}\n",
                    error.as_deref().unwrap_or("unknown")
                ));
            }
        }
    }
    let mut text = table.render();
    text.push_str(&errors);
    text
}

pub fn run_verify(args: VerifyArgs, global: &Global) -> anyhow::Result<u8> {
    let options = args.flags.options()?;
    let mut store = open_existing(&global.store)?;
    let candidates = if args.candidates.is_empty() {
        stored_candidates(store.as_ref())?
    } else {
        args.candidates
            .iter()
            .map(|wanted| find_candidate(store.as_ref(), wanted, global))
            .collect::<anyhow::Result<Vec<_>>>()?
    };
    if candidates.is_empty() {
        return Err(Failure {
            code: exit::FAILED,
            message: format!("no candidates in {} to verify", global.store.display()),
            hint: Some(
                "`chainweaver analyze FILE` imports, mines and verifies in one go; or `chainweaver mine --holdout 20` first".into(),
            ),
        }
        .into());
    }
    let traces = load_traces(store.as_ref(), global)?;
    let source = args.flags.source(&traces)?;
    let verifier = Verifier::new(source, options);
    // One indexed held-out set per distinct split.
    let splits: Vec<Split> = candidates
        .iter()
        .map(|candidate| split_of(candidate, args.holdout))
        .collect();
    let mut distinct: Vec<Split> = Vec::new();
    for split in &splits {
        if !distinct.contains(split) {
            distinct.push(*split);
        }
    }
    let held_outs: Vec<HeldOut<'_>> = distinct
        .iter()
        .map(|split| {
            HeldOut::new(
                traces
                    .iter()
                    .filter(|t| split.is_holdout(&t.trace.trace_id))
                    .collect(),
            )
        })
        .collect();
    let jobs: Vec<(&Candidate, &HeldOut<'_>)> = candidates
        .iter()
        .zip(&splits)
        .map(|(candidate, split)| {
            let at = distinct.iter().position(|d| d == split).unwrap_or(0);
            (candidate, &held_outs[at])
        })
        .collect();
    let checked = verify_and_store(store.as_mut(), &verifier, &jobs, global)?;
    emit(global, &checked, || checked_table(&checked))?;
    Ok(if checked.iter().any(|c| c.error.is_some()) {
        exit::FAILED
    } else {
        exit::OK
    })
}

/// Every stored verdict, verified first, then by exact share.
pub fn stored_verdicts(store: &dyn TraceStore) -> anyhow::Result<Vec<Verdict>> {
    let mut verdicts = Vec::new();
    for (key, document) in store.list_documents(VERDICT_KIND)? {
        let verdict: Verdict = serde_json::from_value(document)
            .with_context(|| format!("stored verdict `{key}` cannot be read"))?;
        verdicts.push(verdict);
    }
    verdicts.sort_by(|a, b| {
        a.status
            .cmp(&b.status)
            .then(b.exact_rate.total_cmp(&a.exact_rate))
            .then_with(|| a.candidate_id.cmp(&b.candidate_id))
    });
    Ok(verdicts)
}

pub fn run_verdicts(command: VerdictsCommand, global: &Global) -> anyhow::Result<u8> {
    let store = open_existing(&global.store)?;
    match command {
        VerdictsCommand::List => {
            let verdicts = stored_verdicts(store.as_ref())?;
            emit(global, &verdicts, || {
                if verdicts.is_empty() {
                    return "no verdicts stored: run `chainweaver verify`\n".into();
                }
                let mut table = Table::new(&["candidate", "verdict", ">exact", "mode", "reason"]);
                for v in &verdicts {
                    table.row(vec![
                        v.candidate_id.clone(),
                        v.status.as_str().into(),
                        format!("{}/{}", v.exact_matches, v.occurrences_replayed),
                        v.mode.clone(),
                        v.reason.clone(),
                    ]);
                }
                table.render()
            })?;
        }
        VerdictsCommand::Show { candidate } => {
            let id = find_candidate(store.as_ref(), &candidate, global)
                .map(|c| c.id)
                .unwrap_or(candidate);
            let Some(document) = store.get_document(VERDICT_KIND, &id)? else {
                return Err(Failure {
                    code: exit::FAILED,
                    message: format!("no verdict for `{id}` in {}", global.store.display()),
                    hint: Some(format!("`chainweaver verify {id}` replays it")),
                }
                .into());
            };
            let verdict: Verdict = serde_json::from_value(document)
                .with_context(|| format!("stored verdict `{id}` cannot be read"))?;
            emit(global, &verdict, || verdict_text(&verdict))?;
        }
    }
    Ok(exit::OK)
}

fn verdict_text(v: &Verdict) -> String {
    let mut text = format!(
        "verdict for {}: {}\n  {}\n  {} held-out occurrences found in {} traces, {} replayed ({}), {} exact\n  failures: {} binding wrong, {} tool output changed, {} tool failed\n",
        v.candidate_id,
        v.status.as_str(),
        v.reason,
        v.occurrences_found,
        v.holdout_traces,
        v.occurrences_replayed,
        v.mode,
        v.exact_matches,
        v.failures.binding_wrong,
        v.failures.tool_output_changed,
        v.failures.tool_failed,
    );
    if !v.diffs.is_empty() {
        text.push_str("\ndifferences (first ones):\n");
        let mut table = Table::new(&["trace", ">step", "tool", "pointer", "recorded", "replayed"]);
        for d in &v.diffs {
            table.row(vec![
                d.occurrence.trace_id.clone(),
                d.step.to_string(),
                d.tool_name.clone(),
                d.pointer.clone(),
                d.expected
                    .as_ref()
                    .map_or("(absent)".into(), |e| one_line(e, 40)),
                d.actual
                    .as_ref()
                    .map_or("(absent)".into(), |a| one_line(a, 40)),
            ]);
        }
        text.push_str(&table.render());
    }
    text
}

/// Refuse to promote an unverified candidate unless forced: the error names its status.
pub fn check_promotable(
    store: &dyn TraceStore,
    candidate: &Candidate,
    force: bool,
) -> anyhow::Result<Option<Verdict>> {
    let verdict: Option<Verdict> = store
        .get_document(VERDICT_KIND, &candidate.id)?
        .map(serde_json::from_value)
        .transpose()
        .with_context(|| format!("stored verdict `{}` cannot be read", candidate.id))?;
    let verified = verdict
        .as_ref()
        .is_some_and(|v| v.status == VerdictStatus::Verified);
    if !verified && !force {
        let state = match &verdict {
            None => "has no verdict".to_string(),
            Some(v) => format!("is {} ({})", v.status.as_str(), v.reason),
        };
        return Err(Failure {
            code: exit::FAILED,
            message: format!(
                "candidate `{}` {state}; only verified candidates are promoted",
                candidate.id
            ),
            hint: Some(format!(
                "`chainweaver verify {}` replays it; --force promotes it anyway",
                candidate.id
            )),
        }
        .into());
    }
    Ok(verdict)
}
