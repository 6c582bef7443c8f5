//! `chainweaver analyze`: the main job. Import, mine, verify by replay, report.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use chainweaver::verify::{HeldOut, Split, Verifier};
use chainweaver_analyzer::mine::{MineOutcome, sort_candidates};
use chainweaver_recorder::model::TraceWithSteps;
use chainweaver_recorder::model::candidate::{Candidate, Verdict, VerdictStatus};
use chainweaver_recorder::store::TraceStore;
use serde::Serialize;

use super::import::{ImportArgs, Summary, import_files};
use super::mine::{MineArgs, load_traces, mine_and_store, mine_traces, store_outcome};
use super::output::{Table, emit};
use super::store::open;
use super::verify::{Checked, VerifyFlags, store_verdict, verify_and_store};
use super::{Global, exit};

/// Import agent logs, mine the tool sequences they repeat on most of the traces, replay every
/// candidate flow through the executor on the traces held out, and print a ranked report of
/// the verified flows. Everything stays in the store (`chainweaver.db` by default) for
/// `candidates`, `verdicts`, `flows promote` and `tui`.
#[derive(Debug, clap::Args)]
pub struct AnalyzeArgs {
    #[command(flatten)]
    pub import: ImportArgs,
    #[command(flatten)]
    pub mine: MineArgs,
    #[command(flatten)]
    pub verify: VerifyFlags,
    /// Cross-validate: mine K times, each time on all folds but one, and replay on the fold
    /// left out (instead of one 80/20 hold-out).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(2..=20), conflicts_with = "holdout")]
    pub folds: Option<u32>,
    /// Also write the report as Markdown to this file.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// One row of the report: a candidate and its verdict.
#[derive(Debug, Serialize)]
struct ReportEntry<'a> {
    candidate: &'a Candidate,
    #[serde(skip_serializing_if = "Option::is_none")]
    verdict: Option<&'a Verdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct AnalyzeOutcome<'a> {
    import: &'a Summary,
    split: String,
    mined_traces: usize,
    held_out_traces: usize,
    mine: &'a MineOutcome,
    /// Verified first, then partial, then rejected; by score within each.
    report: Vec<ReportEntry<'a>>,
}

pub fn run(args: AnalyzeArgs, global: &Global) -> anyhow::Result<u8> {
    let imported = import_files(&args.import, None, global)?;
    let options = args.verify.options()?;
    let mut store = open(&global.store)?;
    let config = MineArgs::config(&args.mine);
    let (outcome, checked, split_text, mined_count, held_count) = match args.folds {
        None => {
            let split = Split::Holdout {
                percent: args.mine.holdout.unwrap_or(20),
            };
            let mined = mine_and_store(store.as_mut(), config, split, global)?;
            let source = args
                .verify
                .source(mined.mined.iter().chain(&mined.held_out))?;
            let verifier = Verifier::new(source, options);
            let held_out = HeldOut::new(mined.held_out.iter().collect());
            let jobs: Vec<(&Candidate, &HeldOut<'_>)> = mined
                .outcome
                .candidates
                .iter()
                .map(|c| (c, &held_out))
                .collect();
            let checked = verify_and_store(store.as_mut(), &verifier, &jobs, global)?;
            let counts = (mined.mined.len(), mined.held_out.len());
            (mined.outcome, checked, split.describe(), counts.0, counts.1)
        }
        Some(folds) => {
            let traces = load_traces(store.as_ref(), global)?;
            let (outcome, checked) = cross_validate(
                store.as_mut(),
                &traces,
                folds,
                &config,
                &args.verify,
                global,
            )?;
            let total = traces.len();
            (
                outcome,
                checked,
                format!("{folds}-fold cross-validation"),
                total,
                total,
            )
        }
    };
    let report = ranked(&outcome.candidates, &checked);
    if let Some(path) = &args.report {
        std::fs::write(path, markdown(&imported, &outcome, &split_text, &report))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let both = AnalyzeOutcome {
        import: &imported,
        split: split_text.clone(),
        mined_traces: mined_count,
        held_out_traces: held_count,
        mine: &outcome,
        report,
    };
    emit(global, &both, || {
        let mut text = imported.text(global);
        text.push('\n');
        text.push_str(&report_text(&both));
        text.push_str(
            "\nnext: `chainweaver verdicts show 1`, `chainweaver flows promote 1`, `chainweaver candidates export 1 -o flow.json`, `chainweaver tui`\n",
        );
        text
    })?;
    Ok(if imported.rejected() > 0 {
        exit::PARTIAL
    } else {
        exit::OK
    })
}

/// K-fold: mine on all folds but one, verify on that one; a candidate found in several folds
/// sums its replays. The stored candidates are the union (first fold's copy of each).
fn cross_validate(
    store: &mut dyn TraceStore,
    traces: &[TraceWithSteps],
    folds: u32,
    config: &chainweaver_analyzer::mine::MineConfig,
    flags: &VerifyFlags,
    global: &Global,
) -> anyhow::Result<(MineOutcome, Vec<Checked>)> {
    let source = flags.source(traces)?;
    let verifier = Verifier::new(source, flags.options()?);
    let mut union: Option<MineOutcome> = None;
    let mut merged: BTreeMap<String, (Verdict, usize)> = BTreeMap::new();
    let mut errors: BTreeMap<String, String> = BTreeMap::new();
    for fold in 0..folds {
        let split = Split::Fold { folds, fold };
        let (train, test): (Vec<&TraceWithSteps>, Vec<&TraceWithSteps>) = traces
            .iter()
            .partition(|t| !split.is_holdout(&t.trace.trace_id));
        let train: Vec<TraceWithSteps> = train.into_iter().cloned().collect();
        let mut outcome = mine_traces(&train, test.len(), config.clone(), global)?;
        let split_value = serde_json::to_value(split)?;
        for candidate in &mut outcome.candidates {
            candidate
                .metadata
                .insert("split".into(), split_value.clone());
        }
        let test = HeldOut::new(test);
        let jobs: Vec<(&Candidate, &HeldOut<'_>)> =
            outcome.candidates.iter().map(|c| (c, &test)).collect();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let results = verifier.verify_many(&jobs, threads, &|| {});
        for ((candidate, _), result) in jobs.iter().zip(results) {
            match result {
                Ok(verdict) => match merged.get_mut(&candidate.id) {
                    None => {
                        merged.insert(candidate.id.clone(), (verdict, 1));
                    }
                    Some((sum, found_in)) => {
                        *found_in += 1;
                        sum.occurrences_replayed += verdict.occurrences_replayed;
                        sum.exact_matches += verdict.exact_matches;
                        sum.occurrences_found += verdict.occurrences_found;
                        sum.holdout_traces += verdict.holdout_traces;
                        sum.failures.binding_wrong += verdict.failures.binding_wrong;
                        sum.failures.tool_output_changed += verdict.failures.tool_output_changed;
                        sum.failures.tool_failed += verdict.failures.tool_failed;
                        let room = verifier.options().max_diffs.saturating_sub(sum.diffs.len());
                        sum.diffs.extend(verdict.diffs.into_iter().take(room));
                    }
                },
                Err(err) => {
                    errors
                        .entry(candidate.id.clone())
                        .or_insert(err.to_string());
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
        anyhow::bail!("no folds were mined");
    };
    sort_candidates(&mut outcome.candidates);
    store_outcome(store, &outcome)?;
    let mut checked = Vec::new();
    for candidate in &outcome.candidates {
        if let Some((mut verdict, found_in)) = merged.remove(&candidate.id) {
            chainweaver::verify::decide(&mut verdict, candidate);
            verdict.reason = format!("{} (over {found_in} of {folds} folds)", verdict.reason);
            checked.push(store_verdict(store, verdict)?);
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

/// Verified first, then partial, rejected, and candidates without a verdict last.
fn status_rank(verdict: Option<&Verdict>) -> (bool, Option<VerdictStatus>) {
    (verdict.is_none(), verdict.map(|v| v.status))
}

fn ranked<'a>(candidates: &'a [Candidate], checked: &'a [Checked]) -> Vec<ReportEntry<'a>> {
    let mut entries: Vec<ReportEntry<'a>> = candidates
        .iter()
        .map(|candidate| {
            let check = checked.iter().find(|c| c.candidate == candidate.id);
            ReportEntry {
                candidate,
                verdict: check.and_then(|c| c.verdict.as_ref()),
                error: check.and_then(|c| c.error.as_deref()),
            }
        })
        .collect();
    entries.sort_by(|a, b| {
        status_rank(a.verdict).cmp(&status_rank(b.verdict)).then(
            b.candidate
                .evidence
                .score
                .total_cmp(&a.candidate.evidence.score),
        )
    });
    entries
}

fn report_text(outcome: &AnalyzeOutcome<'_>) -> String {
    let mine = outcome.mine;
    let verified = outcome
        .report
        .iter()
        .filter(|e| {
            e.verdict
                .is_some_and(|v| v.status == VerdictStatus::Verified)
        })
        .count();
    let mut text = format!(
        "{} traces mined, {} held out ({}); {} steps, {} tools: {} closed patterns, {} candidates, {} verified by replay\n\n",
        outcome.mined_traces,
        outcome.held_out_traces,
        outcome.split,
        mine.steps,
        mine.distinct_tools,
        mine.patterns.len(),
        mine.candidates.len(),
        verified
    );
    let mut table = Table::new(&[
        ">#",
        "flow (the tool calls it replaces)",
        "verdict",
        ">exact replays",
        ">round trips saved",
        ">score",
    ]);
    // Rejected candidates are summarized, not listed: `verdicts list` has every one.
    let mut rejected = (0usize, 0usize, 0usize);
    for (rank, entry) in outcome.report.iter().enumerate() {
        if let Some(v) = entry.verdict
            && v.status == VerdictStatus::Rejected
        {
            let thresholds = v.thresholds.unwrap_or_default();
            if entry.candidate.evidence.data_flow < thresholds.min_data_flow {
                rejected.0 += 1;
            } else if v.occurrences_replayed < thresholds.min_occurrences {
                rejected.1 += 1;
            } else {
                rejected.2 += 1;
            }
            continue;
        }
        table.row(vec![
            (rank + 1).to_string(),
            entry.candidate.tools.join(" -> "),
            match (entry.verdict, entry.error) {
                (Some(v), _) => v.status.as_str().into(),
                (None, Some(_)) => "error".into(),
                (None, None) => "-".into(),
            },
            entry.verdict.map_or(String::new(), |v| {
                format!("{}/{}", v.exact_matches, v.occurrences_replayed)
            }),
            entry.candidate.evidence.round_trips_saved.to_string(),
            format!("{:.1}", entry.candidate.evidence.score),
        ]);
    }
    text.push_str(&table.render());
    let (unlinked, unproven, failed) = rejected;
    if unlinked + unproven + failed > 0 {
        let _ = writeln!(
            text,
            "\n{} more rejected: {unlinked} with steps that share no data (unrelated calls that merely repeat together), {unproven} with too few held-out occurrences, {failed} whose replays did not match; `chainweaver verdicts list` shows each",
            unlinked + unproven + failed
        );
    }
    let errors: Vec<&ReportEntry<'_>> = outcome
        .report
        .iter()
        .filter(|e| e.error.is_some())
        .collect();
    for entry in errors {
        let _ = writeln!(text, "error: {}", entry.error.unwrap_or_default());
    }
    for (tools, reason) in &mine.skipped {
        let _ = writeln!(text, "skipped {}: {reason}", tools.join(" -> "));
    }
    text
}

/// The report as Markdown: what was read, then each candidate with its verdict, evidence and
/// bindings.
fn markdown(
    imported: &Summary,
    outcome: &MineOutcome,
    split: &str,
    report: &[ReportEntry<'_>],
) -> String {
    let mut md = String::from(
        "# ChainWeaver analysis\n\n## Input\n\n| file | format | traces | steps | failed | rejected |\n|---|---|---:|---:|---:|---:|\n",
    );
    for file in &imported.files {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} |",
            file.report.path.display(),
            file.report.format,
            file.report.traces,
            file.report.steps,
            file.report.failed_steps,
            file.report.rejects.len()
        );
    }
    let _ = write!(
        md,
        "\nMined {} traces ({split}), {} steps, {} distinct tools: {} closed patterns, {} candidates. Each candidate's flow was replayed through the executor on held-out occurrences.\n\n## Flows, verified first\n\n| # | flow | verdict | exact replays | round trips saved | support | flagged bindings | effects | score |\n|---:|---|---|---:|---:|---:|---:|---|---:|\n",
        outcome.traces,
        outcome.steps,
        outcome.distinct_tools,
        outcome.patterns.len(),
        outcome.candidates.len()
    );
    for (rank, entry) in report.iter().enumerate() {
        let e = &entry.candidate.evidence;
        let _ = writeln!(
            md,
            "| {} | `{}` | {} | {} | {} | {} | {} | {} | {:.1} |",
            rank + 1,
            entry.candidate.tools.join(" -> "),
            entry.verdict.map_or("not verified", |v| v.status.as_str()),
            entry.verdict.map_or(String::new(), |v| format!(
                "{}/{}",
                v.exact_matches, v.occurrences_replayed
            )),
            e.round_trips_saved,
            e.support,
            e.flagged_bindings,
            if e.read_only {
                "read-only"
            } else {
                "side effects"
            },
            e.score
        );
    }
    for (rank, entry) in report.iter().enumerate().take(10) {
        let candidate = entry.candidate;
        let _ = write!(
            md,
            "\n### {}. `{}`\n\nReplaces {} agent tool calls with one flow call; seen in {} traces ({} occurrences).\n\n",
            rank + 1,
            candidate.id,
            candidate.tools.len(),
            candidate.evidence.support,
            candidate.evidence.occurrences
        );
        match (entry.verdict, entry.error) {
            (Some(v), _) => {
                let _ = writeln!(
                    md,
                    "**Verdict: {}** ({} replay): {}.\n",
                    v.status.as_str(),
                    v.mode,
                    v.reason
                );
                for d in v.diffs.iter().take(3) {
                    let _ = writeln!(
                        md,
                        "- trace `{}`, step {} (`{}`), `{}`: recorded `{}`, replayed `{}`",
                        d.occurrence.trace_id,
                        d.step,
                        d.tool_name,
                        d.pointer,
                        d.expected
                            .as_ref()
                            .map_or("(absent)".into(), |v| v.to_string()),
                        d.actual
                            .as_ref()
                            .map_or("(absent)".into(), |v| v.to_string()),
                    );
                }
                if !v.diffs.is_empty() {
                    md.push('\n');
                }
            }
            (None, Some(error)) => {
                let _ = writeln!(md, "**Not verified:** {error}\n");
            }
            (None, None) => {}
        }
        md.push_str("| step | tool | field | source | confidence |\n|---:|---|---|---|---:|\n");
        for binding in &candidate.bindings {
            let _ = writeln!(
                md,
                "| {} | {} | `{}` | `{}` | {:.2} |",
                binding.step,
                binding.tool_name,
                binding.field,
                serde_json::to_string(&binding.source).unwrap_or_default(),
                binding.confidence
            );
        }
    }
    md
}
