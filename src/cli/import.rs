//! `chainweaver import`: read agent logs into the store.

use std::path::PathBuf;

use chainweaver::pipeline::{self, ImportRequest, ImportSummary};
use chainweaver_recorder::import::ImportFormat;

use super::output::{Table, emit};
use super::store::open;
use super::{Global, exit, failure, progress};

/// Import agent logs into the store. The format of each file is detected from its first
/// records unless `--input-format NAME` names it.
///
/// Formats: chainweaver-jsonl (the Python ChainWeaver's records, and `traces export` output),
/// chainweaver-events, execution-result, openai-messages, tau-bench, anthropic-messages, spmf.
///
/// Records that cannot be read are reported as `file:line: reason`, written to the rejects
/// file, and skipped; the rest of the file is imported and the exit status is 3. Each batch of
/// complete traces is stored atomically, so nothing already stored is touched by a bad file.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// Files or directories (directories are read recursively: *.json, *.jsonl, *.txt).
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
}

fn parse_input_format(text: &str) -> Result<ImportFormat, String> {
    text.parse().map_err(|_| {
        let names: Vec<&str> = ImportFormat::ALL.iter().map(|f| f.name()).collect();
        format!("unknown input format; use one of: {}", names.join(", "))
    })
}

impl ImportFlags {
    /// The request importing `paths` with these flags.
    pub fn request(&self, paths: Vec<PathBuf>) -> ImportRequest {
        ImportRequest {
            paths,
            format: self.input_format,
            source: self.source.clone(),
            trace_id_prefix: self.prefix.clone(),
            rejects: self.rejects.clone(),
        }
    }
}

/// The per-file table people see.
pub fn summary_text(summary: &ImportSummary, global: &Global) -> String {
    let mut table = Table::new(&[
        "file",
        "format",
        ">traces",
        ">steps",
        ">failed",
        ">rejected",
        ">already stored",
    ]);
    for outcome in &summary.files {
        table.row(vec![
            outcome.report.path.display().to_string(),
            outcome.report.format.to_string(),
            outcome.report.traces.to_string(),
            outcome.report.steps.to_string(),
            outcome.report.failed_steps.to_string(),
            outcome.report.rejects.len().to_string(),
            outcome.stored.duplicate_steps.to_string(),
        ]);
    }
    let mut text = table.render();
    text.push_str(&format!("stored in {}\n", global.store.display()));
    if let Some(rejects) = &summary.rejects_file {
        text.push_str(&format!(
            "{} records rejected: see {}\n",
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
    let request = args.options.request(args.paths);
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
