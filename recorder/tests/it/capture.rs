//! The TraceRecorder against the real SQLite store: concurrency, redaction on disk, and
//! durability of acknowledged flushes when the recording process is killed.

// The helpers below are test code too: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chainweaver_recorder::Result;
use chainweaver_recorder::capture::{
    RecorderConfig, StepBuilder, TraceHandle, TraceOptions, TraceRecorder,
};
use chainweaver_recorder::model::{ObservedStep, ObservedTrace, TraceWithSteps};
use chainweaver_recorder::store::{
    AppendStats, PageRequest, SqliteStore, StepColumns, StoreCounts, TraceFilter, TracePage,
    TraceStore,
};
use serde_json::{Value, json};

fn sqlite_recorder(path: &Path, config: RecorderConfig) -> TraceRecorder {
    TraceRecorder::new(Box::new(SqliteStore::open(path).unwrap()), config).unwrap()
}

fn integrity_check(path: &Path) -> String {
    let connection = rusqlite::Connection::open(path).unwrap();
    connection
        .query_row("PRAGMA integrity_check", [], |row| row.get::<_, String>(0))
        .unwrap()
}

fn stored_steps(store: &SqliteStore, trace_id: &str) -> Vec<ObservedStep> {
    store
        .get_trace(trace_id)
        .unwrap()
        .unwrap_or_else(|| panic!("trace {trace_id} is not in the store"))
        .steps
}

#[test]
fn many_threads_record_concurrently_into_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chainweaver.db");
    let recorder = sqlite_recorder(
        &path,
        RecorderConfig {
            channel_capacity: 64,
            batch_size: 100,
            ..RecorderConfig::default()
        },
    );
    let threads = 8;
    let traces_per_thread = 4;
    let steps_per_trace = 60;
    let shared_steps_per_thread = 40;
    let shared = recorder
        .start_trace(TraceOptions::new().trace_id("shared").agent("many"))
        .unwrap();

    std::thread::scope(|scope| {
        for thread in 0..threads {
            let recorder = recorder.clone();
            let shared = shared.clone();
            scope.spawn(move || {
                let traces: Vec<TraceHandle> = (0..traces_per_thread)
                    .map(|n| {
                        recorder
                            .start_trace(
                                TraceOptions::new()
                                    .trace_id(format!("t{thread}-{n}"))
                                    .session_id(format!("thread-{thread}")),
                            )
                            .unwrap()
                    })
                    .collect();
                // Interleave the traces of this thread and the shared trace.
                for seq in 0..steps_per_trace {
                    for (n, trace) in traces.iter().enumerate() {
                        let inputs = json!({"thread": thread, "trace": n, "seq": seq});
                        let index = match seq % 3 {
                            0 => trace
                                .record_step(StepBuilder::new("lookup", inputs).outputs(json!(seq)))
                                .unwrap(),
                            1 => {
                                let guard = trace.begin_step("update", inputs);
                                let index = guard.index().unwrap();
                                guard.finish(json!({"ok": true})).unwrap();
                                index
                            }
                            _ => {
                                let result: Result<Value, String> =
                                    trace.call("fail_sometimes", inputs, |i| {
                                        if i["seq"].as_u64().unwrap() % 2 == 0 {
                                            Err("even".into())
                                        } else {
                                            Ok(json!("odd"))
                                        }
                                    });
                                let _ = result;
                                seq as u32
                            }
                        };
                        assert_eq!(index, seq as u32);
                    }
                    if seq < shared_steps_per_thread {
                        shared
                            .record_step(StepBuilder::new(
                                "shared_tool",
                                json!({"thread": thread, "seq": seq}),
                            ))
                            .unwrap();
                    }
                }
                for trace in traces {
                    trace.end_trace().unwrap();
                }
            });
        }
    });
    recorder.flush().unwrap();

    // Read through a second connection while the recorder is still open: flush is durable.
    let reader = SqliteStore::open(&path).unwrap();
    for thread in 0..threads {
        for n in 0..traces_per_thread {
            let id = format!("t{thread}-{n}");
            let stored = reader.get_trace(&id).unwrap().unwrap();
            assert_eq!(
                stored.trace.session_id.as_deref(),
                Some(format!("thread-{thread}").as_str())
            );
            assert!(stored.trace.ended_at.is_some(), "{id} has no end");
            assert_eq!(stored.steps.len(), steps_per_trace, "{id}");
            for (seq, step) in stored.steps.iter().enumerate() {
                assert_eq!(step.step_index as usize, seq, "{id}");
                assert_eq!(
                    step.inputs,
                    json!({"thread": thread, "trace": n, "seq": seq}),
                    "{id}"
                );
                let expected_tool = ["lookup", "update", "fail_sometimes"][seq % 3];
                assert_eq!(step.tool_name, expected_tool);
                let should_fail = seq % 3 == 2 && seq % 2 == 0;
                assert_eq!(step.is_error(), should_fail, "{id} step {seq}");
            }
        }
    }
    // The shared trace: every step once, indices 0..n without gaps, each thread's steps in the
    // order it recorded them.
    let steps = stored_steps(&reader, "shared");
    assert_eq!(steps.len(), threads * shared_steps_per_thread);
    let mut last_seq: HashMap<u64, u64> = HashMap::new();
    for (i, step) in steps.iter().enumerate() {
        assert_eq!(step.step_index as usize, i);
        let thread = step.inputs["thread"].as_u64().unwrap();
        let seq = step.inputs["seq"].as_u64().unwrap();
        if let Some(previous) = last_seq.insert(thread, seq) {
            assert_eq!(seq, previous + 1, "thread {thread}");
        }
    }
    let total = threads * (traces_per_thread * steps_per_trace + shared_steps_per_thread);
    assert_eq!(reader.counts().unwrap().steps, total as u64);
    let stats = recorder.stats();
    assert_eq!(stats.steps_recorded, total as u64);
    assert_eq!(stats.steps_committed, total as u64);
    assert!(stats.batches_committed >= (total / 100) as u64);
    drop(recorder);
    drop(shared);
    assert_eq!(integrity_check(&path), "ok");
}

