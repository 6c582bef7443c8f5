//! Reading an OTLP trace export file: JSON (one document or JSON Lines) or protobuf.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::spans::{AssembledTrace, Extracted, ToolSpan, assemble, extract};
use super::{Encoding, decode};
use crate::capture::ReceivedStep;
use crate::error::{RecorderError, Result};
use crate::import::{ImportBatch, Reject, RejectUnit};
use crate::model::ObservedStep;

/// How to read an export file.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Hand a batch to the sink once it holds at least this many steps (traces are never split).
    pub batch_steps: usize,
    /// The traces' `source`; by default `import:otlp:<file name>`.
    pub source: Option<String>,
    /// Put in front of every trace id, to keep ids of different imports apart.
    pub trace_id_prefix: Option<String>,
    /// A line, document or protobuf message longer than this is rejected instead of read.
    pub max_record_bytes: usize,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            batch_steps: 50_000,
            source: None,
            trace_id_prefix: None,
            max_record_bytes: 256 * 1024 * 1024,
        }
    }
}

/// How the file was laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileEncoding {
    /// One JSON document (possibly over many lines).
    JsonDocument,
    /// One JSON document a line.
    JsonLines,
    /// One protobuf message.
    Protobuf,
    /// Protobuf messages, each after its length (4 bytes, big-endian).
    ProtobufFramed,
}

/// What reading one export file found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OtlpReport {
    pub path: PathBuf,
    pub encoding: FileEncoding,
    /// Export documents (JSON documents or protobuf messages) read.
    pub documents: u64,
    /// Spans in them, tool calls or not.
    pub spans: u64,
    /// Of those, tool spans read as steps.
    pub tool_spans: u64,
    /// Tool spans left out because the same trace already held a span with their id.
    pub duplicate_spans: u64,
    /// Traces handed to the sink.
    pub traces: u64,
    /// Steps handed to the sink.
    pub steps: u64,
    /// Of those, failed calls.
    pub failed_steps: u64,
    /// Documents and tool spans that could not be read: a line (JSON Lines) or record (a
    /// document or protobuf message), and for a span its id, name and trace.
    pub rejects: Vec<Reject>,
}

/// Reads one OTLP trace export file and hands its tool calls to `sink` as complete traces, in
/// batches of about `batch_steps` steps. Spans of one trace may be spread over the whole file,
/// so traces are assembled once the file is read: memory holds the file's tool calls (not its
/// other spans). Fails only when the file cannot be read or a sink call fails; bad documents
/// and spans are listed in the report.
pub fn read_file(
    path: &Path,
    options: &ReadOptions,
    sink: &mut dyn FnMut(ImportBatch) -> Result<()>,
) -> Result<OtlpReport> {
    let io_error = |source| RecorderError::Io {
        path: path.to_owned(),
        source,
    };
    let mut reader = BufReader::new(File::open(path).map_err(io_error)?);
    let first = first_byte(&mut reader).map_err(io_error)?;
    let mut collected = Collected::default();
    let encoding = match first {
        Some(b'{') => read_json(path, reader, options, &mut collected)?,
        None => FileEncoding::JsonLines,
        Some(0) => {
            read_framed_protobuf(path, reader, options, &mut collected)?;
            FileEncoding::ProtobufFramed
        }
        Some(_) => {
            let body = read_bounded(path, reader, options.max_record_bytes)?;
            match body {
                Some(body) => {
                    collected.document(path, 1, RejectUnit::Record, &body, Encoding::Protobuf)
                }
                None => collected.too_long(path, 1, RejectUnit::Record, options.max_record_bytes),
            }
            FileEncoding::Protobuf
        }
    };
    let mut report = OtlpReport {
        path: path.to_owned(),
        encoding,
        documents: collected.documents,
        spans: collected.spans,
        tool_spans: collected.tool_spans.len() as u64,
        duplicate_spans: 0,
        traces: 0,
        steps: 0,
        failed_steps: 0,
        rejects: collected.rejects,
    };
    let (traces, duplicates) = assemble(collected.tool_spans);
    report.duplicate_spans = duplicates;
    emit(path, options, traces, &mut report, sink)?;
    Ok(report)
}

/// What the documents read so far hold.
#[derive(Default)]
struct Collected {
    documents: u64,
    spans: u64,
    tool_spans: Vec<ToolSpan>,
    rejects: Vec<Reject>,
}

