//! The SQLite backend: the embedded default store, one file.
//!
//! Layout (schema version [`SCHEMA_VERSION`], kept in `PRAGMA user_version`):
//! - `traces`: one row per trace; the integer primary key `id` is the storage order. Besides the
//!   trace fields it keeps running counters over its steps (`step_count`, `error_count`,
//!   `step_duration_ms`) so listings sort and filter without scanning steps.
//! - `tools`: interned tool names; steps refer to them by id.
//! - `steps`: one row per step, keyed by `(trace_key, step_index)`, with inputs, outputs and
//!   metadata as exact JSON text. The index `steps_sequence` (version 2) holds each step's
//!   tool and start time in step order.
//! - `trace_sequences` (version 3): one row per trace with steps, derived from them by every
//!   append ([`SequenceRow`]): the tool ids in step order (four bytes each, little-endian), the
//!   first start time in step order, and the row id of step 0 when the steps fill consecutive
//!   rows in step order. Mining reads this table and `traces`, not the steps.
//! - `documents`: JSON documents by `(kind, key)`.
//! - `step_rows`: a view joining steps with their trace id and tool name, for ad-hoc SQL.
//!
//! Timestamps are i64 nanoseconds since the Unix epoch (UTC). JSON is written with
//! `serde_json::to_string` and read back with `from_str`, so key order and number text survive.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::types::Value as SqlValue;
use rusqlite::{
    Connection, OptionalExtension, Transaction, TransactionBehavior, params, params_from_iter,
};
use serde_json::{Map, Value};

use crate::error::{RecorderError, Result};
use crate::model::{ObservedStep, ObservedTrace, TraceWithSteps};
use crate::store::{
    AppendStats, CompactStats, JsonText, MetadataText, PageRequest, RawSteps, SequenceSteps,
    StepColumns, StepRows, StepTool, StepView, StoreCounts, ToolSequences, TraceFilter, TracePage,
    TraceSort, TraceStore, TraceSummary, keep_positions, merge_trace, timestamp_from_nanos,
    timestamp_nanos, validate_batch,
};

/// The schema migrations, applied in order; migration `i` brings the store to version `i + 1`.
/// Never edit a released migration: append a new one.
const MIGRATIONS: &[&str] = &[
    // Version 1: traces, tools, steps, documents.
    r#"
CREATE TABLE traces (
    id               INTEGER PRIMARY KEY,
    trace_id         TEXT    NOT NULL UNIQUE,
    session_id       TEXT,
    source           TEXT    NOT NULL,
    agent            TEXT,
    started_at       INTEGER,
    ended_at         INTEGER,
    metadata         TEXT    NOT NULL,
    step_count       INTEGER NOT NULL DEFAULT 0,
    error_count      INTEGER NOT NULL DEFAULT 0,
    step_duration_ms REAL
);
CREATE INDEX traces_started_at ON traces (started_at);
CREATE INDEX traces_source ON traces (source);
CREATE INDEX traces_with_errors ON traces (error_count) WHERE error_count > 0;

CREATE TABLE tools (
    id   INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);

CREATE TABLE steps (
    id            INTEGER PRIMARY KEY,
    trace_key     INTEGER NOT NULL REFERENCES traces (id),
    step_index    INTEGER NOT NULL,
    call_id       TEXT,
    tool_id       INTEGER NOT NULL REFERENCES tools (id),
    inputs        TEXT    NOT NULL,
    outputs       TEXT,
    error_type    TEXT,
    error_message TEXT,
    started_at    INTEGER,
    ended_at      INTEGER,
    duration_ms   REAL,
    recorded_at   INTEGER,
    metadata      TEXT    NOT NULL,
    is_error      INTEGER NOT NULL,
    UNIQUE (trace_key, step_index)
);
CREATE INDEX steps_tool ON steps (tool_id, trace_key);
CREATE INDEX steps_started_at ON steps (started_at);
CREATE INDEX steps_failed ON steps (trace_key) WHERE is_error = 1;

CREATE TABLE documents (
    kind       TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    json       TEXT    NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (kind, key)
) WITHOUT ROWID;

CREATE VIEW step_rows AS
SELECT t.trace_id, s.step_index, s.call_id, tools.name AS tool_name, s.inputs, s.outputs,
       s.error_type, s.error_message, s.started_at, s.ended_at, s.duration_ms, s.recorded_at,
       s.metadata, s.is_error
FROM steps s
JOIN traces t ON t.id = s.trace_key
JOIN tools ON tools.id = s.tool_id;
"#,
    // Version 2: every step's tool and start time in step order, in an index alone, so mining
    // reads tool sequences without reading the steps table's rows and their payloads.
    r#"
CREATE INDEX steps_sequence ON steps (trace_key, step_index, tool_id, started_at);
"#,
    // Version 3: each trace's tool sequence in one row, kept by every append, so mining reads
    // one row a trace instead of one index entry a step. `migrate` fills it from the steps.
    r#"
CREATE TABLE trace_sequences (
    trace_key      INTEGER PRIMARY KEY REFERENCES traces (id),
    tools          BLOB    NOT NULL,
    first_started  INTEGER,
    first_step_row INTEGER
);
"#,
];

/// The schema version that added `trace_sequences`, which [`SqliteStore::migrate`] fills from
/// the steps a store already holds.
const TRACE_SEQUENCES_VERSION: i64 = 3;

/// The indexes a bulk load into an empty store builds at its end instead of row by row (see
/// [`SqliteStore::begin_bulk_load`]), by name, with the statement that creates each. Both are
/// on start times, which arrive in no order, so every append touches pages all over them; the
/// other indexes grow at their ends (rising row ids and trace keys) or hold few rows, and cost
/// less kept as they are than rebuilt by a scan of the whole table. `open` creates any that are
/// missing, which only a bulk load cut short by a crash leaves behind.
const DEFERRED_INDEXES: &[(&str, &str)] = &[
    (
        "traces_started_at",
        "CREATE INDEX IF NOT EXISTS traces_started_at ON traces (started_at)",
    ),
    (
        "steps_started_at",
        "CREATE INDEX IF NOT EXISTS steps_started_at ON steps (started_at)",
    ),
];

/// The schema version this build writes and understands.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The trace columns every trace query selects, in [`TraceRow`] order (table alias `t`).
const TRACE_COLUMNS: &str = "t.id, t.trace_id, t.session_id, t.source, t.agent, t.started_at, \
                             t.ended_at, t.metadata";

/// The step columns every step query selects, in [`StepRow`] order (aliases `s`, `tools`).
const STEP_COLUMNS: &str = "s.trace_key, s.step_index, s.call_id, tools.name, s.inputs, \
                            s.outputs, s.error_type, s.error_message, s.started_at, s.ended_at, \
                            s.duration_ms, s.recorded_at, s.metadata";

/// A trace's duration in SQL, the same rule as [`crate::store::summary_duration_ms`].
const DURATION_SQL: &str = "CASE WHEN t.started_at IS NOT NULL AND t.ended_at IS NOT NULL \
                            THEN (t.ended_at - t.started_at) / 1000000.0 \
                            ELSE t.step_duration_ms END";

/// A [`TraceStore`] in one SQLite file.
///
/// The connection runs in WAL mode with `synchronous=FULL` (every committed append survives a
/// power loss), foreign keys on and a busy timeout so several processes can share the file.
#[derive(Debug)]
pub struct SqliteStore {
    path: PathBuf,
    conn: Connection,
    /// Committed tool name -> id. Tool rows are never deleted, so a cached id stays valid even
    /// when other processes write to the same file.
    tool_ids: HashMap<String, i64>,
    /// True between a `begin_bulk_load` that dropped the deferred indexes and its end.
    indexes_dropped: bool,
    /// Set by [`TraceStore::checkpoint_in_background`]; stopped when the store is dropped.
    checkpointer: Option<Checkpointer>,
}

/// How often the background checkpointer folds the write-ahead log into the main file.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);

/// With a background checkpointer, the writer still checkpoints once the log holds this many
/// pages (64 MiB of 4 KiB pages). Under a steady stream of appends the background checkpoints
/// never quite catch up (the writer adds frames while they copy), and SQLite starts the log
/// over only once every frame is copied, so without this the log would grow for as long as
/// the stream lasts. By then the thread has copied nearly everything, so the writer's
/// checkpoint is short.
const WRITER_CHECKPOINT_PAGES: u32 = 16_384;

/// A thread with its own connection that runs passive checkpoints (which never block the
/// writer or readers) until its store is dropped.
#[derive(Debug)]
struct Checkpointer {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Checkpointer {
    fn start(path: &Path) -> Result<Self> {
        let sql_err = sqlite_error(path);
        let conn = Connection::open(path).map_err(sql_err)?;
        conn.busy_timeout(Duration::from_secs(30))
            .map_err(sql_err)?;
        // The checkpoint syncs the main file before the log may be reused, as the writer's
        // own checkpoints did.
        conn.execute_batch("PRAGMA synchronous = FULL;")
            .map_err(sql_err)?;
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("chainweaver-checkpoint".to_owned())
            .spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(CHECKPOINT_EVERY)
                {
                    // A failed or partial checkpoint loses nothing (the log keeps every
                    // commit); the next round tries again.
                    let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                }
            })
            .map_err(|source| RecorderError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A trace row as stored, before its JSON is parsed.
struct TraceRow {
    key: i64,
    trace_id: String,
    session_id: Option<String>,
    source: String,
    agent: Option<String>,
    started_at: Option<i64>,
    ended_at: Option<i64>,
    metadata: String,
}

impl TraceRow {
    /// Read [`TRACE_COLUMNS`] starting at column `first`.
    fn read(row: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<Self> {
        Ok(Self {
            key: row.get(first)?,
            trace_id: row.get(first + 1)?,
            session_id: row.get(first + 2)?,
            source: row.get(first + 3)?,
            agent: row.get(first + 4)?,
            started_at: row.get(first + 5)?,
            ended_at: row.get(first + 6)?,
            metadata: row.get(first + 7)?,
        })
    }

    fn into_trace(self, path: &Path) -> Result<ObservedTrace> {
        let metadata = parse_metadata(path, &self.metadata, || {
            format!("metadata of trace {}", self.trace_id)
        })?;
        Ok(ObservedTrace {
            trace_id: self.trace_id,
            session_id: self.session_id,
            source: self.source,
            agent: self.agent,
            started_at: self.started_at.map(timestamp_from_nanos),
            ended_at: self.ended_at.map(timestamp_from_nanos),
            metadata,
        })
    }
}

/// A step row as stored, before its JSON is parsed.
struct StepRow {
    trace_key: i64,
    step_index: i64,
    call_id: Option<String>,
    tool_name: String,
    inputs: String,
    outputs: Option<String>,
    error_type: Option<String>,
    error_message: Option<String>,
    started_at: Option<i64>,
    ended_at: Option<i64>,
    duration_ms: Option<f64>,
    recorded_at: Option<i64>,
    metadata: String,
}

impl StepRow {
    /// Read [`STEP_COLUMNS`] starting at column 0.
    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            trace_key: row.get(0)?,
            step_index: row.get(1)?,
            call_id: row.get(2)?,
            tool_name: row.get(3)?,
            inputs: row.get(4)?,
            outputs: row.get(5)?,
            error_type: row.get(6)?,
            error_message: row.get(7)?,
            started_at: row.get(8)?,
            ended_at: row.get(9)?,
            duration_ms: row.get(10)?,
            recorded_at: row.get(11)?,
            metadata: row.get(12)?,
        })
    }

