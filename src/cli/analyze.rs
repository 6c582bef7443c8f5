//! `chainweaver analyze`: the main job. Import, mine, verify by replay, report.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use chainweaver::pipeline::{self, AnalyzeReport, AnalyzeRequest, ImportSummary, ReportEntry};
use chainweaver_analyzer::fold::FoldConfig;
use chainweaver_analyzer::mine::MineOutcome;
use chainweaver_recorder::model::candidate::{Behaviour, Candidate, VariantKind, VerdictStatus};
use serde::Serialize;

use super::import::{ImportFlags, summary_text};
use super::mine::MineArgs;
use super::output::{Table, emit};
use super::store::open;
use super::verify::VerifyFlags;
use super::{Global, exit, failure, progress};

/// Import agent logs, mine the tool sequences they repeat on most of the traces, replay every
/// candidate flow through the executor on the traces held out, and print a ranked report of
/// the verified flows. With no paths, the traces already in the store are analyzed.
/// Everything stays in the store (`chainweaver.db` by default) for `candidates`, `verdicts`,
/// `flows promote` and `tui`.
#[derive(Debug, clap::Args)]
pub struct AnalyzeArgs {
    /// Files or directories to import first (directories are read recursively).
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub import: ImportFlags,
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
    /// Fold a verified flow into a longer one when at least this share of its occurrences lie
    /// inside the longer one's (other loop counts and other first steps always fold); above 1,
    /// parts are never folded.
    #[arg(long, value_name = "SHARE", default_value_t = 0.8)]
    pub fold_share: f64,
}

/// What `analyze --format json` prints.
#[derive(Debug, Serialize)]
struct AnalyzeOutput<'a> {
    schema_version: u32,
    #[serde(flatten)]
    report: &'a AnalyzeReport,
}

