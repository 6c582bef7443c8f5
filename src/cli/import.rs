//! `chainweaver import`: read agent logs into the store.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use chainweaver_recorder::import::{
    ImportFormat, ImportOptions, ImportReport, detect_format, import_path, import_path_raw,
};
use chainweaver_recorder::store::AppendStats;
use serde::Serialize;

use super::output::{Table, emit};
use super::store::open;
use super::{Global, exit, progress};

/// Import agent logs into the store. The format of each file is detected from its first
/// records unless `--format NAME` names it.
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

#[derive(Debug, Serialize)]
pub struct FileOutcome {
    #[serde(flatten)]
    pub report: ImportReport,
    pub stored: AppendStats,
}

#[derive(Debug, Serialize)]
pub struct Summary {
    pub files: Vec<FileOutcome>,
    pub rejects_file: Option<PathBuf>,
}

impl Summary {
    pub fn rejected(&self) -> usize {
        self.files.iter().map(|o| o.report.rejects.len()).sum()
    }

    /// The per-file table people see.
    pub fn text(&self, global: &Global) -> String {
        let mut table = Table::new(&[
            "file",
            "format",
            ">traces",
            ">steps",
            ">failed",
            ">rejected",
            ">already stored",
        ]);
        for outcome in &self.files {
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
        if let Some(rejects) = &self.rejects_file {
            text.push_str(&format!(
                "{} records rejected: see {}\n",
                self.rejected(),
                rejects.display()
            ));
        }
        text
    }
}

fn collect_files(path: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("cannot read the directory {}", path.display()))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for entry in entries {
            let wanted = entry.is_dir()
                || matches!(
                    entry.extension().and_then(|e| e.to_str()),
                    Some("json" | "jsonl" | "ndjson" | "txt")
                );
            if wanted {
                collect_files(&entry, out)?;
            }
        }
    } else if path.exists() {
        out.push(path.to_path_buf());
    } else {
        anyhow::bail!("{}: no such file or directory", path.display());
    }
    Ok(())
}

pub fn run(
    args: ImportArgs,
    input_format: Option<ImportFormat>,
    global: &Global,
) -> anyhow::Result<u8> {
    let summary = import_files(&args, input_format, global)?;
    emit(global, &summary, || summary.text(global))?;
    Ok(if summary.rejected() > 0 {
        exit::PARTIAL
    } else {
        exit::OK
    })
}

/// Import every file `args` names into the store; rejects go to the rejects file.
pub fn import_files(
    args: &ImportArgs,
    input_format: Option<ImportFormat>,
    global: &Global,
) -> anyhow::Result<Summary> {
    let mut files = Vec::new();
    for path in &args.paths {
        collect_files(path, &mut files)?;
    }
    let mut store = open(&global.store)?;
    let options = ImportOptions {
        format: input_format,
        source: args.source.clone(),
        trace_id_prefix: args.prefix.clone(),
        ..ImportOptions::default()
    };
    let mut outcomes = Vec::new();
    let mut rejects_writer: Option<BufWriter<File>> = None;
    for file in &files {
        let size = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
        let bar = progress::bytes_bar(global, size, &file.display().to_string());
        let mut stored = AppendStats::default();
        let mut add = |written: AppendStats| {
            stored.traces += written.traces;
            stored.steps += written.steps;
            stored.duplicate_steps += written.duplicate_steps;
        };
        // ChainWeaver's own export (what `traces export` and `datasets generate --jsonl` write)
        // takes the bulk path: payloads go to the store as text, never as `Value`s. The stored
        // rows and rejects are the same either way.
        let format = match input_format {
            Some(format) => format,
            None => detect_format(file)
                .with_context(|| format!("import of {} stopped", file.display()))?,
        };
        let report = if format == ImportFormat::ChainweaverTraces {
            store
                .begin_bulk_load()
                .with_context(|| format!("import of {} stopped", file.display()))?;
            let imported = import_path_raw(
                file,
                &options,
                &mut |batch| {
                    add(store.append_raw(&batch.traces, &batch.steps)?);
                    Ok(())
                },
                &mut |progress| bar.set_position(progress.bytes_read),
            );
            // Also after a failed import: what it stored stays, with its indexes.
            let ended = store.end_bulk_load();
            imported.and_then(|report| ended.map(|()| report))
        } else {
            import_path(
                file,
                &options,
                &mut |batch| {
                    add(store.append(&batch.traces, &batch.steps)?);
                    Ok(())
                },
                &mut |progress| bar.set_position(progress.bytes_read),
            )
        }
        .with_context(|| format!("import of {} stopped", file.display()))?;
        bar.finish_and_clear();
        if !report.rejects.is_empty() {
            if rejects_writer.is_none() {
                let handle = File::create(&args.rejects)
                    .with_context(|| format!("cannot create {}", args.rejects.display()))?;
                rejects_writer = Some(BufWriter::new(handle));
            }
            if let Some(writer) = rejects_writer.as_mut() {
                for reject in &report.rejects {
                    serde_json::to_writer(&mut *writer, reject)?;
                    writer.write_all(b"\n")?;
                    if !global.quiet && global.format == super::OutputFormat::Table {
                        eprintln!("rejected: {reject}");
                    }
                }
            }
        }
        outcomes.push(FileOutcome { report, stored });
    }
    if let Some(mut writer) = rejects_writer.take() {
        writer
            .flush()
            .with_context(|| format!("cannot write {}", args.rejects.display()))?;
    }
    let rejected: usize = outcomes.iter().map(|o| o.report.rejects.len()).sum();
    Ok(Summary {
        files: outcomes,
        rejects_file: (rejected > 0).then(|| args.rejects.clone()),
    })
}
