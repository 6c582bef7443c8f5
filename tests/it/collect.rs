//! `chainweaver collect`: live OTLP/HTTP reception, backpressure, durability.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chainweaver::collect::{CollectConfig, Collector};
use chainweaver::recorder::model::otel;
use chainweaver::recorder::otlp::{ReadOptions, read_file};
use chainweaver::recorder::store::{PageRequest, SqliteStore, TraceFilter, TraceStore};
use serde_json::{Value, json};

/// `python3` with the OpenTelemetry SDK and its OTLP exporter, or `None` (skip) on a machine
/// without them; under CI (`CI` set) missing packages fail the test.
fn python_with_opentelemetry() -> Option<&'static str> {
    crate::python_imports("opentelemetry.sdk, opentelemetry.exporter.otlp.proto.http")
        .then_some("python3")
}

fn run_agent(python: &str, args: &[&str]) -> Value {
    run_script(python, "otel_agent.py", args)
}

/// Runs one of `scripts/` with `python` and reads the JSON summary it prints.
fn run_script(python: &str, name: &str, args: &[&str]) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(name);
    let out = Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the script prints its summary")
}

/// A `chainweaver collect` child on a free port; returns it and its address.
fn spawn_collect(dir: &Path, store: &Path) -> (Child, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_chainweaver"))
        .args(["--format", "json", "--store"])
        .arg(store)
        .args(["collect", "--listen", "127.0.0.1:0"])
        .current_dir(dir)
        .env_remove("CHAINWEAVER_STORE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("collect starts");
    let stderr = child.stderr.take().expect("stderr");
    let mut line = String::new();
    BufReader::new(stderr)
        .read_line(&mut line)
        .expect("collect says where it listens");
    let address = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    (child, address)
}

fn terminate(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

/// Every trace of a store, as comparable data: per trace id, its session and its calls.
fn contents(store: &Path) -> BTreeMap<String, (Option<String>, Vec<Value>)> {
    let store = SqliteStore::open(store).unwrap();
    let page = PageRequest {
        limit: 10_000,
        ..PageRequest::default()
    };
    let listed = store.list_traces(&TraceFilter::default(), &page).unwrap();
    listed
        .traces
        .iter()
        .map(|summary| {
            let trace = store.get_trace(&summary.trace.trace_id).unwrap().unwrap();
            let steps = trace
                .steps
                .iter()
                .map(|s| {
                    json!({
                        "index": s.step_index, "tool": s.tool_name, "call_id": s.call_id,
                        "inputs": s.inputs, "outputs": s.outputs, "error_type": s.error_type,
                        "error_message": s.error_message, "has_duration": s.duration_ms.is_some(),
                    })
                })
                .collect();
            (trace.trace.trace_id, (trace.trace.session_id, steps))
        })
        .collect()
}

#[test]
fn spans_sent_live_by_the_python_sdk_and_exported_to_a_file_give_the_same_traces() {
    let Some(python) = python_with_opentelemetry() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.db");
    let (child, address) = spawn_collect(dir.path(), &live);
    let endpoint = format!("http://{address}/v1/traces");
    // Protobuf bodies, gzip-compressed, from the SDK's own OTLP/HTTP exporter.
    let summary = run_agent(
        python,
        &["--endpoint", &endpoint, "--gzip", "--conversations", "6"],
    );
    terminate(&child);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "collect exits cleanly on SIGTERM");
    let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    assert_eq!(report["steps"], summary["calls"]);

    let file = dir.path().join("spans.jsonl");
    let again = run_agent(
        python,
        &["--json", file.to_str().unwrap(), "--conversations", "6"],
    );
    assert_eq!(again, summary, "the agent is deterministic");
    let imported = dir.path().join("file.db");
    let mut store = SqliteStore::open(&imported).unwrap();
    read_file(&file, &ReadOptions::default(), &mut |batch| {
        store.append(&batch.traces, &batch.steps).map(|_| ())
    })
    .unwrap();
    drop(store);

    // `import` detects the export and stores the same.
    let out = crate::chainweaver(
        dir.path(),
        &["--store", "imported.db", "import", file.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("otlp"));

    let from_live = contents(&live);
    let from_file = contents(&imported);
    assert_eq!(from_live.len(), 6);
    assert_eq!(from_live, from_file);
    assert_eq!(contents(&dir.path().join("imported.db")), from_file);
    let calls: usize = from_live.values().map(|(_, steps)| steps.len()).sum();
    assert_eq!(calls as u64, summary["calls"].as_u64().unwrap());
}

/// One OTLP JSON export request with `spans` execute_tool spans of conversation `conversation`.
fn export_body(conversation: &str, request: usize, spans: usize) -> String {
    let trace_id = format!("{request:032x}");
    let span_list: Vec<Value> = (0..spans)
        .map(|n| {
            let start = 1_800_000_000_000_000_000u64 + (request * 1000 + n) as u64 * 1_000_000;
            json!({
                "traceId": trace_id,
                "spanId": format!("{:016x}", request * 1000 + n),
                "name": "execute_tool lookup",
                "kind": 1,
                "startTimeUnixNano": start.to_string(),
                "endTimeUnixNano": (start + 500_000).to_string(),
                "attributes": [
                    {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                    {"key": "gen_ai.tool.name", "value": {"stringValue": "lookup"}},
                    {"key": "gen_ai.tool.call.id", "value": {"stringValue": format!("call-{request}-{n}")}},
                    {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": format!("{{\"n\": {n}}}")}},
                    {"key": "gen_ai.conversation.id", "value": {"stringValue": conversation}},
                ],
                "status": {}
            })
        })
        .collect();
    json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "load"}}]},
        "scopeSpans": [{"scope": {"name": "test"}, "spans": span_list}]
    }]})
    .to_string()
}

