//! Reading JSON records one at a time from JSON Lines, a JSON array, or one JSON document.

use std::cell::Cell;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::ops::ControlFlow;
use std::path::Path;
use std::rc::Rc;

use serde::de::{self, DeserializeSeed, SeqAccess, Visitor};
use serde_json::Value;

use super::values::{excerpt_bytes, excerpt_value, json_error};
use super::{Output, Position, RejectUnit};
use crate::error::{RecorderError, Result};

/// How the JSON records of a file are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// One JSON value a line.
    Lines,
    /// One JSON array whose elements are the records.
    Array,
    /// One JSON document (pretty-printed, say) that is the only record.
    Single,
}

/// A format's per-record logic.
pub(crate) trait Handler {
    /// Takes one parsed record. `Ok(Err(reason))` rejects the record; `Err` stops the import
    /// (only the sink fails that way).
    fn record(
        &mut self,
        out: &mut Output<'_>,
        at: Position,
        value: Value,
    ) -> Result<Result<(), String>>;

    /// Takes one line of a JSON Lines file (not blank, valid UTF-8). The default parses it into
    /// a `Value` and calls [`Handler::record`]; a handler may read the text more cheaply as long
    /// as it imports (and rejects) exactly what the default would.
    fn record_line(
        &mut self,
        out: &mut Output<'_>,
        at: Position,
        text: &str,
    ) -> Result<Result<(), String>> {
        record_parsed_line(self, out, at, text)
    }

    /// Called once after the last record, to hand over what is still held. The default, for
    /// formats whose every record is whole traces, holds nothing.
    fn finish(&mut self, _out: &mut Output<'_>) -> Result<()> {
        Ok(())
    }
}

/// The general way to take one JSON Lines line: parse it into a `Value`, hand that to `record`.
/// A syntax error rejects the line.
pub(crate) fn record_parsed_line<H: Handler + ?Sized>(
    handler: &mut H,
    out: &mut Output<'_>,
    at: Position,
    text: &str,
) -> Result<Result<(), String>> {
    match serde_json::from_str::<Value>(text) {
        Ok(value) => handler.record(out, at, value),
        Err(e) => Ok(Err(json_error(&e, true))),
    }
}

const BUFFER_BYTES: usize = 256 * 1024;

pub(crate) fn open(path: &Path) -> Result<File> {
    File::open(path).map_err(|source| RecorderError::Io {
        path: path.to_owned(),
        source,
    })
}

fn io_error(path: &Path, source: std::io::Error) -> RecorderError {
    RecorderError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Feeds every record of the file at `out.path` to `handler`, then calls its `finish`.
pub(crate) fn read(layout: Layout, out: &mut Output<'_>, handler: &mut dyn Handler) -> Result<()> {
    match layout {
        Layout::Lines => read_lines(out, handler)?,
        Layout::Array => read_array(out, handler)?,
        Layout::Single => read_single(out, handler)?,
    }
    handler.finish(out)
}

/// One line read by [`LineReader`].
pub(crate) enum Line {
    /// The line's bytes, without the line break.
    Text,
    /// The line was longer than the limit; only its length is known.
    TooLong(u64),
}

/// Reads lines of at most `max` bytes, skipping (not storing) the rest of a longer line.
pub(crate) struct LineReader<R> {
    reader: R,
    max: usize,
    /// Bytes consumed so far.
    pub bytes_read: u64,
    /// The number of the line last read, 1-based.
    pub line_number: u64,
}

impl<R: BufRead> LineReader<R> {
    pub fn new(reader: R, max: usize) -> Self {
        Self {
            reader,
            max,
            bytes_read: 0,
            line_number: 0,
        }
    }

    /// Reads the next line into `buf` (cleared first). `None` at the end of the input.
    pub fn next_line(&mut self, buf: &mut Vec<u8>) -> std::io::Result<Option<Line>> {
        buf.clear();
        let mut length: u64 = 0;
        let mut saw_any = false;
        loop {
            let available = match self.reader.fill_buf() {
                Ok(available) => available,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                break;
            }
            saw_any = true;
            let (chunk_len, done) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (available.len(), false),
            };
            let content = &available[..chunk_len - usize::from(done)];
            length += content.len() as u64;
            if buf.len() + content.len() <= self.max {
                buf.extend_from_slice(content);
            }
            self.reader.consume(chunk_len);
            self.bytes_read += chunk_len as u64;
            if done {
                break;
            }
        }
        if !saw_any {
            return Ok(None);
        }
        self.line_number += 1;
        if length > self.max as u64 {
            buf.clear();
            return Ok(Some(Line::TooLong(length)));
        }
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        if self.line_number == 1 && buf.starts_with(b"\xEF\xBB\xBF") {
            buf.drain(..3);
        }
        Ok(Some(Line::Text))
    }
}

/// A line as text, or the reason it is not valid UTF-8.
pub(crate) fn line_text(bytes: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(bytes)
        .map_err(|e| format!("invalid UTF-8 at byte {} of the line", e.valid_up_to() + 1))
}

fn read_lines(out: &mut Output<'_>, handler: &mut dyn Handler) -> Result<()> {
    let path = out.path.clone();
    let file = open(&path)?;
    let mut lines = LineReader::new(
        BufReader::with_capacity(BUFFER_BYTES, file),
        out.max_record_bytes,
    );
    let mut buf = Vec::new();
    while let Some(line) = lines.next_line(&mut buf).map_err(|e| io_error(&path, e))? {
        let at = Position {
            line: lines.line_number,
            unit: RejectUnit::Line,
        };
        out.advance(lines.bytes_read);
        if let Line::TooLong(length) = line {
            out.reject(
                at,
                format!(
                    "line is {length} bytes, longer than the {} byte limit",
                    out.max_record_bytes
                ),
                String::new(),
            );
            continue;
        }
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let text = match line_text(&buf) {
            Ok(text) => text,
            Err(reason) => {
                out.reject(at, reason, excerpt_bytes(&buf));
                continue;
            }
        };
        if let Err(reason) = handler.record_line(out, at, text)? {
            out.reject(at, reason, excerpt_bytes(&buf));
        }
    }
    Ok(())
}