#[test]
fn dropping_the_recorder_without_a_flush_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chainweaver.db");
    {
        let recorder = sqlite_recorder(
            &path,
            RecorderConfig {
                max_batch_delay: Duration::from_secs(3600),
                batch_size: 1_000_000,
                ..RecorderConfig::default()
            },
        );
        let trace = recorder
            .start_trace(TraceOptions::new().trace_id("unflushed"))
            .unwrap();
        for n in 0..1000 {
            trace
                .record_step(StepBuilder::new("x", json!({"n": n})))
                .unwrap();
        }
        // Neither the batch size nor the delay has been reached: nothing is committed yet.
        let before = SqliteStore::open(&path).unwrap();
        assert!(before.get_trace("unflushed").unwrap().is_none());
    }
    assert_eq!(integrity_check(&path), "ok");
    let stored = SqliteStore::open(&path)
        .unwrap()
        .get_trace("unflushed")
        .unwrap()
        .unwrap();
    assert_eq!(stored.steps.len(), 1000);
    assert!(stored.trace.ended_at.is_some());
    for (n, step) in stored.steps.iter().enumerate() {
        assert_eq!(step.inputs, json!({"n": n}));
    }
}

#[test]
fn steps_sqlite_rejects_are_dropped_alone_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chainweaver.db");
    let recorder = sqlite_recorder(&path, RecorderConfig::default());
    let trace = recorder
        .start_trace(TraceOptions::new().trace_id("mixed"))
        .unwrap();
    let far_future = "2300-01-01T00:00:00Z".parse().unwrap();
    trace
        .record_step(StepBuilder::new("good", json!({"n": 0})))
        .unwrap();
    // Beyond what the store's 64-bit nanosecond timestamps hold.
    trace
        .record_step(StepBuilder::new("bad_time", json!({"n": 1})).started_at(far_future))
        .unwrap();
    trace
        .record_step(StepBuilder::new("good", json!({"n": 2})))
        .unwrap();
    trace
        .record_step(StepBuilder::new("bad_duration", json!({"n": 3})).duration_ms(f64::NAN))
        .unwrap();
    trace
        .record_step(StepBuilder::new("good", json!({"n": 4})))
        .unwrap();
    let error = recorder.flush().unwrap_err();
    match &error {
        chainweaver_recorder::RecorderError::BatchDiscarded { steps, source, .. } => {
            assert_eq!(*steps, 1);
            assert!(
                matches!(
                    **source,
                    chainweaver_recorder::RecorderError::InvalidStep { step_index: 1, .. }
                ),
                "{source}"
            );
        }
        other => panic!("expected BatchDiscarded, got {other}"),
    }
    // Reported once; the recorder goes on working.
    trace
        .record_step(StepBuilder::new("good", json!({"n": 5})))
        .unwrap();
    recorder.flush().unwrap();
    let stored = stored_steps(&SqliteStore::open(&path).unwrap(), "mixed");
    let kept: Vec<u32> = stored.iter().map(|s| s.step_index).collect();
    assert_eq!(kept, vec![0, 2, 4, 5]);
    assert!(stored.iter().all(|s| s.tool_name == "good"));
    let stats = recorder.stats();
    assert_eq!(stats.steps_discarded, 2);
    assert_eq!(stats.steps_committed, 4);
}

