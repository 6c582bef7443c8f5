//! Importers for the logs agents already write.
//!
//! [`import_path`] reads one file, detects its format (or takes the one named in
//! [`ImportOptions::format`]), turns it into [`ObservedTrace`]s and [`ObservedStep`]s and hands
//! them to a sink in [`ImportBatch`]es. Every batch holds complete traces (a trace and all its
//! steps travel together), so a caller can append each batch atomically. Bad records never abort
//! an import: each becomes a [`Reject`] with its file, line (or record index) and reason, and the
//! good records around it are still imported.
//!
//! Formats ([`ImportFormat`], with the names `--input-format` takes; every one is also detected
//! from a file's first records, see `docs/importing.md` for the rules):
//!
//! | name | what | one trace per | calls paired by |
//! |---|---|---|---|
//! | `claude-code` | Claude Code session JSONL: `user` / `assistant` entries with Anthropic messages | session (`sessionId`; a subagent's sidechain is its own, linked to its parent) | `tool_use_id` |
//! | `codex-rollout` | Codex CLI rollouts: `{timestamp, type, payload}` lines with Responses API items | rollout (`session_meta.id`) | `call_id` |
//! | `openai-responses` | Responses API items (`function_call`, `custom_tool_call`, `web_search_call`, outputs) or response objects | file | `call_id` |
//! | `openai-messages` | chat-completions messages and their variants: a list, JSON Lines of messages, or of `{"messages": [...]}` | conversation | `tool_call_id`, `id`, `tool_call_ids`, order |
//! | `anthropic-messages` | Anthropic messages with `tool_use` / `tool_result` content blocks | conversation | `tool_use_id` |
//! | `tau2-bench` | tau2-bench results: `{info, tasks, simulations: [{messages, ...}]}` | simulation | `id` |
//! | `tau-bench` | tau-bench result files: records with `task_id`, `trial`, `reward` and `traj` messages | record | `tool_call_id` |
//! | `swe-agent` | SWE-agent `.traj`: structured `tool_calls` in `history`, else `trajectory` text actions | file | `tool_call_ids`, else the entry itself |
//! | `mini-swe-agent` | mini-swe-agent messages: shell commands in fenced blocks of the assistant's text | file | the next user message |
//! | `openhands` | OpenHands event streams: actions with `tool_call_metadata`, observations with `cause` | file | `cause`, else `tool_call_id` |
//! | `toolbench` | ToolBench answer files: the last `train_messages` conversation (legacy `function_call`) | file (query) | order (`role: function`) |
//! | `bfcl` | Berkeley Function Calling Leaderboard multi-turn results: `{id, result, inference_log}` lines | line (`id`) | order within a step (`tool` entries) |
//! | `otlp` | OpenTelemetry trace exports (JSON, JSON Lines, protobuf as `.pb` or named): GenAI and OpenInference tool spans | conversation, else trace id | the span |
//! | `chainweaver-jsonl` | one tool call a line: `trace_id`, `tool`/`tool_name`, `inputs`, `outputs`, ... | `trace_id` | - |
//! | `chainweaver-traces` | ChainWeaver's own lossless export: one trace with its steps a line | line | - |
//! | `chainweaver-events` | agent-trace events: `session_id`, `event`, `tool`, `args`, `result_status`, `latency_ms`, ... | `session_id` | - |
//! | `execution-result` | saved flow runs (`flow_name`, `execution_log`, `trace_id`, ...) | record | - |
//! | `spmf` | SPMF sequence files: one sequence a line, items separated by `-1`, ended by `-2` | line | - |
//!
//! Every [`ImportReport`] counts the traces, steps, failed calls, calls whose result the log
//! never gives and traces without calls. Before a batch is handed over, its traces and steps
//! are redacted with [`ImportOptions::redaction`] (the recorder's secret rules unless changed,
//! see [`import_redaction`]), and the report counts what was replaced.
//!
//! Streaming: JSON Lines are read line by line, JSON arrays element by element, so memory holds one
//! record at a time plus the traces not yet handed over. Formats whose traces can interleave across
//! lines (`chainweaver-jsonl`, `chainweaver-events`, and a file of loose messages, which is one
//! conversation) can only know a trace is complete at the end of the file, so they hand over
//! their traces at the end.