impl Collected {
    /// Decode one document found at `line` and keep its tool spans.
    fn document(
        &mut self,
        path: &Path,
        line: u64,
        unit: RejectUnit,
        body: &[u8],
        encoding: Encoding,
    ) {
        let request = match decode(body, encoding) {
            Ok(request) => request,
            Err(reason) => {
                self.rejects.push(Reject {
                    path: path.to_owned(),
                    line,
                    unit,
                    reason,
                    excerpt: excerpt(body, encoding),
                });
                return;
            }
        };
        self.documents += 1;
        let Extracted {
            spans,
            tool_spans,
            rejects,
        } = extract(request);
        self.spans += spans;
        self.tool_spans.extend(tool_spans);
        for span in rejects {
            self.rejects.push(Reject {
                path: path.to_owned(),
                line,
                unit,
                reason: span.to_string(),
                excerpt: String::new(),
            });
        }
    }

    fn too_long(&mut self, path: &Path, line: u64, unit: RejectUnit, limit: usize) {
        self.rejects.push(Reject {
            path: path.to_owned(),
            line,
            unit,
            reason: format!("longer than the limit of {limit} bytes"),
            excerpt: String::new(),
        });
    }
}

/// JSON: JSON Lines when the first line is a whole document, else one document.
fn read_json(
    path: &Path,
    mut reader: BufReader<File>,
    options: &ReadOptions,
    collected: &mut Collected,
) -> Result<FileEncoding> {
    let io_error = |source| RecorderError::Io {
        path: path.to_owned(),
        source,
    };
    let mut line = Vec::new();
    let mut number = 0u64;
    let mut consumed = Vec::new();
    // The first line decides: a line that is a complete JSON value means JSON Lines.
    loop {
        line.clear();
        let read = read_line_bounded(&mut reader, &mut line, options.max_record_bytes)
            .map_err(io_error)?;
        number += 1;
        match read {
            LineRead::Eof => return Ok(FileEncoding::JsonLines),
            LineRead::TooLong => {
                collected.too_long(path, number, RejectUnit::Line, options.max_record_bytes);
                break;
            }
            LineRead::Line if line.trim_ascii().is_empty() => continue,
            LineRead::Line => {
                if serde_json::from_slice::<serde::de::IgnoredAny>(&line).is_err() {
                    consumed.extend_from_slice(&line);
                    let rest = read_bounded(
                        path,
                        reader,
                        options.max_record_bytes.saturating_sub(consumed.len()),
                    )?;
                    match rest {
                        Some(rest) => {
                            consumed.extend_from_slice(&rest);
                            collected.document(
                                path,
                                1,
                                RejectUnit::Record,
                                &consumed,
                                Encoding::Json,
                            );
                        }
                        None => collected.too_long(
                            path,
                            1,
                            RejectUnit::Record,
                            options.max_record_bytes,
                        ),
                    }
                    return Ok(FileEncoding::JsonDocument);
                }
                collected.document(path, number, RejectUnit::Line, &line, Encoding::Json);
                break;
            }
        }
    }
    loop {
        line.clear();
        let read = read_line_bounded(&mut reader, &mut line, options.max_record_bytes)
            .map_err(io_error)?;
        number += 1;
        match read {
            LineRead::Eof => return Ok(FileEncoding::JsonLines),
            LineRead::TooLong => {
                collected.too_long(path, number, RejectUnit::Line, options.max_record_bytes)
            }
            LineRead::Line if line.trim_ascii().is_empty() => {}
            LineRead::Line => {
                collected.document(path, number, RejectUnit::Line, &line, Encoding::Json)
            }
        }
    }
}

/// Protobuf messages each after a 4-byte big-endian length.
fn read_framed_protobuf(
    path: &Path,
    mut reader: BufReader<File>,
    options: &ReadOptions,
    collected: &mut Collected,
) -> Result<()> {
    let io_error = |source| RecorderError::Io {
        path: path.to_owned(),
        source,
    };
    let mut record = 0u64;
    loop {
        let mut length = [0u8; 4];
        if !read_exact_or_eof(&mut reader, &mut length).map_err(io_error)? {
            return Ok(());
        }
        record += 1;
        let length = u32::from_be_bytes(length) as usize;
        if length > options.max_record_bytes {
            collected.too_long(path, record, RejectUnit::Record, options.max_record_bytes);
            return Ok(());
        }
        let mut body = vec![0u8; length];
        if !read_exact_or_eof(&mut reader, &mut body).map_err(io_error)? {
            collected.rejects.push(Reject {
                path: path.to_owned(),
                line: record,
                unit: RejectUnit::Record,
                reason: format!("the file ends inside a message of {length} bytes"),
                excerpt: String::new(),
            });
            return Ok(());
        }
        collected.document(path, record, RejectUnit::Record, &body, Encoding::Protobuf);
    }
}