/// Counts the bytes the JSON parser has consumed, for progress.
struct CountingReader<R> {
    inner: R,
    count: Rc<Cell<u64>>,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.set(self.count.get() + n as u64);
        Ok(n)
    }
}

/// Opens a file for the JSON parser, past a UTF-8 byte order mark.
fn json_reader(path: &Path, count: Rc<Cell<u64>>) -> Result<CountingReader<BufReader<File>>> {
    let mut reader = BufReader::with_capacity(BUFFER_BYTES, open(path)?);
    let has_bom = reader
        .fill_buf()
        .map_err(|e| io_error(path, e))?
        .starts_with(b"\xEF\xBB\xBF");
    if has_bom {
        reader.consume(3);
        count.set(3);
    }
    Ok(CountingReader {
        inner: reader,
        count,
    })
}

/// Walks the elements of a top-level JSON array, handing each to `each` as soon as it is
/// parsed. Returns how many elements were handed over and the parse error that ended the walk
/// early, if any. `each` may stop the walk with `Break`.
pub(crate) fn for_each_element(
    path: &Path,
    count: Rc<Cell<u64>>,
    each: &mut dyn FnMut(Value) -> Result<ControlFlow<()>>,
) -> Result<(u64, Option<serde_json::Error>)> {
    let reader = json_reader(path, count)?;
    let mut de = serde_json::Deserializer::from_reader(reader);
    let mut walker = ElementWalker {
        each,
        seen: 0,
        stopped: false,
        failure: None,
    };
    let parsed = de::Deserializer::deserialize_seq(&mut de, &mut walker);
    if let Some(failure) = walker.failure {
        return Err(failure);
    }
    if walker.stopped {
        return Ok((walker.seen, None));
    }
    match parsed.and_then(|()| de.end()) {
        Ok(()) => Ok((walker.seen, None)),
        Err(e) => Ok((walker.seen, Some(e))),
    }
}

struct ElementWalker<'f> {
    each: &'f mut dyn FnMut(Value) -> Result<ControlFlow<()>>,
    seen: u64,
    stopped: bool,
    failure: Option<RecorderError>,
}

impl<'de> Visitor<'de> for &mut ElementWalker<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON array of records")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(value) = seq.next_element_seed(ValueSeed)? {
            self.seen += 1;
            match (self.each)(value) {
                Ok(ControlFlow::Continue(())) => {}
                Ok(ControlFlow::Break(())) => {
                    self.stopped = true;
                    return Ok(());
                }
                Err(e) => {
                    self.failure = Some(e);
                    return Err(de::Error::custom("import stopped"));
                }
            }
        }
        Ok(())
    }
}

struct ValueSeed;

impl<'de> DeserializeSeed<'de> for ValueSeed {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        serde::Deserialize::deserialize(deserializer)
    }
}

fn read_array(out: &mut Output<'_>, handler: &mut dyn Handler) -> Result<()> {
    let path = out.path.clone();
    let count = Rc::new(Cell::new(0u64));
    let counter = Rc::clone(&count);
    let mut index = 0u64;
    let (seen, parse_error) = for_each_element(&path, count, &mut |value| {
        index += 1;
        out.advance(counter.get());
        let at = Position {
            line: index,
            unit: RejectUnit::Record,
        };
        let excerpt = excerpt_value(&value);
        if let Err(reason) = handler.record(out, at, value)? {
            out.reject(at, reason, excerpt);
        }
        Ok(ControlFlow::Continue(()))
    })?;
    if let Some(e) = parse_error {
        // A syntax error inside an array cannot be skipped: nothing after it can be found again.
        let at = Position {
            line: seen + 1,
            unit: RejectUnit::Record,
        };
        let reason = if seen == 0 && e.line() == 1 && e.column() <= 1 {
            format!("not a JSON array: {}", json_error(&e, false))
        } else {
            format!(
                "{}; the rest of the array after record {seen} was not read",
                json_error(&e, false)
            )
        };
        out.reject(at, reason, String::new());
    }
    Ok(())
}

fn read_single(out: &mut Output<'_>, handler: &mut dyn Handler) -> Result<()> {
    let path = out.path.clone();
    let size = std::fs::metadata(&path)
        .map_err(|e| io_error(&path, e))?
        .len();
    let at = Position {
        line: 1,
        unit: RejectUnit::Record,
    };
    if size > out.max_record_bytes as u64 {
        out.reject(
            at,
            format!(
                "the JSON document is {size} bytes, longer than the {} byte limit",
                out.max_record_bytes
            ),
            String::new(),
        );
        return Ok(());
    }
    let count = Rc::new(Cell::new(0u64));
    let reader = json_reader(&path, Rc::clone(&count))?;
    let value: Value = match serde_json::from_reader(reader) {
        Ok(value) => value,
        Err(e) => {
            let at = Position {
                line: e.line() as u64,
                unit: RejectUnit::Line,
            };
            out.reject(at, json_error(&e, false), String::new());
            return Ok(());
        }
    };
    out.advance(count.get());
    let excerpt = excerpt_value(&value);
    if let Err(reason) = handler.record(out, at, value)? {
        out.reject(at, reason, excerpt);
    }
    Ok(())
}
