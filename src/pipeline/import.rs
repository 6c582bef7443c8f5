//! Import agent logs into a store, file by file, with a report per file and the rejected records
//! written aside.
//!
//! Every file named and every file found in a named folder gets a [`FileOutcome`]: imported
//! (with its counts), skipped (a file in a folder that is not a log ChainWeaver reads, and why)
//! or rejected (a file named on its own that cannot be read, or whose format cannot be told).
//! One file's trouble never stops the others; only a store that fails stops the run.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use chainweaver_recorder::RecorderError;
use chainweaver_recorder::capture::{RedactionCounts, RedactionPolicy};
use chainweaver_recorder::import::{
    ImportFormat, ImportOptions, ImportReport, Reject, RejectUnit, detect_format, import_path,
    import_path_raw, import_redaction,
};
use chainweaver_recorder::store::{AppendStats, TraceStore};
use serde::Serialize;

use super::{Progress, Unit};
use crate::error::{Error, Result};

/// File name extensions a folder's log files have. Files with others are listed as skipped.
pub const LOG_EXTENSIONS: [&str; 7] = ["json", "jsonl", "ndjson", "txt", "traj", "spmf", "pb"];

/// What to import.
#[derive(Debug, Clone)]
pub struct ImportRequest {
    /// Files or directories (directories are read recursively; files whose extension is one
    /// of [`LOG_EXTENSIONS`] are read, the others listed as skipped).
    pub paths: Vec<PathBuf>,
    /// The input format; `None` detects it per file.
    pub format: Option<ImportFormat>,
    /// The traces' source label (default: `import:<format>:<file name>`).
    pub source: Option<String>,
    /// Put in front of every imported trace id.
    pub trace_id_prefix: Option<String>,
    /// Where rejected records go, as JSON Lines (created only when a record is rejected).
    pub rejects: PathBuf,
    /// What is removed from every trace and step before it is stored (on by default, the
    /// recorder's secret rules: see `import_redaction`).
    pub redaction: RedactionPolicy,
}

impl Default for ImportRequest {
    fn default() -> Self {
        Self {
            paths: Vec::new(),
            format: None,
            source: None,
            trace_id_prefix: None,
            rejects: PathBuf::from("chainweaver-rejects.jsonl"),
            redaction: import_redaction(),
        }
    }
}

/// What happened to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileStatus {
    /// Read and stored (some of its records may still have been rejected).
    Imported,
    /// Found in a folder but not a log ChainWeaver reads; `reason` says why.
    Skipped,
    /// Named on its own (or found in a folder) but could not be read; `reason` says why.
    Rejected,
}

/// One file's import.
#[derive(Debug, Clone, Serialize)]
pub struct FileOutcome {
    /// The file.
    pub path: PathBuf,
    /// Imported, skipped or rejected.
    pub status: FileStatus,
    /// Why the file was skipped or rejected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its format, detected or named (none when it could not be told).
    pub format: Option<ImportFormat>,
    /// Traces read.
    pub traces: u64,
    /// Of those, traces without a tool call.
    pub traces_without_calls: u64,
    /// Steps (tool calls) read.
    pub steps: u64,
    /// Of those, failed calls.
    pub failed_steps: u64,
    /// Of those, calls whose result the log does not give.
    pub calls_without_result: u64,
    /// What redaction replaced and cut.
    pub redacted: RedactionCounts,
    /// Records not imported, in file order.
    pub rejects: Vec<Reject>,
    /// What the store took (and what it already held).
    pub stored: AppendStats,
}

impl FileOutcome {
    fn without_import(path: &Path, status: FileStatus, reason: String) -> Self {
        Self {
            path: path.to_path_buf(),
            status,
            reason: Some(reason),
            format: None,
            traces: 0,
            traces_without_calls: 0,
            steps: 0,
            failed_steps: 0,
            calls_without_result: 0,
            redacted: RedactionCounts::default(),
            rejects: Vec::new(),
            stored: AppendStats::default(),
        }
    }

    fn imported(report: ImportReport, stored: AppendStats) -> Self {
        Self {
            path: report.path,
            status: FileStatus::Imported,
            reason: None,
            format: Some(report.format),
            traces: report.traces,
            traces_without_calls: report.traces_without_calls,
            steps: report.steps,
            failed_steps: report.failed_steps,
            calls_without_result: report.calls_without_result,
            redacted: report.redacted,
            rejects: report.rejects,
            stored,
        }
    }
}

/// The sums over every file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ImportTotals {
    pub files: u64,
    pub imported_files: u64,
    pub skipped_files: u64,
    pub rejected_files: u64,
    pub traces: u64,
    pub traces_without_calls: u64,
    pub steps: u64,
    pub failed_steps: u64,
    pub calls_without_result: u64,
    pub rejected_records: u64,
    pub redacted: RedactionCounts,
}

