//! `chainweaver collect`: an OTLP/HTTP trace receiver that stores tool spans as they arrive.
//!
//! Exporters `POST` to `/v1/traces` (protobuf or JSON bodies, optionally gzip-compressed). Each
//! request's tool spans (see [`chainweaver_recorder::otlp`]) are grouped into traces, numbered
//! after what each trace already holds (a [`TraceTable`]) and handed to the same redacting,
//! batching writer as [`TraceRecorder`]. The response goes out only once the writer has
//! committed the request's rows, so an acknowledged span survives a crash of the receiver.
//!
//! Memory is bounded: at most [`CollectConfig::max_requests`] requests are read and decoded at
//! once, a body is at most [`CollectConfig::max_body_bytes`] (also once decompressed), at most
//! [`CollectConfig::max_queued_spans`] spans wait for the writer, and the trace table keeps at
//! most [`CollectConfig::max_tracked_traces`] traces. A request beyond any of these is answered
//! `429 Too Many Requests` with `Retry-After`, which OTLP exporters honour by sending it again.
//!
//! [`collect`] runs until its shutdown future resolves, then stops accepting, lets the requests
//! under way finish (their rows committed and answered), and flushes the writer.

mod http;
mod table;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chainweaver_recorder::capture::{RecorderConfig, TraceRecorder};
use chainweaver_recorder::store::open_store;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use crate::error::{Error, Result};
pub use table::TraceTable;

/// The `source` of traces `collect` stores.
pub const SOURCE: &str = "collect:otlp";

/// How `collect` listens, bounds its memory and writes.
#[derive(Debug, Clone)]
pub struct CollectConfig {
    /// The address to listen on (port 0 picks a free port; see [`Collector::local_addr`]).
    pub listen: SocketAddr,
    /// The store: a SQLite file or a Parquet dataset directory.
    pub store: PathBuf,
    /// Requests read and decoded at once; more are answered 429.
    pub max_requests: usize,
    /// The largest request body, compressed or not.
    pub max_body_bytes: usize,
    /// Spans handed to the writer and not yet committed; a request that would go over is
    /// answered 429.
    pub max_queued_spans: usize,
    /// Traces whose next step index the receiver keeps in memory.
    pub max_tracked_traces: usize,
    /// What a 429 answer tells the exporter to wait.
    pub retry_after: Duration,
    /// The writer: batching, redaction, sampling.
    pub recorder: RecorderConfig,
    /// How long shutdown waits for requests under way.
    pub shutdown_grace: Duration,
}

impl CollectConfig {
    /// Defaults for a receiver on `listen` writing to `store`.
    pub fn new(listen: SocketAddr, store: PathBuf) -> Self {
        Self {
            listen,
            store,
            max_requests: 64,
            max_body_bytes: 16 * 1024 * 1024,
            max_queued_spans: 200_000,
            max_tracked_traces: 100_000,
            retry_after: Duration::from_secs(1),
            recorder: RecorderConfig {
                channel_capacity: 256,
                batch_size: 20_000,
                max_batch_delay: Duration::from_millis(10),
                source: SOURCE.to_owned(),
                ..RecorderConfig::default()
            },
            shutdown_grace: Duration::from_secs(30),
        }
    }
}

/// What a run of the receiver did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CollectReport {
    /// Export requests answered 200.
    pub requests: u64,
    /// Spans in them.
    pub spans: u64,
    /// Tool spans stored as steps.
    pub steps: u64,
    /// Tool spans left out because their trace already held them (a resent request).
    pub duplicate_spans: u64,
    /// Tool spans that could not be read (reported to the exporter as rejected).
    pub rejected_spans: u64,
    /// Requests answered 429.
    pub throttled: u64,
    /// Requests refused as malformed, too large or of an unknown type.
    pub refused: u64,
    /// Requests whose rows the writer could not store (answered 503).
    pub failed: u64,
}

/// Counters behind [`CollectReport`].
#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    spans: AtomicU64,
    steps: AtomicU64,
    duplicate_spans: AtomicU64,
    rejected_spans: AtomicU64,
    throttled: AtomicU64,
    refused: AtomicU64,
    failed: AtomicU64,
}

impl Counters {
    fn report(&self) -> CollectReport {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CollectReport {
            requests: get(&self.requests),
            spans: get(&self.spans),
            steps: get(&self.steps),
            duplicate_spans: get(&self.duplicate_spans),
            rejected_spans: get(&self.rejected_spans),
            throttled: get(&self.throttled),
            refused: get(&self.refused),
            failed: get(&self.failed),
        }
    }
}

/// What every request handler shares.
struct Shared {
    config: CollectConfig,
    recorder: TraceRecorder,
    table: Mutex<TraceTable>,
    /// Permits for requests being read and decoded.
    requests: Semaphore,
    /// Permits for spans waiting for the writer.
    queued_spans: Semaphore,
    counters: Counters,
}

/// A bound receiver, ready to [`Collector::run`].
pub struct Collector {
    listener: TcpListener,
    shared: Arc<Shared>,
}

impl Collector {
    /// Opens the store (the writer and a reader for traces seen before) and binds the address.
    pub async fn bind(config: CollectConfig) -> Result<Self> {
        let recorder = TraceRecorder::open(&config.store, config.recorder.clone())?;
        // The writer has created the store if it was missing; the reader sees its commits.
        let reader = open_store(&config.store)?;
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| Error::Listen {
                address: config.listen.to_string(),
                source,
            })?;
        let shared = Shared {
            table: Mutex::new(TraceTable::new(
                reader,
                config.max_tracked_traces,
                config.recorder.source.clone(),
            )),
            requests: Semaphore::new(config.max_requests.max(1)),
            queued_spans: Semaphore::new(config.max_queued_spans.clamp(1, Semaphore::MAX_PERMITS)),
            recorder,
            counters: Counters::default(),
            config,
        };
        Ok(Self {
            listener,
            shared: Arc::new(shared),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener.local_addr().map_err(|source| Error::Listen {
            address: self.shared.config.listen.to_string(),
            source,
        })
    }

    /// Serves until `shutdown` resolves, then drains and flushes (see the module docs).
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<CollectReport> {
        let (stop, stopped) = watch::channel(false);
        let mut connections = tokio::task::JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                accepted = self.listener.accept() => {
                    // A failed accept (out of descriptors, a reset) concerns one connection.
                    let Ok((stream, _)) = accepted else { continue };
                    let _ = stream.set_nodelay(true);
                    connections.spawn(http::serve_connection(
                        stream,
                        Arc::clone(&self.shared),
                        stopped.clone(),
                    ));
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        drop(self.listener);
        let _ = stop.send(true);
        let grace = self.shared.config.shutdown_grace;
        let _ = tokio::time::timeout(grace, async {
            while connections.join_next().await.is_some() {}
        })
        .await;
        connections.abort_all();
        let shared = Arc::clone(&self.shared);
        tokio::task::spawn_blocking(move || shared.recorder.flush())
            .await
            .map_err(|e| Error::Runtime(format!("the final flush did not finish: {e}")))??;
        Ok(self.shared.counters.report())
    }
}

/// Binds and serves until `shutdown` resolves.
pub async fn collect(
    config: CollectConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<CollectReport> {
    Collector::bind(config).await?.run(shutdown).await
}