/// Every byte of every file in `dir` (the database, its WAL and journal files).
fn all_bytes(dir: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::File::open(&path)
                .unwrap()
                .read_to_end(&mut bytes)
                .unwrap();
        }
    }
    bytes
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

#[test]
fn redaction_reaches_the_sqlite_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chainweaver.db");
    let secrets = [
        "hunter2-password",
        "refresh-rt-777",
        "xapikey-value-555",
        "sk-abcdefghijklmnopqrstuvwxyz012345",
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbm4ifQ.c2lnbmF0dXJlLXNlY3JldA",
        "bearer-token-abc123",
        "cookie-session-999",
        "meta-secret-321",
    ];
    {
        let recorder = sqlite_recorder(&path, RecorderConfig::default());
        let trace = recorder
            .start_trace(
                TraceOptions::new()
                    .trace_id("secret-trace")
                    .metadata("client_secret", json!(secrets[9])),
            )
            .unwrap();
        trace
            .record_step(
                StepBuilder::new(
                    "login",
                    json!({
                        "user": "ann",
                        "Password": secrets[0],
                        "auth": {"refresh_token": secrets[1], "headers": {"X-Api-Key": secrets[2]}},
                        "note": format!("use {} or {}", secrets[3], secrets[4])
                    }),
                )
                .outputs(json!({
                    "items": [{"text": format!("token {}", secrets[5])}, {"jwt": secrets[6]}],
                    "count": 2
                }))
                .metadata("Set-Cookie", json!(secrets[8])),
            )
            .unwrap();
        let failed: Result<Value, String> =
            trace.call("fetch", json!({"url": "https://x"}), |_| {
                Err(format!("401 with Authorization: Bearer {}", secrets[7]))
            });
        assert!(failed.is_err());
        trace.end_trace().unwrap();
        recorder.flush().unwrap();

        // Read back through the store: everything but the secrets is there.
        let stored = SqliteStore::open(&path)
            .unwrap()
            .get_trace("secret-trace")
            .unwrap()
            .unwrap();
        let login = &stored.steps[0];
        assert_eq!(login.inputs["user"], json!("ann"));
        assert_eq!(login.inputs["Password"], json!("[REDACTED]"));
        assert_eq!(
            login.inputs["auth"],
            json!({"refresh_token": "[REDACTED]", "headers": {"X-Api-Key": "[REDACTED]"}})
        );
        assert_eq!(login.inputs["note"], json!("use [REDACTED] or [REDACTED]"));
        assert_eq!(login.outputs.as_ref().unwrap()["count"], json!(2));
        assert_eq!(
            stored.steps[1].error_message.as_deref(),
            Some("401 with Authorization: Bearer [REDACTED]")
        );
        assert_eq!(stored.trace.metadata["client_secret"], json!("[REDACTED]"));
    }
    // The recorder is closed: no secret is anywhere in the files SQLite wrote.
    let bytes = all_bytes(dir.path());
    assert!(
        contains(&bytes, "[REDACTED]"),
        "nothing redacted was stored"
    );
    assert!(contains(&bytes, "secret-trace"));
    for secret in secrets {
        assert!(
            !contains(&bytes, secret),
            "{secret} reached the SQLite files"
        );
    }
    // And through SQL: no text column of any table holds one.
    let connection = rusqlite::Connection::open(&path).unwrap();
    let tables: Vec<String> = connection
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut cells = 0;
    for table in tables {
        let mut statement = connection
            .prepare(&format!("SELECT * FROM \"{table}\""))
            .unwrap();
        let columns = statement.column_count();
        let mut rows = statement.query([]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            for column in 0..columns {
                let text = match row.get_ref(column).unwrap() {
                    rusqlite::types::ValueRef::Text(t) | rusqlite::types::ValueRef::Blob(t) => {
                        String::from_utf8_lossy(t).into_owned()
                    }
                    _ => continue,
                };
                cells += 1;
                for secret in secrets {
                    assert!(!text.contains(secret), "{secret} found in table {table}");
                }
            }
        }
    }
    assert!(cells > 0);
}

