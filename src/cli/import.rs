//! `chainweaver import`: read agent logs into the store.

use std::path::PathBuf;

use chainweaver::pipeline::{self, FileStatus, ImportRequest, ImportSummary};
use chainweaver_recorder::capture::RedactionPolicy;
use chainweaver_recorder::import::{ImportFormat, import_redaction};

use super::output::{Table, emit};
use super::store::open;
use super::{Global, exit, failure, progress};

/// What `import` takes; its help is the `Import` command's doc comment.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// Files or directories (directories are read recursively: *.json, *.jsonl, *.ndjson,
    /// *.txt, *.traj, *.spmf).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub options: ImportFlags,
}

/// How files are imported (shared by `import` and `analyze`).
#[derive(Debug, Clone, clap::Args)]
pub struct ImportFlags {
    /// The input files' format, instead of detecting it per file.
    #[arg(long, value_name = "NAME", value_parser = parse_input_format)]
    pub input_format: Option<ImportFormat>,
    /// The traces' source label (default: `import:<format>:<file name>`).
    #[arg(long)]
    pub source: Option<String>,
    /// Put this in front of every imported trace id.
    #[arg(long)]
    pub prefix: Option<String>,
    /// Where rejected records go, as JSON Lines.
    #[arg(long, default_value = "chainweaver-rejects.jsonl")]
    pub rejects: PathBuf,
    /// Also redact the values of keys containing WORD (case and separators ignored).
    #[arg(long, value_name = "WORD", conflicts_with = "no_redact")]
    pub redact_key: Vec<String>,
    /// Also redact text matching REGEX inside every string (only its `secret` group, if named).
    #[arg(long, value_name = "REGEX", conflicts_with = "no_redact", value_parser = parse_pattern)]
    pub redact_pattern: Vec<String>,
    /// Store everything as it is in the logs, secrets included.
    #[arg(long)]
    pub no_redact: bool,
}

fn parse_input_format(text: &str) -> Result<ImportFormat, String> {
    text.parse().map_err(|_| {
        let names: Vec<&str> = ImportFormat::ALL.iter().map(|f| f.name()).collect();
        format!("unknown input format; use one of: {}", names.join(", "))
    })
}

fn parse_pattern(text: &str) -> Result<String, String> {
    RedactionPolicy::none()
        .with_pattern_text(text)
        .map(|_| text.to_owned())
        .map_err(|e| e.to_string())
}

impl ImportFlags {
    /// The redaction these flags ask for.
    fn redaction(&self) -> anyhow::Result<RedactionPolicy> {
        if self.no_redact {
            return Ok(RedactionPolicy::none());
        }
        let mut policy = import_redaction();
        for word in &self.redact_key {
            policy = policy.with_secret_key(word);
        }
        for pattern in &self.redact_pattern {
            policy = policy.with_pattern_text(pattern)?;
        }
        Ok(policy)
    }

    /// The request importing `paths` with these flags.
    pub fn request(&self, paths: Vec<PathBuf>) -> anyhow::Result<ImportRequest> {
        Ok(ImportRequest {
            paths,
            format: self.input_format,
            source: self.source.clone(),
            trace_id_prefix: self.prefix.clone(),
            rejects: self.rejects.clone(),
            redaction: self.redaction()?,
        })
    }
}

fn status_name(status: FileStatus) -> &'static str {
    match status {
        FileStatus::Imported => "imported",
        FileStatus::Skipped => "skipped",
        FileStatus::Rejected => "rejected",
    }
}

/// The per-file table people see, then why files were skipped or rejected, then the totals.
pub fn summary_text(summary: &ImportSummary, global: &Global) -> String {
    let mut table = Table::new(&[
        "file",
        "format",
        "status",
        ">traces",
        ">no calls",
        ">steps",
        ">failed",
        ">no result",
        ">redacted",
        ">rejected",
        ">already stored",
    ]);
    for outcome in &summary.files {
        table.row(vec![
            outcome.path.display().to_string(),
            outcome
                .format
                .map_or_else(|| "-".to_owned(), |f| f.to_string()),
            status_name(outcome.status).to_owned(),
            outcome.traces.to_string(),
            outcome.traces_without_calls.to_string(),
            outcome.steps.to_string(),
            outcome.failed_steps.to_string(),
            outcome.calls_without_result.to_string(),
            outcome.redacted.secrets.to_string(),
            outcome.rejects.len().to_string(),
            outcome.stored.duplicate_steps.to_string(),
        ]);
    }
    let mut text = table.render();
    for outcome in &summary.files {
        if let Some(reason) = &outcome.reason {
            text.push_str(&format!(
                "{}: {}: {reason}\n",
                status_name(outcome.status),
                outcome.path.display()
            ));
        }
    }
    let t = &summary.totals;
    text.push_str(&format!(
        "{} files: {} imported, {} skipped, {} rejected\n",
        t.files, t.imported_files, t.skipped_files, t.rejected_files
    ));
    text.push_str(&format!(
        "{} traces ({} without tool calls), {} steps ({} failed, {} without a result)\n",
        t.traces, t.traces_without_calls, t.steps, t.failed_steps, t.calls_without_result
    ));
    text.push_str(&format!(
        "{} secret values redacted, {} long strings cut\n",
        t.redacted.secrets, t.redacted.truncated
    ));
    text.push_str(&format!("stored in {}\n", global.store.display()));
    if let Some(rejects) = &summary.rejects_file {
        text.push_str(&format!(
            "{} records or files rejected: see {}\n",
            summary.rejected(),
            rejects.display()
        ));
    }
    text
}

/// What `import --format json` prints.
#[derive(serde::Serialize)]
struct ImportOutput<'a> {
    schema_version: u32,
    #[serde(flatten)]
    summary: &'a ImportSummary,
}

pub fn run(args: ImportArgs, global: &Global) -> anyhow::Result<u8> {
    let mut store = open(&global.store)?;
    let request = args.options.request(args.paths)?;
    let bars = progress::Bars::new(global);
    let summary = pipeline::import_files(store.as_mut(), &request, &bars)
        .map_err(|err| failure::library(err, global))?;
    let output = ImportOutput {
        schema_version: super::SCHEMA_VERSION,
        summary: &summary,
    };
    emit(global, &output, || summary_text(&summary, global))?;
    Ok(if summary.rejected() > 0 {
        exit::PARTIAL
    } else {
        exit::OK
    })
}
