//! The HTTP side of `collect`: one connection, one export request at a time.

use std::convert::Infallible;
use std::io::Read;
use std::sync::Arc;

use bytes::Bytes;
use chainweaver_recorder::otlp::proto::{ExportTracePartialSuccess, ExportTraceServiceResponse};
use chainweaver_recorder::otlp::{self, AssembledTrace, Encoding};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{CONTENT_ENCODING, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};

use super::Shared;
use super::table::Prepared;

/// The path OTLP/HTTP exporters send traces to.
const TRACES_PATH: &str = "/v1/traces";

type Answer = Response<Full<Bytes>>;

/// Serves one connection until the client closes it or the receiver stops (then the request
/// under way, if any, is finished first).
pub(super) async fn serve_connection(
    stream: TcpStream,
    shared: Arc<Shared>,
    mut stopped: watch::Receiver<bool>,
) {
    let service = service_fn(move |request| {
        let shared = Arc::clone(&shared);
        async move { Ok::<_, Infallible>(handle(request, &shared).await) }
    });
    let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        _ = async { stopped.wait_for(|stop| *stop).await.map(|_| ()) } => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}

/// Answers one request.
async fn handle(request: Request<Incoming>, shared: &Arc<Shared>) -> Answer {
    let answer = export(request, shared).await;
    let counters = &shared.counters;
    let counter = match answer.status() {
        StatusCode::OK => &counters.requests,
        StatusCode::TOO_MANY_REQUESTS => &counters.throttled,
        StatusCode::SERVICE_UNAVAILABLE => &counters.failed,
        _ => &counters.refused,
    };
    counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    answer
}

async fn export(request: Request<Incoming>, shared: &Arc<Shared>) -> Answer {
    if request.uri().path() != TRACES_PATH {
        return text(StatusCode::NOT_FOUND, "only /v1/traces is served here");
    }
    if request.method() != Method::POST {
        return text(StatusCode::METHOD_NOT_ALLOWED, "send traces with POST");
    }
    let encoding = match content_type(&request) {
        Ok(encoding) => encoding,
        Err(answer) => return *answer,
    };
    let gzip = match request
        .headers()
        .get(CONTENT_ENCODING)
        .map(HeaderValue::to_str)
    {
        None => false,
        Some(Ok(value)) if value.eq_ignore_ascii_case("identity") => false,
        Some(Ok(value)) if value.eq_ignore_ascii_case("gzip") => true,
        Some(_) => {
            return text(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "content-encoding must be gzip or identity",
            );
        }
    };
    let Ok(reading) = shared.requests.try_acquire() else {
        // Read the body away (without keeping it) so the connection stays usable and the
        // exporter reads the 429 instead of a reset.
        drain(request.into_body(), shared.config.max_body_bytes).await;
        return busy(shared, "too many requests under way");
    };
    let limit = shared.config.max_body_bytes;
    let body = match Limited::new(request.into_body(), limit).collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => {
            return too_large(limit);
        }
        Err(error) => {
            return text(
                StatusCode::BAD_REQUEST,
                &format!("reading the body: {error}"),
            );
        }
    };
    let decoded = tokio::task::spawn_blocking(move || decode(&body, gzip, encoding, limit)).await;
    let (traces, spans, rejected) = match decoded {
        Ok(Ok(decoded)) => decoded,
        Ok(Err(answer)) => return *answer,
        Err(error) => return text(StatusCode::INTERNAL_SERVER_ERROR, &error.to_string()),
    };
    let steps: usize = traces.iter().map(|t| t.steps.len()).sum();
    let queue = shared.config.max_queued_spans;
    if steps > queue {
        return text(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("{steps} tool spans in one request, more than the queue holds ({queue})"),
        );
    }
    let Ok(_queued) = shared
        .queued_spans
        .try_acquire_many(u32::try_from(steps).unwrap_or(u32::MAX))
    else {
        return busy(shared, "the write queue is full");
    };
    let committed = match hand_over(shared, traces).await {
        Ok(committed) => committed,
        Err(answer) => return answer,
    };
    drop(reading);
    let (prepared_ids, duplicates, stored_steps, outcome) = committed.await.unwrap_or_else(|_| {
        (
            Vec::new(),
            0,
            0,
            Err("the writer stopped before answering".into()),
        )
    });
    release(shared, prepared_ids, outcome.is_ok()).await;
    if let Err(message) = outcome {
        return with_retry_after(
            text(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("not stored: {message}"),
            ),
            shared,
        );
    }
    let counters = &shared.counters;
    counters
        .spans
        .fetch_add(spans, std::sync::atomic::Ordering::Relaxed);
    counters
        .steps
        .fetch_add(stored_steps, std::sync::atomic::Ordering::Relaxed);
    counters
        .duplicate_spans
        .fetch_add(duplicates, std::sync::atomic::Ordering::Relaxed);
    counters
        .rejected_spans
        .fetch_add(rejected.len() as u64, std::sync::atomic::Ordering::Relaxed);
    success(encoding, &rejected)
}

/// Reads and drops up to `limit` bytes of a body.
async fn drain(mut body: Incoming, limit: usize) {
    let mut read = 0;
    while let Some(Ok(frame)) = body.frame().await {
        read += frame.data_ref().map_or(0, |data| data.len());
        if read > limit {
            return;
        }
    }
}

/// What a request body holds: its traces, its span count, and the tool spans that could not
/// be read.
type Decoded = (Vec<AssembledTrace>, u64, Vec<otlp::SpanReject>);

