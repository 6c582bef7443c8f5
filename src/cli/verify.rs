//! `chainweaver verify` and `chainweaver verdicts`: replay candidates against held-out traffic
//! and keep the verdicts in the store.

use std::path::PathBuf;

use chainweaver::pipeline::{self, Checked, ReplayTools, VerifyRequest};
use chainweaver::verify::{IgnorePaths, VerifyOptions};
use chainweaver_recorder::model::candidate::{
    Candidate, Verdict, VerdictStatus, VerdictThresholds,
};
use chainweaver_recorder::store::TraceStore;
use chainweaver_recorder::workspace::Workspace;
use clap::Subcommand;

use super::document::emit_named;
use super::mine::find_candidate;
use super::output::{Table, one_line};
use super::run::load_tools;
use super::store::open_existing;
use super::{Failure, Global, exit, failure, progress};

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

    /// The request these flags describe (the candidates and split are the caller's).
    pub fn request(&self) -> anyhow::Result<VerifyRequest> {
        let ignore = IgnorePaths::parse(&self.ignore).map_err(|err| Failure {
            code: exit::USAGE,
            message: err.to_string(),
            hint: None,
        })?;
        let tools = match &self.live {
            Some(manifest) => ReplayTools::Live {
                tools: load_tools(std::slice::from_ref(manifest))?,
                allow_side_effects: self.allow_side_effects,
            },
            None => ReplayTools::Recorded,
        };
        Ok(VerifyRequest {
            options: self.options()?,
            tools,
            ignore,
            ..VerifyRequest::default()
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
    let mut store = open_existing(&global.store)?;
    let request = VerifyRequest {
        candidates: args.candidates,
        holdout: args.holdout,
        ..args.flags.request()?
    };
    let bars = progress::Bars::new(global);
    let checked = pipeline::verify_store(store.as_mut(), &request, &bars)
        .map_err(|err| failure::library(err, global))?;
    emit_named(global, "verified", &checked, || checked_table(&checked))?;
    Ok(if checked.iter().any(|c| c.error.is_some()) {
        exit::FAILED
    } else {
        exit::OK
    })
}

pub fn run_verdicts(command: VerdictsCommand, global: &Global) -> anyhow::Result<u8> {
    let store = open_existing(&global.store)?;
    match command {
        VerdictsCommand::List => {
            let verdicts = store.verdicts()?;
            emit_named(global, "verdicts", &verdicts, || {
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
            let Some(verdict) = store.verdict(&id)? else {
                return Err(Failure {
                    code: exit::FAILED,
                    message: format!("no verdict for `{id}` in {}", global.store.display()),
                    hint: Some(format!("`chainweaver verify {id}` replays it")),
                }
                .into());
            };
            emit_named(global, "verdict", &verdict, || verdict_text(&verdict))?;
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
    let verdict = store.verdict(&candidate.id)?;
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
