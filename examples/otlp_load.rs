//! Load generator for `chainweaver collect`: OTLP JSON export requests of `execute_tool` spans
//! over HTTP/1.1 keep-alive connections, as fast as the receiver answers.
//!
//! Each request holds `--spans` spans (default 1,000): 10 tool calls in each of 100
//! conversations, every conversation and span id new. Bodies are laid out once and only their
//! ids are rewritten per request, so the generator spends little of the machine. A 429 answer
//! is waited out (Retry-After) and the request sent again. Prints the spans acknowledged, the
//! time from the first request to the last answer, spans/s and the 429s seen.
//!
//!     cargo run --release --example otlp_load -- ADDR [TOTAL_SPANS] [CONNECTIONS] [SPANS_PER_REQUEST]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Tool calls per conversation in a request.
const CALLS: usize = 10;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(address) = args.first().cloned() else {
        return Err("usage: otlp_load ADDR [TOTAL_SPANS] [CONNECTIONS] [SPANS_PER_REQUEST]".into());
    };
    let number = |at: usize, default: usize| -> Result<usize, Box<dyn std::error::Error>> {
        Ok(args
            .get(at)
            .map(|a| a.parse())
            .transpose()?
            .unwrap_or(default))
    };
    let total = number(1, 1_000_000)?;
    let connections = number(2, 8)?.max(1);
    let per_request = (number(3, 1000)? / CALLS).max(1) * CALLS;
    let requests = total.div_ceil(per_request);
    let next = Arc::new(AtomicU64::new(0));
    let throttled = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..connections)
        .map(|_| {
            let (address, next, throttled) =
                (address.clone(), Arc::clone(&next), Arc::clone(&throttled));
            std::thread::spawn(move || -> Result<u64, String> {
                let template = Template::new(per_request / CALLS);
                let mut connection = Connection::open(&address)?;
                let mut sent = 0;
                loop {
                    let request = next.fetch_add(1, Ordering::Relaxed);
                    if request >= requests as u64 {
                        return Ok(sent);
                    }
                    let body = template.body(request);
                    loop {
                        match connection.post(&address, &body)? {
                            200 => break,
                            429 => {
                                throttled.fetch_add(1, Ordering::Relaxed);
                                std::thread::sleep(Duration::from_millis(100));
                            }
                            status => return Err(format!("answer {status}")),
                        }
                    }
                    sent += per_request as u64;
                }
            })
        })
        .collect();
    let mut spans = 0;
    for worker in workers {
        spans += worker.join().map_err(|_| "a worker panicked")??;
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{spans} spans in {seconds:.2} s: {:.0} spans/s over {connections} connections, {} per request, {} answered 429",
        spans as f64 / seconds,
        per_request,
        throttled.load(Ordering::Relaxed)
    );
    Ok(())
}

/// One request body with fixed-width placeholders where the ids go.
struct Template {
    body: Vec<u8>,
    /// Offsets of the 32-digit trace ids, 16-digit span ids and 16-digit conversation numbers.
    trace_ids: Vec<usize>,
    span_ids: Vec<usize>,
    conversations: Vec<usize>,
}

const TRACE_MARK: &str = "TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT";
const SPAN_MARK: &str = "SSSSSSSSSSSSSSSS";
const CONVERSATION_MARK: &str = "CCCCCCCCCCCCCCCC";

impl Template {
    fn new(conversations: usize) -> Self {
        let mut spans = Vec::new();
        for c in 0..conversations {
            for n in 0..CALLS {
                let start = 1_800_000_000_000_000_000u64 + (c * CALLS + n) as u64 * 1_000_000;
                spans.push(format!(
                    r#"{{"traceId":"{TRACE_MARK}","spanId":"{SPAN_MARK}","parentSpanId":"00000000000000{c:02x}","name":"execute_tool lookup_order","kind":1,"startTimeUnixNano":"{start}","endTimeUnixNano":"{}","attributes":[{{"key":"gen_ai.operation.name","value":{{"stringValue":"execute_tool"}}}},{{"key":"gen_ai.tool.name","value":{{"stringValue":"lookup_order"}}}},{{"key":"gen_ai.tool.call.id","value":{{"stringValue":"call_{n}"}}}},{{"key":"gen_ai.tool.call.arguments","value":{{"stringValue":"{{\"order_id\": {n}, \"fields\": [\"status\", \"total\"]}}"}}}},{{"key":"gen_ai.tool.call.result","value":{{"stringValue":"{{\"status\": \"shipped\", \"total\": 42.5}}"}}}},{{"key":"gen_ai.conversation.id","value":{{"stringValue":"conv-{CONVERSATION_MARK}"}}}}],"status":{{}}}}"#,
                    start + 700_000
                ));
            }
        }
        let text = format!(
            r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"load"}}}}]}},"scopeSpans":[{{"scope":{{"name":"otlp_load"}},"spans":[{}]}}]}}]}}"#,
            spans.join(",")
        );
        let find = |mark: &str| {
            text.match_indices(mark)
                .map(|(at, _)| at)
                .collect::<Vec<_>>()
        };
        Self {
            trace_ids: find(TRACE_MARK),
            span_ids: find(SPAN_MARK),
            conversations: find(CONVERSATION_MARK),
            body: text.into_bytes(),
        }
    }

    /// Request `request`'s body: new trace, span and conversation ids.
    fn body(&self, request: u64) -> Vec<u8> {
        let mut body = self.body.clone();
        let put = |body: &mut Vec<u8>, at: usize, text: String| {
            body[at..at + text.len()].copy_from_slice(text.as_bytes());
        };
        for (i, &at) in self.trace_ids.iter().enumerate() {
            let conversation = request * 1000 + (i / CALLS) as u64;
            put(&mut body, at, format!("{conversation:032x}"));
        }
        for (i, &at) in self.span_ids.iter().enumerate() {
            put(
                &mut body,
                at,
                format!("{:016x}", request * 100_000 + i as u64),
            );
        }
        for (i, &at) in self.conversations.iter().enumerate() {
            let conversation = request * 1000 + (i / CALLS) as u64;
            put(&mut body, at, format!("{conversation:016x}"));
        }
        body
    }
}

/// A keep-alive HTTP/1.1 connection.
struct Connection {
    reader: BufReader<TcpStream>,
}

impl Connection {
    fn open(address: &str) -> Result<Self, String> {
        let stream = TcpStream::connect(address).map_err(|e| format!("connect {address}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(Self {
            reader: BufReader::new(stream),
        })
    }

    /// Sends one export and reads the answer; returns its status.
    fn post(&mut self, address: &str, body: &[u8]) -> Result<u16, String> {
        let head = format!(
            "POST /v1/traces HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let stream = self.reader.get_mut();
        stream
            .write_all(head.as_bytes())
            .map_err(|e| e.to_string())?;
        stream.write_all(body).map_err(|e| e.to_string())?;
        let mut line = String::new();
        self.reader
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("no status line: {line:?}"))?;
        let mut length = 0;
        loop {
            line.clear();
            self.reader
                .read_line(&mut line)
                .map_err(|e| e.to_string())?;
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = value
                    .trim()
                    .parse()
                    .map_err(|_| format!("bad length {value:?}"))?;
            }
        }
        let mut rest = vec![0; length];
        self.reader
            .read_exact(&mut rest)
            .map_err(|e| e.to_string())?;
        Ok(status)
    }
}