    fn into_step(self, path: &Path, trace_id: &str) -> Result<ObservedStep> {
        let step_index =
            u32::try_from(self.step_index).map_err(|_| RecorderError::CorruptStore {
                path: path.to_path_buf(),
                message: format!(
                    "trace {trace_id}: step index {} out of range",
                    self.step_index
                ),
            })?;
        let what = |column: &str| format!("{column} of trace {trace_id}, step {step_index}");
        let inputs = parse_json(path, &self.inputs, || what("inputs"))?;
        let outputs = match &self.outputs {
            Some(text) => Some(parse_json(path, text, || what("outputs"))?),
            None => None,
        };
        let metadata = parse_metadata(path, &self.metadata, || what("metadata"))?;
        Ok(ObservedStep {
            trace_id: trace_id.to_owned(),
            step_index,
            call_id: self.call_id,
            tool_name: self.tool_name,
            inputs,
            outputs,
            error_type: self.error_type,
            error_message: self.error_message,
            started_at: self.started_at.map(timestamp_from_nanos),
            ended_at: self.ended_at.map(timestamp_from_nanos),
            duration_ms: self.duration_ms,
            recorded_at: self.recorded_at.map(timestamp_from_nanos),
            metadata,
        })
    }
}

fn parse_json(path: &Path, text: &str, what: impl FnOnce() -> String) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| RecorderError::CorruptStore {
        path: path.to_path_buf(),
        message: format!("{} is not valid JSON: {e}", what()),
    })
}

fn parse_metadata(
    path: &Path,
    text: &str,
    what: impl FnOnce() -> String,
) -> Result<Map<String, Value>> {
    serde_json::from_str(text).map_err(|e| RecorderError::CorruptStore {
        path: path.to_path_buf(),
        message: format!("{} is not a JSON object: {e}", what()),
    })
}

fn json_text(value: &Value) -> String {
    // Serializing a `Value` to a string cannot fail: its map keys are strings and it holds no
    // non-finite floats. `Display` is the same compact serialization.
    value.to_string()
}

fn metadata_text(metadata: &Map<String, Value>) -> String {
    if metadata.is_empty() {
        return "{}".to_owned();
    }
    // Serializing a map of `Value`s writes the same text as `to_string` of the object.
    serde_json::to_string(metadata).unwrap_or_else(|_| "{}".to_owned())
}

/// A reusable buffer for one JSON column, so writing a row allocates nothing once the buffer has
/// grown to the largest value. The text is exactly what [`json_text`] and [`metadata_text`] give.
#[derive(Default)]
struct JsonBuffer(Vec<u8>);

impl JsonBuffer {
    /// The column text: raw text as it is (already compact), a `Value` serialized.
    fn json<'a>(&'a mut self, value: JsonText<'a>) -> &'a str {
        let value = match value {
            JsonText::Text(text) => return text,
            JsonText::Value(value) => value,
        };
        self.0.clear();
        // Writing a `Value` to memory cannot fail (see `json_text`).
        let _ = serde_json::to_writer(&mut self.0, value);
        self.text()
    }

    fn metadata<'a>(&'a mut self, metadata: MetadataText<'a>) -> &'a str {
        let metadata = match metadata {
            MetadataText::Text(text) => return text,
            MetadataText::Map(map) => map,
        };
        self.0.clear();
        if metadata.is_empty() || serde_json::to_writer(&mut self.0, metadata).is_err() {
            self.0.clear();
            self.0.extend_from_slice(b"{}");
        }
        self.text()
    }

    fn text(&self) -> &str {
        // serde_json writes UTF-8; the check is a cheap pass that never fails.
        std::str::from_utf8(&self.0).unwrap_or("null")
    }
}

/// What one append adds to a trace: the steps it inserts (for the trace's sequence row) and
/// the changes to its counters.
#[derive(Default)]
struct TraceDelta {
    added: Vec<SequenceStep>,
    errors: i64,
    duration_ms: Option<f64>,
}

/// One step as its trace's [`SequenceRow`] is built from.
#[derive(Debug, Clone, Copy)]
struct SequenceStep {
    step_index: i64,
    tool_id: i64,
    started_at: Option<i64>,
    row: i64,
}

/// A trace's row of `trace_sequences`, derived from all its steps.
#[derive(Debug, PartialEq)]
struct SequenceRow {
    /// Tool ids in step order, four bytes each, little-endian.
    tools: Vec<u8>,
    /// The start of the first step, in step order, that has one.
    first_started: Option<i64>,
    /// The row id of step 0 when steps 0, 1, 2, ... fill consecutive rows (as an import
    /// writes them), so a reader can fetch a step by row id.
    first_step_row: Option<i64>,
}

const SEQUENCE_TOOL_BYTES: usize = 4;

impl SequenceRow {
    /// The row of a trace whose steps are `steps`, in step order. Fails (naming the tool id)
    /// when a tool id does not fit the four bytes a sequence keeps per step.
    fn of(steps: &[SequenceStep]) -> std::result::Result<Self, String> {
        let empty = Self {
            tools: Vec::new(),
            first_started: None,
            first_step_row: None,
        };
        empty.extend(steps)
    }

    /// The row of this row's trace once `steps` follow its steps, in step order.
    fn extend(mut self, steps: &[SequenceStep]) -> std::result::Result<Self, String> {
        let start = self.tools.len() / SEQUENCE_TOOL_BYTES;
        let mut first_row = match start {
            0 => steps.first().map(|s| s.row),
            _ => self.first_step_row,
        };
        self.tools.reserve(steps.len() * SEQUENCE_TOOL_BYTES);
        for (offset, step) in steps.iter().enumerate() {
            let id = u32::try_from(step.tool_id)
                .map_err(|_| format!("tool id {} does not fit in four bytes", step.tool_id))?;
            self.tools.extend_from_slice(&id.to_le_bytes());
            let place = (start + offset) as i64;
            first_row =
                first_row.filter(|first| step.step_index == place && step.row == first + place);
        }
        self.first_started = self
            .first_started
            .or_else(|| steps.iter().find_map(|s| s.started_at));
        self.first_step_row = first_row;
        Ok(self)
    }

    /// The tool ids of a stored `tools` blob, or `None` when its length is not a whole number
    /// of ids.
    fn tool_ids(tools: &[u8]) -> Option<impl Iterator<Item = i64> + '_> {
        tools.len().is_multiple_of(SEQUENCE_TOOL_BYTES).then(|| {
            tools.chunks_exact(SEQUENCE_TOOL_BYTES).map(|chunk| {
                let mut id = [0u8; SEQUENCE_TOOL_BYTES];
                id.copy_from_slice(chunk);
                i64::from(u32::from_le_bytes(id))
            })
        })
    }

    fn write(&self, tx: &Transaction<'_>, trace_key: i64) -> rusqlite::Result<()> {
        tx.prepare_cached(
            "INSERT OR REPLACE INTO trace_sequences (trace_key, tools, first_started, \
             first_step_row) VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![
            trace_key,
            self.tools,
            self.first_started,
            self.first_step_row
        ])?;
        Ok(())
    }
}

/// The steps of the traces `trace_key` names (one trace, or all when `None`), in (trace, step)
/// order, from the `steps_sequence` index, handed to `visit` a trace at a time.
fn for_each_stored_sequence(
    tx: &Transaction<'_>,
    trace_key: Option<i64>,
    visit: &mut dyn FnMut(i64, &[SequenceStep]) -> Result<()>,
    sql_err: impl Fn(rusqlite::Error) -> RecorderError,
) -> Result<()> {
    const COLUMNS: &str = "SELECT trace_key, step_index, tool_id, started_at, id \
                           FROM steps INDEXED BY steps_sequence";
    let mut stmt = match trace_key {
        Some(_) => tx.prepare_cached(&format!(
            "{COLUMNS} WHERE trace_key = ?1 ORDER BY trace_key, step_index"
        )),
        None => tx.prepare_cached(&format!("{COLUMNS} ORDER BY trace_key, step_index")),
    }
    .map_err(&sql_err)?;
    let mut rows = match trace_key {
        Some(key) => stmt.query([key]),
        None => stmt.query([]),
    }
    .map_err(&sql_err)?;
    let mut current: Option<i64> = None;
    let mut steps: Vec<SequenceStep> = Vec::new();
    while let Some(row) = rows.next().map_err(&sql_err)? {
        let read = || -> rusqlite::Result<(i64, SequenceStep)> {
            Ok((
                row.get(0)?,
                SequenceStep {
                    step_index: row.get(1)?,
                    tool_id: row.get(2)?,
                    started_at: row.get(3)?,
                    row: row.get(4)?,
                },
            ))
        };
        let (key, step) = read().map_err(&sql_err)?;
        if let Some(done) = current.filter(|&c| c != key) {
            visit(done, &steps)?;
            steps.clear();
        }
        current = Some(key);
        steps.push(step);
    }
    if let Some(key) = current {
        visit(key, &steps)?;
    }
    Ok(())
}