/// Sends one request over a fresh connection; returns the status and the Retry-After seconds.
fn post(
    address: SocketAddr,
    content_type: &str,
    encoding: Option<&str>,
    body: &[u8],
) -> (u16, Option<u64>, String) {
    try_post(address, content_type, encoding, body).expect("the receiver answers")
}

/// [`post`], with a transport failure (refused, reset) returned.
fn try_post(
    address: SocketAddr,
    content_type: &str,
    encoding: Option<&str>,
    body: &[u8],
) -> std::io::Result<(u16, Option<u64>, String)> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut head = format!(
        "POST /v1/traces HTTP/1.1\r\nHost: {address}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(encoding) = encoding {
        head.push_str(&format!("Content-Encoding: {encoding}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status in {answer:?}")))?;
    let retry_after = answer
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("retry-after:")
                .map(|v| v.trim().to_owned())
        })
        .and_then(|v| v.parse().ok());
    let body = answer
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    Ok((status, retry_after, body))
}

/// Sends until answered 200, waiting as told by 429 answers and sending again after a
/// transport failure, as exporters do. Returns the 429s seen.
fn post_until_stored(address: SocketAddr, body: &[u8]) -> u32 {
    let mut throttled = 0;
    let mut failures = 0;
    loop {
        let Ok(answer) = try_post(address, "application/json", None, body) else {
            failures += 1;
            assert!(failures < 50, "the receiver keeps failing to answer");
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        match answer {
            (200, _, _) => return throttled,
            (429, retry, _) => {
                throttled += 1;
                assert!(retry.is_some(), "a 429 says when to retry");
                // Spread the retries a little, as exporters' backoff does.
                std::thread::sleep(Duration::from_millis(50 + u64::from(throttled % 7) * 30));
            }
            (status, _, body) => panic!("unexpected {status}: {body}"),
        }
    }
}

fn in_process_collector(
    store: PathBuf,
    tweak: impl FnOnce(&mut CollectConfig),
) -> (
    SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<chainweaver::collect::CollectReport>,
) {
    let mut config = CollectConfig::new("127.0.0.1:0".parse().unwrap(), store);
    tweak(&mut config);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (tell, told) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let collector = Collector::bind(config).await.unwrap();
            tell.send(collector.local_addr().unwrap()).unwrap();
            collector
                .run(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap()
        })
    });
    (told.recv().unwrap(), stop, server)
}