/// Hands the assembled traces to `sink` in batches.
fn emit(
    path: &Path,
    options: &ReadOptions,
    traces: Vec<AssembledTrace>,
    report: &mut OtlpReport,
    sink: &mut dyn FnMut(ImportBatch) -> Result<()>,
) -> Result<()> {
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let source = options
        .source
        .clone()
        .unwrap_or_else(|| format!("import:otlp:{file_name}"));
    let prefix = options.trace_id_prefix.clone().unwrap_or_default();
    let mut batch = ImportBatch::default();
    for AssembledTrace { mut trace, steps } in traces {
        let mut steps: Vec<ObservedStep> = steps.into_iter().map(ReceivedStep::into_step).collect();
        trace.trace_id = format!("{prefix}{}", trace.trace_id);
        trace.source.clone_from(&source);
        for step in &mut steps {
            step.trace_id.clone_from(&trace.trace_id);
            report.failed_steps += u64::from(step.is_error());
        }
        report.traces += 1;
        report.steps += steps.len() as u64;
        batch.traces.push(trace);
        batch.steps.append(&mut steps);
        if batch.steps.len() >= options.batch_steps.max(1) {
            sink(std::mem::take(&mut batch))?;
        }
    }
    if !batch.traces.is_empty() {
        sink(batch)?;
    }
    Ok(())
}

/// The first byte that is not JSON whitespace, left unread; `None` for an empty file.
fn first_byte(reader: &mut BufReader<File>) -> std::io::Result<Option<u8>> {
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(None);
        }
        match buffer
            .iter()
            .position(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        {
            // Only a text file starts with whitespace; a protobuf message never does (field
            // tags are at least 0x08), so skipping it is safe for both.
            Some(at) => {
                let byte = buffer[at];
                reader.consume(at);
                return Ok(Some(byte));
            }
            None => {
                let all = buffer.len();
                reader.consume(all);
            }
        }
    }
}

enum LineRead {
    Line,
    TooLong,
    Eof,
}

/// One line into `line` (without reading more than `limit` bytes of it into memory).
fn read_line_bounded(
    reader: &mut BufReader<File>,
    line: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<LineRead> {
    let mut too_long = false;
    let mut any = false;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(match (any, too_long) {
                (false, _) => LineRead::Eof,
                (true, true) => LineRead::TooLong,
                (true, false) => LineRead::Line,
            });
        }
        any = true;
        let (chunk, done) = match buffer.iter().position(|b| *b == b'\n') {
            Some(at) => (&buffer[..at], Some(at + 1)),
            None => (buffer, None),
        };
        if !too_long {
            if line.len() + chunk.len() > limit {
                too_long = true;
                line.clear();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = done.unwrap_or(buffer.len());
        reader.consume(used);
        if done.is_some() {
            return Ok(if too_long {
                LineRead::TooLong
            } else {
                LineRead::Line
            });
        }
    }
}

/// The rest of the reader, or `None` when it is longer than `limit`.
fn read_bounded(path: &Path, reader: BufReader<File>, limit: usize) -> Result<Option<Vec<u8>>> {
    let mut body = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader
        .take(cap)
        .read_to_end(&mut body)
        .map_err(|source| RecorderError::Io {
            path: path.to_owned(),
            source,
        })?;
    Ok((body.len() <= limit).then_some(body))
}

/// Fill `buffer`; `false` when the file ends first.
fn read_exact_or_eof(reader: &mut impl Read, buffer: &mut [u8]) -> std::io::Result<bool> {
    let mut filled = 0;
    while filled < buffer.len() {
        match reader.read(&mut buffer[filled..])? {
            0 => return Ok(false),
            n => filled += n,
        }
    }
    Ok(true)
}

/// The start of a bad document, for the reject.
fn excerpt(body: &[u8], encoding: Encoding) -> String {
    const LIMIT: usize = 200;
    let start = &body[..body.len().min(LIMIT)];
    match encoding {
        Encoding::Json => String::from_utf8_lossy(start).into_owned(),
        Encoding::Protobuf => super::hex(&start[..start.len().min(32)]),
    }
}