/// Brings the `trace_sequences` row of trace `trace_key`, which held steps before this
/// transaction, up to date after `added` (its steps this transaction inserted, in step order).
/// When they all come after the steps it held (a live capture's batches), the stored row is
/// extended; otherwise it is built again from all the trace's steps.
fn update_sequence(
    tx: &Transaction<'_>,
    path: &Path,
    trace_key: i64,
    added: &[SequenceStep],
) -> Result<()> {
    let sql_err = sqlite_error(path);
    let Some(lowest) = added.first().map(|s| s.step_index) else {
        return Ok(());
    };
    let at_or_above: i64 = tx
        .prepare_cached("SELECT count(*) FROM steps WHERE trace_key = ?1 AND step_index >= ?2")
        .and_then(|mut stmt| stmt.query_row(params![trace_key, lowest], |r| r.get(0)))
        .map_err(sql_err)?;
    if at_or_above != added.len() as i64 {
        return for_each_stored_sequence(
            tx,
            Some(trace_key),
            &mut |key, steps| write_sequence(tx, path, key, steps),
            sql_err,
        );
    }
    let stored = tx
        .prepare_cached(
            "SELECT tools, first_started, first_step_row FROM trace_sequences \
             WHERE trace_key = ?1",
        )
        .and_then(|mut stmt| {
            stmt.query_row([trace_key], |r| {
                Ok(SequenceRow {
                    tools: r.get(0)?,
                    first_started: r.get(1)?,
                    first_step_row: r.get(2)?,
                })
            })
            .optional()
        })
        .map_err(sql_err)?;
    let row = match stored {
        Some(stored) => stored.extend(added),
        None => SequenceRow::of(added),
    }
    .map_err(|message| sequence_error(path, trace_key, message))?;
    row.write(tx, trace_key).map_err(sql_err)
}

fn sequence_error(path: &Path, trace_key: i64, message: String) -> RecorderError {
    RecorderError::CorruptStore {
        path: path.to_path_buf(),
        message: format!("trace row {trace_key}: {message}"),
    }
}

/// Writes the `trace_sequences` row of trace `trace_key`, whose steps are `steps` in step order.
fn write_sequence(
    tx: &Transaction<'_>,
    path: &Path,
    trace_key: i64,
    steps: &[SequenceStep],
) -> Result<()> {
    let row = SequenceRow::of(steps).map_err(|message| sequence_error(path, trace_key, message))?;
    row.write(tx, trace_key).map_err(sqlite_error(path))
}

/// Maps SQLite errors to errors naming the store's file.
fn sqlite_error(path: &Path) -> impl Fn(rusqlite::Error) -> RecorderError + Copy + '_ {
    move |source| RecorderError::Sqlite {
        path: path.to_path_buf(),
        source,
    }
}

/// A transaction that takes the write lock at once, so what it reads stays true until it
/// commits (another process may be appending or migrating).
fn immediate<'c>(conn: &'c mut Connection, path: &Path) -> Result<Transaction<'c>> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sqlite_error(path))
}