mod bfcl;
mod chainweaver_events;
mod chainweaver_jsonl;
mod claude_code;
pub(crate) mod compact;
mod detect;
mod execution_result;
mod messages;
mod openhands;
mod otlp_file;
pub mod pyliteral;
mod records;
mod responses;
mod spmf;
mod swe_agent;
mod tau2_bench;
mod tau_bench;
mod toolbench;
mod traces_jsonl;
mod values;

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::capture::{RedactionCounts, RedactionPolicy};
use crate::error::{RecorderError, Result};
use crate::model::{ObservedStep, ObservedTrace};
use crate::store::RawSteps;

pub use detect::detect_format;

/// The log formats ChainWeaver imports. Each has a stable kebab-case name ([`ImportFormat::name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImportFormat {
    /// The Python ChainWeaver tool-call records, one call a line.
    ChainweaverJsonl,
    /// ChainWeaver's own lossless export: one trace with its steps a line.
    ChainweaverTraces,
    /// The Python ChainWeaver agent-trace events (`tool_call` / `model_call`).
    ChainweaverEvents,
    /// Saved `ExecutionResult` flow runs.
    ExecutionResult,
    /// OpenAI chat-completions messages.
    OpenaiMessages,
    /// tau-bench result files.
    TauBench,
    /// Anthropic messages.
    AnthropicMessages,
    /// SPMF sequence files.
    Spmf,
    /// Claude Code session logs.
    ClaudeCode,
    /// Codex CLI rollout files.
    CodexRollout,
    /// OpenAI Responses API items.
    OpenaiResponses,
    /// tau2-bench result documents.
    Tau2Bench,
    /// SWE-agent trajectories (`.traj`).
    SweAgent,
    /// mini-swe-agent trajectories.
    MiniSweAgent,
    /// OpenHands event streams.
    Openhands,
    /// ToolBench answer files.
    Toolbench,
    /// Berkeley Function Calling Leaderboard multi-turn result files.
    Bfcl,
    /// OpenTelemetry trace exports (OTLP JSON, JSON Lines or protobuf): GenAI `execute_tool`
    /// and OpenInference `TOOL` spans.
    Otlp,
}

impl ImportFormat {
    /// Every format, in the order the documentation lists them.
    pub const ALL: [ImportFormat; 18] = [
        ImportFormat::ChainweaverJsonl,
        ImportFormat::ChainweaverTraces,
        ImportFormat::ChainweaverEvents,
        ImportFormat::ExecutionResult,
        ImportFormat::OpenaiMessages,
        ImportFormat::TauBench,
        ImportFormat::AnthropicMessages,
        ImportFormat::Spmf,
        ImportFormat::ClaudeCode,
        ImportFormat::CodexRollout,
        ImportFormat::OpenaiResponses,
        ImportFormat::Tau2Bench,
        ImportFormat::SweAgent,
        ImportFormat::MiniSweAgent,
        ImportFormat::Openhands,
        ImportFormat::Toolbench,
        ImportFormat::Bfcl,
        ImportFormat::Otlp,
    ];

