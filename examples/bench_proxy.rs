//! The recording proxy's cost: added latency per `tools/call`, and a lossless relay under load.
//!
//!     bench_proxy latency CALLS STORE -- SERVER ARGS...
//!     bench_proxy lossless CALLS WINDOW STORE TAP_DIR -- SERVER ARGS...
//!
//! `latency` starts the server twice, once directly and once behind `chainweaver record` (the
//! binary next to this example's folder, or `CHAINWEAVER_BIN`), handshakes with both, and then
//! alternates one `tools/call` to each, CALLS times, timing each round trip. It prints one JSON
//! line: the median and p99 of each side and what the proxy adds.
//!
//! `lossless` runs `chainweaver record -- python3 scripts/mcp_tap.py TAP_DIR -- SERVER ARGS...`,
//! keeps WINDOW calls in flight until CALLS were answered, and compares every byte it wrote with
//! what the server received (the tap's `stdin.bin`) and every byte it read with what the server
//! sent (`stdout.bin`); it also checks each answer's id is the next one expected.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: Vec<u8>,
}

impl Peer {
    fn spawn(command: &[String]) -> Self {
        let mut child = Command::new(&command[0])
            .args(&command[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the server starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
        Self {
            child,
            stdin,
            stdout,
            line: Vec::new(),
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
    }

    /// The next line, newline included.
    fn read_line(&mut self) -> &[u8] {
        self.line.clear();
        let n = self.stdout.read_until(b'\n', &mut self.line).unwrap();
        assert!(n > 0, "the server closed its stdout");
        &self.line
    }

    fn answer_to(&mut self, id: u64) {
        loop {
            let line = self.read_line();
            let message: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
            if message.get("id") == Some(&json!(id)) {
                return;
            }
        }
    }

    fn handshake(&mut self) {
        self.send(
            format!(
                "{}\n",
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "bench_proxy", "version": "1"}}})
            )
            .as_bytes(),
        );
        self.answer_to(0);
        self.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    }

    fn close(mut self) {
        drop(self.stdin);
        let mut rest = Vec::new();
        let _ = self.stdout.read_to_end(&mut rest);
        let _ = self.child.wait();
    }
}

fn call(id: u64) -> Vec<u8> {
    format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"text": format!("call {id}")}}})
    )
    .into_bytes()
}