impl SqliteStore {
    /// Open the store at `path`, creating the file and its schema when missing and migrating an
    /// older schema. A store written by a newer build fails with
    /// [`RecorderError::SchemaTooNew`] and is left untouched.
    pub fn open(path: &Path) -> Result<Self> {
        let sql_err = sqlite_error(path);
        let conn = Connection::open(path).map_err(sql_err)?;
        conn.busy_timeout(Duration::from_secs(30))
            .map_err(sql_err)?;
        let found: i64 = conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(sql_err)?;
        if found > SCHEMA_VERSION {
            return Err(RecorderError::SchemaTooNew {
                path: path.to_path_buf(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
        // WAL lets readers (the TUI) work while a writer appends. `synchronous=FULL` syncs the
        // WAL on every commit: a committed append survives a crash of the process or the
        // machine. Appends are batched, so the cost is one fsync per batch.
        let _mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(sql_err)?;
        // A 64 MiB page cache (the default is 2 MiB) keeps the index pages a large append
        // touches in memory instead of spilling and re-reading them mid-transaction.
        conn.execute_batch(
            "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA cache_size = -65536;",
        )
        .map_err(sql_err)?;
        conn.set_prepared_statement_cache_capacity(64);
        let mut store = Self {
            path: path.to_path_buf(),
            conn,
            tool_ids: HashMap::new(),
            indexes_dropped: false,
            checkpointer: None,
        };
        // Only an outdated file takes the write lock to migrate; an up-to-date one opens
        // without waiting for a busy writer.
        if found < SCHEMA_VERSION {
            store.migrate()?;
        }
        if store.missing_indexes()? > 0 {
            // A bulk load was cut short (a crash) before it created its indexes. The data is
            // complete and correct without them, so a store that cannot take the write lock
            // now (read-only media, a busy writer past the timeout) still opens; the next
            // open tries again.
            let _ = store.create_indexes();
        }
        Ok(store)
    }

    /// The file this store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the open file.
    pub fn schema_version(&self) -> Result<i64> {
        self.conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(|e| self.sql_err(e))
    }

    fn sql_err(&self, source: rusqlite::Error) -> RecorderError {
        sqlite_error(&self.path)(source)
    }

    /// Rebuild the file without free pages (`VACUUM`) after folding the write-ahead log into
    /// it. SQLite does this in a transaction of its own: a crash leaves the file as it was.
    pub fn compact(&mut self) -> Result<CompactStats> {
        let (files_before, bytes_before) = self.disk_size();
        self.conn
            .execute_batch(
                "PRAGMA wal_checkpoint(TRUNCATE); VACUUM; PRAGMA wal_checkpoint(TRUNCATE);",
            )
            .map_err(|e| self.sql_err(e))?;
        let (files_after, bytes_after) = self.disk_size();
        Ok(CompactStats {
            files_before,
            files_after,
            bytes_before,
            bytes_after,
            rows_rewritten: 0,
        })
    }

    /// The database file and its write-ahead log (when it holds anything): how many, and
    /// their bytes.
    fn disk_size(&self) -> (u64, u64) {
        let mut wal = self.path.clone().into_os_string();
        wal.push("-wal");
        [self.path.clone(), PathBuf::from(wal)]
            .iter()
            .filter_map(|path| std::fs::metadata(path).ok())
            .filter(|m| m.len() > 0)
            .fold((0, 0), |(files, bytes), m| (files + 1, bytes + m.len()))
    }

    /// How many of [`DEFERRED_INDEXES`] the file lacks.
    fn missing_indexes(&self) -> Result<usize> {
        let mut present = 0;
        for (name, _) in DEFERRED_INDEXES {
            let found: bool = self
                .conn
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?1)",
                    [name],
                    |row| row.get(0),
                )
                .map_err(|e| self.sql_err(e))?;
            present += usize::from(found);
        }
        Ok(DEFERRED_INDEXES.len() - present)
    }

    /// Create the deferred indexes the file lacks, in one transaction.
    fn create_indexes(&mut self) -> Result<()> {
        let sql_err = sqlite_error(&self.path);
        let tx = immediate(&mut self.conn, &self.path)?;
        for (_, create) in DEFERRED_INDEXES {
            tx.execute_batch(create).map_err(sql_err)?;
        }
        tx.commit().map_err(sql_err)
    }

    /// Apply the migrations this file lacks, all in one transaction.
    fn migrate(&mut self) -> Result<()> {
        let path = &self.path;
        let sql_err = sqlite_error(path);
        let tx = immediate(&mut self.conn, path)?;
        // Read again inside the write lock: another process may have migrated meanwhile.
        let found: i64 = tx
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(sql_err)?;
        if found > SCHEMA_VERSION {
            return Err(RecorderError::SchemaTooNew {
                path: path.to_path_buf(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
        if found == SCHEMA_VERSION {
            return Ok(());
        }
        let first = usize::try_from(found).unwrap_or(0);
        for migration in &MIGRATIONS[first..] {
            tx.execute_batch(migration).map_err(sql_err)?;
        }
        if found < TRACE_SEQUENCES_VERSION {
            for_each_stored_sequence(
                &tx,
                None,
                &mut |key, steps| write_sequence(&tx, path, key, steps),
                sql_err,
            )?;
        }
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(sql_err)?;
        tx.commit().map_err(sql_err)
    }

    /// The SQL condition (over alias `t`) and parameters for a filter. `None` when the filter
    /// cannot match anything (an unknown tool).
    fn filter_sql(&self, filter: &TraceFilter) -> Result<Option<(String, Vec<SqlValue>)>> {
        let mut clauses: Vec<String> = Vec::new();
        let mut values: Vec<SqlValue> = Vec::new();
        if let Some(tool) = &filter.tool {
            let id: Option<i64> = self
                .conn
                .prepare_cached("SELECT id FROM tools WHERE name = ?1")
                .and_then(|mut stmt| stmt.query_row([tool], |row| row.get(0)).optional())
                .map_err(|e| self.sql_err(e))?;
            let Some(id) = id else { return Ok(None) };
            clauses.push(format!(
                "EXISTS (SELECT 1 FROM steps s WHERE s.tool_id = {id} AND s.trace_key = t.id)"
            ));
        }
        if let Some(needle) = &filter.tool_contains {
            // Matched in Rust over the (small) interned tool table: Unicode-aware case folding,
            // which SQLite's LIKE lacks, and no wildcard escaping.
            let needle = needle.to_lowercase();
            let mut ids = Vec::new();
            let mut stmt = self
                .conn
                .prepare_cached("SELECT id, name FROM tools")
                .map_err(|e| self.sql_err(e))?;
            let rows = stmt
                .query_map([], |row| {
                    Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
                })
                .map_err(|e| self.sql_err(e))?;
            for row in rows {
                let (id, name) = row.map_err(|e| self.sql_err(e))?;
                if name.to_lowercase().contains(&needle) {
                    ids.push(id.to_string());
                }
            }
            if ids.is_empty() {
                return Ok(None);
            }
            clauses.push(format!(
                "EXISTS (SELECT 1 FROM steps s WHERE s.tool_id IN ({}) AND s.trace_key = t.id)",
                ids.join(",")
            ));
        }
        if let Some(source) = &filter.source {
            clauses.push("t.source = ?".into());
            values.push(SqlValue::Text(source.clone()));
        }
        if let Some(since) = &filter.since {
            match timestamp_nanos(since) {
                Some(nanos) => {
                    clauses.push("t.started_at >= ?".into());
                    values.push(SqlValue::Integer(nanos));
                }
                // Before 1677: every stored start qualifies; after 2262: none does.
                None if since.timestamp() > 0 => return Ok(None),
                None => clauses.push("t.started_at IS NOT NULL".into()),
            }
        }
        if let Some(until) = &filter.until {
            match timestamp_nanos(until) {
                Some(nanos) => {
                    clauses.push("t.started_at < ?".into());
                    values.push(SqlValue::Integer(nanos));
                }
                None if until.timestamp() > 0 => clauses.push("t.started_at IS NOT NULL".into()),
                None => return Ok(None),
            }
        }
        match filter.has_error {
            Some(true) => clauses.push("t.error_count > 0".into()),
            Some(false) => clauses.push("t.error_count = 0".into()),
            None => {}
        }
        if let Some(min) = filter.min_duration_ms {
            if min.is_nan() {
                return Ok(None);
            }
            clauses.push(format!("({DURATION_SQL}) >= ?"));
            values.push(SqlValue::Real(min));
        }
        let condition = if clauses.is_empty() {
            "1".to_owned()
        } else {
            clauses.join(" AND ")
        };
        Ok(Some((condition, values)))
    }

    /// Read the steps of the trace with row key `key`, in step order.
    fn steps_of(&self, key: i64, trace_id: &str) -> Result<Vec<ObservedStep>> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT {STEP_COLUMNS} FROM steps s JOIN tools ON tools.id = s.tool_id \
                 WHERE s.trace_key = ?1 ORDER BY s.step_index"
            ))
            .map_err(|e| self.sql_err(e))?;
        let rows = stmt
            .query_map([key], StepRow::read)
            .map_err(|e| self.sql_err(e))?;
        let mut steps = Vec::new();
        for row in rows {
            steps.push(
                row.map_err(|e| self.sql_err(e))?
                    .into_step(&self.path, trace_id)?,
            );
        }
        Ok(steps)
    }
}

impl SqliteStore {
    /// `items` as one JSON array, the way a batch query takes them (through `json_each`).
    fn json_list<T: serde::Serialize>(&self, items: &[T], what: &str) -> Result<String> {
        serde_json::to_string(items).map_err(|e| RecorderError::CorruptStore {
            path: self.path.clone(),
            message: format!("cannot list the {what} to read: {e}"),
        })
    }

    /// The trace rows of the ids in the JSON array `ids` (unknown ids left out), without steps,
    /// each with its row key.
    fn trace_rows(&self, tx: &Transaction<'_>, ids: &str) -> Result<Vec<(i64, TraceWithSteps)>> {
        self.trace_rows_on(tx, "t.trace_id", ids)
    }

    /// [`SqliteStore::trace_rows`] of the traces whose `column` (`t.trace_id` or the row key
    /// `t.id`) is in the JSON array `list`.
    fn trace_rows_on(
        &self,
        tx: &Transaction<'_>,
        column: &str,
        list: &str,
    ) -> Result<Vec<(i64, TraceWithSteps)>> {
        let mut stmt = tx
            .prepare(&format!(
                "SELECT {TRACE_COLUMNS} FROM json_each(?1) j \
                 CROSS JOIN traces t ON {column} = j.value"
            ))
            .map_err(|e| self.sql_err(e))?;
        let mut traces = Vec::new();
        let mut rows = stmt.query([list]).map_err(|e| self.sql_err(e))?;
        while let Some(row) = rows.next().map_err(|e| self.sql_err(e))? {
            let trace_row = TraceRow::read(row, 0).map_err(|e| self.sql_err(e))?;
            let key = trace_row.key;
            let trace = trace_row.into_trace(&self.path)?;
            traces.push((
                key,
                TraceWithSteps {
                    trace,
                    steps: Vec::new(),
                },
            ));
        }
        Ok(traces)
    }

    /// Run `SELECT {STEP_COLUMNS} FROM {from} JOIN tools ...` with the JSON array `list` as
    /// `?1` (`from` names the steps `s`) and add each step to its trace in `traces` (rows of
    /// other traces are ignored), in row order. A read of one batch ([`PARSE_BATCH`] rows) is
    /// parsed here; a longer one is parsed by threads, batch by batch, while this thread reads
    /// on (SQLite's cursor stays on it), so reading and parsing overlap.
    fn attach_step_rows(
        &self,
        tx: &Transaction<'_>,
        from: &str,
        list: &str,
        traces: &mut [(i64, TraceWithSteps)],
    ) -> Result<()> {
        let mut stmt = tx
            .prepare(&format!(
                "SELECT {STEP_COLUMNS} FROM {from} JOIN tools ON tools.id = s.tool_id"
            ))
            .map_err(|e| self.sql_err(e))?;
        let at: HashMap<i64, usize> = traces
            .iter()
            .enumerate()
            .map(|(i, (key, _))| (*key, i))
            .collect();
        let ids: Vec<&str> = traces
            .iter()
            .map(|(_, t)| t.trace.trace_id.as_str())
            .collect();
        let path = self.path.as_path();
        let mut rows = stmt.query([list]).map_err(|e| self.sql_err(e))?;
        let first = self.next_row_batch(&mut rows, &at)?;
        let parsed: Vec<ParsedBatch> = if first.len() < PARSE_BATCH {
            // A short read (one trace for a detail view, a new trace's check in `collect`):
            // threads would cost more than they save.
            vec![(0, parse_rows(first, path, &ids))]
        } else {
            let threads = std::thread::available_parallelism().map_or(1, usize::from);
            std::thread::scope(|scope| -> Result<Vec<ParsedBatch>> {
                let (send, receive) = std::sync::mpsc::sync_channel::<RowBatch>(threads * 2);
                // Shared by the parsing threads alone: when they all stop, sending fails
                // instead of waiting for a reader that is gone.
                let receive = Arc::new(Mutex::new(receive));
                let ids = &ids;
                let workers: Vec<_> = (0..threads)
                    .map(|_| {
                        let receive = Arc::clone(&receive);
                        scope.spawn(move || parse_batches(&receive, path, ids))
                    })
                    .collect();
                drop(receive);
                let mut read = Ok(());
                let mut batch = first;
                for number in 0.. {
                    if batch.is_empty() || send.send((number, batch)).is_err() {
                        break;
                    }
                    batch = match self.next_row_batch(&mut rows, &at) {
                        Ok(batch) => batch,
                        Err(err) => {
                            read = Err(err);
                            break;
                        }
                    };
                }
                drop(send);
                let mut parsed = Vec::new();
                for worker in workers {
                    parsed.extend(worker.join().map_err(|_| RecorderError::CorruptStore {
                        path: path.to_path_buf(),
                        message: "a thread parsing step payloads stopped".into(),
                    })?);
                }
                read?;
                parsed.sort_unstable_by_key(|(number, _)| *number);
                Ok(parsed)
            })?
        };
        for (_, steps) in parsed {
            for (step, trace) in steps? {
                traces[trace].1.steps.push(step);
            }
        }
        Ok(())
    }

    /// Up to [`PARSE_BATCH`] more rows of `rows` whose trace `at` knows, each with its trace's
    /// index; fewer only at the end.
    fn next_row_batch(
        &self,
        rows: &mut rusqlite::Rows<'_>,
        at: &HashMap<i64, usize>,
    ) -> Result<Vec<(StepRow, usize)>> {
        let mut batch = Vec::with_capacity(PARSE_BATCH);
        while batch.len() < PARSE_BATCH {
            let Some(row) = rows.next().map_err(|e| self.sql_err(e))? else {
                break;
            };
            let row = StepRow::read(row).map_err(|e| self.sql_err(e))?;
            if let Some(&trace) = at.get(&row.trace_key) {
                batch.push((row, trace));
            }
        }
        Ok(batch)
    }
}

/// Step rows as read, numbered in reading order, each with the index of its trace.
type RowBatch = (usize, Vec<(StepRow, usize)>);
/// A [`RowBatch`] parsed.
type ParsedBatch = (usize, Result<Vec<(ObservedStep, usize)>>);

/// Parse the batches `receive` hands out until no more come.
fn parse_batches(
    receive: &Mutex<std::sync::mpsc::Receiver<RowBatch>>,
    path: &Path,
    trace_ids: &[&str],
) -> Vec<ParsedBatch> {
    let mut parsed = Vec::new();
    loop {
        let next = match receive.lock() {
            Ok(receive) => receive.recv(),
            Err(_) => break,
        };
        let Ok((number, rows)) = next else {
            break;
        };
        parsed.push((number, parse_rows(rows, path, trace_ids)));
    }
    parsed
}

/// Step rows turned into steps, each with its trace's index.
fn parse_rows(
    rows: Vec<(StepRow, usize)>,
    path: &Path,
    trace_ids: &[&str],
) -> Result<Vec<(ObservedStep, usize)>> {
    rows.into_iter()
        .map(|(row, at)| Ok((row.into_step(path, trace_ids[at])?, at)))
        .collect()
}

impl SqliteStore {
    /// [`TraceStore::append`] of steps as the store writes them, from either kind of batch.
    fn append_views(
        &mut self,
        traces: &[ObservedTrace],
        steps: &[StepView<'_>],
    ) -> Result<AppendStats> {
        validate_batch(traces, steps)?;
        let Self {
            path,
            conn,
            tool_ids,
            ..
        } = self;
        let sql_err = sqlite_error(path);
        let mut stats = AppendStats::default();
        let mut new_tools: HashMap<String, i64> = HashMap::new();
        // Dropping `tx` without commit (any `?` below) rolls the whole batch back.
        let tx = immediate(conn, path)?;
        // The traces this batch creates: their sequence rows are built from its steps alone.
        let mut new_traces: std::collections::HashSet<i64> = std::collections::HashSet::new();
        {
            let mut trace_keys: HashMap<&str, i64> = HashMap::new();
            let mut select_trace = tx
                .prepare_cached(&format!(
                    "SELECT {TRACE_COLUMNS} FROM traces t WHERE t.trace_id = ?1"
                ))
                .map_err(sql_err)?;
            let mut insert_trace = tx
                .prepare_cached(
                    "INSERT INTO traces (trace_id, session_id, source, agent, started_at, \
                     ended_at, metadata) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .map_err(sql_err)?;
            let mut update_trace = tx
                .prepare_cached(
                    "UPDATE traces SET session_id = ?2, source = ?3, agent = ?4, \
                     started_at = ?5, ended_at = ?6, metadata = ?7 WHERE id = ?1",
                )
                .map_err(sql_err)?;
            for trace in traces {
                let stored = select_trace
                    .query_row([&trace.trace_id], |row| TraceRow::read(row, 0))
                    .optional()
                    .map_err(sql_err)?;
                let key = match stored {
                    Some(row) => {
                        let key = row.key;
                        let mut merged = row.into_trace(path)?;
                        merge_trace(&mut merged, trace);
                        update_trace
                            .execute(params![
                                key,
                                merged.session_id,
                                merged.source,
                                merged.agent,
                                merged.started_at.as_ref().and_then(timestamp_nanos),
                                merged.ended_at.as_ref().and_then(timestamp_nanos),
                                metadata_text(&merged.metadata),
                            ])
                            .map_err(sql_err)?;
                        key
                    }
                    None => {
                        insert_trace
                            .execute(params![
                                trace.trace_id,
                                trace.session_id,
                                trace.source,
                                trace.agent,
                                trace.started_at.as_ref().and_then(timestamp_nanos),
                                trace.ended_at.as_ref().and_then(timestamp_nanos),
                                metadata_text(&trace.metadata),
                            ])
                            .map_err(sql_err)?;
                        let key = tx.last_insert_rowid();
                        new_traces.insert(key);
                        key
                    }
                };
                trace_keys.insert(&trace.trace_id, key);
                stats.traces += 1;
            }

            let mut select_key = tx
                .prepare_cached("SELECT id FROM traces WHERE trace_id = ?1")
                .map_err(sql_err)?;
            let mut select_tool = tx
                .prepare_cached("SELECT id FROM tools WHERE name = ?1")
                .map_err(sql_err)?;
            let mut insert_tool = tx
                .prepare_cached("INSERT INTO tools (name) VALUES (?1)")
                .map_err(sql_err)?;
            let mut insert_step = tx
                .prepare_cached(
                    "INSERT INTO steps (trace_key, step_index, call_id, tool_id, inputs, outputs, \
                     error_type, error_message, started_at, ended_at, duration_ms, recorded_at, \
                     metadata, is_error) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) \
                     ON CONFLICT (trace_key, step_index) DO NOTHING",
                )
                .map_err(sql_err)?;
            let mut deltas: HashMap<i64, TraceDelta> = HashMap::new();
            let mut inputs_text = JsonBuffer::default();
            let mut outputs_text = JsonBuffer::default();
            let mut metadata_buffer = JsonBuffer::default();
            // A trace's steps come one after another: the last key found is usually the one.
            let mut last_key: Option<(&str, i64)> = None;
            for step in steps {
                let cached = last_key.filter(|(id, _)| *id == step.trace_id);
                let key = match cached
                    .map(|(_, key)| key)
                    .or_else(|| trace_keys.get(step.trace_id).copied())
                {
                    Some(key) => key,
                    None => {
                        let key: Option<i64> = select_key
                            .query_row([step.trace_id], |row| row.get(0))
                            .optional()
                            .map_err(sql_err)?;
                        let key = key.ok_or_else(|| RecorderError::InvalidStep {
                            trace_id: step.trace_id.to_owned(),
                            step_index: step.step_index,
                            message: "no trace with this id in the batch or the store".into(),
                        })?;
                        trace_keys.insert(step.trace_id, key);
                        key
                    }
                };
                last_key = Some((step.trace_id, key));
                let tool_id = match tool_ids
                    .get(step.tool_name)
                    .or_else(|| new_tools.get(step.tool_name))
                {
                    Some(id) => *id,
                    None => {
                        let existing: Option<i64> = select_tool
                            .query_row([step.tool_name], |row| row.get(0))
                            .optional()
                            .map_err(sql_err)?;
                        let id = match existing {
                            Some(id) => id,
                            None => {
                                insert_tool.execute([step.tool_name]).map_err(sql_err)?;
                                tx.last_insert_rowid()
                            }
                        };
                        new_tools.insert(step.tool_name.to_owned(), id);
                        id
                    }
                };
                let is_error = step.is_error();
                let started_at = step.started_at.and_then(timestamp_nanos);
                let inserted = insert_step
                    .execute(params![
                        key,
                        step.step_index,
                        step.call_id,
                        tool_id,
                        inputs_text.json(step.inputs),
                        step.outputs.map(|v| outputs_text.json(v)),
                        step.error_type,
                        step.error_message,
                        started_at,
                        step.ended_at.and_then(timestamp_nanos),
                        step.duration_ms,
                        step.recorded_at.and_then(timestamp_nanos),
                        metadata_buffer.metadata(step.metadata),
                        is_error,
                    ])
                    .map_err(sql_err)?;
                if inserted == 0 {
                    stats.duplicate_steps += 1;
                    continue;
                }
                stats.steps += 1;
                let delta = deltas.entry(key).or_default();
                delta.added.push(SequenceStep {
                    step_index: i64::from(step.step_index),
                    tool_id,
                    started_at,
                    row: tx.last_insert_rowid(),
                });
                delta.errors += i64::from(is_error);
                if let Some(duration) = step.duration_ms {
                    delta.duration_ms = Some(delta.duration_ms.unwrap_or(0.0) + duration);
                }
            }

            let mut update_counters = tx
                .prepare_cached(
                    "UPDATE traces SET step_count = step_count + ?2, \
                     error_count = error_count + ?3, \
                     step_duration_ms = CASE WHEN ?4 IS NULL THEN step_duration_ms \
                                        ELSE coalesce(step_duration_ms, 0.0) + ?4 END \
                     WHERE id = ?1",
                )
                .map_err(sql_err)?;
            // In key order, so the rows are written where the last one was.
            let mut deltas: Vec<(i64, TraceDelta)> = deltas.into_iter().collect();
            deltas.sort_unstable_by_key(|(key, _)| *key);
            for (key, mut delta) in deltas {
                let added = delta.added.len() as i64;
                update_counters
                    .execute(params![key, added, delta.errors, delta.duration_ms])
                    .map_err(sql_err)?;
                // Steps may come in any order; a sequence is in step order.
                delta.added.sort_unstable_by_key(|s| s.step_index);
                if new_traces.contains(&key) {
                    write_sequence(&tx, path, key, &delta.added)?;
                } else {
                    update_sequence(&tx, path, key, &delta.added)?;
                }
            }
        }
        tx.commit().map_err(sql_err)?;
        tool_ids.extend(new_tools);
        Ok(stats)
    }
}

/// `traces` in the order of `ids`, each trace's steps in step order.
fn in_request_order(mut traces: Vec<(i64, TraceWithSteps)>, ids: &[&str]) -> Vec<TraceWithSteps> {
    let rank: HashMap<&str, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    traces.sort_by_key(|(_, t)| rank.get(t.trace.trace_id.as_str()).copied());
    traces
        .into_iter()
        .map(|(_, mut trace)| {
            trace.steps.sort_by_key(|s| s.step_index);
            trace
        })
        .collect()
}

/// Step rows read per batch handed to a parsing thread: small enough that parsing starts
/// soon after reading does; the channel holds at most two batches a thread, so raw text waiting
/// to be parsed stays bounded.
const PARSE_BATCH: usize = 2_048;

impl TraceStore for SqliteStore {
    /// On an empty store, drops the indexes on start times (`DEFERRED_INDEXES`):
    /// filling them row by row, in the random order start times come in, costs about as much
    /// as the rest of an append; building them once from the loaded rows costs a fraction.
    /// The rules still hold: each append stays one durable transaction; those indexes enforce
    /// nothing (the unique keys that find traces and skip duplicate steps stay), so queries
    /// meanwhile are right, only slower; the store was empty, so no earlier data is touched;
    /// and a crash before [`TraceStore::end_bulk_load`] leaves complete data whose indexes the
    /// next `open` creates. A store holding data keeps its indexes. Another process opening the
    /// store during the load creates them too (it cannot tell a load from a crash); the load
    /// then goes on maintaining them, only slower.
    fn begin_bulk_load(&mut self) -> Result<()> {
        let sql_err = sqlite_error(&self.path);
        let tx = immediate(&mut self.conn, &self.path)?;
        // Checked inside the write lock: another process may be appending.
        let empty: bool = tx
            .query_row(
                "SELECT NOT EXISTS (SELECT 1 FROM traces) AND NOT EXISTS (SELECT 1 FROM steps)",
                [],
                |row| row.get(0),
            )
            .map_err(sql_err)?;
        if !empty {
            return Ok(());
        }
        for (name, _) in DEFERRED_INDEXES {
            tx.execute_batch(&format!("DROP INDEX IF EXISTS {name}"))
                .map_err(sql_err)?;
        }
        tx.commit().map_err(sql_err)?;
        self.indexes_dropped = true;
        Ok(())
    }

    fn end_bulk_load(&mut self) -> Result<()> {
        if !std::mem::take(&mut self.indexes_dropped) {
            return Ok(());
        }
        self.create_indexes()
    }

    fn checkpoint_in_background(&mut self) -> Result<()> {
        if self.checkpointer.is_some() {
            return Ok(());
        }
        let checkpointer = Checkpointer::start(&self.path)?;
        // This connection's own checkpoints (after a commit, once the log passes 1,000 pages)
        // would make that commit wait for them: now only rarely, to bound the log.
        self.conn
            .execute_batch(&format!(
                "PRAGMA wal_autocheckpoint = {WRITER_CHECKPOINT_PAGES};"
            ))
            .map_err(|e| self.sql_err(e))?;
        self.checkpointer = Some(checkpointer);
        Ok(())
    }

    fn append(&mut self, traces: &[ObservedTrace], steps: &[ObservedStep]) -> Result<AppendStats> {
        let views: Vec<StepView<'_>> = steps.iter().map(StepView::from).collect();
        self.append_views(traces, &views)
    }

    fn append_raw(&mut self, traces: &[ObservedTrace], steps: &RawSteps) -> Result<AppendStats> {
        self.append_views(traces, &steps.views())
    }

    fn list_traces(&self, filter: &TraceFilter, page: &PageRequest) -> Result<TracePage> {
        let Some((condition, values)) = self.filter_sql(filter)? else {
            return Ok(TracePage {
                traces: Vec::new(),
                total: 0,
            });
        };
        let total: i64 = self
            .conn
            .prepare_cached(&format!("SELECT count(*) FROM traces t WHERE {condition}"))
            .and_then(|mut stmt| stmt.query_row(params_from_iter(values.iter()), |row| row.get(0)))
            .map_err(|e| self.sql_err(e))?;
        let order = match page.sort {
            TraceSort::Stored => "t.id",
            TraceSort::TraceId => "t.trace_id",
            TraceSort::StartedAt => "t.started_at",
            TraceSort::Steps => "t.step_count",
            TraceSort::Errors => "t.error_count",
            TraceSort::Duration => "duration_ms",
        };
        let direction = if page.descending { "DESC" } else { "ASC" };
        let tie_break = if page.sort == TraceSort::Stored {
            String::new()
        } else {
            format!(", t.id {direction}")
        };
        let sql = format!(
            "SELECT {TRACE_COLUMNS}, t.step_count, t.error_count, {DURATION_SQL} AS duration_ms \
             FROM traces t WHERE {condition} \
             ORDER BY {order} {direction}{tie_break} LIMIT ? OFFSET ?"
        );
        let mut params = values;
        params.push(SqlValue::Integer(
            i64::try_from(page.limit).unwrap_or(i64::MAX),
        ));
        params.push(SqlValue::Integer(
            i64::try_from(page.offset).unwrap_or(i64::MAX),
        ));
        let mut stmt = self
            .conn
            .prepare_cached(&sql)
            .map_err(|e| self.sql_err(e))?;
        let rows = stmt
            .query_map(params_from_iter(params.iter()), |row| {
                Ok((
                    TraceRow::read(row, 0)?,
                    row.get::<_, i64>(8)?,
                    row.get::<_, i64>(9)?,
                    row.get::<_, Option<f64>>(10)?,
                ))
            })
            .map_err(|e| self.sql_err(e))?;
        let mut traces = Vec::new();
        for row in rows {
            let (trace, steps, errors, duration_ms) = row.map_err(|e| self.sql_err(e))?;
            traces.push(TraceSummary {
                trace: trace.into_trace(&self.path)?,
                step_count: u64::try_from(steps).unwrap_or(0),
                error_count: u64::try_from(errors).unwrap_or(0),
                duration_ms,
            });
        }
        Ok(TracePage {
            traces,
            total: u64::try_from(total).unwrap_or(0),
        })
    }

    fn get_trace(&self, trace_id: &str) -> Result<Option<TraceWithSteps>> {
        let row = self
            .conn
            .prepare_cached(&format!(
                "SELECT {TRACE_COLUMNS} FROM traces t WHERE t.trace_id = ?1"
            ))
            .and_then(|mut stmt| {
                stmt.query_row([trace_id], |row| TraceRow::read(row, 0))
                    .optional()
            })
            .map_err(|e| self.sql_err(e))?;
        let Some(row) = row else { return Ok(None) };
        let key = row.key;
        let trace = row.into_trace(&self.path)?;
        let steps = self.steps_of(key, &trace.trace_id)?;
        Ok(Some(TraceWithSteps { trace, steps }))
    }

    fn get_traces(&self, ids: &[&str]) -> Result<Vec<TraceWithSteps>> {
        // Two statements for the whole batch, the ids passed as one JSON array: a statement
        // per trace costs more in preparing and stepping than the rows it reads. Rows are put
        // in order here rather than by ORDER BY, which would sort them in a temporary B-tree.
        let mut seen = std::collections::HashSet::new();
        let distinct: Vec<&str> = ids.iter().copied().filter(|id| seen.insert(*id)).collect();
        let wanted = self.json_list(&distinct, "trace ids")?;
        let tx = self
            .conn
            .unchecked_transaction()
            .map_err(|e| self.sql_err(e))?;
        let mut traces = self.trace_rows(&tx, &wanted)?;
        self.attach_step_rows(
            &tx,
            "json_each(?1) j CROSS JOIN traces t ON t.trace_id = j.value \
             CROSS JOIN steps s ON s.trace_key = t.id",
            &wanted,
            &mut traces,
        )?;
        Ok(in_request_order(traces, &distinct))
    }

    fn get_trace_steps(&self, wanted: &[(&str, &[usize])]) -> Result<Vec<TraceWithSteps>> {
        // Three statements: the trace rows; the step keys of those traces from the
        // (trace_key, step_index) index alone, which places each step; then only the wanted
        // steps, by row id. Payloads no position asks for are never read or parsed.
        let mut positions: HashMap<&str, &[usize]> = HashMap::with_capacity(wanted.len());
        let mut distinct: Vec<&str> = Vec::with_capacity(wanted.len());
        for (id, at) in wanted {
            if positions.insert(id, at).is_none() {
                distinct.push(id);
            }
        }
        let ids = self.json_list(&distinct, "trace ids")?;
        let tx = self
            .conn
            .unchecked_transaction()
            .map_err(|e| self.sql_err(e))?;
        let mut traces = self.trace_rows(&tx, &ids)?;
        let mut keys: HashMap<i64, Vec<(i64, i64)>> = HashMap::with_capacity(traces.len());
        {
            let mut key_stmt = tx
                .prepare(
                    "SELECT s.trace_key, s.step_index, s.id FROM json_each(?1) j \
                     CROSS JOIN traces t ON t.trace_id = j.value \
                     CROSS JOIN steps s ON s.trace_key = t.id",
                )
                .map_err(|e| self.sql_err(e))?;
            let mut rows = key_stmt.query([&ids]).map_err(|e| self.sql_err(e))?;
            while let Some(row) = rows.next().map_err(|e| self.sql_err(e))? {
                let trace_key: i64 = row.get(0).map_err(|e| self.sql_err(e))?;
                let step_index: i64 = row.get(1).map_err(|e| self.sql_err(e))?;
                let step_id: i64 = row.get(2).map_err(|e| self.sql_err(e))?;
                keys.entry(trace_key)
                    .or_default()
                    .push((step_index, step_id));
            }
        }
        let mut step_ids: Vec<i64> = Vec::new();
        for (key, trace) in &traces {
            let Some(steps) = keys.get_mut(key) else {
                continue;
            };
            steps.sort_unstable();
            let at = positions
                .get(trace.trace.trace_id.as_str())
                .copied()
                .unwrap_or(&[]);
            step_ids.extend(
                keep_positions(std::mem::take(steps), at)
                    .into_iter()
                    .map(|(_, id)| id),
            );
        }
        let step_ids = self.json_list(&step_ids, "step ids")?;
        self.attach_step_rows(
            &tx,
            "json_each(?1) j CROSS JOIN steps s ON s.id = j.value",
            &step_ids,
            &mut traces,
        )?;
        Ok(in_request_order(traces, &distinct))
    }

    fn get_sequence_steps(&self, wanted: &[SequenceSteps<'_>]) -> Result<Vec<TraceWithSteps>> {
        // Placed traces: their rows by key and the wanted steps by row id, two statements and
        // no lookup by trace id or position. Unplaced ones go the way `get_trace_steps` reads.
        let mut unplaced: Vec<(&str, &[usize])> = Vec::new();
        let mut expected: HashMap<i64, &SequenceSteps<'_>> = HashMap::new();
        let mut keys = Vec::new();
        let mut step_rows = Vec::new();
        for want in wanted {
            match want.rows {
                None => unplaced.push((want.trace_id, want.positions)),
                Some(rows) => {
                    if expected.insert(rows.trace_row, want).is_none() {
                        keys.push(rows.trace_row);
                        step_rows.extend(
                            want.positions
                                .iter()
                                .map(|&p| rows.first_step_row + p as i64),
                        );
                    }
                }
            }
        }
        let mut traces = Vec::with_capacity(wanted.len());
        if !keys.is_empty() {
            let keys = self.json_list(&keys, "trace keys")?;
            let step_rows = self.json_list(&step_rows, "step ids")?;
            let tx = self
                .conn
                .unchecked_transaction()
                .map_err(|e| self.sql_err(e))?;
            traces = self.trace_rows_on(&tx, "t.id", &keys)?;
            // A row key now naming another trace (the store changed since): left out.
            traces.retain(|(key, trace)| {
                expected
                    .get(key)
                    .is_some_and(|want| want.trace_id == trace.trace.trace_id)
            });
            self.attach_step_rows(
                &tx,
                "json_each(?1) j CROSS JOIN steps s ON s.id = j.value",
                &step_rows,
                &mut traces,
            )?;
            for (key, trace) in &mut traces {
                // A row now holding another step: left out.
                let at = expected.get(key).map_or(&[][..], |want| want.positions);
                trace
                    .steps
                    .retain(|step| at.binary_search(&(step.step_index as usize)).is_ok());
            }
        }
        if !unplaced.is_empty() {
            // Their row keys are not needed past here: only the order by id is.
            traces.extend(self.get_trace_steps(&unplaced)?.into_iter().map(|t| (0, t)));
        }
        let ids: Vec<&str> = wanted.iter().map(|w| w.trace_id).collect();
        Ok(in_request_order(traces, &ids))
    }

    fn for_each_trace(&self, visit: &mut dyn FnMut(TraceWithSteps) -> Result<()>) -> Result<()> {
        // One read transaction for a consistent snapshot; two cursors in the same order (trace
        // key), merged, so only one trace is in memory at a time.
        let tx = self
            .conn
            .unchecked_transaction()
            .map_err(|e| self.sql_err(e))?;
        let mut trace_stmt = tx
            .prepare(&format!(
                "SELECT {TRACE_COLUMNS} FROM traces t ORDER BY t.id"
            ))
            .map_err(|e| self.sql_err(e))?;
        let mut step_stmt = tx
            .prepare(&format!(
                "SELECT {STEP_COLUMNS} FROM steps s JOIN tools ON tools.id = s.tool_id \
                 ORDER BY s.trace_key, s.step_index"
            ))
            .map_err(|e| self.sql_err(e))?;
        let mut trace_rows = trace_stmt.query([]).map_err(|e| self.sql_err(e))?;
        let mut step_rows = step_stmt.query([]).map_err(|e| self.sql_err(e))?;
        let mut pending: Option<StepRow> = None;
        while let Some(row) = trace_rows.next().map_err(|e| self.sql_err(e))? {
            let trace_row = TraceRow::read(row, 0).map_err(|e| self.sql_err(e))?;
            let key = trace_row.key;
            let trace = trace_row.into_trace(&self.path)?;
            let mut steps = Vec::new();
            loop {
                if pending.is_none() {
                    pending = match step_rows.next().map_err(|e| self.sql_err(e))? {
                        Some(row) => Some(StepRow::read(row).map_err(|e| self.sql_err(e))?),
                        None => None,
                    };
                }
                match pending.take() {
                    Some(step) if step.trace_key == key => {
                        steps.push(step.into_step(&self.path, &trace.trace_id)?);
                    }
                    Some(step) if step.trace_key < key => {
                        return Err(RecorderError::CorruptStore {
                            path: self.path.clone(),
                            message: format!(
                                "step {} refers to trace key {} which has no trace row",
                                step.step_index, step.trace_key
                            ),
                        });
                    }
                    other => {
                        pending = other;
                        break;
                    }
                }
            }
            visit(TraceWithSteps { trace, steps })?;
        }
        Ok(())
    }

    fn step_columns(&self, filter: &TraceFilter) -> Result<StepColumns> {
        let mut columns = StepColumns::default();
        let Some((condition, values)) = self.filter_sql(filter)? else {
            return Ok(columns);
        };
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT t.trace_id, tools.name, s.is_error, s.duration_ms, s.started_at \
                 FROM traces t JOIN steps s ON s.trace_key = t.id \
                 JOIN tools ON tools.id = s.tool_id \
                 WHERE {condition} ORDER BY t.id, s.step_index"
            ))
            .map_err(|e| self.sql_err(e))?;
        let mut rows = stmt
            .query(params_from_iter(values.iter()))
            .map_err(|e| self.sql_err(e))?;
        while let Some(row) = rows.next().map_err(|e| self.sql_err(e))? {
            let mut read = || -> rusqlite::Result<()> {
                columns.trace_id.push(row.get(0)?);
                columns.tool_name.push(row.get(1)?);
                columns.is_error.push(row.get(2)?);
                columns.duration_ms.push(row.get(3)?);
                columns
                    .started_at
                    .push(row.get::<_, Option<i64>>(4)?.map(timestamp_from_nanos));
                Ok(())
            };
            read().map_err(|e| self.sql_err(e))?;
        }
        Ok(columns)
    }

    fn for_each_step_tool(&self, visit: &mut dyn FnMut(StepTool<'_>) -> Result<()>) -> Result<()> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT t.trace_id, tools.name, s.started_at \
                 FROM traces t JOIN steps s ON s.trace_key = t.id \
                 JOIN tools ON tools.id = s.tool_id ORDER BY s.trace_key, s.step_index",
            )
            .map_err(|e| self.sql_err(e))?;
        let mut rows = stmt.query([]).map_err(|e| self.sql_err(e))?;
        while let Some(row) = rows.next().map_err(|e| self.sql_err(e))? {
            let read = || -> rusqlite::Result<(&str, &str, Option<i64>)> {
                Ok((
                    row.get_ref(0)?.as_str()?,
                    row.get_ref(1)?.as_str()?,
                    row.get(2)?,
                ))
            };
            let (trace_id, tool_name, started_at) = read().map_err(|e| self.sql_err(e))?;
            visit(StepTool {
                trace_id,
                tool_name,
                started_at: started_at.map(timestamp_from_nanos),
            })?;
        }
        Ok(())
    }

    fn read_tool_sequences(&self, keep: &dyn Fn(&str) -> bool) -> Result<ToolSequences> {
        // One row a trace: its id beside its `trace_sequences` row (none for a trace without
        // steps), in storage order. No step row or index entry is read.
        let tx = self
            .conn
            .unchecked_transaction()
            .map_err(|e| self.sql_err(e))?;
        let mut tool_names: HashMap<i64, String> = tx
            .prepare("SELECT id, name FROM tools")
            .and_then(|mut stmt| {
                stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
                    .collect()
            })
            .map_err(|e| self.sql_err(e))?;
        let corrupt = |message: String| RecorderError::CorruptStore {
            path: self.path.clone(),
            message,
        };
        let mut out = ToolSequences::default();
        let mut stmt = tx
            .prepare(
                "SELECT t.id, t.trace_id, t.step_count, q.tools, q.first_started, \
                 q.first_step_row FROM traces t \
                 LEFT JOIN trace_sequences q ON q.trace_key = t.id ORDER BY t.id",
            )
            .map_err(|e| self.sql_err(e))?;
        let mut rows = stmt.query([]).map_err(|e| self.sql_err(e))?;
        // Tools are interned in order of first appearance over the traces in storage order.
        let mut interned: HashMap<i64, u32> = HashMap::new();
        while let Some(row) = rows.next().map_err(|e| self.sql_err(e))? {
            let read = || -> rusqlite::Result<_> {
                let id = row.get_ref(1)?.as_str()?;
                let tools = row.get_ref(3)?.as_blob_or_null()?;
                let step_count: i64 = row.get(2)?;
                let first_started: Option<i64> = row.get(4)?;
                let first_step_row: Option<i64> = row.get(5)?;
                Ok((
                    row.get::<_, i64>(0)?,
                    id,
                    step_count,
                    tools,
                    first_started,
                    first_step_row,
                ))
            };
            let (key, id, step_count, tools, first_started, first_step_row) =
                read().map_err(|e| self.sql_err(e))?;
            if !keep(id) {
                out.left_out += 1;
                continue;
            }
            let tools = tools.unwrap_or_default();
            let tool_ids = SequenceRow::tool_ids(tools)
                .ok_or_else(|| corrupt(format!("the tool sequence of trace {id} is cut short")))?;
            // Sized by the row, not the counter: a damaged counter must not size an allocation.
            let mut sequence = Vec::with_capacity(tools.len() / SEQUENCE_TOOL_BYTES);
            for tool in tool_ids {
                let index = match interned.get(&tool) {
                    Some(&index) => index,
                    None => {
                        let name = tool_names.remove(&tool).ok_or_else(|| {
                            corrupt(format!(
                                "a step of trace {id} names tool id {tool}, which has no row"
                            ))
                        })?;
                        let index = out.names.len() as u32;
                        out.names.push(name);
                        interned.insert(tool, index);
                        index
                    }
                };
                sequence.push(index);
            }
            if sequence.len() as i64 != step_count {
                return Err(corrupt(format!(
                    "trace {id} counts {step_count} steps but its tool sequence holds {}",
                    sequence.len()
                )));
            }
            out.trace_ids.push(id.to_owned());
            out.sequences.push(sequence);
            out.first_started
                .push(first_started.map(timestamp_from_nanos));
            out.rows.push(first_step_row.map(|first_step_row| StepRows {
                trace_row: key,
                first_step_row,
            }));
        }
        Ok(out)
    }

    fn trace_ids(&self) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT trace_id FROM traces ORDER BY id")
            .map_err(|e| self.sql_err(e))?;
        let rows = stmt
            .query_map([], |row| row.get::<_, String>(0))
            .map_err(|e| self.sql_err(e))?;
        rows.collect::<rusqlite::Result<Vec<String>>>()
            .map_err(|e| self.sql_err(e))
    }

    fn counts(&self) -> Result<StoreCounts> {
        let (traces, steps, failed): (i64, i64, i64) = self
            .conn
            .query_row(
                "SELECT count(*), coalesce(sum(step_count), 0), coalesce(sum(error_count), 0) \
                 FROM traces",
                [],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .map_err(|e| self.sql_err(e))?;
        Ok(StoreCounts {
            traces: u64::try_from(traces).unwrap_or(0),
            steps: u64::try_from(steps).unwrap_or(0),
            failed_steps: u64::try_from(failed).unwrap_or(0),
        })
    }

    fn put_document(&mut self, kind: &str, key: &str, document: &Value) -> Result<()> {
        let now = timestamp_nanos(&chrono::Utc::now()).unwrap_or(0);
        self.conn
            .prepare_cached(
                "INSERT INTO documents (kind, key, json, updated_at) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (kind, key) DO UPDATE SET json = excluded.json, \
                 updated_at = excluded.updated_at",
            )
            .and_then(|mut stmt| stmt.execute(params![kind, key, json_text(document), now]))
            .map_err(|e| self.sql_err(e))?;
        Ok(())
    }

    fn get_document(&self, kind: &str, key: &str) -> Result<Option<Value>> {
        let text: Option<String> = self
            .conn
            .prepare_cached("SELECT json FROM documents WHERE kind = ?1 AND key = ?2")
            .and_then(|mut stmt| stmt.query_row([kind, key], |row| row.get(0)).optional())
            .map_err(|e| self.sql_err(e))?;
        text.map(|text| parse_json(&self.path, &text, || format!("document {kind}/{key}")))
            .transpose()
    }

    fn list_documents(&self, kind: &str) -> Result<Vec<(String, Value)>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT key, json FROM documents WHERE kind = ?1 ORDER BY key")
            .map_err(|e| self.sql_err(e))?;
        let rows = stmt
            .query_map([kind], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
            })
            .map_err(|e| self.sql_err(e))?;
        let mut documents = Vec::new();
        for row in rows {
            let (key, text) = row.map_err(|e| self.sql_err(e))?;
            let value = parse_json(&self.path, &text, || format!("document {kind}/{key}"))?;
            documents.push((key, value));
        }
        Ok(documents)
    }

    fn delete_document(&mut self, kind: &str, key: &str) -> Result<bool> {
        let removed = self
            .conn
            .prepare_cached("DELETE FROM documents WHERE kind = ?1 AND key = ?2")
            .and_then(|mut stmt| stmt.execute([kind, key]))
            .map_err(|e| self.sql_err(e))?;
        Ok(removed > 0)
    }

    fn write_documents(&mut self, clear: &[&str], put: &[(&str, &str, &Value)]) -> Result<()> {
        let now = timestamp_nanos(&chrono::Utc::now()).unwrap_or(0);
        let sql_err = sqlite_error(&self.path);
        let tx = immediate(&mut self.conn, &self.path)?;
        {
            let mut delete = tx
                .prepare_cached("DELETE FROM documents WHERE kind = ?1")
                .map_err(sql_err)?;
            for kind in clear {
                delete.execute([kind]).map_err(sql_err)?;
            }
            let mut insert = tx
                .prepare_cached(
                    "INSERT INTO documents (kind, key, json, updated_at) VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT (kind, key) DO UPDATE SET json = excluded.json, \
                     updated_at = excluded.updated_at",
                )
                .map_err(sql_err)?;
            for (kind, key, document) in put {
                insert
                    .execute(params![kind, key, json_text(document), now])
                    .map_err(sql_err)?;
            }
        }
        tx.commit().map_err(sql_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("t.db")).unwrap();
        (dir, store)
    }

    #[test]
    fn fresh_store_has_current_schema_and_wal() {
        let (_dir, store) = store();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        let mode: String = store
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let fk: i64 = store
            .conn
            .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
            .unwrap();
        assert_eq!(fk, 1);
    }

    #[test]
    fn a_background_checkpoint_folds_the_log_into_the_main_file() {
        let (dir, mut store) = store();
        store.checkpoint_in_background().unwrap();
        let every: i64 = store
            .conn
            .query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0))
            .unwrap();
        assert_eq!(
            every,
            i64::from(WRITER_CHECKPOINT_PAGES),
            "the writer checkpoints only rarely"
        );
        let main = dir.path().join("t.db");
        let before = std::fs::metadata(&main).unwrap().len();
        let steps: Vec<ObservedStep> = (0..2_000)
            .map(|i| ObservedStep::new("t", i, "tool", json!({"text": "x".repeat(1_000)})))
            .collect();
        store
            .append(&[ObservedTrace::new("t", "s")], &steps)
            .unwrap();
        // The writer checkpoints only past 64 MiB of log and stays open, so only the
        // checkpoint thread can move the 2 MB just committed from the log into the main file.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::fs::metadata(&main).unwrap().len() < before + 1_500_000 {
            assert!(
                std::time::Instant::now() < deadline,
                "the main file did not grow"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(store);
        let reopened = SqliteStore::open(&main).unwrap();
        assert_eq!(reopened.get_trace("t").unwrap().unwrap().steps.len(), 2_000);
    }

    #[test]
    fn the_log_stays_bounded_under_a_steady_stream_of_appends() {
        let (dir, mut store) = store();
        store.checkpoint_in_background().unwrap();
        let log = dir.path().join("t.db-wal");
        let bound = u64::from(WRITER_CHECKPOINT_PAGES) * 4096;
        let payload = "x".repeat(100_000);
        store.append(&[ObservedTrace::new("t", "s")], &[]).unwrap();
        // 100 MB in 1 MB commits, back to back: more than the bound, faster than the thread's
        // passive checkpoints can finish while the writer keeps adding frames.
        for batch in 0..100u32 {
            let steps: Vec<ObservedStep> = (0..10)
                .map(|i| ObservedStep::new("t", batch * 10 + i, "tool", json!(payload)))
                .collect();
            store.append(&[], &steps).unwrap();
        }
        let size = std::fs::metadata(&log).unwrap().len();
        assert!(
            size < bound + bound / 4,
            "the log grew to {size} bytes, past about {bound}"
        );
        drop(store);
        let reopened = SqliteStore::open(&dir.path().join("t.db")).unwrap();
        assert_eq!(reopened.get_trace("t").unwrap().unwrap().steps.len(), 1_000);
    }

    #[test]
    fn json_text_is_stored_verbatim() {
        let (_dir, mut store) = store();
        // serde_json keeps number text as parsed (it spells exponents `1e+5`).
        let inputs: Value = serde_json::from_str(r#"{"b":1.0,"a":1e+5,"n":-0}"#).unwrap();
        store
            .append(
                &[ObservedTrace::new("t", "s")],
                &[ObservedStep::new("t", 0, "tool", inputs)],
            )
            .unwrap();
        let text: String = store
            .conn
            .query_row("SELECT inputs FROM steps", [], |r| r.get(0))
            .unwrap();
        assert_eq!(text, r#"{"b":1.0,"a":1e+5,"n":-0}"#);
    }

    #[test]
    fn counters_follow_inserted_steps_only() {
        let (_dir, mut store) = store();
        let mut failed = ObservedStep::new("t", 1, "b", json!({}));
        failed.error_message = Some("boom".into());
        failed.duration_ms = Some(2.5);
        let mut ok = ObservedStep::new("t", 0, "a", json!({}));
        ok.duration_ms = Some(1.0);
        store
            .append(
                &[ObservedTrace::new("t", "s")],
                &[ok.clone(), failed.clone()],
            )
            .unwrap();
        let again = store.append(&[], &[failed]).unwrap();
        assert_eq!(again.duplicate_steps, 1);
        let (steps, errors, duration): (i64, i64, Option<f64>) = store
            .conn
            .query_row(
                "SELECT step_count, error_count, step_duration_ms FROM traces",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!((steps, errors, duration), (2, 1, Some(3.5)));
    }

    /// A step of trace `trace` at `index` calling `tool`, started at `at` seconds when given.
    fn tool_step(trace: &str, index: u32, tool: &str, at: Option<i64>) -> ObservedStep {
        let mut step = ObservedStep::new(trace, index, tool, json!({"i": index}));
        step.started_at = at.and_then(|s| chrono::DateTime::from_timestamp(s, 0));
        step
    }

    /// Traces written the ways appends write them: whole in one batch (`whole`), steps out of
    /// step order in one batch (`shuffled`), a step a batch interleaved with another trace's
    /// (`live-a`, `live-b`), a later step arriving before an earlier one across batches
    /// (`gap`), a trace continued in the next batch's next rows (`continued`), a duplicate
    /// step, and a trace without steps (`empty`).
    fn appended_every_way(store: &mut SqliteStore) {
        let traces: Vec<ObservedTrace> = [
            "whole",
            "shuffled",
            "live-a",
            "live-b",
            "gap",
            "continued",
            "empty",
        ]
        .iter()
        .map(|id| ObservedTrace::new(*id, "test"))
        .collect();
        let mut first = vec![
            tool_step("whole", 0, "search", None),
            tool_step("whole", 1, "get", Some(20)),
            tool_step("whole", 2, "get", Some(10)),
            tool_step("shuffled", 2, "c", Some(3)),
            tool_step("shuffled", 0, "a", None),
            tool_step("shuffled", 1, "b", Some(5)),
            tool_step("live-a", 0, "get", None),
            tool_step("live-b", 0, "search", None),
            tool_step("gap", 2, "late", Some(7)),
        ];
        first.push(first[0].clone());
        first.push(tool_step("continued", 0, "search", None));
        first.push(tool_step("continued", 1, "get", Some(4)));
        store.append(&traces, &first).unwrap();
        store
            .append(
                &[],
                &[
                    tool_step("continued", 2, "search", None),
                    tool_step("live-a", 1, "search", Some(1)),
                    tool_step("live-b", 1, "get", None),
                    tool_step("gap", 0, "early", Some(9)),
                    tool_step("gap", 1, "middle", None),
                ],
            )
            .unwrap();
    }

    #[test]
    fn stored_tool_sequences_agree_with_the_steps_however_they_were_appended() {
        let (_dir, mut store) = store();
        appended_every_way(&mut store);
        let keep = |id: &str| id != "live-b";
        let stored = store.read_tool_sequences(&keep).unwrap();
        let walked = crate::store::tool_sequences_from_walk(&store, &keep).unwrap();
        assert_eq!(
            stored.trace_ids,
            ["whole", "shuffled", "live-a", "gap", "continued", "empty"]
        );
        assert_eq!(stored.trace_ids, walked.trace_ids);
        assert_eq!(stored.names, walked.names);
        assert_eq!(stored.sequences, walked.sequences);
        assert_eq!(stored.first_started, walked.first_started);
        assert_eq!((stored.left_out, walked.left_out), (1, 1));
        let tools: Vec<Vec<&str>> = (0..stored.trace_ids.len())
            .map(|t| stored.tools(t).collect())
            .collect();
        assert_eq!(
            tools,
            [
                vec!["search", "get", "get"],
                vec!["a", "b", "c"],
                vec!["get", "search"],
                vec!["early", "middle", "late"],
                vec!["search", "get", "search"],
                vec![],
            ]
        );
        let seconds: Vec<Option<i64>> = stored
            .first_started
            .iter()
            .map(|at| at.map(|at| at.timestamp()))
            .collect();
        assert_eq!(
            seconds,
            [Some(20), Some(5), Some(1), Some(9), Some(4), None]
        );
        // `whole` and `continued` fill consecutive rows in step order; `shuffled` was inserted
        // 2, 0, 1.
        let placed: Vec<bool> = stored.rows.iter().map(Option::is_some).collect();
        assert_eq!(placed, [true, false, false, false, true, false]);
    }

    #[test]
    fn a_version_2_store_gains_its_tool_sequences_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let before = {
            let mut store = SqliteStore::open(&path).unwrap();
            appended_every_way(&mut store);
            store.read_tool_sequences(&|_| true).unwrap()
        };
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch("DROP TABLE trace_sequences; PRAGMA user_version = 2;")
                .unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        let after = store.read_tool_sequences(&|_| true).unwrap();
        assert_eq!(after, before);
        let rows: i64 = store
            .conn
            .query_row("SELECT count(*) FROM trace_sequences", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 6, "one row per trace with steps");
    }

    #[test]
    fn a_missing_or_cut_sequence_row_is_reported_not_read_as_fewer_steps() {
        let (_dir, mut store) = store();
        appended_every_way(&mut store);
        let key: i64 = store
            .conn
            .query_row("SELECT id FROM traces WHERE trace_id = 'gap'", [], |r| {
                r.get(0)
            })
            .unwrap();
        store
            .conn
            .execute(
                "UPDATE trace_sequences SET tools = substr(tools, 1, 5) WHERE trace_key = ?1",
                [key],
            )
            .unwrap();
        let error = |store: &SqliteStore| {
            store
                .read_tool_sequences(&|_| true)
                .unwrap_err()
                .to_string()
        };
        let err = error(&store);
        assert!(
            err.contains("the tool sequence of trace gap is cut short"),
            "{err}"
        );
        store
            .conn
            .execute("DELETE FROM trace_sequences WHERE trace_key = ?1", [key])
            .unwrap();
        let err = error(&store);
        assert!(
            err.contains("trace gap counts 3 steps but its tool sequence holds 0"),
            "{err}"
        );
        // A damaged counter is reported too, and sizes nothing.
        store
            .conn
            .execute(
                "UPDATE traces SET step_count = ?2 WHERE id = ?1",
                [key, 1_i64 << 50],
            )
            .unwrap();
        let err = error(&store);
        assert!(
            err.contains("trace gap counts 1125899906842624 steps but its tool sequence holds 0"),
            "{err}"
        );
        // A trace the caller leaves out is not read, so its row does not matter.
        assert!(store.read_tool_sequences(&|id| id != "gap").is_ok());
    }
}