    /// The name `--format` takes and reports print.
    pub fn name(self) -> &'static str {
        match self {
            ImportFormat::ChainweaverJsonl => "chainweaver-jsonl",
            ImportFormat::ChainweaverTraces => "chainweaver-traces",
            ImportFormat::ChainweaverEvents => "chainweaver-events",
            ImportFormat::ExecutionResult => "execution-result",
            ImportFormat::OpenaiMessages => "openai-messages",
            ImportFormat::TauBench => "tau-bench",
            ImportFormat::AnthropicMessages => "anthropic-messages",
            ImportFormat::Spmf => "spmf",
            ImportFormat::ClaudeCode => "claude-code",
            ImportFormat::CodexRollout => "codex-rollout",
            ImportFormat::OpenaiResponses => "openai-responses",
            ImportFormat::Tau2Bench => "tau2-bench",
            ImportFormat::SweAgent => "swe-agent",
            ImportFormat::MiniSweAgent => "mini-swe-agent",
            ImportFormat::Openhands => "openhands",
            ImportFormat::Toolbench => "toolbench",
            ImportFormat::Bfcl => "bfcl",
            ImportFormat::Otlp => "otlp",
        }
    }
}

impl fmt::Display for ImportFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ImportFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ImportFormat::ALL
            .into_iter()
            .find(|format| format.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = ImportFormat::ALL.iter().map(|f| f.name()).collect();
                format!(
                    "unknown import format {s:?}; known formats: {}",
                    names.join(", ")
                )
            })
    }
}

/// How to import a file.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The format; `None` detects it from the first bytes and the first record.
    pub format: Option<ImportFormat>,
    /// Hand a batch to the sink once it holds at least this many steps (traces are never split).
    /// Larger batches make bulk imports faster (fewer commits, fewer part files); memory holds
    /// about three batches at a time.
    pub batch_steps: usize,
    /// Also hand a batch over once the input read since its first trace reaches this many bytes,
    /// so records with large payloads do not make batches (and memory) grow without bound.
    pub batch_bytes: u64,
    /// The traces' `source`; by default `import:<format>:<file name>`.
    pub source: Option<String>,
    /// Put in front of every imported trace id, to keep ids of different imports apart.
    pub trace_id_prefix: Option<String>,
    /// A line (or single JSON document) longer than this is rejected instead of read into memory.
    pub max_record_bytes: usize,
    /// Applied to every trace and step (and to the excerpts of rejected records) before they
    /// are handed over, so secrets in a log never reach a store. On by default
    /// ([`import_redaction`]: the secret rules [`TraceRecorder`](crate::capture::TraceRecorder)
    /// uses); [`RedactionPolicy::none`] turns it off. On the raw bulk path, a line redaction
    /// might change ([`RedactionPolicy::may_change_json_text`]) is read as values instead.
    pub redaction: RedactionPolicy,
}

impl Default for ImportOptions {
    fn default() -> Self {
        Self {
            format: None,
            batch_steps: 50_000,
            batch_bytes: 32 * 1024 * 1024,
            source: None,
            trace_id_prefix: None,
            max_record_bytes: 256 * 1024 * 1024,
            redaction: import_redaction(),
        }
    }
}

/// The redaction an import applies unless told otherwise: the recorder's secret keys and
/// patterns ([`RedactionPolicy::default`]) without its size cap on strings. The cap guards a
/// live program's memory; an import copies what is already on disk, and cutting its long
/// values would lose data.
pub fn import_redaction() -> RedactionPolicy {
    RedactionPolicy::default().with_max_string_bytes(None)
}

/// Complete traces with all their steps, ready for one atomic append.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportBatch {
    /// The traces, each complete.
    pub traces: Vec<ObservedTrace>,
    /// The steps of `traces`, trace by trace, each trace's steps in step order.
    pub steps: Vec<ObservedStep>,
}

/// Complete traces with all their steps, ready for one atomic
/// [`TraceStore::append_raw`](crate::store::TraceStore::append_raw): what [`import_path_raw`]
/// hands over. The steps keep their payloads as the compact JSON text the stores write.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawImportBatch {
    /// The traces, each complete.
    pub traces: Vec<ObservedTrace>,
    /// The steps of `traces`, trace by trace, each trace's steps in step order.
    pub steps: RawSteps,
}

/// A batch as the parsing thread builds it.
pub(crate) enum Batch {
    Values(ImportBatch),
    Raw(RawImportBatch),
}

