//! `chainweaver analyze`: the main job. Import, mine, propose, report.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use chainweaver_analyzer::mine::MineOutcome;
use serde::Serialize;

use super::import::{ImportArgs, Summary, import_files};
use super::mine::{MineArgs, mine_and_store, summary_text};
use super::output::emit;
use super::store::open;
use super::{Global, exit};

/// Import agent logs, mine the tool sequences they repeat, infer every argument's source, and
/// print a ranked report of candidate flows, everything kept in the store (`chainweaver.db` by
/// default) for `candidates`, `flows` and `tui`.
#[derive(Debug, clap::Args)]
pub struct AnalyzeArgs {
    #[command(flatten)]
    pub import: ImportArgs,
    #[command(flatten)]
    pub mine: MineArgs,
    /// Also write the report as Markdown to this file.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
struct AnalyzeOutcome<'a> {
    import: &'a Summary,
    mine: &'a MineOutcome,
}

pub fn run(args: AnalyzeArgs, global: &Global) -> anyhow::Result<u8> {
    let imported = import_files(&args.import, None, global)?;
    let mut store = open(&global.store)?;
    let config = MineArgs::config(&args.mine);
    let outcome = mine_and_store(store.as_mut(), config, global)?;
    if let Some(path) = &args.report {
        std::fs::write(path, markdown(&imported, &outcome))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let both = AnalyzeOutcome {
        import: &imported,
        mine: &outcome,
    };
    emit(global, &both, || {
        let mut text = imported.text(global);
        text.push('\n');
        text.push_str(&summary_text(&outcome));
        text.push_str(
            "\nnext: `chainweaver candidates show 1`, `chainweaver candidates export 1 -o flow.json`, `chainweaver tui`\n",
        );
        text
    })?;
    Ok(if imported.rejected() > 0 {
        exit::PARTIAL
    } else {
        exit::OK
    })
}

/// The report as Markdown: what was read, and each candidate with its evidence and bindings.
fn markdown(imported: &Summary, outcome: &MineOutcome) -> String {
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
        "\n{} traces, {} steps, {} distinct tools; {} closed patterns; {} candidates.\n\n## Candidates\n\n| # | flow | support | round trips saved | mean confidence | flagged bindings | effects | score |\n|---:|---|---:|---:|---:|---:|---|---:|\n",
        outcome.traces,
        outcome.steps,
        outcome.distinct_tools,
        outcome.patterns.len(),
        outcome.candidates.len()
    );
    for (rank, candidate) in outcome.candidates.iter().enumerate() {
        let e = &candidate.evidence;
        let _ = writeln!(
            md,
            "| {} | `{}` | {} | {} | {:.2} | {} | {} | {:.1} |",
            rank + 1,
            candidate.tools.join(" -> "),
            e.support,
            e.round_trips_saved,
            e.mean_confidence,
            e.flagged_bindings,
            if e.read_only {
                "read-only"
            } else {
                "side effects"
            },
            e.score
        );
    }
    for (rank, candidate) in outcome.candidates.iter().enumerate().take(10) {
        let _ = write!(
            md,
            "\n### {}. `{}`\n\nReplaces {} agent tool calls with one flow call; seen in {} traces ({} occurrences).\n\n| step | tool | field | source | confidence |\n|---:|---|---|---|---:|\n",
            rank + 1,
            candidate.id,
            candidate.tools.len(),
            candidate.evidence.support,
            candidate.evidence.occurrences
        );
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
