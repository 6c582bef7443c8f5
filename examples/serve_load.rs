//! Load driver for MCP servers over stdio: times `tools/call`s of one tool with K calls in
//! flight, so a server's own pace shows (a Python client spends 0.1 to 1.4 ms of its own per
//! call, more than a fast server). Run by `scripts/bench_serve.sh`.
//!
//!     serve_load CALLS CONCURRENCY TOOL -- SERVER_COMMAND ARGS...
//!
//! Starts the server, makes the `initialize` handshake (2025-06-18), sends `{"n": id}` to TOOL
//! CALLS times with at most CONCURRENCY unanswered, and checks every answer: no error, and the
//! result holds the `n` it was given. Prints one JSON object: calls, concurrency, seconds,
//! calls_per_second. Then closes the server's stdin and waits for it to exit (killing it after
//! 5 s), so a wrapper such as `/usr/bin/time` can report on it.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use serde_json::{Value, json};

fn main() -> ExitCode {
    match drive() {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("serve_load: {err}");
            ExitCode::FAILURE
        }
    }
}

fn drive() -> Result<Value, Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: serve_load CALLS CONCURRENCY TOOL -- SERVER_COMMAND ARGS...";
    let (settings, command) = match args.iter().position(|a| a == "--") {
        Some(at) => (&args[..at], &args[at + 1..]),
        None => return Err(usage.into()),
    };
    let [calls, concurrency, tool] = settings else {
        return Err(usage.into());
    };
    let (calls, concurrency): (u64, u64) = (calls.parse()?, concurrency.parse()?);
    let Some((program, program_args)) = command.split_first() else {
        return Err(usage.into());
    };
    let mut server = Command::new(program)
        .args(program_args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let (Some(mut to_server), Some(from_server)) = (server.stdin.take(), server.stdout.take())
    else {
        return Err("the server's pipes could not be opened".into());
    };
    let mut from_server = BufReader::new(from_server);
    let mut send = |message: Value| -> std::io::Result<()> {
        let mut line = serde_json::to_vec(&message)?;
        line.push(b'\n');
        to_server.write_all(&line)?;
        to_server.flush()
    };
    send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "serve-load", "version": "1"}}}))?;
    let mut line = String::new();
    from_server.read_line(&mut line)?;
    if serde_json::from_str::<Value>(&line)?
        .get("result")
        .is_none()
    {
        return Err(format!("initialize failed: {line}").into());
    }
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;

    // The reader hands a slot back for each answer; the writer waits for one before each call.
    let (slots, free) = mpsc::channel::<()>();
    let reader = std::thread::spawn(move || -> Result<(), String> {
        let mut answered = 0;
        let mut line = String::new();
        while answered < calls {
            line.clear();
            match from_server.read_line(&mut line) {
                Ok(0) => return Err(format!("the server closed after {answered} answers")),
                Ok(_) => {}
                Err(err) => return Err(err.to_string()),
            }
            let message: Value = serde_json::from_str(&line).map_err(|err| err.to_string())?;
            let Some(id) = message.get("id").and_then(Value::as_u64) else {
                continue; // a notification
            };
            let result = message.get("result");
            let holds_n = result.is_some_and(|r| holds(r, id));
            let failed = result
                .and_then(|r| r.get("isError"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if message.get("error").is_some() || failed || !holds_n {
                return Err(format!("wrong answer to call {id}: {}", line.trim()));
            }
            answered += 1;
            let _ = slots.send(());
        }
        Ok(())
    });
    let started = Instant::now();
    let mut unsent = None;
    for n in 1..=calls {
        // No slot: the reader stopped, and its join below says why.
        if n > concurrency && free.recv().is_err() {
            break;
        }
        let call = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                          "params": {"name": tool, "arguments": {"n": n}}});
        if let Err(err) = send(call) {
            unsent = Some(err);
            break;
        }
    }
    reader.join().map_err(|_| "the reader panicked")??;
    if let Some(err) = unsent {
        return Err(err.into());
    }
    let seconds = started.elapsed().as_secs_f64();
    // Closing stdin ends a stdio server; one that lingers is killed.
    drop(to_server);
    let deadline = Instant::now() + std::time::Duration::from_secs(5);
    while server.try_wait()?.is_none() {
        if Instant::now() > deadline {
            let _ = server.kill();
            let _ = server.wait();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Ok(
        json!({"calls": calls, "concurrency": concurrency, "seconds": (seconds * 1000.0).round() / 1000.0,
              "calls_per_second": (calls as f64 / seconds * 10.0).round() / 10.0}),
    )
}

/// Whether a call's result holds the `n` it was given, however the server shapes it (a
/// structured `{"n": 5}`, JSON inside a text block, or an echo's `n=5`).
fn holds(result: &Value, n: u64) -> bool {
    let text: String = result
        .to_string()
        .chars()
        .filter(|c| !matches!(c, '"' | '\\' | ' '))
        .collect();
    [format!("n:{n}"), format!("n={n}")].iter().any(|wanted| {
        text.match_indices(wanted.as_str())
            .any(|(at, _)| !text[at + wanted.len()..].starts_with(|c: char| c.is_ascii_digit()))
    })
}