/// How far an import has got, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportProgress {
    /// Bytes of the file read so far.
    pub bytes_read: u64,
    /// The file's size.
    pub total_bytes: u64,
    /// Traces handed to the sink so far.
    pub traces: u64,
    /// Steps handed to the sink so far.
    pub steps: u64,
}

/// What a reject's `line` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RejectUnit {
    /// A 1-based line of the file.
    Line,
    /// A 1-based element of a JSON array file (or 1 for a single JSON document).
    Record,
}

/// One record that could not be imported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reject {
    /// The file the record is in.
    pub path: PathBuf,
    /// 1-based line, or record index when `unit` is [`RejectUnit::Record`].
    pub line: u64,
    /// What `line` counts.
    pub unit: RejectUnit,
    /// Why the record was not imported.
    pub reason: String,
    /// The start of the offending record, truncated, invalid UTF-8 replaced.
    pub excerpt: String,
}

impl fmt::Display for Reject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.unit {
            RejectUnit::Line => write!(f, "{}:{}: {}", self.path.display(), self.line, self.reason),
            RejectUnit::Record => write!(
                f,
                "{}: record {}: {}",
                self.path.display(),
                self.line,
                self.reason
            ),
        }
    }
}

/// The outcome of one import.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportReport {
    /// The file imported.
    pub path: PathBuf,
    /// Its format, detected or named.
    pub format: ImportFormat,
    /// Traces handed to the sink.
    pub traces: u64,
    /// Steps handed to the sink.
    pub steps: u64,
    /// Of those, steps that record a failed call.
    pub failed_steps: u64,
    /// Of those, calls whose result the log never gives (`result_missing`).
    pub calls_without_result: u64,
    /// Of the traces, those without any tool call.
    pub traces_without_calls: u64,
    /// What redaction replaced and cut before the batches were handed over.
    pub redacted: RedactionCounts,
    /// Records that were not imported, in file order.
    pub rejects: Vec<Reject>,
}

/// Imports one file. Batches go to `sink` (an error from the sink stops the import and is
/// returned); `progress` hears about bytes read. Rejected records are listed in the report; the
/// import itself fails only when the file cannot be read or its format cannot be told.
///
/// The file is read and parsed on a helper thread while `sink` and `progress` run on the calling
/// thread, so parsing the next batch overlaps storing the last one. At most one finished batch
/// waits between the two, which bounds memory to about three batches.
pub fn import_path(
    path: &Path,
    options: &ImportOptions,
    sink: &mut dyn FnMut(ImportBatch) -> Result<()>,
    progress: &mut dyn FnMut(ImportProgress),
) -> Result<ImportReport> {
    let detected = detect_once(path, options)?;
    if detected.0 == ImportFormat::Otlp {
        return otlp_file::import(path, options, sink);
    }
    run_import(
        path,
        options,
        detected,
        false,
        &mut |batch| match batch {
            Batch::Values(batch) => sink(batch),
            Batch::Raw(raw) => sink(ImportBatch {
                steps: raw.steps.to_steps()?,
                traces: raw.traces,
            }),
        },
        progress,
    )
}

/// [`import_path`] for bulk loads: the same records, rejects and report, but batches carry
/// their steps as [`RawSteps`] (payloads as compact JSON text) for
/// [`TraceStore::append_raw`](crate::store::TraceStore::append_raw), which stores the same rows
/// as `append` would. A `chainweaver-traces` JSON Lines file is read without building a `Value`
/// of any payload: payload text is copied, compacted where needed, and a line whose payloads a
/// `Value` would change beyond spelling (a repeated key, say) goes the general way. Other
/// formats are read as by [`import_path`] and their steps turned into text on the parsing
/// thread.
pub fn import_path_raw(
    path: &Path,
    options: &ImportOptions,
    sink: &mut dyn FnMut(RawImportBatch) -> Result<()>,
    progress: &mut dyn FnMut(ImportProgress),
) -> Result<ImportReport> {
    let detected = detect_once(path, options)?;
    if detected.0 == ImportFormat::Otlp {
        return otlp_file::import(path, options, &mut |batch: ImportBatch| {
            sink(RawImportBatch {
                steps: RawSteps::from(&batch.steps[..]),
                traces: batch.traces,
            })
        });
    }
    run_import(
        path,
        options,
        detected,
        true,
        &mut |batch| match batch {
            Batch::Raw(raw) => sink(raw),
            Batch::Values(batch) => sink(RawImportBatch {
                steps: RawSteps::from(&batch.steps[..]),
                traces: batch.traces,
            }),
        },
        progress,
    )
}

