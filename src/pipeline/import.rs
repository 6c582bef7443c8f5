//! Import agent logs into a store, file by file, with the rejected records written aside.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use chainweaver_recorder::import::{
    ImportFormat, ImportOptions, ImportReport, detect_format, import_path, import_path_raw,
};
use chainweaver_recorder::store::{AppendStats, TraceStore};
use serde::Serialize;

use super::{Progress, Unit};
use crate::error::{Error, Result};

/// What to import.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportRequest {
    /// Files or directories (directories are read recursively: *.json, *.jsonl, *.ndjson,
    /// *.txt).
    pub paths: Vec<PathBuf>,
    /// The input format; `None` detects it per file.
    pub format: Option<ImportFormat>,
    /// The traces' source label (default: `import:<format>:<file name>`).
    pub source: Option<String>,
    /// Put in front of every imported trace id.
    pub trace_id_prefix: Option<String>,
    /// Where rejected records go, as JSON Lines (created only when a record is rejected).
    pub rejects: PathBuf,
}

impl Default for ImportRequest {
    fn default() -> Self {
        Self {
            paths: Vec::new(),
            format: None,
            source: None,
            trace_id_prefix: None,
            rejects: PathBuf::from("chainweaver-rejects.jsonl"),
        }
    }
}

/// One file's import.
#[derive(Debug, Clone, Serialize)]
pub struct FileOutcome {
    #[serde(flatten)]
    pub report: ImportReport,
    pub stored: AppendStats,
}

/// Every file's import.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ImportSummary {
    pub files: Vec<FileOutcome>,
    /// The rejects file, when a record was rejected.
    pub rejects_file: Option<PathBuf>,
}

impl ImportSummary {
    /// Records rejected in all.
    pub fn rejected(&self) -> usize {
        self.files.iter().map(|o| o.report.rejects.len()).sum()
    }
}

fn collect_files(path: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
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
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no such file or directory",
        )));
    }
    Ok(())
}

/// Import every file the request names into `store`. Each batch of complete traces is stored
/// atomically; rejected records are reported (through `progress` and the rejects file) and
/// skipped, the rest of the file imported.
pub fn import_files(
    store: &mut dyn TraceStore,
    request: &ImportRequest,
    progress: &dyn Progress,
) -> Result<ImportSummary> {
    let mut files = Vec::new();
    for path in &request.paths {
        collect_files(path, &mut files)?;
    }
    let options = ImportOptions {
        format: request.format,
        source: request.source.clone(),
        trace_id_prefix: request.trace_id_prefix.clone(),
        ..ImportOptions::default()
    };
    let mut outcomes = Vec::new();
    let mut rejects = RejectsFile::new(&request.rejects);
    for file in &files {
        let size = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
        progress.begin(&file.display().to_string(), Some(size), Unit::Bytes);
        let outcome = import_file(store, file, &options, progress);
        progress.end();
        let outcome = outcome.map_err(|source| Error::ImportStopped {
            path: file.clone(),
            source,
        })?;
        for reject in &outcome.report.rejects {
            rejects.write(reject)?;
            progress.note(&format!("rejected: {reject}"));
        }
        outcomes.push(outcome);
    }
    let rejects_file = rejects.finish()?;
    Ok(ImportSummary {
        files: outcomes,
        rejects_file,
    })
}

/// One file, in the format named or detected.
fn import_file(
    store: &mut dyn TraceStore,
    file: &Path,
    options: &ImportOptions,
    progress: &dyn Progress,
) -> chainweaver_recorder::Result<FileOutcome> {
    let mut stored = AppendStats::default();
    let mut add = |written: AppendStats| {
        stored.traces += written.traces;
        stored.steps += written.steps;
        stored.duplicate_steps += written.duplicate_steps;
    };
    let format = match options.format {
        Some(format) => format,
        None => detect_format(file)?,
    };
    // ChainWeaver's own export (what `traces export` and `datasets generate --jsonl` write)
    // takes the bulk path: payloads go to the store as text, never as `Value`s. The stored
    // rows and rejects are the same either way.
    let report = if format == ImportFormat::ChainweaverTraces {
        store.begin_bulk_load()?;
        let imported = import_path_raw(
            file,
            &ImportOptions {
                format: Some(format),
                ..options.clone()
            },
            &mut |batch| {
                add(store.append_raw(&batch.traces, &batch.steps)?);
                Ok(())
            },
            &mut |read| progress.position(read.bytes_read),
        );
        // Also after a failed import: what it stored stays, with its indexes.
        let ended = store.end_bulk_load();
        imported.and_then(|report| ended.map(|()| report))?
    } else {
        import_path(
            file,
            &ImportOptions {
                format: Some(format),
                ..options.clone()
            },
            &mut |batch| {
                add(store.append(&batch.traces, &batch.steps)?);
                Ok(())
            },
            &mut |read| progress.position(read.bytes_read),
        )?
    };
    Ok(FileOutcome { report, stored })
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