pub fn run(args: AnalyzeArgs, global: &Global) -> anyhow::Result<u8> {
    if args.mine.emit_sql {
        return super::mine::emit_sql(&args.mine, global);
    }
    if args.mine.count_only {
        return Err(super::Failure {
            code: exit::USAGE,
            message:
                "`analyze` proposes and verifies candidates; --count-only only counts patterns"
                    .into(),
            hint: Some("count the frequent patterns with `chainweaver mine --count-only`".into()),
        }
        .into());
    }
    if args.mine.all_frequent {
        return Err(super::Failure {
            code: exit::USAGE,
            message: "`analyze` proposes candidates from the closed patterns; --all-frequent only counts".into(),
            hint: Some("count every frequent pattern with `chainweaver mine --engine datafusion --all-frequent`".into()),
        }
        .into());
    }
    let miner = args.mine.miner()?;
    let mut store = open(&global.store)?;
    let request = AnalyzeRequest {
        import: Some(args.import.request(args.paths.clone())?),
        mine: args.mine.config(),
        miner,
        holdout: args.mine.holdout.unwrap_or(20),
        folds: args.folds,
        verify: args.verify.request()?,
        fold: FoldConfig {
            inside_share: args.fold_share,
            ..FoldConfig::default()
        },
    };
    let bars = progress::Bars::new(global);
    let report = pipeline::analyze(store.as_mut(), &request, &bars)
        .map_err(|err| failure::library(err, global))?;
    if let Some(path) = &args.report {
        std::fs::write(path, markdown(&report))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let output = AnalyzeOutput {
        schema_version: super::SCHEMA_VERSION,
        report: &report,
    };
    emit(global, &output, || {
        let mut text = String::new();
        if let Some(import) = &report.import {
            text.push_str(&summary_text(import, global));
            text.push('\n');
        }
        text.push_str(&report_text(&report));
        text.push_str(&next_steps(&report));
        text
    })?;
    let rejected = report.import.as_ref().map_or(0, ImportSummary::rejected);
    Ok(if rejected > 0 {
        exit::PARTIAL
    } else {
        exit::OK
    })
}

fn report_text(outcome: &AnalyzeReport) -> String {
    let mine = &outcome.mine;
    let verified = outcome.verified;
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
    text.push_str(&behaviour_table(outcome));
    let coverage = &outcome.coverage;
    if coverage.calls > 0 {
        let share = |n: usize| 100.0 * n as f64 / coverage.calls as f64;
        let _ = writeln!(
            text,
            "\n{} verified proposals cover {:.0}% of the {} held-out tool calls and save {} model round trips there (the {} verified candidates unfolded: {:.0}%, {})",
            coverage.verified_behaviours,
            share(coverage.by_verified_behaviours),
            coverage.calls,
            coverage.round_trips_saved_by_verified_behaviours,
            outcome.verified,
            share(coverage.by_verified_candidates),
            coverage.round_trips_saved_by_verified_candidates,
        );
    }
    let rejected = outcome.rejected;
    let (unlinked, unproven, failed) = (
        rejected.unlinked,
        rejected.too_few_occurrences,
        rejected.replays_differ,
    );
    if unlinked + unproven + failed > 0 {
        let _ = writeln!(
            text,
            "\n{} more rejected: {unlinked} with steps that share no data (unrelated calls that merely repeat together), {unproven} with too few held-out occurrences, {failed} whose replays did not match; `chainweaver verdicts list` shows each",
            unlinked + unproven + failed
        );
    }
    let errors: Vec<&ReportEntry> = outcome
        .report
        .iter()
        .filter(|e| e.error.is_some())
        .collect();
    for entry in errors {
        let _ = writeln!(
            text,
            "error: {}",
            entry.error.as_deref().unwrap_or_default()
        );
    }
    for (tools, reason) in &mine.skipped {
        let _ = writeln!(text, "skipped {}: {reason}", tools.join(" -> "));
    }
    text
}

/// Each candidate's number in `candidates list`: the one `verdicts show`, `flows promote` and
/// `candidates export` take, so the report's `#` names what those commands act on.
fn list_numbers(outcome: &AnalyzeReport) -> HashMap<&str, usize> {
    let mut listed: Vec<&Candidate> = outcome.report.iter().map(|e| &e.candidate).collect();
    listed.sort_by(|a, b| Candidate::rank_order(a, b));
    listed
        .into_iter()
        .enumerate()
        .map(|(i, c)| (c.id.as_str(), i + 1))
        .collect()
}

/// What to run next: the best verified proposal's commands, or where to look when nothing
/// was verified.
fn next_steps(outcome: &AnalyzeReport) -> String {
    let numbers = list_numbers(outcome);
    // Behaviours come best first; the first whose lead is verified.
    let best = outcome
        .behaviours
        .iter()
        .find(|b| {
            outcome.report.iter().any(|e| {
                e.candidate.id == b.lead
                    && e.verdict
                        .as_ref()
                        .is_some_and(|v| v.status == VerdictStatus::Verified)
            })
        })
        .and_then(|b| numbers.get(b.lead.as_str()).copied());
    match best {
        Some(n) => format!(
            "\nnext: `chainweaver verdicts show {n}`, `chainweaver flows promote {n}`, `chainweaver candidates export {n} -o flow.json`, `chainweaver tui`\n"
        ),
        None if outcome.report.is_empty() => "\nnext: `chainweaver patterns list` shows what repeats; more traffic, or a lower `--min-support`, may make candidates of it\n".into(),
        None => "\nnext: `chainweaver verdicts list` says why each candidate was not verified; `chainweaver tui` to browse them\n".into(),
    }
}

/// One row per behaviour (its lead's verdict and figures, what was folded into it), then the
/// candidates without a verdict. The `#` is the lead's number in `candidates list`.
fn behaviour_table(outcome: &AnalyzeReport) -> String {
    let mut table = Table::new(&[
        ">#",
        "behaviour",
        "folded in",
        "verdict",
        ">exact replays",
        ">round trips saved",
        ">score",
    ]);
    let numbers = list_numbers(outcome);
    let number = |id: &str| numbers.get(id).map_or(String::new(), usize::to_string);
    for behaviour in &outcome.behaviours {
        let Some(entry) = outcome
            .report
            .iter()
            .find(|e| e.candidate.id == behaviour.lead)
        else {
            continue;
        };
        table.row(vec![
            number(&entry.candidate.id),
            behaviour.name.clone(),
            folded_words(behaviour),
            entry
                .verdict
                .as_ref()
                .map_or("-".into(), |v| v.status.as_str().to_string()),
            entry.verdict.as_ref().map_or(String::new(), |v| {
                format!("{}/{}", v.exact_matches, v.occurrences_replayed)
            }),
            entry.candidate.evidence.round_trips_saved.to_string(),
            format!("{:.1}", entry.candidate.evidence.score),
        ]);
    }
    for entry in &outcome.report {
        if entry.verdict.is_none() {
            table.row(vec![
                number(&entry.candidate.id),
                entry.candidate.step_labels().join(" -> "),
                String::new(),
                if entry.error.is_some() { "error" } else { "-" }.into(),
                String::new(),
                entry.candidate.evidence.round_trips_saved.to_string(),
                format!("{:.1}", entry.candidate.evidence.score),
            ]);
        }
    }
    table.render()
}

/// `2 loop counts, 1 first step, 3 parts`, or `-`.
fn folded_words(behaviour: &Behaviour) -> String {
    let count = |kind: VariantKind| behaviour.variants.iter().filter(|v| v.kind == kind).count();
    let parts: Vec<String> = [
        (VariantKind::LoopCount, "loop count", "loop counts"),
        (VariantKind::FirstStep, "first step", "first steps"),
        (VariantKind::Part, "part", "parts"),
    ]
    .into_iter()
    .filter_map(|(kind, one, many)| match count(kind) {
        0 => None,
        1 => Some(format!("1 {one}")),
        n => Some(format!("{n} {many}")),
    })
    .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// The report as Markdown: what was read, then each candidate with its verdict, evidence and
/// bindings.
fn markdown(analysis: &AnalyzeReport) -> String {
    let outcome: &MineOutcome = &analysis.mine;
    let split = &analysis.split;
    let report = &analysis.report;
    let mut md = String::from(
        "# ChainWeaver analysis\n\n## Input\n\n| file | format | traces | steps | failed | rejected |\n|---|---|---:|---:|---:|---:|\n",
    );
    let files = analysis.import.as_ref().map_or(&[][..], |i| &i.files[..]);
    for file in files {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} |",
            file.path.display(),
            file.format
                .map_or_else(|| "-".to_owned(), |f| f.to_string()),
            file.traces,
            file.steps,
            file.failed_steps,
            file.rejects.len()
        );
    }
    let _ = write!(
        md,
        "\nMined {} traces ({split}), {} steps, {} distinct tools: {} closed patterns, {} candidates. Each candidate's flow was replayed through the executor on held-out occurrences.\n",
        outcome.traces,
        outcome.steps,
        outcome.distinct_tools,
        outcome.patterns.len(),
        outcome.candidates.len()
    );
    md.push_str("\n## Proposals, one per behaviour\n\n| # | behaviour | folded in | verdict |\n|---:|---|---|---|\n");
    let numbers = list_numbers(analysis);
    let number = |id: &str| numbers.get(id).copied().unwrap_or_default();
    for behaviour in &analysis.behaviours {
        let Some(entry) = report.iter().find(|e| e.candidate.id == behaviour.lead) else {
            continue;
        };
        let _ = writeln!(
            md,
            "| {} | `{}` | {} | {} |",
            number(&entry.candidate.id),
            behaviour.name,
            folded_words(behaviour),
            entry
                .verdict
                .as_ref()
                .map_or("not verified", |v| v.status.as_str())
        );
    }
    md.push_str("\n## Every candidate\n\nNumbered as in `candidates list`.\n\n| # | flow | verdict | exact replays | round trips saved | support | flagged bindings | effects | score |\n|---:|---|---|---:|---:|---:|---:|---|---:|\n");
    for entry in report {
        let e = &entry.candidate.evidence;
        let _ = writeln!(
            md,
            "| {} | `{}` | {} | {} | {} | {} | {} | {} | {:.1} |",
            number(&entry.candidate.id),
            entry.candidate.step_labels().join(" -> "),
            entry
                .verdict
                .as_ref()
                .map_or("not verified", |v| v.status.as_str()),
            entry.verdict.as_ref().map_or(String::new(), |v| format!(
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
        let candidate = &entry.candidate;
        let _ = write!(
            md,
            "\n### {}. `{}`\n\nReplaces {} agent tool calls with one flow call; seen in {} traces ({} occurrences).\n\n",
            rank + 1,
            candidate.id,
            candidate.tools.len(),
            candidate.evidence.support,
            candidate.evidence.occurrences
        );
        match (&entry.verdict, &entry.error) {
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
                binding.source.describe(),
                binding.confidence
            );
        }
    }
    md
}