/// The file's format and layout, told once: named, an OTLP protobuf export by its `.pb` name
/// (binary, so nothing to probe), or detected from its first records.
fn detect_once(path: &Path, options: &ImportOptions) -> Result<(ImportFormat, records::Layout)> {
    Ok(match options.format {
        Some(ImportFormat::Otlp) => (ImportFormat::Otlp, records::Layout::Lines),
        Some(format) => (format, detect::detect_layout(path, format)?),
        None if path.extension().is_some_and(|e| e == "pb") => {
            (ImportFormat::Otlp, records::Layout::Lines)
        }
        None => detect::detect(path)?,
    })
}

fn run_import(
    path: &Path,
    options: &ImportOptions,
    (format, layout): (ImportFormat, records::Layout),
    raw: bool,
    sink: &mut dyn FnMut(Batch) -> Result<()>,
    progress: &mut dyn FnMut(ImportProgress),
) -> Result<ImportReport> {
    let total_bytes = std::fs::metadata(path)
        .map_err(|source| RecorderError::Io {
            path: path.to_owned(),
            source,
        })?
        .len();
    let (sender, receiver) = std::sync::mpsc::sync_channel::<Handover>(1);
    std::thread::scope(|scope| {
        let parser = scope.spawn(move || {
            let mut send_batch = |batch: Batch| {
                sender
                    .send(Handover::Batch(batch))
                    .map_err(|_| RecorderError::Import {
                        path: path.to_owned(),
                        line: 0,
                        message: "import stopped: the store no longer takes batches".into(),
                    })
            };
            // Progress is advisory: when the caller is busy storing, an update is dropped
            // rather than holding up parsing.
            let sender_for_progress = sender.clone();
            let mut send_progress = |update: ImportProgress| {
                let _ = sender_for_progress.try_send(Handover::Progress(update));
            };
            parse_file(
                path,
                options,
                (format, layout),
                raw,
                total_bytes,
                &mut send_batch,
                &mut send_progress,
            )
        });
        let mut sink_error = None;
        for handover in &receiver {
            match handover {
                Handover::Batch(batch) => {
                    if let Err(e) = sink(batch) {
                        sink_error = Some(e);
                        break;
                    }
                }
                Handover::Progress(update) => progress(update),
            }
        }
        // Dropping the receiver makes the parser's next hand-over fail, which stops it.
        drop(receiver);
        let parsed = match parser.join() {
            Ok(parsed) => parsed,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        if let Some(e) = sink_error {
            return Err(e);
        }
        let report = parsed?;
        progress(ImportProgress {
            bytes_read: total_bytes,
            total_bytes,
            traces: report.traces,
            steps: report.steps,
        });
        Ok(report)
    })
}

/// What the parsing thread hands to the calling thread.
enum Handover {
    Batch(Batch),
    Progress(ImportProgress),
}

/// Reads and parses the whole file, handing batches to `sink` and progress to `progress`.
fn parse_file(
    path: &Path,
    options: &ImportOptions,
    (format, layout): (ImportFormat, records::Layout),
    raw: bool,
    total_bytes: u64,
    sink: &mut dyn FnMut(Batch) -> Result<()>,
    progress: &mut dyn FnMut(ImportProgress),
) -> Result<ImportReport> {
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let source = options
        .source
        .clone()
        .unwrap_or_else(|| format!("import:{}:{file_name}", format.name()));
    let mut out = Output {
        path: path.to_owned(),
        stem: values::file_stem(path),
        source,
        prefix: options.trace_id_prefix.clone().unwrap_or_default(),
        batch_steps: options.batch_steps.max(1),
        batch_bytes: options.batch_bytes.max(1),
        batch_started_at: None,
        max_record_bytes: options.max_record_bytes,
        redaction: &options.redaction,
        sink,
        progress,
        pending: ImportBatch::default(),
        pending_raw: raw.then(RawSteps::new),
        pending_steps: 0,
        seen_trace_ids: HashSet::new(),
        report: ImportReport {
            path: path.to_owned(),
            format,
            traces: 0,
            steps: 0,
            failed_steps: 0,
            calls_without_result: 0,
            traces_without_calls: 0,
            redacted: RedactionCounts::default(),
            rejects: Vec::new(),
        },
        bytes_read: 0,
        total_bytes,
        last_progress: 0,
    };
    match format {
        ImportFormat::Spmf => spmf::import(&mut out)?,
        ImportFormat::ChainweaverJsonl => {
            let mut handler = chainweaver_jsonl::Handler::default();
            records::read(layout, &mut out, &mut handler)?;
        }
        ImportFormat::ChainweaverTraces => {
            let mut handler = traces_jsonl::Handler::default();
            records::read(layout, &mut out, &mut handler)?;
        }
        ImportFormat::ChainweaverEvents => {
            let mut handler = chainweaver_events::Handler::default();
            records::read(layout, &mut out, &mut handler)?;
        }
        ImportFormat::ExecutionResult => {
            let mut handler = execution_result::Handler;
            records::read(layout, &mut out, &mut handler)?;
        }
        ImportFormat::OpenaiMessages | ImportFormat::AnthropicMessages => {
            let mut handler = messages::Handler::default();
            records::read(layout, &mut out, &mut handler)?;
        }
        ImportFormat::TauBench => {
            let mut handler = tau_bench::Handler;
            records::read(layout, &mut out, &mut handler)?;
        }
        ImportFormat::ClaudeCode => {
            let mut handler = claude_code::Handler::default();
            records::read(layout, &mut out, &mut handler)?;
        }
        ImportFormat::CodexRollout => {
            let mut handler = responses::RolloutHandler::default();
            records::read(layout, &mut out, &mut handler)?;
        }
        ImportFormat::OpenaiResponses => {
            let mut handler = responses::ResponsesHandler::default();
            records::read(layout, &mut out, &mut handler)?;
        }
        ImportFormat::Tau2Bench => {
            let mut handler = tau2_bench::Handler;
            records::read(layout, &mut out, &mut handler)?;
        }
        ImportFormat::SweAgent => {
            let mut handler = swe_agent::SweAgentHandler;
            records::read(layout, &mut out, &mut handler)?;
        }
        ImportFormat::MiniSweAgent => {
            let mut handler = swe_agent::MiniSweAgentHandler::default();
            records::read(layout, &mut out, &mut handler)?;
        }
        ImportFormat::Openhands => {
            let mut handler = openhands::Handler::default();
            records::read(layout, &mut out, &mut handler)?;
        }
        // Read by `otlp_file` before a parsing thread starts.
        ImportFormat::Otlp => {
            return Err(RecorderError::Import {
                path: out.path.clone(),
                line: 0,
                message: "OTLP exports are read by the OTLP reader".into(),
            });
        }
        ImportFormat::Toolbench => {
            let mut handler = toolbench::Handler;
            records::read(layout, &mut out, &mut handler)?;
        }
        ImportFormat::Bfcl => {
            let mut handler = bfcl::Handler;
            records::read(layout, &mut out, &mut handler)?;
        }
    }
    out.flush()?;
    Ok(out.report)
}

/// Where a record came from, for rejects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Position {
    pub line: u64,
    pub unit: RejectUnit,
}