#[test]
fn a_thousand_concurrent_requests_lose_nothing_and_spans_of_one_trace_meet() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("chainweaver.db");
    // A small request limit makes the receiver throttle some of the 1,000.
    let (address, stop, server) = in_process_collector(store.clone(), |c| c.max_requests = 16);
    const REQUESTS: usize = 1000;
    const SPANS: usize = 5;
    const CONVERSATIONS: usize = 50;
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(REQUESTS));
    let clients: Vec<_> = (0..REQUESTS)
        .map(|request| {
            let barrier = std::sync::Arc::clone(&barrier);
            std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || {
                    let body =
                        export_body(&format!("conv-{}", request % CONVERSATIONS), request, SPANS);
                    barrier.wait();
                    post_until_stored(address, body.as_bytes())
                })
                .unwrap()
        })
        .collect();
    let throttled: u32 = clients.into_iter().map(|c| c.join().unwrap()).sum();
    stop.send(()).unwrap();
    let report = server.join().unwrap();
    assert_eq!(report.requests, REQUESTS as u64);
    assert_eq!(report.steps, (REQUESTS * SPANS) as u64);
    assert_eq!(u64::from(throttled), report.throttled);

    let stored = contents(&store);
    assert_eq!(stored.len(), CONVERSATIONS);
    let per_trace = REQUESTS / CONVERSATIONS * SPANS;
    let mut calls = BTreeSet::new();
    for (id, (session, steps)) in &stored {
        assert_eq!(session.as_deref(), Some(id.as_str()));
        assert_eq!(
            steps.len(),
            per_trace,
            "{id}: spans from {} requests in one trace",
            REQUESTS / CONVERSATIONS
        );
        let indices: Vec<u64> = steps.iter().map(|s| s["index"].as_u64().unwrap()).collect();
        assert_eq!(indices, (0..per_trace as u64).collect::<Vec<_>>());
        calls.extend(
            steps
                .iter()
                .map(|s| s["call_id"].as_str().unwrap().to_owned()),
        );
    }
    assert_eq!(calls.len(), REQUESTS * SPANS, "every call stored once");
}

#[test]
fn gzip_json_resends_redaction_and_bad_requests() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("chainweaver.db");
    let (address, stop, server) = in_process_collector(store.clone(), |_| {});
    let secret = "sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c";
    let body = export_body("conv-secret", 1, 3).replace(
        "{\\\"n\\\": 0}",
        &format!("{{\\\"n\\\": 0, \\\"api_key\\\": \\\"{secret}\\\"}}"),
    );
    assert!(body.contains(secret));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(body.as_bytes()).unwrap();
    let compressed = gz.finish().unwrap();
    let (status, _, answer) = post(address, "application/json", Some("gzip"), &compressed);
    assert_eq!((status, answer.trim()), (200, "{}"));
    // An exporter's retry of the same request stores nothing twice.
    let (status, _, _) = post(address, "application/json", None, body.as_bytes());
    assert_eq!(status, 200);

    let (status, _, answer) = post(address, "application/json", None, b"{\"resourceSpans\": 3}");
    assert_eq!(status, 400);
    assert!(answer.contains("not an OTLP JSON trace export"), "{answer}");
    let (status, _, _) = post(address, "text/plain", None, b"hello");
    assert_eq!(status, 415);
    let (status, _, _) = post(address, "application/json", Some("br"), b"{}");
    assert_eq!(status, 415);
    stop.send(()).unwrap();
    let report = server.join().unwrap();
    assert_eq!(
        (report.requests, report.steps, report.duplicate_spans),
        (2, 3, 3)
    );
    assert_eq!(report.refused, 3);

    let stored = contents(&store);
    let (_, steps) = &stored["conv-secret"];
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[0]["inputs"]["api_key"], "[REDACTED]");
    for file in ["chainweaver.db", "chainweaver.db-wal"] {
        let bytes = std::fs::read(dir.path().join(file)).unwrap_or_default();
        assert!(
            !crate::holds_bytes(&bytes, secret),
            "{file} holds the secret"
        );
    }
}