fn decode(
    body: &[u8],
    gzip: bool,
    encoding: Encoding,
    limit: usize,
) -> Result<Decoded, Box<Answer>> {
    let inflated;
    let body = if gzip {
        let mut out = Vec::new();
        let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
        if let Err(error) = flate2::read::GzDecoder::new(body)
            .take(cap)
            .read_to_end(&mut out)
        {
            return Err(Box::new(text(
                StatusCode::BAD_REQUEST,
                &format!("not gzip: {error}"),
            )));
        }
        if out.len() > limit {
            return Err(Box::new(too_large(limit)));
        }
        inflated = out;
        &inflated[..]
    } else {
        body
    };
    let request =
        otlp::decode(body, encoding).map_err(|e| Box::new(text(StatusCode::BAD_REQUEST, &e)))?;
    let extracted = otlp::extract(request);
    let (traces, _) = otlp::assemble(extracted.tool_spans);
    Ok((traces, extracted.spans, extracted.rejects))
}

/// What the writer's answer carries back: the trace ids handed over, spans left out as already
/// stored, steps handed over, and whether they are committed.
type Outcome = (Vec<String>, u64, u64, Result<(), String>);

/// Numbers the steps and hands them to the writer; the receiver resolves when they are
/// committed.
async fn hand_over(
    shared: &Arc<Shared>,
    traces: Vec<AssembledTrace>,
) -> Result<oneshot::Receiver<Outcome>, Answer> {
    let worker = Arc::clone(shared);
    // The table reads the store for traces it does not know: off the async threads.
    let handed = tokio::task::spawn_blocking(
        move || -> Result<Option<oneshot::Receiver<Outcome>>, String> {
            let prepared = {
                let mut table = worker
                    .table
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if !table.has_room(&traces) {
                    return Ok(None);
                }
                table.prepare(traces).map_err(|e| e.to_string())?
            };
            let Prepared {
                traces,
                steps,
                duplicate_spans,
            } = prepared;
            let ids: Vec<String> = traces.iter().map(|t| t.trace_id.clone()).collect();
            let count = steps.len() as u64;
            let (answer, committed) = oneshot::channel();
            let handed_ids = ids.clone();
            let submitted = worker.recorder.submit(traces, steps, move |outcome| {
                let _ = answer.send((
                    handed_ids,
                    duplicate_spans,
                    count,
                    outcome.map_err(|e| e.to_string()),
                ));
            });
            if let Err(error) = submitted {
                release_now(&worker, &ids, false);
                return Err(error.to_string());
            }
            Ok(Some(committed))
        },
    )
    .await;
    match handed {
        Ok(Ok(Some(committed))) => Ok(committed),
        Ok(Ok(None)) => Err(busy(shared, "too many traces under way")),
        Ok(Err(message)) => Err(with_retry_after(
            text(StatusCode::SERVICE_UNAVAILABLE, &message),
            shared,
        )),
        Err(error) => Err(text(StatusCode::INTERNAL_SERVER_ERROR, &error.to_string())),
    }
}

async fn release(shared: &Arc<Shared>, ids: Vec<String>, stored: bool) {
    let worker = Arc::clone(shared);
    let _ = tokio::task::spawn_blocking(move || release_now(&worker, &ids, stored)).await;
}

fn release_now(shared: &Shared, ids: &[String], stored: bool) {
    shared
        .table
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .release(ids.iter().map(String::as_str), stored);
}

fn content_type(request: &Request<Incoming>) -> Result<Encoding, Box<Answer>> {
    let value = request
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = value.split(';').next().unwrap_or("").trim();
    if media.eq_ignore_ascii_case("application/x-protobuf")
        || media.eq_ignore_ascii_case("application/protobuf")
    {
        Ok(Encoding::Protobuf)
    } else if media.eq_ignore_ascii_case("application/json") {
        Ok(Encoding::Json)
    } else {
        Err(Box::new(text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "content-type must be application/x-protobuf or application/json",
        )))
    }
}

/// 200 with an `ExportTraceServiceResponse` in the request's encoding, naming rejected spans.
fn success(encoding: Encoding, rejected: &[otlp::SpanReject]) -> Answer {
    let partial = (!rejected.is_empty()).then(|| ExportTracePartialSuccess {
        rejected_spans: i64::try_from(rejected.len()).unwrap_or(i64::MAX),
        error_message: rejected
            .iter()
            .take(5)
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "),
    });
    let (body, media) = match encoding {
        Encoding::Protobuf => (
            otlp::encode_response(&ExportTraceServiceResponse {
                partial_success: partial,
            }),
            "application/x-protobuf",
        ),
        Encoding::Json => {
            let document = match partial {
                Some(p) => serde_json::json!({
                    "partialSuccess": {
                        "rejectedSpans": p.rejected_spans.to_string(),
                        "errorMessage": p.error_message,
                    }
                }),
                None => serde_json::json!({}),
            };
            (document.to_string().into_bytes(), "application/json")
        }
    };
    let mut answer = Response::new(Full::new(Bytes::from(body)));
    answer
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(media));
    answer
}

fn text(status: StatusCode, message: &str) -> Answer {
    let mut answer = Response::new(Full::new(Bytes::from(format!("{message}\n"))));
    *answer.status_mut() = status;
    answer.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    answer
}

fn too_large(limit: usize) -> Answer {
    text(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("the body is over the limit of {limit} bytes"),
    )
}

fn busy(shared: &Shared, why: &str) -> Answer {
    with_retry_after(text(StatusCode::TOO_MANY_REQUESTS, why), shared)
}

fn with_retry_after(mut answer: Answer, shared: &Shared) -> Answer {
    let seconds = shared.config.retry_after.as_secs().max(1);
    if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
        answer.headers_mut().insert(RETRY_AFTER, value);
    }
    answer
}