/// Every file's import.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ImportSummary {
    pub files: Vec<FileOutcome>,
    pub totals: ImportTotals,
    /// The rejects file, when a record or file was rejected.
    pub rejects_file: Option<PathBuf>,
}

impl ImportSummary {
    /// Records and files rejected in all: anything but zero means the import is incomplete.
    pub fn rejected(&self) -> usize {
        let records: usize = self.files.iter().map(|o| o.rejects.len()).sum();
        let files = self
            .files
            .iter()
            .filter(|o| o.status == FileStatus::Rejected)
            .count();
        records + files
    }

    fn totals(files: &[FileOutcome]) -> ImportTotals {
        let mut totals = ImportTotals::default();
        for file in files {
            totals.files += 1;
            match file.status {
                FileStatus::Imported => totals.imported_files += 1,
                FileStatus::Skipped => totals.skipped_files += 1,
                FileStatus::Rejected => totals.rejected_files += 1,
            }
            totals.traces += file.traces;
            totals.traces_without_calls += file.traces_without_calls;
            totals.steps += file.steps;
            totals.failed_steps += file.failed_steps;
            totals.calls_without_result += file.calls_without_result;
            totals.rejected_records += file.rejects.len() as u64;
            totals.redacted += file.redacted;
        }
        totals
    }
}

/// A file to import: named on its own, or found in a folder.
struct Candidate {
    path: PathBuf,
    in_folder: bool,
}

/// The files under `path`, in name order; files a folder holds that are not logs are listed
/// with the reason they are skipped.
fn collect_files(
    path: &Path,
    in_folder: bool,
    files: &mut Vec<Candidate>,
    skipped: &mut Vec<FileOutcome>,
) -> Result<()> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    if path.is_dir() {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(path).map_err(io)? {
            entries.push(entry.map_err(io)?.path());
        }
        entries.sort();
        for entry in entries {
            let hidden = entry
                .file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with('.'));
            let extension = entry
                .extension()
                .and_then(|e| e.to_str())
                .map(str::to_ascii_lowercase);
            if hidden {
                skipped.push(FileOutcome::without_import(
                    &entry,
                    FileStatus::Skipped,
                    "hidden file or folder".to_owned(),
                ));
            } else if entry.is_dir() {
                collect_files(&entry, true, files, skipped)?;
            } else if extension
                .as_deref()
                .is_some_and(|e| LOG_EXTENSIONS.contains(&e))
            {
                files.push(Candidate {
                    path: entry,
                    in_folder: true,
                });
            } else {
                skipped.push(FileOutcome::without_import(
                    &entry,
                    FileStatus::Skipped,
                    format!(
                        "not a log file (reads files ending in .{})",
                        LOG_EXTENSIONS.join(", .")
                    ),
                ));
            }
        }
    } else if path.exists() {
        files.push(Candidate {
            path: path.to_path_buf(),
            in_folder,
        });
    } else {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no such file or directory",
        )));
    }
    Ok(())
}

/// Import every file the request names into `store`. Each batch of complete traces is stored
/// atomically; rejected records and files are reported (through `progress`, the outcomes and
/// the rejects file) and the run goes on with the next. Only a store error stops it.
pub fn import_files(
    store: &mut dyn TraceStore,
    request: &ImportRequest,
    progress: &dyn Progress,
) -> Result<ImportSummary> {
    let mut candidates = Vec::new();
    let mut outcomes = Vec::new();
    for path in &request.paths {
        collect_files(path, false, &mut candidates, &mut outcomes)?;
    }
    let options = ImportOptions {
        format: request.format,
        source: request.source.clone(),
        trace_id_prefix: request.trace_id_prefix.clone(),
        redaction: request.redaction.clone(),
        ..ImportOptions::default()
    };
    let mut rejects = RejectsFile::new(&request.rejects);
    for candidate in &candidates {
        let file = &candidate.path;
        let size = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
        progress.begin(&file.display().to_string(), Some(size), Unit::Bytes);
        let outcome = import_file(store, candidate, &options, progress);
        progress.end();
        let outcome = outcome?;
        match outcome.status {
            FileStatus::Imported => {}
            FileStatus::Skipped => {
                progress.note(&format!(
                    "skipped: {}: {}",
                    file.display(),
                    outcome.reason.as_deref().unwrap_or("")
                ));
            }
            FileStatus::Rejected => {
                let reason = outcome.reason.clone().unwrap_or_default();
                progress.note(&format!("rejected: {}: {reason}", file.display()));
                rejects.write(&Reject {
                    path: file.clone(),
                    line: 0,
                    unit: RejectUnit::Line,
                    reason,
                    excerpt: String::new(),
                })?;
            }
        }
        for reject in &outcome.rejects {
            rejects.write(reject)?;
            progress.note(&format!("rejected: {reject}"));
        }
        outcomes.push(outcome);
    }
    outcomes.sort_by(|a, b| a.path.cmp(&b.path));
    let rejects_file = rejects.finish()?;
    Ok(ImportSummary {
        totals: ImportSummary::totals(&outcomes),
        files: outcomes,
        rejects_file,
    })
}