/// Set in the child process of the kill test: the database it records into.
const KILL_CHILD_DB: &str = "CHAINWEAVER_CAPTURE_KILL_CHILD_DB";

/// The trace whose flushed steps the child reports.
const FLUSHED_TRACE: &str = "flushed";
/// A trace a second thread records into without flushing, so the writer is always busy.
const BACKGROUND_TRACE: &str = "background";

/// The real SQLite store on a slow disk: every append waits first. This widens the window in
/// which a flush acknowledged too early (before its commit) would be caught by the kill.
struct SlowSqlite {
    inner: SqliteStore,
    delay: Duration,
}

impl TraceStore for SlowSqlite {
    fn append(&mut self, traces: &[ObservedTrace], steps: &[ObservedStep]) -> Result<AppendStats> {
        std::thread::sleep(self.delay);
        self.inner.append(traces, steps)
    }
    fn list_traces(&self, filter: &TraceFilter, page: &PageRequest) -> Result<TracePage> {
        self.inner.list_traces(filter, page)
    }
    fn get_trace(&self, trace_id: &str) -> Result<Option<TraceWithSteps>> {
        self.inner.get_trace(trace_id)
    }
    fn for_each_trace(&self, visit: &mut dyn FnMut(TraceWithSteps) -> Result<()>) -> Result<()> {
        self.inner.for_each_trace(visit)
    }
    fn step_columns(&self, filter: &TraceFilter) -> Result<StepColumns> {
        self.inner.step_columns(filter)
    }
    fn counts(&self) -> Result<StoreCounts> {
        self.inner.counts()
    }
    fn put_document(&mut self, kind: &str, key: &str, document: &Value) -> Result<()> {
        self.inner.put_document(kind, key, document)
    }
    fn get_document(&self, kind: &str, key: &str) -> Result<Option<Value>> {
        self.inner.get_document(kind, key)
    }
    fn list_documents(&self, kind: &str) -> Result<Vec<(String, Value)>> {
        self.inner.list_documents(kind)
    }
    fn delete_document(&mut self, kind: &str, key: &str) -> Result<bool> {
        self.inner.delete_document(kind, key)
    }
}