fn chainweaver() -> String {
    std::env::var("CHAINWEAVER_BIN").unwrap_or_else(|_| {
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().and_then(|p| p.parent()).unwrap();
        dir.join("chainweaver").display().to_string()
    })
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn latency(calls: u64, store: &str, server: &[String]) {
    let mut direct = Peer::spawn(server);
    let mut proxied_command = vec![
        chainweaver(),
        "--store".to_owned(),
        store.to_owned(),
        "--quiet".to_owned(),
        "record".to_owned(),
        "--".to_owned(),
    ];
    proxied_command.extend(server.iter().cloned());
    let mut proxied = Peer::spawn(&proxied_command);
    direct.handshake();
    proxied.handshake();
    // Warm both up.
    for id in 1..=200 {
        for peer in [&mut direct, &mut proxied] {
            peer.send(&call(id));
            peer.answer_to(id);
        }
    }
    let mut times = [Vec::new(), Vec::new()];
    for i in 0..calls {
        let id = 1000 + i;
        let request = call(id);
        // Alternate which goes first, so neither always runs on a warmer cache.
        let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            let peer = if side == 0 { &mut direct } else { &mut proxied };
            let started = Instant::now();
            peer.send(&request);
            peer.answer_to(id);
            times[side].push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    direct.close();
    proxied.close();
    for side in &mut times {
        side.sort_by(f64::total_cmp);
    }
    let (d, p) = (&times[0], &times[1]);
    let summary = json!({
        "calls": calls,
        "direct_median_us": round(percentile(d, 0.5)),
        "direct_p99_us": round(percentile(d, 0.99)),
        "proxied_median_us": round(percentile(p, 0.5)),
        "proxied_p99_us": round(percentile(p, 0.99)),
        "added_median_us": round(percentile(p, 0.5) - percentile(d, 0.5)),
        "added_p99_us": round(percentile(p, 0.99) - percentile(d, 0.99)),
    });
    println!("{summary}");
}

fn round(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

fn lossless(calls: u64, window: u64, store: &str, tap: &str, server: &[String]) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut command = vec![
        chainweaver(),
        "--store".to_owned(),
        store.to_owned(),
        "--quiet".to_owned(),
        "record".to_owned(),
        "--".to_owned(),
        "python3".to_owned(),
        root.join("scripts/mcp_tap.py").display().to_string(),
        tap.to_owned(),
        "--".to_owned(),
    ];
    command.extend(server.iter().cloned());
    let started = Instant::now();
    let mut peer = Peer::spawn(&command);
    let mut written = Vec::new();
    let mut read = Vec::new();
    let initialize = format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench_proxy", "version": "1"}}})
    );
    peer.send(initialize.as_bytes());
    written.extend_from_slice(initialize.as_bytes());
    let line = peer.read_line().to_vec();
    read.extend_from_slice(&line);
    let initialized = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
    peer.send(initialized);
    written.extend_from_slice(initialized);

    let mut next_to_send = 1;
    let mut answered = 0;
    let mut out_of_order = 0u64;
    let mut in_flight = std::collections::BTreeSet::new();
    while answered < calls {
        while next_to_send <= calls && in_flight.len() < window as usize {
            let request = call(next_to_send);
            peer.send(&request);
            written.extend_from_slice(&request);
            in_flight.insert(next_to_send);
            next_to_send += 1;
        }
        let line = peer.read_line().to_vec();
        read.extend_from_slice(&line);
        let message: Value = serde_json::from_slice(&line).expect("an answer is JSON");
        let id = message["id"].as_u64().expect("an answer has an id");
        if in_flight.first() != Some(&id) {
            // The server may answer concurrent calls in any order; count it, it is no loss.
            out_of_order += 1;
        }
        assert!(
            in_flight.remove(&id),
            "an answer to {id}, which was not asked"
        );
        let expected = format!("call {id}");
        assert_eq!(message["result"]["content"][0]["text"], json!(expected));
        answered += 1;
    }
    drop(peer.stdin);
    peer.stdout.read_to_end(&mut read).unwrap();
    let status = peer.child.wait().unwrap();
    let elapsed = started.elapsed();
    let server_got = std::fs::read(PathBuf::from(tap).join("stdin.bin")).unwrap();
    let server_sent = std::fs::read(PathBuf::from(tap).join("stdout.bin")).unwrap();
    let summary = json!({
        "calls": calls,
        "window": window,
        "seconds": round(elapsed.as_secs_f64()),
        "calls_per_second": round(calls as f64 / elapsed.as_secs_f64().max(1e-9)),
        "bytes_to_server": written.len(),
        "bytes_to_client": read.len(),
        "to_server_identical": server_got == written,
        "to_client_identical": server_sent == read,
        "answers_not_in_request_order": out_of_order,
        "exit_code": status.code(),
    });
    println!("{summary}");
    assert!(server_got == written && server_sent == read, "bytes differ");
    std::thread::sleep(Duration::from_millis(10));
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let split = args
        .iter()
        .position(|a| a == "--")
        .expect("-- SERVER ARGS...");
    let (head, server) = (&args[..split], &args[split + 1..]);
    match head.first().map(String::as_str) {
        Some("latency") => latency(head[1].parse().unwrap(), &head[2], server),
        Some("lossless") => lossless(
            head[1].parse().unwrap(),
            head[2].parse().unwrap(),
            &head[3],
            &head[4],
            server,
        ),
        _ => panic!("usage: bench_proxy latency|lossless ..."),
    }
}