#[test]
fn sigkill_loses_no_acknowledged_span() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("chainweaver.db");
    let (mut child, address) = spawn_collect(dir.path(), &store);
    let acknowledged = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let deadline = Instant::now() + Duration::from_millis(1500);
    let senders: Vec<_> = (0..4)
        .map(|sender| {
            let acknowledged = std::sync::Arc::clone(&acknowledged);
            std::thread::spawn(move || {
                for n in 0.. {
                    let request = sender * 100_000 + n;
                    let body = export_body(&format!("conv-{sender}"), request, 20);
                    let sent = try_post(address, "application/json", None, body.as_bytes());
                    match sent {
                        Ok((200, _, _)) => acknowledged.lock().unwrap().push(request),
                        Ok(_) => {}
                        Err(_) => return, // the receiver is gone
                    }
                    if Instant::now() > deadline + Duration::from_secs(5) {
                        return;
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
    child.kill().unwrap(); // SIGKILL: no flush, no goodbye
    child.wait().unwrap();
    for sender in senders {
        sender.join().unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(
        acknowledged.len() >= 10,
        "only {} requests were answered before the kill",
        acknowledged.len()
    );

    let stored = SqliteStore::open(&store).unwrap();
    let mut span_ids = BTreeSet::new();
    for sender in 0..4 {
        if let Some(trace) = stored.get_trace(&format!("conv-{sender}")).unwrap() {
            for step in trace.steps {
                span_ids.insert(step.metadata[otel::SPAN_ID].as_str().unwrap().to_owned());
            }
        }
    }
    for request in acknowledged {
        for n in 0..20 {
            let span = format!("{:016x}", request * 1000 + n);
            assert!(
                span_ids.contains(&span),
                "acknowledged span {span} of request {request} is lost"
            );
        }
    }
}

/// Real traffic through the receiver: tau-bench retail (shared) as `import` stores it, replayed
/// as GenAI tool spans by the OpenTelemetry SDK's exporter into `collect`, gives every trace
/// with a tool call the same calls: tools, inputs and outputs, in the same order.
#[test]
fn tau_bench_replayed_by_the_python_sdk_into_collect_stores_what_import_stores() {
    let Some(datasets) = crate::shared_datasets() else {
        return;
    };
    let Some(python) = python_with_opentelemetry() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let imported = dir.path().join("imported.db");
    let exported = dir.path().join("imported.jsonl");
    let run = |args: &[&str]| {
        let out = crate::chainweaver(dir.path(), args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let tau = datasets.join("tau-bench-retail");
    let tau = tau.to_str().expect("a UTF-8 datasets path");
    run(&["--quiet", "--store", "imported.db", "import", tau]);
    run(&[
        "--quiet",
        "--store",
        "imported.db",
        "traces",
        "export",
        "-o",
        "imported.jsonl",
    ]);

    let collected = dir.path().join("collected.db");
    let (child, address) = spawn_collect(dir.path(), &collected);
    let endpoint = format!("http://{address}/v1/traces");
    let exported_path = exported.to_str().expect("a UTF-8 temporary path");
    let sent = run_script(python, "otel_replay.py", &[exported_path, &endpoint]);
    terminate(&child);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "collect exits cleanly on SIGTERM");
    let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    assert_eq!(report["steps"], sent["tool_spans"]);
    assert_eq!(report["rejected_spans"], json!(0), "{report}");

    let calls = |store: &Path| -> BTreeMap<String, Vec<Value>> {
        contents(store)
            .into_iter()
            .filter(|(_, (_, steps))| !steps.is_empty())
            .map(|(id, (_, steps))| {
                let calls = steps
                    .iter()
                    .map(|s| json!([s["tool"], s["inputs"], s["outputs"]]))
                    .collect();
                (id, calls)
            })
            .collect()
    };
    let imported_calls = calls(&imported);
    let steps: usize = imported_calls.values().map(Vec::len).sum();
    assert!(steps > 2_000, "tau-bench retail holds thousands of calls");
    assert_eq!(sent["tool_spans"], json!(steps));
    let collected_calls = calls(&collected);
    assert_eq!(collected_calls.len(), imported_calls.len());
    for (id, expected) in &imported_calls {
        assert_eq!(collected_calls.get(id), Some(expected), "trace {id}");
    }
}