/// The reason a file cannot be imported, for its outcome.
fn reason(error: &RecorderError) -> String {
    match error {
        RecorderError::Import {
            line: 0 | 1,
            message,
            ..
        } => message.clone(),
        RecorderError::Import { line, message, .. } => format!("line {line}: {message}"),
        RecorderError::Io { source, .. } => source.to_string(),
        other => other.to_string(),
    }
}

/// One file, in the format named or detected. A file whose format cannot be told is skipped
/// when a folder held it and rejected when it was named; a file that fails to read is
/// rejected; a store that fails stops the run.
fn import_file(
    store: &mut dyn TraceStore,
    candidate: &Candidate,
    options: &ImportOptions,
    progress: &dyn Progress,
) -> Result<FileOutcome> {
    let file = &candidate.path;
    let format = match options.format {
        Some(format) => format,
        None => match detect_format(file) {
            Ok(format) => format,
            Err(error) => {
                let status = if candidate.in_folder && !matches!(error, RecorderError::Io { .. }) {
                    FileStatus::Skipped
                } else {
                    FileStatus::Rejected
                };
                return Ok(FileOutcome::without_import(file, status, reason(&error)));
            }
        },
    };
    let options = ImportOptions {
        format: Some(format),
        ..options.clone()
    };
    let mut stored = AppendStats::default();
    let mut store_error = None;
    let mut add = |written: chainweaver_recorder::Result<AppendStats>| match written {
        Ok(written) => {
            stored.traces += written.traces;
            stored.steps += written.steps;
            stored.duplicate_steps += written.duplicate_steps;
            Ok(())
        }
        Err(error) => {
            let message = error.to_string();
            store_error = Some(error);
            Err(RecorderError::Import {
                path: file.clone(),
                line: 0,
                message,
            })
        }
    };
    // ChainWeaver's own export (what `traces export` and `datasets generate --jsonl` write)
    // takes the bulk path: payloads go to the store as text, never as `Value`s (with redaction
    // on, a line it might change is read as values and redacted). The stored rows and rejects
    // are the same either way.
    let imported = if format == ImportFormat::ChainweaverTraces {
        store
            .begin_bulk_load()
            .map_err(|source| Error::ImportStopped {
                path: file.clone(),
                source,
            })?;
        let imported = import_path_raw(
            file,
            &options,
            &mut |batch| add(store.append_raw(&batch.traces, &batch.steps)),
            &mut |read| progress.position(read.bytes_read),
        );
        // Also after a failed import: what it stored stays, with its indexes.
        let ended = store.end_bulk_load();
        match ended {
            Ok(()) => imported,
            Err(error) => {
                store_error.get_or_insert(error);
                imported
            }
        }
    } else {
        import_path(
            file,
            &options,
            &mut |batch| add(store.append(&batch.traces, &batch.steps)),
            &mut |read| progress.position(read.bytes_read),
        )
    };
    if let Some(source) = store_error {
        return Err(Error::ImportStopped {
            path: file.clone(),
            source,
        });
    }
    Ok(match imported {
        Ok(report) => FileOutcome::imported(report, stored),
        Err(error) => {
            let mut outcome =
                FileOutcome::without_import(file, FileStatus::Rejected, reason(&error));
            outcome.format = Some(format);
            outcome.stored = stored;
            outcome
        }
    })
}

/// The rejects file, created at the first rejected record.
struct RejectsFile<'a> {
    path: &'a Path,
    writer: Option<BufWriter<File>>,
}

impl<'a> RejectsFile<'a> {
    fn new(path: &'a Path) -> Self {
        Self { path, writer: None }
    }

    fn io(&self, source: std::io::Error) -> Error {
        Error::Io {
            path: self.path.to_path_buf(),
            source,
        }
    }

    fn write(&mut self, reject: &impl Serialize) -> Result<()> {
        if self.writer.is_none() {
            let file = File::create(self.path).map_err(|e| self.io(e))?;
            self.writer = Some(BufWriter::new(file));
        }
        let line = serde_json::to_string(reject).map_err(|e| self.io(e.into()))?;
        let result = match self.writer.as_mut() {
            Some(writer) => writer
                .write_all(line.as_bytes())
                .and_then(|()| writer.write_all(b"\n")),
            None => Ok(()),
        };
        result.map_err(|e| self.io(e))
    }

    /// Flush; the path when anything was written.
    fn finish(mut self) -> Result<Option<PathBuf>> {
        match self.writer.take() {
            Some(mut writer) => {
                writer.flush().map_err(|e| self.io(e))?;
                Ok(Some(self.path.to_path_buf()))
            }
            None => Ok(None),
        }
    }
}