/// What every format handler writes to: finished traces, rejects and progress.
pub(crate) struct Output<'a> {
    pub path: PathBuf,
    /// The file name without its extension, for trace ids made up from the file.
    pub stem: String,
    source: String,
    prefix: String,
    batch_steps: usize,
    batch_bytes: u64,
    /// `bytes_read` when the first trace of the pending batch was emitted.
    batch_started_at: Option<u64>,
    pub max_record_bytes: usize,
    redaction: &'a RedactionPolicy,
    sink: &'a mut dyn FnMut(Batch) -> Result<()>,
    progress: &'a mut dyn FnMut(ImportProgress),
    /// The traces of the batch being built, and its steps unless they go to `pending_raw`.
    pending: ImportBatch,
    /// The steps of the batch being built, for an import that hands over raw steps.
    pending_raw: Option<RawSteps>,
    pending_steps: usize,
    seen_trace_ids: HashSet<String>,
    report: ImportReport,
    pub bytes_read: u64,
    total_bytes: u64,
    last_progress: u64,
}

impl Output<'_> {
    /// Hands over one complete trace. Fills in the source when the handler left it empty, applies
    /// the id prefix, keeps ids unique within the import (a repeated id gets `~2`, `~3`, ... and
    /// the original in metadata) and numbers the steps 0, 1, 2, ...
    ///
    /// Redaction happens here, before anything is handed over; so does the counting of failed
    /// calls, calls without a result and traces without calls.
    /// Emit a record's trace, or reject the record with the reason it could not be read.
    pub fn emit_or_reject(
        &mut self,
        converted: std::result::Result<(ObservedTrace, Vec<ObservedStep>), String>,
    ) -> Result<std::result::Result<(), String>> {
        match converted {
            Ok((trace, steps)) => self.emit(trace, steps).map(Ok),
            Err(reason) => Ok(Err(reason)),
        }
    }

    pub fn emit(&mut self, mut trace: ObservedTrace, mut steps: Vec<ObservedStep>) -> Result<()> {
        let trace_id = self.admit(&mut trace);
        self.report.redacted += self.redaction.redact_trace_counting(&mut trace);
        if steps.is_empty() {
            self.report.traces_without_calls += 1;
        }
        for (index, step) in steps.iter_mut().enumerate() {
            step.trace_id.clone_from(&trace_id);
            step.step_index = u32::try_from(index).unwrap_or(u32::MAX);
            if step.is_error() {
                self.report.failed_steps += 1;
            }
            if step.metadata.get(messages::RESULT_MISSING) == Some(&Value::Bool(true)) {
                self.report.calls_without_result += 1;
            }
            self.report.redacted += self.redaction.redact_step_counting(step);
        }
        let count = steps.len();
        match self.pending_raw.as_mut() {
            Some(raw) => {
                for step in &steps {
                    raw.push_step(step);
                }
            }
            None => self.pending.steps.append(&mut steps),
        }
        self.pending.traces.push(trace);
        self.emitted(count)
    }

    /// The steps a handler is adding as text, when this import hands over raw steps: stage them
    /// after [`RawSteps::mark`], then [`Output::emit_raw`] the trace (or truncate to the mark).
    /// `None` when redaction might change the record whose text is `record`: then it has to be
    /// read as values.
    pub fn raw_steps(&mut self, record: &str) -> Option<&mut RawSteps> {
        if self.redaction.may_change_json_text(record) {
            return None;
        }
        self.pending_raw.as_mut()
    }

    /// [`Output::emit`] for a trace whose steps were staged in [`Output::raw_steps`] since
    /// `first_step` (their trace ids and indices are filled in here).
    pub fn emit_raw(&mut self, mut trace: ObservedTrace, first_step: usize) -> Result<()> {
        let trace_id = self.admit(&mut trace);
        let Some(raw) = self.pending_raw.as_mut() else {
            return Ok(());
        };
        let id = raw.push_str(&trace_id);
        let mut failed = 0;
        let steps = raw.steps_from_mut(first_step);
        for (index, step) in steps.iter_mut().enumerate() {
            step.trace_id = id;
            step.step_index = u32::try_from(index).unwrap_or(u32::MAX);
            failed += u64::from(step.error_type.is_some() || step.error_message.is_some());
        }
        let count = steps.len();
        if count == 0 {
            self.report.traces_without_calls += 1;
        }
        self.report.failed_steps += failed;
        self.pending.traces.push(trace);
        self.emitted(count)
    }

    /// Gives `trace` its final id and source (see [`Output::emit`]) and returns the id.
    fn admit(&mut self, trace: &mut ObservedTrace) -> String {
        if trace.source.is_empty() {
            trace.source.clone_from(&self.source);
        }
        let mut trace_id = format!("{}{}", self.prefix, trace.trace_id);
        if self.seen_trace_ids.contains(&trace_id) {
            let mut n = 2u64;
            while self.seen_trace_ids.contains(&format!("{trace_id}~{n}")) {
                n += 1;
            }
            trace.metadata.insert(
                "original_trace_id".to_owned(),
                Value::String(trace.trace_id.clone()),
            );
            trace_id = format!("{trace_id}~{n}");
        }
        self.seen_trace_ids.insert(trace_id.clone());
        trace.trace_id.clone_from(&trace_id);
        trace_id
    }

    /// Counts a trace of `steps` steps just added and hands the batch over when it is full.
    fn emitted(&mut self, steps: usize) -> Result<()> {
        self.report.traces += 1;
        self.report.steps += steps as u64;
        self.pending_steps += steps;
        let batch_started_at = *self.batch_started_at.get_or_insert(self.bytes_read);
        if self.pending_steps >= self.batch_steps
            || self.bytes_read.saturating_sub(batch_started_at) >= self.batch_bytes
        {
            self.flush()?;
        }
        Ok(())
    }

    /// Records a rejected record. Its excerpt is redacted like the records that are kept,
    /// since rejects are written to disk too.
    pub fn reject(&mut self, at: Position, reason: impl Into<String>, excerpt: String) {
        let excerpt = match self.redaction.redact_text(&excerpt) {
            std::borrow::Cow::Borrowed(_) => excerpt,
            std::borrow::Cow::Owned(redacted) => redacted,
        };
        self.report.rejects.push(Reject {
            path: self.path.clone(),
            line: at.line,
            unit: at.unit,
            reason: reason.into(),
            excerpt,
        });
    }

    /// Notes how far the reader got and tells the progress callback every 256 KiB.
    pub fn advance(&mut self, bytes_read: u64) {
        self.bytes_read = bytes_read;
        if self.bytes_read >= self.last_progress + 256 * 1024 {
            self.last_progress = self.bytes_read;
            (self.progress)(ImportProgress {
                bytes_read: self.bytes_read,
                total_bytes: self.total_bytes,
                traces: self.report.traces,
                steps: self.report.steps,
            });
        }
    }

    fn flush(&mut self) -> Result<()> {
        if self.pending.traces.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.pending);
        self.pending_steps = 0;
        self.batch_started_at = None;
        let batch = match self.pending_raw.as_mut() {
            Some(raw) => {
                // The next batch is about as large: room for it up front spares growing the
                // buffer by copies (pages are only touched as they are written).
                let next =
                    RawSteps::with_capacity(raw.text_bytes() + raw.text_bytes() / 8, raw.len());
                Batch::Raw(RawImportBatch {
                    traces: batch.traces,
                    steps: std::mem::replace(raw, next),
                })
            }
            None => Batch::Values(batch),
        };
        (self.sink)(batch)
    }
}