/// The child's side: record forever (until killed), printing after each acknowledged flush how
/// many steps of [`FLUSHED_TRACE`] are committed.
#[allow(clippy::print_stdout)]
fn record_until_killed(path: &Path) {
    let store = SlowSqlite {
        inner: SqliteStore::open(path).unwrap(),
        delay: Duration::from_millis(40),
    };
    let recorder = TraceRecorder::new(
        Box::new(store),
        RecorderConfig {
            batch_size: 128,
            max_batch_delay: Duration::from_millis(5),
            ..RecorderConfig::default()
        },
    )
    .unwrap();
    let background = recorder
        .start_trace(TraceOptions::new().trace_id(BACKGROUND_TRACE))
        .unwrap();
    let flushed = recorder
        .start_trace(TraceOptions::new().trace_id(FLUSHED_TRACE))
        .unwrap();
    let give_up = Instant::now() + Duration::from_secs(120);
    std::thread::spawn(move || {
        let mut n = 0u64;
        // About a thousand steps a second: the writer is busy, but flushes do not queue behind
        // a backlog.
        while Instant::now() < give_up {
            for _ in 0..10 {
                background
                    .record_step(StepBuilder::new(
                        "noise",
                        json!({"n": n, "pad": "y".repeat(300)}),
                    ))
                    .unwrap();
                n += 1;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let stdout = std::io::stdout();
    let mut committed = 0u64;
    while Instant::now() < give_up {
        for _ in 0..25 {
            flushed
                .record_step(StepBuilder::new(
                    "work",
                    json!({"n": committed, "pad": "x".repeat(200)}),
                ))
                .unwrap();
            committed += 1;
        }
        recorder.flush().unwrap();
        let mut out = stdout.lock();
        if writeln!(out, "committed {committed}")
            .and_then(|()| out.flush())
            .is_err()
        {
            return; // The parent is gone.
        }
    }
}

/// Kills the child if the test fails before it does.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The committed step indices of a trace must be 0..n: batches are stored whole and in order.
fn assert_prefix(steps: &[ObservedStep], trace_id: &str) {
    for (i, step) in steps.iter().enumerate() {
        assert_eq!(
            step.step_index as usize, i,
            "{trace_id}: gap before step {i}"
        );
        assert_eq!(step.trace_id, trace_id);
    }
}

#[test]
fn acknowledged_steps_survive_a_sigkill() {
    if let Some(db) = std::env::var_os(KILL_CHILD_DB) {
        record_until_killed(Path::new(&db));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("killed.db");
    // The child is this test binary running only this test, in the recording role.
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "capture::acknowledged_steps_survive_a_sigkill",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(KILL_CHILD_DB, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let stdout = child.0.stdout.take().unwrap();
    let mut stderr = child.0.stderr.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();

    let parse = |line: &str| {
        line.strip_prefix("committed ")
            .map(|n| n.parse::<u64>().unwrap())
    };
    let mut acknowledged = 0u64;
    let mut flushes_seen = 0;
    while flushes_seen < 20 {
        let Some(line) = lines.next() else {
            let mut errors = String::new();
            let _ = stderr.read_to_string(&mut errors);
            panic!("the child stopped after {flushes_seen} flushes:\n{errors}");
        };
        if let Some(n) = parse(&line.unwrap()) {
            assert!(n > acknowledged);
            acknowledged = n;
            flushes_seen += 1;
        }
    }
    // Mid-loop: the child is recording and committing as fast as it can.
    child.0.kill().unwrap();
    let status = child.0.wait().unwrap();
    assert!(!status.success(), "the child ended on its own: {status}");
    // Lines already in the pipe were printed before the kill: those flushes were acknowledged.
    for line in lines {
        if let Some(n) = parse(&line.unwrap()) {
            acknowledged = acknowledged.max(n);
        }
    }

    assert_eq!(integrity_check(&path), "ok");
    let store = SqliteStore::open(&path).unwrap();
    let flushed = stored_steps(&store, FLUSHED_TRACE);
    assert!(
        flushed.len() as u64 >= acknowledged,
        "{} steps stored, {acknowledged} acknowledged",
        flushed.len()
    );
    assert_prefix(&flushed, FLUSHED_TRACE);
    for step in &flushed {
        assert_eq!(step.inputs["n"], json!(step.step_index));
        assert_eq!(step.tool_name, "work");
    }
    let background = store
        .get_trace(BACKGROUND_TRACE)
        .unwrap()
        .map(|t| t.steps)
        .unwrap_or_default();
    assert_prefix(&background, BACKGROUND_TRACE);
}
